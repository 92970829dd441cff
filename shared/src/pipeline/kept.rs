//! What an upload record keeps of a run (`refs::IndexedAs`), so that a redelivery is
//! answered from it: its records trimmed to the decision, their own keys by position.

use std::collections::BTreeSet;

use super::upload::{Indexed, Upload};
use super::Indexer;
use crate::manifest::{Action, Record};
use crate::refs::{IndexedAs, UploadRecord, UploadState};

/// How an upload record keeps what its run came to (`IndexedAs`), in the plan digest: an
/// indexer of the same version that keeps it otherwise (its own keys by name, before
/// `unchanged_at`; records without split DWARF's DWO ids or a PDB's sources, or of a PDB that
/// never asked for its documents under `src/`; a binary with
/// skeleton units keeping `buildid/<id>/debuginfo` among its own keys, which its `.dwp` now
/// publishes) finds another plan and indexes in full, instead of answering from a record it
/// would read wrong — a redelivered split binary answered from such a record would claim the
/// key its package holds.
pub(super) const KEPT_RECORDS: &str = "kept records: own keys by position, DWO ids, \
    split binaries leave debuginfo to the package, PDB sources, PDB documents asked under src/";

/// Reports the keys of an indexed upload's record found `unchanged` that its finished runs did
/// not reference (`listed` leaves them out: conflicts then) as `published`. Holding its bytes
/// now, they were published by a run of it that died before its records reached the manifest
/// — a hand-over's re-index (refs/, invariant 8) — whose retry finds them its own: reported
/// again (the manifest is at-least-once), as a fresh upload's unfinished attempt's keys are.
pub(super) fn report_unlisted_as_published(record: &mut Record, listed: &BTreeSet<String>) {
    let (again, unchanged): (Vec<String>, Vec<String>) = std::mem::take(&mut record.unchanged)
        .into_iter()
        .partition(|key| !listed.contains(key));
    record.unchanged = unchanged;
    if again.is_empty() {
        return;
    }
    record.published.extend(again);
    record.published.sort();
    if record.action == Some(Action::Unchanged) {
        record.action = Some(Action::Indexed);
    }
}

/// The own keys of each record `indexed_as` keeps, by name, from their positions in the
/// upload record's `keys`. `None` for positions this code does not write (out of range, or
/// not one list per record).
pub(super) fn own_keys_of(
    indexed_as: &IndexedAs,
    keys: &BTreeSet<String>,
) -> Option<Vec<Vec<String>>> {
    if indexed_as.unchanged_at.len() != indexed_as.records.len() {
        return None;
    }
    let keys: Vec<&String> = keys.iter().collect();
    indexed_as
        .unchanged_at
        .iter()
        .map(|at| {
            at.iter()
                .map(|&i| keys.get(i as usize).map(|k| (*k).clone()))
                .collect()
        })
        .collect()
}

/// `record` with what `kept` says of one identity (format, ids, names, reason) and `keys`
/// as its unchanged keys: both ways between a run's records and the trimmed ones an upload
/// record keeps (`IndexedAs`). A name `kept` lacks stays `record`'s.
pub(super) fn with_decision_of(record: Record, kept: &Record, keys: Vec<String>) -> Record {
    Record {
        reason: kept.reason.clone(),
        format: kept.format,
        kind: kept.kind,
        arch: kept.arch,
        debug_id: kept.debug_id,
        code_id: kept.code_id.clone(),
        name: kept.name.clone().or(record.name.clone()),
        code_file: kept.code_file.clone(),
        debug_file: kept.debug_file.clone(),
        dwarf_package: kept.dwarf_package.clone(),
        split_dwarf: kept.split_dwarf.clone(),
        pdb_sources: kept.pdb_sources.clone(),
        unchanged: keys,
        conflicts: kept.conflicts.clone(),
        ..record
    }
}

