//! The client side of an ingest bucket (`symdex push`): a local file uploaded under a key
//! with the metadata the indexer reads, in one PUT or part by part, and the S3 client every
//! symdex program builds from the standard AWS environment.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use tokio::sync::Semaphore;

use super::{sdk_err, unquote, StorageError, StorageResult, MAX_PARTS, UPLOAD_PART_SIZE};

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

/// Parts of multipart uploads sent at once, over every [`upload_file`] given the same
/// [`PartsAtOnce`]: one large file uses all of them, several share them. Each part's body is
/// streamed from its file (no part is held in memory), so the count is chosen for speed
/// alone: `aws s3 cp`'s ten.
pub const PARTS_AT_ONCE: usize = 10;

/// A body is read from its file this many bytes at a time as it is sent (the SDK's default):
/// with the HTTP client's write buffer, what memory holds of a request in flight.
pub const BODY_READ: usize = 64 * 1024;

/// A body's CRC-32 is taken in reads of this size, before it is sent.
const CRC_READ: usize = 1024 * 1024;

/// The parts [`upload_file`] may have in flight at once, shared by the uploads of one push.
#[derive(Clone, Debug)]
pub struct PartsAtOnce {
    gate: Arc<Semaphore>,
    parts: usize,
}

impl PartsAtOnce {
    pub fn new(parts: usize) -> Self {
        let parts = parts.max(1);
        PartsAtOnce {
            gate: Arc::new(Semaphore::new(parts)),
            parts,
        }
    }
}

impl Default for PartsAtOnce {
    fn default() -> Self {
        PartsAtOnce::new(PARTS_AT_ONCE)
    }
}

/// Uploads the file at `path` to `bucket`/`key` with user `metadata`: one PUT up to
/// `multipart_threshold` bytes, else a multipart upload of parts of at least
/// [`UPLOAD_PART_SIZE`] (at most [`MAX_PARTS`] parts, so a 4 GiB file goes in 16 MiB parts
/// and a 200 GiB one in 20 MiB parts: the part size makes the ETag, which the deployment
/// records as the content's identity, so it is not tuned), as many at once as `parts` lets.
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
    let checksum = checksum_of_bodies(client);
    if size <= multipart_threshold.max(1) {
        let out = client
            .put_object()
            .bucket(bucket)
            .key(key)
            .set_checksum_algorithm(checksum.clone())
            .set_checksum_crc32(crc32_if(&checksum, path, 0, size).await?)
            .body(file_body(path, 0, size).await?)
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
        .set_checksum_algorithm(checksum.clone())
        .send()
        .await
        .map_err(|e| sdk_err("CreateMultipartUpload", e))?;
    let upload_id = created.upload_id().unwrap_or_default().to_string();
    let sent = upload_parts(client, bucket, key, &upload_id, path, size, checksum, parts).await;
    let sent = match sent {
        Ok(sent) => sent,
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
    let made = multipart_etag(&sent);
    let completed = client
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(sent))
                .build(),
        )
        .send()
        .await;
    match completed {
        Ok(out) => Ok(Uploaded {
            etag: unquote(out.e_tag().unwrap_or_default()),
            version: out.version_id().map(str::to_string),
        }),
        Err(e) => {
            // A completion whose answer was lost (a reset connection, a timeout: the retry
            // then finds no such upload) may have happened: the object with the ETag these
            // parts make is the proof.
            let error = sdk_err("CompleteMultipartUpload", e);
            let head = client.head_object().bucket(bucket).key(key).send().await;
            match head {
                Ok(head) if made.is_some() && head.e_tag().map(unquote) == made => Ok(Uploaded {
                    etag: made.unwrap_or_default(),
                    version: head.version_id().map(str::to_string),
                }),
                _ => {
                    let _ = client
                        .abort_multipart_upload()
                        .bucket(bucket)
                        .key(key)
                        .upload_id(&upload_id)
                        .send()
                        .await;
                    Err(error)
                }
            }
        }
    }
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

/// The part size [`upload_file`] uses for a file of `size` bytes.
pub fn part_size_for(size: u64) -> u64 {
    size.div_ceil(MAX_PARTS).max(UPLOAD_PART_SIZE)
}

/// The checksum every body carries: CRC-32, the SDK's default request checksum, unless the
/// client computes checksums only where an operation requires one (PutObject and UploadPart
/// do not).
fn checksum_of_bodies(client: &Client) -> Option<ChecksumAlgorithm> {
    match client.config().request_checksum_calculation() {
        Some(RequestChecksumCalculation::WhenRequired) => None,
        _ => Some(ChecksumAlgorithm::Crc32),
    }
}

