//! `symdex index` and `symdex delete` over a local store directory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use symdex_shared::archive;
use symdex_shared::formats::{identify_with_details, FormatError};
use symdex_shared::identity::Identity;
use symdex_shared::manifest::{now_rfc3339, Action, Record, UploadMeta};
use symdex_shared::pipeline::{
    default_prefixes, route_of, ArchiveSite, Config, HandOver, Indexed, Indexer, Input, Lookup,
    StoredEntry, Summary, Upload,
};
use symdex_shared::reader::{FileReader, MemReader, RangeReader};
use symdex_shared::refs::{
    DeferredWrites, FileStamp, LeasePolicy, RefStore, UnparsedUpload, UploadRecord,
};
use symdex_shared::retention::{RetentionPolicy, DEFAULT_POLICY};
use symdex_shared::storage::local::{file_sha1, read_file_up_to};
use symdex_shared::storage::{content_sha1, CopySource, LocalStore};
use symdex_shared::{IdentifyOptions, Layout};

use crate::inputs::{
    container_of, expand_paths_excluding, file_name, LayoutArgs, SourceArgs, Walked,
};
use crate::stamps::{NewStamps, StampReader};
use crate::DEFAULT_STORE;

#[derive(Args)]
pub struct IndexArgs {
    /// Files, directories (recursive) or archives (zip, nupkg, tar, tar.gz/zst/xz/bz2, single
    /// .gz/.zst/.xz/.bz2 files, CAB `.pd_`, Debian and RPM packages, cpio, 7z): every entry is
    /// indexed.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The store directory (created if missing).
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: PathBuf,
    #[command(flatten)]
    pub keys: KeyArgs,
    /// The directory the build compiled its sources in (the absolute paths its debug files
    /// name): source files and source archive entries then serve exactly
    /// `<DIR>/<their path>` (a loose file's path relative to the current directory), instead
    /// of being matched by the longest path suffix.
    #[arg(long, value_name = "DIR")]
    pub source_root: Option<String>,
    /// Build id recorded with every upload (and used by `delete --build`).
    #[arg(long)]
    pub build: Option<String>,
    /// Product recorded with every upload (manifest queries, per-product audits).
    #[arg(long)]
    pub product: Option<String>,
    /// Product version recorded with every upload.
    #[arg(long = "version", name = "product-version")]
    pub version: Option<String>,
    /// Retention channel of these uploads (`try`, `nightly`, `release`...).
    #[arg(long)]
    pub channel: Option<String>,
    #[command(flatten)]
    pub policy: PolicyArg,
    /// Replace keys whose content differs instead of reporting a conflict.
    #[arg(long)]
    pub overwrite: bool,
    /// Check every key of an input indexed before, as a first run does (repairs objects
    /// deleted or changed behind symdex's back). Without it, an input whose last run published
    /// all its keys is answered from its upload record (`verify` finds what it would repair).
    #[arg(long)]
    pub recheck: bool,
    #[command(flatten)]
    pub limits: ArchiveLimits,
    /// Print every manifest record (JSON Lines) instead of only the summary.
    #[arg(long)]
    pub json: bool,
    /// Inputs indexed at once (default: the machine's cores). ELF files with a build id and
    /// thin Mach-O files of different ids are indexed side by side; everything else alone,
    /// in order. The store and the manifest come out as with `--jobs 1`.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
}

/// What decides an input's keys besides its bytes: given to `index`, and to `delete` and
/// `expire`, which index the uploads waiting for keys they free again (refs/, invariant 8)
/// — the same options as `index` was given.
#[derive(Args, Clone)]
pub struct KeyArgs {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Key prefix of a layout, e.g. `unified=sentry/` (repeatable).
    #[arg(long = "prefix", value_name = "LAYOUT=PREFIX", value_parser = parse_prefix)]
    pub prefixes: Vec<(Layout, String)>,
    /// Store the SymSrv family's keys (ssqp, symstore, symstore_index2, breakpad) lowercase,
    /// for a server that looks them up case-insensitively (`symdex serve --fold-case`, the
    /// Terraform module's CDN).
    #[arg(long)]
    pub fold_case: bool,
    /// Do not join debug files and sources (for a store nobody uploads sources to): debug
    /// files record no wanted paths, sources serve none (`--source` files are still keyed).
    #[arg(long)]
    pub no_source_joins: bool,
    #[command(flatten)]
    pub sources: SourceArgs,
}

impl KeyArgs {
    /// The configuration of a writer holding the store's lock, with these keys.
    pub fn config(&self) -> Config {
        let mut prefixes = default_prefixes();
        prefixes.extend(self.prefixes.iter().cloned());
        Config {
            layouts: self.layout.layouts(),
            prefixes,
            lease: exclusive_lease(),
            fold_case: self.fold_case,
            source_joins: !self.no_source_joins,
            ..Config::default()
        }
    }
}

/// Hands the keys a removal freed to the uploads waiting for them (refs/, invariant 8):
/// each upload's input is indexed again as `index --recheck` would (an archive entry's whole
/// archive), if it still holds the bytes the upload was. An input gone or changed is left
/// alone: the upload stays waiting, `verify` reports the key (`waiting`).
pub struct FromFiles<'s> {
    store: &'s crate::crash::Store,
    unpack: Unpack<'s>,
    /// The deferred source-map writes of the run handing over, where it defers them: the
    /// re-indexes share them (see `refs::DeferredWrites`).
    deferred: Option<Arc<DeferredWrites>>,
}

