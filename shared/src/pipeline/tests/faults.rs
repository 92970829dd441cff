//! Runs that die or fail at any change, finished by their retries (removals, take-backs,
//! source removals, debug files).

use std::collections::BTreeSet;
use std::io;

use super::{
    assert_audit_clean, delete_reported, index_and_finalize, index_reported, published_for,
};
use crate::pipeline::{Indexer, Record};
use crate::refs::{RefStore, UploadState};
use crate::storage::{LocalStore, Storage};
use crate::testing::failing::{dying_at_nth, failing_nth};
use crate::testing::scenarios::{config, Artifacts};

#[tokio::test]
async fn a_removal_that_fails_at_any_change_reports_every_key_on_its_retry() {
    let artifacts = Artifacts::new();
    let artifact = &artifacts.elf_a;
    let removed = |record: Option<Record>| -> BTreeSet<String> {
        record
            .map(|r| r.removed.into_iter().collect())
            .unwrap_or_default()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path().join("clean")).unwrap();
    index_and_finalize(&store, config(), artifact).await;
    let clean = removed(
        Indexer::new(&store, config())
            .unindex(&artifact.id)
            .await
            .unwrap(),
    );
    assert!(clean.len() > 5, "{clean:?}");
    // Every change of the removal in turn fails (the process dies before it); the retry
    // reports what the removal did, the failed attempt's part included.
    for nth in 0.. {
        let root = dir.path().join(format!("at-{nth}"));
        let store = LocalStore::open(&root).unwrap();
        index_and_finalize(&store, config(), artifact).await;
        // The same directory, through a second handle that fails its `nth` change.
        let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
        let first = Indexer::new(&failing, config()).unindex(&artifact.id).await;
        if !failing.hook().failed() {
            assert_eq!(removed(first.unwrap()), clean);
            assert!(nth > clean.len(), "{nth} changes");
            break;
        }
        assert!(first.is_err(), "change {nth} failed, the removal did not");
        let retry = Indexer::new(&store, config()).unindex(&artifact.id).await;
        assert_eq!(removed(retry.unwrap()), clean, "failing at change {nth}");
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{nth}: {:?}", audit.problems);
    }
}

/// An index message whose ingest object is gone takes its upload back (`finalize`); a
/// process dying anywhere in that take-back leaves the upload `removing`, and only the
/// message's redelivery runs it again. The redelivery finishes the removal (and asks to
/// be retried), the next one indexes and takes it back: every run ends with nothing
/// published, no upload left, the audit clean. (Before, every redelivery answered "a
/// removal is in progress": found by the S3 interleavings at seed 4002.)
#[tokio::test]
async fn a_take_back_dying_half_way_is_finished_by_the_index_messages_redelivery() {
    use crate::testing::scenarios::{run_op, Op};
    let a = Artifacts::new();
    let artifact = &a.elf_a;
    let dir = tempfile::tempdir().unwrap();
    let mut left_removing = 0;
    for nth in 0.. {
        let root = dir.path().join(format!("at-{nth}"));
        let store = LocalStore::open(&root).unwrap();
        let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
        let first = run_op(&failing, Op::Index(artifact, false)).await;
        if !failing.hook().failed() {
            first.unwrap();
            assert!(nth > 5, "{nth} changes");
            break;
        }
        assert!(first.is_err(), "change {nth} failed, the index did not");
        let state = RefStore::new(&store).upload(&artifact.id).await.unwrap();
        if state.map(|r| r.state) == Some(UploadState::Removing) {
            left_removing += 1;
        }
        let mut redelivered = Err(io::Error::other("not run"));
        for _ in 0..3 {
            redelivered = run_op(&store, Op::Index(artifact, false)).await;
            if redelivered.is_ok() {
                break;
            }
        }
        redelivered.unwrap_or_else(|e| panic!("dying at change {nth}: {e}"));
        let upload = RefStore::new(&store).upload(&artifact.id).await.unwrap();
        assert_eq!(upload, None, "dying at change {nth}");
        let mut published = store.list_now("").unwrap();
        // The store's marker objects (written before the first publish) stay: no upload's.
        let markers: Vec<String> = config().marker_objects().into_iter().map(|m| m.0).collect();
        published.retain(|k| {
            !k.starts_with("_symdex/") && !k.starts_with("_manifest/") && !markers.contains(k)
        });
        assert!(published.is_empty(), "dying at change {nth}: {published:?}");
        assert_audit_clean(&store).await;
    }
    assert!(left_removing > 0, "no death left the upload removing");
}

