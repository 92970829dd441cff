//! `push --wait`: each upload followed until the deployment's own records say what became of
//! it. The indexer writes one manifest object per batch, with a record for every upload (an
//! archive: one per entry) naming the ingest object by bucket, key, version and ETag; this
//! reads the manifest objects written since the push began, as they appear, and then checks
//! that every key a record calls published answers (a record is written after its keys, so
//! this only guards against an object removed since): `published` is never said of a key
//! that is not live.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};
use symdex_shared::upload_id::UploadId;

use symdex_shared::manifest::{records_in, Action, Record};
use symdex_shared::storage::s3::S3Store;
use symdex_shared::storage::Storage;

use super::server::Server;
use super::Status;

/// An upload being followed.
#[derive(Debug, Clone)]
pub struct Followed {
    pub bucket: String,
    pub key: String,
    /// The upload id the indexer records (`s3:<bucket>/<key>@<version or etag>`).
    pub upload: String,
    pub etag: String,
    pub version: Option<String>,
    /// When it was sent (RFC 3339): a record refused before the object was read names no
    /// version or ETag, only a time.
    pub sent_at: String,
    /// Sent as a source a debug file of the push names (`Sendable::named_source`).
    pub named_source: bool,
}

impl Followed {
    fn owns(&self, r: &Record) -> bool {
        if r.ingest_bucket.as_deref() != Some(self.bucket.as_str()) || r.ingest_key != self.key {
            return false;
        }
        let holds = |id: &UploadId| id.holds(&r.upload);
        r.upload == self.upload
            || self.upload.parse::<UploadId>().is_ok_and(|id| holds(&id))
            || (self.version.is_some() && r.ingest_version == self.version)
            || r.ingest_etag.as_deref() == Some(&self.etag)
            || (r.ingest_version.is_none() && r.ingest_etag.is_none() && r.time >= self.sent_at)
    }
}

/// What became of one upload, and the keys and reason to report.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub keys: Vec<String>,
    pub reason: Option<String>,
    pub held_by_products: Vec<String>,
    /// For a conflict: the uploads holding its keys now (their ids name the ingest objects).
    pub held_by: Vec<String>,
}

/// Where a key is asked whether it is live.
pub enum Live<'a> {
    Bucket(&'a S3Store),
    Server(&'a Server),
}

impl Live<'_> {
    async fn answers(&self, key: &str) -> bool {
        match self {
            Live::Bucket(store) => matches!(
                store.head_object(store.bucket(), key, None).await,
                Ok(Some(_))
            ),
            Live::Server(server) => {
                let (server, key) = ((*server).clone(), key.to_string());
                tokio::task::spawn_blocking(move || server.etag(&key).is_some())
                    .await
                    .unwrap_or(false)
            }
        }
    }
}

