//! The index/unindex pipeline, the same for the CLI (directory store) and the Lambdas (S3):
//! identify an upload by ranged reads, compute its keys, publish by copying, record references
//! and one manifest record per decision.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use crate::formats::{identify, Format, FormatError, IdentifyOptions};
use crate::identity::{file_name_of, Identity};
use crate::layouts::{self, symstore_index2, KeySet, Layout};
use crate::manifest::{indexer_version, now_rfc3339, Action, Record, UploadMeta, SCHEMA_VERSION};
use crate::reader::RangeReader;
use crate::refs::{RefStore, UploadRecord};
use crate::storage::{CopySource, Storage};

/// Where each layout's keys live in the serving store, and what to do.
#[derive(Debug, Clone)]
pub struct Config {
    pub layouts: Vec<Layout>,
    /// Key prefix per layout (ARCHITECTURE.md: `symbols/`, `buildid/` at the root, `unified/`).
    pub prefixes: BTreeMap<Layout, String>,
    /// Replace a key's content when it differs (otherwise a conflict is recorded).
    pub overwrite: bool,
    pub manifest_prefix: String,
    /// Gzip manifest objects (the Lambdas do; the local store writes plain JSON Lines).
    pub gzip_manifest: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            layouts: Layout::ALL.to_vec(),
            prefixes: default_prefixes(),
            overwrite: false,
            manifest_prefix: "_manifest".to_string(),
            gzip_manifest: false,
        }
    }
}

/// `symbols/` for the `<name>/<id>/<name>` family (one base URL for WinDbg, VS, dotnet-symbol),
/// the root for debuginfod (its keys start with `buildid/`), one directory for each other.
pub fn default_prefixes() -> BTreeMap<Layout, String> {
    Layout::ALL
        .into_iter()
        .map(|layout| {
            let prefix = match layout {
                Layout::Ssqp | Layout::Symstore | Layout::Breakpad => "symbols/",
                Layout::SymstoreIndex2 => "index2/",
                Layout::Debuginfod => "",
                Layout::Unified => "unified/",
                Layout::Gdb => "gdb/",
                Layout::Lldb => "lldb/",
            };
            (layout, prefix.to_string())
        })
        .collect()
}

impl Config {
    fn prefix(&self, layout: Layout) -> &str {
        self.prefixes.get(&layout).map_or("", String::as_str)
    }

    /// The store-level objects the layouts need (SymStore's two-tier marker).
    pub fn marker_objects(&self) -> Vec<(String, &'static [u8])> {
        let mut out = Vec::new();
        if self.layouts.contains(&Layout::SymstoreIndex2) {
            let key = format!(
                "{}{}",
                self.prefix(Layout::SymstoreIndex2),
                symstore_index2::MARKER_KEY
            );
            out.push((key, b"" as &[u8]));
        }
        out
    }
}

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
    pub ingest_version: Option<String>,
    /// Content identity, comparable with the store's etags.
    pub etag: String,
    pub size: u64,
    pub meta: UploadMeta,
    pub options: IdentifyOptions,
}

impl Upload<'_> {
    /// The file name the artifact was uploaded as.
    pub fn name(&self) -> &str {
        file_name_of(&self.ingest_key)
    }

    fn record(&self, action: Action) -> Record {
        Record {
            schema: SCHEMA_VERSION,
            time: now_rfc3339(),
            action: Some(action),
            upload: self.id.clone(),
            ingest_bucket: self.ingest_bucket.clone(),
            ingest_key: self.ingest_key.clone(),
            ingest_version: self.ingest_version.clone(),
            ingest_etag: Some(self.etag.clone()),
            ingest_size: Some(self.size),
            meta: self.meta.clone(),
            name: Some(self.name().to_string()),
            indexer: indexer_version(),
            ..Record::default()
        }
    }
}

/// What happened to each key of one artifact.
#[derive(Debug, Default)]
struct Outcome {
    published: Vec<String>,
    unchanged: Vec<String>,
    conflicts: Vec<String>,
}

impl Outcome {
    fn action(&self) -> Action {
        if !self.conflicts.is_empty() {
            Action::Conflict
        } else if !self.published.is_empty() {
            Action::Indexed
        } else {
            Action::Unchanged
        }
    }
}

pub struct Indexer<'s> {
    store: &'s dyn Storage,
    refs: RefStore<'s>,
    config: Config,
}

