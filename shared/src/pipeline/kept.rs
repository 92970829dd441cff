//! What an upload record keeps of a run (`refs::IndexedAs`), so that a redelivery is
//! answered from it: its records trimmed to the decision, their own keys by position.

use std::collections::BTreeSet;

use crate::manifest::{Action, Record};
use crate::refs::IndexedAs;

/// How an upload record keeps what its run came to (`IndexedAs`), in the plan digest: an
/// indexer of the same version that keeps it otherwise (its own keys by name, before
/// `unchanged_at`) finds another plan and indexes in full, instead of answering from a
/// record it would read wrong.
pub(super) const KEPT_RECORDS: &str = "kept records: own keys by position";

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
        debug_id: kept.debug_id.clone(),
        code_id: kept.code_id.clone(),
        name: kept.name.clone().or(record.name.clone()),
        code_file: kept.code_file.clone(),
        debug_file: kept.debug_file.clone(),
        unchanged: keys,
        conflicts: kept.conflicts.clone(),
        ..record
    }
}
