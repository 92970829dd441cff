//! `symdex keys`: identify artifacts and print their identifiers.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use symdex_shared::archive::Container;
use symdex_shared::layouts::Sidecar;
use symdex_shared::{keys_for, lookup_keys_for, Identity, KeySet, Layout};

use crate::inputs::{
    expand_each, identify_first, plain_reads, walk_paths, First, Identified, Outcome, Walked,
};
use crate::ordered::{map_in_order_iter_on, workers};
use crate::KeysArgs;

/// One output row: the identity with where it came from, what reading it cost, its keys and
/// where debuggers will look for its debug companion.
#[derive(Serialize)]
struct Row<'a> {
    path: &'a str,
    #[serde(flatten)]
    identity: &'a Identity,
    bytes_read: u64,
    keys: BTreeMap<Layout, &'a [String]>,
    lookup_keys: BTreeMap<Layout, &'a [String]>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    sidecars: &'a [Sidecar],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rejected: Vec<&'a str>,
}

/// The non-empty layouts of a key set.
fn non_empty(set: &KeySet) -> BTreeMap<Layout, &[String]> {
    set.keys
        .iter()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(layout, keys)| (*layout, keys.as_slice()))
        .collect()
}

#[derive(Serialize)]
struct ErrorRow<'a> {
    path: &'a str,
    error: String,
}

fn write_table_keys(out: &mut impl Write, label: &str, set: &KeySet) -> io::Result<()> {
    for (layout, keys) in non_empty(set) {
        for key in keys {
            writeln!(out, "    {label:<7} {:<16} {key}", layout.as_str())?;
        }
    }
    for reason in &set.rejected {
        writeln!(out, "    {label:<7} {:<16} {reason}", "rejected")?;
    }
    Ok(())
}

/// A split-DWARF file's DWO ids under its row: a package's (with its index version), a
/// binary's skeletons'.
fn write_table_dwo_ids(out: &mut impl Write, id: &Identity) -> io::Result<()> {
    if let Some(package) = &id.dwarf_package {
        let what = format!("package v{}", package.index_version);
        for dwo_id in &package.dwo_ids {
            writeln!(out, "    {:<7} {what:<16} {dwo_id}", "dwo_id")?;
        }
    }
    if let Some(split) = &id.split_dwarf {
        for dwo_id in &split.dwo_ids {
            writeln!(out, "    {:<7} {:<16} {dwo_id}", "dwo_id", "skeleton")?;
        }
        for reason in &split.unread {
            writeln!(out, "    {:<7} {:<16} {reason}", "dwo_id", "unread")?;
        }
    }
    Ok(())
}

/// A PDB's sources under its row: how many documents, its Source Link map's entries, its
/// srcsrv stream, what was not read.
fn write_table_pdb_sources(out: &mut impl Write, id: &Identity) -> io::Result<()> {
    let Some(sources) = &id.pdb_sources else {
        return Ok(());
    };
    let label = "sources";
    writeln!(
        out,
        "    {label:<7} {:<16} {}",
        "documents",
        sources.documents.len()
    )?;
    if let Some(map) = &sources.source_link {
        for (path, url) in &map.documents {
            writeln!(out, "    {label:<7} {:<16} {path} -> {url}", "source link")?;
        }
    }
    if let Some(srcsrv) = &sources.srcsrv {
        let commands = if srcsrv.commands {
            " (runs commands: SRCSRVCMD)"
        } else {
            ""
        };
        let target = srcsrv.target.as_deref().unwrap_or("-");
        writeln!(out, "    {label:<7} {:<16} {target}{commands}", "srcsrv")?;
    }
    for reason in &sources.unread {
        writeln!(out, "    {label:<7} {:<16} {reason}", "unread")?;
    }
    Ok(())
}

