//! The index/unindex pipeline, the same for the CLI (directory store) and the Lambdas (S3):
//! identify an upload by ranged reads, compute its keys, publish by copying, record references
//! and one manifest record per decision.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use crate::formats::{identify_with_details, Format, FormatError, IdentifyOptions};
use crate::identity::{file_name_of, Identity, Kind, SectionRef};
use crate::layouts::{self, symstore_index2, KeySet, Layout};
use crate::manifest::{now_rfc3339, Action, Record, UploadMeta};
use crate::reader::RangeReader;
use crate::refs::{
    busy, Content, DeferredWrites, IdRecord, InTurn, IndexedAs, KeyOutcome, KeyRecord, LeasePolicy,
    OnDifferent, PriorRead, Publication, RefStore, RemoveOutcome, Run, UploadRecord, UploadState,
    Waiting,
};
use crate::retention::{check_channel, is_expired, RetentionPolicy};
use crate::sourcemap::{self, Offer, Want};
use crate::storage::{CopySource, Storage};
use futures_util::StreamExt;

#[cfg(test)]
mod hostile;
mod sources;

use sources::offer_of;

/// Keys of one upload published at once once one of them holds its bytes
/// ([`Indexer::publish_own`]).
const KEY_PUBLISHES: usize = 8;
/// Times a key is published again when it was freed while its conflict was being recorded
/// ([`Indexer::publish_key`]): each time somebody else took it meanwhile.
const CONFLICT_RETRIES: usize = 8;

/// Re-indexes an upload from its ingest object, with every key checked again
/// (`Config::recheck`): how a removal hands the keys it freed to the uploads waiting for them
/// (refs.rs, invariant 8). Only the caller can read an upload's bytes again (an S3 ingest
/// bucket, a local file, a test's artifacts). An upload whose ingest object is gone or holds
/// other bytes now is left alone (`Ok`): its own removal or index comes.
/// `handed`: the keys freed for the waiter (its re-index runs with them as
/// [`Config::handed`]).
pub trait HandOver: Send + Sync {
    fn reindex<'a>(
        &'a self,
        waiter: &'a UploadRecord,
        handed: &'a BTreeSet<String>,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>>;
}

/// Where each layout's keys live in the serving store, and what to do.
#[derive(Debug, Clone)]
pub struct Config {
    pub layouts: Vec<Layout>,
    /// Key prefix per layout (ARCHITECTURE.md: `symbols/`, `buildid/` at the root, `unified/`).
    pub prefixes: BTreeMap<Layout, String>,
    /// Replace a key's content when it differs (otherwise a conflict is recorded).
    pub overwrite: bool,
    /// Keys a removal handed to the upload this run re-indexes (`HandOver`): the wait for
    /// one it references ends (refs.rs, invariant 8), whether its upload record listed the
    /// key (an overwrite took it, `RefStore::overwritten`) or not (a conflict).
    pub handed: BTreeSet<String>,
    /// Check every key of an upload indexed before, as its first run did (no answer from
    /// its upload record: [`Indexer::already_indexed`]).
    pub recheck: bool,
    pub manifest_prefix: String,
    /// Gzip manifest objects (the Lambdas do; the local store writes plain JSON Lines).
    pub gzip_manifest: bool,
    /// How change leases are taken and judged (refs.rs).
    pub lease: LeasePolicy,
    /// Channel -> retention: stamps each new upload's expiry (retention.rs).
    pub retention: RetentionPolicy,
    /// Store the keys of the SymSrv family ([`CASE_FOLDED`]) lowercase, for a CDN that
    /// lowercases requests for them (infra edge/access.js): lookups become case-insensitive,
    /// as SymSrv over IIS is, and keys differing only by case are one object.
    pub fold_case: bool,
    /// Join debug files and uploaded sources (sourcemap.rs): a debug file records the paths
    /// its DWARF names, a source offers itself. Off, for a store nobody uploads sources to, a
    /// debug file costs no join records (on S3 one or two requests for each record its paths
    /// fall into, up to 256 a scope) and names its paths as missing; sources are published
    /// under their own keys and offered to no debug file. What is recorded while it is on
    /// stays, and removals still withdraw what was offered.
    pub source_joins: bool,
}

/// The layouts whose clients (WinDbg, Visual Studio, dotnet-symbol, Breakpad's symbol
/// servers) expect case-insensitive lookups.
pub const CASE_FOLDED: [Layout; 4] = [
    Layout::Ssqp,
    Layout::Symstore,
    Layout::SymstoreIndex2,
    Layout::Breakpad,
];

impl Default for Config {
    fn default() -> Self {
        Config {
            layouts: Layout::ALL.to_vec(),
            prefixes: default_prefixes(),
            overwrite: false,
            recheck: false,
            handed: BTreeSet::new(),
            manifest_prefix: "_manifest".to_string(),
            gzip_manifest: false,
            lease: LeasePolicy::default(),
            retention: RetentionPolicy::default(),
            fold_case: false,
            source_joins: true,
        }
    }
}

/// `symbols/` for the `<name>/<id>/<name>` family (one base URL for WinDbg, VS, dotnet-symbol),
/// the root for debuginfod (its keys start with `buildid/`), one directory for each other.
pub fn default_prefixes() -> BTreeMap<Layout, String> {
    Layout::ALL
        .into_iter()
        .map(|layout| {
            let prefix = match layout {
                Layout::Ssqp | Layout::Symstore | Layout::Breakpad => "symbols/",
                Layout::SymstoreIndex2 => "index2/",
                Layout::Debuginfod => "",
                Layout::Unified => "unified/",
                Layout::Gdb => "gdb/",
                Layout::Lldb => "lldb/",
            };
            (layout, prefix.to_string())
        })
        .collect()
}

impl Config {
    fn prefix(&self, layout: Layout) -> &str {
        self.prefixes.get(&layout).map_or("", String::as_str)
    }

    /// The store-level objects the layouts need (SymStore's two-tier marker).
    pub fn marker_objects(&self) -> Vec<(String, &'static [u8])> {
        let mut out = Vec::new();
        if self.layouts.contains(&Layout::SymstoreIndex2) {
            let key = format!(
                "{}{}",
                self.prefix(Layout::SymstoreIndex2),
                symstore_index2::MARKER_KEY
            );
            out.push((key, b"" as &[u8]));
        }
        out
    }
}

/// One ingest object to index.
#[derive(Debug, Clone)]
pub struct Upload<'a> {
    /// Stable identity (references point at it): path or bucket/key/version plus content.
    pub id: String,
    /// How to copy its bytes into the store.
    pub source: CopySource<'a>,
    pub ingest_bucket: Option<String>,
    /// Ingest key (S3) or path (local).
    pub ingest_key: String,
    /// Set when this upload is one of an archive's entries.
    pub entry: Option<EntryOf>,
    pub ingest_version: Option<String>,
    /// Content identity, comparable with the store's etags.
    pub etag: String,
    pub size: u64,
    pub meta: UploadMeta,
    pub options: IdentifyOptions,
    /// Where a source file sits in its source tree (matched against the paths debug files
    /// name, sourcemap.rs); `None`: its archive entry path, else its ingest key.
    pub source_path: Option<String>,
    /// A local input file's status when it was hashed, kept with its location (refs.rs).
    pub file_stamp: Option<crate::refs::FileStamp>,
}

/// The archive an entry upload came from, and where inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryOf {
    /// Path inside the archive (nested archives: `inner.tar.gz!/path`).
    pub path: String,
    /// The archive object's content identity and size (the ingest object's).
    pub archive_etag: String,
    pub archive_size: u64,
}

impl Upload<'_> {
    /// The file name the artifact was uploaded as.
    pub fn name(&self) -> &str {
        file_name_of(self.entry.as_ref().map_or(&self.ingest_key, |e| &e.path))
    }

    /// The upload's bytes, as a key is published with them.
    fn content(&self) -> Content<'_> {
        Content {
            etag: &self.etag,
            size: self.size,
            source: self.source,
        }
    }

    /// The ingest location: `s3://bucket/key`, or the local path.
    pub fn source_name(&self) -> String {
        match &self.ingest_bucket {
            Some(bucket) => format!("s3://{bucket}/{}", self.ingest_key),
            None => self.ingest_key.clone(),
        }
    }

    /// The ingest object's content identity (the archive's, for an entry): what a sweeper
    /// deletes, conditionally on it.
    fn ingest_etag(&self) -> &str {
        self.entry.as_ref().map_or(&self.etag, |e| &e.archive_etag)
    }

    fn record(&self, action: Action) -> Record {
        Record {
            name: Some(self.name().to_string()),
            entry: self.entry.as_ref().map(|e| e.path.clone()),
            ingest_version: self.ingest_version.clone(),
            ingest_etag: Some(self.ingest_etag().to_string()),
            ingest_size: Some(self.entry.as_ref().map_or(self.size, |e| e.archive_size)),
            meta: self.meta.clone(),
            ..Record::about(
                action,
                self.id.clone(),
                self.ingest_bucket.clone(),
                self.ingest_key.clone(),
            )
        }
    }
}

/// What happened to each key of one artifact.
#[derive(Debug, Default)]
struct Outcome {
    published: Vec<String>,
    unchanged: Vec<String>,
    conflicts: Vec<String>,
    /// What else the record's reason says (a source's tie left as it was).
    notes: Vec<String>,
}

impl Outcome {
    fn action(&self) -> Action {
        if !self.conflicts.is_empty() {
            Action::Conflict
        } else if !self.published.is_empty() {
            Action::Indexed
        } else {
            Action::Unchanged
        }
    }

    fn add(&mut self, key: &str, outcome: KeyOutcome) {
        let list = match outcome {
            KeyOutcome::Published => &mut self.published,
            KeyOutcome::Unchanged => &mut self.unchanged,
            KeyOutcome::Conflict => &mut self.conflicts,
        };
        list.push(key.to_string());
    }
}

/// One upload indexed but not yet finalized: its records go into the manifest first, then
/// [`Indexer::finalize`] marks it indexed (so a run that dies before its manifest is written
/// reports the same keys as published when it is re-run: the manifest is at-least-once).
#[derive(Debug, Default)]
pub struct Indexed {
    pub records: Vec<Record>,
    /// The upload to finalize (`None`: nothing was published, nothing to finalize).
    pub upload: Option<String>,
    referenced: BTreeSet<String>,
    /// Every key this attempt may have referenced (taken back if the upload is removed).
    planned: BTreeSet<String>,
    /// What the run came to, for the upload record, when a re-delivery may be answered from
    /// it (every planned key published or unchanged).
    indexed_as: Option<IndexedAs>,
    /// The upload record as the plan wrote it (the finalize swaps on it without a read).
    upload_read: Option<PriorRead>,
    /// A sole writer's changes to source-map records, made when the upload is taken in
    /// input order ([`Indexer::register_source_map_changes`]).
    source_map_changes: Vec<SourceMapChange>,
    /// `create` leases left to the finalize (refs.rs, invariant 1): released by a write if
    /// the references are taken back instead.
    held: Vec<(String, crate::refs::Lease)>,
    /// Keys the upload waited for and references now (a hand-over's re-index: refs.rs,
    /// invariant 8): their markers go once the finalize lists them — before that, a run
    /// that dies must be re-indexed by the hand-over's retry, which finds it by its marker.
    waits_ended: BTreeSet<String>,
    /// A source upload: the join record of its offer (`UploadRecord::offered_in`), for a
    /// take-back to withdraw it even when a removal got there first and forgot the record.
    offered_in: Option<String>,
}

/// A change to one source-map record an upload's indexing decided (made at once, or by a
/// sole writer when it takes the upload: [`Indexer::register_source_map_changes`]).
#[derive(Debug, Clone)]
enum SourceMapChange {
    /// Source paths a debug file names, wanted from now on.
    Want(String, Vec<Want>),
    /// Offers of source uploads removed since they offered themselves.
    DropOffers(String, BTreeSet<Offer>),
}

impl SourceMapChange {
    fn file(&self) -> &str {
        match self {
            SourceMapChange::Want(file, _) | SourceMapChange::DropOffers(file, _) => file,
        }
    }

    /// Makes the change on `record`; `true` if it changed anything.
    fn apply(&self, record: &mut sourcemap::SourceMapRecord) -> bool {
        match self {
            SourceMapChange::Want(_, wants) => wants
                .iter()
                .fold(false, |changed, w| record.want(w) | changed),
            SourceMapChange::DropOffers(_, dead) => {
                let before = record.offers.len();
                record.offers.retain(|o| !dead.contains(o));
                record.offers.len() != before
            }
        }
    }
}

impl Indexed {
    /// Records of an upload that published nothing (skipped, rejected).
    pub fn nothing_published(records: Vec<Record>) -> Self {
        Indexed {
            records,
            ..Indexed::default()
        }
    }
}

/// What [`Indexer::already_indexed`] found.
#[derive(Debug)]
pub enum Lookup {
    /// Indexed before under the same plan: the records of this re-delivery.
    Indexed(Box<Indexed>),
    /// Index it ([`Indexer::index_looked_up`], with the read made, when kept).
    Unindexed(Option<PriorRead>),
}

/// One identity's keys, computed before anything is published (the plan).
struct Planned {
    id: Identity,
    record: Record,
    keys: BTreeSet<String>,
    set: KeySet,
    /// A PDB: its debug id's record as the plan read it (for the names PEs gave it), kept
    /// for the swap that records where it lives ([`Indexer::remember_pdb`]). `None` for a
    /// PDB's first delivery: not read, guessed absent (the PDB the first of its PE and PDB
    /// to arrive, or alone): created where it lives, or, there after all, read then.
    id_read: Option<(IdRecord, PriorRead)>,
}

pub struct Indexer<'s> {
    store: &'s dyn Storage,
    refs: RefStore<'s>,
    config: Config,
    /// Source-map changes of uploads being indexed, by upload (see [`SourceMapChange`]).
    pending_source_maps: std::sync::Mutex<HashMap<String, Vec<SourceMapChange>>>,
    /// What of this indexer decides keys besides an upload: its version, layouts, prefixes,
    /// case folding, the store's alias mode — hashed once, the start of each upload's
    /// [`Self::plan_digest`] (a re-index computes one per input).
    key_plan: crate::digest::Sha1,
    /// The last upload's part of a plan and its digest ([`Self::plan_digest`]).
    last_plan: std::sync::Mutex<Option<(String, String)>>,
    /// Keys are listed by the finalize alone ([`Self::lists_keys_at_finalize`]).
    list_at_finalize: bool,
    /// Where a removal hands the keys it freed ([`Self::handing_over_to`]).
    hand_over: Option<&'s dyn HandOver>,
}

/// How an upload record keeps what its run came to (`IndexedAs`), in the plan digest: an
/// indexer of the same version that keeps it otherwise (its own keys by name, before
/// `unchanged_at`) finds another plan and indexes in full, instead of answering from a
/// record it would read wrong.
const KEPT_RECORDS: &str = "kept records: own keys by position";

impl<'s> Indexer<'s> {
    pub fn new(store: &'s dyn Storage, config: Config) -> Self {
        let mut key_plan = crate::digest::Sha1::new();
        key_plan.update(
            format!(
                "{}\n{}\n{:?}\n{:?}\n{}\n{}\n",
                crate::manifest::indexer_version(),
                KEPT_RECORDS,
                config.layouts,
                config.prefixes,
                config.fold_case,
                store.key_copies_are_aliases(),
            )
            .as_bytes(),
        );
        Indexer {
            store,
            refs: RefStore::with_policy(store, config.lease.clone()),
            config,
            pending_source_maps: Default::default(),
            key_plan,
            last_plan: Default::default(),
            list_at_finalize: false,
            hand_over: None,
        }
    }

    /// A removal re-indexes the uploads waiting for the keys it freed through `hand_over`
    /// (refs.rs, invariant 8). Without one, they stay waiting: `verify` reports each such key
    /// (`waiting`), and `index --recheck` of the upload publishes it.
    pub fn handing_over_to(mut self, hand_over: &'s dyn HandOver) -> Self {
        self.hand_over = Some(hand_over);
        self
    }

    /// For a caller that finalizes each upload right after indexing it, with no other upload
    /// of its own waiting in between (the Lambda handling one plain object): the `create`
    /// leases a run leaves (refs.rs, invariant 1) end with the finalize's write, which lists
    /// the keys anyway — one write per fresh upload saved. Otherwise they are listed by a
    /// write of their own right after publishing: an upload of the same bytes in the same
    /// batch (or archive) would wait on them, and its finalize comes only after the batch.
    pub fn lists_keys_at_finalize(mut self, at_finalize: bool) -> Self {
        self.list_at_finalize = at_finalize;
        self
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// For a sole writer (`lease.exclusive`, else nothing changes): source-map records are
    /// written at [`Self::flush_source_maps`], which the caller runs before it finalizes
    /// (see `RefStore::defer_source_map_writes`).
    pub fn defer_source_map_writes(self) -> Self {
        self.defer_source_map_writes_to(Arc::default())
    }

    /// [`Self::defer_source_map_writes`] into `writes`, shared with the run's other indexers
    /// (a removal's hand-over indexes with one of its own, see `refs::DeferredWrites`).
    pub fn defer_source_map_writes_to(mut self, writes: Arc<DeferredWrites>) -> Self {
        if self.config.lease.exclusive {
            self.refs.defer_source_map_writes_to(writes);
        }
        self
    }

    /// Writes the source-map records deferred since the last call.
    pub async fn flush_source_maps(&self) -> io::Result<()> {
        self.refs.flush_source_maps().await
    }

    /// Makes the source-map changes an indexed upload decided (a sole writer deferring its
    /// source-map writes; nothing to do otherwise). The caller takes uploads in input order:
    /// then several inputs indexed at once (`symdex index --jobs`) change the join records —
    /// lists in arrival order, oldest dropped beyond a bound — as one input after another
    /// would. Indexing only reads them (offers change only by sources, which a caller runs
    /// alone), so deciding a change and making it later sees the same record.
    pub async fn register_source_map_changes(&self, indexed: &mut Indexed) -> io::Result<()> {
        for change in std::mem::take(&mut indexed.source_map_changes) {
            self.refs
                .update_source_map(change.file(), |r| change.apply(r))
                .await?;
        }
        Ok(())
    }

    /// Makes a source-map change of `upload` now, or, for a sole writer deferring them, notes
    /// it for when the upload is taken (see [`SourceMapChange`]).
    async fn change_source_map(&self, upload: &str, change: SourceMapChange) -> io::Result<()> {
        if self.refs.defers_source_maps() {
            self.pending_source_maps
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(upload.to_string())
                .or_default()
                .push(change);
            return Ok(());
        }
        self.refs
            .update_source_map(change.file(), |r| change.apply(r))
            .await?;
        Ok(())
    }

    pub fn refs(&self) -> &RefStore<'s> {
        &self.refs
    }

