//! A source path a debug file of the push names.

use symdex_shared::Identity;

/// A path a debug file's DWARF names, and the MD5 it records of the file (clang's DWARF 5
/// does, gcc's does not): what the indexer matches a file no flag names against
/// (`sourcemap::unflagged_may_serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub path: String,
    pub md5: Option<String>,
}

impl Wanted {
    /// The paths `id`'s DWARF names, each with its MD5 where recorded.
    pub fn of(id: &Identity) -> impl Iterator<Item = Wanted> + '_ {
        id.sources.iter().flat_map(|s| {
            s.paths.iter().map(|path| Wanted {
                path: path.clone(),
                md5: s.md5.get(path).cloned(),
            })
        })
    }
}
