//! Ranged reading: the one door through which every parser sees an artifact.
//!
//! Parsers never get a whole file. They ask for `len` bytes at `offset`, so the same code runs
//! over a local file (`pread`) and, in the Lambda, over S3 ranged GETs. [`CountingReader`]
//! measures what identification costs; [`head::HeadReader`] serves a local file's reads from
//! one read of its start.

pub mod head;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Random-access, read-only view of one artifact.
pub trait RangeReader: Send + Sync {
    /// Total size of the artifact in bytes.
    fn size(&self) -> u64;

    /// Fill `buf` with the bytes at `offset`; an error if the range is not entirely inside.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// A reader behind a reference (a `Box<dyn RangeReader>` lent out) reads as itself.
impl<R: RangeReader + ?Sized> RangeReader for &R {
    fn size(&self) -> u64 {
        (**self).size()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_exact_at(offset, buf)
    }
}

/// Reads `len` bytes at `offset`, refusing ranges outside the artifact before allocating.
pub fn read_vec(reader: &dyn RangeReader, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    check_range(reader.size(), offset, len)?;
    let mut buf = vec![0u8; len];
    reader.read_exact_at(offset, &mut buf)?;
    Ok(buf)
}

/// Reads up to `max_len` bytes at `offset` (fewer at the end of the artifact).
pub fn read_up_to(reader: &dyn RangeReader, offset: u64, max_len: usize) -> io::Result<Vec<u8>> {
    let available = reader.size().saturating_sub(offset);
    let len = usize::try_from(available)
        .unwrap_or(usize::MAX)
        .min(max_len);
    if len == 0 {
        return Ok(Vec::new());
    }
    read_vec(reader, offset, len)
}

fn check_range(size: u64, offset: u64, len: usize) -> io::Result<()> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read of {len} bytes at offset {offset} is past the end ({size} bytes)"),
        )),
    }
}

/// A local file, read with positioned reads (no shared cursor, so `&self` is enough).
#[derive(Debug)]
pub struct FileReader {
    file: File,
    size: u64,
}

impl FileReader {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        Ok(FileReader { file, size })
    }
}

impl RangeReader for FileReader {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size, offset, buf.len())?;
        read_exact_at_file(&self.file, offset, buf)
    }
}

#[cfg(unix)]
fn read_exact_at_file(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at_file(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        let n = file.seek_read(buf, offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// An artifact held in memory (zip entries, tests).
#[derive(Debug, Clone)]
pub struct MemReader<T>(pub T);

impl<T: AsRef<[u8]> + Send + Sync> RangeReader for MemReader<T> {
    fn size(&self) -> u64 {
        self.0.as_ref().len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.0.as_ref();
        check_range(data.len() as u64, offset, buf.len())?;
        // check_range proved offset + len <= data.len(), which fits in usize.
        let start = offset as usize;
        buf.copy_from_slice(&data[start..start + buf.len()]);
        Ok(())
    }
}

/// A reader whose small reads are served from whole blocks kept in memory (the few most
/// recently used): many small reads close together (DWARF unit headers, strings) cost one
/// request per block on a remote reader. Reads larger than a block go straight through.
pub struct BlockCache<R> {
    inner: R,
    block: u64,
    capacity: usize,
    /// (block index, bytes), most recently used last.
    blocks: std::sync::Mutex<Vec<(u64, Vec<u8>)>>,
}

impl<R: RangeReader> BlockCache<R> {
    pub fn new(inner: R, block: u64, capacity: usize) -> Self {
        BlockCache {
            inner,
            block: block.max(1),
            capacity: capacity.max(1),
            blocks: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The reader underneath.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    fn with_block<T>(&self, index: u64, f: impl FnOnce(&[u8]) -> T) -> io::Result<T> {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = blocks.iter().position(|(i, _)| *i == index) {
            let entry = blocks.remove(at);
            let result = f(&entry.1);
            blocks.push(entry);
            return Ok(result);
        }
        let start = index * self.block;
        let len = self.block.min(self.inner.size().saturating_sub(start)) as usize;
        let bytes = read_vec(&self.inner, start, len)?;
        let result = f(&bytes);
        if blocks.len() >= self.capacity {
            blocks.remove(0);
        }
        blocks.push((index, bytes));
        Ok(result)
    }
}

impl<R: RangeReader> RangeReader for BlockCache<R> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size(), offset, buf.len())?;
        if buf.len() as u64 > self.block {
            return self.inner.read_exact_at(offset, buf);
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let index = at / self.block;
            let from = (at - index * self.block) as usize;
            let n = self.with_block(index, |bytes| {
                let n = (bytes.len() - from).min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&bytes[from..from + n]);
                n
            })?;
            done += n;
        }
        Ok(())
    }
}

/// Wraps a reader and counts requests and bytes: the figure behind "identification reads
/// kilobytes, not the file".
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    bytes: AtomicU64,
    requests: AtomicU64,
}

