//! Containers CI uploads instead of loose files: zip (and its renamings: nupkg, snupkg, aar,
//! apk, ipa, jar), tar (plain, gzip, zstd, xz, bzip2), single-file gzip/zstd/xz/bzip2, and
//! Microsoft CAB (what `symstore /compress` writes as `foo.pd_`), Debian packages (`.deb`,
//! `.ddeb`: an ar archive whose data tarball holds the files), RPM packages (a compressed cpio
//! payload), cpio archives and 7z archives.
//!
//! Detection is by content ([`detect`]), never by name. [`expand`] walks one container and
//! hands each entry to a visitor as an [`Event`]: a file expanded into a scratch file (one at a
//! time: the visitor indexes it before the next is written, so the disk holds at most one
//! entry), a zip entry stored uncompressed (its byte range in the archive, when the caller can
//! copy ranges server-side), or an entry that is skipped or rejected with its reason.
//! Containers inside containers are expanded one level deep; deeper ones are entries like any
//! other (and so `unrecognized`).
//!
//! Every entry name is untrusted: it names an upload in the manifest, never a path written to.
//! Every size an archive claims is a claim: the bytes are counted as they are expanded, and
//! [`Limits`] bound each entry, the whole archive and the expansion ratio.

mod cab;
mod compressed;
mod cpio;
mod deb;
mod memory;
mod rpm;
mod sevenz;
mod tar;
mod zip;

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::digest::Sha1Writer;
use crate::identity::file_name_of;
use crate::reader::{read_up_to, FileReader, MemReader, RangeReader};

pub use memory::{DecoderMemory, Grant};
// Detection lives below both this layer and `formats`, which asks it first (sniff.rs).
pub use crate::sniff::{detect, detect_reader, Container, DETECT_LEN};

/// How far an archive may expand (archive bombs). Each breach is a `Rejected` event with its
/// reason; entries expanded before it stay expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest entry, in bytes.
    pub max_entry_size: u64,
    /// Bytes one archive may expand to in all.
    pub max_expanded: u64,
    /// Largest expansion ratio: of a zip entry (its own compressed size), and of the whole
    /// archive (expanded bytes / archive bytes) for streams and cabinets.
    pub max_ratio: u64,
    /// Most entries of one archive (each becomes an upload and a manifest record).
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entry_size: 4 << 30,
            max_expanded: 64 << 30,
            max_ratio: 1000,
            max_entries: 1_000_000,
        }
    }
}

/// What [`expand`] does besides its limits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub limits: Limits,
    /// Report zip entries stored uncompressed as byte ranges of the archive ([`Event::Stored`])
    /// instead of expanding them (the caller copies ranges server-side).
    pub stored_ranges: bool,
    /// The budget the decoders of several walks at once share (a Lambda invocation's);
    /// `None`: each decoder is bounded only by its own limit.
    pub memory: Option<&'static DecoderMemory>,
}

/// An expanded entry's bytes: small entries in memory, larger ones in a scratch file that
/// exists until the visitor returns.
#[derive(Debug)]
pub enum Expanded {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl Expanded {
    /// The entry's bytes for identification.
    pub fn reader(&self) -> io::Result<Box<dyn RangeReader + '_>> {
        Ok(match self {
            Expanded::Bytes(bytes) => Box::new(MemReader(bytes.as_slice())),
            Expanded::File(path) => Box::new(FileReader::open(path)?),
        })
    }

    /// Where a store copies the entry's bytes from.
    pub fn copy_source(&self) -> crate::storage::CopySource<'_> {
        match self {
            Expanded::Bytes(bytes) => crate::storage::CopySource::Bytes(bytes),
            Expanded::File(path) => crate::storage::CopySource::File(path),
        }
    }
}

/// Entries up to this size are held in memory (no scratch file to write, read and remove);
/// larger ones go to a scratch file.
pub(crate) const IN_MEMORY: u64 = 4 << 20;

