//! `symdex push`: a CI job's artifacts sent to a deployment's ingest bucket, and (`--wait`)
//! followed until the deployment's own records say each is published, rejected or in
//! conflict. Inputs are identified locally by `index`'s rules (`plan`), what the deployment
//! already serves or an earlier push already sent is not sent again, the rest goes up
//! `--jobs` at a time with the metadata the indexer reads, and `wait` follows the manifest.
//! Sources no flag names (files no format claims that a debug file of the push names) are
//! sent after the rest, and with `--wait` once the rest is decided.

mod named;
mod plan;
mod report;
mod send;
mod server;
mod wait;
mod wanted;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use symdex_shared::storage::s3::S3Store;

use crate::deployment::S3Url;
use crate::index::ArchiveLimits;
use crate::inputs::SourceArgs;

#[derive(Args, Debug)]
pub struct PushArgs {
    /// Files or directories to send (directories recurse; archives are sent whole and
    /// expanded by the deployment).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The deployment's ingest bucket, and a key prefix in it (default: the product, as the
    /// module's per-product upload policies want). Keys: `PREFIX/BUILD/<path below the
    /// argument>`.
    #[arg(long, value_name = "s3://BUCKET[/PREFIX]")]
    pub ingest: S3Url,
    /// The deployment's serving bucket: what it already serves is not sent again, and
    /// `--wait` reads its manifest there.
    #[arg(long, value_name = "s3://BUCKET")]
    pub serving: Option<S3Url>,
    /// Or the symbol server's URL (CloudFront, `symdex serve`): what it already answers with
    /// the same bytes is not sent again; with `--wait`, where keys are checked live.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The build these artifacts belong to (metadata `build`).
    #[arg(long)]
    pub build: String,
    /// Product (metadata `product`; the default key prefix).
    #[arg(long)]
    pub product: Option<String>,
    /// Version (metadata `version`).
    #[arg(long)]
    pub version: Option<String>,
    /// Retention channel (metadata `channel`: `try`, `nightly`, `release`...).
    #[arg(long)]
    pub channel: Option<String>,
    /// Follow each upload until the deployment says what became of it. Exit 0: every input
    /// published or already published; 1: any rejected, in conflict or timed out; 2: errors.
    #[arg(long)]
    pub wait: bool,
    /// Seconds `--wait` waits for the last outcome.
    #[arg(long, default_value_t = 900, value_name = "SECONDS")]
    pub timeout: u64,
    /// Seconds any one request (to the buckets, or to `--server`) may take before it is given
    /// up (an S3 request is then retried, five attempts in all): a server or endpoint that
    /// accepts connections and never answers fails the push instead of hanging it. A file up to
    /// 16 MiB, or a 16 MiB part of a larger one, counts as one request: raise it on a slow link
    /// (`--jobs` files, and ten parts over all of them, are in flight at once).
    #[arg(long, default_value_t = 120, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    /// JSON Lines: one object per input (`path`, `status`, keys, reason, `source_for`: the
    /// paths a debug file names that it was sent as the source of), then a summary.
    #[arg(long)]
    pub json: bool,
    /// Files sent at once (the parts of larger files go ten at once, over all of them). No
    /// file or part is held in memory: each is streamed from its file as it is sent.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// The serving bucket's manifest prefix (the module's `manifest_prefix`).
    #[arg(long, default_value = "_manifest", value_name = "PREFIX")]
    pub manifest_prefix: String,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub limits: ArchiveLimits,
}

/// What a push says of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Sent (or found sent by an earlier push), not followed (no `--wait`).
    Uploaded,
    /// Every key live.
    Published,
    /// Served already with these bytes, or published by an earlier push: nothing sent.
    AlreadyPublished,
    Rejected,
    Conflict,
    /// Not an artifact (not sent), or the deployment skipped it.
    Skipped,
    Timeout,
    /// Could not be read or sent (after the SDK's retries).
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Uploaded => "uploaded",
            Status::Published => "published",
            Status::AlreadyPublished => "already-published",
            Status::Rejected => "rejected",
            Status::Conflict => "conflict",
            Status::Skipped => "skipped",
            Status::Timeout => "timeout",
            Status::Failed => "failed",
        }
    }
}

/// The report of one input.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub path: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingest_key: Option<String>,
    /// Sent as the source of these paths debug files of the push name (a file no format
    /// claims and no flag names, or an archive holding such files).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_for: Vec<String>,
    /// Whether this run sent it (false: skipped, or found in the ingest bucket already).
    pub sent: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_by_products: Vec<String>,
    /// A conflict's keys are held by these uploads (`s3:<bucket>/<key>@<version or etag>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held_by: Vec<String>,
}

