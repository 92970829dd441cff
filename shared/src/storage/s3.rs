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
use std::sync::{Arc, Mutex};

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, MetadataDirective};
use aws_sdk_s3::Client;

use super::{
    check_key, CopySource, ObjectInfo, Owned, Precondition, SeenCurrent, Storage, StorageError,
    StorageFuture, StorageResult, Versioned,
};
use crate::reader::RangeReader;

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
    /// upload read part by part, so memory holds one part, never the file.
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
        let part_size = size.div_ceil(MAX_PARTS).max(UPLOAD_PART_SIZE);
        let upload = self.begin_multipart(key, size, &sha1, write).await?;
        let parts = async {
            let mut file = tokio::fs::File::open(path).await?;
            let mut parts = Vec::new();
            let mut number = 1i32;
            let mut left = size;
            while left > 0 {
                let len = part_size.min(left);
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
                file.read_exact(&mut bytes).await?;
                left -= len;
                let out = self
                    .client
                    .upload_part()
                    .bucket(&self.bucket)
                    .key(key)
                    .upload_id(&upload.id)
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
        .await;
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
        let upload = self.begin_multipart(key, size, etag, write).await?;
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
    ) -> StorageResult<Multipart<'s>> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
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

/// What a HEAD answers: size and content identity, user metadata, version id, redirect.
pub type HeadAnswer = (
    ObjectInfo,
    HashMap<String, String>,
    Option<String>,
    Option<String>,
);

/// How an object is written: only where nothing is (`If-None-Match: *`), naming an owner.
#[derive(Debug, Clone, Copy, Default)]
struct Write<'a> {
    only_new: bool,
    owner: Option<&'a str>,
}

/// The `If-None-Match` of a write made `only_new` (where nothing is at the key).
fn if_absent(only_new: bool) -> Option<String> {
    only_new.then(|| "*".to_string())
}

fn part(number: i32, etag: &str) -> CompletedPart {
    CompletedPart::builder()
        .part_number(number)
        .e_tag(etag)
        .build()
}

/// One multipart upload of a key (a part copy or a file's parts): begun with the content
/// identity in its metadata, then completed with its parts, or aborted.
struct Multipart<'s> {
    store: &'s S3Store,
    key: &'s str,
    id: String,
    /// Completed only where nothing is at the key (`If-None-Match: *`).
    only_new: bool,
}

impl Multipart<'_> {
    /// Completes the upload with `parts` (or aborts it when they failed). A completion whose
    /// answer was lost or could not be parsed may still have happened: the object with our
    /// size and content identity is the proof.
    async fn finish(
        self,
        parts: StorageResult<Vec<CompletedPart>>,
        size: u64,
        etag: &str,
    ) -> StorageResult<()> {
        let store = self.store;
        let result = match parts {
            Ok(parts) => {
                let completed = store
                    .client
                    .complete_multipart_upload()
                    .bucket(&store.bucket)
                    .key(self.key)
                    .upload_id(&self.id)
                    .set_if_none_match(if_absent(self.only_new))
                    .multipart_upload(
                        CompletedMultipartUpload::builder()
                            .set_parts(Some(parts))
                            .build(),
                    )
                    .send()
                    .await;
                match completed {
                    Ok(_) => Ok(()),
                    Err(e) => {
                        let error = sdk_err("CompleteMultipartUpload", e);
                        let head = store
                            .client
                            .head_object()
                            .bucket(&store.bucket)
                            .key(self.key)
                            .send()
                            .await;
                        let done = head.is_ok_and(|h| {
                            h.content_length() == i64::try_from(size).ok()
                                && h.metadata()
                                    .and_then(|m| m.get(CONTENT_ETAG_META))
                                    .map(String::as_str)
                                    == Some(etag)
                        });
                        if done {
                            tracing_free_note(&error);
                            Ok(())
                        } else {
                            Err(error)
                        }
                    }
                }
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            let _ = store
                .client
                .abort_multipart_upload()
                .bucket(&store.bucket)
                .key(self.key)
                .upload_id(&self.id)
                .send()
                .await;
        }
        result
    }
}

