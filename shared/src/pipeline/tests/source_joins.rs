//! Debug files and their sources: offers, ties, recorded MD5s, joins turned off.

use std::collections::BTreeSet;

use super::{assert_audit_clean, index_and_finalize, index_reported, published_for};
use crate::pipeline::{Config, Indexer};
use crate::refs::{RefStore, RemoveOutcome};
use crate::storage::{LocalStore, Storage};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::{config, Artifact, Artifacts};

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
    let indexed = indexer.index_bytes(&upload, &debug.bytes).await;
    indexer.finalize(&indexed.unwrap(), true).await.unwrap();
    assert_eq!(store.read(key).await.unwrap(), Some(source.bytes.clone()));
    assert_audit_clean(&store).await;
}

/// A want written while `verify` reads the join records (after its first pass over them,
/// before its second) is checked like the others: its unserved path is reported, not
/// skipped for want of knowing whether its key is published; served, it is not.
#[tokio::test]
async fn a_want_written_during_verify_is_still_checked() {
    for lost in [true, false] {
        want_written_during_verify(lost).await;
    }
}

async fn want_written_during_verify(lost: bool) {
    use crate::storage::hooked::{BeforeChange, Hooked};
    /// Puts the join record's wants back at its second read (as a concurrent indexer would
    /// have written them meanwhile).
    struct WrittenMeanwhile {
        key: String,
        path: std::path::PathBuf,
        full: Vec<u8>,
        reads: std::sync::atomic::AtomicUsize,
    }
    impl BeforeChange for WrittenMeanwhile {
        fn hold_read<'a>(&'a self, key: &str) -> Option<crate::storage::StorageFuture<'a, ()>> {
            let order = std::sync::atomic::Ordering::SeqCst;
            if key == self.key && self.reads.fetch_add(1, order) == 1 {
                std::fs::write(&self.path, &self.full).unwrap();
            }
            None
        }
    }
    let a = Artifacts::new();
    let (source, debug) = (&a.source, &a.debug_with_sources);
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    index_reported(&store, source).await.unwrap();
    index_reported(&store, debug).await.unwrap();
    let keys = published_for(&store, &source.id, "named by").await;
    let key = keys.first().unwrap();
    if lost {
        let refs = RefStore::new(&store);
        assert_eq!(
            refs.remove(key, &source.id).await.unwrap(),
            RemoveOutcome::Removed
        );
    }
    // The join record without its wants at the first read, with them at the second.
    let files = store.list("_symdex/sourcemap/").await.unwrap();
    let file = files
        .into_iter()
        .find(|f| {
            let bytes = std::fs::read(dir.path().join(f)).unwrap();
            let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let listed = |field: &str| record[field].as_array().is_some_and(|l| !l.is_empty());
            listed("wants") && listed("offers")
        })
        .unwrap();
    let path = dir.path().join(&file);
    let full = std::fs::read(&path).unwrap();
    let mut bare: serde_json::Value = serde_json::from_slice(&full).unwrap();
    bare["wants"] = serde_json::json!([]);
    std::fs::write(&path, serde_json::to_vec(&bare).unwrap()).unwrap();
    let hook = WrittenMeanwhile {
        key: file,
        path,
        full,
        reads: Default::default(),
    };
    let hooked = Hooked::new(LocalStore::open(dir.path()).unwrap(), hook);
    let audit = crate::audit::audit(&hooked, "_manifest").await.unwrap();
    let unserved: Vec<_> = audit
        .problems
        .iter()
        .filter(|p| p.kind == "source")
        .collect();
    assert_eq!(unserved.len(), usize::from(lost), "{:?}", audit.problems);
    if lost {
        assert!(key.ends_with(&unserved[0].key), "{unserved:?}");
    } else {
        assert!(audit.problems.is_empty(), "{:?}", audit.problems);
    }
    assert!(
        hooked
            .hook()
            .reads
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 2
    );
}
