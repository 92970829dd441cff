//! Objects naming their owners (invariant 7): a key one upload alone references, its sharers,
//! and the owner's removal.

use std::io;

use super::{content, finalized, impatient, input_beside_store, CountReads, HoldFirst};
use crate::refs::layout::key_file;
use crate::refs::lease::{index_holder, remove_holder, CREATE};
use crate::refs::{Content, KeyOutcome, KeyRecord, Lease, OnDifferent, RefStore, RemoveOutcome};
use crate::storage::{content_sha1, CopySource, LocalStore, ObjectInfo, Storage};

/// [`store_and_input`] with a store whose objects name their owners (invariant 7).
fn owned_store_and_input() -> (tempfile::TempDir, LocalStore, String) {
    let (dir, _, etag) = input_beside_store();
    let store = LocalStore::open(dir.path().join("s"))
        .unwrap()
        .with_owners();
    (dir, store, etag)
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
        refs.held.keep(key, &lease(&index_holder("u")));
    }
    refs.held.keep("k/other", &lease(&index_holder("v")));
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
