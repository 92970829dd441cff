//! Whose bytes an overwrite may replace (overwrites.rs): only its own product's, checked for
//! every holder its swap displaces.

use std::collections::BTreeSet;

use super::{content, finalized, impatient, input_beside_store, CountReads, HoldFirst};
use crate::refs::layout::key_file;
use crate::refs::lease::{index_holder, CREATE};
use crate::refs::{
    Content, KeyOutcome, KeyRecord, Lease, LeasePolicy, OnDifferent, Publisher, RefStore,
    UploadRecord,
};
use crate::storage::{content_sha1, LocalStore, Storage};
use crate::upload_meta::UploadMeta;

/// Plans `keys` for `upload`, an upload of `product` (`None`: naming none): its record, as
/// the pipeline makes it before any reference is added (invariant 4).
async fn planned(refs: &RefStore<'_>, upload: &str, product: Option<&str>, keys: &[&str]) {
    let template = UploadRecord {
        upload: upload.into(),
        source: format!("/in/{upload}"),
        meta: UploadMeta {
            product: product.map(str::to_string),
            ..UploadMeta::default()
        },
        ..Default::default()
    };
    let keys: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
    refs.plan(&template, &keys, None, None).await.unwrap();
}

/// Publishes `k` for `upload`, an upload of `product`, with `bytes`, and finalizes it: the
/// holder an overwrite meets.
async fn holding_k(refs: &RefStore<'_>, upload: &str, product: Option<&str>, bytes: &Content<'_>) {
    planned(refs, upload, product, &["k"]).await;
    let first = refs.publish("k", upload, bytes, OnDifferent::Conflict, true);
    assert_eq!(first.await.unwrap(), KeyOutcome::Published);
    finalized(refs, upload, &["k"]).await;
}

/// A second input beside [`input_beside_store`]'s, with other bytes (an overwriter's): its
/// path and etag.
fn other_input_beside(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let other_input = dir.join("other");
    std::fs::write(&other_input, b"other bytes").unwrap();
    let other_etag = crate::storage::local::file_sha1(&other_input).unwrap();
    (other_input, other_etag)
}

/// Holds the first change to one file that follows a change under another prefix: here the
/// overwriter's swap of the key's record, made once it has marked the holders it checked.
struct HoldAfter {
    after: &'static str,
    file: String,
    seen: std::sync::atomic::AtomicBool,
    hold: HoldFirst,
}

impl HoldAfter {
    /// Holds an overwriter's swap of `k`'s record once it has marked the holders it checked.
    fn swap_of_k_after_marking() -> Self {
        HoldAfter {
            after: "_symdex/waiting/",
            file: key_file("k"),
            seen: Default::default(),
            hold: HoldFirst {
                prefix: "_symdex/refs/",
                held: Default::default(),
                reached: Default::default(),
                open: tokio::sync::Semaphore::new(0),
            },
        }
    }
}

impl crate::storage::hooked::BeforeChange for HoldAfter {
    fn hold<'a>(
        &'a self,
        op: &'static str,
        key: &str,
    ) -> Option<crate::storage::StorageFuture<'a, ()>> {
        use std::sync::atomic::Ordering;
        if key.starts_with(self.after) {
            self.seen.store(true, Ordering::SeqCst);
            return None;
        }
        if key != self.file || !self.seen.load(Ordering::SeqCst) {
            return None;
        }
        self.hold.hold(op, key)
    }
}