impl HandOver for FromFiles<'_> {
    fn reindex<'a>(
        &'a self,
        waiter: &'a UploadRecord,
        handed: &'a std::collections::BTreeSet<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + 'a>> {
        Box::pin(self.reindex_input(waiter, handed))
    }
}

impl<'s> FromFiles<'s> {
    /// `keys` and `limits`: what `index` was given.
    pub fn new(store: &'s crate::crash::Store, keys: &'s KeyArgs, limits: ArchiveLimits) -> Self {
        FromFiles {
            store,
            unpack: Unpack { limits, keys },
            deferred: None,
        }
    }

    /// Re-indexes sharing `deferred`, the run's deferred source-map writes.
    pub fn sharing(mut self, deferred: &Arc<DeferredWrites>) -> Self {
        self.deferred = Some(Arc::clone(deferred));
        self
    }

    async fn reindex_input(
        &self,
        waiter: &UploadRecord,
        handed: &std::collections::BTreeSet<String>,
    ) -> io::Result<()> {
        let path = Path::new(&waiter.source);
        if !path.is_file() {
            return Ok(());
        }
        let unpack = self.unpack;
        let config = Config {
            recheck: true,
            handed: handed.clone(),
            ..unpack.keys.config()
        };
        let mut indexer = Indexer::new(self.store, config);
        if let Some(deferred) = &self.deferred {
            indexer = indexer.defer_source_map_writes_to(Arc::clone(deferred));
        }
        let mut sink = Sink::new(&indexer, false);
        // Identified as the upload was: its record says whether it was a source.
        let options = IdentifyOptions {
            as_source: waiter.as_source || unpack.keys.sources.wants_source(path),
        };
        let meta = &waiter.meta;
        // The bytes the upload was: its own, or (an entry) its archive's.
        let archive_etag = waiter.ingest_etag.as_deref();
        // Read whatever stamps say (`recheck`): the bytes must still be the upload's.
        let mut stamps = StampReader::new(self.store);
        match read_input(indexer.refs(), &mut stamps, path, options, true, None).await? {
            Ok(mut read) => {
                read.source_path.clone_from(&waiter.source_path);
                let same = match &waiter.entry {
                    None => read.upload(meta).id == waiter.upload,
                    Some(_) => archive_etag == Some(read.etag.as_str()),
                };
                if !same {
                    return Ok(());
                }
                index_read_file(&mut sink, self.store, path, read, meta, unpack).await?;
            }
            Err(container) => {
                if archive_etag != Some(file_sha1(path)?.as_str()) {
                    return Ok(());
                }
                let local = self.store.inner();
                index_archive(&mut sink, local, path, container, meta, unpack).await?;
            }
        }
        sink.flush().await?;
        eprintln!("symdex: handed over to {}: {}", waiter.upload, sink.summary);
        Ok(())
    }
}

fn parse_prefix(s: &str) -> Result<(Layout, String), String> {
    let (layout, prefix) = s.split_once('=').ok_or("expected LAYOUT=PREFIX")?;
    let layout: Layout = layout.parse()?;
    let mut prefix = prefix.trim_start_matches('/').to_string();
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    if !prefix.is_empty() {
        symdex_shared::storage::check_key(prefix.trim_end_matches('/'))
            .map_err(|e| e.to_string())?;
    }
    Ok((layout, prefix))
}

#[derive(Args)]
pub struct DeleteArgs {
    /// The store directory.
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: PathBuf,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub limits: ArchiveLimits,
    /// Delete every upload of this build.
    #[arg(long, required_unless_present = "input")]
    pub build: Option<String>,
    /// Delete the uploads of these input paths (a directory deletes everything under it).
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
}

fn config(args: &IndexArgs) -> Config {
    Config {
        overwrite: args.overwrite,
        recheck: args.recheck,
        retention: args.policy.policy.clone(),
        ..args.keys.config()
    }
}

/// `--policy`: channel -> retention.
#[derive(Args, Clone)]
pub struct PolicyArg {
    /// Retention per channel, e.g. `try=28d,nightly=90d,release=forever` (units s, m, h, d,
    /// w, y). Uploads without a channel, or of a channel not named, never expire.
    #[arg(long = "policy", value_name = "POLICY", default_value = DEFAULT_POLICY)]
    pub policy: RetentionPolicy,
}

/// The CLI holds the store's writer lock for its whole run: every lease it meets that is not
/// its own was left by a process that died.
pub fn exclusive_lease() -> LeasePolicy {
    LeasePolicy {
        exclusive: true,
        ..LeasePolicy::default()
    }
}

/// Opens a store for writing: takes the writer lock (waiting for another `symdex index` or
/// `delete` on the same store, and saying so), removes what a killed run left in `tmp`, and
/// names owners in the objects it writes where the file system can (`LocalStore::
/// naming_owners_as_marked`: a key one upload alone references then needs no record).
pub fn open_for_writing(
    path: &Path,
) -> anyhow::Result<(
    crate::crash::Store,
    symdex_shared::storage::local::WriterLock,
)> {
    let store =
        LocalStore::open(path).with_context(|| format!("cannot open store {}", path.display()))?;
    let lock = store
        .lock_writer(|| {
            eprintln!(
                "symdex: another symdex process is writing to {}; waiting for it to finish",
                path.display()
            )
        })
        .with_context(|| format!("cannot lock store {}", path.display()))?;
    let leftovers = store.clean_temp(&lock)?;
    if leftovers > 0 {
        eprintln!("symdex: removed {leftovers} temporary files left by an interrupted run");
    }
    let store = store
        .naming_owners_as_marked(Some(&lock))
        .with_context(|| format!("cannot write to store {}", path.display()))?;
    Ok((crate::crash::store(store), lock))
}

