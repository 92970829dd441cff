//! A gimli [`Reader`](gimli::Reader) whose reads are ranged reads of a [`RangeReader`]: gimli
//! parses a section of a multi-gigabyte file (its unit headers, an index, one entry) and only
//! the bytes it touches are fetched, in small blocks (the last few kept), each charged to a
//! [`Budget`] that ends the parse with an error once spent. Splitting and skipping cost
//! nothing: a reader is a window (`pos..end`) on its section, bytes are read when gimli reads.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;

use gimli::{ReaderOffsetId, RunTimeEndian};

use crate::reader::RangeReader;

/// Bytes fetched per block: small, because what is read of a big section is a few bytes here
/// and there (one unit's header, then the next one's, megabytes on).
const BLOCK: u64 = 512;
/// Blocks kept, the most recently used: the places being read in a few sections at once.
const BLOCKS_KEPT: usize = 8;
/// Longest run [`gimli::Reader::find`] scans for a byte (the end of an inline string).
const MAX_FIND: u64 = 64 << 10;
/// Largest [`gimli::Reader::to_slice`]: gimli asks for whole readers only of small values
/// (a string, a block attribute), never of a section.
const MAX_SLICE: u64 = 1 << 20;

/// What one parse may fetch, and why the last fetch failed (gimli's I/O error carries no
/// reason, so it waits here for [`Budget::explain`]).
pub(crate) struct Budget {
    limit: u64,
    spent: Cell<u64>,
    failure: RefCell<Option<Failure>>,
}

/// Why a fetch failed.
enum Failure {
    /// The reader's error: the artifact's end (its fault), or a real I/O failure.
    Read(io::Error),
    /// A limit of this module's.
    Limit(String),
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Self {
        Budget {
            limit,
            spent: Cell::new(0),
            failure: RefCell::new(None),
        }
    }

    /// Bytes fetched so far.
    #[cfg(test)]
    pub(crate) fn spent(&self) -> u64 {
        self.spent.get()
    }

    /// Charges `n` bytes, or fails once the limit would be passed.
    fn spend(&self, n: u64) -> gimli::Result<()> {
        let spent = self.spent.get().saturating_add(n);
        if spent > self.limit {
            let reason = format!("reads more than {} bytes", self.limit);
            return Err(self.fail(Failure::Limit(reason)));
        }
        self.spent.set(spent);
        Ok(())
    }

    /// Keeps the failure (the last one: the error gimli passes up now); gimli sees an I/O
    /// error.
    fn fail(&self, failure: Failure) -> gimli::Error {
        *self.failure.borrow_mut() = Some(failure);
        gimli::Error::Io
    }

    /// Ends a parse for a reason of the caller's (a limit of its own): gimli sees an I/O
    /// error, [`Budget::explain`] gives the reason.
    pub(crate) fn refuse(&self, reason: String) -> gimli::Error {
        self.fail(Failure::Limit(reason))
    }

    /// `err` in words: the failed fetch behind an I/O error, else gimli's own.
    pub(crate) fn explain(&self, err: gimli::Error) -> String {
        match (&err, self.failure.borrow().as_ref()) {
            (gimli::Error::Io, Some(Failure::Read(e))) => e.to_string(),
            (gimli::Error::Io, Some(Failure::Limit(reason))) => reason.clone(),
            _ => err.to_string(),
        }
    }

    /// The reader's failure that is not about the artifact (anything but its end): the
    /// caller reports it as I/O, not as a malformed file.
    pub(crate) fn io_failure(&self) -> Option<io::Error> {
        match self.failure.borrow().as_ref() {
            Some(Failure::Read(e)) if e.kind() != io::ErrorKind::UnexpectedEof => {
                Some(io::Error::new(e.kind(), e.to_string()))
            }
            _ => None,
        }
    }
}

/// One section of a file: where it lies in its reader, and its blocks fetched so far.
pub(crate) struct Section<'a> {
    reader: &'a dyn RangeReader,
    offset: u64,
    size: u64,
    budget: &'a Budget,
    /// (block index, bytes), most recently used last.
    blocks: RefCell<Vec<(u64, Vec<u8>)>>,
}

impl<'a> Section<'a> {
    /// The `size` bytes at `offset` of `reader` (the caller checked they lie in it; a read
    /// past its end is an error, not a panic). Larger than an address space: cut to it.
    pub(crate) fn new(
        reader: &'a dyn RangeReader,
        offset: u64,
        size: u64,
        budget: &'a Budget,
    ) -> Self {
        Section {
            reader,
            offset,
            size: size.min(usize::MAX as u64),
            budget,
            blocks: RefCell::new(Vec::new()),
        }
    }

