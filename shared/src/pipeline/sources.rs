//! The indexer's part in sources for debuggers (sourcemap.rs has the rules): a source upload
//! offers itself and serves the paths it now matches best; a debug file asks for the paths its
//! DWARF names and is served from the offers there; a removal withdraws its offer and hands
//! the paths it decided to the offers matching them then.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::Arc;

use futures_util::StreamExt;

use super::{upload_record_of, Indexer, Outcome, SourceMapChange, Upload};
use crate::formats::dwarf::SourcePaths;
use crate::identity::Identity;
use crate::layouts::{self, Layout};
use crate::manifest::{Action, Record};
use crate::refs::{Content, KeyOutcome, UploadState};
use crate::sourcemap::{self, best_offer, ContentDigest, Match, Offer, SourceReport, Want};
use crate::storage::CopySource;

/// Join records of one debug file swapped at once ([`Indexer::want_sources`]).
const SOURCE_MAP_SWAPS: usize = 8;
/// From this many join records on, a debug file's first index in a named build lists its
/// scope's records first (one request) to create the missing ones without reading them.
pub(super) const LIST_JOIN_RECORDS: usize = 4;

/// What serving one wanted source path came to ([`Indexer::serve_path`]).
enum Served {
    /// Held by this source upload: published for it, or found so.
    By(String, KeyOutcome),
    /// The key holds other content.
    Conflict,
    /// Offers of different content tie for it.
    Ambiguous(usize),
    /// Only offers of other bytes than its recorded digest (this algorithm) match its path
    /// (this many).
    OtherContent(usize, &'static str),
    /// No offer matches it.
    Missing,
}

/// How an upload naming no product is named where products are listed (`held_by_products`).
pub(super) const NO_PRODUCT: &str = "(no product)";

/// What asking for a debug file's sources came to ([`Indexer::want_sources`]).
pub(super) struct Wanted {
    /// For its manifest record.
    pub(super) report: SourceReport,
    /// The records of the source uploads that now hold `source/` keys for it.
    pub(super) holders: Vec<Record>,
    /// `source/` keys it names that another product's upload holds with other bytes.
    pub(super) foreign: Vec<String>,
}

impl Wanted {
    /// A debug file whose build id another product's upload holds too
    /// ([`Indexer::build_id_held_by_others`]): no path it names is asked for or served.
    pub(super) fn refused(sources: &SourcePaths, products: &[String]) -> Wanted {
        let why = format!(
            "its build id is held by product {} too",
            products.join(", ")
        );
        let report = SourceReport {
            referenced: sources.paths.len(),
            unserved: sources
                .paths
                .iter()
                .map(|p| format!("{p}: {why}"))
                .collect(),
            ..SourceReport::default()
        };
        Wanted {
            report,
            holders: Vec::new(),
            foreign: Vec::new(),
        }
    }
}

impl Indexer<'_> {
    /// The products other than its own holding the keys of a debug file's identity (found
    /// held by them already with the same bytes, or with other bytes: `outcome`). Build ids
    /// are global, but the `source/` keys under one are served for one tenant: a debug file
    /// whose id another product holds (a copy of its debug file, or one made with its build
    /// id) asks for no source, so that it never publishes its own text under another
    /// product's build id, nor takes that product's files (THREATS.md, tenancy); its record
    /// is a conflict naming that product. Reads only where the keys were found held.
    pub(super) async fn build_id_held_by_others(
        &self,
        upload: &Upload<'_>,
        outcome: &Outcome,
    ) -> io::Result<Vec<String>> {
        let held: Vec<String> = outcome
            .conflicts
            .iter()
            .chain(&outcome.unchanged)
            .cloned()
            .collect();
        if held.is_empty() || !self.config.source_joins {
            return Ok(Vec::new());
        }
        let product = upload.meta.product.as_deref();
        self.other_products(&upload.id, product, &held).await
    }

