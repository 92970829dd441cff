//! The upload model both front ends share: one ingest object or archive entry to index
//! ([`Upload`]), what indexing it came to ([`Indexed`]), and the run's [`Summary`].

use std::collections::BTreeSet;

#[cfg(doc)]
use super::Indexer;
use crate::formats::{Format, IdentifyOptions};
use crate::identity::{file_name_of, Identity};
use crate::layouts::KeySet;
use crate::manifest::{Action, Record};
use crate::refs::{Content, IdRecord, IndexedAs, KeyOutcome, PriorRead, UploadRecord};
use crate::sourcemap::{self, Offer, Want};
use crate::storage::CopySource;
use crate::upload_id::{Location, UploadId};
use crate::upload_meta::UploadMeta;

/// One ingest object to index.
#[derive(Debug, Clone)]
pub struct Upload<'a> {
    /// Stable identity (references point at it): path or bucket/key/version plus content.
    pub id: String,
    /// How to copy its bytes into the store.
    pub source: CopySource<'a>,
    pub ingest_bucket: Option<String>,
    /// Ingest key (S3) or path (local).
    pub ingest_key: String,
    /// Set when this upload is one of an archive's entries.
    pub entry: Option<EntryOf>,
    pub ingest_version: Option<String>,
    /// Content identity, comparable with the store's etags.
    pub etag: String,
    pub size: u64,
    pub meta: UploadMeta,
    pub options: IdentifyOptions,
    /// Where a source file sits in its source tree (matched against the paths debug files
    /// name, sourcemap.rs); `None`: its archive entry path, else its ingest key.
    pub source_path: Option<String>,
    /// A local input file's status when it was hashed, kept with its location (refs/).
    pub file_stamp: Option<crate::refs::FileStamp>,
}

/// The archive an entry upload came from, and where inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryOf {
    /// Path inside the archive (nested archives: `inner.tar.gz!/path`).
    pub path: String,
    /// The archive object's content identity and size (the ingest object's).
    pub archive_etag: String,
    pub archive_size: u64,
}

impl<'a> Upload<'a> {
    /// The file name the artifact was uploaded as.
    pub fn name(&self) -> &str {
        file_name_of(self.entry.as_ref().map_or(&self.ingest_key, |e| &e.path))
    }

    /// The upload's bytes, as a key is published with them.
    pub(super) fn content(&self) -> Content<'_> {
        Content {
            etag: &self.etag,
            size: self.size,
            source: self.source,
        }
    }

    /// The ingest location: `s3://bucket/key`, or the local path.
    /// This upload indexed as a source: a debug file of its scope names it (`unclaimed.rs`).
    /// Its upload record says so (`as_source`): a hand-over identifies it so again.
    pub fn as_named_source(&self) -> Upload<'a> {
        Upload {
            options: IdentifyOptions { as_source: true },
            ..self.clone()
        }
    }

    pub fn source_name(&self) -> String {
        match &self.ingest_bucket {
            Some(bucket) => format!("s3://{bucket}/{}", self.ingest_key),
            None => self.ingest_key.clone(),
        }
    }

    /// The ingest object's content identity (the archive's, for an entry): what a sweeper
    /// deletes, conditionally on it.
    pub(super) fn ingest_etag(&self) -> &str {
        self.entry.as_ref().map_or(&self.etag, |e| &e.archive_etag)
    }

    /// The input this upload came from: its ingest object or file, an entry's archive (with
    /// its content), whose records name what of it published nothing.
    pub fn input(&self) -> Input {
        let (etag, size) = match &self.entry {
            Some(entry) => (entry.archive_etag.as_str(), entry.archive_size),
            None => (self.etag.as_str(), self.size),
        };
        match &self.ingest_bucket {
            Some(bucket) => Input::s3_object(
                bucket,
                &self.ingest_key,
                self.ingest_version.as_deref(),
                etag,
                size,
                &self.meta,
            ),
            None => Input::file(&self.ingest_key, &self.meta).with_content(etag, size),
        }
    }

    /// The record of this upload refused before it was identified, with the reason (an S3
    /// object's names its location and content, as a record of an object refused before it
    /// was read does).
    pub(super) fn refused(&self, reason: String) -> Indexed {
        match (&self.entry, &self.ingest_bucket) {
            (Some(entry), _) => {
                self.input()
                    .nothing_published(Some(&entry.path), Action::Rejected, reason)
            }
            (None, Some(bucket)) => {
                let version = self.ingest_version.as_deref();
                Input::s3_location(bucket, &self.ingest_key, version, &self.meta)
                    .with_content(&self.etag, self.size)
                    .nothing_published(None, Action::Rejected, reason)
            }
            (None, None) => Input::file(&self.ingest_key, &self.meta).nothing_published(
                None,
                Action::Rejected,
                reason,
            ),
        }
    }

    pub(super) fn record(&self, action: Action) -> Record {
        Record {
            name: Some(self.name().to_string()),
            entry: self.entry.as_ref().map(|e| e.path.clone()),
            ingest_version: self.ingest_version.clone(),
            ingest_etag: Some(self.ingest_etag().to_string()),
            ingest_size: Some(self.entry.as_ref().map_or(self.size, |e| e.archive_size)),
            meta: self.meta.clone(),
            ..Record::about(
                action,
                self.id.clone(),
                self.ingest_bucket.clone(),
                self.ingest_key.clone(),
            )
        }
    }
}