    /// A gimli reader of the whole section.
    pub(crate) fn reader(&'a self, endian: RunTimeEndian) -> Ranged<'a> {
        Ranged {
            section: self,
            pos: 0,
            end: self.size,
            endian,
        }
    }

    /// Fills `buf` from `at` (`at + buf.len()` is within the section: [`Ranged`] keeps it
    /// so). Small reads go through the kept blocks, larger ones straight to the reader.
    fn read(&self, at: u64, buf: &mut [u8]) -> gimli::Result<()> {
        if buf.len() as u64 > BLOCK {
            self.budget.spend(buf.len() as u64)?;
            return self.fetch(at, buf);
        }
        let mut done = 0;
        while done < buf.len() {
            let pos = at + done as u64;
            let index = pos / BLOCK;
            let from = (pos - index * BLOCK) as usize;
            let n = self.with_block(index, |block| {
                let n = block.len().saturating_sub(from).min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&block[from..from + n]);
                n
            })?;
            if n == 0 {
                return Err(self
                    .budget
                    .refuse(format!("read past the section at {pos}")));
            }
            done += n;
        }
        Ok(())
    }

    /// Runs `f` on block `index`, fetched (and charged) unless kept.
    fn with_block<T>(&self, index: u64, f: impl FnOnce(&[u8]) -> T) -> gimli::Result<T> {
        let mut blocks = self.blocks.borrow_mut();
        if let Some(at) = blocks.iter().position(|(i, _)| *i == index) {
            let entry = blocks.remove(at);
            let result = f(&entry.1);
            blocks.push(entry);
            return Ok(result);
        }
        let start = index * BLOCK;
        let len = BLOCK.min(self.size.saturating_sub(start));
        self.budget.spend(len)?;
        let mut bytes = vec![0; len as usize];
        self.fetch(start, &mut bytes)?;
        let result = f(&bytes);
        if blocks.len() >= BLOCKS_KEPT {
            blocks.remove(0);
        }
        blocks.push((index, bytes));
        Ok(result)
    }

    fn fetch(&self, at: u64, buf: &mut [u8]) -> gimli::Result<()> {
        let Some(offset) = self.offset.checked_add(at) else {
            return Err(self.budget.refuse(format!("offset {at} overflows")));
        };
        self.reader
            .read_exact_at(offset, buf)
            .map_err(|e| self.budget.fail(Failure::Read(e)))
    }
}

/// A window `pos..end` on a [`Section`]: what gimli reads DWARF through.
#[derive(Clone)]
pub(crate) struct Ranged<'a> {
    section: &'a Section<'a>,
    pos: u64,
    end: u64,
    endian: RunTimeEndian,
}

impl fmt::Debug for Ranged<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ranged")
            .field("pos", &self.pos)
            .field("end", &self.end)
            .finish()
    }
}

impl Ranged<'_> {
    fn remaining(&self) -> u64 {
        self.end - self.pos
    }

    /// `len` bytes are left, or gimli's end-of-input error.
    fn has(&self, len: usize) -> gimli::Result<u64> {
        let len = len as u64;
        if len > self.remaining() {
            return Err(gimli::Error::UnexpectedEof(self.offset_id_here()));
        }
        Ok(len)
    }

    /// Offsets in the file, so that ids of different sections differ.
    fn offset_id_here(&self) -> ReaderOffsetId {
        ReaderOffsetId(self.section.offset.saturating_add(self.pos))
    }
}

