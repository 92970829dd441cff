//! The reference protocol's unit tests, over local stores.

use super::*;
use crate::storage::{content_sha1, LocalStore};

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
#[tokio::test]
async fn a_create_lease_is_released_by_its_uploads_finalize() {
    let (dir, store, etag) = store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::with_policy(&store, impatient());
    let c = content(&etag, &input);
    let publish = |key: &'static str, upload: &'static str| {
        let (refs, c) = (&refs, &c);
        async move {
            refs.publish(key, upload, c, OnDifferent::Conflict, true)
                .await
        }
    };
    // Created: the record holds u1's reference and its `create` lease, no release written.
    assert_eq!(publish("k", "u1").await.unwrap(), KeyOutcome::Published);
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!(record.refs, ["u1".to_string()].into());
    let lease = record
        .lease
        .clone()
        .expect("the lease is left to the finalize");
    assert_eq!(
        (lease.op.as_str(), lease.holder.as_str()),
        (CREATE, "index:u1")
    );
    // Until u1 lists the key, the lease is in force: others wait (and give up, to be
    // retried), and the audit sees a change in progress.
    let before = crate::audit::audit(&store, "_manifest").await.unwrap();
    assert!(
        before.problems.iter().any(|p| p.kind == "lease"),
        "{before:?}"
    );
    let waited = publish("k", "u2").await.unwrap_err();
    assert_eq!(waited.kind(), io::ErrorKind::WouldBlock);
    assert_eq!(
        refs.remove("k", "u1").await.unwrap_err().kind(),
        io::ErrorKind::WouldBlock,
        "a remover waits for the creation too"
    );
    // u1's finalize lists it: released, for the audit and for everyone else.
    finalized(&refs, "u1", &["k"]).await;
    let after = crate::audit::audit(&store, "_manifest").await.unwrap();
    assert!(after.problems.is_empty(), "{:?}", after.problems);
    let other = RefStore::with_policy(&store, impatient());
    let c2 = content(&etag, &input);
    assert_eq!(
        other
            .publish("k", "u2", &c2, OnDifferent::Conflict, true)
            .await
            .unwrap(),
        KeyOutcome::Unchanged
    );
    let shared = refs.key("k").await.unwrap().unwrap();
    assert_eq!(shared.refs, ["u1".to_string(), "u2".to_string()].into());
    assert_eq!(
        shared.lease, None,
        "the write adding u2 drops the released lease"
    );
    // A run that takes its references back instead of listing them releases its leases
    // by a write first: its own removal is not blocked by them.
    assert_eq!(publish("k2", "u3").await.unwrap(), KeyOutcome::Published);
    let held = refs.take_held("u3");
    assert_eq!(held.len(), 1);
    assert!(refs.take_held("u3").is_empty(), "handed on once");
    refs.release_created(&held).await.unwrap();
    assert_eq!(refs.key("k2").await.unwrap().unwrap().lease, None);
    assert_eq!(
        refs.remove("k2", "u3").await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(store.size("k2").await.unwrap(), None);
}

/// Keys published at once take their record steps in turn (`InTurn`): while the first
/// waits for another upload's creation, the second is not touched — so two uploads
/// sharing keys never hold one each of two keys the other waits for — and once the first
/// has decided, the second goes.
#[tokio::test]
async fn keys_published_at_once_take_their_records_in_turn() {
    let (dir, store, etag) = store_and_input();
    let input = dir.path().join("in");
    let patient = LeasePolicy {
        wait: Wait {
            attempts: 100_000,
            first_pause: Duration::from_millis(1),
            max_pause: Duration::from_millis(1),
        },
        ..LeasePolicy::default()
    };
    let c = content(&etag, &input);
    // u1 created x and has not listed it: its `create` lease is in force.
    let first = RefStore::with_policy(&store, patient.clone());
    let published = first.publish("x", "u1", &c, OnDifferent::Conflict, true);
    assert_eq!(published.await.unwrap(), KeyOutcome::Published);
    // u2 publishes x and y at once, in turn.
    let second = RefStore::with_policy(&store, patient);
    let mut turns = InTurn::chain(2).into_iter();
    let both = futures_util::future::join(
        second.publish_in_turn("x", "u2", &c, OnDifferent::Conflict, true, turns.next()),
        second.publish_in_turn("y", "u2", &c, OnDifferent::Conflict, true, turns.next()),
    );
    tokio::pin!(both);
    // However long x waits, y is not begun (without the turn it would be created at once).
    let waiting = tokio::time::timeout(Duration::from_millis(50), &mut both).await;
    assert!(waiting.is_err(), "x did not wait: {waiting:?}");
    assert_eq!(
        first.key("y").await.unwrap(),
        None,
        "y began before x decided"
    );
    // u1 lists x: x decides (u2 references it), then y is created.
    finalized(&first, "u1", &["x"]).await;
    let (x, y) = both.await;
    assert_eq!(
        (x.unwrap().outcome, y.unwrap().outcome),
        (KeyOutcome::Unchanged, KeyOutcome::Published)
    );
    let x = first.key("x").await.unwrap().unwrap();
    assert_eq!(x.refs, ["u1".to_string(), "u2".to_string()].into());
    let y = first.key("y").await.unwrap().unwrap();
    assert_eq!(y.refs, ["u2".to_string()].into());
}

/// Two runs of one upload at once (a message delivered twice) hold the same holder, yet
/// neither ends the other's lease: the second takes the first's `create` lease over with
/// a lease of its own run, so the first run's release does not touch it and the first
/// run's listing does not end it — a removal waits for the run still copying (before runs
/// were told apart, both happened, and the removal deleted the object that run then
/// wrote again: published, and no record referencing it).
#[tokio::test]
async fn runs_of_one_upload_at_once_do_not_end_each_others_leases() {
    let (dir, store, etag) = store_and_input();
    let input = dir.path().join("in");
    let c = content(&etag, &input);
    let (first, second) = (
        RefStore::with_policy(&store, impatient()),
        RefStore::with_policy(&store, impatient()),
    );
    let publish = first.publish("k", "u", &c, OnDifferent::Conflict, true);
    assert_eq!(publish.await.unwrap(), KeyOutcome::Published);
    let taken_first = first.key("k").await.unwrap().unwrap().lease.unwrap();
    // The second run meets its own holder's lease, unlisted: taken over at once, as a
    // retry would, but written as its own run's.
    let publish = second.publish("k", "u", &c, OnDifferent::Conflict, true);
    assert_eq!(publish.await.unwrap(), KeyOutcome::Published);
    let taken_second = second.key("k").await.unwrap().unwrap().lease.unwrap();
    assert_eq!(taken_second.holder, taken_first.holder);
    assert_ne!(taken_second.run, taken_first.run);
    // The first run gives up its lease, then lists the key: the second's stays in force.
    let held = first.take_held("u");
    first.release_created(&held).await.unwrap();
    assert_eq!(
        first.key("k").await.unwrap().unwrap().lease,
        Some(taken_second.clone())
    );
    let keys: BTreeSet<String> = ["k".to_string()].into();
    let template = UploadRecord {
        upload: "u".into(),
        source: "/in/u".into(),
        ..Default::default()
    };
    first.plan(&template, &keys, None, None).await.unwrap();
    let listed = first.finalize("u", &keys, Run::Partial, None, &held);
    assert!(listed.await.unwrap());
    let remover = RefStore::with_policy(&store, impatient());
    let waits = remover.remove("k", "u").await.unwrap_err();
    assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
    assert!(store.size("k").await.unwrap().is_some());
    // The second run lists it too: ended, and the removal goes ahead.
    let held = second.take_held("u");
    let listed = second.finalize("u", &keys, Run::Complete(None), None, &held);
    assert!(listed.await.unwrap());
    assert_eq!(
        remover.remove("k", "u").await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(store.size("k").await.unwrap(), None);
}

/// A removal handing a key on to its holder (a source's withdrawal serving a path from
/// another source) takes over its own removal's earlier attempt's lease at once, as a
/// retry does, but waits for a live lease another run holds for the same holder: its
/// retry may never meet the key again, so a lease it took over and then left would run
/// out unlisted. The holder's other publishers (a debug file serving the path) take the
/// removal's lease over, as before.
#[tokio::test]
async fn a_removal_handing_a_key_on_takes_over_only_its_own_attempts_lease() {
    let (dir, store, etag) = store_and_input();
    let input = dir.path().join("in");
    let c = content(&etag, &input);
    let run = || RefStore::with_policy(&store, impatient());
    let reader = run();
    let lease = || async { reader.key("k").await.unwrap().unwrap().lease };
    let dying = run();
    let handed = dying.publish_for("k", "u", Some("t"), &c);
    assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
    let first = lease().await.unwrap();
    assert_eq!(
        (first.holder.as_str(), first.acting.as_str()),
        ("index:u", "t")
    );
    // Its retry: taken over, written as the retry's run.
    let retry = run();
    let handed = retry.publish_for("k", "u", Some("t"), &c);
    assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
    let retried = lease().await.unwrap();
    assert_ne!(retried.run, first.run);
    assert_eq!(retried.acting, "t");
    // Another removal handing the same key on to the same holder waits, and changes
    // nothing.
    let waits = run()
        .publish_for("k", "u", Some("t2"), &c)
        .await
        .unwrap_err();
    assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
    assert_eq!(lease().await, Some(retried.clone()));
    // A debug file serving the path for the holder takes it over: its retry meets the
    // key again, so its lease is listed by one of its runs.
    let debug = run();
    let served = debug.publish("k", "u", &c, OnDifferent::Conflict, true);
    assert_eq!(served.await.unwrap(), KeyOutcome::Published);
    let served = lease().await.unwrap();
    assert_eq!(
        (served.acting.as_str(), served.holder.as_str()),
        ("", "index:u")
    );
    assert_ne!(served.run, retried.run);
    // The removal, retried again, now waits for the debug file's run.
    let waits = run()
        .publish_for("k", "u", Some("t"), &c)
        .await
        .unwrap_err();
    assert_eq!(waits.kind(), io::ErrorKind::WouldBlock, "{waits}");
    // Once the debug file's run lists the key, the lease is over and the removal finds
    // it published.
    let keys: BTreeSet<String> = ["k".to_string()].into();
    let template = UploadRecord {
        upload: "u".into(),
        source: "/in/u".into(),
        ..Default::default()
    };
    debug.plan(&template, &keys, None, None).await.unwrap();
    let held = debug.take_held("u");
    let listed = debug.finalize("u", &keys, Run::Partial, None, &held);
    assert!(listed.await.unwrap());
    let last = run();
    let handed = last.publish_for("k", "u", Some("t"), &c);
    assert_eq!(handed.await.unwrap().outcome, KeyOutcome::Published);
    assert_eq!(store.size("k").await.unwrap(), Some(c.size));
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

/// Keys meeting one upload's `create` leases at once share one read of that upload's
/// record. Before, each missed the listing cache and read it. (The owner lookup of keys
/// shared at once is shared too: `sharing_another_uploads_keys_writes_each_record_once`.)
#[tokio::test]
async fn keys_meeting_one_uploads_leases_at_once_read_its_record_once() {
    let (dir, input, etag) = input_beside_store();
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s")).unwrap(),
        CountReads::default(),
    );
    let refs = RefStore::with_policy(&store, impatient());
    let c = content(&etag, &input);
    for key in ["k1", "k2"] {
        let created = refs.publish(key, "u1", &c, OnDifferent::Conflict, true);
        assert_eq!(created.await.unwrap(), KeyOutcome::Published);
    }
    // u1 lists both: its `create` leases end with its listing, read by whoever meets them.
    finalized(&refs, "u1", &["k1", "k2"]).await;
    *store.hook().file.lock().unwrap() = refs.upload_file("u1").await.unwrap();
    // Another process, knowing no listing yet, shares both keys at once.
    let other = RefStore::with_policy(&store, impatient());
    let (k1, k2) = tokio::join!(
        other.publish("k1", "u2", &c, OnDifferent::Conflict, true),
        other.publish("k2", "u2", &c, OnDifferent::Conflict, true),
    );
    let both = (k1.unwrap(), k2.unwrap());
    assert_eq!(both, (KeyOutcome::Unchanged, KeyOutcome::Unchanged));
    let reads = store.hook().reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, 1, "u1's record read once for both keys");
    for key in ["k1", "k2"] {
        let record = other.key(key).await.unwrap().unwrap();
        assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
        assert_eq!(record.lease, None);
    }
}

/// Two writers of one run share their deferred source-map writes (a removal's hand-over
/// indexing inside `symdex index`): each sees the other's changes, and while one flushes,
/// the other's flush waits for it, then finds nothing left to write. Apart, or flushing
/// at once, the second wrote the record the first was writing, and the first failed on
/// the version the second had replaced ("changed by another writer").
#[tokio::test]
async fn writers_sharing_deferred_writes_see_each_others_changes_and_flush_in_turn() {
    use crate::sourcemap::Want;
    use futures_util::FutureExt;
    let dir = tempfile::tempdir().unwrap();
    let hold = HoldFirst {
        prefix: "_symdex/sourcemap/",
        held: Default::default(),
        reached: Default::default(),
        open: tokio::sync::Semaphore::new(0),
    };
    let store = crate::storage::hooked::Hooked::new(LocalStore::open(dir.path()).unwrap(), hold);
    let want = |upload: &str| Want {
        build_id: "ab".into(),
        path: "/src/a.c".into(),
        upload: upload.into(),
        md5: None,
    };
    let file = "_symdex/sourcemap/0123456789abcdef/00.json";
    let shared = Arc::new(DeferredWrites::default());
    let mut run = RefStore::new(&store);
    run.defer_source_map_writes_to(Arc::clone(&shared));
    let mut hand_over = RefStore::new(&store);
    hand_over.defer_source_map_writes_to(shared);
    run.update_source_map(file, |r| r.want(&want("d1")))
        .await
        .unwrap();
    hand_over
        .update_source_map(file, |r| r.want(&want("d2")))
        .await
        .unwrap();
    let both = vec![want("d1"), want("d2")];
    assert_eq!(run.source_map(file).await.unwrap().wants, both);
    assert_eq!(store.inner().read(file).await.unwrap(), None, "deferred");
    let first = run.flush_source_maps();
    let second = async {
        // The first flush's write is held back; the second flush starts meanwhile.
        store.hook().reached.notified().await;
        let mut second = std::pin::pin!(hand_over.flush_source_maps());
        let early = second.as_mut().now_or_never();
        store.hook().open.add_permits(1);
        match early {
            Some(flushed) => flushed,
            None => second.await,
        }
    };
    let (first, second) = tokio::join!(first, second);
    first.unwrap();
    second.unwrap();
    let stored = store.inner().read(file).await.unwrap().unwrap();
    let stored: crate::sourcemap::SourceMapRecord = serde_json::from_slice(&stored).unwrap();
    assert_eq!(stored.wants, both);
}

/// A join record taken to be absent is created without a read; one there after all
/// fails the creation, is read, and gets the change on top of what it held.
#[tokio::test]
async fn a_join_record_guessed_absent_is_created_or_read_and_changed() {
    use crate::sourcemap::{Offer, Want};
    let (_dir, store, _) = store_and_input();
    let refs = RefStore::new(&store);
    let want = |upload: &str| Want {
        build_id: "ab".into(),
        path: "/src/a.c".into(),
        upload: upload.into(),
        md5: None,
    };
    let file = "_symdex/sourcemap/0123456789abcdef/00.json";
    let created = refs
        .update_source_map_guessing(file, true, |r| r.want(&want("d1")))
        .await
        .unwrap();
    assert_eq!(created.wants, vec![want("d1")]);
    // An offer arrives; a second debug file's guess is wrong: the offer is kept.
    let offer = Offer {
        path: "a.c".into(),
        root: None,
        upload: "s1".into(),
        key: "k".into(),
        etag: "e".into(),
        size: 1,
        md5: None,
    };
    refs.update_source_map(file, |r| r.offer(&offer))
        .await
        .unwrap();
    let changed = refs
        .update_source_map_guessing(file, true, |r| r.want(&want("d2")))
        .await
        .unwrap();
    assert_eq!(changed.offers, vec![offer.clone()]);
    assert_eq!(changed.wants, vec![want("d1"), want("d2")]);
    let stored: SourceMapRecord = parse(file, &store.read(file).await.unwrap().unwrap()).unwrap();
    assert_eq!(stored, *changed);
}

#[tokio::test]
async fn references_are_counted_per_upload() {
    let (dir, store, etag) = store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let c = content(&etag, &input);
    assert_eq!(
        refs.publish("k/a", "u1", &c, OnDifferent::Conflict, true)
            .await
            .unwrap(),
        KeyOutcome::Published
    );
    finalized(&refs, "u1", &["k/a"]).await;
    assert_eq!(
        refs.publish("k/a", "u2", &c, OnDifferent::Conflict, true)
            .await
            .unwrap(),
        KeyOutcome::Unchanged
    );
    assert_eq!(
        refs.publish("k/a", "u1", &c, OnDifferent::Conflict, false)
            .await
            .unwrap(),
        KeyOutcome::Unchanged,
        "a finished upload re-indexed reports unchanged"
    );
    let record = refs.key("k/a").await.unwrap().unwrap();
    assert_eq!(record.refs.len(), 2);
    assert_eq!(record.by, "u1");
    assert!(record.lease.is_none(), "the copy lease was released");
    assert_eq!(refs.remove("k/a", "u1").await.unwrap(), RemoveOutcome::Kept);
    assert!(store.size("k/a").await.unwrap().is_some());
    assert_eq!(
        refs.remove("k/a", "u2").await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(
        refs.key("k/a").await.unwrap(),
        None,
        "the tombstone is gone"
    );
    assert_eq!(store.size("k/a").await.unwrap(), None);
    assert_eq!(
        refs.remove("k/a", "u2").await.unwrap(),
        RemoveOutcome::NotReferenced
    );
}

/// A store in a temporary directory beside two inputs of different bytes, `a` (3 bytes)
/// and `b` (4 bytes).
fn store_with_two_inputs() -> (tempfile::TempDir, LocalStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path().join("s")).unwrap();
    std::fs::write(dir.path().join("a"), b"aaa").unwrap();
    std::fs::write(dir.path().join("b"), b"bbbb").unwrap();
    (dir, store)
}

#[tokio::test]
async fn generated_content_adopts_a_live_copy_and_replaces_a_missing_one() {
    let (dir, store) = store_with_two_inputs();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let refs = RefStore::new(&store);
    refs.publish("k", "u1", &content("ea", &a), OnDifferent::Conflict, true)
        .await
        .unwrap();
    finalized(&refs, "u1", &["k"]).await;
    // Another identity of the same section (e.g. an S3 part copy's ETag): the live copy
    // is taken as it is, no byte written, no conflict.
    assert_eq!(
        refs.publish("k", "u2", &content("eb", &b), OnDifferent::Adopt, true)
            .await
            .unwrap(),
        KeyOutcome::Unchanged
    );
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!((record.etag.as_str(), record.size), ("ea", 3));
    assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
    assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"aaa");
    // The copy deleted behind symdex's back: replaced by the adopter's own bytes, and the
    // record says so (invariant 2).
    store.delete("k").await.unwrap();
    assert_eq!(
        refs.publish("k", "u2", &content("eb", &b), OnDifferent::Adopt, true)
            .await
            .unwrap(),
        KeyOutcome::Published
    );
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!((record.etag.as_str(), record.size), ("eb", 4));
    assert_eq!(record.lease, None);
    assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bbbb");
}

