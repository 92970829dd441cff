//! A multipart upload's parts, sent from a file: every upload of bytes that are on disk (push's
//! files, an expanded archive entry, a staged compressed copy) goes through [`upload_parts`],
//! each part with its CRC-32 where the client sends checksums.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedPart};
use aws_sdk_s3::Client;
use tokio::sync::Semaphore;

use super::{sdk_err, StorageError, StorageResult, MAX_PARTS, UPLOAD_PART_SIZE};

/// Parts of multipart uploads sent at once, over every upload given the same
/// [`PartsAtOnce`]: one large file uses all of them, several share them. Each part's body is
/// streamed from its file (no part is held in memory), so the count is chosen for speed
/// alone: `aws s3 cp`'s ten.
pub const PARTS_AT_ONCE: usize = 10;

/// A body is read from its file this many bytes at a time as it is sent (the SDK's default):
/// with the HTTP client's write buffer, what memory holds of a request in flight.
pub const BODY_READ: usize = 64 * 1024;

/// A body's CRC-32 is taken in reads of this size, before it is sent.
const CRC_READ: usize = 1024 * 1024;

/// The parts [`upload_parts`] may have in flight at once, shared by the uploads of one push.
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

/// Where an upload's bodies are read from.
#[derive(Clone, Copy, Debug)]
pub(super) enum Bodies<'a> {
    /// A named file: each body streamed from it [`BODY_READ`] bytes at a time (and read again
    /// from the file on a retry).
    Path(&'a Path),
    /// An open file with no name (a staged compressed copy): each body read into memory
    /// whole, one at a time where the upload allows one part at once.
    Open(&'a File),
    /// Bytes in memory (a small artifact's staged copy): each body a copy of its range.
    Memory(&'a [u8]),
}

impl Bodies<'_> {
    /// `len` bytes from `offset`, with their CRC-32 (base64, as S3 spells it) where
    /// `checksum` asks for one. The checksum is read off the runtime's thread.
    pub(super) async fn body(
        self,
        offset: u64,
        len: u64,
        checksum: &Option<ChecksumAlgorithm>,
    ) -> StorageResult<(ByteStream, Option<String>)> {
        match self {
            Bodies::Path(path) => {
                let crc = match checksum {
                    Some(_) => {
                        let path = path.to_path_buf();
                        let crc = tokio::task::spawn_blocking(move || {
                            crc32_at(&File::open(&path)?, offset, len)
                        })
                        .await
                        .map_err(std::io::Error::other)??;
                        Some(base64_of(&crc.to_be_bytes()))
                    }
                    None => None,
                };
                let body = ByteStream::read_from()
                    .path(path)
                    .offset(offset)
                    .length(Length::Exact(len))
                    .buffer_size(BODY_READ)
                    .build()
                    .await
                    .map_err(std::io::Error::other)?;
                Ok((body, crc))
            }
            Bodies::Open(file) => {
                let file = file.try_clone()?;
                let bytes = tokio::task::spawn_blocking(move || {
                    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
                    file.read_exact_at(&mut bytes, offset)?;
                    Ok::<_, std::io::Error>(bytes)
                })
                .await
                .map_err(std::io::Error::other)??;
                let crc = checksum
                    .as_ref()
                    .map(|_| base64_of(&crc32fast::hash(&bytes).to_be_bytes()));
                Ok((ByteStream::from(bytes), crc))
            }
            Bodies::Memory(all) => {
                let range = usize::try_from(offset)
                    .ok()
                    .zip(usize::try_from(offset.saturating_add(len)).ok())
                    .and_then(|(start, end)| all.get(start..end))
                    .ok_or_else(|| {
                        std::io::Error::other(format!(
                            "a body of {len} bytes at {offset} is beyond the {} staged",
                            all.len()
                        ))
                    })?;
                let crc = checksum
                    .as_ref()
                    .map(|_| base64_of(&crc32fast::hash(range).to_be_bytes()));
                Ok((ByteStream::from(range.to_vec()), crc))
            }
        }
    }
}

/// The part size of a multipart upload of `size` bytes: [`UPLOAD_PART_SIZE`], more where S3's
/// 10,000 parts would not hold it (a 4 GiB file goes in 16 MiB parts, a 200 GiB one in 20 MiB
/// parts). The part size makes the ETag, which the deployment records as the content's
/// identity: it is not tuned.
pub fn part_size_for(size: u64) -> u64 {
    size.div_ceil(MAX_PARTS).max(UPLOAD_PART_SIZE)
}

/// The checksum every body carries: CRC-32, the SDK's default request checksum, unless the
/// client computes checksums only where an operation requires one (PutObject and UploadPart
/// do not).
pub(super) fn checksum_of_bodies(client: &Client) -> Option<ChecksumAlgorithm> {
    match client.config().request_checksum_calculation() {
        Some(RequestChecksumCalculation::WhenRequired) => None,
        _ => Some(ChecksumAlgorithm::Crc32),
    }
}

/// Sends the parts of the multipart upload `upload_id` of `size` bytes from `bodies`, in
/// [`part_size_for`] parts, as many at once as `parts` lets, each with its CRC-32 where
/// `checksum` asks for one (the upload must then have declared it when it began). Returns the
/// parts in order, as the completion lists them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn upload_parts(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
    bodies: Bodies<'_>,
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
                let (body, crc) = bodies.body(offset, len, &checksum).await?;
                let out = client
                    .upload_part()
                    .bucket(bucket)
                    .key(key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .set_checksum_crc32(crc)
                    .set_checksum_algorithm(checksum)
                    .body(body)
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

/// The CRC-32 of `len` bytes of `file` from `offset`; an error where the file ends first.
fn crc32_at(file: &File, offset: u64, len: u64) -> std::io::Result<u32> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![
        0u8;
        CRC_READ
            .min(usize::try_from(len).unwrap_or(CRC_READ))
            .max(1)
    ];
    let mut read = 0u64;
    while read < len {
        let want = usize::try_from(len - read).map_or(buf.len(), |left| left.min(buf.len()));
        let n = file.read_at(&mut buf[..want], offset + read)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the file ended at {read} bytes of {len} from {offset}"),
            ));
        }
        crc.update(&buf[..n]);
        read += n as u64;
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

