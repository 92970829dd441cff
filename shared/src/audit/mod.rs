//! The store's invariants (refs/), checked from the outside: what `symdex verify` prints and
//! what every concurrency test asserts after each schedule.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;

mod coded;
mod copies;
mod listed;
mod names;
mod upload;

use listed::{Found, ListedKeys};
#[cfg(test)]
use names::Names;
use upload::ListedUpload;

use crate::refs::{
    released_by_finalize, KeyRecord, Lease, Listing, RefStore, UploadState, Waiting, STATE_PREFIX,
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

/// Checks every invariant over a whole store, each key's content as `depth` says. The
/// compressed copies first, then one pass over the store's listings ([`Listings`]): the keys
/// ([`Listings::check_keys`]), then what the uploads list, the sidecars, the waits, the
/// sources, and the orphans, each reading what the keys' check accounted for. The problems
/// come in that order (the copies' last), each group in key order.
pub async fn audit_with(
    store: &dyn Storage,
    manifest_prefix: &str,
    depth: Depth,
) -> io::Result<Audit> {
    let refs = RefStore::new(store);
    // Memory is bounded by what is held at once (`verify` at 50,000 debug files: 650,000
    // keys, 400,000 copies). The compressed copies (crate::encoded: each encodes what its key
    // holds now) are checked first, on their own: their listing is held (front coded) while
    // they are checked and gone before the uploads are read. Nothing a check finds depends on
    // another's, and a store nobody writes meanwhile (what the audit's findings are stated
    // for) reads the same in either order.
    let (_, copies) = copies::check_copies(store, depth).await?;
    // Only what is checked of each upload record is held (`ListedUpload`), its names front
    // coded (`Names`). The keys with a record are held whole (few, where objects name their
    // owners); a key its object stands for is checked as it is read, and only what was found
    // of it kept, beside where its name is held (`ListedKeys`). The store's keys are looked
    // at as they are listed (`orphans`).
    let uploads: Vec<ListedUpload> = refs.uploads_as().await?;
    let recorded = refs.recorded_keys().await?;
    let owners = if store.traits().names_owners {
        refs.owners_of(uploads.iter().map(|u| u.upload.as_str()))
            .await?
    } else {
        HashMap::new()
    };
    let by_upload = uploads.iter().enumerate();
    let listings = Listings {
        store,
        refs: &refs,
        uploads: &uploads,
        by_upload: by_upload.map(|(at, u)| (u.upload.as_str(), at)).collect(),
        by_key: recorded.iter().map(|r| (r.key.as_str(), r)).collect(),
        recorded: &recorded,
        owners,
    };
    let mut keys = listings.check_keys(depth).await?;
    let mut problems = std::mem::take(&mut keys.problems);
    let all_waiting = refs.all_waiting().await?;
    problems.extend(keys.upload_problems(&listings, &all_waiting).await?);
    let accounted = keys.accounted(&listings);
    problems.extend(sidecar_problems(&accounted));
    problems.extend(waiting_problems(&listings, &all_waiting, &accounted).await?);
    let of_sources = source_problems(&listings, &accounted).await?;
    problems.extend(orphans(store, manifest_prefix, &accounted).await?);
    problems.extend(of_sources);
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
/// (by name: their index in `uploads`), the keys with a record (by key), and the owner each
/// upload names its objects by (where objects name their owners).
struct Listings<'a> {
    store: &'a dyn Storage,
    refs: &'a RefStore<'a>,
    uploads: &'a [ListedUpload],
    by_upload: BTreeMap<&'a str, usize>,
    recorded: &'a [KeyRecord],
    by_key: BTreeMap<&'a str, &'a KeyRecord>,
    owners: HashMap<String, &'a str>,
}

/// The keys an audit checked: how many, their problems (in key order), and what was found of
/// each key an upload lists ([`ListedKeys`]: whether its object stands for its record, and
/// whose it is).
struct CheckedKeys {
    checked: usize,
    problems: Vec<Problem>,
    listed: ListedKeys,
}

impl<'a> Listings<'a> {
    /// The lease on `record` still in force: a `create` lease whose upload lists the key was
    /// released by its finalize.
    fn lease_in_force<'r>(&self, record: &'r KeyRecord) -> Option<&'r Lease> {
        let listing = |upload: &str| {
            self.upload(upload)
                .map(|u| Listing::new(u.keys.iter(), u.runs.iter()))
        };
        record
            .lease
            .as_ref()
            .filter(|lease| !released_by_finalize(lease, &record.key, listing))
    }

    /// The listed upload named `name`.
    fn upload(&self, name: &str) -> Option<&'a ListedUpload> {
        let uploads = self.uploads;
        self.by_upload.get(name).map(|at| &uploads[*at])
    }

    /// Checks every key: those with a record, then (in the uploads' order, each once) those
    /// whose object stands for its record.
    async fn check_keys(&self, depth: Depth) -> io::Result<CheckedKeys> {
        let (store, refs) = (self.store, self.refs);
        let names_owners = store.traits().names_owners;
        // Where objects name no owner every key has a record: nothing listed to look at.
        let owning = if names_owners { self.uploads } else { &[] };
        let mut keys = CheckedKeys {
            checked: 0,
            problems: Vec::new(),
            listed: ListedKeys::of(owning)?,
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
            checking.check(self, depth, &mut keys.problems).await?;
        }
        for (at, upload) in owning.iter().enumerate() {
            // The aliases of one upload name its one stored copy: read once.
            targets = AliasTargets::default();
            for (index, key) in upload.listed_keys().enumerate() {
                let key = key.as_str();
                let seen = keys.listed.found_listed(at, index) != Found::Unseen;
                if seen || self.by_key.contains_key(key) {
                    continue;
                }
                let Some((record, now)) = refs.owned_key_unread(key, &self.owners).await? else {
                    keys.listed.set_listed(at, index, Found::Absent);
                    continue;
                };
                keys.checked += 1;
                let owner = self.by_upload.get(record.by.as_str());
                let owner = owner.and_then(|at| u32::try_from(*at).ok());
                keys.listed.set_listed(at, index, Found::Owned(owner));
                let target = targets
                    .of(store, refs, &record, &self.owners, &self.by_key)
                    .await?;
                let checking = Checking {
                    record: &record,
                    now: Some(now),
                    target: target.as_ref(),
                };
                checking.check(self, depth, &mut keys.problems).await?;
            }
        }
        keys.problems.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(keys)
    }
}

