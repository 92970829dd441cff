//! An archive's walk, the same for both front ends: each file entry is an upload of its own
//! ([`Upload::from_entry`]), every entry and the archive itself end in a record, and a Sentry
//! source bundle's files are sources under the paths they stand for. What differs by front end
//! (which entries are sources, a stored entry's ranged copy on S3, where the records go) is the
//! [`ArchiveSite`] it passes.

use std::future::Future;

use std::collections::BTreeMap;
use std::io;

use super::upload::{Indexed, Input, Upload};
use super::Indexer;
use crate::archive::{self, Container, Event, Walker};
use crate::formats::IdentifyOptions;
use crate::manifest::Action;

/// A front end's part in an archive's walk.
pub trait ArchiveSite {
    /// Whether the entry at `path` is keyed as a source (the front end's source rules).
    fn wants_source(&self, path: &str) -> bool;

    /// Indexes an entry stored uncompressed, given as its byte range in the archive (only
    /// asked where the walk was started with `stored_ranges`: S3's server-side range copy).
    fn index_stored(
        &mut self,
        indexer: &Indexer<'_>,
        archive: &Input,
        stored: StoredEntry,
    ) -> impl Future<Output = io::Result<Indexed>> + Send;

    /// Takes what an entry, or the archive itself, came to, in walk order.
    fn push(&mut self, indexed: Indexed) -> impl Future<Output = io::Result<()>> + Send;
}

/// An entry stored in its archive uncompressed, at `offset`.
#[derive(Debug)]
pub struct StoredEntry {
    pub entry: String,
    pub offset: u64,
    pub size: u64,
    /// The archive's word for its content (its bytes are not read): CRC-32 and size.
    pub etag: String,
    pub options: IdentifyOptions,
    pub source_path: Option<String>,
}

/// Indexes every entry `walk` hands over from `archive` (an input made with its content);
/// with `bundle` (a Sentry source bundle's files: entry -> the absolute path it stands for),
/// only those entries, each a source upload under its path (sourcemap.rs). A malformed or
/// empty archive ends in a record of its own; a read error is returned (worth a retry).
pub async fn index_archive<S: ArchiveSite + Send>(
    indexer: &Indexer<'_>,
    archive: &Input,
    container: Container,
    mut walk: Walker,
    site: &mut S,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<()> {
    let mut entries = 0usize;
    while let Some(event) = walk.next().await {
        entries += 1;
        // What a file entry is indexed as: the path a bundle's source stands for, and whether
        // it is a source. `None`: a bundle's manifest or other non-source entry, part of it.
        let indexed_as = |entry: &str| -> Option<(Option<String>, IdentifyOptions)> {
            let source_path = match bundle.map(|files| files.get(entry).cloned()) {
                Some(None) => return None,
                found => found.flatten(),
            };
            let as_source = source_path.is_some() || site.wants_source(entry);
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
                    continue;
                };
                let upload = Upload::from_entry(
                    archive,
                    &entry,
                    data.copy_source(),
                    &sha1,
                    size,
                    options,
                    source_path,
                );
                let reader = data.reader()?;
                indexer.index(&upload, &*reader).await?
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
                    continue;
                };
                let stored = StoredEntry {
                    etag: format!("zip-crc32-{crc32:08x}-{size}"),
                    entry,
                    offset,
                    size,
                    options,
                    source_path,
                };
                site.index_stored(indexer, archive, stored).await?
            }
        };
        site.push(indexed).await?;
    }
    if let Some(ending) = archive::ending(walk.finish(), entries, container)? {
        let action = Action::from(&ending);
        let reason = ending.reason().to_string();
        site.push(archive.nothing_published(None, action, reason))
            .await?;
    }
    Ok(())
}
