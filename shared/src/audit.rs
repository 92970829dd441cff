//! The store's invariants (refs.rs), checked from the outside: what `symdex verify` prints and
//! what every concurrency test asserts after each schedule.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use crate::refs::{released_by_finalize, Listing, RefStore, UploadState, STATE_PREFIX};
use crate::storage::Storage;

/// One broken promise, as `verify` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `missing`, `changed`, `lease`, `tombstone`, `incomplete`, `unref`, `dangling`, `orphan`,
    /// `alias`, `sidecar`, `waiting`, `offer`, `source`.
    pub kind: &'static str,
    pub key: String,
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:<8} {}", self.kind, self.key)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// The outcome of an audit: the problems, and how many key records were checked.
#[derive(Debug, Default)]
pub struct Audit {
    pub keys: usize,
    pub problems: Vec<Problem>,
}

/// Prefixes that hold bookkeeping, not published keys.
fn is_bookkeeping(key: &str, manifest_prefix: &str) -> bool {
    key.starts_with(&format!("{STATE_PREFIX}/"))
        || key.starts_with(&format!("{}/", manifest_prefix.trim_end_matches('/')))
        || key.ends_with(crate::layouts::symstore_index2::MARKER_KEY)
}

/// How each key's content is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Size only (a stat locally): linear in the number of keys, reads no content. A change
    /// that keeps the size goes unseen.
    Fast,
    /// Size and content identity (locally a SHA-1 of every file: all content is read).
    Deep,
}

/// Checks every invariant over a whole store, each key's content in depth.
pub async fn audit(store: &dyn Storage, manifest_prefix: &str) -> io::Result<Audit> {
    audit_with(store, manifest_prefix, Depth::Deep).await
}

/// Checks every invariant over a whole store, each key's content as `depth` says.
pub async fn audit_with(
    store: &dyn Storage,
    manifest_prefix: &str,
    depth: Depth,
) -> io::Result<Audit> {
    let refs = RefStore::new(store);
    let mut problems = Vec::new();
    let mut problem = |kind, key: &str, detail: String| {
        problems.push(Problem {
            kind,
            key: key.to_string(),
            detail,
        })
    };
    let uploads = refs.uploads().await?;
    let by_upload: BTreeMap<&str, &crate::refs::UploadRecord> =
        uploads.iter().map(|u| (u.upload.as_str(), u)).collect();
    let listing = |upload: &str| by_upload.get(upload).map(|u| Listing::of(u));
    let records = refs.all_keys_of(&uploads).await?;
    let referencing: BTreeMap<&str, &BTreeSet<String>> =
        records.iter().map(|r| (r.key.as_str(), &r.refs)).collect();
    let by_key: BTreeMap<&str, &crate::refs::KeyRecord> =
        records.iter().map(|r| (r.key.as_str(), r)).collect();
    // Borrowed from the records and upload records held anyway: a store's every key, once.
    let mut accounted: BTreeSet<&str> = BTreeSet::new();
    for record in &records {
        accounted.insert(&record.key);
        // A `create` lease whose upload lists the key was released by its finalize.
        let in_force = record
            .lease
            .as_ref()
            .filter(|lease| !released_by_finalize(lease, &record.key, listing));
        if let Some(lease) = in_force {
            problem(
                "lease",
                &record.key,
                format!(
                    "{} by {}: in progress, or left by a killed run; re-run it",
                    lease.op, lease.holder
                ),
            );
            continue;
        }
        if record.refs.is_empty() {
            problem("tombstone", &record.key, "a removal did not finish".into());
            continue;
        }
        for upload in &record.refs {
            if !by_upload.contains_key(upload.as_str()) {
                problem(
                    "dangling",
                    &record.key,
                    format!("referenced by {upload}, which does not exist"),
                );
            }
        }
        // Invariant 6: an alias's target is there, with the same content, held by every
        // upload holding the alias.
        if let Some(target) = &record.alias_of {
            match by_key.get(target.as_str()) {
                Some(t) if t.etag == record.etag && record.refs.is_subset(&t.refs) => {}
                Some(t) => problem(
                    "alias",
                    &record.key,
                    format!(
                        "its target {target} holds {} for {:?}, the alias {} for {:?}",
                        t.etag, t.refs, record.etag, record.refs
                    ),
                ),
                None => problem("alias", &record.key, format!("its target {target} is gone")),
            }
        }
        let found = match depth {
            Depth::Deep => store.head(&record.key).await?,
            Depth::Fast => store
                .size(&record.key)
                .await?
                .map(|size| crate::storage::ObjectInfo {
                    size,
                    etag: record.etag.clone(),
                }),
        };
        match found {
            None => problem("missing", &record.key, String::new()),
            Some(info) if info.size != record.size || info.etag != record.etag => problem(
                "changed",
                &record.key,
                format!(
                    "size {} etag {}, recorded {} {}",
                    info.size, info.etag, record.size, record.etag
                ),
            ),
            Some(_) => {}
        }
    }
    for upload in &uploads {
        if upload.state != UploadState::Indexed {
            problem(
                "incomplete",
                &upload.upload,
                format!(
                    "{:?}: a run was interrupted; re-run index or delete",
                    upload.state
                ),
            );
            continue;
        }
        for key in &upload.keys {
            let referenced = referencing
                .get(key.as_str())
                .is_some_and(|refs| refs.contains(&upload.upload));
            if referenced {
                continue;
            }
            let lists = format!("upload {} lists it", upload.upload);
            // Where objects name their owners, a key without a record is its object: gone, or
            // replaced by one naming nobody (or another upload), it is missing or changed.
            if store.names_owners() && !referencing.contains_key(key.as_str()) {
                match store.owned(key).await? {
                    None => problem("missing", key, lists),
                    Some(found) => {
                        let whose = found.owner.unwrap_or_else(|| "no upload".into());
                        accounted.insert(key);
                        problem(
                            "changed",
                            key,
                            format!(
                                "{lists}; what is there names {whose} (replaced outside symdex?)"
                            ),
                        );
                    }
                }
                continue;
            }
            problem("unref", key, format!("{lists}, its record does not"));
        }
    }
    // A unified `.meta` sidecar describes the file beside it, and goes with it (a sidecar
    // of a conflicting key is the file's upload's, pipeline.rs): one without its file is
    // what an earlier version left where an upload conflicting on the file shared it.
    for key in &accounted {
        let described = crate::layouts::unified::described_by_sidecar(key);
        if let Some(file) = described.filter(|file| !accounted.contains(file)) {
            problem(
                "sidecar",
                key,
                format!("its file {file} is not published; re-index the upload referencing it with --recheck"),
            );
        }
    }
    // Invariant 8: a live upload waits only for a key that holds something (another upload's
    // bytes); a free one was freed by a removal that did not hand it over.
    for waiting in refs.all_waiting().await? {
        let live = by_upload
            .get(waiting.upload.as_str())
            .is_some_and(|u| u.state != UploadState::Removing);
        if live
            && !accounted.contains(waiting.key.as_str())
            && store.head(&waiting.key).await?.is_none()
        {
            problem(
                "waiting",
                &waiting.key,
                format!(
                    "free, while upload {} waits for it; re-index that upload with --recheck",
                    waiting.upload
                ),
            );
        }
    }
    let of_sources = source_problems(store, &refs, &by_upload, &accounted).await?;
    // Published objects no record accounts for (what a removal that lost a race would leave).
    for key in store.list("").await? {
        if !is_bookkeeping(&key, manifest_prefix) && !accounted.contains(key.as_str()) {
            problem(
                "orphan",
                &key,
                "published, but no record references it".into(),
            );
        }
    }
    problems.extend(of_sources);
    Ok(Audit {
        keys: records.len(),
        problems,
    })
}