    /// The sources an identity names, for its `record` (`sources`, `source_paths`): a PDB's
    /// documents ([`Self::ask_documents`]), or a debug file's DWARF paths, asked for
    /// ([`Self::want_sources`]) unless its build id is held by another product too
    /// ([`Self::build_id_held_by_others`]: then none is). Returns the records of the source
    /// uploads now holding keys for it, and the products sharing its build id (its record is
    /// marked so after it is decided: [`mark_shared_build_id`]). A `source/` key another
    /// product's upload holds with other bytes is added to `outcome`'s conflicts, its product
    /// named by `flag_cross_product` (THREATS.md, tenancy): never a silent "served".
    pub(super) async fn ask_sources(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        fresh: bool,
        record: &mut Record,
        outcome: &mut Outcome,
    ) -> io::Result<(Vec<Record>, Vec<String>)> {
        let documents = self
            .ask_documents(upload, id, fresh, record, outcome)
            .await?;
        let (Some(build_id), Some(sources)) = (id.build_id.as_deref(), &id.sources) else {
            return Ok((documents, Vec::new()));
        };
        let shared_with = self.build_id_held_by_others(upload, outcome).await?;
        let wanted = match shared_with.is_empty() {
            true => self.want_sources(upload, build_id, sources, fresh).await?,
            false => Wanted::refused(sources, &shared_with),
        };
        let mut report = wanted.report;
        report.rejected.clone_from(&sources.rejected);
        record.source_paths.clone_from(&sources.paths);
        record.sources = Some(report);
        outcome.conflicts.extend(wanted.foreign);
        let mut holders = documents;
        holders.extend(wanted.holders);
        Ok((holders, shared_with))
    }

    /// Offers a source upload to the debug files of its scope (sourcemap.rs), and publishes it
    /// under the `source/` key of every path it is now the best match for. `holding`: a key
    /// holding its bytes (debug files arriving later copy from there). Returns the extra keys
    /// it references.
    pub(super) async fn offer_source(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        holding: &str,
        fresh: bool,
        outcome: &mut Outcome,
    ) -> io::Result<BTreeSet<String>> {
        // Offered whatever the layouts: a PDB's documents are served under `src/` (documents.rs)
        // without the debuginfod layout.
        let (path, file) = offer_of(upload);
        let offer = Offer {
            path,
            root: upload.meta.source_root.clone(),
            upload: upload.id.clone(),
            key: holding.to_string(),
            etag: upload.etag.clone(),
            size: upload.size,
            md5: id.md5.clone(),
            sha1: id.sha1.clone(),
            sha256: id.sha256.clone(),
        };
        let name = sourcemap::base_name(&offer.path).to_string();
        let record = self
            .refs
            .update_source_map(&file, |r| r.offer(&offer))
            .await?;
        let offers = &record.offers;
        let same_name = |o: &&Offer| sourcemap::base_name(&o.path) == name;
        let mut keys = BTreeSet::new();
        let mut dead = BTreeSet::new();
        let mut tied = Vec::new();
        for want in record
            .wants
            .iter()
            .filter(|w| sourcemap::base_name(&w.path) == name)
        {
            let candidates = offers.iter().filter(same_name);
            let best = match best_offer(&want.path, want.digest(), candidates) {
                Match::Found(best) => best,
                Match::Ambiguous(tying) if tying.iter().any(|o| o.upload == offer.upload) => {
                    tied.push(want);
                    continue;
                }
                Match::OtherContent(_) => {
                    outcome.notes.extend(other_content_note(&offer, want));
                    continue;
                }
                _ => continue,
            };
            if best.etag != offer.etag {
                continue;
            }
            if !self.upload_lives(&want.upload).await? {
                dead.insert(want.clone());
                continue;
            }
            if let Some(key) = self.want_key(want) {
                keys.insert(key);
            }
        }
        if !dead.is_empty() {
            self.refs
                .update_source_map(&file, |r| {
                    let before = r.wants.len();
                    r.wants.retain(|w| !dead.contains(w));
                    r.wants.len() != before
                })
                .await?;
        }
        outcome
            .notes
            .extend(self.left_to_others(&offer, &tied).await?);
        if keys.is_empty() || !self.refs.plan_more(&upload.id, &keys).await? {
            return Ok(BTreeSet::new());
        }
        let own = self
            .publish_own(upload, &keys, fresh, outcome, Some(holding))
            .await?;
        Ok(own.referenced)
    }

