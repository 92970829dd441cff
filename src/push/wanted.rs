//! A source path a debug file of the push names.

use std::collections::HashMap;

use symdex_shared::pdb_sources::ChecksumAlgorithm;
use symdex_shared::sourcemap::base_name;
use symdex_shared::Identity;

/// Wanted paths by their base names: a file is matched against the wants of its own base
/// name only (the rule needs them equal), not every want of the push (a source tarball of
/// thousands of entries against debug files naming thousands of paths).
pub type ByBaseName = HashMap<String, Vec<Wanted>>;

/// A path a debug file's DWARF names (or a document a PDB names), and the MD5 it records of
/// the file (clang's DWARF 5 does, gcc's does not): what the indexer matches a file no flag
/// names against
/// (`sourcemap::unflagged_may_serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub path: String,
    pub md5: Option<String>,
}

impl Wanted {
    /// `wants` by their base names.
    pub fn by_base_name(wants: impl IntoIterator<Item = Wanted>) -> ByBaseName {
        let mut by_base = ByBaseName::new();
        for want in wants {
            let base = base_name(&want.path).to_string();
            by_base.entry(base).or_default().push(want);
        }
        by_base
    }

    /// The paths `id`'s DWARF names, each with its MD5 where recorded, and the documents a
    /// PDB or Portable PDB names (`\\` turned into `/`, as the indexer asks for them:
    /// `pipeline/documents.rs`), with their MD5 where that is the digest recorded.
    pub fn of(id: &Identity) -> impl Iterator<Item = Wanted> + '_ {
        let dwarf = id.sources.iter().flat_map(|s| {
            s.paths.iter().map(|path| Wanted {
                path: path.clone(),
                md5: s.md5.get(path).cloned(),
            })
        });
        let documents = id.pdb_sources.iter().flat_map(|s| {
            s.documents.iter().map(|document| Wanted {
                path: document.path.replace('\\', "/"),
                md5: document
                    .checksum
                    .as_ref()
                    .filter(|c| c.algorithm == ChecksumAlgorithm::Md5)
                    .map(|c| c.digest.clone()),
            })
        });
        dwarf.chain(documents)
    }
}
