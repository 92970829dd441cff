//! The one way in for an upload: [`Indexer::index`] drives every upload of both front ends
//! and of archive entries through the same steps —
//!
//! 1. look up its upload record (a re-delivery is answered from it: [`RecordLookup`]);
//! 2. identify its bytes ([`ByteSource::identify`]): formats, or an archive;
//! 3. the store's marker objects, once a run, before anything is published ([`Markers`]);
//! 4. an archive: its entries walked, each an upload of its own (steps 1–2 and 4–7);
//! 5. a debug file's details ([`ByteSource::debug_details`]);
//! 6. a file no format claims, named by a debug file of its scope: its source
//!    (`unclaimed.rs`);
//! 7. planned, published and recorded (`index.rs`), then a source bundle's files walked.
//!
//! Every outcome goes to the front end's [`Sink`], in that order.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::bytes::{ByteSource, Identified, ReaderBytes};
use super::sink::Sink;
use super::unclaimed::admits;
use super::upload::{Indexed, Input, Lookup, Upload};
use super::Indexer;
use crate::archive::{self, Container, Event};
use crate::formats::{FormatError, IdentifyOptions};
use crate::identity::Identity;
use crate::manifest::Action;
use crate::refs::{PriorRead, UploadRecord};
use crate::storage::CopySource;

/// How the driver learns whether an upload was indexed before.
#[derive(Debug)]
pub enum RecordLookup {
    /// Read its upload record first: a re-delivery of a complete run is answered from it.
    Read,
    /// Read ahead by the caller, who vouches that it is as good as a read made now (the
    /// CLI's reader thread, while nothing changed the store since).
    ReadAhead(Box<ReadAhead>),
    /// Taken to be absent, unread (a message's first delivery is most likely a new upload):
    /// the plan creates it without a read, and answers from it if it is there after all.
    GuessAbsent,
    /// Not looked up: the plan reads it, and the upload runs in full (an archive's stored
    /// entries, and local archives, which have no record of their own).
    AtPlan,
}

/// An upload record read ahead: `found` and `prior` as `RefStore::upload_read` returned
/// them, `time` taken before that read.
#[derive(Debug)]
pub struct ReadAhead {
    pub found: Option<UploadRecord>,
    pub prior: Option<PriorRead>,
    pub time: String,
}

/// Whether the store-level marker objects (SymStore's `index2.txt`) were written: once a
/// run, before its first publish. Each indexer has its own; a front end whose run spans
/// several indexers (the Lambda's process, a removal's hand-overs) shares one.
#[derive(Debug, Clone, Default)]
pub struct Markers(Arc<AtomicBool>);

/// What one upload came to, before the sink takes it. (Its variants differ in size: one
/// value an upload, moved once.)
#[allow(clippy::large_enum_variant)]
enum Came<'a> {
    /// Answered from its upload record: indexed before under the same plan.
    Answered(Indexed),
    /// Refused before it was identified.
    Refused(Indexed),
    /// An archive: its entries are walked.
    Archive(Container),
    /// Indexed, as `upload` (itself, or the source a debug file names); `bundle`: a source
    /// bundle's files (entry -> the path it stands for), to walk after it.
    Indexed {
        upload: Upload<'a>,
        named: bool,
        indexed: Indexed,
        bundle: BTreeMap<String, String>,
    },
}

impl<'s> Indexer<'s> {
    /// Shares `markers` with the run's other indexers: the marker objects are written once.
    pub fn sharing_markers(mut self, markers: &Markers) -> Self {
        self.markers = markers.clone();
        self
    }

    /// Indexes one upload whose bytes `bytes` reads, and, an archive or a source bundle, its
    /// entries: every outcome to `sink`, in order. `Err` only for storage failures and busy
    /// keys (worth a retry); everything about the artifact itself ends in its records. The
    /// caller finalizes each outcome ([`Self::finalize`]) once its records are in the
    /// manifest.
    pub async fn index<B: ByteSource, K: Sink>(
        &self,
        upload: &Upload<'_>,
        lookup: RecordLookup,
        bytes: &B,
        sink: &mut K,
    ) -> io::Result<()> {
        match self.index_one(upload, lookup, bytes, true).await? {
            Came::Answered(indexed) => {
                sink.known(upload);
                sink.push(indexed).await
            }
            Came::Refused(indexed) => sink.push(indexed).await,
            // Boxed, as the bundle's below: a walk's future is large, and most uploads are
            // no archive (every input's future would carry it, moved at each call).
            Came::Archive(container) => Box::pin(self.walk(upload, container, sink, None)).await,
            Came::Indexed {
                upload: indexed_as,
                named,
                indexed,
                bundle,
            } => {
                if named || indexed.upload.is_some() {
                    sink.known(&indexed_as);
                }
                sink.push(indexed).await?;
                if bundle.is_empty() {
                    return Ok(());
                }
                Box::pin(self.walk(upload, Container::Zip, sink, Some(&bundle))).await
            }
        }
    }