#[tokio::test]
async fn other_content_is_a_conflict_and_a_live_lease_makes_others_wait() {
    let (dir, store) = store_with_two_inputs();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let refs = RefStore::with_policy(&store, impatient());
    refs.publish("k", "u1", &content("ea", &a), OnDifferent::Conflict, true)
        .await
        .unwrap();
    finalized(&refs, "u1", &["k"]).await;
    assert_eq!(
        refs.publish("k", "u2", &content("eb", &b), OnDifferent::Conflict, true)
            .await
            .unwrap(),
        KeyOutcome::Conflict
    );
    // A live lease of another holder (a remover at work): the indexer waits, then gives
    // up with a retryable error, and changes nothing.
    let mut record = refs.key("k").await.unwrap().unwrap();
    record.lease = Some(Lease {
        holder: "other".into(),
        until: now_secs() + 600,
        op: "remove".into(),
        run: String::new(),
        acting: String::new(),
    });
    record.refs.clear();
    store
        .put(&key_file("k"), &serde_json::to_vec(&record).unwrap())
        .await
        .unwrap();
    let err = refs
        .publish("k", "u3", &content("ea", &a), OnDifferent::Conflict, true)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    // The same lease, past its time: taken over.
    record.lease.as_mut().unwrap().until = 1;
    store
        .put(&key_file("k"), &serde_json::to_vec(&record).unwrap())
        .await
        .unwrap();
    assert_eq!(
        refs.publish("k", "u3", &content("ea", &a), OnDifferent::Conflict, true)
            .await
            .unwrap(),
        KeyOutcome::Published
    );
    assert_eq!(
        refs.key("k").await.unwrap().unwrap().refs,
        ["u3".to_string()].into()
    );
}