pub fn run(args: &PushArgs) -> anyhow::Result<ExitCode> {
    if args.wait && args.serving.is_none() {
        say_err!(
            "symdex push: --wait reads the deployment's manifest: name its serving bucket with --serving s3://BUCKET"
        );
        return Ok(ExitCode::from(2));
    }
    let key_prefix = match (&args.product, args.ingest.prefix.is_empty()) {
        (Some(product), true) => format!("{product}/"),
        _ => args.ingest.key_prefix(),
    };
    let planned = plan::plan(
        &args.paths,
        &key_prefix,
        &args.build,
        &args.sources,
        args.limits.into(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(push(args, planned, &key_prefix))
}

async fn push(
    args: &PushArgs,
    planned: Vec<plan::Planned>,
    key_prefix: &str,
) -> anyhow::Result<ExitCode> {
    let request_timeout = Duration::from_secs(args.request_timeout);
    let client = crate::deployment::client_timing_out(request_timeout).await;
    let server = args
        .server
        .as_deref()
        .map(|url| server::Server::new(url, request_timeout));
    if let Some(server) = server.clone() {
        let checked = tokio::task::spawn_blocking(move || server.check()).await;
        if let Err(problem) = checked.unwrap_or_else(|e| Err(e.to_string())) {
            say_err!("symdex push: {problem}");
            return Ok(ExitCode::from(2));
        }
    }
    let manifest = format!("{}/", args.manifest_prefix.trim_matches('/'));
    let reachable = std::iter::once((&args.ingest.bucket, key_prefix))
        .chain(args.serving.iter().map(|s| (&s.bucket, manifest.as_str())));
    for (bucket, prefix) in reachable {
        if let Err(problem) = crate::deployment::check_bucket(&client, bucket, prefix).await {
            say_err!("symdex push: {problem}");
            return Ok(ExitCode::from(2));
        }
    }
    let serving = args
        .serving
        .as_ref()
        .map(|s| S3Store::new(client.clone(), s.bucket.clone()));
    let build_prefix = format!("{key_prefix}{}/", args.build);
    let present = match send::list_present(&client, &args.ingest.bucket, &build_prefix).await {
        Ok(present) => present,
        Err(problem) => {
            say_err!("symdex push: {problem}");
            return Ok(ExitCode::from(2));
        }
    };
    let target = std::sync::Arc::new(send::Target {
        client: client.clone(),
        bucket: args.ingest.bucket.clone(),
        serving: serving.clone(),
        server: server.clone(),
        metadata: send::metadata(args),
        present,
        parts: symdex_shared::storage::s3::PartsAtOnce::default(),
    });
    // Files no format claims that a debug file of the push names go last, once the debug
    // files are sent (and with --wait, decided): then each is indexed as a source on arrival,
    // the debug file's wants there, instead of noted and claimed when the debug file comes (a
    // note can be pushed out of a full join record by a source tree of thousands of files).
    let (first, named_sources): (Vec<plan::Planned>, Vec<plan::Planned>) = planned
        .into_iter()
        .partition(|p| !matches!(p, plan::Planned::Send(s) if s.named_source()));
    let mut lines = Vec::new();
    for wave in [first, named_sources] {
        if wave.is_empty() {
            continue;
        }
        let jobs = usize::from(args.jobs);
        let sent = send::send_all(target.clone(), wave, jobs, !args.json).await;
        let mut wave_lines = sent.lines;
        // Nothing to follow (all skipped, failed or served already): no manifest to read.
        if let (true, Some(serving), false) = (args.wait, &serving, sent.followed.is_empty()) {
            let live = match &server {
                Some(server) => wait::Live::Server(server),
                None => wait::Live::Bucket(serving),
            };
            if let Err(problem) =
                follow(args, serving, &live, &sent.followed, &mut wave_lines).await
            {
                say_err!("symdex push: {problem}");
                return Ok(ExitCode::from(2));
            }
        }
        lines.extend(wave_lines);
    }
    // The uploads are sent: a reader of the report gone changes nothing of the outcome.
    report::print(&lines, args.json).or_else(crate::stdout::reader_gone)?;
    Ok(report::exit_code(&lines))
}

/// Follows the uploads `followed` (line index, upload) until each has an outcome, and writes
/// the outcomes into their `lines`.
async fn follow(
    args: &PushArgs,
    serving: &S3Store,
    live: &wait::Live<'_>,
    followed: &[(usize, wait::Followed)],
    lines: &mut [Line],
) -> Result<(), String> {
    let since_day = followed
        .iter()
        .map(|(_, f)| f.sent_at.get(..10).unwrap_or_default().to_string())
        .min()
        .unwrap_or_default();
    let uploads: Vec<wait::Followed> = followed.iter().map(|(_, f)| f.clone()).collect();
    let progress = report::progress(uploads.len() as u64, "waiting", !args.json);
    let outcomes = wait::follow(
        serving,
        live,
        &args.manifest_prefix,
        &since_day,
        &uploads,
        Duration::from_secs(args.timeout),
        |_, _| progress.inc(1),
    )
    .await;
    progress.finish_and_clear();
    let outcomes = outcomes?;
    for (i, (line_index, _)) in followed.iter().enumerate() {
        let Some(outcome) = outcomes.get(&i) else {
            continue;
        };
        let line = &mut lines[*line_index];
        line.status = match (outcome.status, line.sent) {
            (Status::Published, false) => Status::AlreadyPublished,
            (status, _) => status,
        };
        line.keys.clone_from(&outcome.keys);
        line.reason.clone_from(&outcome.reason);
        line.held_by_products.clone_from(&outcome.held_by_products);
        line.held_by.clone_from(&outcome.held_by);
    }
    Ok(())
}
