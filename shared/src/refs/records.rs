//! The records a store keeps under `_symdex/` (keys, uploads, sources, debug ids): what they
//! hold. Where each lives is layout.rs's, the protocol that changes them the other rooms'.

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

use super::lease::Lease;
use super::swap::parse;
#[cfg(doc)]
use super::RefStore;
use crate::storage::Versioned;
use crate::upload_meta::UploadMeta;

/// Who references one published key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub key: String,
    /// Content identity of what was written (ETag or SHA-1).
    pub etag: String,
    pub size: u64,
    /// Upload ids.
    pub refs: BTreeSet<String>,
    /// The upload whose bytes were first written here (empty: adopted, written outside
    /// symdex). Lets a retried run report the keys it published as published again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The object is an alias of this key, holding no bytes of its own (invariant 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
}

/// Where an upload is in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UploadState {
    /// Keys are being published (or a run died doing it: a re-run resumes).
    Indexing,
    /// Done and recorded in the manifest.
    #[default]
    Indexed,
    /// Its references are being removed (the record disappears when that is done).
    Removing,
}

/// One upload and everything it published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    pub upload: String,
    /// Where it came from: a local path or `s3://bucket/key`.
    pub source: String,
    #[serde(flatten)]
    pub meta: UploadMeta,
    pub etag: String,
    pub size: u64,
    pub time: String,
    /// The ingest object's version id (S3, versioned bucket) and content identity (for an
    /// archive entry, the archive's), and the path inside it for an archive entry: what a
    /// sweeper deletes and what records name. Absent in records written before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(default)]
    pub state: UploadState,
    /// Keys it references.
    pub keys: BTreeSet<String>,
    /// The runs whose `create` leases on `keys` this listing ends (invariant 1): a lease
    /// another run of the upload took meanwhile stays in force until that run lists or
    /// releases it.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub runs: BTreeSet<String>,
    /// Keys it may reference that `keys` does not list yet (invariant 4: a key is listed in
    /// one of the two before a reference to it is added); a removal takes the references of
    /// all (`all_keys`). Records written before this kept every key in both.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub planned: BTreeSet<String>,
    /// An ELF debug file: the source paths its DWARF names (formats::dwarf).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_paths: Vec<String>,
    /// A loose source file keyed under a source root: where it sat in its source tree
    /// (`Upload::source_path`). A hand-over re-indexes it from anywhere with the same path,
    /// so it takes the keys it waits for (the path from the indexer's directory would be
    /// another). Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_path: Option<String>,
    /// A source upload: the join record it offers itself in (sourcemap.rs), from which its
    /// removal withdraws the offer. Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_in: Option<String>,
    /// Identified as a source file when no binary format matched (`IdentifyOptions`): a
    /// hand-over identifies it so again, whatever its own run was told.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_source: bool,
    /// While `removing`: keys already unpublished (a retried removal reports them too).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub removed: BTreeSet<String>,
    /// What its last complete run came to, when every planned key was published or found
    /// unchanged (`Indexer::already_indexed` answers a re-delivery from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexed_as: Option<IndexedAs>,
}

/// An upload record read and not parsed yet ([`RefStore::upload_unparsed`]).
#[derive(Debug)]
pub struct UnparsedUpload {
    pub(super) file: String,
    pub(super) bytes: Option<Vec<u8>>,
}

impl UnparsedUpload {
    /// What [`RefStore::upload_read`] returns, from these bytes.
    pub fn parse(self) -> io::Result<(Option<UploadRecord>, Option<PriorRead>)> {
        Ok(match self.bytes {
            Some(bytes) => (Some(parse(&self.file, &bytes)?), None),
            None => (None, Some(PriorRead(None))),
        })
    }
}

/// An upload record as it was read, for the compare-and-swap of a [`RefStore::plan`] that
/// follows (saves reading it again; a swap on an older version fails and reads anew).
#[derive(Debug, Clone)]
pub struct PriorRead(pub(super) Option<Versioned>);

impl PriorRead {
    /// The record taken to be absent without a read (a first delivery of a new upload): the
    /// plan creates it, and reads it if it is there after all.
    pub fn absent() -> Self {
        PriorRead(None)
    }

    /// Whether the record was read (or taken to be) absent.
    pub(crate) fn is_absent(&self) -> bool {
        self.0.is_none()
    }
}

/// Which run of an upload [`RefStore::finalize`] ends.
#[derive(Debug, Clone, Copy)]
pub enum Run<'a> {
    /// Another upload's indexer holding keys for it (invariant 5): its state stays.
    Partial,
    /// Its own run, done: what it came to, when a re-delivery may be answered from it.
    Complete(Option<&'a IndexedAs>),
}

