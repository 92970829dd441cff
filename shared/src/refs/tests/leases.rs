//! Leases: a `create` lease released by its finalize, keys taken in turn, runs of one upload
//! at once, hand-overs, deferred writes, join records.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::{
    content, finalized, impatient, input_beside_store, store_and_input, CountReads, HoldFirst,
};
use crate::refs::lease::CREATE;
use crate::refs::swap::parse;
use crate::refs::{
    DeferredWrites, InTurn, KeyOutcome, LeasePolicy, OnDifferent, Publisher, RefStore,
    RemoveOutcome, Run, UploadRecord, Wait,
};
use crate::sourcemap::SourceMapRecord;
use crate::storage::{LocalStore, Storage};

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
        second.publish_in_turn(
            "x",
            Publisher::new("u2", None),
            &c,
            OnDifferent::Conflict,
            true,
            turns.next(),
        ),
        second.publish_in_turn(
            "y",
            Publisher::new("u2", None),
            &c,
            OnDifferent::Conflict,
            true,
            turns.next(),
        ),
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
        ..Want::default()
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
        ..Want::default()
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
        sha1: None,
        sha256: None,
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
