//! `symdex verify`: the store keeps its invariants (shared/src/refs/): every referenced key
//! exists and holds the content its record says, no change is left half done, every upload is
//! complete, and nothing is published that no record accounts for.

use std::process::ExitCode;

use clap::Args;
use symdex_shared::audit::{audit_with, Depth};

use crate::deployment::StoreArg;

#[derive(Args)]
pub struct VerifyArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`).
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: StoreArg,
    /// Also hash every published file against its recorded content identity (by default
    /// only sizes are compared: no content is read).
    #[arg(long)]
    pub deep: bool,
}

pub fn run(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let depth = if args.deep { Depth::Deep } else { Depth::Fast };
    let audit = crate::block_on(async {
        let store = args.store.open().await?;
        anyhow::Ok(audit_with(&*store, "_manifest", depth).await?)
    })??;
    for problem in &audit.problems {
        say!("{problem}")?;
    }
    say!(
        "symdex verify: {} keys checked ({}), {} problems",
        audit.keys,
        if args.deep {
            "sizes and content"
        } else {
            "sizes; --deep hashes content"
        },
        audit.problems.len()
    )?;
    Ok(if audit.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
