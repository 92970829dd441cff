//! Order and redelivery: S3 notifications (the JSON S3 sends) for a PE, its PDB and the PDB's
//! removal, processed in different orders — PE before and after the PDB, the removal before
//! and after the creation — each delivered three times, end in the same serving bucket and
//! references, and the same keys unpublished whenever the PDB was published.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_sqs::types::Message;
use serde_json::json;
use support::{config, sqs_event, Stack, INGEST};
use symdex_lambda::{handle_indexer, handle_remover, Context};
use symdex_shared::testing::scenarios::Artifacts;

const PE: &str = "win/mixed.dll";
const PDB: &str = "win/mixed.pdb";

#[derive(Clone, Copy, Debug)]
enum Step {
    /// The object is deleted from the ingest bucket (its notification comes later).
    DeletePdb,
    /// A notification is processed (three deliveries in a row).
    Created(&'static str),
    Removed(&'static str),
}

/// One S3 notification record wrapped in an SQS message, as S3 -> SQS delivers it.
fn message(id: usize, event_name: &str, key: &str, size: usize, etag: &str) -> Message {
    let body = json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-11-23T00:00:00.000Z", "eventName": event_name,
        "userIdentity": {"principalId": "AWS:CI"}, "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {"x-amz-request-id": "1", "x-amz-id-2": "2"},
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "symdex",
            "bucket": {"name": INGEST, "ownerIdentity": {"principalId": "A"}, "arn": format!("arn:aws:s3:::{INGEST}")},
            "object": {"key": key, "size": size, "eTag": etag, "sequencer": format!("{id:016X}")}}
    }]});
    Message::builder()
        .message_id(format!("m{id}"))
        .body(body.to_string())
        .build()
}

struct Outcome {
    objects: BTreeMap<String, Vec<u8>>,
    refs: BTreeMap<String, BTreeSet<String>>,
    removed: BTreeSet<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_of_pe_pdb_and_removal_ends_the_same() {
    let stack = Stack::new().await;
    let a = Artifacts::new();
    let bytes = |key: &str| if key == PE { &a.pe.bytes } else { &a.pdb.bytes };
    let scripts: Vec<Vec<Step>> = vec![
        vec![
            Step::Created(PE),
            Step::Created(PDB),
            Step::DeletePdb,
            Step::Removed(PDB),
        ],
        vec![
            Step::Created(PDB),
            Step::Created(PE),
            Step::DeletePdb,
            Step::Removed(PDB),
        ],
        vec![
            Step::Created(PDB),
            Step::DeletePdb,
            Step::Created(PE),
            Step::Removed(PDB),
        ],
        vec![
            Step::Created(PDB),
            Step::DeletePdb,
            Step::Removed(PDB),
            Step::Created(PE),
        ],
        // The removal processed before the creation, the object already gone.
        vec![
            Step::DeletePdb,
            Step::Removed(PDB),
            Step::Created(PDB),
            Step::Created(PE),
        ],
        vec![
            Step::Created(PE),
            Step::DeletePdb,
            Step::Removed(PDB),
            Step::Created(PDB),
        ],
    ];
    let mut outcomes = Vec::new();
    for (n, script) in scripts.iter().enumerate() {
        let serving = format!("order-{n}");
        stack
            .s3
            .create_bucket()
            .bucket(&serving)
            .send()
            .await
            .unwrap();
        let ctx = Arc::new(Context::new(
            config(&[("SYMDEX_SERVING_BUCKET", serving.as_str())]),
            stack.moto.s3().await,
        ));
        let mut etags = BTreeMap::new();
        for key in [PE, PDB] {
            let out = stack
                .s3
                .put_object()
                .bucket(INGEST)
                .key(key)
                .body(bytes(key).clone().into())
                .send()
                .await
                .unwrap();
            etags.insert(key, out.e_tag.unwrap());
        }
        for (i, step) in script.iter().enumerate() {
            let (handler_message, indexer) = match *step {
                Step::DeletePdb => {
                    stack
                        .s3
                        .delete_object()
                        .bucket(INGEST)
                        .key(PDB)
                        .send()
                        .await
                        .unwrap();
                    continue;
                }
                Step::Created(key) => (
                    message(i, "ObjectCreated:Put", key, bytes(key).len(), &etags[key]),
                    true,
                ),
                Step::Removed(key) => (message(i, "ObjectRemoved:Delete", key, 0, ""), false),
            };
            for _ in 0..3 {
                let event = sqs_event(std::slice::from_ref(&handler_message), &stack.queue_arn);
                let response = if indexer {
                    handle_indexer(&ctx, event).await
                } else {
                    handle_remover(&ctx, event).await
                }
                .unwrap();
                assert_eq!(
                    response["batchItemFailures"],
                    json!([]),
                    "script {n} step {step:?}"
                );
            }
        }
        let (problems, refs) = checks::audited(&stack, &serving).await;
        assert!(problems.is_empty(), "script {n}: {problems:#?}");
        let objects = checks::published(&stack, &serving).await;
        let removed = checks::manifest_records(&stack, &serving)
            .await
            .iter()
            .flat_map(|r| r["removed"].as_array().cloned().unwrap_or_default())
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        outcomes.push(Outcome {
            objects,
            refs,
            removed,
        });
    }
    let first = &outcomes[0];
    assert!(first.objects.keys().any(|k| k.contains("mixed.dll")));
    assert!(
        !first
            .objects
            .keys()
            .any(|k| k.to_ascii_lowercase().contains("mixed.pdb")),
        "the removed PDB is unpublished under every name, the PE's spelling included: {:?}",
        first.objects.keys()
    );
    for (n, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome.objects, first.objects, "script {n}: objects");
        assert_eq!(outcome.refs, first.refs, "script {n}: references");
    }
    // Where the PDB and the PE were both processed before the removal, the same keys were
    // unpublished (the PDB's own, and its copies under the PE's spelling).
    for n in [1, 2] {
        assert_eq!(
            outcomes[n].removed, first.removed,
            "script {n}: unpublished keys"
        );
    }
    // The PE after the removal: no alias was ever made, only the PDB's own keys went.
    assert!(outcomes[3].removed.is_subset(&first.removed));
    assert!(!outcomes[3].removed.iter().any(|k| k.contains("Mixed.PDB")));
    assert!(
        first.removed.iter().any(|k| k.contains("Mixed.PDB")),
        "{:?}",
        first.removed
    );
}
