//! The identity of one artifact: what every layout, the manifest and `symdex keys` consume.
//!
//! Identifiers follow Sentry's conventions (KEYS.md §3) through the `debugid` crate, so a
//! manifest lines up with what Sentry and symbolicator print.

// Re-exported: identities are built with them (tests, fuzz targets).
pub use debugid::{CodeId, DebugId};
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::pdb_sources::PdbSources;

pub use crate::arch::Arch;
use std::fmt;

/// What role the artifact plays for a debugger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A program (PE without the DLL flag, ELF with an interpreter, MH_EXECUTE).
    Executable,
    /// A shared library or loadable module.
    Library,
    /// A debug companion: PDB, Portable PDB, ELF debug file, dSYM.
    Debug,
    /// A symbol file derived from debug info: Breakpad .sym, R2R perfmap.
    Symbols,
    /// A source file, keyed by its SHA-1.
    Source,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Executable => "executable",
            Kind::Library => "library",
            Kind::Debug => "debug",
            Kind::Symbols => "symbols",
            Kind::Source => "source",
        }
    }

    /// A loadable image (what debuginfod calls `executable`, unified calls `executable`).
    pub fn is_binary(self) -> bool {
        matches!(self, Kind::Executable | Kind::Library)
    }
}

/// A PE's reference to its PDB: one CodeView `RSDS` debug-directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PdbReference {
    /// The PDB path as the linker recorded it (untrusted; may be a Windows path).
    pub path: String,
    /// GUID + age (or + entry timestamp for a portable PDB), Sentry form.
    pub debug_id: DebugId,
    /// The CodeView age field.
    pub age: u32,
    /// The entry's MinorVersion was 0x504D: the PDB is a Portable PDB.
    pub portable: bool,
    /// The debug-directory entry's TimeDateStamp (the Portable PDB id's stamp).
    pub timestamp: u32,
}

/// A PdbChecksum debug-directory entry (type 19).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PdbChecksum {
    pub algorithm: String,
    pub checksum: String,
}

/// The R2R perfmap identity, from a PE debug entry (type 21) or a perfmap file's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfmapInfo {
    /// 16-byte signature, 32 lowercase hex.
    pub signature: String,
    pub version: u32,
    /// The perfmap file name recorded in the PE entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// One section of an ELF file, as its section header places it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectionRef {
    pub name: String,
    /// Where its bytes are in the file.
    pub offset: u64,
    pub size: u64,
    /// `SHF_COMPRESSED`: the bytes are a compression header and a zlib/zstd stream; it is
    /// served decompressed ([`Identity::decompressed`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compressed: bool,
}

/// An embedded Portable PDB debug entry (type 17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EmbeddedPortablePdb {
    pub compressed_size: u32,
    pub uncompressed_size: u32,
}

