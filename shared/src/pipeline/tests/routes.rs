//! Routed identities and inputs of different routes at once; what an upload lists.

use crate::layouts::Layout;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::{config_with_exclusive, index_and_finalize, listed_keys};
use crate::formats::{identify_with_details, IdentifyOptions};
use crate::identity::Kind;
use crate::layouts;
use crate::pipeline::{route_of, Config, Indexed, Indexer};
use crate::reader::MemReader;
use crate::storage::{LocalStore, Storage};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::{config, Artifact, Artifacts};

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
                .index_bytes(&a.source.upload(), &a.source.bytes)
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
                    let indexed = indexer.index_bytes(&upload, &input.bytes).await;
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
