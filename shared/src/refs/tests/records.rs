//! Key records: references counted per upload, generated content, conflicts, what is at a key
//! without a record, upload records in either layout.

use std::collections::BTreeSet;
use std::io;

use super::{content, finalized, impatient, store_and_input};
use crate::refs::layout::{is_upload_name, key_file, SOURCES_DIR};
use crate::refs::lease::{index_holder, now_secs, CREATE};
use crate::refs::prior::Prior;
use crate::refs::swap::Step;
use crate::refs::{
    KeyOutcome, KeyRecord, Lease, OnDifferent, RefStore, RemoveOutcome, Run, UploadLayout,
    UploadRecord, UploadState, LAYOUT_FILE,
};
use crate::storage::{LocalStore, Storage, UPLOADS_DIR};

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
    let ((), first) = refs
        .update_versioned(file, Prior::Unread, write(1))
        .await
        .unwrap();
    let before = inode();
    // The same content again: nothing written, the version it holds returned.
    let ((), again) = refs
        .update_versioned(file, Prior::Unread, write(1))
        .await
        .unwrap();
    assert_eq!(inode(), before, "an identical record was rewritten");
    assert_eq!(again, first);
    // Other content is written.
    refs.update(file, write(2)).await.unwrap();
    assert_ne!(inode(), before);
}

#[tokio::test]
async fn uploads_plan_finalize_and_removal_in_either_layout() {
    let dir = tempfile::tempdir().unwrap();
    // Flat as S3 stores made before layouts were named keep it (a source record per
    // location), and as the CLI keeps it (none: a location's uploads found among all).
    let cli = LocalStore::open(dir.path().join("cli")).unwrap();
    uploads_plan_finalize_and_removal(&cli, UploadLayout::Flat).await;
    let flat = LocalStore::open(dir.path().join("flat"))
        .unwrap()
        .with_source_records();
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
    let old = LocalStore::open(dir.path().join("old"))
        .unwrap()
        .with_source_records();
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
        if layout == UploadLayout::Flat && store.traits().source_records {
            2
        } else {
            0
        }
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
