//! `symdex`: the command-line face of the symdex engine. Argument parsing lives here; each
//! subcommand is a module over the shared crate.

/// `println!` returning the write's error instead of panicking ([`stdout`]): `say!(...)?`.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that drops the line where standard error fails instead of panicking
/// ([`stdout`]).
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::stdout::err_line(format_args!($($arg)*))
    };
}

mod audit_page;
mod auth;
mod check;
mod core_file;
mod crash;
mod credentials;
mod deployment;
mod index;
mod inputs;
mod keys;
mod manifest_cmd;
mod ordered;
mod push;
mod report;
mod retention;
mod serve;
mod session;
mod sourcelink;
mod srcsrv;
mod stamps;
mod stdout;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use symdex_shared::formats::Detail;

use inputs::{LayoutArgs, SourceArgs};

/// The embedded default store.
const DEFAULT_STORE: &str = "./symbols";

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
    /// Index artifacts (files, directories, zip archives) into a store directory.
    Index(index::IndexArgs),
    /// Send artifacts to a deployment's ingest bucket with build metadata; with --wait, follow
    /// each until it is published, rejected or in conflict. Exit 0: all published, 1: any
    /// rejected, in conflict or timed out, 2: errors.
    Push(push::PushArgs),
    /// Delete uploads (by build or input path); unpublish keys nothing else references.
    Delete(index::DeleteArgs),
    /// Move a build's uploads to another retention channel (default: release, kept forever).
    Promote(retention::PromoteArgs),
    /// Remove the uploads whose retention has passed (keys still referenced stay).
    Expire(retention::ExpireArgs),
    /// Write one self-contained HTML page of a store's manifest and holdings: uploads over
    /// time, each decision and why, conflicts, missing sources, search and filters.
    Audit(audit_page::AuditArgs),
    /// Query the manifest of a store.
    #[command(subcommand)]
    Manifest(manifest_cmd::ManifestCommand),
    /// Which symbols a module, binary or list of modules needs, where each client looks, and
    /// whether a server (or store) has them; for a PDB, whether each source document is served
    /// with the checksum it recorded. Exit 0: all found, 1: something missing, 2: error.
    Check(check::CheckArgs),
    /// Reports from access logs (`report misses`: what debuggers asked for and did not get).
    #[command(subcommand)]
    Report(report::ReportCommand),
    /// Serve a store over HTTP for debuggers (GET, HEAD, ranges; 404 for misses).
    Serve(serve::ServeArgs),
    /// Check that every referenced key exists and matches its record.
    Verify(verify::VerifyArgs),
    /// Print the Source Link JSON a build gives its linker (`/SOURCELINK:`,
    /// `/pdbstream:sourcelink=`) so debuggers fetch its sources from the store:
    /// `<url>/src/<product>/<build>/<path under a root>`.
    Sourcelink(sourcelink::SourcelinkArgs),
    /// Print a srcsrv stream for a linked PDB (for debuggers without Source Link), to write
    /// into it with `pdbstr` or `/pdbstream:srcsrv=`: each of its documents under a root is
    /// fetched from `<url>/src/<product>/<build>/<path under the root>`; the others are
    /// listed on stderr.
    Srcsrv(srcsrv::SrcsrvArgs),
}

#[derive(Args)]
pub struct KeysArgs {
    /// Files or directories to identify.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// JSON Lines output: one object per artifact (per slice of a fat Mach-O).
    #[arg(long)]
    pub json: bool,
    /// Also read and show the sources each artifact names (a debug file's source paths; a
    /// PDB's or Portable PDB's documents, Source Link map and srcsrv stream): what `index`
    /// joins with uploaded sources, beyond what the keys need.
    #[arg(long)]
    pub details: bool,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// How far an archive is expanded, as `index` takes it.
    #[command(flatten)]
    pub limits: index::ArchiveLimits,
}

impl KeysArgs {
    /// What identification reads beyond the keys.
    pub fn detail(&self) -> Detail {
        match self.details {
            true => Detail::Sources,
            false => Detail::Keys,
        }
    }
}

/// Runs one store operation to its end on a single-threaded runtime (the local store answers
/// at once; the runtime is there because the storage calls are futures; an S3 store's client
/// is made and used within one call: its connections belong to the runtime).
pub fn block_on<F: std::future::Future>(future: F) -> anyhow::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(future))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `check` says "missing" with 1, so its errors (no store, a bad server URL) are 2, as its
    // help promises; a CI gate must tell the two apart.
    let error_code = match cli.command {
        Command::Check(_) => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    };
    let result = match cli.command {
        Command::Keys(args) => keys::run(&args),
        Command::Index(args) => index::run(&args),
        Command::Push(args) => push::run(&args),
        Command::Delete(args) => index::delete(&args),
        Command::Promote(args) => retention::promote(&args),
        Command::Expire(args) => retention::expire(&args),
        Command::Manifest(cmd) => manifest_cmd::run(&cmd),
        Command::Audit(args) => audit_page::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Report(cmd) => report::run(&cmd),
        Command::Check(args) => check::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Sourcelink(args) => sourcelink::run(&args),
        Command::Srcsrv(args) => srcsrv::run(&args),
    };
    match result {
        Ok(code) => code,
        // Standard output's reader went away (`| head`): quietly, and not as a success the
        // run did not reach (src/stdout.rs).
        Err(err) if stdout::is_reader_gone(err.as_ref()) => {
            ExitCode::from(stdout::READER_GONE_STATUS)
        }
        Err(err) => {
            say_err!("symdex: {err:#}");
            error_code
        }
    }
}

/// mimalloc, not the system's: a re-index allocates a hundred small strings per input, and
/// glibc's malloc and free were a quarter of its time (Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