/// One entry of an archive, as the visitor sees it. `entry` is the path inside the archive
/// (nested: `inner.tar.gz!/path`).
#[derive(Debug)]
pub enum Event {
    /// Expanded; `sha1` is of its bytes.
    File {
        entry: String,
        data: Expanded,
        size: u64,
        sha1: String,
    },
    /// Stored uncompressed at `offset..offset + size` of the archive (only with
    /// [`Options::stored_ranges`]; the archive's CRC is not checked, the bytes are not read).
    Stored {
        entry: String,
        offset: u64,
        size: u64,
        /// The CRC-32 the archive records for it (a claim, not checked).
        crc32: u32,
    },
    /// Not indexed, for a reason (a link, a device).
    Skipped { entry: String, reason: String },
    /// Over a limit, or unreadable: not indexed, with the reason.
    Rejected { entry: String, reason: String },
}

/// Why [`expand`] stopped before the end.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    /// The archive itself is malformed (not worth retrying): its record says why.
    #[error("{0}")]
    Malformed(String),
    /// Reading the archive or writing scratch files failed (worth retrying), or the visitor
    /// failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The entry a visitor is handed and the limits' bookkeeping, shared by every container.
struct Walk<'v> {
    options: Options,
    scratch: PathBuf,
    /// Bytes of the outermost archive (the whole-archive ratio).
    archive_size: u64,
    expanded: u64,
    entries: u64,
    /// Set once the whole-archive budget is spent: the remaining entries are not expanded.
    exhausted: bool,
    /// Nesting: the outer entry's path and `!/`, while expanding an archive inside one.
    prefix: String,
    depth: u8,
    /// Set by [`WatchedReader`] when reading an archive failed (the error is retried).
    failed: Arc<AtomicBool>,
    visit: &'v mut dyn FnMut(Event) -> io::Result<()>,
}

/// A nested archive is expanded; one inside it is not.
const MAX_DEPTH: u8 = 1;

