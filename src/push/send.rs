//! Sending: each planned input is checked against what the deployment holds (the serving
//! side by its keys, the ingest bucket by the content hash an earlier push recorded) and
//! uploaded otherwise, `jobs` at a time.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_s3::primitives::DateTimeFormat;
use aws_sdk_s3::Client;
use symdex_shared::storage::s3::{upload_file, S3Store};

use super::plan::{Planned, Sendable, MULTIPART_THRESHOLD};
use super::wait::Followed;
use super::{report, Line, PushArgs, Status};

/// Metadata key holding the SHA-256 of what push sent, by which a re-run knows it.
pub const SHA256_META: &str = "symdex-sha256";

/// The metadata the indexer reads (handler.rs `upload_meta`), and the content hash.
pub fn metadata(args: &PushArgs) -> HashMap<String, String> {
    let mut meta = HashMap::new();
    meta.insert("build".to_string(), args.build.clone());
    for (name, value) in [
        ("product", &args.product),
        ("version", &args.version),
        ("channel", &args.channel),
    ] {
        if let Some(value) = value {
            meta.insert(name.to_string(), value.clone());
        }
    }
    meta
}

/// What sending came to: a line per input, and the uploads to follow (with their lines).
pub struct Sent {
    pub lines: Vec<Line>,
    pub followed: Vec<(usize, Followed)>,
}

enum Result1 {
    Followed(Followed, bool),
    Done(Status, Vec<String>, Option<String>),
}

#[allow(clippy::too_many_arguments)]
pub async fn send_all(
    client: &Client,
    ingest_bucket: &str,
    serving: Option<&S3Store>,
    server: Option<&str>,
    planned: Vec<Planned>,
    metadata: HashMap<String, String>,
    jobs: usize,
    show_progress: bool,
) -> Sent {
    let mut lines = Vec::new();
    let mut sendables = Vec::new();
    for item in planned {
        let line = |path: String, status, reason| Line {
            path,
            status,
            ingest_key: None,
            sent: false,
            keys: Vec::new(),
            reason,
            held_by_products: Vec::new(),
        };
        match item {
            Planned::Skipped { shown, reason } => {
                lines.push(line(shown, Status::Skipped, Some(reason)))
            }
            Planned::Failed { shown, error } => {
                lines.push(line(shown, Status::Failed, Some(error)))
            }
            Planned::Send(s) => {
                let mut l = line(s.shown.clone(), Status::Uploaded, None);
                l.ingest_key = Some(s.ingest_key.clone());
                sendables.push((lines.len(), s));
                lines.push(l);
            }
        }
    }
    let progress = report::progress(sendables.len() as u64, "sending", show_progress);
    let gate = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let metadata = Arc::new(metadata);
    let mut tasks = tokio::task::JoinSet::new();
    for (line, sendable) in sendables {
        let gate = gate.clone();
        let client = client.clone();
        let bucket = ingest_bucket.to_string();
        let serving = serving.cloned();
        let server = server.map(str::to_string);
        let metadata = metadata.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let result = send_one(
                &client,
                &bucket,
                serving.as_ref(),
                server.as_deref(),
                &sendable,
                &metadata,
            )
            .await;
            (line, result)
        });
    }
    let mut followed = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        progress.inc(1);
        let Ok((index, result)) = joined else {
            continue;
        };
        let line = &mut lines[index];
        match result {
            Result1::Followed(f, sent) => {
                line.sent = sent;
                followed.push((index, f));
            }
            Result1::Done(status, keys, reason) => {
                line.status = status;
                line.keys = keys;
                line.reason = reason;
            }
        }
    }
    progress.finish_and_clear();
    followed.sort_by_key(|(index, _)| *index);
    Sent { lines, followed }
}

async fn send_one(
    client: &Client,
    bucket: &str,
    serving: Option<&S3Store>,
    server: Option<&str>,
    s: &Sendable,
    metadata: &HashMap<String, String>,
) -> Result1 {
    if served_already(serving, server, s).await {
        return Result1::Done(Status::AlreadyPublished, s.probe_keys.clone(), None);
    }
    // Sent by an earlier push (a re-run after an interruption): followed, not sent again.
    match client
        .head_object()
        .bucket(bucket)
        .key(&s.ingest_key)
        .send()
        .await
    {
        Ok(head) if head.metadata().and_then(|m| m.get(SHA256_META)) == Some(&s.sha256) => {
            let sent_at = head
                .last_modified()
                .and_then(|t| t.fmt(DateTimeFormat::DateTime).ok())
                .unwrap_or_else(symdex_shared::manifest::now_rfc3339);
            let etag = head
                .e_tag()
                .unwrap_or_default()
                .trim_matches('"')
                .to_string();
            let version = head.version_id().map(str::to_string);
            return Result1::Followed(followed(bucket, s, etag, version, sent_at), false);
        }
        _ => {}
    }
    let mut metadata = metadata.clone();
    metadata.insert(SHA256_META.to_string(), s.sha256.clone());
    let sent_at = symdex_shared::manifest::now_rfc3339();
    match upload_file(
        client,
        bucket,
        &s.ingest_key,
        &s.path,
        metadata,
        MULTIPART_THRESHOLD,
    )
    .await
    {
        Ok(up) => Result1::Followed(followed(bucket, s, up.etag, up.version, sent_at), true),
        Err(e) => Result1::Done(
            Status::Failed,
            Vec::new(),
            Some(crate::deployment::explain(bucket, &e)),
        ),
    }
}

fn followed(
    bucket: &str,
    s: &Sendable,
    etag: String,
    version: Option<String>,
    sent_at: String,
) -> Followed {
    let input = symdex_shared::pipeline::Input::s3_object(
        bucket,
        &s.ingest_key,
        version.as_deref(),
        &etag,
        s.size,
        &Default::default(),
    );
    Followed {
        bucket: bucket.to_string(),
        key: s.ingest_key.clone(),
        upload: input.upload_id(&etag),
        etag,
        version,
        sent_at,
    }
}

/// Whether every identity of `s` is served already with these bytes: its probe key holds
/// the content the deployment recorded for it (the ETag of the upload that published it).
async fn served_already(serving: Option<&S3Store>, server: Option<&str>, s: &Sendable) -> bool {
    if s.probe_keys.is_empty() {
        return false;
    }
    for key in &s.probe_keys {
        let same = match (serving, server) {
            (Some(store), _) => matches!(
                store.head_object(store.bucket(), key, None).await,
                Ok(Some((info, _))) if info.etag == s.s3_etag
            ),
            (None, Some(url)) => {
                let url = format!("{}/{key}", url.trim_end_matches('/'));
                let want = s.s3_etag.clone();
                tokio::task::spawn_blocking(move || {
                    ureq::head(&url).call().is_ok_and(|r| {
                        r.status().is_success()
                            && r.headers()
                                .get("etag")
                                .and_then(|v| v.to_str().ok())
                                .is_some_and(|v| v.trim_matches('"') == want)
                    })
                })
                .await
                .unwrap_or(false)
            }
            (None, None) => false,
        };
        if !same {
            return false;
        }
    }
    true
}
