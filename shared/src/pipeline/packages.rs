//! Split DWARF: a DWARF package (`.dwp`) published where LLDB asks for it,
//! `buildid/<binary's build id>/debuginfo`, once its binary is in the store.
//!
//! A `.dwp` has no build id: it pairs with a binary only by the DWO ids of the binary's
//! skeleton units, and only when they are the same set (every skeleton's unit in the package,
//! no unit of another build in it). Both sides swap an entry of themselves into their
//! scope's join record (`refs/packages.rs`, one record per product and build), each before
//! it reads what the other left:
//!
//! - a package swaps in its note at its plan, and plans the `debuginfo` key of every live
//!   binary there with its ids: its own bytes, its own upload's keys, removed with it;
//! - a binary with skeleton units swaps in its entry once its own keys are published, and
//!   has the packages there with its ids (that do not yet hold its key), or that share ids
//!   with it (stale ones: their records then say what they lack), indexed again through the
//!   front end's hand-over, which reads their bytes again and finds its entry.
//!
//! Invariant: whichever of the two swaps second sees the other, so the package is planned
//! with the key by its own run or by the re-index the binary asks for — the same outcome in
//! any order (a package indexed twice is a redelivery). A package that planned no key looks
//! at the join record again at its finalize, after its `skipped` record is in the manifest:
//! a binary that had it indexed again while its run was in flight is then followed by one
//! more re-index, so the manifest's last word on it is the pairing. Scoped by product and
//! build, a package of one product never meets another product's binary, whatever ids it
//! carries; the key itself is still global, and one held with other bytes is a conflict.
//!
//! Bounded: an entry is a digest of the sorted ids and their count, the ids themselves only
//! up to [`KEPT_IDS`] (so a stale package of a small program can say which ids it lacks);
//! a package with a million ids makes one swap, as one with two. A binary asks for at most
//! [`REINDEXED_PACKAGES`] packages to be indexed again.

use std::collections::BTreeSet;
use std::io;

use super::upload::WaitingPackage;
use super::{Indexer, Upload};
use crate::identity::{DwarfPackage, DwoId, Identity, Kind};
use crate::layouts::{self, Layout};
use crate::manifest::{Action, Record};
use crate::refs::{
    package_join_file, IdSet, PackageJoin, PackageNote, SplitBinary, UploadRecord, KEPT_IDS,
    PACKAGES_PREFIX,
};
use crate::sourcemap::Scope;

/// Packages one binary has indexed again at most (the same ids, or stale ones sharing some).
const REINDEXED_PACKAGES: usize = 16;
/// Ids a reason lists at most.
const LISTED_IDS: usize = 8;

/// What a package's plan comes to ([`Indexer::plan_package`]).
pub(super) enum PackagePlan {
    /// The `debuginfo` keys of its binaries.
    Keys(BTreeSet<String>),
    /// No key: the record's action and reason.
    Refused(Action, String),
}

/// Why a package and a separate debug file of its binary cannot both be served: the reason
/// of the one that meets the other at `buildid/<id>/debuginfo`.
pub(super) const LLDB_ONE_URL: &str = "LLDB asks buildid/<id>/debuginfo for both the \
    separate debug file and the DWARF package (.dwp) of a binary, so it cannot get both: \
    keep the skeleton units in the binary (no .debug) and upload the .dwp, or upload no .dwp";