impl Walk<'_> {
    fn name(&self, entry: &str) -> String {
        format!("{}{entry}", self.prefix)
    }

    /// Runs `walk_entries` with the entries it hands over named inside `entry`
    /// (`entry!/path`): a nested archive's, or a package's data tarball's.
    fn inside<T>(&mut self, entry: &str, walk_entries: impl FnOnce(&mut Self) -> T) -> T {
        let outer = std::mem::take(&mut self.prefix);
        self.prefix = format!("{outer}{entry}!/");
        let walked = walk_entries(self);
        self.prefix = outer;
        walked
    }

    fn skip(&mut self, entry: &str, reason: impl Into<String>) -> io::Result<()> {
        let entry = self.name(entry);
        (self.visit)(Event::Skipped {
            entry,
            reason: reason.into(),
        })
    }

    fn reject(&mut self, entry: &str, reason: impl Into<String>) -> io::Result<()> {
        let entry = self.name(entry);
        (self.visit)(Event::Rejected {
            entry,
            reason: reason.into(),
        })
    }

    /// Reserves `bytes` of decoder memory from the shared budget, if there is one (waiting
    /// for other walks' decoders to finish where it is spent).
    fn reserve(&self, bytes: u64) -> Option<Grant<'static>> {
        self.options.memory.map(|memory| memory.reserve(bytes))
    }

    /// Bytes the whole archive may still expand to.
    fn left(&self) -> u64 {
        let by_ratio = self
            .archive_size
            .max(1)
            .saturating_mul(self.options.limits.max_ratio);
        self.options
            .limits
            .max_expanded
            .min(by_ratio)
            .saturating_sub(self.expanded)
    }

    /// Counts one more entry; `false` (after a rejection) when the archive has no budget left,
    /// so the caller stops.
    fn admit(&mut self, entry: &str) -> io::Result<bool> {
        if self.exhausted {
            return Ok(false);
        }
        self.entries += 1;
        let limits = self.options.limits;
        let reason = if self.entries > limits.max_entries {
            format!(
                "the archive has more than {} entries; entries from here on are not indexed",
                limits.max_entries
            )
        } else if self.left() == 0 {
            format!(
                "the archive expands past its limit ({} bytes, or {}x its size); entries from here on are not indexed",
                limits.max_expanded, limits.max_ratio
            )
        } else {
            return Ok(true);
        };
        self.exhausted = true;
        self.reject(entry, reason)?;
        Ok(false)
    }

    /// The most one entry may expand to: `claimed` is the archive's word for its size and
    /// `compressed` its compressed size where the container tells (zip).
    fn allowed(&self, compressed: Option<u64>) -> u64 {
        let limits = self.options.limits;
        let by_ratio = compressed.map_or(u64::MAX, |c| c.max(1).saturating_mul(limits.max_ratio));
        limits.max_entry_size.min(self.left()).min(by_ratio)
    }

    fn over_limits(&self, claimed: u64, compressed: Option<u64>) -> Option<String> {
        let allowed = self.allowed(compressed);
        (claimed > allowed).then(|| {
            let compressed = compressed.map_or(String::new(), |c| format!(" ({c} compressed)"));
            format!(
                "entry of {claimed} bytes{compressed} is over the limits (entry {}, ratio {}, left in the archive {})",
                self.options.limits.max_entry_size,
                self.options.limits.max_ratio,
                self.left()
            )
        })
    }

    /// Expands one entry from `data` into a scratch file and hands it to the visitor (or, if it
    /// is an archive itself and nesting allows, expands that). `compressed`: as in
    /// [`Walk::allowed`].
    fn entry(
        &mut self,
        entry: &str,
        data: &mut dyn Read,
        compressed: Option<u64>,
    ) -> Result<(), ExpandError> {
        let allowed = self.allowed(compressed);
        let path = self
            .scratch
            .join(format!("entry-{}-{}", self.depth, self.entries));
        let result = match copy_entry(data, &path, allowed.saturating_add(1)) {
            Ok((data, copied, sha1)) => self.expanded_entry(entry, data, copied, allowed, sha1),
            // The entry's bytes do not decode (a bad deflate stream, a CRC mismatch, a
            // truncated stream): that entry's problem, unless reading the archive failed.
            Err(CopyError::Read(e)) if !self.failed.load(Ordering::Relaxed) => self
                .reject(entry, format!("unreadable entry: {e}"))
                .map_err(ExpandError::from),
            Err(CopyError::Read(e) | CopyError::Write(e)) => Err(e.into()),
        };
        let _ = std::fs::remove_file(&path);
        result
    }

    fn expanded_entry(
        &mut self,
        entry: &str,
        data: Expanded,
        copied: u64,
        allowed: u64,
        sha1: String,
    ) -> Result<(), ExpandError> {
        self.expanded += copied.min(allowed);
        if copied > allowed {
            let limits = self.options.limits;
            self.reject(
                entry,
                format!(
                    "entry expands past {allowed} bytes (the limits: entry {}, ratio {}, archive {})",
                    limits.max_entry_size, limits.max_ratio, limits.max_expanded
                ),
            )?;
            return Ok(());
        }
        if self.depth < MAX_DEPTH {
            let reader: Box<dyn RangeReader + '_> = match &data {
                Expanded::Bytes(bytes) => Box::new(MemReader(bytes.as_slice())),
                Expanded::File(path) => Box::new(FileReader::open(path)?),
            };
            if let Some(container) = detect_reader(&*reader)? {
                let nested = self.inside(entry, |nested| {
                    nested.depth += 1;
                    let walked = walk(nested, &*reader, container, file_name_of(entry));
                    nested.depth -= 1;
                    walked
                });
                return match nested {
                    Err(ExpandError::Malformed(reason)) => {
                        let what = container.as_str();
                        self.reject(entry, format!("a malformed {what} archive: {reason}"))?;
                        Ok(())
                    }
                    other => other,
                };
            }
        }
        let entry = self.name(entry);
        (self.visit)(Event::File {
            entry,
            data,
            size: copied,
            sha1,
        })?;
        Ok(())
    }
}

enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies at most `max` bytes of `data`, hashing them: into memory up to [`IN_MEMORY`] bytes,
/// else into a new file at `path`. Read and write errors told apart.
fn copy_entry(
    data: &mut dyn Read,
    path: &Path,
    max: u64,
) -> Result<(Expanded, u64, String), CopyError> {
    let mut data = data.take(max);
    let mut head = Vec::new();
    (&mut data)
        .take(IN_MEMORY + 1)
        .read_to_end(&mut head)
        .map_err(CopyError::Read)?;
    if head.len() as u64 <= IN_MEMORY {
        let sha1 = crate::digest::sha1_hex(&head);
        let size = head.len() as u64;
        return Ok((Expanded::Bytes(head), size, sha1));
    }
    let mut out = Sha1Writer::new(File::create(path).map_err(CopyError::Write)?);
    out.write_all(&head).map_err(CopyError::Write)?;
    let mut copied = head.len() as u64;
    drop(head);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match data.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        out.write_all(&buf[..n]).map_err(CopyError::Write)?;
        copied += n as u64;
    }
    let (_, sha1) = out.finish();
    Ok((Expanded::File(path.to_path_buf()), copied, sha1))
}

