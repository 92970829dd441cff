//! A file's head held in memory: identification's reads served from one read of its start.
//!
//! Identifying a file through plain positioned reads cost about eighteen system calls of a
//! few hundred bytes each (headers, then the section names one string at a time, notes,
//! DWARF unit headers), most of them inside the first kilobytes. [`HeadReader`] reads the
//! first [`HEAD_LEN`] bytes at once and answers every read inside them from memory; a read
//! past them goes through a small block cache ([`TAIL_BLOCK`] bytes a block, the last
//! [`TAIL_BLOCKS`] kept), so a section table and its names at the end of a large file cost
//! one read, and a read larger than a block goes straight to the file. What it reads is
//! bounded as the parsers' reads are: a multi-gigabyte artifact still costs kilobytes.

use std::io;

use super::{check_range, BlockCache, RangeReader};

/// How much of a file's start is read at once: the headers of nearly every artifact (a PE's
/// headers and debug directory, an ELF's program headers and notes, Mach-O load commands, an
/// MSF's directory) and all of a small one. A larger head copies more than it saves: over
/// the shared corpus 64 KiB read 43 KB a file in 3.4 reads, 16 KiB 28 KB in 3.8, and cost
/// more time.
pub const HEAD_LEN: usize = 16 << 10;
/// The blocks reads past the head are served from (a page).
pub const TAIL_BLOCK: u64 = 4 << 10;
/// How many of those blocks are kept (the most recently used).
pub const TAIL_BLOCKS: usize = 16;

/// A reader whose first [`HEAD_LEN`] bytes are held in memory (module doc).
pub struct HeadReader<R> {
    /// The head in its first `held` bytes; what lies past them is a reused buffer's.
    head: Vec<u8>,
    held: usize,
    rest: BlockCache<R>,
}

impl<R: RangeReader> HeadReader<R> {
    /// Reads the head of `inner` (all of it when shorter): one read.
    pub fn new(inner: R) -> io::Result<Self> {
        Self::reusing(inner, Vec::new())
    }

    /// [`Self::new`], the head read into `buffer` (one a thread, handed from file to file:
    /// no allocation, no page touched for the first time, nothing zeroed once it is grown;
    /// [`Self::into_parts`] gives it back).
    pub fn reusing(inner: R, buffer: Vec<u8>) -> io::Result<Self> {
        Self::holding(inner, buffer, HEAD_LEN)
    }

    /// [`Self::reusing`] with a head of `len` bytes (the tests move the head's end over
    /// every structure a parser reads).
    fn holding(inner: R, mut buffer: Vec<u8>, len: usize) -> io::Result<Self> {
        let held = usize::try_from(inner.size()).unwrap_or(usize::MAX).min(len);
        if buffer.len() < held {
            buffer.resize(held, 0);
        }
        inner.read_exact_at(0, &mut buffer[..held])?;
        Ok(HeadReader {
            head: buffer,
            held,
            rest: BlockCache::new(inner, TAIL_BLOCK, TAIL_BLOCKS),
        })
    }

    /// The bytes held: the file's first [`HEAD_LEN`] (all of a shorter file).
    pub fn head(&self) -> &[u8] {
        &self.head[..self.held]
    }

    /// The reader underneath (for callers that go on reading the whole file, an archive's
    /// walk: its reads need no cache).
    pub fn into_inner(self) -> R {
        self.rest.into_inner()
    }

    /// The reader underneath and the buffer the head was read into (to reuse).
    pub fn into_parts(self) -> (R, Vec<u8>) {
        (self.rest.into_inner(), self.head)
    }
}