/// A completion error that HEAD proved harmless is not worth failing for; it is reported on
/// stderr so it stays visible in the function's logs.
fn tracing_free_note(error: &StorageError) {
    eprintln!("symdex: multipart copy completed despite: {error}");
}

/// `CopySource` header value: `bucket/key[?versionId=v]`, the key percent-encoded.
fn copy_source_header(bucket: &str, key: &str, version_id: Option<&str>) -> String {
    let encoded: String = key
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    match version_id {
        Some(v) => format!("{bucket}/{encoded}?versionId={v}"),
        None => format!("{bucket}/{encoded}"),
    }
}

impl S3Store {
    async fn get_now(&self, key: &str) -> StorageResult<Option<Versioned>> {
        check_key(key)?;
        let result = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        match result {
            Ok(out) => {
                // The version is the ETag of exactly the bytes returned (one response).
                let version = unquote(out.e_tag().unwrap_or(""));
                let stats = &self.stats;
                let bytes = read_body(out.body, &stats.get_requests, &stats.get_bytes).await?;
                Ok(Some(Versioned { bytes, version }))
            }
            Err(SdkError::ServiceError(e)) if e.err().is_no_such_key() => Ok(None),
            Err(e) => match sdk_err("GetObject", e) {
                StorageError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn put_now(
        &self,
        key: &str,
        bytes: &[u8],
        content_etag: Option<&str>,
    ) -> StorageResult<ObjectInfo> {
        self.put_new(key, bytes, content_etag, Write::default())
            .await
    }

    /// [`Self::put_now`]; `only_new`: only where nothing is at the key (`If-None-Match: *`).
    async fn put_new(
        &self,
        key: &str,
        bytes: &[u8],
        content_etag: Option<&str>,
        write: Write<'_>,
    ) -> StorageResult<ObjectInfo> {
        check_key(key)?;
        let out = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .set_if_none_match(if_absent(write.only_new))
            .set_metadata(
                content_etag.map(|e| object_metadata(key, bytes.len() as u64, e, write.owner)),
            )
            .body(ByteStream::from(bytes.to_vec()))
            .send()
            .await
            .map_err(|e| sdk_err("PutObject", e))?;
        self.stats.puts.fetch_add(1, Ordering::Relaxed);
        Ok(ObjectInfo {
            size: bytes.len() as u64,
            etag: content_etag.map_or_else(|| unquote(out.e_tag().unwrap_or("")), str::to_string),
        })
    }

    /// A zero-byte object redirecting to `target` (a key of this bucket), carrying the
    /// target's content identity and size as its own.
    async fn put_alias(
        &self,
        key: &str,
        target: &str,
        info: ObjectInfo,
        write: Write<'_>,
    ) -> StorageResult<ObjectInfo> {
        let mut metadata = object_metadata(key, info.size, &info.etag, write.owner);
        metadata.insert(CONTENT_SIZE_META.to_string(), info.size.to_string());
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .set_if_none_match(if_absent(write.only_new))
            .website_redirect_location(format!("/{target}"))
            .set_metadata(Some(metadata))
            .body(ByteStream::from(Vec::new()))
            .send()
            .await
            .map_err(|e| sdk_err("PutObject (alias)", e))?;
        self.stats.puts.fetch_add(1, Ordering::Relaxed);
        Ok(info)
    }

    async fn put_if_now(
        &self,
        key: &str,
        bytes: &[u8],
        condition: Precondition<'_>,
    ) -> StorageResult<Option<String>> {
        check_key(key)?;
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes.to_vec()));
        request = match condition {
            Precondition::Version(etag) => request.if_match(format!("\"{etag}\"")),
            Precondition::Absent => request.if_none_match("*"),
        };
        match request.send().await {
            Ok(out) => {
                self.stats.puts.fetch_add(1, Ordering::Relaxed);
                Ok(Some(unquote(out.e_tag().unwrap_or(""))))
            }
            Err(e) => match sdk_err("PutObject (conditional)", e) {
                // If-Match on a key that is gone answers 404: the condition failed too.
                StorageError::PreconditionFailed(_) | StorageError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn delete_if_now(&self, key: &str, version: &str) -> StorageResult<bool> {
        check_key(key)?;
        let result = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .if_match(format!("\"{version}\""))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => match sdk_err("DeleteObject (conditional)", e) {
                StorageError::PreconditionFailed(_) | StorageError::NotFound(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Copies `source` to `key`; `known`: the source's size and content identity (a source
    /// key is not asked for them); `only_new`: only where nothing is at `key` (every request
    /// that creates the object carries `If-None-Match: *`: a 412 is `PreconditionFailed`).
    async fn copy_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known: &ObjectInfo,
        write: Write<'_>,
    ) -> StorageResult<ObjectInfo> {
        check_key(key)?;
        let (bucket, src_key, version, info) = match *source {
            CopySource::Object {
                bucket,
                key: src_key,
                version_id,
                size,
                etag,
                seen,
            } => {
                let info = ObjectInfo {
                    size,
                    etag: etag.to_string(),
                };
                // Only where the source condition is honoured (SYMDEX_CONDITIONAL_COPY, as
                // for `If-None-Match`): elsewhere the copy from the current object could
                // briefly publish another version's bytes before they are written over.
                let single = size < self.multipart_threshold;
                if let Some(seen) = seen.filter(|_| single && self.conditional_copies) {
                    let copied = self
                        .copy_from_current(bucket, src_key, version_id, key, &info, write, seen);
                    if copied.await? {
                        return Ok(info);
                    }
                }
                (bucket, src_key, version_id, info)
            }
            CopySource::Key(src) => {
                let info = known.clone();
                if self.redirect_aliases {
                    return self.put_alias(key, src, info, write).await;
                }
                (self.bucket.as_str(), src, None, info)
            }
            CopySource::File(path) => return self.put_file(key, path, write).await,
            CopySource::Range {
                bucket,
                key: src_key,
                version_id,
                offset,
                size,
                etag,
            } => {
                if size == 0 {
                    return self.put_new(key, &[], Some(etag), write).await;
                }
                let header = copy_source_header(bucket, src_key, version_id);
                self.copy_multipart(&header, key, offset, size, etag, write)
                    .await?;
                return Ok(ObjectInfo {
                    size,
                    etag: etag.to_string(),
                });
            }
            // Generated content carries its SHA-1 as its identity, as in a local store.
            CopySource::Bytes(bytes) => {
                let sha1 = super::content_sha1(bytes);
                return self.put_new(key, bytes, Some(&sha1), write).await;
            }
        };
        let header = copy_source_header(bucket, src_key, version);
        if info.size >= self.multipart_threshold {
            self.copy_multipart(&header, key, 0, info.size, &info.etag, write)
                .await?;
        } else {
            self.copy_single(&header, key, info.size, &info.etag, write)
                .await?;
        }
        Ok(info)
    }

    /// Keeps what a settled object holds ([`Storage::read_settled`]) for later reads.
    fn remember_settled(&self, key: &str, bytes: &[u8]) {
        if let Ok(mut settled) = self.settled.lock() {
            settled.insert(key.to_string(), bytes.to_vec());
        }
    }

    async fn list_now(&self, prefix: &str) -> StorageResult<Vec<String>> {
        let mut keys = Vec::new();
        self.list_pages(prefix, &mut |key| keys.push(key)).await?;
        keys.sort();
        Ok(keys)
    }

    /// The keys under `prefix`, handed to `each` a page (1,000) at a time as listed.
    async fn list_pages(
        &self,
        prefix: &str,
        each: &mut (dyn FnMut(String) + Send),
    ) -> StorageResult<()> {
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_err("ListObjectsV2", e))?;
            for key in page.contents().iter().filter_map(|o| o.key()) {
                each(key.to_string());
            }
        }
        Ok(())
    }

    async fn delete_now(&self, key: &str) -> StorageResult<()> {
        check_key(key)?;
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| sdk_err("DeleteObject", e))?;
        Ok(())
    }
}

impl Storage for S3Store {
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        Box::pin(async move {
            check_key(key)?;
            Ok(self
                .head_object(&self.bucket, key, None)
                .await?
                .map(|(info, _)| info))
        })
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        Box::pin(self.get_now(key))
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()> {
        Box::pin(async move { self.put_now(key, bytes, None).await.map(|_| ()) })
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        Box::pin(self.put_if_now(key, bytes, condition))
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(self.delete_if_now(key, version))
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64> {
        let write = Write {
            only_new: false,
            owner,
        };
        Box::pin(async move { Ok(self.copy_now(source, key, known, write).await?.size) })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>> {
        let write = Write {
            only_new: true,
            owner,
        };
        Box::pin(async move {
            match self.copy_now(source, key, known, write).await {
                Ok(info) => Ok(Some(info.size)),
                Err(StorageError::PreconditionFailed(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        Box::pin(self.list_now(prefix))
    }
    fn list_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(self.list_pages(prefix, each))
    }
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .max_keys(1)
                .send()
                .await
                .map_err(|e| sdk_err("ListObjectsV2", e))?;
            Ok(!page.contents().is_empty())
        })
    }
    fn read_settled<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            let known = self.settled.lock().ok().and_then(|s| s.get(key).cloned());
            if let Some(bytes) = known {
                return Ok(Some(bytes));
            }
            let read = self.get_now(key).await?.map(|v| v.bytes);
            if let Some(bytes) = &read {
                self.remember_settled(key, bytes);
            }
            Ok(read)
        })
    }
    fn create_settled<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let created = self.put_if_now(key, bytes, Precondition::Absent).await?;
            if created.is_some() {
                self.remember_settled(key, bytes);
            }
            Ok(created.is_some())
        })
    }
    fn uploads_by_location(&self) -> bool {
        true
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(self.delete_now(key))
    }
    fn key_copies_are_aliases(&self) -> bool {
        self.redirect_aliases
    }
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move {
            check_key(key)?;
            let found = self.head_object_versioned(&self.bucket, key, None).await?;
            Ok(found.map(|(info, meta, _, redirect)| Owned {
                info,
                owner: meta.get(OWNER_META).cloned(),
                alias_of: redirect.map(|r| r.trim_start_matches('/').to_string()),
                written: None,
            }))
        })
    }
    fn names_owners(&self) -> bool {
        true
    }
    fn creates_only_new(&self, source: &CopySource<'_>, size: u64) -> bool {
        // Everything but a single CopyObject is a PutObject or a CompleteMultipartUpload,
        // whose `If-None-Match` every S3 we know honours.
        let single_copy = match source {
            CopySource::Object { .. } => true,
            CopySource::Key(_) => !self.redirect_aliases,
            _ => false,
        };
        !single_copy || size >= self.multipart_threshold || self.conditional_copies
    }
}

