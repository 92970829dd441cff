//! Input stamps by directory: what a local input file held when it was last hashed, kept
//! in one record per input directory (`_symdex/stamps/<sha1 of directory>.json`).
//!
//! A stamp (refs/ [`FileStamp`]) is a cache, never a fact the store depends on: a file
//! whose status (size, times, inode, device) is the stamp's holds the bytes the stamp names,
//! so a re-index takes its content identity from the stamp instead of reading it. A stamp
//! that is missing, lost or stale only costs a read of the file.
//!
//! Why by directory: a re-index of N unchanged inputs read one record per input for its
//! stamp (the input's source record, where stamps were kept before), half the files it
//! opened. Inputs come walked directory by directory, so one record per directory is read
//! once for all of its files. The stamps are written once per flush of the index, merged into
//! each directory's record: the local store has one writer at a time (its writer lock), so a
//! read, merge and write loses nobody's stamps. Source records keep their stamp too (stores
//! written before, and an index of an older symdex, read it there).
//!
//! A huge directory: a first index of n files in one directory spans n / 1,000 flushes. Its
//! record is written at the first of them and again at the run's last, not at each (that
//! rewrote the growing record every time: 150 MB written for 100,000 files); the stamps in
//! between wait in memory, about 150 bytes per file. A run killed meanwhile loses them: its
//! files are then read once more by the next re-index, nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use symdex_shared::digest::sha1_hex;
use symdex_shared::pipeline::Upload;
use symdex_shared::refs::FileStamp;
use symdex_shared::storage::Storage;

/// Where the directories' stamp records live.
pub const STAMPS_DIR: &str = "_symdex/stamps/";

/// One directory's stamps, by file name.
#[derive(Debug, Serialize, Deserialize)]
struct DirStamps {
    /// The directory, as input paths name it (absolute): two directories whose names hash
    /// alike are told apart.
    dir: String,
    files: BTreeMap<String, FileStamp>,
}

fn record_key(dir: &str) -> String {
    format!("{STAMPS_DIR}{}.json", sha1_hex(dir.as_bytes()))
}

/// The stamps recorded for the files of `dir`; `None` where there is no record of that
/// directory (none, another directory's of the same hash, or not stamps).
async fn recorded(
    store: &dyn Storage,
    dir: &str,
) -> io::Result<Option<BTreeMap<String, FileStamp>>> {
    let Some(bytes) = store.read(&record_key(dir)).await? else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<DirStamps>(&bytes)
        .ok()
        .filter(|r| r.dir == dir)
        .map(|r| r.files))
}

/// An input path as its directory and its file name (`None`: no directory).
fn split(path: &str) -> Option<(&str, &str)> {
    path.rsplit_once('/').filter(|(_, name)| !name.is_empty())
}

/// Reads stamps for the reader thread: the record of the directory it is in, read once.
pub struct StampReader<'s> {
    store: &'s dyn Storage,
    /// The directory whose stamps `files` holds.
    dir: Option<String>,
    files: BTreeMap<String, FileStamp>,
    /// Whether the store has source records (written by an earlier version, which kept
    /// stamps there too), asked once: a store without any is not asked for one per input.
    source_records: Option<bool>,
}

/// Where stores written by earlier versions kept each input's source record.
const SOURCES_DIR: &str = "_symdex/sources/";

impl<'s> StampReader<'s> {
    pub fn new(store: &'s dyn Storage) -> Self {
        StampReader {
            store,
            dir: None,
            files: BTreeMap::new(),
            source_records: None,
        }
    }

    /// Whether an input without a stamp in its directory's record may have one in its
    /// source record: the store has some (a local store of this version writes none).
    pub async fn in_source_records(&mut self) -> io::Result<bool> {
        if let Some(known) = self.source_records {
            return Ok(known);
        }
        let any = self.store.any_under(SOURCES_DIR).await?;
        Ok(*self.source_records.insert(any))
    }

