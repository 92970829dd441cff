use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::check::{published, serial, serial_ops};
use super::run::{in_ingest, run_op_configured};
use super::{
    check, every_scenario, every_scenario_runs, run_op, run_op_as, scenarios, seeds,
    sole_writer_config, Artifact, Artifacts, Op, Scenario,
};
use crate::audit::{audit, references};
use crate::manifest::Record;
use crate::storage::{LocalStore, Storage};
use crate::testing::failing::dying_at_nth;
use crate::testing::interleave::{Actor, Scheduled, Scheduler};

/// A fresh local store whose objects name their owners, in a directory kept in `dirs`.
fn local_store(dirs: &mut Vec<tempfile::TempDir>) -> std::future::Ready<LocalStore> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(dir.path()).expect("store").with_owners();
    dirs.push(dir);
    std::future::ready(store)
}

/// The marker of a store laid out as S3 stores made before upload records were named by
/// location (`refs::UploadLayout::Flat`).
const FLAT: &[u8] = br#"{"uploads":"flat"}"#;

/// [`local_store`] with the flat layout's marker.
fn flat_local_store(
    dirs: &mut Vec<tempfile::TempDir>,
) -> impl std::future::Future<Output = LocalStore> {
    let store = local_store(dirs).into_inner();
    async move {
        let marker = store.put(crate::refs::LAYOUT_FILE, FLAT).await;
        marker.expect("layout marker");
        store
    }
}

#[tokio::test]
async fn every_scenario_over_a_local_store_through_random_interleavings() {
    let artifacts = Artifacts::new();
    let mut retried = 0;
    for scenario in scenarios(&artifacts) {
        let mut dirs = Vec::new();
        retried += check(&scenario, seeds(60), || local_store(&mut dirs)).await;
    }
    // Some schedules make an actor meet a live lease: the retry path is exercised too.
    assert!(
        retried > 0 || !every_scenario_runs(),
        "no schedule made an actor wait"
    );
}

/// The same with compressed copies (pipeline/encode.rs): a copy is made after its key is
/// published, withdrawn when the key changed meanwhile, deleted before its key — through
/// fewer schedules (each copy is a compression and two writes more).
#[tokio::test]
async fn every_scenario_with_compressed_copies_through_random_interleavings() {
    super::run::compressing_copies();
    let artifacts = Artifacts::new();
    let mut copies = 0;
    for scenario in scenarios(&artifacts) {
        let mut dirs = Vec::new();
        check(&scenario, seeds(3), || local_store(&mut dirs)).await;
        for dir in &dirs {
            let store = LocalStore::open(dir.path()).expect("store");
            copies += store.list("_symdex/encoded/").await.expect("list").len();
        }
    }
    assert!(
        copies > 0 || !every_scenario_runs(),
        "the scenarios' artifacts are worth copies"
    );
}

/// Schedules that once broke an invariant, found by hunts past the seeds CI runs
/// (`make hunt`), replayed every run: a seed names one schedule of its scenario as the
/// code stands, so each stays a test of its race only while the code takes the same
/// steps — the scenario's own seeds go on covering it after that.
/// - 5077: a source deleted while another of its path arrives. The removal decided the
///   path's hand-over on the join record before the other's offer and took it as done
///   though no offer served it; the arriving source found the key freed and left it to
///   the removal; nobody served the path (`pipeline/sources.rs`, `hand_on_paths`).
/// - 13: a PDB arriving found its renamed copy live and published under that copy's
///   name too, gave up on one of those keys (the copy's take-back held it), and its
///   retry no longer found the copy: half the name stayed (`remember_pdb`, a retry's
///   `earlier_extras`).
#[tokio::test]
async fn schedules_that_once_broke_an_invariant() {
    let artifacts = Artifacts::new();
    let found = [
        (
            "the source serving a path is deleted while another of the path arrives",
            5077,
        ),
        (
            "a PDB's renamed copy is taken back while the PDB and its PE arrive",
            13,
        ),
    ];
    for (name, seed) in found {
        let scenario = every_scenario(&artifacts)
            .into_iter()
            .find(|s| s.name == name)
            .expect(name);
        let mut dirs = Vec::new();
        check(&scenario, seed..seed + 1, || local_store(&mut dirs)).await;
    }
}