    /// The store it publishes to.
    pub fn store(&self) -> &'s dyn Storage {
        self.store
    }

    /// Writes the store-level marker objects once.
    pub async fn prepare(&self) -> io::Result<()> {
        for (key, body) in self.config.marker_objects() {
            if self.store.size(&key).await?.is_none() {
                self.store.put(&key, body).await?;
            }
        }
        Ok(())
    }

    /// The prefixed keys of a key set.
    fn prefixed(&self, set: &KeySet) -> BTreeSet<String> {
        set.keys
            .iter()
            .flat_map(|(layout, keys)| {
                let fold = self.config.fold_case && CASE_FOLDED.contains(layout);
                keys.iter().map(move |k| {
                    let key = format!("{}{k}", self.config.prefix(*layout));
                    if fold {
                        key.to_ascii_lowercase()
                    } else {
                        key
                    }
                })
            })
            .collect()
    }

    /// Indexes one upload. `Err` only for storage failures and busy keys (worth a retry);
    /// everything about the artifact itself ends in the returned manifest records. Call
    /// [`Self::finalize`] once the records are written to the manifest.
    pub async fn index(
        &self,
        upload: &Upload<'_>,
        reader: &dyn RangeReader,
    ) -> io::Result<Indexed> {
        match self.already_indexed(upload).await? {
            Lookup::Indexed(unchanged) => Ok(*unchanged),
            Lookup::Unindexed(prior) => {
                let identified = identify_with_details(reader, &upload.options);
                self.index_looked_up(upload, identified, prior).await
            }
        }
    }

    /// A re-delivery of an upload whose last run was complete, under the same plan: its
    /// `unchanged` records, from the upload record alone (one read: no identification, no
    /// key's record read, nothing written but the caller's manifest). `Unindexed`: index it.
    ///
    /// Why the record is enough: an `indexed` upload record is written by finalize after
    /// every key was referenced (invariant 4), and only a removal, which first marks the
    /// record `removing`, takes those references back; a key with references stays published
    /// (invariants 2, 3). So while the record reads `indexed`, each key it lists holds these
    /// bytes. The records are stamped before that read: a removal that begins after it
    /// stamps its own `unpublished` record no earlier, so the manifest's last word on the
    /// upload stays true. An object changed behind symdex's back (deleted by hand) is found by
    /// `verify` and repaired by a full run (`Config::recheck`, `symdex index --recheck`).
    pub async fn already_indexed(&self, upload: &Upload<'_>) -> io::Result<Lookup> {
        // Stamped before the read (see above).
        let time = now_rfc3339();
        let (found, prior) = self.refs.upload_read(&upload.id).await?;
        Ok(self.looked_up(upload, found, prior, &time))
    }

    /// [`Self::already_indexed`] from a read of `upload`'s record made before: `found` and
    /// `prior` as [`RefStore::upload_read`] returned them, `time` taken before that read. The
    /// caller vouches that the read is as good as one made now (the CLI's reader thread reads
    /// ahead, and the writer knows whether anything changed the store since).
    pub fn looked_up(
        &self,
        upload: &Upload<'_>,
        found: Option<UploadRecord>,
        prior: Option<PriorRead>,
        time: &str,
    ) -> Lookup {
        match found.and_then(|found| self.answered_by(upload, &found, time)) {
            Some(indexed) => Lookup::Indexed(Box::new(indexed)),
            None => Lookup::Unindexed(prior),
        }
    }

    /// The records of a re-delivery of `upload`, answered from its upload record `found`
    /// (read after `time`), when its last run was complete under the same plan
    /// ([`Self::already_indexed`]).
    fn answered_by(
        &self,
        upload: &Upload<'_>,
        found: &UploadRecord,
        time: &str,
    ) -> Option<Indexed> {
        if self.config.overwrite || self.config.recheck {
            return None;
        }
        let indexed_as = found.indexed_as.as_ref()?;
        let settled = found.state == UploadState::Indexed
            && indexed_as.plan == self.plan_digest(upload)
            && found
                .planned
                .iter()
                .all(|k| found.keys.contains(k) || indexed_as.conflicts.contains(k))
            && found.keys.len() == indexed_as.referenced;
        if !settled {
            return None;
        }
        let own_keys = own_keys_of(indexed_as, &found.keys)?;
        let records = indexed_as
            .records
            .iter()
            .zip(own_keys)
            .map(|(kept, keys)| {
                let action = if kept.conflicts.is_empty() {
                    Action::Unchanged
                } else {
                    Action::Conflict
                };
                let mut record = upload.record(action);
                record.time = time.to_string();
                // As a full run reports it: the channel and expiry of the upload's record.
                record.meta.channel.clone_from(&found.meta.channel);
                record.meta.expires.clone_from(&found.meta.expires);
                with_decision_of(record, kept, keys)
            })
            .collect();
        Some(Indexed::nothing_published(records))
    }

    /// Digest of what besides the bytes decides an upload's keys: the indexer's version, the
    /// key configuration and the store's alias mode, the upload's identify options and source
    /// path. Compared by [`Self::already_indexed`].
    fn plan_digest(&self, upload: &Upload<'_>) -> String {
        let upload_plan = format!("{:?}\n{:?}", upload.options, upload.source_path);
        // The last one asked is mostly asked again (a run's inputs share their options).
        let mut last = self.last_plan.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, digest)) = last.as_ref().filter(|(plan, _)| *plan == upload_plan) {
            return digest.clone();
        }
        let mut digest = self.key_plan.clone();
        digest.update(upload_plan.as_bytes());
        let digest = digest.hex();
        *last = Some((upload_plan, digest.clone()));
        digest
    }

    /// What a run came to, kept in the upload record when a re-delivery may be answered from
    /// it: every record of the upload published or found unchanged, its keys exactly those
    /// planned and referenced (after a conflict the next delivery runs in full, and may find
    /// the key free). Records about other uploads (a PDB's aliases under this PE's name) are
    /// not kept: that work was done before this run finished, and is theirs to report.
    fn indexed_as(
        &self,
        upload: &Upload<'_>,
        records: &[Record],
        planned: &BTreeSet<String>,
        referenced: &BTreeSet<String>,
    ) -> Option<IndexedAs> {
        let own: Vec<&Record> = records.iter().filter(|r| r.upload == upload.id).collect();
        let settled = !own.is_empty()
            && own.iter().all(|r| {
                matches!(
                    r.action,
                    Some(Action::Indexed | Action::Unchanged | Action::Conflict)
                ) && r.removed.is_empty()
            });
        let conflicts: BTreeSet<String> = own
            .iter()
            .flat_map(|r| r.conflicts.iter().cloned())
            .collect();
        // Every planned key is referenced or a conflict (sidecar keys, `.meta`, are referenced
        // without a record listing them).
        let decided = planned.len() == referenced.len() + conflicts.len()
            && planned
                .iter()
                .all(|k| referenced.contains(k) || conflicts.contains(k));
        if !settled || !decided {
            return None;
        }
        // Positions in `referenced`, which the upload record lists as `keys` when these are
        // read back (`own_keys_of`). A record's key that is not referenced has none: nothing
        // is kept, and the next delivery runs in full.
        let sorted: Vec<&String> = referenced.iter().collect();
        let position = |key: &String| sorted.binary_search(&key).ok().map(|at| at as u32);
        let mut unchanged_at = Vec::new();
        let mut trimmed = Vec::new();
        for r in own {
            let at: Option<Vec<u32>> = r
                .published
                .iter()
                .chain(&r.unchanged)
                .map(position)
                .collect();
            unchanged_at.push(at?);
            let kept = Record {
                schema: r.schema,
                ..Record::default()
            };
            trimmed.push(with_decision_of(kept, r, Vec::new()));
        }
        Some(IndexedAs {
            plan: self.plan_digest(upload),
            referenced: referenced.len(),
            records: trimmed,
            conflicts,
            unchanged_at,
        })
    }

    /// [`Self::index`] for an upload already identified (the Lambda identifies with ranged
    /// GETs first: `S3Object::identify`).
    pub async fn index_identified(
        &self,
        upload: &Upload<'_>,
        identified: Result<Vec<Identity>, FormatError>,
    ) -> io::Result<Indexed> {
        self.index_looked_up(upload, identified, None).await
    }

    /// [`Self::index_identified`] after [`Self::already_indexed`] said it is not (its read of
    /// the upload record is reused).
    pub async fn index_looked_up(
        &self,
        upload: &Upload<'_>,
        identified: Result<Vec<Identity>, FormatError>,
        prior: Option<PriorRead>,
    ) -> io::Result<Indexed> {
        let mut indexed = self.index_planned(upload, identified, prior).await;
        let mut held = self.refs.take_held(&upload.id);
        let list_now = !held.is_empty() && !self.list_at_finalize;
        if let (Ok(done), true) = (&mut indexed, list_now) {
            // The `create` leases the run left end when its upload record lists their keys
            // (refs.rs, invariant 1): listed now, by one swap for the whole upload, not at the
            // finalize after the manifest — other uploads of the same bytes, in the same batch
            // as this one, would wait for that. Not yet `indexed`: that waits for the manifest.
            let prior = done.upload_read.take();
            match self
                .refs
                .finalize_read(&upload.id, &done.referenced, Run::Partial, prior, &held)
                .await
            {
                // Released; the finalize swaps on the record as this wrote it.
                Ok((true, read)) => {
                    done.upload_read = read;
                    held.clear();
                }
                // Being removed: the finalize takes the references back, leases first.
                Ok((false, _)) => {}
                Err(e) => indexed = Err(e),
            }
        }
        if indexed.is_err() {
            // A failed run lists none of its keys: others need not wait for its retry. Best
            // effort: a lease left here is taken over by the retry, or after its time.
            let _ = self.refs.release_created(&held).await;
        }
        // Taken whatever the outcome: a failed upload's changes are never made (it stays
        // `indexing`, and its next run decides them again).
        let changes = self
            .pending_source_maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&upload.id)
            .unwrap_or_default();
        indexed.map(|indexed| Indexed {
            source_map_changes: changes,
            held,
            ..indexed
        })
    }

    async fn index_planned(
        &self,
        upload: &Upload<'_>,
        identified: Result<Vec<Identity>, FormatError>,
        prior: Option<PriorRead>,
    ) -> io::Result<Indexed> {
        // The expiry of the upload's channel, counted from now (an upload indexed before
        // keeps the time and expiry of its record: `plan` never rewrites them).
        let stamped = Upload {
            meta: self.config.retention.stamp(&upload.meta, &now_rfc3339()),
            ..upload.clone()
        };
        let upload = &stamped;
        if let Some(Err(reason)) = upload.meta.channel.as_deref().map(check_channel) {
            let mut r = upload.record(Action::Rejected);
            r.reason = Some(reason);
            return Ok(Indexed::nothing_published(vec![r]));
        }
        let identities = match identified {
            Ok(ids) => ids,
            Err(FormatError::Io(e)) => return Err(e),
            Err(e) => {
                let action = match e {
                    FormatError::Unrecognized(_) => Action::Skipped,
                    _ => Action::Rejected,
                };
                let mut r = upload.record(action);
                r.reason = Some(e.to_string());
                return Ok(Indexed::nothing_published(vec![r]));
            }
        };
        // Plan: every key of every identity, listed in the upload record before any reference
        // is added (refs.rs, invariant 4).
        let mut plans = Vec::new();
        let mut records = Vec::new();
        // A first delivery (its upload record absent: read so, or guessed) also guesses that
        // a PDB's debug id has no record yet (`remember_pdb`).
        let assumed_absent = prior.as_ref().is_some_and(PriorRead::is_absent);
        for mut id in identities {
            id.fill_file_names(upload.name());
            match self.plan_identity(upload, id, assumed_absent).await? {
                Ok(plan) => plans.push(plan),
                Err(record) => records.push(record),
            }
        }
        let planned: BTreeSet<String> = plans.iter().flat_map(|p| p.keys.clone()).collect();
        // A Sentry source bundle's files are uploads of their own, indexed after it by the
        // caller: its re-delivery runs in full so that they are too.
        let bundle = plans.iter().any(|p| !p.id.bundle_files.is_empty());
        if planned.is_empty() {
            return Ok(Indexed::nothing_published(records));
        }
        let template = UploadRecord {
            upload: upload.id.clone(),
            source: upload.source_name(),
            meta: upload.meta.clone(),
            etag: upload.etag.clone(),
            size: upload.size,
            time: now_rfc3339(),
            ingest_version: upload.ingest_version.clone(),
            ingest_etag: Some(upload.ingest_etag().to_string()),
            entry: upload.entry.as_ref().map(|e| e.path.clone()),
            source_paths: plans
                .iter()
                .filter_map(|p| p.id.sources.as_ref())
                .flat_map(|s| s.paths.iter().cloned())
                .collect(),
            source_path: upload.source_path.clone(),
            // Where its offer goes, if it makes one (`offer_source`), for its removal to
            // withdraw it.
            offered_in: (self.config.layouts.contains(&Layout::Debuginfod)
                && plans.iter().any(|p| p.id.kind == Kind::Source))
            .then(|| offer_of(upload).1),
            as_source: upload.options.as_source,
            ..UploadRecord::default()
        };
        let stamp = upload.file_stamp.as_ref();
        // Stamped before the plan's read, for an answer from the record (as `already_indexed`).
        let time = now_rfc3339();
        let (mut found, mut upload_read) =
            self.refs.plan(&template, &planned, prior, stamp).await?;
        // The upload record was taken to be absent (read so, or guessed on a first delivery:
        // `PriorRead::absent`) and is there after all: an upload of the same bytes at the same
        // location indexed before is answered from it, as its re-delivery would be (a bundle's
        // record keeps no answer: it runs in full, for its files).
        if assumed_absent {
            if let Some(answer) = found
                .as_ref()
                .and_then(|found| self.answered_by(upload, found, &time))
            {
                return Ok(answer);
            }
        }
        if found.as_ref().map(|r| r.state) == Some(UploadState::Removing) {
            // A removal of this upload is in progress, or died half-way: finished first, as it
            // would have finished — its record to the manifest (again, if it got there: the
            // manifest is at-least-once), then the keys it freed handed over (invariant 8).
            // Boxed: a removal's hand-over indexes other uploads, whose futures would
            // otherwise sit inside this one's.
            let exclusive = self.config.lease.exclusive;
            let note =
                exclusive.then_some("a removal in progress was finished before indexing it again");
            Box::pin(self.removal_to_its_end(&upload.id, note)).await?;
            if !exclusive {
                // Concurrent writers: the removal is a deletion's, which its message's
                // redelivery finishes, or this upload's own take-back (`finalize` found its
                // ingest object gone), which nothing but this message's redelivery runs
                // again — left to itself, the upload stayed `removing` for good, half its
                // keys unpublished (S3 interleavings, seed 4002). Finished here as a second
                // delivery of it would finish it (runs of one removal at once are
                // at-least-once delivery's normal case), and this message is retried:
                // indexing the upload again now could race another run of its removal still
                // taking its references back, key by key. (A sole writer holds the writer
                // lock: no other run is, and it indexes on.)
                return Err(busy(&format!(
                    "{}: a removal was in progress; finished, index again",
                    upload.id
                )));
            }
            (found, upload_read) = self.refs.plan(&template, &planned, None, stamp).await?;
        }
        let fresh = found.as_ref().map(|r| r.state) != Some(UploadState::Indexed);
        // The keys the upload's finished runs referenced (none for a fresh upload), and those
        // they planned without referencing them (where they may have waited: conflicts).
        let indexed_before = found.as_ref().filter(|r| r.state == UploadState::Indexed);
        let listed = indexed_before.map(|r| r.keys.clone());
        let unreferenced = indexed_before
            .map(UploadRecord::unreferenced)
            .unwrap_or_default();
        // An earlier attempt of this upload began and did not finish.
        let earlier = found.as_ref().filter(|r| r.state == UploadState::Indexing);
        let retry = earlier.is_some();
        // The keys it may have referenced beyond this plan: a PDB's other copies' names,
        // found live then (`remember_pdb`).
        let earlier_extras: BTreeSet<String> = earlier
            .map(|r| r.all_keys().difference(&planned).cloned().collect())
            .unwrap_or_default();
        // An upload indexed before keeps its channel and expiry (a promotion may have changed
        // them since): its records say so, not what this delivery would have stamped.
        let retained = found.map(|r| (r.meta.channel, r.meta.expires));
        let mut referenced = BTreeSet::new();
        // A key holding the upload's bytes, shared by its identities (one stored copy).
        let mut holding = None;
        for plan in plans {
            let (record, keys, others) = self
                .publish_identity(upload, plan, fresh, retry, &earlier_extras, &mut holding)
                .await?;
            referenced.extend(keys);
            records.push(record);
            records.extend(others);
        }
        if let Some(listed) = &listed {
            for record in records.iter_mut().filter(|r| r.upload == upload.id) {
                report_unlisted_as_published(record, listed);
            }
        }
        let waits_ended = unreferenced
            .union(&self.config.handed)
            .filter(|key| referenced.contains(*key))
            .cloned()
            .collect();
        if let Some((channel, expires)) = retained {
            for record in records.iter_mut().filter(|r| r.upload == upload.id) {
                record.meta.channel.clone_from(&channel);
                record.meta.expires.clone_from(&expires);
            }
        }
        let planned = planned.union(&referenced).cloned().collect();
        let indexed_as = (!bundle)
            .then(|| self.indexed_as(upload, &records, &planned, &referenced))
            .flatten();
        Ok(Indexed {
            records,
            upload: Some(upload.id.clone()),
            referenced,
            planned,
            indexed_as,
            upload_read,
            source_map_changes: Vec::new(),
            held: Vec::new(),
            waits_ended,
            offered_in: template.offered_in,
        })
    }

    /// Marks an indexed upload done, after its records reached the manifest. `alive`: the
    /// ingest object still exists (a removal that came first found nothing to remove, so the
    /// indexer takes its own references back). Returns the records of such an undo, already
    /// written to the manifest (the caller only reports them).
    pub async fn finalize(&self, indexed: &Indexed, alive: bool) -> io::Result<Vec<Record>> {
        let Some(upload) = &indexed.upload else {
            return Ok(Vec::new());
        };
        let reason = if !alive {
            "the ingest object was deleted while it was indexed"
        } else {
            let finalized = self
                .refs
                .finalize(
                    upload,
                    &indexed.referenced,
                    Run::Complete(indexed.indexed_as.as_ref()),
                    indexed.upload_read.clone(),
                    &indexed.held,
                )
                .await;
            match finalized {
                Ok(true) => {
                    // Listed now: the waits for these keys are over (a marker a crash here
                    // leaves goes when the key's holder, this upload, is removed).
                    self.stop_waiting(upload, &indexed.waits_ended).await?;
                    return Ok(Vec::new());
                }
                Ok(false) => "removed while it was indexed",
                Err(e) => {
                    // Leases this write was to end (`lists_keys_at_finalize`): others need
                    // not wait for the retry. Best effort, as after a failed run.
                    let _ = self.refs.release_created(&indexed.held).await;
                    return Err(e);
                }
            }
        };
        // Whatever became of the upload record (a removal may have finished and deleted it
        // while we were publishing), this attempt's references go (refs.rs, invariant 4),
        // its `create` leases first (its finalize will not list their keys).
        self.refs.release_created(&indexed.held).await?;
        let record = self.refs.begin_removal(upload).await?;
        let TakenBack {
            removed,
            not_referenced,
            ..
        } = self
            .take_back_references(upload, &indexed.planned, record.as_ref())
            .await?;
        let undone: Vec<Record> = indexed
            .records
            .first()
            .map(|first| Record {
                time: now_rfc3339(),
                action: Some(Action::Unpublished),
                reason: Some(format!("{reason}; {} keys removed", removed.len())),
                upload: upload.to_string(),
                published: Vec::new(),
                unchanged: Vec::new(),
                conflicts: Vec::new(),
                removed: removed.clone(),
                ..first.clone()
            })
            .into_iter()
            .collect();
        // As a removal does (`end_removal`): the manifest says the keys went before the
        // hand-over's records say who published them again, and before the record that would
        // report them on a retry goes.
        self.write_manifest(&undone).await?;
        let offered_in = indexed.offered_in.as_deref();
        self.finish_removal(
            upload,
            &removed,
            record.as_ref(),
            offered_in,
            &not_referenced,
        )
        .await?;
        Ok(undone)
    }

    /// Re-indexes every live upload waiting for one of `freed`, keys whose objects a removal
    /// of `remover` deleted (refs.rs, invariant 8); forgets the waits of uploads gone or
    /// going. Called before the remover's record goes: a removal that dies here hands over on
    /// its retry, which reports the same keys freed.
    async fn hand_over(&self, remover: &str, freed: &[String]) -> io::Result<()> {
        let mut waiters: BTreeMap<String, Vec<Waiting>> = BTreeMap::new();
        for key in freed {
            for waiting in self.refs.waiting(key).await? {
                waiters
                    .entry(waiting.upload.clone())
                    .or_default()
                    .push(waiting);
            }
        }
        for (upload, waits) in waiters {
            let live = if upload == remover {
                None
            } else {
                let record = self.refs.upload(&upload).await?;
                record.filter(|r| r.state != UploadState::Removing)
            };
            match (live, self.hand_over) {
                // Its marker stays: the re-index may meet other content there again (it ends
                // the waits for the keys it references).
                (Some(record), Some(hand_over)) => {
                    let handed = waits.iter().map(|w| w.key.clone()).collect();
                    hand_over.reindex(&record, &handed).await?
                }
                // Left waiting: `verify` reports it.
                (Some(_), None) => {}
                (None, _) => {
                    for waiting in &waits {
                        self.refs.stop_waiting(waiting).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Takes back an upload's references to `keys` and to every key its `removing` record
    /// lists, noting each key unpublished in the record.
    async fn take_back_references(
        &self,
        upload_id: &str,
        keys: &BTreeSet<String>,
        record: Option<&UploadRecord>,
    ) -> io::Result<TakenBack> {
        let mut all = keys.clone();
        if let Some(record) = &record {
            all.extend(record.all_keys());
        }
        // Keys an earlier, interrupted attempt already unpublished are reported again.
        let mut removed: BTreeSet<String> = record.map(|r| r.removed.clone()).unwrap_or_default();
        let (mut kept, mut not_referenced) = (0, BTreeSet::new());
        for key in all {
            // Noted in the upload record (when it has one) as the key goes, so that a retry
            // reports it too.
            let outcome = if record.is_some() {
                self.refs.remove_noted(&key, upload_id).await?
            } else {
                self.refs.remove(&key, upload_id).await?
            };
            match outcome {
                RemoveOutcome::Removed => {
                    removed.insert(key);
                }
                RemoveOutcome::Kept => kept += 1,
                RemoveOutcome::NotReferenced => {
                    not_referenced.insert(key);
                }
            }
        }
        Ok(TakenBack {
            removed: removed.into_iter().collect(),
            kept,
            not_referenced,
        })
    }

    /// The keys of one identity; `Err(record)` when it gets none (skipped or rejected).
    async fn plan_identity(
        &self,
        upload: &Upload<'_>,
        id: Identity,
        guess_id_absent: bool,
    ) -> io::Result<Result<Planned, Record>> {
        let mut record = upload.record(Action::Indexed);
        fill_identity(&mut record, &id);
        let layouts = &self.config.layouts;
        let set = layouts::keys_for(&id, upload.name(), layouts);
        let mut keys = self.prefixed(&set);
        // A PDB is also reachable under every name PEs' CodeView records gave it.
        let mut id_read = None;
        if is_pdb(&id) && !guess_id_absent {
            let (record, prior) = self.refs.id_read(&id.debug_id.to_string()).await?;
            for alias in &record.names {
                keys.extend(self.prefixed(&layouts::keys_for(&id, alias, layouts)));
            }
            id_read = Some((record, prior));
        }
        // A key whose reference record would outgrow S3's keys is refused here.
        let mut set = set;
        keys.retain(|key| {
            let fits = crate::refs::record_fits(key);
            if !fits {
                set.rejected.push(format!(
                    "key of {} bytes is too long for its record",
                    key.len()
                ));
            }
            fits
        });
        if keys.is_empty() {
            let (action, reason) = if set.rejected.is_empty() {
                (
                    Action::Skipped,
                    "no identifier to key it by (no build id, UUID or debug id)".to_string(),
                )
            } else {
                (Action::Rejected, set.rejected.join("; "))
            };
            record.action = Some(action);
            record.reason = Some(reason);
            return Ok(Err(record));
        }
        if !set.rejected.is_empty() {
            record.reason = Some(set.rejected.join("; "));
        }
        for sidecar in &set.sidecars {
            keys.insert(format!(
                "{}{}",
                self.config.prefix(sidecar.layout),
                sidecar.key
            ));
        }
        Ok(Ok(Planned {
            id,
            record,
            keys,
            set,
            id_read,
        }))
    }

    async fn publish_identity(
        &self,
        upload: &Upload<'_>,
        plan: Planned,
        fresh: bool,
        retry: bool,
        earlier_extras: &BTreeSet<String>,
        holding: &mut Option<String>,
    ) -> io::Result<(Record, BTreeSet<String>, Vec<Record>)> {
        let Planned {
            id,
            mut record,
            mut keys,
            set,
            id_read,
        } = plan;
        let mut sidecar_keys = BTreeSet::new();
        for sidecar in &set.sidecars {
            let prefix = self.config.prefix(sidecar.layout);
            let key = format!("{prefix}{}", sidecar.key);
            keys.remove(&key);
            let describes = format!("{prefix}{}", sidecar.describes);
            sidecar_keys.insert((key, sidecar.content.as_bytes(), describes));
        }
        // Sections are ranges of the upload, published like sidecars.
        let mut section_keys = Vec::new();
        if let Some(build_id) = id.build_id.as_deref() {
            let prefix = self.config.prefix(Layout::Debuginfod);
            for section in &id.sections {
                let key = format!(
                    "{prefix}{}",
                    layouts::debuginfod::section_key(build_id, &section.name)
                );
                if keys.remove(&key) {
                    section_keys.push((key, section));
                }
            }
        }
        let mut outcome = Outcome::default();
        // What this upload references: keys it published or found holding its content.
        let mut referenced = self
            .publish_own(upload, &keys, fresh, &mut outcome, holding)
            .await?;
        // A sidecar goes with the file it describes: where that file's key holds another
        // upload's other bytes (a conflict), so does the sidecar's — it is that upload's, and
        // describes its file. Sharing it would take a reference (a record, 6 requests) that
        // keeps it when that upload is removed: a `.meta` without its file.
        sidecar_keys.retain(|(key, _, describes)| {
            let described_conflict = outcome.conflicts.contains(describes);
            if described_conflict {
                outcome.add(key, KeyOutcome::Conflict);
            }
            !described_conflict
        });
        // Sidecars and sections: generated from the upload (bytes in memory, or ranges of
        // it), each needing no other key — published at once, taking their leases in turn
        // after the upload's own keys (the order every upload of these bytes takes them in).
        let mut turns = InTurn::chain(sidecar_keys.len() + section_keys.len()).into_iter();
        let mut derived = Vec::new();
        if self.links_sidecars() {
            // A sole local writer stores sidecars of the same bytes once (an ELF's
            // `debuginfo.meta` and `executable.meta`): one after another, in turn, each later
            // one linked to the first this upload published now (a file on a disk is an inode
            // and a block, more for the journal to write than the name).
            let turns: Vec<InTurn> = turns.by_ref().take(sidecar_keys.len()).collect();
            let sidecar_keys = &sidecar_keys;
            derived.push(Box::pin(async move {
                let mut stored: Vec<(&[u8], &str)> = Vec::new();
                let mut results = Vec::new();
                for ((key, bytes, _), turn) in sidecar_keys.iter().zip(turns) {
                    let same = stored.iter().find(|(held, _)| held == bytes);
                    let linked_to = same.map(|(_, key)| *key);
                    let result = self
                        .publish_sidecar(upload, key, bytes, linked_to, fresh, Some(turn))
                        .await?;
                    if result == KeyOutcome::Published && linked_to.is_none() {
                        stored.push((bytes, key));
                    }
                    results.push((key.clone(), Some(result), false));
                }
                Ok(results)
            })
                as Pin<Box<dyn Future<Output = io::Result<_>> + Send + '_>>);
        } else {
            for ((key, bytes, _), turn) in sidecar_keys.iter().zip(turns.by_ref()) {
                derived.push(Box::pin(async move {
                    let result = self
                        .publish_sidecar(upload, key, bytes, None, fresh, Some(turn))
                        .await?;
                    Ok(vec![(key.clone(), Some(result), false)])
                }));
            }
        }
        for ((key, section), turn) in section_keys.iter().zip(turns) {
            let decompressed = id
                .decompressed
                .iter()
                .find(|(name, _)| *name == section.name)
                .map(|(_, bytes)| bytes.as_slice());
            derived.push(Box::pin(async move {
                let result = match (section.compressed, decompressed) {
                    // Held in memory: decompressed, or small and read with the identification.
                    (_, Some(bytes)) => {
                        let etag = crate::storage::content_sha1(bytes);
                        let source = CopySource::Bytes(bytes);
                        let size = bytes.len() as u64;
                        let turn = Some(turn);
                        Some(
                            self.publish_generated(upload, key, source, etag, size, fresh, turn)
                                .await?,
                        )
                    }
                    (false, None) => {
                        self.publish_section(upload, key, section, fresh, turn)
                            .await?
                    }
                    // Not decompressed (identification alone): not served.
                    (true, None) => None,
                };
                Ok(vec![(key.clone(), result, true)])
            }));
        }
        let derived: Vec<io::Result<_>> = futures_util::stream::iter(derived)
            .buffered(KEY_PUBLISHES)
            .collect()
            .await;
        // A key is referenced where the upload's reference was added (not a conflict): the
        // upload record lists no more than the key records name it in. Sections are recorded
        // like the upload's own keys (they are keys clients request); sidecars are not.
        for (key, result, recorded) in derived
            .into_iter()
            .collect::<io::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
        {
            let Some(result) = result else {
                continue;
            };
            if recorded {
                outcome.add(&key, result);
            }
            if result != KeyOutcome::Conflict {
                referenced.insert(key);
            }
        }

        if is_pdb(&id) {
            referenced.extend(
                self.remember_pdb(
                    upload,
                    &id,
                    &keys,
                    earlier_extras,
                    &mut outcome,
                    fresh,
                    id_read,
                )
                .await?,
            );
        }
        let mut others = Vec::new();
        if id.format == Format::Pe {
            // A first attempt guesses the PE is the first of its PE and PDB to arrive.
            others = self.alias_pdbs(upload, &id, retry, fresh && !retry).await?;
        }
        // Sources for debuggers (sourcemap.rs): a source file offers itself, a debug file
        // asks for the paths its DWARF names.
        if id.kind == Kind::Source && self.config.source_joins {
            let holding = keys.iter().find(|k| referenced.contains(*k)).cloned();
            if let Some(holding) = holding {
                referenced.extend(
                    self.offer_source(upload, &id, &holding, fresh, &mut outcome)
                        .await?,
                );
            }
        }
        if let (Some(build_id), Some(sources)) = (id.build_id.as_deref(), &id.sources) {
            let (mut report, held) = self.want_sources(upload, build_id, sources, fresh).await?;
            report.rejected.clone_from(&sources.rejected);
            record.source_paths.clone_from(&sources.paths);
            record.sources = Some(report);
            others.extend(held);
        }

        record.action = Some(outcome.action());
        if record.action == Some(Action::Conflict) && record.reason.is_none() {
            record.reason = Some(
                "keys hold different content; not overwritten (use overwrite to force)".into(),
            );
        }
        let overwritten = self.refs.take_overwritten(&upload.id);
        for earlier in &overwritten {
            // Their next delivery runs in full, and says that they wait for the keys.
            self.refs.forget_answer(earlier).await?;
        }
        if !overwritten.is_empty() {
            // For audits: whose bytes this upload replaced (they get them back when it goes).
            let uploads: Vec<&str> = overwritten.iter().map(String::as_str).collect();
            outcome.notes.push(format!(
                "overwrote the bytes of {} (waiting for their keys)",
                uploads.join(", ")
            ));
        }
        if record.reason.is_none() && !outcome.notes.is_empty() {
            record.reason = Some(outcome.notes.join("; "));
        }
        record.published = outcome.published;
        record.unchanged = outcome.unchanged;
        record.conflicts = outcome.conflicts;
        Ok((record, referenced, others))
    }

    /// Whether sidecars of the same bytes are stored once, later ones linked to the first:
    /// for a sole writer of a local store (as [`Self::publish_own`] links an upload's keys:
    /// nothing removes the first meanwhile), where a link is a name, not a copy. On S3 a
    /// sidecar is an object either way (an alias would be one too, with a record to keep).
    fn links_sidecars(&self) -> bool {
        !self.store.key_copies_are_aliases()
            && !self.config.overwrite
            && self.config.lease.exclusive
    }

    /// Generated objects (Sentry `.meta`): the first writer's content stays, later uploads
    /// reference it. `linked_to`: a key this upload published these bytes under, copied
    /// (linked) from instead ([`Self::links_sidecars`]).
    async fn publish_sidecar(
        &self,
        upload: &Upload<'_>,
        key: &str,
        bytes: &[u8],
        linked_to: Option<&str>,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<KeyOutcome> {
        let etag = crate::storage::content_sha1(bytes);
        let source = linked_to.map_or(CopySource::Bytes(bytes), CopySource::Key);
        let size = bytes.len() as u64;
        self.publish_generated(upload, key, source, etag, size, fresh, turn)
            .await
    }

    /// Publishes content derived from the upload (a sidecar, a section): the first writer's
    /// content stays (the same build's derived objects are the same), later uploads reference
    /// it.
    #[allow(clippy::too_many_arguments)]
    async fn publish_generated(
        &self,
        upload: &Upload<'_>,
        key: &str,
        source: CopySource<'_>,
        etag: String,
        size: u64,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<KeyOutcome> {
        let content = Content {
            etag: &etag,
            size,
            source,
        };
        let published = self
            .refs
            .publish_in_turn(key, &upload.id, &content, OnDifferent::Adopt, fresh, turn)
            .await?;
        Ok(published.outcome)
    }

    /// Publishes one section of an ELF upload under its debuginfod `section/` key: a range of
    /// the upload, copied server-side on S3 (no byte through the function), read from a local
    /// file otherwise. `None`: not published (a range outside the upload, a `Key` source).
    /// Which sections are served (bounded) the ELF parser decided; this one is stored
    /// uncompressed.
    async fn publish_section(
        &self,
        upload: &Upload<'_>,
        key: &str,
        section: &SectionRef,
        fresh: bool,
        turn: InTurn,
    ) -> io::Result<Option<KeyOutcome>> {
        let (offset, size) = (section.offset, section.size);
        let inside = offset
            .checked_add(size)
            .is_some_and(|end| end <= upload.size);
        if !inside {
            return Ok(None);
        }
        // A range's identity: the upload's and where in it (the bytes are not read).
        let derived = format!("{}@{offset}+{size}", upload.etag);
        let read;
        let (source, etag) = match upload.source {
            CopySource::Object { .. } | CopySource::Range { .. } => {
                let Some(source) = upload.source.range(offset, size, &derived) else {
                    return Ok(None);
                };
                (source, derived.clone())
            }
            // `inside` proved offset + size <= the upload's size.
            CopySource::Bytes(bytes) => {
                let slice = &bytes[offset as usize..(offset + size) as usize];
                (
                    CopySource::Bytes(slice),
                    crate::storage::content_sha1(slice),
                )
            }
            CopySource::File(path) => {
                read = read_range(path, offset, size)?;
                (
                    CopySource::Bytes(&read),
                    crate::storage::content_sha1(&read),
                )
            }
            CopySource::Key(_) => return Ok(None),
        };
        let outcome = self
            .publish_generated(upload, key, source, etag, size, fresh, Some(turn))
            .await?;
        Ok(Some(outcome))
    }

    /// Records where this PDB's content lives (for PEs arriving later), and publishes it under
    /// the names PEs gave it since the plan was made. Returns the extra keys it references.
    /// `id_read`: the debug id's record as the plan read it (see
    /// [`Self::update_id_knowing_liveness`]), `None` where not read (guessed absent).
    #[allow(clippy::too_many_arguments)]
    async fn remember_pdb(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        planned: &BTreeSet<String>,
        earlier_extras: &BTreeSet<String>,
        outcome: &mut Outcome,
        fresh: bool,
        id_read: Option<(IdRecord, PriorRead)>,
    ) -> io::Result<BTreeSet<String>> {
        let mut extra_keys = BTreeSet::new();
        if id.debug_id.is_nil() {
            return Ok(extra_keys);
        }
        let Some(first) = outcome
            .published
            .first()
            .or(outcome.unchanged.first())
            .cloned()
        else {
            return Ok(extra_keys);
        };
        let refs = &self.refs;
        let debug_id = id.debug_id.to_string();
        // Guessed absent: created here, there was no record — no name a PE gave, no copy
        // kept; a PE arriving later finds this copy (as after the swap below).
        if id_read.is_none() {
            let created = IdRecord {
                pdb_key: Some(first.clone()),
                pdb_name: Some(upload.name().to_string()),
                names: BTreeSet::new(),
            };
            if refs.create_id(&debug_id, &created).await? {
                return Ok(extra_keys);
            }
        }
        // Keep a live copy; replace one that was unpublished. The same swap tells us every
        // name recorded so far: a PE that added its name after this swap sees `pdb_key` and
        // publishes the alias itself, one that added it before is seen here (no name lost).
        // (A guess that failed: `id_read` is still `None`, the record is read as it is now.)
        let (record, _) = self
            .update_id_knowing_liveness(&debug_id, id_read, |r, live| {
                if live {
                    false
                } else {
                    r.pdb_key = Some(first.clone());
                    r.pdb_name = Some(upload.name().to_string());
                    true
                }
            })
            .await?;
        // Another live copy kept under another name: this copy serves that name too. A PE
        // naming it finds the keys already there (nothing to alias: `alias_pdbs`), held by that
        // copy alone, and they would go with that copy's removal while this one lives — as
        // they do not where the PE arrived first (its name is then among `names`). So the
        // order of arrival decides nothing (invariant 5). Only a copy found live: a name whose
        // upload was deleted is not brought back.
        //
        // Publishing under that copy's name joins the holders of its key, after the record
        // was read. A PE recording its name reads the key's holders after its swap
        // (`alias_pdbs`); so this copy reads the record again after joining: of a PE's
        // write and this join, whichever came second is seen by the other's later read —
        // the PE aliases its name for this copy, or this copy publishes under it. Read once
        // before joining only, a name recorded in between was lost when the kept copy was
        // removed (found by the scenario "a PDB arrives under another name while the first
        // is deleted and their PE arrives" over more schedules). Read again, only the names
        // PEs gave count: a copy recorded since was not found live by this one's swap.
        let mut names: BTreeSet<String> = record
            .names
            .iter()
            .chain(&record.pdb_name)
            .cloned()
            .collect();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        // A retry publishes the names its earlier attempt found live, as that attempt
        // planned them: it may have referenced some of their keys and not others (busy, or
        // dead) before that copy went, and that copy's name is no longer read. Without them,
        // half of that name stayed (the scenario "a PDB's renamed copy is taken back while
        // the PDB and its PE arrive", replayed by `schedules_that_once_broke_an_invariant`):
        // as the attempt found the copy, all of it stays, as a serial run in which the copy
        // went after this one arrived leaves it. (`earlier_extras` holds no planned key.)
        let mut more = earlier_extras.clone();
        loop {
            for name in &names {
                if seen.insert(name.clone()) {
                    let keys = self.prefixed(&layouts::keys_for(id, name, &self.config.layouts));
                    let new = keys
                        .difference(planned)
                        .filter(|k| !extra_keys.contains(*k));
                    more.extend(new.cloned());
                }
            }
            if more.is_empty() {
                return Ok(extra_keys);
            }
            if !refs.plan_more(&upload.id, &more).await? {
                return Ok(extra_keys);
            }
            let published = self
                .publish_own(upload, &more, fresh, outcome, &mut Some(first.clone()))
                .await?;
            extra_keys.extend(published);
            more.clear();
            names = refs.id_read(&debug_id).await?.0.names;
        }
    }

    /// Publishes the upload's own bytes under `keys`, noting each outcome; returns the keys it
    /// now references (all but the conflicts). `holding`: a key this upload references that
    /// already holds its bytes (later keys may be linked or aliased to it); set to the first
    /// such key when there was none, so the next identity of the same upload (a fat Mach-O's
    /// next slice) links or aliases to it instead of storing the bytes again.
    async fn publish_own(
        &self,
        upload: &Upload<'_>,
        keys: &BTreeSet<String>,
        fresh: bool,
        outcome: &mut Outcome,
        holding: &mut Option<String>,
    ) -> io::Result<BTreeSet<String>> {
        let mut referenced = BTreeSet::new();
        // Once one key holds this content, later keys are copied from that key: a hard link
        // in a local store, an alias on S3 in redirect mode (one stored copy, many names).
        // Locally only for a sole writer (the CLI holds the store's writer lock) and without
        // overwrite: then nothing changes or removes the first key meanwhile. With concurrent
        // writers a removal of this very upload may take the key back between the two copies,
        // so each key is copied from the upload itself. An S3 alias copied from a key taken
        // back meanwhile fails (the source is gone) and the message is retried.
        let aliases = self.store.key_copies_are_aliases() && !self.config.overwrite;
        let linkable = aliases
            || (matches!(upload.source, CopySource::File(_) | CopySource::Bytes(_))
                && !self.config.overwrite
                && self.config.lease.exclusive);
        let mut first: Option<String> = holding.clone();
        // Until one key holds the bytes, keys go one at a time (the next is copied from the
        // first that does). After that each key's publishing depends on no other's (its own
        // record, its own object), so a few go at once: on S3 a fresh key is two requests, and
        // an ELF has 6 keys. Every one is run to its end before an error is returned (none is
        // dropped halfway), and their outcomes are noted in key order.
        let mut remaining = keys.iter();
        while first.is_none() {
            let Some(key) = remaining.next() else {
                break;
            };
            let result = self
                .publish_key(upload, key, linkable, None, fresh, None)
                .await?;
            self.note_published(
                upload,
                key,
                result,
                aliases,
                fresh,
                outcome,
                &mut referenced,
                &mut first,
            )
            .await?;
        }
        let source = first.clone();
        let turns = InTurn::chain(remaining.len());
        let publishes: Vec<_> = remaining
            .clone()
            .zip(turns)
            .map(|(key, turn)| {
                self.publish_key(upload, key, linkable, source.as_deref(), fresh, Some(turn))
            })
            .collect();
        let published: Vec<io::Result<Publication>> = futures_util::stream::iter(publishes)
            .buffered(KEY_PUBLISHES)
            .collect()
            .await;
        for (key, result) in remaining.zip(published) {
            self.note_published(
                upload,
                key,
                result?,
                aliases,
                fresh,
                outcome,
                &mut referenced,
                &mut first,
            )
            .await?;
        }
        if holding.is_none() {
            *holding = first;
        }
        Ok(referenced)
    }

    /// Publishes the upload's bytes under one key: copied from `first` (a key already holding
    /// them) where `linkable`, else from the upload itself.
    #[allow(clippy::too_many_arguments)]
    async fn publish_key(
        &self,
        upload: &Upload<'_>,
        key: &str,
        linkable: bool,
        first: Option<&str>,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let mut content = upload.content();
        if let (true, Some(first)) = (linkable, first) {
            content.source = CopySource::Key(first);
        }
        let on_different = OnDifferent::overwrite(self.config.overwrite);
        let mut published = self
            .refs
            .publish_in_turn(key, &upload.id, &content, on_different, fresh, turn)
            .await?;
        // Another upload's bytes: wait for the key, and look again (refs.rs, invariant 8) —
        // freed meanwhile, its removal may have listed its waiters before we were one.
        let mut retries = 0;
        while published.outcome == KeyOutcome::Conflict {
            match self.refs.wait_for(key, &upload.id).await? {
                Some(found) if found.etag != content.etag || found.size != content.size => break,
                _ if retries == CONFLICT_RETRIES => {
                    return Err(busy(&format!(
                        "{key}: freed and taken again, {retries} times"
                    )))
                }
                _ => retries += 1,
            }
            published = self
                .refs
                .publish_in_turn(key, &upload.id, &content, on_different, fresh, None)
                .await?;
        }
        Ok(published)
    }

    /// Notes one key's outcome; a key now referenced is added to `referenced`, with the
    /// target of an alias found in place (invariant 6, refs.rs), and becomes `first` when
    /// no key held the bytes yet.
    #[allow(clippy::too_many_arguments)]
    async fn note_published(
        &self,
        upload: &Upload<'_>,
        key: &str,
        published: Publication,
        aliases: bool,
        fresh: bool,
        outcome: &mut Outcome,
        referenced: &mut BTreeSet<String>,
        first: &mut Option<String>,
    ) -> io::Result<()> {
        outcome.add(key, published.outcome);
        if published.outcome == KeyOutcome::Conflict {
            return Ok(());
        }
        referenced.insert(key.to_string());
        // Invariant 6 (refs.rs): an alias found in place is held with its target — as the
        // publication left the key's record (its record is not read again).
        let target = match (aliases, published.outcome) {
            (true, KeyOutcome::Unchanged) => published.alias_of,
            _ => None,
        };
        if let Some(target) = target.filter(|t| !referenced.contains(t)) {
            if !self.hold_target(upload, &target, fresh, outcome).await? {
                return Ok(());
            }
            referenced.insert(target.clone());
            first.get_or_insert(target);
        }
        first.get_or_insert_with(|| key.to_string());
        Ok(())
    }

    /// References the target of an alias this upload found in place, publishing it from the
    /// upload's own bytes if it is gone (invariant 6). `false`: not held (the upload is being
    /// removed, or the target holds other content).
    async fn hold_target(
        &self,
        upload: &Upload<'_>,
        target: &str,
        fresh: bool,
        outcome: &mut Outcome,
    ) -> io::Result<bool> {
        let keys: BTreeSet<String> = [target.to_string()].into();
        if !self.refs.plan_more(&upload.id, &keys).await? {
            return Ok(false);
        }
        let result = self
            .refs
            .publish(
                target,
                &upload.id,
                &upload.content(),
                OnDifferent::Conflict,
                fresh,
            )
            .await?;
        outcome.add(target, result);
        Ok(result != KeyOutcome::Conflict)
    }

    /// For each PDB a PE references: remember the CodeView name, and if that PDB is already
    /// published, make it reachable under the exact name the PE uses. The alias copies are
    /// held by the PDB's uploads, whose bytes they serve (refs.rs, invariant 5). `retry`: an
    /// earlier attempt of this PE began and did not finish. `guess`: the debug id's record
    /// is guessed absent (a first attempt: the PE first of its PE and PDB, or alone).
    async fn alias_pdbs(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        retry: bool,
        guess: bool,
    ) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        for (pdb, name) in layouts::companions(id, upload.name()) {
            if name.is_empty() || layouts::Name::new(&name).is_err() {
                continue;
            }
            let debug_id = pdb.debug_id.to_string();
            // Created with the name: there was no record, so no PDB copy to alias; a PDB
            // arriving later publishes under the name. Else the record is read as usual.
            if guess {
                let created = IdRecord {
                    names: BTreeSet::from([name.clone()]),
                    ..IdRecord::default()
                };
                if self.refs.create_id(&debug_id, &created).await? {
                    continue;
                }
            }
            let (read, prior) = self.refs.id_read(&debug_id).await?;
            // The name the recorded copy was uploaded under: its keys are the ones this PE
            // would alias, published by the PDB itself. The name is recorded, on condition
            // that the record still says so when swapped (else the whole way below, from a
            // read of its own: a copy under another name recorded meanwhile may not have
            // seen this name).
            let own_name = |r: &IdRecord| r.pdb_key.is_some() && r.pdb_name.as_ref() == Some(&name);
            let earlier = if own_name(&read) {
                let mut other = false;
                self.refs
                    .update_id_on(&debug_id, prior, |r| {
                        other = !own_name(r);
                        !other && r.names.insert(name.clone())
                    })
                    .await?;
                if !other {
                    continue;
                }
                None
            } else {
                Some((read, prior))
            };
            // Record the name; forget a PDB copy that was unpublished since (it is replaced
            // when the PDB is indexed again).
            let (record, live) = self
                .update_id_knowing_liveness(&debug_id, earlier, |r, live| {
                    let mut changed = r.names.insert(name.clone());
                    if r.pdb_key.is_some() && !live {
                        r.pdb_key = None;
                        r.pdb_name = None;
                        changed = true;
                    }
                    changed
                })
                .await?;
            // Live as the swap was decided: `pdb_key` is the key that was asked. Its holders
            // are read again now, after the name was recorded: a copy under another name
            // that joined them since read the record before this swap (`remember_pdb`).
            let (Some(pdb_key), Some(_)) = (record.pdb_key, live) else {
                continue;
            };
            let Some(pdb_record) = self.refs.is_live(&pdb_key).await? else {
                continue;
            };
            let content = Content {
                etag: &pdb_record.etag,
                size: pdb_record.size,
                source: CopySource::Key(&pdb_key),
            };
            // The copies are the PDB uploads' keys (invariant 5), so they are recorded as
            // theirs, whichever of PE and PDB came first. An alias holding other content is
            // not this PE's conflict: the PE itself published fine.
            // Per holder: the keys published now, and those it held already.
            let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
            // What each holder already references (finalized): an alias it holds is done, and
            // a re-index of the PE finds nothing to do. It is reported again: unchanged, or, by
            // a retried PE, published when its bytes were first written for that holder (the
            // earlier attempt may have written it and failed before its records were: the
            // manifest is at-least-once, as for an upload's own keys).
            // Their upload records, read once: for the keys, and for the records reported.
            let mut holders: BTreeMap<&str, Option<UploadRecord>> = BTreeMap::new();
            for holder in &pdb_record.refs {
                holders.insert(holder, self.refs.upload(holder).await?);
            }
            let held: BTreeMap<&str, &BTreeSet<String>> = holders
                .iter()
                .filter_map(|(holder, record)| Some((*holder, &record.as_ref()?.keys)))
                .collect();
            for key in self.prefixed(&layouts::keys_for(&pdb, &name, &self.config.layouts)) {
                if key == pdb_key {
                    continue;
                }
                for holder in &pdb_record.refs {
                    let outcome = if held
                        .get(holder.as_str())
                        .is_some_and(|keys| keys.contains(&key))
                    {
                        let first_written_for_holder =
                            retry && self.refs.key(&key).await?.is_some_and(|r| &r.by == holder);
                        Some(if first_written_for_holder {
                            KeyOutcome::Published
                        } else {
                            KeyOutcome::Unchanged
                        })
                    } else {
                        self.hold_for(holder, &key, &content, None).await?
                    };
                    if let Some(outcome @ (KeyOutcome::Published | KeyOutcome::Unchanged)) = outcome
                    {
                        outcomes
                            .entry(holder.clone())
                            .or_default()
                            .add(&key, outcome);
                    }
                }
            }
            for (holder, outcome) in outcomes {
                if let Some(Some(holder_upload)) = holders.get(holder.as_str()) {
                    let mut record = upload_record_of(holder_upload, outcome.action());
                    fill_identity(&mut record, &pdb);
                    record.published = outcome.published;
                    record.unchanged = outcome.unchanged;
                    record.reason = Some(format!(
                        "published under {name:?}, the name {} gives this PDB",
                        upload.id
                    ));
                    records.push(record);
                }
            }
        }
        Ok(records)
    }

    /// Updates a debug id's record with `f`, told whether its current `pdb_key` is live. The
    /// liveness is asked outside the swap (a swap does no I/O), and asked again when the key
    /// changed in between. Returns the record and, where its `pdb_key` is live, that key's
    /// record (so the caller does not ask again). The swap is made on the version read first.
    ///
    /// `earlier`: the record as read before the caller did what this update follows (a PDB's
    /// plan read it before the PDB was published), saving the read where `f` changes it: the
    /// swap on that read's version fails if anything changed since. Leaving the record as it
    /// is cannot be decided on it — a `pdb_key` live then may be unpublished by now, and the
    /// names recorded since unseen — so a keep reads the record again.
    async fn update_id_knowing_liveness(
        &self,
        debug_id: &str,
        mut earlier: Option<(IdRecord, PriorRead)>,
        f: impl Fn(&mut IdRecord, bool) -> bool,
    ) -> io::Result<(IdRecord, Option<KeyRecord>)> {
        let mut known: Option<(String, Option<KeyRecord>)> = None;
        loop {
            let from_earlier = earlier.is_some();
            let (read, prior) = match earlier.take() {
                Some(read) => read,
                None => self.refs.id_read(debug_id).await?,
            };
            let current = read.pdb_key.clone();
            let live = match &current {
                None => None,
                Some(key) => match &known {
                    Some((k, live)) if k == key => live.clone(),
                    _ => {
                        let live = self.refs.is_live(key).await?;
                        known = Some((key.clone(), live.clone()));
                        live
                    }
                },
            };
            if from_earlier && !f(&mut read.clone(), live.is_some()) {
                continue;
            }
            let mut stale = false;
            let record = self
                .refs
                .update_id_on(debug_id, prior, |r| {
                    stale = r.pdb_key != current;
                    !stale && f(r, live.is_some())
                })
                .await?;
            if !stale {
                return Ok((record, live));
            }
        }
    }

    /// Publishes `key` on behalf of another upload (invariants 4 and 5): listed in its record
    /// first, referenced, then confirmed, or taken back if that upload is being removed.
    /// `removal`: the upload whose removal hands the key on ([`crate::refs::Lease::acting`]).
    async fn hold_for(
        &self,
        holder: &str,
        key: &str,
        content: &Content<'_>,
        removal: Option<&str>,
    ) -> io::Result<Option<KeyOutcome>> {
        let keys: BTreeSet<String> = [key.to_string()].into();
        if !self.refs.plan_more(holder, &keys).await? {
            return Ok(None);
        }
        let published = match self.refs.publish_for(key, holder, removal, content).await {
            Ok(published) => published,
            // The source copy was unpublished meanwhile: so is its upload, no alias needed.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let result = published.outcome;
        if result == KeyOutcome::Conflict {
            return Ok(Some(result));
        }
        let held = self.refs.take_held(holder);
        if let (CopySource::Key(source), KeyOutcome::Published) = (content.source, result) {
            // Copied from the holder's copy: an overwrite may have replaced its bytes before
            // the copy read them (an overwrite takes the holder's reference off the key
            // before it writes, refs.rs invariant 8), leaving the overwriter's bytes here
            // under the holder's reference. Seen now by the source no longer naming the
            // holder with these bytes: this key is taken back, as where the source was
            // unpublished; the holder gets it back with its copy (its hand-back re-index).
            let still = self.refs.key(source).await?;
            let holds = |r: &KeyRecord| r.refs.contains(holder) && r.etag == content.etag;
            if !still.as_ref().is_some_and(holds) {
                self.refs.release_created(&held).await?;
                self.refs.remove(key, holder).await?;
                return Ok(None);
            }
        }
        if !self
            .refs
            .finalize(holder, &keys, Run::Partial, None, &held)
            .await?
        {
            self.refs.release_created(&held).await?;
            self.refs.remove(key, holder).await?;
            return Ok(None);
        }
        // Listed: released (refs.rs, invariant 1).
        // An alias found in place is held with its target (invariant 6), as an upload's own
        // keys are (`note_published`): it may redirect to a key of another upload of the same
        // bytes, which that upload's removal would delete under it. (A PE aliasing a PDB for
        // the copy it recorded found the copy under another name's alias there, and kept
        // the alias when that copy was taken back: S3 redirect aliases, scenario "a PDB's
        // renamed copy is taken back while the PDB and its PE arrive", seed 2000.)
        let source = match content.source {
            CopySource::Key(source) => Some(source),
            _ => None,
        };
        if let Some(target) = published.alias_of.filter(|t| Some(t.as_str()) != source) {
            // Not held: the holder is being removed (or its source copy is gone with it);
            // its removal takes the alias back too.
            let target = Box::pin(self.hold_for(holder, &target, content, removal)).await?;
            if target.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(result))
    }

    /// Deletes one upload: marks it removing, takes back its references (unpublishing keys
    /// nobody else needs), hands the keys it freed to the uploads waiting for them, then
    /// forgets it. Re-running it after a crash finishes the job. A caller writing the
    /// manifest runs the two halves around it instead ([`Self::begin_unindex`],
    /// [`Self::end_removal`]).
    pub async fn unindex(&self, upload_id: &str) -> io::Result<Option<Record>> {
        let Some(removal) = self.begin_unindex(upload_id).await? else {
            return Ok(None);
        };
        self.end_removal(&removal).await?;
        Ok(Some(removal.record))
    }

    /// A removal run to its end as a deletion's is: its record in the manifest (`note` before
    /// its reason), then the keys it freed handed over (nothing where no such upload is).
    async fn removal_to_its_end(&self, upload_id: &str, note: Option<&str>) -> io::Result<()> {
        if let Some(mut removal) = self.begin_unindex(upload_id).await? {
            if let Some(note) = note {
                let reason = removal.record.reason.take().unwrap_or_default();
                removal.record.reason = Some(format!("{note}; {reason}"));
            }
            self.write_manifest(std::slice::from_ref(&removal.record))
                .await?;
            self.end_removal(&removal).await?;
        }
        Ok(())
    }

    /// [`Self::unindex`] up to its hand-over: the upload marked removing and its references
    /// taken back, its record kept (`removing`, noting the keys unpublished) until
    /// [`Self::end_removal`], called once the returned record is in the manifest. `None`: no
    /// such upload.
    pub async fn begin_unindex(&self, upload_id: &str) -> io::Result<Option<Removal>> {
        let Some(upload) = self.refs.begin_removal(upload_id).await? else {
            return Ok(None);
        };
        let removal = self.take_back_all(upload_id, upload, Action::Unpublished, None);
        Ok(Some(removal.await?))
    }

    /// Takes back every reference of `upload`, marked removing, and says so in its record:
    /// `action`, `why` (if given) and what came of its keys.
    async fn take_back_all(
        &self,
        upload_id: &str,
        upload: UploadRecord,
        action: Action,
        why: Option<String>,
    ) -> io::Result<Removal> {
        let TakenBack {
            removed,
            kept,
            not_referenced,
        } = self
            .take_back_references(upload_id, &upload.all_keys(), Some(&upload))
            .await?;
        let mut record = upload_record_of(&upload, action);
        let keys = format!(
            "{} keys removed, {kept} still referenced by other uploads",
            removed.len()
        );
        record.reason = Some(match why {
            Some(why) => format!("{why}; {keys}"),
            None => keys,
        });
        record.removed = removed;
        Ok(Removal {
            record,
            upload,
            not_referenced,
        })
    }

    /// Removes one upload if its retention has passed at `now` (by its recorded expiry, or
    /// counted under `policy` from its indexing time), through the reference-counted delete:
    /// keys other uploads still reference stay. The decision is taken on the record version
    /// the removal mark is swapped into, so a promotion swapped in first wins
    /// ([`RefStore::begin_removal_if`]); a removal found already begun (a run that died) is
    /// finished. Call [`Self::end_removal`] once the returned record is in the manifest.
    pub async fn expire(
        &self,
        upload_id: &str,
        now: SystemTime,
        policy: Option<&RetentionPolicy>,
    ) -> io::Result<Option<Removal>> {
        let expired = |r: &UploadRecord| is_expired(&r.meta, &r.time, now, policy);
        let Some(upload) = self.refs.begin_removal_if(upload_id, expired).await? else {
            return Ok(None);
        };
        let why = match (&upload.meta.channel, &upload.meta.expires) {
            _ if !expired(&upload) => "a removal in progress was finished".to_string(),
            (Some(channel), Some(at)) => format!("retention of channel {channel} ended at {at}"),
            (channel, _) => format!(
                "retention of channel {} ended under the given policy",
                channel.as_deref().unwrap_or("(none)")
            ),
        };
        let removal = self.take_back_all(upload_id, upload, Action::Expired, Some(why));
        Ok(Some(removal.await?))
    }

    /// Hands the keys a removal freed to the uploads waiting for them (refs.rs, invariant
    /// 8), then forgets the removed upload: after its record reached the manifest, which so
    /// says the keys were unpublished before the re-indexes say they are published again.
    pub async fn end_removal(&self, removal: &Removal) -> io::Result<()> {
        let upload = &removal.upload;
        let not_referenced = &removal.not_referenced;
        self.finish_removal(
            &upload.upload,
            &removal.record.removed,
            Some(upload),
            None,
            not_referenced,
        )
        .await
    }

    /// The end of every removal, once its record is in the manifest: the keys it `freed`
    /// handed over, a source upload's offer withdrawn (its join record: the `record`'s, else
    /// `offered_in`, what a take-back's attempt planned) and its paths served by the offers
    /// matching them now, then the removed upload forgotten (if it still has a `record`) —
    /// its own waits first (refs.rs, invariant 8; a marker is where a key it plans and does
    /// not reference held other bytes, or a key it lists and an overwrite took: among the
    /// keys its take-back found `not_referenced`), then its record. A marker a crash in
    /// between leaves, or a late attempt of the upload writes, is found stale by the key
    /// holder's removal, as any wait of an upload gone.
    async fn finish_removal(
        &self,
        upload_id: &str,
        freed: &[String],
        record: Option<&UploadRecord>,
        offered_in: Option<&str>,
        not_referenced: &BTreeSet<String>,
    ) -> io::Result<()> {
        self.hand_over(upload_id, freed).await?;
        let offered_in = record.and_then(|r| r.offered_in.as_deref()).or(offered_in);
        if let Some(file) = offered_in {
            self.withdraw_offer(upload_id, file, freed).await?;
        }
        let Some(record) = record else {
            return Ok(());
        };
        let mut waits = record.unreferenced();
        waits.extend(not_referenced.iter().cloned());
        self.stop_waiting(upload_id, &waits).await?;
        self.refs.end_removal(record).await
    }

    /// Forgets the waits of `upload` for `keys` (refs.rs, invariant 8). A `.meta` sidecar
    /// never waits (beside a conflicting file it is a conflict too, and goes with that file,
    /// `publish_own`): it has no marker, and asking one to go costs a request.
    async fn stop_waiting(&self, upload: &str, keys: &BTreeSet<String>) -> io::Result<()> {
        let waits = keys
            .iter()
            .filter(|key| layouts::unified::described_by_sidecar(key).is_none());
        for key in waits {
            let waiting = Waiting {
                key: key.clone(),
                upload: upload.to_string(),
            };
            self.refs.stop_waiting(&waiting).await?;
        }
        Ok(())
    }

    /// Moves an upload to `channel`, its expiry recomputed under `policy` from its indexing
    /// time. `None`: no such upload, or it is being removed (an expiry came first).
    pub async fn promote(
        &self,
        upload_id: &str,
        channel: &str,
        policy: &RetentionPolicy,
    ) -> io::Result<Option<Record>> {
        check_channel(channel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut before = None;
        let updated = self
            .refs
            .update_meta(upload_id, |r| {
                before = Some(r.meta.clone());
                let moved = UploadMeta {
                    channel: Some(channel.to_string()),
                    ..r.meta.clone()
                };
                policy.stamp(&moved, &r.time)
            })
            .await?;
        let Some(upload) = updated else {
            return Ok(None);
        };
        let old = before.unwrap_or_default();
        let mut record = upload_record_of(&upload, Action::Promoted);
        record.reason = Some(format!(
            "channel {} -> {channel}; expires {} (was {})",
            old.channel.as_deref().unwrap_or("(none)"),
            upload.meta.expires.as_deref().unwrap_or("never"),
            old.expires.as_deref().unwrap_or("never"),
        ));
        Ok(Some(record))
    }

    /// Promotes the uploads of `build` (of `product`, when given) among `uploads` to
    /// `channel`: `symdex promote` over every record, the sweeper over a page of them.
    pub async fn promote_build(
        &self,
        uploads: Vec<UploadRecord>,
        build: &str,
        product: Option<&str>,
        channel: &str,
        policy: &RetentionPolicy,
    ) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        for upload in uploads {
            let wanted = upload.meta.build.as_deref() == Some(build)
                && product.is_none_or(|p| upload.meta.product.as_deref() == Some(p));
            if wanted {
                records.extend(self.promote(&upload.upload, channel, policy).await?);
            }
        }
        Ok(records)
    }

    /// What an expiry at `now` would remove, without changing anything: the expired uploads,
    /// and the keys no unexpired upload references (with their sizes).
    pub async fn plan_expiry(
        &self,
        now: SystemTime,
        policy: Option<&RetentionPolicy>,
    ) -> io::Result<ExpiryPlan> {
        let uploads: Vec<UploadRecord> = self
            .refs
            .uploads()
            .await?
            .into_iter()
            .filter(|r| is_due(r, now, policy))
            .collect();
        let going: BTreeSet<&str> = uploads.iter().map(|u| u.upload.as_str()).collect();
        let mut freed = BTreeMap::new();
        let keys: BTreeSet<String> = uploads.iter().flat_map(|u| u.all_keys()).collect();
        for key in keys {
            if let Some(record) = self.refs.key(&key).await? {
                if record.refs.iter().all(|r| going.contains(r.as_str())) {
                    freed.insert(key, record.size);
                }
            }
        }
        Ok(ExpiryPlan { uploads, freed })
    }

    /// Writes `records` as one manifest object (records or references to them: a re-index's
    /// thousands are written from where they are, not copied).
    pub async fn write_manifest<R: std::borrow::Borrow<Record>>(
        &self,
        records: &[R],
    ) -> io::Result<Option<String>> {
        crate::manifest::write(
            self.store,
            &self.config.manifest_prefix,
            records,
            self.config.gzip_manifest,
        )
        .await
    }
}

/// Reports the keys of an indexed upload's record found `unchanged` that its finished runs did
/// not reference (`listed` leaves them out: conflicts then) as `published`. Holding its bytes
/// now, they were published by a run of it that died before its records reached the manifest
/// — a hand-over's re-index (refs.rs, invariant 8) — whose retry finds them its own: reported
/// again (the manifest is at-least-once), as a fresh upload's unfinished attempt's keys are.
fn report_unlisted_as_published(record: &mut Record, listed: &BTreeSet<String>) {
    let (again, unchanged): (Vec<String>, Vec<String>) = std::mem::take(&mut record.unchanged)
        .into_iter()
        .partition(|key| !listed.contains(key));
    record.unchanged = unchanged;
    if again.is_empty() {
        return;
    }
    record.published.extend(again);
    record.published.sort();
    if record.action == Some(Action::Unchanged) {
        record.action = Some(Action::Indexed);
    }
}

/// An upload removed but not yet forgotten: its record stays (`removing`, listing the keys it
/// unpublished) until [`Indexer::end_removal`], called once `record` is in the manifest, so a
/// run that dies in between reports the same keys again (the manifest is at-least-once).
#[derive(Debug)]
pub struct Removal {
    pub record: Record,
    upload: UploadRecord,
    /// Keys it listed or planned and did not reference ([`TakenBack`]).
    not_referenced: BTreeSet<String>,
}

/// What taking an upload's references back came to.
struct TakenBack {
    /// Keys unpublished (an earlier attempt's included).
    removed: Vec<String>,
    /// Keys other uploads still reference.
    kept: usize,
    /// Keys the upload did not reference (a conflict, or bytes an overwrite replaced): where
    /// it may wait for the key (refs.rs, invariant 8).
    not_referenced: BTreeSet<String>,
}

/// The outcome of an expiry computed ahead (`--dry-run`, and the bytes an expiry frees).
#[derive(Debug, Default)]
pub struct ExpiryPlan {
    pub uploads: Vec<UploadRecord>,
    /// Keys that would be unpublished, and their sizes.
    pub freed: BTreeMap<String, u64>,
}

impl ExpiryPlan {
    pub fn bytes_freed(&self) -> u64 {
        self.freed.values().sum()
    }
}

/// Where an input may be indexed beside others (`symdex index --jobs`): inputs of different
/// routes touch disjoint keys and change no shared record in a way that depends on their
/// order, so indexing them at once ends as indexing them one after another; inputs of one
/// route are indexed in order. `None`: the input must be indexed alone (after everything
/// before it, before anything after it).
///
/// A route is a debug id, of the one identity of an ELF file with a build id or a thin
/// Mach-O file: every key such an identity has names its build id or UUID (the debuginfod,
/// unified, gdb/lldb and SSQP keys; its sections, sidecars and sources sit under them), which
/// the debug id is made from — the unit test below holds that to the layouts. Its other
/// shared records are an upload record of its own, its source-map wants (made later, in
/// input order: `Indexer::register_source_map_changes`) and a source upload's record when it
/// publishes that upload's source under its own build id (a compare-and-swap that adds a
/// key, in any order). Everything else — PE and PDB (joined through `_symdex/ids`), sources
/// (offers), archives, bundles, fat Mach-O files, inputs not identified — goes alone.
pub fn route_of(ids: &[Identity], options: &IdentifyOptions) -> Option<String> {
    let [id] = ids else { return None };
    let routed = match id.format {
        Format::Elf => id.build_id.is_some(),
        Format::Macho => id.uuid.is_some(),
        _ => false,
    };
    (routed && !options.as_source && id.kind != Kind::Source).then(|| id.debug_id.to_string())
}

/// Whether an expiry at `now` acts on this upload: its retention has passed, or a removal of
/// it was begun and not finished (a run that died; the expiry finishes it).
pub fn is_due(upload: &UploadRecord, now: SystemTime, policy: Option<&RetentionPolicy>) -> bool {
    upload.state == UploadState::Removing || is_expired(&upload.meta, &upload.time, now, policy)
}

/// `size` bytes at `offset` of a local file.
fn read_range(path: &std::path::Path, offset: u64, size: u64) -> io::Result<Vec<u8>> {
    let reader = crate::reader::FileReader::open(path)?;
    let len = usize::try_from(size).map_err(|_| io::Error::other("section too large"))?;
    crate::reader::read_vec(&reader, offset, len)
}

/// A manifest record about an upload known only from its upload record.
fn upload_record_of(upload: &UploadRecord, action: Action) -> Record {
    let (bucket, key) = match upload
        .source
        .strip_prefix("s3://")
        .and_then(|s| s.split_once('/'))
    {
        Some((bucket, key)) => (Some(bucket.to_string()), key.to_string()),
        None => (None, upload.source.clone()),
    };
    let ingest_etag = upload
        .ingest_etag
        .clone()
        .unwrap_or_else(|| upload.etag.clone());
    // Records written before the version was kept: the upload id says it
    // (`s3:<bucket>/<key>@<version id, or the ETag unversioned>[!/<entry>]`).
    let ingest_version = upload.ingest_version.clone().or_else(|| {
        let bucket = bucket.as_deref()?;
        let rest = upload.upload.strip_prefix(&format!("s3:{bucket}/{key}@"))?;
        let version = rest.split("!/").next()?;
        (version != ingest_etag && version != upload.etag).then(|| version.to_string())
    });
    let mut record = Record {
        ingest_etag: Some(ingest_etag),
        ingest_size: upload.entry.is_none().then_some(upload.size),
        ingest_version,
        entry: upload.entry.clone(),
        meta: upload.meta.clone(),
        ..Record::about(action, upload.upload.clone(), bucket, key)
    };
    if let Some(entry) = &upload.entry {
        record.name = Some(file_name_of(entry).to_string());
    }
    record
}

/// The own keys of each record `indexed_as` keeps, by name, from their positions in the
/// upload record's `keys`. `None` for positions this code does not write (out of range, or
/// not one list per record).
fn own_keys_of(indexed_as: &IndexedAs, keys: &BTreeSet<String>) -> Option<Vec<Vec<String>>> {
    if indexed_as.unchanged_at.len() != indexed_as.records.len() {
        return None;
    }
    let keys: Vec<&String> = keys.iter().collect();
    indexed_as
        .unchanged_at
        .iter()
        .map(|at| {
            at.iter()
                .map(|&i| keys.get(i as usize).map(|k| (*k).clone()))
                .collect()
        })
        .collect()
}

/// `record` with what `kept` says of one identity (format, ids, names, reason) and `keys`
/// as its unchanged keys: both ways between a run's records and the trimmed ones an upload
/// record keeps (`IndexedAs`). A name `kept` lacks stays `record`'s.
fn with_decision_of(record: Record, kept: &Record, keys: Vec<String>) -> Record {
    Record {
        reason: kept.reason.clone(),
        format: kept.format.clone(),
        kind: kept.kind.clone(),
        arch: kept.arch.clone(),
        debug_id: kept.debug_id.clone(),
        code_id: kept.code_id.clone(),
        name: kept.name.clone().or(record.name.clone()),
        code_file: kept.code_file.clone(),
        debug_file: kept.debug_file.clone(),
        unchanged: keys,
        conflicts: kept.conflicts.clone(),
        ..record
    }
}

fn is_pdb(id: &Identity) -> bool {
    matches!(id.format, Format::Pdb | Format::PortablePdb) && !id.debug_id.is_nil()
}

fn fill_identity(record: &mut Record, id: &Identity) {
    record.format = Some(id.format.as_str().to_string());
    record.kind = Some(id.kind.as_str().to_string());
    record.arch = Some(id.arch.clone());
    record.debug_id = Some(id.debug_id.to_string());
    record.code_id = id.code_id.as_ref().map(|c| c.as_str().to_string());
    record.code_file = id.code_file.clone();
    record.debug_file = id.debug_file.clone();
}

/// Counts of a run, for the one-line summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub indexed: usize,
    pub unchanged: usize,
    pub skipped: usize,
    pub rejected: usize,
    pub conflicts: usize,
    pub unpublished: usize,
    pub expired: usize,
    pub promoted: usize,
    pub keys_published: usize,
}

impl Summary {
    pub fn add(&mut self, record: &Record) {
        match record.action {
            Some(Action::Indexed) => self.indexed += 1,
            Some(Action::Unchanged) => self.unchanged += 1,
            Some(Action::Skipped) => self.skipped += 1,
            Some(Action::Rejected) => self.rejected += 1,
            Some(Action::Conflict) => self.conflicts += 1,
            Some(Action::Unpublished) => self.unpublished += 1,
            Some(Action::Expired) => self.expired += 1,
            Some(Action::Promoted) => self.promoted += 1,
            None => {}
        }
        self.keys_published += record.published.len();
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} published ({} keys), {} unchanged, {} skipped, {} rejected, {} conflicts",
            self.indexed,
            self.keys_published,
            self.unchanged,
            self.skipped,
            self.rejected,
            self.conflicts
        )?;
        if self.unpublished > 0 {
            write!(f, ", {} unpublished", self.unpublished)?;
        }
        if self.expired > 0 {
            write!(f, ", {} expired", self.expired)?;
        }
        if self.promoted > 0 {
            write!(f, ", {} promoted", self.promoted)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::reader::MemReader;
    use crate::storage::LocalStore;
    use crate::testing::failing::{dying_at_nth, failing_nth};
    use crate::testing::scenarios::{config, Artifact, Artifacts, FromArtifacts};

    /// [`config`], its leases those of a sole writer (`exclusive`) or of concurrent ones.
    fn config_with_exclusive(exclusive: bool) -> Config {
        let mut config = config();
        config.lease.exclusive = exclusive;
        config
    }

    /// The store's audit finds nothing wrong.
    async fn assert_audit_clean(store: &LocalStore) {
        let audit = crate::audit::audit(store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{:?}", audit.problems);
    }

    async fn index_and_finalize(
        store: &LocalStore,
        config: Config,
        artifact: &Artifact,
    ) -> Indexed {
        let indexer = Indexer::new(store, config);
        let indexed = indexer
            .index(&artifact.upload(), &MemReader(&artifact.bytes))
            .await
            .unwrap();
        indexer.finalize(&indexed, true).await.unwrap();
        indexed
    }

    /// The keys an upload's record lists (it references).
    async fn listed_keys(store: &LocalStore, upload: &str) -> BTreeSet<String> {
        let record = RefStore::new(store).upload(upload).await.unwrap();
        record.expect(upload).keys
    }

    fn keys_of(records: &[Record]) -> BTreeSet<String> {
        records
            .iter()
            .flat_map(|r| r.published.iter().chain(&r.unchanged))
            .cloned()
            .collect()
    }

    /// The scenarios' debug file (its sources arrive with it, are deleted while it arrives)
    /// names enough join records in its build for a first index to list them first: the
    /// interleavings run a listing that another upload's record creation may overtake.
    #[test]
    fn the_scenarios_debug_file_lists_its_builds_join_records() {
        let artifacts = Artifacts::new();
        let scope = artifacts.debug_with_sources.build.unwrap_or_default();
        assert_eq!(Some(scope), artifacts.source.build);
        let files: BTreeSet<String> = crate::testing::scenarios::SOURCES_NAMED
            .iter()
            .map(|path| sourcemap::record_file(scope, sourcemap::base_name(path)))
            .collect();
        assert!(
            !scope.is_empty() && files.len() >= sources::LIST_JOIN_RECORDS,
            "{files:?}"
        );
        // The other build's debug file differs by its build id alone.
        let other = &artifacts.debug_other_build;
        assert_eq!(other.build, Some(scope));
        let differing: Vec<usize> = (0..other.bytes.len())
            .filter(|&i| other.bytes[i] != artifacts.debug_with_sources.bytes[i])
            .collect();
        assert_eq!(differing.len(), 20, "{differing:?}");
    }

    #[tokio::test]
    async fn an_indexer_listing_keys_at_the_finalize_holds_its_leases_until_then() {
        let artifacts = Artifacts::new();
        let (first, second) = (&artifacts.elf_a, artifacts.elf_a.named("copy"));
        for at_finalize in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            // Keys with records and `create` leases: where objects name their owners, a
            // fresh key has neither (refs.rs, invariant 7; the test after this one).
            let store = LocalStore::open(dir.path()).unwrap();
            let indexer = Indexer::new(&store, config()).lists_keys_at_finalize(at_finalize);
            let indexed = indexer
                .index(&first.upload(), &MemReader(&first.bytes))
                .await
                .unwrap();
            // Every key referenced (sidecars, `.meta`, too: no record lists them).
            let published = indexed.referenced.clone();
            assert!(published.is_superset(&keys_of(&indexed.records)));
            let listed = listed_keys(&store, &first.id).await;
            let leases = crate::audit::audit(&store, "_manifest")
                .await
                .unwrap()
                .problems
                .into_iter()
                .filter(|p| p.kind == "lease")
                .count();
            // The same bytes under another name share the build-id keys: they wait for the
            // first upload's leases while those are in force (and give up, to be retried).
            let other = Indexer::new(&store, config())
                .index(&second.upload(), &MemReader(&second.bytes))
                .await;
            if at_finalize {
                assert!(listed.is_empty(), "listed before the finalize: {listed:?}");
                assert_eq!(leases, published.len(), "one create lease per key");
                assert_eq!(other.unwrap_err().kind(), io::ErrorKind::WouldBlock);
            } else {
                assert_eq!(listed, published, "listed right after publishing");
                assert_eq!(leases, 0);
                let other = other.unwrap();
                Indexer::new(&store, config())
                    .finalize(&other, true)
                    .await
                    .unwrap();
            }
            assert!(indexer.finalize(&indexed, true).await.unwrap().is_empty());
            let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
            assert!(
                !audit.problems.iter().any(|p| p.kind == "lease"),
                "{:?}",
                audit.problems
            );
            let record = RefStore::new(&store).upload(&first.id).await.unwrap();
            assert_eq!(record.map(|r| r.keys), Some(published));
            // The upload that waited goes through on its retry, sharing the keys.
            let other = index_and_finalize(&store, config(), &second).await;
            assert!(other.records.iter().all(|r| r.conflicts.is_empty()));
            assert_audit_clean(&store).await;
        }
    }

    #[tokio::test]
    async fn where_objects_name_their_owners_a_fresh_upload_writes_no_key_record() {
        let artifacts = Artifacts::new();
        let (first, second) = (&artifacts.elf_a, artifacts.elf_a.named("copy"));
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap().with_owners();
        let key_records = || async { store.list("_symdex/refs/").await.unwrap() };
        let indexer = Indexer::new(&store, config()).lists_keys_at_finalize(true);
        let indexed = indexer
            .index(&first.upload(), &MemReader(&first.bytes))
            .await
            .unwrap();
        let published = indexed.referenced.clone();
        assert!(published.len() > 4, "{published:?}");
        // Each key is its object alone, naming the upload (invariant 7): no record, no lease
        // for a second upload to wait for before the first one's finalize.
        assert_eq!(key_records().await, Vec::<String>::new());
        let refs = RefStore::new(&store);
        for key in &published {
            let record = refs.key(key).await.unwrap().expect(key);
            assert_eq!(record.refs, BTreeSet::from([first.id.clone()]), "{key}");
        }
        let other = index_and_finalize(&store, config(), &second).await;
        assert!(other.records.iter().all(|r| r.conflicts.is_empty()));
        assert!(indexer.finalize(&indexed, true).await.unwrap().is_empty());
        // Shared now: a record per key names both, the first as the objects' writer.
        assert_eq!(key_records().await.len(), published.len());
        for key in &published {
            let record = refs.key(key).await.unwrap().expect(key);
            let both = BTreeSet::from([first.id.clone(), second.id.clone()]);
            assert_eq!((record.refs, record.by), (both, first.id.clone()), "{key}");
        }
        assert_audit_clean(&store).await;
        // The first upload removed: the second keeps every object; removed too, nothing is left.
        let indexer = Indexer::new(&store, config());
        indexer.unindex(&first.id).await.unwrap();
        for key in &published {
            assert!(store.head(key).await.unwrap().is_some(), "{key}");
        }
        indexer.unindex(&second.id).await.unwrap();
        for key in &published {
            assert_eq!(store.head(key).await.unwrap(), None, "{key}");
        }
        assert_eq!(key_records().await, Vec::<String>::new());
    }

    /// Counts reads of upload records (`_symdex/uploads/`).
    #[derive(Default)]
    struct CountUploadReads(std::sync::atomic::AtomicUsize);

    impl crate::storage::hooked::BeforeChange for CountUploadReads {
        fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
            if key.starts_with("_symdex/uploads/") {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            None
        }
    }

    /// `verify`'s fast pass over a store whose objects name their owners: each record-less
    /// key's owner is matched to the uploads already listed (an upload record is read once,
    /// not once per key), and no object's bytes are read — a file changed in place is told
    /// by its size there, and by its content under `--deep`.
    #[tokio::test]
    async fn a_fast_audit_reads_each_upload_record_once_and_no_object() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap().with_owners();
        let uploads = [&artifacts.elf_a, &artifacts.elf_other, &artifacts.pe];
        let mut keys = 0;
        for artifact in uploads {
            keys += index_and_finalize(&store, config(), artifact)
                .await
                .referenced
                .len();
        }
        assert!(keys > 3 * uploads.len(), "{keys} keys");
        assert_eq!(
            store.list("_symdex/refs/").await.unwrap(),
            Vec::<String>::new()
        );
        let counted = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path()).unwrap().with_owners(),
            CountUploadReads::default(),
        );
        let fast = crate::audit::audit_with(&counted, "_manifest", crate::audit::Depth::Fast);
        let fast = fast.await.unwrap();
        assert!(fast.problems.is_empty(), "{:?}", fast.problems);
        assert_eq!(fast.keys, keys);
        let reads = counted.hook().0.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(reads, uploads.len(), "upload records read for {keys} keys");
        // The same size, other bytes, in place: its owner attribute stays.
        let key = &store.list("buildid/").await.unwrap()[0];
        let path = dir.path().join(key);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 0xff;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .unwrap();
        let owned = store.owned_unread(key).await.unwrap().unwrap();
        let written = owned.written.clone().expect("the owner attribute");
        assert_eq!(owned.info.etag, written.etag, "read without hashing");
        let hashed = store.owned(key).await.unwrap().unwrap();
        assert_ne!(hashed.info.etag, written.etag, "hashed");
        let fast = crate::audit::audit_with(&counted, "_manifest", crate::audit::Depth::Fast);
        assert!(fast.await.unwrap().problems.is_empty());
        let deep = crate::audit::audit(&store, "_manifest").await.unwrap();
        // (With every other name of the same file: keys of one owner share it.)
        assert!(
            deep.problems.iter().all(|p| p.kind == "changed"),
            "{deep:?}"
        );
        assert!(deep.problems.iter().any(|p| &p.key == key), "{deep:?}");
    }

    /// `verify` reports each broken promise of a store where every key has a record (the
    /// audit reads each upload record's name, state and keys, `audit::ListedUpload`): a key
    /// whose record no longer names the upload listing it, a record naming an upload that
    /// does not exist, a removal's tombstone left, an upload whose run did not finish, and
    /// a file nothing references.
    #[tokio::test]
    async fn verify_reports_each_broken_promise() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let elf = index_and_finalize(&store, config(), &artifacts.elf_a).await;
        let pe = index_and_finalize(&store, config(), &artifacts.pe).await;
        assert_problems(&store, &[]).await;
        let refs = RefStore::new(&store);
        let elf_id = artifacts.elf_a.id.as_str();
        let pe_id = artifacts.pe.id.as_str();
        let mut elf_keys = elf.referenced.iter();
        let rewrite = |key: &str, refs_now: &[&str]| {
            let file = format!("{}/refs/{key}.json", crate::refs::STATE_PREFIX);
            let store = &store;
            let refs_now: BTreeSet<String> = refs_now.iter().map(|r| r.to_string()).collect();
            async move {
                let bytes = store.read(&file).await.unwrap().expect("a key record");
                let mut record: KeyRecord = serde_json::from_slice(&bytes).unwrap();
                record.refs = refs_now;
                store
                    .put(&file, &serde_json::to_vec(&record).unwrap())
                    .await
                    .unwrap();
            }
        };
        // The elf upload still lists this key; its record names the PE's upload instead.
        let unref = elf_keys.next().unwrap();
        rewrite(unref, &[pe_id]).await;
        let dangling = elf_keys.next().unwrap();
        rewrite(dangling, &[elf_id, "file:/gone@0"]).await;
        let tombstone = pe.referenced.iter().next().unwrap();
        rewrite(tombstone, &[]).await;
        let template = crate::refs::UploadRecord {
            upload: "file:/interrupted@1".into(),
            source: "/interrupted".into(),
            ..Default::default()
        };
        refs.plan(&template, &BTreeSet::new(), None, None)
            .await
            .unwrap();
        store.put("stray/file", b"left behind").await.unwrap();
        assert_problems(
            &store,
            &[
                ("unref", unref),
                ("dangling", dangling),
                ("tombstone", tombstone),
                // Which the PE's upload still lists.
                ("unref", tombstone),
                ("incomplete", "file:/interrupted@1"),
                ("orphan", "stray/file"),
            ],
        )
        .await;
    }

    /// Where objects name their owners, a key without a record is its object: one replaced
    /// by the same bytes naming another listed upload no longer stands for the upload
    /// listing it (`unref`), and one naming an upload that does not exist stands for no
    /// record at all: replaced outside symdex (`changed`).
    #[tokio::test]
    async fn verify_reports_an_object_naming_another_owner() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap().with_owners();
        let elf = index_and_finalize(&store, config(), &artifacts.elf_a).await;
        index_and_finalize(&store, config(), &artifacts.pe).await;
        assert_problems(&store, &[]).await;
        let refs = RefStore::new(&store);
        let mut keys = elf.referenced.iter();
        let (to_pe, to_gone) = (keys.next().unwrap(), keys.next().unwrap());
        let bytes = store.read(to_pe).await.unwrap().unwrap();
        let info = store.head(to_pe).await.unwrap().unwrap();
        for (key, upload) in [(to_pe, artifacts.pe.id.as_str()), (to_gone, "file:/gone@0")] {
            let owner = refs.owner_token(upload).await.unwrap();
            let source = CopySource::Bytes(&bytes);
            store.delete(key).await.unwrap();
            store.copy(&source, key, &info, Some(&owner)).await.unwrap();
        }
        assert_problems(&store, &[("unref", to_pe), ("changed", to_gone)]).await;
    }

    /// The problems a deep audit of `store` reports, as (kind, key): exactly `expected`.
    async fn assert_problems(store: &LocalStore, expected: &[(&str, &str)]) {
        let audit = crate::audit::audit(store, "_manifest").await.unwrap();
        let found: BTreeSet<(&str, &str)> = audit
            .problems
            .iter()
            .map(|p| (p.kind, p.key.as_str()))
            .collect();
        let expected: BTreeSet<(&str, &str)> = expected.iter().copied().collect();
        assert_eq!(found, expected, "{:#?}", audit.problems);
    }

    #[tokio::test]
    async fn a_removal_that_fails_at_any_change_reports_every_key_on_its_retry() {
        let artifacts = Artifacts::new();
        let artifact = &artifacts.elf_a;
        let removed = |record: Option<Record>| -> BTreeSet<String> {
            record
                .map(|r| r.removed.into_iter().collect())
                .unwrap_or_default()
        };
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("clean")).unwrap();
        index_and_finalize(&store, config(), artifact).await;
        let clean = removed(
            Indexer::new(&store, config())
                .unindex(&artifact.id)
                .await
                .unwrap(),
        );
        assert!(clean.len() > 5, "{clean:?}");
        // Every change of the removal in turn fails (the process dies before it); the retry
        // reports what the removal did, the failed attempt's part included.
        for nth in 0.. {
            let root = dir.path().join(format!("at-{nth}"));
            let store = LocalStore::open(&root).unwrap();
            index_and_finalize(&store, config(), artifact).await;
            // The same directory, through a second handle that fails its `nth` change.
            let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
            let first = Indexer::new(&failing, config()).unindex(&artifact.id).await;
            if !failing.hook().failed() {
                assert_eq!(removed(first.unwrap()), clean);
                assert!(nth > clean.len(), "{nth} changes");
                break;
            }
            assert!(first.is_err(), "change {nth} failed, the removal did not");
            let retry = Indexer::new(&store, config()).unindex(&artifact.id).await;
            assert_eq!(removed(retry.unwrap()), clean, "failing at change {nth}");
            let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
            assert!(audit.problems.is_empty(), "{nth}: {:?}", audit.problems);
        }
    }

    /// An index message whose ingest object is gone takes its upload back (`finalize`); a
    /// process dying anywhere in that take-back leaves the upload `removing`, and only the
    /// message's redelivery runs it again. The redelivery finishes the removal (and asks to
    /// be retried), the next one indexes and takes it back: every run ends with nothing
    /// published, no upload left, the audit clean. (Before, every redelivery answered "a
    /// removal is in progress": found by the S3 interleavings at seed 4002.)
    #[tokio::test]
    async fn a_take_back_dying_half_way_is_finished_by_the_index_messages_redelivery() {
        use crate::testing::scenarios::{run_op, Op};
        let a = Artifacts::new();
        let artifact = &a.elf_a;
        let dir = tempfile::tempdir().unwrap();
        let mut left_removing = 0;
        for nth in 0.. {
            let root = dir.path().join(format!("at-{nth}"));
            let store = LocalStore::open(&root).unwrap();
            let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
            let first = run_op(&failing, Op::Index(artifact, false)).await;
            if !failing.hook().failed() {
                first.unwrap();
                assert!(nth > 5, "{nth} changes");
                break;
            }
            assert!(first.is_err(), "change {nth} failed, the index did not");
            let state = RefStore::new(&store).upload(&artifact.id).await.unwrap();
            if state.map(|r| r.state) == Some(UploadState::Removing) {
                left_removing += 1;
            }
            let mut redelivered = Err(io::Error::other("not run"));
            for _ in 0..3 {
                redelivered = run_op(&store, Op::Index(artifact, false)).await;
                if redelivered.is_ok() {
                    break;
                }
            }
            redelivered.unwrap_or_else(|e| panic!("dying at change {nth}: {e}"));
            let upload = RefStore::new(&store).upload(&artifact.id).await.unwrap();
            assert_eq!(upload, None, "dying at change {nth}");
            let mut published = store.list_now("").unwrap();
            published.retain(|k| !k.starts_with("_symdex/") && !k.starts_with("_manifest/"));
            assert!(published.is_empty(), "dying at change {nth}: {published:?}");
            assert_audit_clean(&store).await;
        }
        assert!(left_removing > 0, "no death left the upload removing");
    }

    /// Deletes an upload as the CLI and the Lambda do: its record in the manifest, then its
    /// end (hand-over, the offer withdrawn, the upload forgotten).
    async fn delete_reported(store: &dyn Storage, upload: &str) -> io::Result<()> {
        Indexer::new(store, config())
            .removal_to_its_end(upload, None)
            .await
    }

    /// Indexes an upload as the CLI and the Lambda do: its records in the manifest, then
    /// finalized.
    async fn index_reported(store: &dyn Storage, artifact: &Artifact) -> io::Result<()> {
        let indexer = Indexer::new(store, config());
        let indexed = indexer
            .index(&artifact.upload(), &MemReader(&artifact.bytes))
            .await?;
        indexer.write_manifest(&indexed.records).await?;
        indexer.finalize(&indexed, true).await?;
        Ok(())
    }

    /// The keys the manifest says were published for `upload` on another upload's behalf
    /// (source keys: the record's reason says `why`).
    async fn published_for(store: &LocalStore, upload: &str, why: &str) -> BTreeSet<String> {
        let records = crate::manifest::read_all(store, "_manifest").await.unwrap();
        records
            .iter()
            .filter(|r| r.upload == upload)
            .filter(|r| r.reason.as_deref().is_some_and(|w| w.contains(why)))
            .flat_map(|r| r.published.clone())
            .collect()
    }

    /// A source tying with another for a debug file's path is removed: the path goes to the
    /// other. Every change of the removal in turn fails (the process dies before it); the
    /// retry still serves the path with the other's bytes, and the manifest says so.
    #[tokio::test]
    async fn a_source_removal_that_fails_at_any_change_hands_its_paths_on_by_its_retry() {
        let a = Artifacts::new();
        let (removed, left) = (&a.source, &a.source_edited);
        let indexed_before = [removed, left, &a.debug_with_sources];
        let dir = tempfile::tempdir().unwrap();
        let clean = LocalStore::open(dir.path().join("clean")).unwrap();
        for artifact in indexed_before {
            index_and_finalize(&clean, config(), artifact).await;
        }
        delete_reported(&clean, &removed.id).await.unwrap();
        let keys = published_for(&clean, &left.id, "was removed").await;
        assert_eq!(keys.len(), 1, "the tied path is served now: {keys:?}");
        let key = keys.first().unwrap().clone();
        assert_eq!(clean.read(&key).await.unwrap(), Some(left.bytes.clone()));
        for nth in 0.. {
            let root = dir.path().join(format!("at-{nth}"));
            let store = LocalStore::open(&root).unwrap();
            for artifact in indexed_before {
                index_and_finalize(&store, config(), artifact).await;
            }
            let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
            let first = delete_reported(&failing, &removed.id).await;
            if !failing.hook().failed() {
                first.unwrap();
                assert!(nth > 3, "{nth} changes");
                break;
            }
            assert!(first.is_err(), "change {nth} failed, the removal did not");
            delete_reported(&store, &removed.id).await.unwrap();
            let served = store.read(&key).await.unwrap();
            assert_eq!(served, Some(left.bytes.clone()), "failing at change {nth}");
            assert_eq!(
                published_for(&store, &left.id, "was removed").await,
                keys,
                "failing at change {nth}"
            );
            assert_audit_clean(&store).await;
        }
    }

    /// The crash test above, racing the debug file: the removal of a source tying with
    /// another dies at each of its changes in turn, under interleavings with the debug
    /// file's index, and is retried. Every run ends with the path served by the other
    /// source, and the manifest saying it was published for it.
    #[tokio::test]
    async fn a_source_removal_dying_while_its_debug_file_arrives_is_finished_by_its_retry() {
        use crate::testing::interleave::{Actor, Scheduled, Scheduler};
        let a = Artifacts::new();
        let (removed, left, debug) = (&a.source, &a.source_edited, &a.debug_with_sources);
        let dir = tempfile::tempdir().unwrap();
        let mut runs = 0;
        for seed in crate::testing::scenarios::seeds(12) {
            for nth in 0.. {
                let root = dir.path().join(format!("{seed}-{nth}"));
                let store = LocalStore::open(&root).unwrap();
                for artifact in [removed, left] {
                    index_and_finalize(&store, config(), artifact).await;
                }
                let scheduler = Scheduler::new();
                let scheduled = Scheduled::new(&store, scheduler.clone());
                let failing = failing_nth(Scheduled::new(&store, scheduler.clone()), nth);
                let actors: Vec<Actor<'_, io::Result<()>>> = vec![
                    Box::pin(delete_reported(&failing, &removed.id)),
                    Box::pin(index_reported(&scheduled, debug)),
                ];
                let (results, trace) = scheduler.run(seed, actors).await;
                runs += 1;
                let why = format!("seed {seed}, change {nth}: {trace:#?}");
                results[1].as_ref().expect(&why);
                let failed = failing.hook().failed();
                match &results[0] {
                    Ok(()) => {}
                    // Handing the path on, the removal waits for the debug file's live lease
                    // of the same holder, and may give up: retried, as SQS would.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => assert!(failed, "{e}\n{why}"),
                }
                delete_reported(&store, &removed.id).await.expect(&why);
                let key = published_for(&store, &left.id, "").await;
                assert_eq!(key.len(), 1, "{why}");
                let key = key.first().unwrap();
                let served = store.read(key).await.unwrap();
                assert_eq!(served, Some(left.bytes.clone()), "{why}");
                // Nothing left behind: no lease of the dead attempt's (it took over none of
                // the debug file's run) waits to run out.
                let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
                assert!(audit.problems.is_empty(), "{:?}\n{why}", audit.problems);
                std::fs::remove_dir_all(&root).unwrap();
                if !failed {
                    break;
                }
            }
        }
        assert!(runs > 20, "{runs} runs");
    }

    /// A debug file arrives after its source: the source's key is published on the source
    /// upload's behalf. Every change of the index in turn fails (the process dies before
    /// it); the retry still serves the key, and the manifest says it was published for the
    /// source upload (at-least-once, as for the debug file's own keys).
    #[tokio::test]
    async fn a_debug_file_index_that_fails_at_any_change_reports_its_sources_keys_on_its_retry() {
        let a = Artifacts::new();
        let (source, debug) = (&a.source, &a.debug_with_sources);
        let dir = tempfile::tempdir().unwrap();
        let clean = LocalStore::open(dir.path().join("clean")).unwrap();
        index_reported(&clean, source).await.unwrap();
        index_reported(&clean, debug).await.unwrap();
        let keys = published_for(&clean, &source.id, "named by").await;
        assert_eq!(keys.len(), 1, "{keys:?}");
        let key = keys.first().unwrap().clone();
        for nth in 0.. {
            let root = dir.path().join(format!("at-{nth}"));
            let store = LocalStore::open(&root).unwrap();
            index_reported(&store, source).await.unwrap();
            let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
            let first = index_reported(&failing, debug).await;
            if !failing.hook().failed() {
                first.unwrap();
                assert!(nth > 3, "{nth} changes");
                break;
            }
            assert!(first.is_err(), "change {nth} failed, the index did not");
            index_reported(&store, debug).await.unwrap();
            let served = store.read(&key).await.unwrap();
            assert_eq!(
                served,
                Some(source.bytes.clone()),
                "failing at change {nth}"
            );
            assert_eq!(
                published_for(&store, &source.id, "named by").await,
                keys,
                "failing at change {nth}"
            );
            assert_audit_clean(&store).await;
        }
    }

    /// An offer whose upload was removed without withdrawing it (by a version before upload
    /// records named their join record) ties with a live one: a debug file arriving later
    /// finds the dead offer's upload gone, and the live offer serves the path.
    #[tokio::test]
    async fn an_offer_left_by_a_removed_upload_does_not_keep_a_path_ambiguous() {
        let a = Artifacts::new();
        let (stale, live) = (&a.source, &a.source_edited);
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        for artifact in [stale, live] {
            index_and_finalize(&store, config(), artifact).await;
        }
        // As the older version wrote it: no join record named, so no withdrawal.
        let refs = RefStore::new(&store);
        let mut record = refs.upload(&stale.id).await.unwrap().unwrap();
        assert!(record.offered_in.take().is_some());
        let file = refs.upload_file(&stale.id).await.unwrap();
        store
            .put(&file, &serde_json::to_vec(&record).unwrap())
            .await
            .unwrap();
        Indexer::new(&store, config())
            .unindex(&stale.id)
            .await
            .unwrap();
        let offers_gone = |problems: Vec<crate::audit::Problem>| -> Vec<String> {
            let offers = problems.into_iter().filter(|p| p.kind == "offer");
            offers.map(|p| p.detail).collect()
        };
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        let left = offers_gone(audit.problems);
        assert!(
            left.len() == 1 && left[0].contains(&format!("upload {}, which is gone", stale.id)),
            "verify tells the stale offer: {left:?}"
        );

        let debug = index_and_finalize(&store, config(), &a.debug_with_sources).await;
        let served: BTreeSet<String> = debug
            .records
            .iter()
            .filter(|r| r.upload == live.id)
            .flat_map(|r| r.published.clone())
            .collect();
        assert_eq!(served.len(), 1, "{:?}", debug.records);
        let key = served.first().unwrap();
        assert_eq!(store.read(key).await.unwrap(), Some(live.bytes.clone()));
        // Dropped once met: verify finds nothing more.
        assert_audit_clean(&store).await;
    }

    /// Two sources of different content tie for a path. Offered before the debug file
    /// asks, the tie serves nothing (the debug file's report says why). Offered after the
    /// debug file was served from the first, the second leaves the key as it is — an offer
    /// takes no other upload's key — and its record says so instead of nothing.
    /// Without source joins (a store nobody uploads sources to), neither order of a debug file
    /// and the source it names writes a join record or serves the path; the debug file's
    /// record names its paths missing. With them (the default), the same uploads serve it.
    #[tokio::test]
    async fn without_source_joins_neither_a_debug_file_nor_a_source_writes_a_join_record() {
        let a = Artifacts::new();
        let (source, debug) = (&a.source, &a.debug_with_sources);
        let dir = tempfile::tempdir().unwrap();
        let serves_a_source = |keys: Vec<String>| keys.iter().any(|k| k.contains("/source/"));
        for (name, order) in [
            ("source first", [source, debug]),
            ("debug first", [debug, source]),
        ] {
            let store = LocalStore::open(dir.path().join(name)).unwrap();
            let mut records = Vec::new();
            for artifact in order {
                let off = Config {
                    source_joins: false,
                    ..config()
                };
                records.extend(index_and_finalize(&store, off, artifact).await.records);
            }
            let joins = store.list("_symdex/sourcemap/").await.unwrap();
            assert!(joins.is_empty(), "{name}: {joins:?}");
            let asked = records.iter().find(|r| r.upload == debug.id).unwrap();
            let report = asked.sources.clone().unwrap_or_default();
            assert_eq!(report.served, 0, "{name}: {report:?}");
            assert!(!report.missing.is_empty(), "{name}: {report:?}");
            assert!(
                !serves_a_source(store.list("buildid/").await.unwrap()),
                "{name}"
            );
            let offered = records.iter().find(|r| r.upload == source.id).unwrap();
            assert!(!offered.published.is_empty(), "{name}: still keyed");
            assert_audit_clean(&store).await;
        }
        let on = LocalStore::open(dir.path().join("on")).unwrap();
        index_and_finalize(&on, config(), source).await;
        index_and_finalize(&on, config(), debug).await;
        assert!(serves_a_source(on.list("buildid/").await.unwrap()));
    }

    #[tokio::test]
    async fn a_source_tying_for_a_path_already_served_says_it_leaves_it() {
        let a = Artifacts::new();
        let (first, second, debug) = (&a.source, &a.source_edited, &a.debug_with_sources);
        let dir = tempfile::tempdir().unwrap();
        let before = LocalStore::open(dir.path().join("before")).unwrap();
        index_and_finalize(&before, config(), first).await;
        let tying = index_and_finalize(&before, config(), second).await;
        assert!(
            tying.records.iter().all(|r| r.reason.is_none()),
            "no path wanted yet: {:?}",
            tying.records
        );
        let asked = index_and_finalize(&before, config(), debug).await;
        let report = asked.records[0].sources.clone().unwrap_or_default();
        assert_eq!(report.served, 0, "{report:?}");
        assert!(
            report
                .unserved
                .iter()
                .any(|u| u.contains("2 uploaded sources") && !u.contains("--build")),
            "{report:?}"
        );
        // Naming no build, all three share the store-wide scope: the report says so, and how
        // to give each build its own.
        let unscoped = LocalStore::open(dir.path().join("unscoped")).unwrap();
        let no_build = |a: &Artifact| Artifact {
            build: None,
            ..a.clone()
        };
        index_and_finalize(&unscoped, config(), &no_build(first)).await;
        index_and_finalize(&unscoped, config(), &no_build(second)).await;
        let asked = index_and_finalize(&unscoped, config(), &no_build(debug)).await;
        let report = asked.records[0].sources.clone().unwrap_or_default();
        assert!(
            report
                .unserved
                .iter()
                .any(|u| u.contains("2 uploaded sources") && u.contains("--build")),
            "{report:?}"
        );

        let between = LocalStore::open(dir.path().join("between")).unwrap();
        index_reported(&between, first).await.unwrap();
        index_reported(&between, debug).await.unwrap();
        let keys = published_for(&between, &first.id, "named by").await;
        assert_eq!(keys.len(), 1, "{keys:?}");
        let key = keys.first().unwrap();
        let tying = index_and_finalize(&between, config(), second).await;
        let record = tying
            .records
            .iter()
            .find(|r| r.upload == second.id)
            .unwrap();
        let reason = record.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains(key.as_str())
                && reason.contains(&format!("which serves it (upload {})", first.id)),
            "{reason}"
        );
        assert!(!record.published.contains(key), "{record:?}");
        assert_eq!(between.read(key).await.unwrap(), Some(first.bytes.clone()));
        assert_audit_clean(&between).await;
    }

    /// A debug file whose line table records `src/hello.c`'s MD5 (as clang writes DWARF 5)
    /// is served the source of those bytes in every order the three uploads come in, though
    /// another version of the file ties with it by path; the other version alone serves
    /// nothing, and the debug file's report says why.
    #[tokio::test]
    async fn a_recorded_md5_serves_its_own_version_in_every_order() {
        let a = Artifacts::new();
        let (old, new, debug) = (&a.source, &a.source_edited, &a.debug_md5);
        let key = Indexer::new(
            &LocalStore::open(tempfile::tempdir().unwrap().path()).unwrap(),
            config(),
        )
        .source_key(&"4d".repeat(20), "/ci/work/src/hello.c")
        .unwrap();
        let orders: [[&Artifact; 3]; 6] = [
            [old, new, debug],
            [old, debug, new],
            [new, old, debug],
            [new, debug, old],
            [debug, old, new],
            [debug, new, old],
        ];
        for order in orders {
            let names: Vec<&str> = order.iter().map(|a| a.id.as_str()).collect();
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            for artifact in order {
                index_reported(&store, artifact).await.unwrap();
            }
            assert_eq!(
                store.read(&key).await.unwrap(),
                Some(new.bytes.clone()),
                "{names:?}"
            );
            let refs = RefStore::new(&store).key(&key).await.unwrap().unwrap();
            assert_eq!(refs.refs, BTreeSet::from([new.id.clone()]), "{names:?}");
            assert_audit_clean(&store).await;
        }

        // Only the other version uploaded: not served, and said so.
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_reported(&store, old).await.unwrap();
        let asked = index_and_finalize(&store, config(), debug).await;
        let report = asked.records[0].sources.clone().unwrap_or_default();
        assert_eq!((report.served, report.missing.len()), (0, 0), "{report:?}");
        assert!(
            report
                .unserved
                .iter()
                .any(|u| u.contains("none with the MD5")),
            "{report:?}"
        );
        assert_eq!(store.read(&key).await.unwrap(), None);
        assert_audit_clean(&store).await;
    }

    /// `verify` tells a path a debug file wants left unserved while an uploaded source matches
    /// it (what a hand-on lost would leave), and indexing the debug file again with
    /// `--recheck` serves it.
    #[tokio::test]
    async fn a_wanted_path_a_source_matches_left_unserved_is_reported_until_served() {
        let a = Artifacts::new();
        let (source, debug) = (&a.source, &a.debug_with_sources);
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_reported(&store, source).await.unwrap();
        index_reported(&store, debug).await.unwrap();
        assert_audit_clean(&store).await;
        let keys = published_for(&store, &source.id, "named by").await;
        assert_eq!(keys.len(), 1, "{keys:?}");
        let key = keys.first().unwrap();
        // Lost: the source's reference taken back, its object gone with it.
        let refs = RefStore::new(&store);
        assert_eq!(
            refs.remove(key, &source.id).await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.read(key).await.unwrap(), None);
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        let unserved: Vec<_> = audit
            .problems
            .iter()
            .filter(|p| p.kind == "source")
            .collect();
        assert_eq!(unserved.len(), 1, "{:?}", audit.problems);
        assert!(key.ends_with(&unserved[0].key), "{unserved:?}");
        assert!(
            unserved[0]
                .detail
                .contains(&format!("while upload {} offers it", source.id)),
            "{unserved:?}"
        );
        let recheck = Config {
            recheck: true,
            ..config()
        };
        let indexer = Indexer::new(&store, recheck);
        let upload = debug.upload();
        let indexed = indexer.index(&upload, &MemReader(&debug.bytes)).await;
        indexer.finalize(&indexed.unwrap(), true).await.unwrap();
        assert_eq!(store.read(key).await.unwrap(), Some(source.bytes.clone()));
        assert_audit_clean(&store).await;
    }

    #[tokio::test]
    async fn an_upload_taken_for_new_yet_indexed_before_is_answered_from_its_record() {
        let artifacts = Artifacts::new();
        let artifact = &artifacts.elf_a;
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let first = index_and_finalize(&store, config(), artifact).await;
        let refs = RefStore::new(&store);
        let before = refs.upload(&artifact.id).await.unwrap();
        assert!(before.is_some());
        let indexer = Indexer::new(&store, config());
        let upload = artifact.upload();
        let identified = identify_with_details(&MemReader(&artifact.bytes), &upload.options);
        // A first delivery's guess (no read): the plan's creation finds the record.
        let guessed = indexer
            .index_looked_up(&upload, identified, Some(PriorRead::absent()))
            .await
            .unwrap();
        assert_eq!(guessed.upload, None, "indexed in full again");
        assert_eq!(keys_of(&guessed.records), keys_of(&first.records));
        assert!(guessed
            .records
            .iter()
            .all(|r| r.action == Some(Action::Unchanged)));
        let after = refs.upload(&artifact.id).await.unwrap();
        assert_eq!(after, before, "the record is left as it was");
    }

    #[tokio::test]
    async fn a_redelivery_of_a_conflicting_upload_reports_its_conflicts_again_from_its_record() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_and_finalize(&store, config(), &artifacts.elf_a).await;
        // Other bytes under the same build id: its keys hold elf_a's bytes.
        let other = &artifacts.elf_other;
        let first = index_and_finalize(&store, config(), other).await;
        let conflicts = |records: &[Record]| -> BTreeSet<String> {
            records.iter().flat_map(|r| r.conflicts.clone()).collect()
        };
        assert!(!conflicts(&first.records).is_empty());
        assert_eq!(first.records[0].action, Some(Action::Conflict));

        let again = index_and_finalize(&store, config(), other).await;
        assert_eq!(again.upload, None, "indexed in full again");
        assert_eq!(again.records[0].action, Some(Action::Conflict));
        assert_eq!(conflicts(&again.records), conflicts(&first.records));
        assert_eq!(keys_of(&again.records), keys_of(&first.records));
        assert_eq!(again.records[0].reason, first.records[0].reason);
        assert_audit_clean(&store).await;
    }

    /// Records every change a store is asked for.
    #[derive(Default)]
    struct Changes(std::sync::Mutex<Vec<(&'static str, String)>>);

    impl crate::storage::hooked::BeforeChange for Changes {
        fn before_change(&self, op: &'static str, key: &str) -> crate::storage::StorageResult<()> {
            self.0.lock().unwrap().push((op, key.to_string()));
            Ok(())
        }
    }

    /// A removal forgets the waits of the keys its upload planned and did not reference: the
    /// markers of its conflicting files go, and no marker of their `.meta` sidecars is asked
    /// to (a sidecar never waits: it goes with its file).
    #[tokio::test]
    async fn a_removal_removes_only_the_markers_its_upload_wrote() {
        let a = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_and_finalize(&store, config(), &a.elf_a).await;
        let other = index_and_finalize(&store, config(), &a.elf_other).await;
        let conflicts = other.records.iter().flat_map(|r| r.conflicts.iter());
        assert!(conflicts.clone().any(|k| k.ends_with(".meta")), "{other:?}");
        assert!(
            conflicts.clone().any(|k| !k.ends_with(".meta")),
            "{other:?}"
        );
        let waiting = format!("{}/waiting/", crate::refs::STATE_PREFIX);
        let markers: BTreeSet<String> = store.list(&waiting).await.unwrap().into_iter().collect();
        assert!(!markers.is_empty());
        let recorded = crate::storage::hooked::Hooked::new(
            LocalStore::open(dir.path()).unwrap(),
            Changes::default(),
        );
        let remover = Indexer::new(&recorded, config());
        assert!(remover.unindex(&a.elf_other.id).await.unwrap().is_some());
        let asked: BTreeSet<String> = recorded
            .hook()
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, key)| key.starts_with(&waiting))
            .map(|(_, key)| key.clone())
            .collect();
        assert_eq!(asked, markers);
        assert!(store.list(&waiting).await.unwrap().is_empty());
        assert_audit_clean(&store).await;
    }

    /// Other bytes under a build id taken: the file keys conflict, and so do the `.meta`
    /// sidecars beside them (the same name, arch and format: the same bytes), which describe
    /// the first upload's file. Shared, they outlived that upload: `.meta` without a file.
    #[tokio::test]
    async fn a_sidecar_beside_a_conflicting_key_is_a_conflict_and_goes_with_its_file() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let first = index_and_finalize(&store, config(), &artifacts.elf_a).await;
        let other = &artifacts.elf_other;
        let indexed = index_and_finalize(&store, config(), other).await;
        let conflicts: BTreeSet<String> = indexed
            .records
            .iter()
            .flat_map(|r| r.conflicts.clone())
            .collect();
        let sidecars: BTreeSet<&String> =
            conflicts.iter().filter(|k| k.ends_with(".meta")).collect();
        // Every conflicting file with a sidecar has its sidecar among the conflicts.
        let described: BTreeSet<String> = sidecars
            .iter()
            .filter_map(|k| k.strip_suffix(".meta").map(str::to_string))
            .collect();
        assert!(!described.is_empty(), "{conflicts:?}");
        assert!(described.is_subset(&conflicts), "{conflicts:?}");
        let listed = listed_keys(&store, &other.id).await;
        assert!(
            listed.iter().all(|k| !k.ends_with(".meta")),
            "the conflicting upload references no sidecar: {listed:?}"
        );
        // Answered from its record, a redelivery reports the same conflicts.
        let again = index_and_finalize(&store, config(), other).await;
        assert_eq!(again.upload, None, "indexed in full again");
        let again: BTreeSet<String> = again
            .records
            .iter()
            .flat_map(|r| r.conflicts.clone())
            .collect();
        assert_eq!(again, conflicts);
        // The first upload removed: its files and their sidecars go together, and the
        // waiting upload, indexed again (refs.rs, invariant 8), publishes both.
        assert!(first.records.iter().all(|r| r.conflicts.is_empty()));
        let none_ingested = FromArtifacts {
            store: &store,
            ingest: &[],
            config: config(),
        };
        let remover = Indexer::new(&store, config()).handing_over_to(&none_ingested);
        remover.unindex(&artifacts.elf_a.id).await.unwrap();
        for sidecar in &sidecars {
            assert_eq!(store.head(sidecar).await.unwrap(), None, "{sidecar}");
        }
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        let waiting: BTreeSet<&str> = audit.problems.iter().map(|p| p.key.as_str()).collect();
        assert!(audit.problems.iter().all(|p| p.kind == "waiting"));
        let files = conflicts.iter().filter(|k| !k.ends_with(".meta"));
        assert_eq!(waiting, files.map(String::as_str).collect());
        let handed_over = index_and_finalize(&store, config(), &artifacts.elf_a).await;
        assert!(handed_over.records.iter().all(|r| r.conflicts.is_empty()));
        let other_ingested = FromArtifacts {
            store: &store,
            ingest: &[other],
            config: config(),
        };
        let remover = Indexer::new(&store, config()).handing_over_to(&other_ingested);
        remover.unindex(&artifacts.elf_a.id).await.unwrap();
        for sidecar in &sidecars {
            assert!(store.head(sidecar).await.unwrap().is_some(), "{sidecar}");
        }
        let listed = listed_keys(&store, &other.id).await;
        assert!(described.is_subset(&listed), "{listed:?}");
        assert_audit_clean(&store).await;
    }

    /// A waiting upload removed takes its waits with it: the key's holder, removed later,
    /// finds no marker to re-index or clean up.
    #[tokio::test]
    async fn a_removed_upload_takes_its_waits_with_it() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_and_finalize(&store, config(), &artifacts.elf_a).await;
        let waiter = index_and_finalize(&store, config(), &artifacts.elf_other).await;
        assert!(waiter.records.iter().any(|r| !r.conflicts.is_empty()));
        let refs = RefStore::new(&store);
        assert!(!refs.all_waiting().await.unwrap().is_empty(), "it waits");
        let remover = Indexer::new(&store, config());
        remover.unindex(&artifacts.elf_other.id).await.unwrap();
        assert_eq!(refs.all_waiting().await.unwrap(), Vec::new());
        assert_audit_clean(&store).await;
    }

    /// The indexer's own take-back (its ingest object deleted before its finalize) frees a
    /// key another upload waits for: the manifest says the key was unpublished before the
    /// hand-over's record says who published it again, as a removal's does.
    #[tokio::test]
    async fn a_take_back_records_the_keys_it_freed_before_handing_them_over() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let (first, other) = (&artifacts.elf_a, &artifacts.elf_other);
        let indexer = Indexer::new(&store, config());
        let indexed = indexer
            .index(&first.upload(), &MemReader(&first.bytes))
            .await
            .unwrap();
        let waiting = index_and_finalize(&store, config(), other).await;
        let conflicts: BTreeSet<String> = waiting
            .records
            .iter()
            .flat_map(|r| r.conflicts.clone())
            .collect();
        assert!(!conflicts.is_empty(), "other bytes under the same build id");
        let ingest = FromArtifacts {
            store: &store,
            ingest: &[other],
            config: config(),
        };
        let taker = Indexer::new(&store, config()).handing_over_to(&ingest);
        let undone = taker.finalize(&indexed, false).await.unwrap();
        assert_eq!(undone.len(), 1);
        assert_eq!(undone[0].action, Some(Action::Unpublished));
        assert!(conflicts.iter().all(|k| undone[0].removed.contains(k)));
        // Every conflicting key now holds the waiting upload's bytes, and the manifest, in
        // the order its objects were written, says so after saying the key went.
        let mut written = Vec::new();
        crate::manifest::for_each_record(&store, "_manifest", None, |r| {
            written.push(r);
            Ok(())
        })
        .await
        .unwrap();
        for key in &conflicts {
            if key.ends_with(".meta") {
                continue; // A sidecar: records name the file it describes.
            }
            let holds = store.read(key).await.unwrap().unwrap();
            assert!(holds == other.bytes, "{key}");
            let went = written
                .iter()
                .position(|r| r.upload == first.id && r.removed.contains(key));
            let back = written
                .iter()
                .position(|r| r.upload == other.id && r.published.contains(key));
            assert!(went.is_some() && went < back, "{key}: {went:?} {back:?}");
        }
        assert_eq!(
            written.iter().filter(|r| r.upload == first.id).count(),
            1,
            "the undo is written once (its caller only reports it)"
        );
        let waits = RefStore::new(&store).all_waiting().await.unwrap();
        assert_eq!(waits, Vec::new(), "the waits ended with the hand-over");
        assert_audit_clean(&store).await;
    }

    #[test]
    fn kept_keys_read_back_by_position() {
        let keys: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        let by_position = IndexedAs {
            records: vec![Record::default(), Record::default()],
            unchanged_at: vec![vec![2, 0], vec![1]],
            ..IndexedAs::default()
        };
        assert_eq!(
            own_keys_of(&by_position, &keys),
            Some(vec![vec!["c".into(), "a".into()], vec!["b".into()]])
        );
        // Not what this code writes: no answer (the upload is indexed in full).
        let beyond = IndexedAs {
            unchanged_at: vec![vec![3], vec![]],
            ..by_position.clone()
        };
        assert_eq!(own_keys_of(&beyond, &keys), None);
        let fewer = IndexedAs {
            unchanged_at: vec![vec![0]],
            ..by_position
        };
        assert_eq!(own_keys_of(&fewer, &keys), None);
    }

    #[tokio::test]
    async fn a_redelivery_of_an_indexed_upload_is_answered_from_its_upload_record() {
        let artifacts = Artifacts::new();
        for artifact in [&artifacts.elf_a, &artifacts.pe, &artifacts.pdb] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            let first = index_and_finalize(&store, config(), artifact).await;
            assert!(first.upload.is_some());
            let record = RefStore::new(&store).upload(&artifact.id).await.unwrap();
            let kept = record.and_then(|r| r.indexed_as);
            assert!(
                kept.is_some(),
                "{artifact:?}: nothing kept for a redelivery"
            );

            let kept = kept.unwrap();
            assert!(
                kept.records.iter().all(|r| r.unchanged.is_empty()),
                "{artifact:?}: key names kept twice: {kept:?}"
            );

            let again = index_and_finalize(&store, config(), artifact).await;
            assert_eq!(again.upload, None, "{artifact:?}: indexed in full again");
            // The same keys in the same order: the first run's published, then unchanged.
            let in_order = |records: &[Record]| -> Vec<Vec<String>> {
                let own = records.iter().filter(|r| r.upload == artifact.id);
                own.map(|r| r.published.iter().chain(&r.unchanged).cloned().collect())
                    .collect()
            };
            assert_eq!(in_order(&again.records), in_order(&first.records));
            assert_eq!(keys_of(&again.records), keys_of(&first.records));
            for (before, now) in first.records.iter().zip(&again.records) {
                assert_eq!(now.action, Some(Action::Unchanged));
                assert!(now.published.is_empty());
                assert_eq!(
                    (&now.debug_id, &now.code_id, &now.format, &now.name),
                    (
                        &before.debug_id,
                        &before.code_id,
                        &before.format,
                        &before.name
                    )
                );
            }

            // Asked to, it checks every key again, and finds them unchanged.
            let rechecked = Config {
                recheck: true,
                ..config()
            };
            let full = index_and_finalize(&store, rechecked, artifact).await;
            assert!(full.upload.is_some());
            assert_eq!(keys_of(&full.records), keys_of(&first.records));
            assert!(full.records.iter().all(|r| r.published.is_empty()));
        }
    }

    #[tokio::test]
    async fn a_pe_that_aliased_its_pdb_is_answered_from_its_upload_record_too() {
        let artifacts = Artifacts::new();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        index_and_finalize(&store, config(), &artifacts.pdb).await;
        let first = index_and_finalize(&store, config(), &artifacts.pe).await;
        assert!(
            first.records.iter().any(|r| r.upload == artifacts.pdb.id),
            "the PE published the PDB under its CodeView name: {:#?}",
            first.records
        );
        let again = index_and_finalize(&store, config(), &artifacts.pe).await;
        assert_eq!(again.upload, None, "indexed in full again");
        assert!(again.records.iter().all(|r| r.upload == artifacts.pe.id));
        assert_eq!(
            keys_of(&again.records),
            keys_of(
                &first
                    .records
                    .into_iter()
                    .filter(|r| r.upload == artifacts.pe.id)
                    .collect::<Vec<_>>()
            )
        );
    }

    #[test]
    fn every_key_of_a_routed_identity_names_its_id() {
        use crate::layouts::tests::{elf, macho};
        let options = IdentifyOptions::default();
        let ids = [
            elf(&[0xab; 20], true),
            elf(&[0x3c; 20], false),
            macho(Kind::Debug),
        ];
        for id in ids {
            let route = route_of(std::slice::from_ref(&id), &options).expect("routed");
            assert_eq!(route, id.debug_id.to_string());
            let hex = id
                .build_id
                .clone()
                .or(id.uuid.clone())
                .unwrap()
                .to_lowercase();
            let set = layouts::keys_for(&id, "app", &Layout::ALL);
            let keys: Vec<&String> = set.keys.values().flatten().collect();
            assert!(keys.len() > 3, "{keys:?}");
            for key in keys {
                // Split into directories (`gdb/ab/abab...`) or by dashes (UUIDs).
                let joined = key.to_lowercase().replace(['-', '/'], "");
                assert!(joined.contains(&hex), "{key} does not name {hex}");
            }
        }
        // Not routed: a PE (joined to its PDB by debug id), a source, two identities.
        assert_eq!(route_of(&[crate::layouts::tests::pe(1, 2)], &options), None);
        let as_source = IdentifyOptions { as_source: true };
        assert_eq!(route_of(&[elf(&[1; 20], true)], &as_source), None);
        assert_eq!(
            route_of(&[elf(&[1; 20], true), elf(&[2; 20], true)], &options),
            None
        );
    }

    /// JSON with its clock readings (record times, lease ends, expiries) taken out.
    fn timeless(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for clock in ["time", "until", "expires"] {
                    map.remove(clock);
                }
                map.values_mut().for_each(timeless);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(timeless),
            _ => {}
        }
    }

    /// Every file of a store (records without their clock readings).
    fn snapshot(root: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let key = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let file = std::fs::read(&path).unwrap();
                let mut bytes = crate::storage::appended::into_content(&key, file);
                if key.ends_with(".json") && key.starts_with("_symdex") {
                    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    timeless(&mut value);
                    bytes = serde_json::to_vec(&value).unwrap();
                }
                files.insert(key, bytes);
            }
        }
        files
    }

    /// `symdex index --jobs`: inputs of different routes indexed at once by one sole writer
    /// (its lanes), their uploads then taken in input order, end as indexed one after
    /// another — in every interleaving of their storage steps: the same store, file for file,
    /// and the same records. Two of them publish the same source upload's file under their
    /// own build ids (its upload record changed by both) and want the same source path.
    #[tokio::test]
    async fn inputs_of_different_routes_indexed_at_once_end_as_one_after_another() {
        let a = Artifacts::new();
        // Another build id, the same source path.
        let second = &a.debug_other_build;
        inputs_of_different_routes(&a, [&a.debug_with_sources, second, &a.elf_a]).await;
    }

    async fn inputs_of_different_routes<'a>(a: &'a Artifacts, inputs: [&'a Artifact; 3]) {
        use crate::testing::interleave::{Actor, Scheduled, Scheduler};
        let routes: BTreeSet<String> = inputs
            .iter()
            .map(|i| {
                let ids = identify_with_details(&MemReader(&i.bytes), &IdentifyOptions::default());
                route_of(&ids.unwrap(), &IdentifyOptions::default()).expect("routed")
            })
            .collect();
        assert_eq!(routes.len(), inputs.len(), "one route each");
        let sole = Config {
            lease: crate::refs::LeasePolicy {
                exclusive: true,
                ..config().lease
            },
            ..config()
        };
        // The source, indexed first by the same writer (its offer kept in memory, not written
        // yet); then the inputs (at once under `schedule`, beside a write of the kept records,
        // as the writer makes when it keeps too many), taken in input order, flushed,
        // finalized.
        let run = |schedule: Option<(std::sync::Arc<Scheduler>, u64)>| {
            let (inputs, sole) = (&inputs, &sole);
            async move {
                let dir = tempfile::tempdir().unwrap();
                let store = LocalStore::open(dir.path()).unwrap();
                let scheduler = schedule
                    .as_ref()
                    .map(|(s, _)| s.clone())
                    .unwrap_or_default();
                let scheduled = Scheduled::new(&store, scheduler.clone());
                let indexer = Indexer::new(&scheduled, sole.clone()).defer_source_map_writes();
                let mut source = indexer
                    .index(&a.source.upload(), &MemReader(&a.source.bytes))
                    .await
                    .unwrap();
                indexer
                    .register_source_map_changes(&mut source)
                    .await
                    .unwrap();
                let index = |input: &'a Artifact| {
                    let indexer = &indexer;
                    async move {
                        let upload = input.upload();
                        let indexed = indexer.index(&upload, &MemReader(&input.bytes)).await;
                        indexed.map(Some)
                    }
                };
                // The write of the kept records comes after a number of other steps that
                // varies with the seed, so that across seeds it falls anywhere in the run.
                let delay = schedule.as_ref().map_or(0, |(_, seed)| seed % 40);
                let flush = || async {
                    for _ in 0..delay {
                        scheduled.read("_symdex/nothing-here").await?;
                    }
                    indexer.flush_source_maps().await.map(|()| None)
                };
                let mut indexed: Vec<Indexed> = Vec::new();
                let mut trace = Vec::new();
                match &schedule {
                    None => {
                        for input in inputs.iter() {
                            indexed.extend(index(input).await.unwrap());
                        }
                        flush().await.unwrap();
                    }
                    Some((scheduler, seed)) => {
                        let mut actors: Vec<Actor<'_, io::Result<Option<Indexed>>>> = inputs
                            .iter()
                            .map(|input| Box::pin(index(input)) as Actor<'_, _>)
                            .collect();
                        actors.push(Box::pin(flush()));
                        let (results, steps) = scheduler.run(*seed, actors).await;
                        trace = steps;
                        indexed = results.into_iter().filter_map(Result::unwrap).collect();
                    }
                }
                for upload in indexed.iter_mut() {
                    indexer.register_source_map_changes(upload).await.unwrap();
                }
                indexer.flush_source_maps().await.unwrap();
                indexer.finalize(&source, true).await.unwrap();
                let mut records = Vec::new();
                for upload in &indexed {
                    indexer.finalize(upload, true).await.unwrap();
                    records.extend(upload.records.clone());
                }
                let mut records = serde_json::to_value(&records).unwrap();
                timeless(&mut records);
                (snapshot(dir.path()), records, trace)
            }
        };
        let (serial_store, serial_records, _) = run(None).await;
        assert!(
            serial_store
                .keys()
                .filter(|k| k.contains("/source/"))
                .count()
                >= 2,
            "both debug files are served the source"
        );
        let scheduler = Scheduler::new();
        for seed in crate::testing::scenarios::seeds(60) {
            let (store, records, trace) = run(Some((scheduler.clone(), seed))).await;
            let context = format!("seed {seed}, trace:\n  {}", trace.join("\n  "));
            crate::testing::assert_same_files(&store, &serial_store, &context);
            assert_eq!(records, serial_records, "{context}");
        }
    }

    /// The same bytes under another name (its sidecar differs: it names the file), and other
    /// bytes under a build id already taken (its sections conflict): each upload lists only
    /// keys whose records name it, for a sole writer and for concurrent ones. (A fresh
    /// upload's key is first swapped on a guess that it has no record; a conflict decided on
    /// that guess, not on a read, left the sidecar unreferenced.)
    #[tokio::test]
    async fn an_upload_lists_only_the_keys_it_references() {
        let a = Artifacts::new();
        let renamed = a.elf_b.named("renamed.debug");
        for exclusive in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            let config = config_with_exclusive(exclusive);
            for artifact in [&a.elf_b, &renamed, &a.elf_other] {
                let indexed = index_and_finalize(&store, config.clone(), artifact).await;
                assert!(!indexed.records.is_empty());
            }
            let found = crate::audit::audit(&store, "_manifest").await.unwrap();
            assert!(
                found.problems.is_empty(),
                "exclusive {exclusive}: {:#?}",
                found.problems
            );
            let renamed_keys = listed_keys(&store, &renamed.id).await;
            assert!(
                renamed_keys.iter().any(|k| k.ends_with(".meta")),
                "exclusive {exclusive}: the renamed copy references the sidecar: {renamed_keys:?}"
            );
        }
    }

    /// A sole local writer stores an ELF's two `.meta` sidecars (the same bytes) once, one
    /// file under both names, as it stores the upload's own keys; concurrent writers write
    /// each. A renamed copy of the same bytes (other sidecar bytes) keeps the first's, and
    /// when the first upload goes, both names go with their last reference.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_sole_writer_stores_sidecars_of_the_same_bytes_once() {
        use crate::testing::scenarios::{run_op, Op};
        use std::os::unix::fs::MetadataExt;
        let a = Artifacts::new();
        for exclusive in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            let config = config_with_exclusive(exclusive);
            let renamed = a.elf_b.named("renamed.debug");
            index_and_finalize(&store, config.clone(), &a.elf_b).await;
            index_and_finalize(&store, config, &renamed).await;
            let metas: Vec<String> = listed_keys(&store, &a.elf_b.id)
                .await
                .into_iter()
                .filter(|k| k.ends_with(".meta"))
                .collect();
            assert_eq!(metas.len(), 2, "{metas:?}");
            let files = |store: &LocalStore| -> BTreeSet<(u64, Vec<u8>)> {
                metas
                    .iter()
                    .map(|k| {
                        let path = store.path_of(k).unwrap();
                        let inode = std::fs::metadata(&path).unwrap().ino();
                        (inode, std::fs::read(&path).unwrap())
                    })
                    .collect()
            };
            let stored = files(&store);
            assert_eq!(stored.len(), if exclusive { 1 } else { 2 }, "{stored:?}");
            let contents: BTreeSet<&Vec<u8>> = stored.iter().map(|(_, bytes)| bytes).collect();
            assert_eq!(contents.len(), 1, "the same bytes");
            let audit = || async {
                let found = crate::audit::audit(&store, "_manifest").await.unwrap();
                assert!(found.problems.is_empty(), "{:#?}", found.problems);
            };
            audit().await;
            // The renamed copy references the first's sidecars: they stay as they are.
            run_op(&store, Op::Delete(&a.elf_b)).await.unwrap();
            assert_eq!(files(&store), stored, "exclusive {exclusive}");
            audit().await;
            run_op(&store, Op::Delete(&renamed)).await.unwrap();
            for key in &metas {
                assert_eq!(store.head(key).await.unwrap(), None, "{key}");
            }
            audit().await;
        }
    }
}
