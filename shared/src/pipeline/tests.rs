//! The pipeline's unit tests, over local stores.

use super::*;
use crate::reader::MemReader;
use crate::storage::LocalStore;
use crate::testing::failing::{dying_at_nth, failing_nth};
use crate::testing::scenarios::{config, Artifact, Artifacts, FromArtifacts};

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
        .index(&artifact.upload(), &MemReader(&artifact.bytes))
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
    let files: BTreeSet<String> = crate::testing::scenarios::SOURCES_NAMED
        .iter()
        .map(|path| sourcemap::record_file(scope, sourcemap::base_name(path)))
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
            .index(&first.upload(), &MemReader(&first.bytes))
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
            .index(&second.upload(), &MemReader(&second.bytes))
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
        .index(&first.upload(), &MemReader(&first.bytes))
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
        let file = format!("{}/refs/{key}.json", crate::refs::STATE_PREFIX);
        let store = &store;
        let refs_now: BTreeSet<String> = refs_now.iter().map(|r| r.to_string()).collect();
        async move {
            let bytes = store.read(&file).await.unwrap().expect("a key record");
            let mut record: KeyRecord = serde_json::from_slice(&bytes).unwrap();
            record.refs = refs_now;
            store
                .put(&file, &serde_json::to_vec(&record).unwrap())
                .await
                .unwrap();
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
        published.retain(|k| !k.starts_with("_symdex/") && !k.starts_with("_manifest/"));
        assert!(published.is_empty(), "dying at change {nth}: {published:?}");
        assert_audit_clean(&store).await;
    }
    assert!(left_removing > 0, "no death left the upload removing");
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
        .index(&artifact.upload(), &MemReader(&artifact.bytes))
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

/// An offer whose upload was removed without withdrawing it (by a version before upload
/// records named their join record) ties with a live one: a debug file arriving later
/// finds the dead offer's upload gone, and the live offer serves the path.
#[tokio::test]
async fn an_offer_left_by_a_removed_upload_does_not_keep_a_path_ambiguous() {
    let a = Artifacts::new();
    let (stale, live) = (&a.source, &a.source_edited);
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    for artifact in [stale, live] {
        index_and_finalize(&store, config(), artifact).await;
    }
    // As the older version wrote it: no join record named, so no withdrawal.
    let refs = RefStore::new(&store);
    let mut record = refs.upload(&stale.id).await.unwrap().unwrap();
    assert!(record.offered_in.take().is_some());
    let file = refs.upload_file(&stale.id).await.unwrap();
    store
        .put(&file, &serde_json::to_vec(&record).unwrap())
        .await
        .unwrap();
    Indexer::new(&store, config())
        .unindex(&stale.id)
        .await
        .unwrap();
    let offers_gone = |problems: Vec<crate::audit::Problem>| -> Vec<String> {
        let offers = problems.into_iter().filter(|p| p.kind == "offer");
        offers.map(|p| p.detail).collect()
    };
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    let left = offers_gone(audit.problems);
    assert!(
        left.len() == 1 && left[0].contains(&format!("upload {}, which is gone", stale.id)),
        "verify tells the stale offer: {left:?}"
    );

    let debug = index_and_finalize(&store, config(), &a.debug_with_sources).await;
    let served: BTreeSet<String> = debug
        .records
        .iter()
        .filter(|r| r.upload == live.id)
        .flat_map(|r| r.published.clone())
        .collect();
    assert_eq!(served.len(), 1, "{:?}", debug.records);
    let key = served.first().unwrap();
    assert_eq!(store.read(key).await.unwrap(), Some(live.bytes.clone()));
    // Dropped once met: verify finds nothing more.
    assert_audit_clean(&store).await;
}

