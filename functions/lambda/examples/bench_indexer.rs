//! `make bench` (indexer part): a few hundred artifacts through a local S3 endpoint
//! (moto_server), indexed by the Lambda handler with ranged reads and server-side copies, beside
//! a naive indexer that downloads every object whole, in the same run. Prints figures only.
//!
//! Then the same files packed into archives (zip deflated, zip stored, tar.zst), each indexed
//! entry by entry: entries/s, MB/s expanded, bytes the function read.
//!
//! And the distinct files indexed with compressed copies off and on (SYMDEX_COMPRESS `none`,
//! `zstd`, `zstd,gzip`), each into a fresh bucket: artifacts/s, MB/s, stored bytes with copies.
//!
//! Usage: bench_indexer DIR [COUNT]   (DIR: artifacts to upload, repeated up to COUNT objects)

#[path = "../tests/support/fault_proxy.rs"]
mod fault_proxy;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use support::{config, Stack, INGEST};
use symdex_shared::reader::MemReader;

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A key as S3 notifications carry it: URL-encoded, a space as `+`.
fn encode(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'/' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The S3 notification of `key` created in the ingest bucket (a direct invocation's event,
/// and an SQS message's body).
fn created_event(key: &str) -> serde_json::Value {
    json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": INGEST}, "object": {"key": encode(key)}}}]})
}

/// The SQS message carrying [`created_event`].
fn created_message(id: &str, key: &str) -> aws_sdk_sqs::types::Message {
    aws_sdk_sqs::types::Message::builder()
        .message_id(id)
        .body(created_event(key).to_string())
        .build()
}

/// The benchmark's runs one after another, each printing its figures.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: bench_indexer DIR [COUNT]"));
    let count: usize = args.next().map_or(300, |c| c.parse().unwrap());
    let sources = files(&dir);
    assert!(!sources.is_empty(), "no files in {}", dir.display());
    let stack = Stack::new().await;
    let (keys, total_size) = upload_corpus(&stack, &dir, &sources, count).await;
    println!(
        "indexer bench: {count} objects ({} MiB) in a local S3 endpoint (moto_server)",
        total_size >> 20
    );
    let max_read = bench_handler(&stack, &keys).await;
    bench_requests(&stack, &keys[..sources.len().min(keys.len())]).await;
    bench_batches(&stack, &keys).await;
    bench_archives(&stack, &dir, &sources).await;
    bench_compress(&stack, &keys[..sources.len().min(keys.len())]).await;
    bench_naive(&stack, &keys).await;
    let max_binary = 256 * 1024;
    println!(
        "target: bytes read per artifact < {max_binary}: {} (largest: {} bytes for {})",
        if max_read.0 < max_binary {
            "met"
        } else {
            "NOT met"
        },
        max_read.0,
        max_read.1
    );
}

/// Uploads `count` objects to the ingest bucket, the files of `dir` over and over: their keys
/// and their total size.
async fn upload_corpus(
    stack: &Stack,
    dir: &Path,
    sources: &[PathBuf],
    count: usize,
) -> (Vec<String>, u64) {
    let mut keys = Vec::new();
    let mut total_size = 0u64;
    for i in 0..count {
        let src = &sources[i % sources.len()];
        let key = format!(
            "bench/{}/{}",
            i / sources.len(),
            src.strip_prefix(dir).unwrap().display()
        );
        stack.upload(&key, src).await;
        total_size += std::fs::metadata(src).unwrap().len();
        keys.push(key);
    }
    stack.drain().await;
    (keys, total_size)
}

/// symdex: the Lambda handler, one direct S3 event per object. Returns the most bytes read
/// for one artifact, and its key.
async fn bench_handler(stack: &Stack, keys: &[String]) -> (u64, String) {
    let ctx = Arc::new(symdex_lambda::Context::new(
        config(&[]),
        stack.moto.s3().await,
    ));
    let started = Instant::now();
    let mut max_read = (0u64, String::new());
    for key in keys {
        let before = ctx.store.stats().range_bytes();
        symdex_lambda::handle_indexer(&ctx, created_event(key))
            .await
            .unwrap();
        let read = ctx.store.stats().range_bytes() - before;
        if read > max_read.0 {
            max_read = (read, key.clone());
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = ctx.store.stats();
    let n = keys.len() as f64;
    println!(
        "symdex (ranged reads)  : {:8.1} artifacts/s  {:6.1} GETs/artifact  {:9.0} bytes read/artifact  copies {} (+{} part copies), artifact bytes through the function for publishing: 0",
        n / secs,
        stats.range_requests() as f64 / n,
        stats.range_bytes() as f64 / n,
        stats.copies(),
        stats.part_copies()
    );
    println!(
        "                         reference/manifest bookkeeping: {:.1} small GETs/artifact, {:.0} bytes/artifact",
        stats.get_requests() as f64 / n,
        stats.get_bytes() as f64 / n
    );
    max_read
}

/// The same objects as SQS batches: one message per invocation, then batches of 10 with the
/// messages of a batch processed concurrently (SYMDEX_CONCURRENCY), each into a fresh bucket.
async fn bench_batches(stack: &Stack, keys: &[String]) {
    let batch_objects = keys.len().min(120);
    // Through a proxy adding S3-like latency too: concurrency hides latency; against moto
    // alone the single Python process is the bottleneck, whatever the concurrency.
    let latency = std::time::Duration::from_millis(20);
    let proxy =
        fault_proxy::FaultProxy::start_with_latency(&stack.moto.endpoint, 0, 1, latency).await;
    let slow_client = stack.moto.s3_via(&proxy.endpoint).await;
    println!("SQS batches ({batch_objects} objects, one S3 notification per message):");
    for (slow, batch, concurrency) in [
        (false, 1usize, 1usize),
        (false, 10, 4),
        (false, 10, 10),
        (true, 1, 1),
        (true, 10, 4),
        (true, 10, 10),
    ] {
        let bucket = format!("bench-batch-{slow}-{batch}-{concurrency}");
        stack
            .s3
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap();
        let concurrency_text = concurrency.to_string();
        let client = if slow {
            slow_client.clone()
        } else {
            stack.moto.s3().await
        };
        let ctx = Arc::new(symdex_lambda::Context::new(
            config(&[
                ("SYMDEX_SERVING_BUCKET", bucket.as_str()),
                ("SYMDEX_CONCURRENCY", concurrency_text.as_str()),
            ]),
            client,
        ));
        let messages: Vec<aws_sdk_sqs::types::Message> = keys[..batch_objects]
            .iter()
            .enumerate()
            .map(|(i, key)| created_message(&format!("m{i}"), key))
            .collect();
        let started = Instant::now();
        for chunk in messages.chunks(batch) {
            let response =
                symdex_lambda::handle_indexer(&ctx, support::sqs_event(chunk, "arn:bench"))
                    .await
                    .unwrap();
            assert_eq!(response["batchItemFailures"], json!([]));
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "  {:<22} batch {batch:>2}, concurrency {concurrency:>2}: {:8.1} artifacts/s",
            if slow {
                "+20 ms per request,"
            } else {
                "moto directly,"
            },
            batch_objects as f64 / secs
        );
    }
}

/// Ingest with compressed copies off and on: each distinct artifact indexed once (one direct
/// S3 event each) into a fresh bucket per setting, three rounds alternating the settings
/// (median time); then the serving bucket's bytes with copies beside without (all objects).
/// Redirect aliases, as the module deploys behind CloudFront, where copies are answered.
async fn bench_compress(stack: &Stack, keys: &[String]) {
    let input = input_bytes(stack, keys).await;
    let settings = ["none", "zstd", "zstd,gzip"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    let mut stored = vec![(0u64, 0u64); settings.len()];
    for round in 0..3 {
        for (i, compress) in settings.iter().enumerate() {
            let bucket = format!("bench-compress-{round}-{}", compress.replace(',', "-"));
            stack
                .s3
                .create_bucket()
                .bucket(&bucket)
                .send()
                .await
                .unwrap();
            let ctx = Arc::new(symdex_lambda::Context::new(
                config(&[
                    ("SYMDEX_SERVING_BUCKET", bucket.as_str()),
                    ("SYMDEX_COMPRESS", compress),
                    ("SYMDEX_ALIASES", "redirect"),
                ]),
                stack.moto.s3().await,
            ));
            let started = Instant::now();
            for key in keys {
                symdex_lambda::handle_indexer(&ctx, created_event(key))
                    .await
                    .unwrap();
            }
            times[i].push(started.elapsed().as_secs_f64());
            stored[i] = bucket_bytes(stack, &bucket).await;
        }
    }
    println!(
        "compressed copies ({} distinct artifacts, {:.1} MiB, one event each, redirect aliases, median of 3 rounds):",
        keys.len(),
        input as f64 / (1 << 20) as f64
    );
    let median = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let base = median(&mut times[0].clone());
    for (i, compress) in settings.iter().enumerate() {
        let secs = median(&mut times[i]);
        println!(
            "  SYMDEX_COMPRESS={compress:<10}: {:8.1} artifacts/s  {:6.1} MB/s  ({:.2}x the time without)  stored {} bytes ({:.2}x without), of which copies {}",
            keys.len() as f64 / secs,
            input as f64 / 1e6 / secs,
            secs / base,
            stored[i].0,
            stored[i].0 as f64 / stored[0].0.max(1) as f64,
            stored[i].1
        );
    }
}

/// All the bytes `bucket` holds, and those of compressed copies (`_symdex/encoded/`).
async fn bucket_bytes(stack: &Stack, bucket: &str) -> (u64, u64) {
    let (mut all, mut copies) = (0u64, 0u64);
    let mut pages = stack
        .s3
        .list_objects_v2()
        .bucket(bucket)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for o in page.unwrap().contents() {
            let size = o.size().unwrap_or(0) as u64;
            all += size;
            if o.key().unwrap_or("").starts_with("_symdex/encoded/") {
                copies += size;
            }
        }
    }
    (all, copies)
}

/// Naive: download every object whole, then identify it from memory.
async fn bench_naive(stack: &Stack, keys: &[String]) {
    let started = Instant::now();
    let mut naive_bytes = 0u64;
    for key in keys {
        let body = stack.read(INGEST, key).await;
        naive_bytes += body.len() as u64;
        let _ = symdex_shared::identify(&MemReader(body), &Default::default());
    }
    let secs = started.elapsed().as_secs_f64();
    let n = keys.len() as f64;
    println!(
        "naive (whole download) : {:8.1} artifacts/s  {:6.1} GETs/artifact  {:9.0} bytes read/artifact  (identification only, no publishing)",
        n / secs,
        1.0,
        naive_bytes as f64 / n
    );
}

/// S3 requests per artifact counted at the endpoint (a logging proxy before moto_server), and
/// stored / input bytes, in the default deployment (redirect aliases): each distinct artifact
/// indexed into a fresh bucket, then every one delivered again. The goals (issue "one stored
/// copy per artifact"): keys + 4 requests per fresh artifact, 3 per redelivery, 1.05x bytes.
async fn bench_requests(stack: &Stack, keys: &[String]) {
    let bucket = "bench-requests";
    stack
        .s3
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap();
    let proxy = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 0, 1).await;
    let ctx = Arc::new(symdex_lambda::Context::new(
        config(&[
            ("SYMDEX_SERVING_BUCKET", bucket),
            ("SYMDEX_ALIASES", "redirect"),
            // Counted as Amazon S3 is asked (it honours `If-None-Match` on CopyObject;
            // moto_server ignores it, which changes no count with one artifact at a time).
            ("SYMDEX_CONDITIONAL_COPY", "true"),
        ]),
        stack.moto.s3_via(&proxy.endpoint).await,
    ));
    let fresh = index_fresh(&ctx, &proxy, keys).await;
    let (again, over) = index_again(&ctx, &proxy, keys).await;
    let input = input_bytes(stack, keys).await;
    let stored = stored_bytes(stack, bucket).await;
    let n = keys.len() as f64;
    let per_artifact = stored.objects as f64 / n;
    println!(
        "S3 requests per artifact ({} artifacts, {per_artifact:.1} published keys each, redirect aliases): fresh {:.1}: {:.1} for the artifact (goal keys + 4 = {:.1}) and {:.1} for debug files' source-join records; redelivered {:.1} (goal 3)",
        keys.len(),
        fresh.requests as f64 / n,
        (fresh.requests - fresh.joins) as f64 / n,
        per_artifact + 4.0,
        fresh.joins as f64 / n,
        again as f64 / n,
    );
    fresh.print(n);
    if !over.is_empty() {
        println!(
            "  redelivered in more than 3 requests (a skipped or rejected input identified \
             again, keys added since checked): {}",
            over.join(", ")
        );
    }
    let share = |bytes: u64| bytes as f64 / input.max(1) as f64;
    let kinds: Vec<String> = stored
        .by_kind
        .iter()
        .map(|(kind, bytes)| format!("{kind} {:.2}", share(*bytes)))
        .collect();
    println!(
        "S3 stored / input bytes: {:.2} published (goal 1.05: {}), {:.2} with _symdex/ and _manifest/",
        share(stored.published),
        kinds.join(", "),
        share(stored.published + stored.bookkeeping),
    );
}

/// A debug file's source-join records (sourcemap.rs), counted apart: proportional to the
/// source paths it names, not to the artifact.
fn is_join(line: &str) -> bool {
    line.contains("/_symdex/sourcemap/") || line.contains("prefix=_symdex%2Fsourcemap%2F")
}

/// As the module wires it: S3 -> SQS -> the function, one message per invocation; SQS
/// counts the deliveries (a first one is taken to be a new upload).
fn sqs_created(key: &str) -> serde_json::Value {
    support::sqs_event(&[created_message(key, key)], "arn:bench")
}

/// What the requests of fresh artifacts came to ([`index_fresh`]).
#[derive(Default)]
struct FreshRequests {
    /// Requests in all, those for source-join records, and round trips one after another.
    requests: usize,
    joins: usize,
    rounds: usize,
    /// Per artifact, apart: those whose keys were all new, and those meeting keys another
    /// upload holds (an unstripped binary and its debug file, two Breakpad files of one
    /// module: a conflict is decided and waited for, a shared key takes a record). Each as
    /// (artifacts, requests of its own, keys written): its join records and the store's
    /// one-time markers apart.
    new_keys: (usize, usize, usize),
    met_keys: (usize, usize, usize),
    /// Requests by what they were for ([`request_kind`]).
    kinds: std::collections::BTreeMap<&'static str, usize>,
    /// Requests per artifact, and its key.
    most: Vec<(usize, String)>,
}

impl FreshRequests {
    /// Counts the logged requests `lines` of one fresh artifact.
    fn count(&mut self, lines: &[String]) {
        self.joins += lines.iter().filter(|l| is_join(l)).count();
        let mut first_read = true;
        for line in lines {
            *self
                .kinds
                .entry(request_kind(line, &mut first_read))
                .or_default() += 1;
        }
        let own: Vec<&String> = lines
            .iter()
            .filter(|l| !is_join(l) && request_kind(l, &mut false) != "one-time markers")
            .collect();
        let written = own
            .iter()
            .filter(|l| {
                (l.starts_with("PUT") || l.starts_with("POST"))
                    && !l.contains("/_symdex/")
                    && !l.contains("/_manifest/")
                    && !l.contains("partNumber")
                    && !l.contains("uploadId=")
            })
            .count();
        let met = own
            .iter()
            .any(|l| l.contains("/_symdex/waiting/") || l.contains("/_symdex/refs/"));
        let split = if met {
            &mut self.met_keys
        } else {
            &mut self.new_keys
        };
        split.0 += 1;
        split.1 += own.len();
        split.2 += written;
    }

    /// Prints the split, the round trips, where the requests go, and the artifacts taking the
    /// most (`n` artifacts in all).
    fn print(mut self, n: f64) {
        for (what, (artifacts, requests, written)) in [
            ("whose keys were all new", self.new_keys),
            ("meeting keys another upload holds", self.met_keys),
        ] {
            if artifacts > 0 {
                let per = |n: usize| n as f64 / artifacts as f64;
                println!(
                    "  {artifacts} artifacts {what}: {:.1} requests for {:.1} keys each (goal keys + 4 = {:.1})",
                    per(requests),
                    per(written),
                    per(written) + 4.0
                );
            }
        }
        println!(
            "  round trips one after another per fresh artifact: {:.1} (requests that need no \
             answer of each other are made at once)",
            self.rounds as f64 / n
        );
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|(kind, count)| format!("{kind} {:.2}", *count as f64 / n))
            .collect();
        println!("  where they go, per fresh artifact: {}", kinds.join(", "));
        self.most.sort();
        let most: Vec<String> = self
            .most
            .iter()
            .rev()
            .take(3)
            .map(|(n, key)| format!("{key} ({n})"))
            .collect();
        println!("  most requests for a fresh artifact: {}", most.join(", "));
    }
}

/// Indexes each artifact as a first delivery, counting its requests at `proxy`.
async fn index_fresh(
    ctx: &Arc<symdex_lambda::Context>,
    proxy: &fault_proxy::FaultProxy,
    keys: &[String],
) -> FreshRequests {
    let log = || std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    // Round trips waited for one after another (requests made at once count once).
    let rounds = || proxy.faults.take_rounds() as usize;
    let mut fresh = FreshRequests::default();
    rounds();
    for key in keys {
        let response = symdex_lambda::handle_indexer(ctx, sqs_created(key))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], json!([]));
        let lines = log();
        fresh.count(&lines);
        if std::env::var_os("SYMDEX_BENCH_DETAIL").is_some() {
            print_detail(key, &lines);
        }
        fresh.requests += lines.len();
        fresh.rounds += rounds();
        fresh.most.push((lines.len(), key.clone()));
    }
    fresh
}