/// Everything symdex knows about one artifact (one slice of a fat Mach-O).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Identity {
    pub format: Format,
    pub kind: Kind,
    /// Sentry's architecture (`x86`, `x86_64`, `arm64`, ...), `Unknown` when there is none.
    pub arch: Arch,
    /// The Sentry debug id; nil when the artifact carries none.
    pub debug_id: DebugId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_id: Option<CodeId>,
    /// The binary's file name as recorded (Breakpad INFO CODE_ID name); the caller fills in the
    /// input's own name for binaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    /// The debug companion's name or path as recorded (PE CodeView path, Breakpad MODULE name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debug_file: Option<String>,
    /// ELF / WASM build id, lowercase hex, full length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// Mach-O LC_UUID, 32 lowercase hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pe_timestamp: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pe_size_of_image: Option<u32>,
    /// PDB age (from the DBI stream when valid) or the age of a PE's first CodeView record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age: Option<u32>,
    /// SHA-1 of the raw bytes (sources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    /// MD5 of the raw bytes (sources): what a DWARF 5 line table records of the file it was
    /// built from (sourcemap.rs matches on it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// SHA-256 of the raw bytes (sources): what a Portable PDB (and MSVC by default) records
    /// of each document (pipeline/documents.rs matches on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Carries DWARF / CodeView debug information (ELF `.debug_info`, dSYM `__DWARF`, WASM).
    pub has_debug_info: bool,
    /// PE: every CodeView record, in directory order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pdb_references: Vec<PdbReference>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pdb_checksums: Vec<PdbChecksum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded_portable_pdb: Option<EmbeddedPortablePdb>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perfmap: Option<PerfmapInfo>,
    /// ELF debug sections debuginfod clients ask for by name (`/section/<name>`), where they
    /// lie in the file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<SectionRef>,
    /// ELF: where the DWARF sections that name source files lie (read by
    /// [`crate::formats::elf::read_debug_details`], not by identification).
    #[serde(skip)]
    pub dwarf: Option<DwarfLayout>,
    /// ELF debug files: the source files their line tables name (filled by
    /// [`crate::formats::elf::read_debug_details`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<SourcePaths>,
    /// A Sentry source bundle: its zip entries that are sources, with the absolute path each
    /// stands for (indexed as source uploads of their own by the callers).
    #[serde(skip)]
    pub bundle_files: Vec<(String, String)>,
    /// Bytes of served sections held in memory by
    /// [`crate::formats::elf::read_debug_details`] (name, bytes): those stored compressed,
    /// decompressed, and small ones as read.
    #[serde(skip)]
    pub decompressed: Vec<(String, Vec<u8>)>,
    /// ELF `.gnu_debuglink` file name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debuglink: Option<String>,
    /// Position of this slice in a fat Mach-O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<u32>,
    /// The platform a Breakpad `MODULE` record names (`windows`, `Linux`, `mac`, ...): it
    /// decides which id symbolicator requests the file under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// WASM: hex of the whole `build_id` section payload when it differs from the id (LLVM's
    /// length-prefixed form), which is what Microsoft.SymbolStore and symbolic key by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id_payload: Option<String>,
    /// A DWARF package (`.dwp`): the DWO ids its index lists, the only thing that ties it to
    /// its binary (it has no build id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dwarf_package: Option<DwarfPackage>,
    /// An ELF file built with split DWARF: the DWO ids of its skeleton units, which its
    /// `.dwp` must hold (filled by [`crate::formats::elf::read_debug_details`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_dwarf: Option<SplitDwarf>,
    /// A PDB or Portable PDB: the documents it names with their checksums, its Source Link
    /// map and srcsrv stream (filled by [`crate::formats::read_debug_details`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdb_sources: Option<PdbSources>,
}

impl Identity {
    /// A blank identity of `format`/`kind`; parsers fill in what they find.
    pub fn new(format: Format, kind: Kind) -> Self {
        Identity {
            format,
            kind,
            arch: Arch::Unknown,
            debug_id: DebugId::nil(),
            code_id: None,
            code_file: None,
            debug_file: None,
            build_id: None,
            uuid: None,
            pe_timestamp: None,
            pe_size_of_image: None,
            age: None,
            sha1: None,
            md5: None,
            sha256: None,
            has_debug_info: false,
            pdb_references: Vec::new(),
            pdb_checksums: Vec::new(),
            embedded_portable_pdb: None,
            perfmap: None,
            debuglink: None,
            sections: Vec::new(),
            dwarf: None,
            sources: None,
            decompressed: Vec::new(),
            bundle_files: Vec::new(),
            slice: None,
            os: None,
            build_id_payload: None,
            dwarf_package: None,
            split_dwarf: None,
            pdb_sources: None,
        }
    }