/// Two sources of different content tie for a path. Offered before the debug file
/// asks, the tie serves nothing (the debug file's report says why). Offered after the
/// debug file was served from the first, the second leaves the key as it is — an offer
/// takes no other upload's key — and its record says so instead of nothing.
/// Without source joins (a store nobody uploads sources to), neither order of a debug file
/// and the source it names writes a join record or serves the path; the debug file's
/// record names its paths missing. With them (the default), the same uploads serve it.
#[tokio::test]
async fn without_source_joins_neither_a_debug_file_nor_a_source_writes_a_join_record() {
    let a = Artifacts::new();
    let (source, debug) = (&a.source, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let serves_a_source = |keys: Vec<String>| keys.iter().any(|k| k.contains("/source/"));
    for (name, order) in [
        ("source first", [source, debug]),
        ("debug first", [debug, source]),
    ] {
        let store = LocalStore::open(dir.path().join(name)).unwrap();
        let mut records = Vec::new();
        for artifact in order {
            let off = Config {
                source_joins: false,
                ..config()
            };
            records.extend(index_and_finalize(&store, off, artifact).await.records);
        }
        let joins = store.list("_symdex/sourcemap/").await.unwrap();
        assert!(joins.is_empty(), "{name}: {joins:?}");
        let asked = records.iter().find(|r| r.upload == debug.id).unwrap();
        let report = asked.sources.clone().unwrap_or_default();
        assert_eq!(report.served, 0, "{name}: {report:?}");
        assert!(!report.missing.is_empty(), "{name}: {report:?}");
        assert!(
            !serves_a_source(store.list("buildid/").await.unwrap()),
            "{name}"
        );
        let offered = records.iter().find(|r| r.upload == source.id).unwrap();
        assert!(!offered.published.is_empty(), "{name}: still keyed");
        assert_audit_clean(&store).await;
    }
    let on = LocalStore::open(dir.path().join("on")).unwrap();
    index_and_finalize(&on, config(), source).await;
    index_and_finalize(&on, config(), debug).await;
    assert!(serves_a_source(on.list("buildid/").await.unwrap()));
}

#[tokio::test]
async fn a_source_tying_for_a_path_already_served_says_it_leaves_it() {
    let a = Artifacts::new();
    let (first, second, debug) = (&a.source, &a.source_edited, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let before = LocalStore::open(dir.path().join("before")).unwrap();
    index_and_finalize(&before, config(), first).await;
    let tying = index_and_finalize(&before, config(), second).await;
    assert!(
        tying.records.iter().all(|r| r.reason.is_none()),
        "no path wanted yet: {:?}",
        tying.records
    );
    let asked = index_and_finalize(&before, config(), debug).await;
    let report = asked.records[0].sources.clone().unwrap_or_default();
    assert_eq!(report.served, 0, "{report:?}");
    assert!(
        report
            .unserved
            .iter()
            .any(|u| u.contains("2 uploaded sources") && !u.contains("--build")),
        "{report:?}"
    );
    // Naming no build, all three share the store-wide scope: the report says so, and how
    // to give each build its own.
    let unscoped = LocalStore::open(dir.path().join("unscoped")).unwrap();
    let no_build = |a: &Artifact| Artifact {
        build: None,
        ..a.clone()
    };
    index_and_finalize(&unscoped, config(), &no_build(first)).await;
    index_and_finalize(&unscoped, config(), &no_build(second)).await;
    let asked = index_and_finalize(&unscoped, config(), &no_build(debug)).await;
    let report = asked.records[0].sources.clone().unwrap_or_default();
    assert!(
        report
            .unserved
            .iter()
            .any(|u| u.contains("2 uploaded sources") && u.contains("--build")),
        "{report:?}"
    );

    let between = LocalStore::open(dir.path().join("between")).unwrap();
    index_reported(&between, first).await.unwrap();
    index_reported(&between, debug).await.unwrap();
    let keys = published_for(&between, &first.id, "named by").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let key = keys.first().unwrap();
    let tying = index_and_finalize(&between, config(), second).await;
    let record = tying
        .records
        .iter()
        .find(|r| r.upload == second.id)
        .unwrap();
    let reason = record.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains(key.as_str())
            && reason.contains(&format!("which serves it (upload {})", first.id)),
        "{reason}"
    );
    assert!(!record.published.contains(key), "{record:?}");
    assert_eq!(between.read(key).await.unwrap(), Some(first.bytes.clone()));
    assert_audit_clean(&between).await;
}

/// A debug file whose line table records `src/hello.c`'s MD5 (as clang writes DWARF 5)
/// is served the source of those bytes in every order the three uploads come in, though
/// another version of the file ties with it by path; the other version alone serves
/// nothing, and the debug file's report says why.
#[tokio::test]
async fn a_recorded_md5_serves_its_own_version_in_every_order() {
    let a = Artifacts::new();
    let (old, new, debug) = (&a.source, &a.source_edited, &a.debug_md5);
    let key = Indexer::new(
        &LocalStore::open(tempfile::tempdir().unwrap().path()).unwrap(),
        config(),
    )
    .source_key(&"4d".repeat(20), "/ci/work/src/hello.c")
    .unwrap();
    let orders: [[&Artifact; 3]; 6] = [
        [old, new, debug],
        [old, debug, new],
        [new, old, debug],
        [new, debug, old],
        [debug, old, new],
        [debug, new, old],
    ];
    for order in orders {
        let names: Vec<&str> = order.iter().map(|a| a.id.as_str()).collect();
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        for artifact in order {
            index_reported(&store, artifact).await.unwrap();
        }
        assert_eq!(
            store.read(&key).await.unwrap(),
            Some(new.bytes.clone()),
            "{names:?}"
        );
        let refs = RefStore::new(&store).key(&key).await.unwrap().unwrap();
        assert_eq!(refs.refs, BTreeSet::from([new.id.clone()]), "{names:?}");
        assert_audit_clean(&store).await;
    }

    // Only the other version uploaded: not served, and said so.
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_reported(&store, old).await.unwrap();
    let asked = index_and_finalize(&store, config(), debug).await;
    let report = asked.records[0].sources.clone().unwrap_or_default();
    assert_eq!((report.served, report.missing.len()), (0, 0), "{report:?}");
    assert!(
        report
            .unserved
            .iter()
            .any(|u| u.contains("none with the MD5")),
        "{report:?}"
    );
    assert_eq!(store.read(&key).await.unwrap(), None);
    assert_audit_clean(&store).await;
}

/// `verify` tells a path a debug file wants left unserved while an uploaded source matches
/// it (what a hand-on lost would leave), and indexing the debug file again with
/// `--recheck` serves it.
#[tokio::test]
async fn a_wanted_path_a_source_matches_left_unserved_is_reported_until_served() {
    let a = Artifacts::new();
    let (source, debug) = (&a.source, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_reported(&store, source).await.unwrap();
    index_reported(&store, debug).await.unwrap();
    assert_audit_clean(&store).await;
    let keys = published_for(&store, &source.id, "named by").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let key = keys.first().unwrap();
    // Lost: the source's reference taken back, its object gone with it.
    let refs = RefStore::new(&store);
    assert_eq!(
        refs.remove(key, &source.id).await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(store.read(key).await.unwrap(), None);
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    let unserved: Vec<_> = audit
        .problems
        .iter()
        .filter(|p| p.kind == "source")
        .collect();
    assert_eq!(unserved.len(), 1, "{:?}", audit.problems);
    assert!(key.ends_with(&unserved[0].key), "{unserved:?}");
    assert!(
        unserved[0]
            .detail
            .contains(&format!("while upload {} offers it", source.id)),
        "{unserved:?}"
    );
    let recheck = Config {
        recheck: true,
        ..config()
    };
    let indexer = Indexer::new(&store, recheck);
    let upload = debug.upload();
    let indexed = indexer.index(&upload, &MemReader(&debug.bytes)).await;
    indexer.finalize(&indexed.unwrap(), true).await.unwrap();
    assert_eq!(store.read(key).await.unwrap(), Some(source.bytes.clone()));
    assert_audit_clean(&store).await;
}

#[tokio::test]
async fn an_upload_taken_for_new_yet_indexed_before_is_answered_from_its_record() {
    let artifacts = Artifacts::new();
    let artifact = &artifacts.elf_a;
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let first = index_and_finalize(&store, config(), artifact).await;
    let refs = RefStore::new(&store);
    let before = refs.upload(&artifact.id).await.unwrap();
    assert!(before.is_some());
    let indexer = Indexer::new(&store, config());
    let upload = artifact.upload();
    let identified = identify_with_details(&MemReader(&artifact.bytes), &upload.options);
    // A first delivery's guess (no read): the plan's creation finds the record.
    let guessed = indexer
        .index_looked_up(&upload, identified, Some(PriorRead::absent()))
        .await
        .unwrap();
    assert_eq!(guessed.upload, None, "indexed in full again");
    assert_eq!(keys_of(&guessed.records), keys_of(&first.records));
    assert!(guessed
        .records
        .iter()
        .all(|r| r.action == Some(Action::Unchanged)));
    let after = refs.upload(&artifact.id).await.unwrap();
    assert_eq!(after, before, "the record is left as it was");
}

#[tokio::test]
async fn a_redelivery_of_a_conflicting_upload_reports_its_conflicts_again_from_its_record() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_and_finalize(&store, config(), &artifacts.elf_a).await;
    // Other bytes under the same build id: its keys hold elf_a's bytes.
    let other = &artifacts.elf_other;
    let first = index_and_finalize(&store, config(), other).await;
    let conflicts = |records: &[Record]| -> BTreeSet<String> {
        records.iter().flat_map(|r| r.conflicts.clone()).collect()
    };
    assert!(!conflicts(&first.records).is_empty());
    assert_eq!(first.records[0].action, Some(Action::Conflict));

    let again = index_and_finalize(&store, config(), other).await;
    assert_eq!(again.upload, None, "indexed in full again");
    assert_eq!(again.records[0].action, Some(Action::Conflict));
    assert_eq!(conflicts(&again.records), conflicts(&first.records));
    assert_eq!(keys_of(&again.records), keys_of(&first.records));
    assert_eq!(again.records[0].reason, first.records[0].reason);
    assert_audit_clean(&store).await;
}

/// Records every change a store is asked for.
#[derive(Default)]
struct Changes(std::sync::Mutex<Vec<(&'static str, String)>>);

impl crate::storage::hooked::BeforeChange for Changes {
    fn before_change(&self, op: &'static str, key: &str) -> crate::storage::StorageResult<()> {
        self.0.lock().unwrap().push((op, key.to_string()));
        Ok(())
    }
}

/// A removal forgets the waits of the keys its upload planned and did not reference: the
/// markers of its conflicting files go, and no marker of their `.meta` sidecars is asked
/// to (a sidecar never waits: it goes with its file).
#[tokio::test]
async fn a_removal_removes_only_the_markers_its_upload_wrote() {
    let a = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_and_finalize(&store, config(), &a.elf_a).await;
    let other = index_and_finalize(&store, config(), &a.elf_other).await;
    let conflicts = other.records.iter().flat_map(|r| r.conflicts.iter());
    assert!(conflicts.clone().any(|k| k.ends_with(".meta")), "{other:?}");
    assert!(
        conflicts.clone().any(|k| !k.ends_with(".meta")),
        "{other:?}"
    );
    let waiting = format!("{}/waiting/", crate::refs::STATE_PREFIX);
    let markers: BTreeSet<String> = store.list(&waiting).await.unwrap().into_iter().collect();
    assert!(!markers.is_empty());
    let recorded = crate::storage::hooked::Hooked::new(
        LocalStore::open(dir.path()).unwrap(),
        Changes::default(),
    );
    let remover = Indexer::new(&recorded, config());
    assert!(remover.unindex(&a.elf_other.id).await.unwrap().is_some());
    let asked: BTreeSet<String> = recorded
        .hook()
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, key)| key.starts_with(&waiting))
        .map(|(_, key)| key.clone())
        .collect();
    assert_eq!(asked, markers);
    assert!(store.list(&waiting).await.unwrap().is_empty());
    assert_audit_clean(&store).await;
}

/// Other bytes under a build id taken: the file keys conflict, and so do the `.meta`
/// sidecars beside them (the same name, arch and format: the same bytes), which describe
/// the first upload's file. Shared, they outlived that upload: `.meta` without a file.
#[tokio::test]
async fn a_sidecar_beside_a_conflicting_key_is_a_conflict_and_goes_with_its_file() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let first = index_and_finalize(&store, config(), &artifacts.elf_a).await;
    let other = &artifacts.elf_other;
    let indexed = index_and_finalize(&store, config(), other).await;
    let conflicts: BTreeSet<String> = indexed
        .records
        .iter()
        .flat_map(|r| r.conflicts.clone())
        .collect();
    let sidecars: BTreeSet<&String> = conflicts.iter().filter(|k| k.ends_with(".meta")).collect();
    // Every conflicting file with a sidecar has its sidecar among the conflicts.
    let described: BTreeSet<String> = sidecars
        .iter()
        .filter_map(|k| k.strip_suffix(".meta").map(str::to_string))
        .collect();
    assert!(!described.is_empty(), "{conflicts:?}");
    assert!(described.is_subset(&conflicts), "{conflicts:?}");
    let listed = listed_keys(&store, &other.id).await;
    assert!(
        listed.iter().all(|k| !k.ends_with(".meta")),
        "the conflicting upload references no sidecar: {listed:?}"
    );
    // Answered from its record, a redelivery reports the same conflicts.
    let again = index_and_finalize(&store, config(), other).await;
    assert_eq!(again.upload, None, "indexed in full again");
    let again: BTreeSet<String> = again
        .records
        .iter()
        .flat_map(|r| r.conflicts.clone())
        .collect();
    assert_eq!(again, conflicts);
    // The first upload removed: its files and their sidecars go together, and the
    // waiting upload, indexed again (refs/, invariant 8), publishes both.
    assert!(first.records.iter().all(|r| r.conflicts.is_empty()));
    let none_ingested = FromArtifacts {
        store: &store,
        ingest: &[],
        config: config(),
    };
    let remover = Indexer::new(&store, config()).handing_over_to(&none_ingested);
    remover.unindex(&artifacts.elf_a.id).await.unwrap();
    for sidecar in &sidecars {
        assert_eq!(store.head(sidecar).await.unwrap(), None, "{sidecar}");
    }
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    let waiting: BTreeSet<&str> = audit.problems.iter().map(|p| p.key.as_str()).collect();
    assert!(audit.problems.iter().all(|p| p.kind == "waiting"));
    let files = conflicts.iter().filter(|k| !k.ends_with(".meta"));
    assert_eq!(waiting, files.map(String::as_str).collect());
    let handed_over = index_and_finalize(&store, config(), &artifacts.elf_a).await;
    assert!(handed_over.records.iter().all(|r| r.conflicts.is_empty()));
    let other_ingested = FromArtifacts {
        store: &store,
        ingest: &[other],
        config: config(),
    };
    let remover = Indexer::new(&store, config()).handing_over_to(&other_ingested);
    remover.unindex(&artifacts.elf_a.id).await.unwrap();
    for sidecar in &sidecars {
        assert!(store.head(sidecar).await.unwrap().is_some(), "{sidecar}");
    }
    let listed = listed_keys(&store, &other.id).await;
    assert!(described.is_subset(&listed), "{listed:?}");
    assert_audit_clean(&store).await;
}

/// A waiting upload removed takes its waits with it: the key's holder, removed later,
/// finds no marker to re-index or clean up.
#[tokio::test]
async fn a_removed_upload_takes_its_waits_with_it() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_and_finalize(&store, config(), &artifacts.elf_a).await;
    let waiter = index_and_finalize(&store, config(), &artifacts.elf_other).await;
    assert!(waiter.records.iter().any(|r| !r.conflicts.is_empty()));
    let refs = RefStore::new(&store);
    assert!(!refs.all_waiting().await.unwrap().is_empty(), "it waits");
    let remover = Indexer::new(&store, config());
    remover.unindex(&artifacts.elf_other.id).await.unwrap();
    assert_eq!(refs.all_waiting().await.unwrap(), Vec::new());
    assert_audit_clean(&store).await;
}

