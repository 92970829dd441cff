//! S3 as a store (feature `s3`): ranged GETs through a small block cache, server-side copies
//! (CopyObject, or UploadPartCopy above a threshold), conditional writes for the reference
//! records. The SDK's standard retry policy (exponential backoff on throttling and 5xx) is
//! configured by whoever builds the client.
//!
//! Every call is async: the pipeline runs on the function's runtime, several messages at once,
//! with no thread parked per request. Identification (synchronous, the `object` crate's
//! readers are) runs over a prefetching reader instead: see [`S3Object::identify`].

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, MetadataDirective};
use aws_sdk_s3::Client;

#[cfg(doc)]
use super::Storage;
use super::{check_key, ObjectInfo, SeenCurrent, StorageError, StorageResult};

mod api;
mod complete;
mod encoded;
mod ingest;
mod object;
mod parts;
#[cfg(test)]
mod tests;
mod writes;

use writes::{copy_source_header, if_absent, part, HeadAnswer, Multipart, Write};

pub use ingest::{client_from_env, upload_file};
pub use object::{FirstBlock, S3Object};
use parts::{checksum_of_bodies, upload_parts, Bodies};
pub use parts::{part_size_for, PartsAtOnce, BODY_READ, PARTS_AT_ONCE};

/// Objects at least this large are copied part by part (CopyObject's limit is 5 GiB).
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 5 * 1024 * 1024 * 1024;
/// S3 allows at most this many parts per multipart upload.
const MAX_PARTS: u64 = 10_000;
const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// Files (expanded archive entries) up to this size are one PUT; larger ones are uploaded in
/// parts of at least this size, one part in memory at a time.
pub const UPLOAD_PART_SIZE: u64 = 16 * 1024 * 1024;
/// Ranged reads fetch whole blocks of this size, so neighbouring small reads cost one GET.
pub const BLOCK_SIZE: u64 = 32 * 1024;
/// What the first GET of an ingest object reads (whole blocks): most artifacts CI uploads are
/// smaller, and identifying one then needs no further request (a PE's debug directory, a
/// small PDB's stream directory or an ELF file's section headers are rarely in its first
/// 32 KiB). A GET costs the same whatever its size; the extra bytes cost a millisecond.
pub const FIRST_READ: u64 = 4 * BLOCK_SIZE;
/// Metadata key holding the content identity (the source's ETag) of a copied object, so a
/// multipart copy (whose ETag differs) still compares equal to its source.
const CONTENT_ETAG_META: &str = "symdex-content-etag";
/// Who wrote a published object (refs/: the SHA-1 of the upload whose reference it is),
/// where a writer named itself.
const OWNER_META: &str = "symdex-owner";
/// The size of the content an alias (a zero-byte redirect object) stands for.
const CONTENT_SIZE_META: &str = "symdex-content-size";

/// The user metadata of a published object: its content identity, and for a debuginfod file
/// (`buildid/...`) the headers a debuginfod server answers with, `X-Debuginfod-Size` (the
/// whole file's) and `X-Debuginfod-File` (its key, as `symdex serve` says it), which the
/// CDN's viewer-response function (infra edge/response.js) turns from
/// `x-amz-meta-debuginfod-*` into `x-debuginfod-*`.
fn object_metadata(
    key: &str,
    size: u64,
    etag: &str,
    owner: Option<&str>,
) -> std::collections::HashMap<String, String> {
    let mut meta: std::collections::HashMap<String, String> =
        [(CONTENT_ETAG_META.to_string(), etag.to_string())].into();
    if let Some(owner) = owner {
        meta.insert(OWNER_META.to_string(), owner.to_string());
    }
    let debuginfod = key.starts_with("buildid/") || key.contains("/buildid/");
    if debuginfod {
        meta.insert("debuginfod-size".into(), size.to_string());
        // Metadata travels as an HTTP header: printable ASCII only (a key with other
        // characters is served without this header).
        if key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            meta.insert("debuginfod-file".into(), key.to_string());
        }
    }
    meta
}

/// Request and byte counters, shared by a store and the readers it opens.
#[derive(Debug, Default)]
pub struct S3Stats {
    /// Ranged GETs of artifacts (identification).
    pub range_requests: AtomicU64,
    pub range_bytes: AtomicU64,
    /// Whole-object GETs (reference records, manifests).
    pub get_requests: AtomicU64,
    pub get_bytes: AtomicU64,
    pub copies: AtomicU64,
    pub part_copies: AtomicU64,
    pub puts: AtomicU64,
}

