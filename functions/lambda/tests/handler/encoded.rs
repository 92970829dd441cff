//! Compressed copies on S3 (crate::encoded): made by the indexer after the key is live, with
//! `Content-Encoding` and the raw size in the debuginfod metadata, removed by the remover.

use super::{context, delete_and_remove, upload_and_index};
use crate::checks;
use crate::support::{Fixtures, Stack, SERVING};
use symdex_shared::encoded::{decode, Encoding};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_s_copy_carries_its_encoding_and_raw_size_and_goes_with_it() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = context(&stack, &[("SYMDEX_COMPRESS", "zstd,gzip")]).await;
    upload_and_index(&stack, &ctx, "build-1/app.debug", &fx.path("app.debug")).await;
    let raw = std::fs::read(fx.path("app.debug")).unwrap();
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    for encoding in Encoding::ALL {
        let copy = format!("_symdex/encoded/{encoding}/{key}");
        let head = stack.s3.head_object().bucket(SERVING).key(&copy);
        let head = head.send().await.unwrap();
        assert_eq!(head.content_encoding(), Some(encoding.as_str()));
        let meta = head.metadata().unwrap();
        assert_eq!(
            meta["debuginfod-size"],
            raw.len().to_string(),
            "the raw size"
        );
        assert_eq!(meta["debuginfod-file"], key);
        let stored = stack.objects(SERVING, &copy).await.remove(0).1;
        assert!(
            stored.len() * 4 <= raw.len() * 3,
            "{encoding}: {}",
            stored.len()
        );
        let mut decoded = Vec::new();
        decode(encoding, &stored[..], &mut decoded).unwrap();
        assert!(decoded == raw, "{encoding} decodes to the key's bytes");
    }
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");

    delete_and_remove(&stack, &ctx, "build-1/app.debug").await;
    assert!(stack.objects(SERVING, &key).await.is_empty());
    let left = stack.objects(SERVING, "_symdex/encoded/").await;
    assert!(
        left.is_empty(),
        "removed with the key: {:?}",
        left.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
}

/// A source over the in-memory bound (`MEMORY_STAGING_MAX`) is read from its ingest object
/// into copies staged in temporary files: each copy on S3 decodes to its bytes, and the audit
/// (which decodes every copy) finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_over_the_memory_bound_gets_copies_staged_in_files() {
    use symdex_shared::encoded::{staged_in_memory, MEMORY_STAGING_MAX};

    let stack = Stack::new().await;
    let ctx = context(
        &stack,
        &[
            ("SYMDEX_COMPRESS", "zstd,gzip"),
            ("SYMDEX_SOURCE_EXTENSIONS", "c"),
        ],
    )
    .await;
    let mut raw = Vec::new();
    for i in 0.. {
        if raw.len() as u64 > MEMORY_STAGING_MAX + 4096 {
            break;
        }
        raw.extend_from_slice(format!("int value_{i} = {i};\n").as_bytes());
    }
    assert!(!staged_in_memory(raw.len() as u64));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.c");
    std::fs::write(&path, &raw).unwrap();
    upload_and_index(&stack, &ctx, "build-1/values.c", &path).await;
    for encoding in Encoding::ALL {
        let copies = stack
            .objects(SERVING, &format!("_symdex/encoded/{encoding}/"))
            .await;
        assert!(!copies.is_empty(), "{encoding}: a copy");
        for (copy, stored) in copies {
            assert!(stored.len() * 4 <= raw.len(), "{copy}: {}", stored.len());
            let mut decoded = Vec::new();
            decode(encoding, &stored[..], &mut decoded).unwrap();
            assert!(decoded == raw, "{copy} decodes to the source's bytes");
        }
    }
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
}

/// Without SYMDEX_COMPRESS (the function's default; the module sets `zstd`) no copy is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compression_no_copy_is_made() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = context(&stack, &[]).await;
    upload_and_index(&stack, &ctx, "build-1/app.debug", &fx.path("app.debug")).await;
    assert!(stack.objects(SERVING, "_symdex/encoded/").await.is_empty());
}

/// Bytes on disk above one part (an expanded archive entry, a staged copy) go up in parts
/// streamed from their file, each with its CRC-32, which the completed object declares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_copies_above_a_part_go_in_parts_with_their_checksums() {
    use symdex_shared::encoded::compress;
    use symdex_shared::storage::encoding::EncodedMeta;
    use symdex_shared::storage::s3::{S3Store, UPLOAD_PART_SIZE};
    use symdex_shared::storage::{CopySource, ObjectInfo, Storage};

    let stack = Stack::new().await;
    let store = S3Store::new(stack.s3.clone(), SERVING);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("entry.debug");
    // Two and a half parts of bytes no two parts share (a part sent twice would show).
    let size = usize::try_from(UPLOAD_PART_SIZE).unwrap() * 5 / 2;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let raw: Vec<u8> = (0..size)
        .map(|_| {
            // xorshift64: bytes zstd cannot shrink.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    std::fs::write(&path, &raw).unwrap();
    let key = "buildid/ab12/debuginfo";
    let known = ObjectInfo {
        size: raw.len() as u64,
        etag: String::new(),
    };
    store
        .copy(&CopySource::File(&path), key, &known, None)
        .await
        .unwrap();
    let head = stack.s3.head_object().bucket(SERVING).key(key);
    let head = head.checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled);
    let head = head.send().await.unwrap();
    assert!(
        head.e_tag().unwrap().trim_matches('"').ends_with("-3"),
        "{head:?}"
    );
    assert!(head.checksum_crc32().is_some(), "declared: {head:?}");
    assert!(stack.objects(SERVING, key).await.remove(0).1 == raw);

    // A copy of bytes that hardly compress, so that it too is above one part.
    let staged = compress(Encoding::Zstd, &mut &raw[..], raw.len() as u64).unwrap();
    assert!(staged.size > UPLOAD_PART_SIZE, "{}", staged.size);
    let copy = format!("_symdex/encoded/zstd/{key}");
    let meta = EncodedMeta {
        encoding: Encoding::Zstd,
        raw: ObjectInfo {
            size: raw.len() as u64,
            etag: "e".into(),
        },
    };
    store.put_encoded(&copy, &staged, &meta).await.unwrap();
    let head = stack.s3.head_object().bucket(SERVING).key(&copy);
    let head = head.checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled);
    let head = head.send().await.unwrap();
    assert_eq!(head.content_encoding(), Some("zstd"));
    assert!(head.checksum_crc32().is_some(), "declared: {head:?}");
    let stored = stack.objects(SERVING, &copy).await.remove(0).1;
    let mut decoded = Vec::new();
    decode(Encoding::Zstd, &stored[..], &mut decoded).unwrap();
    assert!(decoded == raw, "the copy decodes to the file");
}