/// SYMDEX_BENCH_DETAIL: the requests of an artifact taking more than its object writes and 4.
fn print_detail(key: &str, lines: &[String]) {
    let own: Vec<&String> = lines.iter().filter(|l| !is_join(l)).collect();
    let writes = own
        .iter()
        .filter(|l| l.starts_with("PUT") && !l.contains("/_symdex/") && !l.contains("/_manifest/"))
        .count();
    if own.len() > writes + 4 {
        println!(
            "DETAIL {key}: {} own requests, {writes} object writes",
            own.len()
        );
        for l in own {
            println!("   {l}");
        }
    }
}

/// Delivers every artifact again: the requests in all, and the artifacts taking more than 3
/// (with their counts).
async fn index_again(
    ctx: &Arc<symdex_lambda::Context>,
    proxy: &fault_proxy::FaultProxy,
    keys: &[String],
) -> (usize, Vec<String>) {
    let take = || std::mem::take(&mut *proxy.faults.log.lock().unwrap()).len();
    let mut again = 0;
    let mut over = Vec::new();
    for key in keys {
        let response = symdex_lambda::handle_indexer(ctx, support::redelivered(&sqs_created(key)))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], json!([]));
        let n = take();
        if n > 3 {
            over.push(format!("{key} ({n})"));
        }
        again += n;
    }
    (again, over)
}

