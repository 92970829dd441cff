//! `--overwrite` across products (THREATS.md, tenancy; refs/overwrites.rs): an overwrite
//! replaces only bytes its own product's uploads hold. Each case runs on keys with records
//! and on keys whose objects name their owner (refs/, invariant 7), where an overwrite meets
//! the holder by its object's owner instead of its record.

use std::collections::BTreeSet;

use super::{assert_audit_clean, config_with_exclusive, index_and_finalize, listed_keys};
use crate::manifest::Action;
use crate::pipeline::{Config, Record};
use crate::refs::RefStore;
use crate::storage::{LocalStore, Storage};
use crate::testing::scenarios::{config, Artifact, Artifacts};
use std::collections::BTreeMap;

/// `artifact`'s bytes, uploaded by `product`.
fn of_product(artifact: &Artifact, product: Option<&'static str>) -> Artifact {
    Artifact {
        product,
        ..artifact.clone()
    }
}

fn overwriting() -> Config {
    Config {
        overwrite: true,
        ..config()
    }
}

/// A local store, its objects naming their owners or not.
fn store_at(dir: &std::path::Path, owners: bool) -> LocalStore {
    let store = LocalStore::open(dir).unwrap();
    match owners {
        true => store.with_owners(),
        false => store,
    }
}

/// What `keys` hold now.
async fn contents(store: &LocalStore, keys: &BTreeSet<String>) -> BTreeMap<String, Vec<u8>> {
    let mut held = BTreeMap::new();
    for key in keys {
        held.insert(key.clone(), store.read(key).await.unwrap().expect(key));
    }
    held
}

fn conflicts_of(records: &[Record]) -> BTreeSet<String> {
    records.iter().flat_map(|r| r.conflicts.clone()).collect()
}

/// The uploads waiting for some key.
async fn waiters(store: &LocalStore) -> BTreeSet<String> {
    let waiting = RefStore::new(store).all_waiting().await.unwrap();
    waiting.into_iter().map(|w| w.upload).collect()
}

/// `first` publishes, then `second` (other bytes under the same build id) overwrites: a
/// conflict, as without overwrite. `first`'s bytes stay served and referenced by it alone,
/// it waits for nothing (only the conflicting `second` waits, as any conflict does).
/// Returns `second`'s records.
async fn overwrite_refused(store: &LocalStore, first: &Artifact, second: &Artifact) -> Vec<Record> {
    let published = index_and_finalize(store, config(), first).await.referenced;
    let before = contents(store, &published).await;
    let refused = index_and_finalize(store, overwriting(), second).await;
    let conflicts = conflicts_of(&refused.records);
    assert!(!conflicts.is_empty(), "{:?}", refused.records);
    assert!(conflicts.is_subset(&published), "{conflicts:?}");
    assert!(refused
        .records
        .iter()
        .all(|r| r.action == Some(Action::Conflict)));
    assert_eq!(contents(store, &published).await, before);
    let refs = RefStore::new(store);
    for key in &conflicts {
        let held = refs.key(key).await.unwrap().expect(key);
        assert_eq!(held.refs, BTreeSet::from([first.id.clone()]), "{key}");
    }
    assert!(published.is_subset(&listed_keys(store, &first.id).await));
    assert_eq!(waiters(store).await, BTreeSet::from([second.id.clone()]));
    refused.records
}

/// Product beta's overwrite meets keys product alpha published first with other bytes (ids
/// are global): a conflict naming alpha, alpha's bytes stay. Before, beta's bytes replaced
/// alpha's, and alpha's upload waited for its own keys.
#[tokio::test]
async fn an_overwrite_never_replaces_another_products_bytes() {
    let a = Artifacts::new();
    let alpha = of_product(&a.elf_a, Some("alpha"));
    let beta = of_product(&a.elf_other, Some("beta"));
    for owners in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at(dir.path(), owners);
        let records = overwrite_refused(&store, &alpha, &beta).await;
        for record in records.iter().filter(|r| !r.conflicts.is_empty()) {
            assert_eq!(record.held_by_products, ["alpha"], "owners {owners}");
            let reason = record.reason.as_deref().unwrap_or_default();
            assert!(reason.contains("cross-product"), "{reason}");
        }
        assert_audit_clean(&store).await;
    }
}

/// An upload naming no product is product "none"'s: its overwrite leaves a product's bytes
/// alone, and replaces those of an upload naming none, as before. Refused, its record names
/// the product holding the keys, as any other product's would.
#[tokio::test]
async fn an_upload_naming_no_product_overwrites_only_uploads_naming_none() {
    let a = Artifacts::new();
    let alpha = of_product(&a.elf_a, Some("alpha"));
    for owners in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at(dir.path(), owners);
        let records = overwrite_refused(&store, &alpha, &a.elf_other).await;
        for record in records.iter().filter(|r| !r.conflicts.is_empty()) {
            assert_eq!(record.held_by_products, ["alpha"], "owners {owners}");
            let reason = record.reason.as_deref().unwrap_or_default();
            assert!(reason.contains("cross-product"), "{reason}");
        }
        assert_audit_clean(&store).await;
        let dir = tempfile::tempdir().unwrap();
        let store = store_at(dir.path(), owners);
        overwrite_taken(&store, &a.elf_a, &a.elf_other).await;
    }
}

