//! A scenario through seeded interleavings, its end compared with serial runs.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::artifacts::Artifact;
use super::run::{in_ingest, removed_by, run_op, run_op_as};
use super::{Op, Scenario, Survivors};
use crate::audit::{audit, references};
use crate::manifest::Record;
use crate::storage::{LocalStore, Storage};
use crate::testing::interleave::{Actor, Scheduled, Scheduler};

/// Published objects (outside bookkeeping) with their content.
pub(super) async fn published(store: &dyn Storage) -> io::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for key in store.list("").await? {
        if key.starts_with("_symdex/")
            || key.starts_with("_manifest/")
            || key.ends_with("index2.txt")
        {
            continue;
        }
        if crate::layouts::unified::described_by_sidecar(&key).is_some() {
            if let Some(content) = store.get(&key).await? {
                out.insert(key, sidecar_but_its_name(&content.bytes));
            }
        } else if let Some(info) = store.head(&key).await? {
            out.insert(key, info.etag);
        }
    }
    Ok(out)
}

/// Keys kept as the targets of aliases (a store whose key copies are aliases, S3 redirect
/// objects): each held only by uploads that hold an alias of it. An upload that finds another
/// upload's alias at one of its keys holds the alias's target too (invariant 6), a key under
/// that upload's name if its name differs: it stays, with the same bytes, when that upload is
/// removed — a key no serial run over a store of copies has.
async fn kept_as_targets(
    store: &dyn Storage,
    refs: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeSet<String> {
    if !store.traits().key_copies_are_aliases {
        return BTreeSet::new();
    }
    let mut aliased_by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (key, holders) in refs {
        let owned = store.owned(key).await.expect("owned");
        if let Some(target) = owned.and_then(|o| o.alias_of) {
            aliased_by
                .entry(target)
                .or_default()
                .extend(holders.iter().cloned());
        }
    }
    aliased_by
        .into_iter()
        .filter(|(target, holders)| refs.get(target).is_some_and(|h| h.is_subset(holders)))
        .map(|(target, _)| target)
        .collect()
}

/// A unified `.meta` sidecar's content without its `name`. The first publisher's sidecar
/// stays while another upload of the same bytes references it (`publish_generated`), so its
/// name is the first one's even where that upload is gone by the end, which no serial run
/// of the survivors shows: two copies of a PDB under two names publishing at once, one
/// taken back. Everything else in it comes from the bytes, and is compared.
fn sidecar_but_its_name(content: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(content) {
        Ok(serde_json::Value::Object(mut fields)) => {
            let name = fields.remove("name");
            assert!(
                matches!(
                    name,
                    Some(serde_json::Value::String(_) | serde_json::Value::Null)
                ),
                "a sidecar's name: {name:?}"
            );
            serde_json::Value::Object(fields).to_string()
        }
        _ => panic!(
            "a sidecar is a JSON object: {}",
            String::from_utf8_lossy(content)
        ),
    }
}

/// What a serial run of `uploads` leaves: references and published objects.
type Expected = (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, String>);

pub(super) async fn serial(uploads: &[&Artifact]) -> Expected {
    let ops: Vec<Op<'_>> = uploads.iter().map(|a| Op::Index(a, true)).collect();
    serial_ops(&ops).await
}

/// What `ops` run one after another leave.
pub(super) async fn serial_ops(ops: &[Op<'_>]) -> Expected {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(dir.path()).expect("store").with_owners();
    let ingest = in_ingest(&[], ops);
    for op in ops {
        run_op_as(&store, *op, false, &ingest)
            .await
            .expect("serial run");
    }
    (
        references(&store).await.expect("references"),
        published(&store).await.expect("published"),
    )
}

/// The serial runs `ops` may come to, in any order. An index that takes its upload back
/// (`Index(_, false)`: its ingest object went before its finalize) is two steps others may
/// come between: the upload indexed, and later removed as a deletion removes it. Meanwhile
/// others may have seen it there (a PDB's copy under another name then keeps that name).
fn serial_orders<'a>(ops: &[Op<'a>]) -> Vec<Vec<Op<'a>>> {
    // Each step, and the step it must come after.
    let mut steps: Vec<(Op<'a>, Option<usize>)> = Vec::new();
    for op in ops {
        match op {
            Op::Index(artifact, false) => {
                steps.push((Op::Index(artifact, true), None));
                steps.push((Op::Delete(artifact), Some(steps.len() - 1)));
            }
            op => steps.push((*op, None)),
        }
    }
    let all: Vec<usize> = (0..steps.len()).collect();
    orders(&all)
        .into_iter()
        .filter(|order| {
            let at = |step: usize| order.iter().position(|s| *s == step);
            steps
                .iter()
                .enumerate()
                .all(|(step, (_, after))| after.is_none_or(|after| at(after) < at(step)))
        })
        .map(|order| order.into_iter().map(|step| steps[step].0).collect())
        .collect()
}

/// Every order of `items` (all permutations: scenarios have a few).
fn orders<T: Copy>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let rest: Vec<T> = [&items[..i], &items[i + 1..]].concat();
        for mut order in orders(&rest) {
            order.insert(0, *first);
            all.push(order);
        }
    }
    all
}

