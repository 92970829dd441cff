//! Which source files the debug files name (and the documents PDBs name) that the store does
//! not serve now, replayed from the manifest: `symdex manifest query --missing-sources`
//! prints them, the audit page shows them. One replay for both, so the two never disagree.

use std::collections::{BTreeMap, HashSet};

use crate::manifest::{Action, Record};
use crate::pdb_sources::PdbSources;
use crate::sourcelink::BuildRoot;

/// A source key as the replay compares it: a debuginfod one from `buildid/` on (whatever the
/// layout's prefix), a PDB document's `src/` key as it is.
fn source_key_of(key: &str) -> Option<&str> {
    if key.starts_with("src/") {
        return Some(key);
    }
    key.find("buildid/")
        .map(|at| &key[at..])
        .filter(|k| k.contains("/source/"))
}

/// One debug file's sources not served, as of the manifest's last record about it.
#[derive(Debug)]
pub struct Wanted<T> {
    /// What the caller kept of the debug file's record (the record, or a row number).
    pub about: T,
    /// The debug file's build id (a PDB's debug id).
    pub build_id: String,
    /// Source key (from `buildid/`, or `src/`) -> the path it serves.
    pub paths: BTreeMap<String, String>,
}

/// The replay: fed every record in the manifest's order ([`Self::see`]). A debug file's
/// latest record says which of its paths were not served then; source keys published later
/// (by a source upload arriving after it) and removed later are followed, so what is left is
/// what is missing now.
#[derive(Debug)]
pub struct MissingSources<T> {
    live: HashSet<String>,
    wanted: BTreeMap<String, Wanted<T>>,
}

impl<T> Default for MissingSources<T> {
    fn default() -> Self {
        MissingSources {
            live: HashSet::new(),
            wanted: BTreeMap::new(),
        }
    }
}

impl<T> MissingSources<T> {
    /// Takes one record. `keep` makes what is kept of a debug file's record when it wants
    /// sources (`None`: the caller's filters do not select it).
    pub fn see(&mut self, r: &Record, keep: impl FnOnce(&Record) -> Option<T>) {
        let sources = |keys: &[String]| {
            keys.iter()
                .filter_map(|k| source_key_of(k))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        self.live.extend(sources(&r.published));
        self.live.extend(sources(&r.unchanged));
        for key in sources(&r.removed) {
            self.live.remove(&key);
        }
        if r.action == Some(Action::Unpublished) {
            self.wanted.remove(&r.upload);
        }
        let Some(report) = &r.sources else {
            return;
        };
        let unserved = report
            .unserved
            .iter()
            .filter_map(|line| line.split_once(": ").map(|(path, _)| path));
        let named = report.missing.iter().map(String::as_str).chain(unserved);
        let (build_id, paths) = match (&r.pdb_sources, r.code_id.as_ref()) {
            (Some(pdb), _) => {
                let Some(debug_id) = r.debug_id else {
                    return;
                };
                (debug_id.to_string(), document_keys(r, pdb, named))
            }
            (None, Some(code_id)) => {
                let build_id = code_id.as_str();
                let key = |p: &str| (crate::sourcemap::source_key(build_id, p), p.to_string());
                (build_id.to_string(), named.map(key).collect())
            }
            (None, None) => return,
        };
        let Some(about) = keep(r) else {
            return;
        };
        let wanted = Wanted {
            about,
            build_id,
            paths,
        };
        self.wanted.insert(r.upload.clone(), wanted);
    }

    /// Every path still missing, with the debug file that wants it (by upload id), and its
    /// source key.
    pub fn missing(&self) -> impl Iterator<Item = (&Wanted<T>, &str, &str)> {
        self.wanted.values().flat_map(move |want| {
            want.paths
                .iter()
                .filter(|(key, _)| !self.live.contains(*key))
                .map(move |(key, path)| (want, key.as_str(), path.as_str()))
        })
    }
}

/// The `src/` keys of the documents a PDB's record names as not served (`named`, as its
/// wants name them), found as the indexer found them ([`PdbSources::document_key`]); a
/// document served elsewhere, or of an upload naming no product or build, has none.
fn document_keys<'n>(
    r: &Record,
    pdb: &PdbSources,
    named: impl Iterator<Item = &'n str>,
) -> BTreeMap<String, String> {
    let (Some(product), Some(build)) = (r.meta.product.as_deref(), r.meta.build.as_deref()) else {
        return BTreeMap::new();
    };
    let root: Option<BuildRoot> = r.meta.source_root.as_deref().and_then(|s| s.parse().ok());
    let named: HashSet<&str> = named.collect();
    pdb.documents
        .iter()
        .filter(|d| named.contains(d.want_path().as_str()))
        .filter_map(|d| {
            let key = pdb.document_key(d, root.as_ref(), (product, build)).ok()?;
            // A key outside the grammar was never asked for: not a missing source.
            crate::layouts::grammar::is_valid_source_link_key(&key).then(|| (key, d.want_path()))
        })
        .collect()
}