/// `first` publishes, then `second` overwrites: its bytes replace `first`'s, which waits for
/// the keys it lost (refs/, invariant 8).
async fn overwrite_taken(store: &LocalStore, first: &Artifact, second: &Artifact) {
    index_and_finalize(store, config(), first).await;
    let overwrote = index_and_finalize(store, overwriting(), second).await;
    assert!(conflicts_of(&overwrote.records).is_empty());
    let published: BTreeSet<String> = overwrote
        .records
        .iter()
        .flat_map(|r| r.published.clone())
        .collect();
    let debuginfo = published.iter().find(|k| k.ends_with("/debuginfo"));
    let debuginfo = debuginfo.expect("the build id's debuginfo replaced");
    let held = store.read(debuginfo).await.unwrap();
    assert_eq!(held.as_deref(), Some(&second.bytes[..]));
    assert_eq!(waiters(store).await, BTreeSet::from([first.id.clone()]));
    assert_audit_clean(store).await;
}

/// An overwrite replaces its own product's bytes, as before.
#[tokio::test]
async fn an_overwrite_replaces_its_own_products_bytes() {
    let a = Artifacts::new();
    let first = of_product(&a.elf_a, Some("alpha"));
    let second = of_product(&a.elf_other, Some("alpha"));
    for owners in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at(dir.path(), owners);
        overwrite_taken(&store, &first, &second).await;
    }
}

/// Bytes whose holder's upload record cannot be read are nobody's to give away: a conflict
/// (fail closed), even for an upload of the product that holder may have been. (A sole
/// writer's: its keys hold no `create` lease that the gone record would have ended.)
#[tokio::test]
async fn an_overwrite_of_bytes_whose_upload_record_is_gone_is_a_conflict() {
    let a = Artifacts::new();
    let first = of_product(&a.elf_a, Some("alpha"));
    let second = of_product(&a.elf_other, Some("alpha"));
    let sole = config_with_exclusive(true);
    for owners in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = store_at(dir.path(), owners);
        let published = index_and_finalize(&store, sole.clone(), &first).await;
        let published = published.referenced;
        let before = contents(&store, &published).await;
        let refs = RefStore::new(&store);
        let file = refs.upload_file(&first.id).await.unwrap();
        store.delete(&file).await.unwrap();
        assert_eq!(refs.upload(&first.id).await.unwrap(), None);
        let overwrite = Config {
            overwrite: true,
            ..sole.clone()
        };
        let refused = index_and_finalize(&store, overwrite, &second).await;
        assert!(
            !conflicts_of(&refused.records).is_empty(),
            "owners {owners}"
        );
        assert_eq!(contents(&store, &published).await, before);
        assert!(!waiters(&store).await.contains(&first.id));
        // The product rule's conflict, with nobody's product to name: its reason says so.
        for record in refused.records.iter().filter(|r| !r.conflicts.is_empty()) {
            let reason = record.reason.as_deref().unwrap_or_default();
            assert!(reason.contains("uploads unknown"), "{reason}");
        }
    }
}

/// A conflict of an overwriting run that no product caused keeps the usual reason: here a
/// debuginfod `section/` key (adopted content, never overwritten) meeting an object written
/// outside symdex. Before, every conflict of an overwriting run blamed another product's
/// uploads.
#[tokio::test]
async fn a_conflict_the_product_rule_did_not_make_keeps_the_usual_reason() {
    let a = Artifacts::new();
    let alpha = of_product(&a.debug_with_sources, Some("alpha"));
    let sole = config_with_exclusive(true);
    let scratch = tempfile::tempdir().unwrap();
    let first = index_and_finalize(&store_at(scratch.path(), false), sole.clone(), &alpha).await;
    let published = first.records.iter().flat_map(|r| r.published.iter());
    let mut sections = published.filter(|k| k.contains("/section/"));
    let section = sections.next().expect("a section key").clone();
    let dir = tempfile::tempdir().unwrap();
    let store = store_at(dir.path(), false);
    store
        .put(&section, b"written outside symdex")
        .await
        .unwrap();
    let overwrite = Config {
        overwrite: true,
        ..sole
    };
    let indexed = index_and_finalize(&store, overwrite, &alpha).await;
    let record = indexed
        .records
        .iter()
        .find(|r| r.conflicts.contains(&section));
    let record = record.unwrap_or_else(|| panic!("{section}: {:#?}", indexed.records));
    assert_eq!(record.action, Some(Action::Conflict));
    let reason = record.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("use overwrite"), "{reason}");
    assert!(!reason.contains("another product"), "{reason}");
    assert!(record.held_by_products.is_empty());
}
