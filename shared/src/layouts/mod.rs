//! Key layouts: pure functions from an identity (and the artifact's file name) to the exact
//! keys each client family requests (KEYS.md §4). One module per layout.
//!
//! S3 is case-sensitive and clients disagree on case, so an artifact is written under the
//! distinct union of every enabled layout's keys. Names are untrusted (they may come from inside
//! a file); a key is built only from a [`Name`] that passed [`Name::new`] (KEYS.md §5).

pub mod breakpad;
pub mod debuginfod;
pub mod gdb;
pub mod grammar;
pub mod lldb;
mod name;
pub mod ssqp;
pub mod symstore;
pub mod symstore_index2;
pub mod unified;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use debugid::DebugId;
use serde::Serialize;

use crate::formats::Format;
use crate::identity::{file_name_of, Identity, Kind};

pub use name::{Name, MAX_NAME_LEN};

/// Longest key a layout returns, in bytes: S3 allows 1,024, and the layout prefix and the
/// reference record (`_symdex/refs/<prefix><key>.json`) need room too.
pub const MAX_KEY_LEN: usize = 900;
/// Longest key component, in bytes (file systems allow 255).
pub const MAX_COMPONENT_LEN: usize = 255;

/// The key layouts symdex can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Ssqp,
    Symstore,
    SymstoreIndex2,
    Breakpad,
    Debuginfod,
    Unified,
    Gdb,
    Lldb,
}

impl Layout {
    pub const ALL: [Layout; 8] = [
        Layout::Ssqp,
        Layout::Symstore,
        Layout::SymstoreIndex2,
        Layout::Breakpad,
        Layout::Debuginfod,
        Layout::Unified,
        Layout::Gdb,
        Layout::Lldb,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Ssqp => "ssqp",
            Layout::Symstore => "symstore",
            Layout::SymstoreIndex2 => "symstore_index2",
            Layout::Breakpad => "breakpad",
            Layout::Debuginfod => "debuginfod",
            Layout::Unified => "unified",
            Layout::Gdb => "gdb",
            Layout::Lldb => "lldb",
        }
    }

    /// This layout's keys for one artifact (empty when the layout does not apply).
    pub fn keys(self, id: &Identity, name: Option<&Name<'_>>) -> Vec<String> {
        match self {
            Layout::Ssqp => ssqp::keys(id, name),
            Layout::Symstore => symstore::keys(id, name),
            Layout::SymstoreIndex2 => symstore_index2::keys(id, name),
            Layout::Breakpad => breakpad::keys(id, name),
            Layout::Debuginfod => debuginfod::keys(id),
            Layout::Unified => unified::keys(id),
            Layout::Gdb => gdb::keys(id),
            Layout::Lldb => lldb::keys(id),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('-', "_");
        Layout::ALL
            .into_iter()
            .find(|l| l.as_str() == wanted || (wanted == "index2" && *l == Layout::SymstoreIndex2))
            .ok_or_else(|| {
                let names: Vec<_> = Layout::ALL.iter().map(|l| l.as_str()).collect();
                format!("unknown layout {s:?} (one of {})", names.join(", "))
            })
    }
}

/// `<name>/<id>/<name>`: the shape shared by SSQP, SymStore and Breakpad keys.
pub(crate) fn triple(dir: &str, id: &str, file: &str) -> String {
    format!("{dir}/{id}/{file}")
}

/// GUID in .NET `ToString("N")` order (= the debug id's UUID as plain hex), lowercase.
/// The name of a source bundle beside a debug file, as symbolicator requests it: the name
/// cut at its last dot, then `.src.zip` (`foo.pdb` → `foo.src.zip`).
pub(crate) fn src_zip_name(debug_file: &str) -> String {
    let stem = debug_file
        .rfind('.')
        .map_or(debug_file, |dot| &debug_file[..dot]);
    format!("{stem}.src.zip")
}

