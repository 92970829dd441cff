//! Compressed copies as a store keeps them (crate::encoded makes them): where they live,
//! their encodings, what a copy says it encodes, and a copy staged for storing.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::str::FromStr;

use super::ObjectInfo;

/// Where every copy lives: `_symdex/encoded/<encoding>/<key>`.
pub const ENCODED_PREFIX: &str = "_symdex/encoded/";

/// A content coding a copy is stored in (RFC 9110 section 8.4.1; the token is the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Encoding {
    Zstd,
    Gzip,
}

impl Encoding {
    /// Every encoding, in the order of preference when a client accepts several equally.
    pub const ALL: [Encoding; 2] = [Encoding::Zstd, Encoding::Gzip];

    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Zstd => "zstd",
            Encoding::Gzip => "gzip",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown encoding {s:?}: expected zstd or gzip"))
    }
}

/// The key of `key`'s copy in `encoding`.
pub fn copy_key(encoding: Encoding, key: &str) -> String {
    format!("{ENCODED_PREFIX}{encoding}/{key}")
}

/// The encoding and raw key a copy's key names; `None` for any other key.
pub fn raw_key_of(copy_key: &str) -> Option<(Encoding, &str)> {
    let rest = copy_key.strip_prefix(ENCODED_PREFIX)?;
    let (encoding, key) = rest.split_once('/')?;
    let encoding = Encoding::ALL.into_iter().find(|e| e.as_str() == encoding)?;
    (!key.is_empty()).then_some((encoding, key))
}

/// What a stored copy says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedMeta {
    pub encoding: Encoding,
    /// The raw key's content: its size and content identity (ObjectInfo of the raw key).
    pub raw: ObjectInfo,
}

/// A compressed copy, staged before it is stored.
#[derive(Debug)]
pub struct Staged {
    pub bytes: StagedBytes,
    pub size: u64,
    /// Where this copy was first stored, where the store can link later keys' copies to it
    /// (a local store: one file for all the keys of an artifact, as its raw keys are).
    pub stored_at: std::sync::Mutex<Option<StoredCopy>>,
}

/// Where a staged copy's bytes are (crate::encoded chooses by the raw size).
#[derive(Debug)]
pub enum StagedBytes {
    /// An unnamed temporary file: a large artifact's copy, which memory does not hold.
    File(File),
    /// The bytes themselves: a small artifact's copy, stored without a file in between.
    Memory(Vec<u8>),
}

/// A reader of a staged copy's bytes from their start ([`Staged::reader`]).
pub enum StagedReader<'a> {
    File(File),
    Memory(&'a [u8]),
}

impl Read for StagedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            StagedReader::File(file) => file.read(buf),
            StagedReader::Memory(bytes) => bytes.read(buf),
        }
    }
}

/// The first copy a store made of a [`Staged`] copy.
#[derive(Debug)]
pub struct StoredCopy {
    /// Its key.
    pub key: String,
    /// The file, kept open where the store created it (a local store's file created unnamed):
    /// the copies of the artifact's other keys are links of it made through its descriptor,
    /// without looking the first copy up again. Its bytes and its attribute are never
    /// written again, so a link names exactly what the first copy was written as.
    pub file: Option<std::sync::Arc<File>>,
}

impl Staged {
    /// A staged copy of `bytes` held in memory.
    pub fn in_memory(bytes: Vec<u8>) -> Staged {
        Staged {
            size: bytes.len() as u64,
            bytes: StagedBytes::Memory(bytes),
            stored_at: Default::default(),
        }
    }

    /// A staged copy of `size` bytes in `file`.
    pub fn in_file(file: File, size: u64) -> Staged {
        Staged {
            bytes: StagedBytes::File(file),
            size,
            stored_at: Default::default(),
        }
    }

    /// A reader of the staged bytes from their start.
    pub fn reader(&self) -> io::Result<StagedReader<'_>> {
        Ok(match &self.bytes {
            StagedBytes::File(file) => StagedReader::File(rewound(file)?),
            StagedBytes::Memory(bytes) => StagedReader::Memory(bytes),
        })
    }

    /// Writes all the staged bytes to `out`; returns how many. From a file, `io::copy` keeps
    /// the kernel's in-place copy where `out` is a file too, and a file that gave other than
    /// the staged size (cut short, or written to since) is an error, not a copy stored cut or
    /// padded; from memory, one write.
    pub fn write_all_to<W: Write>(&self, out: &mut W) -> io::Result<u64> {
        match &self.bytes {
            StagedBytes::File(file) => {
                let written = io::copy(&mut rewound(file)?, out)?;
                if written != self.size {
                    return Err(io::Error::other(format!(
                        "the staged copy gave {written} bytes of {}",
                        self.size
                    )));
                }
                Ok(written)
            }
            StagedBytes::Memory(bytes) => {
                out.write_all(bytes)?;
                Ok(bytes.len() as u64)
            }
        }
    }
}

/// Another handle of `file`, rewound to its start (a duplicate shares the file's offset: each
/// reader of the copy starts it again).
fn rewound(file: &File) -> io::Result<File> {
    let mut file = file.try_clone()?;
    file.rewind()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::{copy_key, raw_key_of, Encoding, Staged};
    use std::io::{Read, Write};

    #[test]
    fn copy_keys_round_trip_and_name_nothing_else() {
        let key = "buildid/ab12/debuginfo";
        let copy = copy_key(Encoding::Zstd, key);
        assert_eq!(copy, "_symdex/encoded/zstd/buildid/ab12/debuginfo");
        assert_eq!(raw_key_of(&copy), Some((Encoding::Zstd, key)));
        assert_eq!(raw_key_of("_symdex/encoded/br/x"), None);
        assert_eq!(raw_key_of("_symdex/encoded/zstd/"), None);
        assert_eq!(raw_key_of("buildid/_symdex/encoded/zstd/x"), None);
    }

    #[test]
    fn a_staged_copy_reads_from_its_start_in_a_file_or_in_memory() {
        let bytes = b"a staged copy".to_vec();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        for staged in [
            Staged::in_file(file, bytes.len() as u64),
            Staged::in_memory(bytes.clone()),
        ] {
            assert_eq!(staged.size, bytes.len() as u64);
            // Twice each: every reader and every write starts at the first byte.
            for _ in 0..2 {
                let mut read = Vec::new();
                staged.reader().unwrap().read_to_end(&mut read).unwrap();
                assert_eq!(read, bytes);
                let mut written = Vec::new();
                assert_eq!(staged.write_all_to(&mut written).unwrap(), staged.size);
                assert_eq!(written, bytes);
            }
        }
    }

    #[test]
    fn a_staged_file_of_another_size_than_staged_is_not_written_as_the_copy() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"a staged copy").unwrap();
        for size in [12, 14] {
            let staged = Staged::in_file(file.try_clone().unwrap(), size);
            let err = staged.write_all_to(&mut Vec::new()).unwrap_err();
            assert!(err.to_string().contains("gave 13 bytes of"), "{err}");
        }
    }
}
