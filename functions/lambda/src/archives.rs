//! Where the driver's outcomes for one ingest object go ([`ObjectSink`]), and how archives
//! dropped into the ingest bucket (zip, nupkg, tar.*, .gz/.zst/.xz/.bz2, CAB) are walked: each
//! entry is an upload of its own, identified, keyed and published like a loose object.
//!
//! Redelivery converges: entry upload ids are the archive's upload id plus the entry path, so
//! a retried archive finds its entries' uploads and reports them unchanged.

use std::io;
use std::sync::Arc;

use symdex_shared::archive::{self, Container, Walker};
use symdex_shared::pipeline::{HandOver, Indexed, Sink, Upload};
use symdex_shared::storage::ObjectInfo;

use crate::batch::{finalize, manifest_and_liveness, Ingest, Job};
use crate::context::{Context, ObjectBytes};
use crate::events::ObjectEvent;

/// Entries indexed between two manifest writes: a 100,000-entry archive does not hold all its
/// records in memory, and a crash re-reports at most this many.
const FLUSH_EVERY: usize = 1_000;

/// The indexer Lambda's part in the driver's run of one ingest object (`Indexer::index`): its
/// outcomes kept for the message's job, an archive (or a source bundle) walked by ranged GETs
/// with its stored entries read and copied in place, its entries flushed every
/// [`FLUSH_EVERY`], its source rules.
pub(crate) struct ObjectSink<'a> {
    ctx: &'a Arc<Context>,
    /// Who is handed the keys an upload taken back at a flush freed (the handler's re-index).
    hand_over: &'a dyn HandOver,
    event: &'a ObjectEvent,
    info: &'a ObjectInfo,
    /// What the object came to, not flushed yet.
    pub(crate) pending: Vec<Indexed>,
    /// An archive (or a bundle's files) was walked: the job's liveness check is asked of the
    /// archive.
    pub(crate) walked: bool,
    /// The scratch directory of the walk (larger entries are expanded there).
    scratch: Option<tempfile::TempDir>,
}

impl<'a> ObjectSink<'a> {
    pub(crate) fn new(
        ctx: &'a Arc<Context>,
        hand_over: &'a dyn HandOver,
        event: &'a ObjectEvent,
        info: &'a ObjectInfo,
    ) -> Self {
        ObjectSink {
            ctx,
            hand_over,
            event,
            info,
            pending: Vec::new(),
            walked: false,
            scratch: None,
        }
    }
}

impl Sink for ObjectSink<'_> {
    type Range = ObjectBytes;

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.pending.push(indexed);
        if self.walked && self.pending.len() >= FLUSH_EVERY {
            let done = std::mem::take(&mut self.pending);
            flush(self.ctx, self.hand_over, self.event, self.info, done).await?;
        }
        Ok(())
    }

    fn wants_source(&self, path: &str) -> bool {
        self.ctx
            .config
            .is_source(&format!("{}!/{path}", self.event.key))
    }

    /// The archive is never downloaded whole: the shared archive layer reads it through
    /// ranged GETs on a thread of its own, and hands over one entry at a time (small ones in
    /// memory, larger ones in a scratch file under /tmp). A zip entry stored uncompressed is
    /// not read beyond what identification needs: it is published by ranged server-side
    /// part copies (`range`).
    fn walk(&mut self, upload: &Upload<'_>, container: Container) -> io::Result<Option<Walker>> {
        let event = self.event;
        let version = event.version_id.as_deref();
        let reader = self
            .ctx
            .store
            .open_object(&event.bucket, &event.key, version, self.info.size)
            .blocking(tokio::runtime::Handle::current());
        let scratch = self.scratch.insert(tempfile::tempdir()?);
        let options = archive::Options {
            limits: self.ctx.config.archive_limits,
            stored_ranges: true,
            memory: self.ctx.config.decoder_memory,
        };
        self.walked = true;
        let name = upload.name().to_string();
        let scratch = scratch.path().to_path_buf();
        archive::Walker::start(Arc::new(reader), container, name, options, scratch).map(Some)
    }

    fn range(&self, offset: u64, size: u64) -> Option<ObjectBytes> {
        let event = self.event;
        let version = event.version_id.as_deref();
        let object =
            self.ctx
                .store
                .open_object_range(&event.bucket, &event.key, version, offset, size);
        Some(ObjectBytes::entry(object))
    }
}

/// Writes the records of `done` to the manifest, then finalizes them as the handler finalizes
/// every job (the manifest is at-least-once).
async fn flush(
    ctx: &Arc<Context>,
    hand_over: &dyn HandOver,
    event: &ObjectEvent,
    info: &ObjectInfo,
    done: Vec<Indexed>,
) -> io::Result<()> {
    let job = Job {
        indexed: done,
        ingest: Some(Ingest::asked(event, &info.etag)),
    };
    let records = job.records().cloned().collect();
    let alive = manifest_and_liveness(ctx, records, &[std::slice::from_ref(&job)])
        .await
        .map_err(io::Error::other)?;
    finalize(
        ctx,
        hand_over,
        vec![job],
        alive.into_iter().flatten().collect(),
    )
    .await
    .map_err(io::Error::other)?;
    Ok(())
}