pub fn run(args: &KeysArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(crate::stdout::Marked(stdout.lock()));
    let mut failed = false;
    let layouts = args.layout.layouts();
    if !args.json {
        writeln!(
            out,
            "{:<11} {:<8} {:<10} {:<44} {:<40} PATH",
            "FORMAT", "ARCH", "KIND", "DEBUG_ID", "CODE_ID"
        )?;
    }
    no_huge_pages();
    // Each file identified and its rows written on a worker as the walk meets it; taken here
    // in input order. An archive's entries are walked in its turn, here, their rows written
    // as they come.
    let mut written = Ok(());
    let workers = if plain_reads() { 1 } else { workers() };
    map_in_order_iter_on(
        workers,
        walk_paths(&args.paths),
        |entry| rows_of(args, &layouts, &entry),
        |rows| {
            written = take_rows(&mut out, args, &layouts, rows, &mut failed);
            written.is_ok()
        },
    );
    written?;
    out.flush()?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// No transparent huge pages for this process. The allocator is built asking for none
/// (mimalloc's `no_thp`, Cargo.toml); where the system gives them unasked (THP `always`), a
/// run over many small files zeroes a fresh 2 MiB page wherever a worker's heap grows or
/// comes back after a purge (measured over ten times the corpus: 5% of the run's time, and
/// a peak of 49 MiB where it is 18 without). Failing, nothing changes but that cost.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// What a worker made of one walked input: its rows and messages, or the archive it is.
enum Rows {
    Written {
        out: Vec<u8>,
        err: Vec<u8>,
        failed: bool,
    },
    Archive(PathBuf, Container),
}

/// A walked input's rows (a worker's part).
fn rows_of(args: &KeysArgs, layouts: &[Layout], entry: &Walked) -> Rows {
    // A row is about 1.4 KB of JSON: one allocation, not a doubling from 8 bytes up.
    let (mut out, mut err, mut failed) = (Vec::with_capacity(2048), Vec::new(), false);
    // Writes into memory do not fail.
    let _ = match entry {
        Walked::File(path) => {
            match identify_first(path, args.sources.wants_source(path), args.detail()) {
                First::Item(item) => {
                    print_row(&mut out, &mut err, args, layouts, &item, &mut failed)
                }
                First::Container(container) => return Rows::Archive(path.clone(), container),
            }
        }
        Walked::Skipped(path, reason) => {
            writeln!(err, "symdex: {}: skipped: {reason}", path.display())
        }
        Walked::Error(path, error) => {
            failed = true;
            writeln!(err, "symdex: {}: {error}", path.display())
        }
    };
    Rows::Written { out, err, failed }
}

/// Writes what a worker made of an input, in its turn; an archive's entries are identified
/// and written now.
fn take_rows(
    out: &mut impl Write,
    args: &KeysArgs,
    layouts: &[Layout],
    rows: Rows,
    failed: &mut bool,
) -> io::Result<()> {
    match rows {
        Rows::Written {
            out: written,
            err,
            failed: failed_here,
        } => {
            *failed |= failed_here;
            io::stderr().write_all(&err)?;
            out.write_all(&written)
        }
        Rows::Archive(path, container) => {
            let mut row =
                |item: Identified| print_row(out, &mut io::stderr(), args, layouts, &item, failed);
            let as_source = |p: &Path| args.sources.wants_source(p);
            if let Err(err) = expand_each(
                &path,
                container,
                as_source,
                args.detail(),
                args.limits.into(),
                &mut row,
            ) {
                // Nobody reads the rows any more: the walk ends here (src/stdout.rs).
                if crate::stdout::is_reader_gone(&err) {
                    return Err(err);
                }
                say_err!("symdex: {}: {err}", path.display());
                *failed = true;
            }
            Ok(())
        }
    }
}

/// Prints what `item` is and its keys (a table row, or a JSON line); an I/O failure reading
/// it is said on `err` and sets `failed`.
fn print_row(
    out: &mut impl Write,
    err: &mut impl Write,
    args: &KeysArgs,
    layouts: &[Layout],
    item: &Identified,
    failed: &mut bool,
) -> io::Result<()> {
    let shown = item.shown.as_str();
    let error = match &item.outcome {
        Outcome::Identified(ids, bytes_read) => {
            for id in ids {
                let keys = keys_for(id, &item.name, layouts);
                let lookup = lookup_keys_for(id, &item.name, layouts);
                if args.json {
                    let row = Row {
                        path: shown,
                        identity: id,
                        bytes_read: *bytes_read,
                        keys: non_empty(&keys),
                        lookup_keys: non_empty(&lookup),
                        sidecars: &keys.sidecars,
                        rejected: keys.rejected.iter().map(String::as_str).collect(),
                    };
                    // Written into the rows' buffer as it is serialized: no string between.
                    serde_json::to_writer(&mut *out, &row)?;
                    out.write_all(b"\n")?;
                } else {
                    let code_id = id.code_id.as_ref().map_or("-", |c| c.as_str());
                    writeln!(
                        out,
                        "{:<11} {:<8} {:<10} {:<44} {:<40} {}",
                        id.format.as_str(),
                        id.arch,
                        id.kind.as_str(),
                        id.debug_id.to_string(),
                        code_id,
                        shown
                    )?;
                    write_table_dwo_ids(out, id)?;
                    write_table_pdb_sources(out, id)?;
                    write_table_keys(out, "key", &keys)?;
                    write_table_keys(out, "lookup", &lookup)?;
                }
            }
            return Ok(());
        }
        Outcome::Failed(error) if error.is_io() => {
            writeln!(err, "symdex: {shown}: {error}")?;
            *failed = true;
            return Ok(());
        }
        Outcome::Failed(error) => error.to_string(),
        Outcome::Skipped(reason) => format!("skipped: {reason}"),
        Outcome::Rejected(reason) => format!("rejected: {reason}"),
    };
    if args.json {
        let row = ErrorRow { path: shown, error };
        serde_json::to_writer(&mut *out, &row)?;
        out.write_all(b"\n")?;
    } else {
        writeln!(
            out,
            "{:<11} {:<8} {:<10} {:<44} {:<40} {}",
            "-", "-", "-", error, "", shown
        )?;
    }
    Ok(())
}
