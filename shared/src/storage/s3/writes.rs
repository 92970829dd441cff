//! Writes to S3: conditional puts, server-side copies (CopyObject, or UploadPartCopy part by
//! part above the threshold), multipart uploads of large local files.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::head_object::HeadObjectOutput;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::CompletedPart;

use super::complete::Begun;
use super::{
    object_metadata, read_body, sdk_err, unquote, S3Store, CONTENT_ETAG_META, CONTENT_SIZE_META,
};
#[cfg(doc)]
use crate::storage::Storage;
use crate::storage::{
    check_key, CopySource, ObjectInfo, Precondition, StorageError, StorageResult, Versioned,
};

/// What a HEAD answers: size and content identity, user metadata, version id, redirect.
pub type HeadAnswer = (
    ObjectInfo,
    HashMap<String, String>,
    Option<String>,
    Option<String>,
);

/// How an object is written: only where nothing is (`If-None-Match: *`), naming an owner.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Write<'a> {
    pub(super) only_new: bool,
    pub(super) owner: Option<&'a str>,
}

/// The `If-None-Match` of a write made `only_new` (where nothing is at the key).
pub(super) fn if_absent(only_new: bool) -> Option<String> {
    only_new.then(|| "*".to_string())
}

pub(super) fn part(number: i32, etag: &str) -> CompletedPart {
    CompletedPart::builder()
        .part_number(number)
        .e_tag(etag)
        .build()
}

/// One multipart upload of a key (a part copy or a file's parts): begun with the content
/// identity in its metadata, then completed with its parts, or aborted.
pub(super) struct Multipart<'s> {
    pub(super) store: &'s S3Store,
    pub(super) key: &'s str,
    pub(super) id: String,
    /// Completed only where nothing is at the key (`If-None-Match: *`).
    pub(super) only_new: bool,
}

impl Multipart<'_> {
    /// Completes the upload with `parts` (or aborts it when they failed). A completion whose
    /// answer was lost or could not be parsed may still have happened: the object with our
    /// size and content identity is the proof.
    pub(super) async fn finish(
        self,
        parts: StorageResult<Vec<CompletedPart>>,
        size: u64,
        etag: &str,
    ) -> StorageResult<()> {
        let store = self.store;
        let begun = Begun {
            client: &store.client,
            bucket: &store.bucket,
            key: self.key,
            upload_id: &self.id,
        };
        let proof = |head: &HeadObjectOutput| {
            let ours = head.content_length() == i64::try_from(size).ok()
                && head
                    .metadata()
                    .and_then(|m| m.get(CONTENT_ETAG_META))
                    .map(String::as_str)
                    == Some(etag);
            ours.then_some(())
        };
        let if_none_match = if_absent(self.only_new);
        begun.complete(parts, if_none_match, |_| (), proof).await
    }
}

/// `CopySource` header value: `bucket/key[?versionId=v]`, the key percent-encoded.
pub(super) fn copy_source_header(bucket: &str, key: &str, version_id: Option<&str>) -> String {
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
    pub(super) async fn get_now(&self, key: &str) -> StorageResult<Option<Versioned>> {
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

    pub(super) async fn put_now(
        &self,
        key: &str,
        bytes: &[u8],
        content_etag: Option<&str>,
    ) -> StorageResult<ObjectInfo> {
        self.put_new(key, bytes, content_etag, Write::default())
            .await
    }

    /// [`Self::put_now`]; `only_new`: only where nothing is at the key (`If-None-Match: *`).
    pub(super) async fn put_new(
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
    pub(super) async fn put_alias(
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

    pub(super) async fn put_if_now(
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

    pub(super) async fn delete_if_now(&self, key: &str, version: &str) -> StorageResult<bool> {
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
    pub(super) async fn copy_now(
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
                let sha1 = crate::storage::content_sha1(bytes);
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
    pub(super) fn remember_settled(&self, key: &str, bytes: &[u8]) {
        if let Ok(mut settled) = self.settled.lock() {
            settled.insert(key.to_string(), bytes.to_vec());
        }
    }

    pub(super) async fn list_now(&self, prefix: &str) -> StorageResult<Vec<String>> {
        let mut keys = Vec::new();
        self.list_pages(prefix, &mut |key| keys.push(key)).await?;
        keys.sort();
        Ok(keys)
    }

    /// The keys under `prefix`, handed to `each` a page (1,000) at a time as listed.
    pub(super) async fn list_pages(
        &self,
        prefix: &str,
        each: &mut (dyn FnMut(String) + Send),
    ) -> StorageResult<()> {
        self.list_sized_pages(prefix, &mut |key, _| each(key)).await
    }

    /// [`Self::list_pages`] with each object's size, as the listing gives it (no request
    /// per key).
    pub(super) async fn list_sized_pages(
        &self,
        prefix: &str,
        each: &mut (dyn FnMut(String, u64) + Send),
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
            for object in page.contents() {
                if let Some(key) = object.key() {
                    let size = object.size().and_then(|s| u64::try_from(s).ok());
                    each(key.to_string(), size.unwrap_or(0));
                }
            }
        }
        Ok(())
    }

    pub(super) async fn delete_now(&self, key: &str) -> StorageResult<()> {
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
