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

use std::io;
use std::sync::Arc;

use symdex_shared::archive::{self, Container, Event, ExpandError};
use symdex_shared::manifest::{Action, Record, UploadMeta};
use symdex_shared::pipeline::{EntryOf, Indexed, Indexer, Upload};
use symdex_shared::storage::{CopySource, ObjectInfo, StorageError};
use symdex_shared::IdentifyOptions;

use crate::events::ObjectEvent;
use crate::handler::{ingest_alive, upload_id, Context, Job};

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
/// finalized) every [`FLUSH_EVERY`]; the rest are returned in the job.
pub(crate) async fn index_archive(
    ctx: &Arc<Context>,
    event: &ObjectEvent,
    info: &ObjectInfo,
    meta: UploadMeta,
    container: Container,
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
        let indexed = index_entry(ctx, &indexer, event, info, &meta, &archive_id, found).await?;
        pending.push(indexed);
        if pending.len() >= FLUSH_EVERY {
            flush(ctx, &indexer, event, info, std::mem::take(&mut pending)).await?;
        }
    }
    let walked = walk.finish();
    match walked {
        Ok(()) if entries == 0 => {
            let reason = format!("an empty {} archive (no file entries)", container.as_str());
            pending.push(nothing_published(
                event,
                info,
                None,
                &meta,
                Action::Skipped,
                reason,
            ));
        }
        Ok(()) => {}
        // The archive is malformed: recorded (after whatever entries came before the fault).
        Err(ExpandError::Malformed(reason)) => {
            let reason = format!("a malformed {} archive: {reason}", container.as_str());
            pending.push(nothing_published(
                event,
                info,
                None,
                &meta,
                Action::Rejected,
                reason,
            ));
        }
        Err(ExpandError::Io(e)) => return Err(e),
    }
    Ok(Job {
        indexed: pending,
        ingest: Some((event.clone(), info.etag.clone())),
    })
}

/// Writes the records of `done` to the manifest, then finalizes them (the order every
/// handler keeps: the manifest is at-least-once).
async fn flush(
    ctx: &Arc<Context>,
    indexer: &Indexer<'_>,
    event: &ObjectEvent,
    info: &ObjectInfo,
    done: Vec<Indexed>,
) -> io::Result<()> {
    let records: Vec<Record> = done.iter().flat_map(|i| i.records.clone()).collect();
    indexer.write_manifest(&records).await?;
    let alive = ingest_alive(ctx, event, &info.etag).await?;
    let mut undone = Vec::new();
    for indexed in &done {
        undone.extend(indexer.finalize(indexed, alive).await?);
    }
    indexer.write_manifest(&undone).await?;
    Ok(())
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
) -> io::Result<Indexed> {
    let (entry, size, etag, data, range) = match found {
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
        } => (entry, size, sha1, Some(data), None),
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
            None,
            Some(offset),
        ),
    };
    let options = IdentifyOptions {
        as_source: ctx.config.is_source(&format!("{}!/{entry}", event.key)),
    };
    let version = event.version_id.as_deref();
    let (source, identified) = match (&data, range) {
        (Some(data), _) => (
            data.copy_source(),
            symdex_shared::identify(&*data.reader()?, &options),
        ),
        (None, Some(offset)) => {
            let object =
                ctx.store
                    .open_object_range(&event.bucket, &event.key, version, offset, size);
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
            let source = CopySource::Range {
                bucket: &event.bucket,
                key: &event.key,
                version_id: version,
                offset,
                size,
                etag: &etag,
            };
            (source, identified)
        }
        (None, None) => unreachable!("every entry has data or a range"),
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
    };
    indexer.index_identified(&upload, identified).await
}
