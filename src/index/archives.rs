//! Archives on the command line: walked by the pipeline's `index_archive`, with the local
//! store's part (`LocalSite`).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use clap::Args;
use symdex_shared::manifest::Action;
use symdex_shared::pipeline::{ArchiveSite, Indexed, Indexer, Input, StoredEntry};
use symdex_shared::reader::{FileReader, RangeReader};
use symdex_shared::storage::local::file_sha1;
use symdex_shared::storage::LocalStore;
use symdex_shared::upload_meta::UploadMeta;
use symdex_shared::{archive, IdentifyOptions};

use super::sink::Sink;
use super::{absolute, IndexArgs, KeyArgs};
use crate::inputs::file_name;

/// How an archive's entries become uploads, besides the archive: how far it may expand, and
/// which entries are sources.
#[derive(Clone, Copy)]
pub(super) struct Unpack<'k> {
    pub(super) limits: ArchiveLimits,
    pub(super) keys: &'k KeyArgs,
}

impl<'k> Unpack<'k> {
    pub(super) fn of(args: &'k IndexArgs) -> Self {
        Unpack {
            limits: args.limits,
            keys: &args.keys,
        }
    }
}

/// How far an archive may expand (archive bombs). Each breach is a `rejected` record with its
/// reason; what was indexed before it stays indexed and recorded.
#[derive(Args, Clone, Copy, Debug)]
pub struct ArchiveLimits {
    /// Largest archive entry indexed, in bytes (larger entries are rejected).
    #[arg(long, default_value_t = archive::Limits::default().max_entry_size)]
    pub max_entry_size: u64,
    /// Bytes one archive may expand to in all (the rest of the archive is rejected).
    #[arg(long, default_value_t = archive::Limits::default().max_expanded)]
    pub max_expanded: u64,
    /// Largest expansion ratio: of a zip entry, and of a whole archive (expanded / its size).
    #[arg(long, default_value_t = archive::Limits::default().max_ratio)]
    pub max_ratio: u64,
    /// Most entries indexed from one archive.
    #[arg(long, default_value_t = archive::Limits::default().max_entries)]
    pub max_entries: u64,
}

impl From<ArchiveLimits> for archive::Limits {
    fn from(l: ArchiveLimits) -> Self {
        archive::Limits {
            max_entry_size: l.max_entry_size,
            max_expanded: l.max_expanded,
            max_ratio: l.max_ratio,
            max_entries: l.max_entries,
        }
    }
}

/// The source files of a Sentry source bundle just indexed (entry -> the absolute path it
/// stands for), if it is one.
pub(super) fn bundle_files(path: &Path, indexed: &Indexed) -> Option<BTreeMap<String, String>> {
    let is_bundle = indexed
        .records
        .iter()
        .any(|r| r.format == Some(symdex_shared::Format::SourceBundle));
    if !is_bundle {
        return None;
    }
    let reader = FileReader::open(&absolute(path)).ok()?;
    let ids = symdex_shared::identify(&reader, &IdentifyOptions::default()).ok()?;
    let files: BTreeMap<String, String> = ids.into_iter().flat_map(|id| id.bundle_files).collect();
    (!files.is_empty()).then_some(files)
}

/// Every file entry of an archive is an upload of its own (the archive's path and the entry's).
/// Entries are expanded one at a time into a scratch file that is removed as soon as the entry
/// is indexed, so the disk holds at most one entry (bounded by the limits) at any time.
pub(super) async fn index_archive(
    sink: &mut Sink<'_, '_>,
    store: &LocalStore,
    path: &Path,
    container: archive::Container,
    meta: &UploadMeta,
    unpack: Unpack<'_>,
) -> io::Result<()> {
    index_entries(sink, store, path, container, meta, unpack, None).await
}

/// [`index_archive`]; with `bundle` (a Sentry source bundle's files), only the entries it
/// names, each a source upload under the path it stands for.
pub(super) async fn index_entries(
    sink: &mut Sink<'_, '_>,
    store: &LocalStore,
    path: &Path,
    container: archive::Container,
    meta: &UploadMeta,
    unpack: Unpack<'_>,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<()> {
    let indexer = sink.indexer;
    let abs = absolute(path);
    let shown = abs.to_string_lossy().into_owned();
    let reader = std::sync::Arc::new(FileReader::open(&abs)?);
    let reader_size = reader.size();
    let archive_etag = file_sha1(&abs)?;
    let scratch = tempfile::tempdir_in(store.root().join("_symdex/tmp"))?;
    // Archives are indexed one at a time (never beside another lane): no shared decoder
    // budget is needed, each decoder stays within its own limit.
    let options = archive::Options {
        limits: unpack.limits.into(),
        stored_ranges: false,
        memory: None,
    };
    let name = file_name(&abs);
    let walk = archive::Walker::start(
        reader,
        container,
        name,
        options,
        scratch.path().to_path_buf(),
    )?;
    let archive = Input::file(&shown, meta).with_content(&archive_etag, reader_size);
    let mut site = LocalSite { sink, unpack };
    symdex_shared::pipeline::index_archive(indexer, &archive, container, walk, &mut site, bundle)
        .await
}

/// The local store's part in an archive's walk: its source rules, its sink.
pub(super) struct LocalSite<'a, 'i, 's, 'k> {
    pub(super) sink: &'a mut Sink<'i, 's>,
    pub(super) unpack: Unpack<'k>,
}

impl ArchiveSite for LocalSite<'_, '_, '_, '_> {
    fn wants_source(&self, path: &str) -> bool {
        self.unpack.keys.sources.wants_source(Path::new(path))
    }

    async fn index_stored(
        &mut self,
        _indexer: &Indexer<'_>,
        archive: &Input,
        stored: StoredEntry,
    ) -> io::Result<Indexed> {
        // Not asked for (stored_ranges is off): ranges are for S3's server-side copy.
        Ok(archive.nothing_published(
            Some(&stored.entry),
            Action::Rejected,
            "a stored entry given as a range".into(),
        ))
    }

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.sink.push(indexed).await
    }
}
