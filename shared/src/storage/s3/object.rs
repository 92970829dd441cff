//! Reading an S3 object: its first block with what a HEAD says, then ranged GETs through a
//! prefetching block cache that the synchronous parsers read through.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use aws_sdk_s3::Client;

#[cfg(doc)]
use super::S3Store;
use super::{read_body, sdk_err, S3Stats, BLOCK_SIZE, FIRST_READ};
use crate::reader::RangeReader;
use crate::storage::{ObjectInfo, StorageError, StorageResult};

/// An ingest object's HEAD and first block ([`S3Store::head_with_first_block`]).
pub struct FirstBlock {
    pub info: ObjectInfo,
    pub metadata: HashMap<String, String>,
    /// Bytes from 0, up to [`FIRST_READ`] (fewer only at the end of the object).
    pub bytes: Vec<u8>,
}

/// One S3 object read by ranges of whole [`BLOCK_SIZE`] blocks (one GET per run of missing
/// blocks).
#[derive(Clone)]
pub struct S3Object {
    pub(super) client: Client,
    pub(super) bucket: String,
    pub(super) key: String,
    pub(super) version_id: Option<String>,
    /// Where this object's bytes start in the S3 object (a range of it: an archive entry).
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) stats: Arc<S3Stats>,
    /// The first [`FIRST_READ`] bytes, when already read ([`Self::with_first_block`]).
    pub(super) first_block: Option<Arc<Vec<u8>>>,
}

/// Blocks one identification may fetch (8 MiB): headers, tables and notes fit many times over;
/// past this the object is not worth identifying remotely.
pub(super) const MAX_PREFETCH_BLOCKS: usize = 256;
/// Passes of one identification (each one fetches what the previous pass missed).
pub(super) const MAX_PASSES: usize = 64;

impl S3Object {
    /// This object with its first bytes already read (by [`S3Store::head_with_first_block`]):
    /// identification starts from them instead of fetching them again, and a blocking read
    /// within them is answered from them. Ignored unless they are the whole first
    /// [`FIRST_READ`] bytes of this object (or all of it).
    pub fn with_first_block(mut self, bytes: Vec<u8>) -> Self {
        let whole = bytes.len() as u64 == FIRST_READ.min(self.size);
        if self.offset == 0 && whole && !bytes.is_empty() {
            self.first_block = Some(Arc::new(bytes));
        }
        self
    }

    pub(super) async fn fetch(&self, first: u64, last: u64) -> StorageResult<Vec<u8>> {
        let start = first * BLOCK_SIZE;
        let end = ((last + 1) * BLOCK_SIZE).min(self.size) - 1;
        let bytes = self.fetch_range(start, end).await?;
        Ok(bytes)
    }