/// An ingest object's HEAD and first block ([`S3Store::head_with_first_block`]).
pub struct FirstBlock {
    pub info: ObjectInfo,
    pub metadata: HashMap<String, String>,
    /// Bytes from 0, up to [`FIRST_READ`] (fewer only at the end of the object).
    pub bytes: Vec<u8>,
}

/// One S3 object read by ranges of whole [`BLOCK_SIZE`] blocks (one GET per run of missing
/// blocks).
#[derive(Clone)]
pub struct S3Object {
    client: Client,
    bucket: String,
    key: String,
    version_id: Option<String>,
    /// Where this object's bytes start in the S3 object (a range of it: an archive entry).
    offset: u64,
    size: u64,
    stats: Arc<S3Stats>,
    /// The first [`FIRST_READ`] bytes, when already read ([`Self::with_first_block`]).
    first_block: Option<Arc<Vec<u8>>>,
}

/// Blocks one identification may fetch (8 MiB): headers, tables and notes fit many times over;
/// past this the object is not worth identifying remotely.
const MAX_PREFETCH_BLOCKS: usize = 256;
/// Passes of one identification (each one fetches what the previous pass missed).
const MAX_PASSES: usize = 64;

impl S3Object {
    /// This object with its first bytes already read (by [`S3Store::head_with_first_block`]):
    /// identification starts from them instead of fetching them again, and a blocking read
    /// within them is answered from them. Ignored unless they are the whole first
    /// [`FIRST_READ`] bytes of this object (or all of it).
    pub fn with_first_block(mut self, bytes: Vec<u8>) -> Self {
        let whole = bytes.len() as u64 == FIRST_READ.min(self.size);
        if self.offset == 0 && whole && !bytes.is_empty() {
            self.first_block = Some(Arc::new(bytes));
        }
        self
    }

