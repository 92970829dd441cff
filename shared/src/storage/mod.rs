//! Storage: the one small trait between the pipeline and where bytes live (a local directory
//! here, an S3 bucket in the Lambda). Keys are `/`-separated and validated before they touch a
//! file system or an API.
//!
//! The trait is a compare-and-swap store: [`Storage::get`] returns the version it read
//! (S3's ETag, a SHA-1 of the content locally), and [`Storage::put_if`] / [`Storage::delete_if`]
//! only act when the object still has the version the caller read. Versions are content
//! identities, so an A→B→A change is invisible to them — harmless, because every update
//! through them is a pure function of the content that was read.

pub mod appended;
pub mod encoding;
pub mod hooked;
pub mod local;
#[cfg(feature = "s3")]
pub mod s3;

use std::future::Future;
use std::io;
use std::path::Path;

use encoding::{EncodedMeta, Staged};
use std::pin::Pin;

pub use local::LocalStore;

/// What went wrong in a store, typed so callers can tell a retry from a lost race.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{0}: no such key")]
    NotFound(String),
    /// A conditional write or delete found another version than the one it named.
    #[error("{0}: changed since it was read")]
    PreconditionFailed(String),
    #[error("invalid key {0:?}")]
    InvalidKey(String),
    /// An input asks for more than a bounded operation allows (never retried).
    #[error("{0}")]
    TooLarge(String),
    /// The service answered with an error (S3): `retryable` for throttling and 5xx.
    #[error("{op}: {code} (HTTP {status}): {message}")]
    Service {
        op: &'static str,
        code: String,
        status: u16,
        retryable: bool,
        message: String,
    },
    /// A local file system error, or a transport error talking to a service.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<StorageError> for io::Error {
    fn from(e: StorageError) -> io::Error {
        let kind = match &e {
            StorageError::NotFound(_) => io::ErrorKind::NotFound,
            StorageError::PreconditionFailed(_) => io::ErrorKind::AlreadyExists,
            StorageError::InvalidKey(_) => io::ErrorKind::InvalidInput,
            StorageError::TooLarge(_) => io::ErrorKind::InvalidData,
            StorageError::Service { .. } => io::ErrorKind::Other,
            StorageError::Io(inner) => inner.kind(),
        };
        match e {
            StorageError::Io(inner) => inner,
            other => io::Error::new(kind, other),
        }
    }
}

pub type StorageResult<T> = Result<T, StorageError>;

/// Root of symdex's own bookkeeping inside a store (never served).
pub const STATE_PREFIX: &str = "_symdex";
/// Where upload records live (`refs`): a local store appends their versions (`appended`).
pub const UPLOADS_DIR: &str = "_symdex/uploads/";

/// The content identity symdex gives bytes it holds itself (a local store's versions and
/// ETags, generated objects on S3): their SHA-1, hex.
pub fn content_sha1(bytes: &[u8]) -> String {
    crate::digest::sha1_hex(bytes)
}

/// What a store is like, where the reference protocol's paths fork: read once from
/// [`Storage::traits`] (a store's traits never change while it lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreTraits {
    /// Objects carry the owner their writer named ([`Storage::copy`]), so that a key needs no
    /// reference record while one upload alone references it (refs, invariant 7).
    pub names_owners: bool,
    /// A new store lays upload records out under their ingest location (refs,
    /// `UploadLayout`): where many writers share a store and every request counts (S3).
    pub uploads_by_location: bool,
    /// A [`CopySource::Key`] copy writes an alias that stores no bytes of its own (an S3
    /// website redirect to the source key) rather than a copy: the alias serves its target's
    /// bytes only while the target exists (refs, invariant 6).
    pub key_copies_are_aliases: bool,
    /// [`Storage::get`]'s version comes free with the bytes (S3: the ETag), rather than
    /// costing a pass over them (a local store hashes the content): where it costs, a read
    /// that may or may not be followed by a swap reads without it, and reads again if it is.
    pub versions_are_free: bool,
    /// A store of the flat upload layout (refs, `UploadLayout::Flat`) registers each upload
    /// in its ingest location's source record (`_symdex/sources/`), where a removal by
    /// ingest location finds it (S3's remover, one read). A local store keeps none: the CLI
    /// finds uploads by listing their records (`symdex delete`), and the record cost a file
    /// per input that nothing read; such a store's location is answered by that listing.
    pub source_records: bool,
}

impl Default for StoreTraits {
    fn default() -> Self {
        StoreTraits {
            names_owners: false,
            uploads_by_location: false,
            key_copies_are_aliases: false,
            versions_are_free: true,
            source_records: true,
        }
    }
}

/// What a store knows about one object without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: u64,
    /// Content identity: S3's ETag, or a SHA-1 of the content for a local store.
    pub etag: String,
}