#[tokio::test]
async fn what_is_at_a_key_without_a_record_is_found_by_creating_the_object() {
    let (dir, store) = store_with_two_inputs();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let sha_a = crate::storage::local::file_sha1(&a).unwrap();
    let refs = RefStore::new(&store);
    let bytes = |key: &'static str| {
        let store = &store;
        async move { store.get(key).await.unwrap().map(|v| v.bytes) }
    };
    let record = |refs: &[&str], by: &str, holder: &str, until: u64| KeyRecord {
        key: String::new(),
        etag: sha_a.clone(),
        size: 3,
        refs: refs.iter().map(|r| r.to_string()).collect(),
        by: by.into(),
        lease: Some(Lease {
            holder: index_holder(holder),
            until,
            op: CREATE.into(),
            run: String::new(),
            acting: String::new(),
        }),
        alias_of: None,
    };
    let put_record = |key: &'static str, r: KeyRecord| {
        let store = &store;
        async move {
            let bytes = serde_json::to_vec(&KeyRecord {
                key: key.into(),
                ..r
            })
            .unwrap();
            store.put(&key_file(key), &bytes).await.unwrap();
        }
    };
    // The same bytes, written outside symdex: adopted (no writer named), not rewritten.
    store.put("same", b"aaa").await.unwrap();
    let ca = content(&sha_a, &a);
    let publish = |key: &'static str, upload: &'static str, how, fresh| {
        let (refs, ca) = (&refs, &ca);
        async move { refs.publish(key, upload, ca, how, fresh).await.unwrap() }
    };
    assert_eq!(
        publish("same", "u1", OnDifferent::Conflict, true).await,
        KeyOutcome::Unchanged
    );
    let adopted = refs.key("same").await.unwrap().unwrap();
    assert_eq!(adopted.refs, ["u1".to_string()].into());
    assert_eq!((adopted.by.as_str(), adopted.lease), ("", None));
    // Other bytes: a conflict, the object left alone and no record claiming it.
    store.put("other", b"bbbb").await.unwrap();
    assert_eq!(
        publish("other", "u1", OnDifferent::Conflict, true).await,
        KeyOutcome::Conflict
    );
    assert_eq!(refs.key("other").await.unwrap(), None);
    assert_eq!(bytes("other").await.as_deref(), Some(&b"bbbb"[..]));
    // ... unless the upload overwrites.
    assert_eq!(
        publish("other", "u2", OnDifferent::Overwrite, true).await,
        KeyOutcome::Published
    );
    assert_eq!(bytes("other").await.as_deref(), Some(&b"aaa"[..]));
    assert_eq!(refs.key("other").await.unwrap().unwrap().by, "u2");
    // A dead creator's lease, taken over: still a creation, so the outside object that
    // creator would have met is a conflict for its successor too, never overwritten.
    std::fs::copy(&b, store.root().join("k3")).unwrap();
    put_record("k3", record(&["u9"], "u9", "u9", 1)).await;
    assert_eq!(
        publish("k3", "u3", OnDifferent::Conflict, true).await,
        KeyOutcome::Conflict
    );
    assert_eq!(refs.key("k3").await.unwrap(), None);
    assert_eq!(bytes("k3").await.as_deref(), Some(&b"bbbb"[..]));
    // Our own earlier attempt's creation (its copy landed, its lease never released): the
    // bytes there are ours, reported published again.
    store.put("k4", b"aaa").await.unwrap();
    put_record("k4", record(&["u4"], "u4", "u4", now_secs() + 600)).await;
    assert_eq!(
        publish("k4", "u4", OnDifferent::Conflict, false).await,
        KeyOutcome::Published
    );
    let resumed = refs.key("k4").await.unwrap().unwrap();
    let holder = resumed.lease.map(|l| l.holder);
    assert_eq!(
        (resumed.by.as_str(), holder.as_deref()),
        ("u4", Some("index:u4"))
    );
    // A fresh key: created, its record left to u5's finalize.
    assert_eq!(
        publish("new", "u5", OnDifferent::Conflict, true).await,
        KeyOutcome::Published
    );
    let created = refs.key("new").await.unwrap().unwrap();
    let holder = created.lease.map(|l| l.holder);
    assert_eq!(
        (created.by.as_str(), holder.as_deref()),
        ("u5", Some("index:u5"))
    );
    assert_eq!(bytes("new").await.as_deref(), Some(&b"aaa"[..]));
}