fn absolute(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

pub fn run(args: &IndexArgs) -> anyhow::Result<ExitCode> {
    let (store, _lock) = open_for_writing(&args.store)?;
    let store_root = absolute(store.inner().root());
    // Canonical paths (upload ids name them): `index_file` takes them as they are.
    let files = expand_paths_excluding(&args.inputs, &store_root);
    let count = files.len();
    // A removal a killed `delete` or `expire` left half done is finished by indexing its
    // upload again: the keys it frees go to the uploads waiting for them, as they would have.
    // The writer lock makes this run the store's only writer: source-map records are
    // written once per flush, before the uploads they serve are finalized (the hand-over's
    // re-indexes too: they share the deferred writes).
    let deferred = Arc::default();
    let hand_over = FromFiles::new(&store, &args.keys, args.limits).sharing(&deferred);
    let indexer = Indexer::new(&store, config(args))
        .defer_source_map_writes_to(deferred)
        .handing_over_to(&hand_over);
    let meta = upload_meta(args);
    let lanes = match args.jobs {
        Some(jobs) => jobs,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // One lane is no lane: every input is indexed by this thread, in order.
    let lanes = if lanes > 1 { lanes } else { 0 };
    // Inputs are read, hashed and identified on a thread of their own, ahead of the writers.
    // It only reads: an input's stamp (stamps.rs), and a known input's upload record, used
    // only if nothing changed the store since (`Prefetched`).
    let stamps = Mutex::new(NewStamps::default());
    std::thread::scope(|scope| {
        let (ahead, inputs) = std::sync::mpsc::sync_channel(READ_AHEAD);
        let (reader, meta) = (store.inner(), &meta);
        scope.spawn(move || read_ahead(files, reader, args, meta, lanes > 0, ahead));
        let (done, finished) = std::sync::mpsc::channel();
        let mut senders = Vec::new();
        for _ in 0..lanes {
            let (send, lane) = std::sync::mpsc::sync_channel::<LaneInput>(LANE_QUEUE);
            senders.push(send);
            let (indexer, done, stamps) = (&indexer, done.clone(), &stamps);
            scope.spawn(move || run_lane(indexer, meta, stamps, lane, done));
        }
        drop(done);
        let writer = Writer {
            indexer: &indexer,
            lanes: senders,
            finished,
            dispatched: std::collections::VecDeque::new(),
            results: BTreeMap::new(),
        };
        crate::block_on(run_async(
            args, &store, meta, &stamps, writer, inputs, count,
        ))?
    })
}

fn upload_meta(args: &IndexArgs) -> UploadMeta {
    UploadMeta {
        build: args.build.clone(),
        product: args.product.clone(),
        version: args.version.clone(),
        channel: args.channel.clone(),
        expires: None,
        source_root: args.source_root.clone(),
    }
}

/// Batches of inputs read ahead of the writers: a bound on the memory they hold that still
/// keeps the reader busy while the writers work.
const READ_AHEAD: usize = 4;
/// Inputs handed over together (one thread switch per batch, not per input: a re-index
/// answers an input in a few microseconds), and the bytes read whole a batch holds at most.
const BATCH: usize = 64;
const BATCH_BYTES: usize = 8 << 20;
/// Inputs queued for one lane.
const LANE_QUEUE: usize = 8;

/// One walked input as the reader thread left it for the writer.
enum Ahead {
    /// A file: its status and bytes as read, and what they are.
    File(PathBuf, io::Result<Box<ReadInput>>),
    /// An archive (its entries are read as they are indexed).
    Archive(PathBuf, archive::Container),
    Skipped(PathBuf, String),
    Error(PathBuf, io::Error),
}

/// The reader thread: every walked input, in order, until the writer stops listening.
fn read_ahead(
    files: Vec<Walked>,
    store: &LocalStore,
    args: &IndexArgs,
    meta: &UploadMeta,
    route: bool,
    ahead: std::sync::mpsc::SyncSender<Vec<Ahead>>,
) {
    let refs = RefStore::new(store);
    let mut stamps = StampReader::new(store);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let (mut batch, mut batch_bytes) = (Vec::new(), 0);
    for entry in files {
        let item = match entry {
            Walked::File(path) => {
                let options = IdentifyOptions {
                    as_source: args.keys.sources.wants_source(&path),
                };
                let ahead = Some((store, meta));
                let read = read_input(&refs, &mut stamps, &path, options, args.recheck, ahead);
                match runtime.block_on(read) {
                    Ok(Ok(mut read)) => {
                        if route {
                            read.route = route_input(&read);
                        }
                        Ahead::File(path, Ok(Box::new(read)))
                    }
                    Ok(Err(container)) => Ahead::Archive(path, container),
                    Err(e) => Ahead::File(path, Err(e)),
                }
            }
            Walked::Skipped(p, reason) => Ahead::Skipped(p, reason),
            Walked::Error(p, e) => Ahead::Error(p, e),
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
    if !batch.is_empty() {
        let _ = ahead.send(batch);
    }
}

/// The route of an input read (`pipeline::route_of`), from what it was identified as. An
/// input answered unread from its source record has none: answering it is a read or two,
/// less than handing it to a lane and back.
fn route_input(read: &ReadInput) -> Option<String> {
    match &read.identified {
        Some(Ok(ids)) => route_of(ids, &read.options),
        _ => None,
    }
}

/// An input handed to a lane: its place in the run, its path, what was read.
type LaneInput = (usize, PathBuf, Box<ReadInput>);
/// What a lane made of it.
type LaneDone = (usize, PathBuf, io::Result<Indexed>);

/// A lane: indexes the inputs of its routes in the order it gets them.
fn run_lane(
    indexer: &Indexer<'_>,
    meta: &UploadMeta,
    stamps: &Mutex<NewStamps>,
    inputs: std::sync::mpsc::Receiver<LaneInput>,
    done: std::sync::mpsc::Sender<LaneDone>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            for (seq, path, _) in inputs {
                let failed = io::Error::other(format!("no runtime for its lane: {e}"));
                if done.send((seq, path, Err(failed))).is_err() {
                    return;
                }
            }
            return;
        }
    };
    for (seq, path, read) in inputs {
        // Every input handed over is answered, a panic too (as an error): the writer waits
        // for each in order, and would wait for a lost one forever.
        let indexed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            runtime.block_on(index_file(indexer, *read, meta, Some(stamps)))
        }))
        .unwrap_or_else(|panic| {
            let what = symdex_shared::panic_message(&*panic);
            Err(io::Error::other(format!("indexing it panicked: {what}")))
        });
        if done.send((seq, path, indexed)).is_err() {
            return;
        }
    }
}