#[cfg(test)]
mod tests {
    use super::{base64_of, crc32_at, Bodies};

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
        let file = std::fs::File::open(&path).unwrap();
        // The CRC-32 check value, and S3's spelling of a CRC-32 (big-endian, base64).
        assert_eq!(crc32_at(&file, 2, 9).unwrap(), 0xcbf4_3926);
        assert_eq!(base64_of(&0xcbf4_3926u32.to_be_bytes()), "y/Q5Jg==");
        assert!(crc32_at(&file, 2, 20).is_err(), "past the end");
    }

    #[tokio::test]
    async fn a_named_and_an_unnamed_file_give_the_same_body_and_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"..123456789..").unwrap();
        let open = std::fs::File::open(&path).unwrap();
        let crc = Some(aws_sdk_s3::types::ChecksumAlgorithm::Crc32);
        for bodies in [Bodies::Path(&path), Bodies::Open(&open)] {
            let (body, sum) = bodies.body(2, 9, &crc).await.unwrap();
            assert_eq!(sum.as_deref(), Some("y/Q5Jg=="));
            let bytes = body.collect().await.unwrap().into_bytes();
            assert_eq!(&bytes[..], b"123456789");
            assert!(bodies.body(2, 20, &crc).await.is_err(), "past the end");
        }
    }

    /// A copy staged in memory gives the bodies and checksums a file of its bytes gives.
    #[tokio::test]
    async fn bytes_in_memory_give_the_bodies_and_checksums_a_file_gives() {
        let bytes = b"..123456789..";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).unwrap();
        let crc = Some(aws_sdk_s3::types::ChecksumAlgorithm::Crc32);
        let memory = Bodies::Memory(bytes);
        for (offset, len) in [(2, 9), (0, 13), (12, 1), (5, 0), (13, 0)] {
            let (body, sum) = memory.body(offset, len, &crc).await.unwrap();
            let (_, file_sum) = Bodies::Path(&path).body(offset, len, &crc).await.unwrap();
            assert_eq!(sum, file_sum, "{offset}+{len}");
            let body = body.collect().await.unwrap().into_bytes();
            let (start, end) = (offset as usize, (offset + len) as usize);
            assert_eq!(&body[..], &bytes[start..end], "{offset}+{len}");
        }
        let (_, sum) = memory.body(2, 9, &crc).await.unwrap();
        assert_eq!(sum.as_deref(), Some("y/Q5Jg=="));
        let (body, sum) = memory.body(2, 9, &None).await.unwrap();
        assert_eq!(sum, None, "no checksum asked for");
        assert_eq!(
            &body.collect().await.unwrap().into_bytes()[..],
            b"123456789"
        );
        for (offset, len) in [(2, 20), (14, 0), (13, 1), (u64::MAX, 2), (1, u64::MAX)] {
            let err = memory.body(offset, len, &crc).await.unwrap_err();
            assert!(err.to_string().contains("beyond the 13 staged"), "{err}");
        }
    }
}