#[tokio::test]
async fn an_update_to_the_same_content_writes_nothing() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let refs = RefStore::new(&store);
    let file = "_symdex/test/same.json";
    let write = |value: u32| {
        move |_: Option<serde_json::Value>| Ok(Step::Write(serde_json::json!({ "v": value }), ()))
    };
    let inode = || std::fs::metadata(dir.path().join(file)).unwrap().ino();
    let ((), first) = refs.update_versioned(file, None, write(1)).await.unwrap();
    let before = inode();
    // The same content again: nothing written, the version it holds returned.
    let ((), again) = refs.update_versioned(file, None, write(1)).await.unwrap();
    assert_eq!(inode(), before, "an identical record was rewritten");
    assert_eq!(again, first);
    // Other content is written.
    refs.update(file, write(2)).await.unwrap();
    assert_ne!(inode(), before);
}

#[tokio::test]
async fn uploads_plan_finalize_and_removal_in_either_layout() {
    let dir = tempfile::tempdir().unwrap();
    let flat = LocalStore::open(dir.path().join("flat")).unwrap();
    uploads_plan_finalize_and_removal(&flat, UploadLayout::Flat).await;
    let sources = flat.list(SOURCES_DIR).await.unwrap();
    assert!(
        sources.is_empty(),
        "the last upload's removal left {sources:?}"
    );
    assert!(
        flat.read(LAYOUT_FILE).await.unwrap().is_none(),
        "a CLI store keeps no marker"
    );
    let by_location = LocalStore::open(dir.path().join("by-location"))
        .unwrap()
        .with_owners();
    uploads_plan_finalize_and_removal(&by_location, UploadLayout::ByLocation).await;
    let marker = by_location.read(LAYOUT_FILE).await.unwrap().unwrap();
    assert_eq!(marker, br#"{"uploads":"by-location"}"#);
}

/// A store's upload layout is decided once and kept: a new store that lays records out
/// by location does so; one holding records written before layouts were named (flat)
/// stays flat, and every writer after reads the marker rather than deciding again.
#[tokio::test]
async fn a_store_keeps_the_upload_layout_it_was_made_with() {
    let dir = tempfile::tempdir().unwrap();
    let up = |upload: &str| UploadRecord {
        upload: upload.into(),
        source: "s3://b/k".into(),
        ..Default::default()
    };
    let keys: BTreeSet<String> = ["k1".to_string()].into();
    // Written as before: flat records, a source record, no marker.
    let old = LocalStore::open(dir.path().join("old")).unwrap();
    RefStore::new(&old)
        .plan(&up("s3:b/k@v1"), &keys, None, None)
        .await
        .unwrap();
    assert!(old.read(LAYOUT_FILE).await.unwrap().is_none());
    let shared = LocalStore::open(dir.path().join("old"))
        .unwrap()
        .with_owners();
    let refs = RefStore::new(&shared);
    assert_eq!(refs.layout().await.unwrap(), UploadLayout::Flat);
    assert_eq!(
        shared.read(LAYOUT_FILE).await.unwrap().unwrap(),
        br#"{"uploads":"flat"}"#
    );
    refs.plan(&up("s3:b/k@v2"), &keys, None, None)
        .await
        .unwrap();
    let uploads = refs.uploads_of_source("s3://b/k", "s3:b/k").await.unwrap();
    assert_eq!(uploads.len(), 2, "{uploads:?}");
    // A new store: by location, and a marker saying so is what a later writer follows,
    // whatever it finds (a flat record written by hand here).
    let new = LocalStore::open(dir.path().join("new"))
        .unwrap()
        .with_owners();
    assert_eq!(
        RefStore::new(&new).layout().await.unwrap(),
        UploadLayout::ByLocation
    );
    new.put(&format!("{UPLOADS_DIR}{}.json", "0".repeat(40)), b"{}")
        .await
        .unwrap();
    let later = RefStore::new(&new);
    assert_eq!(later.layout().await.unwrap(), UploadLayout::ByLocation);
    later
        .plan(&up("s3:b/k@v1"), &keys, None, None)
        .await
        .unwrap();
    assert!(new.list(SOURCES_DIR).await.unwrap().is_empty());
    let token = later.owner_token("s3:b/k@v1").await.unwrap();
    assert!(is_upload_name(&token) && token.contains('/'), "{token}");
    assert!(new
        .read(&format!("{UPLOADS_DIR}{token}.json"))
        .await
        .unwrap()
        .is_some());
}

/// An upload's way through its record, in a store of `layout`; its location found by
/// the removal (a location whose name begins alike shares its directory `ByLocation`).
async fn uploads_plan_finalize_and_removal(store: &LocalStore, layout: UploadLayout) {
    let refs = RefStore::new(store);
    let up = UploadRecord {
        upload: "s3:b/k@v1".into(),
        source: "s3://b/k".into(),
        ..Default::default()
    };
    let alike = UploadRecord {
        upload: "s3:b/k@x@v2".into(),
        source: "s3://b/k@x".into(),
        ..Default::default()
    };
    let keys: BTreeSet<String> = ["k1".to_string(), "k2".to_string()].into();
    let (found, planned) = refs.plan(&up, &keys, None, None).await.unwrap();
    assert_eq!(found, None);
    assert!(planned.is_some(), "the plan wrote the record");
    let (found, again) = refs.plan(&up, &keys, None, None).await.unwrap();
    assert_eq!(
        found.map(|r| r.state),
        Some(UploadState::Indexing),
        "the second plan finds the first"
    );
    assert!(again.is_none(), "and changes nothing");
    let record = refs.upload("s3:b/k@v1").await.unwrap().unwrap();
    assert_eq!(record.state, UploadState::Indexing);
    assert_eq!(record.planned, keys);
    assert_eq!(refs.layout().await.unwrap(), layout);
    refs.plan(&alike, &keys, None, None).await.unwrap();
    let at = |source: &'static str, location: &'static str| {
        let refs = &refs;
        async move { refs.uploads_of_source(source, location).await.unwrap() }
    };
    assert_eq!(
        at("s3://b/k", "s3:b/k").await,
        ["s3:b/k@v1".to_string()].into()
    );
    assert_eq!(
        at("s3://b/k@x", "s3:b/k@x").await,
        ["s3:b/k@x@v2".to_string()].into()
    );
    let sources = store.list(SOURCES_DIR).await.unwrap();
    assert_eq!(
        sources.len(),
        if layout == UploadLayout::Flat { 2 } else { 0 }
    );
    // Finalized on the record as the plan wrote it (unchanged since: no read needed).
    assert!(refs
        .finalize(
            "s3:b/k@v1",
            &["k1".to_string()].into(),
            Run::Complete(None),
            planned.clone(),
            &[]
        )
        .await
        .unwrap());
    let record = refs.upload("s3:b/k@v1").await.unwrap().unwrap();
    assert_eq!(record.state, UploadState::Indexed);
    assert_eq!(record.keys.len(), 1);
    // Each key is listed once: referenced under `keys`, the rest still `planned`.
    assert_eq!(record.planned, ["k2".to_string()].into());
    assert!(
        refs.plan(&up, &keys, None, None).await.unwrap().0.is_some(),
        "planning the same keys again"
    );
    assert_eq!(refs.upload("s3:b/k@v1").await.unwrap().unwrap(), record);
    let removing = refs.begin_removal("s3:b/k@v1").await.unwrap().unwrap();
    assert_eq!(removing.all_keys(), keys);
    // A finalize swapping on a copy older than the removal's mark sees the mark.
    assert!(
        !refs
            .finalize("s3:b/k@v1", &keys, Run::Complete(None), planned, &[])
            .await
            .unwrap(),
        "a removing upload is not finalized"
    );
    assert_eq!(
        refs.plan(&up, &keys, None, None)
            .await
            .unwrap()
            .0
            .map(|r| r.state),
        Some(UploadState::Removing)
    );
    refs.end_removal(&removing).await.unwrap();
    assert!(refs.upload("s3:b/k@v1").await.unwrap().is_none());
    assert!(at("s3://b/k", "s3:b/k").await.is_empty());
    let other = refs.begin_removal("s3:b/k@x@v2").await.unwrap().unwrap();
    refs.end_removal(&other).await.unwrap();
    // A key naming an archive's entry separator: its uploads and its removal cut alike.
    let odd = UploadRecord {
        upload: "s3:b/d!/k@v3".into(),
        source: "s3://b/d!/k".into(),
        ..Default::default()
    };
    refs.plan(&odd, &keys, None, None).await.unwrap();
    let found = at("s3://b/d!/k", "s3:b/d!/k").await;
    assert_eq!(found, ["s3:b/d!/k@v3".to_string()].into());
    let gone = refs.begin_removal("s3:b/d!/k@v3").await.unwrap().unwrap();
    refs.end_removal(&gone).await.unwrap();
    assert!(at("s3://b/d!/k", "s3:b/d!/k").await.is_empty());
    refs.update_id("abc", |r| r.names.insert("Foo.PDB".into()))
        .await
        .unwrap();
    assert!(refs
        .id_read("abc")
        .await
        .unwrap()
        .0
        .names
        .contains("Foo.PDB"));
}

/// [`store_and_input`] with a store whose objects name their owners (invariant 7).
fn owned_store_and_input() -> (tempfile::TempDir, LocalStore, String) {
    let (dir, _, etag) = input_beside_store();
    let store = LocalStore::open(dir.path().join("s"))
        .unwrap()
        .with_owners();
    (dir, store, etag)
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

/// `key` published fresh for u1 alone (invariant 7), its upload finalized.
async fn publish_alone(refs: &RefStore<'_>, key: &str, bytes: &Content<'_>) {
    let outcome = refs.publish(key, "u1", bytes, OnDifferent::Conflict, true);
    assert_eq!(outcome.await.unwrap(), KeyOutcome::Published);
    finalized(refs, "u1", &[key]).await;
}

/// The tombstone a removal of `upload` holds on `key` where no record was (invariant 7).
async fn hold_tombstone(refs: &RefStore<'_>, store: &LocalStore, key: &str, upload: &str) {
    let tombstone = KeyRecord {
        key: key.to_string(),
        by: upload.to_string(),
        lease: Some(refs.new_lease("remove", &remove_holder(upload))),
        ..Default::default()
    };
    let bytes = serde_json::to_vec(&tombstone).unwrap();
    store.put(&key_file(key), &bytes).await.unwrap();
}

#[tokio::test]
async fn a_key_one_upload_alone_references_is_its_object_naming_the_upload() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    assert_eq!(store.get(&key_file("k")).await.unwrap(), None, "no record");
    let owned = store.owned("k").await.unwrap().unwrap();
    assert_eq!(owned.owner, Some(refs.owner_token("u1").await.unwrap()));
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!(
        (record.refs, record.by),
        (["u1".to_string()].into(), "u1".to_string())
    );
    // Another upload's removal takes nothing: the object names u1.
    assert_eq!(
        refs.remove("k", "u2").await.unwrap(),
        RemoveOutcome::NotReferenced
    );
    assert!(store.head("k").await.unwrap().is_some());
    assert_eq!(
        refs.remove("k", "u1").await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(store.head("k").await.unwrap(), None);
    assert_eq!(
        store.get(&key_file("k")).await.unwrap(),
        None,
        "no tombstone left"
    );
}

#[tokio::test]
async fn a_retried_removal_leaves_an_object_written_after_its_delete() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let bytes = content(&etag, &input);
    // Without a record, and with a shared record (u1 its writer, u3 gone): either way the
    // removal of u1 tombstoned the key, deleted the object and died before dropping its
    // tombstone; u2 then found the key free and created it, naming itself.
    for shared in [false, true] {
        let key = if shared { "shared" } else { "alone" };
        publish_alone(&refs, key, &bytes).await;
        if shared {
            let share = refs.publish(key, "u3", &bytes, OnDifferent::Conflict, false);
            assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
            finalized(&refs, "u3", &[key]).await;
            assert_eq!(refs.remove(key, "u3").await.unwrap(), RemoveOutcome::Kept);
            let mut record = refs.key(key).await.unwrap().unwrap();
            assert_eq!(record.by, "u1");
            record.refs.clear();
            record.lease = Some(refs.new_lease("remove", &remove_holder("u1")));
            let bytes = serde_json::to_vec(&record).unwrap();
            store.put(&key_file(key), &bytes).await.unwrap();
        } else {
            hold_tombstone(&refs, &store, key, "u1").await;
        }
        store.delete(key).await.unwrap();
        let again = refs.publish(key, "u2", &bytes, OnDifferent::Conflict, true);
        assert_eq!(again.await.unwrap(), KeyOutcome::Published, "{key}");
        finalized(&refs, "u2", &[key]).await;
        // The retried removal finishes its own tombstone, and deletes nothing.
        refs.remove(key, "u1").await.unwrap();
        let owned = store.owned(key).await.unwrap();
        assert_eq!(
            owned.and_then(|o| o.owner),
            Some(refs.owner_token("u2").await.unwrap()),
            "{key}"
        );
        assert_eq!(store.get(&key_file(key)).await.unwrap(), None, "{key}");
        let record = refs.key(key).await.unwrap().unwrap();
        assert_eq!(record.refs, ["u2".to_string()].into(), "{key}");
    }
}

#[tokio::test]
async fn a_sharer_and_the_owners_removal_exclude_each_other() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::with_policy(&store, impatient());
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    // u2 shares the key: its record names both, u1 as the writer, under a `create` lease
    // that u1's removal waits for until u2's finalize lists the key.
    let sharer = RefStore::with_policy(&store, impatient());
    let share = sharer.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
    assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!(record.by, "u1");
    assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
    let lease = record.lease.expect("the sharer's lease");
    assert_eq!(
        (lease.op.as_str(), lease.holder),
        (CREATE, index_holder("u2"))
    );
    let waits = refs.remove("k", "u1").await;
    assert_eq!(waits.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert!(store.head("k").await.unwrap().is_some());
    finalized(&sharer, "u2", &["k"]).await;
    assert_eq!(refs.remove("k", "u1").await.unwrap(), RemoveOutcome::Kept);
    assert!(store.head("k").await.unwrap().is_some());
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!(
        (record.refs, record.lease),
        (["u2".to_string()].into(), None)
    );
}

/// Holds the first object creation back until the test lets it go on, then fails it (the
/// copy failed).
struct HoldThenFail {
    held: std::sync::atomic::AtomicBool,
    reached: tokio::sync::Notify,
    open: tokio::sync::Semaphore,
}

impl crate::storage::hooked::BeforeChange for HoldThenFail {
    fn hold<'a>(
        &'a self,
        op: &'static str,
        _key: &str,
    ) -> Option<crate::storage::StorageFuture<'a, ()>> {
        use std::sync::atomic::Ordering;
        if op != "copy_new" || self.held.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(Box::pin(async move {
            self.reached.notify_one();
            let permit = self.open.acquire().await;
            permit
                .map_err(|e| io::Error::other(e.to_string()))?
                .forget();
            Err(io::Error::other("injected: the copy failed").into())
        }))
    }
}

