//! Publishing an identity's keys: its own bytes, its sidecars, generated files and sections.

use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::pin::Pin;

use futures_util::StreamExt;

use super::packages::LLDB_ONE_URL;
use super::products::conflict_reason;
use super::sources::mark_shared_build_id;
use super::upload::{is_pdb, Outcome, Planned, Upload};
use super::Indexer;
use crate::formats::Format;
use crate::identity::{Identity, Kind, SectionRef};
use crate::layouts::{self, KeySet, Layout};
use crate::manifest::{Action, Record};
use crate::refs::{busy, Content, InTurn, KeyOutcome, OnDifferent, Publication, Publisher};
use crate::storage::CopySource;

/// Keys of one upload published at once once one of them holds its bytes
/// ([`Indexer::publish_own`]).
pub(super) const KEY_PUBLISHES: usize = 8;
/// Times a key is published again when it was freed while its conflict was being recorded
/// ([`Indexer::publish_key`]): each time somebody else took it meanwhile.
pub(super) const CONFLICT_RETRIES: usize = 8;

/// What the identities of one upload share while they are published one after another
/// ([`Indexer::publish_identity`]): owned by the caller for the upload's run.
pub(super) struct UploadRun<'r> {
    /// The upload was not indexed before (nothing of it to find in place).
    pub(super) fresh: bool,
    /// An earlier attempt of this upload began and did not finish.
    pub(super) retry: bool,
    /// The keys that attempt may have referenced beyond this plan (`remember_pdb`).
    pub(super) earlier_extras: &'r BTreeSet<String>,
    /// A key holding the upload's bytes, shared by its identities (one stored copy): the
    /// first one an identity's own keys came to hold.
    pub(super) holding: Option<String>,
}

/// What publishing one identity came to ([`Indexer::publish_identity`]).
pub(super) struct PublishedIdentity {
    /// Its manifest record.
    pub(super) record: Record,
    /// The keys this upload now references.
    pub(super) referenced: BTreeSet<String>,
    /// Records of other uploads the joins touched (a PE's PDBs, a source's holders).
    pub(super) others: Vec<Record>,
}

/// What publishing an upload's own bytes came to ([`Indexer::publish_own`]).
pub(super) struct OwnPublished {
    /// The keys the upload now references (all but the conflicts).
    pub(super) referenced: BTreeSet<String>,
    /// A key holding its bytes: the one it was given, else the first that came to hold them.
    pub(super) holding: Option<String>,
}

/// An identity's keys told apart: its own bytes', its sidecars' and its sections'.
struct SplitKeys<'p> {
    own: BTreeSet<String>,
    derived: DerivedKeys<'p>,
}

