//! Sources for Windows debuggers through the Lambda, driven by the S3 -> SQS notifications of
//! real uploads to moto_server: a native PDB (clang-19 `-gcodeview`, lld-link-19 with the
//! Source Link map of the build) and its sources as a tarball, of one product and build, end
//! with every document under `src/<product>/<build>/<path>` holding the file the PDB was
//! built from, whichever is indexed first and when both arrive in one batch; an edited file
//! is not served; another product's tarball serves nothing of this build; the remover takes
//! the keys back with the tarball.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use support::{config, run_in, sqs_event, Stack, INGEST};
use symdex_lambda::{handle_remover, Context};
use symdex_shared::sourcelink::{store_base, BuildRoot, SourceLinkMap};

const BUILD: &str = "ci-42";

/// The documents, below the build root, and what the served key must hold.
const DOCUMENTS: [(&str, &str); 3] = [
    (
        "a.cpp",
        "#include \"sub/b.h\"\nint other();\nint main() { return helper(2) + other(); }\n",
    ),
    ("sub/b.h", "inline int helper(int x) { return x * 3; }\n"),
    (
        "sub/c.cpp",
        "#include \"b.h\"\nint other() { return helper(5); }\n",
    ),
];

/// Builds `app.pdb` in `dir` from [`DOCUMENTS`] under `dir/src`, linked with the Source Link
/// map of product `app`, build [`BUILD`]; tars the sources as `src.tar` and an edited tree
/// as `edited.tar`. `None` when the toolchain is missing outside CI.
fn native_build(dir: &Path) -> Option<()> {
    let found = ["clang-19", "lld-link-19"]
        .iter()
        .all(|tool| Command::new(tool).arg("--version").output().is_ok());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "clang-19 and lld-link-19 are needed"
        );
        eprintln!("skipped: clang-19 or lld-link-19 is missing (scripts/setup.sh)");
        return None;
    }
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (path, text) in DOCUMENTS {
        std::fs::write(src.join(path), text).unwrap();
    }
    for (file, obj) in [("src/a.cpp", "a.obj"), ("src/sub/c.cpp", "c.obj")] {
        let target = "--target=x86_64-pc-windows-msvc";
        run_in(
            dir,
            &[
                "clang-19",
                target,
                "-g",
                "-gcodeview",
                "-c",
                file,
                "-o",
                obj,
            ],
        );
    }
    let root: BuildRoot = src.to_str().unwrap().parse().unwrap();
    let base = store_base("https://sym.example.com", "app", BUILD).unwrap();
    let map = SourceLinkMap::for_roots(&[root], &base);
    std::fs::write(dir.join("sl.json"), map.to_json()).unwrap();
    run_in(
        dir,
        &[
            "lld-link-19",
            "/debug",
            "/entry:main",
            "/subsystem:console",
            "/nodefaultlib",
            "a.obj",
            "c.obj",
            "/out:app.exe",
            "/pdb:app.pdb",
            "/pdbstream:sourcelink=sl.json",
        ],
    );
    let src = src.to_str().unwrap();
    run_in(dir, &["tar", "cf", "src.tar", "-C", src, "a.cpp", "sub"]);
    std::fs::write(dir.join("src/a.cpp"), "int main() { return 9; }\n").unwrap();
    run_in(dir, &["tar", "cf", "edited.tar", "-C", src, "a.cpp", "sub"]);
    Some(())
}

/// How the PDB and the tarball reach the indexer.
#[derive(Clone, Copy, Debug)]
enum Order {
    PdbFirst,
    SourcesFirst,
    /// One SQS event holding both notifications.
    OneBatch,
}

