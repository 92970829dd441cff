//! The pipeline's unit tests, over local stores.

use std::collections::BTreeSet;
use std::io;

use crate::pipeline::{sources, Config, Indexed, Indexer, Record};
use crate::refs::{KeyRecord, RefStore};
use crate::sourcemap;
use crate::storage::{CopySource, LocalStore, Storage};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::{config, Artifact, Artifacts};

mod encoded;
mod faults;
mod overwrites;
mod records;
mod routes;
mod source_joins;

/// [`config`], its leases those of a sole writer (`exclusive`) or of concurrent ones.
fn config_with_exclusive(exclusive: bool) -> Config {
    let mut config = config();
    config.lease.exclusive = exclusive;
    config
}

/// The store's audit finds nothing wrong.
async fn assert_audit_clean(store: &LocalStore) {
    let audit = crate::audit::audit(store, "_manifest").await.unwrap();
    assert!(audit.problems.is_empty(), "{:?}", audit.problems);
}

async fn index_and_finalize(store: &LocalStore, config: Config, artifact: &Artifact) -> Indexed {
    let indexer = Indexer::new(store, config);
    let indexed = indexer
        .index_bytes(&artifact.upload(), &artifact.bytes)
        .await
        .unwrap();
    indexer.finalize(&indexed, true).await.unwrap();
    indexed
}

/// The keys an upload's record lists (it references).
async fn listed_keys(store: &LocalStore, upload: &str) -> BTreeSet<String> {
    let record = RefStore::new(store).upload(upload).await.unwrap();
    record.expect(upload).keys
}

fn keys_of(records: &[Record]) -> BTreeSet<String> {
    records
        .iter()
        .flat_map(|r| r.published.iter().chain(&r.unchanged))
        .cloned()
        .collect()
}

/// The scenarios' debug file (its sources arrive with it, are deleted while it arrives)
/// names enough join records in its build for a first index to list them first: the
/// interleavings run a listing that another upload's record creation may overtake.
#[test]
fn the_scenarios_debug_file_lists_its_builds_join_records() {
    let artifacts = Artifacts::new();
    let scope = artifacts.debug_with_sources.build.unwrap_or_default();
    assert_eq!(Some(scope), artifacts.source.build);
    let join_scope = sourcemap::Scope::of(&crate::upload_meta::UploadMeta {
        build: Some(scope.to_string()),
        ..Default::default()
    });
    let files: BTreeSet<String> = crate::testing::scenarios::SOURCES_NAMED
        .iter()
        .map(|path| sourcemap::record_file(&join_scope, sourcemap::base_name(path)))
        .collect();
    assert!(
        !scope.is_empty() && files.len() >= sources::LIST_JOIN_RECORDS,
        "{files:?}"
    );
    // The other build's debug file differs by its build id alone.
    let other = &artifacts.debug_other_build;
    assert_eq!(other.build, Some(scope));
    let differing: Vec<usize> = (0..other.bytes.len())
        .filter(|&i| other.bytes[i] != artifacts.debug_with_sources.bytes[i])
        .collect();
    assert_eq!(differing.len(), 20, "{differing:?}");
}

#[tokio::test]
async fn an_indexer_listing_keys_at_the_finalize_holds_its_leases_until_then() {
    let artifacts = Artifacts::new();
    let (first, second) = (&artifacts.elf_a, artifacts.elf_a.named("copy"));
    for at_finalize in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        // Keys with records and `create` leases: where objects name their owners, a
        // fresh key has neither (refs/, invariant 7; the test after this one).
        let store = LocalStore::open(dir.path()).unwrap();
        let indexer = Indexer::new(&store, config()).lists_keys_at_finalize(at_finalize);
        let indexed = indexer
            .index_bytes(&first.upload(), &first.bytes)
            .await
            .unwrap();
        // Every key referenced (sidecars, `.meta`, too: no record lists them).
        let published = indexed.referenced.clone();
        assert!(published.is_superset(&keys_of(&indexed.records)));
        let listed = listed_keys(&store, &first.id).await;
        let leases = crate::audit::audit(&store, "_manifest")
            .await
            .unwrap()
            .problems
            .into_iter()
            .filter(|p| p.kind == "lease")
            .count();
        // The same bytes under another name share the build-id keys: they wait for the
        // first upload's leases while those are in force (and give up, to be retried).
        let other = Indexer::new(&store, config())
            .index_bytes(&second.upload(), &second.bytes)
            .await;
        if at_finalize {
            assert!(listed.is_empty(), "listed before the finalize: {listed:?}");
            assert_eq!(leases, published.len(), "one create lease per key");
            assert_eq!(other.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        } else {
            assert_eq!(listed, published, "listed right after publishing");
            assert_eq!(leases, 0);
            let other = other.unwrap();
            Indexer::new(&store, config())
                .finalize(&other, true)
                .await
                .unwrap();
        }
        assert!(indexer.finalize(&indexed, true).await.unwrap().is_empty());
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(
            !audit.problems.iter().any(|p| p.kind == "lease"),
            "{:?}",
            audit.problems
        );
        let record = RefStore::new(&store).upload(&first.id).await.unwrap();
        assert_eq!(record.map(|r| r.keys), Some(published));
        // The upload that waited goes through on its retry, sharing the keys.
        let other = index_and_finalize(&store, config(), &second).await;
        assert!(other.records.iter().all(|r| r.conflicts.is_empty()));
        assert_audit_clean(&store).await;
    }
}