pub(crate) fn guid_hex(id: &DebugId) -> String {
    id.uuid().simple().to_string()
}

/// ELF build id bytes from the identity's hex.
pub(crate) fn build_id_bytes(id: &Identity) -> Option<Vec<u8>> {
    crate::digest::unhex(id.build_id.as_deref()?)
}

/// True for an ELF (or WASM) file that carries debug information: it is keyed as a debug file.
pub(crate) fn is_debug_file(id: &Identity) -> bool {
    id.has_debug_info || id.kind == Kind::Debug
}

/// A generated object written beside the artifact (Sentry's `.meta`), not a copy of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sidecar {
    pub layout: Layout,
    pub key: String,
    pub content: String,
    /// The key (same layout) of the file it sits beside and describes: published only with
    /// that file (a sidecar without its file describes nothing).
    #[serde(skip)]
    pub describes: String,
}

/// All keys of one artifact over the enabled layouts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeySet {
    /// Keys per layout, in the order each layout produces them.
    pub keys: BTreeMap<Layout, Vec<String>>,
    /// Generated objects to write beside the artifact.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sidecars: Vec<Sidecar>,
    /// Why name-based keys were not produced (KEYS.md §5: never dropped silently).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

impl KeySet {
    /// The distinct union of every layout's keys: what the artifact is copied to.
    pub fn distinct(&self) -> BTreeSet<&str> {
        self.keys.values().flatten().map(String::as_str).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.values().all(Vec::is_empty)
    }

    /// Every key behind its layout's prefix (`pipeline::default_prefixes`, or a store's own):
    /// the names a store's objects have.
    pub fn prefixed<'a>(
        &'a self,
        prefixes: &'a BTreeMap<Layout, String>,
    ) -> impl Iterator<Item = (Layout, String)> + 'a {
        self.keys.iter().flat_map(move |(layout, keys)| {
            let prefix = prefixes.get(layout).map_or("", String::as_str);
            keys.iter().map(move |k| (*layout, format!("{prefix}{k}")))
        })
    }

    fn extend(&mut self, other: KeySet) {
        for (layout, keys) in other.keys {
            let entry = self.keys.entry(layout).or_default();
            for key in keys {
                if !entry.contains(&key) {
                    entry.push(key);
                }
            }
        }
        self.sidecars.extend(other.sidecars);
        self.rejected.extend(other.rejected);
    }
}

/// The keys under which `id` is published, for each enabled layout. `name` is the artifact's
/// file name as given (for Breakpad files the MODULE name is used instead).
pub fn keys_for(id: &Identity, name: &str, layouts: &[Layout]) -> KeySet {
    let mut set = KeySet::default();
    // Identifiers longer than any real one (a 64-byte build id is already twice SHA-256's)
    // make no keys: clients could not request them, and they would outgrow S3's key limit.
    let capped;
    let id = if too_long(id).is_some() {
        let mut c = id.clone();
        if let Some(reason) = too_long(id) {
            set.rejected.push(reason);
        }
        c.build_id = None;
        c.build_id_payload = None;
        c.code_id = None;
        capped = c;
        &capped
    } else {
        id
    };
    // A Breakpad file and a source bundle are keyed under the debug file they describe.
    let raw_name = match (id.format, id.debug_file.as_deref()) {
        (Format::Breakpad, Some(module_name)) => module_name,
        (Format::SourceBundle, Some(debug_file)) => crate::identity::file_name_of(debug_file),
        _ => name,
    };
    let valid = Name::new(raw_name);
    if let Err(reason) = &valid {
        set.rejected.push(reason.clone());
    }
    let name = valid.as_ref().ok();
    for &layout in layouts {
        let mut keys = dedup(layout.keys(id, name));
        if !keys.iter().all(|k| grammar::is_valid_key(layout, k)) {
            // Rare (a hostile name or id): the keys outside the grammar are said, in order.
            let (kept, outside): (Vec<String>, Vec<String>) = keys
                .into_iter()
                .partition(|k| grammar::is_valid_key(layout, k));
            for key in outside {
                set.rejected
                    .push(format!("key {key:?} is outside the {layout} grammar"));
            }
            keys = kept;
        }
        if layout == Layout::Unified {
            set.sidecars.extend(unified::sidecars(id, name, &keys));
        }
        set.keys.insert(layout, keys);
    }
    set
}