fn walk(
    walk_state: &mut Walk<'_>,
    reader: &dyn RangeReader,
    container: Container,
    name: &str,
) -> Result<(), ExpandError> {
    let reader = &WatchedReader::new(reader, walk_state.failed.clone());
    match container {
        Container::Zip => zip::expand(walk_state, reader),
        Container::Tar => tar::expand(walk_state, reader, &mut sequential(reader)),
        Container::Gzip | Container::Zstd | Container::Xz | Container::Lzip | Container::Bzip2 => {
            compressed::expand(walk_state, reader, container, name)
        }
        Container::Cab => cab::expand(walk_state, reader),
        Container::Deb => deb::expand(walk_state, reader),
        Container::Rpm => rpm::expand(walk_state, reader),
        Container::Cpio => cpio::expand(walk_state, reader, &mut sequential(reader)),
        Container::SevenZip => sevenz::expand(walk_state, reader),
    }
}

/// Expands `container` (as [`detect`] found it) read from `reader`, whose file name is
/// `name` (a single compressed file's entry is named after it: `foo.debug.gz` → `foo.debug`).
/// Scratch files go to `scratch`, one at a time. The visitor's errors stop the walk and are
/// returned.
pub fn expand(
    reader: &dyn RangeReader,
    container: Container,
    name: &str,
    options: &Options,
    scratch: &Path,
    visit: &mut dyn FnMut(Event) -> io::Result<()>,
) -> Result<(), ExpandError> {
    // A parser or decoder that panics on what it reads (the `cab` crate did, cab.rs) would
    // panic again on a retry: the archive is malformed, for every caller (`index` and the
    // Lambda walk on a thread of their own, `keys` and `check` on theirs). A panic in
    // `visit` is the caller's own and goes on unwinding.
    let in_visit = std::cell::Cell::new(false);
    let mut visit = |event| {
        in_visit.set(true);
        let visited = visit(event);
        in_visit.set(false);
        visited
    };
    let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut state = Walk {
            options: *options,
            scratch: scratch.to_path_buf(),
            archive_size: reader.size(),
            expanded: 0,
            entries: 0,
            exhausted: false,
            prefix: String::new(),
            depth: 0,
            failed: Arc::new(AtomicBool::new(false)),
            visit: &mut visit,
        };
        walk(&mut state, reader, container, name)
    }));
    match walked {
        Ok(walked) => walked,
        Err(panic) if in_visit.get() => std::panic::resume_unwind(panic),
        Err(panic) => Err(panicked(&*panic)),
    }
}

/// A walk that panicked, as the archive's fault: the same bytes would panic again on a retry.
fn panicked(panic: &(dyn std::any::Any + Send)) -> ExpandError {
    ExpandError::Malformed(format!(
        "reading the archive panicked: {}",
        crate::panic_message(panic)
    ))
}

/// What a finished walk says about the archive itself, beyond its entries' own outcomes. The
/// pipeline records it (`manifest::Action::from`): every input gets a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// No file entry at all (the reason says which container).
    Empty(String),
    /// Broken after whatever entries came before the fault.
    Malformed(String),
}

impl Ending {
    /// Why, for the record.
    pub fn reason(&self) -> &str {
        match self {
            Ending::Empty(reason) | Ending::Malformed(reason) => reason,
        }
    }
}

/// What a finished walk says about the archive itself: an archive without a file entry is
/// [`Ending::Empty`], a malformed one [`Ending::Malformed`]; `None`: nothing to add. A read
/// error is returned (worth a retry).
pub fn ending(
    walked: Result<(), ExpandError>,
    entries: usize,
    container: Container,
) -> io::Result<Option<Ending>> {
    let what = container.as_str();
    match walked {
        Ok(()) if entries == 0 => Ok(Some(Ending::Empty(format!(
            "an empty {what} archive (no file entries)"
        )))),
        Ok(()) => Ok(None),
        Err(ExpandError::Malformed(reason)) => Ok(Some(Ending::Malformed(format!(
            "a malformed {what} archive: {reason}"
        )))),
        Err(ExpandError::Io(e)) => Err(e),
    }
}