#[tokio::test]
async fn where_objects_name_their_owners_a_fresh_upload_writes_no_key_record() {
    let artifacts = Artifacts::new();
    let (first, second) = (&artifacts.elf_a, artifacts.elf_a.named("copy"));
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap().with_owners();
    let key_records = || async { store.list("_symdex/refs/").await.unwrap() };
    let indexer = Indexer::new(&store, config()).lists_keys_at_finalize(true);
    let indexed = indexer
        .index_bytes(&first.upload(), &first.bytes)
        .await
        .unwrap();
    let published = indexed.referenced.clone();
    assert!(published.len() > 4, "{published:?}");
    // Each key is its object alone, naming the upload (invariant 7): no record, no lease
    // for a second upload to wait for before the first one's finalize.
    assert_eq!(key_records().await, Vec::<String>::new());
    let refs = RefStore::new(&store);
    for key in &published {
        let record = refs.key(key).await.unwrap().expect(key);
        assert_eq!(record.refs, BTreeSet::from([first.id.clone()]), "{key}");
    }
    let other = index_and_finalize(&store, config(), &second).await;
    assert!(other.records.iter().all(|r| r.conflicts.is_empty()));
    assert!(indexer.finalize(&indexed, true).await.unwrap().is_empty());
    // Shared now: a record per key names both, the first as the objects' writer.
    assert_eq!(key_records().await.len(), published.len());
    for key in &published {
        let record = refs.key(key).await.unwrap().expect(key);
        let both = BTreeSet::from([first.id.clone(), second.id.clone()]);
        assert_eq!((record.refs, record.by), (both, first.id.clone()), "{key}");
    }
    assert_audit_clean(&store).await;
    // The first upload removed: the second keeps every object; removed too, nothing is left.
    let indexer = Indexer::new(&store, config());
    indexer.unindex(&first.id).await.unwrap();
    for key in &published {
        assert!(store.head(key).await.unwrap().is_some(), "{key}");
    }
    indexer.unindex(&second.id).await.unwrap();
    for key in &published {
        assert_eq!(store.head(key).await.unwrap(), None, "{key}");
    }
    assert_eq!(key_records().await, Vec::<String>::new());
}

/// Counts reads of upload records (`_symdex/uploads/`).
#[derive(Default)]
struct CountUploadReads(std::sync::atomic::AtomicUsize);

impl crate::storage::hooked::BeforeChange for CountUploadReads {
    fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
        if key.starts_with("_symdex/uploads/") {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        None
    }
}

