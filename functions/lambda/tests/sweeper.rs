//! Retention on S3: the sweeper (scheduled by EventBridge) expires try uploads through the
//! reference-counted delete, deletes their ingest objects, can be promoted against, and
//! resumes after runs that died part-way (through a proxy failing S3 requests).

#[path = "support/checks.rs"]
mod checks;
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use support::{config, scheduled_event, sqs_event, Fixtures, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, handle_remover, handle_sweeper, Context};
use symdex_shared::encoded::Encoding;

const DAY: Duration = Duration::from_secs(86_400);

const TRY_DEBUG: &str = "channel=try/build=1/app.debug";
const TRY_BIN: &str = "channel=try/build=1/app";
const RELEASE_DEBUG: &str = "channel=release/build=2/app.debug";

/// Indexes a try build (debug file + binary) and a release build of the same debug file.
async fn indexed_store(stack: &Stack, fx: &Fixtures, ctx: &Arc<Context>) {
    for (key, file) in [
        (TRY_DEBUG, "app.debug"),
        (TRY_BIN, "app.stripped"),
        (RELEASE_DEBUG, "app.debug"),
    ] {
        stack
            .put(key, std::fs::read(fx.path(file)).unwrap(), &[])
            .await;
    }
    let created = stack.receive(3).await;
    let response = handle_indexer(ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(response["batchItemFailures"], json!([]), "{response}");
}

/// Runs the sweeper at `at` until a run reaches the end of the upload records; returns the
/// runs' answers.
async fn sweep_all(ctx: &Arc<Context>, at: SystemTime) -> Vec<Value> {
    let mut runs = Vec::new();
    loop {
        let answer = handle_sweeper(ctx, scheduled_event(at)).await.unwrap();
        let done = answer["next"].is_null();
        runs.push(answer);
        if done {
            return runs;
        }
        assert!(runs.len() < 20, "the sweeper never finished: {runs:?}");
    }
}

fn total(runs: &[Value], field: &str) -> u64 {
    runs.iter().map(|r| r[field].as_u64().unwrap_or(0)).sum()
}

async fn ingest_keys(stack: &Stack) -> Vec<String> {
    stack.keys(INGEST, "").await
}

/// A try build's unstripped binary holds the build id's `debuginfo`; the release's separate
/// debug file waits for it (refs/, invariant 8). The expiry hands it over: the debug file,
/// indexed again from its ingest object, serves the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_hands_the_keys_it_frees_to_the_uploads_waiting_for_them() {
    expiry_hands_keys_over(&[]).await;
}

/// The same with compressed copies: the expiry deletes the binary's copy with the key, and
/// the debug file's re-index makes its own (a copy always encodes what its key holds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_takes_a_key_s_copy_and_the_next_holder_makes_its_own() {
    let (stack, fx) = expiry_hands_keys_over(&[("SYMDEX_COMPRESS", "zstd")]).await;
    let copy = format!("_symdex/encoded/zstd/buildid/{}/debuginfo", fx.build_id());
    let stored = stack.objects(SERVING, &copy).await.remove(0).1;
    let mut decoded = Vec::new();
    symdex_shared::encoded::decode(Encoding::Zstd, &stored[..], &mut decoded).unwrap();
    assert!(
        decoded == std::fs::read(fx.path("app.debug")).unwrap(),
        "the debug file's bytes"
    );
}