async fn put(stack: &Stack, key: &str, path: &Path, product: &str) {
    let bytes = std::fs::read(path).unwrap();
    stack
        .put(key, bytes, &[("product", product), ("build", BUILD)])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_document_is_served_under_its_build_in_any_order_and_removed_with_its_sources() {
    let dir = tempfile::tempdir().unwrap();
    if native_build(dir.path()).is_none() {
        return;
    }
    let stack = Stack::new().await;
    for (n, order) in [Order::PdbFirst, Order::SourcesFirst, Order::OneBatch]
        .into_iter()
        .enumerate()
    {
        let serving = format!("srclink-{n}");
        stack
            .s3
            .create_bucket()
            .bucket(&serving)
            .send()
            .await
            .unwrap();
        let ctx = Arc::new(Context::new(
            config(&[
                ("SYMDEX_SERVING_BUCKET", serving.as_str()),
                ("SYMDEX_SOURCE_EXTENSIONS", "cpp,h"),
            ]),
            stack.moto.s3().await,
        ));
        let (pdb, tar) = (format!("case-{n}/app.pdb"), format!("case-{n}/src.tar"));
        let uploads = match order {
            Order::SourcesFirst => [(&tar, "src.tar"), (&pdb, "app.pdb")],
            _ => [(&pdb, "app.pdb"), (&tar, "src.tar")],
        };
        for (key, file) in uploads {
            put(&stack, key, &dir.path().join(file), "app").await;
            if !matches!(order, Order::OneBatch) {
                stack.index_received(&ctx, 1).await;
            }
        }
        if matches!(order, Order::OneBatch) {
            stack.index_received(&ctx, 2).await;
        }
        let objects = checks::published(&stack, &serving).await;
        for (path, text) in DOCUMENTS {
            let key = format!("src/app/{BUILD}/{path}");
            assert_eq!(
                objects.get(&key).map(Vec::as_slice),
                Some(text.as_bytes()),
                "{order:?}: {key}"
            );
        }
        let (problems, _) = checks::audited(&stack, &serving).await;
        assert!(problems.is_empty(), "{order:?}: {problems:#?}");

        if n == 0 {
            // Another product's tarball of the same paths: nothing of it under this build,
            // and nothing under its own product (no PDB of it names them).
            put(
                &stack,
                "other/src.tar",
                &dir.path().join("src.tar"),
                "other",
            )
            .await;
            stack.index_received(&ctx, 1).await;
            let objects = checks::published(&stack, &serving).await;
            assert!(!objects.keys().any(|k| k.starts_with("src/other/")));
            let (_, refs) = checks::audited(&stack, &serving).await;
            let held_by_other = refs
                .iter()
                .filter(|(k, _)| k.starts_with("src/"))
                .any(|(_, uploads)| uploads.iter().any(|u| u.contains("other/src.tar")));
            assert!(!held_by_other, "{refs:#?}");
        }

        let delete = stack.s3.delete_object().bucket(INGEST).key(&tar);
        delete.send().await.unwrap();
        let removed = stack.receive(1).await;
        let response = handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
        let objects = checks::published(&stack, &serving).await;
        assert!(
            !objects.keys().any(|k| k.starts_with("src/app/")),
            "{order:?}: removed with the tarball: {:?}",
            objects.keys()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_source_is_not_served_and_its_record_says_why() {
    let dir = tempfile::tempdir().unwrap();
    if native_build(dir.path()).is_none() {
        return;
    }
    let stack = Stack::new().await;
    let serving = "srclink-edited";
    stack
        .s3
        .create_bucket()
        .bucket(serving)
        .send()
        .await
        .unwrap();
    let ctx = Arc::new(Context::new(
        config(&[
            ("SYMDEX_SERVING_BUCKET", serving),
            ("SYMDEX_SOURCE_EXTENSIONS", "cpp,h"),
        ]),
        stack.moto.s3().await,
    ));
    put(&stack, "e/app.pdb", &dir.path().join("app.pdb"), "app").await;
    stack.index_received(&ctx, 1).await;
    put(
        &stack,
        "e/edited.tar",
        &dir.path().join("edited.tar"),
        "app",
    )
    .await;
    stack.index_received(&ctx, 1).await;
    let objects = checks::published(&stack, serving).await;
    let a = format!("src/app/{BUILD}/a.cpp");
    assert!(!objects.contains_key(&a), "the edited a.cpp is not served");
    assert!(objects.contains_key(&format!("src/app/{BUILD}/sub/b.h")));
    let records = checks::manifest_records(&stack, serving).await;
    let said = records.iter().any(|r| {
        r["ingest_key"] == "e/edited.tar"
            && r["reason"]
                .as_str()
                .is_some_and(|why| why.contains(&a) && why.contains("MD5"))
    });
    assert!(said, "{records:#?}");
}
