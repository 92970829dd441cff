//! `ssqp`: exactly what Microsoft.SymbolStore (dotnet-symbol) requests. Names lowercased.

use super::{build_id_bytes, guid_hex, is_debug_file, triple, Name};
use crate::formats::{hex, Format};
use crate::identity::{Identity, Kind};

/// SSQP ELF ids are zero-padded to 20 bytes; ids outside 8..=20 bytes get no SSQP key.
pub(crate) fn padded_elf_id(bytes: &[u8]) -> Option<String> {
    if !(8..=20).contains(&bytes.len()) {
        return None;
    }
    let mut padded = bytes.to_vec();
    padded.resize(20, 0);
    Some(hex(&padded))
}

/// `_.debug/elf-buildid-sym-<id>/_.debug`: ELF debug files are keyed without their name.
pub(crate) fn elf_sym_key(id: &str) -> String {
    triple("_.debug", &format!("elf-buildid-sym-{id}"), "_.debug")
}

/// `_.dwarf/mach-uuid-sym-<uuid>/_.dwarf`: dSYMs are keyed without their name.
pub(crate) fn dwarf_sym_key(uuid: &str) -> String {
    triple("_.dwarf", &format!("mach-uuid-sym-{uuid}"), "_.dwarf")
}

pub fn keys(id: &Identity, name: Option<&Name<'_>>) -> Vec<String> {
    let lower = name.map(Name::lower);
    let named = |key_id: String| lower.as_deref().map(|n| triple(n, &key_id, n));
    let key = match id.format {
        Format::Pe => match (id.pe_timestamp, id.pe_size_of_image) {
            (Some(stamp), Some(size)) => named(format!("{stamp:08X}{size:x}")),
            _ => None,
        },
        Format::Pdb => named(format!(
            "{}{:x}",
            guid_hex(&id.debug_id),
            id.debug_id.appendix()
        )),
        Format::PortablePdb => named(format!("{}FFFFFFFF", guid_hex(&id.debug_id))),
        // Microsoft.SymbolStore: a PDB in an MSFZ container, its container kind in the key.
        Format::Pdz => lower.as_deref().map(|n| {
            format!(
                "{n}/{}{:x}/msfz0/{n}",
                guid_hex(&id.debug_id),
                id.debug_id.appendix()
            )
        }),
        Format::Elf => {
            let padded = build_id_bytes(id).and_then(|b| padded_elf_id(&b));
            match padded {
                Some(bid) if is_debug_file(id) => Some(elf_sym_key(&bid)),
                Some(bid) => named(format!("elf-buildid-{bid}")),
                None => None,
            }
        }
        Format::Macho => match id.uuid.as_deref() {
            Some(uuid) if id.kind == Kind::Debug => Some(dwarf_sym_key(uuid)),
            Some(uuid) => named(format!("mach-uuid-{uuid}")),
            None => None,
        },
        // Microsoft.SymbolStore keys the whole payload (with LLVM's length byte): first.
        Format::Wasm => id
            .build_id_payload
            .clone()
            .or_else(|| id.build_id.clone())
            .and_then(named),
        Format::Perfmap => id
            .perfmap
            .as_ref()
            .and_then(|p| named(format!("r2rmap-v{}-{}", p.version, p.signature))),
        Format::Source => id
            .sha1
            .as_ref()
            .and_then(|sha1| named(format!("sha1-{sha1}"))),
        // A DWARF package has no id of its own: it is served only with its binary.
        Format::Breakpad | Format::SourceBundle | Format::Dwp => None,
    };
    let mut keys: Vec<String> = key.into_iter().collect();
    // WASM: also the length-stripped id form, where the payload had a length byte.
    if id.format == Format::Wasm && id.build_id_payload.is_some() {
        keys.extend(id.build_id.clone().and_then(named));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::super::tests::{elf, macho, pdb, pe, perfmap, portable_pdb, source, wasm, ID20};
    use super::keys;
    use crate::layouts::Name;
    use crate::{Identity, Kind};

    fn ssqp(id: &Identity, name: &str) -> Vec<String> {
        keys(id, Some(&Name::new(name).unwrap()))
    }

    #[test]
    fn key_convention_examples() {
        assert_eq!(
            ssqp(&pe(0x542d_574e, 0xc2000), "Foo.exe"),
            ["foo.exe/542D574Ec2000/foo.exe"]
        );
        assert_eq!(
            ssqp(&pdb(1), "Foo.pdb"),
            ["foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1/foo.pdb"]
        );
        assert_eq!(
            ssqp(&portable_pdb(0xe396_469f), "Foo.pdb"),
            ["foo.pdb/497b72f6390a44fc878e5a2d63b6cc4bFFFFFFFF/foo.pdb"]
        );
        assert_eq!(
            ssqp(&elf(&ID20, false), "foo.so"),
            ["foo.so/elf-buildid-180a373d6afbabf0eb1f09be1bc45bd796a71085/foo.so"]
        );
        assert_eq!(
            ssqp(&elf(&ID20[..16], true), "bar.so.dbg"),
            ["_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd700000000/_.debug"]
        );
        assert_eq!(
            ssqp(&macho(Kind::Library), "foo.dylib"),
            ["foo.dylib/mach-uuid-497b72f6390a44fc878e5a2d63b6cc4b/foo.dylib"]
        );
        assert_eq!(
            ssqp(&macho(Kind::Debug), "foo.dylib.dwarf"),
            ["_.dwarf/mach-uuid-sym-497b72f6390a44fc878e5a2d63b6cc4b/_.dwarf"]
        );
        assert_eq!(
            ssqp(
                &source("497b72f6390a44fc878e5a2d63b6cc4b0c2d9984"),
                "Foo.cs"
            ),
            ["foo.cs/sha1-497b72f6390a44fc878e5a2d63b6cc4b0c2d9984/foo.cs"]
        );
        assert_eq!(
            ssqp(&perfmap("f5fddf60efb0bee79ef02a19c3decba9", 1), "System.Private.CoreLib.ni.r2rmap"),
            ["system.private.corelib.ni.r2rmap/r2rmap-v1-f5fddf60efb0bee79ef02a19c3decba9/system.private.corelib.ni.r2rmap"]
        );
        assert_eq!(
            ssqp(&wasm(&[0xab; 20]), "M.wasm"),
            [format!("m.wasm/{}/m.wasm", "ab".repeat(20))]
        );
    }

    #[test]
    fn ages_of_ten_and_more_print_as_lowercase_hex() {
        assert_eq!(
            ssqp(&pdb(0x1b), "a.pdb"),
            ["a.pdb/497b72f6390a44fc878e5a2d63b6cc4b1b/a.pdb"]
        );
        assert_eq!(
            ssqp(&pdb(10), "a.pdb"),
            ["a.pdb/497b72f6390a44fc878e5a2d63b6cc4ba/a.pdb"]
        );
    }

    #[test]
    fn elf_id_lengths() {
        assert_eq!(
            ssqp(&elf(&ID20[..8], false), "a.so"),
            ["a.so/elf-buildid-180a373d6afbabf0000000000000000000000000/a.so"]
        );
        assert!(
            ssqp(&elf(&[1; 24], false), "a.so").is_empty(),
            "over 20 bytes: no SSQP key"
        );
        assert!(
            ssqp(&elf(&[1; 4], false), "a.so").is_empty(),
            "under 8 bytes: no SSQP key"
        );
    }

    #[test]
    fn timestamps_keep_leading_zeros() {
        assert_eq!(
            ssqp(&pe(0, 0x8000), "Mono.exe"),
            ["mono.exe/000000008000/mono.exe"]
        );
    }

    #[test]
    fn names_are_needed_except_for_sym_keys() {
        assert!(keys(&pe(1, 2), None).is_empty());
        assert_eq!(keys(&elf(&ID20, true), None).len(), 1);
    }
}
