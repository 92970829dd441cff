//! The store's invariants (refs/), checked from the outside: what `symdex verify` prints and
//! what every concurrency test asserts after each schedule.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

use serde::{Deserialize, Deserializer};

mod copies;

use crate::refs::{
    released_by_finalize, KeyRecord, Listing, RefStore, UploadState, Waiting, STATE_PREFIX,
};
use crate::storage::{ObjectInfo, Storage};

/// One broken promise, as `verify` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `missing`, `changed`, `lease`, `tombstone`, `incomplete`, `unref`, `dangling`, `orphan`,
    /// `alias`, `sidecar`, `waiting`, `offer`, `source`, `copy` (a compressed copy).
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
pub fn is_bookkeeping(key: &str, manifest_prefix: &str) -> bool {
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

/// Checks every invariant over a whole store, each key's content as `depth` says. One pass
/// over the store's listings ([`Listings`]): the keys first ([`Listings::check_keys`]), then
/// what the uploads list, the sidecars, the waits, the sources, and the orphans, each
/// reading what the keys' check accounted for.
pub async fn audit_with(
    store: &dyn Storage,
    manifest_prefix: &str,
    depth: Depth,
) -> io::Result<Audit> {
    let refs = RefStore::new(store);
    // Only what is checked of each upload record is held (`ListedUpload`).
    let uploads: Vec<ListedUpload> = refs.uploads_as().await?;
    // Memory stays with the uploads and the keys' names: the keys with a record are held
    // whole (few, where objects name their owners), a key its object stands for is checked
    // as it is read, and only its owner kept (`owned_by`: the listed upload's name borrowed,
    // `None` for an owner not listed, which no listed upload is). Held whole, 260,000 keys
    // took 450 MB.
    let recorded = refs.recorded_keys().await?;
    let owners = if store.traits().names_owners {
        refs.owners_of(uploads.iter().map(|u| u.upload.as_str()))
            .await?
    } else {
        HashMap::new()
    };
    let listings = Listings {
        store,
        refs: &refs,
        uploads: &uploads,
        by_upload: uploads.iter().map(|u| (u.upload.as_str(), u)).collect(),
        by_key: recorded.iter().map(|r| (r.key.as_str(), r)).collect(),
        recorded: &recorded,
        owners,
    };
    let mut keys = listings.check_keys(depth).await?;
    let mut problems = std::mem::take(&mut keys.problems);
    let all_waiting = refs.all_waiting().await?;
    problems.extend(keys.upload_problems(&listings, &all_waiting).await?);
    problems.extend(sidecar_problems(&keys.accounted));
    problems.extend(waiting_problems(&listings, &all_waiting, &keys.accounted).await?);
    let of_sources = source_problems(store, &refs, &listings.by_upload, &keys.accounted).await?;
    problems.extend(orphans(store, manifest_prefix, &keys.accounted).await?);
    problems.extend(of_sources);
    // Compressed copies (crate::encoded): each encodes what its key holds now.
    let (_, copies) = copies::check_copies(store, depth).await?;
    problems.extend(
        copies
            .into_iter()
            .map(|(kind, key, d)| problem(kind, &key, d)),
    );
    Ok(Audit {
        keys: keys.checked,
        problems,
    })
}

/// One problem found.
fn problem(kind: &'static str, key: &str, detail: String) -> Problem {
    Problem {
        kind,
        key: key.to_string(),
        detail,
    }
}

/// What an audit reads of the store's listings once, and every check looks at: the uploads
/// (by name), the keys with a record (by key), and the owner each upload names its objects
/// by (where objects name their owners).
struct Listings<'a> {
    store: &'a dyn Storage,
    refs: &'a RefStore<'a>,
    uploads: &'a [ListedUpload],
    by_upload: BTreeMap<&'a str, &'a ListedUpload>,
    recorded: &'a [KeyRecord],
    by_key: BTreeMap<&'a str, &'a KeyRecord>,
    owners: HashMap<String, &'a str>,
}

/// The keys an audit checked: how many, their problems (in key order), the keys accounted
/// for (a record or an owned object names them), and the owner of each key its object
/// stands for (`None`: an owner no listed upload is).
struct CheckedKeys<'a> {
    checked: usize,
    problems: Vec<Problem>,
    accounted: BTreeSet<&'a str>,
    owned_by: HashMap<&'a str, Option<&'a str>>,
}