    /// Steps 1–7 of one upload, its walks left to the caller. `top`: an upload of its own,
    /// not an archive's entry (the only kind whose keys may wait for the finalize).
    async fn index_one<'a, B: ByteSource>(
        &self,
        upload: &Upload<'a>,
        lookup: RecordLookup,
        bytes: &B,
        top: bool,
    ) -> io::Result<Came<'a>> {
        let prior = match self.look_up(upload, lookup).await? {
            Lookup::Indexed(unchanged) => return Ok(Came::Answered(*unchanged)),
            Lookup::Unindexed(prior) => prior,
        };
        let identified = match bytes.identify(&upload.options).await? {
            Identified::Formats(identified) => identified,
            Identified::Archive(container) => {
                Box::pin(self.write_markers()).await?;
                return Ok(Came::Archive(container));
            }
            Identified::Refused(reason) => return Ok(Came::Refused(upload.refused(reason))),
        };
        if !self.markers.0.load(Ordering::Acquire) {
            Box::pin(self.write_markers()).await?;
        }
        let identified = match identified {
            Ok(ids) if ids.iter().any(Identity::has_details) => {
                Ok(bytes.debug_details(ids).await?)
            }
            other => other,
        };
        // Boxed, as the rare steps here: their futures would enlarge every upload's.
        let named = match &identified {
            Err(FormatError::Unrecognized(_)) => {
                Box::pin(self.named_source(upload, bytes, &identified)).await?
            }
            _ => None,
        };
        let (upload, identified, named) = match named {
            Some(ids) => (upload.as_named_source(), Ok(ids), true),
            None => (upload.clone(), identified, false),
        };
        let bundle: BTreeMap<String, String> = match &identified {
            Ok(ids) if top => ids.iter().flat_map(|id| id.bundle_files.clone()).collect(),
            _ => BTreeMap::new(),
        };
        // Only a lone upload's keys may wait for its finalize: a bundle's files, indexed
        // next, might wait on them (a hostile bundle can name a key of its own).
        let at_finalize = top && bundle.is_empty() && self.list_at_finalize;
        // Boxed: planning and publishing is the largest future of all, and every caller's
        // future (the CLI's writer, each lane, the Lambda's task) would carry it, moved at each
        // call of an upload answered from its record too.
        let indexed =
            Box::pin(self.index_looked_up(&upload, identified, prior, at_finalize)).await?;
        Ok(Came::Indexed {
            upload,
            named,
            indexed,
            bundle,
        })
    }

    /// Step 1: whether `upload` was indexed before under the same plan (its `unchanged`
    /// records), else what the plan should take its record to be.
    async fn look_up(&self, upload: &Upload<'_>, lookup: RecordLookup) -> io::Result<Lookup> {
        Ok(match lookup {
            RecordLookup::Read => self.already_indexed(upload).await?,
            RecordLookup::ReadAhead(ahead) => {
                let ReadAhead { found, prior, time } = *ahead;
                self.looked_up(upload, found, prior, &time)
            }
            RecordLookup::GuessAbsent => Lookup::Unindexed(Some(PriorRead::absent())),
            RecordLookup::AtPlan => Lookup::Unindexed(None),
        })
    }

    /// Step 3: the store-level marker objects, written once a run (see [`Markers`]).
    async fn write_markers(&self) -> io::Result<()> {
        if self.markers.0.load(Ordering::Acquire) {
            return Ok(());
        }
        for (key, body) in self.config.marker_objects() {
            if self.store.size(&key).await?.is_none() {
                self.store.put(&key, body).await?;
            }
        }
        self.markers.0.store(true, Ordering::Release);
        Ok(())
    }

    /// Step 6: for an upload `identified` as nothing known whose bytes may be text, named by
    /// a debug file of its scope: what it is as a source, for indexing it as one
    /// (`Upload::as_named_source`). `None`: index it as identified (also where its read as
    /// a source is refused).
    async fn named_source<B: ByteSource>(
        &self,
        upload: &Upload<'_>,
        bytes: &B,
        identified: &Result<Vec<Identity>, FormatError>,
    ) -> io::Result<Option<Vec<Identity>>> {
        if !matches!(identified, Err(FormatError::Unrecognized(_))) || !bytes.may_be_text().await? {
            return Ok(None);
        }
        let Some(named) = self.named_by(upload, identified).await? else {
            return Ok(None);
        };
        let as_source = match bytes.identify(&IdentifyOptions { as_source: true }).await? {
            Identified::Formats(Err(FormatError::Io(e))) => return Err(e),
            Identified::Formats(as_source) => as_source,
            Identified::Archive(_) | Identified::Refused(_) => return Ok(None),
        };
        Ok(admits(&named, &as_source).then(|| as_source.ok()).flatten())
    }

    /// Step 4: every entry the sink's walk of `upload` hands over is an upload of its own
    /// ([`Upload::from_entry`]), and ends in a record, as does a malformed or empty archive;
    /// a read error is returned (worth a retry). With `bundle` (a Sentry source bundle's
    /// files: entry -> the absolute path it stands for), only those entries, each a source
    /// upload under its path (sourcemap.rs).
    async fn walk<K: Sink>(
        &self,
        upload: &Upload<'_>,
        container: Container,
        sink: &mut K,
        bundle: Option<&BTreeMap<String, String>>,
    ) -> io::Result<()> {
        let Some(mut walk) = sink.walk(upload, container)? else {
            return Ok(());
        };
        let archive = upload.input();
        let mut entries = 0usize;
        while let Some(event) = walk.next().await {
            entries += 1;
            if let Some(indexed) = self.index_entry(&archive, event, &*sink, bundle).await? {
                sink.push(indexed).await?;
            }
        }
        if let Some(ending) = archive::ending(walk.finish(), entries, container)? {
            let action = Action::from(&ending);
            let reason = ending.reason().to_string();
            sink.push(archive.nothing_published(None, action, reason))
                .await?;
        }
        Ok(())
    }

    /// One event of an archive's walk: what its entry came to (`None`: a bundle's entry
    /// that is none of its source files, part of it).
    async fn index_entry<K: Sink>(
        &self,
        archive: &Input,
        event: Event,
        sink: &K,
        bundle: Option<&BTreeMap<String, String>>,
    ) -> io::Result<Option<Indexed>> {
        // What a file entry is indexed as: the path a bundle's source stands for, and whether
        // it is a source. `None`: a bundle's manifest or other non-source entry.
        let indexed_as = |entry: &str| -> Option<(Option<String>, IdentifyOptions)> {
            let source_path = match bundle.map(|files| files.get(entry).cloned()) {
                Some(None) => return None,
                found => found.flatten(),
            };
            let as_source = source_path.is_some() || sink.wants_source(entry);
            Some((source_path, IdentifyOptions { as_source }))
        };
        let indexed = match event {
            Event::Skipped { entry, reason } => {
                archive.nothing_published(Some(&entry), Action::Skipped, reason)
            }
            Event::Rejected { entry, reason } => {
                archive.nothing_published(Some(&entry), Action::Rejected, reason)
            }
            Event::File {
                entry,
                data,
                size,
                sha1,
            } => {
                let Some((source_path, options)) = indexed_as(&entry) else {
                    return Ok(None);
                };
                let source = data.copy_source();
                let upload =
                    Upload::from_entry(archive, &entry, source, &sha1, size, options, source_path);
                let reader = data.reader()?;
                let bytes = ReaderBytes(&*reader);
                self.entry_outcome(&upload, RecordLookup::Read, &bytes)
                    .await?
            }
            // Stored entries are not read, so their identity is the archive's word for them:
            // its CRC-32 and size (two archives with the same stored entry agree).
            Event::Stored {
                entry,
                offset,
                size,
                crc32,
            } => {
                let Some((source_path, options)) = indexed_as(&entry) else {
                    return Ok(None);
                };
                let Some(bytes) = sink.range(offset, size) else {
                    let reason = "a stored entry given as a range".to_string();
                    return Ok(Some(archive.nothing_published(
                        Some(&entry),
                        Action::Rejected,
                        reason,
                    )));
                };
                let etag = format!("zip-crc32-{crc32:08x}-{size}");
                let source = CopySource::Range {
                    bucket: archive.bucket.as_deref().unwrap_or_default(),
                    key: &archive.key,
                    version_id: archive.version.as_deref(),
                    offset,
                    size,
                    etag: &etag,
                };
                let upload =
                    Upload::from_entry(archive, &entry, source, &etag, size, options, source_path);
                self.entry_outcome(&upload, RecordLookup::AtPlan, &bytes)
                    .await?
            }
        };
        Ok(Some(indexed))
    }

    /// An archive entry's upload indexed (an entry is never walked itself: a nested
    /// archive is expanded by the walk, and a bundle inside an archive is a file).
    async fn entry_outcome<B: ByteSource>(
        &self,
        upload: &Upload<'_>,
        lookup: RecordLookup,
        bytes: &B,
    ) -> io::Result<Indexed> {
        Ok(
            match Box::pin(self.index_one(upload, lookup, bytes, false)).await? {
                Came::Answered(indexed)
                | Came::Refused(indexed)
                | Came::Indexed { indexed, .. } => indexed,
                Came::Archive(_) => upload.refused("an archive inside an archive entry".into()),
            },
        )
    }
}
