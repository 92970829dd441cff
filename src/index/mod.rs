//! `symdex index` and `symdex delete` over a local store directory: the arguments and the
//! run; reading ahead, the writer's lanes, the sink and archives in the modules below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use symdex_shared::encoded::Encodings;
use symdex_shared::pipeline::{default_prefixes, Config, Indexer};
use symdex_shared::retention::{RetentionPolicy, DEFAULT_POLICY};
use symdex_shared::upload_meta::{product_named, UploadMeta};
use symdex_shared::Layout;

use crate::inputs::{expand_paths_excluding, LayoutArgs, SourceArgs};
use crate::stamps::NewStamps;
use crate::DEFAULT_STORE;

mod archives;
mod delete;
mod hand_over;
mod lanes;
mod read;
mod sink;
#[cfg(test)]
mod tests;

use crate::session::{exclusive_lease, open_for_writing};
use lanes::{run_async, run_lane, Writer};
use read::{read_ahead, LaneInput, LANE_QUEUE, READ_AHEAD};

pub use archives::ArchiveLimits;
pub use delete::{delete, DeleteArgs};
pub use hand_over::FromFiles;
pub use sink::describe;

#[derive(Args)]
pub struct IndexArgs {
    /// Files, directories (recursive) or archives (zip, nupkg, tar, tar.gz/zst/xz/bz2, single
    /// .gz/.zst/.xz/.bz2 files, CAB `.pd_`, Debian and RPM packages, cpio, 7z): every entry is
    /// indexed.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The store directory (created if missing).
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: PathBuf,
    #[command(flatten)]
    pub keys: KeyArgs,
    /// The directory the build compiled its sources in (the absolute paths its debug files
    /// name): source files and source archive entries then serve exactly
    /// `<DIR>/<their path>` (a loose file's path relative to the current directory), instead
    /// of being matched by the longest path suffix.
    #[arg(long, value_name = "DIR")]
    pub source_root: Option<String>,
    /// Build id recorded with every upload (and used by `delete --build`).
    #[arg(long)]
    pub build: Option<String>,
    /// Product recorded with every upload (manifest queries, per-product audits).
    #[arg(long)]
    pub product: Option<String>,
    /// Product version recorded with every upload.
    #[arg(long = "version", name = "product-version")]
    pub version: Option<String>,
    /// Retention channel of these uploads (`try`, `nightly`, `release`...).
    #[arg(long)]
    pub channel: Option<String>,
    #[command(flatten)]
    pub policy: PolicyArg,
    /// Replace keys whose content differs instead of reporting a conflict: only bytes held
    /// solely by uploads of the same `--product` (without one: by uploads naming none).
    /// Another product's bytes, or bytes whose upload is unknown, stay a conflict.
    #[arg(long)]
    pub overwrite: bool,
    /// Exit 0 even when an input's keys are held by other bytes (conflicts). Without it such a
    /// run exits 1, so that CI sees the symbols it published are not the ones served.
    #[arg(long)]
    pub allow_conflicts: bool,
    /// Check every key of an input indexed before, as a first run does (repairs objects
    /// deleted or changed behind symdex's back). Without it, an input whose last run published
    /// all its keys is answered from its upload record (`verify` finds what it would repair).
    #[arg(long)]
    pub recheck: bool,
    #[command(flatten)]
    pub limits: ArchiveLimits,
    /// Print every manifest record (JSON Lines) instead of only the summary.
    #[arg(long)]
    pub json: bool,
    /// Inputs indexed at once (default: the machine's cores). ELF files with a build id and
    /// thin Mach-O files of different ids are indexed side by side; everything else alone,
    /// in order. The store and the manifest come out as with `--jobs 1`.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
}

/// What decides an input's keys besides its bytes: given to `index`, and to `delete` and
/// `expire`, which index the uploads waiting for keys they free again (refs/, invariant 8)
/// — the same options as `index` was given.
#[derive(Args, Clone)]
pub struct KeyArgs {
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Key prefix of a layout, e.g. `unified=sentry/` (repeatable).
    #[arg(long = "prefix", value_name = "LAYOUT=PREFIX", value_parser = parse_prefix)]
    pub prefixes: Vec<(Layout, String)>,
    /// Store the SymSrv family's keys (ssqp, symstore, symstore_index2, breakpad) lowercase,
    /// for a server that looks them up case-insensitively (`symdex serve --fold-case`, the
    /// Terraform module's CDN).
    #[arg(long)]
    pub fold_case: bool,
    /// Do not join debug files and sources (for a store nobody uploads sources to): debug
    /// files record no wanted paths, sources serve none (`--source` files are still keyed).
    #[arg(long)]
    pub no_source_joins: bool,
    /// Reject PDBs whose srcsrv stream runs commands (`SRCSRVCMD`), which debuggers execute
    /// to fetch sources, or may (the stream could not all be read; a PDZ); without it they
    /// are published, their records saying so.
    #[arg(long)]
    pub refuse_srcsrv_commands: bool,
    /// Compressed copies stored beside each newly published key, for clients that accept
    /// them (`symdex serve`, the CDN): `zstd`, `gzip`, `zstd,gzip` or `none`. A copy is kept
    /// for objects of at least 1 KiB that shrink by a quarter or more.
    #[arg(long, value_name = "ENCODINGS", default_value = "zstd")]
    pub compress: Encodings,
    #[command(flatten)]
    pub sources: SourceArgs,
}

