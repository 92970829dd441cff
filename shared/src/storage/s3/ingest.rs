//! The client side of an ingest bucket (`symdex push`): a local file uploaded under a key
//! with the metadata the indexer reads, in one PUT or part by part, and the S3 client every
//! symdex program builds from the standard AWS environment.

use std::collections::HashMap;
use std::path::Path;

use aws_sdk_s3::operation::complete_multipart_upload::CompleteMultipartUploadOutput;
use aws_sdk_s3::operation::head_object::HeadObjectOutput;
use aws_sdk_s3::types::CompletedPart;
use aws_sdk_s3::Client;

use super::complete::Begun;
#[cfg(doc)]
use super::parts::part_size_for;
use super::parts::{checksum_of_bodies, upload_parts, Bodies, PartsAtOnce};
use super::{sdk_err, unquote, StorageResult};

/// An S3 client from the standard AWS environment (credential chain, region,
/// `AWS_ENDPOINT_URL`), with the SDK's standard retries (backoff on throttling and 5xx, up to
/// `attempts`). A local endpoint (moto, MinIO) or `SYMDEX_S3_PATH_STYLE=true` gets path-style
/// addressing.
pub async fn client_from_env(attempts: u32) -> Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(attempts))
        .load()
        .await;
    let path_style = std::env::var("AWS_ENDPOINT_URL").is_ok()
        || std::env::var("AWS_ENDPOINT_URL_S3").is_ok()
        || std::env::var("SYMDEX_S3_PATH_STYLE").is_ok_and(|v| v == "true");
    let s3 = aws_sdk_s3::config::Builder::from(&sdk)
        .force_path_style(path_style)
        .build();
    Client::from_conf(s3)
}

/// What an upload created: its ETag (unquoted) and version id (a versioned bucket), which
/// together name the upload the indexer records (`Input::s3_object`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub etag: String,
    pub version: Option<String>,
}

/// Uploads the file at `path` to `bucket`/`key` with user `metadata`: one PUT up to
/// `multipart_threshold` bytes, else a multipart upload in [`part_size_for`] parts, as many at
/// once as `parts` lets.
///
/// Every body is streamed from the file, [`BODY_READ`] bytes at a time, after a first read
/// for its CRC-32: memory holds no part, never the file. The CRC-32 goes in the request's
/// signed `x-amz-checksum-crc32` header, and S3 checks the body against it; the body itself
/// is sent as `UNSIGNED-PAYLOAD`, as the SDK sends any streamed body (TLS protects it on the
/// way; signing it would hash every byte with SHA-256 once more, or send it `aws-chunked`,
/// which S3-compatible stores decode slowly, moto 0.6 s slower per 525 MB). A multipart
/// upload declares the CRC-32 when it begins and lists its parts' when it completes, as S3
/// requires of one whose parts carry a checksum. A client built with
/// `RequestChecksumCalculation::WhenRequired` (a store without checksums) sends none. A
/// failed multipart upload is aborted.
///
/// [`BODY_READ`]: super::BODY_READ
pub async fn upload_file(
    client: &Client,
    bucket: &str,
    key: &str,
    path: &Path,
    metadata: HashMap<String, String>,
    multipart_threshold: u64,
    parts: &PartsAtOnce,
) -> StorageResult<Uploaded> {
    let size = tokio::fs::metadata(path).await?.len();
    let target = Target {
        bucket,
        key,
        metadata,
        content_encoding: None,
    };
    upload(
        client,
        target,
        Bodies::Path(path),
        size,
        multipart_threshold,
        parts,
    )
    .await
}

/// Where [`upload`] puts its bytes, and the headers the object gets.
pub(super) struct Target<'a> {
    pub(super) bucket: &'a str,
    pub(super) key: &'a str,
    pub(super) metadata: HashMap<String, String>,
    pub(super) content_encoding: Option<&'a str>,
}