impl<'s> Indexer<'s> {
    pub fn new(store: &'s dyn Storage, config: Config) -> Self {
        Indexer {
            store,
            refs: RefStore::new(store),
            config,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn refs(&self) -> &RefStore<'s> {
        &self.refs
    }

    /// Writes the store-level marker objects once.
    pub fn prepare(&self) -> io::Result<()> {
        for (key, body) in self.config.marker_objects() {
            if self.store.size(&key)?.is_none() {
                self.store.put(&key, body)?;
            }
        }
        Ok(())
    }

    /// The prefixed keys of a key set.
    fn prefixed(&self, set: &KeySet) -> BTreeSet<String> {
        set.keys
            .iter()
            .flat_map(|(layout, keys)| {
                keys.iter()
                    .map(move |k| format!("{}{k}", self.config.prefix(*layout)))
            })
            .collect()
    }

    /// Indexes one upload. `Err` only for storage failures (worth a retry); everything about
    /// the artifact itself ends in the returned manifest records.
    pub fn index(&self, upload: &Upload<'_>, reader: &dyn RangeReader) -> io::Result<Vec<Record>> {
        let identities = match identify(reader, &upload.options) {
            Ok(ids) => ids,
            Err(FormatError::Io(e)) => return Err(e),
            Err(e @ FormatError::Unrecognized(_)) => {
                let mut r = upload.record(Action::Skipped);
                r.reason = Some(e.to_string());
                return Ok(vec![r]);
            }
            Err(e @ FormatError::Malformed { .. }) => {
                let mut r = upload.record(Action::Rejected);
                r.reason = Some(e.to_string());
                return Ok(vec![r]);
            }
        };
        let mut records = Vec::new();
        let mut upload_keys = BTreeSet::new();
        for mut id in identities {
            id.fill_file_names(upload.name());
            let (record, keys) = self.index_identity(upload, &id)?;
            upload_keys.extend(keys);
            records.push(record);
        }
        if !upload_keys.is_empty() {
            self.refs.put_upload(&UploadRecord {
                upload: upload.id.clone(),
                source: match &upload.ingest_bucket {
                    Some(bucket) => format!("s3://{bucket}/{}", upload.ingest_key),
                    None => upload.ingest_key.clone(),
                },
                meta: upload.meta.clone(),
                etag: upload.etag.clone(),
                size: upload.size,
                time: now_rfc3339(),
                keys: upload_keys,
            })?;
        }
        Ok(records)
    }

    fn index_identity(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
    ) -> io::Result<(Record, BTreeSet<String>)> {
        let mut record = upload.record(Action::Indexed);
        fill_identity(&mut record, id);
        let layouts = &self.config.layouts;
        let set = layouts::keys_for(id, upload.name(), layouts);
        let mut keys = self.prefixed(&set);
        let debug_id = id.debug_id.to_string();

        // A PDB is also reachable under every name PEs' CodeView records gave it.
        if matches!(id.format, Format::Pdb | Format::PortablePdb) && !id.debug_id.is_nil() {
            for alias in self.refs.id(&debug_id)?.names {
                keys.extend(self.prefixed(&layouts::keys_for(id, &alias, layouts)));
            }
        }
        if keys.is_empty() {
            let (action, reason) = if set.rejected.is_empty() {
                (
                    Action::Skipped,
                    "no identifier to key it by (no build id, UUID or debug id)".to_string(),
                )
            } else {
                (Action::Rejected, set.rejected.join("; "))
            };
            record.action = Some(action);
            record.reason = Some(reason);
            return Ok((record, BTreeSet::new()));
        }
        if !set.rejected.is_empty() {
            record.reason = Some(set.rejected.join("; "));
        }

        let mut outcome = Outcome::default();
        for key in &keys {
            self.publish(upload, key, None, &mut outcome)?;
        }
        // What this upload references: keys it published or found holding its content.
        let mut referenced = BTreeSet::new();
        for sidecar in &set.sidecars {
            let key = format!("{}{}", self.config.prefix(sidecar.layout), sidecar.key);
            self.publish_sidecar(upload, &key, sidecar.content.as_bytes())?;
            referenced.insert(key);
        }

        if matches!(id.format, Format::Pdb | Format::PortablePdb) {
            if let Some(first) = outcome.published.first().or(outcome.unchanged.first()) {
                let first = first.clone();
                let refs = &self.refs;
                refs.update_id(&debug_id, |r| {
                    // Keep a live copy; replace one that was unpublished.
                    let live = r
                        .pdb_key
                        .as_deref()
                        .is_some_and(|k| matches!(refs.key(k), Ok(Some(_))));
                    if !live {
                        r.pdb_key = Some(first.clone());
                    }
                })?;
            }
        }
        if id.format == Format::Pe {
            referenced.extend(self.alias_pdbs(upload, id, &mut outcome)?);
        }
        referenced.extend(outcome.published.iter().cloned());
        referenced.extend(outcome.unchanged.iter().cloned());

        record.action = Some(outcome.action());
        if record.action == Some(Action::Conflict) && record.reason.is_none() {
            record.reason = Some(
                "keys hold different content; not overwritten (use overwrite to force)".into(),
            );
        }
        record.published = outcome.published;
        record.unchanged = outcome.unchanged;
        record.conflicts = outcome.conflicts;
        Ok((record, referenced))
    }

    /// Publishes one key with the upload's bytes, or with those of the already published key
    /// `alias_of` (an alias copy inside the store).
    fn publish(
        &self,
        upload: &Upload<'_>,
        key: &str,
        alias_of: Option<&str>,
        outcome: &mut Outcome,
    ) -> io::Result<()> {
        let (etag, size, source) = match alias_of {
            Some(src) => match self.refs.key(src)? {
                Some(r) => (r.etag, r.size, CopySource::Key(src)),
                None => return Ok(()),
            },
            None => (upload.etag.clone(), upload.size, upload.source),
        };
        let existing = match self.refs.key(key)? {
            Some(record) => Some(record.etag),
            // Not ours: an object written outside symdex counts by its own etag.
            None => self.store.head(key)?.map(|info| info.etag),
        };
        match existing {
            Some(current) if current == etag => {
                self.refs.add_ref(key, &upload.id, &etag, size, false)?;
                outcome.unchanged.push(key.to_string());
            }
            Some(_) if !self.config.overwrite => outcome.conflicts.push(key.to_string()),
            _ => {
                self.store.copy(&source, key)?;
                self.refs.add_ref(key, &upload.id, &etag, size, true)?;
                outcome.published.push(key.to_string());
            }
        }
        Ok(())
    }

    /// Generated objects (Sentry `.meta`): the first writer's content stays.
    fn publish_sidecar(&self, upload: &Upload<'_>, key: &str, content: &[u8]) -> io::Result<()> {
        let etag = match self.refs.key(key)? {
            Some(record) => record.etag,
            None => self.store.put(key, content)?.etag,
        };
        self.refs
            .add_ref(key, &upload.id, &etag, content.len() as u64, false)?;
        Ok(())
    }

    /// For each PDB a PE references: remember the CodeView name, and if that PDB is already
    /// published, make it reachable under the exact name the PE uses.
    fn alias_pdbs(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        outcome: &mut Outcome,
    ) -> io::Result<BTreeSet<String>> {
        let mut keys = BTreeSet::new();
        for (pdb, name) in layouts::companions(id, upload.name()) {
            if name.is_empty() || layouts::Name::new(&name).is_err() {
                continue;
            }
            let debug_id = pdb.debug_id.to_string();
            let record = self.refs.update_id(&debug_id, |r| {
                r.names.insert(name.clone());
            })?;
            let Some(pdb_key) = record.pdb_key else {
                continue;
            };
            if self.refs.key(&pdb_key)?.is_none() {
                // That copy was unpublished since: forget it until the PDB is indexed again.
                self.refs.update_id(&debug_id, |r| r.pdb_key = None)?;
                continue;
            }
            for key in self.prefixed(&layouts::keys_for(&pdb, &name, &self.config.layouts)) {
                if key == pdb_key {
                    continue;
                }
                let mut alias = Outcome::default();
                self.publish(upload, &key, Some(&pdb_key), &mut alias)?;
                // An alias holding other content is not this PE's conflict: the PE itself
                // published fine. Only aliases it wrote or shares are referenced.
                keys.extend(alias.published.iter().chain(&alias.unchanged).cloned());
                outcome.published.extend(alias.published);
            }
        }
        Ok(keys)
    }

    /// Deletes one upload: drops its references and unpublishes keys nobody else needs.
    pub fn unindex(&self, upload_id: &str) -> io::Result<Option<Record>> {
        let Some(upload) = self.refs.upload(upload_id)? else {
            return Ok(None);
        };
        let mut removed = Vec::new();
        let mut kept = 0;
        for key in &upload.keys {
            if self.refs.remove_ref(key, upload_id)?.is_empty() {
                self.store.delete(key)?;
                removed.push(key.clone());
            } else {
                kept += 1;
            }
        }
        self.refs.delete_upload(upload_id)?;
        let (bucket, key) = match upload
            .source
            .strip_prefix("s3://")
            .and_then(|s| s.split_once('/'))
        {
            Some((bucket, key)) => (Some(bucket.to_string()), key.to_string()),
            None => (None, upload.source.clone()),
        };
        Ok(Some(Record {
            schema: SCHEMA_VERSION,
            time: now_rfc3339(),
            action: Some(Action::Unpublished),
            reason: Some(format!(
                "{} keys removed, {kept} still referenced by other uploads",
                removed.len()
            )),
            upload: upload.upload.clone(),
            ingest_bucket: bucket,
            name: Some(file_name_of(&key).to_string()),
            ingest_key: key,
            ingest_etag: Some(upload.etag.clone()),
            ingest_size: Some(upload.size),
            meta: upload.meta.clone(),
            removed,
            indexer: indexer_version(),
            ..Record::default()
        }))
    }

    /// Writes the manifest object for a batch of records.
    pub fn write_manifest(&self, records: &[Record]) -> io::Result<Option<String>> {
        crate::manifest::write(
            self.store,
            &self.config.manifest_prefix,
            records,
            self.config.gzip_manifest,
        )
    }
}

fn fill_identity(record: &mut Record, id: &Identity) {
    record.format = Some(id.format.as_str().to_string());
    record.kind = Some(id.kind.as_str().to_string());
    record.arch = Some(id.arch.clone());
    record.debug_id = Some(id.debug_id.to_string());
    record.code_id = id.code_id.as_ref().map(|c| c.as_str().to_string());
    record.code_file = id.code_file.clone();
    record.debug_file = id.debug_file.clone();
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
        Ok(())
    }
}