/// Product beta's overwrite has checked and marked the key's holder (beta's own upload) and
/// is about to swap the record, when an upload of product alpha adds its reference to the
/// key (the same bytes as the holder's). The swap, on the record as read before, fails; the
/// next decision meets alpha's upload, checks it, and the key is a conflict: alpha's
/// reference and the bytes stay. Before, the second round marked alpha's upload waiting
/// unchecked and replaced its bytes.
#[tokio::test]
async fn a_holder_added_after_an_overwrites_check_is_checked_before_the_swap() {
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s")).unwrap(),
        HoldAfter::swap_of_k_after_marking(),
    );
    let others = RefStore::with_policy(store.inner(), impatient());
    holding_k(&others, "b1", Some("beta"), &old).await;
    planned(&others, "a1", Some("alpha"), &["k"]).await;
    planned(&others, "b2", Some("beta"), &["k"]).await;
    let overwriter = RefStore::with_policy(&store, impatient());
    let overwrite = overwriter.publish_in_turn(
        "k",
        Publisher::new("b2", Some("beta")),
        &new,
        OnDifferent::Overwrite,
        false,
        None,
    );
    let sharer = async {
        // b1 checked (beta's) and marked waiting; b2's swap is held back.
        store.hook().hold.reached.notified().await;
        let shared = others.publish("k", "a1", &old, OnDifferent::Conflict, false);
        let shared = shared.await.unwrap();
        store.hook().hold.open.add_permits(1);
        shared
    };
    let (overwritten, shared) = tokio::join!(overwrite, sharer);
    assert_eq!(shared, KeyOutcome::Unchanged);
    assert_eq!(overwritten.unwrap().outcome, KeyOutcome::Conflict);
    let record = others.key("k").await.unwrap().expect("the key's record");
    assert_eq!(record.refs, ["a1".to_string(), "b1".to_string()].into());
    assert_eq!(record.etag, etag);
    assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
    // b1, checked and marked in the first round, still holds the key, and its mark stays:
    // harmless (a re-index that changes nothing once the key is handed over), where taking
    // it back could take the mark another overwrite of b1 wrote at once (the same file).
    // Nobody's bytes were overwritten.
    let marks = others.all_waiting().await.unwrap();
    let marked: Vec<(&str, &str)> = marks
        .iter()
        .map(|w| (w.key.as_str(), w.upload.as_str()))
        .collect();
    assert_eq!(marked, [("k", "b1")]);
    assert_eq!(overwriter.take_overwritten("b2"), BTreeSet::new());
}

/// Alpha's a1, overwriting, wrote its record over beta's b1's lone object (invariant 7: no
/// record, the object names b1), and died before creating anything: its dead `create`
/// lease is on a record that does not describe what is at the key. Alpha's a2 overwrites
/// with other bytes: a1 is alpha's, but the object is b1's — a conflict, b1's bytes stay.
/// Before, a2's swap took a `copy` lease, whose copy replaced b1's object unlooked.
#[tokio::test]
async fn an_overwrite_taking_over_a_dead_creation_looks_at_whose_object_is_there() {
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    let store = LocalStore::open(dir.path().join("s"))
        .unwrap()
        .with_owners();
    let refs = RefStore::with_policy(&store, impatient());
    planned(&refs, "b1", Some("beta"), &["k"]).await;
    let alone = refs.publish("k", "b1", &old, OnDifferent::Conflict, true);
    assert_eq!(alone.await.unwrap(), KeyOutcome::Published);
    finalized(&refs, "b1", &["k"]).await;
    assert_eq!(store.get(&key_file("k")).await.unwrap(), None, "b1's alone");
    planned(&refs, "a1", Some("alpha"), &["k"]).await;
    let dead = Lease {
        holder: index_holder("a1"),
        until: 0,
        op: CREATE.to_string(),
        run: "a1's run, over".to_string(),
        acting: String::new(),
    };
    let stale = KeyRecord {
        key: "k".to_string(),
        etag: content_sha1(b"a1's bytes"),
        size: 10,
        refs: ["a1".to_string()].into(),
        by: "a1".to_string(),
        lease: Some(dead),
        alias_of: None,
    };
    let bytes = serde_json::to_vec(&stale).unwrap();
    store.put(&key_file("k"), &bytes).await.unwrap();
    planned(&refs, "a2", Some("alpha"), &["k"]).await;
    let overwriter = RefStore::with_policy(&store, impatient());
    let overwrite = overwriter.publish_in_turn(
        "k",
        Publisher::new("a2", Some("alpha")),
        &new,
        OnDifferent::Overwrite,
        true,
        None,
    );
    let published = overwrite.await.unwrap();
    assert_eq!(published.outcome, KeyOutcome::Conflict);
    assert!(published.refused, "the product rule's conflict");
    assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
    let owned = store.owned("k").await.unwrap().expect("b1's object");
    assert_eq!(owned.owner, Some(refs.owner_token("b1").await.unwrap()));
    assert_eq!(overwriter.take_overwritten("a2"), BTreeSet::new());
    let waiting = refs.all_waiting().await.unwrap();
    assert!(waiting.iter().all(|w| w.upload != "b1"), "{waiting:?}");
}