/// A run's creation fails after another run of the same upload took its `create` lease
/// over (at once, as the same upload's) and created and listed the key: the failed run
/// takes back nothing — the reference is the other run's now. Before, it took the
/// upload's reference back as a removal would, and deleted the object the other run had
/// just published and listed (found by the source hand-on's death test over 200
/// schedules).
#[tokio::test]
async fn a_failed_creation_takes_back_nothing_another_run_took_over() {
    let (dir, input, etag) = input_beside_store();
    let c = content(&etag, &input);
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s")).unwrap(),
        HoldThenFail {
            held: Default::default(),
            reached: Default::default(),
            open: tokio::sync::Semaphore::new(0),
        },
    );
    let failing = RefStore::with_policy(&store, impatient());
    let other = RefStore::with_policy(store.inner(), impatient());
    let first = failing.publish("k", "u1", &c, OnDifferent::Conflict, true);
    let second = async {
        store.hook().reached.notified().await;
        let published = other
            .publish("k", "u1", &c, OnDifferent::Conflict, true)
            .await;
        finalized(&other, "u1", &["k"]).await;
        store.hook().open.add_permits(1);
        published
    };
    let (first, second) = tokio::join!(first, second);
    assert!(first.is_err(), "{first:?}");
    assert_eq!(second.unwrap(), KeyOutcome::Published);
    assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
    let record = other.key("k").await.unwrap().expect("the key's record");
    assert_eq!(record.refs, ["u1".to_string()].into());
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    assert!(audit.problems.is_empty(), "{:?}", audit.problems);
}