/// The races of a PDB's copies under two names and the PE naming one of them, through
/// more schedules than every scenario gets: a PE recording its name between a renamed
/// copy's read of the debug id's record and its joining the kept copy's key saw neither
/// that copy among the key's holders nor was seen by it, and its name went with the kept
/// copy's removal (seed 121; the default 60 schedules never met it).
#[tokio::test]
async fn a_renamed_pdb_and_its_pe_through_more_interleavings() {
    let artifacts = Artifacts::new();
    let renamed =
        |s: &Scenario<'_>| s.name.contains("under another name") || s.name.contains("renamed copy");
    let chosen: Vec<Scenario<'_>> = every_scenario(&artifacts)
        .into_iter()
        .filter(renamed)
        .collect();
    assert_eq!(chosen.len(), 3);
    for scenario in chosen {
        let mut dirs = Vec::new();
        let seeds = seeds(200);
        check(
            &scenario,
            seeds.start..seeds.end.max(seeds.start + 200),
            || local_store(&mut dirs),
        )
        .await;
    }
}

/// Invariant 8's other half (refs/): a removal that lists a key's waiters before an
/// upload that found the key held records its wait leaves the key to that upload's second
/// look. The schedule is written out: the upload runs until it is about to record its
/// wait, the removal then runs to its end (handing over to nobody), then the upload.
#[tokio::test]
async fn an_upload_that_records_its_wait_after_the_removal_looked_publishes_the_freed_keys() {
    let a = Artifacts::new();
    let mut dirs = Vec::new();
    let store = local_store(&mut dirs).await;
    run_op(&store, Op::Index(&a.elf_a, true)).await.unwrap();
    let scheduler = Scheduler::new();
    let scheduled = Scheduled::new(&store, scheduler.clone());
    let ingest = [&a.elf_other];
    let (indexer, remover) = (0, 1);
    let actors: Vec<Actor<'_, io::Result<Vec<Record>>>> = vec![
        Box::pin(run_op_as(
            &scheduled,
            Op::Index(&a.elf_other, true),
            false,
            &ingest,
        )),
        Box::pin(run_op_as(&scheduled, Op::Delete(&a.elf_a), false, &ingest)),
    ];
    let mut met_first_bytes = false;
    let pick = |waiting: &BTreeMap<usize, String>| {
        let recording = waiting
            .get(&indexer)
            .is_some_and(|step| step.starts_with("put _symdex/waiting/"));
        if recording && waiting.contains_key(&remover) {
            met_first_bytes = true;
            return remover;
        }
        if waiting.contains_key(&indexer) {
            indexer
        } else {
            remover
        }
    };
    let (results, trace) = scheduler.run_picking(actors, pick).await;
    for result in results {
        result.unwrap_or_else(|e| panic!("{e}\n{}", trace.join("\n")));
    }
    assert!(met_first_bytes, "the upload met the first upload's bytes");
    let found = audit(&store, "_manifest").await.unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let (want_refs, want_objects) = serial(&[&a.elf_other]).await;
    assert_eq!(references(&store).await.unwrap(), want_refs);
    assert_eq!(published(&store).await.unwrap(), want_objects);
}

/// [`run_op_configured`] as a sole writer.
async fn run_sole(
    store: &dyn Storage,
    op: Op<'_>,
    ingest: &[&Artifact],
) -> io::Result<Vec<Record>> {
    run_op_configured(store, op, false, ingest, sole_writer_config()).await
}

/// A sole writer (the CLI on a file system without extended attributes: the local
/// store's writer lock held, a reference record per key, no owners) that dies at any
/// change: each scenario's uploads and operations run one after another, the process
/// dies before the `nth` change of the whole run (that change and every later one of the
/// operation fail, its clean-up on the error included), the operation runs again in a
/// new process, then the rest. The store must
/// pass the audit and end as the run without the failure does (refs/, invariant 2 in
/// its sole-writer form: a record written before its object, a re-run repairing what a
/// death between the two left). `SYMDEX_SOLE_STRIDE`: die at every how many changes
/// (each scenario from another offset; 1 tries every change, in about 7 minutes).
#[tokio::test]
async fn every_scenario_run_by_a_sole_writer_that_dies_at_any_change() {
    sole_writer_dying_at_any_change(|root| LocalStore::open(root).expect("store")).await;
}

/// The same for a sole writer whose objects name their owners (the CLI on a file system
/// with extended attributes): a fresh key is its object alone, created with its owner
/// (refs/, invariant 7), and a death leaves it there or not at all.
#[tokio::test]
async fn every_scenario_run_by_a_sole_writer_naming_owners_that_dies_at_any_change() {
    sole_writer_dying_at_any_change(|root| LocalStore::open(root).expect("store").naming_owners())
        .await;
}