/// A holder's upload record that does not parse is nobody's to give away: that key is a
/// conflict, not an error failing the overwriting upload. (A sole writer's keys: no
/// `create` lease whose listing would be read from that record first.)
#[tokio::test]
async fn a_holder_whose_record_does_not_parse_is_a_conflict_not_an_error() {
    let sole = LeasePolicy {
        exclusive: true,
        ..impatient()
    };
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    for owners in [false, true] {
        let store = LocalStore::open(dir.path().join(format!("s{owners}"))).unwrap();
        let store = if owners { store.with_owners() } else { store };
        let refs = RefStore::with_policy(&store, sole.clone());
        holding_k(&refs, "a1", Some("alpha"), &old).await;
        let file = refs.upload_file("a1").await.unwrap();
        store.put(&file, b"{not json").await.unwrap();
        planned(&refs, "a2", Some("alpha"), &["k"]).await;
        let overwriter = RefStore::with_policy(&store, sole.clone());
        let overwrite = overwriter.publish_in_turn(
            "k",
            Publisher::new("a2", Some("alpha")),
            &new,
            OnDifferent::Overwrite,
            true,
            None,
        );
        let published = overwrite.await.unwrap();
        assert_eq!(published.outcome, KeyOutcome::Conflict, "owners {owners}");
        assert!(published.refused, "owners {owners}");
        assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
    }
}

/// An overwrite checks a holder's product once per store, whatever number of keys it
/// meets the holder at: where objects name their owners, the read that finds the owner's
/// upload is that check's too.
#[tokio::test]
async fn a_holders_product_is_read_once() {
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s"))
            .unwrap()
            .with_owners(),
        CountReads::default(),
    );
    let refs = RefStore::with_policy(&store, impatient());
    let keys = ["k1", "k2", "k3"];
    planned(&refs, "a1", Some("alpha"), &keys).await;
    for key in keys {
        let alone = refs.publish(key, "a1", &old, OnDifferent::Conflict, true);
        assert_eq!(alone.await.unwrap(), KeyOutcome::Published);
    }
    finalized(&refs, "a1", &keys).await;
    planned(&refs, "a2", Some("alpha"), &keys).await;
    *store.hook().file.lock().unwrap() = refs.upload_file("a1").await.unwrap();
    let overwriter = RefStore::with_policy(&store, impatient());
    for key in keys {
        let overwrite = overwriter.publish_in_turn(
            key,
            Publisher::new("a2", Some("alpha")),
            &new,
            OnDifferent::Overwrite,
            true,
            None,
        );
        assert_eq!(overwrite.await.unwrap().outcome, KeyOutcome::Published);
    }
    let reads = store.hook().reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, 1);
    assert_eq!(
        overwriter.take_overwritten("a2"),
        BTreeSet::from(["a1".to_string()])
    );
}

