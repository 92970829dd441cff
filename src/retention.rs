//! `symdex promote` and `symdex expire` over a local store directory.

use std::process::ExitCode;
use std::time::SystemTime;

use clap::Args;
use symdex_shared::manifest::Record;
use symdex_shared::pipeline::{Config, Indexer};
use symdex_shared::retention::{parse_time, RetentionPolicy, RELEASE_CHANNEL};

use crate::deployment::StoreArg;
use crate::index::{describe, FromFiles, KeyArgs, PolicyArg};
use crate::session::{exclusive_lease, open_for_writing};
use crate::DEFAULT_STORE;

#[derive(Args)]
pub struct PromoteArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`: the sweeper's
    /// promotion, run from here; give the deployment's --policy).
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: StoreArg,
    /// Promote every upload of this build.
    #[arg(long)]
    pub build: String,
    /// Only the uploads of this product.
    #[arg(long)]
    pub product: Option<String>,
    /// The channel the uploads move to (their expiry is recomputed under the policy).
    #[arg(long, default_value = RELEASE_CHANNEL)]
    pub channel: String,
    #[command(flatten)]
    pub policy: PolicyArg,
}

#[derive(Args)]
pub struct ExpireArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`, with --dry-run:
    /// expiring a deployment is its sweeper's, which hands freed keys to the uploads waiting
    /// for them from the ingest bucket).
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: StoreArg,
    /// Print what would be removed and the bytes freed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The time to expire at (RFC 3339, e.g. 2026-12-24T00:00:00Z; default: now).
    #[arg(long, value_parser = parse_time)]
    pub now: Option<SystemTime>,
    /// Recompute every upload's expiry under this policy (from its channel and indexing
    /// time) instead of the expiry recorded when it was indexed or promoted.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<RetentionPolicy>,
    /// Print every manifest record (JSON Lines).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub limits: crate::index::ArchiveLimits,
}

fn indexer_config() -> Config {
    Config {
        lease: exclusive_lease(),
        ..Config::default()
    }
}

fn print_records(records: &[Record], json: bool) -> anyhow::Result<()> {
    for record in records {
        if json {
            say!("{}", serde_json::to_string(record)?).or_else(crate::stdout::reader_gone)?;
        } else {
            say!("{}", describe(record)).or_else(crate::stdout::reader_gone)?;
        }
    }
    Ok(())
}

pub fn promote(args: &PromoteArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(promote_async(args))?
}

async fn promote_async(args: &PromoteArgs) -> anyhow::Result<ExitCode> {
    let records = match &args.store {
        StoreArg::Dir(dir) => {
            let (store, _lock) = open_for_writing(dir)?;
            promote_in(&store, indexer_config(), args).await?
        }
        StoreArg::S3(_) => {
            let store = args.store.open().await?;
            promote_in(&*store, deployment_config(), args).await?
        }
    };
    print_records(&records, false)?;
    say!(
        "symdex: {} uploads of build {} promoted to {}",
        records.len(),
        args.build,
        args.channel
    )
    .or_else(crate::stdout::reader_gone)?;
    Ok(if records.is_empty() {
        say_err!("symdex: no upload of build {} found", args.build);
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A deployment's serving bucket, written as its functions write it: leases for many writers
/// (`LeasePolicy::default`), the manifest gzipped.
fn deployment_config() -> Config {
    Config {
        gzip_manifest: true,
        ..Config::default()
    }
}

/// Promotes `args.build`'s uploads in `store`, recording each in the manifest.
async fn promote_in(
    store: &dyn symdex_shared::storage::Storage,
    config: Config,
    args: &PromoteArgs,
) -> anyhow::Result<Vec<Record>> {
    let indexer = Indexer::new(store, config);
    let uploads = indexer.refs().uploads().await?;
    let records = indexer
        .promote_build(
            uploads,
            &args.build,
            args.product.as_deref(),
            &args.channel,
            &args.policy.policy,
        )
        .await?;
    indexer.write_manifest(&records).await?;
    Ok(records)
}

pub fn expire(args: &ExpireArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(expire_async(args))?
}

async fn expire_async(args: &ExpireArgs) -> anyhow::Result<ExitCode> {
    let now = args.now.unwrap_or_else(SystemTime::now);
    let dir = match &args.store {
        StoreArg::Dir(dir) => dir,
        StoreArg::S3(url) => {
            if !args.dry_run {
                anyhow::bail!(
                    "{url}: a deployment's uploads are expired by its sweeper (it hands freed keys to the uploads waiting for them, from the ingest bucket); --dry-run shows what it will remove. To expire now, run the sweeper: aws lambda invoke --cli-binary-format raw-in-base64-out --function-name <sweeper_function> --payload '{{}}' out.json"
                );
            }
            let store = args.store.open().await?;
            let indexer = Indexer::new(&*store, deployment_config());
            let plan = indexer.plan_expiry(now, args.policy.as_ref()).await?;
            print_plan(&plan)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let (store, _lock) = open_for_writing(dir)?;
    let hand_over = FromFiles::new(&store, &args.keys, args.limits);
    let indexer = Indexer::new(&store, args.keys.config()).handing_over_to(&hand_over);
    let plan = indexer.plan_expiry(now, args.policy.as_ref()).await?;
    if args.dry_run {
        print_plan(&plan)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut removals = Vec::new();
    for upload in &plan.uploads {
        removals.extend(
            indexer
                .expire(&upload.upload, now, args.policy.as_ref())
                .await?,
        );
    }
    let records: Vec<Record> = removals.iter().map(|r| r.record.clone()).collect();
    // The manifest first: a run killed before the uploads are forgotten reports them again.
    indexer.write_manifest(&records).await?;
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    print_records(&records, args.json)?;
    let removed: Vec<&String> = records.iter().flat_map(|r| &r.removed).collect();
    let bytes: u64 = removed.iter().filter_map(|k| plan.freed.get(*k)).sum();
    say!(
        "symdex: {} uploads expired, {} keys unpublished, {bytes} bytes freed",
        records.len(),
        removed.len()
    )
    .or_else(crate::stdout::reader_gone)?;
    Ok(ExitCode::SUCCESS)
}

/// What an expiry would remove, and the bytes it would free.
fn print_plan(plan: &symdex_shared::pipeline::ExpiryPlan) -> std::io::Result<()> {
    for upload in &plan.uploads {
        say!(
            "would expire {} (channel {}, expires {})",
            upload.source,
            upload.meta.channel.as_deref().unwrap_or("(none)"),
            upload.meta.expires.as_deref().unwrap_or("never")
        )?;
    }
    for (key, size) in &plan.freed {
        say!("would unpublish {key} ({size} bytes)")?;
    }
    say!(
        "symdex: dry run: {} uploads would expire, {} keys unpublished, {} bytes freed",
        plan.uploads.len(),
        plan.freed.len(),
        plan.bytes_freed()
    )?;
    Ok(())
}