/// What happened to each key of one artifact.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) published: Vec<String>,
    pub(super) unchanged: Vec<String>,
    pub(super) conflicts: Vec<String>,
    /// What else the record's reason says (a source's tie left as it was).
    pub(super) notes: Vec<String>,
    /// A conflict among them is an overwrite the product rule refused (refs/overwrites.rs):
    /// the record's reason says so, other conflicts' the usual.
    pub(super) refused: bool,
}

impl Outcome {
    pub(super) fn action(&self) -> Action {
        if !self.conflicts.is_empty() {
            Action::Conflict
        } else if !self.published.is_empty() {
            Action::Indexed
        } else {
            Action::Unchanged
        }
    }

    pub(super) fn add(&mut self, key: &str, outcome: KeyOutcome) {
        let list = match outcome {
            KeyOutcome::Published => &mut self.published,
            KeyOutcome::Unchanged => &mut self.unchanged,
            KeyOutcome::Conflict => &mut self.conflicts,
        };
        list.push(key.to_string());
    }
}

/// One upload indexed but not yet finalized: its records go into the manifest first, then
/// [`Indexer::finalize`] marks it indexed (so a run that dies before its manifest is written
/// reports the same keys as published when it is re-run: the manifest is at-least-once).
#[derive(Debug, Default)]
pub struct Indexed {
    pub records: Vec<Record>,
    /// The upload to finalize (`None`: nothing was published, nothing to finalize).
    pub upload: Option<String>,
    pub(super) referenced: BTreeSet<String>,
    /// Every key this attempt may have referenced (taken back if the upload is removed).
    pub(super) planned: BTreeSet<String>,
    /// What the run came to, for the upload record, when a re-delivery may be answered from
    /// it (every planned key published or unchanged).
    pub(super) indexed_as: Option<IndexedAs>,
    /// The upload record as the plan wrote it (the finalize swaps on it without a read).
    pub(super) upload_read: Option<PriorRead>,
    /// A sole writer's changes to source-map records, made when the upload is taken in
    /// input order ([`Indexer::register_source_map_changes`]).
    pub(super) source_map_changes: Vec<SourceMapChange>,
    /// `create` leases left to the finalize (refs/, invariant 1): released by a write if
    /// the references are taken back instead.
    pub(super) held: Vec<(String, crate::refs::Lease)>,
    /// Keys the upload waited for and references now (a hand-over's re-index: refs/,
    /// invariant 8): their markers go once the finalize lists them — before that, a run
    /// that dies must be re-indexed by the hand-over's retry, which finds it by its marker.
    pub(super) waits_ended: BTreeSet<String>,
    /// A source upload: the join record of its offer (`UploadRecord::offered_in`), for a
    /// take-back to withdraw it even when a removal got there first and forgot the record.
    pub(super) offered_in: Option<String>,
    /// A DWARF package its plan found no binary for: re-checked once its records are in the
    /// manifest (`packages.rs`, [`WaitingPackage`]).
    pub(super) waiting_package: Option<WaitingPackage>,
}

/// A DWARF package that planned no key, and the join record its note went to: a binary that
/// swapped its entry there while the package's run was in flight had the package indexed
/// again before this run's own record reached the manifest, so the finalize looks again.
#[derive(Debug, Clone, Default)]
pub(super) struct WaitingPackage {
    pub(super) upload: String,
    pub(super) file: String,
    pub(super) ids: crate::refs::IdSet,
}

/// A debug file's wanted path an unclaimed file may serve: the path and its `source/` key.
pub(super) type ClaimedPath = (String, String);