/// An overwrite replaces its own product's bytes, as before, and the holder waits for the
/// key; another product's upload's it leaves alone, as does one naming no product.
#[tokio::test]
async fn an_overwrite_replaces_only_its_own_products_bytes() {
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    let store = LocalStore::open(dir.path().join("s")).unwrap();
    let refs = RefStore::with_policy(&store, impatient());
    holding_k(&refs, "a1", Some("alpha"), &old).await;
    for (upload, product) in [("b1", Some("beta")), ("n1", None)] {
        planned(&refs, upload, product, &["k"]).await;
        let overwrite = refs.publish_in_turn(
            "k",
            Publisher::new(upload, product),
            &new,
            OnDifferent::Overwrite,
            true,
            None,
        );
        let outcome = overwrite.await.unwrap().outcome;
        assert_eq!(outcome, KeyOutcome::Conflict, "{upload}");
        assert_eq!(store.read("k").await.unwrap(), Some(b"bytes".to_vec()));
        assert_eq!(refs.all_waiting().await.unwrap(), Vec::new(), "{upload}");
    }
    planned(&refs, "a2", Some("alpha"), &["k"]).await;
    let overwrite = refs.publish_in_turn(
        "k",
        Publisher::new("a2", Some("alpha")),
        &new,
        OnDifferent::Overwrite,
        true,
        None,
    );
    assert_eq!(overwrite.await.unwrap().outcome, KeyOutcome::Published);
    assert_eq!(
        store.read("k").await.unwrap(),
        Some(b"other bytes".to_vec())
    );
    let waiting = refs.all_waiting().await.unwrap();
    let waiters: Vec<&str> = waiting.iter().map(|w| w.upload.as_str()).collect();
    assert_eq!(waiters, ["a1"]);
}

/// Two overwrites of b1's key with the same bytes, at once: b2 has checked and marked b1
/// waiting and is about to swap the record when b3 marks b1 too (the same file: b1's marks)
/// and swaps first. b2's swap fails; its next decision finds its own bytes there, b1 no
/// longer holding the key, and shares them. b1 must still be marked, once: the bytes it
/// waits for are b3's (and b2's), and when they both go it gets the key back. No overwrite
/// takes a mark back (waiting.rs), as one mark is the other's too.
#[tokio::test]
async fn two_overwrites_marking_one_holder_at_once_leave_its_mark() {
    let (dir, input, etag) = input_beside_store();
    let (other_input, other_etag) = other_input_beside(dir.path());
    let (old, new) = (content(&etag, &input), content(&other_etag, &other_input));
    let store = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path().join("s")).unwrap(),
        HoldAfter::swap_of_k_after_marking(),
    );
    let others = RefStore::with_policy(store.inner(), impatient());
    holding_k(&others, "b1", Some("beta"), &old).await;
    planned(&others, "b2", Some("beta"), &["k"]).await;
    planned(&others, "b3", Some("beta"), &["k"]).await;
    let held = RefStore::with_policy(&store, impatient());
    let first_overwrite = held.publish_in_turn(
        "k",
        Publisher::new("b2", Some("beta")),
        &new,
        OnDifferent::Overwrite,
        false,
        None,
    );
    let second_overwrite = async {
        // b1 checked and marked by b2; b2's swap is held back.
        store.hook().hold.reached.notified().await;
        let second = others.publish_in_turn(
            "k",
            Publisher::new("b3", Some("beta")),
            &new,
            OnDifferent::Overwrite,
            false,
            None,
        );
        let second = second.await.unwrap().outcome;
        store.hook().hold.open.add_permits(1);
        second
    };
    let (first, second) = tokio::join!(first_overwrite, second_overwrite);
    assert_eq!(second, KeyOutcome::Published);
    assert_eq!(first.unwrap().outcome, KeyOutcome::Unchanged);
    let record = others.key("k").await.unwrap().expect("the key's record");
    assert_eq!(record.refs, ["b2".to_string(), "b3".to_string()].into());
    assert_eq!(record.etag, other_etag);
    let marks = others.all_waiting().await.unwrap();
    let marked: Vec<(&str, &str)> = marks
        .iter()
        .map(|w| (w.key.as_str(), w.upload.as_str()))
        .collect();
    assert_eq!(marked, [("k", "b1")]);
}