/// Uploads `size` bytes from `bodies` to `target`, as [`upload_file`] says.
pub(super) async fn upload(
    client: &Client,
    target: Target<'_>,
    bodies: Bodies<'_>,
    size: u64,
    multipart_threshold: u64,
    parts: &PartsAtOnce,
) -> StorageResult<Uploaded> {
    let Target {
        bucket,
        key,
        metadata,
        content_encoding,
    } = target;
    let checksum = checksum_of_bodies(client);
    if size <= multipart_threshold.max(1) {
        let (body, crc) = bodies.body(0, size, &checksum).await?;
        let out = client
            .put_object()
            .bucket(bucket)
            .key(key)
            .set_checksum_algorithm(checksum)
            .set_checksum_crc32(crc)
            .set_content_encoding(content_encoding.map(str::to_string))
            .body(body)
            .set_metadata(Some(metadata))
            .send()
            .await
            .map_err(|e| sdk_err("PutObject", e))?;
        return Ok(Uploaded {
            etag: unquote(out.e_tag().unwrap_or_default()),
            version: out.version_id().map(str::to_string),
        });
    }
    let created = client
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .set_metadata(Some(metadata))
        .set_content_encoding(content_encoding.map(str::to_string))
        .set_checksum_algorithm(checksum.clone())
        .send()
        .await
        .map_err(|e| sdk_err("CreateMultipartUpload", e))?;
    let upload_id = created.upload_id().unwrap_or_default().to_string();
    let sent = upload_parts(
        client, bucket, key, &upload_id, bodies, size, checksum, parts,
    )
    .await;
    let made = sent.as_ref().ok().and_then(|sent| multipart_etag(sent));
    let begun = Begun {
        client,
        bucket,
        key,
        upload_id: &upload_id,
    };
    let done = |out: &CompleteMultipartUploadOutput| Uploaded {
        etag: unquote(out.e_tag().unwrap_or_default()),
        version: out.version_id().map(str::to_string),
    };
    // The proof of a completion whose answer was lost: the object with the ETag these parts
    // make.
    let proof = |head: &HeadObjectOutput| {
        let made = made.clone()?;
        (head.e_tag().map(unquote) == Some(made.clone())).then(|| Uploaded {
            etag: made,
            version: head.version_id().map(str::to_string),
        })
    };
    begun.complete(sent, None, done, proof).await
}

/// The ETag S3 gives a multipart upload of `parts`: the MD5 of their MD5s (their ETags), and
/// their count. `None` if a part's ETag is no MD5 (an S3-compatible store of its own kind).
fn multipart_etag(parts: &[CompletedPart]) -> Option<String> {
    let mut whole = crate::digest::Md5::default();
    for part in parts {
        let md5 = crate::digest::unhex(&unquote(part.e_tag()?)).filter(|d| d.len() == 16)?;
        whole.update(&md5);
    }
    Some(format!("{}-{}", whole.hex(), parts.len()))
}

#[cfg(test)]
mod tests {
    use aws_sdk_s3::types::CompletedPart;

    use super::multipart_etag;
    use crate::digest::Md5;

    fn md5(bytes: &[u8]) -> [u8; 16] {
        let mut md5 = Md5::default();
        md5.update(bytes);
        md5.digest()
    }

    #[test]
    fn a_multipart_etag_is_the_md5_of_the_parts_md5s_and_their_count() {
        let part = |n: i32, etag: &str| CompletedPart::builder().part_number(n).e_tag(etag).build();
        let (a, b) = (md5(b"first part"), md5(b"second part"));
        let parts = [
            part(1, &format!("\"{}\"", crate::digest::hex(&a))),
            part(2, &crate::digest::hex(&b)),
        ];
        let whole = md5(&[a, b].concat());
        assert_eq!(
            multipart_etag(&parts),
            Some(format!("{}-2", crate::digest::hex(&whole)))
        );
        assert_eq!(multipart_etag(&[part(1, "not-an-md5")]), None);
    }
}
