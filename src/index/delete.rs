//! `symdex delete`: a build's or an input's uploads taken back through the same protocol as
//! an index. In a deployment (`s3://`), a build's ingest objects are deleted and the
//! deployment's remover takes the uploads back, as for any deletion there.

use std::path::PathBuf;
use std::process::ExitCode;
use symdex_shared::upload_id::Location;

use clap::Args;
use symdex_shared::manifest::Record;
use symdex_shared::pipeline::Indexer;

use super::archives::ArchiveLimits;
use super::hand_over::FromFiles;
use super::{absolute, KeyArgs};
use crate::deployment::StoreArg;
use crate::session::open_for_writing;
use crate::DEFAULT_STORE;

#[derive(Args)]
pub struct DeleteArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`, with --build:
    /// the build's ingest objects are deleted, and the deployment's remover unpublishes what
    /// no other upload references).
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: StoreArg,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub limits: ArchiveLimits,
    /// Delete every upload of this build.
    #[arg(long, required_unless_present = "input")]
    pub build: Option<String>,
    /// Delete the uploads of these input paths (a directory deletes everything under it).
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
}

pub fn delete(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(delete_async(args))?
}

pub(super) async fn delete_async(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    let dir = match &args.store {
        StoreArg::Dir(dir) => dir,
        StoreArg::S3(url) => {
            let Some(build) = args.build.as_deref().filter(|_| args.input.is_empty()) else {
                anyhow::bail!("{url}: a deployment's uploads are deleted by build (--build), not by local input paths");
            };
            return delete_build_deployed(url, build).await;
        }
    };
    let (store, _lock) = open_for_writing(dir)?;
    let hand_over = FromFiles::new(&store, &args.keys, args.limits);
    let indexer = Indexer::new(&store, args.keys.config()).handing_over_to(&hand_over);
    let inputs: Vec<String> = args
        .input
        .iter()
        .map(|p| absolute(p).to_string_lossy().into_owned())
        .collect();
    let mut removals = Vec::new();
    for upload in indexer.refs().uploads().await? {
        let by_build = args.build.is_some() && upload.meta.build == args.build;
        let by_input = inputs.iter().any(|input| {
            upload.source == *input
                || upload.source.starts_with(&format!("{input}/"))
                || upload.source.starts_with(&format!("{input}!/"))
        });
        if by_build || by_input {
            removals.extend(indexer.begin_unindex(&upload.upload).await?);
        }
    }
    let records: Vec<Record> = removals.iter().map(|r| r.record.clone()).collect();
    // The manifest first (a run killed before the uploads are forgotten reports them again),
    // then the keys freed are handed over — to none of the uploads deleted here, all marked
    // removing by now.
    indexer.write_manifest(&records).await?;
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    let removed: usize = records.iter().map(|r| r.removed.len()).sum();
    say!(
        "symdex: {} uploads deleted, {removed} keys unpublished",
        records.len()
    )
    .or_else(crate::stdout::reader_gone)?;
    Ok(ExitCode::SUCCESS)
}

/// Deletes the ingest objects of `build`'s uploads in the deployment whose serving bucket is
/// `store` (each at the version or content its upload record names, so a newer upload under
/// the same key stays); the deployment's remover then takes the uploads back through the
/// protocol, as for any deletion of an ingest object.
async fn delete_build_deployed(
    serving: &crate::deployment::S3Url,
    build: &str,
) -> anyhow::Result<ExitCode> {
    // Its client deletes the ingest objects too (a request names its bucket).
    let store = serving.open().await?;
    let uploads = symdex_shared::refs::RefStore::new(&store).uploads().await?;
    // (bucket, key) -> (version, content identity): an archive's entries share its object.
    let mut objects = std::collections::BTreeMap::new();
    for upload in uploads {
        if upload.meta.build.as_deref() != Some(build) {
            continue;
        }
        let location = Location::of_source(&upload.source);
        let Some((bucket, key)) = location.s3() else {
            continue;
        };
        let key = key.split("!/").next().unwrap_or(key);
        let etag = upload.ingest_etag.clone().unwrap_or(upload.etag.clone());
        objects.insert(
            (bucket.to_string(), key.to_string()),
            (upload.ingest_version.clone(), etag),
        );
    }
    let mut deleted = 0usize;
    for ((bucket, key), (version, etag)) in &objects {
        match store
            .delete_object_version(bucket, key, version.as_deref(), etag)
            .await
        {
            Ok(true) => {
                deleted += 1;
                say!("deleted s3://{bucket}/{key}").or_else(crate::stdout::reader_gone)?;
            }
            Ok(false) => say!("gone or replaced already: s3://{bucket}/{key}")
                .or_else(crate::stdout::reader_gone)?,
            Err(e) => anyhow::bail!("{}", crate::deployment::explain(bucket, &e)),
        }
    }
    say!(
        "symdex: {deleted} ingest objects of build {build} deleted; the deployment's remover unpublishes their keys (see manifest query --action unpublished)"
    ).or_else(crate::stdout::reader_gone)?;
    Ok(if objects.is_empty() {
        say_err!("symdex: no upload of build {build} found");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
