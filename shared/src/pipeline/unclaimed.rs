//! Sources without flags (sourcemap.rs has the rule): a file no format claims is indexed as a
//! source when a debug file of its scope names it, whichever of the two came first. The file
//! notes itself in its join record unless a want there names it ([`Indexer::named_by`]); a
//! debug file has the noted files its paths match indexed again through the front end's
//! [`HandOver`] ([`Indexer::claiming_sources_through`]), and they find its want then.
//!
//! Invariant: a file and a debug file naming it swap the same join record (one base name, one
//! scope), the file's note and the debug file's wants each before it reads what the other
//! left; so whichever swaps second sees the other, and the file is indexed as a source by
//! one of them (or both: indexing an upload twice is a redelivery). A sole writer deferring
//! its source-map writes makes the same changes in input order, each input after the ones
//! before it were taken (`register_source_map_changes`): the same argument, one at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::sources::offer_of;
use super::upload::ClaimedPath;
use super::{HandOver, Indexer, SourceMapChange, Upload};
use crate::formats::FormatError;
use crate::identity::{Identity, Kind};
use crate::layouts::Layout;
use crate::manifest::{Action, Record};
use crate::refs::{UploadRecord, UploadState};
use crate::sourcemap::{self, NamedBy, Unclaimed};

impl<'s> Indexer<'s> {
    /// Noted files a debug file names are indexed again through `claim` (the front end's way
    /// of reading an upload's bytes again, as for a hand-over), so that they are indexed as
    /// its sources. Without it unclaimed files are not noted, and only a debug file indexed
    /// before a file makes it a source.
    pub fn claiming_sources_through(mut self, claim: &'s dyn HandOver) -> Self {
        self.claim = Some(claim);
        self
    }

    /// For an upload `identified` as nothing known (and not asked to be a source), whose
    /// bytes may be text (`formats::source::may_be_text`, the caller's to ask): the wants of
    /// its scope naming its path, where there are any. Its note is swapped into its join
    /// record first, unless a want there names it already (`SourceMapRecord::note`). The
    /// caller identifies it as a source and indexes it so where [`NamedBy::admits`] it.
    pub(super) async fn named_by(
        &self,
        upload: &Upload<'_>,
        identified: &Result<Vec<Identity>, FormatError>,
    ) -> io::Result<Option<NamedBy>> {
        let candidate = matches!(identified, Err(FormatError::Unrecognized(_)))
            && !upload.options.as_source
            && self.config.source_joins
            && self.config.layouts.contains(&Layout::Debuginfod);
        if !candidate {
            return Ok(None);
        }
        let (path, file) = offer_of(upload);
        // Never a source without a flag, named or not (THREATS.md, invariant 2): not even
        // noted, so no debug file claims it; its skipped record says why (`index.rs`).
        if sourcemap::secret_shaped(&path).is_some() {
            return Ok(None);
        }
        let unclaimed = Unclaimed {
            path,
            root: upload.meta.source_root.clone(),
            upload: upload.id.clone(),
            source: upload.source_name(),
            version: upload.ingest_version.clone(),
            ingest_etag: upload.ingest_etag().to_string(),
            entry: upload.entry.as_ref().map(|e| e.path.clone()),
            meta: upload.meta.clone(),
        };
        let record = match self.claim {
            None => self.refs.source_map(&file).await?,
            Some(_) if self.refs.defers_source_maps() => {
                let note = SourceMapChange::Note(file.clone(), Box::new(unclaimed.clone()));
                self.change_source_map(&upload.id, note).await?;
                self.refs.source_map(&file).await?
            }
            Some(_) => {
                self.refs
                    .update_source_map(&file, |r| r.note(&unclaimed))
                    .await?
            }
        };
        let wants = record.naming(&unclaimed);
        Ok((!wants.is_empty()).then_some(NamedBy { unclaimed, wants }))
    }

    /// Adds to `claims` the noted files of a debug file's join `record` that may serve the
    /// wanted `path`, each to be indexed again ([`Self::claim_noted`]) — also where an offer
    /// serves it: that may be the file's own, made by a claim that died before the file's
    /// upload was indexed. `true` when there are any.
    pub(super) fn noted_for(
        &self,
        record: &sourcemap::SourceMapRecord,
        path: &str,
        md5: Option<&str>,
        claims: &mut BTreeMap<String, Unclaimed>,
    ) -> bool {
        if self.claim.is_none() {
            return false;
        }
        let noted = record.unclaimed_for(path, md5);
        for noted in &noted {
            claims
                .entry(noted.upload.clone())
                .or_insert_with(|| (*noted).clone());
        }
        !noted.is_empty()
    }

    /// Has the noted files of `claims` indexed again for the debug file `upload` once its
    /// wants are made and its run is done: when the upload is taken (a sole writer deferring
    /// its source-map writes, `register_source_map_changes`), else at the end of its
    /// `index_looked_up` — never from deep inside its own indexing, whose futures the
    /// re-index's would sit on (a debug build's stack overflowed on S3). `paths`: the wanted
    /// paths no offer served, which the claims may serve (its report is mended after them).
    pub(super) fn claim_noted(
        &self,
        upload: &str,
        claims: BTreeMap<String, Unclaimed>,
        paths: Vec<ClaimedPath>,
    ) {
        if claims.is_empty() {
            return;
        }
        let change = SourceMapChange::Claim(claims.into_values().collect(), paths);
        self.pend_source_map_change(upload, change);
    }