    /// What a source `offer` tying with others of different content for the paths of
    /// `tied` leaves as it is: a path a tied source already serves (a debug file that asked
    /// between the two offers) keeps it — the tie would have served nothing had this offer
    /// come first (sourcemap.rs), but an offer takes no other upload's key — and the source's
    /// record says so, rather than saying nothing.
    async fn left_to_others(&self, offer: &Offer, tied: &[&Want]) -> io::Result<Vec<String>> {
        let mut notes = Vec::new();
        for want in tied {
            let Some(key) = self.want_key(want) else {
                continue;
            };
            let Some(held) = self.refs.key(&key).await? else {
                continue;
            };
            if held.etag != offer.etag && !held.refs.is_empty() {
                let holders: Vec<&str> = held.refs.iter().map(String::as_str).collect();
                notes.push(format!(
                    "{key}: ties with a source of different content, which serves it (upload {}); left as it is",
                    holders.join(", ")
                ));
            }
        }
        Ok(notes)
    }

    /// Whether `upload` is still there (not removed, nor being removed): a want of a debug
    /// file removed since serves nobody, an offer of a source removed since serves nothing.
    pub(super) async fn upload_lives(&self, upload: &str) -> io::Result<bool> {
        let record = self.refs.upload(upload).await?;
        Ok(record.is_some_and(|u| u.state != UploadState::Removing))
    }

    /// The key serving `want`, if it is a valid key: a PDB document's `src/` key as it
    /// names it, else the prefixed debuginfod `source/` key of its path.
    pub(super) fn want_key(&self, want: &Want) -> Option<String> {
        match &want.key {
            Some(key) => (crate::refs::record_fits(key)
                && layouts::grammar::is_valid_source_link_key(key))
            .then(|| key.clone()),
            None => self.source_key(&want.build_id, &want.path),
        }
    }

    /// The prefixed `source/` key of a path, if it is a valid key.
    pub(super) fn source_key(&self, build_id: &str, path: &str) -> Option<String> {
        let key = sourcemap::source_key(build_id, path);
        let prefixed = format!("{}{key}", self.config.prefix(Layout::Debuginfod));
        let fits = crate::refs::record_fits(&prefixed);
        (fits && layouts::grammar::is_valid_key(Layout::Debuginfod, &key)).then_some(prefixed)
    }

    /// Records a debug file's `wants` (of its `paths`) sharing one join record `file` there
    /// (when `fresh`), and returns the record as swapped (or read).
    async fn want_in(
        &self,
        upload: &Upload<'_>,
        file: String,
        wants: Vec<Want>,
        fresh: bool,
        absent: bool,
    ) -> io::Result<WantsSwapped> {
        // Registered when the upload is first indexed: a re-index only reads (it writes
        // nothing but its manifest records). Made at once, the swap returns the record with
        // every offer written before it; deferred, indexing only reads it.
        let want = SourceMapChange::Want(file.clone(), wants.clone());
        let record = if self.refs.defers_source_maps() {
            if fresh {
                self.change_source_map(&upload.id, want).await?;
            }
            self.refs.source_map(&file).await?
        } else {
            // `absent` only for a first index (`fresh`): the change is made to any record.
            self.refs
                .update_source_map_guessing(&file, absent && fresh, |r| fresh && want.apply(r))
                .await?
        };
        Ok((file, wants, record))
    }

    /// Asks for the sources a debug file names: records each path in its join record, and
    /// publishes `source/` keys for those an uploaded source serves, on behalf of the source
    /// uploads (refs/, invariant 5).
    pub(super) async fn want_sources(
        &self,
        upload: &Upload<'_>,
        build_id: &str,
        sources: &SourcePaths,
        fresh: bool,
    ) -> io::Result<Wanted> {
        let paths = &sources.paths;
        let mut asked = Asked::new(paths.len());
        if !self.config.layouts.contains(&Layout::Debuginfod) || !self.config.source_joins {
            asked.report.missing = paths.to_vec();
            return Ok(Wanted {
                report: asked.report,
                holders: Vec::new(),
                foreign: asked.foreign,
            });
        }
        let wants = paths
            .iter()
            .map(|path| Want {
                build_id: build_id.to_string(),
                path: path.clone(),
                upload: upload.id.clone(),
                md5: sources.md5.get(path).cloned(),
                ..Want::default()
            })
            .collect();
        let why = format!("sources named by {} (build id {build_id})", upload.id);
        self.want_all(upload, wants, asked, fresh, &why).await
    }

