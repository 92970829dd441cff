//! What source joins cost: a debug file without them, a file no format claims, claims.

use std::sync::Arc;

use symdex_lambda::{handle_indexer, Context};

use super::{
    breakdown, checks, counted, debug_file_naming_headers, index_each, is_join_record, kind,
    HEADERS,
};
use crate::fault_proxy::FaultProxy;
use crate::support::{config, redelivered, run_in, sqs_event, Fixtures, Stack, SERVING};
/// Without source joins (SYMDEX_SOURCE_JOINS=false, a deployment nobody uploads sources to), a
/// debug file naming many source files costs what any fresh artifact does: keys + 4, no
/// request for a join record (its paths are named missing in its record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debug_file_costs_keys_plus_four_without_source_joins() {
    let stack = Stack::new().await;
    let proxy =
        FaultProxy::start_with_latency(&stack.moto.endpoint, 0, 1, Default::default()).await;
    let client = stack.moto.s3_via(&proxy.endpoint).await;
    let ctx = Arc::new(Context::new(
        config(&[
            ("SYMDEX_ALIASES", "redirect"),
            ("SYMDEX_CONDITIONAL_COPY", "true"),
            ("SYMDEX_SOURCE_JOINS", "false"),
        ]),
        client,
    ));
    let dir = debug_file_naming_headers(HEADERS);
    let key = "ci/many.debug";
    let fresh = index_each(&stack, &proxy, &ctx, [(key, dir.path().join("many.debug"))]).await;
    let log = &fresh[key];
    assert!(!log.iter().any(|l| is_join_record(l)), "{log:#?}");
    // The store's one-time markers aside (this is its first artifact), as above.
    let marker = |l: &str| {
        l.contains("index2.txt") || l.contains("_symdex/layout.json") || l.contains("max-keys=1")
    };
    let objects: std::collections::BTreeSet<&str> = log
        .iter()
        .filter(|l| kind(l) == "object write" && l.starts_with("PUT") && !marker(l))
        .map(|l| l.split(['?', ' ']).nth(1).unwrap_or(""))
        .collect();
    let counted = log.iter().filter(|l| !marker(l)).count();
    println!(
        "{key} without source joins: {counted} requests for {} keys {:?}",
        objects.len(),
        breakdown(log)
    );
    assert!(objects.len() >= 5, "{log:#?}");
    assert!(counted <= objects.len() + 4, "{log:#?}");
    let records = checks::manifest_records(&stack, SERVING).await;
    let record = records.iter().find(|r| r["ingest_key"] == key).unwrap();
    let missing = record["sources"]["missing"].as_array().unwrap();
    assert!(missing.len() > HEADERS, "{record}");
}

/// A file no format claims (sourcemap.rs, "sources without flags"): its ingest read, one join
/// record read and written (its note, for a debug file naming it later) and the manifest;
/// nothing published. Binary data, or source joins off: no join record asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_no_format_claims_costs_its_join_record_and_publishes_nothing() {
    let (stack, proxy, ctx) = counted().await;
    let fx = Fixtures::build();
    let key = "ci/notes.txt";
    let fresh = index_each(&stack, &proxy, &ctx, [(key, fx.path("notes.txt"))]).await;
    let log = &fresh[key];
    let marker = |l: &str| {
        l.contains("index2.txt") || l.contains("_symdex/layout.json") || l.contains("max-keys=1")
    };
    let counted: Vec<&String> = log.iter().filter(|l| !marker(l)).collect();
    println!("{key}: {} requests {:?}", counted.len(), breakdown(log));
    let joins = counted.iter().filter(|l| is_join_record(l)).count();
    assert_eq!(joins, 2, "{log:#?}");
    assert!(counted.len() <= 4, "{log:#?}");
    assert!(
        !counted.iter().any(|l| kind(l) == "object write"),
        "{log:#?}"
    );
    let records = checks::manifest_records(&stack, SERVING).await;
    let record = records.iter().find(|r| r["ingest_key"] == key).unwrap();
    assert_eq!(record["action"], "skipped", "{record}");
    // Binary data (a NUL in its head) is no source text: no join record asked.
    let blob = fx.path("blob.bin");
    std::fs::write(&blob, (0u8..=255).cycle().take(5000).collect::<Vec<u8>>()).unwrap();
    let fresh = index_each(&stack, &proxy, &ctx, [("ci/blob.bin", blob)]).await;
    let log = &fresh["ci/blob.bin"];
    assert!(!log.iter().any(|l| is_join_record(l)), "{log:#?}");

    let stack = Stack::new().await;
    let proxy =
        FaultProxy::start_with_latency(&stack.moto.endpoint, 0, 1, Default::default()).await;
    let client = stack.moto.s3_via(&proxy.endpoint).await;
    let off = [("SYMDEX_SOURCE_JOINS", "false")];
    let ctx = Arc::new(Context::new(config(&off), client));
    let fresh = index_each(&stack, &proxy, &ctx, [(key, fx.path("notes.txt"))]).await;
    assert!(
        !fresh[key].iter().any(|l| is_join_record(l)),
        "{:#?}",
        fresh[key]
    );
}