/// `verify`'s fast pass over a store whose objects name their owners: each record-less
/// key's owner is matched to the uploads already listed (an upload record is read once,
/// not once per key), and no object's bytes are read — a file changed in place is told
/// by its size there, and by its content under `--deep`.
#[tokio::test]
async fn a_fast_audit_reads_each_upload_record_once_and_no_object() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap().with_owners();
    let uploads = [&artifacts.elf_a, &artifacts.elf_other, &artifacts.pe];
    let mut keys = 0;
    for artifact in uploads {
        keys += index_and_finalize(&store, config(), artifact)
            .await
            .referenced
            .len();
    }
    assert!(keys > 3 * uploads.len(), "{keys} keys");
    assert_eq!(
        store.list("_symdex/refs/").await.unwrap(),
        Vec::<String>::new()
    );
    let counted = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path()).unwrap().with_owners(),
        CountUploadReads::default(),
    );
    let fast = crate::audit::audit_with(&counted, "_manifest", crate::audit::Depth::Fast);
    let fast = fast.await.unwrap();
    assert!(fast.problems.is_empty(), "{:?}", fast.problems);
    assert_eq!(fast.keys, keys);
    let reads = counted.hook().0.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, uploads.len(), "upload records read for {keys} keys");
    // The same size, other bytes, in place: its owner attribute stays.
    let key = &store.list("buildid/").await.unwrap()[0];
    let path = dir.path().join(key);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 0xff;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .unwrap();
    let owned = store.owned_unread(key).await.unwrap().unwrap();
    let written = owned.written.clone().expect("the owner attribute");
    assert_eq!(owned.info.etag, written.etag, "read without hashing");
    let hashed = store.owned(key).await.unwrap().unwrap();
    assert_ne!(hashed.info.etag, written.etag, "hashed");
    let fast = crate::audit::audit_with(&counted, "_manifest", crate::audit::Depth::Fast);
    assert!(fast.await.unwrap().problems.is_empty());
    let deep = crate::audit::audit(&store, "_manifest").await.unwrap();
    // (With every other name of the same file: keys of one owner share it.)
    assert!(
        deep.problems.iter().all(|p| p.kind == "changed"),
        "{deep:?}"
    );
    assert!(deep.problems.iter().any(|p| &p.key == key), "{deep:?}");
}

/// `verify` reports each broken promise of a store where every key has a record (the
/// audit reads each upload record's name, state and keys, `audit::ListedUpload`): a key
/// whose record no longer names the upload listing it, a record naming an upload that
/// does not exist, a removal's tombstone left, an upload whose run did not finish, and
/// a file nothing references.
#[tokio::test]
async fn verify_reports_each_broken_promise() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let elf = index_and_finalize(&store, config(), &artifacts.elf_a).await;
    let pe = index_and_finalize(&store, config(), &artifacts.pe).await;
    assert_problems(&store, &[]).await;
    let refs = RefStore::new(&store);
    let elf_id = artifacts.elf_a.id.as_str();
    let pe_id = artifacts.pe.id.as_str();
    let mut elf_keys = elf.referenced.iter();
    let rewrite = |key: &str, refs_now: &[&str]| {
        let store = &store;
        let key = key.to_string();
        let refs_now: BTreeSet<String> = refs_now.iter().map(|r| r.to_string()).collect();
        async move {
            let mut record = key_record(store, &key).await;
            record.refs = refs_now;
            put_key_record(store, &record).await;
        }
    };
    // The elf upload still lists this key; its record names the PE's upload instead.
    let unref = elf_keys.next().unwrap();
    rewrite(unref, &[pe_id]).await;
    let dangling = elf_keys.next().unwrap();
    rewrite(dangling, &[elf_id, "file:/gone@0"]).await;
    let tombstone = pe.referenced.iter().next().unwrap();
    rewrite(tombstone, &[]).await;
    let template = crate::refs::UploadRecord {
        upload: "file:/interrupted@1".into(),
        source: "/interrupted".into(),
        ..Default::default()
    };
    refs.plan(&template, &BTreeSet::new(), None, None)
        .await
        .unwrap();
    store.put("stray/file", b"left behind").await.unwrap();
    assert_problems(
        &store,
        &[
            ("unref", unref),
            ("dangling", dangling),
            ("tombstone", tombstone),
            // Which the PE's upload still lists.
            ("unref", tombstone),
            ("incomplete", "file:/interrupted@1"),
            ("orphan", "stray/file"),
        ],
    )
    .await;
}

/// Where objects name their owners, a key without a record is its object: one replaced
/// by the same bytes naming another listed upload no longer stands for the upload
/// listing it (`unref`), and one naming an upload that does not exist stands for no
/// record at all: replaced outside symdex (`changed`).
#[tokio::test]
async fn verify_reports_an_object_naming_another_owner() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap().with_owners();
    let elf = index_and_finalize(&store, config(), &artifacts.elf_a).await;
    index_and_finalize(&store, config(), &artifacts.pe).await;
    assert_problems(&store, &[]).await;
    let refs = RefStore::new(&store);
    let mut keys = elf.referenced.iter();
    let (to_pe, to_gone) = (keys.next().unwrap(), keys.next().unwrap());
    let bytes = store.read(to_pe).await.unwrap().unwrap();
    let info = store.head(to_pe).await.unwrap().unwrap();
    for (key, upload) in [(to_pe, artifacts.pe.id.as_str()), (to_gone, "file:/gone@0")] {
        let owner = refs.owner_token(upload).await.unwrap();
        let source = CopySource::Bytes(&bytes);
        store.delete(key).await.unwrap();
        store.copy(&source, key, &info, Some(&owner)).await.unwrap();
    }
    assert_problems(&store, &[("unref", to_pe), ("changed", to_gone)]).await;
}

