//! Upload records ([`UploadRecord`]): one upload and everything it published, its planned
//! keys, the finalize that lists them, and the removal states (invariant 4).

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::layout::location_of;
use super::layout::{location_dir, source_file, UploadLayout};
use super::lease::Lease;
use super::prior::Prior;
use super::sources::{FileStamp, SourceRecord};
use super::swap::{parse, Step};
use super::RefStore;
use crate::storage::{Versioned, UPLOADS_DIR};
use crate::upload_meta::UploadMeta;

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

/// An upload record that may still gain keys or metadata: not being removed.
pub(super) fn not_removing(record: &UploadRecord) -> bool {
    record.state != UploadState::Removing
}

impl<'s> RefStore<'s> {
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
        if self.traits.versions_are_free {
            return Ok(None);
        }
        let file = self.upload_file(upload).await?;
        let bytes = self.store.read(&file).await?;
        Ok(Some(UnparsedUpload { file, bytes }))
    }

    /// Lists `keys` as the upload's planned keys before any reference to them is added
    /// (invariant 4), creating the upload record in `indexing` state, and registers the upload
    /// with its source: in a [`UploadLayout::ByLocation`] store the record, named under its
    /// location, is the registration; a `Flat` one adds it to the location's source record,
    /// where the store keeps them ([`crate::storage::StoreTraits::source_records`]: a local
    /// store finds a location's uploads among all upload records). Returns the record it
    /// found, as it was (`None`: a new upload).
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
                prior.map_or(Prior::Unread, |p| Prior::of(p.0)),
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
        if flat
            && self.traits().source_records
            && found.as_ref().map(|r| r.state) != Some(UploadState::Removing)
        {
            // A new upload usually comes from a new location: its record is created without
            // reading it first (a wrong guess fails and reads).
            let guess = Prior::absent_if(found.is_none());
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
    pub(crate) async fn plan_more(
        &self,
        upload: &str,
        keys: &BTreeSet<String>,
    ) -> io::Result<bool> {
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
    pub(crate) async fn forget_answer(&self, upload: &str) -> io::Result<()> {
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
    pub(crate) async fn finalize_read(
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
        let mut prefetched = match planned.and_then(|p| p.0) {
            Some(written) => Prior::Read(written),
            None => Prior::Unread,
        };
        let file = self.upload_file(upload).await?;
        loop {
            let mut on_prefetch = matches!(prefetched, Prior::Read(_));
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
    pub(super) fn finalize_step(
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
    pub(crate) async fn update_meta(
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
    pub(super) async fn note_removed(&self, upload: &str, key: &str) -> io::Result<()> {
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
    pub(super) async fn unregister_source(&self, record: &UploadRecord) -> io::Result<()> {
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

    /// The uploads indexed from one ingest location: `source` as upload records name it
    /// (`s3://bucket/key` or a path), `location` as its upload ids begin (`s3:bucket/key`,
    /// `location_of`). A `ByLocation` store lists the location's directory: an upload
    /// whose record was created before the listing is in it (S3 lists what was written). A
    /// flat store keeping no source records (a local store) reads every upload record: one
    /// created before the listing is in it alike (a local listing reads the directory).
    pub async fn uploads_of_source(
        &self,
        source: &str,
        location: &str,
    ) -> io::Result<BTreeSet<String>> {
        let flat = self.layout().await? == UploadLayout::Flat;
        if flat && !self.traits().source_records {
            return Ok(self
                .uploads()
                .await?
                .into_iter()
                .filter(|record| record.source == source)
                .map(|record| record.upload)
                .collect());
        }
        if flat {
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
}