/// Longest identifier keyed, in bytes (hex digits are twice as many).
pub const MAX_ID_BYTES: usize = 64;

/// Why an identity's build id or code id is too long to key, if it is.
fn too_long(id: &Identity) -> Option<String> {
    [
        ("build id", id.build_id.as_deref()),
        ("build id payload", id.build_id_payload.as_deref()),
        ("code id", id.code_id.as_ref().map(|c| c.as_str())),
    ]
    .into_iter()
    .find_map(|(what, hex)| {
        let hex = hex?;
        (hex.len() > 2 * MAX_ID_BYTES).then(|| {
            format!(
                "{what} of {} bytes (at most {MAX_ID_BYTES} are keyed)",
                hex.len() / 2
            )
        })
    })
}

/// The build ids an ELF or WASM file is requested under: the id, and for WASM the whole
/// `build_id` payload where it differs (Microsoft.SymbolStore's and symbolic's form).
pub(crate) fn build_ids(id: &Identity) -> Vec<&str> {
    id.build_id
        .as_deref()
        .into_iter()
        .chain(id.build_id_payload.as_deref())
        .collect()
}

fn dedup(keys: Vec<String>) -> Vec<String> {
    // A layout gives a handful of keys: a scan of those kept beats a set of clones. A long
    // list (a hostile file's many sections) goes through the set, staying n log n.
    if keys.len() > 16 {
        let mut seen = BTreeSet::new();
        return keys
            .into_iter()
            .filter(|k| seen.insert(k.clone()))
            .collect();
    }
    let mut kept: Vec<String> = Vec::with_capacity(keys.len());
    for key in keys {
        if !kept.contains(&key) {
            kept.push(key);
        }
    }
    kept
}

/// Where clients look for the debug companion of a binary: the keys the companion would be
/// published under (PE -> each referenced PDB; ELF -> its debug file; Mach-O -> its dSYM).
pub fn lookup_keys_for(id: &Identity, name: &str, layouts: &[Layout]) -> KeySet {
    let mut set = KeySet::default();
    for (companion, companion_name) in companions(id, name) {
        let mut keys = keys_for(&companion, &companion_name, layouts);
        keys.sidecars.clear();
        set.extend(keys);
    }
    set
}

