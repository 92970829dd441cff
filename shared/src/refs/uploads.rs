//! Upload records: planned keys, the finalize that lists them, and the removal states
//! (invariant 4); listings of keys and uploads for audits.

use std::collections::BTreeSet;
use std::io;

use serde::de::DeserializeOwned;

#[cfg(doc)]
use super::layout::location_of;
use super::layout::{location_dir, source_file, UploadLayout};
use super::lease::Lease;
use super::prior::Prior;
use super::records::{
    not_removing, FileStamp, KeyRecord, PriorRead, Run, SourceRecord, UnparsedUpload, UploadRecord,
    UploadState,
};
use super::swap::{parse, Step};
use super::RefStore;
#[cfg(doc)]
use crate::storage::Storage;
use crate::storage::{ObjectInfo, STATE_PREFIX, UPLOADS_DIR};
use crate::upload_meta::UploadMeta;

impl<'s> RefStore<'s> {
    /// Every referenced key: the records, and the keys uploads list that have none, as their
    /// objects' owners stand for them (invariant 7).
    pub async fn all_keys(&self) -> io::Result<Vec<KeyRecord>> {
        if !self.traits.names_owners {
            return self.list_records(&format!("{STATE_PREFIX}/refs/")).await;
        }
        self.all_keys_of(&self.uploads().await?).await
    }

    /// [`Self::all_keys`], given every upload record.
    pub(super) async fn all_keys_of(&self, uploads: &[UploadRecord]) -> io::Result<Vec<KeyRecord>> {
        let mut records = self.recorded_keys().await?;
        if !self.traits.names_owners {
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
    pub(crate) async fn recorded_keys(&self) -> io::Result<Vec<KeyRecord>> {
        self.list_records(&format!("{STATE_PREFIX}/refs/")).await
    }

    /// The owner each of `uploads` names its objects by ([`Self::owner_token`]), to its id:
    /// an object's owner is found here, not by reading its upload's record once per key.
    pub(crate) async fn owners_of<'u>(
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
    pub(crate) async fn owned_key_unread(
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

    pub(super) async fn list_records<T: DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> io::Result<Vec<T>> {
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
        if self.traits.versions_are_free {
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
        if flat && found.as_ref().map(|r| r.state) != Some(UploadState::Removing) {
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
    /// `location_of`). A `ByLocation` store lists the location's directory: an upload
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
}