impl gimli::Reader for Ranged<'_> {
    type Endian = RunTimeEndian;
    type Offset = usize;

    fn endian(&self) -> RunTimeEndian {
        self.endian
    }

    fn len(&self) -> usize {
        // Within usize: `Section::new` cut the section to it.
        self.remaining() as usize
    }

    fn empty(&mut self) {
        self.pos = self.end;
    }

    fn truncate(&mut self, len: usize) -> gimli::Result<()> {
        let len = self.has(len)?;
        self.end = self.pos + len;
        Ok(())
    }

    fn offset_from(&self, base: &Self) -> usize {
        // gimli may panic when `self` is not within `base`; this answers 0 instead.
        self.pos.saturating_sub(base.pos) as usize
    }

    fn offset_id(&self) -> ReaderOffsetId {
        self.offset_id_here()
    }

    fn lookup_offset_id(&self, id: ReaderOffsetId) -> Option<usize> {
        let at = id.0.checked_sub(self.section.offset)?;
        (self.pos..=self.end)
            .contains(&at)
            .then(|| (at - self.pos) as usize)
    }

    fn find(&self, byte: u8) -> gimli::Result<usize> {
        let mut chunk = [0u8; 256];
        let most = self.remaining().min(MAX_FIND);
        let mut done = 0u64;
        while done < most {
            let n = (most - done).min(chunk.len() as u64) as usize;
            self.section.read(self.pos + done, &mut chunk[..n])?;
            if let Some(at) = chunk[..n].iter().position(|&b| b == byte) {
                return Ok((done + at as u64) as usize);
            }
            done += n as u64;
        }
        Err(gimli::Error::UnexpectedEof(self.offset_id_here()))
    }

    fn skip(&mut self, len: usize) -> gimli::Result<()> {
        self.pos += self.has(len)?;
        Ok(())
    }

    fn split(&mut self, len: usize) -> gimli::Result<Self> {
        let len = self.has(len)?;
        let mut head = self.clone();
        head.end = self.pos + len;
        self.pos += len;
        Ok(head)
    }

    fn to_slice(&self) -> gimli::Result<Cow<'_, [u8]>> {
        let len = self.remaining();
        if len > MAX_SLICE {
            let reason = format!("a value of {len} bytes (at most {MAX_SLICE} read whole)");
            return Err(self.section.budget.refuse(reason));
        }
        let mut bytes = vec![0; len as usize];
        self.section.read(self.pos, &mut bytes)?;
        Ok(Cow::Owned(bytes))
    }

    fn to_string(&self) -> gimli::Result<Cow<'_, str>> {
        let bytes = self.to_slice()?.into_owned();
        String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| gimli::Error::BadUtf8)
    }

    fn to_string_lossy(&self) -> gimli::Result<Cow<'_, str>> {
        let bytes = self.to_slice()?;
        Ok(Cow::Owned(String::from_utf8_lossy(&bytes).into_owned()))
    }

    fn read_slice(&mut self, buf: &mut [u8]) -> gimli::Result<()> {
        let len = self.has(buf.len())?;
        self.section.read(self.pos, buf)?;
        self.pos += len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use gimli::Reader;

    use super::{Budget, Section, BLOCK};
    use crate::reader::{CountingReader, MemReader};

    fn bytes() -> Vec<u8> {
        (0..4096u32).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn reads_what_gimli_asks_and_no_more() {
        let data = bytes();
        let counted = CountingReader::new(MemReader(data.clone()));
        let budget = Budget::new(1 << 20);
        let section = Section::new(&counted, 100, 3000, &budget);
        let mut r = section.reader(gimli::RunTimeEndian::Little);
        assert_eq!(r.len(), 3000);
        assert_eq!(r.read_u8().unwrap(), data[100]);
        r.skip(2000).unwrap();
        let mut head = r.split(10).unwrap();
        assert_eq!(head.len(), 10);
        let mut four = [0u8; 4];
        head.read_slice(&mut four).unwrap();
        assert_eq!(four, data[2101..2105]);
        assert_eq!(r.len(), 3000 - 2011);
        // Two blocks fetched (the first byte's, the skipped-to one's), nothing between.
        assert_eq!(budget.spent(), 2 * BLOCK);
        assert!(
            counted.bytes_read() <= 2 * BLOCK,
            "{}",
            counted.bytes_read()
        );
        // The window's end is the section's: past it is gimli's end of input.
        assert!(r.skip(5000).is_err());
        assert!(head.split(7).is_err());
        assert_eq!(
            r.find(data[2111]).unwrap(),
            0,
            "find starts where the reader is"
        );
    }

    #[test]
    fn the_budget_ends_a_parse_with_its_reason() {
        let data = bytes();
        let reader = MemReader(data);
        let budget = Budget::new(BLOCK);
        let section = Section::new(&reader, 0, 4096, &budget);
        let mut r = section.reader(gimli::RunTimeEndian::Little);
        r.read_u8().unwrap();
        r.skip(BLOCK as usize * 2).unwrap();
        let err = r.read_u8().unwrap_err();
        assert!(budget.explain(err).contains("more than 512 bytes"));
        // A section lying past its reader's end fails the read, with the reader's reason.
        let budget = Budget::new(1 << 20);
        let lying = Section::new(&reader, 4000, 1000, &budget);
        let mut r = lying.reader(gimli::RunTimeEndian::Big);
        let err = r.read_u64().unwrap_err();
        assert!(budget.explain(err).contains("past the end"), "{err}");
        // Whole-reader reads are for small values only.
        let budget = Budget::new(u64::MAX);
        let big = Section::new(&reader, 0, 4096, &budget);
        assert!(big.reader(gimli::RunTimeEndian::Little).to_slice().is_ok());
        let huge = super::MAX_SLICE + 1;
        let zeros = crate::formats::dwp::tests::Sparse::new(Vec::new(), huge);
        let section = Section::new(&zeros, 0, huge, &budget);
        assert!(section
            .reader(gimli::RunTimeEndian::Little)
            .to_slice()
            .is_err());
    }
}
