//! Indexing an upload: answered from its record when indexed before, else identified,
//! planned (its keys listed in its upload record first, invariant 4), published and finalized.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::kept::report_unlisted_as_published;
use super::packages::PackagePlan;
use super::publish::UploadRun;
use super::removal::TakenBack;
use super::sources::offer_of;
use super::upload::{fill_identity, is_pdb, Indexed, Lookup, Planned, Upload};
use super::{unclaimed, Config, Indexer, CASE_FOLDED};
use crate::formats::{Format, FormatError, IdentifyOptions};
use crate::identity::{Identity, Kind};
use crate::layouts::{self, KeySet, Layout};
use crate::manifest::{now_rfc3339, Action, Record};
#[cfg(doc)]
use crate::refs::RefStore;
use crate::refs::{busy, PriorRead, RemoveOutcome, Run, UploadRecord, UploadState, Waiting};
use crate::retention::check_channel;

/// Where an input may be indexed beside others (`symdex index --jobs`): inputs of different
/// routes touch disjoint keys and change no shared record in a way that depends on their
/// order, so indexing them at once ends as indexing them one after another; inputs of one
/// route are indexed in order. `None`: the input must be indexed alone (after everything
/// before it, before anything after it).
///
/// A route is a debug id, of the one identity of an ELF file with a build id or a thin
/// Mach-O file: every key such an identity has names its build id or UUID (the debuginfod,
/// unified, gdb/lldb and SSQP keys; its sections, sidecars and sources sit under them), which
/// the debug id is made from — the unit test below holds that to the layouts. Its other
/// shared records are an upload record of its own, its source-map wants (made later, in
/// input order: `Indexer::register_source_map_changes`) and a source upload's record when it
/// publishes that upload's source under its own build id (a compare-and-swap that adds a
/// key, in any order). Everything else — PE and PDB (joined through `_symdex/ids`), sources
/// (offers), archives, bundles, fat Mach-O files, inputs not identified — goes alone.
pub fn route_of(ids: &[Identity], options: &IdentifyOptions) -> Option<String> {
    let [id] = ids else { return None };
    let routed = match id.format {
        Format::Elf => id.build_id.is_some(),
        Format::Macho => id.uuid.is_some(),
        _ => false,
    };
    (routed && !options.as_source && id.kind != Kind::Source).then(|| id.debug_id.to_string())
}

/// What an upload's identification and channel admit: its identities, or its record.
enum Admitted {
    Identities(Vec<Identity>),
    Refused(Box<Record>),
}

/// An upload's identities, unless its channel is malformed (rejected), nothing identified
/// it (skipped, or rejected where a format found it malformed), or it is a PDB whose srcsrv
/// stream runs commands and `config` refuses those (rejected). `Err`: a read failed.
fn admitted(
    config: &Config,
    upload: &Upload<'_>,
    identified: Result<Vec<Identity>, FormatError>,
) -> io::Result<Admitted> {
    if let Some(Err(reason)) = upload.meta.channel.as_deref().map(check_channel) {
        let mut r = upload.record(Action::Rejected);
        r.reason = Some(reason);
        return Ok(Admitted::Refused(Box::new(r)));
    }
    match identified {
        Ok(ids) if config.refuse_srcsrv_commands => {
            match ids.iter().find_map(|id| Some((id, srcsrv_refusal(id)?))) {
                Some((id, reason)) => {
                    let mut r = upload.record(Action::Rejected);
                    fill_identity(&mut r, id);
                    r.reason = Some(reason.to_string());
                    Ok(Admitted::Refused(Box::new(r)))
                }
                None => Ok(Admitted::Identities(ids)),
            }
        }
        Ok(ids) => Ok(Admitted::Identities(ids)),
        Err(FormatError::Io(e)) => Err(e),
        Err(e) => {
            let action = match e {
                FormatError::Unrecognized(_) => Action::Skipped,
                _ => Action::Rejected,
            };
            let mut r = upload.record(action);
            r.reason = Some(unclaimed::skip_reason(upload, &e));
            Ok(Admitted::Refused(Box::new(r)))
        }
    }
}

/// Why a PDB whose srcsrv stream runs commands is refused where the deployment says so.
pub(super) const SRCSRV_COMMANDS_REFUSED: &str = "its srcsrv stream runs commands \
    (SRCSRVCMD), which debuggers execute to fetch sources; this store refuses such PDBs \
    (SYMDEX_REFUSE_SRCSRV_COMMANDS)";