    async fn fetch(&self, first: u64, last: u64) -> StorageResult<Vec<u8>> {
        let start = first * BLOCK_SIZE;
        let end = ((last + 1) * BLOCK_SIZE).min(self.size) - 1;
        let bytes = self.fetch_range(start, end).await?;
        Ok(bytes)
    }

    /// Bytes `start..=end` of this object (relative to its range), one GET.
    async fn fetch_range(&self, start: u64, end: u64) -> StorageResult<Vec<u8>> {
        let (first, last) = (self.offset + start, self.offset + end);
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .set_version_id(self.version_id.clone())
            .range(format!("bytes={first}-{last}"))
            .send()
            .await
            .map_err(|e| sdk_err("GetObject (range)", e))?;
        let stats = &self.stats;
        let bytes = read_body(out.body, &stats.range_requests, &stats.range_bytes).await?;
        if bytes.len() as u64 != end - start + 1 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short ranged GET").into());
        }
        Ok(bytes)
    }

    /// Runs `identify` (synchronous, over a [`RangeReader`]) with ranged GETs, no thread
    /// blocked: each pass reads from the blocks fetched so far, notes the blocks it missed
    /// (reading zeros there), and its result is thrown away; the missed blocks are fetched
    /// (one GET per run) and the next pass starts. The first pass that missed nothing read only
    /// real bytes, and its result is the answer. Returns it with the bytes fetched.
    ///
    /// Written by hand: the `object` crate's readers are synchronous, and this keeps them so
    /// without parking a thread on every request.
    pub async fn identify<T>(
        &self,
        identify: impl Fn(&dyn RangeReader) -> T,
    ) -> StorageResult<(T, u64)> {
        let seeded = self.first_block.iter().flat_map(|first| {
            let blocks = first.chunks(BLOCK_SIZE as usize).map(<[u8]>::to_vec);
            (0u64..).zip(blocks)
        });
        let reader = Prefetched {
            size: self.size,
            blocks: Mutex::new(seeded.collect()),
            missing: Mutex::new(std::collections::BTreeSet::new()),
        };
        let mut fetched = 0u64;
        for _ in 0..MAX_PASSES {
            let result = identify(&reader);
            let missing = std::mem::take(&mut *lock(&reader.missing));
            if missing.is_empty() {
                return Ok((result, fetched));
            }
            if lock(&reader.blocks).len() + missing.len() > MAX_PREFETCH_BLOCKS {
                return Err(StorageError::TooLarge(format!(
                    "identification would read more than {} MiB of the object",
                    (MAX_PREFETCH_BLOCKS as u64 * BLOCK_SIZE) >> 20
                )));
            }
            // One GET per run of consecutive missing blocks.
            let missing: Vec<u64> = missing.into_iter().collect();
            let mut i = 0;
            while i < missing.len() {
                let mut j = i;
                while j + 1 < missing.len() && missing[j + 1] == missing[j] + 1 {
                    j += 1;
                }
                let data = self.fetch(missing[i], missing[j]).await?;
                fetched += data.len() as u64;
                let mut blocks = lock(&reader.blocks);
                for (k, chunk) in data.chunks(BLOCK_SIZE as usize).enumerate() {
                    blocks.insert(missing[i] + k as u64, chunk.to_vec());
                }
                i = j + 1;
            }
        }
        Err(StorageError::TooLarge(format!(
            "identification did not settle in {MAX_PASSES} rounds of reads"
        )))
    }
}