impl KeyArgs {
    /// The configuration of a writer holding the store's lock, with these keys.
    pub fn config(&self) -> Config {
        let mut prefixes = default_prefixes();
        prefixes.extend(self.prefixes.iter().cloned());
        Config {
            layouts: self.layout.layouts(),
            prefixes,
            lease: exclusive_lease(),
            fold_case: self.fold_case,
            source_joins: !self.no_source_joins,
            refuse_srcsrv_commands: self.refuse_srcsrv_commands,
            compress: self.compress.clone(),
            ..Config::default()
        }
    }
}

fn parse_prefix(s: &str) -> Result<(Layout, String), String> {
    let (layout, prefix) = s.split_once('=').ok_or("expected LAYOUT=PREFIX")?;
    let layout: Layout = layout.parse()?;
    let mut prefix = prefix.trim_start_matches('/').to_string();
    if !prefix.is_empty() && !prefix.ends_with('/') {
        prefix.push('/');
    }
    if !prefix.is_empty() {
        symdex_shared::storage::check_key(prefix.trim_end_matches('/'))
            .map_err(|e| e.to_string())?;
    }
    // The store's own records and the compressed copies live there: a layout's keys under
    // it could be taken for (or overwrite) them. The Lambda refuses the same.
    let private = format!("{}/", symdex_shared::storage::STATE_PREFIX);
    if prefix.starts_with(&private) {
        return Err(format!(
            "{prefix:?}: a layout's prefix may not lie under the store's private {private}"
        ));
    }
    Ok((layout, prefix))
}

fn config(args: &IndexArgs) -> Config {
    Config {
        overwrite: args.overwrite,
        recheck: args.recheck,
        retention: args.policy.policy.clone(),
        ..args.keys.config()
    }
}

/// `--policy`: channel -> retention.
#[derive(Args, Clone)]
pub struct PolicyArg {
    /// Retention per channel, e.g. `try=28d,nightly=90d,release=forever` (units s, m, h, d,
    /// w, y). Uploads without a channel, or of a channel not named, never expire.
    #[arg(long = "policy", value_name = "POLICY", default_value = DEFAULT_POLICY)]
    pub policy: RetentionPolicy,
}

fn absolute(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

pub fn run(args: &IndexArgs) -> anyhow::Result<ExitCode> {
    let (store, _lock) = open_for_writing(&args.store)?;
    let store_root = absolute(store.inner().root());
    // Canonical paths (upload ids name them): `index_file` takes them as they are.
    let files = expand_paths_excluding(&args.inputs, &store_root);
    let count = files.len();
    // A removal a killed `delete` or `expire` left half done is finished by indexing its
    // upload again: the keys it frees go to the uploads waiting for them, as they would have.
    // The writer lock makes this run the store's only writer: source-map records are
    // written once per flush, before the uploads they serve are finalized (the hand-over's
    // re-indexes too: they share the deferred writes).
    let deferred = Arc::default();
    let hand_over = FromFiles::new(&store, &args.keys, args.limits).sharing(&deferred);
    // The same re-reading of an input has a debug file's unclaimed sources indexed again.
    let indexer = Indexer::new(&store, config(args))
        .defer_source_map_writes_to(deferred)
        .handing_over_to(&hand_over)
        .claiming_sources_through(&hand_over);
    let meta = upload_meta(args);
    let lanes = match args.jobs {
        Some(jobs) => jobs,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // One lane is no lane: every input is indexed by this thread, in order.
    let lanes = if lanes > 1 { lanes } else { 0 };
    // Inputs are read, hashed and identified on a thread of their own, ahead of the writers.
    // It only reads: an input's stamp (stamps.rs), and a known input's upload record, used
    // only if nothing changed the store since (`Prefetched`).
    let stamps = Mutex::new(NewStamps::default());
    std::thread::scope(|scope| {
        let (ahead, inputs) = std::sync::mpsc::sync_channel(READ_AHEAD);
        let (reader, meta) = (store.inner(), &meta);
        // Inputs read on as many threads as there are lanes (one with none).
        let readers = (lanes > 0, lanes.max(1));
        scope.spawn(move || read_ahead(files, reader, args, meta, readers, ahead));
        let (done, finished) = std::sync::mpsc::channel();
        let mut senders = Vec::new();
        for _ in 0..lanes {
            let (send, lane) = std::sync::mpsc::sync_channel::<LaneInput>(LANE_QUEUE);
            senders.push(send);
            let (indexer, done, stamps) = (&indexer, done.clone(), &stamps);
            scope.spawn(move || run_lane(indexer, meta, stamps, lane, done));
        }
        drop(done);
        let writer = Writer {
            indexer: &indexer,
            handed_conflicts: hand_over.conflicts(),
            lanes: senders,
            finished,
            dispatched: std::collections::VecDeque::new(),
            results: BTreeMap::new(),
        };
        crate::block_on(run_async(
            args, &store, meta, &stamps, writer, inputs, count,
        ))?
    })
}

fn upload_meta(args: &IndexArgs) -> UploadMeta {
    UploadMeta {
        build: args.build.clone(),
        product: product_named(args.product.clone()),
        version: args.version.clone(),
        channel: args.channel.clone(),
        expires: None,
        source_root: args.source_root.clone(),
    }
}
