//! What the Lambda tests read back from a serving bucket: its manifest records, its published
//! objects, and the store audit with its references.
#![allow(dead_code)] // each test uses a part

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use symdex_shared::audit::{audit, references};
use symdex_shared::storage::s3::S3Store;

use crate::support::Stack;

/// Every record of the gzip JSON Lines manifest objects of `bucket`.
pub async fn manifest_records(stack: &Stack, bucket: &str) -> Vec<Value> {
    let mut records = Vec::new();
    for (_, body) in stack.objects(bucket, "_manifest/").await {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut text)
            .unwrap();
        records.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    records
}

/// Published objects of `bucket` with their content (bookkeeping and manifest left out).
pub async fn published(stack: &Stack, bucket: &str) -> BTreeMap<String, Vec<u8>> {
    stack
        .objects(bucket, "")
        .await
        .into_iter()
        .filter(|(k, _)| !k.starts_with("_symdex/") && !k.starts_with("_manifest/"))
        .collect()
}

/// The audit's problems (as `verify` prints them) and the references of `bucket`.
pub async fn audited(
    stack: &Stack,
    bucket: &str,
) -> (Vec<String>, BTreeMap<String, BTreeSet<String>>) {
    let store = S3Store::new(stack.s3.clone(), bucket);
    let problems = audit(&store, "_manifest")
        .await
        .unwrap()
        .problems
        .iter()
        .map(ToString::to_string)
        .collect();
    (problems, references(&store).await.unwrap())
}
