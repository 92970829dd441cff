//! The reader thread: inputs hashed and identified ahead of the store's writer, answered
//! from their stamps and upload records where nothing changed.

use std::io;
use std::path::{Path, PathBuf};

use symdex_shared::formats::source::may_be_text;
use symdex_shared::formats::{identify_with_details, FormatError};
use symdex_shared::identity::Identity;
use symdex_shared::manifest::now_rfc3339;
#[cfg(doc)]
use symdex_shared::pipeline::Indexer;
use symdex_shared::pipeline::{
    route_of, ByteSource, Identified, Indexed, Input, ReadAhead, RecordLookup, Upload,
};
use symdex_shared::reader::head::HeadReader;
use symdex_shared::reader::{FileReader, MemReader, RangeReader};
use symdex_shared::refs::{FileStamp, RefStore, UnparsedUpload};
use symdex_shared::storage::local::{file_sha1, read_file_up_to};
use symdex_shared::storage::{content_sha1, CopySource, LocalStore};
use symdex_shared::upload_meta::UploadMeta;
use symdex_shared::{archive, IdentifyOptions};

use super::{absolute, IndexArgs};
use crate::inputs::{container_of, Walked};
use crate::ordered::map_in_order_on;
use crate::stamps::StampReader;

/// Batches of inputs read ahead of the writers: a bound on the memory they hold that still
/// keeps the reader busy while the writers work.
pub(super) const READ_AHEAD: usize = 4;
/// Inputs handed over together (one thread switch per batch, not per input: a re-index
/// answers an input in a few microseconds), and the bytes read whole a batch holds at most.
pub(super) const BATCH: usize = 64;
pub(super) const BATCH_BYTES: usize = 8 << 20;
/// Inputs queued for one lane.
pub(super) const LANE_QUEUE: usize = 8;

/// One walked input as the reader thread left it for the writer.
pub(super) enum Ahead {
    /// A file (an archive too): its status and bytes as read, and what they are.
    File(PathBuf, io::Result<Box<ReadInput>>),
    Skipped(PathBuf, String),
    Error(PathBuf, io::Error),
}

/// The reader thread: every walked input, in order, until the writer stops listening. The
/// inputs a stamp does not answer are read, hashed and identified on `workers` threads,
/// [`CHUNK_PER_WORKER`] a worker at a time, and handed on in input order.
pub(super) fn read_ahead(
    files: Vec<Walked>,
    store: &LocalStore,
    args: &IndexArgs,
    meta: &UploadMeta,
    (route, workers): (bool, usize),
    ahead: std::sync::mpsc::SyncSender<Vec<Ahead>>,
) {
    let refs = RefStore::new(store);
    let mut stamps = StampReader::new(store);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let (mut batch, mut batch_bytes) = (Vec::new(), 0);
    let mut files = files.into_iter().peekable();
    while files.peek().is_some() {
        // Stamps and records looked up here, in order (the stamp reader is one); the rest
        // read on the workers.
        let mut looked = Vec::new();
        for entry in files.by_ref().take(workers.max(1) * CHUNK_PER_WORKER) {
            looked.push(match entry {
                Walked::File(path) => {
                    let options = IdentifyOptions {
                        as_source: args.keys.sources.wants_source(&path),
                    };
                    let ahead = Some((store, meta));
                    let found = look_up(&refs, &mut stamps, &path, options, args.recheck, ahead);
                    let found = runtime.block_on(found);
                    Looked::File(path, found)
                }
                Walked::Skipped(p, reason) => Looked::Done(Ahead::Skipped(p, reason)),
                Walked::Error(p, e) => Looked::Done(Ahead::Error(p, e)),
            });
        }
        let mut read = Vec::with_capacity(looked.len());
        map_in_order_on(
            workers,
            &looked,
            |looked| match looked {
                Looked::File(_, Ok(Found::Unread(unread))) => Some(unread.read()),
                _ => None,
            },
            |done| {
                read.push(done);
                true
            },
        );
        for (looked, read) in looked.into_iter().zip(read) {
            let item = match (looked, read) {
                (Looked::Done(item), _) => item,
                (Looked::File(path, Err(e)), _) => Ahead::File(path, Err(e)),
                (Looked::File(path, Ok(Found::Known(read))), _) => Ahead::File(path, Ok(read)),
                (Looked::File(path, Ok(Found::Unread(_))), read) => {
                    let read = read.unwrap_or_else(|| Err(io::Error::other("not read")));
                    let routed = read.map(|mut read| {
                        if route {
                            read.route = route_input(&read);
                        }
                        read
                    });
                    Ahead::File(path, routed)
                }
            };
            batch_bytes += match &item {
                Ahead::File(_, Ok(read)) => read.whole.as_ref().map_or(0, Vec::len),
                _ => 0,
            };
            batch.push(item);
            if batch.len() >= BATCH || batch_bytes >= BATCH_BYTES {
                batch_bytes = 0;
                if ahead.send(std::mem::take(&mut batch)).is_err() {
                    return;
                }
            }
        }
    }
    if !batch.is_empty() {
        let _ = ahead.send(batch);
    }
}

