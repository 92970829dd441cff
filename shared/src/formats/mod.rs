//! Artifact formats: detection by content and one parser per format.
//!
//! Every parser reads through a [`RangeReader`] and touches only the structures that carry
//! identifiers (headers, debug directory, notes, load commands, MSF streams 1 and 3), so
//! identifying a multi-gigabyte binary costs kilobytes. The result is an [`Identity`] (one per
//! slice of a fat Mach-O), the common model every layout and the manifest consume.

pub mod breakpad;
pub mod dwarf;
pub mod dwp;
pub mod elf;
pub mod macho;
pub mod pdb;
pub mod pdz;
pub mod pe;
pub mod perfmap;
pub mod portable_pdb;
pub mod source;
pub mod sourcebundle;
pub mod wasm;

#[cfg(test)]
pub(crate) mod robustness;

use std::io;

use crate::identity::Identity;
use crate::reader::{read_up_to, RangeReader};

/// How many leading bytes detection looks at. Enough for every magic number and for the
/// MODULE line of a Breakpad file or the five header lines of a perfmap.
pub const SNIFF_LEN: usize = 4096;

// The vocabulary of formats is the identity's (identity.rs, below every parser).
pub use crate::identity::Format;

/// Why an input yielded no identity.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// Not an artifact of any known format (or a source that was not asked for).
    #[error("unrecognized: {0}")]
    Unrecognized(String),
    /// Looked like `format` but its structures are broken, truncated or lie about sizes.
    #[error("malformed {format}: {reason}")]
    Malformed { format: Format, reason: String },
    /// The bytes could not be read (not a property of the artifact).
    #[error("I/O error: {0}")]
    Io(io::Error),
}

impl FormatError {
    pub(crate) fn malformed(format: Format, reason: impl Into<String>) -> Self {
        FormatError::Malformed {
            format,
            reason: reason.into(),
        }
    }

    /// Maps a read error: a read past the end means the artifact is truncated (its fault);
    /// anything else is a real I/O failure.
    pub(crate) fn from_io(format: Format, err: io::Error) -> Self {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            FormatError::malformed(format, format!("truncated: {err}"))
        } else {
            FormatError::Io(err)
        }
    }

    /// True when the failure is about reading, not about the artifact's content.
    pub fn is_io(&self) -> bool {
        matches!(self, FormatError::Io(_))
    }
}

/// Caller's choices that content alone cannot settle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentifyOptions {
    /// Key this input as a source file (SHA-1) when no binary format matches.
    pub as_source: bool,
}

/// Detects the format from the first bytes, without trusting the file name.
///
/// PE needs a second look (the `PE\0\0` signature at `e_lfanew`), so `reader` is consulted when
/// the head starts with `MZ`.
pub fn sniff(head: &[u8], reader: &dyn RangeReader) -> Result<Option<Format>, io::Error> {
    if head.starts_with(b"\x7fELF") {
        return Ok(Some(Format::Elf));
    }
    if head.starts_with(pdb::MSF7_MAGIC) {
        return Ok(Some(Format::Pdb));
    }
    if head.starts_with(pdz::MSFZ_MAGIC) {
        return Ok(Some(Format::Pdz));
    }
    if head.starts_with(b"MZ") && pe::has_pe_signature(head, reader)? {
        return Ok(Some(Format::Pe));
    }
    if macho::is_macho(head) {
        return Ok(Some(Format::Macho));
    }
    if head.starts_with(b"\0asm") {
        return Ok(Some(Format::Wasm));
    }
    if portable_pdb::is_portable_pdb(head) {
        return Ok(Some(Format::PortablePdb));
    }
    if breakpad::is_breakpad(head) {
        return Ok(Some(Format::Breakpad));
    }
    if perfmap::is_perfmap(head) {
        return Ok(Some(Format::Perfmap));
    }
    if head.starts_with(sourcebundle::MAGIC) {
        return Ok(Some(Format::SourceBundle));
    }
    Ok(None)
}