    /// Records `wants` of `upload` in their join records, and serves each from the offers
    /// there ([`Self::serve_path`]): a debug file's paths, a PDB's documents. `why`: the
    /// reason the records of the source uploads now holding keys for it give.
    pub(super) async fn want_all(
        &self,
        upload: &Upload<'_>,
        wants: Vec<Want>,
        mut asked: Asked,
        fresh: bool,
        why: &str,
    ) -> io::Result<Wanted> {
        let scope = sourcemap::Scope::of(&upload.meta);
        let swapped = self.swap_wants(upload, wants, &scope, fresh).await?;
        // Noted files that may serve paths no offer serves (`unclaimed.rs`), and those paths.
        let mut claims = BTreeMap::new();
        let mut claimed = Vec::new();
        for swapped in swapped {
            let (file, group, record) = swapped?;
            let mut dead = BTreeSet::new();
            for want in &group {
                let path = &want.path;
                let Some(key) = self.want_key(want) else {
                    asked
                        .report
                        .unserved
                        .push(format!("{path}: not a valid key"));
                    continue;
                };
                let served = self
                    .serve_path(&record.offers, path, want.digest(), &key, &mut dead, None)
                    .await?;
                let noted = self.noted_for(&record, path, want.md5.as_deref(), &mut claims);
                if noted && matches!(served, Served::Missing | Served::OtherContent(..)) {
                    claimed.push((path.clone(), key.clone()));
                }
                asked.note(self, upload, &scope, want, key, served).await?;
            }
            if !dead.is_empty() {
                let change = SourceMapChange::DropOffers(file, dead);
                self.change_source_map(&upload.id, change).await?;
            }
        }
        self.claim_noted(&upload.id, claims, claimed);
        let holders = self.holder_records(asked.held, why).await?;
        Ok(Wanted {
            report: asked.report,
            holders,
            foreign: asked.foreign,
        })
    }

    /// Records a debug file's wants in the join records of `scope`, one per record file
    /// (its paths grouped by their base names). Returns each record as swapped (or read),
    /// with the paths grouped in it, in the records' order: each swap's error in its place.
    async fn swap_wants(
        &self,
        upload: &Upload<'_>,
        wants: Vec<Want>,
        scope: &sourcemap::Scope,
        fresh: bool,
    ) -> io::Result<Vec<io::Result<WantsSwapped>>> {
        let mut by_file: BTreeMap<String, Vec<Want>> = BTreeMap::new();
        for want in wants {
            by_file
                .entry(sourcemap::record_file(
                    scope,
                    sourcemap::base_name(&want.path),
                ))
                .or_default()
                .push(want);
        }
        // Each join record is swapped on its own (one compare-and-swap per record, none
        // depending on another's), so a few at once: a debug file naming hundreds of source
        // files touches up to 256 records, each a read and a write on S3. Registering its
        // wants (a first index) in a named build, one listing of the scope's records tells
        // which exist: the others are created without a read (a record created since fails
        // the creation and is read, so a wrong listing costs a request, never a change) — a
        // build's first debug file writes its records by one request each. Not for uploads
        // naming no build: their one scope's 256 records soon all exist, and the listing
        // would be a request more per debug file.
        let listed_scope = fresh
            && scope.names_build()
            && by_file.len() >= LIST_JOIN_RECORDS
            && !self.refs.defers_source_maps();
        let existing = if listed_scope {
            let listed = self.store.list(&sourcemap::scope_prefix(scope)).await?;
            Some(listed.into_iter().collect::<BTreeSet<String>>())
        } else {
            None
        };
        let swaps: Vec<_> = by_file
            .into_iter()
            .map(|(file, group)| {
                let absent = existing.as_ref().is_some_and(|e| !e.contains(&file));
                self.want_in(upload, file, group, fresh, absent)
            })
            .collect();
        Ok(futures_util::stream::iter(swaps)
            .buffered(SOURCE_MAP_SWAPS)
            .collect()
            .await)
    }

