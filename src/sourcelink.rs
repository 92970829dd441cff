//! `symdex sourcelink`: the Source Link JSON a build gives its linker (`/SOURCELINK:`,
//! `/pdbstream:sourcelink=`, MSBuild's `SourceLink`) so debuggers fetch its sources from the
//! store: `<url>/src/<product>/<build>/<path under a build root>`.

use std::process::ExitCode;

use clap::Args;
use symdex_shared::sourcelink::{store_base, BuildRoot, SourceLinkMap};

/// Where a build's sources are served from, as both commands take it.
#[derive(Args)]
pub struct Served {
    /// A directory the build compiled its sources under, as the compiler records their paths
    /// (`/home/ci/work`, `C:\b`); repeat it for several.
    #[arg(long = "root", required = true, value_name = "DIR")]
    pub roots: Vec<BuildRoot>,
    /// The product the build is uploaded as.
    #[arg(long)]
    pub product: String,
    /// The build it is uploaded as.
    #[arg(long)]
    pub build: String,
    /// The store's public base URL (what debuggers reach: the CDN or `symdex serve`).
    #[arg(long)]
    pub url: String,
}

#[derive(Args)]
pub struct SourcelinkArgs {
    #[command(flatten)]
    pub served: Served,
}

pub fn run(args: &SourcelinkArgs) -> anyhow::Result<ExitCode> {
    let served = &args.served;
    let base =
        store_base(&served.url, &served.product, &served.build).map_err(anyhow::Error::msg)?;
    let map = SourceLinkMap::for_roots(&served.roots, &base);
    say!("{}", map.to_json())?;
    Ok(ExitCode::SUCCESS)
}
