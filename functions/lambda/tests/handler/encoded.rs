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

/// Without SYMDEX_COMPRESS (the function's default; the module sets `zstd`) no copy is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compression_no_copy_is_made() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = context(&stack, &[]).await;
    upload_and_index(&stack, &ctx, "build-1/app.debug", &fx.path("app.debug")).await;
    assert!(stack.objects(SERVING, "_symdex/encoded/").await.is_empty());
}
