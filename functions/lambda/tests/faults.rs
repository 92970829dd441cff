//! Faults on S3: the functions talk to moto_server through a proxy that fails 20% of the
//! requests (503 SlowDown, 500, resets before and after the request reached moto). Failed
//! messages are redelivered as SQS would; the indexer and the remover converge to exactly the
//! serving bucket, references and manifest decisions of a fault-free run.

#[path = "support/checks.rs"]
mod checks;
#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use aws_sdk_sqs::types::Message;
use fault_proxy::FaultProxy;
use serde_json::Value;
use support::{config, redelivered, sqs_event, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, handle_remover, Context, Error};
use symdex_shared::testing::scenarios::Artifacts;

const FAULTY: &str = "symdex-serving-faulty";

type Handler = for<'a> fn(
    &'a Arc<Context>,
    Value,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Value, Error>> + Send + 'a>,
>;

fn indexer(
    ctx: &Arc<Context>,
    v: Value,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, Error>> + Send + '_>> {
    Box::pin(handle_indexer(ctx, v))
}

fn remover(
    ctx: &Arc<Context>,
    v: Value,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, Error>> + Send + '_>> {
    Box::pin(handle_remover(ctx, v))
}

/// Delivers `messages` in batches of 10 until every one succeeded (a failed invocation or a
/// reported item is delivered again, its receive count one higher: a first delivery takes the
/// upload for new, a later one reads its record first). Returns how many deliveries it took.
async fn deliver(
    ctx: &Arc<Context>,
    handler: Handler,
    messages: &[Message],
    queue_arn: &str,
) -> usize {
    let mut pending: Vec<Message> = messages.to_vec();
    let mut rounds = 0;
    while !pending.is_empty() {
        rounds += 1;
        assert!(rounds < 60, "messages never succeeded: {}", pending.len());
        let mut still = Vec::new();
        for batch in pending.chunks(10) {
            // As SQS counts them: every message pending now was delivered `rounds - 1` times.
            let mut event = sqs_event(batch, queue_arn);
            for _ in 1..rounds {
                event = redelivered(&event);
            }
            match handler(ctx, event).await {
                Ok(response) => {
                    let failed: BTreeSet<String> = response["batchItemFailures"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|f| f["itemIdentifier"].as_str().unwrap().to_string())
                        .collect();
                    still.extend(
                        batch
                            .iter()
                            .filter(|m| failed.contains(m.message_id.as_deref().unwrap()))
                            .cloned(),
                    );
                }
                // The whole invocation failed (e.g. its manifest write): all of it again.
                Err(_) => still.extend(batch.iter().cloned()),
            }
        }
        pending = still;
    }
    rounds
}

/// The manifest's decisions: (upload, key) pairs published or found unchanged, keys published,
/// (upload, key) pairs removed.
type Decisions = (
    BTreeSet<(String, String)>,
    BTreeSet<String>,
    BTreeSet<(String, String)>,
);

async fn decisions(stack: &Stack, bucket: &str) -> Decisions {
    let mut out = Decisions::default();
    for r in checks::manifest_records(stack, bucket).await {
        let upload = r["upload"].as_str().unwrap().to_string();
        let keys = |field: &str| -> Vec<String> {
            r[field]
                .as_array()
                .into_iter()
                .flatten()
                .map(|k| k.as_str().unwrap().to_string())
                .collect()
        };
        for key in keys("published") {
            out.1.insert(key.clone());
            out.0.insert((upload.clone(), key));
        }
        for key in keys("unchanged") {
            out.0.insert((upload.clone(), key));
        }
        for key in keys("removed") {
            out.2.insert((upload.clone(), key));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexer_and_remover_converge_through_a_faulty_network() {
    let stack = Stack::new().await;
    stack
        .s3
        .create_bucket()
        .bucket(FAULTY)
        .send()
        .await
        .unwrap();
    let artifacts = Artifacts::new();
    let dir = tempfile::tempdir().unwrap();
    let uploads = [
        ("b1/app.debug", &artifacts.elf_a),
        ("b2/app.debug", &artifacts.elf_b),
        ("win/mixed.dll", &artifacts.pe),
        ("win/mixed.pdb", &artifacts.pdb),
    ];
    for (key, artifact) in uploads {
        let path = dir.path().join(key.replace('/', "_"));
        std::fs::write(&path, &artifact.bytes).unwrap();
        stack.upload(key, &path).await;
    }
    let created = stack.receive(uploads.len()).await;

    let clean = Arc::new(Context::new(config(&[]), stack.moto.s3().await));
    let proxy = FaultProxy::start(&stack.moto.endpoint, 20, 7).await;
    // What the functions configure: the SDK's standard retries, five attempts.
    let faulty_client = stack.moto.s3_via(&proxy.endpoint).await;
    let faulty = Arc::new(Context::new(
        config(&[("SYMDEX_SERVING_BUCKET", FAULTY)]),
        faulty_client,
    ));

    assert_eq!(
        deliver(&clean, indexer, &created, &stack.queue_arn).await,
        1
    );
    let rounds = deliver(&faulty, indexer, &created, &stack.queue_arn).await;
    compare(&stack).await;

    // Removals: the build-1 copy of the debug file and the PDB.
    for key in ["b1/app.debug", "win/mixed.pdb"] {
        stack
            .s3
            .delete_object()
            .bucket(INGEST)
            .key(key)
            .send()
            .await
            .unwrap();
    }
    let removed = stack.receive(2).await;
    assert_eq!(
        deliver(&clean, remover, &removed, &stack.queue_arn).await,
        1
    );
    let rounds = rounds + deliver(&faulty, remover, &removed, &stack.queue_arn).await;
    compare(&stack).await;

    let f = &proxy.faults;
    let injected = [
        &f.slow_down,
        &f.internal_error,
        &f.reset_before,
        &f.reset_after,
    ]
    .map(|c| c.load(Ordering::Relaxed));
    println!(
        "faults injected (503, 500, reset before, reset after): {injected:?}; {} forwarded; {rounds} deliveries",
        f.forwarded.load(Ordering::Relaxed)
    );
    assert!(
        injected.iter().all(|&n| n > 0),
        "every kind of fault was injected: {injected:?}"
    );
}

/// The faulty run's serving bucket equals the clean run's: objects, references, decisions.
async fn compare(stack: &Stack) {
    assert_eq!(
        checks::published(stack, FAULTY).await,
        checks::published(stack, SERVING).await
    );
    let (problems, faulty_refs) = checks::audited(stack, FAULTY).await;
    let (_, clean_refs) = checks::audited(stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(faulty_refs, clean_refs);
    assert_eq!(
        decisions(stack, FAULTY).await,
        decisions(stack, SERVING).await
    );
}
