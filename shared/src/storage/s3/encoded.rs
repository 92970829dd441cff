//! Compressed copies in S3 (crate::encoded): an object with `Content-Encoding`, the raw
//! content it encodes in its metadata (`symdex-raw-size`, `symdex-raw-etag`), and the raw's
//! debuginfod headers (`debuginfod-size` is the raw size: what a client's progress and its
//! check of the decoded file count). Stored in parts from the staged file: memory holds one
//! part, whatever the copy's size.

use std::io::{self, Read};
use std::sync::atomic::Ordering;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::CompletedMultipartUpload;

use super::writes::part;
use super::{object_metadata, sdk_err, unquote, S3Store, UPLOAD_PART_SIZE};
use crate::storage::encoding::{EncodedMeta, Encoding, Staged};
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
        let encoding = meta.encoding.as_str();
        let mut reader = staged.reader()?;
        if staged.size <= UPLOAD_PART_SIZE {
            let mut bytes = Vec::with_capacity(usize::try_from(staged.size).unwrap_or(0));
            reader.read_to_end(&mut bytes)?;
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_encoding(encoding)
                .set_metadata(Some(metadata))
                .body(ByteStream::from(bytes))
                .send()
                .await
                .map_err(|e| sdk_err("PutObject", e))?;
            self.stats.puts.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_encoding(encoding)
            .set_metadata(Some(metadata))
            .send()
            .await
            .map_err(|e| sdk_err("CreateMultipartUpload", e))?;
        let upload_id = created.upload_id().unwrap_or_default().to_string();
        let sent = self
            .send_parts(key, &upload_id, &mut reader, staged.size)
            .await;
        let parts = match sent {
            Ok(parts) => parts,
            Err(e) => {
                // Best effort: the bucket's lifecycle rule ends what this leaves.
                let _ = self
                    .client
                    .abort_multipart_upload()
                    .bucket(&self.bucket)
                    .key(key)
                    .upload_id(&upload_id)
                    .send()
                    .await;
                return Err(e);
            }
        };
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(&upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| sdk_err("CompleteMultipartUpload", e))?;
        Ok(())
    }

    /// The staged copy's parts, one after another (the copy follows its live key: no
    /// client waits for it).
    async fn send_parts(
        &self,
        key: &str,
        upload_id: &str,
        reader: &mut impl Read,
        size: u64,
    ) -> StorageResult<Vec<aws_sdk_s3::types::CompletedPart>> {
        let part_size = size.div_ceil(super::MAX_PARTS).max(UPLOAD_PART_SIZE);
        let mut parts = Vec::new();
        let mut left = size;
        let mut number = 1i32;
        while left > 0 {
            let len = part_size.min(left);
            let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
            reader.read_exact(&mut bytes)?;
            left -= len;
            let out = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .body(ByteStream::from(bytes))
                .send()
                .await
                .map_err(|e| sdk_err("UploadPart", e))?;
            self.stats.puts.fetch_add(1, Ordering::Relaxed);
            parts.push(part(number, out.e_tag().unwrap_or_default()));
            number += 1;
        }
        Ok(parts)
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
