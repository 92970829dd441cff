//! The indexer's part in sources for Windows and .NET debuggers (sourcelink.rs): a PDB or
//! Portable PDB asks for each document it names under the key its debugger fetches it from,
//! `src/<product>/<build>/<path>` (the path its Source Link map, else its srcsrv stream,
//! gives below its own build's URL, else its path below the upload's source root), in the same join records as a debug file's
//! DWARF paths (sourcemap.rs). A source upload of its product and build serves a document
//! only with the bytes the PDB recorded (its MD5, SHA-1 or SHA-256), whichever of the two
//! came first; the key is held by the source upload (removing the sources unpublishes it).
//!
//! What a user of a symbol server would expect, and chose so: nothing is served under `src/`
//! that no PDB of the build names with those bytes (fail closed: an edited file, another
//! build's file and a file no PDB names all 404), and a PDB published without its sources
//! lists its documents as missing until they come.

use std::io;

use super::sources::{Asked, Wanted};
use super::{Indexer, Outcome, Upload};
use crate::identity::Identity;
use crate::manifest::Record;
use crate::pdb_sources::{ChecksumAlgorithm, PdbSources};
use crate::sourcelink::{one_segment, BuildRoot, DocumentPlace};
use crate::sourcemap::Want;

/// Documents of one kind (served elsewhere, under no map or root) named one by one in a
/// record, the rest counted: a PDB names up to a million.
const NAMED_DOCUMENTS: usize = 8;

impl Indexer<'_> {
    /// A PDB's or Portable PDB's documents, for its `record` (`sources`): asked for under
    /// their `src/` keys ([`Self::want_all`]). Returns the records of the source uploads now
    /// holding keys for it; a `src/` key held with other bytes is added to `outcome`'s
    /// conflicts.
    pub(super) async fn ask_documents(
        &self,
        upload: &Upload<'_>,
        id: &Identity,
        fresh: bool,
        record: &mut Record,
        outcome: &mut Outcome,
    ) -> io::Result<Vec<Record>> {
        let Some(sources) = id.pdb_sources.as_ref().filter(|s| !s.documents.is_empty()) else {
            return Ok(Vec::new());
        };
        if !self.config.source_joins {
            return Ok(Vec::new());
        }
        let planned = DocumentWants::of(upload, id, sources);
        let mut asked = Asked::new(sources.documents.len());
        asked.report.unserved = planned.unserved;
        if planned.wants.is_empty() {
            record.sources = Some(asked.report);
            return Ok(Vec::new());
        }
        let why = format!("documents named by {}", upload.id);
        let wanted: Wanted = self
            .want_all(upload, planned.wants, asked, fresh, &why)
            .await?;
        record.sources = Some(wanted.report);
        outcome.conflicts.extend(wanted.foreign);
        Ok(wanted.holders)
    }
}

/// A PDB's documents as wants, and why the others are not asked for (pure).
struct DocumentWants {
    wants: Vec<Want>,
    unserved: Vec<String>,
}

impl DocumentWants {
    fn of(upload: &Upload<'_>, id: &Identity, sources: &PdbSources) -> DocumentWants {
        let meta = &upload.meta;
        let (product, build) = (meta.product.as_deref(), meta.build.as_deref());
        let (Some(product), Some(build)) = (product, build) else {
            let why = format!(
                "{} documents: not served under src/ (the upload names no {})",
                sources.documents.len(),
                if product.is_none() {
                    "product"
                } else {
                    "build"
                }
            );
            return DocumentWants {
                wants: Vec::new(),
                unserved: vec![why],
            };
        };
        if let Err(why) = one_segment("product", product).and(one_segment("build", build)) {
            return DocumentWants {
                wants: Vec::new(),
                unserved: vec![format!("documents not served under src/: {why}")],
            };
        }
        let root: Option<BuildRoot> = meta.source_root.as_deref().and_then(|r| r.parse().ok());
        let mut wants = Vec::new();
        let mut elsewhere = Vec::new();
        let mut unmapped = Vec::new();
        for document in &sources.documents {
            let path = &document.path;
            let key = match sources.document_key(document, root.as_ref(), (product, build)) {
                Ok(key) => key,
                Err(DocumentPlace::Elsewhere(url)) => {
                    elsewhere.push(format!("{path} → {url}"));
                    continue;
                }
                Err(_) => {
                    unmapped.push(path.clone());
                    continue;
                }
            };
            let mut want = Want {
                build_id: id.debug_id.to_string(),
                path: document.want_path(),
                upload: upload.id.clone(),
                key: Some(key),
                ..Want::default()
            };
            if let Some(checksum) = &document.checksum {
                let digest = Some(checksum.digest.clone());
                match checksum.algorithm {
                    ChecksumAlgorithm::Md5 => want.md5 = digest,
                    ChecksumAlgorithm::Sha1 => want.sha1 = digest,
                    ChecksumAlgorithm::Sha256 => want.sha256 = digest,
                }
            }
            wants.push(want);
        }
        let mut unserved = Vec::new();
        unserved.extend(summary(
            &elsewhere,
            "fetched from another host by the PDB's Source Link map or srcsrv stream",
        ));
        unserved.extend(summary(
            &unmapped,
            "under no Source Link entry or srcsrv line and no source root",
        ));
        DocumentWants { wants, unserved }
    }
}

/// One line for documents left out for the same reason: the first few named, the rest
/// counted.
fn summary(documents: &[String], why: &str) -> Option<String> {
    let (first, rest) = documents.split_at(documents.len().min(NAMED_DOCUMENTS));
    if first.is_empty() {
        return None;
    }
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{} documents {why}: {}{more}",
        documents.len(),
        first.join(", ")
    ))
}
