//! What keys another upload published cost: a PDB and its PE, conflicts, the same bytes again.

use symdex_lambda::handle_remover;

use super::{breakdown, checks, counted, counted_copying, index_each, kind, naming, objects_named};
use crate::support::{run_in, sqs_event, Fixtures, INGEST, SERVING};
/// A PDB's debug-id record (where the PDB lives, the names PEs gave it) joins a PDB and the
/// PEs naming it. A first delivery guesses it is the first of the two to arrive (or alone,
/// as a third-party DLL without its PDB is): it creates the record unread, one write
/// (`If-None-Match`). The second finds the record there (the write fails), reads it and
/// swaps on that read's version: a write, a read and a write. Around its keys the first
/// costs the ingest read, the upload record twice, the record's write and the manifest
/// (keys + 5), the second keys + 7 — a pair as before (keys + 6 each), an artifact alone one
/// request less.
///
/// A PE naming the PDB by the name it was uploaded under asks nothing of the PDB's copy,
/// in either order: its keys are the PDB's own, so there is nothing to alias — no key
/// record, no HEAD, no upload record of the PDB's read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_of_a_pdb_and_its_pe_creates_the_debug_ids_record_unread() {
    use symdex_shared::testing::builders::{
        build_msf, build_pe, codeview, dbi_stream, info_stream,
    };
    let (stack, proxy, ctx) = counted().await;
    let fx = Fixtures::build();
    let dir = tempfile::tempdir().unwrap();
    // Two builds: `app` uploads its PDB first, `lib` its PE first.
    let pair = |stem: &str, guid: [u8; 16]| {
        let age = 2;
        let pdb = dir.path().join(format!("{stem}.pdb"));
        let streams = [
            None,
            Some(info_stream(guid, age)),
            None,
            Some(dbi_stream(age, 0x8664)),
        ];
        std::fs::write(&pdb, build_msf(4096, &streams)).unwrap();
        let pe = dir.path().join(format!("{stem}.dll"));
        let entries = [codeview(guid, age, &format!("C:\\build\\{stem}.pdb"), 0, 0)];
        std::fs::write(&pe, build_pe(true, 0x8664, true, &entries, true)).unwrap();
        (pdb, pe)
    };
    let (app_pdb, app_dll) = pair("app", [0x3d; 16]);
    let (lib_pdb, lib_dll) = pair("lib", [0x4e; 16]);
    // The store's one-time markers go with a first artifact, not counted.
    let inputs = [
        ("ci/warm-up.stripped", fx.path("app.stripped")),
        ("ci/app.pdb", app_pdb),
        ("ci/app.dll", app_dll),
        ("ci/lib.dll", lib_dll),
        ("ci/lib.pdb", lib_pdb),
    ];
    let fresh = index_each(&stack, &proxy, &ctx, inputs).await;
    for (key, first) in [
        ("ci/app.pdb", true),
        ("ci/app.dll", false),
        ("ci/lib.dll", true),
        ("ci/lib.pdb", false),
    ] {
        let fresh = &fresh[key];
        let id_record = |method: &str| {
            fresh
                .iter()
                .filter(|l| l.starts_with(method) && l.contains("/_symdex/ids/"))
                .count()
        };
        let (expected, more) = if first { ((0, 1), 5) } else { ((1, 2), 7) };
        assert_eq!(
            (id_record("GET"), id_record("PUT")),
            expected,
            "{key}: {fresh:#?}"
        );
        let objects = fresh.iter().filter(|l| kind(l) == "object write").count();
        assert!(objects >= 4, "{key}: {fresh:#?}");
        assert!(
            fresh.len() <= objects + more,
            "{key}: {} requests for {objects} keys: {fresh:#?}",
            fresh.len()
        );
    }
    for pe in ["ci/app.dll", "ci/lib.dll"] {
        let pe_fresh = &fresh[pe];
        let asked_of_the_pdb = pe_fresh.iter().filter(|l| {
            kind(l) == "object head"
                || (l.starts_with("GET") && l.contains("/_symdex/refs/"))
                || (l.starts_with("GET") && l.contains("/_symdex/uploads/"))
        });
        assert_eq!(asked_of_the_pdb.count(), 0, "{pe}: {pe_fresh:#?}");
    }
    // Each PDB serves the name its PE gives it: its own keys.
    let records = checks::manifest_records(&stack, SERVING).await;
    for (pdb, prefix) in [
        ("ci/app.pdb", "symbols/app.pdb/"),
        ("ci/lib.pdb", "symbols/lib.pdb/"),
    ] {
        assert!(
            records.iter().any(|r| r["ingest_key"] == pdb
                && r["published"].as_array().is_some_and(|keys| keys
                    .iter()
                    .any(|k| k.as_str().is_some_and(|k| k.starts_with(prefix))))),
            "{pdb}: {records:#?}"
        );
    }
}