/// Writes what the lanes index, in input order.
///
/// Invariant: the sink takes inputs in input order, and an input indexed by this thread
/// (`None` route) starts only when every input before it is taken and none after it has
/// started; inputs in lanes run beside each other only when their routes differ
/// (`pipeline::route_of` says why that ends as one after another would). So the store, the
/// manifest and the summary are those of one writer taking the inputs in order — whatever
/// the lanes' timing.
struct Writer<'i, 's> {
    indexer: &'i Indexer<'s>,
    lanes: Vec<std::sync::mpsc::SyncSender<LaneInput>>,
    finished: std::sync::mpsc::Receiver<LaneDone>,
    /// Inputs handed to lanes and not taken by the sink yet, in input order.
    dispatched: std::collections::VecDeque<usize>,
    /// Lane results waiting for an earlier input's.
    results: BTreeMap<usize, (PathBuf, io::Result<Indexed>)>,
}

impl Writer<'_, '_> {
    /// Hands an input to the lane of its route.
    fn dispatch(&mut self, seq: usize, route: &str, path: PathBuf, mut read: Box<ReadInput>) {
        use std::hash::{Hash, Hasher};
        // A lane reads its upload record in its turn: a record read ahead is checked against
        // the store's changes by this thread only (`index_read_file`). (A routed input was
        // read and identified, so none was read ahead.)
        read.prefetched = None;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        route.hash(&mut hasher);
        let lane = (hasher.finish() % self.lanes.len() as u64) as usize;
        self.dispatched.push_back(seq);
        // A lane stops only when its queue closes (a panic, even a lane without a runtime,
        // answers): should its queue be gone all the same, the input is answered here.
        if let Err(std::sync::mpsc::SendError((seq, path, _))) =
            self.lanes[lane].send((seq, path, read))
        {
            let stopped = io::Error::other("its indexing lane did not start");
            self.results.insert(seq, (path, Err(stopped)));
        }
    }

    /// Gives the sink the lane results that are next in input order; with `all`, waits
    /// until every dispatched input is taken.
    async fn take(
        &mut self,
        sink: &mut Sink<'_, '_>,
        all: bool,
        failed: &mut bool,
    ) -> anyhow::Result<()> {
        loop {
            while let Some(seq) = self.dispatched.front().copied() {
                let Some((path, indexed)) = self.results.remove(&seq) else {
                    break;
                };
                self.dispatched.pop_front();
                match indexed {
                    Ok(indexed) => sink.push_held(indexed).await?,
                    Err(e) => {
                        eprintln!("symdex: {}: {e}", path.display());
                        *failed = true;
                    }
                }
            }
            if self.dispatched.is_empty() {
                return Ok(());
            }
            let next = if all {
                self.finished.recv().ok()
            } else {
                match self.finished.try_recv() {
                    Ok(done) => Some(done),
                    Err(std::sync::mpsc::TryRecvError::Empty) => return Ok(()),
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
                }
            };
            let Some((seq, path, indexed)) = next else {
                anyhow::bail!("an indexing lane stopped before it answered");
            };
            self.results.insert(seq, (path, indexed));
        }
    }
}

