//! Compressed copies in S3 (crate::encoded): an object with `Content-Encoding`, the raw
//! content it encodes in its metadata (`symdex-raw-size`, `symdex-raw-etag`), and the raw's
//! debuginfod headers (`debuginfod-size` is the raw size: what a client's progress and its
//! check of the decoded file count). Stored in parts from the staged file: memory holds one
//! part, whatever the copy's size (a small artifact's copy, staged in memory, is sent from
//! there).

use std::io;
use std::sync::atomic::Ordering;

use super::ingest::{upload, Target};
use super::parts::{part_size_for, Bodies, PartsAtOnce};
use super::{object_metadata, sdk_err, unquote, S3Store, UPLOAD_PART_SIZE};
use crate::storage::encoding::{EncodedMeta, Encoding, Staged, StagedBytes};
use crate::storage::{check_key, CopySource, ObjectInfo, StorageResult};

const RAW_SIZE_META: &str = "symdex-raw-size";
const RAW_ETAG_META: &str = "symdex-raw-etag";

impl S3Store {
    pub(super) async fn put_encoded_now(
        &self,
        key: &str,
        staged: &Staged,
        meta: &EncodedMeta,
    ) -> StorageResult<()> {
        check_key(key)?;
        let raw_key = crate::storage::encoding::raw_key_of(key).map_or(key, |(_, raw)| raw);
        let mut metadata = object_metadata(raw_key, meta.raw.size, &meta.raw.etag, None);
        metadata.remove(super::CONTENT_ETAG_META);
        metadata.insert(RAW_SIZE_META.into(), meta.raw.size.to_string());
        metadata.insert(RAW_ETAG_META.into(), meta.raw.etag.clone());
        let target = Target {
            bucket: &self.bucket,
            key,
            metadata,
            content_encoding: Some(meta.encoding.as_str()),
        };
        // One part at a time: the copy follows its live key (no client waits for it), and
        // an unnamed file's part is read into memory to be sent; a copy staged in memory is
        // sent from there.
        let parts = PartsAtOnce::new(1);
        let bodies = match &staged.bytes {
            StagedBytes::File(file) => Bodies::Open(file),
            StagedBytes::Memory(bytes) => Bodies::Memory(bytes),
        };
        upload(
            &self.client,
            target,
            bodies,
            staged.size,
            UPLOAD_PART_SIZE,
            &parts,
        )
        .await?;
        let requests = if staged.size <= UPLOAD_PART_SIZE {
            1
        } else {
            staged.size.div_ceil(part_size_for(staged.size))
        };
        self.stats.puts.fetch_add(requests, Ordering::Relaxed);
        Ok(())
    }

    pub(super) async fn encoded_now(&self, key: &str) -> StorageResult<Option<(u64, EncodedMeta)>> {
        check_key(key)?;
        let Some((encoding, _)) = crate::storage::encoding::raw_key_of(key) else {
            return Ok(None);
        };
        let Some((info, meta)) = self.head_object(&self.bucket, key, None).await? else {
            return Ok(None);
        };
        Ok(raw_of(&meta, encoding).map(|raw| (info.size, raw)))
    }

    /// Streams `source`'s bytes into `out`: a GET of the ingest object (or of its range, an
    /// archive entry stored uncompressed), or of a key of this bucket.
    pub(super) async fn read_source_now(
        &self,
        source: &CopySource<'_>,
        out: &mut (dyn io::Write + Send),
    ) -> StorageResult<u64> {
        let (bucket, key, version_id, range) = match *source {
            CopySource::Bytes(bytes) => {
                out.write_all(bytes)?;
                return Ok(bytes.len() as u64);
            }
            CopySource::File(path) => return Ok(io::copy(&mut std::fs::File::open(path)?, out)?),
            CopySource::Key(key) => (self.bucket.as_str(), key, None, None),
            CopySource::Object {
                bucket,
                key,
                version_id,
                ..
            } => (bucket, key, version_id, None),
            CopySource::Range {
                bucket,
                key,
                version_id,
                offset,
                size,
                ..
            } => {
                let last = offset.saturating_add(size).saturating_sub(1);
                (
                    bucket,
                    key,
                    version_id,
                    Some(format!("bytes={offset}-{last}")),
                )
            }
        };
        let got = self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_string))
            .set_range(range)
            .send()
            .await
            .map_err(|e| sdk_err("GetObject", e))?;
        self.stats.get_requests.fetch_add(1, Ordering::Relaxed);
        let mut body = got.body;
        let mut total = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionReset, e))?
        {
            out.write_all(&chunk)?;
            total += chunk.len() as u64;
        }
        self.stats.get_bytes.fetch_add(total, Ordering::Relaxed);
        Ok(total)
    }
}

fn raw_of(
    meta: &std::collections::HashMap<String, String>,
    encoding: Encoding,
) -> Option<EncodedMeta> {
    let size = meta.get(RAW_SIZE_META)?.parse().ok()?;
    let etag = unquote(meta.get(RAW_ETAG_META)?);
    Some(EncodedMeta {
        encoding,
        raw: ObjectInfo { size, etag },
    })
}