    /// Indexes noted files again through the front end, unless they were indexed (they find
    /// the wants naming them now), and drops each note once its upload is indexed: the upload
    /// then exists, and its own removal and redeliveries take over. A note stays until then,
    /// so that a debug file whose run died while a file was half indexed has it indexed again
    /// when retried (the file's own message was answered long ago: nothing else would). The
    /// entries of one archive are one re-read: the archive is walked again once, not once per
    /// entry its debug file names.
    pub(super) async fn reindex_noted(&self, noted: &[Unclaimed]) -> io::Result<()> {
        let Some(claim) = self.claim else {
            return Ok(());
        };
        let mut reread = BTreeSet::new();
        for noted in noted {
            let input = (&noted.source, &noted.version, &noted.ingest_etag);
            if !self.upload_indexed(&noted.upload).await? && reread.insert(input) {
                claim.reindex(&waiter_of(noted), &BTreeSet::new()).await?;
            }
            // Not a source after all (its content is not what the DWARF records), or gone.
            if !self.upload_indexed(&noted.upload).await? {
                continue;
            }
            let scope = sourcemap::Scope::of(&noted.meta);
            let file = sourcemap::record_file(&scope, sourcemap::base_name(&noted.path));
            self.refs
                .update_source_map(&file, |r| r.claimed(&noted.upload))
                .await?;
        }
        Ok(())
    }

    async fn upload_indexed(&self, upload: &str) -> io::Result<bool> {
        let record = self.refs.upload(upload).await?;
        Ok(record.is_some_and(|r| r.state == UploadState::Indexed))
    }

    /// Of the `paths` a debug file's `record` says no source serves, those served now by a
    /// `noted` file indexed again (it holds their keys) are moved to `served`. A key held by
    /// another product's upload instead is a conflict of the debug file, that product named
    /// (THREATS.md, tenancy: never a silent "served"). `true` when it found one.
    pub(super) async fn report_claimed(
        &self,
        noted: &[Unclaimed],
        paths: &[ClaimedPath],
        record: &mut Record,
    ) -> io::Result<bool> {
        let Some(report) = record.sources.as_mut() else {
            return Ok(false);
        };
        let claimers: BTreeSet<&str> = noted.iter().map(|n| n.upload.as_str()).collect();
        let mut served = BTreeSet::new();
        let mut taken = Vec::new();
        for (path, key) in paths {
            let Some(held) = self.refs.is_live(key).await? else {
                continue;
            };
            if held.refs.iter().any(|u| claimers.contains(u.as_str())) {
                served.insert(path.as_str());
            } else {
                taken.push((path.as_str(), key.clone()));
            }
        }
        let before = report.missing.len() + report.unserved.len();
        report.missing.retain(|p| !served.contains(p.as_str()));
        report
            .unserved
            .retain(|u| !u.split_once(": ").is_some_and(|(p, _)| served.contains(p)));
        report.served += before - report.missing.len() - report.unserved.len();
        let keys: Vec<String> = taken.iter().map(|(_, key)| key.clone()).collect();
        let product = record.meta.product.as_deref();
        let products = self.other_products(&record.upload, product, &keys).await?;
        if products.is_empty() {
            return Ok(false);
        }
        let taken_paths: BTreeSet<&str> = taken.iter().map(|(path, _)| *path).collect();
        report.missing.retain(|p| !taken_paths.contains(p.as_str()));
        for (path, key) in &taken {
            report.unserved.push(format!(
                "{path}: {key} holds another product's source ({})",
                products.join(", ")
            ));
        }
        record.conflicts.extend(keys);
        record.action = Some(Action::Conflict);
        self.flag_cross_product(record).await?;
        Ok(true)
    }
}

/// The reason an upload identified as `error` is skipped or rejected: the error, and for a
/// file no format claims whose name is secret-shaped, that it is never a source unless
/// flagged (THREATS.md, invariant 2), so that a debug file naming it explains nothing away.
pub(super) fn skip_reason(upload: &Upload<'_>, error: &FormatError) -> String {
    let (path, _) = offer_of(upload);
    match (error, sourcemap::secret_shaped(&path)) {
        (FormatError::Unrecognized(_), Some(what)) if !upload.options.as_source => format!(
            "{error}; its name is secret-shaped ({what}): never published as a source \
             unless flagged as one (--source, --source-ext; the Lambda's \
             SYMDEX_SOURCE_PREFIX, SYMDEX_SOURCE_EXTENSIONS)"
        ),
        _ => error.to_string(),
    }
}

/// What a front end's re-read of a noted file takes (`HandOver::reindex`): where its bytes
/// are, as an upload waiting for a key would be found.
fn waiter_of(noted: &Unclaimed) -> UploadRecord {
    UploadRecord {
        upload: noted.upload.clone(),
        source: noted.source.clone(),
        meta: noted.meta.clone(),
        ingest_version: noted.version.clone(),
        ingest_etag: Some(noted.ingest_etag.clone()),
        entry: noted.entry.clone(),
        // Under a source root a loose file's path is where it sat in its tree, which a
        // re-read from elsewhere would not find again.
        source_path: (noted.root.is_some() && noted.entry.is_none()).then(|| noted.path.clone()),
        ..UploadRecord::default()
    }
}

/// Whether a want of `named` takes the upload `identified` as a source (by its MD5).
pub(super) fn admits(named: &NamedBy, identified: &Result<Vec<Identity>, FormatError>) -> bool {
    match identified {
        Ok(ids) => ids
            .iter()
            .any(|id| id.kind == Kind::Source && named.admits(id.md5.as_deref())),
        Err(_) => false,
    }
}