async fn sole_writer_dying_at_any_change(open: impl Fn(&std::path::Path) -> LocalStore) {
    let stride: usize = std::env::var("SYMDEX_SOLE_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
        .max(1);
    let artifacts = Artifacts::new();
    let mut deaths = 0;
    for (index, scenario) in scenarios(&artifacts).iter().enumerate() {
        let mut ops: Vec<Op<'_>> = scenario.before.iter().map(|a| Op::Index(a, true)).collect();
        ops.extend(scenario.ops.iter().copied());
        let ingest = in_ingest(&scenario.before, &scenario.ops);
        let dir = tempfile::tempdir().expect("tempdir");
        let clean = open(&dir.path().join("clean"));
        for op in &ops {
            run_sole(&clean, *op, &ingest)
                .await
                .expect("a run without failures");
        }
        let found = audit(&clean, "_manifest").await.expect("audit");
        assert!(
            found.problems.is_empty(),
            "{}: {:?}",
            scenario.name,
            found.problems
        );
        let want_refs = references(&clean).await.expect("references");
        let want_objects = published(&clean).await.expect("published");
        for nth in (index % stride..).step_by(stride) {
            let context = format!("{}, dying at change {nth}", scenario.name);
            let root = dir.path().join(format!("at-{nth}"));
            let store = open(&root);
            let dying = dying_at_nth(open(&root), nth);
            let mut died = false;
            for op in &ops {
                if !died {
                    match run_sole(&dying, *op, &ingest).await {
                        Ok(_) if !dying.hook().failed() => continue,
                        // Died in a change whose failure the operation survives (a
                        // best-effort clean-up): run again all the same, as the next
                        // run would.
                        Ok(_) => died = true,
                        Err(e) => {
                            assert!(dying.hook().failed(), "{context}: {op:?}: {e}");
                            died = true;
                        }
                    }
                }
                run_sole(&store, *op, &ingest)
                    .await
                    .unwrap_or_else(|e| panic!("{context}: {op:?} after it: {e}"));
            }
            if !died {
                break;
            }
            deaths += 1;
            let found = audit(&store, "_manifest").await.expect("audit");
            assert!(found.problems.is_empty(), "{context}: {:?}", found.problems);
            let refs = references(&store).await.expect("references");
            assert_eq!(refs, want_refs, "{context}: references");
            let objects = published(&store).await.expect("published");
            assert_eq!(objects, want_objects, "{context}: objects");
        }
    }
    assert!(
        deaths > 100 || !every_scenario_runs(),
        "{deaths} deaths tried"
    );
}

/// The same over a store laid out as S3 stores made before upload records were named by
/// location (flat records, a source record per location; `refs::UploadLayout::Flat`),
/// which keep that layout: their objects name owners all the same.
#[tokio::test]
async fn every_scenario_over_a_flat_local_store_through_random_interleavings() {
    let probe = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(probe.path()).expect("store").with_owners();
    store
        .put(crate::refs::LAYOUT_FILE, FLAT)
        .await
        .expect("marker");
    let layout = crate::refs::RefStore::new(&store)
        .layout()
        .await
        .expect("layout");
    assert_eq!(layout, crate::refs::UploadLayout::Flat);
    let artifacts = Artifacts::new();
    for scenario in scenarios(&artifacts) {
        let mut dirs = Vec::new();
        check(&scenario, seeds(20), || flat_local_store(&mut dirs)).await;
    }
}

#[tokio::test]
async fn the_fat_mach_o_of_the_scenarios_is_two_identities() {
    let a = Artifacts::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(dir.path()).expect("store").with_owners();
    let records = run_op(&store, Op::Index(&a.fat_a, true)).await.unwrap();
    let identities: BTreeSet<_> = records
        .iter()
        .filter(|r| !r.published.is_empty())
        .map(|r| r.debug_id)
        .collect();
    assert_eq!(identities.len(), 2, "one identity per slice: {records:#?}");
    let objects = published(&store).await.unwrap();
    let whole = crate::storage::content_sha1(&a.fat_a.bytes);
    let serving_it = objects.values().filter(|etag| **etag == whole).count();
    assert!(
        serving_it >= 4,
        "both slices' keys serve the file: {objects:#?}"
    );
}

#[tokio::test]
async fn serial_runs_do_not_depend_on_the_order_of_a_debug_file_and_its_sources() {
    let a = Artifacts::new();
    let debug_first = serial(&[&a.debug_with_sources, &a.source]).await;
    let source_first = serial(&[&a.source, &a.debug_with_sources]).await;
    assert_eq!(debug_first, source_first);
    let key = format!("buildid/{}/source/ci/work/src/hello.c", "6b".repeat(20));
    let holders = debug_first
        .0
        .get(&key)
        .expect("the source key is published");
    assert_eq!(holders, &BTreeSet::from([a.source.id.clone()]));
}

/// The split-DWARF scenarios compare with serial runs that pair: the package at the
/// binary's debuginfo key, held by the package alone, whichever came first; alone, the
/// package publishes nothing and the binary leaves that key to it.
#[tokio::test]
async fn serial_runs_pair_a_dwp_with_its_binary_in_either_order() {
    let a = Artifacts::new();
    let key = format!("buildid/{}/debuginfo", "3c".repeat(20));
    let binary_first = serial(&[&a.split_binary, &a.split_package]).await;
    assert_eq!(
        binary_first,
        serial(&[&a.split_package, &a.split_binary]).await
    );
    let holders: Vec<&str> = binary_first.0[&key].iter().map(String::as_str).collect();
    assert_eq!(holders, [a.split_package.id.as_str()]);
    assert!(!serial(&[&a.split_binary]).await.0.contains_key(&key));
    assert!(serial(&[&a.split_package]).await.0.is_empty());
}

#[tokio::test]
async fn serial_runs_do_not_depend_on_the_order_of_pe_and_pdb() {
    let a = Artifacts::new();
    let pe_first = serial(&[&a.pe, &a.pdb]).await;
    let pdb_first = serial(&[&a.pdb, &a.pe]).await;
    assert_eq!(pe_first, pdb_first);
    assert!(
        pe_first.0.keys().any(|k| k.contains("Mixed.PDB")),
        "the PDB is published under the name its PE uses: {:?}",
        pe_first.0.keys()
    );
    // Deleting the PDB unpublishes the same keys whichever came first.
    for order in [[&a.pe, &a.pdb], [&a.pdb, &a.pe]] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        for artifact in order {
            run_op(&store, Op::Index(artifact, true)).await.unwrap();
        }
        run_op(&store, Op::Delete(&a.pdb)).await.unwrap();
        assert_eq!(
            references(&store).await.unwrap(),
            serial(&[&a.pe]).await.0,
            "deleting the PDB leaves what the PE alone publishes"
        );
    }
    // A PE naming the PDB as uploaded: the same keys whichever came first (the PE's own
    // and the PDB's, nothing aliased).
    let pe_first = serial(&[&a.pe_same_name, &a.pdb]).await;
    let pdb_first = serial(&[&a.pdb, &a.pe_same_name]).await;
    assert_eq!(pe_first, pdb_first);
    let pdb_alone = serial(&[&a.pdb]).await.0;
    let pe_alone = serial(&[&a.pe_same_name]).await.0;
    let both: BTreeMap<_, _> = pe_alone.into_iter().chain(pdb_alone).collect();
    assert_eq!(pe_first.0, both);
}