/// Identifies one artifact: one identity, or one per slice for a fat Mach-O.
pub fn identify(
    reader: &dyn RangeReader,
    options: &IdentifyOptions,
) -> Result<Vec<Identity>, FormatError> {
    let head = read_up_to(reader, 0, SNIFF_LEN).map_err(FormatError::Io)?;
    let format = sniff(&head, reader).map_err(FormatError::Io)?;
    let one = |r: Result<Identity, FormatError>| r.map(|id| vec![id]);
    match format {
        Some(Format::Elf) => one(elf::identify(reader)),
        Some(Format::Pdb) => one(pdb::identify(reader)),
        Some(Format::Pdz) => one(pdz::identify(reader)),
        Some(Format::Pe) => one(pe::identify(reader)),
        Some(Format::Macho) => macho::identify(reader),
        Some(Format::Wasm) => one(wasm::identify(reader)),
        Some(Format::PortablePdb) => one(portable_pdb::identify(reader)),
        Some(Format::Breakpad) => one(breakpad::identify(&head)),
        Some(Format::Perfmap) => one(perfmap::identify(&head)),
        Some(Format::SourceBundle) => one(sourcebundle::identify(reader)),
        // Never sniffed: a package is an ELF file, told apart by its sections (elf.rs).
        Some(Format::Dwp) => one(elf::identify(reader)),
        Some(Format::Source) | None if options.as_source => one(source::identify(reader)),
        Some(Format::Source) | None => Err(FormatError::Unrecognized(describe_unknown(&head))),
    }
}

/// [`identify`], then what costs more than headers ([`read_debug_details`]). For callers
/// with the whole file at hand; the Lambda runs the two steps apart.
pub fn identify_with_details(
    reader: &dyn RangeReader,
    options: &IdentifyOptions,
) -> Result<Vec<Identity>, FormatError> {
    let mut ids = identify(reader, options)?;
    for id in &mut ids {
        read_debug_details(reader, id);
    }
    Ok(ids)
}

/// How much of the details a report reads ([`identify_described`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// What the keys depend on, no more: which compressed sections decompress (only those
    /// are served), a binary's split DWARF units. `symdex keys` by default: a debug file's
    /// line programs and a PDB's module streams lie past the headers, and reading them was a
    /// third of its time over the corpus.
    Keys,
    /// And the sources an artifact names: a debug file's source paths, a PDB's or Portable
    /// PDB's documents, Source Link map and srcsrv stream. What `push`'s plan (the sources
    /// a build needs) and `check` read, and `keys --details` shows.
    Sources,
}

/// [`identify`], then what a report shows of the details ([`describe_debug_details`]): the
/// fields [`identify_with_details`] fills that are serialized, as far as `detail` asks,
/// without reading the sections only publishing holds. What `symdex keys`, `push`'s plan
/// and `check` ask.
pub fn identify_described(
    reader: &dyn RangeReader,
    options: &IdentifyOptions,
    detail: Detail,
) -> Result<Vec<Identity>, FormatError> {
    let mut ids = identify(reader, options)?;
    for id in &mut ids {
        describe_debug_details(reader, id, detail);
    }
    Ok(ids)
}

/// [`read_debug_details`] but for the bytes of served sections (`Identity::decompressed`,
/// left empty), and the sources only where `detail` asks for them: all the rest alike.
pub fn describe_debug_details(reader: &dyn RangeReader, id: &mut Identity, detail: Detail) {
    match (id.format, detail) {
        (Format::Pdb | Format::PortablePdb, Detail::Sources) => read_debug_details(reader, id),
        (Format::Pdb | Format::PortablePdb, Detail::Keys) => {}
        _ => elf::describe_debug_details(reader, id, detail == Detail::Sources),
    }
}

/// What identification leaves out because it costs more than headers, read on the whole
/// file's reader: the source files a debug file's DWARF names and its compressed sections
/// ([`elf::read_debug_details`]), a PDB's or Portable PDB's documents, Source Link map and
/// srcsrv stream ([`pdb::read_sources`], [`portable_pdb::read_sources`]). Each reads within
/// a budget of its own; what it could not read is said in the identity, never an error.
pub fn read_debug_details(reader: &dyn RangeReader, id: &mut Identity) {
    match id.format {
        // Nothing to say (no documents, map or srcsrv stream, all read) is said by none.
        Format::Pdb => id.pdb_sources = Some(pdb::read_sources(reader)).filter(|s| !s.is_empty()),
        Format::PortablePdb => {
            id.pdb_sources = Some(portable_pdb::read_sources(reader)).filter(|s| !s.is_empty());
        }
        _ => elf::read_debug_details(reader, id),
    }
}