impl Indexer<'_> {
    /// The records of a re-delivery of `upload`, answered from its upload record `found`
    /// (read after `time`), when its last run was complete under the same plan
    /// ([`Self::already_indexed`]).
    pub(super) fn answered_by(
        &self,
        upload: &Upload<'_>,
        found: &UploadRecord,
        time: &str,
    ) -> Option<Indexed> {
        if self.config.overwrite || self.config.recheck {
            return None;
        }
        let indexed_as = found.indexed_as.as_ref()?;
        // Indexed as a source a debug file named (`unclaimed.rs`), delivered again unasked:
        // its plan is a source's. A file once named stays a source upload until removed.
        let plan = match found.as_source && !upload.options.as_source {
            true => self.plan_digest(&upload.as_named_source()),
            false => self.plan_digest(upload),
        };
        let settled = found.state == UploadState::Indexed
            && indexed_as.plan == plan
            && found
                .planned
                .iter()
                .all(|k| found.keys.contains(k) || indexed_as.conflicts.contains(k))
            && found.keys.len() == indexed_as.referenced;
        if !settled {
            return None;
        }
        let own_keys = own_keys_of(indexed_as, &found.keys)?;
        let records = indexed_as
            .records
            .iter()
            .zip(own_keys)
            .map(|(kept, keys)| {
                let action = if kept.conflicts.is_empty() {
                    Action::Unchanged
                } else {
                    Action::Conflict
                };
                let mut record = upload.record(action);
                record.time = time.to_string();
                // As a full run reports it: the channel and expiry of the upload's record.
                record.meta.channel.clone_from(&found.meta.channel);
                record.meta.expires.clone_from(&found.meta.expires);
                // The decision its run wrote to the manifest before the record was finalized
                // (refs/, invariant 4): the manifest counts it, not again (manifest::fold).
                Record {
                    repeats: true,
                    ..with_decision_of(record, kept, keys)
                }
            })
            .collect();
        Some(Indexed::nothing_published(records))
    }

    /// What a run came to, kept in the upload record when a re-delivery may be answered from
    /// it: every record of the upload published or found unchanged, its keys exactly those
    /// planned and referenced (after a conflict the next delivery runs in full, and may find
    /// the key free). Records about other uploads (a PDB's aliases under this PE's name) are
    /// not kept: that work was done before this run finished, and is theirs to report.
    pub(super) fn indexed_as(
        &self,
        upload: &Upload<'_>,
        records: &[Record],
        planned: &BTreeSet<String>,
        referenced: &BTreeSet<String>,
    ) -> Option<IndexedAs> {
        let own: Vec<&Record> = records.iter().filter(|r| r.upload == upload.id).collect();
        // A conflict with no key of other bytes (a build id another product holds too) is
        // decided again by each delivery: kept, it would be answered `unchanged`.
        let settled = !own.is_empty()
            && own.iter().all(|r| {
                matches!(
                    r.action,
                    Some(Action::Indexed | Action::Unchanged | Action::Conflict)
                ) && r.removed.is_empty()
                    && (r.action != Some(Action::Conflict) || !r.conflicts.is_empty())
            });
        let conflicts: BTreeSet<String> = own
            .iter()
            .flat_map(|r| r.conflicts.iter().cloned())
            .collect();
        // Every planned key is referenced or a conflict (sidecar keys, `.meta`, are referenced
        // without a record listing them).
        let decided = planned.len() == referenced.len() + conflicts.len()
            && planned
                .iter()
                .all(|k| referenced.contains(k) || conflicts.contains(k));
        if !settled || !decided {
            return None;
        }
        // Positions in `referenced`, which the upload record lists as `keys` when these are
        // read back (`own_keys_of`). A record's key that is not referenced has none: nothing
        // is kept, and the next delivery runs in full.
        let sorted: Vec<&String> = referenced.iter().collect();
        let position = |key: &String| sorted.binary_search(&key).ok().map(|at| at as u32);
        let mut unchanged_at = Vec::new();
        let mut trimmed = Vec::new();
        for r in own {
            let at: Option<Vec<u32>> = r
                .published
                .iter()
                .chain(&r.unchanged)
                .map(position)
                .collect();
            unchanged_at.push(at?);
            let kept = Record {
                schema: r.schema,
                ..Record::default()
            };
            trimmed.push(with_decision_of(kept, r, Vec::new()));
        }
        Some(IndexedAs {
            plan: self.plan_digest(upload),
            referenced: referenced.len(),
            records: trimmed,
            conflicts,
            unchanged_at,
        })
    }
}
