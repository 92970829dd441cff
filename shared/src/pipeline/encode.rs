//! The encode step: compressed copies of the keys an upload has just published
//! (crate::encoded), made after the keys are live — a client is never kept waiting for a
//! copy, and a key without one answers with its raw bytes.
//!
//! Invariant (crate::encoded): a copy is written only after its raw key was published with
//! the content it encodes, and is looked at again after the write: the key gone or holding
//! other content meanwhile (a removal or an overwrite in between), the copy is deleted again.
//! A copy that fails is noted in the upload's record; the upload stands (its keys are live).

use std::io;

use super::upload::Upload;
use super::Indexer;
use crate::encoded::{
    copies_of_bytes, copy_key, staged_in_memory, worth_keeping, EncodedMeta, Encoding, Staged,
    Stager,
};
use crate::storage::{CopySource, ObjectInfo};

impl Indexer<'_> {
    /// Stores copies of the upload's bytes beside `keys` (keys it has just published, each
    /// holding its bytes) in every configured encoding worth keeping; returns the notes the
    /// upload's record carries (copies that failed). Keys the upload found in place were
    /// copied when they were first published: a re-index compresses nothing again.
    pub(super) async fn encode_published(
        &self,
        upload: &Upload<'_>,
        keys: &[String],
    ) -> Vec<String> {
        let content = upload.content();
        let encodings: Vec<Encoding> = self.config.compress.iter().collect();
        if keys.is_empty() || encodings.is_empty() || content.size < crate::encoded::MIN_RAW_SIZE {
            return Vec::new();
        }
        let staged = match self.stage(&content.source, content.size, &encodings).await {
            Ok(staged) => staged,
            Err(e) => return vec![format!("no compressed copy: {e}")],
        };
        let raw = ObjectInfo {
            size: content.size,
            etag: content.etag.to_string(),
        };
        let mut notes = Vec::new();
        for (encoding, staged) in staged {
            if !worth_keeping(raw.size, staged.size) {
                continue;
            }
            let meta = EncodedMeta {
                encoding,
                raw: raw.clone(),
            };
            for key in keys {
                if let Err(e) = self.store_copy(key, &staged, &meta).await {
                    notes.push(format!("no {encoding} copy of {key}: {e}"));
                }
            }
        }
        notes
    }

    /// The upload's bytes compressed in each encoding (one read of them): a small upload's
    /// copies in memory, a large one's in temporary files (crate::encoded::Stager). Small
    /// bytes the upload holds in memory already (an archive entry, a section) are compressed
    /// from where they are, not copied into a stager's buffer first.
    async fn stage(
        &self,
        source: &CopySource<'_>,
        size: u64,
        encodings: &[Encoding],
    ) -> io::Result<Vec<(Encoding, Staged)>> {
        if let CopySource::Bytes(bytes) = source {
            if bytes.len() as u64 == size && staged_in_memory(size) {
                return copies_of_bytes(encodings, bytes);
            }
        }
        let mut stager = Stager::new(encodings, size)?;
        let read = self.store.read_source(source, &mut stager).await?;
        stager.finish(read)
    }

    /// Writes one copy, then looks at its key: a copy of content the key no longer holds
    /// is deleted again (the invariant above). The look compares the content the key's
    /// writer named (`owned_unread`), not a hash of its bytes: what `symdex serve` checks
    /// before it answers with the copy is the same name, and a removal or an overwrite
    /// replaces the file and its name at once. Hashing read every key's bytes back once per
    /// key (an artifact's whole file for each of its layouts' keys).
    pub(super) async fn store_copy(
        &self,
        key: &str,
        staged: &Staged,
        meta: &EncodedMeta,
    ) -> io::Result<()> {
        let copy = copy_key(meta.encoding, key);
        self.store.put_encoded(&copy, staged, meta).await?;
        let now = self.store.owned_unread(key).await?;
        let holds = now.is_some_and(|found| {
            let written = found.written.unwrap_or(found.info);
            found.alias_of.is_none() && written == meta.raw
        });
        if !holds {
            self.store.delete(&copy).await?;
            return Err(io::Error::other(
                "the key changed while its copy was made (copy withdrawn)",
            ));
        }
        Ok(())
    }
}