/// A short reason for an unrecognized input, so the manifest says more than "unknown".
fn describe_unknown(head: &[u8]) -> String {
    if head.is_empty() {
        return "empty file".to_string();
    }
    if head.starts_with(&[0xca, 0xfe, 0xba, 0xbe]) {
        return "a Java class file (cafebabe with more than 20 architectures)".to_string();
    }
    if head.starts_with(b"MZ") {
        return "MZ header without a PE signature (DOS executable or truncated PE)".to_string();
    }
    if head.starts_with(b"Microsoft C/C++") {
        return "an MSF container other than 7.00 (old or compressed PDB)".to_string();
    }
    if let Some(container) = crate::sniff::detect(head) {
        return format!(
            "a {} archive (index it to process its entries)",
            container.as_str()
        );
    }
    if head.starts_with(b"!<arch>\n") || head.starts_with(b"!<thin>\n") {
        // Not a Debian package (those are containers, above: archive::deb).
        return "an ar archive, not a Debian package (a static library: its object files have no build ids to serve)".to_string();
    }
    let magic: String = head.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!(
        "no known magic number (first bytes {magic}); a source only when asked for or named by a debug file"
    )
}

/// Reads a little-endian u32 at `at`; `None` when out of range.
pub(crate) fn le_u32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Reads a big-endian u32 at `at`; `None` when out of range.
pub(crate) fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes(bytes.try_into().ok()?))
}

/// Reads a little-endian u16 at `at`; `None` when out of range.
pub(crate) fn le_u16(data: &[u8], at: usize) -> Option<u16> {
    let bytes = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(bytes.try_into().ok()?))
}

// Hex lives in digest.rs, below formats and storage both.
pub use crate::digest::{hex, unhex};

/// Text up to the first NUL, if it is UTF-8 (names from inside files stay untrusted data).
pub(crate) fn c_string(data: &[u8]) -> Option<String> {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    std::str::from_utf8(&data[..end]).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::{hex, sniff, unhex};
    use crate::reader::MemReader;
    use crate::{identify, Format, FormatError, IdentifyOptions};

    #[test]
    fn hex_reads_back_in_either_case_and_nothing_else() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)), Some(bytes.clone()));
        assert_eq!(unhex(&hex(&bytes).to_ascii_uppercase()), Some(bytes));
        assert_eq!(unhex(""), Some(Vec::new()));
        for not_hex in ["+f", "-1", "0", "abc", "0g", " 1", "\u{e9}", "1\u{e9}1"] {
            assert_eq!(unhex(not_hex), None, "{not_hex:?}");
        }
    }

    fn sniffed(bytes: &[u8]) -> Option<Format> {
        sniff(bytes, &MemReader(bytes.to_vec())).unwrap()
    }

    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn detection_is_by_content() {
        assert_eq!(sniffed(b"\x7fELF\x02\x01"), Some(Format::Elf));
        assert_eq!(sniffed(b"\0asm\x01\0\0\0"), Some(Format::Wasm));
        assert_eq!(
            sniffed(b"MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 a.so\n"),
            Some(Format::Breakpad)
        );
        assert_eq!(sniffed(b"hello world"), None);
        assert_eq!(sniffed(b""), None);
        // MZ alone is not a PE.
        assert_eq!(sniffed(b"MZ\0\0\0\0"), None);
    }

    #[test]
    fn unknown_inputs_get_a_reason() {
        let err = identify(
            &MemReader(b"just text".to_vec()),
            &IdentifyOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(err, FormatError::Unrecognized(_)));
        assert!(err.to_string().contains("no known magic"), "{err}");
        let err = identify(&MemReader(Vec::<u8>::new()), &IdentifyOptions::default()).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        let library =
            b"!<arch>\n/               0           0     0     0       4         `\n\0\0\0\0";
        let err = identify(&MemReader(library.to_vec()), &IdentifyOptions::default()).unwrap_err();
        assert!(err.to_string().contains("static library"), "{err}");
        let package = format!(
            "!<arch>\n{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n2.0\n",
            "debian-binary", 0, 0, 0, 100644, 4
        );
        let err = identify(
            &MemReader(package.into_bytes()),
            &IdentifyOptions::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("a deb archive"), "{err}");
    }

    #[test]
    fn sources_only_when_asked() {
        let r = MemReader(b"int main() {}\n".to_vec());
        assert!(identify(&r, &IdentifyOptions::default()).is_err());
        let ids = identify(&r, &IdentifyOptions { as_source: true }).unwrap();
        assert_eq!(ids[0].format, Format::Source);
    }
}
