//! Which source files the debug files name that the store does not serve now, replayed from
//! the manifest: `symdex manifest query --missing-sources` prints them, the audit page shows
//! them. One replay for both, so the two never disagree.

use std::collections::{BTreeMap, HashSet};

use crate::manifest::{Action, Record};

/// From `buildid/` on: source keys compared whatever the layout's prefix.
fn from_buildid(key: &str) -> Option<&str> {
    key.find("buildid/").map(|at| &key[at..])
}

/// One debug file's sources not served, as of the manifest's last record about it.
#[derive(Debug)]
pub struct Wanted<T> {
    /// What the caller kept of the debug file's record (the record, or a row number).
    pub about: T,
    /// The debug file's build id.
    pub build_id: String,
    /// Source key (from `buildid/`) -> the path it serves.
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
                .filter_map(|k| from_buildid(k))
                .filter(|k| k.contains("/source/"))
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
        let (Some(report), Some(build_id)) = (&r.sources, r.code_id.as_ref().map(|id| id.as_str()))
        else {
            return;
        };
        let Some(about) = keep(r) else {
            return;
        };
        let unserved = report
            .unserved
            .iter()
            .filter_map(|line| line.split_once(": ").map(|(path, _)| path));
        let paths = report
            .missing
            .iter()
            .map(String::as_str)
            .chain(unserved)
            .map(|p| (crate::sourcemap::source_key(build_id, p), p.to_string()))
            .collect();
        let wanted = Wanted {
            about,
            build_id: build_id.to_string(),
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