    /// The debug file a binary of this identity refers to (an ELF's debug file, a Mach-O's
    /// dSYM, a WASM module's debug companion), as its keys see it: the same ids, kind
    /// `Debug`, with debug information, and none of what only this file's own upload reads
    /// (its source paths, the section bytes it holds, its PDB references). Written field by
    /// field so that a field added to `Identity` is decided here: a clone copied those for
    /// keys that never read them (`companions`, once per binary).
    pub fn debug_companion(&self) -> Identity {
        Identity {
            format: self.format,
            kind: Kind::Debug,
            arch: self.arch,
            debug_id: self.debug_id,
            code_id: self.code_id.clone(),
            code_file: self.code_file.clone(),
            debug_file: self.debug_file.clone(),
            build_id: self.build_id.clone(),
            uuid: self.uuid.clone(),
            pe_timestamp: self.pe_timestamp,
            pe_size_of_image: self.pe_size_of_image,
            age: self.age,
            sha1: self.sha1.clone(),
            md5: self.md5.clone(),
            sha256: self.sha256.clone(),
            has_debug_info: true,
            pdb_references: Vec::new(),
            pdb_checksums: self.pdb_checksums.clone(),
            embedded_portable_pdb: self.embedded_portable_pdb.clone(),
            perfmap: self.perfmap.clone(),
            sections: self.sections.clone(),
            dwarf: None,
            sources: None,
            bundle_files: Vec::new(),
            decompressed: Vec::new(),
            debuglink: self.debuglink.clone(),
            slice: self.slice,
            os: self.os.clone(),
            build_id_payload: self.build_id_payload.clone(),
            dwarf_package: self.dwarf_package.clone(),
            split_dwarf: self.split_dwarf.clone(),
            pdb_sources: None,
        }
    }

    /// Whether [`crate::formats::read_debug_details`] has more to read of it: DWARF, or a
    /// PDB's sources.
    pub fn has_details(&self) -> bool {
        self.dwarf.is_some() || matches!(self.format, Format::Pdb | Format::PortablePdb)
    }

    /// Fills in the names only the caller knows: the artifact's own file name is the code file
    /// of a binary and the debug file of a debug companion (unless the file records one).
    pub fn fill_file_names(&mut self, file_name: &str) {
        match self.kind {
            Kind::Executable | Kind::Library => {
                self.code_file.get_or_insert_with(|| file_name.to_string());
                if let Some(link) = &self.debuglink {
                    self.debug_file.get_or_insert_with(|| link.clone());
                }
            }
            Kind::Debug | Kind::Source => {
                self.debug_file.get_or_insert_with(|| file_name.to_string());
            }
            Kind::Symbols => {}
        }
    }
}

/// The last component of a path, with `/` and `\` both separating (KEYS.md §4), so a Windows
/// path recorded inside a PE yields its file name on any host.
pub fn file_name_of(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The artifact formats symdex understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Pe,
    Pdb,
    /// A PDB in the compressed MSFZ container.
    Pdz,
    #[serde(rename = "portablepdb")]
    PortablePdb,
    Elf,
    Macho,
    Wasm,
    Breakpad,
    Perfmap,
    Source,
    /// A Sentry source bundle (the sources of one debug file).
    #[serde(rename = "sourcebundle")]
    SourceBundle,
    /// A DWARF package (split DWARF's `.dwp`): an ELF container of `.dwo` sections and an
    /// index of their units by DWO id.
    Dwp,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: [Format; 12] = [
        Format::Pe,
        Format::Pdb,
        Format::Pdz,
        Format::PortablePdb,
        Format::Elf,
        Format::Macho,
        Format::Wasm,
        Format::Breakpad,
        Format::Perfmap,
        Format::Source,
        Format::SourceBundle,
        Format::Dwp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Pe => "pe",
            Format::Pdb => "pdb",
            Format::Pdz => "pdz",
            Format::PortablePdb => "portablepdb",
            Format::Elf => "elf",
            Format::Macho => "macho",
            Format::Wasm => "wasm",
            Format::Breakpad => "breakpad",
            Format::Perfmap => "perfmap",
            Format::Source => "source",
            Format::SourceBundle => "sourcebundle",
            Format::Dwp => "dwp",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the DWARF sections that name sources lie in an ELF file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DwarfLayout {
    pub little_endian: bool,
    pub is_64: bool,
    /// `.debug_line`, `.debug_line_str`, `.debug_str`, `.debug_info`, `.debug_abbrev`.
    pub sections: Vec<SectionRef>,
}

/// The source files one debug file names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SourcePaths {
    /// Absolute, lexically normalised (`.` and `..` resolved, as debuginfod clients do),
    /// sorted, at most [`crate::formats::dwarf::MAX_SOURCE_PATHS`].
    pub paths: Vec<String>,
    /// The MD5 a DWARF 5 line table records of a path's file (`DW_LNCT_MD5`; clang writes
    /// it, gcc does not), lowercase hex: a source upload serves the path only with these
    /// bytes (sourcemap.rs). A path whose tables disagree, or record zeros, has none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub md5: BTreeMap<String, String>,
    /// Why some names were left out (relative without a compilation directory, too long,
    /// control characters, a table that could not be read...), one line per reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

/// The id of one split-DWARF unit (a DWARF 5 skeleton or split unit header's `dwo_id`, or
/// DWARF 4's `DW_AT_GNU_dwo_id`; a `.dwp`'s index lists its units by it): written as 16
/// lowercase hex digits, as `llvm-dwarfdump --debug-cu-index` prints it without its `0x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DwoId(pub u64);

impl fmt::Display for DwoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for DwoId {
    type Err = String;

    /// Exactly 16 hex digits (either case): the written form, nothing looser.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("a DWO id is 16 hex digits, not {s:?}"));
        }
        u64::from_str_radix(s, 16)
            .map(DwoId)
            .map_err(|e| format!("DWO id {s:?}: {e}"))
    }
}