/// The bytes of the artifacts uploaded.
async fn input_bytes(stack: &Stack, keys: &[String]) -> u64 {
    let mut input = 0u64;
    for key in keys {
        let head = stack
            .s3
            .head_object()
            .bucket(INGEST)
            .key(key)
            .send()
            .await
            .unwrap();
        input += head.content_length().unwrap_or(0) as u64;
    }
    input
}

/// What a serving bucket stores ([`stored_bytes`]).
#[derive(Default)]
struct Stored {
    /// Bytes of the published keys, of `_symdex/` and `_manifest/`, and published keys.
    published: u64,
    bookkeeping: u64,
    objects: usize,
    /// Bytes of the published keys by kind.
    by_kind: std::collections::BTreeMap<&'static str, u64>,
}

/// What `bucket` stores, listed.
async fn stored_bytes(stack: &Stack, bucket: &str) -> Stored {
    let mut stored = Stored::default();
    let mut pages = stack
        .s3
        .list_objects_v2()
        .bucket(bucket)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for o in page.unwrap().contents() {
            let size = o.size().unwrap_or(0) as u64;
            let key = o.key().unwrap_or("");
            if key.starts_with("_symdex/") || key.starts_with("_manifest/") {
                stored.bookkeeping += size;
            } else if !key.ends_with("/index2.txt") && key != "index2.txt" {
                stored.published += size;
                stored.objects += 1;
                let kind = if key.contains("/section/") {
                    "debuginfod sections"
                } else if key.ends_with(".meta") {
                    "sidecars"
                } else if key.contains("/source/") {
                    "sources"
                } else {
                    "artifacts"
                };
                *stored.by_kind.entry(kind).or_default() += size;
            }
        }
    }
    stored
}

