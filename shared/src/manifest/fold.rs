//! Repetitions folded: the records of uploads a run saw again (answered from their upload
//! records, [`Record::repeats`]) become one `repeated` record per build, so that a CI re-running
//! an unchanged build grows the manifest by a line, not by the build.
//!
//! Invariant: nothing is lost. A record is marked `repeats` only when its upload was answered
//! from a finalized upload record, and an upload record is finalized only after the run that
//! decided it wrote its records to the manifest (pipeline/kept.rs, refs/ invariant 4): the
//! decision it repeats is in the manifest already, and `manifest query` answers it as the
//! upload's latest ([`super::latest`]).

use std::collections::BTreeMap;

use super::{now_rfc3339, Action, Record, RepeatCounts, SCHEMA_VERSION};
use crate::upload_meta::UploadMeta;

/// What a repeated record is grouped by: one `repeated` record per ingest bucket and build
/// (product, build, version, channel), so a build's audit finds its own.
type Group = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Splits `records` into those the manifest takes as they are and the `repeated` records
/// standing for the rest (in the order their groups first appear).
pub fn fold_repeats<'r>(
    records: impl IntoIterator<Item = &'r Record>,
) -> (Vec<&'r Record>, Vec<Record>) {
    let mut kept = Vec::new();
    let mut groups: BTreeMap<Group, (usize, Record)> = BTreeMap::new();
    for record in records {
        if !record.repeats {
            kept.push(record);
            continue;
        }
        let meta = &record.meta;
        let group = (
            record.ingest_bucket.clone(),
            meta.product.clone(),
            meta.build.clone(),
            meta.version.clone(),
            meta.channel.clone(),
        );
        let order = groups.len();
        let (_, folded) = groups
            .entry(group)
            .or_insert_with(|| (order, repeated_like(record)));
        folded.ingest_key = common_prefix(&folded.ingest_key, &record.ingest_key).to_string();
        let counts = folded.repeated.get_or_insert_with(RepeatCounts::default);
        match record.action {
            Some(Action::Conflict) => counts.conflict += 1,
            _ => counts.unchanged += 1,
        }
    }
    let mut folded: Vec<(usize, Record)> = groups.into_values().collect();
    folded.sort_by_key(|(order, _)| *order);
    (kept, folded.into_iter().map(|(_, r)| r).collect())
}

/// An empty `repeated` record of `record`'s ingest bucket and build.
fn repeated_like(record: &Record) -> Record {
    Record {
        schema: SCHEMA_VERSION,
        time: now_rfc3339(),
        action: Some(Action::Repeated),
        ingest_bucket: record.ingest_bucket.clone(),
        ingest_key: record.ingest_key.clone(),
        meta: UploadMeta {
            build: record.meta.build.clone(),
            product: record.meta.product.clone(),
            version: record.meta.version.clone(),
            channel: record.meta.channel.clone(),
            ..UploadMeta::default()
        },
        indexer: record.indexer.clone(),
        ..Record::default()
    }
}

/// The longest common prefix of `a` and `b` that ends at a `/` (or is all of both): the
/// folder the folded inputs share, never half a name.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    if a == b {
        return a;
    }
    let same = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at);
    a[..same].rfind('/').map_or("", |slash| &a[..=slash])
}

#[cfg(test)]
mod tests {
    use super::{common_prefix, fold_repeats};
    use crate::manifest::{Action, Record, RepeatCounts};

    fn record(action: Action, key: &str, build: &str, repeats: bool) -> Record {
        let mut r = Record::about(action, format!("u-{key}"), None, key.to_string());
        r.meta.build = Some(build.to_string());
        r.meta.expires = Some(format!("2030-01-01T00:00:0{}Z", key.len() % 10));
        r.repeats = repeats;
        r
    }

    #[test]
    fn repetitions_become_one_record_per_build_and_decisions_stay() {
        let records = [
            record(Action::Unchanged, "ci/b1/a.debug", "b1", true),
            record(Action::Indexed, "ci/b1/new.debug", "b1", false),
            record(Action::Conflict, "ci/b1/sub/c.pdb", "b1", true),
            record(Action::Unchanged, "ci/b2/a.debug", "b2", true),
            record(Action::Unchanged, "ci/b1/sub/d.pdb", "b1", true),
            // A new upload that found its keys in place is a decision, not a repetition.
            record(Action::Unchanged, "ci/b3/a.debug", "b3", false),
        ];
        let (kept, folded) = fold_repeats(&records);
        let kept: Vec<&str> = kept.iter().map(|r| r.ingest_key.as_str()).collect();
        assert_eq!(kept, ["ci/b1/new.debug", "ci/b3/a.debug"]);
        assert_eq!(folded.len(), 2);
        let b1 = &folded[0];
        assert_eq!(b1.action, Some(Action::Repeated));
        assert_eq!(b1.meta.build.as_deref(), Some("b1"));
        assert_eq!(b1.meta.expires, None, "expiries differ per upload");
        assert_eq!(b1.ingest_key, "ci/b1/");
        assert_eq!(b1.upload, "");
        assert_eq!(
            b1.repeated,
            Some(RepeatCounts {
                unchanged: 2,
                conflict: 1
            })
        );
        assert_eq!(folded[1].ingest_key, "ci/b2/a.debug");
        assert_eq!(folded[1].repeated.map(|c| c.unchanged), Some(1));
        // As written: the counts, no `repeats` flag (never written).
        let line = serde_json::to_string(b1).unwrap();
        assert!(
            line.contains(r#""repeated":{"unchanged":2,"conflict":1}"#),
            "{line}"
        );
        assert!(!line.contains("repeats"), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(&back, b1);
    }

    #[test]
    fn nothing_repeated_folds_to_nothing() {
        let records = [record(Action::Indexed, "a", "b", false)];
        let (kept, folded) = fold_repeats(&records);
        assert_eq!(kept.len(), 1);
        assert!(folded.is_empty());
    }

    #[test]
    fn the_common_prefix_ends_at_a_folder() {
        assert_eq!(common_prefix("ci/b1/a.debug", "ci/b1/ab.debug"), "ci/b1/");
        assert_eq!(common_prefix("ci/b1/a", "ci/b1/a"), "ci/b1/a");
        assert_eq!(common_prefix("ci/x", "cd/x"), "");
        assert_eq!(common_prefix("ci/é/a", "ci/é/b"), "ci/é/");
        assert_eq!(common_prefix("ci/b1/", "ci/b1/x"), "ci/b1/");
    }
}
