//! Archives dropped into the ingest bucket (zip, nupkg, tar.*, .gz/.zst/.xz/.bz2, CAB): each
//! entry is an upload of its own, identified, keyed and published like a loose object.
//!
//! The archive is never downloaded whole: the shared archive layer reads it through ranged
//! GETs on a thread of its own, and hands over one entry at a time (small ones in memory,
//! larger ones in a scratch file under /tmp). A zip entry stored uncompressed is not read at
//! all beyond what identification needs: it is published by ranged server-side part copies.
//!
//! Redelivery converges: entry upload ids are the archive's upload id plus the entry path, so
//! a retried archive finds its entries' uploads and reports them unchanged.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use symdex_shared::archive::{self, Container};
use symdex_shared::manifest::Action;
use symdex_shared::pipeline::{
    self, ArchiveSite, HandOver, Indexed, Indexer, Input, StoredEntry, Upload,
};
use symdex_shared::storage::{CopySource, ObjectInfo, StorageError};
use symdex_shared::upload_meta::UploadMeta;

use crate::batch::{finalize, manifest_and_liveness, Ingest, Job};
use crate::context::{identify_named, Context};
use crate::events::ObjectEvent;

/// Entries indexed between two manifest writes: a 100,000-entry archive does not hold all its
/// records in memory, and a crash re-reports at most this many.
const FLUSH_EVERY: usize = 1_000;

/// Indexes every entry of the archive `event` names. Entries are flushed (manifest, then
/// finalized) every [`FLUSH_EVERY`]; the rest are returned in the job. With `bundle` (a Sentry
/// source bundle's files: entry -> the absolute path it stands for), only those entries, each
/// a source upload under its path (sourcemap.rs). The walk itself is the pipeline's
/// (`pipeline::index_archive`), as for the CLI.
pub(crate) async fn index_archive(
    ctx: &Arc<Context>,
    hand_over: &dyn HandOver,
    event: &ObjectEvent,
    info: &ObjectInfo,
    meta: UploadMeta,
    container: Container,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<Job> {
    let store = &ctx.store;
    // An entry no format claims may be named by a debug file coming later, which has the
    // archive walked again through the same re-index (sourcemap.rs).
    let indexer =
        Indexer::new(store, ctx.config.pipeline.clone()).claiming_sources_through(hand_over);
    let version = event.version_id.as_deref();
    let reader = store
        .open_object(&event.bucket, &event.key, version, info.size)
        .blocking(tokio::runtime::Handle::current());
    let scratch = tempfile::tempdir()?;
    let options = archive::Options {
        limits: ctx.config.archive_limits,
        stored_ranges: true,
        memory: ctx.config.decoder_memory,
    };
    let archive = Input::s3_object(
        &event.bucket,
        &event.key,
        version,
        &info.etag,
        info.size,
        &meta,
    );
    let name = symdex_shared::identity::file_name_of(&event.key).to_string();
    let walk = archive::Walker::start(
        Arc::new(reader),
        container,
        name,
        options,
        scratch.path().to_path_buf(),
    )?;
    let mut site = S3Site {
        ctx,
        hand_over,
        event,
        info,
        pending: Vec::new(),
    };
    pipeline::index_archive(&indexer, &archive, container, walk, &mut site, bundle).await?;
    Ok(Job {
        indexed: site.pending,
        ingest: Some(Ingest::asked(event, &info.etag)),
    })
}

/// The indexer Lambda's part in an archive's walk: its source rules, stored entries copied by
/// range server-side, records flushed every [`FLUSH_EVERY`] entries.
struct S3Site<'a> {
    ctx: &'a Arc<Context>,
    /// Who is handed the keys an upload taken back at a flush freed (the handler's re-index).
    hand_over: &'a dyn HandOver,
    event: &'a ObjectEvent,
    info: &'a ObjectInfo,
    pending: Vec<Indexed>,
}

impl ArchiveSite for S3Site<'_> {
    fn wants_source(&self, path: &str) -> bool {
        self.ctx
            .config
            .is_source(&format!("{}!/{path}", self.event.key))
    }

    async fn index_stored(
        &mut self,
        indexer: &Indexer<'_>,
        archive: &Input,
        stored: StoredEntry,
    ) -> io::Result<Indexed> {
        let (ctx, event) = (self.ctx, self.event);
        let version = event.version_id.as_deref();
        let StoredEntry {
            entry,
            offset,
            size,
            etag,
            options,
            source_path,
        } = stored;
        let object = ctx
            .store
            .open_object_range(&event.bucket, &event.key, version, offset, size);
        let identified = match object
            .identify(|reader| symdex_shared::identify(reader, &options))
            .await
        {
            Ok((identified, _)) => identified,
            Err(StorageError::TooLarge(reason)) => {
                return Ok(archive.nothing_published(Some(&entry), Action::Rejected, reason))
            }
            Err(e) => return Err(e.into()),
        };
        let identified = match identified {
            Ok(ids) if ids.iter().any(|id| id.dwarf.is_some()) => {
                let object =
                    ctx.store
                        .open_object_range(&event.bucket, &event.key, version, offset, size);
                Ok(crate::context::read_debug_details(object, ids).await?)
            }
            other => other,
        };
        let source = CopySource::Range {
            bucket: &event.bucket,
            key: &event.key,
            version_id: version,
            offset,
            size,
            etag: &etag,
        };
        let upload = Upload::from_entry(archive, &entry, source, &etag, size, options, source_path);
        let object = ctx
            .store
            .open_object_range(&event.bucket, &event.key, version, offset, size);
        if let Some(ids) = identify_named(indexer, &upload, &object, &identified).await? {
            return indexer
                .index_identified(&upload.as_named_source(), Ok(ids))
                .await;
        }
        indexer.index_identified(&upload, identified).await
    }

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.pending.push(indexed);
        if self.pending.len() >= FLUSH_EVERY {
            let done = std::mem::take(&mut self.pending);
            flush(self.ctx, self.hand_over, self.event, self.info, done).await?;
        }
        Ok(())
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