async fn run_async(
    args: &IndexArgs,
    store: &crate::crash::Store,
    meta: &UploadMeta,
    stamps: &Mutex<NewStamps>,
    mut writer: Writer<'_, '_>,
    inputs: std::sync::mpsc::Receiver<Vec<Ahead>>,
    count: usize,
) -> anyhow::Result<ExitCode> {
    let indexer = writer.indexer;
    indexer.prepare().await?;
    let bar = progress(count);
    let mut sink = Sink::new(indexer, args.json);
    sink.stamps = Some(stamps);
    let mut failed = false;
    // Blocking receives on the runtime's only thread: nothing else runs on it.
    for (seq, item) in inputs.into_iter().flatten().enumerate() {
        bar.inc(1);
        // A file of a route goes to its lane; anything else is indexed here, alone: after
        // every input before it is taken (as for one writer).
        let route = match &item {
            Ahead::File(_, Ok(read)) if !writer.lanes.is_empty() => read.route.clone(),
            _ => None,
        };
        let item = match (route, item) {
            (Some(route), Ahead::File(path, Ok(read))) => {
                // A flush finalizes what the sink holds: every input before it is taken
                // first, none after it has started.
                if sink.pending.len() + writer.dispatched.len() >= FLUSH_EVERY {
                    writer.take(&mut sink, true, &mut failed).await?;
                    sink.flush().await?;
                }
                bar.set_message(path.display().to_string());
                writer.dispatch(seq, &route, path, read);
                writer.take(&mut sink, false, &mut failed).await?;
                continue;
            }
            (_, item) => item,
        };
        writer.take(&mut sink, true, &mut failed).await?;
        let (path, result) = match item {
            Ahead::File(path, read) => {
                bar.set_message(path.display().to_string());
                let result = match read {
                    Ok(read) => {
                        let unpack = Unpack::of(args);
                        index_read_file(&mut sink, store, &path, *read, meta, unpack).await
                    }
                    Err(e) => Err(e),
                };
                (path, result)
            }
            Ahead::Archive(path, container) => {
                bar.set_message(path.display().to_string());
                let local = store.inner();
                let unpack = Unpack::of(args);
                let result = index_archive(&mut sink, local, &path, container, meta, unpack).await;
                (path, result)
            }
            Ahead::Skipped(p, reason) => {
                // The link's own absolute path (canonicalising it would name its target).
                let shown = match (p.parent(), p.file_name()) {
                    (Some(dir), Some(name)) => absolute(dir).join(name),
                    _ => p.clone(),
                }
                .to_string_lossy()
                .into_owned();
                sink.push(Input::file(&shown, meta).nothing_published(
                    None,
                    Action::Skipped,
                    reason,
                ))
                .await?;
                continue;
            }
            Ahead::Error(p, e) => (p, Err(e)),
        };
        if let Err(e) = result {
            bar.suspend(|| eprintln!("symdex: {}: {e}", path.display()));
            failed = true;
        }
    }
    writer.take(&mut sink, true, &mut failed).await?;
    bar.finish_and_clear();
    sink.finish().await?;
    println!("symdex: {} -> {}", sink.summary, args.store.display());
    for key in &sink.manifests {
        println!("manifest: {}", store.inner().root().join(key).display());
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Indexes an input file on the writer's own thread (everything before it taken), then the
/// files of a Sentry source bundle, which are sources of their own (sourcemap.rs).
async fn index_read_file(
    sink: &mut Sink<'_, '_>,
    store: &crate::crash::Store,
    path: &Path,
    mut read: ReadInput,
    meta: &UploadMeta,
    unpack: Unpack<'_>,
) -> io::Result<()> {
    // A record read ahead is used only if nothing changed the store since.
    if (read.prefetched.as_ref()).is_some_and(|p| p.changes != store.inner().changes()) {
        read.prefetched = None;
    }
    let indexed = index_file(sink.indexer, read, meta, sink.stamps).await?;
    let bundle = bundle_files(path, &indexed);
    sink.push(indexed).await?;
    match bundle {
        Some(files) => {
            let (zip, local) = (archive::Container::Zip, store.inner());
            index_entries(sink, local, path, zip, meta, unpack, Some(&files)).await
        }
        None => Ok(()),
    }
}

/// Uploads recorded and finalized together: a huge input (100,000 archive entries) is held in
/// memory this many at a time, and a killed run re-reports at most this many. 1,000, not the
/// 5,000 it was: a re-index of 5,000 unchanged inputs held all of their records (about 4 KB
/// each with the manifest's bytes), and touching that much fresh memory (the kernel zeroing
/// its pages) was a quarter of the writer's time; flushed every 1,000 the memory is reused,
/// and the re-index took 17% less (0.061 -> 0.050 s on tmpfs). A fresh index is the same
/// (its flushes wait for the lanes' few queued inputs), with one manifest object per 1,000
/// uploads instead of 5,000.
const FLUSH_EVERY: usize = 1_000;

/// Where indexed uploads go: buffered, then written to the manifest and finalized (the
/// manifest first: a run killed in between reports the same keys again when re-run, never
/// none; the manifest is at-least-once).
struct Sink<'i, 's> {
    indexer: &'i Indexer<'s>,
    pending: Vec<Indexed>,
    /// Stamps of the files hashed and not written yet (the run's own inputs, not a
    /// hand-over's: lanes add theirs), written by the flushes (`NewStamps::due`).
    stamps: Option<&'i Mutex<NewStamps>>,
    summary: Summary,
    manifests: Vec<String>,
    json: bool,
}

impl<'i, 's> Sink<'i, 's> {
    fn new(indexer: &'i Indexer<'s>, json: bool) -> Self {
        Sink {
            indexer,
            pending: Vec::new(),
            stamps: None,
            summary: Summary::default(),
            manifests: Vec::new(),
            json,
        }
    }

    /// The run's last flush: the stamps held back by the flushes before it are written too
    /// (`NewStamps::due`).
    async fn finish(&mut self) -> io::Result<()> {
        self.flush_as(true).await
    }

    /// Takes the next upload in input order, flushing when it holds enough (only call it
    /// with no lane busy: see [`Writer`]).
    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.push_held(indexed).await?;
        if self.pending.len() >= FLUSH_EVERY {
            self.flush().await?;
        }
        Ok(())
    }

    /// Takes the next upload in input order, without flushing: its source-map changes are
    /// made now (`Indexer::register_source_map_changes`), its records held for the manifest.
    async fn push_held(&mut self, mut indexed: Indexed) -> io::Result<()> {
        self.indexer
            .register_source_map_changes(&mut indexed)
            .await?;
        self.pending.push(indexed);
        Ok(())
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.flush_as(false).await
    }

    /// Writes the manifest records of what the sink holds and finalizes it, and writes the
    /// stamps due (`last`: the run's last flush, see `NewStamps::due`).
    async fn flush_as(&mut self, last: bool) -> io::Result<()> {
        // Wants and offers reach the store before any upload that holds them is finalized.
        self.indexer.flush_source_maps().await?;
        let pending = std::mem::take(&mut self.pending);
        // Written from where they are: a re-index's records are most of its work.
        let written: Vec<&Record> = pending.iter().flat_map(|i| &i.records).collect();
        self.manifests
            .extend(self.indexer.write_manifest(&written).await?);
        // An upload taken back (a removal came first) is reported too: its records are in
        // the manifest already (written by `finalize`, before it hands over what it freed).
        let mut undone = Vec::new();
        for upload in &pending {
            undone.extend(self.indexer.finalize(upload, true).await?);
        }
        if let Some(stamps) = self.stamps {
            let due = (stamps.lock().unwrap_or_else(|e| e.into_inner())).due(last);
            due.write(self.indexer.store()).await?;
        }
        for record in written.into_iter().chain(&undone) {
            self.summary.add(record);
            if self.json {
                println!("{}", serde_json::to_string(record)?);
            } else if record.action != Some(Action::Skipped)
                && record.conflicts.len() + usize::from(record.reason.is_some()) > 0
            {
                eprintln!("symdex: {}", describe(record));
            }
        }
        Ok(())
    }
}

/// One decision in a line: `action input: reason`.
pub fn describe(record: &Record) -> String {
    format!(
        "{} {}: {}",
        record.action.map_or("", |a| a.as_str()),
        record.ingest_key,
        record.reason.as_deref().unwrap_or("")
    )
}

/// A small file whose status said `size`, whole: one open and the reads, not `fs::read`'s
/// status first (the caller has it). `None` where it has grown past [`READ_WHOLE_BELOW`]
/// since: read as a large one (never more than that bound in memory).
fn read_small(path: &Path, size: u64) -> io::Result<Option<Vec<u8>>> {
    let bound = READ_WHOLE_BELOW + 1;
    let capacity = size.saturating_add(1).min(bound) as usize;
    let bytes = read_file_up_to(path, capacity, bound)?;
    Ok((bytes.len() as u64 <= READ_WHOLE_BELOW).then_some(bytes))
}

/// An input file as the reader thread found it: its content identity and, unless its source
/// record vouched for it unread, its bytes (when small) and what they are.
struct ReadInput {
    abs: PathBuf,
    shown: String,
    size: u64,
    etag: String,
    /// Its status to record, when read now and settled (`FileStamp`).
    file_stamp: Option<FileStamp>,
    whole: Option<Vec<u8>>,
    options: IdentifyOptions,
    /// What its bytes are, when they were read.
    identified: Option<Result<Vec<Identity>, FormatError>>,
    /// Where it may be indexed beside others (`pipeline::route_of`), when asked.
    route: Option<String>,
    /// Where it sits in its source tree, as its upload record says (a hand-over); else
    /// found from the current directory.
    source_path: Option<String>,
    /// Its upload record, read ahead (a known input: a re-index reads nothing else).
    prefetched: Option<Prefetched>,
}

/// An upload record the reader thread read ahead of the writer, for
/// [`Indexer::looked_up`]: good only while the store's count of changes is still `changes`
/// ([`LocalStore::changes`]; the writer lock makes this run the store's only writer).
struct Prefetched {
    upload: String,
    changes: u64,
    /// Taken before the read (`Indexer::already_indexed` says why).
    time: String,
    /// Parsed by the writer: the reader has the status and the read of every input to
    /// make, the writer less (a re-index is the two side by side).
    record: UnparsedUpload,
}

/// Reads an input (reader thread): only its status when a stamp knows that status (a
/// re-index opens no input), and then, `ahead`, its upload record; else its bytes, hashed and
/// identified — or, an archive, which container it is (`Err`: its entries are read as they
/// are indexed).
async fn read_input(
    refs: &RefStore<'_>,
    stamps: &mut StampReader<'_>,
    path: &Path,
    options: IdentifyOptions,
    recheck: bool,
    ahead: Option<(&LocalStore, &UploadMeta)>,
) -> io::Result<Result<ReadInput, archive::Container>> {
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
            None => (refs.source(&shown).await?)
                .and_then(|r| r.file)
                .filter(|k| now.same_status(k)),
        },
        _ => None,
    };
    // Known: a file indexed before (an archive's entries have stamps, never the archive).
    if let Some(known) = known {
        // Its upload record too, read ahead: the writer then only checks that nothing
        // changed the store since, instead of reading it in its turn.
        let prefetched = match ahead {
            Some((store, meta)) => {
                let upload = Input::file(&shown, meta).upload_id(&known.etag);
                let changes = store.changes();
                let time = now_rfc3339();
                (refs.upload_unparsed(&upload).await?).map(|record| Prefetched {
                    upload,
                    changes,
                    time,
                    record,
                })
            }
            None => None,
        };
        return Ok(Ok(ReadInput {
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
        }));
    }
    // A small input is read once, whole: told from an archive, hashed, identified and stored
    // from the same bytes (identifying it through the file took ~50 small reads, one per
    // section name, and hashing read it again; a build directory is mostly such files). An
    // archive is read again as it is expanded.
    let small = if status.len() <= READ_WHOLE_BELOW {
        read_small(&abs, status.len())?
    } else {
        None
    };
    let (etag, whole, identified) = if let Some(bytes) = small {
        if let Some(container) = archive::detect(&bytes[..bytes.len().min(archive::DETECT_LEN)]) {
            return Ok(Err(container));
        }
        let identified = identify_with_details(&MemReader(bytes.as_slice()), &options);
        (content_sha1(&bytes), Some(bytes), identified)
    } else {
        if let Some(container) = container_of(&abs) {
            return Ok(Err(container));
        }
        let identified = identify_with_details(&FileReader::open(&abs)?, &options);
        (file_sha1(&abs)?, None, identified)
    };
    let file_stamp = settled.map(|s| FileStamp {
        etag: etag.clone(),
        ..s
    });
    Ok(Ok(ReadInput {
        abs,
        shown,
        size: whole.as_ref().map_or(status.len(), |b| b.len() as u64),
        etag,
        file_stamp,
        whole,
        options,
        identified: Some(identified),
        route: None,
        source_path: None,
        prefetched: None,
    }))
}