impl S3Stats {
    pub fn range_requests(&self) -> u64 {
        self.range_requests.load(Ordering::Relaxed)
    }
    pub fn range_bytes(&self) -> u64 {
        self.range_bytes.load(Ordering::Relaxed)
    }
    pub fn get_requests(&self) -> u64 {
        self.get_requests.load(Ordering::Relaxed)
    }
    pub fn get_bytes(&self) -> u64 {
        self.get_bytes.load(Ordering::Relaxed)
    }
    pub fn part_copies(&self) -> u64 {
        self.part_copies.load(Ordering::Relaxed)
    }
    pub fn copies(&self) -> u64 {
        self.copies.load(Ordering::Relaxed)
    }
}

/// A typed error from an SDK error: 404s and 412s by name, throttling and 5xx as retryable
/// service errors, transport failures (timeouts, resets) as retryable I/O errors.
fn sdk_err<E>(
    op: &'static str,
    e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> StorageError
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    match e {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let err = service.err();
            let code = err.code().unwrap_or("").to_string();
            let message = err.message().unwrap_or("").to_string();
            match (code.as_str(), status) {
                ("NoSuchKey" | "NotFound", _) | (_, 404) => {
                    StorageError::NotFound(format!("{op}: {code} {message}"))
                }
                ("PreconditionFailed" | "ConditionalRequestConflict", _) | (_, 412 | 409) => {
                    StorageError::PreconditionFailed(format!("{op}: {code}"))
                }
                _ => StorageError::Service {
                    op,
                    retryable: status >= 500
                        || status == 429
                        || matches!(
                            code.as_str(),
                            "SlowDown" | "Throttling" | "ThrottlingException" | "RequestTimeout"
                        ),
                    code: if code.is_empty() {
                        "unknown".to_string()
                    } else {
                        code
                    },
                    status,
                    message,
                },
            }
        }
        other => StorageError::Io(io::Error::other(format!("{op}: {other:?}"))),
    }
}

/// Collects a GET's body, counting the request and its bytes.
async fn read_body(
    body: ByteStream,
    requests: &AtomicU64,
    bytes: &AtomicU64,
) -> io::Result<Vec<u8>> {
    let data = body
        .collect()
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::ConnectionReset, e))?
        .into_bytes();
    requests.fetch_add(1, Ordering::Relaxed);
    bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
    Ok(data.to_vec())
}

fn unquote(etag: &str) -> String {
    etag.trim_matches('"').to_string()
}

/// An S3 bucket as a [`Storage`].
#[derive(Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    multipart_threshold: u64,
    stats: Arc<S3Stats>,
    redirect_aliases: bool,
    /// CopyObject honours `If-None-Match: *` ([`Storage::creates_only_new`]).
    conditional_copies: bool,
    /// Objects that never change once written, as first found ([`Storage::read_settled`]):
    /// shared by clones, so a Lambda reads each once per container.
    settled: Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>>,
}

