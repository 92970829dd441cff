//! `symdex`: the command-line face of the symdex engine. Argument parsing lives here; each
//! subcommand is a module over the shared crate.

mod keys;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use symdex_shared::Layout;

#[derive(Parser)]
#[command(
    name = "symdex",
    version,
    about = "Index debug artifacts for symbol servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Identify artifacts and print their identifiers and keys (directories recurse).
    Keys(KeysArgs),
}

#[derive(Args)]
pub struct KeysArgs {
    /// Files or directories to identify.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// JSON Lines output: one object per artifact (per slice of a fat Mach-O).
    #[arg(long)]
    pub json: bool,
    /// Key every file that is not a binary artifact as a source file (SHA-1).
    #[arg(long)]
    pub source: bool,
    /// File extensions keyed as sources (comma list, e.g. `c,cpp,h,cs`); also
    /// SYMDEX_SOURCE_EXTENSIONS.
    #[arg(long, value_delimiter = ',', env = "SYMDEX_SOURCE_EXTENSIONS")]
    pub source_ext: Vec<String>,
    /// Key layouts to compute (repeatable or comma list; default: all).
    #[arg(long = "layout", value_name = "LAYOUT", value_delimiter = ',')]
    pub layouts: Vec<Layout>,
}

impl KeysArgs {
    /// The selected layouts, all of them when none was named.
    pub fn layouts(&self) -> Vec<Layout> {
        if self.layouts.is_empty() {
            Layout::ALL.to_vec()
        } else {
            self.layouts.clone()
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Keys(args) => keys::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("symdex: {err:#}");
            ExitCode::FAILURE
        }
    }
}