    /// Serves a wanted `path` (its `key`) from the best of `offers`, on behalf of that offer's
    /// source upload (refs/, invariant 5). An offer whose upload was removed since it
    /// offered itself is dead (added to `dead`, skipped from then on): the path goes to the
    /// offer matching it next, as if the dead one had been withdrawn. Offers tying are asked
    /// whether their uploads live (a read each, only where sources tie), so a dead one never
    /// keeps a path ambiguous: for an upload removed before records named their join record
    /// no withdrawal comes, and a removal's withdrawal may find the offer dropped already
    /// (by whoever met it dead) and decide nothing for the path. `removal`: the upload whose
    /// withdrawal this is, if it is one ([`Self::hold_for`]).
    async fn serve_path(
        &self,
        offers: &[sourcemap::Offer],
        path: &str,
        digest: Option<ContentDigest<'_>>,
        key: &str,
        dead: &mut BTreeSet<sourcemap::Offer>,
        removal: Option<&str>,
    ) -> io::Result<Served> {
        let name = sourcemap::base_name(path);
        loop {
            let candidates = offers
                .iter()
                .filter(|o| sourcemap::base_name(&o.path) == name && !dead.contains(*o));
            let offer = match best_offer(path, digest, candidates) {
                Match::Missing => return Ok(Served::Missing),
                Match::OtherContent(n) => {
                    let algorithm = digest.map_or("MD5", ContentDigest::algorithm);
                    return Ok(Served::OtherContent(n, algorithm));
                }
                Match::Ambiguous(tied) => {
                    let found_dead = dead.len();
                    for offer in &tied {
                        if !self.upload_lives(&offer.upload).await? {
                            dead.insert((*offer).clone());
                        }
                    }
                    if dead.len() > found_dead {
                        continue;
                    }
                    return Ok(Served::Ambiguous(tied.len()));
                }
                Match::Found(offer) => offer,
            };
            let content = Content {
                etag: &offer.etag,
                size: offer.size,
                source: CopySource::Key(&offer.key),
            };
            match self.hold_for(&offer.upload, key, &content, removal).await? {
                Some(KeyOutcome::Conflict) => return Ok(Served::Conflict),
                Some(outcome) => return Ok(Served::By(offer.upload.clone(), outcome)),
                None => {
                    dead.insert(offer.clone());
                }
            }
        }
    }