/// Indexes an input the reader thread read (the store's writer).
impl ReadInput {
    /// The upload it is.
    fn upload(&self, meta: &UploadMeta) -> Upload<'_> {
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

/// Indexes an input the reader thread read (the store's writer, or a lane).
async fn index_file(
    indexer: &Indexer<'_>,
    mut read: ReadInput,
    meta: &UploadMeta,
    stamps: Option<&Mutex<NewStamps>>,
) -> io::Result<Indexed> {
    let identified = read.identified.take();
    let prefetched = read.prefetched.take();
    let upload = read.upload(meta);
    // A re-delivery is answered from the upload record: the input is not even opened. Looked
    // up in its turn (an earlier input may change the record): read ahead by the reader
    // thread when nothing changed the store since (`Prefetched`), else read now.
    let lookup = match prefetched {
        Some(p) if p.upload == upload.id => {
            let (found, prior) = p.record.parse()?;
            indexer.looked_up(&upload, found, prior, &p.time)
        }
        _ => indexer.already_indexed(&upload).await?,
    };
    let prior = match lookup {
        Lookup::Indexed(unchanged) => {
            // Hashed this run and settled now, yet answered from its record: a file first
            // indexed unsettled (built just before), touched, or rebuilt with the same bytes
            // (a reproducible build). Its stamp is kept, so the next re-index does not hash
            // it again (before, it was hashed at every re-index, for ever). A stamped file
            // never gets here: an unchanged re-index still writes nothing but its manifest.
            keep_stamp(stamps, &read.shown, &upload);
            return Ok(*unchanged);
        }
        Lookup::Unindexed(prior) => prior,
    };
    let identified = match identified {
        Some(identified) => identified,
        None => identify_with_details(&FileReader::open(&read.abs)?, &upload.options),
    };
    let indexed = indexer.index_looked_up(&upload, identified, prior).await?;
    if indexed.upload.is_some() {
        keep_stamp(stamps, &read.shown, &upload);
    }
    Ok(indexed)
}

/// Keeps the stamp of an input hashed this run (settled: see `settled_status`), for the
/// sink's flushes to write (`NewStamps::due`).
fn keep_stamp(stamps: Option<&Mutex<NewStamps>>, shown: &str, upload: &Upload<'_>) {
    if let (Some(stamps), Some(stamp)) = (stamps, &upload.file_stamp) {
        (stamps.lock().unwrap_or_else(|e| e.into_inner())).add(shown, stamp);
    }
}

/// Inputs up to this size are read whole when they are hashed (see `index_file`).
const READ_WHOLE_BELOW: u64 = 1 << 20;

/// A file's stamp (refs/) from this status, its etag empty, when it was left alone long
/// enough before the status was taken to be trusted later.
#[cfg(unix)]
fn settled_status(status: &std::fs::Metadata) -> Option<FileStamp> {
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
fn settled_status(_status: &std::fs::Metadata) -> Option<FileStamp> {
    None
}

/// How an archive's entries become uploads, besides the archive: how far it may expand, and
/// which entries are sources.
#[derive(Clone, Copy)]
struct Unpack<'k> {
    limits: ArchiveLimits,
    keys: &'k KeyArgs,
}

impl<'k> Unpack<'k> {
    fn of(args: &'k IndexArgs) -> Self {
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

/// The source files of a Sentry source bundle just indexed (entry -> the absolute path it
/// stands for), if it is one.
fn bundle_files(path: &Path, indexed: &Indexed) -> Option<BTreeMap<String, String>> {
    let is_bundle = indexed
        .records
        .iter()
        .any(|r| r.format.as_deref() == Some("sourcebundle"));
    if !is_bundle {
        return None;
    }
    let reader = FileReader::open(&absolute(path)).ok()?;
    let ids = symdex_shared::identify(&reader, &IdentifyOptions::default()).ok()?;
    let files: BTreeMap<String, String> = ids.into_iter().flat_map(|id| id.bundle_files).collect();
    (!files.is_empty()).then_some(files)
}

/// Every file entry of an archive is an upload of its own (the archive's path and the entry's).
/// Entries are expanded one at a time into a scratch file that is removed as soon as the entry
/// is indexed, so the disk holds at most one entry (bounded by the limits) at any time.
async fn index_archive(
    sink: &mut Sink<'_, '_>,
    store: &LocalStore,
    path: &Path,
    container: archive::Container,
    meta: &UploadMeta,
    unpack: Unpack<'_>,
) -> io::Result<()> {
    index_entries(sink, store, path, container, meta, unpack, None).await
}

/// [`index_archive`]; with `bundle` (a Sentry source bundle's files), only the entries it
/// names, each a source upload under the path it stands for.
async fn index_entries(
    sink: &mut Sink<'_, '_>,
    store: &LocalStore,
    path: &Path,
    container: archive::Container,
    meta: &UploadMeta,
    unpack: Unpack<'_>,
    bundle: Option<&BTreeMap<String, String>>,
) -> io::Result<()> {
    let indexer = sink.indexer;
    let abs = absolute(path);
    let shown = abs.to_string_lossy().into_owned();
    let reader = std::sync::Arc::new(FileReader::open(&abs)?);
    let reader_size = reader.size();
    let archive_etag = file_sha1(&abs)?;
    let scratch = tempfile::tempdir_in(store.root().join("_symdex/tmp"))?;
    // Archives are indexed one at a time (never beside another lane): no shared decoder
    // budget is needed, each decoder stays within its own limit.
    let options = archive::Options {
        limits: unpack.limits.into(),
        stored_ranges: false,
        memory: None,
    };
    let name = file_name(&abs);
    let walk = archive::Walker::start(
        reader,
        container,
        name,
        options,
        scratch.path().to_path_buf(),
    )?;
    let archive = Input::file(&shown, meta).with_content(&archive_etag, reader_size);
    let mut site = LocalSite { sink, unpack };
    symdex_shared::pipeline::index_archive(indexer, &archive, container, walk, &mut site, bundle)
        .await
}

/// The local store's part in an archive's walk: its source rules, its sink.
struct LocalSite<'a, 'i, 's, 'k> {
    sink: &'a mut Sink<'i, 's>,
    unpack: Unpack<'k>,
}

impl ArchiveSite for LocalSite<'_, '_, '_, '_> {
    fn wants_source(&self, path: &str) -> bool {
        self.unpack.keys.sources.wants_source(Path::new(path))
    }

    async fn index_stored(
        &mut self,
        _indexer: &Indexer<'_>,
        archive: &Input,
        stored: StoredEntry,
    ) -> io::Result<Indexed> {
        // Not asked for (stored_ranges is off): ranges are for S3's server-side copy.
        Ok(archive.nothing_published(
            Some(&stored.entry),
            Action::Rejected,
            "a stored entry given as a range".into(),
        ))
    }

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.sink.push(indexed).await
    }
}

pub fn delete(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(delete_async(args))?
}

async fn delete_async(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    let (store, _lock) = open_for_writing(&args.store)?;
    let hand_over = FromFiles::new(&store, &args.keys, args.limits);
    let indexer = Indexer::new(&store, args.keys.config()).handing_over_to(&hand_over);
    let inputs: Vec<String> = args
        .input
        .iter()
        .map(|p| absolute(p).to_string_lossy().into_owned())
        .collect();
    let mut removals = Vec::new();
    for upload in indexer.refs().uploads().await? {
        let by_build = args.build.is_some() && upload.meta.build == args.build;
        let by_input = inputs.iter().any(|input| {
            upload.source == *input
                || upload.source.starts_with(&format!("{input}/"))
                || upload.source.starts_with(&format!("{input}!/"))
        });
        if by_build || by_input {
            removals.extend(indexer.begin_unindex(&upload.upload).await?);
        }
    }
    let records: Vec<Record> = removals.iter().map(|r| r.record.clone()).collect();
    // The manifest first (a run killed before the uploads are forgotten reports them again),
    // then the keys freed are handed over — to none of the uploads deleted here, all marked
    // removing by now.
    indexer.write_manifest(&records).await?;
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    let removed: usize = records.iter().map(|r| r.removed.len()).sum();
    println!(
        "symdex: {} uploads deleted, {removed} keys unpublished",
        records.len()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small input is read whole in one go, whatever its status said; one that has grown
    /// past the bound since is not held (read as a large one), and never more than the bound
    /// plus a byte is read.
    #[test]
    fn a_small_input_is_read_whole_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"0123456789").unwrap();
        // Its status said less than it holds now: all of it all the same.
        assert_eq!(
            read_small(&small, 3).unwrap().as_deref(),
            Some(&b"0123456789"[..])
        );
        let grown = dir.path().join("grown");
        std::fs::write(&grown, vec![7u8; READ_WHOLE_BELOW as usize + 10]).unwrap();
        assert_eq!(read_small(&grown, 10).unwrap(), None);
        let at_bound = dir.path().join("at-bound");
        std::fs::write(&at_bound, vec![7u8; READ_WHOLE_BELOW as usize]).unwrap();
        assert_eq!(
            read_small(&at_bound, READ_WHOLE_BELOW)
                .unwrap()
                .map(|b| b.len()),
            Some(READ_WHOLE_BELOW as usize)
        );
    }
}