impl<'a> Listings<'a> {
    /// Checks every key: those with a record, then (in the uploads' order, each once) those
    /// whose object stands for its record.
    async fn check_keys(&self, depth: Depth) -> io::Result<CheckedKeys<'a>> {
        let (store, refs) = (self.store, self.refs);
        let names_owners = store.traits().names_owners;
        // Sized once for every key an upload lists: growing, it held two tables at once.
        let listed_keys = if names_owners {
            let lists = self.uploads.iter();
            lists.map(|u| u.keys.len() + u.planned.len()).sum()
        } else {
            0
        };
        let mut keys = CheckedKeys {
            checked: 0,
            problems: Vec::new(),
            accounted: self.by_key.keys().copied().collect(),
            owned_by: HashMap::with_capacity(listed_keys),
        };
        let mut targets = AliasTargets::default();
        for record in self.recorded {
            keys.checked += 1;
            let target = targets
                .of(store, refs, record, &self.owners, &self.by_key)
                .await?;
            let checking = Checking {
                record,
                now: None,
                target: target.as_ref(),
            };
            checking
                .check(store, depth, &self.by_upload, &mut keys.problems)
                .await?;
        }
        if names_owners {
            for upload in self.uploads {
                // The aliases of one upload name its one stored copy: read once.
                targets = AliasTargets::default();
                for key in upload.keys.iter().chain(upload.planned.iter()) {
                    if keys.accounted.contains(key) {
                        continue;
                    }
                    let Some((record, now)) = refs.owned_key_unread(key, &self.owners).await?
                    else {
                        continue;
                    };
                    keys.checked += 1;
                    keys.accounted.insert(key);
                    let target = targets
                        .of(store, refs, &record, &self.owners, &self.by_key)
                        .await?;
                    let checking = Checking {
                        record: &record,
                        now: Some(now),
                        target: target.as_ref(),
                    };
                    checking
                        .check(store, depth, &self.by_upload, &mut keys.problems)
                        .await?;
                    let owner = self
                        .by_upload
                        .get_key_value(record.by.as_str())
                        .map(|(listed, _)| *listed);
                    keys.owned_by.insert(key, owner);
                }
            }
        }
        keys.problems.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(keys)
    }
}

impl<'a> CheckedKeys<'a> {
    /// Whether `upload` references `key`, by the key's record or the owner its object names.
    fn references(&self, listings: &Listings<'_>, key: &str, upload: &str) -> bool {
        match listings.by_key.get(key) {
            Some(record) => record.refs.contains(upload),
            None => self
                .owned_by
                .get(key)
                .is_some_and(|owner| *owner == Some(upload)),
        }
    }

    /// Whether the key has a record or an object at all.
    fn known(&self, listings: &Listings<'_>, key: &str) -> bool {
        listings.by_key.contains_key(key) || self.owned_by.contains_key(key)
    }

    /// The uploads' problems: a run interrupted, or a key an upload lists that does not name
    /// it (missing, changed, or its record not referencing the upload). A changed key is
    /// accounted for (what is there is no orphan).
    async fn upload_problems(
        &mut self,
        listings: &Listings<'a>,
        all_waiting: &[Waiting],
    ) -> io::Result<Vec<Problem>> {
        let store = listings.store;
        let mut problems = Vec::new();
        // An upload whose bytes an overwrite replaced waits for the key it still lists (refs/,
        // invariant 8): not a lost reference (a free key it waits for is reported below).
        let waits: BTreeSet<(&str, &str)> = all_waiting
            .iter()
            .map(|w| (w.key.as_str(), w.upload.as_str()))
            .collect();
        for upload in listings.uploads {
            if upload.state != UploadState::Indexed {
                problems.push(problem(
                    "incomplete",
                    &upload.upload,
                    format!(
                        "{:?}: a run was interrupted; re-run index or delete",
                        upload.state
                    ),
                ));
                continue;
            }
            for key in upload.keys.iter() {
                if self.references(listings, key, &upload.upload)
                    || waits.contains(&(key, &upload.upload))
                {
                    continue;
                }
                let lists = format!("upload {} lists it", upload.upload);
                // Where objects name their owners, a key without a record is its object: gone,
                // or replaced by one naming nobody (or another upload), it is missing or
                // changed.
                if store.traits().names_owners && !self.known(listings, key) {
                    match store.owned(key).await? {
                        None => problems.push(problem("missing", key, lists)),
                        Some(found) => {
                            let whose = found.owner.unwrap_or_else(|| "no upload".into());
                            self.accounted.insert(key);
                            problems.push(problem(
                                "changed",
                                key,
                                format!(
                                    "{lists}; what is there names {whose} (replaced outside symdex?)"
                                ),
                            ));
                        }
                    }
                    continue;
                }
                problems.push(problem(
                    "unref",
                    key,
                    format!("{lists}, its record does not"),
                ));
            }
        }
        Ok(problems)
    }
}