/// A source tarball indexed before its debug file (sourcemap.rs, "sources without flags"):
/// each of its entries is noted, and the debug file naming them all has the tarball walked
/// again once — about the reads of its first walk, not one walk per entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debug_file_claiming_a_tarballs_entries_walks_it_again_once() {
    let (stack, proxy, ctx) = counted().await;
    let dir = debug_file_naming_headers(HEADERS);
    // Entries under the checkout's directory: two path components, as a file no flag names
    // must share with a want (sourcemap.rs).
    let tar =
        "d=$(basename \"$PWD\") && cd .. && tar -czf \"$d/src.tar.gz\" \"$d/many.c\" \"$d\"/h*.h";
    run_in(dir.path(), &["sh", "-c", tar]);
    let inputs = [
        ("ci/src.tar.gz", dir.path().join("src.tar.gz")),
        ("ci/many.debug", dir.path().join("many.debug")),
    ];
    let fresh = index_each(&stack, &proxy, &ctx, inputs).await;
    let tarball_reads = |log: &[String]| {
        log.iter()
            .filter(|l| kind(l) == "ingest read" && l.contains("/ci/src.tar.gz"))
            .count()
    };
    let first_walk = tarball_reads(&fresh["ci/src.tar.gz"]);
    let claimed = tarball_reads(&fresh["ci/many.debug"]);
    println!("tarball reads: {first_walk} by its own walk, {claimed} by the debug file's claim");
    assert!(first_walk >= 1);
    assert!(
        (1..=first_walk + 1).contains(&claimed),
        "{claimed} reads of the tarball: {:#?}",
        fresh["ci/many.debug"]
    );
    let records = checks::manifest_records(&stack, SERVING).await;
    let debug = records
        .iter()
        .find(|r| r["ingest_key"] == "ci/many.debug")
        .unwrap();
    assert_eq!(debug["sources"]["served"], HEADERS + 1, "{debug}");
}

/// A source a debug file named, delivered again: answered from its upload record, as any
/// upload indexed in full (a redelivery costs at most 3 requests), although its message does
/// not say it is a source (no SYMDEX_SOURCE_EXTENSIONS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_source_delivered_again_is_answered_from_its_record() {
    let (stack, proxy, ctx) = counted().await;
    let fx = Fixtures::build();
    // Under the checkout's directory: two path components, as a file no flag names must
    // share with a want (sourcemap.rs).
    let checkout = fx.dir.path().file_name().unwrap().to_string_lossy();
    let source_key = format!("ci/{checkout}/prog.c");
    let inputs = [
        ("ci/app.debug", fx.path("app.debug")),
        (source_key.as_str(), fx.path("prog.c")),
    ];
    index_each(&stack, &proxy, &ctx, inputs).await;
    let records = checks::manifest_records(&stack, SERVING).await;
    let source = records
        .iter()
        .find(|r| r["ingest_key"] == source_key)
        .unwrap();
    assert_eq!(source["action"], "indexed", "a source: {source}");
    stack.upload(&source_key, &fx.path("prog.c")).await;
    let messages = stack.receive(1).await;
    proxy.faults.log.lock().unwrap().clear();
    let event = redelivered(&sqs_event(&messages, &stack.queue_arn));
    let response = handle_indexer(&ctx, event).await.unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let again = std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    println!(
        "a named source again: {} requests {:?}",
        again.len(),
        breakdown(&again)
    );
    assert!(again.len() <= 3, "{again:#?}");
    let records = checks::manifest_records(&stack, SERVING).await;
    let last = records
        .iter()
        .rfind(|r| r["ingest_key"] == source_key)
        .unwrap();
    // A repetition of the decision the manifest holds: counted, not recorded again.
    assert_eq!(last["action"], "repeated", "{last}");
    assert_eq!(last["repeated"]["unchanged"], 1, "{last}");
}