/// The indexer's own take-back (its ingest object deleted before its finalize) frees a
/// key another upload waits for: the manifest says the key was unpublished before the
/// hand-over's record says who published it again, as a removal's does.
#[tokio::test]
async fn a_take_back_records_the_keys_it_freed_before_handing_them_over() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let (first, other) = (&artifacts.elf_a, &artifacts.elf_other);
    let indexer = Indexer::new(&store, config());
    let indexed = indexer
        .index(&first.upload(), &MemReader(&first.bytes))
        .await
        .unwrap();
    let waiting = index_and_finalize(&store, config(), other).await;
    let conflicts: BTreeSet<String> = waiting
        .records
        .iter()
        .flat_map(|r| r.conflicts.clone())
        .collect();
    assert!(!conflicts.is_empty(), "other bytes under the same build id");
    let ingest = FromArtifacts {
        store: &store,
        ingest: &[other],
        config: config(),
    };
    let taker = Indexer::new(&store, config()).handing_over_to(&ingest);
    let undone = taker.finalize(&indexed, false).await.unwrap();
    assert_eq!(undone.len(), 1);
    assert_eq!(undone[0].action, Some(Action::Unpublished));
    assert!(conflicts.iter().all(|k| undone[0].removed.contains(k)));
    // Every conflicting key now holds the waiting upload's bytes, and the manifest, in
    // the order its objects were written, says so after saying the key went.
    let mut written = Vec::new();
    crate::manifest::for_each_record(&store, "_manifest", None, |r| {
        written.push(r);
        Ok(())
    })
    .await
    .unwrap();
    for key in &conflicts {
        if key.ends_with(".meta") {
            continue; // A sidecar: records name the file it describes.
        }
        let holds = store.read(key).await.unwrap().unwrap();
        assert!(holds == other.bytes, "{key}");
        let went = written
            .iter()
            .position(|r| r.upload == first.id && r.removed.contains(key));
        let back = written
            .iter()
            .position(|r| r.upload == other.id && r.published.contains(key));
        assert!(went.is_some() && went < back, "{key}: {went:?} {back:?}");
    }
    assert_eq!(
        written.iter().filter(|r| r.upload == first.id).count(),
        1,
        "the undo is written once (its caller only reports it)"
    );
    let waits = RefStore::new(&store).all_waiting().await.unwrap();
    assert_eq!(waits, Vec::new(), "the waits ended with the hand-over");
    assert_audit_clean(&store).await;
}