/// A unified `.meta` sidecar describes the file beside it, and goes with it (a sidecar of a
/// conflicting key is the file's upload's, pipeline/): one without its file is what an
/// earlier version left where an upload conflicting on the file shared it.
fn sidecar_problems(accounted: &BTreeSet<&str>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for key in accounted {
        let described = crate::layouts::unified::described_by_sidecar(key);
        if let Some(file) = described.filter(|file| !accounted.contains(file)) {
            problems.push(problem(
                "sidecar",
                key,
                format!("its file {file} is not published; re-index the upload referencing it with --recheck"),
            ));
        }
    }
    problems
}

/// Invariant 8: a live upload waits only for a key that holds something (another upload's
/// bytes); a free one was freed by a removal that did not hand it over.
async fn waiting_problems(
    listings: &Listings<'_>,
    all_waiting: &[Waiting],
    accounted: &BTreeSet<&str>,
) -> io::Result<Vec<Problem>> {
    let mut problems = Vec::new();
    for waiting in all_waiting {
        let live = listings
            .by_upload
            .get(waiting.upload.as_str())
            .is_some_and(|u| u.state != UploadState::Removing);
        if live
            && !accounted.contains(waiting.key.as_str())
            && listings.store.head(&waiting.key).await?.is_none()
        {
            problems.push(problem(
                "waiting",
                &waiting.key,
                format!(
                    "free, while upload {} waits for it; re-index that upload with --recheck",
                    waiting.upload
                ),
            ));
        }
    }
    Ok(problems)
}

/// Published objects no record accounts for (what a removal that lost a race would leave):
/// the store's keys looked at as they are listed, not held (most of them are accounted for),
/// the orphans reported in key order.
async fn orphans(
    store: &dyn Storage,
    manifest_prefix: &str,
    accounted: &BTreeSet<&str>,
) -> io::Result<Vec<Problem>> {
    let mut orphans = Vec::new();
    store
        .list_each("", &mut |key| {
            if !is_bookkeeping(&key, manifest_prefix) && !accounted.contains(key.as_str()) {
                orphans.push(key);
            }
        })
        .await?;
    orphans.sort();
    Ok(orphans
        .into_iter()
        .map(|key| {
            problem(
                "orphan",
                &key,
                "published, but no record references it".into(),
            )
        })
        .collect())
}

/// One key to check: its record (or the record its object stands for, with what is there
/// `now`, read with it), and the record of the key it is an alias of, if it is one.
struct Checking<'r> {
    record: &'r KeyRecord,
    now: Option<ObjectInfo>,
    target: Option<&'r KeyRecord>,
}