/// Notes the keys of the changes a store is asked for, and counts the reads of one file
/// as [`CountReads`] does.
#[derive(Default)]
struct CountChanges {
    changes: std::sync::Mutex<Vec<String>>,
    reads: CountReads,
}

impl crate::storage::hooked::BeforeChange for CountChanges {
    fn before_change(&self, _op: &'static str, key: &str) -> crate::storage::StorageResult<()> {
        if let Ok(mut changes) = self.changes.lock() {
            changes.push(key.to_string());
        }
        Ok(())
    }

    fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
        self.reads.hold_read(key)
    }
}

/// Another upload's key of the same bytes is shared by writing its record once, as the
/// sharing leaves it (both uploads, the owner as the writer), under a `create` lease the
/// sharer's finalize ends; and the owner's upload record is read once for all its keys
/// shared at once. Before, each key's record was written twice (the lease taken, then
/// released naming both) and each key read the owner's record.
#[tokio::test]
async fn sharing_another_uploads_keys_writes_each_record_once() {
    let (dir, input, etag) = input_beside_store();
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s"))
            .unwrap()
            .with_owners(),
        CountChanges::default(),
    );
    let c = content(&etag, &input);
    let owner = RefStore::new(&store);
    let keys = ["k1", "k2", "k3", "k4"];
    for key in keys {
        let created = owner.publish(key, "u1", &c, OnDifferent::Conflict, true);
        assert_eq!(created.await.unwrap(), KeyOutcome::Published);
    }
    finalized(&owner, "u1", &keys).await;
    store.hook().changes.lock().unwrap().clear();
    let sharer = RefStore::with_policy(&store, impatient());
    *store.hook().reads.file.lock().unwrap() = sharer.upload_file("u1").await.unwrap();
    let (k1, k2, k3) = tokio::join!(
        sharer.publish("k1", "u2", &c, OnDifferent::Conflict, true),
        sharer.publish("k2", "u2", &c, OnDifferent::Conflict, true),
        sharer.publish("k3", "u2", &c, OnDifferent::Conflict, true),
    );
    // And one after them: the owner found is kept.
    let k4 = sharer
        .publish("k4", "u2", &c, OnDifferent::Conflict, true)
        .await;
    let all = [k1.unwrap(), k2.unwrap(), k3.unwrap(), k4.unwrap()];
    assert_eq!(all, [KeyOutcome::Unchanged; 4]);
    let reads = store
        .hook()
        .reads
        .reads
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, 1, "u1's record read once for its four keys");
    for key in keys {
        let changes = store.hook().changes.lock().unwrap().clone();
        let record = key_file(key);
        let writes = changes.iter().filter(|k| **k == record).count();
        assert_eq!(writes, 1, "{key}: {changes:#?}");
        let shared = sharer.key(key).await.unwrap().unwrap();
        assert_eq!(shared.refs, ["u1".to_string(), "u2".to_string()].into());
        assert_eq!(shared.by, "u1");
    }
    finalized(&sharer, "u2", &keys).await;
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    assert!(audit.problems.is_empty(), "{:?}", audit.problems);
    // Either upload's removal keeps every key for the other.
    for key in keys {
        assert_eq!(owner.remove(key, "u1").await.unwrap(), RemoveOutcome::Kept);
    }
    for key in keys {
        assert_eq!(
            sharer.remove(key, "u2").await.unwrap(),
            RemoveOutcome::Removed
        );
        assert_eq!(store.head(key).await.unwrap(), None);
    }
}