#[test]
fn kept_keys_read_back_by_position() {
    let keys: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let by_position = IndexedAs {
        records: vec![Record::default(), Record::default()],
        unchanged_at: vec![vec![2, 0], vec![1]],
        ..IndexedAs::default()
    };
    assert_eq!(
        own_keys_of(&by_position, &keys),
        Some(vec![vec!["c".into(), "a".into()], vec!["b".into()]])
    );
    // Not what this code writes: no answer (the upload is indexed in full).
    let beyond = IndexedAs {
        unchanged_at: vec![vec![3], vec![]],
        ..by_position.clone()
    };
    assert_eq!(own_keys_of(&beyond, &keys), None);
    let fewer = IndexedAs {
        unchanged_at: vec![vec![0]],
        ..by_position
    };
    assert_eq!(own_keys_of(&fewer, &keys), None);
}

#[tokio::test]
async fn a_redelivery_of_an_indexed_upload_is_answered_from_its_upload_record() {
    let artifacts = Artifacts::new();
    for artifact in [&artifacts.elf_a, &artifacts.pe, &artifacts.pdb] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let first = index_and_finalize(&store, config(), artifact).await;
        assert!(first.upload.is_some());
        let record = RefStore::new(&store).upload(&artifact.id).await.unwrap();
        let kept = record.and_then(|r| r.indexed_as);
        assert!(
            kept.is_some(),
            "{artifact:?}: nothing kept for a redelivery"
        );

        let kept = kept.unwrap();
        assert!(
            kept.records.iter().all(|r| r.unchanged.is_empty()),
            "{artifact:?}: key names kept twice: {kept:?}"
        );

        let again = index_and_finalize(&store, config(), artifact).await;
        assert_eq!(again.upload, None, "{artifact:?}: indexed in full again");
        // The same keys in the same order: the first run's published, then unchanged.
        let in_order = |records: &[Record]| -> Vec<Vec<String>> {
            let own = records.iter().filter(|r| r.upload == artifact.id);
            own.map(|r| r.published.iter().chain(&r.unchanged).cloned().collect())
                .collect()
        };
        assert_eq!(in_order(&again.records), in_order(&first.records));
        assert_eq!(keys_of(&again.records), keys_of(&first.records));
        for (before, now) in first.records.iter().zip(&again.records) {
            assert_eq!(now.action, Some(Action::Unchanged));
            assert!(now.published.is_empty());
            assert_eq!(
                (&now.debug_id, &now.code_id, &now.format, &now.name),
                (
                    &before.debug_id,
                    &before.code_id,
                    &before.format,
                    &before.name
                )
            );
        }

        // Asked to, it checks every key again, and finds them unchanged.
        let rechecked = Config {
            recheck: true,
            ..config()
        };
        let full = index_and_finalize(&store, rechecked, artifact).await;
        assert!(full.upload.is_some());
        assert_eq!(keys_of(&full.records), keys_of(&first.records));
        assert!(full.records.iter().all(|r| r.published.is_empty()));
    }
}

