//! What compressed copies cost in requests: the same debug file indexed and removed with
//! `SYMDEX_COMPRESS=zstd` and without, counted at the endpoint.

use symdex_lambda::handle_remover;

use super::{breakdown, counted_configured, index_each};
use crate::support::{sqs_event, Fixtures, INGEST, SERVING};
/// The requests of an index of `app.debug` and of its removal, with the function's
/// environment `env`; and the keys it published and the copies it made.
async fn index_and_remove(env: &[(&str, &str)]) -> (Vec<String>, Vec<String>, usize, usize) {
    let (stack, proxy, ctx) = counted_configured(true, std::time::Duration::ZERO, env).await;
    let fx = Fixtures::build();
    let log = || std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    // One-time costs (the store's marker objects) go with a first artifact, not counted.
    index_each(
        &stack,
        &proxy,
        &ctx,
        [("ci/warm-up", fx.path("app.stripped"))],
    )
    .await;
    let names = |objects: Vec<(String, Vec<u8>)>| -> Vec<String> {
        objects.into_iter().map(|(key, _)| key).collect()
    };
    let published_keys = || async {
        let all = names(stack.objects(SERVING, "").await);
        let is_key = |k: &String| !k.starts_with("_symdex/") && !k.starts_with("_manifest/");
        all.into_iter().filter(is_key).count()
    };
    let keys_before = published_keys().await;
    let copies_before = names(stack.objects(SERVING, "_symdex/encoded/").await);
    let fresh = index_each(
        &stack,
        &proxy,
        &ctx,
        [("ci/app.debug", fx.path("app.debug"))],
    );
    let fresh = fresh.await.remove("ci/app.debug").unwrap_or_default();
    let published = published_keys().await - keys_before;
    let copies = stack.objects(SERVING, "_symdex/encoded/").await.len() - copies_before.len();
    let delete = stack.s3.delete_object().bucket(INGEST).key("ci/app.debug");
    delete.send().await.unwrap();
    let removed = stack.receive(1).await;
    log();
    let response = handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn)).await;
    assert_eq!(
        response.unwrap()["batchItemFailures"],
        serde_json::json!([])
    );
    let removal = log();
    let copies_after = names(stack.objects(SERVING, "_symdex/encoded/").await);
    assert_eq!(
        copies_after, copies_before,
        "the debug file's copies went with it"
    );
    (fresh, removal, published, copies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_costs_its_put_and_a_look_at_its_key_and_a_removal_a_delete_per_encoding() {
    let (plain, plain_removal, keys, none) = index_and_remove(&[]).await;
    let (zstd, zstd_removal, same_keys, copies) =
        index_and_remove(&[("SYMDEX_COMPRESS", "zstd")]).await;
    println!("without copies: {:?}", breakdown(&plain));
    println!("with zstd copies: {:?}", breakdown(&zstd));
    println!("removal without: {:?}", breakdown(&plain_removal));
    println!("removal with: {:?}", breakdown(&zstd_removal));
    assert_eq!((none, keys), (0, same_keys));
    // The debug file's own keys get a copy each (a redirect alias gets none: its target has
    // one), made from one more read of the ingest object.
    assert!(
        copies >= 1 && copies <= keys,
        "{copies} copies of {keys} keys"
    );
    let copy_requests = zstd
        .iter()
        .filter(|l| l.contains("/_symdex/encoded/"))
        .count();
    assert_eq!(copy_requests, copies, "one PUT a copy: {zstd:#?}");
    assert_eq!(
        zstd.len(),
        plain.len() + 1 + 2 * copies,
        "a read of the ingest object, then a PUT and a HEAD of its key per copy"
    );
    // A removal deletes each key's copies in every encoding before the key, with
    // compression on or off: a copy made under an earlier configuration goes too (the edge
    // would otherwise serve it for a key that is gone).
    let encodings = symdex_shared::encoded::Encoding::ALL.len();
    for removal in [&plain_removal, &zstd_removal] {
        let copy_deletes = removal
            .iter()
            .filter(|l| l.starts_with("DELETE") && l.contains("/_symdex/encoded/"))
            .count();
        let key_deletes = removal
            .iter()
            .filter(|l| l.starts_with("DELETE") && !l.contains("/_symdex/"))
            .count();
        assert_eq!(
            (key_deletes, copy_deletes),
            (keys, encodings * keys),
            "{removal:#?}"
        );
    }
    assert_eq!(zstd_removal.len(), plain_removal.len());
}