/// What one logged request of a fresh artifact was for (`first_read`: no ingest read of the
/// artifact was seen yet, so this one is its first block).
fn request_kind(line: &str, first_read: &mut bool) -> &'static str {
    let (method, rest) = line.split_once(' ').unwrap_or((line, ""));
    let once = ["/_symdex/layout.json", "max-keys=1", "index2.txt"];
    if rest.starts_with(&format!("/{INGEST}/")) {
        return match (method, std::mem::take(first_read)) {
            ("HEAD", _) => "liveness HEAD",
            (_, true) => "first block",
            (_, false) => "further identification reads",
        };
    }
    if once.iter().any(|m| rest.contains(m)) {
        return "one-time markers";
    }
    if rest.contains("/_symdex/sourcemap/") || rest.contains("prefix=_symdex%2Fsourcemap%2F") {
        return "source-join records";
    }
    let record = |(read, written): (&'static str, &'static str)| {
        if method == "GET" {
            read
        } else {
            written
        }
    };
    if rest.contains("/_symdex/ids/") {
        return "PE/PDB name records";
    }
    if rest.contains("/_symdex/uploads/") {
        return record(("upload records read", "upload record writes"));
    }
    if rest.contains("/_symdex/refs/") {
        return "key records";
    }
    if rest.contains("/_symdex/waiting/") {
        return "waits for conflicting keys";
    }
    if rest.contains("/_manifest/") {
        return "manifest";
    }
    match method {
        "HEAD" => "object HEADs",
        "POST" => "multipart copies",
        "PUT" if rest.contains("partNumber") => "multipart copies",
        "PUT" => "object writes",
        _ => "other",
    }
}

