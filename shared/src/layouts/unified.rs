//! `unified`: Sentry's layout (symsorter writes it, symbolicator reads it):
//! `<id[0..2]>/<id[2..]>/<executable|debuginfo|breakpad>`, plus a `.meta` sidecar.

use super::{is_debug_file, Layout, Name, Sidecar};
use crate::formats::Format;
use crate::identity::Identity;

/// The unified ids: lowercase Breakpad id for PE/PDB/Portable PDB (the real age or stamp,
/// never ffffffff), the code id for ELF/Mach-O/WASM (and, for WASM, the raw build-id payload
/// where it differs). A Breakpad file goes under the id of the module it describes, as
/// symbolicator requests it (KEYS.md §4): Windows modules by Breakpad id, ELF platforms by the
/// `INFO CODE_ID`, macOS/iOS by the UUID without age; and also by its Breakpad id (what
/// symsorter writes).
fn unified_ids(id: &Identity) -> Vec<String> {
    let breakpad_id =
        || (!id.debug_id.is_nil()).then(|| id.debug_id.breakpad().to_string().to_ascii_lowercase());
    match id.format {
        Format::Pe | Format::Pdb | Format::PortablePdb => breakpad_id().into_iter().collect(),
        Format::Breakpad => {
            let os = id.os.as_deref().unwrap_or("").to_ascii_lowercase();
            let module_id = match os.as_str() {
                "windows" => None,
                "mac" | "ios" => (!id.debug_id.is_nil())
                    .then(|| id.debug_id.uuid().simple().to_string().to_ascii_lowercase()),
                _ => id.code_id.as_ref().map(|c| c.as_str().to_ascii_lowercase()),
            };
            module_id.into_iter().chain(breakpad_id()).collect()
        }
        Format::Elf | Format::Macho => id
            .code_id
            .as_ref()
            .map(|c| c.as_str().to_string())
            .into_iter()
            .collect(),
        Format::Wasm => id
            .code_id
            .as_ref()
            .map(|c| c.as_str().to_string())
            .into_iter()
            .chain(id.build_id_payload.clone())
            .collect(),
        // A source bundle is requested under the id of the module it belongs to, whose kind
        // it does not record: the code id (ELF, Mach-O), the Breakpad id (PE), and for a
        // Mach-O module without a code id its UUID.
        Format::SourceBundle => {
            let code_id = id.code_id.as_ref().map(|c| c.as_str().to_ascii_lowercase());
            let uuid = (code_id.is_none() && !id.debug_id.is_nil() && id.debug_id.appendix() == 0)
                .then(|| id.debug_id.uuid().simple().to_string());
            code_id
                .into_iter()
                .chain(breakpad_id())
                .chain(uuid)
                .collect()
        }
        // Sentry reads no PDZ; a DWARF package has no id of its own.
        Format::Pdz | Format::Perfmap | Format::Source | Format::Dwp => Vec::new(),
    }
}

fn file_types(id: &Identity) -> Vec<&'static str> {
    match id.format {
        Format::Pe => vec!["executable"],
        Format::Pdb | Format::PortablePdb => vec!["debuginfo"],
        Format::Breakpad => vec!["breakpad"],
        Format::Elf | Format::Macho | Format::Wasm => {
            let mut types = Vec::new();
            if id.kind.is_binary() {
                types.push("executable");
            }
            if is_debug_file(id) {
                types.push("debuginfo");
            }
            types
        }
        Format::SourceBundle => vec!["sourcebundle"],
        Format::Pdz | Format::Perfmap | Format::Source | Format::Dwp => Vec::new(),
    }
}