impl S3Store {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        S3Store {
            client,
            bucket: bucket.into(),
            multipart_threshold: DEFAULT_MULTIPART_THRESHOLD,
            stats: Arc::new(S3Stats::default()),
            redirect_aliases: false,
            conditional_copies: true,
            settled: Default::default(),
        }
    }

    /// Whether CopyObject honours `If-None-Match: *` (SYMDEX_CONDITIONAL_COPY): Amazon S3
    /// does; moto_server, for one, copies over what is there. Without it, a fresh primary
    /// copy is made under a reference record's lease (refs/, invariant 7).
    pub fn with_conditional_copies(mut self, on: bool) -> Self {
        self.conditional_copies = on;
        self
    }

    /// Copies from another key of the store become aliases (SYMDEX_ALIASES=redirect): a
    /// zero-byte object whose `x-amz-website-redirect-location` names the source key, which
    /// the S3 website endpoint answers with a 301 and the CDN's viewer-response function
    /// (infra edge/response.js) turns into one. One stored copy per artifact; without a
    /// website endpoint or the CDN in front, keep copies.
    pub fn with_redirect_aliases(mut self, on: bool) -> Self {
        self.redirect_aliases = on;
        self
    }

    /// Objects of at least `bytes` are copied with UploadPartCopy.
    pub fn with_multipart_threshold(mut self, bytes: u64) -> Self {
        self.multipart_threshold = bytes.max(1);
        self
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn stats(&self) -> &Arc<S3Stats> {
        &self.stats
    }

    /// Any object (e.g. in the ingest bucket), for ranged reads.
    pub fn open_object(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        size: u64,
    ) -> S3Object {
        self.open_object_range(bucket, key, version_id, 0, size)
    }

    /// `size` bytes at `offset` of an object (an archive entry stored uncompressed), read as
    /// if they were an object of their own.
    pub fn open_object_range(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        offset: u64,
        size: u64,
    ) -> S3Object {
        S3Object {
            client: self.client.clone(),
            bucket: bucket.to_string(),
            key: key.to_string(),
            version_id: version_id.map(str::to_string),
            offset,
            size,
            stats: self.stats.clone(),
            first_block: None,
        }
    }

    /// What a HEAD of an ingest object says, and its first [`FIRST_READ`] bytes, by one
    /// ranged GET: an index needs both (the metadata and content identity decide the upload,
    /// every format's header is in the first block), so a fresh artifact costs one request
    /// less than a HEAD followed by identification's first read. `None`: no such object.
    pub async fn head_with_first_block(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> StorageResult<Option<FirstBlock>> {
        let result = self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_string))
            .range(format!("bytes=0-{}", FIRST_READ - 1))
            .send()
            .await;
        let out = match result {
            Ok(out) => out,
            Err(SdkError::ServiceError(e)) if e.err().is_no_such_key() => return Ok(None),
            // An empty object has no byte 0 to range over (416): a HEAD says the rest.
            Err(SdkError::ServiceError(e)) if e.raw().status().as_u16() == 416 => {
                return Ok(self.head_object(bucket, key, version_id).await?.map(
                    |(info, metadata)| FirstBlock {
                        info,
                        metadata,
                        bytes: Vec::new(),
                    },
                ))
            }
            Err(e) => return Err(sdk_err("GetObject (first block)", e)),
        };
        let metadata = out.metadata().cloned().unwrap_or_default();
        let etag = unquote(out.e_tag().unwrap_or(""));
        // `bytes 0-32767/123456`: the whole object's size follows the slash (a server that
        // ignored the range sent all of it).
        let whole = out
            .content_range()
            .and_then(|range| range.rsplit('/').next())
            .and_then(|total| total.parse().ok());
        let sent = u64::try_from(out.content_length().unwrap_or(0)).unwrap_or(0);
        let stats = &self.stats;
        let bytes = read_body(out.body, &stats.range_requests, &stats.range_bytes).await?;
        Ok(Some(FirstBlock {
            info: ObjectInfo {
                size: whole.unwrap_or(sent),
                etag,
            },
            metadata,
            bytes,
        }))
    }

    /// Writes a local file (an expanded archive entry) under `key`, its SHA-1 as its content
    /// identity (as a local store has it): one PUT up to [`UPLOAD_PART_SIZE`], else a multipart
    /// upload whose parts are streamed from the file with their CRC-32 (memory holds no part).
    async fn put_file(
        &self,
        key: &str,
        path: &std::path::Path,
        write: Write<'_>,
    ) -> StorageResult<ObjectInfo> {
        use tokio::io::AsyncReadExt;
        check_key(key)?;
        let size = tokio::fs::metadata(path).await?.len();
        let sha1 = {
            let mut file = tokio::fs::File::open(path).await?;
            let mut hasher = crate::digest::Sha1::new();
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = file.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            hasher.hex()
        };
        if size <= UPLOAD_PART_SIZE {
            let bytes = tokio::fs::read(path).await?;
            return self.put_new(key, &bytes, Some(&sha1), write).await;
        }
        let checksum = checksum_of_bodies(&self.client);
        let upload = self.begin_multipart(key, size, &sha1, write, checksum.clone());
        let upload = upload.await?;
        let bodies = Bodies::Path(path);
        let parts = PartsAtOnce::default();
        let (bucket, id) = (&self.bucket, &upload.id);
        let parts = upload_parts(
            &self.client,
            bucket,
            key,
            id,
            bodies,
            size,
            checksum,
            &parts,
        );
        let parts = parts.await;
        if let Ok(sent) = &parts {
            let requests = u64::try_from(sent.len()).unwrap_or(u64::MAX);
            self.stats.puts.fetch_add(requests, Ordering::Relaxed);
        }
        upload.finish(parts, size, &sha1).await?;
        Ok(ObjectInfo { size, etag: sha1 })
    }

    /// HEAD of any object: size, ETag and user metadata.
    pub async fn head_object(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> StorageResult<Option<(ObjectInfo, HashMap<String, String>)>> {
        Ok(self
            .head_object_versioned(bucket, key, version_id)
            .await?
            .map(|(info, meta, _, _)| (info, meta)))
    }

    /// [`Self::head_object`], also returning the version id of what answered (the current
    /// version when `version_id` is `None`; `None` in an unversioned bucket) and where it
    /// redirects (an alias).
    pub async fn head_object_versioned(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> StorageResult<Option<HeadAnswer>> {
        let result = self
            .client
            .head_object()
            .bucket(bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_string))
            .send()
            .await;
        match result {
            Ok(out) => {
                let meta = out.metadata().cloned().unwrap_or_default();
                let etag = meta
                    .get(CONTENT_ETAG_META)
                    .cloned()
                    .unwrap_or_else(|| unquote(out.e_tag().unwrap_or("")));
                // An alias answers for the content it redirects to.
                let aliased = out
                    .website_redirect_location()
                    .and(meta.get(CONTENT_SIZE_META))
                    .and_then(|s| s.parse().ok());
                let size = aliased.unwrap_or_else(|| {
                    u64::try_from(out.content_length().unwrap_or(0)).unwrap_or(0)
                });
                let version = out.version_id().map(str::to_string);
                let redirect = out.website_redirect_location().map(str::to_string);
                Ok(Some((ObjectInfo { size, etag }, meta, version, redirect)))
            }
            Err(SdkError::ServiceError(e)) if e.err().is_not_found() => Ok(None),
            Err(e) => Err(sdk_err("HeadObject", e)),
        }
    }

    /// Deletes one ingest object of another bucket: the version `version_id`, or (an
    /// unversioned bucket) the object only while it still holds `etag`, so a newer upload
    /// under the same key stays. `false`: it was already gone or had changed.
    pub async fn delete_object_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        etag: &str,
    ) -> StorageResult<bool> {
        let request = self.client.delete_object().bucket(bucket).key(key);
        let request = match version_id {
            Some(version) => request.version_id(version),
            None => request.if_match(format!("\"{etag}\"")),
        };
        match request.send().await {
            Ok(_) => Ok(true),
            Err(e) => match sdk_err("DeleteObject (ingest)", e) {
                StorageError::PreconditionFailed(_) | StorageError::NotFound(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    async fn copy_single(
        &self,
        copy_source: &str,
        key: &str,
        size: u64,
        etag: &str,
        write: Write<'_>,
    ) -> StorageResult<()> {
        self.copy_single_if(copy_source, None, key, size, etag, write)
            .await
            .map(|_| ())
    }

    /// [`Self::copy_single`], only if the source's ETag is `source_etag` (when given): what
    /// was copied, as CopyObject says — the source's version id and the new object's ETag.
    async fn copy_single_if(
        &self,
        copy_source: &str,
        source_etag: Option<&str>,
        key: &str,
        size: u64,
        etag: &str,
        write: Write<'_>,
    ) -> StorageResult<(Option<String>, Option<String>)> {
        let out = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(key)
            .set_if_none_match(if_absent(write.only_new))
            .copy_source(copy_source)
            .set_copy_source_if_match(source_etag.map(|e| format!("\"{e}\"")))
            .metadata_directive(MetadataDirective::Replace)
            .set_metadata(Some(object_metadata(key, size, etag, write.owner)))
            .content_type("application/octet-stream")
            .send()
            .await
            .map_err(|e| sdk_err("CopyObject", e))?;
        self.stats.copies.fetch_add(1, Ordering::Relaxed);
        let version = out.copy_source_version_id().map(str::to_string);
        let copied = out
            .copy_object_result()
            .and_then(|r| r.e_tag())
            .map(unquote);
        Ok((version, copied))
    }

    /// Copies an ingest object from the bucket's *current* object at its key (not the
    /// version by id), on condition that it holds the indexed ETag, so that the copy itself
    /// says whether the object is still live ([`SeenCurrent`]): one request instead of a
    /// copy and a liveness HEAD per artifact. `false`: nothing was written and the usual copy
    /// (by version id) must decide — the current object is another or a delete marker, or,
    /// `write` being `only_new`, something is at `key` (a 412 does not say which condition
    /// failed: the usual copy, asking only for the key, tells).
    ///
    /// A store that ignores `x-amz-copy-source-if-match` (moto_server) copies whatever is
    /// current: what CopyObject says it copied is checked, and another version's bytes are
    /// written over at once with the indexed version's (the object is ours, just written).
    #[allow(clippy::too_many_arguments)]
    async fn copy_from_current(
        &self,
        bucket: &str,
        src_key: &str,
        version_id: Option<&str>,
        key: &str,
        info: &ObjectInfo,
        write: Write<'_>,
        seen: &SeenCurrent,
    ) -> StorageResult<bool> {
        let current = copy_source_header(bucket, src_key, None);
        let copied = self
            .copy_single_if(
                &current,
                Some(&info.etag),
                key,
                info.size,
                &info.etag,
                write,
            )
            .await;
        let (copied_version, copied_etag) = match copied {
            Ok(copied) => copied,
            Err(StorageError::PreconditionFailed(_) | StorageError::NotFound(_)) => {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        let same_bytes = copied_etag.as_deref() == Some(info.etag.as_str());
        match version_id {
            Some(version) if copied_version.as_deref() == Some(version) => seen.mark(),
            // Another version of the same bytes: the indexed one may be gone (the usual
            // liveness check asks).
            Some(_) if same_bytes => {}
            Some(version) => {
                let indexed = copy_source_header(bucket, src_key, Some(version));
                let over = Write {
                    only_new: false,
                    ..write
                };
                self.copy_single(&indexed, key, info.size, &info.etag, over)
                    .await?;
            }
            // Unversioned: the key still holds the indexed content. Other bytes mean it was
            // overwritten: the liveness check finds so, and the upload takes its keys back.
            None if same_bytes => seen.mark(),
            None => {}
        }
        Ok(true)
    }

    /// Copies `size` bytes at `offset` of `copy_source` part by part (UploadPartCopy with
    /// `x-amz-copy-source-range`): a whole large object, or one range of it.
    async fn copy_multipart(
        &self,
        copy_source: &str,
        key: &str,
        offset: u64,
        size: u64,
        etag: &str,
        write: Write<'_>,
    ) -> StorageResult<()> {
        let part_size = size
            .div_ceil(MAX_PARTS)
            .max(MIN_PART_SIZE)
            .max(self.multipart_threshold.min(512 << 20));
        let upload = self.begin_multipart(key, size, etag, write, None).await?;
        let parts = async {
            let mut parts = Vec::new();
            let mut start = 0u64;
            let mut number = 1i32;
            while start < size {
                let end = (start + part_size).min(size) - 1;
                let (first, last) = (offset + start, offset + end);
                let out = self
                    .client
                    .upload_part_copy()
                    .bucket(&self.bucket)
                    .key(key)
                    .upload_id(&upload.id)
                    .part_number(number)
                    .copy_source(copy_source)
                    .copy_source_range(format!("bytes={first}-{last}"))
                    .send()
                    .await
                    .map_err(|e| sdk_err("UploadPartCopy", e))?;
                self.stats.part_copies.fetch_add(1, Ordering::Relaxed);
                let part_etag = out
                    .copy_part_result()
                    .and_then(|r| r.e_tag())
                    .unwrap_or_default();
                parts.push(part(number, part_etag));
                start = end + 1;
                number += 1;
            }
            Ok(parts)
        }
        .await;
        upload.finish(parts, size, etag).await
    }

    async fn begin_multipart<'s>(
        &'s self,
        key: &'s str,
        size: u64,
        etag: &str,
        write: Write<'_>,
        checksum: Option<ChecksumAlgorithm>,
    ) -> StorageResult<Multipart<'s>> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .set_checksum_algorithm(checksum)
            .set_metadata(Some(object_metadata(key, size, etag, write.owner)))
            .content_type("application/octet-stream")
            .send()
            .await
            .map_err(|e| sdk_err("CreateMultipartUpload", e))?;
        Ok(Multipart {
            store: self,
            key,
            id: created.upload_id().unwrap_or_default().to_string(),
            only_new: write.only_new,
        })
    }
}