/// A change to one source-map record an upload's indexing decided (made at once, or by a
/// sole writer when it takes the upload: [`Indexer::register_source_map_changes`]).
#[derive(Debug, Clone)]
pub(super) enum SourceMapChange {
    /// Source paths a debug file names, wanted from now on.
    Want(String, Vec<Want>),
    /// Offers of source uploads removed since they offered themselves.
    DropOffers(String, BTreeSet<Offer>),
    /// A file no format claimed, noted (`unclaimed.rs`).
    Note(String, Box<sourcemap::Unclaimed>),
    /// Noted files a debug file names, to be indexed again once its wants are made, and the
    /// wanted paths they may serve (`unclaimed.rs`).
    Claim(Vec<sourcemap::Unclaimed>, Vec<ClaimedPath>),
}

impl SourceMapChange {
    /// The join record it changes ("" for a claim, which changes none itself).
    pub(super) fn file(&self) -> &str {
        match self {
            SourceMapChange::Want(file, _)
            | SourceMapChange::DropOffers(file, _)
            | SourceMapChange::Note(file, _) => file,
            SourceMapChange::Claim(..) => "",
        }
    }

    /// Makes the change on `record`; `true` if it changed anything.
    pub(super) fn apply(&self, record: &mut sourcemap::SourceMapRecord) -> bool {
        match self {
            SourceMapChange::Want(_, wants) => wants
                .iter()
                .fold(false, |changed, w| record.want(w) | changed),
            SourceMapChange::DropOffers(_, dead) => {
                let before = record.offers.len();
                record.offers.retain(|o| !dead.contains(o));
                record.offers.len() != before
            }
            SourceMapChange::Note(_, unclaimed) => record.note(unclaimed),
            SourceMapChange::Claim(..) => false,
        }
    }
}

impl Indexed {
    /// Records of an upload that published nothing (skipped, rejected).
    pub fn nothing_published(records: Vec<Record>) -> Self {
        Indexed {
            records,
            ..Indexed::default()
        }
    }
}

/// What [`Indexer::already_indexed`] found.
#[derive(Debug)]
pub(super) enum Lookup {
    /// Indexed before under the same plan: the records of this re-delivery.
    Indexed(Box<Indexed>),
    /// Index it (with the read made, when kept).
    Unindexed(Option<PriorRead>),
}

/// One identity's keys, computed before anything is published (the plan).
pub(super) struct Planned {
    pub(super) id: Identity,
    pub(super) record: Record,
    pub(super) keys: BTreeSet<String>,
    pub(super) set: KeySet,
    /// A PDB: its debug id's record as the plan read it (for the names PEs gave it), kept
    /// for the swap that records where it lives ([`Indexer::remember_pdb`]). `None` for a
    /// PDB's first delivery: not read, guessed absent (the PDB the first of its PE and PDB
    /// to arrive, or alone): created where it lives, or, there after all, read then.
    pub(super) id_read: Option<(IdRecord, PriorRead)>,
}

/// A manifest record about an upload known only from its upload record.
pub(super) fn upload_record_of(upload: &UploadRecord, action: Action) -> Record {
    let location = Location::of_source(&upload.source);
    let (bucket, key) = match &location {
        Location::S3 { bucket, key } => (Some(bucket.clone()), key.clone()),
        Location::File { path } => (None, path.clone()),
    };
    let ingest_etag = upload
        .ingest_etag
        .clone()
        .unwrap_or_else(|| upload.etag.clone());
    // Records written before the version was kept: the upload id says it
    // (`s3:<bucket>/<key>@<version id, or the ETag unversioned>[!/<entry>]`).
    let ingest_version = upload.ingest_version.clone().or_else(|| {
        bucket.as_ref()?;
        let id = upload.upload.parse::<UploadId>().ok()?;
        let version = id.version.filter(|_| id.location == location)?;
        (version != ingest_etag && version != upload.etag).then_some(version)
    });
    let mut record = Record {
        ingest_etag: Some(ingest_etag),
        ingest_size: upload.entry.is_none().then_some(upload.size),
        ingest_version,
        entry: upload.entry.clone(),
        meta: upload.meta.clone(),
        ..Record::about(action, upload.upload.clone(), bucket, key)
    };
    if let Some(entry) = &upload.entry {
        record.name = Some(file_name_of(entry).to_string());
    }
    record
}

pub(super) fn is_pdb(id: &Identity) -> bool {
    matches!(id.format, Format::Pdb | Format::PortablePdb) && !id.debug_id.is_nil()
}

pub(super) fn fill_identity(record: &mut Record, id: &Identity) {
    record.format = Some(id.format);
    record.kind = Some(id.kind);
    record.arch = Some(id.arch);
    record.debug_id = Some(id.debug_id);
    record.code_id.clone_from(&id.code_id);
    record.code_file = id.code_file.clone();
    record.debug_file = id.debug_file.clone();
    record.dwarf_package.clone_from(&id.dwarf_package);
    record.split_dwarf.clone_from(&id.split_dwarf);
    record.pdb_sources.clone_from(&id.pdb_sources);
}