/// Synthetic identities of the debug files a binary refers to.
pub fn companions(id: &Identity, name: &str) -> Vec<(Identity, String)> {
    if !id.kind.is_binary() {
        return Vec::new();
    }
    match id.format {
        Format::Pe => id
            .pdb_references
            .iter()
            .map(|reference| {
                let format = if reference.portable {
                    Format::PortablePdb
                } else {
                    Format::Pdb
                };
                let mut pdb = Identity::new(format, Kind::Debug);
                pdb.debug_id = reference.debug_id;
                pdb.age = Some(reference.age);
                pdb.arch = id.arch;
                pdb.has_debug_info = true;
                (pdb, file_name_of(&reference.path).to_string())
            })
            .collect(),
        Format::Elf | Format::Macho | Format::Wasm if !id.debug_id.is_nil() => {
            let debug = id.debug_companion();
            let debug_name = id.debuglink.clone().unwrap_or_else(|| name.to_string());
            vec![(debug, debug_name)]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
pub(crate) mod properties;

#[cfg(test)]
pub(crate) mod tests {
    use super::DebugId;
    use crate::identity::{PdbReference, PerfmapInfo};
    use crate::{keys_for, lookup_keys_for, Format, Identity, Kind, Layout};
    use debugid::CodeId;

    pub(crate) const ID20: [u8; 20] = [
        0x18, 0x0a, 0x37, 0x3d, 0x6a, 0xfb, 0xab, 0xf0, 0xeb, 0x1f, 0x09, 0xbe, 0x1b, 0xc4, 0x5b,
        0xd7, 0x96, 0xa7, 0x10, 0x85,
    ];
    const GUID: &str = "497b72f6-390a-44fc-878e-5a2d63b6cc4b";

    fn debug_id(appendix: u32) -> DebugId {
        let uuid = uuid::Uuid::parse_str(GUID).unwrap();
        DebugId::from_parts(uuid, appendix)
    }

    pub(crate) fn pe(stamp: u32, size: u32) -> Identity {
        let mut id = Identity::new(Format::Pe, Kind::Library);
        id.pe_timestamp = Some(stamp);
        id.pe_size_of_image = Some(size);
        id.code_id = Some(CodeId::new(format!("{stamp:08x}{size:x}")));
        id
    }

    pub(crate) fn pdb(age: u32) -> Identity {
        let mut id = Identity::new(Format::Pdb, Kind::Debug);
        id.arch = crate::Arch::X86;
        id.debug_id = debug_id(age);
        id.age = Some(age);
        id
    }

    pub(crate) fn portable_pdb(stamp: u32) -> Identity {
        let mut id = Identity::new(Format::PortablePdb, Kind::Debug);
        id.debug_id = debug_id(stamp);
        id
    }

    pub(crate) fn elf(build_id: &[u8], debug_info: bool) -> Identity {
        let mut id = Identity::new(Format::Elf, Kind::Library);
        let hex = crate::digest::hex(build_id);
        id.build_id = Some(hex.clone());
        id.code_id = Some(CodeId::new(hex));
        id.debug_id = crate::formats::elf::debug_id_from_bytes(build_id, true);
        id.has_debug_info = debug_info;
        id
    }

    pub(crate) fn macho(kind: Kind) -> Identity {
        let mut id = Identity::new(Format::Macho, kind);
        let hex = GUID.replace('-', "");
        id.uuid = Some(hex.clone());
        id.code_id = Some(CodeId::new(hex));
        id.debug_id = debug_id(0);
        id
    }

    pub(crate) fn wasm(build_id: &[u8]) -> Identity {
        let mut id = Identity::new(Format::Wasm, Kind::Library);
        id.build_id = Some(crate::digest::hex(build_id));
        id.code_id = Some(CodeId::new(crate::digest::hex(build_id)));
        id
    }

    pub(crate) fn source(sha1: &str) -> Identity {
        let mut id = Identity::new(Format::Source, Kind::Source);
        id.sha1 = Some(sha1.into());
        id
    }

    pub(crate) fn perfmap(signature: &str, version: u32) -> Identity {
        let mut id = Identity::new(Format::Perfmap, Kind::Symbols);
        id.perfmap = Some(PerfmapInfo {
            signature: signature.into(),
            version,
            path: None,
        });
        id
    }

    pub(crate) fn breakpad_sym(debug_id: &str) -> Identity {
        let mut id = Identity::new(Format::Breakpad, Kind::Symbols);
        id.debug_id = debug_id.parse().unwrap();
        id
    }

    #[test]
    fn the_key_set_is_the_distinct_union() {
        let set = keys_for(&pdb(1), "foo.pdb", &Layout::ALL);
        let all: Vec<&String> = set.keys.values().flatten().collect();
        let distinct = set.distinct();
        assert!(distinct.len() < all.len(), "ssqp and symstore share keys");
        assert!(distinct.contains("foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1/foo.pdb"));
        assert!(distinct.contains("foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1/foo.pdb"));
        assert!(distinct.contains("fo/foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1/foo.pdb"));
        assert!(distinct.contains("49/7b72f6390a44fc878e5a2d63b6cc4b1/debuginfo"));
        assert_eq!(set.sidecars.len(), 1);
        let only_ssqp = keys_for(&pdb(1), "foo.pdb", &[Layout::Ssqp]);
        assert_eq!(only_ssqp.distinct().len(), 1);
    }

    #[test]
    fn breakpad_files_are_named_by_their_module() {
        let mut sym = breakpad_sym("3249d99d-0c40-4931-8610-f4e4fb0b6936-1");
        sym.debug_file = Some("crash.pdb".into());
        let set = keys_for(&sym, "whatever-upload-name.sym", &[Layout::Breakpad]);
        assert_eq!(
            set.keys[&Layout::Breakpad],
            ["crash.pdb/3249D99D0C4049318610F4E4FB0B69361/crash.sym"]
        );
    }

    #[test]
    fn hostile_names_are_rejected_with_a_reason() {
        let set = keys_for(&pe(1, 2), "..", &Layout::ALL);
        assert!(set.is_empty());
        assert!(set.rejected[0].contains("relative"), "{:?}", set.rejected);
        // Name-independent keys survive a bad name.
        let set = keys_for(&elf(&ID20, true), r"bad\nname", &Layout::ALL);
        assert!(set.rejected.is_empty(), "the last component is 'nname'");
        let set = keys_for(&elf(&ID20, true), "bad\u{1}name", &Layout::ALL);
        assert_eq!(set.rejected.len(), 1);
        assert!(set
            .distinct()
            .contains("buildid/180a373d6afbabf0eb1f09be1bc45bd796a71085/debuginfo"));
    }

    #[test]
    fn lookup_keys_of_a_pe_are_its_pdbs_keys() {
        let mut exe = pe(0x542d_574e, 0xc2000);
        exe.pdb_references.push(PdbReference {
            path: r"C:\build\Foo.PDB".into(),
            debug_id: debug_id(0x1b),
            age: 0x1b,
            portable: false,
            timestamp: 0,
        });
        exe.pdb_references.push(PdbReference {
            path: "/_/obj/Bar.pdb".into(),
            debug_id: debug_id(0xe396_469f),
            age: 1,
            portable: true,
            timestamp: 0xe396_469f,
        });
        let set = lookup_keys_for(&exe, "Foo.exe", &Layout::ALL);
        let keys = set.distinct();
        assert!(keys.contains("foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1b/foo.pdb"));
        assert!(keys.contains("Foo.PDB/497B72F6390A44FC878E5A2D63B6CC4B1b/Foo.PDB"));
        assert!(keys.contains("bar.pdb/497b72f6390a44fc878e5a2d63b6cc4bFFFFFFFF/bar.pdb"));
        assert!(keys.contains("Bar.pdb/497B72F6390A44FC878E5A2D63B6CC4Bffffffff/Bar.pdb"));
        assert!(keys.contains("49/7b72f6390a44fc878e5a2d63b6cc4b1b/debuginfo"));
        assert!(
            !keys.iter().any(|k| k.contains("542D574E")),
            "no keys of the PE itself"
        );
    }

    #[test]
    fn lookup_keys_of_elf_and_mach_o() {
        let set = lookup_keys_for(&elf(&ID20, false), "libfoo.so", &Layout::ALL);
        let keys = set.distinct();
        assert!(keys
            .contains("_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd796a71085/_.debug"));
        assert!(keys.contains("buildid/180a373d6afbabf0eb1f09be1bc45bd796a71085/debuginfo"));
        assert!(keys.contains("18/0a373d6afbabf0eb1f09be1bc45bd796a71085.debug"));
        let set = lookup_keys_for(&macho(Kind::Library), "libfoo.dylib", &Layout::ALL);
        assert!(set
            .distinct()
            .contains("_.dwarf/mach-uuid-sym-497b72f6390a44fc878e5a2d63b6cc4b/_.dwarf"));
        assert!(lookup_keys_for(&pdb(1), "a.pdb", &Layout::ALL).is_empty());
    }

    /// The companion leaves out what only the binary's own upload reads (source paths,
    /// sections' bytes): its keys are those of the whole binary taken as a debug file.
    #[test]
    fn a_binarys_debug_companion_is_keyed_as_the_binary_taken_as_a_debug_file() {
        let mut binary = elf(&ID20, true);
        binary.sections = vec![crate::identity::SectionRef {
            name: ".debug_line".into(),
            offset: 64,
            size: 8,
            compressed: false,
        }];
        binary.decompressed = vec![(".debug_line".into(), vec![0; 8])];
        binary.debuglink = Some("libfoo.so.debug".into());
        binary.pdb_references = pe_pdb_references();
        let companion = binary.debug_companion();
        assert!(companion.decompressed.is_empty() && companion.pdb_references.is_empty());
        let mut whole = binary.clone();
        whole.kind = Kind::Debug;
        whole.has_debug_info = true;
        whole.pdb_references.clear();
        for name in ["libfoo.so.debug", "libfoo.so"] {
            assert_eq!(
                keys_for(&companion, name, &Layout::ALL),
                keys_for(&whole, name, &Layout::ALL)
            );
        }
        let looked_up = lookup_keys_for(&binary, "libfoo.so", &Layout::ALL);
        assert!(looked_up
            .distinct()
            .contains("buildid/180a373d6afbabf0eb1f09be1bc45bd796a71085/section/.debug_line"));
    }

    fn pe_pdb_references() -> Vec<PdbReference> {
        vec![PdbReference {
            debug_id: debug_id(1),
            age: 1,
            path: "a.pdb".into(),
            portable: false,
            timestamp: 0,
        }]
    }

    #[test]
    fn layouts_parse_from_their_names() {
        for layout in Layout::ALL {
            assert_eq!(layout.as_str().parse::<Layout>().unwrap(), layout);
        }
        assert_eq!(
            "symstore-index2".parse::<Layout>().unwrap(),
            Layout::SymstoreIndex2
        );
        assert!("nope".parse::<Layout>().is_err());
    }

    /// KEYS.md §4 (unified, breakpad): a `.sym` goes under the id of the module it describes,
    /// and under its Breakpad id; by code file and code id when `INFO CODE_ID` names them.
    #[test]
    fn breakpad_files_for_linux_mac_and_windows_modules() {
        let debug_id = "1d8f2556-30ed-c02f-74f5-a3c1fc68f0ed-0";
        let unified = |os: &str, code: Option<(&str, &str)>| {
            let mut sym = breakpad_sym(debug_id);
            sym.debug_file = Some("libfoo.so".into());
            sym.os = Some(os.into());
            if let Some((code_id, code_file)) = code {
                sym.code_id = Some(CodeId::new(code_id.into()));
                sym.code_file = Some(code_file.into());
            }
            keys_for(&sym, "x.sym", &Layout::ALL)
        };
        let bid = "8f2556ed30c02f74f5a3c1fc68f0ed70ac2477";
        let linux = unified("Linux", Some((&format!("1d{bid}"), "libfoo.so")));
        assert_eq!(
            linux.keys[&Layout::Unified],
            [
                format!("1d/{bid}/breakpad"),
                "1d/8f255630edc02f74f5a3c1fc68f0ed0/breakpad".to_string(),
            ],
            "symbolicator's form (the ELF code id) and symsorter's (the Breakpad id)"
        );
        assert_eq!(
            linux.keys[&Layout::Breakpad],
            [
                "libfoo.so/1D8F255630EDC02F74F5A3C1FC68F0ED0/libfoo.so.sym".to_string(),
                format!("libfoo.so/1D{}/libfoo.sym", bid.to_ascii_uppercase()),
            ]
        );
        let mac = unified("mac", None);
        assert_eq!(
            mac.keys[&Layout::Unified],
            [
                "1d/8f255630edc02f74f5a3c1fc68f0ed/breakpad",
                "1d/8f255630edc02f74f5a3c1fc68f0ed0/breakpad"
            ],
            "the UUID without age, then the Breakpad id"
        );
        let windows = unified("windows", Some(("5AB380779000", "crash.exe")));
        assert_eq!(
            windows.keys[&Layout::Unified],
            ["1d/8f255630edc02f74f5a3c1fc68f0ed0/breakpad"]
        );
        assert!(windows.keys[&Layout::Breakpad]
            .contains(&"crash.exe/5AB380779000/crash.sym".to_string()));
        // An ELF module without INFO CODE_ID: only the Breakpad id form.
        assert_eq!(unified("Linux", None).keys[&Layout::Unified].len(), 1);
        // A hostile code file name gets no code-id key, the rest stands.
        let hostile = unified("windows", Some(("5AB380779000", "..")));
        assert_eq!(hostile.keys[&Layout::Breakpad].len(), 1);
    }

    /// KEYS.md §4 (ssqp, unified, debuginfod, gdb): a wasm-ld build id is keyed both by the
    /// whole payload (its length byte first: Microsoft.SymbolStore, symbolic) and stripped.
    /// Issue 10: an identifier longer than any real one is rejected with a reason, and so is
    /// a name a Windows cache cannot hold, while name-independent keys are still written.
    #[test]
    fn over_long_ids_and_unsafe_names_are_rejected_with_reasons() {
        let long = elf(&[0xab; 600], true);
        let set = keys_for(&long, "app.debug", &Layout::ALL);
        assert!(set.distinct().is_empty(), "{:?}", set.distinct());
        assert!(
            set.rejected.iter().any(|r| r.contains("600 bytes")),
            "{:?}",
            set.rejected
        );
        let limit = elf(&[0xab; 64], true);
        assert!(!keys_for(&limit, "app.debug", &Layout::ALL)
            .distinct()
            .is_empty());

        let set = keys_for(&elf(&ID20, false), "CON", &Layout::ALL);
        assert!(set.rejected.iter().any(|r| r.contains("device name")));
        assert!(
            !set.keys[&Layout::Debuginfod].is_empty(),
            "name-independent keys stay"
        );
        assert!(
            !set.distinct()
                .iter()
                .any(|k| k.to_ascii_lowercase().contains("con/")),
            "{:?}",
            set.distinct()
        );
    }

    #[test]
    fn wasm_modules_under_both_id_forms() {
        let id16: Vec<u8> = (0x53..0x63).collect();
        let mut module = wasm(&id16);
        let stripped = crate::digest::hex(&id16);
        let payload = format!("10{stripped}");
        module.build_id_payload = Some(payload.clone());
        module.has_debug_info = true;
        let set = keys_for(&module, "App.wasm", &Layout::ALL);
        assert_eq!(
            set.keys[&Layout::Ssqp],
            [
                format!("app.wasm/{payload}/app.wasm"),
                format!("app.wasm/{stripped}/app.wasm")
            ]
        );
        for form in [&stripped, &payload] {
            let (head, rest) = form.split_at(2);
            for key in [
                format!("{head}/{rest}/executable"),
                format!("{head}/{rest}/debuginfo"),
            ] {
                assert!(set.keys[&Layout::Unified].contains(&key), "{key}");
            }
            assert!(set.keys[&Layout::Debuginfod].contains(&format!("buildid/{form}/executable")));
            assert!(
                set.keys[&Layout::Gdb].contains(&format!("{head}/{rest}")),
                "a WASM code module gets symbolicator's native key"
            );
        }
        // A payload with no length byte is one form only.
        let plain = keys_for(&wasm(&id16), "app.wasm", &[Layout::Ssqp]);
        assert_eq!(
            plain.keys[&Layout::Ssqp],
            [format!("app.wasm/{stripped}/app.wasm")]
        );
    }
}