/// The owner's object gone between the sharer's look and its record (the owner's removal
/// ran in between, start to end): the record, written as sharing, is confirmed against
/// what is there once it is written — nothing — and goes back to naming the sharer
/// alone, who creates the object. Without the confirmation the record would name the
/// removed upload and an object that is not there.
#[tokio::test]
async fn a_share_whose_object_went_before_its_record_publishes_alone() {
    let (dir, input, etag) = input_beside_store();
    let hold = HoldFirst {
        prefix: "_symdex/refs/k",
        held: Default::default(),
        reached: Default::default(),
        open: tokio::sync::Semaphore::new(0),
    };
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s"))
            .unwrap()
            .with_owners(),
        hold,
    );
    let c = content(&etag, &input);
    let owner = RefStore::new(store.inner());
    let created = owner.publish("k", "u1", &c, OnDifferent::Conflict, true);
    assert_eq!(created.await.unwrap(), KeyOutcome::Published);
    finalized(&owner, "u1", &["k"]).await;
    let sharer = RefStore::with_policy(&store, impatient());
    let share = sharer.publish("k", "u2", &c, OnDifferent::Conflict, true);
    let removal = async {
        // The sharer saw u1's object and is about to write the record: u1 goes.
        store.hook().reached.notified().await;
        let removed = owner.remove("k", "u1").await.unwrap();
        store.hook().open.add_permits(1);
        removed
    };
    let (shared, removed) = tokio::join!(share, removal);
    assert_eq!(removed, RemoveOutcome::Removed);
    assert_eq!(shared.unwrap(), KeyOutcome::Published);
    let record = sharer.key("k").await.unwrap().unwrap();
    assert_eq!(
        (record.refs, record.by),
        (["u2".to_string()].into(), "u2".to_string())
    );
    let owned = store
        .owned("k")
        .await
        .unwrap()
        .expect("the sharer's object");
    assert_eq!(owned.owner, Some(sharer.owner_token("u2").await.unwrap()));
}

