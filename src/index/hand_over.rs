//! Hand-overs re-indexed from files: what `index --recheck` of a waiting upload's input does.

use std::io;
use std::path::Path;
use std::sync::Arc;

use symdex_shared::pipeline::{Config, HandOver, Indexer};
use symdex_shared::refs::{DeferredWrites, UploadRecord};
use symdex_shared::IdentifyOptions;

use super::archives::{ArchiveLimits, LocalWalks, Unpack};
use super::lanes::index_read_file;
use super::read::read_input;
use super::sink::Sink;
use super::KeyArgs;
use crate::stamps::StampReader;

/// Hands the keys a removal freed to the uploads waiting for them (refs/, invariant 8):
/// each upload's input is indexed again as `index --recheck` would (an archive entry's whole
/// archive), if it still holds the bytes the upload was. An input gone or changed is left
/// alone: the upload stays waiting, `verify` reports the key (`waiting`).
pub struct FromFiles<'s> {
    store: &'s crate::crash::Store,
    unpack: Unpack<'s>,
    /// The deferred source-map writes of the run handing over, where it defers them: the
    /// re-indexes share them (see `refs::DeferredWrites`).
    deferred: Option<Arc<DeferredWrites>>,
    /// Inputs the re-indexes found in conflict: the run's too (a claimed source of its own
    /// meeting another product's key is its failure, not only a line on stderr).
    conflicts: std::sync::atomic::AtomicUsize,
}

impl HandOver for FromFiles<'_> {
    fn reindex<'a>(
        &'a self,
        waiter: &'a UploadRecord,
        handed: &'a std::collections::BTreeSet<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + 'a>> {
        Box::pin(self.reindex_input(waiter, handed))
    }
}

impl<'s> FromFiles<'s> {
    /// `keys` and `limits`: what `index` was given.
    pub fn new(store: &'s crate::crash::Store, keys: &'s KeyArgs, limits: ArchiveLimits) -> Self {
        FromFiles {
            store,
            unpack: Unpack { limits, keys },
            deferred: None,
            conflicts: Default::default(),
        }
    }

    /// How many re-indexed inputs were conflicts (so far).
    pub fn conflicts(&self) -> &std::sync::atomic::AtomicUsize {
        &self.conflicts
    }

    /// Re-indexes sharing `deferred`, the run's deferred source-map writes.
    pub fn sharing(mut self, deferred: &Arc<DeferredWrites>) -> Self {
        self.deferred = Some(Arc::clone(deferred));
        self
    }

    async fn reindex_input(
        &self,
        waiter: &UploadRecord,
        handed: &std::collections::BTreeSet<String>,
    ) -> io::Result<()> {
        let path = Path::new(&waiter.source);
        if !path.is_file() {
            return Ok(());
        }
        let unpack = self.unpack;
        let config = Config {
            recheck: true,
            handed: handed.clone(),
            ..unpack.keys.config()
        };
        let mut indexer = Indexer::new(self.store, config);
        if let Some(deferred) = &self.deferred {
            indexer = indexer.defer_source_map_writes_to(Arc::clone(deferred));
        }
        let walks = LocalWalks::new(self.store.inner(), unpack);
        let mut sink = Sink::new(&indexer, false, walks);
        // Identified as the upload was: its record says whether it was a source.
        let options = IdentifyOptions {
            as_source: waiter.as_source || unpack.keys.sources.wants_source(path),
        };
        let meta = &waiter.meta;
        // The bytes the upload was: its own, or (an entry) its archive's.
        let archive_etag = waiter.ingest_etag.as_deref();
        // Read whatever stamps say (`recheck`): the bytes must still be the upload's.
        let mut stamps = StampReader::new(self.store);
        let mut read = read_input(indexer.refs(), &mut stamps, path, options, true, None).await?;
        read.source_path.clone_from(&waiter.source_path);
        let same = match &waiter.entry {
            None => read.upload(meta).id == waiter.upload,
            Some(_) => archive_etag == Some(read.etag.as_str()),
        };
        if !same {
            return Ok(());
        }
        index_read_file(&mut sink, self.store, *read, meta).await?;
        sink.flush().await?;
        let conflicts = sink.summary.conflicts;
        self.conflicts
            .fetch_add(conflicts, std::sync::atomic::Ordering::Relaxed);
        let upload = crate::manifest_cmd::shown(&waiter.upload);
        say_err!("symdex: handed over to {upload}: {}", sink.summary);
        Ok(())
    }
}