#[tokio::test]
async fn a_pe_that_aliased_its_pdb_is_answered_from_its_upload_record_too() {
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_and_finalize(&store, config(), &artifacts.pdb).await;
    let first = index_and_finalize(&store, config(), &artifacts.pe).await;
    assert!(
        first.records.iter().any(|r| r.upload == artifacts.pdb.id),
        "the PE published the PDB under its CodeView name: {:#?}",
        first.records
    );
    let again = index_and_finalize(&store, config(), &artifacts.pe).await;
    assert_eq!(again.upload, None, "indexed in full again");
    assert!(again.records.iter().all(|r| r.upload == artifacts.pe.id));
    assert_eq!(
        keys_of(&again.records),
        keys_of(
            &first
                .records
                .into_iter()
                .filter(|r| r.upload == artifacts.pe.id)
                .collect::<Vec<_>>()
        )
    );
}

#[test]
fn every_key_of_a_routed_identity_names_its_id() {
    use crate::layouts::tests::{elf, macho};
    let options = IdentifyOptions::default();
    let ids = [
        elf(&[0xab; 20], true),
        elf(&[0x3c; 20], false),
        macho(Kind::Debug),
    ];
    for id in ids {
        let route = route_of(std::slice::from_ref(&id), &options).expect("routed");
        assert_eq!(route, id.debug_id.to_string());
        let hex = id
            .build_id
            .clone()
            .or(id.uuid.clone())
            .unwrap()
            .to_lowercase();
        let set = layouts::keys_for(&id, "app", &Layout::ALL);
        let keys: Vec<&String> = set.keys.values().flatten().collect();
        assert!(keys.len() > 3, "{keys:?}");
        for key in keys {
            // Split into directories (`gdb/ab/abab...`) or by dashes (UUIDs).
            let joined = key.to_lowercase().replace(['-', '/'], "");
            assert!(joined.contains(&hex), "{key} does not name {hex}");
        }
    }
    // Not routed: a PE (joined to its PDB by debug id), a source, two identities.
    assert_eq!(route_of(&[crate::layouts::tests::pe(1, 2)], &options), None);
    let as_source = IdentifyOptions { as_source: true };
    assert_eq!(route_of(&[elf(&[1; 20], true)], &as_source), None);
    assert_eq!(
        route_of(&[elf(&[1; 20], true), elf(&[2; 20], true)], &options),
        None
    );
}