/// An upload as its last complete run indexed it: enough to answer a re-delivery of the same
/// bytes without identifying them again or reading a key's record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedAs {
    /// Digest of everything besides the bytes that decides the keys (the indexer's version,
    /// its key configuration, the upload's identify options): a run under another plan
    /// goes the whole way.
    pub plan: String,
    /// How many keys it referenced: more now means another upload's indexer added some for
    /// it since (invariant 5), and the next delivery runs in full to report them.
    pub referenced: usize,
    /// One manifest record per identity, trimmed to what the upload does not say itself
    /// (identity, name, reason; keys holding other content under `conflicts`; its own keys
    /// are in `unchanged_at`).
    pub records: Vec<crate::manifest::Record>,
    /// Each record's own keys, as positions in the upload record's `keys` (sorted), in the
    /// order its run reported them: the names are not written twice (a re-index reads every
    /// upload record, and the second copy of an ELF's key list was a third of one). Valid
    /// while `keys` has `referenced` entries: keys are only added to an indexed upload, so
    /// the same count is the same set. Records written before it existed listed the names
    /// under `unchanged`, under another plan digest (`KEPT_RECORDS` in pipeline/): never
    /// answered from, rewritten by the next full run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchanged_at: Vec<Vec<u32>>,
    /// Planned keys the run found holding other content: never referenced, so never listed
    /// under `keys`. A redelivery reports them as conflicts again (a conflict is the upload's
    /// decision, as a publication is: a key freed later is not taken by a redelivery).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub conflicts: BTreeSet<String>,
}

impl UploadRecord {
    /// Takes how `latest` was indexed (a run of the same bytes at the same location, with
    /// other options or from another directory): what a hand-over repeats, and where its
    /// offer is. `true` if anything changed.
    pub(super) fn take_plan_of(&mut self, latest: &UploadRecord) -> bool {
        let plan = |r: &UploadRecord| (r.source_path.clone(), r.offered_in.clone(), r.as_source);
        let changed = plan(self) != plan(latest);
        self.source_path.clone_from(&latest.source_path);
        self.offered_in.clone_from(&latest.offered_in);
        self.as_source = latest.as_source;
        changed
    }

    /// Lists `keys` as planned where neither list has them; `true` if any was new.
    pub(super) fn plan_keys(&mut self, keys: &BTreeSet<String>) -> bool {
        let new: Vec<String> = keys
            .iter()
            .filter(|k| !self.keys.contains(*k) && !self.planned.contains(*k))
            .cloned()
            .collect();
        let changed = !new.is_empty();
        self.planned.extend(new);
        changed
    }

    /// Every key the upload may hold a reference to.
    pub fn all_keys(&self) -> BTreeSet<String> {
        self.keys.union(&self.planned).cloned().collect()
    }

    /// Keys it planned and does not reference: where it may wait for another upload's bytes
    /// (invariant 8).
    pub(crate) fn unreferenced(&self) -> BTreeSet<String> {
        self.planned.difference(&self.keys).cloned().collect()
    }
}

/// The uploads of one ingest location (for removals by key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub source: String,
    pub uploads: BTreeSet<String>,
    /// A local input file as it was when last hashed: a re-index of the same file trusts its
    /// content identity instead of reading it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileStamp>,
}

/// A local file's status and the content identity (SHA-1) read from it, as git's index keeps
/// them: the same size, modification and change times (nanoseconds), inode and device mean
/// the same bytes. The change time cannot be set back by a user, and a stamp is only taken of
/// a file not modified within [`FileStamp::SETTLED`] of the stat (a write in the same clock
/// tick as the stat would otherwise go unseen).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
    pub device: u64,
    pub etag: String,
}

impl FileStamp {
    /// How long a file must have been left alone before its stamp is trusted.
    pub const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

    /// Whether `other` describes the same file status (its etag aside).
    pub fn same_status(&self, other: &FileStamp) -> bool {
        (
            self.size,
            self.mtime_ns,
            self.ctime_ns,
            self.inode,
            self.device,
        ) == (
            other.size,
            other.mtime_ns,
            other.ctime_ns,
            other.inode,
            other.device,
        )
    }
}

/// PE <-> PDB name aliasing for one debug id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRecord {
    /// A key holding the PDB's content, once one was published.
    pub pdb_key: Option<String>,
    /// The file name that copy was uploaded under (set with `pdb_key`; absent in records
    /// written before it was kept): a PE naming the PDB so has nothing to alias — its keys
    /// are the PDB's own — and records its name without asking whether the copy is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb_name: Option<String>,
    /// PDB file names as PEs' CodeView records spell them.
    pub names: BTreeSet<String>,
}

/// An upload record that may still gain keys or metadata: not being removed.
pub(super) fn not_removing(record: &UploadRecord) -> bool {
    record.state != UploadState::Removing
}
