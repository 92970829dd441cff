//! Source files: keyed by the SHA-1 of their raw bytes (no normalisation of line endings), and
//! matched to the paths debug files name by their MD5 where the DWARF records one.

use super::{Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};
use crate::reader::{read_vec, RangeReader};

/// Sources are hashed in chunks of this size, so memory stays flat whatever their size.
const CHUNK: u64 = 256 * 1024;

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let mut hasher = crate::digest::Sha1::new();
    let mut md5 = crate::digest::Md5::default();
    let size = reader.size();
    let mut offset = 0;
    while offset < size {
        let len = (size - offset).min(CHUNK) as usize;
        let chunk =
            read_vec(reader, offset, len).map_err(|e| FormatError::from_io(Format::Source, e))?;
        hasher.update(&chunk);
        md5.update(&chunk);
        offset += len as u64;
    }
    let mut id = Identity::new(Format::Source, Kind::Source);
    id.arch = Arch::Any;
    id.sha1 = Some(hasher.hex());
    id.md5 = Some(md5.hex());
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::MemReader;

    #[test]
    fn sha1_of_raw_bytes() {
        let id = identify(&MemReader(b"abc".to_vec())).unwrap();
        assert_eq!(
            id.sha1.as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(id.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        let big = vec![b'x'; 600_000];
        let id = identify(&MemReader(big.clone())).unwrap();
        assert_eq!(id.sha1.unwrap(), crate::digest::sha1_hex(&big));
    }
}