/// Why a PDB whose srcsrv stream could not all be checked is refused there (fail closed).
pub(super) const SRCSRV_UNCHECKED_REFUSED: &str = "its srcsrv stream could not all be read \
    (see pdb_sources.unread), so whether it runs commands (SRCSRVCMD) is not known; this \
    store refuses such PDBs (SYMDEX_REFUSE_SRCSRV_COMMANDS)";

/// Why a PDZ is refused there: its streams are compressed, its srcsrv stream is not read.
pub(super) const PDZ_SRCSRV_REFUSED: &str = "a PDZ (compressed PDB): its srcsrv stream is not \
    read, so whether it runs commands (SRCSRVCMD) is not known; this store refuses such PDBs \
    (SYMDEX_REFUSE_SRCSRV_COMMANDS)";

/// Why a store refusing srcsrv commands refuses `id`, if it does: a PDB whose srcsrv stream
/// defines `SRCSRVCMD`, or may (what could hold it was not all read), or a PDZ.
fn srcsrv_refusal(id: &Identity) -> Option<&'static str> {
    if id.format == Format::Pdz {
        return Some(PDZ_SRCSRV_REFUSED);
    }
    let sources = id.pdb_sources.as_ref()?;
    if sources
        .srcsrv
        .as_ref()
        .is_some_and(|srcsrv| srcsrv.commands)
    {
        Some(SRCSRV_COMMANDS_REFUSED)
    } else if sources.srcsrv_unchecked {
        Some(SRCSRV_UNCHECKED_REFUSED)
    } else {
        None
    }
}

/// One identity's plan: its keys, or the record of an identity that gets none. (Its
/// variants differ in size: one value an identity, moved once.)
#[allow(clippy::large_enum_variant)]
pub(super) enum IdentityPlan {
    Keys(Planned),
    None(Record),
}

/// What a plan lists in an upload record, and whether the record was taken to be absent.
struct PlanRun<'a> {
    template: &'a UploadRecord,
    planned: &'a BTreeSet<String>,
    assumed_absent: bool,
}

/// What listing the plan in the upload record came to. (Its variants differ in size: one
/// value a plan, moved once.)
#[allow(clippy::large_enum_variant)]
enum RecordPlanned {
    /// Indexed before after all (its record was taken to be absent): its answer.
    Answered(Indexed),
    /// Listed: the record as found before (`None`: none) and as written.
    Listed(Option<UploadRecord>, Option<PriorRead>),
}

impl<'s> Indexer<'s> {
    /// The prefixed keys of a key set.
    pub(super) fn prefixed(&self, set: &KeySet) -> BTreeSet<String> {
        set.keys
            .iter()
            .flat_map(|(layout, keys)| {
                let fold = self.config.fold_case && CASE_FOLDED.contains(layout);
                keys.iter().map(move |k| {
                    let key = format!("{}{k}", self.config.prefix(*layout));
                    if fold {
                        key.to_ascii_lowercase()
                    } else {
                        key
                    }
                })
            })
            .collect()
    }

    /// A re-delivery of an upload whose last run was complete, under the same plan: its
    /// `unchanged` records, from the upload record alone (one read: no identification, no
    /// key's record read, nothing written but the caller's manifest). `Unindexed`: index it.
    ///
    /// Why the record is enough: an `indexed` upload record is written by finalize after
    /// every key was referenced (invariant 4), and only a removal, which first marks the
    /// record `removing`, takes those references back; a key with references stays published
    /// (invariants 2, 3). So while the record reads `indexed`, each key it lists holds these
    /// bytes. The records are stamped before that read: a removal that begins after it
    /// stamps its own `unpublished` record no earlier, so the manifest's last word on the
    /// upload stays true. An object changed behind symdex's back (deleted by hand) is found by
    /// `verify` and repaired by a full run (`Config::recheck`, `symdex index --recheck`).
    pub(super) async fn already_indexed(&self, upload: &Upload<'_>) -> io::Result<Lookup> {
        // Stamped before the read (see above).
        let time = now_rfc3339();
        let (found, prior) = self.refs.upload_read(&upload.id).await?;
        Ok(self.looked_up(upload, found, prior, &time))
    }