/// JSON with its clock readings (record times, lease ends, expiries) taken out.
fn timeless(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for clock in ["time", "until", "expires"] {
                map.remove(clock);
            }
            map.values_mut().for_each(timeless);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(timeless),
        _ => {}
    }
}

/// Every file of a store (records without their clock readings).
fn snapshot(root: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let key = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let file = std::fs::read(&path).unwrap();
            let mut bytes = crate::storage::appended::into_content(&key, file);
            if key.ends_with(".json") && key.starts_with("_symdex") {
                let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                timeless(&mut value);
                bytes = serde_json::to_vec(&value).unwrap();
            }
            files.insert(key, bytes);
        }
    }
    files
}

/// `symdex index --jobs`: inputs of different routes indexed at once by one sole writer
/// (its lanes), their uploads then taken in input order, end as indexed one after
/// another — in every interleaving of their storage steps: the same store, file for file,
/// and the same records. Two of them publish the same source upload's file under their
/// own build ids (its upload record changed by both) and want the same source path.
#[tokio::test]
async fn inputs_of_different_routes_indexed_at_once_end_as_one_after_another() {
    let a = Artifacts::new();
    // Another build id, the same source path.
    let second = &a.debug_other_build;
    inputs_of_different_routes(&a, [&a.debug_with_sources, second, &a.elf_a]).await;
}

