//! Keys two uploads join on: a PE's alias of its PDB under the name the PE asks for, the
//! debug-id records behind it, and keys held on another upload's behalf (refs, invariant 5).

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::upload::{fill_identity, upload_record_of, Outcome, Upload};
use super::Indexer;
use crate::identity::Identity;
use crate::layouts;
use crate::manifest::Record;
use crate::refs::{Content, IdRecord, KeyOutcome, KeyRecord, PriorRead, Run, UploadRecord};
use crate::storage::CopySource;

impl<'s> Indexer<'s> {
    /// Records where this PDB's content lives (for PEs arriving later), and publishes it under
    /// the names PEs gave it since the plan was made. Returns the extra keys it references.
    /// `id_read`: the debug id's record as the plan read it (see
    /// [`Self::update_id_knowing_liveness`]), `None` where not read (guessed absent).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn remember_pdb(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        planned: &BTreeSet<String>,
        earlier_extras: &BTreeSet<String>,
        outcome: &mut Outcome,
        fresh: bool,
        id_read: Option<(IdRecord, PriorRead)>,
    ) -> io::Result<BTreeSet<String>> {
        if id.debug_id.is_nil() {
            return Ok(BTreeSet::new());
        }
        let Some(first) = outcome
            .published
            .first()
            .or(outcome.unchanged.first())
            .cloned()
        else {
            return Ok(BTreeSet::new());
        };
        let copy = PdbCopy {
            id,
            debug_id: id.debug_id.to_string(),
            first,
            planned,
        };
        let Some(names) = self.record_pdb_copy(upload, &copy, id_read).await? else {
            return Ok(BTreeSet::new());
        };
        // A retry publishes the names its earlier attempt found live, as that attempt
        // planned them: it may have referenced some of their keys and not others (busy, or
        // dead) before that copy went, and that copy's name is no longer read. Without them,
        // half of that name stayed (the scenario "a PDB's renamed copy is taken back while
        // the PDB and its PE arrive", replayed by `schedules_that_once_broke_an_invariant`):
        // as the attempt found the copy, all of it stays, as a serial run in which the copy
        // went after this one arrived leaves it. (`earlier_extras` holds no planned key.)
        let more = earlier_extras.clone();
        self.publish_under_names(upload, &copy, names, more, outcome, fresh)
            .await
    }

    /// Records this PDB copy in its debug id's record, where no live copy is recorded yet.
    /// Returns the names its keys are published under too (the names PEs gave it, and that of
    /// another live copy kept); `None` where the record was created with this copy (there was
    /// none: no name a PE gave, no copy kept).
    async fn record_pdb_copy(
        &self,
        upload: &Upload<'_>,
        copy: &PdbCopy<'_>,
        id_read: Option<(IdRecord, PriorRead)>,
    ) -> io::Result<Option<BTreeSet<String>>> {
        let (debug_id, first) = (&copy.debug_id, &copy.first);
        // Guessed absent: created here, there was no record — no name a PE gave, no copy
        // kept; a PE arriving later finds this copy (as after the swap below).
        if id_read.is_none() {
            let created = IdRecord {
                pdb_key: Some(first.clone()),
                pdb_name: Some(upload.name().to_string()),
                names: BTreeSet::new(),
            };
            if self.refs.create_id(debug_id, &created).await? {
                return Ok(None);
            }
        }
        // Keep a live copy; replace one that was unpublished. The same swap tells us every
        // name recorded so far: a PE that added its name after this swap sees `pdb_key` and
        // publishes the alias itself, one that added it before is seen here (no name lost).
        // (A guess that failed: `id_read` is still `None`, the record is read as it is now.)
        let (record, _) = self
            .update_id_knowing_liveness(debug_id, id_read, |r, live| {
                if live {
                    false
                } else {
                    r.pdb_key = Some(first.clone());
                    r.pdb_name = Some(upload.name().to_string());
                    true
                }
            })
            .await?;
        // Another live copy kept under another name: this copy serves that name too. A PE
        // naming it finds the keys already there (nothing to alias: `alias_pdbs`), held by that
        // copy alone, and they would go with that copy's removal while this one lives — as
        // they do not where the PE arrived first (its name is then among `names`). So the
        // order of arrival decides nothing (invariant 5). Only a copy found live: a name whose
        // upload was deleted is not brought back.
        Ok(Some(
            record
                .names
                .iter()
                .chain(&record.pdb_name)
                .cloned()
                .collect(),
        ))
    }

    /// Publishes this PDB copy's bytes under the keys of `names` (and `more` keys) it did not
    /// plan, until the debug id's record names no other. Returns the keys it now references.
    ///
    /// Publishing under another copy's name joins the holders of its key, after the record
    /// was read. A PE recording its name reads the key's holders after its swap
    /// (`alias_pdbs`); so this copy reads the record again after joining: of a PE's
    /// write and this join, whichever came second is seen by the other's later read —
    /// the PE aliases its name for this copy, or this copy publishes under it. Read once
    /// before joining only, a name recorded in between was lost when the kept copy was
    /// removed (found by the scenario "a PDB arrives under another name while the first
    /// is deleted and their PE arrives" over more schedules). Read again, only the names
    /// PEs gave count: a copy recorded since was not found live by this one's swap.
    async fn publish_under_names(
        &self,
        upload: &Upload<'_>,
        copy: &PdbCopy<'_>,
        mut names: BTreeSet<String>,
        mut more: BTreeSet<String>,
        outcome: &mut Outcome,
        fresh: bool,
    ) -> io::Result<BTreeSet<String>> {
        let mut extra_keys = BTreeSet::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        loop {
            for name in &names {
                if seen.insert(name.clone()) {
                    let layouts = &self.config.layouts;
                    let keys = self.prefixed(&layouts::keys_for(copy.id, name, layouts));
                    let new = keys
                        .difference(copy.planned)
                        .filter(|k| !extra_keys.contains(*k));
                    more.extend(new.cloned());
                }
            }
            if more.is_empty() {
                return Ok(extra_keys);
            }
            if !self.refs.plan_more(&upload.id, &more).await? {
                return Ok(extra_keys);
            }
            let published = self
                .publish_own(upload, &more, fresh, outcome, Some(&copy.first))
                .await?;
            extra_keys.extend(published.referenced);
            more.clear();
            names = self.refs.id_read(&copy.debug_id).await?.0.names;
        }
    }

    /// For each PDB a PE references: remember the CodeView name, and if that PDB is already
    /// published, make it reachable under the exact name the PE uses. The alias copies are
    /// held by the PDB's uploads, whose bytes they serve (refs/, invariant 5). `retry`: an
    /// earlier attempt of this PE began and did not finish. `guess`: the debug id's record
    /// is guessed absent (a first attempt: the PE first of its PE and PDB, or alone).
    pub(super) async fn alias_pdbs(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        retry: bool,
        guess: bool,
    ) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        for (pdb, name) in layouts::companions(id, upload.name()) {
            if name.is_empty() || layouts::Name::new(&name).is_err() {
                continue;
            }
            // The debug-id record's swap and the alias copies it decides are one exchange
            // with the PDB's own (invariant 5): the copies only for the copy it found live.
            let Some(live) = self.record_pe_name(&pdb, &name, guess).await? else {
                continue;
            };
            let held = self.alias_for_holders(&pdb, &name, &live, retry).await?;
            records.extend(holder_records(upload, &pdb, &name, held));
        }
        Ok(records)
    }

    /// Records the name a PE gives a PDB in its debug id's record (forgetting a PDB copy that
    /// was unpublished since: it is replaced when the PDB is indexed again). Returns the copy
    /// recorded, where it is live and this PE is to alias it under `name`.
    async fn record_pe_name(
        &self,
        pdb: &Identity,
        name: &str,
        guess: bool,
    ) -> io::Result<Option<LivePdb>> {
        let debug_id = pdb.debug_id.to_string();
        // Created with the name: there was no record, so no PDB copy to alias; a PDB
        // arriving later publishes under the name. Else the record is read as usual.
        if guess {
            let created = IdRecord {
                names: BTreeSet::from([name.to_string()]),
                ..IdRecord::default()
            };
            if self.refs.create_id(&debug_id, &created).await? {
                return Ok(None);
            }
        }
        let (read, prior) = self.refs.id_read(&debug_id).await?;
        // The name the recorded copy was uploaded under: its keys are the ones this PE
        // would alias, published by the PDB itself. The name is recorded, on condition
        // that the record still says so when swapped (else the whole way below, from a
        // read of its own: a copy under another name recorded meanwhile may not have
        // seen this name).
        let own_name = |r: &IdRecord| r.pdb_key.is_some() && r.pdb_name.as_deref() == Some(name);
        let earlier = if own_name(&read) {
            let mut other = false;
            self.refs
                .update_id_on(&debug_id, prior, |r| {
                    other = !own_name(r);
                    !other && r.names.insert(name.to_string())
                })
                .await?;
            if !other {
                return Ok(None);
            }
            None
        } else {
            Some((read, prior))
        };
        // Record the name; forget a PDB copy that was unpublished since (it is replaced
        // when the PDB is indexed again).
        let (record, live) = self
            .update_id_knowing_liveness(&debug_id, earlier, |r, live| {
                let mut changed = r.names.insert(name.to_string());
                if r.pdb_key.is_some() && !live {
                    r.pdb_key = None;
                    r.pdb_name = None;
                    changed = true;
                }
                changed
            })
            .await?;
        // Live as the swap was decided: `pdb_key` is the key that was asked. Its holders
        // are read again now, after the name was recorded: a copy under another name
        // that joined them since read the record before this swap (`remember_pdb`).
        let (Some(key), Some(_)) = (record.pdb_key, live) else {
            return Ok(None);
        };
        let Some(record) = self.refs.is_live(&key).await? else {
            return Ok(None);
        };
        Ok(Some(LivePdb { key, record }))
    }

    /// Publishes the keys `name` gives `live`'s PDB as copies of its key, held by the PDB's
    /// uploads. Returns each holder's upload record with what its keys came to (the keys
    /// published now, and those it held already), in the holders' order.
    async fn alias_for_holders(
        &self,
        pdb: &Identity,
        name: &str,
        live: &LivePdb,
        retry: bool,
    ) -> io::Result<Vec<(UploadRecord, Outcome)>> {
        let content = Content {
            etag: &live.record.etag,
            size: live.record.size,
            source: CopySource::Key(&live.key),
        };
        // The copies are the PDB uploads' keys (invariant 5), so they are recorded as
        // theirs, whichever of PE and PDB came first. An alias holding other content is
        // not this PE's conflict: the PE itself published fine.
        // Per holder: the keys published now, and those it held already.
        let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
        // Their upload records, read once: for the keys, and for the records reported.
        let mut holders: BTreeMap<&str, Option<UploadRecord>> = BTreeMap::new();
        for holder in &live.record.refs {
            holders.insert(holder, self.refs.upload(holder).await?);
        }
        let held: BTreeMap<&str, &BTreeSet<String>> = holders
            .iter()
            .filter_map(|(holder, record)| Some((*holder, &record.as_ref()?.keys)))
            .collect();
        for key in self.prefixed(&layouts::keys_for(pdb, name, &self.config.layouts)) {
            if key == live.key {
                continue;
            }
            for holder in &live.record.refs {
                let held = held.get(holder.as_str()).copied();
                let outcome = self
                    .alias_outcome(holder, &key, held, &content, retry)
                    .await?;
                if let Some(outcome @ (KeyOutcome::Published | KeyOutcome::Unchanged)) = outcome {
                    outcomes
                        .entry(holder.clone())
                        .or_default()
                        .add(&key, outcome);
                }
            }
        }
        Ok(outcomes
            .into_iter()
            .filter_map(|(holder, outcome)| Some((holders.remove(holder.as_str())??, outcome)))
            .collect())
    }

    /// What holding the alias `key` for `holder` comes to. A key the holder already
    /// references (finalized, among its `held` keys) is done, and a re-index of the PE finds
    /// nothing to do. It is reported again: unchanged, or, by a retried PE, published when its
    /// bytes were first written for that holder (the earlier attempt may have written it and
    /// failed before its records were: the manifest is at-least-once, as for an upload's own
    /// keys). Any other key is held for it now.
    async fn alias_outcome(
        &self,
        holder: &str,
        key: &str,
        held: Option<&BTreeSet<String>>,
        content: &Content<'_>,
        retry: bool,
    ) -> io::Result<Option<KeyOutcome>> {
        if !held.is_some_and(|keys| keys.contains(key)) {
            return self.hold_for(holder, key, content, None).await;
        }
        let first_written_for_holder =
            retry && self.refs.key(key).await?.is_some_and(|r| r.by == holder);
        Ok(Some(if first_written_for_holder {
            KeyOutcome::Published
        } else {
            KeyOutcome::Unchanged
        }))
    }
    /// Updates a debug id's record with `f`, told whether its current `pdb_key` is live. The
    /// liveness is asked outside the swap (a swap does no I/O), and asked again when the key
    /// changed in between. Returns the record and, where its `pdb_key` is live, that key's
    /// record (so the caller does not ask again). The swap is made on the version read first.
    ///
    /// `earlier`: the record as read before the caller did what this update follows (a PDB's
    /// plan read it before the PDB was published), saving the read where `f` changes it: the
    /// swap on that read's version fails if anything changed since. Leaving the record as it
    /// is cannot be decided on it — a `pdb_key` live then may be unpublished by now, and the
    /// names recorded since unseen — so a keep reads the record again.
    pub(super) async fn update_id_knowing_liveness(
        &self,
        debug_id: &str,
        mut earlier: Option<(IdRecord, PriorRead)>,
        f: impl Fn(&mut IdRecord, bool) -> bool,
    ) -> io::Result<(IdRecord, Option<KeyRecord>)> {
        let mut known: Option<(String, Option<KeyRecord>)> = None;
        loop {
            let from_earlier = earlier.is_some();
            let (read, prior) = match earlier.take() {
                Some(read) => read,
                None => self.refs.id_read(debug_id).await?,
            };
            let current = read.pdb_key.clone();
            let live = match &current {
                None => None,
                Some(key) => match &known {
                    Some((k, live)) if k == key => live.clone(),
                    _ => {
                        let live = self.refs.is_live(key).await?;
                        known = Some((key.clone(), live.clone()));
                        live
                    }
                },
            };
            if from_earlier && !f(&mut read.clone(), live.is_some()) {
                continue;
            }
            let mut stale = false;
            let record = self
                .refs
                .update_id_on(debug_id, prior, |r| {
                    stale = r.pdb_key != current;
                    !stale && f(r, live.is_some())
                })
                .await?;
            if !stale {
                return Ok((record, live));
            }
        }
    }

    /// Publishes `key` on behalf of another upload (invariants 4 and 5): listed in its record
    /// first, referenced, then confirmed, or taken back if that upload is being removed.
    /// `removal`: the upload whose removal hands the key on ([`crate::refs::Lease::acting`]).
    pub(super) async fn hold_for(
        &self,
        holder: &str,
        key: &str,
        content: &Content<'_>,
        removal: Option<&str>,
    ) -> io::Result<Option<KeyOutcome>> {
        let keys: BTreeSet<String> = [key.to_string()].into();
        if !self.refs.plan_more(holder, &keys).await? {
            return Ok(None);
        }
        let published = match self.refs.publish_for(key, holder, removal, content).await {
            Ok(published) => published,
            // The source copy was unpublished meanwhile: so is its upload, no alias needed.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let result = published.outcome;
        if result == KeyOutcome::Conflict {
            return Ok(Some(result));
        }
        let held = self.refs.take_held(holder);
        if let (CopySource::Key(source), KeyOutcome::Published) = (content.source, result) {
            // Copied from the holder's copy: an overwrite may have replaced its bytes before
            // the copy read them (an overwrite takes the holder's reference off the key
            // before it writes, refs/ invariant 8), leaving the overwriter's bytes here
            // under the holder's reference. Seen now by the source no longer naming the
            // holder with these bytes: this key is taken back, as where the source was
            // unpublished; the holder gets it back with its copy (its hand-back re-index).
            let still = self.refs.key(source).await?;
            let holds = |r: &KeyRecord| r.refs.contains(holder) && r.etag == content.etag;
            if !still.as_ref().is_some_and(holds) {
                self.refs.release_created(&held).await?;
                self.refs.remove(key, holder).await?;
                return Ok(None);
            }
        }
        if !self
            .refs
            .finalize(holder, &keys, Run::Partial, None, &held)
            .await?
        {
            self.refs.release_created(&held).await?;
            self.refs.remove(key, holder).await?;
            return Ok(None);
        }
        // Listed: released (refs/, invariant 1).
        // An alias found in place is held with its target (invariant 6), as an upload's own
        // keys are (`note_published`): it may redirect to a key of another upload of the same
        // bytes, which that upload's removal would delete under it. (A PE aliasing a PDB for
        // the copy it recorded found the copy under another name's alias there, and kept
        // the alias when that copy was taken back: S3 redirect aliases, scenario "a PDB's
        // renamed copy is taken back while the PDB and its PE arrive", seed 2000.)
        let source = match content.source {
            CopySource::Key(source) => Some(source),
            _ => None,
        };
        if let Some(target) = published.alias_of.filter(|t| Some(t.as_str()) != source) {
            // Not held: the holder is being removed (or its source copy is gone with it);
            // its removal takes the alias back too.
            let target = Box::pin(self.hold_for(holder, &target, content, removal)).await?;
            if target.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(result))
    }
}

/// A PDB copy being published: its identity, debug id, the first key holding its bytes (the
/// others are copied from it), and the keys its plan named.
struct PdbCopy<'a> {
    id: &'a Identity,
    debug_id: String,
    first: String,
    planned: &'a BTreeSet<String>,
}

/// The live PDB copy a debug id's record names: its key, and that key's record.
struct LivePdb {
    key: String,
    record: KeyRecord,
}

/// The records of the PDB's uploads that hold keys under the `name` a PE gives the PDB,
/// each with what its keys came to.
fn holder_records(
    upload: &Upload<'_>,
    pdb: &Identity,
    name: &str,
    held: Vec<(UploadRecord, Outcome)>,
) -> Vec<Record> {
    held.into_iter()
        .map(|(holder_upload, outcome)| {
            let mut record = upload_record_of(&holder_upload, outcome.action());
            fill_identity(&mut record, pdb);
            record.published = outcome.published;
            record.unchanged = outcome.unchanged;
            record.reason = Some(format!(
                "published under {name:?}, the name {} gives this PDB",
                upload.id
            ));
            record
        })
        .collect()
}
