//! Where an upload's bytes are read ([`ByteSource`]): the one thing the [`Indexer`]'s driver
//! asks of a front end about an upload's content. A local file read ahead, bytes in memory,
//! an archive entry and an S3 object (or a range of one) are each a source; the copy into the
//! store goes by the upload's `CopySource`, not through here.

use std::future::Future;
use std::io;

#[cfg(doc)]
use super::Indexer;
use crate::archive::Container;
use crate::formats::{identify_with_details, source::may_be_text, FormatError, IdentifyOptions};
use crate::identity::Identity;
use crate::reader::RangeReader;

/// What an upload's bytes were found to be.
#[derive(Debug)]
pub enum Identified {
    /// The formats' word: its identities, or why none claims it.
    Formats(Result<Vec<Identity>, FormatError>),
    /// An archive of this container: its entries are uploads of their own.
    Archive(Container),
    /// Not identified: reading it would take more than identification may (the reason).
    Refused(String),
}

/// Where an upload's bytes are read from, to identify them. Asynchronous because an S3
/// object's reads are; a source in memory or on disk answers at once.
pub trait ByteSource: Sync {
    /// What the bytes are, read as `options` ask. An archive is reported only by a source
    /// that may hold one (an ingest object or input file, never an archive's entry).
    fn identify(
        &self,
        options: &IdentifyOptions,
    ) -> impl Future<Output = io::Result<Identified>> + Send;

    /// `ids` with what identification leaves out of debug files (the source paths their
    /// DWARF names, compressed sections read, a PDB's documents:
    /// `formats::read_debug_details`), asked only where an identity has them
    /// (`Identity::has_details`). A source whose `identify` read them already returns `ids`.
    fn debug_details(
        &self,
        ids: Vec<Identity>,
    ) -> impl Future<Output = io::Result<Vec<Identity>>> + Send;

    /// Whether the bytes may be text (`formats::source::may_be_text`): only such a file may be
    /// a source a debug file names. `false` too where reading them is refused.
    fn may_be_text(&self) -> impl Future<Output = io::Result<bool>> + Send;
}

/// Bytes behind a synchronous [`RangeReader`] (in memory, a local file, an expanded archive
/// entry): identified with their debug details at once, never as an archive.
pub struct ReaderBytes<'r>(pub &'r dyn RangeReader);

impl ByteSource for ReaderBytes<'_> {
    async fn identify(&self, options: &IdentifyOptions) -> io::Result<Identified> {
        Ok(Identified::Formats(identify_with_details(self.0, options)))
    }

    async fn debug_details(&self, ids: Vec<Identity>) -> io::Result<Vec<Identity>> {
        Ok(ids)
    }

    async fn may_be_text(&self) -> io::Result<bool> {
        Ok(may_be_text(self.0))
    }
}
