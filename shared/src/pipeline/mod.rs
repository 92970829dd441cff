//! The index/unindex pipeline, the same for the CLI (directory store) and the Lambdas (S3):
//! identify an upload by ranged reads, compute its keys, publish by copying, record references
//! and one manifest record per decision.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use crate::layouts::{symstore_index2, Layout};
use crate::manifest::fold::fold_repeats;
use crate::manifest::Record;
use crate::refs::{DeferredWrites, LeasePolicy, RefStore, UploadRecord};
use crate::retention::RetentionPolicy;
use crate::storage::Storage;

#[cfg(test)]
mod hostile;
mod sources;

mod bytes;
mod documents;
mod drive;
mod encode;
mod index;
mod joins;
mod kept;
mod packages;
mod products;
mod publish;
mod removal;
mod sink;
#[cfg(test)]
mod tests;
mod unclaimed;
mod upload;

use kept::KEPT_RECORDS;
use upload::{upload_record_of, Outcome, SourceMapChange};

pub use bytes::{ByteSource, Identified, ReaderBytes};
pub use drive::{Markers, ReadAhead, RecordLookup};
pub use index::route_of;
pub use removal::{is_due, ExpiryPlan};
pub use sink::{Collected, Sink};
pub use upload::{EntryOf, Indexed, Input, Summary, Upload};

/// Re-indexes an upload from its ingest object, with every key checked again
/// (`Config::recheck`): how a removal hands the keys it freed to the uploads waiting for them
/// (refs/, invariant 8). Only the caller can read an upload's bytes again (an S3 ingest
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
    /// one it references ends (refs/, invariant 8), whether its upload record listed the
    /// key (an overwrite took it, `RefStore::overwritten`) or not (a conflict).
    pub handed: BTreeSet<String>,
    /// Check every key of an upload indexed before, as its first run did (no answer from
    /// its upload record: [`Indexer::already_indexed`]).
    pub recheck: bool,
    pub manifest_prefix: String,
    /// Gzip manifest objects (the Lambdas do; the local store writes plain JSON Lines).
    pub gzip_manifest: bool,
    /// How change leases are taken and judged (refs/).
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
    /// The encodings of the compressed copies stored beside each newly published key
    /// (crate::encoded; `--compress`, `SYMDEX_COMPRESS`). None by default here: the front
    /// ends choose.
    pub compress: crate::encoded::Encodings,
    /// Refuse (reject) a PDB whose srcsrv stream runs commands (`SRCSRVCMD`): a debugger
    /// runs them on the developer's machine to fetch a source (after a prompt, or not),
    /// so such a PDB in a shared store runs its uploader's commands on every machine that
    /// debugs with it (`SYMDEX_REFUSE_SRCSRV_COMMANDS`). Off: they are published, their
    /// records say they run commands.
    pub refuse_srcsrv_commands: bool,
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
            compress: crate::encoded::Encodings::none(),
            refuse_srcsrv_commands: false,
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
    /// Whether the store's marker objects were written ([`Self::sharing_markers`]).
    markers: Markers,
    /// Where a removal hands the keys it freed ([`Self::handing_over_to`]).
    hand_over: Option<&'s dyn HandOver>,
    /// Where a debug file has the unclaimed files it names indexed again
    /// ([`Self::claiming_sources_through`]).
    claim: Option<&'s dyn HandOver>,
}

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
                store.traits().key_copies_are_aliases,
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
            markers: Markers::default(),
            hand_over: None,
            claim: None,
        }
    }

    /// A removal re-indexes the uploads waiting for the keys it freed through `hand_over`
    /// (refs/, invariant 8). Without one, they stay waiting: `verify` reports each such key
    /// (`waiting`), and `index --recheck` of the upload publishes it.
    pub fn handing_over_to(mut self, hand_over: &'s dyn HandOver) -> Self {
        self.hand_over = Some(hand_over);
        self
    }

    /// For a caller that finalizes each upload right after indexing it, with no other upload
    /// of its own waiting in between (the Lambda handling one plain object): the `create`
    /// leases a run leaves (refs/, invariant 1) end with the finalize's write, which lists
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
    /// A debug file's claims of noted files (`unclaimed.rs`) come after its wants: the files
    /// indexed again find them, and its report says the paths they serve now.
    pub async fn register_source_map_changes(&self, indexed: &mut Indexed) -> io::Result<()> {
        if indexed.source_map_changes.is_empty() {
            return Ok(());
        }
        // Boxed: a claim re-indexes files, and every upload taken would carry its future.
        Box::pin(self.make_source_map_changes(indexed)).await
    }

    /// [`Self::register_source_map_changes`] of an upload with changes.
    async fn make_source_map_changes(&self, indexed: &mut Indexed) -> io::Result<()> {
        for change in std::mem::take(&mut indexed.source_map_changes) {
            let SourceMapChange::Claim(noted, paths) = &change else {
                self.refs
                    .update_source_map(change.file(), |r| change.apply(r))
                    .await?;
                continue;
            };
            self.reindex_noted(noted).await?;
            for record in &mut indexed.records {
                if self.report_claimed(noted, paths, record).await? {
                    // Its upload record keeps no answer for a redelivery: the next runs in
                    // full, and finds the key free or taken again.
                    indexed.indexed_as = None;
                }
            }
        }
        Ok(())
    }

    /// Makes a source-map change of `upload` now, or, for a sole writer deferring them, notes
    /// it for when the upload is taken (see [`SourceMapChange`]).
    async fn change_source_map(&self, upload: &str, change: SourceMapChange) -> io::Result<()> {
        if self.refs.defers_source_maps() {
            self.pend_source_map_change(upload, change);
            return Ok(());
        }
        self.refs
            .update_source_map(change.file(), |r| change.apply(r))
            .await?;
        Ok(())
    }

    /// Notes a source-map change of `upload` for when the upload is taken.
    fn pend_source_map_change(&self, upload: &str, change: SourceMapChange) {
        self.pending_source_maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(upload.to_string())
            .or_default()
            .push(change);
    }

    pub fn refs(&self) -> &RefStore<'s> {
        &self.refs
    }

    /// The store it publishes to.
    pub fn store(&self) -> &'s dyn Storage {
        self.store
    }

    /// Writes `records` as one manifest object (records or references to them: a re-index's
    /// thousands are written from where they are, not copied).
    pub async fn write_manifest<R: std::borrow::Borrow<Record>>(
        &self,
        records: &[R],
    ) -> io::Result<Option<String>> {
        // Decisions as they are, repetitions counted (manifest::fold): a re-run of unchanged
        // inputs writes a line per build.
        let (decisions, repeated) = fold_repeats(records.iter().map(|r| r.borrow()));
        let written: Vec<&Record> = decisions.into_iter().chain(&repeated).collect();
        crate::manifest::write(
            self.store,
            &self.config.manifest_prefix,
            &written,
            self.config.gzip_manifest,
        )
        .await
    }
}