/// The same PDB uploaded under two names, a PE naming the first, the first deleted: the
/// PE's name stays served by the renamed copy whether the PE came before or after it.
#[tokio::test]
async fn serial_runs_of_a_renamed_pdb_do_not_depend_on_when_its_pe_arrived() {
    let a = Artifacts::new();
    let pe = Op::Index(&a.pe_same_name, true);
    let (pdb, renamed) = (Op::Index(&a.pdb, true), Op::Index(&a.pdb_renamed, true));
    let deleted = Op::Delete(&a.pdb);
    let pe_first = serial_ops(&[pdb, pe, renamed, deleted]).await;
    let renamed_first = serial_ops(&[pdb, renamed, pe, deleted]).await;
    assert_eq!(pe_first, renamed_first);
    let by_renamed: Vec<&String> = renamed_first
        .0
        .iter()
        .filter(|(key, owners)| key.contains("mixed.pdb/") && owners.contains(&a.pdb_renamed.id))
        .map(|(key, _)| key)
        .collect();
    assert!(
        !by_renamed.is_empty(),
        "the name the PE uses is served by the renamed copy: {:#?}",
        renamed_first.0
    );
}

/// The product rule bites on the scenarios' artifacts: `elf_other_web`'s overwrite of
/// `elf_a`'s keys is refused where `elf_other`'s is allowed (the scenario "an overwrite the
/// product rule refuses races one it allows" races the two).
#[tokio::test]
async fn an_overwrite_by_another_product_leaves_the_bytes_it_meets() {
    let a = Artifacts::new();
    let held = serial(&[&a.elf_a]).await;
    let refused = serial_ops(&[Op::Index(&a.elf_a, true), Op::Overwrite(&a.elf_other_web)]).await;
    assert_eq!(
        refused.1, held.1,
        "another product's overwrite published nothing"
    );
    let allowed = serial_ops(&[Op::Index(&a.elf_a, true), Op::Overwrite(&a.elf_other)]).await;
    assert_ne!(
        allowed.1, held.1,
        "an overwrite of no product replaced no product's bytes"
    );
    let raced = serial_ops(&[
        Op::Index(&a.elf_a, true),
        Op::Overwrite(&a.elf_other),
        Op::Overwrite(&a.elf_other_web),
        Op::Delete(&a.elf_other),
    ])
    .await;
    // The freed keys go to the uploads waiting for them in the order of their ids: `elf_a`'s
    // sorts before `elf_other_web`'s, which finds them taken again.
    assert_eq!(raced.1, held.1, "the replaced build holds its keys again");
}