impl S3Object {
    /// This object as a synchronous [`RangeReader`] for a thread outside the runtime (the
    /// archive walker: decoders are synchronous), each read one ranged GET run on `handle`.
    pub fn blocking(self, handle: tokio::runtime::Handle) -> BlockingObject {
        BlockingObject {
            object: self,
            handle,
        }
    }
}

/// See [`S3Object::blocking`]. Callers read in large windows (the archive layer reads ahead a
/// MiB at a time), so a GET per read is cheap enough. Never used on a runtime thread:
/// `Handle::block_on` there would panic.
pub struct BlockingObject {
    object: S3Object,
    handle: tokio::runtime::Handle,
}

impl RangeReader for BlockingObject {
    fn size(&self) -> u64 {
        self.object.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|end| *end <= self.object.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the object",
                )
            })?;
        // Within the first block already read: no request.
        if let Some(first) = self.object.first_block.as_ref() {
            if let Some(held) = first.get(offset as usize..end as usize) {
                buf.copy_from_slice(held);
                return Ok(());
            }
        }
        let bytes = self
            .handle
            .block_on(self.object.fetch_range(offset, end - 1))?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The blocks fetched so far; reads of others give zeros and are noted.
struct Prefetched {
    size: u64,
    blocks: Mutex<HashMap<u64, Vec<u8>>>,
    missing: Mutex<std::collections::BTreeSet<u64>>,
}