/// Keys generated from an upload: sidecars (key, content, the key of the file each
/// describes) and sections (ranges of the upload).
struct DerivedKeys<'p> {
    sidecars: BTreeSet<(String, &'p [u8], String)>,
    sections: Vec<(String, &'p SectionRef)>,
}

/// One derived key's outcome; `recorded`: noted in the record like the upload's own keys.
struct DerivedOutcome {
    key: String,
    outcome: KeyOutcome,
    recorded: bool,
}

/// Publishing some derived keys: their outcomes (`None`: not published).
type DerivedPublish<'a> =
    Pin<Box<dyn Future<Output = io::Result<Vec<(String, Option<KeyOutcome>, bool)>>> + Send + 'a>>;

impl<'s> Indexer<'s> {
    /// Publishes one planned identity: its own keys, then its sidecars and sections, its
    /// joins (PDB names, debug-id records), its source offers or wants, and its overwrites —
    /// each step reads what the steps before it referenced, in the order every upload of
    /// these bytes takes the keys' leases.
    pub(super) async fn publish_identity(
        &self,
        upload: &Upload<'_>,
        plan: Planned,
        run: &mut UploadRun<'_>,
    ) -> io::Result<PublishedIdentity> {
        let Planned {
            id,
            mut record,
            keys,
            set,
            id_read,
        } = plan;
        let SplitKeys { own: keys, derived } = self.split_keys(&id, &set, keys);
        let mut outcome = Outcome::default();
        // What this upload references: keys it published or found holding its content.
        let own = self
            .publish_own(
                upload,
                &keys,
                run.fresh,
                &mut outcome,
                run.holding.as_deref(),
            )
            .await?;
        let encoded = self.fresh_holding(&keys, &outcome, own.holding.as_deref());
        outcome
            .notes
            .extend(self.encode_published(upload, &encoded).await);
        let mut referenced = own.referenced;
        if run.holding.is_none() {
            run.holding = own.holding;
        }
        let derived = self
            .publish_derived(upload, &id, derived, &outcome.conflicts, run.fresh)
            .await?;
        // A key is referenced where the upload's reference was added (not a conflict): the
        // upload record lists no more than the key records name it in. Sections are recorded
        // like the upload's own keys (they are keys clients request); sidecars are not.
        for DerivedOutcome {
            key,
            outcome: result,
            recorded,
        } in derived
        {
            if recorded {
                outcome.add(&key, result);
            }
            if result != KeyOutcome::Conflict {
                referenced.insert(key);
            }
        }
        if is_pdb(&id) {
            referenced.extend(
                self.remember_pdb(
                    upload,
                    &id,
                    &keys,
                    run.earlier_extras,
                    &mut outcome,
                    run.fresh,
                    id_read,
                )
                .await?,
            );
        }
        let mut others = Vec::new();
        if id.format == Format::Pe {
            // A first attempt guesses the PE is the first of its PE and PDB to arrive.
            others = self
                .alias_pdbs(upload, &id, run.retry, run.fresh && !run.retry)
                .await?;
        }
        // Sources for debuggers (sourcemap.rs): a source file offers itself, a debug file
        // asks for the paths its DWARF names, a PDB for its documents.
        if id.kind == Kind::Source && self.config.source_joins {
            let holding = keys.iter().find(|k| referenced.contains(*k)).cloned();
            if let Some(holding) = holding {
                referenced.extend(
                    self.offer_source(upload, &id, &holding, run.fresh, &mut outcome)
                        .await?,
                );
            }
        }
        let (holders, id_shared_with) = self
            .ask_sources(upload, &id, run.fresh, &mut record, &mut outcome)
            .await?;
        others.extend(holders);
        // Split DWARF (packages.rs): a file with skeleton units offers them to its packages;
        // a package or a debug file meeting the other at `debuginfo` says why LLDB cannot
        // have both.
        self.offer_skeletons(upload, &id).await?;
        let split = id
            .split_dwarf
            .as_ref()
            .is_some_and(|s| !s.dwo_ids.is_empty());
        let debuginfo_conflict = outcome.conflicts.iter().any(|k| k.ends_with("/debuginfo"));
        if debuginfo_conflict && (id.dwarf_package.is_some() || (split && id.kind == Kind::Debug)) {
            record
                .reason
                .get_or_insert_with(|| LLDB_ONE_URL.to_string());
        }
        let record = self
            .conclude_record(upload, record, outcome, id_shared_with)
            .await?;
        Ok(PublishedIdentity {
            record,
            referenced,
            others,
        })
    }

    /// The keys among `keys` this upload has just published that hold its bytes themselves:
    /// all of them, but only `holding` where later keys are aliases of it (S3 redirects hold
    /// no bytes: a client following one meets the copy of the key it redirects to).
    fn fresh_holding(
        &self,
        keys: &BTreeSet<String>,
        outcome: &Outcome,
        holding: Option<&str>,
    ) -> Vec<String> {
        let aliases = self.refs.traits().key_copies_are_aliases && !self.config.overwrite;
        keys.iter()
            .filter(|key| outcome.published.contains(*key))
            .filter(|key| !aliases || holding == Some(key.as_str()))
            .cloned()
            .collect()
    }

    /// Tells an identity's keys apart: its sidecars' and sections' are generated from the
    /// upload (each of its own content), the rest hold the upload's own bytes.
    fn split_keys<'p>(
        &self,
        id: &'p Identity,
        set: &'p KeySet,
        mut own: BTreeSet<String>,
    ) -> SplitKeys<'p> {
        let mut sidecars = BTreeSet::new();
        for sidecar in &set.sidecars {
            let prefix = self.config.prefix(sidecar.layout);
            let key = format!("{prefix}{}", sidecar.key);
            own.remove(&key);
            let describes = format!("{prefix}{}", sidecar.describes);
            sidecars.insert((key, sidecar.content.as_bytes(), describes));
        }
        // Sections are ranges of the upload, published like sidecars.
        let mut sections = Vec::new();
        if let Some(build_id) = id.build_id.as_deref() {
            let prefix = self.config.prefix(Layout::Debuginfod);
            for section in &id.sections {
                let key = format!(
                    "{prefix}{}",
                    layouts::debuginfod::section_key(build_id, &section.name)
                );
                if own.remove(&key) {
                    sections.push((key, section));
                }
            }
        }
        SplitKeys {
            own,
            derived: DerivedKeys { sidecars, sections },
        }
    }

    /// Publishes an identity's sidecars and sections, given the conflicts among its own keys.
    /// Generated from the upload (bytes in memory, or ranges of it), each needing no other
    /// key: published at once, taking their leases in turn after the upload's own keys (the
    /// order every upload of these bytes takes them in). Returns their outcomes: first the
    /// sidecars left out as conflicts, then those published, in turn (a section not
    /// published is left out).
    async fn publish_derived(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        derived: DerivedKeys<'_>,
        conflicts: &[String],
        fresh: bool,
    ) -> io::Result<Vec<DerivedOutcome>> {
        let DerivedKeys {
            mut sidecars,
            sections,
        } = derived;
        // A sidecar goes with the file it describes: where that file's key holds another
        // upload's other bytes (a conflict), so does the sidecar's — it is that upload's, and
        // describes its file. Sharing it would take a reference (a record, 6 requests) that
        // keeps it when that upload is removed: a `.meta` without its file.
        let mut outcomes = Vec::new();
        sidecars.retain(|(key, _, describes)| {
            let described_conflict = conflicts.contains(describes);
            if described_conflict {
                outcomes.push(DerivedOutcome {
                    key: key.clone(),
                    outcome: KeyOutcome::Conflict,
                    recorded: true,
                });
            }
            !described_conflict
        });
        let mut turns = InTurn::chain(sidecars.len() + sections.len()).into_iter();
        let sidecar_turns = turns.by_ref().take(sidecars.len()).collect();
        let mut publishes = self.sidecar_publishes(upload, &sidecars, sidecar_turns, fresh);
        for ((key, section), turn) in sections.iter().zip(turns) {
            publishes.push(self.section_publish(upload, id, key, section, fresh, turn));
        }
        let published: Vec<io::Result<_>> = futures_util::stream::iter(publishes)
            .buffered(KEY_PUBLISHES)
            .collect()
            .await;
        for (key, result, recorded) in published
            .into_iter()
            .collect::<io::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
        {
            if let Some(outcome) = result {
                outcomes.push(DerivedOutcome {
                    key,
                    outcome,
                    recorded,
                });
            }
        }
        Ok(outcomes)
    }

    /// Publishing the sidecars, each taking its lease in its turn (one of `turns` each).
    fn sidecar_publishes<'a>(
        &'a self,
        upload: &'a Upload<'_>,
        sidecars: &'a BTreeSet<(String, &'a [u8], String)>,
        turns: Vec<InTurn>,
        fresh: bool,
    ) -> Vec<DerivedPublish<'a>> {
        if !self.links_sidecars() {
            let publish = |((key, bytes, _), turn): (&'a (String, &'a [u8], String), InTurn)| {
                Box::pin(async move {
                    let result = self
                        .publish_sidecar(upload, key, bytes, None, fresh, Some(turn))
                        .await?;
                    Ok(vec![(key.clone(), Some(result), false)])
                }) as DerivedPublish<'a>
            };
            return sidecars.iter().zip(turns).map(publish).collect();
        }
        // A sole local writer stores sidecars of the same bytes once (an ELF's
        // `debuginfo.meta` and `executable.meta`): one after another, in turn, each later
        // one linked to the first this upload published now (a file on a disk is an inode
        // and a block, more for the journal to write than the name).
        vec![Box::pin(async move {
            let mut stored: Vec<(&[u8], &str)> = Vec::new();
            let mut results = Vec::new();
            for ((key, bytes, _), turn) in sidecars.iter().zip(turns) {
                let same = stored.iter().find(|(held, _)| held == bytes);
                let linked_to = same.map(|(_, key)| *key);
                let result = self
                    .publish_sidecar(upload, key, bytes, linked_to, fresh, Some(turn))
                    .await?;
                if result == KeyOutcome::Published && linked_to.is_none() {
                    stored.push((bytes, key));
                }
                results.push((key.clone(), Some(result), false));
            }
            Ok(results)
        })]
    }

    /// Publishing one section under `key`, in its `turn`.
    fn section_publish<'a>(
        &'a self,
        upload: &'a Upload<'_>,
        id: &'a Identity,
        key: &'a str,
        section: &'a SectionRef,
        fresh: bool,
        turn: InTurn,
    ) -> DerivedPublish<'a> {
        let decompressed = id
            .decompressed
            .iter()
            .find(|(name, _)| *name == section.name)
            .map(|(_, bytes)| bytes.as_slice());
        Box::pin(async move {
            let result = match (section.compressed, decompressed) {
                // Held in memory: decompressed, or small and read with the identification.
                (_, Some(bytes)) => {
                    let etag = crate::storage::content_sha1(bytes);
                    let source = CopySource::Bytes(bytes);
                    let size = bytes.len() as u64;
                    let turn = Some(turn);
                    Some(
                        self.publish_generated(upload, key, source, etag, size, fresh, turn)
                            .await?,
                    )
                }
                (false, None) => {
                    self.publish_section(upload, key, section, fresh, turn)
                        .await?
                }
                // Not decompressed (identification alone): not served.
                (true, None) => None,
            };
            Ok(vec![(key.to_string(), result, true)])
        })
    }

    /// An identity's record as its outcome decides it: its action and reason, the keys
    /// published, unchanged and conflicting, and whose bytes it overwrote (their next
    /// delivery runs in full). `id_shared_with`: the products sharing its build id.
    async fn conclude_record(
        &self,
        upload: &Upload<'_>,
        mut record: Record,
        mut outcome: Outcome,
        id_shared_with: Vec<String>,
    ) -> io::Result<Record> {
        record.action = Some(outcome.action());
        if record.action == Some(Action::Conflict) && record.reason.is_none() {
            record.reason = Some(conflict_reason(outcome.refused).into());
        }
        let overwritten = self.refs.take_overwritten(&upload.id);
        for earlier in &overwritten {
            // Their next delivery runs in full, and says that they wait for the keys.
            self.refs.forget_answer(earlier).await?;
        }
        if !overwritten.is_empty() {
            // For audits: whose bytes this upload replaced (they get them back when it goes).
            let uploads: Vec<&str> = overwritten.iter().map(String::as_str).collect();
            outcome.notes.push(format!(
                "overwrote the bytes of {} (waiting for their keys)",
                uploads.join(", ")
            ));
        }
        if record.reason.is_none() && !outcome.notes.is_empty() {
            record.reason = Some(outcome.notes.join("; "));
        }
        record.published = outcome.published;
        record.unchanged = outcome.unchanged;
        record.conflicts = outcome.conflicts;
        self.flag_cross_product(&mut record).await?;
        mark_shared_build_id(&mut record, id_shared_with);
        Ok(record)
    }

    /// Whether sidecars of the same bytes are stored once, later ones linked to the first:
    /// for a sole writer of a local store (as [`Self::publish_own`] links an upload's keys:
    /// nothing removes the first meanwhile), where a link is a name, not a copy. On S3 a
    /// sidecar is an object either way (an alias would be one too, with a record to keep).
    pub(super) fn links_sidecars(&self) -> bool {
        !self.refs.traits().key_copies_are_aliases
            && !self.config.overwrite
            && self.config.lease.exclusive
    }

    /// Generated objects (Sentry `.meta`): the first writer's content stays, later uploads
    /// reference it. `linked_to`: a key this upload published these bytes under, copied
    /// (linked) from instead ([`Self::links_sidecars`]).
    pub(super) async fn publish_sidecar(
        &self,
        upload: &Upload<'_>,
        key: &str,
        bytes: &[u8],
        linked_to: Option<&str>,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<KeyOutcome> {
        let etag = crate::storage::content_sha1(bytes);
        let source = linked_to.map_or(CopySource::Bytes(bytes), CopySource::Key);
        let size = bytes.len() as u64;
        self.publish_generated(upload, key, source, etag, size, fresh, turn)
            .await
    }

    /// Publishes content derived from the upload (a sidecar, a section): the first writer's
    /// content stays (the same build's derived objects are the same), later uploads reference
    /// it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn publish_generated(
        &self,
        upload: &Upload<'_>,
        key: &str,
        source: CopySource<'_>,
        etag: String,
        size: u64,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<KeyOutcome> {
        let content = Content {
            etag: &etag,
            size,
            source,
        };
        let published = self
            .refs
            .publish_in_turn(
                key,
                Publisher::new(&upload.id, upload.meta.product.as_deref()),
                &content,
                OnDifferent::Adopt,
                fresh,
                turn,
            )
            .await?;
        Ok(published.outcome)
    }

    /// Publishes one section of an ELF upload under its debuginfod `section/` key: a range of
    /// the upload, copied server-side on S3 (no byte through the function), read from a local
    /// file otherwise. `None`: not published (a range outside the upload, a `Key` source).
    /// Which sections are served (bounded) the ELF parser decided; this one is stored
    /// uncompressed.
    pub(super) async fn publish_section(
        &self,
        upload: &Upload<'_>,
        key: &str,
        section: &SectionRef,
        fresh: bool,
        turn: InTurn,
    ) -> io::Result<Option<KeyOutcome>> {
        let (offset, size) = (section.offset, section.size);
        let inside = offset
            .checked_add(size)
            .is_some_and(|end| end <= upload.size);
        if !inside {
            return Ok(None);
        }
        // A range's identity: the upload's and where in it (the bytes are not read).
        let derived = format!("{}@{offset}+{size}", upload.etag);
        let read;
        let (source, etag) = match upload.source {
            CopySource::Object { .. } | CopySource::Range { .. } => {
                let Some(source) = upload.source.range(offset, size, &derived) else {
                    return Ok(None);
                };
                (source, derived.clone())
            }
            // `inside` proved offset + size <= the upload's size.
            CopySource::Bytes(bytes) => {
                let slice = &bytes[offset as usize..(offset + size) as usize];
                (
                    CopySource::Bytes(slice),
                    crate::storage::content_sha1(slice),
                )
            }
            CopySource::File(path) => {
                read = read_range(path, offset, size)?;
                (
                    CopySource::Bytes(&read),
                    crate::storage::content_sha1(&read),
                )
            }
            CopySource::Key(_) => return Ok(None),
        };
        let outcome = self
            .publish_generated(upload, key, source, etag, size, fresh, Some(turn))
            .await?;
        Ok(Some(outcome))
    }

    /// Publishes the upload's own bytes under `keys`, noting each outcome; returns the keys it
    /// now references (all but the conflicts), and the key holding its bytes. `holding`: a key
    /// this upload references that already holds its bytes (later keys may be linked or
    /// aliased to it); when there was none, the first key that came to hold them is returned,
    /// so the next identity of the same upload (a fat Mach-O's next slice) links or aliases to
    /// it instead of storing the bytes again.
    pub(super) async fn publish_own(
        &self,
        upload: &Upload<'_>,
        keys: &BTreeSet<String>,
        fresh: bool,
        outcome: &mut Outcome,
        holding: Option<&str>,
    ) -> io::Result<OwnPublished> {
        let mut referenced = BTreeSet::new();
        // Once one key holds this content, later keys are copied from that key: a hard link
        // in a local store, an alias on S3 in redirect mode (one stored copy, many names).
        // Locally only for a sole writer (the CLI holds the store's writer lock) and without
        // overwrite: then nothing changes or removes the first key meanwhile. With concurrent
        // writers a removal of this very upload may take the key back between the two copies,
        // so each key is copied from the upload itself. An S3 alias copied from a key taken
        // back meanwhile fails (the source is gone) and the message is retried.
        let aliases = self.refs.traits().key_copies_are_aliases && !self.config.overwrite;
        let linkable = aliases
            || (matches!(upload.source, CopySource::File(_) | CopySource::Bytes(_))
                && !self.config.overwrite
                && self.config.lease.exclusive);
        let mut first: Option<String> = holding.map(str::to_string);
        // Until one key holds the bytes, keys go one at a time (the next is copied from the
        // first that does). After that each key's publishing depends on no other's (its own
        // record, its own object), so a few go at once: on S3 a fresh key is two requests, and
        // an ELF has 6 keys. Every one is run to its end before an error is returned (none is
        // dropped halfway), and their outcomes are noted in key order.
        let mut remaining = keys.iter();
        while first.is_none() {
            let Some(key) = remaining.next() else {
                break;
            };
            let result = self
                .publish_key(upload, key, linkable, None, fresh, None)
                .await?;
            self.note_published(
                upload,
                key,
                result,
                aliases,
                fresh,
                outcome,
                &mut referenced,
                &mut first,
            )
            .await?;
        }
        let source = first.clone();
        let turns = InTurn::chain(remaining.len());
        let publishes: Vec<_> = remaining
            .clone()
            .zip(turns)
            .map(|(key, turn)| {
                self.publish_key(upload, key, linkable, source.as_deref(), fresh, Some(turn))
            })
            .collect();
        let published: Vec<io::Result<Publication>> = futures_util::stream::iter(publishes)
            .buffered(KEY_PUBLISHES)
            .collect()
            .await;
        for (key, result) in remaining.zip(published) {
            self.note_published(
                upload,
                key,
                result?,
                aliases,
                fresh,
                outcome,
                &mut referenced,
                &mut first,
            )
            .await?;
        }
        Ok(OwnPublished {
            referenced,
            holding: first,
        })
    }

    /// Publishes the upload's bytes under one key: copied from `first` (a key already holding
    /// them) where `linkable`, else from the upload itself.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn publish_key(
        &self,
        upload: &Upload<'_>,
        key: &str,
        linkable: bool,
        first: Option<&str>,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let mut content = upload.content();
        if let (true, Some(first)) = (linkable, first) {
            content.source = CopySource::Key(first);
        }
        let on_different = OnDifferent::overwrite(self.config.overwrite);
        // The product decides whose bytes an overwrite may replace (refs/overwrites.rs).
        let product = upload.meta.product.as_deref();
        // The turn is the first attempt's; a retry after a wait takes none.
        let mut turn = turn;
        let mut retries = 0;
        loop {
            let published = self
                .refs
                .publish_in_turn(
                    key,
                    Publisher::new(&upload.id, product),
                    &content,
                    on_different,
                    fresh,
                    turn.take(),
                )
                .await?;
            if published.outcome != KeyOutcome::Conflict {
                return Ok(published);
            }
            // Another upload's bytes: wait for the key, and look again (refs/, invariant 8) —
            // freed meanwhile, its removal may have listed its waiters before we were one.
            match self.refs.wait_for(key, &upload.id).await? {
                Some(found) if found.etag != content.etag || found.size != content.size => {
                    return Ok(published)
                }
                _ if retries == CONFLICT_RETRIES => {
                    return Err(busy(&format!(
                        "{key}: freed and taken again, {retries} times"
                    )))
                }
                _ => retries += 1,
            }
        }
    }

    /// Notes one key's outcome; a key now referenced is added to `referenced`, with the
    /// target of an alias found in place (invariant 6, refs/), and becomes `first` when
    /// no key held the bytes yet.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn note_published(
        &self,
        upload: &Upload<'_>,
        key: &str,
        published: Publication,
        aliases: bool,
        fresh: bool,
        outcome: &mut Outcome,
        referenced: &mut BTreeSet<String>,
        first: &mut Option<String>,
    ) -> io::Result<()> {
        outcome.add(key, published.outcome);
        outcome.refused |= published.refused;
        if published.outcome == KeyOutcome::Conflict {
            return Ok(());
        }
        referenced.insert(key.to_string());
        // Invariant 6 (refs/): an alias found in place is held with its target — as the
        // publication left the key's record (its record is not read again).
        let target = match (aliases, published.outcome) {
            (true, KeyOutcome::Unchanged) => published.alias_of,
            _ => None,
        };
        if let Some(target) = target.filter(|t| !referenced.contains(t)) {
            if !self.hold_target(upload, &target, fresh, outcome).await? {
                return Ok(());
            }
            referenced.insert(target.clone());
            first.get_or_insert(target);
        }
        first.get_or_insert_with(|| key.to_string());
        Ok(())
    }

    /// References the target of an alias this upload found in place, publishing it from the
    /// upload's own bytes if it is gone (invariant 6). `false`: not held (the upload is being
    /// removed, or the target holds other content).
    pub(super) async fn hold_target(
        &self,
        upload: &Upload<'_>,
        target: &str,
        fresh: bool,
        outcome: &mut Outcome,
    ) -> io::Result<bool> {
        let keys: BTreeSet<String> = [target.to_string()].into();
        if !self.refs.plan_more(&upload.id, &keys).await? {
            return Ok(false);
        }
        let result = self
            .refs
            .publish(
                target,
                &upload.id,
                &upload.content(),
                OnDifferent::Conflict,
                fresh,
            )
            .await?;
        outcome.add(target, result);
        Ok(result != KeyOutcome::Conflict)
    }
}

/// `size` bytes at `offset` of a local file.
fn read_range(path: &std::path::Path, offset: u64, size: u64) -> io::Result<Vec<u8>> {
    let reader = crate::reader::FileReader::open(path)?;
    let len = usize::try_from(size).map_err(|_| io::Error::other("section too large"))?;
    crate::reader::read_vec(&reader, offset, len)
}