/// Follows `uploads` in the manifest under `prefix` of the serving bucket `store` until each
/// has an outcome or `timeout` passes (`Status::Timeout` then). `since_day` (YYYY-MM-DD): the
/// first date partition to read.
pub async fn follow(
    store: &S3Store,
    live: &Live<'_>,
    prefix: &str,
    since_day: &str,
    uploads: &[Followed],
    timeout: Duration,
    mut on_outcome: impl FnMut(usize, &Outcome),
) -> Result<HashMap<usize, Outcome>, String> {
    let deadline = Instant::now() + timeout;
    let prefix = format!("{}/", prefix.trim_matches('/'));
    let mut seen: HashSet<String> = HashSet::new();
    let mut records: HashMap<usize, Vec<Record>> = HashMap::new();
    let mut done: HashMap<usize, Outcome> = HashMap::new();
    // Named sources whose records say skipped so far (`Followed::named_source`).
    let mut skipped_for_now: HashMap<usize, Outcome> = HashMap::new();
    let mut pause = Duration::from_millis(250);
    loop {
        for key in list_after(store, &prefix, since_day).await? {
            if !seen.insert(key.clone()) {
                continue;
            }
            let Some(raw) = Storage::read(store, &key)
                .await
                .map_err(|e| format!("reading {key}: {e}"))?
            else {
                continue;
            };
            let in_object = records_in(&key, &raw).map_err(|e| e.to_string())?;
            for record in in_object {
                if let Some(i) = uploads.iter().position(|u| u.owns(&record)) {
                    if !done.contains_key(&i) {
                        records.entry(i).or_default().push(record);
                    }
                }
            }
        }
        // Every record of an upload (all of an archive's entries) is in one object: an upload
        // with records is decided; a published one waits until its keys answer.
        let decided: Vec<usize> = records.keys().copied().collect();
        for i in decided {
            let mut outcome = decide(&records[&i]);
            // A named source skipped (it came before the debug file naming it): indexed again
            // when that debug file claims it, and recorded before the debug file is.
            if outcome.status == Status::Skipped && uploads[i].named_source {
                records.remove(&i);
                skipped_for_now.insert(i, outcome);
                continue;
            }
            skipped_for_now.remove(&i);
            if outcome.status == Status::Conflict {
                outcome.held_by = holders(store, &outcome.keys, &uploads[i].upload).await;
            }
            if outcome.status == Status::Published && !all_live(live, &outcome.keys, deadline).await
            {
                continue;
            }
            records.remove(&i);
            on_outcome(i, &outcome);
            done.insert(i, outcome);
        }
        // Every other upload decided: a claim of these would have been recorded before.
        if done.len() + skipped_for_now.len() == uploads.len() {
            for (i, outcome) in skipped_for_now.drain() {
                on_outcome(i, &outcome);
                done.insert(i, outcome);
            }
        }
        if done.len() == uploads.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    for i in 0..uploads.len() {
        done.entry(i).or_insert_with(|| {
            let outcome = Outcome {
                status: Status::Timeout,
                keys: Vec::new(),
                reason: Some(format!(
                    "no outcome within {} s (the indexer may be behind, or failed to its dead-letter queue)",
                    timeout.as_secs()
                )),
                held_by_products: Vec::new(),
                held_by: Vec::new(),
            };
            on_outcome(i, &outcome);
            outcome
        });
    }
    Ok(done)
}

/// The uploads referencing `keys` now, other than `upload` (the references' records, or the
/// owner an object names: `RefStore::key`); a key that cannot be read names none.
async fn holders(store: &S3Store, keys: &[String], upload: &str) -> Vec<String> {
    let refs = symdex_shared::refs::RefStore::new(store);
    let mut held = BTreeSet::new();
    for key in keys {
        if let Ok(Some(record)) = refs.key(key).await {
            held.extend(record.refs.into_iter().filter(|r| r != upload));
        }
    }
    held.into_iter().collect()
}

/// Whether every key of `keys` answers; `false` once `deadline` passes (each request is
/// bounded by the request timeout, so `--timeout` is overrun by one request at most).
async fn all_live(live: &Live<'_>, keys: &[String], deadline: Instant) -> bool {
    for key in keys {
        if Instant::now() >= deadline || !live.answers(key).await {
            return false;
        }
    }
    true
}

/// The manifest objects from `since_day`'s partition on (S3 lists in key order, and the
/// partitions' names sort by date).
async fn list_after(store: &S3Store, prefix: &str, since_day: &str) -> Result<Vec<String>, String> {
    let objects = crate::deployment::list_objects(
        store.client(),
        store.bucket(),
        &format!("{prefix}dt="),
        Some(format!("{prefix}dt={since_day}")),
    )
    .await?;
    Ok(objects
        .iter()
        .filter_map(|o| o.key().map(str::to_string))
        .collect())
}

/// What an upload's records come to: a conflict or a rejection anywhere decides it; else
/// published (the keys of every record) when anything was, else skipped.
pub fn decide(records: &[Record]) -> Outcome {
    let reason = |action: Action| {
        records
            .iter()
            .filter(|r| r.action == Some(action))
            .filter_map(|r| {
                r.reason.as_ref().map(|reason| match &r.entry {
                    Some(entry) => format!("{entry}: {reason}"),
                    None => reason.clone(),
                })
            })
            .collect::<Vec<_>>()
    };
    let of = |action: Action| records.iter().filter(move |r| r.action == Some(action));
    if of(Action::Conflict).next().is_some() {
        let keys: BTreeSet<String> = of(Action::Conflict)
            .flat_map(|r| r.conflicts.clone())
            .collect();
        let held: BTreeSet<String> = of(Action::Conflict)
            .flat_map(|r| r.held_by_products.clone())
            .collect();
        let reasons = reason(Action::Conflict);
        return Outcome {
            status: Status::Conflict,
            keys: keys.into_iter().collect(),
            reason: Some(if reasons.is_empty() {
                "a key already holds other bytes (published by another upload)".to_string()
            } else {
                reasons.join("; ")
            }),
            held_by_products: held.into_iter().collect(),
            held_by: Vec::new(),
        };
    }
    if of(Action::Rejected).next().is_some() {
        return Outcome {
            status: Status::Rejected,
            keys: Vec::new(),
            reason: Some(reason(Action::Rejected).join("; ")),
            held_by_products: Vec::new(),
            held_by: Vec::new(),
        };
    }
    let published: BTreeSet<String> = records
        .iter()
        .filter(|r| matches!(r.action, Some(Action::Indexed | Action::Unchanged)))
        .flat_map(|r| r.published.iter().chain(&r.unchanged).cloned())
        .collect();
    if !published.is_empty() {
        return Outcome {
            status: Status::Published,
            keys: published.into_iter().collect(),
            reason: None,
            held_by_products: Vec::new(),
            held_by: Vec::new(),
        };
    }
    Outcome {
        status: Status::Skipped,
        keys: Vec::new(),
        reason: Some(reason(Action::Skipped).join("; ")),
        held_by_products: Vec::new(),
        held_by: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{decide, Action, Followed, Record};
    use crate::push::Status;

    fn record(action: Action) -> Record {
        Record {
            action: Some(action),
            ..Record::default()
        }
    }

    #[test]
    fn a_conflict_or_rejection_anywhere_decides_an_upload() {
        let mut published = record(Action::Indexed);
        published.published = vec!["buildid/ab/debuginfo".into()];
        let mut unchanged = record(Action::Unchanged);
        unchanged.unchanged = vec!["symbols/a.pdb/X/a.pdb".into()];
        let outcome = decide(&[published.clone(), unchanged]);
        assert_eq!(outcome.status, Status::Published);
        assert_eq!(outcome.keys.len(), 2);

        let mut conflict = record(Action::Conflict);
        conflict.conflicts = vec!["symbols/a.dll/1/a.dll".into()];
        conflict.held_by_products = vec!["other".into()];
        conflict.entry = Some("bin/a.dll".into());
        conflict.reason = Some("other bytes".into());
        let outcome = decide(&[published.clone(), conflict]);
        assert_eq!(outcome.status, Status::Conflict);
        assert_eq!(outcome.keys, ["symbols/a.dll/1/a.dll"]);
        assert_eq!(outcome.held_by_products, ["other"]);
        assert_eq!(outcome.reason.as_deref(), Some("bin/a.dll: other bytes"));

        let mut rejected = record(Action::Rejected);
        rejected.reason = Some("truncated".into());
        let outcome = decide(&[published, rejected]);
        assert_eq!(outcome.status, Status::Rejected);
        assert_eq!(outcome.reason.as_deref(), Some("truncated"));

        let mut skipped = record(Action::Skipped);
        skipped.reason = Some("not an artifact".into());
        assert_eq!(decide(&[skipped]).status, Status::Skipped);
    }

    #[test]
    fn records_are_an_uploads_by_location_and_identity() {
        let followed = Followed {
            bucket: "ingest".into(),
            key: "app/b1/app".into(),
            upload: "s3:ingest/app/b1/app@e1".into(),
            etag: "e1".into(),
            version: None,
            sent_at: "2026-12-05T10:00:00Z".into(),
            named_source: false,
        };
        let at = |upload: &str, etag: Option<&str>, time: &str| Record {
            upload: upload.into(),
            ingest_bucket: Some("ingest".into()),
            ingest_key: "app/b1/app".into(),
            ingest_etag: etag.map(str::to_string),
            time: time.into(),
            ..Record::default()
        };
        assert!(followed.owns(&at("s3:ingest/app/b1/app@e1", Some("e1"), "")));
        assert!(followed.owns(&at("s3:ingest/app/b1/app@e1!/x.so", Some("e1"), "")));
        // Refused before it was read: named by location and time only.
        assert!(followed.owns(&at("s3:ingest/app/b1/app", None, "2026-12-05T10:00:01Z")));
        assert!(!followed.owns(&at("s3:ingest/app/b1/app", None, "2026-12-05T09:59:59Z")));
        // Other bytes at the same key, or another key.
        assert!(!followed.owns(&at("s3:ingest/app/b1/app@e2", Some("e2"), "")));
        let mut elsewhere = at("s3:ingest/app/b1/app@e1", Some("e1"), "");
        elsewhere.ingest_key = "app/b1/other".into();
        assert!(!followed.owns(&elsewhere));
    }
}
