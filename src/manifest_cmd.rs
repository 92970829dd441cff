//! `symdex manifest query`: the audit questions, answered from the manifest of a store.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use symdex_shared::manifest::{read_all, Action, Query};
use symdex_shared::storage::LocalStore;

#[derive(Subcommand)]
pub enum ManifestCommand {
    /// Print manifest records matching every filter given.
    Query(QueryArgs),
}

#[derive(Args)]
pub struct QueryArgs {
    /// The store directory.
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: PathBuf,
    #[arg(long)]
    pub debug_id: Option<String>,
    #[arg(long)]
    pub code_id: Option<String>,
    /// File name, code file or debug file (case-insensitive).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub build: Option<String>,
    #[arg(long)]
    pub action: Option<Action>,
    /// RFC 3339 time or YYYY-MM-DD.
    #[arg(long)]
    pub since: Option<String>,
    /// The manifest prefix inside the store.
    #[arg(long, default_value = "_manifest")]
    pub prefix: String,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: &ManifestCommand) -> anyhow::Result<ExitCode> {
    let ManifestCommand::Query(args) = cmd;
    if !args.store.is_dir() {
        anyhow::bail!("no store at {}", args.store.display());
    }
    let store = LocalStore::open(&args.store)?;
    let query = Query {
        debug_id: args.debug_id.clone(),
        code_id: args.code_id.clone(),
        name: args.name.clone(),
        build: args.build.clone(),
        action: args.action,
        since: args.since.clone(),
    };
    let records: Vec<_> = crate::block_on(read_all(&store, &args.prefix))??
        .into_iter()
        .filter(|r| query.matches(r))
        .collect();
    if args.json {
        for r in &records {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<20} {:<11} {:<14} {:<11} {:<8} {:<44} {:>5} NAME",
        "TIME", "ACTION", "BUILD", "FORMAT", "ARCH", "DEBUG_ID", "KEYS"
    );
    for r in &records {
        let keys = r.published.len() + r.unchanged.len() + r.removed.len();
        println!(
            "{:<20} {:<11} {:<14} {:<11} {:<8} {:<44} {:>5} {}{}",
            r.time,
            r.action.map_or("-", |a| a.as_str()),
            r.meta.build.as_deref().unwrap_or("-"),
            r.format.as_deref().unwrap_or("-"),
            r.arch.as_deref().unwrap_or("-"),
            r.debug_id.as_deref().unwrap_or("-"),
            keys,
            r.name.as_deref().unwrap_or(&r.ingest_key),
            r.reason
                .as_deref()
                .map(|s| format!("  ({s})"))
                .unwrap_or_default(),
        );
    }
    println!("{} records", records.len());
    Ok(ExitCode::SUCCESS)
}