    /// Bytes `start..=end` of this object (relative to its range), one GET.
    pub(super) async fn fetch_range(&self, start: u64, end: u64) -> StorageResult<Vec<u8>> {
        let (first, last) = (self.offset + start, self.offset + end);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .set_version_id(self.version_id.clone())
            .range(format!("bytes={first}-{last}"))
            .send()
            .await
            .map_err(|e| sdk_err("GetObject (range)", e))?;
        let stats = &self.stats;
        let bytes = read_body(out.body, &stats.range_requests, &stats.range_bytes).await?;
        if bytes.len() as u64 != end - start + 1 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short ranged GET").into());
        }
        Ok(bytes)
    }

    /// Runs `identify` (synchronous, over a [`RangeReader`]) with ranged GETs, no thread
    /// blocked: each pass reads from the blocks fetched so far, notes the blocks it missed
    /// (reading zeros there), and its result is thrown away; the missed blocks are fetched
    /// (one GET per run) and the next pass starts. The first pass that missed nothing read only
    /// real bytes, and its result is the answer. Returns it with the bytes fetched.
    ///
    /// Written by hand: the `object` crate's readers are synchronous, and this keeps them so
    /// without parking a thread on every request.
    pub async fn identify<T>(
        &self,
        identify: impl Fn(&dyn RangeReader) -> T,
    ) -> StorageResult<(T, u64)> {
        let seeded = self.first_block.iter().flat_map(|first| {
            let blocks = first.chunks(BLOCK_SIZE as usize).map(<[u8]>::to_vec);
            (0u64..).zip(blocks)
        });
        let reader = Prefetched {
            size: self.size,
            blocks: Mutex::new(seeded.collect()),
            missing: Mutex::new(std::collections::BTreeSet::new()),
        };
        let mut fetched = 0u64;
        for _ in 0..MAX_PASSES {
            let result = identify(&reader);
            let missing = std::mem::take(&mut *lock(&reader.missing));
            if missing.is_empty() {
                return Ok((result, fetched));
            }
            if lock(&reader.blocks).len() + missing.len() > MAX_PREFETCH_BLOCKS {
                return Err(StorageError::TooLarge(format!(
                    "identification would read more than {} MiB of the object",
                    (MAX_PREFETCH_BLOCKS as u64 * BLOCK_SIZE) >> 20
                )));
            }
            // One GET per run of consecutive missing blocks.
            let missing: Vec<u64> = missing.into_iter().collect();
            let mut i = 0;
            while i < missing.len() {
                let mut j = i;
                while j + 1 < missing.len() && missing[j + 1] == missing[j] + 1 {
                    j += 1;
                }
                let data = self.fetch(missing[i], missing[j]).await?;
                fetched += data.len() as u64;
                let mut blocks = lock(&reader.blocks);
                for (k, chunk) in data.chunks(BLOCK_SIZE as usize).enumerate() {
                    blocks.insert(missing[i] + k as u64, chunk.to_vec());
                }
                i = j + 1;
            }
        }
        Err(StorageError::TooLarge(format!(
            "identification did not settle in {MAX_PASSES} rounds of reads"
        )))
    }
}

impl S3Object {
    /// This object as a synchronous [`RangeReader`] for a thread outside the runtime (the
    /// archive walker: decoders are synchronous), each read one ranged GET run on `handle`.
    pub fn blocking(self, handle: tokio::runtime::Handle) -> BlockingObject {
        BlockingObject {
            object: self,
            handle,
        }
    }
}

/// See [`S3Object::blocking`]. Callers read in large windows (the archive layer reads ahead a
/// MiB at a time), so a GET per read is cheap enough. Never used on a runtime thread:
/// `Handle::block_on` there would panic.
pub struct BlockingObject {
    pub(super) object: S3Object,
    pub(super) handle: tokio::runtime::Handle,
}

impl RangeReader for BlockingObject {
    fn size(&self) -> u64 {
        self.object.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|end| *end <= self.object.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the object",
                )
            })?;
        // Within the first block already read: no request.
        if let Some(first) = self.object.first_block.as_ref() {
            if let Some(held) = first.get(offset as usize..end as usize) {
                buf.copy_from_slice(held);
                return Ok(());
            }
        }
        let bytes = self
            .handle
            .block_on(self.object.fetch_range(offset, end - 1))?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The blocks fetched so far; reads of others give zeros and are noted.
pub(super) struct Prefetched {
    pub(super) size: u64,
    pub(super) blocks: Mutex<HashMap<u64, Vec<u8>>>,
    pub(super) missing: Mutex<std::collections::BTreeSet<u64>>,
}

impl RangeReader for Prefetched {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the object",
                )
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let blocks = lock(&self.blocks);
        let mut written = 0usize;
        for b in offset / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE {
            let block_start = b * BLOCK_SIZE;
            let from = (offset + written as u64 - block_start) as usize;
            let take = (BLOCK_SIZE as usize - from).min(buf.len() - written);
            match blocks.get(&b) {
                Some(data) => {
                    buf[written..written + take].copy_from_slice(&data[from..from + take])
                }
                None => {
                    buf[written..written + take].fill(0);
                    lock(&self.missing).insert(b);
                }
            }
            written += take;
        }
        Ok(())
    }
}