/// [`expand`] for async callers (the pipeline publishes each entry with awaits): the parsers
/// and decoders, which are synchronous, run on a thread of their own and hand over one entry
/// at a time; the next entry is expanded only once the caller asks for it (the disk holds one).
///
/// ```ignore
/// let mut walk = Walker::start(reader, container, name, options, scratch)?;
/// while let Some(event) = walk.next().await { /* index it */ }
/// walk.finish()?;
/// ```
/// Dropping a walker before its end stops the walk at its next entry.
pub struct Walker {
    received: tokio::sync::mpsc::Receiver<(Event, Ack)>,
    /// The entry handed out last, acknowledged when the next one is asked for.
    handed: Option<Ack>,
    thread: Option<std::thread::JoinHandle<Result<(), ExpandError>>>,
}

type Ack = std::sync::mpsc::Sender<()>;

impl Walker {
    pub fn start(
        reader: Arc<dyn RangeReader>,
        container: Container,
        name: String,
        options: Options,
        scratch: PathBuf,
    ) -> io::Result<Walker> {
        let (events, received) = tokio::sync::mpsc::channel::<(Event, Ack)>(1);
        let thread = std::thread::Builder::new()
            .name("symdex-archive".into())
            .spawn(move || {
                expand(
                    &*reader,
                    container,
                    &name,
                    &options,
                    &scratch,
                    &mut |event| {
                        let (ack, acked) = std::sync::mpsc::channel();
                        let stopped = || io::Error::other("the archive walk was stopped");
                        events.blocking_send((event, ack)).map_err(|_| stopped())?;
                        acked.recv().map_err(|_| stopped())
                    },
                )
            })?;
        Ok(Walker {
            received,
            handed: None,
            thread: Some(thread),
        })
    }

    /// The next entry (`None`: the walk is over; [`Walker::finish`] says how). The entry
    /// handed out before is done with: its scratch file goes.
    pub async fn next(&mut self) -> Option<Event> {
        if let Some(ack) = self.handed.take() {
            let _ = ack.send(());
        }
        let (event, ack) = self.received.recv().await?;
        self.handed = Some(ack);
        Some(event)
    }

    /// How the walk ended, once [`Walker::next`] returned `None`.
    pub fn finish(mut self) -> Result<(), ExpandError> {
        self.handed = None;
        self.received.close();
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            // `expand` tells a parser's panic as a malformed archive; one here is this
            // walker's own (its hand-over), told the same way: not retried until the queue
            // gives up on it.
            Some(Err(panic)) => Err(panicked(&*panic)),
            None => Ok(()),
        }
    }
}

/// A [`RangeReader`] that remembers whether reading the archive itself failed, so a parser's or
/// decoder's error can be told apart from a read error: S3 timing out is worth a retry, a
/// corrupt stream is not.
pub(crate) struct WatchedReader<'r> {
    inner: &'r dyn RangeReader,
    failed: Arc<AtomicBool>,
}

impl<'r> WatchedReader<'r> {
    fn new(inner: &'r dyn RangeReader, failed: Arc<AtomicBool>) -> Self {
        WatchedReader { inner, failed }
    }

    /// `error` (from parsing or decoding what this reader holds) as a retryable I/O error if
    /// reading failed, else as a malformed archive.
    fn classify(&self, what: &str, error: impl std::fmt::Display) -> ExpandError {
        if self.failed.load(Ordering::Relaxed) {
            ExpandError::Io(io::Error::other(format!("{what}: {error}")))
        } else {
            ExpandError::Malformed(format!("{what}: {error}"))
        }
    }
}

impl RangeReader for WatchedReader<'_> {
    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact_at(offset, buf).inspect_err(|e| {
            // Reading past the end is the archive's lie about its own layout, not a failure.
            if e.kind() != io::ErrorKind::UnexpectedEof {
                self.failed.store(true, Ordering::Relaxed);
            }
        })
    }
}