    /// The records of source uploads that now hold `source/` keys (`held`, by upload).
    async fn holder_records(
        &self,
        held: BTreeMap<String, Vec<String>>,
        why: &str,
    ) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        for (holder, keys) in held {
            if let Some(holder_upload) = self.refs.upload(&holder).await? {
                let mut record = upload_record_of(&holder_upload, Action::Indexed);
                record.published = keys;
                record.reason = Some(why.to_string());
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Withdraws a removed source upload's offer from its join record (sourcemap.rs), and
    /// serves the paths it decided from the offers that match them then: a path it served
    /// (its key among `freed`, the keys the removal unpublished), or one its offer made
    /// ambiguous. Each such key is published on behalf of the source upload then matching
    /// (refs/, invariant 5), and the manifest says so after the removal's own record.
    ///
    /// The paths are served, and reported, *before* the offer goes, decided on the record
    /// as read: the offer still there is what makes a retry after a crash do it all again
    /// (each key is reported again, as the removal's own are). Served after the swap, a
    /// retry would find the offer gone, and a path it had only made ambiguous would stay
    /// unserved although a source matches it.
    ///
    /// Whoever swaps the join record second sees the other: a debug file whose want is
    /// swapped after the withdrawal matches without this offer itself; one swapped before
    /// the read is served from the read, and one swapped in between from the record the
    /// withdrawal swapped (its own indexing met the offer and found its upload removing).
    pub(super) async fn withdraw_offer(
        &self,
        removed: &str,
        file: &str,
        freed: &[String],
    ) -> io::Result<()> {
        let read = self.refs.read_source_map(file).await?;
        let as_read = Arc::clone(&read.record);
        let mut handed = BTreeSet::new();
        self.hand_on_paths(removed, &as_read, freed, &mut handed)
            .await?;
        let mut swapped = None;
        self.refs
            .update_source_map_read(file, read, |record| {
                swapped = Some(record.clone());
                let offered = record.offers.len();
                record.offers.retain(|o| o.upload != removed);
                record.offers.len() != offered
            })
            .await?;
        // Changed since the read: a want (or offer) swapped in meanwhile is decided now. A
        // crash before this leaves such a path to the next upload that matches it. Compared,
        // not inferred from a second attempt: a sole writer's kept copy changes in place,
        // with no read again to tell.
        if let Some(swapped) = swapped.filter(|s| *s != *as_read) {
            self.hand_on_paths(removed, &swapped, freed, &mut handed)
                .await?;
        }
        Ok(())
    }

    /// [`Self::withdraw_offer`] on one state of the join record (`before`, with the offer):
    /// serves the paths withdrawing the offer decides, skipping keys in `handed` (served by
    /// an earlier call) and adding those it serves, and writes their records.
    async fn hand_on_paths(
        &self,
        removed: &str,
        before: &sourcemap::SourceMapRecord,
        freed: &[String],
        handed: &mut BTreeSet<String>,
    ) -> io::Result<()> {
        let mut after = before.clone();
        after.offers.retain(|o| o.upload != removed);
        let names: BTreeSet<&str> = before
            .offers
            .iter()
            .filter(|o| o.upload == removed)
            .map(|o| sourcemap::base_name(&o.path))
            .collect();
        let freed: BTreeSet<&str> = freed.iter().map(String::as_str).collect();
        let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut dead = BTreeSet::new();
        for want in &after.wants {
            let name = sourcemap::base_name(&want.path);
            let Some(key) = self.want_key(want) else {
                continue;
            };
            if handed.contains(&key) {
                continue;
            }
            // The withdrawn offer decided the path: it was the best match, or tied for it.
            let decided = names.contains(name)
                && match best_offer(
                    &want.path,
                    want.digest(),
                    before
                        .offers
                        .iter()
                        .filter(|o| sourcemap::base_name(&o.path) == name),
                ) {
                    Match::Found(offer) => offer.upload == removed,
                    Match::Ambiguous(tied) => tied.iter().any(|o| o.upload == removed),
                    Match::OtherContent(_) | Match::Missing => false,
                };
            if !(decided || freed.contains(key.as_str())) {
                continue;
            }
            if !self.upload_lives(&want.upload).await? {
                continue;
            }
            let served = self.serve_path(
                &after.offers,
                &want.path,
                want.digest(),
                &key,
                &mut dead,
                Some(removed),
            );
            // Only a path served is done with: one that no offer of this state of the record
            // serves is decided again on the state the withdrawal swapped, where an offer
            // swapped in meanwhile may match it. Marked done whatever came of it, the path
            // stayed unserved: the arriving source found the key freed and left it to this
            // removal, which had decided on the record before its offer (seed 5077).
            if let Served::By(holder, outcome) = served.await? {
                handed.insert(key.clone());
                if outcome == KeyOutcome::Published {
                    held.entry(holder).or_default().push(key);
                }
            }
        }
        let why = format!("sources whose upload {removed} was removed");
        let records = self.holder_records(held, &why).await?;
        if !records.is_empty() {
            self.write_manifest(&records).await?;
        }
        Ok(())
    }
}

/// Marks the decided `record` of a debug file whose build id the products `shared_with` hold
/// too ([`Indexer::ask_sources`]) as a conflict naming them.
pub(super) fn mark_shared_build_id(record: &mut Record, shared_with: Vec<String>) {
    if shared_with.is_empty() {
        return;
    }
    let product = record.meta.product.as_deref().unwrap_or_default();
    record.action = Some(Action::Conflict);
    record.reason = Some(format!(
        "cross-product build id: its keys are held by product {} too (ids are global: audit \
         who uploaded them first); no source is served under it for {product}",
        shared_with.join(", ")
    ));
    record.held_by_products = shared_with;
}

/// The path a source upload offers (sourcemap.rs) and the join record it offers it in.
pub(super) fn offer_of(upload: &Upload<'_>) -> (String, String) {
    let path = upload
        .source_path
        .clone()
        .or_else(|| upload.entry.as_ref().map(|e| e.path.clone()))
        .unwrap_or_else(|| upload.ingest_key.clone())
        .replace('\\', "/");
    let scope = sourcemap::Scope::of(&upload.meta);
    let file = sourcemap::record_file(&scope, sourcemap::base_name(&path));
    (path, file)
}

/// One join record a debug file's wants were recorded in: its file, the paths of the debug
/// file in it, and the record as swapped ([`Indexer::swap_wants`]).
type WantsSwapped = (String, Vec<Want>, Arc<sourcemap::SourceMapRecord>);

/// What asking for a debug file's sources came to so far ([`Indexer::want_sources`]): the
/// report, the `source/` keys another product holds (conflicts), and the keys published for
/// each source upload.
pub(super) struct Asked {
    pub(super) report: SourceReport,
    foreign: Vec<String>,
    held: BTreeMap<String, Vec<String>>,
}

impl Asked {
    /// Nothing asked yet, of `referenced` paths.
    pub(super) fn new(referenced: usize) -> Self {
        Asked {
            report: SourceReport {
                referenced,
                ..SourceReport::default()
            },
            foreign: Vec::new(),
            held: BTreeMap::new(),
        }
    }

    /// Notes how `want` (its `key`) was `served` for `upload`.
    async fn note(
        &mut self,
        indexer: &Indexer<'_>,
        upload: &Upload<'_>,
        scope: &sourcemap::Scope,
        want: &Want,
        key: String,
        served: Served,
    ) -> io::Result<()> {
        let report = &mut self.report;
        let path = want.path.as_str();
        let recorder = match want.key {
            Some(_) => "PDB",
            None => "line table",
        };
        match served {
            Served::Missing => report.missing.push(path.to_string()),
            Served::OtherContent(n, algorithm) => report.unserved.push(format!(
                "{path}: {n} uploaded sources match its path, none with the {algorithm} its {recorder} records"
            )),
            Served::Ambiguous(n) => report.unserved.push(format!(
                "{path}: {n} uploaded sources of different content match it{}",
                // In the store-wide scope every build's version of a file meets the
                // others: the usual cause, and its fix.
                if !scope.names_build() {
                    " (uploads naming no build share one scope: give each build its own, --build or x-amz-meta-build)"
                } else {
                    ""
                }
            )),
            Served::Conflict => {
                let product = upload.meta.product.as_deref();
                let keys = [key.clone()];
                let products = indexer
                    .other_products(&upload.id, product, &keys)
                    .await?;
                if products.is_empty() {
                    report
                        .unserved
                        .push(format!("{path}: {key} holds other content"));
                } else {
                    report.unserved.push(format!(
                        "{path}: {key} holds another product's source ({})",
                        products.join(", ")
                    ));
                    self.foreign.push(key);
                }
            }
            Served::By(holder, outcome) => {
                report.served += 1;
                if outcome == KeyOutcome::Published {
                    self.held.entry(holder).or_default().push(key);
                }
            }
        }
        Ok(())
    }
}

/// What a source `offer` whose path matches a `want` that records other bytes (its digest
/// differs) says in its record: for a PDB document, that its `src/` key is not served with
/// it (a DWARF path's mismatch is its debug file's to report, as it always was).
fn other_content_note(offer: &Offer, want: &Want) -> Option<String> {
    let key = want.key.as_ref()?;
    let digest = want.digest()?;
    let offered = digest.of_offer(offer)?;
    (offered != digest.value() && sourcemap::matches_path(offer, &want.path)).then(|| {
        format!(
            "{key}: not served with this file: its {} {offered} is not the {} upload {} records of {}",
            digest.algorithm(),
            digest.value(),
            want.upload,
            want.path
        )
    })
}