#[tokio::test]
async fn a_sharer_waits_for_the_owners_removal_in_progress() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::with_policy(&store, impatient());
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    let remover = RefStore::with_policy(&store, impatient());
    hold_tombstone(&remover, &store, "k", "u1").await;
    let waits = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
    assert_eq!(waits.await.unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert_eq!(
        remover.remove("k", "u1").await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(store.head("k").await.unwrap(), None);
    let again = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
    assert_eq!(again.await.unwrap(), KeyOutcome::Published);
}

#[tokio::test]
async fn a_key_alone_changed_behind_symdex_is_written_again_by_its_owner() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    // Other bytes at the key, still naming u1 (a restore from an old backup, say).
    let other = ObjectInfo {
        size: 5,
        etag: content_sha1(b"other"),
    };
    let token = refs.owner_token("u1").await.unwrap();
    let source = CopySource::Bytes(b"other");
    store
        .copy(&source, "k", &other, Some(&token))
        .await
        .unwrap();
    // u2's bytes are the same as u1's: for u2 the key holds other content.
    let conflict = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
    assert_eq!(conflict.await.unwrap(), KeyOutcome::Conflict);
    let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, false);
    assert_eq!(again.await.unwrap(), KeyOutcome::Published);
    assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bytes");
    finalized(&refs, "u1", &["k"]).await;
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    assert!(audit.problems.is_empty(), "{:?}", audit.problems);
}

/// The `create` leases a run leaves to its finalize are handed on in key order, whatever
/// order they were taken in: a take-back releases them in that order, a storage step
/// each, and a schedule of the interleaving tests must replay from its seed (it did not
/// while they came out of a hash map: 24 of 480 schedules differed between two runs).
#[test]
fn a_runs_create_leases_are_handed_on_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let refs = RefStore::new(&store);
    let lease = |holder: &str| Lease {
        holder: holder.to_string(),
        until: 0,
        op: CREATE.to_string(),
        run: "r".to_string(),
        acting: String::new(),
    };
    let keys: Vec<String> = (0..64).map(|i| format!("k/{:02}", (i * 37) % 64)).collect();
    for key in &keys {
        refs.held
            .lock()
            .unwrap()
            .insert(key.clone(), lease(&index_holder("u")));
    }
    refs.held
        .lock()
        .unwrap()
        .insert("k/other".into(), lease(&index_holder("v")));
    let handed: Vec<String> = refs.take_held("u").into_iter().map(|(k, _)| k).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(handed, sorted);
    assert_eq!(refs.take_held("v").len(), 1, "another upload's lease stays");
}

/// An object whose bytes are not what its owner wrote with it (a copy from a key an
/// overwrite replaced meanwhile, `Indexer::hold_for`) is not shared, even by an upload
/// of the bytes that are there: the owner's upload does not hold them.
#[tokio::test]
async fn an_object_not_holding_what_its_owner_wrote_is_not_shared() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    // Other bytes at the key, naming u1 as the writer of u1's bytes.
    let token = refs.owner_token("u1").await.unwrap();
    let written = ObjectInfo {
        size: bytes.size,
        etag: etag.clone(),
    };
    let source = CopySource::Bytes(b"other");
    store
        .copy(&source, "k", &written, Some(&token))
        .await
        .unwrap();
    let other_input = dir.path().join("other");
    std::fs::write(&other_input, b"other").unwrap();
    let other_etag = content_sha1(b"other");
    let other = content(&other_etag, &other_input);
    let shared = refs.publish("k", "u2", &other, OnDifferent::Conflict, true);
    assert_eq!(shared.await.unwrap(), KeyOutcome::Conflict);
    assert!(refs
        .key("k")
        .await
        .unwrap()
        .is_none_or(|r| !r.refs.contains("u2")));
    // The owner, indexed again, writes its own bytes back.
    let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, false);
    assert_eq!(again.await.unwrap(), KeyOutcome::Published);
    assert_eq!(store.get("k").await.unwrap().unwrap().bytes, b"bytes");
}

#[tokio::test]
async fn an_owner_indexed_again_gets_its_reference_back_in_a_shared_record() {
    let (dir, store, etag) = owned_store_and_input();
    let input = dir.path().join("in");
    let refs = RefStore::new(&store);
    let bytes = content(&etag, &input);
    publish_alone(&refs, "k", &bytes).await;
    let share = refs.publish("k", "u2", &bytes, OnDifferent::Conflict, false);
    assert_eq!(share.await.unwrap(), KeyOutcome::Unchanged);
    finalized(&refs, "u2", &["k"]).await;
    // u1's reference goes; the record still names u1 as the object's writer.
    assert_eq!(refs.remove("k", "u1").await.unwrap(), RemoveOutcome::Kept);
    // The same upload indexed again (the same bytes to the same unversioned key): its
    // object is found naming it, and the record must reference it again.
    let again = refs.publish("k", "u1", &bytes, OnDifferent::Conflict, true);
    assert_ne!(again.await.unwrap(), KeyOutcome::Conflict);
    let record = refs.key("k").await.unwrap().unwrap();
    assert_eq!(record.refs, ["u1".to_string(), "u2".to_string()].into());
    assert_eq!(refs.remove("k", "u2").await.unwrap(), RemoveOutcome::Kept);
    assert!(
        store.head("k").await.unwrap().is_some(),
        "u1 still needs it"
    );
}
