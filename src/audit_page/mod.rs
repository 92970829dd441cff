//! `symdex audit`: the manifest and the store as one self-contained HTML page (the shared
//! crate's [`symdex_shared::audit_page`] makes it; the sweeper Lambda writes the same page in
//! a deployment).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use symdex_shared::audit_page::PageData;

use crate::deployment::StoreArg;

#[derive(Args)]
pub struct AuditArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`), as
    /// `manifest query` reads it.
    #[arg(long, default_value = crate::DEFAULT_STORE)]
    pub store: StoreArg,
    /// Where to write the page: one HTML file, its script, style and data inside (it opens
    /// from disk and fetches nothing).
    #[arg(long)]
    pub html: PathBuf,
    /// The manifest prefix inside the store.
    #[arg(long, default_value = "_manifest")]
    pub prefix: String,
}

/// The page of `store`'s manifest under `prefix` and of what it holds (`shown_as` names the
/// store on it), and what it was made of: what `symdex audit` writes and `serve --audit`
/// answers.
async fn read_and_render(
    store: &StoreArg,
    shown_as: &str,
    prefix: &str,
) -> anyhow::Result<(PageData, String)> {
    let opened = store.open().await?;
    Ok(symdex_shared::audit_page::read_and_render(&*opened, shown_as, prefix).await?)
}

/// The page alone ([`read_and_render`]).
pub async fn render_store(
    store: &StoreArg,
    shown_as: &str,
    prefix: &str,
) -> anyhow::Result<String> {
    Ok(read_and_render(store, shown_as, prefix).await?.1)
}

pub fn run(args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let shown_as = match &args.store {
        StoreArg::Dir(dir) => dir.display().to_string(),
        StoreArg::S3(url) => url.to_string(),
    };
    let (data, html) = crate::block_on(read_and_render(&args.store, &shown_as, &args.prefix))??;
    // Written beside its final name and renamed: a browser never opens half a page.
    let partial = args.html.with_extension("html.partial");
    std::fs::write(&partial, &html).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &args.html)
        .with_context(|| format!("writing {}", args.html.display()))?;
    let held: u64 = data.holdings.lines.iter().map(|l| l.keys).sum();
    let bytes: u64 = data.holdings.lines.iter().map(|l| l.bytes).sum();
    say!(
        "symdex audit: {} records read, {held} keys ({bytes} bytes) held; wrote {} ({} bytes)",
        data.records,
        args.html.display(),
        html.len()
    )?;
    Ok(ExitCode::SUCCESS)
}
