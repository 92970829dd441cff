//! References: which uploads need each published key (SymStore's `refs.ptr`, as JSON objects),
//! and the protocol that keeps keys published exactly while they are needed.
//!
//! - `_symdex/refs/<key>.json`: the key's content identity, the uploads referencing it, and the
//!   lease of a change to the object in progress. Where objects name their owner, only for a
//!   key two uploads share or a removal holds (invariant 7): else the object's owner, the name
//!   of an upload's record (S3 metadata `symdex-owner`, a local file's extended attribute
//!   `user.symdex.owner`), stands for it.
//! - `_symdex/uploads/<sha1 of location>/<sha1 of upload id>.json`: one upload, its state and
//!   its keys, named under the ingest location it came from, which a removal lists
//!   ([`UploadLayout::ByLocation`], new S3 stores). Stores made before, and local stores
//!   ([`UploadLayout::Flat`]), keep `_symdex/uploads/<sha1 of upload id>.json` and a record
//!   of each location's uploads, `_symdex/sources/<sha1 of source>.json`. The store's
//!   layout is decided once and kept in `_symdex/layout.json` ([`RefStore::layout`]). A local
//!   store appends each new version of an upload record to its file (`storage::appended`).
//! - `_symdex/stamps/<sha1 of directory>.json`: the CLI's stamps of its input files by
//!   directory (`src/stamps.rs`), a cache of their content identities no invariant here
//!   depends on.
//! - `_symdex/ids/<debug id>.json`: PDB names recorded by PEs' CodeView records, and where a PDB
//!   with that id was published, so a PDB is reachable under the exact name its PE uses.
//! - `_symdex/sourcemap/<scope>/<bucket>.json`: source files offered and source paths wanted,
//!   joined by path (sourcemap.rs).
//!
//! # Invariants
//!
//! Every record changes only by compare-and-swap on the version that was read
//! ([`Storage::put_if`], [`Storage::delete_if`]), so concurrent writers never lose each
//! other's updates. On top of that:
//!
//! 1. **Objects change under a lease.** The object at a key is written or deleted only by the
//!    holder of the lease in the key's record, taken by compare-and-swap. Nobody else writes it,
//!    removes a reference that would empty it, or takes the lease while it is live. A holder acts
//!    only while its lease runs (`until`, longer than any run of the function that took it); a
//!    lease past its time, or any lease but one's own while holding the local store's writer lock,
//!    was left by a dead process and is taken over. The holder is the operation and the upload
//!    (`index:<upload>`, `remove:<upload>`): a retried message takes its own earlier attempt's
//!    lease over at once, which is safe because both attempts mean the same bytes (or the same
//!    removal) for the same upload. A removal handing a key on to another upload (invariant 5)
//!    holds that upload's lease and says so ([`Lease::acting`]): it takes over at once only its own
//!    removal's earlier attempt's, and waits for a live lease any other run holds for that upload —
//!    its retry may never meet the key again (the offer it withdraws may be dropped meanwhile), so
//!    a lease it took over and then left would stay, listed by nobody, until it ran out. Taken
//!    over, a lease is written anew with the taker's run (`Lease::run`, one per [`RefStore`]): the
//!    earlier attempt may be alive (a message delivered twice at once), and the two must not end
//!    each other's lease — a release ends a lease only as its run took it, and a listing only the
//!    `create` leases of the runs it names (`UploadRecord::runs`), so a removal waits for a run
//!    still copying instead of deleting what that run then writes again. A key without a record
//!    gets a `create` lease: no symdex object is there (its objects always have a record), so its
//!    holder, or whoever takes it over, writes only where nothing is (`Storage::copy_new`) and
//!    leaves anything found there alone unless it holds the same bytes (adopted) or the upload
//!    overwrites; otherwise the record goes and the key is a conflict. A `create` lease whose
//!    holder wrote the object (or found its own earlier attempt's) is not released by a write: the
//!    record was created saying what the object will hold, and the lease ends when the holder's
//!    upload record lists the key among its `keys` for the lease's run (its finalize, after every
//!    copy of the run) — one write per key saved on S3. The same goes for a `create` lease on a
//!    record written as sharing another upload's object (invariant 7). Whoever meets such a lease reads the
//!    holder's upload record first (`RefStore::settle`); a run that takes its references back, or
//!    fails, never lists them, and releases them by a write each ([`RefStore::release_created`]) —
//!    else its retry takes them over, or they run out.
//! 2. **A record without a lease describes its object**: the object exists and holds the
//!    recorded content. So a key with references and no lease is published (and so is a key
//!    without a record whose object names an upload, invariant 7). Sole-writer form
//!    (the local store's writer lock, `LeasePolicy::exclusive`) where objects name no owner
//!    (invariant 7 otherwise): a key with neither record nor object is created record first,
//!    without a lease, then the object. Until the copy is
//!    done (or after a crash in between) the record names an object that is not there, which
//!    is safe because nothing else runs: a re-run finds its own reference to a missing object
//!    and copies it again (the `Check` path), a removal deletes the record and finds no
//!    object, and `verify` reports the key as missing. Only absent objects are created this
//!    way, so a record never claims content another object holds.
//! 3. **Only an empty record is removed.** The object is deleted only after the record was
//!    swapped to an empty tombstone holding the remover's lease; an indexer meeting a live
//!    tombstone waits, one meeting a dead one takes it over.
//! 4. **No reference outlives its upload.** An upload's keys are listed in its upload record
//!    (`planned`) before any reference to them is added; whoever adds a reference for upload U
//!    then re-reads U's record (finalize) and takes the reference back if U is being removed;
//!    the remover marks U `removing` before it removes the references of every listed key.
//!    Either the remover's list holds the key, or the adder sees the mark.
//! 5. **A key is held by the uploads whose bytes it serves**: an alias copy of a PDB made
//!    when its PE arrives is referenced by the PDB's uploads, not the PE's, so the outcome
//!    does not depend on which arrived first. A copy of a PDB uploaded under another name
//!    than the copy recorded (and live) serves that copy's name too, for the same reason: a
//!    PE naming it may have arrived before or after it (`Indexer::remember_pdb`). A first
//!    delivery of either creates the debug id's record unread ([`RefStore::create_id`], a
//!    write only where none is): created, there was nothing to see (no name, no copy);
//!    refused, it reads and swaps as if the guess had not been made. A PE reads the PDB
//!    copy's holders after its swap records its name; a copy that published under names
//!    it found (another live copy's among them, joining that copy's key) reads the record
//!    again: one of the two sees the other, so no name is lost with the kept copy.
//! 6. **An alias never outlives its target.** Where the store writes a copy from another key
//!    as an alias that holds no bytes (S3 redirect objects, `Storage::key_copies_are_aliases`),
//!    the key's record names its target (`alias_of`), and every upload referencing the alias
//!    references the target too: the writer of an alias copies from a key it references
//!    itself, and an upload that finds an alias already there adds a reference to its target
//!    (publishing it from its own bytes if it is gone) before it is done — so does a key
//!    published on another upload's behalf (a PE's alias of its PDB, a source's hand-over:
//!    `Indexer::hold_for`), for that upload. A target is removed
//!    only without references (invariant 3), so not while an alias's referrer lives.
//! 7. **A key one upload alone references needs no record** where objects name their owner
//!    ([`Storage::names_owners`]: S3 metadata, a local file's extended attribute), whether
//!    writers run at once or one holds the writer lock (which then only takes every other
//!    lease over at once). Its object, created only where nothing is (`Storage::copy_new`,
//!    where the store decides that atomically: [`Storage::creates_only_new`]), names the upload
//!    ([`RefStore::owner_token`]), and stands for the record `{refs: [upload], by: upload}`
//!    (of the content its writer named with it, where the store keeps that apart from the
//!    bytes: `Owned::written`): a fresh key costs one request, and a local one no record
//!    file. Everything else goes through a record, and a record, once there, decides (an
//!    object's owner is then only read to tell whose bytes are there):
//!    - a second upload finding the same content creates the key's record (only where no
//!      record is) naming both uploads, the owner as `by`, under a `create` lease, and then
//!      looks at the object again: the owner's removal, meeting the lease, waits instead of
//!      deleting the object the sharer is about to reference, and one that deleted it
//!      before the record was there is seen by that look (the record then goes back to
//!      naming the sharer alone, who creates the object). Found still there, the record
//!      says what is there, and the lease ends with the sharer's finalize (invariant 1);
//!    - a removal finding no record creates a tombstone naming the upload, only where no
//!      record is (so a sharer's record and the tombstone exclude each other), then deletes
//!      the object only if it names that upload;
//!    - every removal deletes only the object its tombstone is for: one naming the record's
//!      `by`, or nobody (written before owners were named, or adopted). A writer that found
//!      the key free after the object went (it needs no record to create one) named itself,
//!      so a retried removal still holding its tombstone leaves that object alone — the race
//!      that made a record per key necessary before objects named their owner;
//!    - the writers of a record's object (a lease's copy, a repair, an overwrite) name the
//!      record's `by`; an object of the same content found under a `create` lease whose owner
//!      is another upload makes the record name that upload too (and as `by`), one whose
//!      owner's upload is gone is replaced by ours;
//!    - a writer that neither overwrites nor adopts and finds other content at a key, not
//!      its own, reports a conflict on what it found, without a record: it takes no
//!      reference, so nothing is left to keep. What the record protocol could still change
//!      is a change already in progress — a removal about to delete the object, an
//!      overwriting writer about to replace it (with this very content, even) — and the
//!      conflict is then the outcome of the serial order in which it came first.
//! 8. **A key another upload's bytes hold is handed over when they go.** An upload that
//!    finds other content at one of its keys (a conflict) records that it waits for the key
//!    (`_symdex/waiting/<sha1 of key>/<sha1 of upload>.json`, [`RefStore::wait_for`]), then
//!    looks at the key again. A removal that deleted a key's object (now, or in an earlier
//!    attempt: the keys its record notes `removed`) lists the key's waiters, and re-indexes
//!    each live one from its ingest object ([`crate::pipeline::HandOver`]) before it
//!    forgets its own upload. Of the waiter's write and the removal's delete, whichever came
//!    second is seen by the other's later look: the waiter finds the key free (or holding
//!    its own content) and publishes it after all, or the removal finds the waiter.
//!    An overwrite (`--overwrite`) makes the uploads whose bytes it replaces such waiters:
//!    it marks them before the replacement (`RefStore::overwritten`), and their references
//!    go with it, so the overwriter's removal hands the key back (kept, they would have
//!    held its bytes after it went; where the object stood for the record, the key was lost
//!    with it). Their upload records still list the key: `verify` takes the marker as the
//!    reason, and the hand-back's re-index, referencing the key again, ends the wait (it is
//!    told which keys it was handed: `Config::handed`). A removal that dies before it is
//!    done hands over on its retry: its record stays
//!    `removing`, and a marker stays until its upload references the key (the re-index
//!    deletes it), its upload's removal deletes it (with the keys that upload planned and
//!    did not reference), or a listing finds its upload gone or removing (a marker a crash
//!    left costs a re-index that changes nothing). Without this, deleting an unstripped binary unpublished the `debuginfo` of
//!    the separate debug file that lives on, whose bytes were nowhere in the store.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::manifest::UploadMeta;
use crate::sourcemap::SourceMapRecord;
use crate::storage::{
    CopySource, ObjectInfo, Owned, Precondition, Storage, StorageError, Versioned,
};

/// Root of symdex's own bookkeeping inside a store (never served).
pub const STATE_PREFIX: &str = "_symdex";
/// Compare-and-swap attempts of one update before giving up (each attempt lost a race, so
/// this many means heavy contention; the caller retries the whole message later).
const MAX_ATTEMPTS: usize = 64;
/// The lease of a key that had no record: nothing symdex wrote is there, but something written
/// outside symdex may be. Its holder (or whoever takes it over) creates the object only where
/// nothing is (`Storage::copy_new`), and decides on what it finds there only then: the same
/// content is adopted, other content is a conflict. No HEAD is asked first, and the lease is
/// released by the upload record listing the key (invariant 1). Where objects name their
/// owners, a fresh key takes no lease at all (invariant 7): this is then how a key whose
/// record is a dead remover's tombstone is taken back.
const CREATE: &str = "create";

/// A change of the object at one key in progress (invariant 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it (one id per indexer instance).
    pub holder: String,
    /// Unix seconds after which the holder is presumed dead.
    pub until: u64,
    /// `copy` or `remove`.
    pub op: String,
    /// The run that took it (unique per [`RefStore`]): two runs of one upload at once (a
    /// message delivered twice) hold the same `holder`, and must not end each other's leases
    /// (invariant 1). Empty in leases written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run: String,
    /// The upload whose removal hands the key on to `holder` (a source's withdrawal serving
    /// a path from another source, invariant 5); empty for anyone else. Such a lease is taken
    /// over at once only by another attempt of the same removal, and takes nobody else's
    /// live lease over (invariant 1).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub acting: String,
}

/// One key's turn among keys published at once ([`RefStore::publish_in_turn`]): it waits
/// for the key before it to decide, and tells the key after it when it has (or when it is
/// dropped: a key that failed keeps nobody waiting).
pub struct InTurn {
    after: Option<tokio::sync::oneshot::Receiver<()>>,
    // Dropping the sender is the signal.
    _tells: tokio::sync::oneshot::Sender<()>,
}

impl InTurn {
    /// Turns for `n` keys, in order.
    pub fn chain(n: usize) -> Vec<InTurn> {
        let mut turns = Vec::with_capacity(n);
        let mut after = None;
        for _ in 0..n {
            let (tells, next) = tokio::sync::oneshot::channel();
            turns.push(InTurn {
                after: after.replace(next),
                _tells: tells,
            });
        }
        turns
    }

    async fn wait(&mut self) {
        if let Some(after) = self.after.take() {
            // Told or dropped: either way the key before has decided (or failed).
            let _ = after.await;
        }
    }
}

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
    file: String,
    bytes: Option<Vec<u8>>,
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
pub struct PriorRead(Option<Versioned>);

impl PriorRead {
    /// The record taken to be absent without a read (a first delivery of a new upload): the
    /// plan creates it, and reads it if it is there after all.
    pub fn absent() -> Self {
        PriorRead(None)
    }

    /// Whether the record was read (or taken to be) absent.
    pub fn is_absent(&self) -> bool {
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
    /// under `unchanged`, under another plan digest (`KEPT_RECORDS` in pipeline.rs): never
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
    fn take_plan_of(&mut self, latest: &UploadRecord) -> bool {
        let plan = |r: &UploadRecord| (r.source_path.clone(), r.offered_in.clone(), r.as_source);
        let changed = plan(self) != plan(latest);
        self.source_path.clone_from(&latest.source_path);
        self.offered_in.clone_from(&latest.offered_in);
        self.as_source = latest.as_source;
        changed
    }

    /// Lists `keys` as planned where neither list has them; `true` if any was new.
    fn plan_keys(&mut self, keys: &BTreeSet<String>) -> bool {
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
    pub fn unreferenced(&self) -> BTreeSet<String> {
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

/// How long to wait for somebody else's live lease before giving up (the caller then fails
/// the message or the run, to be retried).
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub attempts: u32,
    pub first_pause: Duration,
    pub max_pause: Duration,
}

impl Default for Wait {
    fn default() -> Self {
        Wait {
            attempts: 30,
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_secs(2),
        }
    }
}

/// How leases are taken and judged.
#[derive(Debug, Clone)]
pub struct LeasePolicy {
    /// Lease length: longer than the longest run of whoever takes one (the Lambda timeout).
    pub duration: Duration,
    /// This process holds the store's writer lock: every other holder is dead.
    pub exclusive: bool,
    pub wait: Wait,
}

impl Default for LeasePolicy {
    fn default() -> Self {
        LeasePolicy {
            // Lambda's longest timeout, plus a margin for clock skew.
            duration: Duration::from_secs(15 * 60 + 60),
            exclusive: false,
            wait: Wait::default(),
        }
    }
}

/// What [`RefStore::publish`] does where a key's record names other content than the
/// upload's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDifferent {
    /// Leave it, report a conflict.
    Conflict,
    /// Replace it (`--overwrite`).
    Overwrite,
    /// Take the published copy as this upload's: content symdex generates from an upload (a
    /// section, a sidecar) whose identity depends on how it was copied (an S3 part copy's
    /// ETag), so a live copy of it serves as well as a new one. An object written outside
    /// symdex is still a conflict.
    Adopt,
}

impl OnDifferent {
    /// `--overwrite` or not.
    pub fn overwrite(overwrite: bool) -> Self {
        if overwrite {
            OnDifferent::Overwrite
        } else {
            OnDifferent::Conflict
        }
    }
}

/// What one key's publication came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOutcome {
    /// Bytes were written now, or by this same upload in an earlier, unfinished attempt.
    Published,
    /// The key already held this content; the upload now references it.
    Unchanged,
    /// The key holds other content (not overwritten): not referenced.
    Conflict,
}

/// A key's outcome, with what its publication learned on the way of the key's alias target
/// (invariant 6: an upload finding an alias in place holds its target too), so that the
/// upload need not read the key's record again to find out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub outcome: KeyOutcome,
    /// Found in place ([`KeyOutcome::Unchanged`]): the target the key's record names, as the
    /// publication left the record (every way to that outcome learns it). Else none.
    pub alias_of: Option<String>,
}

impl From<KeyOutcome> for Publication {
    /// An outcome other than [`KeyOutcome::Unchanged`], which comes with its target.
    fn from(outcome: KeyOutcome) -> Self {
        debug_assert_ne!(
            outcome,
            KeyOutcome::Unchanged,
            "a key found in place names its target"
        );
        Publication {
            outcome,
            alias_of: None,
        }
    }
}

/// What taking one reference back came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// It was the last reference: the object was deleted.
    Removed,
    /// Other uploads still reference the key.
    Kept,
    /// The upload did not reference the key.
    NotReferenced,
}

/// The content an upload wants at a key.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    pub etag: &'a str,
    pub size: u64,
    pub source: CopySource<'a>,
}

/// One step of a read-modify-write.
enum Step<T, R> {
    Write(T, R),
    Delete(R),
    Keep(R),
    /// Nothing written, and what was read handed back: the caller learns more, then may
    /// decide again on that read.
    KeepRead(R),
    /// Somebody else's live lease: wait, then read again.
    Wait(String),
}

/// Who publishes a key: the upload referencing it, and the removal handing it on to that
/// upload, where one does (empty else; [`Lease::acting`]).
#[derive(Clone, Copy)]
struct Publisher<'a> {
    upload: &'a str,
    acting: &'a str,
}

/// How [`RefStore::copy_under_lease`] treats an object it finds at the key.
#[derive(Clone)]
struct CopyHow {
    /// Other content is replaced (else: a conflict).
    overwrite: bool,
    /// The lease was our own earlier attempt's (the same content there is our copy).
    own: bool,
    /// The upload the record names as the object's writer (`by`): the owner a write names
    /// (invariant 7).
    by: String,
    /// Any content found at the key is taken as this content (`OnDifferent::Adopt`).
    adopt: bool,
    /// An object was found at the key just before: a [`CREATE`] lease looks before it
    /// creates (one request where it is still there, as it most likely is).
    seen: bool,
}

/// What a [`CREATE`] lease's holder found at the key.
enum Found {
    Created,
    /// An object with the same content (or any, adopting), whose it is, and what it holds.
    Same(SameBy, ObjectInfo),
    /// Other content: written outside symdex, or (where objects name their owners) the
    /// owner's, named.
    Other(Option<String>),
}

/// Whether the object `found` holds `content`, as its writer said it would: one whose bytes
/// are not what its owner wrote with it (a local file changed in place; a copy from a key
/// an overwrite replaced meanwhile, `Indexer::hold_for`) is not its owner's to share, even
/// where the bytes are ours.
fn holds(found: &Owned, content: &Content<'_>) -> bool {
    let as_written = found
        .written
        .as_ref()
        .is_none_or(|w| w.etag == found.info.etag && w.size == found.info.size);
    found.info.etag == content.etag && found.info.size == content.size && as_written
}

/// What creating an object only where nothing is came to ([`RefStore::create_or_find`]).
enum Creation {
    Created,
    /// Something is there: what, and whose.
    Found(Owned),
    /// The copy failed; nothing was created.
    Failed(StorageError),
}

/// What publishing a key as its object alone came to ([`RefStore::publish_owned`]).
enum Alone {
    /// No record needed: the key's outcome.
    Done(Publication),
    /// For the record protocol to decide, on the key's record where it was just read; with
    /// the other upload whose object of this content was found there, to be shared.
    Decide(Option<Versioned>, Option<Sharing>),
}

/// Another upload's object found at a key without a record, which this upload shares
/// (invariant 7): whose it is, and what it holds.
#[derive(Debug, Clone)]
struct Sharing {
    /// The upload its owner names, and the owner as the object names it.
    other: String,
    owner: String,
    alias_of: Option<String>,
    info: ObjectInfo,
}

/// Who else wrote the same content found at a key (invariant 7).
enum SameBy {
    /// Nobody named (written outside symdex): adopted, unless our own earlier attempt's.
    Nobody,
    /// This upload (an earlier or concurrent run of it).
    Us,
    /// Another upload, still there: both reference the key now.
    Upload(String, Option<String>),
    /// Ours to write again: an upload whose record is gone named it (an orphan), or this
    /// upload did and it holds other bytes now (changed behind symdex's back: repaired).
    Replace,
}

/// What a removal's compare-and-swap on a key's record came to.
struct Taken {
    outcome: RemoveOutcome,
    /// The tombstone's lease, when the object is to go.
    lease: Option<Lease>,
    /// Whom the record names as the object's writer.
    by: String,
    /// A tombstone made where no record was (invariant 7): only an object naming `by` as its
    /// owner is the one it is for.
    owned_only: bool,
}

/// What [`RefStore::publish`] does after its compare-and-swap.
enum PublishPlan {
    /// We hold the lease now: copy, then release. With the record as written (to release it
    /// by one conditional write on the version the swap returned). A `create` lease copies
    /// only where nothing is at the key (see [`CREATE`]).
    /// `true`: the lease was taken over from an earlier attempt of the same upload, so the
    /// same content found at the key is its own copy (published), not adopted.
    Copy(Lease, Box<KeyRecord>, bool),
    /// A sole writer's new key, its record written in its final state: copy.
    CopySole,
    /// Referenced, no lease needed: check the object is there, of the recorded size.
    Check {
        by_us: bool,
        size: u64,
        /// The target the record names.
        alias_of: Option<String>,
    },
    Done(KeyOutcome),
    /// No record: first ask what is at the key (an object written outside symdex).
    NeedHead,
    /// We hold a `create` lease on a record written as sharing another upload's object, seen
    /// just before: confirm the object is still that upload's ([`RefStore::share_created`]).
    Share(Lease, Box<KeyRecord>, Sharing),
    /// Decided on a guess that the key has no record (a fresh upload's first swap, not a
    /// read): read it, and decide again.
    Reread,
    /// The record holds a `create` lease of this upload's run: read which keys its upload
    /// record lists (a listed key's lease is released, invariant 1), and decide again.
    Learn(String),
    /// An overwrite replaces these uploads' bytes: mark them waiting for the key first
    /// (invariant 8), and decide again.
    MarkWaiting(BTreeSet<String>),
}