/// Counts of a run, for the one-line summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub indexed: usize,
    pub unchanged: usize,
    pub skipped: usize,
    pub rejected: usize,
    pub conflicts: usize,
    pub unpublished: usize,
    pub expired: usize,
    pub promoted: usize,
    pub keys_published: usize,
}

impl Summary {
    pub fn add(&mut self, record: &Record) {
        match record.action {
            Some(Action::Indexed) => self.indexed += 1,
            Some(Action::Unchanged) => self.unchanged += 1,
            Some(Action::Skipped) => self.skipped += 1,
            Some(Action::Rejected) => self.rejected += 1,
            Some(Action::Conflict) => self.conflicts += 1,
            Some(Action::Unpublished) => self.unpublished += 1,
            Some(Action::Expired) => self.expired += 1,
            Some(Action::Promoted) => self.promoted += 1,
            // Read back from a manifest only: a run's own records are never `repeated`.
            Some(Action::Repeated) => {}
            None => {}
        }
        self.keys_published += record.published.len();
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} published ({} keys), {} unchanged, {} skipped, {} rejected, {} conflicts",
            self.indexed,
            self.keys_published,
            self.unchanged,
            self.skipped,
            self.rejected,
            self.conflicts
        )?;
        if self.unpublished > 0 {
            write!(f, ", {} unpublished", self.unpublished)?;
        }
        if self.expired > 0 {
            write!(f, ", {} expired", self.expired)?;
        }
        if self.promoted > 0 {
            write!(f, ", {} promoted", self.promoted)?;
        }
        Ok(())
    }
}

/// An input as its uploads and records name it: a local file (a path) or an S3 object (bucket,
/// key, version), an archive's for its entries. Every upload id comes from here (the one rule,
/// [`Input::upload_id`], [`Input::entry_upload_id`]), and so does every record of an input or
/// entry that published nothing ([`Input::nothing_published`]).
#[derive(Debug, Clone)]
pub struct Input {
    scheme: Scheme,
    /// What a record of the input itself calls it when nothing was published (an S3
    /// object read: its upload's id).
    record_id: UploadId,
    pub bucket: Option<String>,
    /// The path (local) or the ingest key (S3).
    pub key: String,
    /// The S3 object's version id.
    pub version: Option<String>,
    /// The content identity (a local file's SHA-1, an S3 object's ETag), where known.
    pub etag: Option<String>,
    pub size: Option<u64>,
    pub meta: UploadMeta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    File,
    S3,
}

impl Input {
    /// A local input, by the path it is shown as.
    pub fn file(path: &str, meta: &UploadMeta) -> Input {
        Input {
            scheme: Scheme::File,
            record_id: UploadId {
                location: Location::File {
                    path: path.to_string(),
                },
                version: None,
                entry: None,
                scope: None,
            },
            bucket: None,
            key: path.to_string(),
            version: None,
            etag: None,
            size: None,
            meta: meta.clone(),
        }
    }

    /// An S3 object known by its location alone (gone, or refused before it was read):
    /// `s3:<bucket>/<key>`, how the ids of the uploads of one object begin (refs,
    /// `location_of`), by which a removal finds them.
    pub fn s3_location(bucket: &str, key: &str, version: Option<&str>, meta: &UploadMeta) -> Input {
        Input {
            scheme: Scheme::S3,
            record_id: UploadId::s3(bucket, key, None, None),
            bucket: Some(bucket.to_string()),
            key: key.to_string(),
            version: version.map(str::to_string),
            etag: None,
            size: None,
            meta: meta.clone(),
        }
    }

    /// An S3 object as read: `s3:<bucket>/<key>@<version>`, the version id, or the ETag in an
    /// unversioned bucket. A redelivery of the same object is the same upload.
    pub fn s3_object(
        bucket: &str,
        key: &str,
        version: Option<&str>,
        etag: &str,
        size: u64,
        meta: &UploadMeta,
    ) -> Input {
        let mut input = Input::s3_location(bucket, key, version, meta).with_content(etag, size);
        input.record_id.version = Some(version.unwrap_or(etag).to_string());
        input
    }

    /// How the ids of this input's uploads begin (`s3:<bucket>/<key>`, `file:<path>`), by which
    /// a removal finds them (refs, `location_of`).
    pub fn location(&self) -> String {
        self.record_id.location.to_string()
    }