impl Indexer<'_> {
    /// A package's keys: its note swapped into its scope's join record, then the `debuginfo`
    /// key of each live binary there whose skeletons have its ids. None: a stale package
    /// (binaries of its build share some of its ids, none all) or one waiting for its binary.
    pub(super) async fn plan_package(
        &self,
        upload: &Upload<'_>,
        package: &DwarfPackage,
    ) -> io::Result<PackagePlan> {
        let scope = Scope::of(&upload.meta);
        let ids = IdSet::of(&package.dwo_ids);
        if !self.config.layouts.contains(&Layout::Debuginfod) {
            let why = "a DWARF package is served under its binary's debuginfod key, and the \
                       debuginfod layout is not published";
            return Ok(PackagePlan::Refused(Action::Skipped, why.into()));
        }
        let note = PackageNote {
            upload: upload.id.clone(),
            source: upload.source_name(),
            version: upload.ingest_version.clone(),
            ingest_etag: upload.ingest_etag().to_string(),
            entry: upload.entry.as_ref().map(|e| e.path.clone()),
            meta: upload.meta.clone(),
            ids: ids.clone(),
        };
        let file = package_join_file(&scope);
        let record = self
            .refs
            .update_package_join(&file, |r| r.add_package(&note))
            .await?;
        let mut keys = BTreeSet::new();
        let mut dead = BTreeSet::new();
        for binary in record.binaries.iter().filter(|b| b.ids.same(&ids)) {
            if !self.upload_lives(&binary.upload).await? {
                dead.insert(binary.upload.clone());
                continue;
            }
            if let Some(key) = self.debuginfo_key(&binary.build_id) {
                keys.insert(key);
            }
        }
        self.drop_dead(&file, &dead).await?;
        if !keys.is_empty() {
            return Ok(PackagePlan::Keys(keys));
        }
        let live: Vec<&SplitBinary> = record
            .binaries
            .iter()
            .filter(|b| !dead.contains(&b.upload))
            .collect();
        Ok(PackagePlan::Refused(
            Action::Skipped,
            unpaired_reason(package, &ids, &live, &scope),
        ))
    }

    /// A binary (or separate debug file) with skeleton units: its entry swapped into its
    /// scope's join record, then the packages there that pair with it and do not hold its
    /// key yet, and the stale ones sharing ids with it, indexed again (they find its entry).
    pub(super) async fn offer_skeletons(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
    ) -> io::Result<()> {
        let (Some(build_id), Some(split)) = (id.build_id.as_deref(), &id.split_dwarf) else {
            return Ok(());
        };
        if split.dwo_ids.is_empty() || !self.config.layouts.contains(&Layout::Debuginfod) {
            return Ok(());
        }
        let Some(key) = self.debuginfo_key(build_id) else {
            return Ok(());
        };
        let binary = SplitBinary {
            upload: upload.id.clone(),
            build_id: build_id.to_string(),
            debug_file: id.kind == Kind::Debug,
            ids: IdSet::of(&split.dwo_ids),
        };
        let file = package_join_file(&Scope::of(&upload.meta));
        let record = self
            .refs
            .update_package_join(&file, |r| r.add_binary(&binary))
            .await?;
        let Some(hand_over) = self.claim.or(self.hand_over) else {
            return Ok(());
        };
        let holders = self.refs.is_live(&key).await?.map(|k| k.refs);
        let holds = |p: &PackageNote| holders.as_ref().is_some_and(|h| h.contains(&p.upload));
        let again: Vec<&PackageNote> = record
            .packages
            .iter()
            .filter(|p| p.upload != upload.id && !holds(p))
            .filter(|p| p.ids.same(&binary.ids) || p.ids.overlaps(&binary.ids))
            .take(REINDEXED_PACKAGES)
            .collect();
        for package in again {
            // Boxed: the package's index runs inside this binary's.
            Box::pin(hand_over.reindex(&waiter_of(package), &BTreeSet::new())).await?;
        }
        Ok(())
    }

    /// A package whose plan found no binary with its ids (`records` of a run that planned
    /// no key): what its finalize looks at again ([`Self::recheck_waiting_package`]).
    pub(super) fn waiting_package(
        &self,
        upload: &Upload<'_>,
        records: &[Record],
    ) -> Option<WaitingPackage> {
        let package = records.iter().find_map(|r| {
            r.dwarf_package
                .as_ref()
                .filter(|_| r.action == Some(Action::Skipped))
        })?;
        self.config
            .layouts
            .contains(&Layout::Debuginfod)
            .then(|| WaitingPackage {
                upload: upload.id.clone(),
                file: package_join_file(&Scope::of(&upload.meta)),
                ids: IdSet::of(&package.dwo_ids),
            })
    }

    /// After a waiting package's records reached the manifest: a live binary with its ids in
    /// the join record now swapped its entry while the package's run was in flight, and had
    /// it indexed again then — before the `skipped` record this run just wrote. The package
    /// is indexed again once more, so its last record is the pairing (a re-index is a
    /// redelivery: the same keys). Its note gone (removed meanwhile): nothing.
    pub(super) async fn recheck_waiting_package(&self, waiting: &WaitingPackage) -> io::Result<()> {
        // A hand-over's re-index (run with `recheck`) does not look again: one look per
        // package run, never a chain of re-indexes should a pairing keep failing.
        let Some(hand_over) = self
            .claim
            .or(self.hand_over)
            .filter(|_| !self.config.recheck)
        else {
            return Ok(());
        };
        let record = self
            .refs
            .update_package_join(&waiting.file, |_| false)
            .await?;
        let Some(note) = record.packages.iter().find(|p| p.upload == waiting.upload) else {
            return Ok(());
        };
        for binary in record.binaries.iter().filter(|b| b.ids.same(&waiting.ids)) {
            if self.upload_lives(&binary.upload).await? {
                return Box::pin(hand_over.reindex(&waiter_of(note), &BTreeSet::new())).await;
            }
        }
        Ok(())
    }

    /// Drops a removed upload's entries from the package join record `file` (its
    /// `offered_in`): no entry outlives its upload, so a removed package is never indexed
    /// again for a binary arriving later, nor a removed binary paired.
    pub(super) async fn withdraw_package_entries(
        &self,
        upload: &str,
        file: &str,
    ) -> io::Result<()> {
        self.refs
            .update_package_join(file, |r| r.drop_upload(upload))
            .await?;
        Ok(())
    }

    /// The join record of an upload's identities where one of them takes part in a package
    /// join (a package, or a file with skeleton units and a build id), for its removal.
    pub(super) fn package_join_of(&self, upload: &Upload<'_>, ids: &[&Identity]) -> Option<String> {
        let joins = ids.iter().any(|id| {
            id.dwarf_package.is_some()
                || (id.build_id.is_some()
                    && id
                        .split_dwarf
                        .as_ref()
                        .is_some_and(|s| !s.dwo_ids.is_empty()))
        });
        (joins && self.config.layouts.contains(&Layout::Debuginfod))
            .then(|| package_join_file(&Scope::of(&upload.meta)))
    }

    /// The prefixed `buildid/<id>/debuginfo` key, if it is a valid key.
    fn debuginfo_key(&self, build_id: &str) -> Option<String> {
        let key = format!("buildid/{build_id}/debuginfo");
        let prefixed = format!("{}{key}", self.config.prefix(Layout::Debuginfod));
        let valid = layouts::grammar::is_valid_key(Layout::Debuginfod, &key);
        (valid && crate::refs::record_fits(&prefixed)).then_some(prefixed)
    }

    /// Drops the entries of uploads gone or going (`dead`) from `file`.
    async fn drop_dead(&self, file: &str, dead: &BTreeSet<String>) -> io::Result<()> {
        if dead.is_empty() {
            return Ok(());
        }
        self.refs
            .update_package_join(file, |r: &mut PackageJoin| {
                let before = r.binaries.len();
                r.binaries.retain(|b| !dead.contains(&b.upload));
                r.binaries.len() != before
            })
            .await?;
        Ok(())
    }
}