/// Where upload records live.
pub(crate) const UPLOADS_DIR: &str = "_symdex/uploads/";
/// Where a [`UploadLayout::Flat`] store keeps its source records.
const SOURCES_DIR: &str = "_symdex/sources/";
/// Uploads waiting for keys other content holds (invariant 8).
const WAITING_DIR: &str = "_symdex/waiting/";
/// The store's [`UploadLayout`], written once.
pub const LAYOUT_FILE: &str = "_symdex/layout.json";

/// How a store names its upload records: decided once per store and kept in its marker
/// ([`LAYOUT_FILE`]), so every writer follows the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UploadLayout {
    /// `_symdex/uploads/<sha1 of upload>.json`, and per ingest location a source record
    /// listing its uploads (`_symdex/sources/`, written by the plan): stores made before
    /// upload records were named by location, and local stores (the CLI keeps an input's
    /// file stamp in its source record).
    Flat,
    /// `_symdex/uploads/<sha1 of location>/<sha1 of upload>.json` ([`location_of`]): the
    /// upload record is the upload's registration with its location, found by a removal
    /// listing the location's directory — no source record, one request less per artifact.
    /// New S3 stores ([`Storage::uploads_by_location`]).
    ByLocation,
}

/// The marker's content.
#[derive(Serialize, Deserialize)]
struct LayoutMarker {
    uploads: UploadLayout,
}

/// The location an upload id names: up to its first `@` (every id names its location, then
/// `@` and a version or content identity) or `!/` (an archive's entry), whichever comes
/// first. A location holding either is cut short the same way for each of its uploads and
/// for its removal: it shares a directory with the locations that begin alike, told apart
/// by their records' `source`.
pub fn location_of(upload: &str) -> &str {
    let cut = [upload.find('@'), upload.find("!/")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(upload.len());
    &upload[..cut]
}

/// The name of an upload's record under [`UPLOADS_DIR`], which is also the owner its
/// objects name (invariant 7): SHA-1s, short and ASCII as S3 metadata must be, so the
/// upload is found from its object.
fn upload_name(layout: UploadLayout, upload: &str) -> String {
    let leaf = crate::digest::sha1_hex(upload.as_bytes());
    match layout {
        UploadLayout::Flat => leaf,
        UploadLayout::ByLocation => format!("{}/{leaf}", location_dir(upload)),
    }
}

/// The directory of a location's upload records in a [`UploadLayout::ByLocation`] store.
fn location_dir(location: &str) -> String {
    crate::digest::sha1_hex(location_of(location).as_bytes())
}

fn upload_file(layout: UploadLayout, upload: &str) -> String {
    format!("{UPLOADS_DIR}{}.json", upload_name(layout, upload))
}

/// Whether `owner` has the form of an upload record's name (either layout's).
fn is_upload_name(owner: &str) -> bool {
    let sha1 = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    match owner.split_once('/') {
        Some((dir, leaf)) => sha1(dir) && sha1(leaf),
        None => sha1(owner),
    }
}

fn key_file(key: &str) -> String {
    format!("{STATE_PREFIX}/refs/{key}.json")
}

/// Whether `key`'s reference record (`_symdex/refs/<key>.json`) stays within S3's 1,024-byte
/// keys: with a long layout prefix it could outgrow them, and such a key is never published.
pub fn record_fits(key: &str) -> bool {
    key_file(key).len() <= 1024
}

/// The waiters of one key, by the key's SHA-1 (no key's directory holds another's).
fn waiting_dir(key: &str) -> String {
    format!("{WAITING_DIR}{}/", crate::digest::sha1_hex(key.as_bytes()))
}

fn waiting_file(key: &str, upload: &str) -> String {
    format!(
        "{}{}.json",
        waiting_dir(key),
        crate::digest::sha1_hex(upload.as_bytes())
    )
}

/// An upload waiting for a key that holds other content (invariant 8).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Waiting {
    pub key: String,
    pub upload: String,
}

fn source_file(source: &str) -> String {
    format!(
        "{SOURCES_DIR}{}.json",
        crate::digest::sha1_hex(source.as_bytes())
    )
}

fn id_file(debug_id: &str) -> String {
    format!("{STATE_PREFIX}/ids/{debug_id}.json")
}

/// Whether `current` (a record as read) already holds `value`, serialised as `bytes`.
/// Records are written compact; stores written before that hold them pretty-printed, and an
/// unchanged one is left as it is (a re-index writes no record).
fn same_record<T: Serialize>(current: &[u8], bytes: &[u8], value: &T) -> io::Result<bool> {
    Ok(current == bytes
        || (current.starts_with(b"{\n") && current == serde_json::to_vec_pretty(value)?))
}

/// A record read. Checked as UTF-8 whole, then parsed as text: `from_slice` checks each
/// string it reads on its own, a sixth of parsing the upload records a re-index reads.
fn parse<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> io::Result<T> {
    let invalid = |e: &dyn std::fmt::Display| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{key}: {e}"))
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(&e))?;
    serde_json::from_str(text).map_err(|e| invalid(&e))
}

/// An upload record that may still gain keys or metadata: not being removed.
fn not_removing(record: &UploadRecord) -> bool {
    record.state != UploadState::Removing
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn index_holder(upload: &str) -> String {
    format!("index:{upload}")
}

/// The upload whose run holds `lease`, if it is a `create` lease (released by that upload's
/// finalize, invariant 1).
fn created_by(lease: &Lease) -> Option<&str> {
    if lease.op == CREATE {
        lease.holder.strip_prefix("index:")
    } else {
        None
    }
}

/// Whether a `create` lease is released without a write: its holder's upload lists `key`
/// for the lease's run (`listing`: an upload's listing, if it has a record). Other leases
/// are released by a write.
pub fn released_by_finalize(
    lease: &Lease,
    key: &str,
    listing: impl Fn(&str) -> Option<Listing>,
) -> bool {
    created_by(lease)
        .and_then(listing)
        .is_some_and(|listing| listing.ends(key, lease))
}

/// A run id unique to this process and call: a random per-process key (std's hasher seed)
/// hashed with a counter and the time — no crate needed for a nonce.
fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    format!("{:016x}", hasher.finish())
}

fn remove_holder(upload: &str) -> String {
    format!("remove:{upload}")
}

/// The error of a lease that stayed busy: retryable, never a verdict on the artifact.
pub fn busy(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::WouldBlock, format!("busy: {what}"))
}

/// A source-map record read before it is changed ([`RefStore::read_source_map`]).
pub struct SourceMapRead {
    /// What the store held (`None` inside: no record), for the swap; `None`: kept by a sole
    /// writer deferring its writes, no version to swap on.
    read: Option<Option<Versioned>>,
    pub record: Arc<SourceMapRecord>,
}

/// Bookkeeping over a store.
pub struct RefStore<'s> {
    store: &'s dyn Storage,
    policy: LeasePolicy,
    /// Source-map records as last parsed, by file, with their version: the debug files of one
    /// build all read the same few records (up to 512 entries each), and parsing them again
    /// for every file dominated a re-index. Only a read of the same version is answered from
    /// here, so the cache never changes what an update sees.
    parsed_source_maps: std::sync::Mutex<std::collections::HashMap<String, ParsedSourceMap>>,
    /// Source-map records changed by this process and not yet written (a sole writer's
    /// deferred writes, [`Self::defer_source_map_writes`]): file -> version read (`None`:
    /// absent), the record as it is now.
    deferred_source_maps: Option<Arc<DeferredWrites>>,
    /// `create` leases this process took and left to be released by their upload's finalize
    /// (invariant 1), by key, until the run hands them on ([`Self::take_held`]).
    /// (Ordered: the leases of a run are released in key order, so that a schedule of the
    /// interleaving tests replays from its seed.)
    held: std::sync::Mutex<BTreeMap<String, Lease>>,
    /// The uploads whose bytes an overwrite replaced, by the overwriting upload, until its
    /// record reports them ([`Self::take_overwritten`]).
    overwrote: std::sync::Mutex<std::collections::HashMap<String, BTreeSet<String>>>,
    /// Listings upload records were seen with, by upload: a `create` lease of an upload
    /// listing its key for the lease's run is released (invariant 1). Only ever grows: a
    /// listing seen stays true of the lease it released (a later lease of the same run is
    /// taken only where no record says the key is referenced, see [`Self::settle`]).
    listed: std::sync::Mutex<Listed>,
    /// Reads of upload records for their listings, by upload, while in flight: keys deciding
    /// at once that meet one upload's `create` leases share one read instead of each missing
    /// `listed` and reading it ([`Self::learn_listing`]).
    listing_reads: SharedReads<Listing>,
    /// The uploads objects' owners were found to name ([`Self::same_by`]), by owner, where
    /// the upload record was there, or being read: the same bytes uploaded again share every
    /// key of one other upload, whose record is read once, not once per key (its keys are
    /// published at once). See `same_by` for why a kept answer is as good as a fresh one.
    known_owners: SharedReads<Option<String>>,
    /// The last key guessed to have no record had one naming several uploads (its bytes
    /// were shared before: this is a third upload of them, or later). The upload's other
    /// keys most likely have one too: where another upload's object is found, the record is
    /// read rather than guessed absent, and the owner's upload is not looked up
    /// (`publish_owned`). Found absent, guessed again.
    shared_before: std::sync::atomic::AtomicBool,
    /// This run's id, in every lease it takes ([`Lease::run`]).
    run: String,
    /// The store's upload layout, once read ([`Self::layout`]).
    layout: std::sync::OnceLock<UploadLayout>,
}

/// Waits of one decision (as [`RefStore::update`] waits for a lease): attempts and pauses.
struct Patience {
    wait: Wait,
    waited: u32,
    pause: Duration,
}

impl Patience {
    fn new(wait: Wait) -> Self {
        Patience {
            wait,
            waited: 0,
            pause: wait.first_pause,
        }
    }

    /// One more wait (a pause), or a retryable error when there were enough.
    async fn wait(&mut self, why: &str) -> io::Result<()> {
        self.waited += 1;
        if self.waited > self.wait.attempts {
            return Err(busy(why));
        }
        if !self.pause.is_zero() {
            tokio::time::sleep(self.pause).await;
        }
        self.pause = (self.pause * 2).min(self.wait.max_pause);
        Ok(())
    }
}

/// An upload record's listing: the keys it lists, and the runs whose `create` leases on them
/// it ends (invariant 1).
#[derive(Debug, Default, Clone)]
pub struct Listing {
    keys: BTreeSet<String>,
    runs: BTreeSet<String>,
}

impl Listing {
    pub fn of(record: &UploadRecord) -> Self {
        Listing {
            keys: record.keys.clone(),
            runs: record.runs.clone(),
        }
    }

    /// The listing of a record read as a view of it (an audit's, audit.rs).
    pub fn new<'a>(
        keys: impl IntoIterator<Item = &'a str>,
        runs: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Listing {
            keys: keys.into_iter().map(String::from).collect(),
            runs: runs.into_iter().map(String::from).collect(),
        }
    }

    /// Whether this listing ends `lease` on `key`: it lists the key, for the lease's run
    /// (a lease without a run was written before runs were told apart).
    pub fn ends(&self, key: &str, lease: &Lease) -> bool {
        self.keys.contains(key) && (lease.run.is_empty() || self.runs.contains(&lease.run))
    }

    /// What both listings say (an upload's listing only grows while its record lives).
    fn merge(&mut self, other: &Listing) {
        self.keys.extend(other.keys.iter().cloned());
        self.runs.extend(other.runs.iter().cloned());
    }
}

/// What a decision needs to know first: the listings of these uploads (holders of the
/// `create` leases it met), read from their upload records.
type Listed = std::collections::HashMap<String, Listing>;

/// Reads shared by everyone asking for the same name while one is in flight (and after,
/// where the answer is kept): one cell per name ([`read_shared`]).
type SharedReads<T> =
    std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::OnceCell<T>>>>;

/// Names a [`SharedReads`] keeps at most: a few per upload a run meets.
const SHARED_READS: usize = 1024;

/// `read` of `name`, made once for everyone asking while it is in flight; its answer stays
/// for later askers only where `keep` says so (else, like a failed read, the next asker
/// reads afresh). Also says whether this caller's `read` made the answer.
async fn read_shared<T, Fut>(
    reads: &SharedReads<T>,
    name: &str,
    read: impl FnOnce() -> Fut,
    keep: impl Fn(&T) -> bool,
) -> io::Result<(T, bool)>
where
    T: Clone,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let cell = match reads.lock() {
        Ok(mut cells) => {
            if cells.len() >= SHARED_READS && !cells.contains_key(name) {
                cells.clear();
            }
            Arc::clone(cells.entry(name.to_string()).or_default())
        }
        Err(_) => Arc::default(),
    };
    let mut ours = false;
    let answer = cell
        .get_or_try_init(|| {
            ours = true;
            read()
        })
        .await
        .cloned();
    if !answer.as_ref().is_ok_and(&keep) {
        if let Ok(mut cells) = reads.lock() {
            if cells.get(name).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                cells.remove(name);
            }
        }
    }
    Ok((answer?, ours))
}

/// Deferred source-map records: file -> (version read, record now, changed since read).
type DeferredSourceMaps =
    std::collections::HashMap<String, (Option<String>, Arc<SourceMapRecord>, bool)>;

/// A sole writer's deferred source-map writes ([`RefStore::defer_source_map_writes`]),
/// shared by every [`RefStore`] of its run ([`RefStore::defer_source_map_writes_to`]): a
/// removal the run finishes hands its keys over to uploads indexed again by an indexer of
/// their own, inside the run. Shared, each sees the others' changes, and what one writes is
/// the version the others change on; apart, the run's writes failed on the versions the
/// hand-over's had replaced.
#[derive(Default)]
pub struct DeferredWrites {
    records: std::sync::Mutex<DeferredSourceMaps>,
    /// One flush at a time: two at once would both write a record changed since the last
    /// one, the second on the version the first replaced.
    flushing: tokio::sync::Mutex<()>,
}

/// A parsed source-map record and the version it was parsed from.
type ParsedSourceMap = (String, Arc<SourceMapRecord>);

/// Source-map records kept parsed at most (a few per source base name a run meets).
const PARSED_SOURCE_MAPS: usize = 256;

impl<'s> RefStore<'s> {
    pub fn new(store: &'s dyn Storage) -> Self {
        Self::with_policy(store, LeasePolicy::default())
    }

    pub fn with_policy(store: &'s dyn Storage, policy: LeasePolicy) -> Self {
        RefStore {
            store,
            policy,
            parsed_source_maps: Default::default(),
            deferred_source_maps: None,
            held: Default::default(),
            overwrote: Default::default(),
            listed: Default::default(),
            listing_reads: Default::default(),
            known_owners: Default::default(),
            shared_before: Default::default(),
            run: new_run_id(),
            layout: Default::default(),
        }
    }

    /// How the store names its upload records: its marker says, read once. A store without
    /// one is [`UploadLayout::Flat`], unless it lays new stores out by location
    /// ([`Storage::uploads_by_location`]): then it is decided now — `ByLocation` where no
    /// upload or source record is yet, else `Flat` (records written before layouts were
    /// named) — and the marker is created only where none is: a writer deciding at the same
    /// time reads the other's decision instead, so every writer follows the same.
    pub async fn layout(&self) -> io::Result<UploadLayout> {
        if let Some(layout) = self.layout.get() {
            return Ok(*layout);
        }
        let layout = self.decide_layout().await?;
        Ok(*self.layout.get_or_init(|| layout))
    }

    async fn decide_layout(&self) -> io::Result<UploadLayout> {
        for _ in 0..MAX_ATTEMPTS {
            if let Some(bytes) = self.store.read_settled(LAYOUT_FILE).await? {
                return Ok(parse::<LayoutMarker>(LAYOUT_FILE, &bytes)?.uploads);
            }
            if !self.store.uploads_by_location() {
                return Ok(UploadLayout::Flat);
            }
            let existing = self.store.any_under(UPLOADS_DIR).await?
                || self.store.any_under(SOURCES_DIR).await?;
            let uploads = if existing {
                UploadLayout::Flat
            } else {
                UploadLayout::ByLocation
            };
            let marker = serde_json::to_vec(&LayoutMarker { uploads })?;
            if self.store.create_settled(LAYOUT_FILE, &marker).await? {
                return Ok(uploads);
            }
        }
        Err(io::Error::other(format!("{LAYOUT_FILE}: unreadable")))
    }

    /// The owner an object names for `upload` (invariant 7): its record's name.
    pub async fn owner_token(&self, upload: &str) -> io::Result<String> {
        Ok(upload_name(self.layout().await?, upload))
    }

    /// Where `upload`'s record is.
    pub(crate) async fn upload_file(&self, upload: &str) -> io::Result<String> {
        Ok(upload_file(self.layout().await?, upload))
    }

    /// A sole writer (the CLI, holding the local store's writer lock) keeps the source-map
    /// records it reads and changes in memory, and writes each changed one once, at
    /// [`Self::flush_source_maps`] — which must come before any upload whose wants or offers
    /// they hold is finalized, so that a run killed before it leaves those uploads `indexing`
    /// (a re-run registers them again) and never an indexed upload whose want was lost.
    /// Nobody else writes them meanwhile (the writer lock; the run's other indexers share the
    /// kept copies, [`DeferredWrites`]), so the kept copy is the store's.
    /// Measured: in a store-wide scope every debug file naming `stdio.h` rewrote the same
    /// record of up to 512 entries, a third of a fresh index of many debug files.
    pub fn defer_source_map_writes(&mut self) {
        self.defer_source_map_writes_to(Arc::default());
    }

    /// [`Self::defer_source_map_writes`] into `writes`, shared with the other writers of the
    /// run (see [`DeferredWrites`]).
    pub fn defer_source_map_writes_to(&mut self, writes: Arc<DeferredWrites>) {
        self.deferred_source_maps = Some(writes);
    }

    /// Whether source-map writes are deferred ([`Self::defer_source_map_writes`]).
    pub fn defers_source_maps(&self) -> bool {
        self.deferred_source_maps.is_some()
    }

    /// A source-map record as it stands for this process: its deferred copy if it has one,
    /// else as stored (`Default`: none). Only reads, so writers indexing several inputs at
    /// once may ask it while the one that makes the changes makes them.
    pub async fn source_map(&self, file: &str) -> io::Result<Arc<SourceMapRecord>> {
        if let Some(deferred) = &self.deferred_source_maps {
            let kept = deferred
                .records
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(file)
                .map(|(_, record, _)| Arc::clone(record));
            if let Some(record) = kept {
                return Ok(record);
            }
        }
        match self.store.read(file).await? {
            Some(bytes) => Ok(Arc::new(parse(file, &bytes)?)),
            None => Ok(Arc::default()),
        }
    }

    /// Writes the source-map records changed since the last flush (see
    /// [`Self::defer_source_map_writes`]; nothing to do otherwise). Each stays kept until it
    /// is written: a reader ([`Self::source_map`]) finds it kept or stored, never neither.
    pub async fn flush_source_maps(&self) -> io::Result<()> {
        let Some(deferred) = &self.deferred_source_maps else {
            return Ok(());
        };
        let _alone = deferred.flushing.lock().await;
        let lock = || deferred.records.lock().unwrap_or_else(|p| p.into_inner());
        let changed: Vec<(String, Option<String>, Arc<SourceMapRecord>)> = lock()
            .iter()
            .filter(|(_, (_, _, changed))| *changed)
            .map(|(file, (version, record, _))| (file.clone(), version.clone(), record.clone()))
            .collect();
        let mut versions = Vec::with_capacity(changed.len());
        for (file, version, record) in &changed {
            // `Some(new version)` once written (`None` inside: deleted), `None`: lost a swap.
            let written = if record.offers.is_empty() && record.wants.is_empty() {
                match version {
                    Some(v) => self.store.delete_if(file, v).await?.then_some(None),
                    None => Some(None),
                }
            } else {
                let bytes = serde_json::to_vec(&**record)?;
                let condition = match version {
                    Some(v) => Precondition::Version(v),
                    None => Precondition::Absent,
                };
                self.store.put_if(file, &bytes, condition).await?.map(Some)
            };
            let Some(version) = written else {
                return Err(io::Error::other(format!(
                    "{file}: changed by another writer while this one held the store's writer lock"
                )));
            };
            versions.push(version);
        }
        // Written, or never changed: the store holds them now. One changed again meanwhile
        // stays kept, to be written over the version just written.
        let mut deferred = lock();
        for ((file, _, record), version) in changed.iter().zip(versions) {
            match deferred.get_mut(file) {
                Some((_, kept, _)) if Arc::ptr_eq(kept, record) => {
                    deferred.remove(file);
                }
                Some((kept_version, _, _)) => *kept_version = version,
                None => {}
            }
        }
        deferred.retain(|_, (_, _, changed)| *changed);
        Ok(())
    }

