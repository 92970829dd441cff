//! `symdex verify`: every referenced key exists and holds the content its record says.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use symdex_shared::refs::RefStore;
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
    let records = refs.all_keys()?;
    for record in &records {
        match store.head(&record.key)? {
            None => {
                println!("missing  {}", record.key);
                problems += 1;
            }
            Some(info) if info.size != record.size || info.etag != record.etag => {
                println!(
                    "changed  {} (size {} etag {}, recorded {} {})",
                    record.key, info.size, info.etag, record.size, record.etag
                );
                problems += 1;
            }
            Some(_) => {}
        }
    }
    for upload in refs.uploads()? {
        for key in &upload.keys {
            let referenced = refs
                .key(key)?
                .is_some_and(|r| r.refs.contains(&upload.upload));
            if !referenced {
                println!(
                    "unref    {key} (upload {} lists it, its record does not)",
                    upload.upload
                );
                problems += 1;
            }
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