/// `len` bytes of the file at `path` from `offset`, read as they are sent (and again from the
/// file on a retry).
async fn file_body(path: &Path, offset: u64, len: u64) -> StorageResult<ByteStream> {
    ByteStream::read_from()
        .path(path)
        .offset(offset)
        .length(Length::Exact(len))
        .buffer_size(BODY_READ)
        .build()
        .await
        .map_err(|e| std::io::Error::other(e).into())
}

/// The CRC-32 of `len` bytes of the file at `path` from `offset` (base64, as S3 spells it)
/// where `checksum` asks for one, read off the runtime's thread.
async fn crc32_if(
    checksum: &Option<ChecksumAlgorithm>,
    path: &Path,
    offset: u64,
    len: u64,
) -> StorageResult<Option<String>> {
    if checksum.is_none() {
        return Ok(None);
    }
    let path = path.to_path_buf();
    let crc = tokio::task::spawn_blocking(move || crc32_of(&path, offset, len))
        .await
        .map_err(std::io::Error::other)??;
    Ok(Some(base64_of(&crc.to_be_bytes())))
}

fn crc32_of(path: &Path, offset: u64, len: u64) -> std::io::Result<u32> {
    use std::io::{Read, Seek};
    let mut file = std::fs::File::open(path)?;
    file.seek(std::io::SeekFrom::Start(offset))?;
    let mut file = file.take(len);
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![
        0u8;
        CRC_READ
            .min(usize::try_from(len).unwrap_or(CRC_READ))
            .max(1)
    ];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc.update(&buf[..n]);
        read += n as u64;
    }
    if read != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "{} ended at {} bytes of {len} from {offset}",
                path.display(),
                read
            ),
        ));
    }
    Ok(crc.finalize())
}

/// Standard base64, padded.
fn base64_of(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(DIGITS[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn upload_parts(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    path: &Path,
    size: u64,
    checksum: Option<ChecksumAlgorithm>,
    parts: &PartsAtOnce,
) -> StorageResult<Vec<CompletedPart>> {
    use futures_util::{StreamExt, TryStreamExt};
    let part_size = part_size_for(size);
    let count = size.div_ceil(part_size);
    // Parts are taken in order, each sent once a permit of `parts` is free (a slow one does
    // not hold the next back); a failed part ends the upload, the rest dropped unsent.
    let mut sent: Vec<CompletedPart> = futures_util::stream::iter(0..count)
        .map(|index| {
            let checksum = checksum.clone();
            async move {
                let _permit = parts.gate.acquire().await.map_err(std::io::Error::other)?;
                let number = i32::try_from(index + 1).unwrap_or(i32::MAX);
                let offset = index * part_size;
                let len = part_size.min(size - offset);
                let out = client
                    .upload_part()
                    .bucket(bucket)
                    .key(key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .set_checksum_crc32(crc32_if(&checksum, path, offset, len).await?)
                    .set_checksum_algorithm(checksum)
                    .body(file_body(path, offset, len).await?)
                    .send()
                    .await
                    .map_err(|e| sdk_err("UploadPart", e))?;
                Ok::<_, StorageError>(
                    CompletedPart::builder()
                        .part_number(number)
                        .e_tag(out.e_tag().unwrap_or_default())
                        .set_checksum_crc32(out.checksum_crc32().map(str::to_string))
                        .build(),
                )
            }
        })
        .buffer_unordered(parts.parts)
        .try_collect()
        .await?;
    sent.sort_by_key(|p| p.part_number());
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use aws_sdk_s3::types::CompletedPart;

    use super::{base64_of, crc32_of, multipart_etag};
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

    #[test]
    fn a_body_checksum_is_the_crc32_of_its_bytes_in_base64() {
        assert_eq!(base64_of(b""), "");
        assert_eq!(base64_of(b"f"), "Zg==");
        assert_eq!(base64_of(b"fo"), "Zm8=");
        assert_eq!(base64_of(b"foo"), "Zm9v");
        assert_eq!(base64_of(b"foobar"), "Zm9vYmFy");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"..123456789..").unwrap();
        // The CRC-32 check value, and S3's spelling of a CRC-32 (big-endian, base64).
        assert_eq!(crc32_of(&path, 2, 9).unwrap(), 0xcbf4_3926);
        assert_eq!(base64_of(&0xcbf4_3926u32.to_be_bytes()), "y/Q5Jg==");
        assert!(crc32_of(&path, 2, 20).is_err(), "past the end");
    }
}