    /// The stamp recorded for the file at `path` (absolute), if any. A record that cannot
    /// be read as stamps is taken for none: the files are then read.
    pub async fn get(&mut self, path: &str) -> io::Result<Option<FileStamp>> {
        let Some((dir, name)) = split(path) else {
            return Ok(None);
        };
        if self.dir.as_deref() != Some(dir) {
            self.files = recorded(self.store, dir).await?.unwrap_or_default();
            self.dir = Some(dir.to_string());
        }
        Ok(self.files.get(name).cloned())
    }
}

/// Stamps a run took (files it read, hashed and planned, settled), written by directory at
/// the flushes ([`NewStamps::due`]).
#[derive(Default)]
pub struct NewStamps {
    by_dir: BTreeMap<String, BTreeMap<String, FileStamp>>,
    /// The directories whose record this run has written.
    written: BTreeSet<String>,
}

/// The stamps one flush writes, by directory.
pub struct DueStamps(BTreeMap<String, BTreeMap<String, FileStamp>>);

impl NewStamps {
    pub fn add(&mut self, path: &str, stamp: &FileStamp) {
        if let Some((dir, name)) = split(path) {
            self.by_dir
                .entry(dir.to_string())
                .or_default()
                .insert(name.to_string(), stamp.clone());
        }
    }

    /// Takes out the stamps a flush writes; the rest stay. At the run's `last` flush, every
    /// directory's; at an earlier one, those of the directories whose record this run has
    /// not written yet. So a directory's record is written at most twice per run, however
    /// many flushes its files span (see the module's comment).
    pub fn due(&mut self, last: bool) -> DueStamps {
        let (due, held) = std::mem::take(&mut self.by_dir)
            .into_iter()
            .partition(|(dir, _)| last || !self.written.contains(dir));
        self.by_dir = held;
        self.written.extend(due.keys().cloned());
        DueStamps(due)
    }
}

impl DueStamps {
    /// Merges the stamps into their directories' records. Only call it holding the store's
    /// writer lock (see the module's comment).
    pub async fn write(self, store: &dyn Storage) -> io::Result<()> {
        for (dir, files) in self.0 {
            // A record of no directory, or of another, is written over.
            let (mut record, mut changed) = match recorded(store, &dir).await? {
                Some(recorded) => (recorded, false),
                None => (BTreeMap::new(), true),
            };
            for (name, stamp) in files {
                changed |= record.get(&name) != Some(&stamp);
                record.insert(name, stamp);
            }
            if !changed {
                continue;
            }
            let key = record_key(&dir);
            let record = DirStamps { dir, files: record };
            store.put(&key, &serde_json::to_vec(&record)?).await?;
        }
        Ok(())
    }
}

/// Keeps the stamp of an input hashed this run (settled: see `settled_status`), for the
/// sink's flushes to write (`NewStamps::due`): an input indexed now, or answered from its
/// record though hashed this run — a file first indexed unsettled (built just before),
/// touched, or rebuilt with the same bytes (a reproducible build), whose stamp is kept so that
/// the next re-index does not hash it again. A stamped file is never hashed: an unchanged
/// re-index still writes nothing but its manifest.
pub(crate) fn keep_stamp(stamps: Option<&Mutex<NewStamps>>, upload: &Upload<'_>) {
    if let (Some(stamps), Some(stamp)) = (stamps, &upload.file_stamp) {
        (stamps.lock().unwrap_or_else(|e| e.into_inner())).add(&upload.ingest_key, stamp);
    }
}

#[cfg(test)]
mod tests {
    use super::{record_key, DirStamps, FileStamp, NewStamps, StampReader, STAMPS_DIR};
    use symdex_shared::storage::LocalStore;
    use symdex_shared::storage::Storage;

    fn stamp(inode: u64, etag: &str) -> FileStamp {
        FileStamp {
            size: 10,
            mtime_ns: 1,
            ctime_ns: 2,
            inode,
            device: 3,
            etag: etag.to_string(),
        }
    }