async fn inputs_of_different_routes<'a>(a: &'a Artifacts, inputs: [&'a Artifact; 3]) {
    use crate::testing::interleave::{Actor, Scheduled, Scheduler};
    let routes: BTreeSet<String> = inputs
        .iter()
        .map(|i| {
            let ids = identify_with_details(&MemReader(&i.bytes), &IdentifyOptions::default());
            route_of(&ids.unwrap(), &IdentifyOptions::default()).expect("routed")
        })
        .collect();
    assert_eq!(routes.len(), inputs.len(), "one route each");
    let sole = Config {
        lease: crate::refs::LeasePolicy {
            exclusive: true,
            ..config().lease
        },
        ..config()
    };
    // The source, indexed first by the same writer (its offer kept in memory, not written
    // yet); then the inputs (at once under `schedule`, beside a write of the kept records,
    // as the writer makes when it keeps too many), taken in input order, flushed,
    // finalized.
    let run = |schedule: Option<(std::sync::Arc<Scheduler>, u64)>| {
        let (inputs, sole) = (&inputs, &sole);
        async move {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            let scheduler = schedule
                .as_ref()
                .map(|(s, _)| s.clone())
                .unwrap_or_default();
            let scheduled = Scheduled::new(&store, scheduler.clone());
            let indexer = Indexer::new(&scheduled, sole.clone()).defer_source_map_writes();
            let mut source = indexer
                .index(&a.source.upload(), &MemReader(&a.source.bytes))
                .await
                .unwrap();
            indexer
                .register_source_map_changes(&mut source)
                .await
                .unwrap();
            let index = |input: &'a Artifact| {
                let indexer = &indexer;
                async move {
                    let upload = input.upload();
                    let indexed = indexer.index(&upload, &MemReader(&input.bytes)).await;
                    indexed.map(Some)
                }
            };
            // The write of the kept records comes after a number of other steps that
            // varies with the seed, so that across seeds it falls anywhere in the run.
            let delay = schedule.as_ref().map_or(0, |(_, seed)| seed % 40);
            let flush = || async {
                for _ in 0..delay {
                    scheduled.read("_symdex/nothing-here").await?;
                }
                indexer.flush_source_maps().await.map(|()| None)
            };
            let mut indexed: Vec<Indexed> = Vec::new();
            let mut trace = Vec::new();
            match &schedule {
                None => {
                    for input in inputs.iter() {
                        indexed.extend(index(input).await.unwrap());
                    }
                    flush().await.unwrap();
                }
                Some((scheduler, seed)) => {
                    let mut actors: Vec<Actor<'_, io::Result<Option<Indexed>>>> = inputs
                        .iter()
                        .map(|input| Box::pin(index(input)) as Actor<'_, _>)
                        .collect();
                    actors.push(Box::pin(flush()));
                    let (results, steps) = scheduler.run(*seed, actors).await;
                    trace = steps;
                    indexed = results.into_iter().filter_map(Result::unwrap).collect();
                }
            }
            for upload in indexed.iter_mut() {
                indexer.register_source_map_changes(upload).await.unwrap();
            }
            indexer.flush_source_maps().await.unwrap();
            indexer.finalize(&source, true).await.unwrap();
            let mut records = Vec::new();
            for upload in &indexed {
                indexer.finalize(upload, true).await.unwrap();
                records.extend(upload.records.clone());
            }
            let mut records = serde_json::to_value(&records).unwrap();
            timeless(&mut records);
            (snapshot(dir.path()), records, trace)
        }
    };
    let (serial_store, serial_records, _) = run(None).await;
    assert!(
        serial_store
            .keys()
            .filter(|k| k.contains("/source/"))
            .count()
            >= 2,
        "both debug files are served the source"
    );
    let scheduler = Scheduler::new();
    for seed in crate::testing::scenarios::seeds(60) {
        let (store, records, trace) = run(Some((scheduler.clone(), seed))).await;
        let context = format!("seed {seed}, trace:\n  {}", trace.join("\n  "));
        crate::testing::assert_same_files(&store, &serial_store, &context);
        assert_eq!(records, serial_records, "{context}");
    }
}