pub fn keys(id: &Identity) -> Vec<String> {
    let mut keys = Vec::new();
    for uid in unified_ids(id).into_iter().filter(|u| u.len() > 2) {
        for t in file_types(id) {
            let key = format!("{}/{}/{t}", &uid[..2], &uid[2..]);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// The `.meta` objects symsorter writes beside each key: name, arch and file format.
pub fn sidecars(id: &Identity, name: Option<&Name<'_>>, keys: &[String]) -> Vec<Sidecar> {
    // Serialized from a struct, its fields in the order `json!`'s sorted map wrote them (one
    // allocation a sidecar; the map took one a field, for every artifact `keys` shows).
    #[derive(serde::Serialize)]
    struct Meta<'a> {
        arch: crate::Arch,
        file_format: &'a str,
        name: Option<&'a str>,
    }
    let meta = Meta {
        arch: id.arch,
        file_format: id.format.as_str(),
        name: name.map(Name::as_given),
    };
    // Serializing a struct of a string, a name and an enum into memory does not fail.
    let content = serde_json::to_string(&meta).unwrap_or_default();
    keys.iter()
        .map(|k| Sidecar {
            layout: Layout::Unified,
            key: format!("{k}.meta"),
            content: content.clone(),
            describes: k.clone(),
        })
        .collect()
}

/// The key of the file a unified `.meta` sidecar describes, when `key` is one (under any
/// prefix): `<prefix>xx/yyyy…/<type>.meta` → `<prefix>xx/yyyy…/<type>`.
pub fn described_by_sidecar(key: &str) -> Option<&str> {
    let file = key.strip_suffix(".meta")?;
    let start = file.rmatch_indices('/').nth(2).map_or(0, |(at, _)| at + 1);
    super::grammar::is_valid_key(Layout::Unified, &key[start..]).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{breakpad_sym, elf, macho, pdb, pe, portable_pdb, ID20};

    use super::{described_by_sidecar, keys, sidecars};
    use crate::identity::Kind;
    use crate::layouts::Name;
    use crate::{Format, Identity};
    use serde_json::json;

    #[test]
    fn a_sidecar_key_names_the_file_it_describes() {
        let described = described_by_sidecar;
        assert_eq!(
            described("unified/ab/cdef/debuginfo.meta"),
            Some("unified/ab/cdef/debuginfo")
        );
        assert_eq!(described("ab/cdef/breakpad.meta"), Some("ab/cdef/breakpad"));
        assert_eq!(described("ab/cdef/breakpad"), None, "not a sidecar");
        // A `.meta` that is a file of another layout (SSQP, debuginfod sources).
        assert_eq!(described("foo.meta/ABCDEF1/foo.meta"), None);
        assert_eq!(described("buildid/ab/source/src/x.meta"), None);
        assert_eq!(described("ab/cdef/notatype.meta"), None);
    }

    #[test]
    fn pdb_and_pe_use_the_breakpad_id() {
        assert_eq!(
            keys(&pdb(1)),
            ["49/7b72f6390a44fc878e5a2d63b6cc4b1/debuginfo"]
        );
        assert_eq!(
            keys(&pdb(0x1b)),
            ["49/7b72f6390a44fc878e5a2d63b6cc4b1b/debuginfo"]
        );
        assert_eq!(
            keys(&portable_pdb(0xe396_469f)),
            ["49/7b72f6390a44fc878e5a2d63b6cc4be396469f/debuginfo"],
            "the real stamp, never ffffffff"
        );
        let mut exe = pe(1, 2);
        exe.debug_id = pdb(2).debug_id;
        assert_eq!(
            keys(&exe),
            ["49/7b72f6390a44fc878e5a2d63b6cc4b2/executable"]
        );
        assert!(
            keys(&pe(1, 2)).is_empty(),
            "no CodeView record: no unified key"
        );
        assert_eq!(
            keys(&breakpad_sym("3249d99d-0c40-4931-8610-f4e4fb0b6936-1")),
            ["32/49d99d0c4049318610f4e4fb0b69361/breakpad"]
        );
    }

    #[test]
    fn elf_and_mach_o_use_the_code_id() {
        assert_eq!(
            keys(&elf(&ID20, false)),
            ["18/0a373d6afbabf0eb1f09be1bc45bd796a71085/executable"]
        );
        assert_eq!(
            keys(&elf(&ID20, true)),
            [
                "18/0a373d6afbabf0eb1f09be1bc45bd796a71085/executable",
                "18/0a373d6afbabf0eb1f09be1bc45bd796a71085/debuginfo"
            ]
        );
        assert_eq!(
            keys(&macho(Kind::Debug)),
            ["49/7b72f6390a44fc878e5a2d63b6cc4b/debuginfo"]
        );
    }

    #[test]
    fn source_bundles_go_where_symbolicator_asks_for_their_module() {
        use crate::layouts::{keys_for, Layout};
        let mut bundle = Identity::new(Format::SourceBundle, Kind::Source);
        bundle.debug_id = "faa9207b-627f-3c60-4bae-ac1cd514e670".parse().unwrap();
        bundle.code_id = Some(crate::identity::CodeId::new(
            "7b20a9fa7f62603c4baeac1cd514e670d0b02ac1".into(),
        ));
        bundle.debug_file = Some("/build/app.debug".into());
        let set = keys_for(&bundle, "app.src.zip", &Layout::ALL);
        let keys = |layout| set.keys.get(&layout).cloned().unwrap_or_default();
        assert_eq!(
            keys(Layout::Unified),
            [
                "7b/20a9fa7f62603c4baeac1cd514e670d0b02ac1/sourcebundle",
                "fa/a9207b627f3c604baeac1cd514e6700/sourcebundle"
            ]
        );
        assert_eq!(
            keys(Layout::Gdb),
            ["7b/20a9fa7f62603c4baeac1cd514e670d0b02ac1.src.zip"]
        );
        assert_eq!(
            keys(Layout::Breakpad),
            ["app.debug/FAA9207B627F3C604BAEAC1CD514E6700/app.debug.src.zip"]
        );
        assert!(keys(Layout::Symstore).is_empty(), "not a PDB's bundle");
        assert!(
            keys(Layout::Lldb).is_empty(),
            "a 20-byte code id is no UUID"
        );
        assert!(set.rejected.is_empty(), "{:?}", set.rejected);

        // A PE module's bundle: beside its PDB, and by Breakpad id.
        let mut pe = Identity::new(Format::SourceBundle, Kind::Source);
        pe.debug_id = pdb(0x1b).debug_id;
        pe.debug_file = Some(r"C:\out\Foo.pdb".into());
        let set = keys_for(&pe, "Foo.src.zip", &Layout::ALL);
        let keys = |layout| set.keys.get(&layout).cloned().unwrap_or_default();
        assert_eq!(
            keys(Layout::Symstore),
            [
                "Foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1b/Foo.src.zip",
                "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1B/foo.src.zip"
            ]
        );
        assert_eq!(
            keys(Layout::Unified),
            ["49/7b72f6390a44fc878e5a2d63b6cc4b1b/sourcebundle"]
        );
        assert!(set.rejected.is_empty(), "{:?}", set.rejected);
    }

    #[test]
    fn meta_sidecar() {
        let id = pdb(1);
        let k = keys(&id);
        let cars = sidecars(&id, Some(&Name::new("Foo.pdb").unwrap()), &k);
        assert_eq!(
            cars[0].key,
            "49/7b72f6390a44fc878e5a2d63b6cc4b1/debuginfo.meta"
        );
        let meta: serde_json::Value = serde_json::from_str(&cars[0].content).unwrap();
        assert_eq!(
            meta,
            json!({"name": "Foo.pdb", "arch": "x86", "file_format": "pdb"})
        );
        // The bytes stores hold (a `.meta` written again must not read as changed).
        assert_eq!(
            cars[0].content,
            r#"{"arch":"x86","file_format":"pdb","name":"Foo.pdb"}"#
        );
        let unnamed = sidecars(&id, None, &k);
        assert_eq!(
            unnamed[0].content,
            r#"{"arch":"x86","file_format":"pdb","name":null}"#
        );
    }
}