/// A mark saying an upload waits for a key explains its listing only while other bytes hold
/// the key. An overwrite leaves its marks on holders it did not displace (refs/waiting.rs):
/// where the object there is still the upload's own and the key's record lost the upload,
/// the mark hides nothing (`unref`).
#[tokio::test]
async fn verify_sees_a_lost_reference_behind_a_waiting_mark() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap().with_owners();
    // The same bytes from two builds: their keys are shared, with records.
    let first = index_and_finalize(&store, config(), &artifacts.elf_a).await;
    index_and_finalize(&store, config(), &artifacts.elf_b).await;
    assert_problems(&store, &[]).await;
    let refs = RefStore::new(&store);
    let key = first.referenced.iter().next().unwrap();
    let mut record = key_record(&store, key).await;
    assert!(record.refs.remove(&artifacts.elf_a.id), "{record:?}");
    // Marks an overwrite leaves on the holders it did not displace.
    for holder in [&artifacts.elf_a.id, &artifacts.elf_b.id] {
        let marked = refs.wait_for(key, holder).await.unwrap();
        assert!(marked.is_some(), "the key is there");
    }
    assert_problems(&store, &[]).await;
    // An overwrite under way: its record names it alone, under its lease, before its bytes
    // replace the holder's. The mark is a wait; only the lease is reported.
    let overwriting = KeyRecord {
        refs: [artifacts.elf_other.id.clone()].into(),
        lease: Some(crate::refs::Lease {
            holder: "indexer-1".into(),
            until: u64::MAX,
            op: "copy".into(),
            run: "run-1".into(),
            acting: String::new(),
        }),
        ..record.clone()
    };
    put_key_record(&store, &overwriting).await;
    assert_problems(&store, &[("lease", key)]).await;
    put_key_record(&store, &record).await;
    assert_problems(&store, &[("unref", key)]).await;
}

/// The record of `key` (one it must have).
async fn key_record(store: &LocalStore, key: &str) -> KeyRecord {
    let file = format!("{}/refs/{key}.json", crate::refs::STATE_PREFIX);
    let bytes = store.read(&file).await.unwrap().expect("a key record");
    serde_json::from_slice(&bytes).unwrap()
}

/// Writes `record` over its key's record, as a writer changing it by hand would.
async fn put_key_record(store: &LocalStore, record: &KeyRecord) {
    let file = format!("{}/refs/{}.json", crate::refs::STATE_PREFIX, record.key);
    let bytes = serde_json::to_vec(record).unwrap();
    store.put(&file, &bytes).await.unwrap();
}

/// The problems a deep audit of `store` reports, as (kind, key): exactly `expected`.
async fn assert_problems(store: &LocalStore, expected: &[(&str, &str)]) {
    let audit = crate::audit::audit(store, "_manifest").await.unwrap();
    let found: BTreeSet<(&str, &str)> = audit
        .problems
        .iter()
        .map(|p| (p.kind, p.key.as_str()))
        .collect();
    let expected: BTreeSet<(&str, &str)> = expected.iter().copied().collect();
    assert_eq!(found, expected, "{:#?}", audit.problems);
}

/// Deletes an upload as the CLI and the Lambda do: its record in the manifest, then its
/// end (hand-over, the offer withdrawn, the upload forgotten).
async fn delete_reported(store: &dyn Storage, upload: &str) -> io::Result<()> {
    Indexer::new(store, config())
        .removal_to_its_end(upload, None)
        .await
}

/// Indexes an upload as the CLI and the Lambda do: its records in the manifest, then
/// finalized.
async fn index_reported(store: &dyn Storage, artifact: &Artifact) -> io::Result<()> {
    let indexer = Indexer::new(store, config());
    let indexed = indexer
        .index_bytes(&artifact.upload(), &artifact.bytes)
        .await?;
    indexer.write_manifest(&indexed.records).await?;
    indexer.finalize(&indexed, true).await?;
    Ok(())
}

/// The keys the manifest says were published for `upload` on another upload's behalf
/// (source keys: the record's reason says `why`).
async fn published_for(store: &LocalStore, upload: &str, why: &str) -> BTreeSet<String> {
    let records = crate::manifest::read_all(store, "_manifest").await.unwrap();
    records
        .iter()
        .filter(|r| r.upload == upload)
        .filter(|r| r.reason.as_deref().is_some_and(|w| w.contains(why)))
        .flat_map(|r| r.published.clone())
        .collect()
}