/// The source-join records (sourcemap.rs) against the uploads and the keys published:
/// - `offer`: an offer of an upload that is gone. Harmless (whoever meets it drops it, at
///   the cost of a read), but a removal should have withdrawn it.
/// - `source`: a path a live debug file wants, matched best by one live upload's source, and
///   nothing at its key (invariant 5: a source uploaded is served to the debug files naming
///   it, whichever came first and whoever was removed since). Where the key holds other
///   content (a conflict) it is served, and nothing is said.
///
/// Read from the join records alone: the debuginfod prefix a store was indexed with is not
/// known here, so a key counts as published when a published key ends with it.
async fn source_problems(
    store: &dyn Storage,
    refs: &RefStore<'_>,
    by_upload: &BTreeMap<&str, &crate::refs::UploadRecord>,
    accounted: &BTreeSet<&str>,
) -> io::Result<Vec<Problem>> {
    use crate::sourcemap::{base_name, best_offer, source_key, Match};
    let mut problems = Vec::new();
    let files = store.list(&format!("{STATE_PREFIX}/sourcemap/")).await?;
    if files.is_empty() {
        return Ok(problems);
    }
    let published: BTreeSet<&str> = accounted
        .iter()
        .flat_map(|key| key.match_indices("buildid/").map(move |(at, _)| &key[at..]))
        .collect();
    let lives = |upload: &str| {
        by_upload
            .get(upload)
            .is_some_and(|u| u.state != UploadState::Removing)
    };
    for file in files {
        let record = refs.source_map(&file).await?;
        for offer in &record.offers {
            if !by_upload.contains_key(offer.upload.as_str()) {
                problems.push(Problem {
                    kind: "offer",
                    key: file.clone(),
                    detail: format!(
                        "{} offered by upload {}, which is gone; the next debug file meeting it drops it",
                        offer.path, offer.upload
                    ),
                });
            }
        }
        for want in &record.wants {
            let indexed = by_upload
                .get(want.upload.as_str())
                .is_some_and(|u| u.state == UploadState::Indexed);
            let key = source_key(&want.build_id, &want.path);
            if !indexed || published.contains(key.as_str()) || !servable(&key) {
                continue;
            }
            let name = base_name(&want.path);
            let offers = record
                .offers
                .iter()
                .filter(|o| base_name(&o.path) == name && lives(&o.upload));
            if let Match::Found(offer) = best_offer(&want.path, offers) {
                problems.push(Problem {
                    kind: "source",
                    key,
                    detail: format!(
                        "{} is not served to upload {}, while upload {} offers it as {}; re-index {} with --recheck",
                        want.path, want.upload, offer.upload, offer.path, want.upload
                    ),
                });
            }
        }
    }
    Ok(problems)
}

/// Whether a debuginfod source key is one an indexer publishes (pipeline.rs,
/// `Indexer::source_key`), as far as it can be told without the store's prefix.
fn servable(key: &str) -> bool {
    crate::refs::record_fits(key)
        && crate::layouts::grammar::is_valid_key(crate::layouts::Layout::Debuginfod, key)
}

/// Every published key with the uploads referencing it (for comparing two stores).
pub async fn references(store: &dyn Storage) -> io::Result<BTreeMap<String, BTreeSet<String>>> {
    Ok(RefStore::new(store)
        .all_keys()
        .await?
        .into_iter()
        .map(|r| (r.key, r.refs))
        .collect())
}