/// Keys an unstripped binary published before its separate debug file arrives: the debug
/// file's keys for the binary's other bytes are conflicts decided on the object its copy found
/// (the copy and a HEAD, no record taken and dropped), and so are the `.meta` sidecars beside
/// them, unasked; the keys of the same bytes in both (debuginfod sections) are shared through
/// their record. And a file
/// smaller than the first read is identified by that read alone, wherever its headers lie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_another_upload_published_cost_a_copy_and_a_head_where_they_conflict() {
    let (stack, proxy, ctx) = counted().await;
    let fx = Fixtures::build();
    // An ELF file of ~100 KiB whose section headers (at its end) lie past the first 32 KiB.
    let big = tempfile::tempdir().unwrap();
    let source = "static const char pad[96 * 1024] = {1};\n\
                  int main(int c, char **v) { return pad[c]; }\n";
    std::fs::write(big.path().join("big.c"), source).unwrap();
    run_in(big.path(), &["gcc", "-O0", "-o", "big", "big.c"]);
    let big = big.path().join("big");
    let size = std::fs::metadata(&big).unwrap().len();
    assert!(size > 96 << 10 && size < 128 << 10, "{size} bytes");
    let inputs = [
        ("ci/big", big),
        ("ci/app", fx.path("app")),
        ("ci/app.debug", fx.path("app.debug")),
    ];
    let fresh = index_each(&stack, &proxy, &ctx, inputs).await;
    let requests = &fresh["ci/big"];
    let reads = requests.iter().filter(|l| kind(l) == "ingest read").count();
    assert_eq!(reads, 1, "{requests:#?}");
    let records = checks::manifest_records(&stack, SERVING).await;
    let debug = records
        .iter()
        .find(|r| r["ingest_key"] == "ci/app.debug")
        .expect("the debug file's record");
    let keys_in = |field: &str| -> Vec<&str> {
        let keys = debug[field]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        keys.iter().filter_map(|k| k.as_str()).collect()
    };
    let requests = &fresh["ci/app.debug"];
    let conflicts = keys_in("conflicts");
    assert!(conflicts.len() >= 2, "{debug:#}");
    // Decided by the copy and a HEAD; then waited for (refs/, invariant 8): the wait
    // recorded, and the key looked at again.
    for key in &conflicts {
        let (object, record) = naming(requests, key);
        assert!(object.len() <= 3, "{key}: {object:#?}");
        assert!(record.is_empty(), "{key}: its record asked: {record:#?}");
    }
    let files = conflicts.iter().filter(|k| !k.ends_with(".meta")).count();
    let waits = requests.iter().filter(|l| l.contains("_symdex/waiting/"));
    assert_eq!(waits.count(), files, "{requests:#?}");
    // The `.meta` sidecar beside a conflicting file conflicts with it, unasked: it describes
    // the binary's file, and goes with it.
    let sidecars: Vec<&&str> = conflicts.iter().filter(|k| k.ends_with(".meta")).collect();
    assert!(!sidecars.is_empty(), "{debug:#}");
    for key in sidecars {
        let (object, record) = naming(requests, key);
        assert!(
            object.is_empty() && record.is_empty(),
            "{key}: {object:#?} {record:#?}"
        );
    }
    // The keys both uploads serve the same bytes under: a record naming both, created
    // unread under a `create` lease that the debug file's finalize ends (the copy, a HEAD,
    // the record, a HEAD under it).
    let shared = keys_in("unchanged");
    assert!(!shared.is_empty(), "{debug:#}");
    for key in &shared {
        let (mut about, record) = naming(requests, key);
        about.extend(record);
        assert!(about.len() <= 4, "{key}: {about:#?}");
    }
    assert!(
        !requests.iter().any(|l| kind(l) == "record delete"),
        "{requests:#?}"
    );
    // The binary deleted, its keys go to the debug file waiting for them, whose ingest object
    // is read once: the first block says it still holds the upload's bytes, and indexing
    // starts from it.
    let delete = stack.s3.delete_object().bucket(INGEST).key("ci/app");
    delete.send().await.unwrap();
    let removed = stack.receive(1).await;
    let log = || std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    log();
    let response = handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let removal = log();
    let waiter_reads = removal
        .iter()
        .filter(|l| kind(l) == "ingest read" && l.contains("/ci/app.debug"))
        .count();
    assert_eq!(waiter_reads, 1, "{removal:#?}");
    // The debug file's waits end with the hand-over: a marker deleted per key it waited for
    // (and per sidecar beside one, which waits with its file); the binary waited for
    // nothing, and its removal deletes no marker of its own.
    let ended = removal
        .iter()
        .filter(|l| l.starts_with("DELETE") && l.contains("_symdex/waiting/"))
        .count();
    assert!(ended >= files && ended <= conflicts.len(), "{removal:#?}");
    let records = checks::manifest_records(&stack, SERVING).await;
    for key in conflicts.iter().filter(|k| !k.ends_with(".meta")) {
        let handed = records.iter().any(|r| {
            r["ingest_key"] == "ci/app.debug"
                && r["published"]
                    .as_array()
                    .is_some_and(|keys| keys.iter().any(|k| k == key))
        });
        assert!(handed, "{key}: not handed over");
    }
    let waiting = stack.objects(SERVING, "_symdex/waiting/").await;
    assert!(waiting.is_empty(), "the waits ended with the hand-over");
}