impl Checking<'_> {
    /// A lease in force, a tombstone, a reference to an upload that does not exist, an alias
    /// whose target is gone or differs, and the object missing or changed (by size, or by
    /// content under [`Depth::Deep`]).
    async fn check(
        self,
        store: &dyn Storage,
        depth: Depth,
        by_upload: &BTreeMap<&str, &ListedUpload>,
        problems: &mut Vec<Problem>,
    ) -> io::Result<()> {
        let record = self.record;
        let mut problem = |kind, detail: String| {
            problems.push(Problem {
                kind,
                key: record.key.clone(),
                detail,
            })
        };
        // A `create` lease whose upload lists the key was released by its finalize.
        let listing = |upload: &str| {
            by_upload
                .get(upload)
                .map(|u| Listing::new(u.keys.iter(), u.runs.iter()))
        };
        let in_force = record
            .lease
            .as_ref()
            .filter(|lease| !released_by_finalize(lease, &record.key, listing));
        if let Some(lease) = in_force {
            problem(
                "lease",
                format!(
                    "{} by {}: in progress, or left by a killed run; re-run it",
                    lease.op, lease.holder
                ),
            );
            return Ok(());
        }
        if record.refs.is_empty() {
            problem("tombstone", "a removal did not finish".into());
            return Ok(());
        }
        for upload in &record.refs {
            if !by_upload.contains_key(upload.as_str()) {
                problem(
                    "dangling",
                    format!("referenced by {upload}, which does not exist"),
                );
            }
        }
        // Invariant 6: an alias's target is there, with the same content, held by every
        // upload holding the alias.
        if let Some(target) = &record.alias_of {
            match self.target {
                Some(t) if t.etag == record.etag && record.refs.is_subset(&t.refs) => {}
                Some(t) => problem(
                    "alias",
                    format!(
                        "its target {target} holds {} for {:?}, the alias {} for {:?}",
                        t.etag, t.refs, record.etag, record.refs
                    ),
                ),
                None => problem("alias", format!("its target {target} is gone")),
            }
        }
        let found = match (depth, self.now) {
            (Depth::Deep, _) => store.head(&record.key).await?,
            // Read with the record it stands for: its size now, and the content its writer
            // named.
            (Depth::Fast, Some(now)) => Some(ObjectInfo {
                size: now.size,
                etag: record.etag.clone(),
            }),
            (Depth::Fast, None) => store.size(&record.key).await?.map(|size| ObjectInfo {
                size,
                etag: record.etag.clone(),
            }),
        };
        match found {
            None => problem("missing", String::new()),
            Some(info) if info.size != record.size || info.etag != record.etag => problem(
                "changed",
                format!(
                    "size {} etag {}, recorded {} {}",
                    info.size, info.etag, record.size, record.etag
                ),
            ),
            Some(_) => {}
        }
        Ok(())
    }
}

/// The records of the keys aliases name, as read.
#[derive(Default)]
struct AliasTargets {
    read: HashMap<String, Option<KeyRecord>>,
}

impl AliasTargets {
    /// The record of the key `record` is an alias of (`None`: it is none, or its target has
    /// neither record nor object): one of the `recorded`, or the one its object stands for.
    async fn of(
        &mut self,
        store: &dyn Storage,
        refs: &RefStore<'_>,
        record: &KeyRecord,
        owners: &HashMap<String, &str>,
        recorded: &BTreeMap<&str, &KeyRecord>,
    ) -> io::Result<Option<KeyRecord>> {
        let Some(target) = record.alias_of.as_deref() else {
            return Ok(None);
        };
        if let Some(found) = recorded.get(target) {
            return Ok(Some((*found).clone()));
        }
        if !store.traits().names_owners {
            return Ok(None);
        }
        if !self.read.contains_key(target) {
            let found = refs.owned_key_unread(target, owners).await?;
            self.read
                .insert(target.to_string(), found.map(|(found, _)| found));
        }
        Ok(self.read.get(target).cloned().flatten())
    }
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
    by_upload: &BTreeMap<&str, &ListedUpload>,
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
            if let Match::Found(offer) = best_offer(&want.path, want.md5.as_deref(), offers) {
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

/// Whether a debuginfod source key is one an indexer publishes (pipeline/sources.rs,
/// `Indexer::source_key`), as far as it can be told without the store's prefix.
fn servable(key: &str) -> bool {
    crate::refs::record_fits(key)
        && crate::layouts::grammar::is_valid_key(crate::layouts::Layout::Debuginfod, key)
}

/// What an audit checks of an upload record ([`crate::refs::UploadRecord`], read by the same
/// field names): an audit holds every upload's at once, so the rest of each record (its
/// metadata, what a re-delivery is answered from, a debug file's source paths) is skipped as
/// it is parsed, and its names are held compactly ([`Names`]).
#[derive(Debug, Deserialize)]
struct ListedUpload {
    upload: String,
    #[serde(default)]
    state: UploadState,
    keys: Names,
    #[serde(default)]
    planned: Names,
    #[serde(default)]
    runs: Names,
}

/// A set of names (a record's keys, or runs) held as one string in sorted order, each name
/// ending where `ends` says: a `BTreeSet<String>` costs about 60 bytes per name beside its
/// text, and an audit holds every upload's keys at once. Written here because the one thing
/// it does (a sorted set of short strings in one allocation) is not worth a dependency.
#[derive(Debug, Default)]
struct Names {
    text: String,
    ends: Vec<u32>,
}

impl Names {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `index`th name: from where the one before ends (or the start) to its own end.
    fn name(&self, index: usize) -> &str {
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.text[start as usize..self.ends[index] as usize]
    }

    fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|index| self.name(index))
    }