/// A source tying with another for a debug file's path is removed: the path goes to the
/// other. Every change of the removal in turn fails (the process dies before it); the
/// retry still serves the path with the other's bytes, and the manifest says so.
#[tokio::test]
async fn a_source_removal_that_fails_at_any_change_hands_its_paths_on_by_its_retry() {
    let a = Artifacts::new();
    let (removed, left) = (&a.source, &a.source_edited);
    let indexed_before = [removed, left, &a.debug_with_sources];
    let dir = tempfile::tempdir().unwrap();
    let clean = LocalStore::open(dir.path().join("clean")).unwrap();
    for artifact in indexed_before {
        index_and_finalize(&clean, config(), artifact).await;
    }
    delete_reported(&clean, &removed.id).await.unwrap();
    let keys = published_for(&clean, &left.id, "was removed").await;
    assert_eq!(keys.len(), 1, "the tied path is served now: {keys:?}");
    let key = keys.first().unwrap().clone();
    assert_eq!(clean.read(&key).await.unwrap(), Some(left.bytes.clone()));
    for nth in 0.. {
        let root = dir.path().join(format!("at-{nth}"));
        let store = LocalStore::open(&root).unwrap();
        for artifact in indexed_before {
            index_and_finalize(&store, config(), artifact).await;
        }
        let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
        let first = delete_reported(&failing, &removed.id).await;
        if !failing.hook().failed() {
            first.unwrap();
            assert!(nth > 3, "{nth} changes");
            break;
        }
        assert!(first.is_err(), "change {nth} failed, the removal did not");
        delete_reported(&store, &removed.id).await.unwrap();
        let served = store.read(&key).await.unwrap();
        assert_eq!(served, Some(left.bytes.clone()), "failing at change {nth}");
        assert_eq!(
            published_for(&store, &left.id, "was removed").await,
            keys,
            "failing at change {nth}"
        );
        assert_audit_clean(&store).await;
    }
}

/// The crash test above, racing the debug file: the removal of a source tying with
/// another dies at each of its changes in turn, under interleavings with the debug
/// file's index, and is retried. Every run ends with the path served by the other
/// source, and the manifest saying it was published for it.
#[tokio::test]
async fn a_source_removal_dying_while_its_debug_file_arrives_is_finished_by_its_retry() {
    use crate::testing::interleave::{Actor, Scheduled, Scheduler};
    let a = Artifacts::new();
    let (removed, left, debug) = (&a.source, &a.source_edited, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let mut runs = 0;
    for seed in crate::testing::scenarios::seeds(12) {
        for nth in 0.. {
            let root = dir.path().join(format!("{seed}-{nth}"));
            let store = LocalStore::open(&root).unwrap();
            for artifact in [removed, left] {
                index_and_finalize(&store, config(), artifact).await;
            }
            let scheduler = Scheduler::new();
            let scheduled = Scheduled::new(&store, scheduler.clone());
            let failing = failing_nth(Scheduled::new(&store, scheduler.clone()), nth);
            let actors: Vec<Actor<'_, io::Result<()>>> = vec![
                Box::pin(delete_reported(&failing, &removed.id)),
                Box::pin(index_reported(&scheduled, debug)),
            ];
            let (results, trace) = scheduler.run(seed, actors).await;
            runs += 1;
            let why = format!("seed {seed}, change {nth}: {trace:#?}");
            results[1].as_ref().expect(&why);
            let failed = failing.hook().failed();
            match &results[0] {
                Ok(()) => {}
                // Handing the path on, the removal waits for the debug file's live lease
                // of the same holder, and may give up: retried, as SQS would.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => assert!(failed, "{e}\n{why}"),
            }
            delete_reported(&store, &removed.id).await.expect(&why);
            let key = published_for(&store, &left.id, "").await;
            assert_eq!(key.len(), 1, "{why}");
            let key = key.first().unwrap();
            let served = store.read(key).await.unwrap();
            assert_eq!(served, Some(left.bytes.clone()), "{why}");
            // Nothing left behind: no lease of the dead attempt's (it took over none of
            // the debug file's run) waits to run out.
            let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
            assert!(audit.problems.is_empty(), "{:?}\n{why}", audit.problems);
            std::fs::remove_dir_all(&root).unwrap();
            if !failed {
                break;
            }
        }
    }
    assert!(runs > 20, "{runs} runs");
}

/// A debug file arrives after its source: the source's key is published on the source
/// upload's behalf. Every change of the index in turn fails (the process dies before
/// it); the retry still serves the key, and the manifest says it was published for the
/// source upload (at-least-once, as for the debug file's own keys).
#[tokio::test]
async fn a_debug_file_index_that_fails_at_any_change_reports_its_sources_keys_on_its_retry() {
    let a = Artifacts::new();
    let (source, debug) = (&a.source, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let clean = LocalStore::open(dir.path().join("clean")).unwrap();
    index_reported(&clean, source).await.unwrap();
    index_reported(&clean, debug).await.unwrap();
    let keys = published_for(&clean, &source.id, "named by").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let key = keys.first().unwrap().clone();
    for nth in 0.. {
        let root = dir.path().join(format!("at-{nth}"));
        let store = LocalStore::open(&root).unwrap();
        index_reported(&store, source).await.unwrap();
        let failing = dying_at_nth(LocalStore::open(&root).unwrap(), nth);
        let first = index_reported(&failing, debug).await;
        if !failing.hook().failed() {
            first.unwrap();
            assert!(nth > 3, "{nth} changes");
            break;
        }
        assert!(first.is_err(), "change {nth} failed, the index did not");
        index_reported(&store, debug).await.unwrap();
        let served = store.read(&key).await.unwrap();
        assert_eq!(
            served,
            Some(source.bytes.clone()),
            "failing at change {nth}"
        );
        assert_eq!(
            published_for(&store, &source.id, "named by").await,
            keys,
            "failing at change {nth}"
        );
        assert_audit_clean(&store).await;
    }
}
