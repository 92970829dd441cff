//! Where the [`Indexer`]'s driver hands what an upload came to ([`Sink`]): the front end's
//! part in a run. The CLI's sink writes the manifest every thousand uploads and keeps file
//! stamps; the Lambda's collects a message's uploads and flushes a large archive's entries;
//! [`Collected`] keeps them for the caller.

use std::future::Future;
use std::io;

use super::bytes::{ByteSource, ReaderBytes};
use super::upload::{Indexed, Upload};
#[cfg(doc)]
use super::Indexer;
use crate::archive::{Container, Walker};

/// A front end's part in indexing: where each upload's outcome goes, in order, and how an
/// archive's bytes are walked.
pub trait Sink: Send {
    /// The source of a stored archive entry's bytes, read in place (S3's ranged reads).
    type Range: ByteSource;

    /// Takes what an upload, an archive's entry or an archive itself came to, in the order
    /// they were indexed.
    fn push(&mut self, indexed: Indexed) -> impl Future<Output = io::Result<()>> + Send;

    /// `upload`'s bytes are in the store as its upload record says (indexed now, or answered
    /// from the record): a front end that stamps input files may keep this one's stamp.
    fn known(&mut self, _upload: &Upload<'_>) {}

    /// Whether the archive entry at `path` is keyed as a source (the front end's rules).
    fn wants_source(&self, path: &str) -> bool;

    /// Starts the walk of `upload`'s bytes as an archive of `container` (its entries handed
    /// over one at a time). `None`: this front end walks no archives (they are indexed as
    /// the files they are).
    fn walk(&mut self, upload: &Upload<'_>, container: Container) -> io::Result<Option<Walker>>;

    /// The bytes of an entry stored uncompressed at `offset..offset + size` of the archive
    /// being walked (only asked of a walk started with `stored_ranges`). `None`: it cannot
    /// read them in place, and the entry is rejected.
    fn range(&self, _offset: u64, _size: u64) -> Option<Self::Range> {
        None
    }
}

/// A sink that keeps every outcome for the caller, and walks no archive (a source bundle's
/// files are not indexed).
#[derive(Debug, Default)]
pub struct Collected(pub Vec<Indexed>);

impl Sink for Collected {
    type Range = ReaderBytes<'static>;

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.0.push(indexed);
        Ok(())
    }

    fn wants_source(&self, _path: &str) -> bool {
        false
    }

    fn walk(&mut self, _upload: &Upload<'_>, _container: Container) -> io::Result<Option<Walker>> {
        Ok(None)
    }
}
