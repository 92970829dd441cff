//! S3 requests per artifact, counted at the endpoint: the functions talk to moto_server through
//! a proxy that logs every request it forwards. Prints the breakdown of a fresh artifact and of
//! a redelivery, and holds them to bounds, so a change that adds requests per key shows here.
//!
//! The goal is at most (keys + 4) requests per fresh artifact and 3 per redelivery.
//! A fresh key is one request: its object, created only where nothing is and naming the
//! upload as its owner, stands for its reference record (refs/, invariant 7); around the
//! keys an artifact costs 4 (ingest read, upload record planned and finalized — named by its
//! location, it stands for the source record — and the manifest: the ingest object's liveness
//! is answered by the artifact's own copy, made from the current object), so the ELF files
//! below are held to the goal (keys + 4, their source-join records apart); a PDB and a PE
//! naming it pay their debug id's record besides (keys + 6).
//!
//! Counted as Amazon S3 is asked: with `If-None-Match` on CopyObject (moto_server ignores it,
//! which changes no count with one writer; the tests that race writers over moto run with
//! SYMDEX_CONDITIONAL_COPY=false). Without it the first copy of an artifact takes a record
//! and a HEAD more: counted too.

#[path = "../support/checks.rs"]
mod checks;
#[path = "../support/fault_proxy.rs"]
mod fault_proxy;
#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use fault_proxy::FaultProxy;
use support::{config, run_in, sqs_event, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, Context};

mod compressed;
mod liveness;
mod per_artifact;
mod shared_keys;
mod source_joins;

/// Headers the third debug file's DWARF names beside its own source file.
const HEADERS: usize = 10;

/// A debug file built by gcc whose line table names `many.c` and `headers` headers (each
/// with an inline function it calls): its source paths fall into several join records.
fn debug_file_naming_headers(headers: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut main = String::new();
    let mut sum = String::from("0");
    for n in 0..headers {
        let header = format!("static inline int f{n}(int x) {{ return x * {n} + 1; }}\n");
        std::fs::write(dir.path().join(format!("h{n}.h")), header).unwrap();
        main.push_str(&format!("#include \"h{n}.h\"\n"));
        sum.push_str(&format!(" + f{n}(c)"));
    }
    main.push_str(&format!("int main(int c, char **v) {{ return {sum}; }}\n"));
    std::fs::write(dir.path().join("many.c"), main).unwrap();
    run_in(dir.path(), &["gcc", "-g", "-O0", "-o", "many", "many.c"]);
    run_in(
        dir.path(),
        &["objcopy", "--only-keep-debug", "many", "many.debug"],
    );
    dir
}

/// Uploads and indexes each input in turn (each its own message): the requests each made.
async fn index_each<'k, const N: usize>(
    stack: &Stack,
    proxy: &FaultProxy,
    ctx: &Arc<Context>,
    inputs: [(&'k str, std::path::PathBuf); N],
) -> BTreeMap<&'k str, Vec<String>> {
    let log = || std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    let mut fresh = BTreeMap::new();
    for (key, file) in inputs {
        stack.upload(key, &file).await;
        let messages = stack.receive(1).await;
        log();
        let event = sqs_event(&messages, &stack.queue_arn);
        let response = handle_indexer(ctx, event).await.unwrap();
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
        fresh.insert(key, log());
    }
    fresh
}

/// Whether a logged request is for a source-join record.
fn is_join_record(line: &str) -> bool {
    line.contains("/_symdex/sourcemap/") || line.contains("prefix=_symdex%2Fsourcemap%2F")
}

/// What one logged request was for.
fn kind(line: &str) -> &'static str {
    let (method, rest) = line.split_once(' ').unwrap_or((line, ""));
    let path = rest.split('?').next().unwrap_or("");
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    let in_serving = path.starts_with(&format!("/{SERVING}/"));
    let key = path.splitn(3, '/').nth(2).unwrap_or("");
    match (method, in_serving) {
        (_, false) if path.starts_with(&format!("/{INGEST}/")) => "ingest read",
        ("GET", true) if key.starts_with("_symdex/") => "record read",
        ("PUT", true) if key.starts_with("_symdex/") => "record write",
        ("DELETE", true) if key.starts_with("_symdex/") => "record delete",
        (_, true) if key.starts_with("_manifest/") => "manifest",
        ("HEAD", true) => "object head",
        ("PUT", true) if query.contains("partNumber") => "object part",
        ("PUT", true) => "object write",
        ("POST", true) => "object multipart",
        ("GET", true) if query.contains("list-type") => "list",
        ("GET", true) => "object read",
        _ => "other",
    }
}

/// The logged requests naming `key`'s object, and those naming its reference record.
fn naming<'a>(requests: &'a [String], key: &str) -> (Vec<&'a String>, Vec<&'a String>) {
    let record = format!("/_symdex/refs/{key}.json");
    let path = |l: &String| l.split('?').next().unwrap_or("").to_string();
    let object = requests.iter().filter(|l| path(l).ends_with(key)).collect();
    let records = requests
        .iter()
        .filter(|l| path(l).ends_with(&record))
        .collect();
    (object, records)
}

/// The distinct objects (published keys) the logged requests name.
fn objects_named(requests: &[String]) -> std::collections::BTreeSet<&str> {
    requests
        .iter()
        .filter(|l| kind(l).starts_with("object"))
        .map(|l| l.split(['?', ' ']).nth(1).unwrap_or(""))
        .collect()
}

fn breakdown(log: &[String]) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for line in log {
        *out.entry(kind(line)).or_default() += 1;
    }
    out
}

/// The stack, and an indexer talking to it through a proxy that logs every request, deployed
/// as by default (redirect aliases) and counted as Amazon S3 is asked (conditional copies).
async fn counted() -> (Stack, FaultProxy, Arc<Context>) {
    counted_copying(true).await
}

/// [`counted`], with copies conditional (as Amazon S3 honours them) or not (moto_server).
async fn counted_copying(conditional: bool) -> (Stack, FaultProxy, Arc<Context>) {
    counted_with(conditional, std::time::Duration::ZERO).await
}

/// [`counted_copying`], each request answered no sooner than `latency` after it arrived.
async fn counted_with(
    conditional: bool,
    latency: std::time::Duration,
) -> (Stack, FaultProxy, Arc<Context>) {
    counted_configured(conditional, latency, &[]).await
}

/// [`counted_with`], with more of the function's environment.
async fn counted_configured(
    conditional: bool,
    latency: std::time::Duration,
    env: &[(&str, &str)],
) -> (Stack, FaultProxy, Arc<Context>) {
    let stack = Stack::new().await;
    let proxy = FaultProxy::start_with_latency(&stack.moto.endpoint, 0, 1, latency).await;
    let client = stack.moto.s3_via(&proxy.endpoint).await;
    let conditional = conditional.to_string();
    let ctx = Arc::new(Context::new(
        config(
            &[
                ("SYMDEX_ALIASES", "redirect"),
                ("SYMDEX_CONDITIONAL_COPY", &conditional),
            ]
            .into_iter()
            .chain(env.iter().copied())
            .collect::<Vec<_>>(),
        ),
        client,
    ));
    (stack, proxy, ctx)
}