impl<R: RangeReader> RangeReader for HeadReader<R> {
    fn size(&self) -> u64 {
        self.rest.size()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.size(), offset, buf.len())?;
        let head = self.head();
        let held = head.len() as u64;
        if offset >= held {
            return self.rest.read_exact_at(offset, buf);
        }
        // `offset < held`, a `usize`: the part inside the head is copied, the rest (a read
        // that runs past the head) read from where the head ends.
        let start = offset as usize;
        let n = buf.len().min(head.len() - start);
        buf[..n].copy_from_slice(&head[start..start + n]);
        if n < buf.len() {
            self.rest.read_exact_at(held, &mut buf[n..])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{HeadReader, HEAD_LEN};
    use crate::reader::{CountingReader, MemReader, RangeReader};

    fn data(len: u32) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn reads_as_the_reader_underneath_with_one_read_for_the_head() {
        let bytes = data(200_000);
        let reader = HeadReader::new(CountingReader::new(MemReader(bytes.clone()))).unwrap();
        assert_eq!(reader.head(), &bytes[..HEAD_LEN]);
        for (offset, len) in [(0, 16), (64, 504), (HEAD_LEN - 8, 8), (100, 2000)] {
            let mut buf = vec![0; len];
            reader.read_exact_at(offset as u64, &mut buf).unwrap();
            assert_eq!(buf, bytes[offset..offset + len]);
        }
        // All inside the head: nothing more was read.
        assert_eq!(reader.rest.inner().requests(), 1);
        // Across the head's end, the tail's small reads in one block, a large read past it.
        for (offset, len) in [
            (HEAD_LEN - 10, 20),
            (150_000, 100),
            (150_050, 300),
            (199_990, 10),
            (80_000, 50_000),
        ] {
            let mut buf = vec![0; len];
            reader.read_exact_at(offset as u64, &mut buf).unwrap();
            assert_eq!(buf, bytes[offset..offset + len]);
        }
        // The head, block 16 (across the end), the block at 150,000, the last block, the
        // large read.
        assert_eq!(reader.rest.inner().requests(), 5);
        let mut past = [0u8; 20];
        assert!(reader.read_exact_at(199_990, &mut past).is_err());
        assert!(reader.read_exact_at(u64::MAX, &mut past).is_err());
    }

    #[test]
    fn a_short_file_is_read_once_whole() {
        let bytes = data(1000);
        let reader = HeadReader::new(CountingReader::new(MemReader(bytes.clone()))).unwrap();
        let mut buf = vec![0; 1000];
        reader.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(buf, bytes);
        assert!(reader.read_exact_at(1, &mut buf).is_err());
        assert_eq!(reader.into_inner().requests(), 1);
        let empty = HeadReader::new(MemReader(Vec::<u8>::new())).unwrap();
        assert_eq!((empty.size(), empty.head().len()), (0, 0));
    }

    /// Wherever the head ends, inside a header, a string or a stream, identification reads
    /// what plain reads give: one artifact of every format the builders make, with the
    /// details a report shows, the same identities and the same bytes asked for.
    #[test]
    fn identities_are_the_same_wherever_the_head_ends() {
        use crate::formats::{identify_described, Detail};
        let seeds = crate::testing::fuzz_seeds();
        for ((name, bytes), detail) in seeds
            .iter()
            .flat_map(|seed| [(seed, Detail::Keys), (seed, Detail::Sources)])
        {
            let plain = CountingReader::new(MemReader(&bytes[..]));
            let want = identify_described(&plain, &Default::default(), detail).unwrap();
            let want = serde_json::to_string(&want).unwrap();
            let mut lens: Vec<usize> = vec![0, 1, 2, 15, 16, 17, 63, 64, 65, 100, 511, 512];
            lens.extend((128..bytes.len() + 64).step_by(97));
            for len in lens {
                let head = HeadReader::holding(MemReader(&bytes[..]), Vec::new(), len).unwrap();
                let asked = CountingReader::new(&head);
                let got = identify_described(&asked, &Default::default(), detail).unwrap();
                assert_eq!(
                    serde_json::to_string(&got).unwrap(),
                    want,
                    "{name}, head {len}, {detail:?}"
                );
                let read = (asked.bytes_read(), plain.bytes_read());
                assert_eq!(read.0, read.1, "{name}, head {len}, {detail:?}");
            }
        }
    }

    #[test]
    fn a_reused_buffer_holds_only_the_new_file() {
        let long = HeadReader::new(MemReader(data(100_000))).unwrap();
        let (_, buffer) = long.into_parts();
        let short: Vec<u8> = (0..300u32).map(|i| (i % 7) as u8).collect();
        let reader = HeadReader::reusing(MemReader(short.clone()), buffer).unwrap();
        assert_eq!(reader.head(), &short[..]);
        let mut buf = vec![0; 10];
        reader.read_exact_at(290, &mut buf).unwrap();
        assert_eq!(buf, short[290..]);
        // The old file's bytes past the new one's end are not readable.
        assert!(reader.read_exact_at(295, &mut buf).is_err());
    }
}