/// Inputs read at once a worker (what they hold: small ones are read whole, up to
/// [`READ_WHOLE_BELOW`] each).
const CHUNK_PER_WORKER: usize = 8;

/// A walked input as the reader thread's look-up left it.
enum Looked {
    File(PathBuf, io::Result<Found>),
    Done(Ahead),
}

/// What an input's status and stamp said: known (nothing to read), or to be read.
enum Found {
    Known(Box<ReadInput>),
    Unread(Unread),
}

/// An input to read: where it is, its status as taken, and how it is identified.
struct Unread {
    abs: PathBuf,
    shown: String,
    size: u64,
    /// Its status, settled (`settled_status`), its etag still to fill in.
    settled: Option<FileStamp>,
    options: IdentifyOptions,
}

impl Unread {
    /// Its bytes hashed and identified (or told an archive), on any thread.
    fn read(&self) -> io::Result<Box<ReadInput>> {
        let Content {
            etag,
            whole,
            identified,
            container,
        } = read_content(&self.abs, self.size, &self.options)?;
        // An archive's entries have stamps, never the archive.
        let settled = self.settled.clone().filter(|_| container.is_none());
        let file_stamp = settled.map(|s| FileStamp {
            etag: etag.clone(),
            ..s
        });
        Ok(Box::new(ReadInput {
            abs: self.abs.clone(),
            shown: self.shown.clone(),
            size: whole.as_ref().map_or(self.size, |b| b.len() as u64),
            etag,
            file_stamp,
            whole,
            options: self.options.clone(),
            identified,
            route: None,
            source_path: None,
            prefetched: None,
            container,
        }))
    }
}

/// The route of an input read (`pipeline::route_of`), from what it was identified as. An
/// input answered unread from its source record has none: answering it is a read or two,
/// less than handing it to a lane and back.
pub(super) fn route_input(read: &ReadInput) -> Option<String> {
    match &read.identified {
        Some(Ok(ids)) => route_of(ids, &read.options),
        _ => None,
    }
}

/// An input handed to a lane: its place in the run, its path, what was read.
pub(super) type LaneInput = (usize, PathBuf, Box<ReadInput>);
/// What a lane made of it.
pub(super) type LaneDone = (usize, PathBuf, io::Result<Vec<Indexed>>);

/// A small file whose status said `size`, whole: one open and the reads, not `fs::read`'s
/// status first (the caller has it). `None` where it has grown past [`READ_WHOLE_BELOW`]
/// since: read as a large one (never more than that bound in memory).
pub(super) fn read_small(path: &Path, size: u64) -> io::Result<Option<Vec<u8>>> {
    let bound = READ_WHOLE_BELOW + 1;
    let capacity = size.saturating_add(1).min(bound) as usize;
    let bytes = read_file_up_to(path, capacity, bound)?;
    Ok((bytes.len() as u64 <= READ_WHOLE_BELOW).then_some(bytes))
}