    /// The same input, its content known (its records name the upload as before).
    pub fn with_content(mut self, etag: &str, size: u64) -> Input {
        self.etag = Some(etag.to_string());
        self.size = Some(size);
        self
    }

    /// The id of the upload of this input's content. A local input's is its content
    /// published for one build (`file:<path>@<sha1>#build=<build>`): the same file indexed
    /// for two builds is referenced twice, so deleting either build keeps it. An S3 object's
    /// is the object's version ([`Input::s3_object`]).
    pub fn upload_id(&self, etag: &str) -> String {
        match self.scheme {
            Scheme::File => UploadId::file_spelling(&self.key, None, etag, &self.meta),
            Scheme::S3 => self.record_id.to_string(),
        }
    }

    /// The id of the upload of one entry of this archive, of content `etag`: the archive's
    /// upload and the entry's path, so a retried archive finds its entries' uploads.
    pub fn entry_upload_id(&self, entry: &str, etag: &str) -> String {
        match self.scheme {
            Scheme::S3 => self.record_id_of(Some(entry)).to_string(),
            Scheme::File => UploadId::file_spelling(&self.key, Some(entry), etag, &self.meta),
        }
    }

    /// Records of this input (`entry: None`) or of one of its entries that published nothing
    /// (skipped, rejected, gone), with the reason. A local input's records name it by path
    /// alone; an S3 object's also by version and, once read, by content.
    pub fn nothing_published(
        &self,
        entry: Option<&str>,
        action: Action,
        reason: String,
    ) -> Indexed {
        let s3 = self.scheme == Scheme::S3;
        let mut record = Record {
            reason: Some(reason),
            ingest_version: self.version.clone(),
            ingest_etag: self.etag.clone().filter(|_| s3),
            ingest_size: self.size.filter(|_| s3),
            meta: self.meta.clone(),
            ..Record::about(
                action,
                self.record_id_of(entry).to_string(),
                self.bucket.clone(),
                self.key.clone(),
            )
        };
        if let Some(entry) = entry {
            record.entry = Some(entry.to_string());
            record.name = Some(file_name_of(entry).to_string());
        }
        Indexed::nothing_published(vec![record])
    }

    /// The id of a record of this input, or of one of its entries.
    fn record_id_of(&self, entry: Option<&str>) -> UploadId {
        UploadId {
            entry: entry.map(str::to_string),
            ..self.record_id.clone()
        }
    }

    /// Where an entry of this archive came from, for its upload.
    fn entry_of(&self, path: &str) -> EntryOf {
        EntryOf {
            path: path.to_string(),
            archive_etag: self.etag.clone().unwrap_or_default(),
            archive_size: self.size.unwrap_or_default(),
        }
    }
}

impl<'a> Upload<'a> {
    /// A local input file of content `etag` (its SHA-1), copied from `source`.
    pub fn from_file(
        input: &Input,
        source: CopySource<'a>,
        etag: &str,
        size: u64,
        options: IdentifyOptions,
        source_path: Option<String>,
        file_stamp: Option<crate::refs::FileStamp>,
    ) -> Self {
        Upload {
            id: input.upload_id(etag),
            source,
            ingest_bucket: None,
            ingest_key: input.key.clone(),
            entry: None,
            ingest_version: None,
            etag: etag.to_string(),
            size,
            meta: input.meta.clone(),
            options,
            source_path,
            file_stamp,
        }
    }

    /// An S3 object as read ([`Input::s3_object`]), copied from `source`.
    pub fn from_s3_object(input: &Input, source: CopySource<'a>, options: IdentifyOptions) -> Self {
        let etag = input.etag.clone().unwrap_or_default();
        Upload {
            id: input.upload_id(&etag),
            source,
            ingest_bucket: input.bucket.clone(),
            ingest_key: input.key.clone(),
            entry: None,
            ingest_version: input.version.clone(),
            etag,
            size: input.size.unwrap_or_default(),
            meta: input.meta.clone(),
            options,
            source_path: None,
            file_stamp: None,
        }
    }

    /// One entry of the archive `archive` (made with its content), of content `etag`.
    pub fn from_entry(
        archive: &Input,
        entry: &str,
        source: CopySource<'a>,
        etag: &str,
        size: u64,
        options: IdentifyOptions,
        source_path: Option<String>,
    ) -> Self {
        Upload {
            id: archive.entry_upload_id(entry, etag),
            source,
            ingest_bucket: archive.bucket.clone(),
            ingest_key: archive.key.clone(),
            entry: Some(archive.entry_of(entry)),
            ingest_version: archive.version.clone(),
            etag: etag.to_string(),
            size,
            meta: archive.meta.clone(),
            options,
            source_path,
            file_stamp: None,
        }
    }
}