impl<R: RangeReader> CountingReader<R> {
    pub fn new(inner: R) -> Self {
        CountingReader {
            inner,
            bytes: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: RangeReader> RangeReader for CountingReader<R> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_exact_at(offset, buf)
    }
}

/// `Read + Seek` over a [`RangeReader`], so that `object::ReadCache` can drive the `object`
/// crate's lazy parsers: only the structures they touch are fetched, and each once.
pub struct ReaderCursor<'r> {
    reader: &'r dyn RangeReader,
    pos: u64,
}

impl<'r> ReaderCursor<'r> {
    pub fn new(reader: &'r dyn RangeReader) -> Self {
        ReaderCursor { reader, pos: 0 }
    }
}

impl io::Read for ReaderCursor<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.reader.size().saturating_sub(self.pos);
        let n = usize::try_from(available)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.reader.read_exact_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Seek for ReaderCursor<'_> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let size = self.reader.size();
        let new = match pos {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::End(d) => size.checked_add_signed(d),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let new = new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        self.pos = new;
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_block_cache_reads_what_the_reader_holds_with_one_request_per_block() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let cache = BlockCache::new(CountingReader::new(MemReader(data.clone())), 1024, 2);
        for (offset, len) in [
            (0, 10),
            (5, 100),
            (1000, 100),
            (1020, 8),
            (9990, 10),
            (3000, 2000),
        ] {
            let mut buf = vec![0; len];
            cache.read_exact_at(offset, &mut buf).unwrap();
            assert_eq!(buf, data[offset as usize..offset as usize + len]);
        }
        // Blocks 0 and 1 once each, then block 9, then the large read straight through.
        assert_eq!(cache.inner.requests(), 4);
        let mut past = [0u8; 20];
        assert!(cache.read_exact_at(9990, &mut past).is_err());
    }

    use super::{
        read_up_to, read_vec, BlockCache, CountingReader, MemReader, RangeReader, ReaderCursor,
    };

    #[test]
    fn mem_reader_refuses_ranges_past_the_end() {
        let r = MemReader(vec![1u8, 2, 3]);
        let mut buf = [0u8; 2];
        r.read_exact_at(1, &mut buf).unwrap();
        assert_eq!(buf, [2, 3]);
        assert!(r.read_exact_at(2, &mut buf).is_err());
        assert!(r.read_exact_at(u64::MAX, &mut buf).is_err());
        assert!(read_vec(&r, 0, usize::MAX).is_err());
        assert_eq!(read_up_to(&r, 1, 100).unwrap(), vec![2, 3]);
        assert_eq!(read_up_to(&r, 10, 100).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn counting_reader_counts_bytes_and_requests() {
        let r = CountingReader::new(MemReader(vec![0u8; 100]));
        let mut buf = [0u8; 10];
        r.read_exact_at(0, &mut buf).unwrap();
        r.read_exact_at(50, &mut buf).unwrap();
        assert_eq!(r.bytes_read(), 20);
        assert_eq!(r.requests(), 2);
    }

    #[test]
    fn cursor_reads_and_seeks() {
        use std::io::{Read, Seek, SeekFrom};
        let r = MemReader(b"hello world".to_vec());
        let mut c = ReaderCursor::new(&r);
        c.seek(SeekFrom::End(-5)).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert_eq!(s, "world");
        assert!(c.seek(SeekFrom::Current(-100)).is_err());
    }
}
