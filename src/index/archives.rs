//! Archives on the command line: the limits of their expansion, and how their walk starts
//! (`LocalWalks`); the pipeline's driver indexes their entries.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use symdex_shared::archive;
use symdex_shared::pipeline::Upload;
use symdex_shared::reader::{FileReader, MemReader, RangeReader};
use symdex_shared::storage::{CopySource, LocalStore};

use super::{IndexArgs, KeyArgs};

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

/// How the CLI walks an archive: expanded one entry at a time into a scratch file under the
/// store's `_symdex/tmp`, removed as soon as the entry is indexed, so the disk holds at most
/// one entry (bounded by the limits) at any time.
pub(super) struct LocalWalks<'k> {
    pub(super) scratch_root: PathBuf,
    pub(super) unpack: Unpack<'k>,
    /// The scratch directory of the walk under way (the last one's, until the next).
    scratch: Option<tempfile::TempDir>,
}

impl<'k> LocalWalks<'k> {
    pub(super) fn new(store: &LocalStore, unpack: Unpack<'k>) -> Self {
        LocalWalks {
            scratch_root: store.root().join("_symdex/tmp"),
            unpack,
            scratch: None,
        }
    }

    /// Whether an archive's entry at `path` is keyed as a source (`--source` rules).
    pub(super) fn wants_source(&self, path: &str) -> bool {
        self.unpack.keys.sources.wants_source(Path::new(path))
    }

    /// Starts the walk of `upload`'s bytes (a file, or in memory) as `container`.
    pub(super) fn walk(
        &mut self,
        upload: &Upload<'_>,
        container: archive::Container,
    ) -> io::Result<archive::Walker> {
        let reader: Arc<dyn RangeReader> = match upload.source {
            CopySource::Bytes(bytes) => Arc::new(MemReader(bytes.to_vec())),
            CopySource::File(path) => Arc::new(FileReader::open(path)?),
            _ => return Err(io::Error::other("a local archive not in a file")),
        };
        let scratch = self
            .scratch
            .insert(tempfile::tempdir_in(&self.scratch_root)?);
        // Archives are indexed one at a time (never beside another lane): no shared decoder
        // budget is needed, each decoder stays within its own limit.
        let options = archive::Options {
            limits: self.unpack.limits.into(),
            stored_ranges: false,
            memory: None,
        };
        let name = upload.name().to_string();
        archive::Walker::start(
            reader,
            container,
            name,
            options,
            scratch.path().to_path_buf(),
        )
    }
}