    #[tokio::test]
    async fn stamps_are_merged_by_directory_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let mut new = NewStamps::default();
        new.add("/in/a/x", &stamp(1, "e1"));
        new.add("/in/a/y", &stamp(2, "e2"));
        new.add("/in/b/x", &stamp(3, "e3"));
        new.due(true).write(&store).await.unwrap();
        // A later flush adds to a directory's record and replaces a file's stamp.
        new.add("/in/a/z", &stamp(4, "e4"));
        new.add("/in/a/x", &stamp(5, "e5"));
        new.due(true).write(&store).await.unwrap();
        let mut reader = StampReader::new(&store);
        assert_eq!(reader.get("/in/a/x").await.unwrap(), Some(stamp(5, "e5")));
        assert_eq!(reader.get("/in/a/y").await.unwrap(), Some(stamp(2, "e2")));
        assert_eq!(reader.get("/in/a/z").await.unwrap(), Some(stamp(4, "e4")));
        assert_eq!(reader.get("/in/b/x").await.unwrap(), Some(stamp(3, "e3")));
        assert_eq!(reader.get("/in/b/y").await.unwrap(), None);
        assert_eq!(reader.get("/in/c/x").await.unwrap(), None);
        assert_eq!(reader.get("nodir").await.unwrap(), None);
        // One record per directory.
        assert_eq!(store.list(STAMPS_DIR).await.unwrap().len(), 2);
    }

    /// A directory whose files span several flushes has its record written at the first
    /// and at the run's last, not at each: the stamps in between wait.
    #[tokio::test]
    async fn a_directory_is_written_at_its_first_flush_and_at_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let mut new = NewStamps::default();
        let read = |path: &'static str| {
            let store = &store;
            async move { StampReader::new(store).get(path).await.unwrap() }
        };
        new.add("/in/a/x", &stamp(1, "e1"));
        new.due(false).write(&store).await.unwrap();
        assert_eq!(read("/in/a/x").await, Some(stamp(1, "e1")));
        let writes = store.changes();
        // Later flushes: `a` waits; `b`, new to this run, is written.
        new.add("/in/a/y", &stamp(2, "e2"));
        new.add("/in/b/x", &stamp(3, "e3"));
        new.due(false).write(&store).await.unwrap();
        new.add("/in/a/z", &stamp(4, "e4"));
        new.due(false).write(&store).await.unwrap();
        assert_eq!(store.changes(), writes + 1, "only b's record");
        assert_eq!(read("/in/a/y").await, None, "held back");
        assert_eq!(read("/in/b/x").await, Some(stamp(3, "e3")));
        // The last flush writes what waited, merged into what was written.
        new.due(true).write(&store).await.unwrap();
        assert_eq!(store.changes(), writes + 2);
        for (path, stamp) in [
            ("/in/a/x", stamp(1, "e1")),
            ("/in/a/y", stamp(2, "e2")),
            ("/in/a/z", stamp(4, "e4")),
        ] {
            assert_eq!(read(path).await, Some(stamp), "{path}");
        }
        assert!(new.due(true).0.is_empty(), "nothing left");
    }

    #[tokio::test]
    async fn a_record_of_another_directory_or_not_stamps_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        // As if another directory's name hashed alike.
        let other = DirStamps {
            dir: "/elsewhere".into(),
            files: [("x".to_string(), stamp(1, "e1"))].into(),
        };
        let key = record_key("/in/a");
        store
            .put(&key, &serde_json::to_vec(&other).unwrap())
            .await
            .unwrap();
        let mut reader = StampReader::new(&store);
        assert_eq!(reader.get("/in/a/x").await.unwrap(), None);
        store.put(&key, b"not json").await.unwrap();
        let mut reader = StampReader::new(&store);
        assert_eq!(reader.get("/in/a/x").await.unwrap(), None);
        // Written over by the next stamps of that directory.
        let mut new = NewStamps::default();
        new.add("/in/a/y", &stamp(2, "e2"));
        new.due(true).write(&store).await.unwrap();
        let mut reader = StampReader::new(&store);
        assert_eq!(reader.get("/in/a/y").await.unwrap(), Some(stamp(2, "e2")));
        assert_eq!(reader.get("/in/a/x").await.unwrap(), None);
    }
}