/// An input file as the reader thread found it: its content identity and, unless its source
/// record vouched for it unread, its bytes (when small) and what they are.
pub(super) struct ReadInput {
    pub(super) abs: PathBuf,
    pub(super) shown: String,
    pub(super) size: u64,
    pub(super) etag: String,
    /// Its status to record, when read now and settled (`FileStamp`).
    pub(super) file_stamp: Option<FileStamp>,
    pub(super) whole: Option<Vec<u8>>,
    pub(super) options: IdentifyOptions,
    /// What its bytes are, when they were read.
    pub(super) identified: Option<Result<Vec<Identity>, FormatError>>,
    /// Where it may be indexed beside others (`pipeline::route_of`), when asked.
    pub(super) route: Option<String>,
    /// Where it sits in its source tree, as its upload record says (a hand-over); else
    /// found from the current directory.
    pub(super) source_path: Option<String>,
    /// Its upload record, read ahead (a known input: a re-index reads nothing else).
    pub(super) prefetched: Option<Prefetched>,
    /// An archive of this container: its entries are uploads (it has no record of its own).
    pub(super) container: Option<archive::Container>,
}

/// An upload record the reader thread read ahead of the writer, for
/// [`Indexer::looked_up`]: good only while the store's count of changes is still `changes`
/// ([`LocalStore::changes`]; the writer lock makes this run the store's only writer).
pub(super) struct Prefetched {
    pub(super) upload: String,
    pub(super) changes: u64,
    /// Taken before the read (`Indexer::already_indexed` says why).
    pub(super) time: String,
    /// Parsed by the writer: the reader has the status and the read of every input to
    /// make, the writer less (a re-index is the two side by side).
    pub(super) record: UnparsedUpload,
}

/// Reads an input (reader thread): only its status when a stamp knows that status (a
/// re-index opens no input), and then, `ahead`, its upload record; else its bytes, hashed and
/// identified — or, an archive, hashed and which container it is (its entries are read as
/// they are indexed).
pub(super) async fn read_input(
    refs: &RefStore<'_>,
    stamps: &mut StampReader<'_>,
    path: &Path,
    options: IdentifyOptions,
    recheck: bool,
    ahead: Option<(&LocalStore, &UploadMeta)>,
) -> io::Result<Box<ReadInput>> {
    match look_up(refs, stamps, path, options, recheck, ahead).await? {
        Found::Known(read) => Ok(read),
        Found::Unread(unread) => unread.read(),
    }
}

/// [`read_input`]'s look at an input's status and stamp (the reader thread's part): known,
/// with its upload record read `ahead`; or to be read.
async fn look_up(
    refs: &RefStore<'_>,
    stamps: &mut StampReader<'_>,
    path: &Path,
    options: IdentifyOptions,
    recheck: bool,
    ahead: Option<(&LocalStore, &UploadMeta)>,
) -> io::Result<Found> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        absolute(path)
    };
    let shown = abs.to_string_lossy().into_owned();
    // The status first, then the bytes: a change while they are read shows in the next
    // status, never in a stamp of the old one.
    let status = std::fs::metadata(&abs)?;
    // The walk skips special files; one put in a regular file's place since would block the
    // open (a FIFO) or never end (a device).
    if !status.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (it was one when the inputs were listed)",
        ));
    }
    // Settled (else never trusted, so not even looked up), its etag still to fill in.
    let settled = settled_status(&status);
    // Its directory's stamps (stamps.rs), else its source record's (stores written before).
    let known = match (&settled, recheck) {
        (Some(now), false) => match stamps.get(&shown).await?.filter(|k| now.same_status(k)) {
            Some(known) => Some(known),
            None if stamps.in_source_records().await? => (refs.source(&shown).await?)
                .and_then(|r| r.file)
                .filter(|k| now.same_status(k)),
            None => None,
        },
        _ => None,
    };
    // Known: a file indexed before (an archive's entries have stamps, never the archive).
    if let Some(known) = known {
        // Its upload record too, read ahead: the writer then only checks that nothing
        // changed the store since, instead of reading it in its turn.
        let prefetched = match ahead {
            Some((store, meta)) => read_record_ahead(refs, store, &shown, &known, meta).await?,
            None => None,
        };
        return Ok(Found::Known(Box::new(ReadInput {
            abs,
            shown,
            size: status.len(),
            etag: known.etag,
            file_stamp: None,
            whole: None,
            options,
            identified: None,
            route: None,
            source_path: None,
            prefetched,
            container: None,
        })));
    }
    Ok(Found::Unread(Unread {
        abs,
        shown,
        size: status.len(),
        settled,
        options,
    }))
}