/// A published object as its store describes it, with who wrote it ([`Storage::owned`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub info: ObjectInfo,
    /// The writer named when it was written (refs/: the SHA-1 of an upload id), if any.
    pub owner: Option<String>,
    /// The key it redirects to, for an S3 alias.
    pub alias_of: Option<String>,
    /// The content its writer named with the owner, where the store keeps it apart from the
    /// bytes: a local file can be changed in place and keep its attributes, so `info` (what
    /// is there now) may differ, which `verify` reports. `None`: `info` is it (an S3 object
    /// changes only by a new write, which names its own owner, or none).
    pub written: Option<ObjectInfo>,
}

/// A small object together with the version that was read (for a later conditional write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub bytes: Vec<u8>,
    pub version: String,
}

/// The condition of a conditional write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition<'a> {
    /// Only if the key does not exist (S3 `If-None-Match: *`).
    Absent,
    /// Only if the key holds this version (S3 `If-Match`).
    Version(&'a str),
}

/// Where a copy comes from.
#[derive(Debug, Clone, Copy)]
pub enum CopySource<'a> {
    /// A local file (an input of `symdex index`).
    File(&'a Path),
    /// Another key of the same store (aliases of already published content).
    Key(&'a str),
    /// Bytes made by symdex itself (small generated objects such as Sentry's `.meta`).
    Bytes(&'a [u8]),
    /// An object of another bucket (the ingest bucket), copied server-side. Its size and
    /// content identity are what the caller already read (one HEAD per upload, not per key).
    Object {
        bucket: &'a str,
        key: &'a str,
        version_id: Option<&'a str>,
        size: u64,
        etag: &'a str,
        /// Where the store may prove the object live by the copy itself ([`SeenCurrent`]).
        seen: Option<&'a SeenCurrent>,
    },
    /// `size` bytes at `offset` of another bucket's object (an archive entry stored
    /// uncompressed), copied server-side by ranged part copies; `etag` is its content identity.
    Range {
        bucket: &'a str,
        key: &'a str,
        version_id: Option<&'a str>,
        offset: u64,
        size: u64,
        etag: &'a str,
    },
}

impl<'a> CopySource<'a> {
    /// `size` bytes at `offset` of an object (or of a range of one) as a range copy source
    /// with content identity `etag`; `None` for sources that are not objects.
    pub fn range(&self, offset: u64, size: u64, etag: &'a str) -> Option<CopySource<'a>> {
        let (bucket, key, version_id, base) = match *self {
            CopySource::Object {
                bucket,
                key,
                version_id,
                ..
            } => (bucket, key, version_id, 0),
            CopySource::Range {
                bucket,
                key,
                version_id,
                offset,
                ..
            } => (bucket, key, version_id, offset),
            _ => return None,
        };
        Some(CopySource::Range {
            bucket,
            key,
            version_id,
            offset: base.checked_add(offset)?,
            size,
            etag,
        })
    }
}

/// Set by a store when a copy from an ingest object ([`CopySource::Object`]) read it as the
/// bucket's current object holding the indexed content: the version that was indexed, or in
/// an unversioned bucket the same ETag. The object was live at that moment — after the
/// upload was registered, as every copy of an upload is (refs/, invariant 4) — so the
/// Lambda's liveness check, asked after the copies (handler.rs, `ingest_alive`), needs no
/// request of its own. Never set is no answer: the check asks.
#[derive(Debug, Default)]
pub struct SeenCurrent(std::sync::atomic::AtomicBool);

impl SeenCurrent {
    pub fn mark(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn seen(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What every storage call returns: a future, so the Lambda runs its pipeline on the async
/// runtime (no thread parked per S3 request) and the local store answers at once.
pub type StorageFuture<'a, T> = Pin<Box<dyn Future<Output = StorageResult<T>> + Send + 'a>>;

/// Object storage as the pipeline needs it.
pub trait Storage: Send + Sync {
    /// Size and content identity, or `None` when the key does not exist.
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>>;
    /// Size, or `None` when the key does not exist.
    fn size<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move { Ok(self.head(key).await?.map(|i| i.size)) })
    }
    /// Whole small object (records, manifests) and its version, or `None` when absent.
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>>;
    /// [`Self::get`] without the version, for a read no conditional write follows (a local
    /// store's version is a hash of the content: a re-index read two records per input).
    fn read<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move { Ok(self.get(key).await?.map(|v| v.bytes)) })
    }
    /// Writes `bytes` atomically: readers see the old object or the new one, never a part.
    /// Says nothing of what it wrote: no caller needs its etag, and a local store would hash
    /// the bytes for one (a re-index's manifest, a megabyte per thousand inputs).
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()>;
    /// Conditional write; `Ok(Some(new version))`, or `Ok(None)` when the condition failed
    /// (someone else wrote first). Atomic against every other writer of the store, in this
    /// process or another.
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>>;
    /// Deletes `key` only if it still holds `version`; `Ok(false)` when it changed or is gone.
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool>;
    /// Copies without passing the bytes through the caller where the store allows it; returns
    /// the size written. `known`: the source's size and content identity, which the caller
    /// always has (it publishes content it identified), so no store asks for them again (S3
    /// writing an alias) or computes them (a local store would read every hard link again).
    /// `owner`: the writer to name in the object (where the store names owners,
    /// [`StoreTraits::names_owners`]; `None` names nobody).
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64>;
    /// [`Self::copy`] only where nothing is at `key` yet, decided by the store atomically
    /// against every other writer (S3: `If-None-Match: *`; a local store: a hard link, which
    /// never replaces a name). `Ok(None)`: something is there, whoever wrote it. The object
    /// and its owner appear together.
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>>;
    /// What is at `key` and who wrote it, read at once (one HEAD on S3).
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move {
            Ok(self.head(key).await?.map(|info| Owned {
                info,
                owner: None,
                alias_of: None,
                written: None,
            }))
        })
    }
    /// [`Self::owned`], without reading the object's bytes where the store keeps the content
    /// its writer named apart from them ([`Owned::written`]): `info` then carries the size
    /// found now and that written content identity, not a hash of the bytes. For listing
    /// every key's owner (`verify`, audits), and the look of the encode step after a copy
    /// (pipeline/encode.rs: the copy is checked against the same named content when served):
    /// a file changed in place is still told by its size, and by [`Self::head`]
    /// (`verify --deep`). Everywhere else, `owned`.
    fn owned_unread<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        self.owned(key)
    }
    /// Whether [`Self::copy_new`] of `source` (`size` bytes) fails wherever something is at
    /// the key, decided by the store atomically. Some S3-compatible servers ignore
    /// `If-None-Match` on CopyObject (moto_server does): there a copy may replace what it
    /// finds, and a writer must not rely on the copy alone (refs/, invariant 7).
    fn creates_only_new(&self, source: &CopySource<'_>, size: u64) -> bool {
        let _ = (source, size);
        true
    }
    /// What this store is like ([`StoreTraits`]): fixed for the store's life, so callers read
    /// it once.
    fn traits(&self) -> StoreTraits {
        StoreTraits::default()
    }
    /// Keys under `prefix`, in lexicographic order.
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>>;
    /// Every key under `prefix` handed to `each` as it is found, in no particular order,
    /// without the whole listing held: `verify` walks every key of a store (650,000 for
    /// 50,000 debug files, 70 MB as a list). By default from [`Self::list`].
    fn list_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            for key in self.list(prefix).await? {
                each(key);
            }
            Ok(())
        })
    }
    /// Every key under `prefix` with its size, handed to `each` as found: what a store holds,
    /// counted without reading any content (the audit page). By default a size lookup per
    /// key (a local store's is a stat); S3 takes the sizes its listing pages carry.
    fn list_sized_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String, u64) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            for key in self.list(prefix).await? {
                // Gone between the listing and the lookup: not held any more.
                if let Some(size) = self.size(&key).await? {
                    each(key, size);
                }
            }
            Ok(())
        })
    }
    /// Whether any key is under `prefix` (S3: a listing of one key).
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move { Ok(!self.list(prefix).await?.is_empty()) })
    }
    /// [`Self::read`] of an object that never changes once written (the store's layout
    /// marker): a store may answer later reads of it from memory (S3: once per process).
    fn read_settled<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        self.read(key)
    }
    /// Creates such an object only where none is; `false`: one was there (read it).
    fn create_settled<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let created = self.put_if(key, bytes, Precondition::Absent).await?;
            Ok(created.is_some())
        })
    }
    /// Deletes `key`; deleting a missing key is not an error.
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()>;
    /// Streams the bytes of `source` into `out` (what a compressed copy is made from,
    /// crate::encoded); returns how many.
    fn read_source<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        out: &'a mut (dyn io::Write + Send),
    ) -> StorageFuture<'a, u64>;
    /// Stores a staged compressed copy at `key` (a [`crate::storage::encoding::copy_key`]), naming the
    /// raw content it encodes; replaces one that is there.
    fn put_encoded<'a>(
        &'a self,
        key: &'a str,
        staged: &'a Staged,
        meta: &'a EncodedMeta,
    ) -> StorageFuture<'a, ()>;
    /// The size of the copy at `key` and what it says it encodes; `None` when there is none
    /// (or the object names no raw content).
    fn encoded<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<(u64, EncodedMeta)>>;
}

/// Rejects keys that could escape a store or mean something else than they say.
pub fn check_key(key: &str) -> StorageResult<()> {
    let bad = key.is_empty()
        || key.len() > 1024
        || key.starts_with('/')
        || key.contains('\\')
        || key.chars().any(char::is_control)
        || key
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        Err(StorageError::InvalidKey(key.to_string()))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::check_key;

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