    /// [`Self::update_source_map`] for a sole writer deferring its writes. The kept copy is
    /// changed in place, under the map's lock: a reader ([`Self::source_map`]) sees it before
    /// or after the change, never the stored record without this run's earlier changes.
    async fn update_deferred_source_map(
        &self,
        deferred: &DeferredWrites,
        file: &str,
        f: impl FnOnce(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        let lock = || deferred.records.lock().unwrap_or_else(|p| p.into_inner());
        let mut f = Some(f);
        // Not kept: read outside the lock, then kept (only this process writes these records,
        // so what is stored is what it was when nothing was kept).
        let mut stored: Option<(Option<String>, Arc<SourceMapRecord>)> = None;
        let (record, full) = loop {
            {
                let mut deferred = lock();
                if let Some((version, record)) = stored.take() {
                    deferred
                        .entry(file.to_string())
                        .or_insert((version, record, false));
                }
                if let Some(entry) = deferred.get_mut(file) {
                    let f = f
                        .take()
                        .ok_or_else(|| io::Error::other("source map changed twice"))?;
                    // Unshared unless a reader still holds an earlier copy (then copied).
                    entry.2 |= f(Arc::make_mut(&mut entry.1));
                    let record = Arc::clone(&entry.1);
                    break (record, deferred.len() > PARSED_SOURCE_MAPS);
                }
            }
            stored = Some(match self.store.get(file).await? {
                Some(read) => (Some(read.version), Arc::new(parse(file, &read.bytes)?)),
                None => (None, Arc::default()),
            });
        };
        // Memory stays bounded: past that many records, the changed ones are written now.
        if full {
            self.flush_source_maps().await?;
        }
        Ok(record)
    }

    async fn read<T: DeserializeOwned>(&self, file: &str) -> io::Result<Option<T>> {
        match self.store.read(file).await? {
            Some(bytes) => parse(file, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Read-modify-write of one JSON object by compare-and-swap on the version read; retried
    /// when another writer got there first, paused while somebody else's lease is live.
    async fn update<T, R, F>(&self, file: &str, f: F) -> io::Result<R>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
    {
        Ok(self.update_versioned(file, None, f).await?.0)
    }

    /// [`Self::update`], also returning the record as it now stands when the update wrote it
    /// (or found it already so): its bytes and version (`None` when it wrote nothing).
    /// `prefetched`: what the caller just read of `file`, used instead of a first read (a
    /// compare-and-swap on its version is as safe as on a fresh one).
    async fn update_versioned<T, R, F>(
        &self,
        file: &str,
        prefetched: Option<Option<Versioned>>,
        f: F,
    ) -> io::Result<(R, Option<Versioned>)>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
    {
        self.update_decoded(file, prefetched, |v| parse(file, &v.bytes), f)
            .await
    }

    /// [`Self::update_versioned`] with the decoding of what was read given (a cache).
    async fn update_decoded<T, R, F, D>(
        &self,
        file: &str,
        mut prefetched: Option<Option<Versioned>>,
        decode: D,
        mut f: F,
    ) -> io::Result<(R, Option<Versioned>)>
    where
        T: Serialize,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
        D: Fn(&Versioned) -> io::Result<T>,
    {
        let mut patience = Patience::new(self.policy.wait);
        for _ in 0..MAX_ATTEMPTS {
            let current = match prefetched.take() {
                Some(read) => read,
                None => self.store.get(file).await?,
            };
            let version = current.as_ref().map(|v| v.version.clone());
            let value = current.as_ref().map(&decode).transpose()?;
            let done = match (f(value)?, version) {
                (Step::Keep(r), _) => return Ok((r, None)),
                (Step::KeepRead(r), _) => return Ok((r, current)),
                (Step::Wait(why), _) => {
                    patience.wait(&why).await?;
                    continue;
                }
                (Step::Write(new, r), version) => {
                    let bytes = serde_json::to_vec(&new)?;
                    // Writing what is already there changes nothing: the update takes effect
                    // at the read (its result depends on nothing else), and a re-index of an
                    // unchanged store writes no record.
                    if let Some(current) = current {
                        if same_record(&current.bytes, &bytes, &new)? {
                            return Ok((r, Some(current)));
                        }
                    }
                    let condition = match &version {
                        Some(v) => Precondition::Version(v),
                        None => Precondition::Absent,
                    };
                    let written = self.store.put_if(file, &bytes, condition).await?;
                    written.map(|version| (r, Some(Versioned { bytes, version })))
                }
                (Step::Delete(r), Some(version)) => self
                    .store
                    .delete_if(file, &version)
                    .await?
                    .then_some((r, None)),
                (Step::Delete(r), None) => Some((r, None)),
            };
            if let Some(done) = done {
                return Ok(done);
            }
        }
        Err(busy(&format!("{file}: too many concurrent updates")))
    }

    fn new_lease(&self, op: &str, holder: &str) -> Lease {
        Lease {
            holder: holder.to_string(),
            until: now_secs() + self.policy.duration.as_secs(),
            op: op.to_string(),
            run: self.run.clone(),
            acting: String::new(),
        }
    }

    /// [`Self::new_lease`] of a publisher: one acting for a removal says so.
    fn publisher_lease(&self, op: &str, holder: &str, publisher: Publisher<'_>) -> Lease {
        Lease {
            acting: publisher.acting.to_string(),
            ..self.new_lease(op, holder)
        }
    }

    /// A lease `holder` may not act against: somebody else's, still running.
    fn lease_is_live_other(&self, lease: &Lease, holder: &str) -> bool {
        lease.holder != holder && self.lease_runs(lease)
    }

    /// Whether `lease`'s holder may still be at work: within its time, and not while this
    /// process holds the local store's writer lock (then its holder is dead, invariant 1).
    fn lease_runs(&self, lease: &Lease) -> bool {
        !self.policy.exclusive && lease.until >= now_secs()
    }

    /// Whether `record` is held by somebody else's live lease (then `holder` waits).
    fn blocked(&self, record: &KeyRecord, holder: &str) -> bool {
        record
            .lease
            .as_ref()
            .is_some_and(|l| self.lease_is_live_other(l, holder))
    }

    /// [`Self::blocked`], for `publisher` holding `holder`'s leases. A removal handing a key
    /// on (`acting`) waits for a live lease of its holder's unless its own removal's (an
    /// earlier attempt): its retry may never meet the key again (the offer it withdraws may
    /// be dropped meanwhile by whoever finds it dead), so a lease it took over from a run
    /// still going would be left to run out. Anyone else takes a lease of its holder over at
    /// once, as a retry takes its own earlier attempt's: the run that took it over lists
    /// it, or its own retry meets the key again (invariant 1).
    fn blocked_for(&self, record: &KeyRecord, holder: &str, publisher: Publisher<'_>) -> bool {
        record.lease.as_ref().is_some_and(|l| {
            let ours =
                l.holder == holder && (publisher.acting.is_empty() || l.acting == publisher.acting);
            !ours && self.lease_runs(l)
        })
    }

    /// Drops `record`'s lease where it is released without a write (invariant 1): a `create`
    /// lease whose holder's upload record lists the key. `Err(upload)`: that holder's listing
    /// must be read first ([`Self::learn_listing`]) into `listed`. Our own upload's leases too:
    /// a re-run of a finalized upload finds its keys unchanged, not still being created.
    fn settle(&self, record: &mut KeyRecord, listed: &Listed) -> Result<(), String> {
        let Some(lease) = &record.lease else {
            return Ok(());
        };
        let Some(upload) = created_by(lease) else {
            return Ok(());
        };
        let seen = |listed: &Listed| {
            listed
                .get(upload)
                .map(|listing| listing.ends(&record.key, lease))
        };
        let known = self.listed.lock().ok().and_then(|cache| seen(&cache));
        let released = match (known, seen(listed)) {
            (Some(true), _) => true,
            (_, Some(listed)) => listed,
            _ => return Err(upload.to_string()),
        };
        if released {
            record.lease = None;
        }
        Ok(())
    }

    /// The `create` leases `upload`'s runs on this store left to its finalize (invariant 1),
    /// forgotten here: whoever takes the upload's references back instead of finalizing it
    /// releases them first ([`Self::release_created`]).
    pub fn take_held(&self, upload: &str) -> Vec<(String, Lease)> {
        let holder = index_holder(upload);
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        let keys: Vec<String> = held
            .iter()
            .filter(|(_, lease)| lease.holder == holder)
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| held.remove(&key).map(|lease| (key, lease)))
            .collect()
    }

    /// Releases `create` leases by a write each, where they are still as taken: for a run
    /// that will not list their keys (it failed, or takes its references back), so that
    /// nobody waits for them and its own take-back is not blocked by them.
    pub async fn release_created(&self, held: &[(String, Lease)]) -> io::Result<()> {
        for (key, lease) in held {
            self.update(&key_file(key), |current: Option<KeyRecord>| match current {
                Some(mut r) if r.lease.as_ref() == Some(lease) => {
                    r.lease = None;
                    Ok(Step::Write(r, ()))
                }
                _ => Ok(Step::Keep(())),
            })
            .await?;
        }
        Ok(())
    }

    /// The upload whose run's `create` lease (not released) is on `record`.
    fn creating(&self, record: &KeyRecord) -> Option<String> {
        record
            .lease
            .as_ref()
            .and_then(created_by)
            .map(str::to_string)
    }

    /// Reads the keys `upload` lists into `listed` (and the process-wide cache). Read again
    /// (its lease still in force on `key`), after a pause, as a wait: given up as busy when
    /// the policy's patience runs out.
    async fn learn_listing(
        &self,
        upload: &str,
        listed: &mut Listed,
        patience: &mut Patience,
        key: &str,
    ) -> io::Result<()> {
        if listed.contains_key(upload) {
            patience
                .wait(&format!("{key}: a creation is in progress"))
                .await?;
        }
        let listing = self.read_listing(upload).await?;
        if let Ok(mut cache) = self.listed.lock() {
            cache.entry(upload.to_string()).or_default().merge(&listing);
        }
        listed.insert(upload.to_string(), listing);
        Ok(())
    }

    /// `upload`'s listing, read from its record — or by a read of it already in flight, which
    /// is as good: a listing only ends leases its record lists for their runs, so one read
    /// earlier than ours can at worst end fewer (the key then waits and reads again, as on
    /// a listing read before the finalize), never a lease it should not.
    async fn read_listing(&self, upload: &str) -> io::Result<Listing> {
        let read = || async {
            let record = self.upload(upload).await?;
            Ok(record.map(|r| Listing::of(&r)).unwrap_or_default())
        };
        // Not kept: the next decision reads afresh.
        let (listing, _) = read_shared(&self.listing_reads, upload, read, |_| false).await?;
        Ok(listing)
    }

    /// Before touching an object: our lease must not be past its time (someone may have
    /// taken it over). A margin keeps the act itself inside the lease.
    fn check_own_lease(&self, lease: &Lease) -> io::Result<()> {
        if self.policy.exclusive || lease.until > now_secs() + 30 {
            Ok(())
        } else {
            Err(busy(&format!(
                "lease on a key ran out (holder {})",
                lease.holder
            )))
        }
    }

    /// The key a copy of `content` is an alias of, where the store writes aliases.
    fn alias_target(&self, content: &Content<'_>) -> Option<String> {
        match content.source {
            CopySource::Key(target) if self.store.key_copies_are_aliases() => {
                Some(target.to_string())
            }
            _ => None,
        }
    }

    /// Who references `key`: its record, or for a key without one, the upload its object
    /// names as owner (invariant 7).
    pub async fn key(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        let record = self.read(&key_file(key)).await?;
        if record.is_some() || !self.owners_named() {
            return Ok(record);
        }
        self.owned_key(key).await
    }

    /// Whether keys one upload alone references go without a record (invariant 7): where
    /// objects name their owners, whether writers run at once or one holds the writer lock.
    fn owners_named(&self) -> bool {
        self.store.names_owners()
    }

    /// The owner to name in an object whose record says `by` wrote it.
    async fn owner_for(&self, by: &str) -> io::Result<Option<String>> {
        if !self.owners_named() || by.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.owner_token(by).await?))
    }

    /// The record a key without one stands for (invariant 7): its object's owner alone
    /// references it. `None`: nothing there, written outside symdex, or its owner's upload
    /// record is gone (an orphan, which `verify` reports).
    async fn owned_key(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        let Some(found) = self.store.owned(key).await? else {
            return Ok(None);
        };
        self.owned_key_of(key, found, |_| None).await
    }

    /// [`Self::owned_key`] of what was `found` at `key`; `listed`: the upload an owner names,
    /// where the caller knows it (else its record is read).
    async fn owned_key_of(
        &self,
        key: &str,
        found: Owned,
        listed: impl Fn(&str) -> Option<String>,
    ) -> io::Result<Option<KeyRecord>> {
        let Some(owner) = found.owner else {
            return Ok(None);
        };
        let upload = match listed(&owner) {
            Some(upload) => upload,
            None => match self.upload_by_owner(&owner).await? {
                Some(upload) => upload,
                None => return Ok(None),
            },
        };
        // The content named with the owner stands for the record's (what is there now may
        // have been changed in place since, which `verify` reports as for a record).
        let written = found.written.unwrap_or(found.info);
        Ok(Some(KeyRecord {
            key: key.to_string(),
            etag: written.etag,
            size: written.size,
            refs: [upload.clone()].into(),
            by: upload,
            lease: None,
            alias_of: found.alias_of,
        }))
    }

    /// The id of the upload an object names as its owner ([`owner_token`]).
    async fn upload_by_owner(&self, owner: &str) -> io::Result<Option<String>> {
        if !is_upload_name(owner) {
            return Ok(None);
        }
        let file = format!("{UPLOADS_DIR}{owner}.json");
        Ok(self.read::<UploadRecord>(&file).await?.map(|u| u.upload))
    }

    /// Publishes `content` at `key` for `upload` and adds the reference (invariants 1–3).
    /// `different`: what to do where the key's record names other content. `fresh`: the
    /// upload was not indexed before (a key this upload first wrote in an earlier, unfinished
    /// attempt counts as published again).
    pub async fn publish(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
    ) -> io::Result<KeyOutcome> {
        let published = self
            .publish_in_turn(key, upload, content, different, fresh, None)
            .await?;
        Ok(published.outcome)
    }

    /// [`Self::publish`], in `turn`: the key's record step starts when the key before has
    /// decided, and this key tells the next once its own record step is taken: from then on
    /// it waits for nobody (it holds the key's lease, or was answered without one), only
    /// copies. Keys published at once are taken in turn this way ([`InTurn`]): each starts
    /// its record step when the one before has decided, so the leases of an upload's keys are
    /// taken in the same order as one after another — two uploads sharing keys never hold
    /// one each of two keys the other waits for — while the objects are written at once.
    pub async fn publish_in_turn(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let publisher = Publisher { upload, acting: "" };
        self.publish_as(key, publisher, content, different, fresh, turn)
            .await
    }

    /// [`Self::publish`] of a key on `holder`'s behalf (invariant 5), as fresh: a copy first
    /// written for `holder` is reported as published again by a retry (at-least-once, as for
    /// its own keys). Where `removed`'s removal hands the key on, its leases say so, and it
    /// waits for a live lease of another run of `holder`'s (`blocked_for`).
    pub async fn publish_for(
        &self,
        key: &str,
        holder: &str,
        removed: Option<&str>,
        content: &Content<'_>,
    ) -> io::Result<Publication> {
        let publisher = Publisher {
            upload: holder,
            acting: removed.unwrap_or_default(),
        };
        self.publish_as(key, publisher, content, OnDifferent::Conflict, true, None)
            .await
    }

    /// [`Self::publish_in_turn`] by `publisher`.
    async fn publish_as(
        &self,
        key: &str,
        publisher: Publisher<'_>,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        mut turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let upload = publisher.upload;
        let overwrite = different == OnDifferent::Overwrite;
        let file = key_file(key);
        let holder = index_holder(upload);
        // A fresh upload's key usually has no record yet, so the first swap creates one
        // without reading (a wrong guess fails and reads). Concurrent writers (leases): what
        // is at the key is found by creating the object only where nothing is (`CREATE`).
        // A sole writer: without a record, whatever is at the key was written outside symdex:
        // asked once, before the first swap. Unless objects name their owners: a key without
        // a record may then be another upload's alone, found (and shared) by creating it
        // under a `create` lease as concurrent writers do (invariant 7).
        let creates = !self.policy.exclusive || self.owners_named();
        let mut prefetched = if fresh {
            Some(None)
        } else {
            Some(self.store.get(&file).await?)
        };
        // Only a write checks a guess (it fails where a record is): anything else decided on
        // one is decided again on a read.
        let mut on_guess = fresh;
        // No record (or none guessed): the object alone, naming this upload (invariant 7).
        let alone =
            self.owners_named() && self.store.creates_only_new(&content.source, content.size);
        let mut seen = false;
        let mut sharing: Option<Sharing> = None;
        if alone && !overwrite && matches!(prefetched, Some(None)) {
            // No lease taken: the keys after this one need not wait for it. Should the record
            // protocol decide after all, its lease is taken out of turn — two uploads then
            // at worst wait for each other's lease until one gives up and is retried.
            drop(turn.take());
            let adopt = different == OnDifferent::Adopt;
            match self
                .publish_owned(key, upload, content, fresh, adopt)
                .await?
            {
                Alone::Done(outcome) => return Ok(outcome),
                // Something the record protocol decides: on the record if it was read. Else
                // guessed absent again where writers create records only where none is (a
                // key another upload alone references has none): the `create` lease's write
                // checks the guess, and a record found instead is read.
                Alone::Decide(record, found) => {
                    seen = true;
                    sharing = found;
                    on_guess = record.is_none() && creates;
                    prefetched = match record {
                        Some(record) => Some(Some(record)),
                        None if creates => Some(None),
                        None => None,
                    };
                }
            }
        }
        if let Some(turn) = turn.as_mut() {
            turn.wait().await;
        }
        let mut external: Option<Option<ObjectInfo>> = None;
        if let (false, Some(None)) = (creates, &prefetched) {
            external = Some(self.store.head(key).await?);
        }
        let mut listed = Listed::new();
        let mut patience = Patience::new(self.policy.wait);
        let guessing = on_guess;
        let mut read_before_listing = false;
        // Uploads this overwrite has marked as waiting for the key (`MarkWaiting`).
        let mut marked_waiting = BTreeSet::new();
        let (plan, written) = loop {
            let mut decide =
                |mut current: Option<KeyRecord>| -> io::Result<Step<KeyRecord, PublishPlan>> {
                    let guessed = std::mem::take(&mut on_guess);
                    // Where objects name their owners, an empty record (a dead remover's
                    // tombstone) is as good as none: the key is created under a `create`
                    // lease, which finds out whose object is there (invariant 7).
                    let had_record = current
                        .as_ref()
                        .is_some_and(|r| !r.refs.is_empty() || !self.owners_named());
                    let shared = current.as_ref().is_some_and(|r| r.refs.len() > 1);
                    if guessing && shared {
                        // See `shared_before`: the upload's next keys read theirs.
                        self.shared_before
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    if let Some(record) = current.as_mut() {
                        if let Err(holder) = self.settle(record, &listed) {
                            return Ok(Step::KeepRead(PublishPlan::Learn(holder)));
                        }
                    }
                    let record = match current {
                        Some(r) if self.blocked_for(&r, &holder, publisher) => {
                            // A creation ends with its holder's listing: read it again.
                            if let Some(creator) = self.creating(&r) {
                                return Ok(Step::KeepRead(PublishPlan::Learn(creator)));
                            }
                            return Ok(Step::Wait(format!("{key}: a change is in progress")));
                        }
                        // An empty record (a dead remover's tombstone) is as good as none.
                        Some(r) if r.refs.is_empty() => None,
                        other => other,
                    };
                    let lease = self.publisher_lease("copy", &holder, publisher);
                    let mine = |refs: BTreeSet<String>, by: String| KeyRecord {
                        key: key.to_string(),
                        etag: content.etag.to_string(),
                        size: content.size,
                        refs,
                        by,
                        lease: Some(lease.clone()),
                        alias_of: None,
                    };
                    let Some(mut record) = record else {
                        // Symdex's own objects always have a record (or a tombstone): anything else
                        // at the key was written outside symdex (asked once, outside the swap,
                        // or found by creating the object where nothing is).
                        if creates && !had_record {
                            let lease = self.publisher_lease(CREATE, &holder, publisher);
                            if let Some(sharing) = &sharing {
                                // Another upload's object of this content, seen just
                                // before: the record names both, as sharing leaves it.
                                let record = KeyRecord {
                                    key: key.to_string(),
                                    etag: sharing.info.etag.clone(),
                                    size: sharing.info.size,
                                    refs: [upload.to_string(), sharing.other.clone()].into(),
                                    by: sharing.other.clone(),
                                    lease: Some(lease.clone()),
                                    alias_of: sharing.alias_of.clone(),
                                };
                                let plan = PublishPlan::Share(
                                    lease,
                                    Box::new(record.clone()),
                                    sharing.clone(),
                                );
                                return Ok(Step::Write(record, plan));
                            }
                            // Written as it will stay (alias target included): the upload's
                            // finalize releases the lease (invariant 1).
                            let record = KeyRecord {
                                lease: Some(lease.clone()),
                                alias_of: self.alias_target(content),
                                ..mine([upload.to_string()].into(), upload.to_string())
                            };
                            let plan = PublishPlan::Copy(lease, Box::new(record.clone()), false);
                            return Ok(Step::Write(record, plan));
                        }
                        if external.is_none() && !had_record {
                            return Ok(Step::Keep(PublishPlan::NeedHead));
                        }
                        let outside = if had_record {
                            None
                        } else {
                            external.as_ref().and_then(Option::as_ref)
                        };
                        let adopted = match outside {
                            Some(info) if info.etag == content.etag => true,
                            // A record may be there after all, holding this content or
                            // adopting any (a sidecar of the same bytes under another name).
                            Some(_) if guessed => return Ok(Step::Keep(PublishPlan::Reread)),
                            Some(_) if !overwrite => {
                                return Ok(Step::Keep(PublishPlan::Done(KeyOutcome::Conflict)))
                            }
                            _ => false,
                        };
                        if adopted {
                            let record = KeyRecord {
                                lease: None,
                                ..mine([upload.to_string()].into(), String::new())
                            };
                            let check = PublishPlan::Check {
                                by_us: false,
                                size: content.size,
                                alias_of: None,
                            };
                            return Ok(Step::Write(record, check));
                        }
                        let record = mine([upload.to_string()].into(), upload.to_string());
                        if self.policy.exclusive && !had_record && outside.is_none() {
                            // A sole writer creating a key: the record is written as it will
                            // stay, then the object (invariant 2, sole-writer form).
                            let record = KeyRecord {
                                lease: None,
                                alias_of: self.alias_target(content),
                                ..record
                            };
                            return Ok(Step::Write(record, PublishPlan::CopySole));
                        }
                        let plan = PublishPlan::Copy(lease, Box::new(record.clone()), false);
                        return Ok(Step::Write(record, plan));
                    };
                    if record.etag != content.etag && different != OnDifferent::Adopt {
                        if !overwrite {
                            return Ok(Step::Keep(PublishPlan::Done(KeyOutcome::Conflict)));
                        }
                        // The uploads whose bytes are replaced stop referencing the key and
                        // wait for it (invariant 8), marked so before the swap: the
                        // overwriter's removal hands it back. (Kept as references, they
                        // held its bytes after the overwriter was deleted, or lost the key
                        // with it where the object alone stood for the record.)
                        let earlier: BTreeSet<String> =
                            record.refs.into_iter().filter(|r| r != upload).collect();
                        if !earlier.is_subset(&marked_waiting) {
                            return Ok(Step::Keep(PublishPlan::MarkWaiting(earlier)));
                        }
                        let record = mine([upload.to_string()].into(), upload.to_string());
                        let plan = PublishPlan::Copy(lease, Box::new(record.clone()), false);
                        return Ok(Step::Write(record, plan));
                    }
                    let by_us = record.by == upload && fresh;
                    if let Some(dead) = &record.lease {
                        // A dead holder's change to this same content: finish it ourselves (a
                        // creation stays one: what is at the key may not be symdex's).
                        let own = dead.holder == holder;
                        let creation = dead.op == CREATE;
                        let lease = if creation {
                            self.publisher_lease(CREATE, &holder, publisher)
                        } else {
                            lease.clone()
                        };
                        record.refs.insert(upload.to_string());
                        let by = record.by.clone();
                        let record = KeyRecord {
                            lease: Some(lease.clone()),
                            alias_of: self.alias_target(content).filter(|_| creation),
                            ..mine(record.refs, by)
                        };
                        let plan = PublishPlan::Copy(lease, Box::new(record.clone()), own);
                        return Ok(Step::Write(record, plan));
                    }
                    let check = PublishPlan::Check {
                        by_us,
                        size: record.size,
                        alias_of: record.alias_of.clone(),
                    };
                    if record.refs.insert(upload.to_string()) {
                        Ok(Step::Write(record, check))
                    } else {
                        Ok(Step::Keep(check))
                    }
                };
            let (plan, written) = self
                .update_versioned(&file, prefetched.take(), |current| {
                    let step = decide(current)?;
                    // Decided on the read from before a listing was learned: only a write,
                    // a swap on that read's version (it fails if the record changed since),
                    // stands; anything else is decided again on a fresh read — the record
                    // with the lease ended was never read as it is now.
                    if std::mem::take(&mut read_before_listing) && !matches!(step, Step::Write(..))
                    {
                        return Ok(Step::Keep(PublishPlan::Reread));
                    }
                    Ok(step)
                })
                .await?;
            if let PublishPlan::NeedHead = plan {
                external = Some(self.store.head(key).await?);
                continue;
            }
            if let PublishPlan::Reread = plan {
                continue;
            }
            if let PublishPlan::MarkWaiting(earlier) = plan {
                self.overwritten(key, upload, earlier.iter().cloned())
                    .await?;
                marked_waiting.extend(earlier);
                continue;
            }
            if let PublishPlan::Learn(creator) = &plan {
                // The first listing learned decides on the record just read (one read per
                // key saved) where what it decides is a swap on that read (above). One met
                // again was not ended by it: read both anew.
                let first = !listed.contains_key(creator);
                self.learn_listing(creator, &mut listed, &mut patience, key)
                    .await?;
                if first {
                    prefetched = Some(written);
                    read_before_listing = true;
                }
                continue;
            }
            break (plan, written);
        };
        // A check may still wait (to repair a missing object under a lease): it tells later.
        if !matches!(plan, PublishPlan::Check { .. }) {
            drop(turn.take());
        }
        match plan {
            // Never reached: the loop above asks and swaps again instead.
            PublishPlan::NeedHead
            | PublishPlan::Reread
            | PublishPlan::Learn(_)
            | PublishPlan::MarkWaiting(_) => Err(busy(&format!("{key}: no plan"))),
            PublishPlan::Done(outcome) => Ok(outcome.into()),
            PublishPlan::CopySole => {
                self.copy_or_take_back(key, upload, content, upload, None)
                    .await?;
                Ok(KeyOutcome::Published.into())
            }
            PublishPlan::Share(lease, record, sharing) => {
                let how = CopyHow {
                    overwrite,
                    own: false,
                    by: upload.to_string(),
                    adopt: different == OnDifferent::Adopt,
                    seen,
                };
                let version = written.map(|v| v.version);
                self.share_created(
                    key,
                    upload,
                    content,
                    &lease,
                    (*record, version),
                    &sharing,
                    how,
                )
                .await
            }
            PublishPlan::Copy(lease, record, own) => {
                let how = CopyHow {
                    overwrite,
                    own,
                    by: record.by.clone(),
                    adopt: different == OnDifferent::Adopt,
                    seen,
                };
                let written = written.map(|v| (*record, v.version));
                self.copy_under_lease(key, upload, content, &lease, written, how)
                    .await
            }
            PublishPlan::Check {
                by_us,
                size,
                alias_of,
            } => {
                // Invariant 2 says it is there; a missing or truncated object (removed by
                // hand, or a store restored from a backup) is repaired under a lease.
                if self.store.size(key).await? == Some(size) {
                    drop(turn);
                    let outcome = if by_us {
                        KeyOutcome::Published
                    } else {
                        KeyOutcome::Unchanged
                    };
                    return Ok(Publication { outcome, alias_of });
                }
                let lease = self
                    .update(&file, |mut current: Option<KeyRecord>| {
                        if let Some(record) = current.as_mut() {
                            if self.settle(record, &listed).is_err() {
                                return Ok(Step::Wait(format!("{key}: a change is in progress")));
                            }
                        }
                        match current {
                            Some(r) if self.blocked_for(&r, &holder, publisher) => {
                                Ok(Step::Wait(format!("{key}: a change is in progress")))
                            }
                            Some(mut r)
                                if (r.etag == content.etag || different == OnDifferent::Adopt)
                                    && r.refs.contains(upload) =>
                            {
                                let lease = self.publisher_lease("copy", &holder, publisher);
                                r.lease = Some(lease.clone());
                                // What is copied now (an adopted copy is replaced by ours).
                                r.etag = content.etag.to_string();
                                r.size = content.size;
                                let by = r.by.clone();
                                Ok(Step::Write(r, Some((lease, by))))
                            }
                            _ => Ok(Step::Keep(None)),
                        }
                    })
                    .await?;
                drop(turn);
                match lease {
                    Some((lease, by)) => {
                        let how = CopyHow {
                            overwrite,
                            own: false,
                            by,
                            adopt: different == OnDifferent::Adopt,
                            seen: false,
                        };
                        self.copy_under_lease(key, upload, content, &lease, None, how)
                            .await
                    }
                    // Changed meanwhile (overwritten, or our reference taken back): retry.
                    None => Err(busy(&format!("{key}: changed while checking it"))),
                }
            }
        }
    }

    /// Publishes `content` at a key without a record by creating its object, which names
    /// this upload as its owner (invariant 7): one request where the key is new. Else what
    /// is there may be for the record protocol to decide (other content, an object written
    /// outside symdex, another upload's object, a record).
    async fn publish_owned(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        fresh: bool,
        adopt: bool,
    ) -> io::Result<Alone> {
        let owner = self.owner_token(upload).await?;
        let found = match self
            .create_or_find(key, content, Some(&owner), false)
            .await?
        {
            Creation::Created => return Ok(Alone::Done(KeyOutcome::Published.into())),
            // Nothing recorded yet: a failed copy leaves nothing to take back.
            Creation::Failed(e) => return Err(e.into()),
            Creation::Found(found) => found,
        };
        let same = holds(&found, content);
        let ours = found.owner.as_deref() == Some(owner.as_str());
        // Other content, not ours, and this upload neither overwrites nor adopts: a conflict,
        // decided on what the key holds now (invariant 7, last point) — the record protocol
        // would take a `create` lease only to find the same object and drop the record again
        // (six requests more per key).
        if !ours && !same && !adopt {
            return Ok(Alone::Done(KeyOutcome::Conflict.into()));
        }
        // Our own earlier or concurrent run's object. Anything else — another upload's (to be
        // shared), written outside symdex — is decided under a `create` lease: while a record
        // holds one, the owner's removal waits for it instead of deleting the object we are
        // about to reference. Another upload's is looked up now, so that the record is
        // created as sharing will leave it, and released by our finalize (one write per key
        // saved, `share_created`).
        if !(ours && (same || adopt)) {
            use std::sync::atomic::Ordering::Relaxed;
            if found.owner.is_some() && !ours && self.shared_before.load(Relaxed) {
                match self.store.get(&key_file(key)).await? {
                    Some(record) => return Ok(Alone::Decide(Some(record), None)),
                    None => self.shared_before.store(false, Relaxed),
                }
            }
            let sharing = match &found.owner {
                Some(owner) if !ours => {
                    let owner = owner.clone();
                    let info = found.info.clone();
                    match self.same_by(upload, found).await? {
                        SameBy::Upload(other, alias_of) => Some(Sharing {
                            other,
                            owner,
                            alias_of,
                            info,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            return Ok(Alone::Decide(None, sharing));
        }
        // Ours stands for the record only where there is none: a record left naming us as its
        // writer after our reference went (another upload shares the key) must get our
        // reference back. A fresh upload's record was guessed absent, unread: read now (a
        // sharer's record created since a read names the owner too).
        if fresh {
            if let Some(record) = self.store.get(&key_file(key)).await? {
                return Ok(Alone::Decide(Some(record), None));
            }
        }
        let outcome = if fresh {
            KeyOutcome::Published
        } else {
            KeyOutcome::Unchanged
        };
        // The object stands for the record (invariant 7): it names its target itself.
        Ok(Alone::Done(Publication {
            outcome,
            alias_of: found.alias_of,
        }))
    }

    /// Creates `content` at `key` only where nothing is, naming `owner`; else reads what is
    /// there. A few rounds: an object found and then gone (deleted meanwhile) is created
    /// again. Where the store's copy may replace what it finds (some servers ignore
    /// `If-None-Match` on CopyObject), it is made only where nothing was seen just before:
    /// an object created in between by a writer relying on its copy alone (invariant 7)
    /// could still be replaced — a window of one request, closed where copies are atomic.
    /// `seen`: an object was at the key just before, so the first round looks first (one
    /// request, not a failed creation and a look).
    async fn create_or_find(
        &self,
        key: &str,
        content: &Content<'_>,
        owner: Option<&str>,
        seen: bool,
    ) -> io::Result<Creation> {
        let known = ObjectInfo {
            size: content.size,
            etag: content.etag.to_string(),
        };
        let look_first = !self.store.creates_only_new(&content.source, content.size);
        for round in 0..4 {
            if look_first || (seen && round == 0) {
                if let Some(found) = self.store.owned(key).await? {
                    return Ok(Creation::Found(found));
                }
            }
            match self
                .store
                .copy_new(&content.source, key, &known, owner)
                .await
            {
                Ok(Some(_)) => return Ok(Creation::Created),
                Ok(None) => {}
                Err(e) => return Ok(Creation::Failed(e)),
            }
            if let Some(found) = self.store.owned(key).await? {
                return Ok(Creation::Found(found));
            }
        }
        Err(busy(&format!(
            "{key}: created and deleted by others meanwhile"
        )))
    }

    /// Ends a `create` lease on a record written as sharing `sharing`'s object (invariant 7):
    /// the object is looked at again, now that the record is there. Still that upload's, of
    /// the recorded content, the record says what is there — the owner's removal had not
    /// passed the key (it deletes the object first), and meets the record when it does — and
    /// the lease is left to our finalize, as a creation's (invariant 1): the copy, a look,
    /// the record and a look, where releasing it took a write more. Gone or changed
    /// meanwhile, the record goes back to naming this upload alone, as a `create` lease's is
    /// written (on the version written: else the lease was taken over, and we are too slow),
    /// and the creation decides on what is there now.
    #[allow(clippy::too_many_arguments)]
    async fn share_created(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        (record, version): (KeyRecord, Option<String>),
        sharing: &Sharing,
        how: CopyHow,
    ) -> io::Result<Publication> {
        self.check_own_lease(lease)?;
        let now = self.store.owned(key).await?;
        let still = now.as_ref().is_some_and(|found| {
            found.owner.as_deref() == Some(sharing.owner.as_str())
                && found.info.etag == record.etag
                && found.info.size == record.size
                && found.alias_of == record.alias_of
        });
        if still {
            if let Ok(mut held) = self.held.lock() {
                held.insert(key.to_string(), lease.clone());
            }
            return Ok(Publication {
                outcome: KeyOutcome::Unchanged,
                alias_of: record.alias_of,
            });
        }
        let alone = KeyRecord {
            etag: content.etag.to_string(),
            size: content.size,
            refs: [upload.to_string()].into(),
            by: upload.to_string(),
            alias_of: self.alias_target(content),
            ..record
        };
        let bytes = serde_json::to_vec(&alone)?;
        let rewritten = match &version {
            Some(version) => {
                let condition = Precondition::Version(version);
                self.store.put_if(&key_file(key), &bytes, condition).await?
            }
            None => None,
        };
        let Some(version) = rewritten else {
            return Err(busy(&format!(
                "{key}: its record changed while sharing it (lease taken over)"
            )));
        };
        let how = CopyHow {
            seen: now.is_some(),
            ..how
        };
        self.copy_under_lease(key, upload, content, lease, Some((alone, version)), how)
            .await
    }

    /// Copies the content to `key`; on a failure the upload's reference is taken back (its
    /// record must not claim an object that is not there) — while the record still holds
    /// `lease`, where the copy was made under one ([`Self::take_back`]).
    async fn copy_or_take_back(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        by: &str,
        lease: Option<&Lease>,
    ) -> io::Result<()> {
        let known = ObjectInfo {
            size: content.size,
            etag: content.etag.to_string(),
        };
        let owner = self.owner_for(by).await?;
        let copied = self
            .store
            .copy(&content.source, key, &known, owner.as_deref())
            .await;
        if let Err(e) = copied {
            self.take_back(key, upload, lease).await?;
            return Err(e.into());
        }
        Ok(())
    }

    /// Takes `upload`'s reference back after its copy failed. Made under `lease`, only while
    /// the record still holds that lease: taken over meanwhile (by another run of the same
    /// upload, which takes a lease of its holder over at once, invariant 1), the reference
    /// is the new holder's, who may have written the object and listed the key since — taken
    /// back regardless, that run's key was unpublished under it (a source handed on by a
    /// removal and published by its debug file at once, the removal's copy failing:
    /// `a_source_removal_dying_while_its_debug_file_arrives_is_finished_by_its_retry`).
    async fn take_back(&self, key: &str, upload: &str, lease: Option<&Lease>) -> io::Result<()> {
        self.remove_reporting(key, upload, false, lease).await?;
        Ok(())
    }

    /// Copies the content while holding `lease`, then releases it. On a failed copy the
    /// reference is taken back (the record must not claim an object that is not there).
    /// `written`: the record as the lease was taken and its version, when known: released by
    /// one conditional write on that version (it fails only if the record changed, i.e. the
    /// lease was taken over; then the record is read again and its new holder decides).
    /// A [`CREATE`] lease creates the object only where nothing is, and otherwise decides on
    /// what it finds: the same content is adopted (the record names no writer), other content
    /// is replaced (`overwrite`) or a conflict (the record goes: it claims nothing there).
    async fn copy_under_lease(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        written: Option<(KeyRecord, String)>,
        how: CopyHow,
    ) -> io::Result<Publication> {
        self.check_own_lease(lease)?;
        let mut adopted = false;
        // Another upload's object of the same content, found where its record was absent
        // (invariant 7): the record names it too, and its writer.
        let mut shared: Option<(String, Option<String>, ObjectInfo)> = None;
        if lease.op == CREATE {
            match self
                .create_object(key, upload, content, lease, how.adopt, how.seen)
                .await?
            {
                Found::Created | Found::Same(SameBy::Us, _) => {}
                // Our own earlier attempt's copy, or the same bytes written outside symdex.
                Found::Same(SameBy::Nobody, _) => adopted = !how.own,
                Found::Same(SameBy::Upload(other, alias_of), info) => {
                    shared = Some((other, alias_of, info))
                }
                Found::Same(SameBy::Replace, _) => {
                    self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                        .await?
                }
                Found::Other(owner) if how.overwrite => {
                    // The owner's upload waits for the key it loses (invariant 8): the
                    // overwriter's removal hands it back.
                    if let Some(owner) = owner {
                        if let Some(earlier) = self.upload_named_by(&owner).await? {
                            self.overwritten(key, upload, [earlier]).await?;
                        }
                    }
                    self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                        .await?
                }
                Found::Other(_) => {
                    self.drop_created(key, lease).await?;
                    return Ok(KeyOutcome::Conflict.into());
                }
            }
        } else {
            self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                .await?;
        }
        if let Some((other, alias_of, info)) = shared {
            // The record says what the other upload's object holds (an adopted `.meta` of
            // another name may differ from ours).
            let share = |r: &mut KeyRecord| {
                r.lease = None;
                r.refs.insert(other.clone());
                r.by.clone_from(&other);
                r.alias_of.clone_from(&alias_of);
                r.etag.clone_from(&info.etag);
                r.size = info.size;
            };
            let outcome = self
                .release_as(key, lease, written, share, KeyOutcome::Unchanged)
                .await?;
            return Ok(Publication { outcome, alias_of });
        }
        if lease.op == CREATE && !adopted {
            // Created (or our own earlier attempt's copy found): the record, written with the
            // lease, already says what is there; the upload's finalize releases the lease by
            // listing the key (invariant 1), saving a write per key.
            if let Ok(mut held) = self.held.lock() {
                held.insert(key.to_string(), lease.clone());
            }
            return Ok(KeyOutcome::Published.into());
        }
        let alias_of = if adopted {
            None
        } else {
            self.alias_target(content)
        };
        let release = |r: &mut KeyRecord| {
            r.lease = None;
            r.alias_of.clone_from(&alias_of);
            if adopted && r.by == upload {
                r.by.clear();
            }
        };
        let outcome = if adopted {
            KeyOutcome::Unchanged
        } else {
            KeyOutcome::Published
        };
        let outcome = self
            .release_as(key, lease, written, release, outcome)
            .await?;
        Ok(Publication { outcome, alias_of })
    }

    /// Releases `lease` on `key`'s record, changed by `release`: by one conditional write on
    /// the version `written` when known, else on a read.
    async fn release_as(
        &self,
        key: &str,
        lease: &Lease,
        written: Option<(KeyRecord, String)>,
        release: impl Fn(&mut KeyRecord),
        outcome: KeyOutcome,
    ) -> io::Result<KeyOutcome> {
        let file = key_file(key);
        if let Some((mut record, version)) = written {
            release(&mut record);
            let bytes = serde_json::to_vec(&record)?;
            let condition = Precondition::Version(&version);
            if self.store.put_if(&file, &bytes, condition).await?.is_some() {
                return Ok(outcome);
            }
        }
        self.update(&file, |current: Option<KeyRecord>| match current {
            Some(mut r) if r.lease.as_ref() == Some(lease) => {
                release(&mut r);
                Ok(Step::Write(r, ()))
            }
            // Taken over (we were too slow): the new holder decides.
            _ => Ok(Step::Keep(())),
        })
        .await?;
        Ok(outcome)
    }

    /// Creates the object at `key` where nothing is; else says whether what is there holds
    /// the same content. On a failed copy the reference is taken back. `seen`: as
    /// [`Self::create_or_find`].
    async fn create_object(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        adopt: bool,
        seen: bool,
    ) -> io::Result<Found> {
        let owner = self.owner_for(upload).await?;
        let found = self.create_or_find(key, content, owner.as_deref(), seen);
        let found = match found.await? {
            Creation::Created => return Ok(Found::Created),
            Creation::Failed(e) => {
                self.take_back_created(key, upload, lease).await?;
                return Err(e.into());
            }
            Creation::Found(found) => found,
        };
        let same = holds(&found, content);
        Ok(if adopt || same {
            let info = found.info.clone();
            Found::Same(self.same_by(upload, found).await?, info)
        } else if owner.is_some() && found.owner == owner {
            Found::Same(SameBy::Replace, found.info)
        } else {
            Found::Other(found.owner)
        })
    }

    /// Whose the object of the same content found at a key is (invariant 7). The owner's
    /// record is read after the object was seen, never taken from a read already in flight
    /// (as [`Self::read_listing`] does): one begun earlier may predate the owner's
    /// registration, and would call a live upload's object an orphan's (`SameBy::Replace`).
    async fn same_by(&self, upload: &str, found: Owned) -> io::Result<SameBy> {
        let Some(owner) = found.owner else {
            return Ok(SameBy::Nobody);
        };
        if owner == self.owner_token(upload).await? {
            return Ok(SameBy::Us);
        }
        // A kept answer may be older than this key's object was seen, yet it is as good: the
        // record naming the owner's upload is there (created, or found) before the object is
        // seen (the `create` lease's look, or `share_created`'s), and the owner's removal
        // deletes every object naming it before it forgets the upload — the object seen
        // after our record was there, the removal had not passed the key yet, and meets our
        // record when it does. (Only an object the owner's run wrote after its removal had
        // passed the key, left by a crash before that run's finalize took it back, names a
        // gone upload: a fresh read replaces it, a kept answer names the gone upload in the
        // record — a key kept, which `verify` reports, never one lost. A fresh read during
        // that removal names it too.)
        Ok(match self.upload_named_by(&owner).await? {
            Some(other) => SameBy::Upload(other, found.alias_of),
            None => SameBy::Replace,
        })
    }

    /// The upload `owner` names, from [`Self::known_owners`] where it was found (or is being
    /// read), else read. Found gone, it is asked again by the next key: only a read begun
    /// after this key's object was seen may call it gone (see `same_by`).
    async fn upload_named_by(&self, owner: &str) -> io::Result<Option<String>> {
        let read = || self.upload_by_owner(owner);
        let (found, ours) = read_shared(&self.known_owners, owner, read, Option::is_some).await?;
        match found {
            // Gone by a read another key began (perhaps before our object was seen): ask anew.
            None if !ours => self.upload_by_owner(owner).await,
            found => Ok(found),
        }
    }

    /// Takes `upload`'s reference back from the record its [`CREATE`] lease made, its creation
    /// having failed: nothing was created, so nothing is deleted — the record goes, or keeps
    /// the other uploads it names (one written as sharing). Only while the lease is ours (see
    /// [`Self::take_back`]: a run that took it over decides). Taken back as a removal would
    /// (a tombstone, the object deleted), a run of the same upload taking the lease over
    /// waited for that tombstone instead, and gave up.
    async fn take_back_created(&self, key: &str, upload: &str, lease: &Lease) -> io::Result<()> {
        self.update(&key_file(key), |current: Option<KeyRecord>| match current {
            Some(mut r) if r.lease.as_ref() == Some(lease) => {
                r.refs.remove(upload);
                if r.refs.is_empty() {
                    return Ok(Step::Delete(()));
                }
                r.lease = None;
                Ok(Step::Write(r, ()))
            }
            _ => Ok(Step::Keep(())),
        })
        .await
    }

    /// Removes the record a [`CREATE`] lease made for an object that turned out to be
    /// somebody else's: nothing symdex wrote is there. Only while the lease is ours.
    async fn drop_created(&self, key: &str, lease: &Lease) -> io::Result<()> {
        self.update(&key_file(key), |current: Option<KeyRecord>| match current {
            Some(r) if r.lease.as_ref() == Some(lease) => Ok(Step::Delete(())),
            _ => Ok(Step::Keep(())),
        })
        .await
    }

    /// Takes `upload`'s reference to `key` back; the last one out deletes the object under a
    /// tombstone lease (invariant 3). Also finishes a dead remover's tombstone.
    pub async fn remove(&self, key: &str, upload: &str) -> io::Result<RemoveOutcome> {
        self.remove_reporting(key, upload, false, None).await
    }

    /// [`Self::remove`] for an upload being removed: a key it unpublishes is noted in its
    /// upload record (`removed`) before the tombstone goes. Noted after, a failure in between
    /// lost the key from the removal's report: its retry found neither record nor reference.
    /// Noted before, the retry finds its own tombstone and reports the key again.
    pub async fn remove_noted(&self, key: &str, upload: &str) -> io::Result<RemoveOutcome> {
        self.remove_reporting(key, upload, true, None).await
    }

    /// `leased`: only while the record holds this lease of ours ([`Self::take_back`]).
    async fn remove_reporting(
        &self,
        key: &str,
        upload: &str,
        note: bool,
        leased: Option<&Lease>,
    ) -> io::Result<RemoveOutcome> {
        let file = key_file(key);
        let holder = remove_holder(upload);
        let mut listed = Listed::new();
        let mut patience = Patience::new(self.policy.wait);
        let (taken, version) = loop {
            let (taken, version) = self
                .update_versioned(&file, None, |current: Option<KeyRecord>| {
                    if let Some(ours) = leased {
                        // Ours still: nobody else acts on the key meanwhile, and the lease is
                        // replaced below (by a tombstone's, or cleared). Else not ours to take.
                        match current {
                            Some(mut record) if record.lease.as_ref() == Some(ours) => {
                                record.lease = None;
                                return self.take_back_step(record, upload, &holder, false);
                            }
                            _ => return Ok(Step::Keep(Ok(None))),
                        }
                    }
                    let Some(mut record) = current else {
                        if !self.owners_named() {
                            return Ok(Step::Keep(Ok(None)));
                        }
                        // No record: the object may be this upload's alone (invariant 7). A
                        // tombstone holding our lease, created only where no record is, keeps
                        // every writer and sharer off while we look whose it is.
                        let lease = self.new_lease("remove", &holder);
                        let tombstone = KeyRecord {
                            key: key.to_string(),
                            by: upload.to_string(),
                            lease: Some(lease.clone()),
                            ..Default::default()
                        };
                        let taken = Taken {
                            outcome: RemoveOutcome::Removed,
                            lease: Some(lease),
                            by: upload.to_string(),
                            owned_only: true,
                        };
                        return Ok(Step::Write(tombstone, Ok(Some(taken))));
                    };
                    if let Err(holder) = self.settle(&mut record, &listed) {
                        return Ok(Step::Keep(Err(holder)));
                    }
                    // Our own earlier attempt's tombstone: its removal is ours to finish and report.
                    let ours = record.lease.as_ref().is_some_and(|l| l.holder == holder);
                    if self.blocked(&record, &holder) {
                        if let Some(creator) = self.creating(&record) {
                            return Ok(Step::Keep(Err(creator)));
                        }
                        return Ok(Step::Wait(format!("{key}: a change is in progress")));
                    }
                    self.take_back_step(record, upload, &holder, ours)
                })
                .await?;
            match taken {
                Ok(taken) => break (taken, version),
                Err(creator) => {
                    self.learn_listing(&creator, &mut listed, &mut patience, key)
                        .await?
                }
            }
        };
        match (taken, version) {
            (None, _) => Ok(RemoveOutcome::NotReferenced),
            (
                Some(Taken {
                    mut outcome,
                    lease: Some(lease),
                    by,
                    owned_only,
                }),
                Some(tombstone),
            ) => {
                self.check_own_lease(&lease)?;
                let delete = if self.owners_named() {
                    // Only the object the tombstone is for (invariant 7): one created since the
                    // object was deleted (by a writer finding the key free, which needs no
                    // record) names another owner, and stays.
                    let found = self.store.owned(key).await?;
                    let owner = found.as_ref().and_then(|f| f.owner.clone());
                    let named = owner.is_some() && owner == self.owner_for(&by).await?;
                    let delete = found.is_some() && (named || (owner.is_none() && !owned_only));
                    if owned_only && by == upload && !delete {
                        outcome = RemoveOutcome::NotReferenced;
                    }
                    delete
                } else {
                    true
                };
                // Noted before the object goes: a retry that finds it gone still reports it.
                if note && outcome == RemoveOutcome::Removed {
                    self.note_removed(upload, key).await?;
                }
                if delete {
                    self.store.delete(key).await?;
                }
                // Only our tombstone goes: one taken over meanwhile stays its new holder's.
                self.store.delete_if(&file, &tombstone.version).await?;
                Ok(outcome)
            }
            (Some(taken), _) => Ok(taken.outcome),
        }
    }

    /// [`Self::remove_reporting`]'s swap, on a record nobody else's live lease holds:
    /// `upload`'s reference taken out, and the record kept (others reference it) or
    /// tombstoned under `holder`'s lease (the last one out, invariant 3). `ours`: the record
    /// is our own earlier attempt's tombstone.
    #[allow(clippy::type_complexity)]
    fn take_back_step(
        &self,
        mut record: KeyRecord,
        upload: &str,
        holder: &str,
        ours: bool,
    ) -> io::Result<Step<KeyRecord, Result<Option<Taken>, String>>> {
        let had = record.refs.remove(upload) || (ours && record.refs.is_empty());
        if !had && !record.refs.is_empty() {
            return Ok(Step::Keep(Ok(None)));
        }
        // A tombstone made where no record was (invariant 7) names no content.
        let owned_only = record.refs.is_empty() && record.etag.is_empty();
        if !record.refs.is_empty() {
            let kept = Taken {
                outcome: RemoveOutcome::Kept,
                lease: None,
                by: record.by.clone(),
                owned_only,
            };
            return Ok(Step::Write(record, Ok(Some(kept))));
        }
        // The last reference (or a dead remover's tombstone): an empty record holding our
        // lease, written before the object goes (invariant 3).
        let lease = self.new_lease("remove", holder);
        record.lease = Some(lease.clone());
        let outcome = if had {
            RemoveOutcome::Removed
        } else {
            RemoveOutcome::NotReferenced
        };
        let taken = Taken {
            outcome,
            lease: Some(lease),
            by: record.by.clone(),
            owned_only,
        };
        Ok(Step::Write(record, Ok(Some(taken))))
    }

    /// Every referenced key: the records, and the keys uploads list that have none, as their
    /// objects' owners stand for them (invariant 7).
    pub async fn all_keys(&self) -> io::Result<Vec<KeyRecord>> {
        if !self.store.names_owners() {
            return self.list_records(&format!("{STATE_PREFIX}/refs/")).await;
        }
        self.all_keys_of(&self.uploads().await?).await
    }

    /// [`Self::all_keys`], given every upload record.
    pub async fn all_keys_of(&self, uploads: &[UploadRecord]) -> io::Result<Vec<KeyRecord>> {
        let mut records = self.recorded_keys().await?;
        if !self.store.names_owners() {
            return Ok(records);
        }
        let mut seen: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
        let owners = self
            .owners_of(uploads.iter().map(|u| u.upload.as_str()))
            .await?;
        for upload in uploads {
            for key in upload.all_keys() {
                if seen.insert(key.clone()) {
                    if let Some((record, _)) = self.owned_key_unread(&key, &owners).await? {
                        records.push(record);
                    }
                }
            }
        }
        records.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(records)
    }

    /// The keys that have a record (`_symdex/refs/`): every key, where objects name no owner;
    /// else those two uploads share or a removal holds (invariant 7).
    pub async fn recorded_keys(&self) -> io::Result<Vec<KeyRecord>> {
        self.list_records(&format!("{STATE_PREFIX}/refs/")).await
    }

    /// The owner each of `uploads` names its objects by ([`Self::owner_token`]), to its id:
    /// an object's owner is found here, not by reading its upload's record once per key.
    pub async fn owners_of<'u>(
        &self,
        uploads: impl ExactSizeIterator<Item = &'u str>,
    ) -> io::Result<std::collections::HashMap<String, &'u str>> {
        let mut owners = std::collections::HashMap::with_capacity(uploads.len());
        for upload in uploads {
            owners.insert(self.owner_token(upload).await?, upload);
        }
        Ok(owners)
    }

    /// The record a key without one stands for (invariant 7), read without the object's
    /// bytes where the store can ([`Storage::owned_unread`]), and what is there now (its size
    /// then, and the content named with the owner). The owner is looked up in `owners`
    /// ([`Self::owners_of`]), else by its upload record. `None` as [`Self::owned_key`].
    pub async fn owned_key_unread(
        &self,
        key: &str,
        owners: &std::collections::HashMap<String, &str>,
    ) -> io::Result<Option<(KeyRecord, ObjectInfo)>> {
        let Some(found) = self.store.owned_unread(key).await? else {
            return Ok(None);
        };
        let now = found.info.clone();
        let listed = |owner: &str| owners.get(owner).map(|u| u.to_string());
        let record = self.owned_key_of(key, found, listed).await?;
        Ok(record.map(|record| (record, now)))
    }

    async fn list_records<T: DeserializeOwned>(&self, prefix: &str) -> io::Result<Vec<T>> {
        let mut out = Vec::new();
        for file in self.store.list(prefix).await? {
            if let Some(record) = self.read(&file).await? {
                out.push(record);
            }
        }
        Ok(out)
    }

    pub async fn upload(&self, upload: &str) -> io::Result<Option<UploadRecord>> {
        self.read(&self.upload_file(upload).await?).await
    }

    /// [`Self::upload`], with the read kept for a [`Self::plan`] that follows — unless the
    /// store's versions cost a pass over the record and there is one (a re-index mostly finds
    /// it indexed, and plans nothing): then the plan reads it again.
    pub async fn upload_read(
        &self,
        upload: &str,
    ) -> io::Result<(Option<UploadRecord>, Option<PriorRead>)> {
        if let Some(unparsed) = self.upload_unparsed(upload).await? {
            return unparsed.parse();
        }
        let file = self.upload_file(upload).await?;
        let read = self.store.get(&file).await?;
        let record = read.as_ref().map(|v| parse(&file, &v.bytes)).transpose()?;
        Ok((record, Some(PriorRead(read))))
    }

    /// The bytes of `upload`'s record, read now to be parsed later ([`UnparsedUpload::parse`]
    /// comes to what [`Self::upload_read`] would have returned): the CLI's reader thread
    /// reads records ahead, the writer parses them. `None` where a store's versions come free
    /// with a read (S3): [`Self::upload_read`] then reads with a `get`, and keeps the
    /// version for the plan.
    pub async fn upload_unparsed(&self, upload: &str) -> io::Result<Option<UnparsedUpload>> {
        if self.store.versions_are_free() {
            return Ok(None);
        }
        let file = self.upload_file(upload).await?;
        let bytes = self.store.read(&file).await?;
        Ok(Some(UnparsedUpload { file, bytes }))
    }

    /// One page of upload records in the order of their record files: those after the file
    /// `after` (a cursor; empty: from the start), at most `limit`. Returns them and the cursor
    /// of the next page (`None` when this page reached the end).
    pub async fn uploads_after(
        &self,
        after: &str,
        limit: usize,
    ) -> io::Result<(Vec<UploadRecord>, Option<String>)> {
        let mut files = self.store.list(UPLOADS_DIR).await?;
        files.sort();
        let rest: Vec<String> = files.into_iter().filter(|f| f.as_str() > after).collect();
        let page = &rest[..rest.len().min(limit)];
        let mut records = Vec::new();
        for file in page {
            // Gone since the listing: removed meanwhile.
            if let Some(record) = self.read(file).await? {
                records.push(record);
            }
        }
        let next = (rest.len() > page.len())
            .then(|| page.last().cloned())
            .flatten();
        Ok((records, next))
    }

    pub async fn uploads(&self) -> io::Result<Vec<UploadRecord>> {
        self.list_records(UPLOADS_DIR).await
    }

    /// [`Self::uploads`], each read as `T`: a view of [`UploadRecord`] naming only the fields
    /// a reader needs of every record (an audit holds them all at once).
    pub async fn uploads_as<T: DeserializeOwned>(&self) -> io::Result<Vec<T>> {
        self.list_records(UPLOADS_DIR).await
    }

    /// Lists `keys` as the upload's planned keys before any reference to them is added
    /// (invariant 4), creating the upload record in `indexing` state, and registers the upload
    /// with its source: in a [`UploadLayout::ByLocation`] store the record, named under its
    /// location, is the registration; a `Flat` one adds it to the location's source record.
    /// Returns the record it found, as it was (`None`: a new upload).
    pub async fn plan(
        &self,
        template: &UploadRecord,
        keys: &BTreeSet<String>,
        prior: Option<PriorRead>,
        stamp: Option<&FileStamp>,
    ) -> io::Result<(Option<UploadRecord>, Option<PriorRead>)> {
        let (found, written) = self
            .update_versioned(
                &self.upload_file(&template.upload).await?,
                prior.map(|p| p.0),
                |current: Option<UploadRecord>| {
                    let Some(mut record) = current else {
                        let mut record = template.clone();
                        record.state = UploadState::Indexing;
                        record.keys.clear();
                        record.planned = keys.clone();
                        return Ok(Step::Write(record, None));
                    };
                    let found = record.clone();
                    if record.state == UploadState::Removing {
                        return Ok(Step::Keep(Some(found)));
                    }
                    let replanned = record.take_plan_of(template);
                    if record.plan_keys(keys) || replanned {
                        Ok(Step::Write(record, Some(found)))
                    } else {
                        Ok(Step::Keep(Some(found)))
                    }
                },
            )
            .await?;
        // The record as written, for the finalize's swap (saves reading it again).
        let written = written.map(|v| PriorRead(Some(v)));
        let flat = self.layout().await? == UploadLayout::Flat;
        if flat && found.as_ref().map(|r| r.state) != Some(UploadState::Removing) {
            // A new upload usually comes from a new location: its record is created without
            // reading it first (a wrong guess fails and reads).
            let guess = found.is_none().then_some(None);
            self.update_versioned(
                &source_file(&template.source),
                guess,
                |current: Option<SourceRecord>| {
                    let mut source = current.unwrap_or_else(|| SourceRecord {
                        source: template.source.clone(),
                        ..Default::default()
                    });
                    let added = source.uploads.insert(template.upload.clone());
                    let restamped = stamp.is_some_and(|s| source.file.as_ref() != Some(s));
                    if restamped {
                        source.file = stamp.cloned();
                    }
                    if added || restamped {
                        Ok(Step::Write(source, ()))
                    } else {
                        Ok(Step::Keep(()))
                    }
                },
            )
            .await?;
        }
        Ok((found, written))
    }

    /// Adds `keys` to the planned keys of an upload that is not being removed (another
    /// upload's indexer holding a key for it, invariant 5). `false`: removed or gone.
    pub async fn plan_more(&self, upload: &str, keys: &BTreeSet<String>) -> io::Result<bool> {
        let file = self.upload_file(upload).await?;
        self.update(&file, |current: Option<UploadRecord>| {
            let Some(mut record) = current.filter(not_removing) else {
                return Ok(Step::Keep(false));
            };
            if record.plan_keys(keys) {
                Ok(Step::Write(record, true))
            } else {
                Ok(Step::Keep(true))
            }
        })
        .await
    }

    /// Forgets what `upload`'s last run came to (`indexed_as`), so that its next delivery is
    /// not answered from its record but runs in full: an overwrite replaced its bytes at some
    /// key (it waits for the key, invariant 8), and its record still lists the key. Only a
    /// report depends on it — a run in full finds the other content and says the upload
    /// waits, where an answer from the record would say `unchanged` — so a run of the upload
    /// that writes its answer back meanwhile (the swap orders the two) costs nothing but that.
    pub async fn forget_answer(&self, upload: &str) -> io::Result<()> {
        let file = self.upload_file(upload).await?;
        self.update(&file, |current: Option<UploadRecord>| {
            match current.filter(|r| r.indexed_as.is_some()) {
                Some(mut record) => {
                    record.indexed_as = None;
                    Ok(Step::Write(record, ()))
                }
                None => Ok(Step::Keep(())),
            }
        })
        .await
    }

    /// Adds `keys` to a live upload's references (`indexing` becomes `indexed` when the run
    /// is `Complete`, recording what it came to). `false` when the upload is being removed or
    /// gone: the caller takes the references back (invariant 4).
    ///
    /// `planned`: the record as this run's plan wrote it, if it did: the swap then needs no
    /// read, and fails (and reads) if anything changed since, a removal's mark included. A
    /// decision to leave the record as it is is never taken on that prefetched copy (it could
    /// miss a mark): it is read first. `ending`: the `create` leases the listing ends (their
    /// runs are listed with the keys, invariant 1).
    pub async fn finalize(
        &self,
        upload: &str,
        keys: &BTreeSet<String>,
        run: Run<'_>,
        planned: Option<PriorRead>,
        ending: &[(String, Lease)],
    ) -> io::Result<bool> {
        let written = self.finalize_read(upload, keys, run, planned, ending);
        Ok(written.await?.0)
    }

    /// [`Self::finalize`], also returning the record as it now stands when the swap wrote
    /// it (for a later finalize's swap).
    pub async fn finalize_read(
        &self,
        upload: &str,
        keys: &BTreeSet<String>,
        run: Run<'_>,
        planned: Option<PriorRead>,
        ending: &[(String, Lease)],
    ) -> io::Result<(bool, Option<PriorRead>)> {
        let runs: BTreeSet<String> = ending
            .iter()
            .map(|(_, lease)| lease.run.clone())
            .filter(|run| !run.is_empty())
            .collect();
        let mut prefetched = planned.and_then(|p| p.0).map(Some);
        let file = self.upload_file(upload).await?;
        loop {
            let mut on_prefetch = prefetched.is_some();
            let (decided, written) = self
                .update_versioned(&file, prefetched.take(), |current: Option<UploadRecord>| {
                    let stale = std::mem::take(&mut on_prefetch);
                    let keep = |alive| Ok(Step::Keep((!stale).then_some(alive)));
                    self.finalize_step(current, keys, &runs, run, keep)
                })
                .await?;
            if let Some(alive) = decided {
                return Ok((alive, written.map(|v| PriorRead(Some(v)))));
            }
        }
    }

    /// One swap of [`Self::finalize`]; `keep` makes the step that leaves the record as it is.
    fn finalize_step(
        &self,
        current: Option<UploadRecord>,
        keys: &BTreeSet<String>,
        runs: &BTreeSet<String>,
        run: Run<'_>,
        keep: impl Fn(bool) -> io::Result<Step<UploadRecord, Option<bool>>>,
    ) -> io::Result<Step<UploadRecord, Option<bool>>> {
        let Some(mut record) = current.filter(not_removing) else {
            return keep(false);
        };
        let summary = |r: &UploadRecord| {
            let counts = (r.keys.len(), r.runs.len(), r.planned.len());
            (counts, r.state, r.indexed_as.clone())
        };
        let before = summary(&record);
        record.keys.extend(keys.iter().cloned());
        record.runs.extend(runs.iter().cloned());
        // Referenced now: listed under `keys` alone (records written before this kept every
        // key in both; either way `all_keys` is the union).
        record.planned.retain(|k| !record.keys.contains(k));
        if let Run::Complete(indexed_as) = run {
            record.state = UploadState::Indexed;
            record.indexed_as = indexed_as.cloned();
        }
        if summary(&record) == before {
            keep(true)
        } else {
            Ok(Step::Write(record, Some(true)))
        }
    }

    /// Marks an upload `removing` (invariant 4) and returns it, or `None` when there is none.
    pub async fn begin_removal(&self, upload: &str) -> io::Result<Option<UploadRecord>> {
        self.begin_removal_if(upload, |_| true).await
    }

    /// [`Self::begin_removal`] only if `wanted` holds for the record as it is swapped (an
    /// expiry decided on the version it changes, so a promotion swapped in meanwhile wins);
    /// a removal already begun is returned as it is (whoever began it decided). `None`: no
    /// such upload, or not wanted.
    pub async fn begin_removal_if(
        &self,
        upload: &str,
        wanted: impl Fn(&UploadRecord) -> bool,
    ) -> io::Result<Option<UploadRecord>> {
        let file = self.upload_file(upload).await?;
        self.update(&file, |current: Option<UploadRecord>| {
            let Some(mut record) = current else {
                return Ok(Step::Keep(None));
            };
            if record.state == UploadState::Removing {
                return Ok(Step::Keep(Some(record)));
            }
            if !wanted(&record) {
                return Ok(Step::Keep(None));
            }
            record.state = UploadState::Removing;
            Ok(Step::Write(record.clone(), Some(record)))
        })
        .await
    }

    /// Changes the metadata of an upload that is not being removed (a promotion). Returns the
    /// record as written, or `None` when the upload is gone or being removed (an expiry that
    /// won the race: the promotion comes too late for it).
    pub async fn update_meta(
        &self,
        upload: &str,
        mut change: impl FnMut(&UploadRecord) -> UploadMeta,
    ) -> io::Result<Option<UploadRecord>> {
        let file = self.upload_file(upload).await?;
        self.update(&file, |current: Option<UploadRecord>| {
            let Some(mut record) = current.filter(not_removing) else {
                return Ok(Step::Keep(None));
            };
            let meta = change(&record);
            if record.meta == meta {
                Ok(Step::Keep(Some(record)))
            } else {
                record.meta = meta;
                Ok(Step::Write(record.clone(), Some(record)))
            }
        })
        .await
    }

    /// Notes a key a removal unpublished, so a retry of an interrupted removal reports it.
    pub async fn note_removed(&self, upload: &str, key: &str) -> io::Result<()> {
        let file = self.upload_file(upload).await?;
        self.update(&file, |current: Option<UploadRecord>| match current {
            Some(mut r) if r.state == UploadState::Removing => {
                if r.removed.insert(key.to_string()) {
                    Ok(Step::Write(r, ()))
                } else {
                    Ok(Step::Keep(()))
                }
            }
            _ => Ok(Step::Keep(())),
        })
        .await
    }

    /// Forgets a removed upload (after every reference was taken back).
    pub async fn end_removal(&self, record: &UploadRecord) -> io::Result<()> {
        if self.layout().await? == UploadLayout::Flat {
            self.unregister_source(record).await?;
        }
        let file = self.upload_file(&record.upload).await?;
        self.update(&file, |current: Option<UploadRecord>| match current {
            Some(r) if r.state == UploadState::Removing => Ok(Step::Delete(())),
            _ => Ok(Step::Keep(())),
        })
        .await
    }

    /// Takes a removed upload out of its location's source record ([`UploadLayout::Flat`]).
    async fn unregister_source(&self, record: &UploadRecord) -> io::Result<()> {
        self.update(
            &source_file(&record.source),
            |current: Option<SourceRecord>| {
                let Some(mut source) = current else {
                    return Ok(Step::Keep(()));
                };
                if !source.uploads.remove(&record.upload) {
                    return Ok(Step::Keep(()));
                }
                if source.uploads.is_empty() {
                    Ok(Step::Delete(()))
                } else {
                    Ok(Step::Write(source, ()))
                }
            },
        )
        .await
    }

    /// The source record of one ingest location (`None` in a [`UploadLayout::ByLocation`]
    /// store, which keeps none).
    pub async fn source(&self, source: &str) -> io::Result<Option<SourceRecord>> {
        if self.layout().await? != UploadLayout::Flat {
            return Ok(None);
        }
        self.read(&source_file(source)).await
    }

    /// The uploads indexed from one ingest location: `source` as upload records name it
    /// (`s3://bucket/key` or a path), `location` as its upload ids begin (`s3:bucket/key`,
    /// [`location_of`]). A `ByLocation` store lists the location's directory: an upload
    /// whose record was created before the listing is in it (S3 lists what was written).
    pub async fn uploads_of_source(
        &self,
        source: &str,
        location: &str,
    ) -> io::Result<BTreeSet<String>> {
        if self.layout().await? == UploadLayout::Flat {
            return Ok(self
                .source(source)
                .await?
                .map(|r| r.uploads)
                .unwrap_or_default());
        }
        let dir = format!("{UPLOADS_DIR}{}/", location_dir(location));
        let mut uploads = BTreeSet::new();
        for file in self.store.list(&dir).await? {
            // Gone since the listing: removed meanwhile.
            if let Some(record) = self.read::<UploadRecord>(&file).await? {
                if record.source == source {
                    uploads.insert(record.upload);
                }
            }
        }
        Ok(uploads)
    }

    /// A debug id's record (empty where there is none), with the read kept for an
    /// [`Self::update_id_on`] that follows.
    pub async fn id_read(&self, debug_id: &str) -> io::Result<(IdRecord, PriorRead)> {
        let file = id_file(debug_id);
        let read = self.store.get(&file).await?;
        let record = read.as_ref().map(|v| parse(&file, &v.bytes)).transpose()?;
        Ok((record.unwrap_or_default(), PriorRead(read)))
    }

    /// Creates a debug id's record as `record` where there is none: a first delivery's guess
    /// that its PE or PDB is the first of the two to arrive (or the only one) — one write, no
    /// read. `false`: a record is there, unchanged (the caller reads and updates it as it
    /// would have without the guess). Only a write checks a guess.
    pub async fn create_id(&self, debug_id: &str, record: &IdRecord) -> io::Result<bool> {
        let bytes = serde_json::to_vec(record)?;
        let created = self
            .store
            .put_if(&id_file(debug_id), &bytes, Precondition::Absent)
            .await?;
        Ok(created.is_some())
    }

    /// [`Self::update_id`], swapping first on the record as `prior` read it (no read again
    /// while it is current). Leaving it as it is, decided on that read, is as good as
    /// decided on a later one: the read came after everything the caller did before.
    pub async fn update_id_on(
        &self,
        debug_id: &str,
        prior: PriorRead,
        f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        self.update_id_from(debug_id, Some(prior.0), f).await
    }

    /// Updates a debug id's record; `f` returns whether it changed anything.
    pub async fn update_id(
        &self,
        debug_id: &str,
        f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        self.update_id_from(debug_id, None, f).await
    }

    /// [`Self::update_id`] from what was `prefetched` of the record, if anything.
    async fn update_id_from(
        &self,
        debug_id: &str,
        prefetched: Option<Option<Versioned>>,
        mut f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        let file = id_file(debug_id);
        let (record, _) = self
            .update_versioned(&file, prefetched, |current: Option<IdRecord>| {
                let mut record = current.unwrap_or_default();
                if f(&mut record) {
                    Ok(Step::Write(record.clone(), record))
                } else {
                    Ok(Step::Keep(record))
                }
            })
            .await?;
        Ok(record)
    }

    /// Changes one source join record (sourcemap.rs) with `f`, which returns whether it
    /// changed anything; returns the record as swapped, so the caller sees every offer and
    /// want written before its own (an empty record is deleted).
    ///
    /// The record a run last read or wrote is kept parsed, and shared rather than copied: in
    /// a store-wide scope every debug file naming `stdio.h` changes the same record of up to
    /// 2 x 256 entries, and copying it three times per change was a tenth of a fresh index.
    pub async fn update_source_map(
        &self,
        file: &str,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_guessing(file, false, f).await
    }

    /// [`Self::update_source_map`]; `absent`: the record is taken to be absent and created
    /// without a read (a wrong guess fails and reads). Only for a change `f` makes to any
    /// record: a decision to keep one is never taken on the guess.
    pub async fn update_source_map_guessing(
        &self,
        file: &str,
        absent: bool,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_from(file, absent.then_some(None), f)
            .await
    }

    /// A source-map record as it stands for this process, read for a later
    /// [`Self::update_source_map_read`]: a caller acting on what it holds before changing it
    /// swaps on this read (no second read where nothing changed in between).
    pub async fn read_source_map(&self, file: &str) -> io::Result<SourceMapRead> {
        if self.deferred_source_maps.is_some() {
            let record = self.source_map(file).await?;
            return Ok(SourceMapRead { read: None, record });
        }
        let read = self.store.get(file).await?;
        let record = match &read {
            // Kept parsed under its version: the swap's first attempt takes it from there
            // instead of parsing the same bytes again.
            Some(read) => {
                let record = Arc::new(parse(file, &read.bytes)?);
                self.remember_source_map(file, &read.version, &record);
                record
            }
            None => Arc::default(),
        };
        Ok(SourceMapRead {
            read: Some(read),
            record,
        })
    }

    /// [`Self::update_source_map`], starting from `read`: its version is swapped on (where
    /// the record changed since, it is read again and `f` runs on that).
    pub async fn update_source_map_read(
        &self,
        file: &str,
        read: SourceMapRead,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_from(file, read.read, f).await
    }

    /// [`Self::update_source_map`] from a read made before (`prefetched`: `Some(None)` taken
    /// to be absent; `None`: read here).
    async fn update_source_map_from(
        &self,
        file: &str,
        prefetched: Option<Option<Versioned>>,
        mut f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        if let Some(deferred) = &self.deferred_source_maps {
            return self.update_deferred_source_map(deferred, file, f).await;
        }
        let cache = || {
            self.parsed_source_maps
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        };
        // The version last read, and whether the update left that record as it was.
        let read_version = std::sync::Mutex::new(None::<String>);
        let mut unchanged = false;
        let decode = |read: &Versioned| -> io::Result<Arc<SourceMapRecord>> {
            *read_version.lock().unwrap_or_else(|p| p.into_inner()) = Some(read.version.clone());
            // Taken out of the cache (put back below): unshared, `f` changes it in place.
            let cached = cache()
                .remove(file)
                .filter(|(version, _)| *version == read.version);
            match cached {
                Some((_, record)) => Ok(record),
                None => Ok(Arc::new(parse(file, &read.bytes)?)),
            }
        };
        let mut last_version = None;
        let update = |current: Option<Arc<SourceMapRecord>>| {
            // This attempt's read (decode ran just before, if there was a record).
            last_version = read_version
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let mut record = current.unwrap_or_default();
            unchanged = !f(Arc::make_mut(&mut record));
            if unchanged {
                Ok(Step::Keep(record))
            } else if record.offers.is_empty() && record.wants.is_empty() {
                Ok(Step::Delete(record))
            } else {
                Ok(Step::Write(Arc::clone(&record), record))
            }
        };
        let (record, written) = self
            .update_decoded(file, prefetched, decode, update)
            .await?;
        // Versions name content (a SHA-1, an ETag), so a record kept under the version it
        // was parsed from or written as is what any later read of that version parses to.
        match (written, last_version) {
            (Some(written), _) => self.remember_source_map(file, &written.version, &record),
            (None, Some(version)) if unchanged => self.remember_source_map(file, &version, &record),
            _ => {}
        }
        Ok(record)
    }

    /// Keeps a source-map record as parsed from (or written as) `version`, for the next
    /// update reading that version (bounded: past that many records, the cache starts over).
    fn remember_source_map(&self, file: &str, version: &str, record: &Arc<SourceMapRecord>) {
        let mut cache = self
            .parsed_source_maps
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if cache.len() >= PARSED_SOURCE_MAPS {
            cache.clear();
        }
        cache.insert(file.to_string(), (version.to_string(), Arc::clone(record)));
    }

    /// Records that `upload` waits for `key`, where it found other content, then looks at
    /// the key again: what is there now (invariant 8). Free, or holding the upload's own
    /// content, the key is the upload's to publish after all.
    pub async fn wait_for(&self, key: &str, upload: &str) -> io::Result<Option<ObjectInfo>> {
        self.mark_waiting(key, upload).await?;
        Ok(self.store.head(key).await?)
    }

    /// Writes the marker saying that `upload` waits for `key`.
    async fn mark_waiting(&self, key: &str, upload: &str) -> io::Result<()> {
        let waiting = Waiting {
            key: key.to_string(),
            upload: upload.to_string(),
        };
        let bytes = serde_json::to_vec(&waiting)?;
        Ok(self.store.put(&waiting_file(key, upload), &bytes).await?)
    }

    /// Marks the uploads whose bytes `upload` is about to replace at `key` (an overwrite) as
    /// waiting for it (invariant 8), before the replacement: a marker of an upload that
    /// still holds the key (the overwrite then failed, or lost a race) costs a re-index that
    /// changes nothing, a missing one would lose the key when the overwriter goes.
    async fn overwritten(
        &self,
        key: &str,
        upload: &str,
        earlier: impl IntoIterator<Item = String>,
    ) -> io::Result<()> {
        for earlier in earlier.into_iter().filter(|e| e != upload) {
            self.mark_waiting(key, &earlier).await?;
            if let Ok(mut overwrote) = self.overwrote.lock() {
                overwrote
                    .entry(upload.to_string())
                    .or_default()
                    .insert(earlier);
            }
        }
        Ok(())
    }

    /// The uploads whose bytes `upload` has replaced at some key since the last call (an
    /// overwrite): they wait for those keys.
    pub fn take_overwritten(&self, upload: &str) -> BTreeSet<String> {
        self.overwrote
            .lock()
            .ok()
            .and_then(|mut overwrote| overwrote.remove(upload))
            .unwrap_or_default()
    }

    /// The uploads waiting for `key` (invariant 8): asked after its object was deleted.
    pub async fn waiting(&self, key: &str) -> io::Result<Vec<Waiting>> {
        self.list_records(&waiting_dir(key)).await
    }

    /// Every upload waiting for a key (`verify`).
    pub async fn all_waiting(&self) -> io::Result<Vec<Waiting>> {
        self.list_records(WAITING_DIR).await
    }

    /// Forgets a wait (its upload is gone, or going).
    pub async fn stop_waiting(&self, waiting: &Waiting) -> io::Result<()> {
        let file = waiting_file(&waiting.key, &waiting.upload);
        Ok(self.store.delete(&file).await?)
    }

    /// A key is live when its record has references and no removal in progress.
    pub async fn is_live(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        Ok(self
            .key(key)
            .await?
            .filter(|r| !r.refs.is_empty() && r.lease.as_ref().is_none_or(|l| l.op != "remove")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{content_sha1, LocalStore};

    fn content<'a>(etag: &'a str, path: &'a std::path::Path) -> Content<'a> {
        Content {
            etag,
            size: std::fs::metadata(path).unwrap().len(),
            source: CopySource::File(path),
        }
    }

    /// Lists `keys` in `upload`'s record as its finalize does (the release of its `create`
    /// leases, invariant 1), creating the record first.
    async fn finalized(refs: &RefStore<'_>, upload: &str, keys: &[&str]) {
        let keys: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
        let template = UploadRecord {
            upload: upload.into(),
            source: format!("/in/{upload}"),
            ..Default::default()
        };
        refs.plan(&template, &keys, None, None).await.unwrap();
        let complete = Run::Complete(None);
        let ending = refs.take_held(upload);
        let listed = refs.finalize(upload, &keys, complete, None, &ending);
        assert!(listed.await.unwrap());
    }

    /// A local store and one input file (`in`, beside it), with the input's content identity.
    fn store_and_input() -> (tempfile::TempDir, LocalStore, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("s")).unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, b"bytes").unwrap();
        let etag = crate::storage::local::file_sha1(&input).unwrap();
        (dir, store, etag)
    }

    /// A policy that gives up on a live lease at once (a retryable error).
    fn impatient() -> LeasePolicy {
        LeasePolicy {
            wait: Wait {
                attempts: 2,
                first_pause: Duration::ZERO,
                max_pause: Duration::ZERO,
            },
            ..LeasePolicy::default()
        }
    }

    /// Every field comes back where it was written, the flattened metadata's included.
    #[test]
    fn upload_records_read_as_written() {
        let s = |v: &str| Some(v.to_string());
        let set = |v: &str| BTreeSet::from([v.to_string()]);
        let full = UploadRecord {
            upload: "file:/a@e#build=b".into(),
            source: "/a".into(),
            meta: UploadMeta::with_every_field(),
            etag: "e".into(),
            size: 3,
            time: "t".into(),
            ingest_version: s("v"),
            ingest_etag: s("ie"),
            entry: s("x!/y"),
            state: UploadState::Removing,
            keys: set("k/1"),
            runs: set("run"),
            planned: set("k/2"),
            source_paths: vec!["/src/a.c".into()],
            source_path: s("src/a.c"),
            offered_in: s("_symdex/sourcemap/x/ab.json"),
            as_source: true,
            removed: set("k/3"),
            indexed_as: Some(IndexedAs {
                plan: "p".into(),
                referenced: 1,
                records: vec![crate::manifest::Record {
                    unchanged: vec!["k/1".into()],
                    ..Default::default()
                }],
                conflicts: set("k/4"),
                unchanged_at: vec![vec![0]],
            }),
        };
        let text = serde_json::to_vec(&full).unwrap();
        assert_eq!(parse::<UploadRecord>("u.json", &text).unwrap(), full);
    }
    #[tokio::test]
    async fn a_create_lease_is_released_by_its_uploads_finalize() {
        let (dir, store, etag) = store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::with_policy(&store, impatient());
        let c = content(&etag, &input);
        let publish = |key: &'static str, upload: &'static str| {
            let (refs, c) = (&refs, &c);
            async move {
                refs.publish(key, upload, c, OnDifferent::Conflict, true)
                    .await
            }
        };
        // Created: the record holds u1's reference and its `create` lease, no release written.
        assert_eq!(publish("k", "u1").await.unwrap(), KeyOutcome::Published);
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!(record.refs, ["u1".to_string()].into());
        let lease = record
            .lease
            .clone()
            .expect("the lease is left to the finalize");
        assert_eq!(
            (lease.op.as_str(), lease.holder.as_str()),
            (CREATE, "index:u1")
        );
        // Until u1 lists the key, the lease is in force: others wait (and give up, to be
        // retried), and the audit sees a change in progress.
        let before = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(
            before.problems.iter().any(|p| p.kind == "lease"),
            "{before:?}"
        );
        let waited = publish("k", "u2").await.unwrap_err();
        assert_eq!(waited.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            refs.remove("k", "u1").await.unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "a remover waits for the creation too"
        );
        // u1's finalize lists it: released, for the audit and for everyone else.
        finalized(&refs, "u1", &["k"]).await;
        let after = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(after.problems.is_empty(), "{:?}", after.problems);
        let other = RefStore::with_policy(&store, impatient());
        let c2 = content(&etag, &input);
        assert_eq!(
            other
                .publish("k", "u2", &c2, OnDifferent::Conflict, true)
                .await
                .unwrap(),
            KeyOutcome::Unchanged
        );
        let shared = refs.key("k").await.unwrap().unwrap();
        assert_eq!(shared.refs, ["u1".to_string(), "u2".to_string()].into());
        assert_eq!(
            shared.lease, None,
            "the write adding u2 drops the released lease"
        );
        // A run that takes its references back instead of listing them releases its leases
        // by a write first: its own removal is not blocked by them.
        assert_eq!(publish("k2", "u3").await.unwrap(), KeyOutcome::Published);
        let held = refs.take_held("u3");
        assert_eq!(held.len(), 1);
        assert!(refs.take_held("u3").is_empty(), "handed on once");
        refs.release_created(&held).await.unwrap();
        assert_eq!(refs.key("k2").await.unwrap().unwrap().lease, None);
        assert_eq!(
            refs.remove("k2", "u3").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.size("k2").await.unwrap(), None);
    }

    /// Keys published at once take their record steps in turn (`InTurn`): while the first
    /// waits for another upload's creation, the second is not touched — so two uploads
    /// sharing keys never hold one each of two keys the other waits for — and once the first
    /// has decided, the second goes.
    #[tokio::test]
    async fn keys_published_at_once_take_their_records_in_turn() {
        let (dir, store, etag) = store_and_input();
        let input = dir.path().join("in");
        let patient = LeasePolicy {
            wait: Wait {
                attempts: 100_000,
                first_pause: Duration::from_millis(1),
                max_pause: Duration::from_millis(1),
            },
            ..LeasePolicy::default()
        };
        let c = content(&etag, &input);
        // u1 created x and has not listed it: its `create` lease is in force.
        let first = RefStore::with_policy(&store, patient.clone());
        let published = first.publish("x", "u1", &c, OnDifferent::Conflict, true);
        assert_eq!(published.await.unwrap(), KeyOutcome::Published);
        // u2 publishes x and y at once, in turn.
        let second = RefStore::with_policy(&store, patient);
        let mut turns = InTurn::chain(2).into_iter();
        let both = futures_util::future::join(
            second.publish_in_turn("x", "u2", &c, OnDifferent::Conflict, true, turns.next()),
            second.publish_in_turn("y", "u2", &c, OnDifferent::Conflict, true, turns.next()),
        );
        tokio::pin!(both);
        // However long x waits, y is not begun (without the turn it would be created at once).
        let waiting = tokio::time::timeout(Duration::from_millis(50), &mut both).await;
        assert!(waiting.is_err(), "x did not wait: {waiting:?}");
        assert_eq!(
            first.key("y").await.unwrap(),
            None,
            "y began before x decided"
        );
        // u1 lists x: x decides (u2 references it), then y is created.
        finalized(&first, "u1", &["x"]).await;
        let (x, y) = both.await;
        assert_eq!(
            (x.unwrap().outcome, y.unwrap().outcome),
            (KeyOutcome::Unchanged, KeyOutcome::Published)
        );
        let x = first.key("x").await.unwrap().unwrap();
        assert_eq!(x.refs, ["u1".to_string(), "u2".to_string()].into());
        let y = first.key("y").await.unwrap().unwrap();
        assert_eq!(y.refs, ["u2".to_string()].into());
    }

    /// Two runs of one upload at once (a message delivered twice) hold the same holder, yet
    /// neither ends the other's lease: the second takes the first's `create` lease over with
    /// a lease of its own run, so the first run's release does not touch it and the first
    /// run's listing does not end it — a removal waits for the run still copying (before runs
    /// were told apart, both happened, and the removal deleted the object that run then
    /// wrote again: published, and no record referencing it).
    #[tokio::test]
    async fn runs_of_one_upload_at_once_do_not_end_each_others_leases() {
        let (dir, store, etag) = store_and_input();
        let input = dir.path().join("in");
        let c = content(&etag, &input);
        let (first, second) = (
            RefStore::with_policy(&store, impatient()),
            RefStore::with_policy(&store, impatient()),
        );
        let publish = first.publish("k", "u", &c, OnDifferent::Conflict, true);
        assert_eq!(publish.await.unwrap(), KeyOutcome::Published);
        let taken_first = first.key("k").await.unwrap().unwrap().lease.unwrap();
        // The second run meets its own holder's lease, unlisted: taken over at once, as a
        // retry would, but written as its own run's.
        let publish = second.publish("k", "u", &c, OnDifferent::Conflict, true);
        assert_eq!(publish.await.unwrap(), KeyOutcome::Published);
        let taken_second = second.key("k").await.unwrap().unwrap().lease.unwrap();
        assert_eq!(taken_second.holder, taken_first.holder);
        assert_ne!(taken_second.run, taken_first.run);
        // The first run gives up its lease, then lists the key: the second's stays in force.
        let held = first.take_held("u");
        first.release_created(&held).await.unwrap();
        assert_eq!(
            first.key("k").await.unwrap().unwrap().lease,
            Some(taken_second.clone())
        );
        let keys: BTreeSet<String> = ["k".to_string()].into();
        let template = UploadRecord {
            upload: "u".into(),
            source: "/in/u".into(),
            ..Default::default()
        };
        first.plan(&template, &keys, None, None).await.unwrap();
        let listed = first.finalize("u", &keys, Run::Partial, None, &held);
        assert!(listed.await.unwrap());
        let remover = RefStore::with_policy(&store, impatient());
        let waits = remover.remove("k", "u").await.unwrap_err();
        assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
        assert!(store.size("k").await.unwrap().is_some());
        // The second run lists it too: ended, and the removal goes ahead.
        let held = second.take_held("u");
        let listed = second.finalize("u", &keys, Run::Complete(None), None, &held);
        assert!(listed.await.unwrap());
        assert_eq!(
            remover.remove("k", "u").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.size("k").await.unwrap(), None);
    }

    /// A removal handing a key on to its holder (a source's withdrawal serving a path from
    /// another source) takes over its own removal's earlier attempt's lease at once, as a
    /// retry does, but waits for a live lease another run holds for the same holder: its
    /// retry may never meet the key again, so a lease it took over and then left would run
    /// out unlisted. The holder's other publishers (a debug file serving the path) take the
    /// removal's lease over, as before.
    #[tokio::test]
    async fn a_removal_handing_a_key_on_takes_over_only_its_own_attempts_lease() {
        let (dir, store, etag) = store_and_input();
        let input = dir.path().join("in");
        let c = content(&etag, &input);
        let run = || RefStore::with_policy(&store, impatient());
        let reader = run();
        let lease = || async { reader.key("k").await.unwrap().unwrap().lease };
        let dying = run();
        let handed = dying.publish_for("k", "u", Some("t"), &c);
        assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
        let first = lease().await.unwrap();
        assert_eq!(
            (first.holder.as_str(), first.acting.as_str()),
            ("index:u", "t")
        );
        // Its retry: taken over, written as the retry's run.
        let retry = run();
        let handed = retry.publish_for("k", "u", Some("t"), &c);
        assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
        let retried = lease().await.unwrap();
        assert_ne!(retried.run, first.run);
        assert_eq!(retried.acting, "t");
        // Another removal handing the same key on to the same holder waits, and changes
        // nothing.
        let waits = run()
            .publish_for("k", "u", Some("t2"), &c)
            .await
            .unwrap_err();
        assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
        assert_eq!(lease().await, Some(retried.clone()));
        // A debug file serving the path for the holder takes it over: its retry meets the
        // key again, so its lease is listed by one of its runs.
        let debug = run();
        let served = debug.publish("k", "u", &c, OnDifferent::Conflict, true);
        assert_eq!(served.await.unwrap(), KeyOutcome::Published);
        let served = lease().await.unwrap();
        assert_eq!(
            (served.acting.as_str(), served.holder.as_str()),
            ("", "index:u")
        );
        assert_ne!(served.run, retried.run);
        // The removal, retried again, now waits for the debug file's run.
        let waits = run()
            .publish_for("k", "u", Some("t"), &c)
            .await
            .unwrap_err();
        assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
        // Once the debug file's run lists the key, the lease is over and the removal finds
        // it published.
        let keys: BTreeSet<String> = ["k".to_string()].into();
        let template = UploadRecord {
            upload: "u".into(),
            source: "/in/u".into(),
            ..Default::default()
        };
        debug.plan(&template, &keys, None, None).await.unwrap();
        let held = debug.take_held("u");
        let listed = debug.finalize("u", &keys, Run::Partial, None, &held);
        assert!(listed.await.unwrap());
        let last = run();
        let handed = last.publish_for("k", "u", Some("t"), &c);
        assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
        assert_eq!(store.size("k").await.unwrap(), Some(c.size));
    }

    /// Holds the first change under `prefix` back until the test lets it through.
    struct HoldFirst {
        prefix: &'static str,
        held: std::sync::atomic::AtomicBool,
        reached: tokio::sync::Notify,
        open: tokio::sync::Semaphore,
    }

    impl crate::storage::hooked::BeforeChange for HoldFirst {
        fn hold<'a>(
            &'a self,
            _op: &'static str,
            key: &str,
        ) -> Option<crate::storage::StorageFuture<'a, ()>> {
            use std::sync::atomic::Ordering;
            if !key.starts_with(self.prefix) || self.held.swap(true, Ordering::SeqCst) {
                return None;
            }
            Some(Box::pin(async move {
                self.reached.notify_one();
                let permit = self.open.acquire().await;
                let permit = permit.map_err(|e| io::Error::other(e.to_string()))?;
                permit.forget();
                Ok(())
            }))
        }
    }

    /// Counts the reads of one file (once named), holding each back for a few turns of the
    /// runtime: whatever else is ready runs while the read is in flight.
    #[derive(Default)]
    struct CountReads {
        file: std::sync::Mutex<String>,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl crate::storage::hooked::BeforeChange for CountReads {
        fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
            if self.file.lock().ok()?.as_str() != key {
                return None;
            }
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(Box::pin(async {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                Ok(())
            }))
        }
    }

    /// Keys meeting one upload's `create` leases at once share one read of that upload's
    /// record. Before, each missed the listing cache and read it. (The owner lookup of keys
    /// shared at once is shared too: `sharing_another_uploads_keys_writes_each_record_once`.)
    #[tokio::test]
    async fn keys_meeting_one_uploads_leases_at_once_read_its_record_once() {
        let (dir, input, etag) = input_beside_store();
        let store = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path().join("s")).unwrap(),
            CountReads::default(),
        );
        let refs = RefStore::with_policy(&store, impatient());
        let c = content(&etag, &input);
        for key in ["k1", "k2"] {
            let created = refs.publish(key, "u1", &c, OnDifferent::Conflict, true);
            assert_eq!(created.await.unwrap(), KeyOutcome::Published);
        }
        // u1 lists both: its `create` leases end with its listing, read by whoever meets them.
        finalized(&refs, "u1", &["k1", "k2"]).await;
        *store.hook().file.lock().unwrap() = refs.upload_file("u1").await.unwrap();
        // Another process, knowing no listing yet, shares both keys at once.
        let other = RefStore::with_policy(&store, impatient());
        let (k1, k2) = tokio::join!(
            other.publish("k1", "u2", &c, OnDifferent::Conflict, true),
            other.publish("k2", "u2", &c, OnDifferent::Conflict, true),
        );
        let both = (k1.unwrap(), k2.unwrap());
        assert_eq!(both, (KeyOutcome::Unchanged, KeyOutcome::Unchanged));
        let reads = store.hook().reads.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(reads, 1, "u1's record read once for both keys");
        for key in ["k1", "k2"] {
            let record = other.key(key).await.unwrap().unwrap();
            assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
            assert_eq!(record.lease, None);
        }
    }

    /// Two writers of one run share their deferred source-map writes (a removal's hand-over
    /// indexing inside `symdex index`): each sees the other's changes, and while one flushes,
    /// the other's flush waits for it, then finds nothing left to write. Apart, or flushing
    /// at once, the second wrote the record the first was writing, and the first failed on
    /// the version the second had replaced ("changed by another writer").
    #[tokio::test]
    async fn writers_sharing_deferred_writes_see_each_others_changes_and_flush_in_turn() {
        use crate::sourcemap::Want;
        use futures_util::FutureExt;
        let dir = tempfile::tempdir().unwrap();
        let hold = HoldFirst {
            prefix: "_symdex/sourcemap/",
            held: Default::default(),
            reached: Default::default(),
            open: tokio::sync::Semaphore::new(0),
        };
        let store =
            crate::storage::hooked::Hooked::new(LocalStore::open(dir.path()).unwrap(), hold);
        let want = |upload: &str| Want {
            build_id: "ab".into(),
            path: "/src/a.c".into(),
            upload: upload.into(),
            md5: None,
        };
        let file = "_symdex/sourcemap/0123456789abcdef/00.json";
        let shared = Arc::new(DeferredWrites::default());
        let mut run = RefStore::new(&store);
        run.defer_source_map_writes_to(Arc::clone(&shared));
        let mut hand_over = RefStore::new(&store);
        hand_over.defer_source_map_writes_to(shared);
        run.update_source_map(file, |r| r.want(&want("d1")))
            .await
            .unwrap();
        hand_over
            .update_source_map(file, |r| r.want(&want("d2")))
            .await
            .unwrap();
        let both = vec![want("d1"), want("d2")];
        assert_eq!(run.source_map(file).await.unwrap().wants, both);
        assert_eq!(store.inner().read(file).await.unwrap(), None, "deferred");
        let first = run.flush_source_maps();
        let second = async {
            // The first flush's write is held back; the second flush starts meanwhile.
            store.hook().reached.notified().await;
            let mut second = std::pin::pin!(hand_over.flush_source_maps());
            let early = second.as_mut().now_or_never();
            store.hook().open.add_permits(1);
            match early {
                Some(flushed) => flushed,
                None => second.await,
            }
        };
        let (first, second) = tokio::join!(first, second);
        first.unwrap();
        second.unwrap();
        let stored = store.inner().read(file).await.unwrap().unwrap();
        let stored: crate::sourcemap::SourceMapRecord = serde_json::from_slice(&stored).unwrap();
        assert_eq!(stored.wants, both);
    }

    /// A join record taken to be absent is created without a read; one there after all
    /// fails the creation, is read, and gets the change on top of what it held.
    #[tokio::test]
    async fn a_join_record_guessed_absent_is_created_or_read_and_changed() {
        use crate::sourcemap::{Offer, Want};
        let (_dir, store, _) = store_and_input();
        let refs = RefStore::new(&store);
        let want = |upload: &str| Want {
            build_id: "ab".into(),
            path: "/src/a.c".into(),
            upload: upload.into(),
            md5: None,
        };
        let file = "_symdex/sourcemap/0123456789abcdef/00.json";
        let created = refs
            .update_source_map_guessing(file, true, |r| r.want(&want("d1")))
            .await
            .unwrap();
        assert_eq!(created.wants, vec![want("d1")]);
        // An offer arrives; a second debug file's guess is wrong: the offer is kept.
        let offer = Offer {
            path: "a.c".into(),
            root: None,
            upload: "s1".into(),
            key: "k".into(),
            etag: "e".into(),
            size: 1,
            md5: None,
        };
        refs.update_source_map(file, |r| r.offer(&offer))
            .await
            .unwrap();
        let changed = refs
            .update_source_map_guessing(file, true, |r| r.want(&want("d2")))
            .await
            .unwrap();
        assert_eq!(changed.offers, vec![offer.clone()]);
        assert_eq!(changed.wants, vec![want("d1"), want("d2")]);
        let stored: SourceMapRecord =
            parse(file, &store.read(file).await.unwrap().unwrap()).unwrap();
        assert_eq!(stored, *changed);
    }

    #[tokio::test]
    async fn references_are_counted_per_upload() {
        let (dir, store, etag) = store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let c = content(&etag, &input);
        assert_eq!(
            refs.publish("k/a", "u1", &c, OnDifferent::Conflict, true)
                .await
                .unwrap(),
            KeyOutcome::Published
        );
        finalized(&refs, "u1", &["k/a"]).await;
        assert_eq!(
            refs.publish("k/a", "u2", &c, OnDifferent::Conflict, true)
                .await
                .unwrap(),
            KeyOutcome::Unchanged
        );
        assert_eq!(
            refs.publish("k/a", "u1", &c, OnDifferent::Conflict, false)
                .await
                .unwrap(),
            KeyOutcome::Unchanged,
            "a finished upload re-indexed reports unchanged"
        );
        let record = refs.key("k/a").await.unwrap().unwrap();
        assert_eq!(record.refs.len(), 2);
        assert_eq!(record.by, "u1");
        assert!(record.lease.is_none(), "the copy lease was released");
        assert_eq!(refs.remove("k/a", "u1").await.unwrap(), RemoveOutcome::Kept);
        assert!(store.size("k/a").await.unwrap().is_some());
        assert_eq!(
            refs.remove("k/a", "u2").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(
            refs.key("k/a").await.unwrap(),
            None,
            "the tombstone is gone"
        );
        assert_eq!(store.size("k/a").await.unwrap(), None);
        assert_eq!(
            refs.remove("k/a", "u2").await.unwrap(),
            RemoveOutcome::NotReferenced
        );
    }

    /// A store in a temporary directory beside two inputs of different bytes, `a` (3 bytes)
    /// and `b` (4 bytes).
    fn store_with_two_inputs() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("s")).unwrap();
        std::fs::write(dir.path().join("a"), b"aaa").unwrap();
        std::fs::write(dir.path().join("b"), b"bbbb").unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn generated_content_adopts_a_live_copy_and_replaces_a_missing_one() {
        let (dir, store) = store_with_two_inputs();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let refs = RefStore::new(&store);
        refs.publish("k", "u1", &content("ea", &a), OnDifferent::Conflict, true)
            .await
            .unwrap();
        finalized(&refs, "u1", &["k"]).await;
        // Another identity of the same section (e.g. an S3 part copy's ETag): the live copy
        // is taken as it is, no byte written, no conflict.
        assert_eq!(
            refs.publish("k", "u2", &content("eb", &b), OnDifferent::Adopt, true)
                .await
                .unwrap(),
            KeyOutcome::Unchanged
        );
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!((record.etag.as_str(), record.size), ("ea", 3));
        assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
        assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"aaa");
        // The copy deleted behind symdex's back: replaced by the adopter's own bytes, and the
        // record says so (invariant 2).
        store.delete("k").await.unwrap();
        assert_eq!(
            refs.publish("k", "u2", &content("eb", &b), OnDifferent::Adopt, true)
                .await
                .unwrap(),
            KeyOutcome::Published
        );
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!((record.etag.as_str(), record.size), ("eb", 4));
        assert_eq!(record.lease, None);
        assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bbbb");
    }

    #[tokio::test]
    async fn other_content_is_a_conflict_and_a_live_lease_makes_others_wait() {
        let (dir, store) = store_with_two_inputs();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let refs = RefStore::with_policy(&store, impatient());
        refs.publish("k", "u1", &content("ea", &a), OnDifferent::Conflict, true)
            .await
            .unwrap();
        finalized(&refs, "u1", &["k"]).await;
        assert_eq!(
            refs.publish("k", "u2", &content("eb", &b), OnDifferent::Conflict, true)
                .await
                .unwrap(),
            KeyOutcome::Conflict
        );
        // A live lease of another holder (a remover at work): the indexer waits, then gives
        // up with a retryable error, and changes nothing.
        let mut record = refs.key("k").await.unwrap().unwrap();
        record.lease = Some(Lease {
            holder: "other".into(),
            until: now_secs() + 600,
            op: "remove".into(),
            run: String::new(),
            acting: String::new(),
        });
        record.refs.clear();
        store
            .put(&key_file("k"), &serde_json::to_vec(&record).unwrap())
            .await
            .unwrap();
        let err = refs
            .publish("k", "u3", &content("ea", &a), OnDifferent::Conflict, true)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        // The same lease, past its time: taken over.
        record.lease.as_mut().unwrap().until = 1;
        store
            .put(&key_file("k"), &serde_json::to_vec(&record).unwrap())
            .await
            .unwrap();
        assert_eq!(
            refs.publish("k", "u3", &content("ea", &a), OnDifferent::Conflict, true)
                .await
                .unwrap(),
            KeyOutcome::Published
        );
        assert_eq!(
            refs.key("k").await.unwrap().unwrap().refs,
            ["u3".to_string()].into()
        );
    }

    #[tokio::test]
    async fn what_is_at_a_key_without_a_record_is_found_by_creating_the_object() {
        let (dir, store) = store_with_two_inputs();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let sha_a = crate::storage::local::file_sha1(&a).unwrap();
        let refs = RefStore::new(&store);
        let bytes = |key: &'static str| {
            let store = &store;
            async move { store.get(key).await.unwrap().map(|v| v.bytes) }
        };
        let record = |refs: &[&str], by: &str, holder: &str, until: u64| KeyRecord {
            key: String::new(),
            etag: sha_a.clone(),
            size: 3,
            refs: refs.iter().map(|r| r.to_string()).collect(),
            by: by.into(),
            lease: Some(Lease {
                holder: index_holder(holder),
                until,
                op: CREATE.into(),
                run: String::new(),
                acting: String::new(),
            }),
            alias_of: None,
        };
        let put_record = |key: &'static str, r: KeyRecord| {
            let store = &store;
            async move {
                let bytes = serde_json::to_vec(&KeyRecord {
                    key: key.into(),
                    ..r
                })
                .unwrap();
                store.put(&key_file(key), &bytes).await.unwrap();
            }
        };
        // The same bytes, written outside symdex: adopted (no writer named), not rewritten.
        store.put("same", b"aaa").await.unwrap();
        let ca = content(&sha_a, &a);
        let publish = |key: &'static str, upload: &'static str, how, fresh| {
            let (refs, ca) = (&refs, &ca);
            async move { refs.publish(key, upload, ca, how, fresh).await.unwrap() }
        };
        assert_eq!(
            publish("same", "u1", OnDifferent::Conflict, true).await,
            KeyOutcome::Unchanged
        );
        let adopted = refs.key("same").await.unwrap().unwrap();
        assert_eq!(adopted.refs, ["u1".to_string()].into());
        assert_eq!((adopted.by.as_str(), adopted.lease), ("", None));
        // Other bytes: a conflict, the object left alone and no record claiming it.
        store.put("other", b"bbbb").await.unwrap();
        assert_eq!(
            publish("other", "u1", OnDifferent::Conflict, true).await,
            KeyOutcome::Conflict
        );
        assert_eq!(refs.key("other").await.unwrap(), None);
        assert_eq!(bytes("other").await.as_deref(), Some(&b"bbbb"[..]));
        // ... unless the upload overwrites.
        assert_eq!(
            publish("other", "u2", OnDifferent::Overwrite, true).await,
            KeyOutcome::Published
        );
        assert_eq!(bytes("other").await.as_deref(), Some(&b"aaa"[..]));
        assert_eq!(refs.key("other").await.unwrap().unwrap().by, "u2");
        // A dead creator's lease, taken over: still a creation, so the outside object that
        // creator would have met is a conflict for its successor too, never overwritten.
        std::fs::copy(&b, store.root().join("k3")).unwrap();
        put_record("k3", record(&["u9"], "u9", "u9", 1)).await;
        assert_eq!(
            publish("k3", "u3", OnDifferent::Conflict, true).await,
            KeyOutcome::Conflict
        );
        assert_eq!(refs.key("k3").await.unwrap(), None);
        assert_eq!(bytes("k3").await.as_deref(), Some(&b"bbbb"[..]));
        // Our own earlier attempt's creation (its copy landed, its lease never released): the
        // bytes there are ours, reported published again.
        store.put("k4", b"aaa").await.unwrap();
        put_record("k4", record(&["u4"], "u4", "u4", now_secs() + 600)).await;
        assert_eq!(
            publish("k4", "u4", OnDifferent::Conflict, false).await,
            KeyOutcome::Published
        );
        let resumed = refs.key("k4").await.unwrap().unwrap();
        let holder = resumed.lease.map(|l| l.holder);
        assert_eq!(
            (resumed.by.as_str(), holder.as_deref()),
            ("u4", Some("index:u4"))
        );
        // A fresh key: created, its record left to u5's finalize.
        assert_eq!(
            publish("new", "u5", OnDifferent::Conflict, true).await,
            KeyOutcome::Published
        );
        let created = refs.key("new").await.unwrap().unwrap();
        let holder = created.lease.map(|l| l.holder);
        assert_eq!(
            (created.by.as_str(), holder.as_deref()),
            ("u5", Some("index:u5"))
        );
        assert_eq!(bytes("new").await.as_deref(), Some(&b"aaa"[..]));
    }

    #[tokio::test]
    async fn an_update_to_the_same_content_writes_nothing() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let refs = RefStore::new(&store);
        let file = "_symdex/test/same.json";
        let write = |value: u32| {
            move |_: Option<serde_json::Value>| {
                Ok(Step::Write(serde_json::json!({ "v": value }), ()))
            }
        };
        let inode = || std::fs::metadata(dir.path().join(file)).unwrap().ino();
        let ((), first) = refs.update_versioned(file, None, write(1)).await.unwrap();
        let before = inode();
        // The same content again: nothing written, the version it holds returned.
        let ((), again) = refs.update_versioned(file, None, write(1)).await.unwrap();
        assert_eq!(inode(), before, "an identical record was rewritten");
        assert_eq!(again, first);
        // Other content is written.
        refs.update(file, write(2)).await.unwrap();
        assert_ne!(inode(), before);
    }

    #[tokio::test]
    async fn uploads_plan_finalize_and_removal_in_either_layout() {
        let dir = tempfile::tempdir().unwrap();
        let flat = LocalStore::open(dir.path().join("flat")).unwrap();
        uploads_plan_finalize_and_removal(&flat, UploadLayout::Flat).await;
        let sources = flat.list(SOURCES_DIR).await.unwrap();
        assert!(
            sources.is_empty(),
            "the last upload's removal left {sources:?}"
        );
        assert!(
            flat.read(LAYOUT_FILE).await.unwrap().is_none(),
            "a CLI store keeps no marker"
        );
        let by_location = LocalStore::open(dir.path().join("by-location"))
            .unwrap()
            .with_owners();
        uploads_plan_finalize_and_removal(&by_location, UploadLayout::ByLocation).await;
        let marker = by_location.read(LAYOUT_FILE).await.unwrap().unwrap();
        assert_eq!(marker, br#"{"uploads":"by-location"}"#);
    }

    /// A store's upload layout is decided once and kept: a new store that lays records out
    /// by location does so; one holding records written before layouts were named (flat)
    /// stays flat, and every writer after reads the marker rather than deciding again.
    #[tokio::test]
    async fn a_store_keeps_the_upload_layout_it_was_made_with() {
        let dir = tempfile::tempdir().unwrap();
        let up = |upload: &str| UploadRecord {
            upload: upload.into(),
            source: "s3://b/k".into(),
            ..Default::default()
        };
        let keys: BTreeSet<String> = ["k1".to_string()].into();
        // Written as before: flat records, a source record, no marker.
        let old = LocalStore::open(dir.path().join("old")).unwrap();
        RefStore::new(&old)
            .plan(&up("s3:b/k@v1"), &keys, None, None)
            .await
            .unwrap();
        assert!(old.read(LAYOUT_FILE).await.unwrap().is_none());
        let shared = LocalStore::open(dir.path().join("old"))
            .unwrap()
            .with_owners();
        let refs = RefStore::new(&shared);
        assert_eq!(refs.layout().await.unwrap(), UploadLayout::Flat);
        assert_eq!(
            shared.read(LAYOUT_FILE).await.unwrap().unwrap(),
            br#"{"uploads":"flat"}"#
        );
        refs.plan(&up("s3:b/k@v2"), &keys, None, None)
            .await
            .unwrap();
        let uploads = refs.uploads_of_source("s3://b/k", "s3:b/k").await.unwrap();
        assert_eq!(uploads.len(), 2, "{uploads:?}");
        // A new store: by location, and a marker saying so is what a later writer follows,
        // whatever it finds (a flat record written by hand here).
        let new = LocalStore::open(dir.path().join("new"))
            .unwrap()
            .with_owners();
        assert_eq!(
            RefStore::new(&new).layout().await.unwrap(),
            UploadLayout::ByLocation
        );
        new.put(&format!("{UPLOADS_DIR}{}.json", "0".repeat(40)), b"{}")
            .await
            .unwrap();
        let later = RefStore::new(&new);
        assert_eq!(later.layout().await.unwrap(), UploadLayout::ByLocation);
        later
            .plan(&up("s3:b/k@v1"), &keys, None, None)
            .await
            .unwrap();
        assert!(new.list(SOURCES_DIR).await.unwrap().is_empty());
        let token = later.owner_token("s3:b/k@v1").await.unwrap();
        assert!(is_upload_name(&token) && token.contains('/'), "{token}");
        assert!(new
            .read(&format!("{UPLOADS_DIR}{token}.json"))
            .await
            .unwrap()
            .is_some());
    }

    /// An upload's way through its record, in a store of `layout`; its location found by
    /// the removal (a location whose name begins alike shares its directory `ByLocation`).
    async fn uploads_plan_finalize_and_removal(store: &LocalStore, layout: UploadLayout) {
        let refs = RefStore::new(store);
        let up = UploadRecord {
            upload: "s3:b/k@v1".into(),
            source: "s3://b/k".into(),
            ..Default::default()
        };
        let alike = UploadRecord {
            upload: "s3:b/k@x@v2".into(),
            source: "s3://b/k@x".into(),
            ..Default::default()
        };
        let keys: BTreeSet<String> = ["k1".to_string(), "k2".to_string()].into();
        let (found, planned) = refs.plan(&up, &keys, None, None).await.unwrap();
        assert_eq!(found, None);
        assert!(planned.is_some(), "the plan wrote the record");
        let (found, again) = refs.plan(&up, &keys, None, None).await.unwrap();
        assert_eq!(
            found.map(|r| r.state),
            Some(UploadState::Indexing),
            "the second plan finds the first"
        );
        assert!(again.is_none(), "and changes nothing");
        let record = refs.upload("s3:b/k@v1").await.unwrap().unwrap();
        assert_eq!(record.state, UploadState::Indexing);
        assert_eq!(record.planned, keys);
        assert_eq!(refs.layout().await.unwrap(), layout);
        refs.plan(&alike, &keys, None, None).await.unwrap();
        let at = |source: &'static str, location: &'static str| {
            let refs = &refs;
            async move { refs.uploads_of_source(source, location).await.unwrap() }
        };
        assert_eq!(
            at("s3://b/k", "s3:b/k").await,
            ["s3:b/k@v1".to_string()].into()
        );
        assert_eq!(
            at("s3://b/k@x", "s3:b/k@x").await,
            ["s3:b/k@x@v2".to_string()].into()
        );
        let sources = store.list(SOURCES_DIR).await.unwrap();
        assert_eq!(
            sources.len(),
            if layout == UploadLayout::Flat { 2 } else { 0 }
        );
        // Finalized on the record as the plan wrote it (unchanged since: no read needed).
        assert!(refs
            .finalize(
                "s3:b/k@v1",
                &["k1".to_string()].into(),
                Run::Complete(None),
                planned.clone(),
                &[]
            )
            .await
            .unwrap());
        let record = refs.upload("s3:b/k@v1").await.unwrap().unwrap();
        assert_eq!(record.state, UploadState::Indexed);
        assert_eq!(record.keys.len(), 1);
        // Each key is listed once: referenced under `keys`, the rest still `planned`.
        assert_eq!(record.planned, ["k2".to_string()].into());
        assert!(
            refs.plan(&up, &keys, None, None).await.unwrap().0.is_some(),
            "planning the same keys again"
        );
        assert_eq!(refs.upload("s3:b/k@v1").await.unwrap().unwrap(), record);
        let removing = refs.begin_removal("s3:b/k@v1").await.unwrap().unwrap();
        assert_eq!(removing.all_keys(), keys);
        // A finalize swapping on a copy older than the removal's mark sees the mark.
        assert!(
            !refs
                .finalize("s3:b/k@v1", &keys, Run::Complete(None), planned, &[])
                .await
                .unwrap(),
            "a removing upload is not finalized"
        );
        assert_eq!(
            refs.plan(&up, &keys, None, None)
                .await
                .unwrap()
                .0
                .map(|r| r.state),
            Some(UploadState::Removing)
        );
        refs.end_removal(&removing).await.unwrap();
        assert!(refs.upload("s3:b/k@v1").await.unwrap().is_none());
        assert!(at("s3://b/k", "s3:b/k").await.is_empty());
        let other = refs.begin_removal("s3:b/k@x@v2").await.unwrap().unwrap();
        refs.end_removal(&other).await.unwrap();
        // A key naming an archive's entry separator: its uploads and its removal cut alike.
        let odd = UploadRecord {
            upload: "s3:b/d!/k@v3".into(),
            source: "s3://b/d!/k".into(),
            ..Default::default()
        };
        refs.plan(&odd, &keys, None, None).await.unwrap();
        let found = at("s3://b/d!/k", "s3:b/d!/k").await;
        assert_eq!(found, ["s3:b/d!/k@v3".to_string()].into());
        let gone = refs.begin_removal("s3:b/d!/k@v3").await.unwrap().unwrap();
        refs.end_removal(&gone).await.unwrap();
        assert!(at("s3://b/d!/k", "s3:b/d!/k").await.is_empty());
        refs.update_id("abc", |r| r.names.insert("Foo.PDB".into()))
            .await
            .unwrap();
        assert!(refs
            .id_read("abc")
            .await
            .unwrap()
            .0
            .names
            .contains("Foo.PDB"));
    }

    /// [`store_and_input`] with a store whose objects name their owners (invariant 7).
    fn owned_store_and_input() -> (tempfile::TempDir, LocalStore, String) {
        let (dir, _, etag) = input_beside_store();
        let store = LocalStore::open(dir.path().join("s"))
            .unwrap()
            .with_owners();
        (dir, store, etag)
    }

    /// A directory for a store (`s`, opened by the test) and one input file (`in`, "bytes")
    /// beside it, with the input's content identity.
    fn input_beside_store() -> (tempfile::TempDir, std::path::PathBuf, String) {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, b"bytes").unwrap();
        let etag = crate::storage::local::file_sha1(&input).unwrap();
        (dir, input, etag)
    }

    /// `key` published fresh for u1 alone (invariant 7), its upload finalized.
    async fn publish_alone(refs: &RefStore<'_>, key: &str, bytes: &Content<'_>) {
        let outcome = refs.publish(key, "u1", bytes, OnDifferent::Conflict, true);
        assert_eq!(outcome.await.unwrap(), KeyOutcome::Published);
        finalized(refs, "u1", &[key]).await;
    }

    /// The tombstone a removal of `upload` holds on `key` where no record was (invariant 7).
    async fn hold_tombstone(refs: &RefStore<'_>, store: &LocalStore, key: &str, upload: &str) {
        let tombstone = KeyRecord {
            key: key.to_string(),
            by: upload.to_string(),
            lease: Some(refs.new_lease("remove", &remove_holder(upload))),
            ..Default::default()
        };
        let bytes = serde_json::to_vec(&tombstone).unwrap();
        store.put(&key_file(key), &bytes).await.unwrap();
    }

    #[tokio::test]
    async fn a_key_one_upload_alone_references_is_its_object_naming_the_upload() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        assert_eq!(store.get(&key_file("k")).await.unwrap(), None, "no record");
        let owned = store.owned("k").await.unwrap().unwrap();
        assert_eq!(owned.owner, Some(refs.owner_token("u1").await.unwrap()));
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!(
            (record.refs, record.by),
            (["u1".to_string()].into(), "u1".to_string())
        );
        // Another upload's removal takes nothing: the object names u1.
        assert_eq!(
            refs.remove("k", "u2").await.unwrap(),
            RemoveOutcome::NotReferenced
        );
        assert!(store.head("k").await.unwrap().is_some());
        assert_eq!(
            refs.remove("k", "u1").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.head("k").await.unwrap(), None);
        assert_eq!(
            store.get(&key_file("k")).await.unwrap(),
            None,
            "no tombstone left"
        );
    }

    #[tokio::test]
    async fn a_retried_removal_leaves_an_object_written_after_its_delete() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let bytes = content(&etag, &input);
        // Without a record, and with a shared record (u1 its writer, u3 gone): either way the
        // removal of u1 tombstoned the key, deleted the object and died before dropping its
        // tombstone; u2 then found the key free and created it, naming itself.
        for shared in [false, true] {
            let key = if shared { "shared" } else { "alone" };
            publish_alone(&refs, key, &bytes).await;
            if shared {
                let share = refs.publish(key, "u3", &bytes, OnDifferent::Conflict, false);
                assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
                finalized(&refs, "u3", &[key]).await;
                assert_eq!(refs.remove(key, "u3").await.unwrap(), RemoveOutcome::Kept);
                let mut record = refs.key(key).await.unwrap().unwrap();
                assert_eq!(record.by, "u1");
                record.refs.clear();
                record.lease = Some(refs.new_lease("remove", &remove_holder("u1")));
                let bytes = serde_json::to_vec(&record).unwrap();
                store.put(&key_file(key), &bytes).await.unwrap();
            } else {
                hold_tombstone(&refs, &store, key, "u1").await;
            }
            store.delete(key).await.unwrap();
            let again = refs.publish(key, "u2", &bytes, OnDifferent::Conflict, true);
            assert_eq!(again.await.unwrap(), KeyOutcome::Published, "{key}");
            finalized(&refs, "u2", &[key]).await;
            // The retried removal finishes its own tombstone, and deletes nothing.
            refs.remove(key, "u1").await.unwrap();
            let owned = store.owned(key).await.unwrap();
            assert_eq!(
                owned.and_then(|o| o.owner),
                Some(refs.owner_token("u2").await.unwrap()),
                "{key}"
            );
            assert_eq!(store.get(&key_file(key)).await.unwrap(), None, "{key}");
            let record = refs.key(key).await.unwrap().unwrap();
            assert_eq!(record.refs, ["u2".to_string()].into(), "{key}");
        }
    }

    #[tokio::test]
    async fn a_sharer_and_the_owners_removal_exclude_each_other() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::with_policy(&store, impatient());
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        // u2 shares the key: its record names both, u1 as the writer, under a `create` lease
        // that u1's removal waits for until u2's finalize lists the key.
        let sharer = RefStore::with_policy(&store, impatient());
        let share = sharer.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
        assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!(record.by, "u1");
        assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
        let lease = record.lease.expect("the sharer's lease");
        assert_eq!(
            (lease.op.as_str(), lease.holder),
            (CREATE, index_holder("u2"))
        );
        let waits = refs.remove("k", "u1").await;
        assert_eq!(waits.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert!(store.head("k").await.unwrap().is_some());
        finalized(&sharer, "u2", &["k"]).await;
        assert_eq!(refs.remove("k", "u1").await.unwrap(), RemoveOutcome::Kept);
        assert!(store.head("k").await.unwrap().is_some());
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!(
            (record.refs, record.lease),
            (["u2".to_string()].into(), None)
        );
    }

    /// Holds the first object creation back until the test lets it go on, then fails it (the
    /// copy failed).
    struct HoldThenFail {
        held: std::sync::atomic::AtomicBool,
        reached: tokio::sync::Notify,
        open: tokio::sync::Semaphore,
    }

    impl crate::storage::hooked::BeforeChange for HoldThenFail {
        fn hold<'a>(
            &'a self,
            op: &'static str,
            _key: &str,
        ) -> Option<crate::storage::StorageFuture<'a, ()>> {
            use std::sync::atomic::Ordering;
            if op != "copy_new" || self.held.swap(true, Ordering::SeqCst) {
                return None;
            }
            Some(Box::pin(async move {
                self.reached.notify_one();
                let permit = self.open.acquire().await;
                permit
                    .map_err(|e| io::Error::other(e.to_string()))?
                    .forget();
                Err(io::Error::other("injected: the copy failed").into())
            }))
        }
    }

    /// A run's creation fails after another run of the same upload took its `create` lease
    /// over (at once, as the same upload's) and created and listed the key: the failed run
    /// takes back nothing — the reference is the other run's now. Before, it took the
    /// upload's reference back as a removal would, and deleted the object the other run had
    /// just published and listed (found by the source hand-on's death test over 200
    /// schedules).
    #[tokio::test]
    async fn a_failed_creation_takes_back_nothing_another_run_took_over() {
        let (dir, input, etag) = input_beside_store();
        let c = content(&etag, &input);
        let store = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path().join("s")).unwrap(),
            HoldThenFail {
                held: Default::default(),
                reached: Default::default(),
                open: tokio::sync::Semaphore::new(0),
            },
        );
        let failing = RefStore::with_policy(&store, impatient());
        let other = RefStore::with_policy(store.inner(), impatient());
        let first = failing.publish("k", "u1", &c, OnDifferent::Conflict, true);
        let second = async {
            store.hook().reached.notified().await;
            let published = other
                .publish("k", "u1", &c, OnDifferent::Conflict, true)
                .await;
            finalized(&other, "u1", &["k"]).await;
            store.hook().open.add_permits(1);
            published
        };
        let (first, second) = tokio::join!(first, second);
        assert!(first.is_err(), "{first:?}");
        assert_eq!(second.unwrap(), KeyOutcome::Published);
        assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
        let record = other.key("k").await.unwrap().expect("the key's record");
        assert_eq!(record.refs, ["u1".to_string()].into());
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{:?}", audit.problems);
    }

    /// Notes the keys of the changes a store is asked for, and counts the reads of one file
    /// as [`CountReads`] does.
    #[derive(Default)]
    struct CountChanges {
        changes: std::sync::Mutex<Vec<String>>,
        reads: CountReads,
    }

    impl crate::storage::hooked::BeforeChange for CountChanges {
        fn before_change(&self, _op: &'static str, key: &str) -> crate::storage::StorageResult<()> {
            if let Ok(mut changes) = self.changes.lock() {
                changes.push(key.to_string());
            }
            Ok(())
        }

        fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
            self.reads.hold_read(key)
        }
    }

    /// Another upload's key of the same bytes is shared by writing its record once, as the
    /// sharing leaves it (both uploads, the owner as the writer), under a `create` lease the
    /// sharer's finalize ends; and the owner's upload record is read once for all its keys
    /// shared at once. Before, each key's record was written twice (the lease taken, then
    /// released naming both) and each key read the owner's record.
    #[tokio::test]
    async fn sharing_another_uploads_keys_writes_each_record_once() {
        let (dir, input, etag) = input_beside_store();
        let store = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path().join("s"))
                .unwrap()
                .with_owners(),
            CountChanges::default(),
        );
        let c = content(&etag, &input);
        let owner = RefStore::new(&store);
        let keys = ["k1", "k2", "k3", "k4"];
        for key in keys {
            let created = owner.publish(key, "u1", &c, OnDifferent::Conflict, true);
            assert_eq!(created.await.unwrap(), KeyOutcome::Published);
        }
        finalized(&owner, "u1", &keys).await;
        store.hook().changes.lock().unwrap().clear();
        let sharer = RefStore::with_policy(&store, impatient());
        *store.hook().reads.file.lock().unwrap() = sharer.upload_file("u1").await.unwrap();
        let (k1, k2, k3) = tokio::join!(
            sharer.publish("k1", "u2", &c, OnDifferent::Conflict, true),
            sharer.publish("k2", "u2", &c, OnDifferent::Conflict, true),
            sharer.publish("k3", "u2", &c, OnDifferent::Conflict, true),
        );
        // And one after them: the owner found is kept.
        let k4 = sharer
            .publish("k4", "u2", &c, OnDifferent::Conflict, true)
            .await;
        let all = [k1.unwrap(), k2.unwrap(), k3.unwrap(), k4.unwrap()];
        assert_eq!(all, [KeyOutcome::Unchanged; 4]);
        let reads = store
            .hook()
            .reads
            .reads
            .load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(reads, 1, "u1's record read once for its four keys");
        for key in keys {
            let changes = store.hook().changes.lock().unwrap().clone();
            let record = key_file(key);
            let writes = changes.iter().filter(|k| **k == record).count();
            assert_eq!(writes, 1, "{key}: {changes:#?}");
            let shared = sharer.key(key).await.unwrap().unwrap();
            assert_eq!(shared.refs, ["u1".to_string(), "u2".to_string()].into());
            assert_eq!(shared.by, "u1");
        }
        finalized(&sharer, "u2", &keys).await;
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{:?}", audit.problems);
        // Either upload's removal keeps every key for the other.
        for key in keys {
            assert_eq!(owner.remove(key, "u1").await.unwrap(), RemoveOutcome::Kept);
        }
        for key in keys {
            assert_eq!(
                sharer.remove(key, "u2").await.unwrap(),
                RemoveOutcome::Removed
            );
            assert_eq!(store.head(key).await.unwrap(), None);
        }
    }

    /// The owner's object gone between the sharer's look and its record (the owner's removal
    /// ran in between, start to end): the record, written as sharing, is confirmed against
    /// what is there once it is written — nothing — and goes back to naming the sharer
    /// alone, who creates the object. Without the confirmation the record would name the
    /// removed upload and an object that is not there.
    #[tokio::test]
    async fn a_share_whose_object_went_before_its_record_publishes_alone() {
        let (dir, input, etag) = input_beside_store();
        let hold = HoldFirst {
            prefix: "_symdex/refs/k",
            held: Default::default(),
            reached: Default::default(),
            open: tokio::sync::Semaphore::new(0),
        };
        let store = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path().join("s"))
                .unwrap()
                .with_owners(),
            hold,
        );
        let c = content(&etag, &input);
        let owner = RefStore::new(store.inner());
        let created = owner.publish("k", "u1", &c, OnDifferent::Conflict, true);
        assert_eq!(created.await.unwrap(), KeyOutcome::Published);
        finalized(&owner, "u1", &["k"]).await;
        let sharer = RefStore::with_policy(&store, impatient());
        let share = sharer.publish("k", "u2", &c, OnDifferent::Conflict, true);
        let removal = async {
            // The sharer saw u1's object and is about to write the record: u1 goes.
            store.hook().reached.notified().await;
            let removed = owner.remove("k", "u1").await.unwrap();
            store.hook().open.add_permits(1);
            removed
        };
        let (shared, removed) = tokio::join!(share, removal);
        assert_eq!(removed, RemoveOutcome::Removed);
        assert_eq!(shared.unwrap(), KeyOutcome::Published);
        let record = sharer.key("k").await.unwrap().unwrap();
        assert_eq!(
            (record.refs, record.by),
            (["u2".to_string()].into(), "u2".to_string())
        );
        let owned = store
            .owned("k")
            .await
            .unwrap()
            .expect("the sharer's object");
        assert_eq!(owned.owner, Some(sharer.owner_token("u2").await.unwrap()));
    }

    #[tokio::test]
    async fn a_sharer_waits_for_the_owners_removal_in_progress() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::with_policy(&store, impatient());
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        let remover = RefStore::with_policy(&store, impatient());
        hold_tombstone(&remover, &store, "k", "u1").await;
        let waits = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
        assert_eq!(waits.await.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            remover.remove("k", "u1").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.head("k").await.unwrap(), None);
        let again = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
        assert_eq!(again.await.unwrap(), KeyOutcome::Published);
    }

    #[tokio::test]
    async fn a_key_alone_changed_behind_symdex_is_written_again_by_its_owner() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        // Other bytes at the key, still naming u1 (a restore from an old backup, say).
        let other = ObjectInfo {
            size: 5,
            etag: content_sha1(b"other"),
        };
        let token = refs.owner_token("u1").await.unwrap();
        let source = CopySource::Bytes(b"other");
        store
            .copy(&source, "k", &other, Some(&token))
            .await
            .unwrap();
        // u2's bytes are the same as u1's: for u2 the key holds other content.
        let conflict = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
        assert_eq!(conflict.await.unwrap(), KeyOutcome::Conflict);
        let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, false);
        assert_eq!(again.await.unwrap(), KeyOutcome::Published);
        assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bytes");
        finalized(&refs, "u1", &["k"]).await;
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{:?}", audit.problems);
    }

    /// The `create` leases a run leaves to its finalize are handed on in key order, whatever
    /// order they were taken in: a take-back releases them in that order, a storage step
    /// each, and a schedule of the interleaving tests must replay from its seed (it did not
    /// while they came out of a hash map: 24 of 480 schedules differed between two runs).
    #[test]
    fn a_runs_create_leases_are_handed_on_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let refs = RefStore::new(&store);
        let lease = |holder: &str| Lease {
            holder: holder.to_string(),
            until: 0,
            op: CREATE.to_string(),
            run: "r".to_string(),
            acting: String::new(),
        };
        let keys: Vec<String> = (0..64).map(|i| format!("k/{:02}", (i * 37) % 64)).collect();
        for key in &keys {
            refs.held
                .lock()
                .unwrap()
                .insert(key.clone(), lease(&index_holder("u")));
        }
        refs.held
            .lock()
            .unwrap()
            .insert("k/other".into(), lease(&index_holder("v")));
        let handed: Vec<String> = refs.take_held("u").into_iter().map(|(k, _)| k).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(handed, sorted);
        assert_eq!(refs.take_held("v").len(), 1, "another upload's lease stays");
    }

    /// An object whose bytes are not what its owner wrote with it (a copy from a key an
    /// overwrite replaced meanwhile, `Indexer::hold_for`) is not shared, even by an upload
    /// of the bytes that are there: the owner's upload does not hold them.
    #[tokio::test]
    async fn an_object_not_holding_what_its_owner_wrote_is_not_shared() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        // Other bytes at the key, naming u1 as the writer of u1's bytes.
        let token = refs.owner_token("u1").await.unwrap();
        let written = ObjectInfo {
            size: bytes.size,
            etag: etag.clone(),
        };
        let source = CopySource::Bytes(b"other");
        store
            .copy(&source, "k", &written, Some(&token))
            .await
            .unwrap();
        let other_input = dir.path().join("other");
        std::fs::write(&other_input, b"other").unwrap();
        let other_etag = content_sha1(b"other");
        let other = content(&other_etag, &other_input);
        let shared = refs.publish("k", "u2", &other, OnDifferent::Conflict, true);
        assert_eq!(shared.await.unwrap(), KeyOutcome::Conflict);
        assert!(refs
            .key("k")
            .await
            .unwrap()
            .is_none_or(|r| !r.refs.contains("u2")));
        // The owner, indexed again, writes its own bytes back.
        let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, false);
        assert_eq!(again.await.unwrap(), KeyOutcome::Published);
        assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bytes");
    }

    #[tokio::test]
    async fn an_owner_indexed_again_gets_its_reference_back_in_a_shared_record() {
        let (dir, store, etag) = owned_store_and_input();
        let input = dir.path().join("in");
        let refs = RefStore::new(&store);
        let bytes = content(&etag, &input);
        publish_alone(&refs, "k", &bytes).await;
        let share = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
        assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
        finalized(&refs, "u2", &["k"]).await;
        // u1's reference goes; the record still names u1 as the object's writer.
        assert_eq!(refs.remove("k", "u1").await.unwrap(), RemoveOutcome::Kept);
        // The same upload indexed again (the same bytes to the same unversioned key): its
        // object is found naming it, and the record must reference it again.
        let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, true);
        assert_ne!(again.await.unwrap(), KeyOutcome::Conflict);
        let record = refs.key("k").await.unwrap().unwrap();
        assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
        assert_eq!(refs.remove("k", "u2").await.unwrap(), RemoveOutcome::Kept);
        assert!(
            store.head("k").await.unwrap().is_some(),
            "u1 still needs it"
        );
    }
}
