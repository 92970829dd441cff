//! Sending: each planned input is checked against what the deployment holds (the serving
//! side by its keys, the ingest bucket by the ETag push's upload would give it, from one
//! listing of the build's prefix) and uploaded otherwise, `jobs` at a time. A file is read
//! for its hashes in its own job, while others go up: its ETag (MD5s) only where the
//! deployment holds something to compare it with, its SHA-256 only when it is sent.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_s3::primitives::DateTimeFormat;
use aws_sdk_s3::Client;
use symdex_shared::storage::s3::{upload_file, PartsAtOnce, S3Store};

use super::plan::{s3_etag_of, sha256_of, Planned, Sendable, MULTIPART_THRESHOLD};
use super::server::Server;
use super::wait::Followed;
use super::{report, Line, PushArgs, Status};

/// Metadata key holding the SHA-256 of what push sent.
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

/// Where a push sends, and what is there already.
pub struct Target {
    pub client: Client,
    /// The ingest bucket.
    pub bucket: String,
    pub serving: Option<S3Store>,
    pub server: Option<Server>,
    /// The metadata every upload carries (besides its own `symdex-sha256`).
    pub metadata: HashMap<String, String>,
    /// What the ingest bucket holds under the build's prefix, listed once (one request per
    /// thousand keys, not a HEAD per input): key -> (ETag, last modified).
    pub present: HashMap<String, (String, String)>,
    /// Parts of multipart uploads in flight at once, over all the push's files.
    pub parts: PartsAtOnce,
}

/// Lists what `bucket` holds under `prefix`: key -> (ETag, last modified, RFC 3339).
pub async fn list_present(
    client: &Client,
    bucket: &str,
    prefix: &str,
) -> Result<HashMap<String, (String, String)>, String> {
    let mut present = HashMap::new();
    for object in crate::deployment::list_objects(client, bucket, prefix, None).await? {
        let (Some(key), Some(etag)) = (object.key(), object.e_tag()) else {
            continue;
        };
        let at = object
            .last_modified()
            .and_then(|t| t.fmt(DateTimeFormat::DateTime).ok())
            .unwrap_or_else(symdex_shared::manifest::now_rfc3339);
        present.insert(key.to_string(), (etag.trim_matches('"').to_string(), at));
    }
    Ok(present)
}

enum Result1 {
    Followed(Followed, bool),
    Done(Status, Vec<String>, Option<String>),
}

pub async fn send_all(
    target: Arc<Target>,
    planned: Vec<Planned>,
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
            source_for: Vec::new(),
            sent: false,
            keys: Vec::new(),
            reason,
            held_by_products: Vec::new(),
            held_by: Vec::new(),
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
                l.source_for.clone_from(&s.named_for);
                sendables.push((lines.len(), s));
                lines.push(l);
            }
        }
    }
    let progress = report::progress(sendables.len() as u64, "sending", show_progress);
    let gate = Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (line, sendable) in sendables {
        let gate = gate.clone();
        let target = target.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            (line, send_one(&target, &sendable).await)
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

async fn send_one(target: &Target, s: &Sendable) -> Result1 {
    let failed = |e: std::io::Error| Result1::Done(Status::Failed, Vec::new(), Some(e.to_string()));
    let bucket = target.bucket.as_str();
    let mut etag = Etag::new(s);
    match served_already(
        target.serving.as_ref(),
        target.server.as_ref(),
        s,
        &mut etag,
    )
    .await
    {
        Ok(true) => return Result1::Done(Status::AlreadyPublished, s.probe_keys.clone(), None),
        Ok(false) => {}
        Err(e) => return failed(e),
    }
    // Sent already, by an earlier push (a re-run after an interruption) or another upload of
    // the same bytes: followed, not sent again. Its ETag is what push's upload would make.
    if let Some((held, at)) = target.present.get(&s.ingest_key) {
        match etag.get().await {
            Ok(mine) if mine == held => {
                let f = followed(bucket, s, held.clone(), None, at.clone());
                return Result1::Followed(f, false);
            }
            Ok(_) => {}
            Err(e) => return failed(e),
        }
    }
    let path = s.path.clone();
    let sha256 = match blocking(move || sha256_of(&path)).await {
        Ok(sha256) => sha256,
        Err(e) => return failed(e),
    };
    let mut metadata = target.metadata.clone();
    metadata.insert(SHA256_META.to_string(), sha256);
    let sent_at = symdex_shared::manifest::now_rfc3339();
    match upload_file(
        &target.client,
        bucket,
        &s.ingest_key,
        &s.path,
        metadata,
        MULTIPART_THRESHOLD,
        &target.parts,
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

/// A file read through off the runtime's thread (which drives every upload).
async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(read)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// The ETag push's upload gives an input ([`s3_etag_of`]), read once it is first wanted.
struct Etag<'s> {
    sendable: &'s Sendable,
    known: Option<String>,
}

impl<'s> Etag<'s> {
    fn new(sendable: &'s Sendable) -> Self {
        Etag {
            sendable,
            known: None,
        }
    }

    async fn get(&mut self) -> std::io::Result<&str> {
        if self.known.is_none() {
            let (path, size) = (self.sendable.path.clone(), self.sendable.size);
            self.known = Some(blocking(move || s3_etag_of(&path, size)).await?);
        }
        Ok(self.known.as_deref().unwrap_or_default())
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
        named_source: s.named_source(),
    }
}

/// Whether every identity of `s` is served already with these bytes: its probe key holds
/// the content the deployment recorded for it (the ETag of the upload that published it).
/// The file is read for its ETag only once every probe key is found.
async fn served_already(
    serving: Option<&S3Store>,
    server: Option<&Server>,
    s: &Sendable,
    etag: &mut Etag<'_>,
) -> std::io::Result<bool> {
    if s.probe_keys.is_empty() {
        return Ok(false);
    }
    let mut held = Vec::new();
    for key in &s.probe_keys {
        let found = match (serving, server) {
            (Some(store), _) => match store.head_object(store.bucket(), key, None).await {
                Ok(Some((info, _))) => Some(info.etag),
                _ => None,
            },
            (None, Some(server)) => {
                let (server, key) = (server.clone(), key.clone());
                tokio::task::spawn_blocking(move || server.etag(&key))
                    .await
                    .unwrap_or(None)
            }
            (None, None) => None,
        };
        match found {
            Some(found) => held.push(found),
            None => return Ok(false),
        }
    }
    let mine = etag.get().await?;
    Ok(held.iter().all(|h| h == mine))
}