    /// The name just appended to `text`, ending where it ends now.
    fn push_end(&mut self) -> Result<(), String> {
        let end = u32::try_from(self.text.len())
            .map_err(|_| "an upload record's names take over 4 GiB".to_string())?;
        self.ends.push(end);
        Ok(())
    }

    fn last(&self) -> Option<&str> {
        Some(self.name(self.len().checked_sub(1)?))
    }

    /// Sorted and without repeats, as the record's set was (a record written from a set
    /// lists its names so already: read in order, they are taken as they are).
    fn sorted(self) -> Result<Self, String> {
        let mut names: Vec<&str> = self.iter().collect();
        names.sort_unstable();
        names.dedup();
        let mut sorted = Names {
            text: String::with_capacity(self.text.len()),
            ends: Vec::with_capacity(names.len()),
        };
        for name in names {
            sorted.text.push_str(name);
            sorted.push_end()?;
        }
        Ok(sorted)
    }
}

/// Read straight into one [`Names`]: no string per name is made and dropped (with mimalloc,
/// the CLI's allocator, those freed pages stayed resident beside the names kept).
impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, Error, SeqAccess, Visitor};

        struct ListVisitor;
        /// One name, appended where it is read; `false` in the second once a name came out
        /// of order.
        struct Append<'n>(&'n mut Names, &'n mut bool);

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = Names;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
                let mut names = Names::default();
                let mut in_order = true;
                while seq
                    .next_element_seed(Append(&mut names, &mut in_order))?
                    .is_some()
                {}
                if !in_order {
                    return names.sorted().map_err(A::Error::custom);
                }
                names.text.shrink_to_fit();
                names.ends.shrink_to_fit();
                Ok(names)
            }
        }
        impl<'de> DeserializeSeed<'de> for Append<'_> {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
                deserializer.deserialize_str(self)
            }
        }
        impl<'de> Visitor<'de> for Append<'_> {
            type Value = ();
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a name")
            }
            fn visit_str<E: Error>(self, name: &str) -> Result<(), E> {
                if self.0.last().is_some_and(|last| last >= name) {
                    *self.1 = false;
                }
                self.0.text.push_str(name);
                self.0.push_end().map_err(E::custom)
            }
        }
        deserializer.deserialize_seq(ListVisitor)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(json: &str) -> Vec<String> {
        let read: Names = serde_json::from_str(json).unwrap();
        assert_eq!(read.len(), read.iter().count());
        read.iter().map(String::from).collect()
    }

    #[test]
    fn names_read_as_the_set_a_record_wrote() {
        let set: BTreeSet<String> = ["b/2", "a/1", "c/\u{e9}\"3\""]
            .into_iter()
            .map(String::from)
            .collect();
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(names(&json), set.into_iter().collect::<Vec<_>>());
        assert!(names("[]").is_empty());
    }

    #[test]
    fn names_out_of_order_or_repeated_are_sorted_once() {
        assert_eq!(
            names(r#"["c", "a", "b", "a", "\u0041"]"#),
            ["A", "a", "b", "c"]
        );
        // A prefix of a name is another name.
        assert_eq!(names(r#"["ab", "a"]"#), ["a", "ab"]);
    }

    #[test]
    fn an_upload_read_for_an_audit_keeps_what_it_checks() {
        let mut record = crate::refs::UploadRecord {
            upload: "u1".into(),
            state: UploadState::Indexing,
            ..Default::default()
        };
        record.keys.insert("k/2".into());
        record.planned.insert("k/1".into());
        record.runs.insert("r".into());
        record.source_paths = vec!["/src/a.c".into()];
        let read: ListedUpload =
            serde_json::from_slice(&serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(read.upload, "u1");
        assert_eq!(read.state, UploadState::Indexing);
        assert_eq!(read.keys.iter().collect::<Vec<_>>(), ["k/2"]);
        assert_eq!(read.planned.iter().collect::<Vec<_>>(), ["k/1"]);
        assert_eq!(read.runs.iter().collect::<Vec<_>>(), ["r"]);
    }
}