impl CheckedKeys {
    /// Whether `upload` references `key`, its `index`th listed key, by the key's record or the
    /// owner its object names (`at`: the upload's index in the uploads).
    fn references(&self, listings: &Listings<'_>, key: &str, (at, index): (usize, usize)) -> bool {
        let upload = listings.uploads[at].upload.as_str();
        match listings.by_key.get(key) {
            Some(record) => record.refs.contains(upload),
            None => match self.listed.found_listed(at, index) {
                Found::Owned(Some(owner)) => listings.uploads[owner as usize].upload == upload,
                _ => false,
            },
        }
    }

    /// Whether the key, the `index`th the `at`th upload lists, has a record or an object.
    fn known(&self, listings: &Listings<'_>, key: &str, (at, index): (usize, usize)) -> bool {
        listings.by_key.contains_key(key)
            || matches!(self.listed.found_listed(at, index), Found::Owned(_))
    }

    /// The keys accounted for, once every check that accounts for one is done.
    fn accounted<'k>(&'k self, listings: &'k Listings<'_>) -> Accounted<'k> {
        Accounted {
            by_key: &listings.by_key,
            listed: &self.listed,
            uploads: listings.uploads,
        }
    }

    /// The uploads' problems: a run interrupted, or a key an upload lists that does not name
    /// it (missing, changed, or its record not referencing the upload). A changed key is
    /// accounted for (what is there is no orphan).
    async fn upload_problems(
        &mut self,
        listings: &Listings<'_>,
        all_waiting: &[Waiting],
    ) -> io::Result<Vec<Problem>> {
        let store = listings.store;
        let mut problems = Vec::new();
        // An upload whose bytes an overwrite replaced waits for the key it still lists (refs/,
        // invariant 8): not a lost reference, unless the bytes there are its own (a free key
        // it waits for is reported below).
        let waits: BTreeSet<(&str, &str)> = all_waiting
            .iter()
            .map(|w| (w.key.as_str(), w.upload.as_str()))
            .collect();
        for (at, upload) in listings.uploads.iter().enumerate() {
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
            // Its keys are its first listed ones (ListedUpload::listed_key_into).
            for (index, key) in upload.keys.iter().enumerate() {
                let (key, listed) = (key.as_str(), (at, index));
                if self.references(listings, key, listed) {
                    continue;
                }
                if waits.contains(&(key, &upload.upload))
                    && !holds_its_own_bytes(listings, key, &upload.upload).await?
                {
                    continue;
                }
                let lists = format!("upload {} lists it", upload.upload);
                // Where objects name their owners, a key without a record is its object: gone,
                // or replaced by one naming nobody (or another upload), it is missing or
                // changed.
                if store.traits().names_owners && !self.known(listings, key, listed) {
                    match store.owned(key).await? {
                        None => problems.push(problem("missing", key, lists)),
                        Some(found) => {
                            let whose = found.owner.unwrap_or_else(|| "no upload".into());
                            self.listed.set_listed(at, index, Found::Changed);
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

/// The keys accounted for (a record or an owned object names them, or an upload lists what
/// is there): the keys with a record, and those [`ListedKeys`] found `Owned` or `Changed`.
/// Borrowed from the audit's listings, not gathered into a set of their own.
struct Accounted<'k> {
    by_key: &'k BTreeMap<&'k str, &'k KeyRecord>,
    listed: &'k ListedKeys,
    uploads: &'k [ListedUpload],
}

impl<'k> Accounted<'k> {
    fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
            || matches!(
                self.listed.found(self.uploads, key),
                Found::Owned(_) | Found::Changed
            )
    }

    /// Every key accounted for, in key order, once: the two sorted sequences merged.
    fn in_order(&self) -> impl Iterator<Item = String> + 'k {
        let mut recorded = self.by_key.keys().map(|key| key.to_string()).peekable();
        let mut owned = self.listed.accounted(self.uploads).peekable();
        std::iter::from_fn(move || match (recorded.peek(), owned.peek()) {
            (Some(r), Some(o)) if o < r => owned.next(),
            (Some(r), Some(o)) if o == r => owned.next().and(recorded.next()),
            (Some(_), _) => recorded.next(),
            (None, _) => owned.next(),
        })
    }
}

/// A unified `.meta` sidecar describes the file beside it, and goes with it (a sidecar of a
/// conflicting key is the file's upload's, pipeline/): one without its file is what an
/// earlier version left where an upload conflicting on the file shared it.
fn sidecar_problems(accounted: &Accounted<'_>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for key in accounted.in_order() {
        let described = crate::layouts::unified::described_by_sidecar(&key);
        if let Some(file) = described.filter(|file| !accounted.contains(file)) {
            problems.push(problem(
                "sidecar",
                &key,
                format!("its file {file} is not published; re-index the upload referencing it with --recheck"),
            ));
        }
    }
    problems
}

/// Whether the object at `key` is `upload`'s own, as its owner names it (where objects name
/// their owners), outside a change in progress: then a mark saying `upload` waits for the
/// key explains nothing. An overwrite leaves its marks on holders it did not displace
/// (refs/waiting.rs); such a mark on an upload whose bytes are there must not hide that the
/// key's record lost it. While a lease stands the bytes may not have moved yet: an
/// overwrite swaps the record to name itself alone, then copies its bytes over the holder's
/// (reported as `lease` if its writer died).
async fn holds_its_own_bytes(listings: &Listings<'_>, key: &str, upload: &str) -> io::Result<bool> {
    let changing = listings
        .by_key
        .get(key)
        .is_some_and(|record| listings.lease_in_force(record).is_some());
    if changing || !listings.store.traits().names_owners {
        return Ok(false);
    }
    let owner = listings
        .store
        .owned(key)
        .await?
        .and_then(|found| found.owner);
    Ok(owner.is_some_and(|token| listings.owners.get(&token) == Some(&upload)))
}

/// Invariant 8: a live upload waits only for a key that holds something (another upload's
/// bytes); a free one was freed by a removal that did not hand it over.
async fn waiting_problems(
    listings: &Listings<'_>,
    all_waiting: &[Waiting],
    accounted: &Accounted<'_>,
) -> io::Result<Vec<Problem>> {
    let mut problems = Vec::new();
    for waiting in all_waiting {
        let live = listings
            .upload(&waiting.upload)
            .is_some_and(|u| u.state != UploadState::Removing);
        if live
            && !accounted.contains(&waiting.key)
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
    accounted: &Accounted<'_>,
) -> io::Result<Vec<Problem>> {
    let mut orphans = Vec::new();
    store
        .list_each("", &mut |key| {
            if !is_bookkeeping(&key, manifest_prefix) && !accounted.contains(&key) {
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
        listings: &Listings<'_>,
        depth: Depth,
        problems: &mut Vec<Problem>,
    ) -> io::Result<()> {
        let (record, store) = (self.record, listings.store);
        let mut problem = |kind, detail: String| {
            problems.push(Problem {
                kind,
                key: record.key.clone(),
                detail,
            })
        };
        if let Some(lease) = listings.lease_in_force(record) {
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
            if !listings.by_upload.contains_key(upload.as_str()) {
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
    listings: &Listings<'_>,
    accounted: &Accounted<'_>,
) -> io::Result<Vec<Problem>> {
    use crate::sourcemap::{base_name, best_offer, Match};
    let (store, refs) = (listings.store, listings.refs);
    let mut problems = Vec::new();
    let files = store.list(&format!("{STATE_PREFIX}/sourcemap/")).await?;
    if files.is_empty() {
        return Ok(problems);
    }
    let indexed = |want: &crate::sourcemap::Want| {
        listings
            .upload(&want.upload)
            .is_some_and(|u| u.state == UploadState::Indexed)
    };
    // The keys the wants checked below name, and which of them are published: the records
    // are read twice (they are few), so that only those keys are held, not every published
    // key (at 50,000 debug files, 250,000 `buildid/` keys whose list was the peak of verify).
    let mut wanted = Vec::new();
    for file in &files {
        for want in &refs.source_map(file).await?.wants {
            let key = want.store_key();
            if indexed(want) && servable(&key) {
                wanted.push(key);
            }
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let published = published_of(&wanted, accounted);
    let lives = |upload: &str| {
        listings
            .upload(upload)
            .is_some_and(|u| u.state != UploadState::Removing)
    };
    // Wants written since the first pass, whose problems stand only if their keys are not
    // published either (looked up once, after the loop): a concurrent indexer's want is never
    // skipped unchecked (an audit may say too much while writers run, never too little).
    let mut late: Vec<(usize, String)> = Vec::new();
    for file in files {
        let record = refs.source_map(&file).await?;
        for offer in &record.offers {
            if !listings.by_upload.contains_key(offer.upload.as_str()) {
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
            let key = want.store_key();
            let seen = wanted.binary_search(&key).ok();
            if !indexed(want) || seen.is_some_and(|at| published[at]) || !servable(&key) {
                continue;
            }
            let name = base_name(&want.path);
            let offers = record
                .offers
                .iter()
                .filter(|o| base_name(&o.path) == name && lives(&o.upload));
            if let Match::Found(offer) = best_offer(&want.path, want.digest(), offers) {
                if seen.is_none() {
                    late.push((problems.len(), key.clone()));
                }
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
    drop_published_late(&mut problems, late, accounted);
    Ok(problems)
}

/// Drops the problems of wants first read in the second pass (`late`: the problem's index
/// and its key) whose keys are published after all.
fn drop_published_late(
    problems: &mut Vec<Problem>,
    late: Vec<(usize, String)>,
    accounted: &Accounted<'_>,
) {
    if late.is_empty() {
        return;
    }
    let mut keys: Vec<String> = late.iter().map(|(_, key)| key.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    let published = published_of(&keys, accounted);
    let dropped: BTreeSet<usize> = late
        .into_iter()
        .filter(|(_, key)| keys.binary_search(key).is_ok_and(|at| published[at]))
        .map(|(index, _)| index)
        .collect();
    let mut index = 0;
    problems.retain(|_| {
        index += 1;
        !dropped.contains(&(index - 1))
    });
}

/// Which of `wanted` (sorted) are published: a key counts as published when a key accounted
/// for ends with it, from its `buildid/` on (a debuginfod `source/` key, the store's prefix
/// not known), or is it (a PDB document's `src/` key, documents.rs: unprefixed).
fn published_of(wanted: &[String], accounted: &Accounted<'_>) -> Vec<bool> {
    let mut published = vec![false; wanted.len()];
    if wanted.is_empty() {
        return published;
    }
    for key in accounted.in_order() {
        let source_link = key.starts_with("src/").then_some(key.as_str());
        let debuginfod = key.match_indices("buildid/").map(|(at, _)| &key[at..]);
        for suffix in source_link.into_iter().chain(debuginfod) {
            if let Ok(at) = wanted.binary_search_by(|want| want.as_str().cmp(suffix)) {
                published[at] = true;
            }
        }
    }
    published
}

/// Whether a debuginfod source key is one an indexer publishes (pipeline/sources.rs,
/// `Indexer::source_key`), as far as it can be told without the store's prefix.
fn servable(key: &str) -> bool {
    use crate::layouts::grammar::{is_valid_key, is_valid_source_link_key};
    crate::refs::record_fits(key)
        && (is_valid_key(crate::layouts::Layout::Debuginfod, key) || is_valid_source_link_key(key))
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
    use std::collections::BTreeSet;

    use super::{ListedUpload, Names};
    use crate::refs::UploadState;

    fn names(json: &str) -> Vec<String> {
        let read: Names = serde_json::from_str(json).unwrap();
        assert_eq!(read.len(), read.iter().count());
        read.iter().collect()
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
