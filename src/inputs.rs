//! Input files: directory expansion and the options every command shares.

use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use symdex_shared::identity::file_name_of;
use symdex_shared::Layout;

/// Which files are keyed as sources (by SHA-1): content alone cannot tell.
#[derive(Args, Debug, Clone)]
pub struct SourceArgs {
    /// Key every file that is not a binary artifact as a source file (SHA-1).
    #[arg(long)]
    pub source: bool,
    /// File extensions keyed as sources (comma list, e.g. `c,cpp,h,cs`); also
    /// SYMDEX_SOURCE_EXTENSIONS.
    #[arg(long, value_delimiter = ',', env = "SYMDEX_SOURCE_EXTENSIONS")]
    pub source_ext: Vec<String>,
}

impl SourceArgs {
    pub fn wants_source(&self, path: &Path) -> bool {
        self.source
            || path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|ext| self.source_ext.iter().any(|s| s.eq_ignore_ascii_case(ext)))
    }
}

/// Layout selection shared by `keys` and `index`.
#[derive(Args, Debug, Clone)]
pub struct LayoutArgs {
    /// Key layouts (repeatable or comma list; default: all).
    #[arg(long = "layout", value_name = "LAYOUT", value_delimiter = ',')]
    pub layouts: Vec<Layout>,
}

impl LayoutArgs {
    /// The selected layouts, all of them when none was named.
    pub fn layouts(&self) -> Vec<Layout> {
        if self.layouts.is_empty() {
            Layout::ALL.to_vec()
        } else {
            self.layouts.clone()
        }
    }
}

/// The last path component, as a string.
pub fn file_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    file_name_of(&name).to_string()
}

/// Expands directories (recursively, in a stable order) into files, leaving out `exclude`
/// (the store itself, when it sits among the inputs).
pub fn expand_paths_excluding(
    paths: &[PathBuf],
    exclude: Option<&Path>,
) -> Vec<Result<PathBuf, (PathBuf, io::Error)>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let walk = walkdir::WalkDir::new(path).sort_by_file_name().into_iter();
            let walk = walk.filter_entry(|e| {
                exclude.is_none_or(|ex| e.path().canonicalize().map_or(true, |p| p != ex))
            });
            for entry in walk {
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

pub fn expand_paths(paths: &[PathBuf]) -> Vec<Result<PathBuf, (PathBuf, io::Error)>> {
    expand_paths_excluding(paths, None)
}
