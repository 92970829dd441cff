//! Compressed copies as a store keeps them (crate::encoded makes them): where they live,
//! their encodings, what a copy says it encodes, and a copy staged for storing.

use std::fmt;
use std::fs::File;
use std::io::{self, Seek};
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

/// A copy staged in an unnamed temporary file, before it is stored.
#[derive(Debug)]
pub struct Staged {
    pub file: File,
    pub size: u64,
    /// Where this copy was first stored, where the store can link later keys' copies to it
    /// (a local store: one file for all the keys of an artifact, as its raw keys are).
    pub stored_at: std::sync::Mutex<Option<StoredCopy>>,
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
    /// A reader of the staged bytes from their start.
    pub fn reader(&self) -> io::Result<File> {
        let mut file = self.file.try_clone()?;
        file.rewind()?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_key, raw_key_of, Encoding};

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
}