/// Whether `file` (an upload record's `offered_in`) is a package join record.
pub(super) fn is_package_join(file: &str) -> bool {
    file.starts_with(PACKAGES_PREFIX)
}

/// Why a package got no key: stale (binaries of its build share some of its ids, none all:
/// which ids are missing, where both sets are kept), or waiting for its binary.
fn unpaired_reason(
    package: &DwarfPackage,
    ids: &IdSet,
    binaries: &[&SplitBinary],
    scope: &Scope,
) -> String {
    let count = package.dwo_ids.len();
    let plural = if count == 1 { "" } else { "s" };
    let what = format!(
        "a DWARF package (split DWARF, {count} DWO id{plural}, index version {})",
        package.index_version
    );
    let related: Vec<&&SplitBinary> = binaries.iter().filter(|b| b.ids.overlaps(ids)).collect();
    if !related.is_empty() {
        let known: BTreeSet<DwoId> = related.iter().flat_map(|b| b.ids.ids.clone()).collect();
        let missing: Vec<DwoId> = package
            .dwo_ids
            .iter()
            .filter(|id| !known.contains(id))
            .copied()
            .collect();
        let lacked: Vec<String> = related
            .iter()
            .map(|b| {
                let lacks: Vec<DwoId> = b
                    .ids
                    .ids
                    .iter()
                    .filter(|id| package.dwo_ids.binary_search(id).is_err())
                    .copied()
                    .collect();
                format!(
                    "binary {} (build id {}) has skeleton units it lacks: {}",
                    b.upload,
                    b.build_id,
                    listed(&lacks)
                )
            })
            .collect();
        return format!(
            "stale {what}: DWO id{} {} missing from its build{}; {}; published nowhere",
            if missing.len() == 1 { " is" } else { "s are" },
            listed(&missing),
            scope_named(scope),
            lacked.join("; ")
        );
    }
    let others = if binaries.is_empty() {
        String::new()
    } else {
        format!(
            " ({} other binar{} of it, none with these ids{})",
            binaries.len(),
            if binaries.len() == 1 { "y" } else { "ies" },
            if count > KEPT_IDS {
                "; too many ids to say which differ"
            } else {
                ""
            }
        )
    };
    format!(
        "{what}: no binary of its build{}{others} has its DWO ids yet; it is published at \
         buildid/<binary's build id>/debuginfo when one is indexed",
        scope_named(scope)
    )
}

/// `ids`, at most [`LISTED_IDS`] of them and how many more.
fn listed(ids: &[DwoId]) -> String {
    let mut text: Vec<String> = ids
        .iter()
        .take(LISTED_IDS)
        .map(|id| id.to_string())
        .collect();
    if ids.len() > LISTED_IDS {
        text.push(format!("and {} more", ids.len() - LISTED_IDS));
    }
    if text.is_empty() {
        return "none".into();
    }
    text.join(", ")
}

/// ` (product P, build B)`: the scope, as its Display names it.
fn scope_named(scope: &Scope) -> String {
    format!(" ({scope})")
}

/// What a front end's re-read of a package takes (`HandOver::reindex`): where its bytes are.
fn waiter_of(package: &PackageNote) -> UploadRecord {
    UploadRecord {
        upload: package.upload.clone(),
        source: package.source.clone(),
        meta: package.meta.clone(),
        ingest_version: package.version.clone(),
        ingest_etag: Some(package.ingest_etag.clone()),
        entry: package.entry.clone(),
        ..UploadRecord::default()
    }
}
