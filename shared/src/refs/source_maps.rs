//! Join records of sources and debug files (`_symdex/sourcemap/`), read through a bounded
//! cache and written at once or deferred to the end of a run.

use std::io;
use std::sync::Arc;

use super::prior::Prior;
use super::swap::{parse, Step};
use super::RefStore;
use crate::sourcemap::SourceMapRecord;
use crate::storage::{Precondition, Versioned};

/// A source-map record read before it is changed ([`RefStore::read_source_map`]).
pub(crate) struct SourceMapRead {
    /// What the store held, for the swap; [`Prior::Unread`]: kept by a sole writer deferring
    /// its writes, no version to swap on.
    pub(super) read: Prior<Versioned>,
    pub record: Arc<SourceMapRecord>,
}

/// Deferred source-map records: file -> (version read, record now, changed since read).
pub(super) type DeferredSourceMaps =
    std::collections::HashMap<String, (Option<String>, Arc<SourceMapRecord>, bool)>;

/// A sole writer's deferred source-map writes ([`RefStore::defer_source_map_writes`]),
/// shared by every [`RefStore`] of its run ([`RefStore::defer_source_map_writes_to`]): a
/// removal the run finishes hands its keys over to uploads indexed again by an indexer of
/// their own, inside the run. Shared, each sees the others' changes, and what one writes is
/// the version the others change on; apart, the run's writes failed on the versions the
/// hand-over's had replaced.
#[derive(Default)]
pub struct DeferredWrites {
    pub(super) records: std::sync::Mutex<DeferredSourceMaps>,
    /// One flush at a time: two at once would both write a record changed since the last
    /// one, the second on the version the first replaced.
    pub(super) flushing: tokio::sync::Mutex<()>,
}

/// A parsed source-map record and the version it was parsed from.
pub(super) type ParsedSourceMap = (String, Arc<SourceMapRecord>);

/// Source-map records kept parsed at most (a few per source base name a run meets).
pub(super) const PARSED_SOURCE_MAPS: usize = 256;

impl<'s> RefStore<'s> {
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
    pub(crate) fn defers_source_maps(&self) -> bool {
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
            let written = if record.is_empty() {
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
    pub(super) async fn update_deferred_source_map(
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

    /// Changes one source join record (sourcemap.rs) with `f`, which returns whether it
    /// changed anything; returns the record as swapped, so the caller sees every offer and
    /// want written before its own (an empty record is deleted).
    ///
    /// The record a run last read or wrote is kept parsed, and shared rather than copied: in
    /// a store-wide scope every debug file naming `stdio.h` changes the same record of up to
    /// 2 x 256 entries, and copying it three times per change was a tenth of a fresh index.
    pub(crate) async fn update_source_map(
        &self,
        file: &str,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_guessing(file, false, f).await
    }

    /// [`Self::update_source_map`]; `absent`: the record is taken to be absent and created
    /// without a read (a wrong guess fails and reads). Only for a change `f` makes to any
    /// record: a decision to keep one is never taken on the guess.
    pub(crate) async fn update_source_map_guessing(
        &self,
        file: &str,
        absent: bool,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_from(file, Prior::absent_if(absent), f)
            .await
    }

    /// A source-map record as it stands for this process, read for a later
    /// [`Self::update_source_map_read`]: a caller acting on what it holds before changing it
    /// swaps on this read (no second read where nothing changed in between).
    pub(crate) async fn read_source_map(&self, file: &str) -> io::Result<SourceMapRead> {
        if self.deferred_source_maps.is_some() {
            let record = self.source_map(file).await?;
            return Ok(SourceMapRead {
                read: Prior::Unread,
                record,
            });
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
            read: Prior::of(read),
            record,
        })
    }

    /// [`Self::update_source_map`], starting from `read`: its version is swapped on (where
    /// the record changed since, it is read again and `f` runs on that).
    pub(crate) async fn update_source_map_read(
        &self,
        file: &str,
        read: SourceMapRead,
        f: impl FnMut(&mut SourceMapRecord) -> bool,
    ) -> io::Result<Arc<SourceMapRecord>> {
        self.update_source_map_from(file, read.read, f).await
    }

    /// [`Self::update_source_map`] from a read made before (`prefetched`: [`Prior::Absent`]
    /// taken to be absent; [`Prior::Unread`]: read here).
    pub(super) async fn update_source_map_from(
        &self,
        file: &str,
        prefetched: Prior<Versioned>,
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
            } else if record.is_empty() {
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
    pub(super) fn remember_source_map(
        &self,
        file: &str,
        version: &str,
        record: &Arc<SourceMapRecord>,
    ) {
        let mut cache = self
            .parsed_source_maps
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if cache.len() >= PARSED_SOURCE_MAPS {
            cache.clear();
        }
        cache.insert(file.to_string(), (version.to_string(), Arc::clone(record)));
    }
}
