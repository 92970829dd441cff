//! Source files: keyed by the SHA-1 of their raw bytes (no normalisation of line endings), and
//! matched to the paths debug files name by their MD5 where the DWARF records one.

use super::{Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};
use crate::reader::{read_vec, RangeReader};

/// Sources are hashed in chunks of this size, so memory stays flat whatever their size.
const CHUNK: u64 = 256 * 1024;

/// Bytes read to tell text from binary ([`may_be_text`]).
const TEXT_PROBE: u64 = 8 * 1024;

/// Whether the file may be source text a debug file names: no NUL byte in its first 8 KiB
/// (binaries, images, compressed data have them; UTF-8 and Latin-1 sources do not). A file
/// no format claims is looked up as a debug file's source only then (sourcemap.rs), so that
/// an archive of binary data costs no join-record requests. UTF-16 sources are given by
/// their extension instead (`--source-ext`). A read error says no: identification reports
/// it.
pub fn may_be_text(reader: &dyn RangeReader) -> bool {
    let len = reader.size().min(TEXT_PROBE) as usize;
    read_vec(reader, 0, len).is_ok_and(|head| !head.contains(&0))
}

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let mut hasher = crate::digest::Sha1::new();
    let mut md5 = crate::digest::Md5::default();
    let mut sha256 = crate::digest::Sha256::default();
    let size = reader.size();
    let mut offset = 0;
    while offset < size {
        let len = (size - offset).min(CHUNK) as usize;
        let chunk =
            read_vec(reader, offset, len).map_err(|e| FormatError::from_io(Format::Source, e))?;
        hasher.update(&chunk);
        md5.update(&chunk);
        sha256.update(&chunk);
        offset += len as u64;
    }
    let mut id = Identity::new(Format::Source, Kind::Source);
    id.arch = Arch::Any;
    id.sha1 = Some(hasher.hex());
    id.md5 = Some(md5.hex());
    id.sha256 = Some(sha256.hex());
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::{identify, may_be_text};
    use crate::reader::MemReader;

    #[test]
    fn text_has_no_nul_in_its_head() {
        assert!(may_be_text(&MemReader(
            b"int main(void) { return 0; }\n".to_vec()
        )));
        assert!(may_be_text(&MemReader(Vec::new())));
        assert!(!may_be_text(&MemReader(b"\x1f\x8b\x08\x00\x00".to_vec())));
        let mut late = vec![b'a'; 10_000];
        late[9_000] = 0;
        assert!(may_be_text(&MemReader(late)), "only the head is read");
    }

    #[test]
    fn sha1_of_raw_bytes() {
        let id = identify(&MemReader(b"abc".to_vec())).unwrap();
        assert_eq!(
            id.sha1.as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(id.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        assert_eq!(
            id.sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        let big = vec![b'x'; 600_000];
        let id = identify(&MemReader(big.clone())).unwrap();
        assert_eq!(id.sha1.unwrap(), crate::digest::sha1_hex(&big));
    }
}