/// The same bytes uploaded again under another name (a CI re-run, a vendor library shipped
/// with every release): every key is the first upload's, of the same content, and is shared
/// through a record written once, naming both (refs/, invariant 7), its `create` lease
/// ended by the second upload's finalize; the first upload's record is read once for all
/// its keys; an alias found in place names its target itself (no record read back). Before:
/// 93 requests for this ELF file's 13 keys (the record written twice, the owner's upload
/// record read and the alias's record read back per key); now 62.
/// Counted with unconditional copies (as the tests racing writers over moto run): moto
/// ignores `If-None-Match` on CopyObject, and the copy would replace the first upload's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_bytes_uploaded_again_share_every_key() {
    let (stack, proxy, ctx) = counted_copying(false).await;
    let fx = Fixtures::build();
    index_each(&stack, &proxy, &ctx, [("ci/1/app", fx.path("app"))]).await;
    // The keys the first upload made a record for (its copy, unconditional here, was made
    // under one): met by the second as a record, not as an object alone.
    let recorded: Vec<String> = stack
        .objects(SERVING, "_symdex/refs/")
        .await
        .into_iter()
        .map(|(k, _)| {
            k["_symdex/refs/".len()..]
                .trim_end_matches(".json")
                .to_string()
        })
        .collect();
    let fresh = index_each(&stack, &proxy, &ctx, [("ci/2/app", fx.path("app"))]).await;
    let records = checks::manifest_records(&stack, SERVING).await;
    let of = |ingest: &str, field: &str| -> Vec<String> {
        let record = records.iter().find(|r| r["ingest_key"] == ingest).unwrap();
        let keys = record[field].as_array().cloned().unwrap_or_default();
        keys.iter()
            .filter_map(|k| k.as_str().map(String::from))
            .collect()
    };
    let first = of("ci/1/app", "published");
    let shared = of("ci/2/app", "unchanged");
    assert!(first.len() > 8, "{first:#?}");
    assert_eq!(shared, first, "every key shared");
    assert!(of("ci/2/app", "published").is_empty());
    let requests = &fresh["ci/2/app"];
    println!(
        "{} keys shared: {} requests {:?}",
        shared.len(),
        requests.len(),
        breakdown(requests)
    );
    // Per key: its object's creation refused, a look, the record written once (never read)
    // and a look under it.
    let alone: Vec<&String> = shared.iter().filter(|k| !recorded.contains(k)).collect();
    assert!(alone.len() + 1 >= shared.len(), "{recorded:#?}");
    for key in alone {
        let (object, records) = naming(requests, key);
        assert!(object.len() <= 3, "{key}: {object:#?}");
        assert_eq!(records.len(), 1, "{key}: {records:#?}");
        assert!(records[0].starts_with("PUT"), "{key}: {records:#?}");
    }
    let owner_reads = requests
        .iter()
        .filter(|l| l.starts_with("GET") && l.contains("/_symdex/uploads/"))
        .count();
    // The first upload's record: read once as the owner all its objects name, and once for
    // the listing that ends the lease it left on the key it made a record for.
    assert!(owner_reads <= 2, "the first upload's record: {requests:#?}");
    // Every key (its `.meta` sidecars and sections too): four requests, and around them the
    // ingest reads, the upload record (planned, finalized), the first upload's record, the
    // debug file's source-join record (read, written) and the manifest.
    let objects = objects_named(requests);
    assert!(objects.len() >= shared.len());
    assert!(
        requests.len() <= 4 * objects.len() + 12,
        "{} requests for {} keys: {requests:#?}",
        requests.len(),
        objects.len()
    );
    // A third upload of the same bytes finds every key's record (the second's, its lease
    // ended by the second's finalize): after its first key, each record is read (not guessed
    // absent, the owner not looked up), and read once: a key that learns the second's
    // listing decides on the record it read before (its write is a swap on that read).
    // Per key: the refused creation, a look, the record read and written, the size looked
    // at.
    let third = index_each(&stack, &proxy, &ctx, [("ci/3/app", fx.path("app"))]).await;
    let requests = &third["ci/3/app"];
    println!(
        "third upload: {} requests {:?}",
        requests.len(),
        breakdown(requests)
    );
    let mut guessed = 0;
    for key in &shared {
        let (_, records) = naming(requests, key);
        let reads = records.iter().filter(|l| l.starts_with("GET")).count();
        let writes = records.iter().filter(|l| l.starts_with("PUT")).count();
        assert_eq!(reads, 1, "{key}: {records:#?}");
        assert!(writes <= 2, "{key}: {records:#?}");
        guessed += writes - 1;
    }
    assert!(
        guessed <= 1,
        "records guessed absent after the first key: {requests:#?}"
    );
    let objects = objects_named(requests).len();
    assert!(
        requests.len() <= 5 * objects + 12,
        "{} requests for {objects} keys: {requests:#?}",
        requests.len()
    );
    // The store as it should be: all three reference every key.
    let (problems, references) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:#?}");
    for key in &shared {
        assert_eq!(references[key].len(), 3, "{key}: {references:#?}");
    }
}