/// Runs `scenario` through the interleavings of `seeds`, each on a fresh store from
/// `fresh_store`. Panics with the seed and the trace of the first schedule that breaks an
/// invariant or ends differently from the serial run. Odd seeds run indexers as a first
/// delivery alone in its invocation ([`run_op_as`]), even ones indexers that read first.
pub async fn check<S: Storage, F: std::future::Future<Output = S>>(
    scenario: &Scenario<'_>,
    seeds: std::ops::Range<u64>,
    mut fresh_store: impl FnMut() -> F,
) -> usize {
    let mut expected = Vec::new();
    match &scenario.survivors {
        Survivors::Exactly(survivors) => expected.push(serial(survivors).await),
        Survivors::OneOf(sets) => {
            for survivors in sets {
                expected.push(serial(survivors).await);
            }
        }
        Survivors::OneOfRuns(runs) => {
            for ops in runs {
                expected.push(serial_ops(ops).await);
            }
        }
        Survivors::AnyOrder => {
            let before = scenario.before.iter().map(|a| Op::Index(a, true));
            let before: Vec<Op<'_>> = before.collect();
            for order in serial_orders(&scenario.ops) {
                expected.push(serial_ops(&[before.clone(), order].concat()).await);
            }
        }
        Survivors::Conflict => {}
    }
    let scheduler = Scheduler::new();
    let mut retried = 0;
    let ingest = in_ingest(&scenario.before, &scenario.ops);
    for seed in seeds {
        let store = fresh_store().await;
        for artifact in &scenario.before {
            run_op(&store, Op::Index(artifact, true))
                .await
                .expect("setup");
        }
        let scheduled = Scheduled::new(&store, scheduler.clone());
        let first_delivery = seed % 2 == 1;
        let actors: Vec<Actor<'_, io::Result<Vec<Record>>>> = scenario
            .ops
            .iter()
            .map(|op| {
                let scheduled = &scheduled;
                let op = *op;
                let ingest = &ingest;
                Box::pin(async move { run_op_as(scheduled, op, first_delivery, ingest).await })
                    as Actor<'_, _>
            })
            .collect();
        let (results, trace) = scheduler.run(seed, actors).await;
        let context = |what: &str| {
            format!(
                "scenario {:?}, seed {seed} ({}): {what}\ntrace:\n  {}",
                scenario.name,
                if first_delivery {
                    "indexers as a first delivery"
                } else {
                    "indexers reading first"
                },
                trace.join("\n  ")
            )
        };
        // A promotion that reports success keeps its upload, whatever the expiry did (a
        // deletion, or a take-back, removes it all the same).
        let promoted: Vec<&str> = scenario
            .ops
            .iter()
            .zip(&results)
            .filter_map(|(op, result)| match (op, result) {
                (Op::Promote(a), Ok(records)) if !records.is_empty() => Some(a.id.as_str()),
                _ => None,
            })
            .filter(|id| !removed_by(&scenario.ops, id))
            .collect();
        // Redelivery: what failed runs again, alone, as SQS would retry the message.
        for (op, result) in scenario.ops.iter().zip(results) {
            if let Err(first) = result {
                retried += 1;
                let mut last = Err(first);
                for _ in 0..3 {
                    last = run_op_as(&store, *op, first_delivery, &ingest).await;
                    if last.is_ok() {
                        break;
                    }
                }
                if let Err(e) = last {
                    panic!(
                        "{}",
                        context(&format!("{op:?} still fails on redelivery: {e}"))
                    );
                }
            }
        }
        let found = audit(&store, "_manifest").await.expect("audit");
        if !found.problems.is_empty() {
            let lines: Vec<String> = found.problems.iter().map(ToString::to_string).collect();
            panic!(
                "{}",
                context(&format!("invariants broken:\n{}", lines.join("\n")))
            );
        }
        let refs = references(&store).await.expect("references");
        let objects = published(&store).await.expect("published");
        for upload in &promoted {
            if !refs.values().any(|owners| owners.contains(*upload)) {
                panic!(
                    "{}",
                    context(&format!("{upload} was promoted, yet expired"))
                );
            }
        }
        match expected.as_slice() {
            [] => {
                // Conflicting bytes: each key holds one upload's bytes (the audit checked they
                // match its record) and is referenced by that upload alone; generated
                // sidecars (`.meta`) are shared. Different keys may go to different uploads,
                // and none to an upload deleted.
                let deleted: Vec<&str> = scenario
                    .ops
                    .iter()
                    .flat_map(|op| match op {
                        Op::Delete(a) => std::slice::from_ref(*a),
                        Op::DeleteArchive(entries) => entries,
                        _ => &[],
                    })
                    .map(|a| a.id.as_str())
                    .collect();
                for (key, owners) in &refs {
                    let gone = owners.iter().any(|o| deleted.contains(&o.as_str()));
                    if gone || (owners.len() != 1 && !key.ends_with(".meta")) {
                        panic!("{}", context(&format!("{key} claimed by {owners:?}")));
                    }
                }
            }
            outcomes => {
                let kept = kept_as_targets(&store, &refs).await;
                let same = |(want_refs, want_objects): &Expected| {
                    let extra = |key: &String| kept.contains(key) && !want_refs.contains_key(key);
                    let refs: BTreeMap<_, _> = refs.iter().filter(|(k, _)| !extra(k)).collect();
                    let objects: BTreeMap<_, _> =
                        objects.iter().filter(|(k, _)| !extra(k)).collect();
                    refs == want_refs.iter().collect() && objects == want_objects.iter().collect()
                };
                if !outcomes.iter().any(same) {
                    let (want_refs, want_objects) = &outcomes[0];
                    panic!(
                        "{}",
                        context(&format!(
                            "differs from a serial run\n got refs {refs:#?}\nwant refs {want_refs:#?}\n got objects {objects:#?}\nwant objects {want_objects:#?}"
                        ))
                    );
                }
            }
        }
    }
    retried
}
