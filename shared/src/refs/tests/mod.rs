//! The reference protocol's unit tests, over local stores.

use std::collections::BTreeSet;
use std::io;
use std::time::Duration;

use crate::refs::swap::parse;
use crate::refs::{
    Content, IndexedAs, LeasePolicy, RefStore, Run, UploadRecord, UploadState, Wait,
};
use crate::storage::{CopySource, LocalStore};
use crate::upload_meta::UploadMeta;

mod leases;
mod overwrites;
mod owned;
mod records;

fn content<'a>(etag: &'a str, path: &'a std::path::Path) -> Content<'a> {
    Content {
        etag,
        size: std::fs::metadata(path).unwrap().len(),
        source: CopySource::File(path),
    }
}

/// Lists `keys` in `upload`'s record as its finalize does (the release of its `create`
/// leases, invariant 1), creating the record first.
async fn finalized(refs: &RefStore<'_>, upload: &str, keys: &[&str]) {
    let keys: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
    let template = UploadRecord {
        upload: upload.into(),
        source: format!("/in/{upload}"),
        ..Default::default()
    };
    refs.plan(&template, &keys, None, None).await.unwrap();
    let complete = Run::Complete(None);
    let ending = refs.take_held(upload);
    let listed = refs.finalize(upload, &keys, complete, None, &ending);
    assert!(listed.await.unwrap());
}

/// A local store and one input file (`in`, beside it), with the input's content identity.
fn store_and_input() -> (tempfile::TempDir, LocalStore, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path().join("s")).unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, b"bytes").unwrap();
    let etag = crate::storage::local::file_sha1(&input).unwrap();
    (dir, store, etag)
}

/// A policy that gives up on a live lease at once (a retryable error).
fn impatient() -> LeasePolicy {
    LeasePolicy {
        wait: Wait {
            attempts: 2,
            first_pause: Duration::ZERO,
            max_pause: Duration::ZERO,
        },
        ..LeasePolicy::default()
    }
}

/// Every field comes back where it was written, the flattened metadata's included.
#[test]
fn upload_records_read_as_written() {
    let s = |v: &str| Some(v.to_string());
    let set = |v: &str| BTreeSet::from([v.to_string()]);
    let full = UploadRecord {
        upload: "file:/a@e#build=b".into(),
        source: "/a".into(),
        meta: UploadMeta::with_every_field(),
        etag: "e".into(),
        size: 3,
        time: "t".into(),
        ingest_version: s("v"),
        ingest_etag: s("ie"),
        entry: s("x!/y"),
        state: UploadState::Removing,
        keys: set("k/1"),
        runs: set("run"),
        planned: set("k/2"),
        source_paths: vec!["/src/a.c".into()],
        source_path: s("src/a.c"),
        offered_in: s("_symdex/sourcemap/x/ab.json"),
        as_source: true,
        removed: set("k/3"),
        indexed_as: Some(IndexedAs {
            plan: "p".into(),
            referenced: 1,
            records: vec![crate::manifest::Record {
                unchanged: vec!["k/1".into()],
                ..Default::default()
            }],
            conflicts: set("k/4"),
            unchanged_at: vec![vec![0]],
        }),
    };
    let text = serde_json::to_vec(&full).unwrap();
    assert_eq!(parse::<UploadRecord>("u.json", &text).unwrap(), full);
}

/// A directory for a store (`s`, opened by the test) and one input file (`in`, "bytes")
/// beside it, with the input's content identity.
fn input_beside_store() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, b"bytes").unwrap();
    let etag = crate::storage::local::file_sha1(&input).unwrap();
    (dir, input, etag)
}

/// Holds the first change under `prefix` back until the test lets it through.
struct HoldFirst {
    prefix: &'static str,
    held: std::sync::atomic::AtomicBool,
    reached: tokio::sync::Notify,
    open: tokio::sync::Semaphore,
}

impl crate::storage::hooked::BeforeChange for HoldFirst {
    fn hold<'a>(
        &'a self,
        _op: &'static str,
        key: &str,
    ) -> Option<crate::storage::StorageFuture<'a, ()>> {
        use std::sync::atomic::Ordering;
        if !key.starts_with(self.prefix) || self.held.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(Box::pin(async move {
            self.reached.notify_one();
            let permit = self.open.acquire().await;
            let permit = permit.map_err(|e| io::Error::other(e.to_string()))?;
            permit.forget();
            Ok(())
        }))
    }
}

/// Counts the reads of one file (once named), holding each back for a few turns of the
/// runtime: whatever else is ready runs while the read is in flight.
#[derive(Default)]
struct CountReads {
    file: std::sync::Mutex<String>,
    reads: std::sync::atomic::AtomicUsize,
}

impl crate::storage::hooked::BeforeChange for CountReads {
    fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
        if self.file.lock().ok()?.as_str() != key {
            return None;
        }
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(Box::pin(async {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            Ok(())
        }))
    }
}
