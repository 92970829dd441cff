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
    /// The set of `ids`, in any order, an id repeated counted once: a binary and its package
    /// list their units in different orders, and must come to the same digest.
    pub fn of(ids: &[DwoId]) -> IdSet {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
        IdSet {
            digest: crate::digest::sha1_hex(text.as_bytes()),
            count: ids.len(),
            ids: if ids.len() <= KEPT_IDS {
                ids
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{package_join_file, IdSet, PackageJoin, PackageNote, SplitBinary, KEPT_IDS};
    use crate::identity::DwoId;
    use crate::refs::RefStore;
    use crate::sourcemap::Scope;
    use crate::storage::{LocalStore, Storage};
    use crate::upload_meta::UploadMeta;

    fn ids(values: &[u64]) -> Vec<DwoId> {
        values.iter().map(|&v| DwoId(v)).collect()
    }

    fn scope(product: &str, build: &str) -> Scope {
        Scope::of(&UploadMeta {
            product: Some(product.into()),
            build: Some(build.into()),
            ..UploadMeta::default()
        })
    }

    fn binary(upload: &str, values: &[u64]) -> SplitBinary {
        SplitBinary {
            upload: upload.into(),
            build_id: "ab".repeat(20),
            debug_file: false,
            ids: IdSet::of(&ids(values)),
        }
    }

    fn package(upload: &str, values: &[u64]) -> PackageNote {
        PackageNote {
            upload: upload.into(),
            source: format!("/in/{upload}"),
            version: None,
            ingest_etag: "e".into(),
            entry: None,
            meta: UploadMeta::default(),
            ids: IdSet::of(&ids(values)),
        }
    }

    #[test]
    fn an_id_sets_digest_does_not_depend_on_order_or_repeats() {
        let sorted = IdSet::of(&ids(&[1, 2, 3]));
        let shuffled = IdSet::of(&ids(&[3, 1, 2, 1]));
        assert_eq!(sorted, shuffled);
        assert_eq!(sorted.count, 3);
        assert!(sorted.same(&shuffled));
        assert_eq!(sorted.ids, ids(&[1, 2, 3]));
        // Another set: another digest, though it shares ids (a stale package).
        let other = IdSet::of(&ids(&[1, 2]));
        assert!(!sorted.same(&other));
        assert_ne!(sorted.digest, other.digest);
        assert!(sorted.overlaps(&other));
        assert!(!sorted.overlaps(&IdSet::of(&ids(&[9]))));
    }

    #[test]
    fn more_than_kept_ids_keep_only_their_digest_and_count() {
        let many: Vec<u64> = (0..=KEPT_IDS as u64).rev().collect();
        let set = IdSet::of(&ids(&many));
        assert_eq!(set.count, KEPT_IDS + 1);
        assert!(set.ids.is_empty());
        let mut forward = many.clone();
        forward.reverse();
        assert!(set.same(&IdSet::of(&ids(&forward))));
        // Without ids kept, nothing can be said to overlap: pairing is by digest alone.
        assert!(!set.overlaps(&IdSet::of(&ids(&[0]))));
        let fewer = IdSet::of(&ids(&many[1..]));
        assert_eq!(fewer.ids.len(), KEPT_IDS, "exactly KEPT_IDS ids are kept");
        assert!(!set.same(&fewer));
        let written = serde_json::to_string(&set).unwrap();
        assert!(!written.contains("\"ids\""), "{written}");
    }

    #[test]
    fn entries_are_added_once_replaced_and_dropped_by_upload() {
        let mut join = PackageJoin::default();
        assert!(join.add_binary(&binary("b1", &[1, 2])));
        assert!(
            !join.add_binary(&binary("b1", &[1, 2])),
            "the same entry again"
        );
        assert!(join.add_binary(&binary("b1", &[1, 3])), "replaced");
        assert_eq!(join.binaries.len(), 1);
        assert_eq!(join.binaries[0].ids, IdSet::of(&ids(&[1, 3])));
        assert!(join.add_package(&package("p1", &[1, 3])));
        assert!(!join.add_package(&package("p1", &[1, 3])));
        assert!(join.add_package(&package("p2", &[1, 3])));
        assert_eq!(join.packages.len(), 2);
        assert!(join.drop_upload("p1"));
        assert!(!join.drop_upload("p1"), "dropped already");
        let left: Vec<&str> = join.packages.iter().map(|p| p.upload.as_str()).collect();
        assert_eq!(left, ["p2"]);
        assert!(join.drop_upload("b1"));
        assert!(join.binaries.is_empty());
    }

    #[test]
    fn each_scope_has_its_own_record() {
        let files: BTreeSet<String> = [
            scope("app", "1"),
            scope("app", "2"),
            scope("other", "1"),
            // Not the same as product "app:1" and no build, whatever a naive join makes.
            scope("app:1", ""),
        ]
        .iter()
        .map(package_join_file)
        .collect();
        assert_eq!(files.len(), 4, "{files:?}");
        assert_eq!(
            package_join_file(&scope("app", "1")),
            package_join_file(&scope("app", "1"))
        );
    }

    #[tokio::test]
    async fn swaps_in_one_scope_leave_the_others_alone_and_an_empty_record_goes() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("s")).unwrap();
        let refs = RefStore::new(&store);
        let (mine, theirs) = (
            package_join_file(&scope("app", "1")),
            package_join_file(&scope("other", "1")),
        );
        refs.update_package_join(&mine, |r| r.add_binary(&binary("b1", &[1])))
            .await
            .unwrap();
        let record = refs
            .update_package_join(&theirs, |r| r.add_package(&package("p1", &[1])))
            .await
            .unwrap();
        assert!(
            record.binaries.is_empty(),
            "another product's binary is not in its record"
        );
        let record = refs.update_package_join(&mine, |_| false).await.unwrap();
        assert_eq!(record.binaries.len(), 1);
        assert!(record.packages.is_empty());
        refs.update_package_join(&mine, |r| r.drop_upload("b1"))
            .await
            .unwrap();
        assert!(
            store.get(&mine).await.unwrap().is_none(),
            "an empty record is deleted"
        );
        assert!(store.get(&theirs).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_malformed_record_read_back_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("s")).unwrap();
        let refs = RefStore::new(&store);
        let file = package_join_file(&scope("app", "1"));
        let hostile: [&[u8]; 6] = [
            b"not json",
            b"{\"binaries\": \"x\"}",
            b"{\"packages\": [{\"upload\": 1}]}",
            b"{\"binaries\": [{\"upload\": \"b\", \"build_id\": \"x\", \"ids\": {\"digest\": \"d\", \"count\": -1}}]}",
            b"{\"binaries\": [{\"upload\": \"b\", \"build_id\": \"x\", \"ids\": {\"digest\": \"d\", \"count\": 1, \"ids\": [\"zz\"]}}]}",
            b"\xff\xfe{}",
        ];
        for bytes in hostile {
            store.put(&file, bytes).await.unwrap();
            let read = refs
                .update_package_join(&file, |r| r.add_package(&package("p", &[1])))
                .await;
            let error = read.expect_err(&String::from_utf8_lossy(bytes));
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidData, "{error}");
            assert_eq!(
                store.get(&file).await.unwrap().unwrap().bytes,
                bytes,
                "left as found"
            );
        }
        // Well-formed but inconsistent (unsorted ids, a count that does not match): read,
        // compared by digest and count, and changed without a panic.
        let odd = br#"{"binaries": [{"upload": "b", "build_id": "x", "ids": {"digest": "d", "count": 7, "ids": ["0000000000000003", "0000000000000001"]}}]}"#;
        store.put(&file, odd).await.unwrap();
        let record = refs
            .update_package_join(&file, |r| r.add_package(&package("p", &[1, 3])))
            .await
            .unwrap();
        assert!(!record.binaries[0].ids.same(&record.packages[0].ids));
        let _ = record.packages[0].ids.overlaps(&record.binaries[0].ids);
    }
}