/// The corpus packed as one archive per shape (with the real tools), each uploaded and indexed
/// by the handler into a bucket of its own.
async fn bench_archives(stack: &Stack, dir: &Path, sources: &[PathBuf]) {
    let work = tempfile::tempdir().unwrap();
    let list = work.path().join("files.txt");
    let names: Vec<String> = sources
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    std::fs::write(&list, names.join("\n")).unwrap();
    let expanded: u64 = sources
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    println!(
        "archives ({} entries, {:.1} MiB expanded), one invocation each:",
        sources.len(),
        expanded as f64 / (1 << 20) as f64
    );
    for (shape, file, command) in [
        (
            "zip (deflated)",
            "deflated.zip",
            "zip -q -6 -@ {out} < {list}",
        ),
        ("zip (stored)", "stored.zip", "zip -q -0 -@ {out} < {list}"),
        (
            "tar.zst",
            "corpus.tar.zst",
            "tar --zstd -cf {out} -T {list}",
        ),
    ] {
        let out = work.path().join(file);
        let script = command
            .replace("{out}", &out.display().to_string())
            .replace("{list}", &list.display().to_string());
        let status = std::process::Command::new("sh")
            .args(["-c", &script])
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
        let key = format!("archives/{}", out.file_name().unwrap().to_string_lossy());
        stack.upload(&key, &out).await;
        stack.drain().await;
        let bucket = format!("bench-archive-{}", file.replace('.', "-"));
        stack
            .s3
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .unwrap();
        let ctx = Arc::new(symdex_lambda::Context::new(
            config(&[("SYMDEX_SERVING_BUCKET", bucket.as_str())]),
            stack.moto.s3().await,
        ));
        let event = created_event(&key);
        let started = Instant::now();
        symdex_lambda::handle_indexer(&ctx, event).await.unwrap();
        let secs = started.elapsed().as_secs_f64();
        let stats = ctx.store.stats();
        let size = std::fs::metadata(&out).unwrap().len();
        println!(
            "  {shape:<15}: {:8.1} entries/s  {:7.1} MB/s expanded  archive {} bytes, read by the function {} bytes, {} part copies",
            sources.len() as f64 / secs,
            expanded as f64 / 1e6 / secs,
            size,
            stats.range_bytes(),
            stats.part_copies()
        );
    }
}
