//! The client side of an ingest bucket (`symdex push`): a local file uploaded under a key
//! with the metadata the indexer reads, in one PUT or part by part, and the S3 client every
//! symdex program builds from the standard AWS environment.

use std::collections::HashMap;
use std::path::Path;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::CompletedMultipartUpload;
use aws_sdk_s3::Client;
use tokio::io::AsyncReadExt;

use super::writes::part;
use super::{sdk_err, unquote, StorageResult, MAX_PARTS, UPLOAD_PART_SIZE};

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
/// `multipart_threshold` bytes, else a multipart upload of parts of at least
/// [`UPLOAD_PART_SIZE`], [`PARALLEL_PARTS`] at once (memory holds those, never the file; at most
/// [`MAX_PARTS`] parts, so a 4 GiB file goes in 16 MiB parts and a 200 GiB one in 20 MiB
/// parts). A failed multipart upload is aborted.
pub async fn upload_file(
    client: &Client,
    bucket: &str,
    key: &str,
    path: &Path,
    metadata: HashMap<String, String>,
    multipart_threshold: u64,
) -> StorageResult<Uploaded> {
    let size = tokio::fs::metadata(path).await?.len();
    if size <= multipart_threshold.max(1) {
        let out = client
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(
                ByteStream::from_path(path)
                    .await
                    .map_err(std::io::Error::other)?,
            )
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
        .send()
        .await
        .map_err(|e| sdk_err("CreateMultipartUpload", e))?;
    let upload_id = created.upload_id().unwrap_or_default().to_string();
    let parts = upload_parts(client, bucket, key, &upload_id, path, size).await;
    let parts = match parts {
        Ok(parts) => parts,
        Err(e) => {
            // Best effort: parts of an unfinished upload would otherwise be billed until a
            // lifecycle rule ends them (the module's ingest bucket has one).
            let _ = client
                .abort_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(&upload_id)
                .send()
                .await;
            return Err(e);
        }
    };
    let out = client
        .complete_multipart_upload()
        .bucket(bucket)
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
    Ok(Uploaded {
        etag: unquote(out.e_tag().unwrap_or_default()),
        version: out.version_id().map(str::to_string),
    })
}

/// The part size [`upload_file`] uses for a file of `size` bytes.
pub fn part_size_for(size: u64) -> u64 {
    size.div_ceil(MAX_PARTS).max(UPLOAD_PART_SIZE)
}

/// Parts uploaded at once by [`upload_file`]: memory holds at most this many parts (and
/// the one being read), and one slow part does not idle the connection.
pub const PARALLEL_PARTS: usize = 4;

async fn upload_parts(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    path: &Path,
    size: u64,
) -> StorageResult<Vec<aws_sdk_s3::types::CompletedPart>> {
    use futures_util::{StreamExt, TryStreamExt};
    let part_size = part_size_for(size);
    let file = tokio::fs::File::open(path).await?;
    // Parts read in order, one after another; uploaded up to PARALLEL_PARTS at once.
    let read = futures_util::stream::unfold(
        (file, 1i32, size),
        move |(mut file, number, left)| async move {
            if left == 0 {
                return None;
            }
            let len = part_size.min(left);
            let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
            let read = file.read_exact(&mut bytes).await.map(|_| (number, bytes));
            Some((read, (file, number + 1, left - len)))
        },
    );
    read.map(|part_read| async move {
        let (number, bytes) = part_read?;
        let out = client
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(number)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| sdk_err("UploadPart", e))?;
        Ok(part(number, out.e_tag().unwrap_or_default()))
    })
    .buffered(PARALLEL_PARTS)
    .try_collect()
    .await
}
