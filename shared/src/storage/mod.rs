//! Storage: the one small trait between the pipeline and where bytes live (a local directory
//! here, an S3 bucket in the Lambda). Keys are `/`-separated and validated before they touch a
//! file system or an API.

pub mod local;
#[cfg(feature = "s3")]
pub mod s3;

use std::io;
use std::path::Path;

use crate::reader::RangeReader;

pub use local::LocalStore;

/// What a store knows about one object without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: u64,
    /// Content identity: S3's ETag, or a SHA-1 of the content for a local store.
    pub etag: String,
}

/// Where a copy comes from.
#[derive(Debug, Clone, Copy)]
pub enum CopySource<'a> {
    /// A local file (an input of `symdex index`).
    File(&'a Path),
    /// Another key of the same store (aliases of already published content).
    Key(&'a str),
    /// An object of another bucket (the ingest bucket), copied server-side. Its size and
    /// content identity are what the caller already read (one HEAD per upload, not per key).
    Object {
        bucket: &'a str,
        key: &'a str,
        version_id: Option<&'a str>,
        size: u64,
        etag: &'a str,
    },
}

/// Object storage as the pipeline needs it.
pub trait Storage: Send + Sync {
    /// Ranged reads of one object.
    fn open(&self, key: &str) -> io::Result<Box<dyn RangeReader + '_>>;
    /// Size, or `None` when the key does not exist.
    fn size(&self, key: &str) -> io::Result<Option<u64>>;
    /// Size and content identity, or `None` when the key does not exist.
    fn head(&self, key: &str) -> io::Result<Option<ObjectInfo>>;
    /// Whole small object (records, manifests), or `None` when absent.
    fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>>;
    /// Writes `bytes` atomically: readers see the old object or the new one, never a part.
    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<ObjectInfo>;
    /// Conditional write: only if the current etag is `expected` (`None`: only if absent).
    /// `Ok(false)` when the condition failed (someone else wrote first).
    fn put_if(&self, key: &str, bytes: &[u8], expected: Option<&str>) -> io::Result<bool>;
    /// Copies without passing the bytes through the caller where the store allows it.
    fn copy(&self, source: &CopySource<'_>, key: &str) -> io::Result<ObjectInfo>;
    /// Keys under `prefix`, in lexicographic order.
    fn list(&self, prefix: &str) -> io::Result<Vec<String>>;
    /// Deletes `key`; deleting a missing key is not an error.
    fn delete(&self, key: &str) -> io::Result<()>;
}

/// Rejects keys that could escape a store or mean something else than they say.
pub fn check_key(key: &str) -> io::Result<()> {
    let bad = key.is_empty()
        || key.len() > 1024
        || key.starts_with('/')
        || key.contains('\\')
        || key.chars().any(char::is_control)
        || key
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid key {key:?}"),
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        for good in [
            "a",
            "symbols/foo.pdb/ABC1/foo.pdb",
            "_.debug/x/_.debug",
            "buildid/ab/debuginfo",
        ] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in [
            "", "/abs", "a//b", "a/../b", "./a", "a/.", "a\\b", "a\0b", "a/\nb",
        ] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