/// The upload record of a known input (its stamp's content), read ahead of the writer.
async fn read_record_ahead(
    refs: &RefStore<'_>,
    store: &LocalStore,
    shown: &str,
    known: &FileStamp,
    meta: &UploadMeta,
) -> io::Result<Option<Prefetched>> {
    let upload = Input::file(shown, meta).upload_id(&known.etag);
    let changes = store.changes();
    let time = now_rfc3339();
    Ok(
        (refs.upload_unparsed(&upload).await?).map(|record| Prefetched {
            upload,
            changes,
            time,
            record,
        }),
    )
}

/// An input's content as read: its etag, its bytes when small, and what they are.
struct Content {
    etag: String,
    whole: Option<Vec<u8>>,
    /// `None` for an archive.
    identified: Option<Result<Vec<Identity>, FormatError>>,
    container: Option<archive::Container>,
}

/// Reads an input of `size` bytes (as its status said): hashed, and identified or told an
/// archive. A small input is read once, whole: told from an archive, hashed, identified and
/// stored from the same bytes (identifying it through the file took ~50 small reads, one per
/// section name, and hashing read it again; a build directory is mostly such files); a small
/// archive is expanded from them too.
fn read_content(abs: &Path, size: u64, options: &IdentifyOptions) -> io::Result<Content> {
    let small = match size <= READ_WHOLE_BELOW {
        true => read_small(abs, size)?,
        false => None,
    };
    let content = match small {
        Some(bytes) => {
            let head = &bytes[..bytes.len().min(archive::DETECT_LEN)];
            let container = archive::detect(head);
            let identified = container
                .is_none()
                .then(|| identify_with_details(&MemReader(bytes.as_slice()), options));
            Content {
                etag: content_sha1(&bytes),
                whole: Some(bytes),
                identified,
                container,
            }
        }
        None => {
            let container = container_of(abs);
            let identified = match container {
                Some(_) => None,
                // Through its head: one read for the headers, where identifying through
                // the file took a read a structure.
                None => {
                    let reader = HeadReader::new(FileReader::open(abs)?)?;
                    Some(identify_with_details(&reader, options))
                }
            };
            Content {
                etag: file_sha1(abs)?,
                whole: None,
                identified,
                container,
            }
        }
    };
    Ok(content)
}

impl ReadInput {
    /// What the driver is given of this input (`Indexer::index`): the upload it is, how its
    /// record is found — from the record read ahead, if it was and it is this upload's, else
    /// by a read in its turn (an earlier input may change the record; an archive has none) —
    /// and its bytes.
    pub(super) fn take_for_driver(
        &mut self,
        meta: &UploadMeta,
    ) -> io::Result<(Upload<'_>, RecordLookup, InputBytes<'_>)> {
        let prefetched = self.prefetched.take();
        let identified = self.identified.take();
        let read: &ReadInput = self;
        let upload = read.upload(meta);
        let lookup = match prefetched {
            _ if read.container.is_some() => RecordLookup::AtPlan,
            Some(p) if p.upload == upload.id => {
                let (found, prior) = p.record.parse()?;
                RecordLookup::ReadAhead(Box::new(ReadAhead {
                    found,
                    prior,
                    time: p.time,
                }))
            }
            _ => RecordLookup::Read,
        };
        Ok((upload, lookup, InputBytes::new(read, identified)))
    }

