//! What upload records answer (redeliveries, conflicts again) and what a removal takes with
//! it (its markers, sidecars, waits, the keys it hands over).

use std::collections::BTreeSet;

use super::{assert_audit_clean, index_and_finalize, keys_of, listed_keys};
use crate::manifest::Action;
use crate::pipeline::kept::own_keys_of;
use crate::pipeline::{Config, Indexer, Record, RecordLookup};
use crate::refs::{IndexedAs, RefStore};
use crate::storage::{LocalStore, Storage};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::{config, Artifacts, FromArtifacts};

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
    // A first delivery's guess (no read): the plan's creation finds the record.
    let guessed = indexer
        .index_bytes_as(&upload, RecordLookup::GuessAbsent, &artifact.bytes)
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
        .index_bytes(&first.upload(), &first.bytes)
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

/// A PDB whose srcsrv stream runs commands: published and recorded as such by default,
/// rejected with its reason where the store refuses them (`Config::refuse_srcsrv_commands`).
/// The command defined in the `variables` section, or in the `ini` section in lower case
/// (WinDbg takes variables from both, names in any case).
#[tokio::test]
async fn a_pdb_whose_srcsrv_runs_commands_is_refused_only_when_asked() {
    let in_variables: &[u8] = b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\n\
        SRCSRVTRG=%targ%\\%var2%\r\nSRCSRVCMD=cmd /c echo %var2%\r\n\
        SRCSRV: source files --\r\nSRCSRV: end --\r\n";
    let in_ini: &[u8] = b"SRCSRV: ini --\r\nVERSION=2\r\nsrcsrvcmd=cmd /c echo %var2%\r\n\
        SRCSRV: variables --\r\nSRCSRVTRG=%targ%\\%var2%\r\n\
        SRCSRV: source files --\r\nSRCSRV: end --\r\n";
    for srcsrv in [in_variables, in_ini] {
        refused_only_when_asked(srcsrv).await;
    }
}

/// A PDB carrying `srcsrv`: indexed and flagged by default, rejected where refused.
async fn refused_only_when_asked(srcsrv: &[u8]) {
    let bytes = crate::testing::source_pdbs::pdb_with_sources(
        [0x42; 16],
        &[(r"C:\b\a.cpp", 1, &[7; 16])],
        Some(srcsrv),
        None,
    );
    let artifact = crate::testing::scenarios::Artifact {
        id: "in/cmd.pdb".into(),
        name: "cmd.pdb".into(),
        bytes,
        channel: None,
        as_source: false,
        build: Some("b1"),
        product: None,
        entry: None,
    };
    let runs = |record: &Record| {
        record
            .pdb_sources
            .as_ref()
            .and_then(|s| s.srcsrv.as_ref())
            .is_some_and(|s| s.commands)
    };
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let indexed = index_and_finalize(&store, config(), &artifact).await;
    assert_eq!(indexed.records[0].action, Some(Action::Indexed));
    assert!(runs(&indexed.records[0]), "{:?}", indexed.records[0]);
    assert_eq!(
        indexed.records[0]
            .pdb_sources
            .as_ref()
            .unwrap()
            .documents
            .len(),
        1
    );

    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut refusing = config();
    refusing.refuse_srcsrv_commands = true;
    let indexed = index_and_finalize(&store, refusing, &artifact).await;
    let record = &indexed.records[0];
    assert_eq!(record.action, Some(Action::Rejected));
    assert!(record.published.is_empty());
    assert!(runs(record));
    assert!(
        record
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("SRCSRVCMD")),
        "{record:?}"
    );
    assert_eq!(
        record.debug_id,
        Some("42424242-4242-4242-4242-424242424242-1".parse().unwrap())
    );
}

/// Where a store refuses srcsrv commands, a PDB whose srcsrv stream could not all be checked
/// is refused too (fail closed): two streams named srcsrv (a debugger may open the other),
/// one named in another case, one longer than is read (its tail may define SRCSRVCMD), and a
/// PDZ (its streams are not read). Without refusal each is indexed, an unchecked stream
/// said so in its sources; a PDB with one srcsrv stream read whole is indexed either way.
#[tokio::test]
async fn a_pdb_whose_srcsrv_is_not_all_read_is_refused_where_commands_are() {
    let plain: &[u8] = b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\n\
        SRCSRVTRG=https://s/%var2%\r\nSRCSRV: source files --\r\nSRCSRV: end --\r\n";
    let commands: &[u8] = b"SRCSRV: variables --\r\nSRCSRVCMD=cmd /c calc\r\n";
    let mut long = plain.to_vec();
    long.resize(crate::pdb_sources::MAX_SRCSRV_BYTES + 1, b'\n');
    let doc: &[crate::testing::source_pdbs::PdbDocument] = &[(r"C:\b\a.cpp", 1, &[7; 16])];
    let pdb = |streams: &[(&str, &[u8])]| {
        crate::testing::source_pdbs::pdb_with_named_streams([0x42; 16], doc, streams)
    };
    let pdz = crate::testing::fuzz_seeds()
        .into_iter()
        .find(|(name, _)| *name == "pdz.bin")
        .map(|(_, bytes)| bytes)
        .unwrap();
    let unchecked = [
        (
            "two srcsrv streams",
            pdb(&[("srcsrv", plain), ("srcsrv", commands)]),
        ),
        ("srcsrv in capitals", pdb(&[("SRCSRV", commands)])),
        ("srcsrv past the read", pdb(&[("srcsrv", &long)])),
    ];
    for (what, bytes) in &unchecked {
        let record = index_pdb(bytes, false).await;
        assert_eq!(record.action, Some(Action::Indexed), "{what}: {record:?}");
        let sources = record.pdb_sources.as_ref().unwrap();
        assert!(sources.srcsrv_unchecked, "{what}: {sources:?}");
        assert!(!sources.unread.is_empty(), "{what}: {sources:?}");
        let record = index_pdb(bytes, true).await;
        assert_eq!(record.action, Some(Action::Rejected), "{what}: {record:?}");
        assert_eq!(
            record.reason.as_deref(),
            Some(super::super::index::SRCSRV_UNCHECKED_REFUSED),
            "{what}"
        );
        assert!(record.published.is_empty(), "{what}");
    }
    let record = index_pdb(&pdz, true).await;
    assert_eq!(record.action, Some(Action::Rejected), "{record:?}");
    assert_eq!(
        record.reason.as_deref(),
        Some(super::super::index::PDZ_SRCSRV_REFUSED)
    );
    assert_eq!(index_pdb(&pdz, false).await.action, Some(Action::Indexed));
    for refusing in [false, true] {
        let record = index_pdb(&pdb(&[("srcsrv", plain)]), refusing).await;
        assert_eq!(record.action, Some(Action::Indexed), "{record:?}");
        let sources = record.pdb_sources.as_ref().unwrap();
        assert!(!sources.srcsrv_unchecked, "{sources:?}");
        assert!(!sources.srcsrv.as_ref().unwrap().commands);
    }
}

/// `bytes` indexed as a PDB into a fresh store (refusing srcsrv commands or not): its record.
async fn index_pdb(bytes: &[u8], refusing: bool) -> Record {
    let artifact = crate::testing::scenarios::Artifact {
        id: "in/hostile.pdb".into(),
        name: "hostile.pdb".into(),
        bytes: bytes.to_vec(),
        channel: None,
        as_source: false,
        build: Some("b1"),
        product: None,
        entry: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut config = config();
    config.refuse_srcsrv_commands = refusing;
    let mut indexed = index_and_finalize(&store, config, &artifact).await;
    indexed.records.remove(0)
}
