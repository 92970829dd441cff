//! `symdex verify`: the store keeps its invariants (shared/src/refs.rs): every referenced key
//! exists and holds the content its record says, no change is left half done, every upload is
//! complete, and nothing is published that no record accounts for.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use symdex_shared::refs::{RefStore, UploadState, STATE_PREFIX};
use symdex_shared::storage::{LocalStore, Storage};

#[derive(Args)]
pub struct VerifyArgs {
    /// The store directory.
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: PathBuf,
}

pub fn run(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    if !args.store.is_dir() {
        anyhow::bail!("no store at {}", args.store.display());
    }
    let store = LocalStore::open(&args.store)?;
    let refs = RefStore::new(&store);
    let mut problems = 0;
    let mut problem = |line: String| {
        println!("{line}");
        problems += 1;
    };
    let records = refs.all_keys()?;
    let mut accounted = BTreeSet::new();
    for record in &records {
        accounted.insert(record.key.clone());
        if let Some(lease) = &record.lease {
            problem(format!(
                "lease    {} ({} by {}: in progress, or left by a killed run; re-run it)",
                record.key, lease.op, lease.holder
            ));
            continue;
        }
        if record.refs.is_empty() {
            problem(format!(
                "tombstone {} (a removal did not finish)",
                record.key
            ));
            continue;
        }
        match store.head(&record.key)? {
            None => problem(format!("missing  {}", record.key)),
            Some(info) if info.size != record.size || info.etag != record.etag => {
                problem(format!(
                    "changed  {} (size {} etag {}, recorded {} {})",
                    record.key, info.size, info.etag, record.size, record.etag
                ));
            }
            Some(_) => {}
        }
    }
    for upload in refs.uploads()? {
        if upload.state != UploadState::Indexed {
            problem(format!(
                "incomplete {} ({:?}: a run was interrupted; re-run index or delete)",
                upload.upload, upload.state
            ));
            continue;
        }
        for key in &upload.keys {
            let referenced = refs
                .key(key)?
                .is_some_and(|r| r.refs.contains(&upload.upload));
            if !referenced {
                problem(format!(
                    "unref    {key} (upload {} lists it, its record does not)",
                    upload.upload
                ));
            }
        }
    }
    // Published objects no record accounts for (a removal that lost a race would leave them).
    for key in store.list("")? {
        let bookkeeping =
            key.starts_with(&format!("{STATE_PREFIX}/")) || key.starts_with("_manifest/");
        let marker = key.ends_with("index2.txt") || key.ends_with("pingme.txt");
        if !bookkeeping && !marker && !accounted.contains(&key) {
            problem(format!(
                "orphan   {key} (published, but no record references it)"
            ));
        }
    }
    println!(
        "symdex verify: {} keys checked, {problems} problems",
        records.len()
    );
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