impl Serialize for DwoId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DwoId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What a DWARF package's `.debug_cu_index` says (formats/dwp.rs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DwarfPackage {
    /// The index's version: 2 (the GNU extension to DWARF 4, binutils `dwp`, rustc's
    /// thorin) or 5 (DWARF 5, `llvm-dwp`).
    pub index_version: u16,
    /// The DWO ids of its compilation units, sorted, distinct.
    pub dwo_ids: Vec<DwoId>,
}

/// The skeleton units of a file built with split DWARF (formats/dwp.rs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitDwarf {
    /// Their DWO ids, sorted, distinct.
    pub dwo_ids: Vec<DwoId>,
    /// Why units may be missing from `dwo_ids` (a unit that could not be read, more units
    /// or bytes than the walk reads), one line per reason: the list is then not the whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::{file_name_of, DwoId};
    use crate::{Format, Identity, Kind};

    #[test]
    fn file_names_split_on_both_separators() {
        assert_eq!(file_name_of(r"C:\build\out\Foo.PDB"), "Foo.PDB");
        assert_eq!(file_name_of("/tmp/x/libfoo.so"), "libfoo.so");
        assert_eq!(file_name_of("plain"), "plain");
        assert_eq!(file_name_of("dir/"), "");
    }

    #[test]
    fn binaries_get_their_own_name_as_code_file() {
        let mut id = Identity::new(Format::Elf, Kind::Library);
        id.debuglink = Some("libfoo.so.debug".into());
        id.fill_file_names("libfoo.so");
        assert_eq!(id.code_file.as_deref(), Some("libfoo.so"));
        assert_eq!(id.debug_file.as_deref(), Some("libfoo.so.debug"));
        let mut pdb = Identity::new(Format::Pdb, Kind::Debug);
        pdb.fill_file_names("foo.pdb");
        assert_eq!(pdb.debug_file.as_deref(), Some("foo.pdb"));
        assert_eq!(pdb.code_file, None);
    }

    #[test]
    fn dwo_ids_are_sixteen_hex_digits_both_ways() {
        let id = DwoId(0x57ae_4f79_97db_4c94);
        assert_eq!(id.to_string(), "57ae4f7997db4c94");
        assert_eq!(DwoId(1).to_string(), "0000000000000001");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"57ae4f7997db4c94\"");
        assert_eq!("57AE4F7997DB4C94".parse::<DwoId>(), Ok(id));
        let back: DwoId = serde_json::from_str("\"57ae4f7997db4c94\"").unwrap();
        assert_eq!(back, id);
        for bad in [
            "",
            "1",
            "0x57ae4f7997db4c9",
            "57ae4f7997db4c9g",
            "+7ae4f7997db4c94",
        ] {
            assert!(bad.parse::<DwoId>().is_err(), "{bad:?}");
        }
        assert!(serde_json::from_str::<DwoId>("17").is_err());
    }
}