/// The same bytes under another name (its sidecar differs: it names the file), and other
/// bytes under a build id already taken (its sections conflict): each upload lists only
/// keys whose records name it, for a sole writer and for concurrent ones. (A fresh
/// upload's key is first swapped on a guess that it has no record; a conflict decided on
/// that guess, not on a read, left the sidecar unreferenced.)
#[tokio::test]
async fn an_upload_lists_only_the_keys_it_references() {
    let a = Artifacts::new();
    let renamed = a.elf_b.named("renamed.debug");
    for exclusive in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let config = config_with_exclusive(exclusive);
        for artifact in [&a.elf_b, &renamed, &a.elf_other] {
            let indexed = index_and_finalize(&store, config.clone(), artifact).await;
            assert!(!indexed.records.is_empty());
        }
        let found = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(
            found.problems.is_empty(),
            "exclusive {exclusive}: {:#?}",
            found.problems
        );
        let renamed_keys = listed_keys(&store, &renamed.id).await;
        assert!(
            renamed_keys.iter().any(|k| k.ends_with(".meta")),
            "exclusive {exclusive}: the renamed copy references the sidecar: {renamed_keys:?}"
        );
    }
}

/// A sole local writer stores an ELF's two `.meta` sidecars (the same bytes) once, one
/// file under both names, as it stores the upload's own keys; concurrent writers write
/// each. A renamed copy of the same bytes (other sidecar bytes) keeps the first's, and
/// when the first upload goes, both names go with their last reference.
#[cfg(unix)]
#[tokio::test]
async fn a_sole_writer_stores_sidecars_of_the_same_bytes_once() {
    use crate::testing::scenarios::{run_op, Op};
    use std::os::unix::fs::MetadataExt;
    let a = Artifacts::new();
    for exclusive in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let config = config_with_exclusive(exclusive);
        let renamed = a.elf_b.named("renamed.debug");
        index_and_finalize(&store, config.clone(), &a.elf_b).await;
        index_and_finalize(&store, config, &renamed).await;
        let metas: Vec<String> = listed_keys(&store, &a.elf_b.id)
            .await
            .into_iter()
            .filter(|k| k.ends_with(".meta"))
            .collect();
        assert_eq!(metas.len(), 2, "{metas:?}");
        let files = |store: &LocalStore| -> BTreeSet<(u64, Vec<u8>)> {
            metas
                .iter()
                .map(|k| {
                    let path = store.path_of(k).unwrap();
                    let inode = std::fs::metadata(&path).unwrap().ino();
                    (inode, std::fs::read(&path).unwrap())
                })
                .collect()
        };
        let stored = files(&store);
        assert_eq!(stored.len(), if exclusive { 1 } else { 2 }, "{stored:?}");
        let contents: BTreeSet<&Vec<u8>> = stored.iter().map(|(_, bytes)| bytes).collect();
        assert_eq!(contents.len(), 1, "the same bytes");
        let audit = || async {
            let found = crate::audit::audit(&store, "_manifest").await.unwrap();
            assert!(found.problems.is_empty(), "{:#?}", found.problems);
        };
        audit().await;
        // The renamed copy references the first's sidecars: they stay as they are.
        run_op(&store, Op::Delete(&a.elf_b)).await.unwrap();
        assert_eq!(files(&store), stored, "exclusive {exclusive}");
        audit().await;
        run_op(&store, Op::Delete(&renamed)).await.unwrap();
        for key in &metas {
            assert_eq!(store.head(key).await.unwrap(), None, "{key}");
        }
        audit().await;
    }
}