    /// The upload it is.
    pub(super) fn upload(&self, meta: &UploadMeta) -> Upload<'_> {
        // Under a source root, a loose source file sits in its tree where it sits under the
        // current directory (`cd checkout && symdex index --source-root /build/dir src/`).
        let source_path = self.source_path.clone().or_else(|| {
            meta.source_root.as_ref()?;
            let cwd = absolute(Path::new("."));
            self.abs
                .strip_prefix(&cwd)
                .ok()
                .map(|rel| rel.to_string_lossy().replace('\\', "/"))
        });
        Upload::from_file(
            &Input::file(&self.shown, meta),
            self.whole
                .as_deref()
                .map_or(CopySource::File(&self.abs), CopySource::Bytes),
            &self.etag,
            self.size,
            self.options.clone(),
            source_path,
            self.file_stamp.clone(),
        )
    }
}

/// Inputs up to this size are read whole when they are hashed (see `index_file`).
pub(super) const READ_WHOLE_BELOW: u64 = 1 << 20;

/// A file's stamp (refs/) from this status, its etag empty, when it was left alone long
/// enough before the status was taken to be trusted later.
#[cfg(unix)]
pub(super) fn settled_status(status: &std::fs::Metadata) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let stamp = FileStamp {
        size: status.len(),
        mtime_ns: ns(status.mtime(), status.mtime_nsec()),
        ctime_ns: ns(status.ctime(), status.ctime_nsec()),
        inode: status.ino(),
        device: status.dev(),
        etag: String::new(),
    };
    let settled = i128::try_from(now).ok()? - FileStamp::SETTLED.as_nanos() as i128;
    (stamp.mtime_ns.max(stamp.ctime_ns) <= settled).then_some(stamp)
}

/// No stamps where the status has no inode and change time.
#[cfg(not(unix))]
pub(super) fn settled_status(_status: &std::fs::Metadata) -> Option<FileStamp> {
    None
}

/// An input file's bytes as the reader thread left them: identified already (handed to the
/// driver once, as it was asked), in memory when small, else read from the file.
pub(super) struct InputBytes<'r> {
    read: &'r ReadInput,
    identified: std::sync::Mutex<Option<Result<Vec<Identity>, FormatError>>>,
}

impl<'r> InputBytes<'r> {
    /// `identified`: what the reader thread found (`None`: answered unread from its stamp).
    pub(super) fn new(
        read: &'r ReadInput,
        identified: Option<Result<Vec<Identity>, FormatError>>,
    ) -> Self {
        InputBytes {
            read,
            identified: std::sync::Mutex::new(identified),
        }
    }

    /// A reader of its bytes.
    fn reader(&self) -> io::Result<Box<dyn RangeReader + '_>> {
        Ok(match &self.read.whole {
            Some(bytes) => Box::new(MemReader(bytes.as_slice())),
            None => Box::new(FileReader::open(&self.read.abs)?),
        })
    }
}

impl ByteSource for InputBytes<'_> {
    async fn identify(&self, options: &IdentifyOptions) -> io::Result<Identified> {
        if let Some(container) = self.read.container {
            return Ok(Identified::Archive(container));
        }
        let ahead = match *options == self.read.options {
            true => (self.identified.lock().unwrap_or_else(|e| e.into_inner())).take(),
            false => None,
        };
        let identified = match ahead {
            Some(identified) => identified,
            None => identify_with_details(&*self.reader()?, options),
        };
        Ok(Identified::Formats(identified))
    }

    async fn debug_details(&self, ids: Vec<Identity>) -> io::Result<Vec<Identity>> {
        // Identified with them.
        Ok(ids)
    }

    async fn may_be_text(&self) -> io::Result<bool> {
        Ok(may_be_text(&*self.reader()?))
    }
}