    /// [`Self::already_indexed`] from a read of `upload`'s record made before: `found` and
    /// `prior` as [`RefStore::upload_read`] returned them, `time` taken before that read
    /// (`RecordLookup::ReadAhead`).
    pub(super) fn looked_up(
        &self,
        upload: &Upload<'_>,
        found: Option<UploadRecord>,
        prior: Option<PriorRead>,
        time: &str,
    ) -> Lookup {
        match found.and_then(|found| self.answered_by(upload, &found, time)) {
            Some(indexed) => Lookup::Indexed(Box::new(indexed)),
            None => Lookup::Unindexed(prior),
        }
    }

    /// Digest of what besides the bytes decides an upload's keys: the indexer's version, the
    /// key configuration and the store's alias mode, the upload's identify options and source
    /// path. Compared by [`Self::already_indexed`].
    pub(super) fn plan_digest(&self, upload: &Upload<'_>) -> String {
        let upload_plan = format!("{:?}\n{:?}", upload.options, upload.source_path);
        // The last one asked is mostly asked again (a run's inputs share their options).
        let mut last = self.last_plan.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, digest)) = last.as_ref().filter(|(plan, _)| *plan == upload_plan) {
            return digest.clone();
        }
        let mut digest = self.key_plan.clone();
        digest.update(upload_plan.as_bytes());
        let digest = digest.hex();
        *last = Some((upload_plan, digest.clone()));
        digest
    }

    /// An upload identified, after [`Self::already_indexed`] said it is not indexed (its read
    /// of the upload record is reused): planned, published, its leases ended by listing its
    /// keys now — or, `at_finalize`, by the finalize (`Indexer::lists_keys_at_finalize`).
    pub(super) async fn index_looked_up(
        &self,
        upload: &Upload<'_>,
        identified: Result<Vec<Identity>, FormatError>,
        prior: Option<PriorRead>,
        at_finalize: bool,
    ) -> io::Result<Indexed> {
        let mut indexed = self.index_planned(upload, identified, prior).await;
        let mut held = self.refs.take_held(&upload.id);
        let list_now = !held.is_empty() && !at_finalize;
        if let (Ok(done), true) = (&mut indexed, list_now) {
            // The `create` leases the run left end when its upload record lists their keys
            // (refs/, invariant 1): listed now, by one swap for the whole upload, not at the
            // finalize after the manifest — other uploads of the same bytes, in the same batch
            // as this one, would wait for that. Not yet `indexed`: that waits for the manifest.
            let prior = done.upload_read.take();
            match self
                .refs
                .finalize_read(&upload.id, &done.referenced, Run::Partial, prior, &held)
                .await
            {
                // Released; the finalize swaps on the record as this wrote it.
                Ok((true, read)) => {
                    done.upload_read = read;
                    held.clear();
                }
                // Being removed: the finalize takes the references back, leases first.
                Ok((false, _)) => {}
                Err(e) => indexed = Err(e),
            }
        }
        if indexed.is_err() {
            // A failed run lists none of its keys: others need not wait for its retry. Best
            // effort: a lease left here is taken over by the retry, or after its time.
            let _ = self.refs.release_created(&held).await;
        }
        // Taken whatever the outcome: a failed upload's changes are never made (it stays
        // `indexing`, and its next run decides them again).
        let changes = self
            .pending_source_maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&upload.id)
            .unwrap_or_default();
        let mut indexed = indexed.map(|indexed| Indexed {
            source_map_changes: changes,
            held,
            ..indexed
        })?;
        // Changes made as they came, but for a debug file's claims of noted files
        // (`unclaimed.rs`): made now that its run is done.
        if !self.refs.defers_source_maps() {
            self.register_source_map_changes(&mut indexed).await?;
        }
        Ok(indexed)
    }

    /// Plans an identified upload (every key listed in its upload record before any
    /// reference, invariant 4), answers it from its record where it was indexed before, else
    /// publishes each identity.
    pub(super) async fn index_planned(
        &self,
        upload: &Upload<'_>,
        identified: Result<Vec<Identity>, FormatError>,
        prior: Option<PriorRead>,
    ) -> io::Result<Indexed> {
        // The expiry of the upload's channel, counted from now (an upload indexed before
        // keeps the time and expiry of its record: `plan` never rewrites them).
        let stamped = Upload {
            meta: self.config.retention.stamp(&upload.meta, &now_rfc3339()),
            ..upload.clone()
        };
        let upload = &stamped;
        let identities = match admitted(&self.config, upload, identified)? {
            Admitted::Identities(ids) => ids,
            Admitted::Refused(record) => return Ok(Indexed::nothing_published(vec![*record])),
        };
        // A first delivery (its upload record absent: read so, or guessed) also guesses that
        // a PDB's debug id has no record yet (`remember_pdb`).
        let assumed_absent = prior.as_ref().is_some_and(PriorRead::is_absent);
        let (plans, records) = self.plan_all(upload, identities, assumed_absent).await?;
        let planned: BTreeSet<String> = plans.iter().flat_map(|p| p.keys.clone()).collect();
        if planned.is_empty() {
            let mut indexed = Indexed::nothing_published(records);
            indexed.waiting_package = self.waiting_package(upload, &indexed.records);
            return Ok(indexed);
        }
        let template = self.template(upload, &plans);
        let run = PlanRun {
            template: &template,
            planned: &planned,
            assumed_absent,
        };
        let (found, upload_read) = match self.plan_record(upload, &run, prior).await? {
            RecordPlanned::Answered(answer) => return Ok(answer),
            RecordPlanned::Listed(found, upload_read) => (found, upload_read),
        };
        let mut indexed = self
            .publish_plans(upload, plans, found.as_ref(), &planned, records)
            .await?;
        indexed.upload_read = upload_read;
        indexed.offered_in = template.offered_in;
        Ok(indexed)
    }

    /// Every identity's plan (its keys), and the records of those that get none.
    async fn plan_all(
        &self,
        upload: &Upload<'_>,
        identities: Vec<Identity>,
        assumed_absent: bool,
    ) -> io::Result<(Vec<Planned>, Vec<Record>)> {
        let mut plans = Vec::new();
        let mut records = Vec::new();
        for mut id in identities {
            id.fill_file_names(upload.name());
            match self.plan_identity(upload, id, assumed_absent).await? {
                IdentityPlan::Keys(plan) => plans.push(plan),
                IdentityPlan::None(record) => records.push(record),
            }
        }
        Ok((plans, records))
    }

    /// The upload record a plan lists its keys in (refs/, invariant 4).
    fn template(&self, upload: &Upload<'_>, plans: &[Planned]) -> UploadRecord {
        UploadRecord {
            upload: upload.id.clone(),
            source: upload.source_name(),
            meta: upload.meta.clone(),
            etag: upload.etag.clone(),
            size: upload.size,
            time: now_rfc3339(),
            ingest_version: upload.ingest_version.clone(),
            ingest_etag: Some(upload.ingest_etag().to_string()),
            entry: upload.entry.as_ref().map(|e| e.path.clone()),
            source_paths: plans
                .iter()
                .filter_map(|p| p.id.sources.as_ref())
                .flat_map(|s| s.paths.iter().cloned())
                .collect(),
            source_path: upload.source_path.clone(),
            // Where its offer goes, if it makes one (`offer_source`), for its removal to
            // withdraw it.
            offered_in: (self.config.layouts.contains(&Layout::Debuginfod)
                && plans.iter().any(|p| p.id.kind == Kind::Source))
            .then(|| offer_of(upload).1)
            // Or the package join it takes part in (packages.rs), from which its removal
            // withdraws its entry.
            .or_else(|| {
                let ids: Vec<&Identity> = plans.iter().map(|p| &p.id).collect();
                self.package_join_of(upload, &ids)
            }),
            as_source: upload.options.as_source,
            ..UploadRecord::default()
        }
    }

    /// Lists the planned keys in the upload record (invariant 4) and returns the record as
    /// found before, or the answer of an upload found indexed after all.
    async fn plan_record(
        &self,
        upload: &Upload<'_>,
        run: &PlanRun<'_>,
        prior: Option<PriorRead>,
    ) -> io::Result<RecordPlanned> {
        let stamp = upload.file_stamp.as_ref();
        // Stamped before the plan's read, for an answer from the record (as `already_indexed`).
        let time = now_rfc3339();
        let (found, upload_read) = (self.refs)
            .plan(run.template, run.planned, prior, stamp)
            .await?;
        // The upload record was taken to be absent (read so, or guessed on a first delivery:
        // `PriorRead::absent`) and is there after all: an upload of the same bytes at the same
        // location indexed before is answered from it, as its re-delivery would be (a bundle's
        // record keeps no answer: it runs in full, for its files).
        if run.assumed_absent {
            if let Some(answer) = found
                .as_ref()
                .and_then(|found| self.answered_by(upload, found, &time))
            {
                return Ok(RecordPlanned::Answered(answer));
            }
        }
        if found.as_ref().map(|r| r.state) != Some(UploadState::Removing) {
            return Ok(RecordPlanned::Listed(found, upload_read));
        }
        // A removal of this upload is in progress, or died half-way: finished first, as it
        // would have finished — its record to the manifest (again, if it got there: the
        // manifest is at-least-once), then the keys it freed handed over (invariant 8).
        // Boxed: a removal's hand-over indexes other uploads, whose futures would otherwise
        // sit inside this one's.
        let exclusive = self.config.lease.exclusive;
        let note =
            exclusive.then_some("a removal in progress was finished before indexing it again");
        Box::pin(self.removal_to_its_end(&upload.id, note)).await?;
        if !exclusive {
            // Concurrent writers: the removal is a deletion's, which its message's
            // redelivery finishes, or this upload's own take-back (`finalize` found its
            // ingest object gone), which nothing but this message's redelivery runs again —
            // left to itself, the upload stayed `removing` for good, half its keys
            // unpublished (S3 interleavings, seed 4002). Finished here as a second delivery of
            // it would finish it (runs of one removal at once are at-least-once delivery's
            // normal case), and this message is retried: indexing the upload again now could
            // race another run of its removal still taking its references back, key by key.
            // (A sole writer holds the writer lock: no other run is, and it indexes on.)
            return Err(busy(&format!(
                "{}: a removal was in progress; finished, index again",
                upload.id
            )));
        }
        let (found, upload_read) = (self.refs)
            .plan(run.template, run.planned, None, stamp)
            .await?;
        Ok(RecordPlanned::Listed(found, upload_read))
    }

    /// Publishes each plan of an upload whose record `found` was before the plan (`None`: a
    /// fresh upload), after `records` of identities that got no keys: what the run came to.
    async fn publish_plans(
        &self,
        upload: &Upload<'_>,
        plans: Vec<Planned>,
        found: Option<&UploadRecord>,
        planned: &BTreeSet<String>,
        mut records: Vec<Record>,
    ) -> io::Result<Indexed> {
        // A Sentry source bundle's files are uploads of their own, indexed after it by the
        // caller: its re-delivery runs in full so that they are too.
        let bundle = plans.iter().any(|p| !p.id.bundle_files.is_empty());
        let fresh = found.map(|r| r.state) != Some(UploadState::Indexed);
        // The keys the upload's finished runs referenced (none for a fresh upload), and those
        // they planned without referencing them (where they may have waited: conflicts).
        let indexed_before = found.filter(|r| r.state == UploadState::Indexed);
        let listed = indexed_before.map(|r| r.keys.clone());
        let unreferenced = indexed_before
            .map(UploadRecord::unreferenced)
            .unwrap_or_default();
        // An earlier attempt of this upload began and did not finish.
        let earlier = found.filter(|r| r.state == UploadState::Indexing);
        let retry = earlier.is_some();
        // The keys it may have referenced beyond this plan: a PDB's other copies' names,
        // found live then (`remember_pdb`).
        let earlier_extras: BTreeSet<String> = earlier
            .map(|r| r.all_keys().difference(planned).cloned().collect())
            .unwrap_or_default();
        let mut referenced = BTreeSet::new();
        let mut run = UploadRun {
            fresh,
            retry,
            earlier_extras: &earlier_extras,
            holding: None,
        };
        for plan in plans {
            let published = self.publish_identity(upload, plan, &mut run).await?;
            referenced.extend(published.referenced);
            records.push(published.record);
            records.extend(published.others);
        }
        for record in records.iter_mut().filter(|r| r.upload == upload.id) {
            if let Some(listed) = &listed {
                report_unlisted_as_published(record, listed);
            }
            // An upload indexed before keeps its channel and expiry (a promotion may have
            // changed them since): its records say so, not what this delivery would have
            // stamped.
            if let Some(found) = found {
                record.meta.channel.clone_from(&found.meta.channel);
                record.meta.expires.clone_from(&found.meta.expires);
            }
        }
        let waits_ended = unreferenced
            .union(&self.config.handed)
            .filter(|key| referenced.contains(*key))
            .cloned()
            .collect();
        let planned = planned.union(&referenced).cloned().collect();
        let indexed_as = (!bundle)
            .then(|| self.indexed_as(upload, &records, &planned, &referenced))
            .flatten();
        Ok(Indexed {
            records,
            upload: Some(upload.id.clone()),
            referenced,
            planned,
            indexed_as,
            upload_read: None,
            source_map_changes: Vec::new(),
            held: Vec::new(),
            waits_ended,
            offered_in: None,
            waiting_package: None,
        })
    }

    /// Marks an indexed upload done, after its records reached the manifest. `alive`: the
    /// ingest object still exists (a removal that came first found nothing to remove, so the
    /// indexer takes its own references back). Returns the records of such an undo, already
    /// written to the manifest (the caller only reports them).
    pub async fn finalize(&self, indexed: &Indexed, alive: bool) -> io::Result<Vec<Record>> {
        if let Some(waiting) = indexed.waiting_package.as_ref().filter(|_| alive) {
            self.recheck_waiting_package(waiting).await?;
        }
        let Some(upload) = &indexed.upload else {
            return Ok(Vec::new());
        };
        let reason = if !alive {
            "the ingest object was deleted while it was indexed"
        } else {
            let finalized = self
                .refs
                .finalize(
                    upload,
                    &indexed.referenced,
                    Run::Complete(indexed.indexed_as.as_ref()),
                    indexed.upload_read.clone(),
                    &indexed.held,
                )
                .await;
            match finalized {
                Ok(true) => {
                    // Listed now: the waits for these keys are over (a marker a crash here
                    // leaves goes when the key's holder, this upload, is removed).
                    self.stop_waiting(upload, &indexed.waits_ended).await?;
                    return Ok(Vec::new());
                }
                Ok(false) => "removed while it was indexed",
                Err(e) => {
                    // Leases this write was to end (`lists_keys_at_finalize`): others need
                    // not wait for the retry. Best effort, as after a failed run.
                    let _ = self.refs.release_created(&indexed.held).await;
                    return Err(e);
                }
            }
        };
        // Whatever became of the upload record (a removal may have finished and deleted it
        // while we were publishing), this attempt's references go (refs/, invariant 4),
        // its `create` leases first (its finalize will not list their keys).
        self.refs.release_created(&indexed.held).await?;
        let record = self.refs.begin_removal(upload).await?;
        let TakenBack {
            removed,
            not_referenced,
            ..
        } = self
            .take_back_references(upload, &indexed.planned, record.as_ref())
            .await?;
        let undone: Vec<Record> = indexed
            .records
            .first()
            .map(|first| Record {
                time: now_rfc3339(),
                action: Some(Action::Unpublished),
                reason: Some(format!("{reason}; {} keys removed", removed.len())),
                upload: upload.to_string(),
                published: Vec::new(),
                unchanged: Vec::new(),
                conflicts: Vec::new(),
                removed: removed.clone(),
                ..first.clone()
            })
            .into_iter()
            .collect();
        // As a removal does (`end_removal`): the manifest says the keys went before the
        // hand-over's records say who published them again, and before the record that would
        // report them on a retry goes.
        self.write_manifest(&undone).await?;
        let offered_in = indexed.offered_in.as_deref();
        self.finish_removal(
            upload,
            &removed,
            record.as_ref(),
            offered_in,
            &not_referenced,
        )
        .await?;
        Ok(undone)
    }

    /// Re-indexes every live upload waiting for one of `freed`, keys whose objects a removal
    /// of `remover` deleted (refs/, invariant 8); forgets the waits of uploads gone or
    /// going. Called before the remover's record goes: a removal that dies here hands over on
    /// its retry, which reports the same keys freed.
    pub(super) async fn hand_over(&self, remover: &str, freed: &[String]) -> io::Result<()> {
        let mut waiters: BTreeMap<String, Vec<Waiting>> = BTreeMap::new();
        for key in freed {
            for waiting in self.refs.waiting(key).await? {
                waiters
                    .entry(waiting.upload.clone())
                    .or_default()
                    .push(waiting);
            }
        }
        for (upload, waits) in waiters {
            let live = if upload == remover {
                None
            } else {
                let record = self.refs.upload(&upload).await?;
                record.filter(|r| r.state != UploadState::Removing)
            };
            match (live, self.hand_over) {
                // Its marker stays: the re-index may meet other content there again (it ends
                // the waits for the keys it references).
                (Some(record), Some(hand_over)) => {
                    let handed = waits.iter().map(|w| w.key.clone()).collect();
                    hand_over.reindex(&record, &handed).await?
                }
                // Left waiting: `verify` reports it.
                (Some(_), None) => {}
                (None, _) => {
                    for waiting in &waits {
                        self.refs.stop_waiting(waiting).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Takes back an upload's references to `keys` and to every key its `removing` record
    /// lists, noting each key unpublished in the record.
    pub(super) async fn take_back_references(
        &self,
        upload_id: &str,
        keys: &BTreeSet<String>,
        record: Option<&UploadRecord>,
    ) -> io::Result<TakenBack> {
        let mut all = keys.clone();
        if let Some(record) = &record {
            all.extend(record.all_keys());
        }
        // Keys an earlier, interrupted attempt already unpublished are reported again.
        let mut removed: BTreeSet<String> = record.map(|r| r.removed.clone()).unwrap_or_default();
        let (mut kept, mut not_referenced) = (0, BTreeSet::new());
        for key in all {
            // Noted in the upload record (when it has one) as the key goes, so that a retry
            // reports it too.
            let outcome = if record.is_some() {
                self.refs.remove_noted(&key, upload_id).await?
            } else {
                self.refs.remove(&key, upload_id).await?
            };
            match outcome {
                RemoveOutcome::Removed => {
                    removed.insert(key);
                }
                RemoveOutcome::Kept => kept += 1,
                RemoveOutcome::NotReferenced => {
                    not_referenced.insert(key);
                }
            }
        }
        Ok(TakenBack {
            removed: removed.into_iter().collect(),
            kept,
            not_referenced,
        })
    }

    /// The keys of one identity, or its record when it gets none (skipped or rejected).
    pub(super) async fn plan_identity(
        &self,
        upload: &Upload<'_>,
        id: Identity,
        guess_id_absent: bool,
    ) -> io::Result<IdentityPlan> {
        let mut record = upload.record(Action::Indexed);
        fill_identity(&mut record, &id);
        let layouts = &self.config.layouts;
        let set = layouts::keys_for(&id, upload.name(), layouts);
        let mut keys = self.prefixed(&set);
        // A PDB is also reachable under every name PEs' CodeView records gave it.
        let mut id_read = None;
        if is_pdb(&id) && !guess_id_absent {
            let (record, prior) = self.refs.id_read(&id.debug_id.to_string()).await?;
            for alias in &record.names {
                keys.extend(self.prefixed(&layouts::keys_for(&id, alias, layouts)));
            }
            id_read = Some((record, prior));
        }
        // A key whose reference record would outgrow S3's keys is refused here.
        let mut set = set;
        keys.retain(|key| {
            let fits = crate::refs::record_fits(key);
            if !fits {
                set.rejected.push(format!(
                    "key of {} bytes is too long for its record",
                    key.len()
                ));
            }
            fits
        });
        // A DWARF package's keys are its binaries' (packages.rs).
        let mut refused = None;
        if let Some(package) = &id.dwarf_package {
            match self.plan_package(upload, package).await? {
                PackagePlan::Keys(paired) => keys.extend(paired),
                PackagePlan::Refused(action, reason) => refused = Some((action, reason)),
            }
        }
        if keys.is_empty() {
            let (action, reason) = if let Some(refused) = refused {
                refused
            } else if set.rejected.is_empty() {
                (
                    Action::Skipped,
                    "no identifier to key it by (no build id, UUID or debug id)".to_string(),
                )
            } else {
                (Action::Rejected, set.rejected.join("; "))
            };
            record.action = Some(action);
            record.reason = Some(reason);
            return Ok(IdentityPlan::None(record));
        }
        if !set.rejected.is_empty() {
            record.reason = Some(set.rejected.join("; "));
        }
        for sidecar in &set.sidecars {
            keys.insert(format!(
                "{}{}",
                self.config.prefix(sidecar.layout),
                sidecar.key
            ));
        }
        Ok(IdentityPlan::Keys(Planned {
            id,
            record,
            keys,
            set,
            id_read,
        }))
    }
}
