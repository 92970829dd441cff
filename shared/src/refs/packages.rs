//! Join records of split-DWARF binaries and their DWARF packages (`_symdex/dwp/`): a `.dwp`
//! has no build id, so it pairs with its binary only by the DWO ids of the binary's skeleton
//! units (`pipeline/packages.rs` has the rules).
//!
//! One record per scope (product and build, [`Scope`]): a `.dwp` of one product never meets
//! a binary of another, whatever ids it carries. Each upload is one entry, written by one
//! swap, of a bounded size: its id set is kept as a digest and a count ([`IdSet`]), the ids
//! themselves only up to [`KEPT_IDS`] (enough to say which ids a stale package lacks in the
//! builds of small programs). A package with a million ids costs one write of a few hundred
//! bytes, like one with two.

use std::io;

use serde::{Deserialize, Serialize};

use super::swap::Step;
use super::RefStore;
use crate::identity::DwoId;
use crate::sourcemap::Scope;
use crate::storage::STATE_PREFIX;
use crate::upload_meta::UploadMeta;

/// Ids an entry keeps beside its digest, at most.
pub const KEPT_IDS: usize = 64;

/// Where the package joins live: a record file under it is the dwp join of one scope.
pub const PACKAGES_PREFIX: &str = "_symdex/dwp/";

/// A set of DWO ids as an entry keeps it: the SHA-1 of the sorted ids (16 hex digits each,
/// one a line), their count, and the ids themselves where there are at most [`KEPT_IDS`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdSet {
    pub digest: String,
    pub count: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<DwoId>,
}

impl IdSet {
    /// The set of `ids` (sorted and distinct, as identification gives them).
    pub fn of(ids: &[DwoId]) -> IdSet {
        let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
        IdSet {
            digest: crate::digest::sha1_hex(text.as_bytes()),
            count: ids.len(),
            ids: if ids.len() <= KEPT_IDS {
                ids.to_vec()
            } else {
                Vec::new()
            },
        }
    }

    /// The same ids: a package pairs with a binary only when every id of its skeletons is
    /// in it and it holds no other.
    pub fn same(&self, other: &IdSet) -> bool {
        self.digest == other.digest && self.count == other.count
    }

    /// Whether both keep their ids and share at least one (a package of an earlier build of
    /// the same program).
    pub fn overlaps(&self, other: &IdSet) -> bool {
        self.ids
            .iter()
            .any(|id| other.ids.binary_search(id).is_ok())
    }
}

/// A file with skeleton units: its upload, build id, whether it is a separate debug file
/// (stripped binary's `.debug`), and its skeletons' ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitBinary {
    pub upload: String,
    pub build_id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub debug_file: bool,
    pub ids: IdSet,
}

/// A DWARF package: its upload, where its bytes are read again from (what a front end's
/// hand-over takes), and its ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageNote {
    pub upload: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub ingest_etag: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    pub meta: UploadMeta,
    pub ids: IdSet,
}

/// One scope's binaries with skeleton units and its DWARF packages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageJoin {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<SplitBinary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackageNote>,
}

impl PackageJoin {
    /// Adds (or replaces) `binary`'s entry; `true` if anything changed.
    pub fn add_binary(&mut self, binary: &SplitBinary) -> bool {
        let same = |b: &SplitBinary| b.upload == binary.upload && b.build_id == binary.build_id;
        if self.binaries.iter().any(|b| b == binary) {
            return false;
        }
        self.binaries.retain(|b| !same(b));
        self.binaries.push(binary.clone());
        true
    }

    /// Adds (or replaces) `package`'s entry; `true` if anything changed.
    pub fn add_package(&mut self, package: &PackageNote) -> bool {
        if self.packages.iter().any(|p| p == package) {
            return false;
        }
        self.packages.retain(|p| p.upload != package.upload);
        self.packages.push(package.clone());
        true
    }

    /// Drops every entry of `upload` (its removal); `true` if there was one.
    pub fn drop_upload(&mut self, upload: &str) -> bool {
        let before = self.binaries.len() + self.packages.len();
        self.binaries.retain(|b| b.upload != upload);
        self.packages.retain(|p| p.upload != upload);
        before != self.binaries.len() + self.packages.len()
    }

    fn is_empty(&self) -> bool {
        self.binaries.is_empty() && self.packages.is_empty()
    }
}

/// The package join record of `scope`.
pub fn package_join_file(scope: &Scope) -> String {
    let hash = crate::digest::sha1_hex(scope.id().as_bytes());
    debug_assert!(PACKAGES_PREFIX.starts_with(STATE_PREFIX));
    format!("{PACKAGES_PREFIX}{}.json", &hash[..16])
}

impl RefStore<'_> {
    /// Changes a package join record with `f` (which returns whether it changed anything) by
    /// compare-and-swap, and returns it as swapped: whoever swaps second sees the entry of
    /// whoever swapped first (an empty record is deleted).
    pub(crate) async fn update_package_join(
        &self,
        file: &str,
        mut f: impl FnMut(&mut PackageJoin) -> bool,
    ) -> io::Result<PackageJoin> {
        self.update(file, |current: Option<PackageJoin>| {
            let mut record = current.unwrap_or_default();
            Ok(if !f(&mut record) {
                Step::Keep(record)
            } else if record.is_empty() {
                Step::Delete(record)
            } else {
                Step::Write(record.clone(), record)
            })
        })
        .await
    }
}
