//! The driver's run of one upload whose bytes are in memory, as a front end runs it.

use std::future::Future;
use std::io;

use crate::pipeline::{Collected, Indexed, Indexer, ReaderBytes, RecordLookup, Upload};
use crate::reader::MemReader;

/// [`Indexer::index`] of bytes in memory into a [`Collected`] sink: what the upload came to
/// (a bundle's files are not walked).
pub trait IndexBytes {
    /// `upload` of `bytes`, its upload record read first.
    fn index_bytes(
        &self,
        upload: &Upload<'_>,
        bytes: &[u8],
    ) -> impl Future<Output = io::Result<Indexed>> + Send;

    /// `upload` of `bytes`, its upload record found as `lookup` says.
    fn index_bytes_as(
        &self,
        upload: &Upload<'_>,
        lookup: RecordLookup,
        bytes: &[u8],
    ) -> impl Future<Output = io::Result<Indexed>> + Send;
}

impl IndexBytes for Indexer<'_> {
    async fn index_bytes(&self, upload: &Upload<'_>, bytes: &[u8]) -> io::Result<Indexed> {
        self.index_bytes_as(upload, RecordLookup::Read, bytes).await
    }

    async fn index_bytes_as(
        &self,
        upload: &Upload<'_>,
        lookup: RecordLookup,
        bytes: &[u8],
    ) -> io::Result<Indexed> {
        let mut sink = Collected::default();
        self.index(upload, lookup, &ReaderBytes(&MemReader(bytes)), &mut sink)
            .await?;
        sink.0
            .pop()
            .ok_or_else(|| io::Error::other("the upload came to nothing"))
    }
}