/// Reads ahead in blocks this large: archives are mostly read sequentially, and each read of
/// the archive may be a ranged GET.
const READ_AHEAD: usize = 1 << 20;

/// The archive as a buffered `Read + Seek`, for streams read from start to end.
fn sequential<'r>(reader: &'r WatchedReader<'r>) -> Window<'r> {
    windowed(reader, READ_AHEAD)
}

/// The archive as a `Read + Seek` reading `ahead` bytes at a time.
fn windowed<'r>(reader: &'r WatchedReader<'r>, ahead: usize) -> Window<'r> {
    Window {
        reader,
        ahead,
        pos: 0,
        start: 0,
        buf: Vec::new(),
    }
}

/// A read-ahead window over a [`RangeReader`] that, unlike `BufReader`, keeps its buffer when a
/// seek lands inside it: the zip crate seeks to every entry's header and then to its data,
/// which are usually in the window already.
struct Window<'r> {
    reader: &'r dyn RangeReader,
    ahead: usize,
    pos: u64,
    /// Archive offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
}

impl Read for Window<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let end = self.start + self.buf.len() as u64;
        if self.pos < self.start || self.pos >= end {
            let size = self.reader.size();
            if self.pos >= size {
                return Ok(0);
            }
            // Large reads skip the window.
            if out.len() >= self.ahead {
                let n = usize::try_from(size - self.pos)
                    .unwrap_or(usize::MAX)
                    .min(out.len());
                self.reader.read_exact_at(self.pos, &mut out[..n])?;
                self.pos += n as u64;
                return Ok(n);
            }
            self.buf = read_up_to(self.reader, self.pos, self.ahead)?;
            self.start = self.pos;
        }
        // pos is inside the window: start <= pos < start + len.
        let at = (self.pos - self.start) as usize;
        let n = (self.buf.len() - at).min(out.len());
        out[..n].copy_from_slice(&self.buf[at..at + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::BufRead for Window<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let end = self.start + self.buf.len() as u64;
        if self.pos < self.start || self.pos >= end {
            if self.pos >= self.reader.size() {
                return Ok(&[]);
            }
            self.buf = read_up_to(self.reader, self.pos, self.ahead)?;
            self.start = self.pos;
        }
        Ok(&self.buf[(self.pos - self.start) as usize..])
    }

    fn consume(&mut self, amount: usize) {
        self.pos += amount as u64;
    }
}

impl io::Seek for Window<'_> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        let size = self.reader.size();
        let new = match to {
            io::SeekFrom::Start(p) => Some(p),
            io::SeekFrom::End(d) => size.checked_add_signed(d),
            io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = new.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.pos)
    }
}

/// The bytes `offset..offset + len` of another reader.
struct Part<'r> {
    inner: &'r dyn RangeReader,
    offset: u64,
    len: u64,
}

impl<'r> Part<'r> {
    fn new(inner: &'r dyn RangeReader, offset: u64, len: u64) -> Self {
        Part { inner, offset, len }
    }
}

impl RangeReader for Part<'_> {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at offset {offset} is past the member's end ({} bytes)",
                    buf.len(),
                    self.len
                ),
            ));
        }
        self.inner.read_exact_at(self.offset + offset, buf)
    }
}

/// The file name of a single compressed file once expanded: its compression suffix dropped
/// (`.tgz` → `.tar`), else the name as it is.
pub fn expanded_name(name: &str) -> String {
    let name = file_name_of(name);
    let lower = name.to_ascii_lowercase();
    for suffix in [".gz", ".zst", ".zstd", ".xz", ".lz", ".bz2"] {
        if lower.len() > suffix.len() && lower.ends_with(suffix) {
            return name[..name.len() - suffix.len()].to_string();
        }
    }
    for (suffix, tar) in [
        (".tgz", ".tar"),
        (".tzst", ".tar"),
        (".txz", ".tar"),
        (".tlz", ".tar"),
        (".tbz2", ".tar"),
    ] {
        if lower.len() > suffix.len() && lower.ends_with(suffix) {
            return format!("{}{tar}", &name[..name.len() - suffix.len()]);
        }
    }
    name.to_string()
}

#[cfg(test)]
mod robustness;
#[cfg(test)]
mod tests;