impl RangeReader for Prefetched {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "read past the end of the object",
                )
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        let blocks = lock(&self.blocks);
        let mut written = 0usize;
        for b in offset / BLOCK_SIZE..=(end - 1) / BLOCK_SIZE {
            let block_start = b * BLOCK_SIZE;
            let from = (offset + written as u64 - block_start) as usize;
            let take = (BLOCK_SIZE as usize - from).min(buf.len() - written);
            match blocks.get(&b) {
                Some(data) => {
                    buf[written..written + take].copy_from_slice(&data[from..from + take])
                }
                None => {
                    buf[written..written + take].fill(0);
                    lock(&self.missing).insert(b);
                }
            }
            written += take;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_source_headers_encode_keys() {
        assert_eq!(
            copy_source_header("b", "a b/c+d.pdb", None),
            "b/a%20b/c%2Bd.pdb"
        );
        assert_eq!(copy_source_header("b", "k", Some("v1")), "b/k?versionId=v1");
        assert_eq!(unquote("\"abc\""), "abc");
    }

    #[test]
    fn debuginfod_files_carry_their_headers_as_metadata() {
        let meta = object_metadata("buildid/ab/debuginfo", 42, "e", None);
        assert_eq!(meta["debuginfod-size"], "42");
        assert_eq!(meta["debuginfod-file"], "buildid/ab/debuginfo");
        assert_eq!(meta[CONTENT_ETAG_META], "e");
        let prefixed = object_metadata("cdn/buildid/ab/source/src/\u{e9}.c", 7, "e", None);
        assert_eq!(prefixed["debuginfod-size"], "7");
        assert!(!prefixed.contains_key("debuginfod-file"), "not ASCII");
        let other = object_metadata("symbols/a.pdb/ID/a.pdb", 1, "e", None);
        assert_eq!(other.len(), 1);
    }
}
