//! The store's writer and its lanes: inputs of different routes indexed side by side, the
//! rest in order (`--jobs`).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use symdex_shared::archive::{self, Walker};
use symdex_shared::manifest::Action;
use symdex_shared::pipeline::{self, Collected, Indexed, Indexer, Input, ReaderBytes, Upload};
use symdex_shared::upload_meta::UploadMeta;

use super::archives::{LocalWalks, Unpack};
use super::read::{Ahead, LaneDone, LaneInput, ReadInput};
use super::sink::{Sink, FLUSH_EVERY};
use super::{absolute, progress, IndexArgs};
use crate::stamps::{keep_stamp, NewStamps};

/// A lane: indexes the inputs of its routes in the order it gets them.
pub(super) fn run_lane(
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
            runtime.block_on(index_file(indexer, *read, meta, stamps))
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
pub(super) struct Writer<'i, 's> {
    pub(super) indexer: &'i Indexer<'s>,
    /// Inputs the run's hand-overs and claims found in conflict (`FromFiles::conflicts`):
    /// the run's too.
    pub(super) handed_conflicts: &'i std::sync::atomic::AtomicUsize,
    pub(super) lanes: Vec<std::sync::mpsc::SyncSender<LaneInput>>,
    pub(super) finished: std::sync::mpsc::Receiver<LaneDone>,
    /// Inputs handed to lanes and not taken by the sink yet, in input order.
    pub(super) dispatched: std::collections::VecDeque<usize>,
    /// Lane results waiting for an earlier input's.
    pub(super) results: BTreeMap<usize, (PathBuf, io::Result<Vec<Indexed>>)>,
}

impl Writer<'_, '_> {
    /// Hands an input to the lane of its route.
    pub(super) fn dispatch(
        &mut self,
        seq: usize,
        route: &str,
        path: PathBuf,
        mut read: Box<ReadInput>,
    ) {
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
    pub(super) async fn take(
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
                    Ok(indexed) => {
                        for indexed in indexed {
                            sink.push_held(indexed).await?;
                        }
                    }
                    Err(e) => {
                        let shown = path.to_string_lossy();
                        say_err!("symdex: {}: {e}", crate::manifest_cmd::shown(&shown));
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

pub(super) async fn run_async(
    args: &IndexArgs,
    store: &crate::crash::Store,
    meta: &UploadMeta,
    stamps: &Mutex<NewStamps>,
    mut writer: Writer<'_, '_>,
    inputs: std::sync::mpsc::Receiver<Vec<Ahead>>,
    count: usize,
) -> anyhow::Result<ExitCode> {
    let indexer = writer.indexer;
    let bar = progress(count);
    let walks = LocalWalks::new(store.inner(), Unpack::of(args));
    let mut sink = Sink::new(indexer, args.json, walks);
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
                    Ok(read) => index_read_file(&mut sink, store, *read, meta).await,
                    Err(e) => Err(e),
                };
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
            let shown = path.to_string_lossy();
            let shown = crate::manifest_cmd::shown(&shown);
            bar.suspend(|| say_err!("symdex: {shown}: {e}"));
            failed = true;
        }
    }
    writer.take(&mut sink, true, &mut failed).await?;
    bar.finish_and_clear();
    sink.finish().await?;
    say!("symdex: {} -> {}", sink.summary, args.store.display())
        .or_else(crate::stdout::reader_gone)?;
    for key in &sink.manifests {
        say!("manifest: {}", store.inner().root().join(key).display())
            .or_else(crate::stdout::reader_gone)?;
    }
    let handed = writer
        .handed_conflicts
        .load(std::sync::atomic::Ordering::Relaxed);
    let conflicts = sink.summary.conflicts + handed;
    let conflicted = conflicts > 0 && !args.allow_conflicts;
    if conflicted {
        say_err!(
            "symdex: {conflicts} inputs found their keys holding other bytes (conflicts: the \
             symbols served are not these); exit 1 (--allow-conflicts to exit 0)"
        );
    }
    Ok(if failed || conflicted {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Indexes an input file on the writer's own thread (everything before it taken): its
/// outcome, then an archive's or a Sentry source bundle's files, to the sink.
pub(super) async fn index_read_file(
    sink: &mut Sink<'_, '_>,
    store: &crate::crash::Store,
    mut read: ReadInput,
    meta: &UploadMeta,
) -> io::Result<()> {
    // A record read ahead is used only if nothing changed the store since.
    if (read.prefetched.as_ref()).is_some_and(|p| p.changes != store.inner().changes()) {
        read.prefetched = None;
    }
    let indexer = sink.indexer;
    index_input(indexer, read, meta, sink).await
}

/// Indexes an input the reader thread read, in a lane: what it came to (a routed input is
/// one upload, never an archive or a bundle).
pub(super) async fn index_file(
    indexer: &Indexer<'_>,
    read: ReadInput,
    meta: &UploadMeta,
    stamps: &Mutex<NewStamps>,
) -> io::Result<Vec<Indexed>> {
    let mut sink = LaneSink {
        indexed: Collected::default(),
        stamps,
    };
    index_input(indexer, read, meta, &mut sink).await?;
    Ok(sink.indexed.0)
}

/// The CLI's one way into the pipeline's driver (`Indexer::index`): an input as the reader
/// thread read it, its record looked up as read ahead (or in its turn), its bytes as read.
async fn index_input<K: pipeline::Sink>(
    indexer: &Indexer<'_>,
    mut read: ReadInput,
    meta: &UploadMeta,
    sink: &mut K,
) -> io::Result<()> {
    let (upload, lookup, bytes) = read.take_for_driver(meta)?;
    indexer.index(&upload, lookup, &bytes, sink).await
}

/// A lane's sink: the outcomes for the writer to take, the stamps kept.
struct LaneSink<'a> {
    indexed: Collected,
    stamps: &'a Mutex<NewStamps>,
}

impl pipeline::Sink for LaneSink<'_> {
    type Range = ReaderBytes<'static>;

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.indexed.0.push(indexed);
        Ok(())
    }

    fn known(&mut self, upload: &Upload<'_>) {
        keep_stamp(Some(self.stamps), upload);
    }

    fn wants_source(&self, _path: &str) -> bool {
        false
    }

    fn walk(
        &mut self,
        _upload: &Upload<'_>,
        _container: archive::Container,
    ) -> io::Result<Option<Walker>> {
        Ok(None)
    }
}
