//! `symdex keys`: identify artifacts and print their identifiers.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use symdex_shared::identity::file_name_of;
use symdex_shared::{CountingReader, FileReader, FormatError, IdentifyOptions, Identity};

use crate::KeysArgs;

/// One output row: the identity with where it came from and what reading it cost.
#[derive(Serialize)]
struct Row<'a> {
    path: &'a str,
    #[serde(flatten)]
    identity: &'a Identity,
    bytes_read: u64,
}

#[derive(Serialize)]
struct ErrorRow<'a> {
    path: &'a str,
    error: String,
}

/// Expands directories (recursively, in a stable order) into files.
pub fn expand_paths(paths: &[PathBuf]) -> Vec<Result<PathBuf, (PathBuf, io::Error)>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
                match entry {
                    Ok(e) if e.file_type().is_file() => out.push(Ok(e.into_path())),
                    Ok(_) => {}
                    Err(err) => {
                        let at = err.path().unwrap_or(path).to_path_buf();
                        out.push(Err((at, io::Error::other(err.to_string()))));
                    }
                }
            }
        } else {
            out.push(Ok(path.clone()));
        }
    }
    out
}

fn wants_source(args: &KeysArgs, path: &Path) -> bool {
    args.source
        || path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|ext| args.source_ext.iter().any(|s| s.eq_ignore_ascii_case(ext)))
}

/// Identifies one file; `Err` only for I/O failures.
fn identify_file(path: &Path, as_source: bool) -> Result<(Vec<Identity>, u64), FormatError> {
    let reader = CountingReader::new(FileReader::open(path).map_err(FormatError::Io)?);
    let options = IdentifyOptions { as_source };
    let mut ids = symdex_shared::identify(&reader, &options)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    for id in &mut ids {
        id.fill_file_names(file_name_of(name));
    }
    Ok((ids, reader.bytes_read()))
}

pub fn run(args: &KeysArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut failed = false;
    if !args.json {
        writeln!(
            out,
            "{:<11} {:<8} {:<10} {:<44} {:<40} PATH",
            "FORMAT", "ARCH", "KIND", "DEBUG_ID", "CODE_ID"
        )?;
    }
    for entry in expand_paths(&args.paths) {
        let path = match entry {
            Ok(path) => path,
            Err((path, err)) => {
                eprintln!("symdex: {}: {err}", path.display());
                failed = true;
                continue;
            }
        };
        let shown = path.to_string_lossy();
        match identify_file(&path, wants_source(args, &path)) {
            Ok((ids, bytes_read)) => {
                for id in &ids {
                    if args.json {
                        let row = Row {
                            path: &shown,
                            identity: id,
                            bytes_read,
                        };
                        writeln!(out, "{}", serde_json::to_string(&row)?)?;
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
                    }
                }
            }
            Err(err) if err.is_io() => {
                eprintln!("symdex: {shown}: {err}");
                failed = true;
            }
            Err(err) => {
                if args.json {
                    let row = ErrorRow {
                        path: &shown,
                        error: err.to_string(),
                    };
                    writeln!(out, "{}", serde_json::to_string(&row)?)?;
                } else {
                    writeln!(
                        out,
                        "{:<11} {:<8} {:<10} {:<44} {:<40} {}",
                        "-", "-", "-", err, "", shown
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
