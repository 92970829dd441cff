//! Where indexed uploads go: their source-map changes in input order, their records to the
//! manifest every [`FLUSH_EVERY`] uploads, the run's summary.

use std::io;
use std::sync::Mutex;

use symdex_shared::archive::{Container, Walker};
use symdex_shared::manifest::{Action, Record};
use symdex_shared::pipeline::{self, Indexed, Indexer, ReaderBytes, Summary, Upload};

use super::archives::LocalWalks;
use crate::stamps::{keep_stamp, NewStamps};

/// Uploads recorded and finalized together: a huge input (100,000 archive entries) is held in
/// memory this many at a time, and a killed run re-reports at most this many. 1,000, not the
/// 5,000 it was: a re-index of 5,000 unchanged inputs held all of their records (about 4 KB
/// each with the manifest's bytes), and touching that much fresh memory (the kernel zeroing
/// its pages) was a quarter of the writer's time; flushed every 1,000 the memory is reused,
/// and the re-index took 17% less (0.061 -> 0.050 s on tmpfs). A fresh index is the same
/// (its flushes wait for the lanes' few queued inputs), with one manifest object per 1,000
/// uploads instead of 5,000.
pub(super) const FLUSH_EVERY: usize = 1_000;

/// Where indexed uploads go: buffered, then written to the manifest and finalized (the
/// manifest first: a run killed in between reports the same keys again when re-run, never
/// none; the manifest is at-least-once).
pub(super) struct Sink<'i, 's> {
    pub(super) indexer: &'i Indexer<'s>,
    pub(super) pending: Vec<Indexed>,
    /// Stamps of the files hashed and not written yet (the run's own inputs, not a
    /// hand-over's: lanes add theirs), written by the flushes (`NewStamps::due`).
    pub(super) stamps: Option<&'i Mutex<NewStamps>>,
    pub(super) summary: Summary,
    pub(super) manifests: Vec<String>,
    pub(super) json: bool,
    /// How archives are walked (the run's limits and source rules).
    pub(super) walks: LocalWalks<'i>,
}

impl<'i, 's> Sink<'i, 's> {
    pub(super) fn new(indexer: &'i Indexer<'s>, json: bool, walks: LocalWalks<'i>) -> Self {
        Sink {
            indexer,
            pending: Vec::new(),
            stamps: None,
            summary: Summary::default(),
            manifests: Vec::new(),
            json,
            walks,
        }
    }

    /// The run's last flush: the stamps held back by the flushes before it are written too
    /// (`NewStamps::due`).
    pub(super) async fn finish(&mut self) -> io::Result<()> {
        self.flush_as(true).await
    }

    /// Takes the next upload in input order, flushing when it holds enough (only call it
    /// with no lane busy: see the writer's invariant, `lanes.rs`).
    pub(super) async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        self.push_held(indexed).await?;
        if self.pending.len() >= FLUSH_EVERY {
            // Boxed: once in a thousand pushes, and its future is large.
            Box::pin(self.flush()).await?;
        }
        Ok(())
    }

    /// Takes the next upload in input order, without flushing: its source-map changes are
    /// made now (`Indexer::register_source_map_changes`), its records held for the manifest.
    pub(super) async fn push_held(&mut self, mut indexed: Indexed) -> io::Result<()> {
        self.indexer
            .register_source_map_changes(&mut indexed)
            .await?;
        self.pending.push(indexed);
        Ok(())
    }

    pub(super) async fn flush(&mut self) -> io::Result<()> {
        self.flush_as(false).await
    }

    /// Writes the manifest records of what the sink holds and finalizes it, and writes the
    /// stamps due (`last`: the run's last flush, see `NewStamps::due`).
    pub(super) async fn flush_as(&mut self, last: bool) -> io::Result<()> {
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
                say!("{}", serde_json::to_string(record)?).or_else(crate::stdout::reader_gone)?;
            } else if record.action != Some(Action::Skipped)
                && record.conflicts.len() + usize::from(record.reason.is_some()) > 0
            {
                say_err!("symdex: {}", describe(record));
            }
        }
        Ok(())
    }
}

/// The writer's part in the driver's run of an input (`Indexer::index`): outcomes taken in
/// input order, stamps kept, archives walked from the file.
impl pipeline::Sink for Sink<'_, '_> {
    /// Never asked: local walks expand every entry.
    type Range = ReaderBytes<'static>;

    async fn push(&mut self, indexed: Indexed) -> io::Result<()> {
        Sink::push(self, indexed).await
    }

    fn known(&mut self, upload: &Upload<'_>) {
        keep_stamp(self.stamps, upload);
    }

    fn wants_source(&self, path: &str) -> bool {
        self.walks.wants_source(path)
    }

    fn walk(&mut self, upload: &Upload<'_>, container: Container) -> io::Result<Option<Walker>> {
        self.walks.walk(upload, container).map(Some)
    }
}

/// One decision in a line: `action input: reason`, the uploader's names escaped for the
/// terminal (`manifest_cmd::shown`).
pub fn describe(record: &Record) -> String {
    let line = format!(
        "{} {}: {}",
        record.action.map_or("", |a| a.as_str()),
        record.ingest_key,
        record.reason.as_deref().unwrap_or("")
    );
    crate::manifest_cmd::shown(&line).into_owned()
}
