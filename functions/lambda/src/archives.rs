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

use symdex_shared::archive::{self, Container, Event, Expanded};
use symdex_shared::manifest::{Action, Record, UploadMeta};
use symdex_shared::pipeline::{EntryOf, Indexed, Indexer, Upload};
use symdex_shared::storage::{CopySource, ObjectInfo, StorageError};
use symdex_shared::IdentifyOptions;

use crate::events::ObjectEvent;
use crate::handler::{finalize, manifest_and_liveness, upload_id, Context, Ingest, Job};

/// Entries indexed between two manifest writes: a 100,000-entry archive does not hold all its
/// records in memory, and a crash re-reports at most this many.
const FLUSH_EVERY: usize = 1_000;

/// The record of an archive (`entry: None`: empty, malformed) or of one of its entries
/// (skipped, over a limit) that published nothing.
fn nothing_published(
    event: &ObjectEvent,
    info: &ObjectInfo,
    entry: Option<&str>,
    meta: &UploadMeta,
    action: Action,
    reason: String,
) -> Indexed {
    let archive = upload_id(event, &info.etag);
    let mut record = Record {
        reason: Some(reason),
        ingest_version: event.version_id.clone(),
        ingest_etag: Some(info.etag.clone()),
        ingest_size: Some(info.size),
        meta: meta.clone(),
        ..Record::about(
            action,
            entry.map_or(archive.clone(), |e| format!("{archive}!/{e}")),
            Some(event.bucket.clone()),
            event.key.clone(),
        )
    };
    if let Some(entry) = entry {
        record.entry = Some(entry.to_string());
        record.name = Some(symdex_shared::identity::file_name_of(entry).to_string());
    }
    Indexed::nothing_published(vec![record])
}

/// Indexes every entry of the archive `event` names. Entries are flushed (manifest, then
/// finalized) every [`FLUSH_EVERY`]; the rest are returned in the job. With `bundle` (a Sentry
/// source bundle's files: entry -> the absolute path it stands for), only those entries, each
/// a source upload under its path (sourcemap.rs).
pub(crate) async fn index_archive(
    ctx: &Arc<Context>,
    event: &ObjectEvent,
    info: &ObjectInfo,
    meta: UploadMeta,
    container: Container,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<Job> {
    let store = &ctx.store;
    let indexer = Indexer::new(store, ctx.config.pipeline.clone());
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
    let archive_id = upload_id(event, &info.etag);
    let name = symdex_shared::identity::file_name_of(&event.key).to_string();
    let mut pending: Vec<Indexed> = Vec::new();
    let mut entries = 0usize;
    let mut walk = archive::Walker::start(
        Arc::new(reader),
        container,
        name,
        options,
        scratch.path().to_path_buf(),
    )?;
    while let Some(found) = walk.next().await {
        entries += 1;
        let indexed = index_entry(
            ctx,
            &indexer,
            event,
            info,
            &meta,
            &archive_id,
            found,
            bundle,
        )
        .await?;
        pending.push(indexed);
        if pending.len() >= FLUSH_EVERY {
            flush(ctx, event, info, std::mem::take(&mut pending)).await?;
        }
    }
    if let Some(ending) = archive::ending(walk.finish(), entries, container)? {
        let reason = ending.reason().to_string();
        pending.push(nothing_published(
            event,
            info,
            None,
            &meta,
            Action::from(&ending),
            reason,
        ));
    }
    Ok(Job {
        indexed: pending,
        ingest: Some(Ingest::asked(event, &info.etag)),
    })
}

/// Writes the records of `done` to the manifest, then finalizes them as the handler finalizes
/// every job (the manifest is at-least-once).
async fn flush(
    ctx: &Arc<Context>,
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
    finalize(ctx, vec![job], alive.into_iter().flatten().collect())
        .await
        .map_err(io::Error::other)?;
    Ok(())
}

/// Where an entry's bytes are: expanded by the walker, or stored in the archive at an offset.
enum Origin {
    Expanded(Expanded),
    Stored(u64),
}

#[allow(clippy::too_many_arguments)]
async fn index_entry(
    ctx: &Arc<Context>,
    indexer: &Indexer<'_>,
    event: &ObjectEvent,
    info: &ObjectInfo,
    meta: &UploadMeta,
    archive_id: &str,
    found: Event,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<Indexed> {
    let (entry, size, etag, origin) = match found {
        Event::Skipped { entry, reason } => {
            return Ok(nothing_published(
                event,
                info,
                Some(&entry),
                meta,
                Action::Skipped,
                reason,
            ))
        }
        Event::Rejected { entry, reason } => {
            return Ok(nothing_published(
                event,
                info,
                Some(&entry),
                meta,
                Action::Rejected,
                reason,
            ))
        }
        Event::File {
            entry,
            data,
            size,
            sha1,
        } => (entry, size, sha1, Origin::Expanded(data)),
        // Stored entries are not read, so their identity is the archive's word for them: its
        // CRC-32 and size (two archives with the same stored entry agree; see the notes).
        Event::Stored {
            entry,
            offset,
            size,
            crc32,
        } => (
            entry,
            size,
            format!("zip-crc32-{crc32:08x}-{size}"),
            Origin::Stored(offset),
        ),
    };
    let bundled = bundle.map(|files| files.get(&entry));
    if bundled == Some(None) {
        // A bundle's manifest and other non-source entries: part of the bundle.
        return Ok(Indexed::default());
    }
    let source_path = bundled.flatten().cloned();
    let options = IdentifyOptions {
        as_source: source_path.is_some()
            || ctx.config.is_source(&format!("{}!/{entry}", event.key)),
    };
    let version = event.version_id.as_deref();
    let (source, identified) = match &origin {
        Origin::Expanded(data) => (
            data.copy_source(),
            symdex_shared::identify_with_details(&*data.reader()?, &options),
        ),
        Origin::Stored(offset) => {
            let object =
                ctx.store
                    .open_object_range(&event.bucket, &event.key, version, *offset, size);
            let identified = match object
                .identify(|reader| symdex_shared::identify(reader, &options))
                .await
            {
                Ok((identified, _)) => identified,
                Err(StorageError::TooLarge(reason)) => {
                    return Ok(nothing_published(
                        event,
                        info,
                        Some(&entry),
                        meta,
                        Action::Rejected,
                        reason,
                    ))
                }
                Err(e) => return Err(e.into()),
            };
            let identified = match identified {
                Ok(ids) if ids.iter().any(|id| id.dwarf.is_some()) => {
                    let object = ctx.store.open_object_range(
                        &event.bucket,
                        &event.key,
                        version,
                        *offset,
                        size,
                    );
                    Ok(crate::handler::read_debug_details(object, ids).await?)
                }
                other => other,
            };
            let source = CopySource::Range {
                bucket: &event.bucket,
                key: &event.key,
                version_id: version,
                offset: *offset,
                size,
                etag: &etag,
            };
            (source, identified)
        }
    };
    let upload = Upload {
        id: format!("{archive_id}!/{entry}"),
        source,
        ingest_bucket: Some(event.bucket.clone()),
        ingest_key: event.key.clone(),
        entry: Some(EntryOf {
            path: entry.clone(),
            archive_etag: info.etag.clone(),
            archive_size: info.size,
        }),
        ingest_version: event.version_id.clone(),
        etag: etag.clone(),
        size,
        meta: meta.clone(),
        options,
        source_path,
        file_stamp: None,
    };
    indexer.index_identified(&upload, identified).await
}