async fn expiry_hands_keys_over(extra: &[(&str, &str)]) -> (Stack, Fixtures) {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = Arc::new(Context::new(config(extra), stack.moto.s3().await));
    for (key, file) in [(TRY_BIN, "app"), (RELEASE_DEBUG, "app.debug")] {
        stack
            .put(key, std::fs::read(fx.path(file)).unwrap(), &[])
            .await;
        let created = stack.receive(1).await;
        let response = handle_indexer(&ctx, sqs_event(&created, &stack.queue_arn))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    }
    let debuginfo = format!("buildid/{}/debuginfo", fx.build_id());
    let binary = std::fs::read(fx.path("app")).unwrap();
    let holds = |bytes: Option<&Vec<u8>>, want: &[u8]| bytes.is_some_and(|b| b == want);
    let before = checks::published(&stack, SERVING).await;
    assert!(holds(before.get(&debuginfo), &binary), "the binary's");

    let runs = sweep_all(&ctx, SystemTime::now() + 29 * DAY).await;
    assert_eq!(total(&runs, "expired"), 1, "{runs:?}");
    let debug_file = std::fs::read(fx.path("app.debug")).unwrap();
    let after = checks::published(&stack, SERVING).await;
    assert!(holds(after.get(&debuginfo), &debug_file), "handed over");
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    assert!(refs.values().flatten().all(|u| u.contains(RELEASE_DEBUG)));
    (stack, fx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_uploads_expire_while_keys_shared_with_a_release_stay() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    // Pages of two records: the three uploads take two runs.
    let ctx = Arc::new(Context::new(
        config(&[("SYMDEX_SWEEP_MAX_UPLOADS", "2")]),
        stack.moto.s3().await,
    ));
    indexed_store(&stack, &fx, &ctx).await;
    let bid = fx.build_id();
    let debuginfo = format!("buildid/{bid}/debuginfo");
    let executable = format!("buildid/{bid}/executable");
    let before = checks::published(&stack, SERVING).await;
    assert!(before.contains_key(&debuginfo) && before.contains_key(&executable));

    // Within the retention: nothing goes.
    let now = SystemTime::now();
    let runs = sweep_all(&ctx, now + DAY).await;
    assert_eq!(total(&runs, "examined"), 3, "{runs:?}");
    assert_eq!(total(&runs, "expired"), 0, "{runs:?}");
    assert_eq!(checks::published(&stack, SERVING).await, before);

    // A dry run after the retention reports and changes nothing.
    let mut dry = scheduled_event(now + 29 * DAY);
    dry["detail"] = json!({ "dry_run": true });
    let answer = handle_sweeper(&ctx, dry.clone()).await.unwrap();
    let answer2 = handle_sweeper(&ctx, dry).await.unwrap();
    assert_eq!(answer, answer2, "a dry run does not move the cursor");
    assert_eq!(checks::published(&stack, SERVING).await, before);

    // After it: the try build goes, the key it shares with the release stays.
    let runs = sweep_all(&ctx, now + 29 * DAY).await;
    assert_eq!(total(&runs, "expired"), 2, "{runs:?}");
    assert_eq!(total(&runs, "ingest_deleted"), 2, "{runs:?}");
    let after = checks::published(&stack, SERVING).await;
    assert_eq!(after.get(&debuginfo), before.get(&debuginfo));
    assert!(
        !after.contains_key(&executable),
        "only the try build had it"
    );
    assert_eq!(ingest_keys(&stack).await, [RELEASE_DEBUG]);
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    assert!(refs.values().flatten().all(|u| u.contains(RELEASE_DEBUG)));

    let records = checks::manifest_records(&stack, SERVING).await;
    let expired: Vec<&Value> = records
        .iter()
        .filter(|r| r["action"] == "expired")
        .collect();
    assert_eq!(expired.len(), 2);
    for record in &expired {
        assert_eq!(record["channel"], "try");
        assert!(record["expires"].as_str().is_some());
    }
    let bin = expired.iter().find(|r| r["ingest_key"] == TRY_BIN).unwrap();
    assert!(bin["removed"]
        .as_array()
        .unwrap()
        .contains(&json!(executable)));

    // The removal events of the deleted ingest objects find nothing left to do.
    let removed = stack.receive(2).await;
    let response = handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(response["batchItemFailures"], json!([]));
    assert_eq!(checks::published(&stack, SERVING).await, after);
    let unpublished = checks::manifest_records(&stack, SERVING)
        .await
        .into_iter()
        .filter(|r| r["action"] == "unpublished")
        .count();
    assert_eq!(unpublished, 0, "the remover had nothing to remove");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_build_does_not_expire() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = Arc::new(Context::new(config(&[]), stack.moto.s3().await));
    indexed_store(&stack, &fx, &ctx).await;
    let before = checks::published(&stack, SERVING).await;

    let answer = handle_sweeper(
        &ctx,
        json!({ "promote": { "build": "1", "channel": "release" } }),
    )
    .await
    .unwrap();
    assert_eq!(answer["promoted"], 2, "{answer}");
    let promoted: Vec<Value> = checks::manifest_records(&stack, SERVING)
        .await
        .into_iter()
        .filter(|r| r["action"] == "promoted")
        .collect();
    assert_eq!(promoted.len(), 2);
    assert!(promoted
        .iter()
        .all(|r| r["channel"] == "release" && r.get("expires").is_none()));

    let runs = sweep_all(&ctx, SystemTime::now() + 400 * DAY).await;
    assert_eq!(total(&runs, "expired"), 0, "{runs:?}");
    assert_eq!(checks::published(&stack, SERVING).await, before);
    assert_eq!(ingest_keys(&stack).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_dying_part_way_is_resumed_by_the_next_run() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let clean = Arc::new(Context::new(config(&[]), stack.moto.s3().await));
    indexed_store(&stack, &fx, &clean).await;

    // Crash at every step: run k dies after k S3 requests (one attempt each, so the cut is
    // exactly there); the next run resumes from what the dead ones left. The crash point
    // moves through the whole run until one finishes.
    let proxy = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 0, 7).await;
    let dying = Arc::new(Context::new(
        config(&[("SYMDEX_SWEEP_MAX_UPLOADS", "2")]),
        stack.moto.s3_via_with(&proxy.endpoint, 1).await,
    ));
    let at = SystemTime::now() + 29 * DAY;
    let mut died = 0;
    let mut passes = 0;
    for cut in 1..2000 {
        proxy.faults.cut_after(cut);
        match handle_sweeper(&dying, scheduled_event(at)).await {
            Ok(answer) if answer["next"].is_null() => {
                passes += 1;
                // Two passes over the records: everything due was expired by then.
                if passes == 2 {
                    break;
                }
            }
            Ok(_) => {}
            Err(_) => died += 1,
        }
    }
    assert_eq!(passes, 2, "the sweeper never finished");
    assert!(
        died >= 10,
        "only {died} runs died: the cuts missed most steps"
    );
    assert_eq!(ingest_keys(&stack).await, [RELEASE_DEBUG]);
    let bid = fx.build_id();
    let published = checks::published(&stack, SERVING).await;
    assert!(published.contains_key(&format!("buildid/{bid}/debuginfo")));
    assert!(!published.contains_key(&format!("buildid/{bid}/executable")));
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    // Every expiry reached the manifest (at least once).
    let records = checks::manifest_records(&stack, SERVING).await;
    for key in [TRY_DEBUG, TRY_BIN] {
        assert!(
            records
                .iter()
                .any(|r| r["action"] == "expired" && r["ingest_key"] == key),
            "no expired record for {key}"
        );
    }
    // Nothing was left half-done: one upload left (the release, indexed), no deletion pending.
    let uploads = stack.objects(SERVING, "_symdex/uploads/").await;
    assert_eq!(uploads.len(), 1);
    let upload: Value = serde_json::from_slice(&uploads[0].1).unwrap();
    assert_eq!(upload["state"], "indexed");
    assert_eq!(upload["channel"], "release");
    let state = stack.objects(SERVING, "_symdex/sweeper.json").await;
    let state: Value = serde_json::from_slice(&state[0].1).unwrap();
    assert_eq!(state["pending"], json!([]));
}

/// With SYMDEX_AUDIT_PAGE, a sweep writes `symdex audit`'s page of the serving bucket to the
/// bucket itself (at the private key the edge shows to the audit grant alone): the uploads'
/// records are on it, and an uploader's hostile file name is data, never markup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_writes_the_audit_page_to_the_serving_bucket() {
    const PAGE: &str = symdex_shared::audit_page::DEPLOYED_KEY;
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let hostile = "channel=release/build=3/<script>alert(1)</script>.debug";
    let off = Arc::new(Context::new(config(&[]), stack.moto.s3().await));
    stack
        .put(hostile, std::fs::read(fx.path("app.debug")).unwrap(), &[])
        .await;
    stack.index_received(&off, 1).await;
    // Off by default: no page after a sweep, and none on request.
    let runs = sweep_all(&off, SystemTime::now()).await;
    assert!(
        runs.iter().all(|r| r.get("audit_page").is_none()),
        "{runs:?}"
    );
    let asked = handle_sweeper(&off, json!({ "audit_page": true })).await;
    assert!(asked.is_err(), "written while off");
    assert!(stack.objects(SERVING, PAGE).await.is_empty());

    let on = Arc::new(Context::new(
        config(&[("SYMDEX_AUDIT_PAGE", "true")]),
        stack.moto.s3().await,
    ));
    let runs = sweep_all(&on, SystemTime::now()).await;
    let written = &runs.last().unwrap()["audit_page"];
    assert_eq!(written["key"], PAGE, "{runs:?}");
    assert_eq!(written["records"], 1, "{runs:?}");
    let head = stack
        .s3
        .head_object()
        .bucket(SERVING)
        .key(PAGE)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("text/html; charset=utf-8"));
    assert_eq!(head.cache_control(), Some("no-store"));
    let (_, body) = stack.objects(SERVING, PAGE).await.remove(0);
    let page = String::from_utf8(body).unwrap();

    let records = checks::manifest_records(&stack, SERVING).await;
    let record = records.iter().find(|r| r["ingest_key"] == hostile).unwrap();
    let (name, debug_id) = (record["name"].as_str().unwrap(), &record["debug_id"]);
    assert!(page.contains(debug_id.as_str().unwrap()), "the debug id");
    // The key's last part is the name (`script>.debug`); the whole key is on the page too.
    for text in [name, hostile] {
        assert!(text.contains('>'), "{record}");
        let escaped = text.replace('<', "\\u003c").replace('>', "\\u003e");
        assert!(page.contains(&escaped), "{text}, escaped");
    }
    assert!(
        !page.contains("<script>alert(1)"),
        "hostile markup in the page"
    );
    // The page is symdex's own: no published key, and the store's audit is clean.
    assert!(!checks::published(&stack, SERVING).await.contains_key(PAGE));
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");

    // On request, the page alone (a refresh between sweeps).
    let answer = handle_sweeper(&on, json!({ "audit_page": true }))
        .await
        .unwrap();
    assert_eq!(answer["audit_page"]["records"], 1, "{answer}");
    assert!(answer.get("examined").is_none(), "no sweep: {answer}");
}
