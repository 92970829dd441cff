//! Archives (and Debian and RPM packages) dropped into the ingest bucket, delivered as real S3 -> SQS notifications from
//! moto_server: every entry publishes what the same file publishes uploaded loose, deleting
//! the archive unpublishes its entries, a stored zip entry reaches the serving bucket without
//! its bytes passing through the function, and debuginfod-find fetches a debug file that
//! arrived in a tarball; a Sentry source bundle is published where symbolicator looks.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use support::{config, sqs_event, Fixtures, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, handle_remover, Context};

async fn context(stack: &Stack) -> Arc<Context> {
    Arc::new(Context::new(config(&[]), stack.moto.s3().await))
}

fn run(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
}

/// Uploads `path` as `key` and runs the indexer on its notification.
async fn index(stack: &Stack, ctx: &Arc<Context>, key: &str, path: &Path) -> Value {
    stack.upload(key, path).await;
    let created = stack.receive(1).await;
    handle_indexer(ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap()
}

/// Deletes `key` from the ingest bucket and runs the remover on its notification.
async fn remove(stack: &Stack, ctx: &Arc<Context>, key: &str) {
    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key(key)
        .send()
        .await
        .unwrap();
    let removed = stack.receive(1).await;
    let response = handle_remover(ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
}

/// Published keys and bytes, SymStore's store-level marker left out.
async fn published(stack: &Stack) -> BTreeMap<String, Vec<u8>> {
    let mut keys = checks::published(stack, SERVING).await;
    keys.retain(|k, _| !k.starts_with("index2/"));
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_archive_shape_publishes_what_its_files_publish_loose_and_is_removed_whole() {
    let stack = Stack::new().await;
    let ctx = context(&stack).await;
    let fx = Fixtures::build();
    let dir = fx.dir.path();
    run(dir, "mkdir out && cp app.debug app.stripped out/");
    // The same files uploaded loose: what every shape must publish.
    index(&stack, &ctx, "loose/app.debug", &fx.path("app.debug")).await;
    index(&stack, &ctx, "loose/app.stripped", &fx.path("app.stripped")).await;
    let pair = published(&stack).await;
    assert!(pair.contains_key(&format!("buildid/{}/debuginfo", fx.build_id())));
    remove(&stack, &ctx, "loose/app.debug").await;
    let stripped_only = published(&stack).await;
    remove(&stack, &ctx, "loose/app.stripped").await;
    assert!(published(&stack).await.is_empty());
    index(&stack, &ctx, "loose/app.debug", &fx.path("app.debug")).await;
    let debug_only = published(&stack).await;
    remove(&stack, &ctx, "loose/app.debug").await;

    run(
        dir,
        "zip -q -0 -r stored.zip out && zip -q -9 -r deflated.zip out && cp deflated.zip syms.nupkg \
         && tar -czf out.tar.gz out && tar --zstd -cf out.tar.zst out && tar -cJf out.tar.xz out \
         && tar -cjf out.tar.bz2 out && gzip -c app.debug > app.debug.gz \
         && zstd -q -c app.stripped > app.stripped.zst && gcab -c -n -z app.debu_ app.debug \
         && mkdir -p pkg/DEBIAN pkg/usr/lib/debug pkg/usr/bin && cp app.debug pkg/usr/lib/debug/ \
         && cp app.stripped pkg/usr/bin/ \
         && printf 'Package: app-dbgsym\\nVersion: 1.0\\nArchitecture: amd64\\nMaintainer: ci <ci@example.com>\\nDescription: debug symbols\\n' > pkg/DEBIAN/control \
         && dpkg-deb --build -Zxz pkg app-dbgsym.ddeb > /dev/null \
         && printf 'Name: app-debuginfo\\nVersion: 1\\nRelease: 1\\nSummary: s\\nLicense: MIT\\nBuildArch: x86_64\\n%%global debug_package %%{nil}\\n%%global _build_id_links none\\n%%global __os_install_post %%{nil}\\n%%description\\nd\\n%%install\\nmkdir -p %%{buildroot}/d\\ncp %%{_sourcedir}/app.debug %%{_sourcedir}/app.stripped %%{buildroot}/d/\\n%%files\\n/d/app.debug\\n/d/app.stripped\\n' > app.spec \
         && rpmbuild -bb --nodeps --quiet --define \"_topdir $PWD/rpm\" --define \"_sourcedir $PWD\" app.spec \
         && mv rpm/RPMS/x86_64/app-debuginfo-1-1.x86_64.rpm app-debuginfo.rpm \
         && 7zz a -t7z -mx=9 -bso0 -bsp0 out.7z out",
    );
    for (shape, expected) in [
        ("stored.zip", &pair),
        ("deflated.zip", &pair),
        ("syms.nupkg", &pair),
        ("out.tar.gz", &pair),
        ("out.tar.zst", &pair),
        ("out.tar.xz", &pair),
        ("out.tar.bz2", &pair),
        ("app.debug.gz", &debug_only),
        ("app.stripped.zst", &stripped_only),
        ("app.debu_", &debug_only),
        ("app-dbgsym.ddeb", &pair),
        ("app-debuginfo.rpm", &pair),
        ("out.7z", &pair),
    ] {
        let key = format!("ci/{shape}");
        let response = index(&stack, &ctx, &key, &fx.path(shape)).await;
        assert_eq!(
            response["batchItemFailures"],
            serde_json::json!([]),
            "{shape}"
        );
        let got = published(&stack).await;
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{shape}"
        );
        assert!(got == *expected, "{shape}: contents differ");
        let (problems, _) = checks::audited(&stack, SERVING).await;
        assert!(problems.is_empty(), "{shape}: {problems:?}");
        // Deleting the archive unpublishes every key only its entries referenced.
        remove(&stack, &ctx, &key).await;
        assert!(published(&stack).await.is_empty(), "{shape}: keys left");
    }
    // Each entry has its own records: the archive's key and the path inside it.
    let records = checks::manifest_records(&stack, SERVING).await;
    let entries: Vec<&Value> = records
        .iter()
        .filter(|r| r["ingest_key"] == "ci/out.tar.zst" && r["action"] == "indexed")
        .collect();
    let mut paths: Vec<&str> = entries
        .iter()
        .map(|r| r["entry"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["out/app.debug", "out/app.stripped"]);
    let skipped = records
        .iter()
        .find(|r| r["ingest_key"] == "ci/stored.zip" && r["action"] == "skipped");
    assert!(skipped.is_none(), "the zips hold only artifacts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_zip_entry_is_copied_server_side_not_through_the_function() {
    let stack = Stack::new().await;
    let ctx = context(&stack).await;
    let fx = Fixtures::build();
    // A debug file of 6 MiB (zeros after its own bytes still identify), stored uncompressed.
    let mut big = std::fs::read(fx.path("app.debug")).unwrap();
    big.resize(6 << 20, 0);
    std::fs::write(fx.path("big.debug"), &big).unwrap();
    run(fx.dir.path(), "zip -q -0 big.zip big.debug");
    let before = ctx.store.stats().range_bytes() + ctx.store.stats().get_bytes();
    index(&stack, &ctx, "ci/big.zip", &fx.path("big.zip")).await;
    let read = ctx.store.stats().range_bytes() + ctx.store.stats().get_bytes() - before;
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    let got = stack.objects(SERVING, &key).await;
    assert_eq!(got.len(), 1);
    assert!(got[0].1 == big, "the published entry is the file");
    assert!(
        read < 1 << 20,
        "the function read {read} bytes of a {} byte entry",
        big.len()
    );
    assert!(
        ctx.store.stats().part_copies() >= 1,
        "copied by ranged part copies"
    );
    // Its sections too (debuginfod `/section/<name>`), a range of the range.
    run(
        fx.dir.path(),
        "objcopy --dump-section .debug_line=line.bin app.debug scratch.o",
    );
    let section = format!("buildid/{}/section/.debug_line", fx.build_id());
    let got = published(&stack).await;
    assert!(got.get(&section) == Some(&std::fs::read(fx.path("line.bin")).unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debuginfod_find_fetches_a_debug_file_that_arrived_in_a_tarball() {
    let stack = Stack::new().await;
    let ctx = context(&stack).await;
    let fx = Fixtures::build();
    run(
        fx.dir.path(),
        "tar -cJf syms.tar.xz app.debug app.stripped notes.txt",
    );
    let response = index(&stack, &ctx, "ci/syms.tar.xz", &fx.path("syms.tar.xz")).await;
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    stack.public_read().await;
    // moto serves the bucket over plain HTTP (anonymous reads allowed by the bucket policy):
    // the static store a client reads.
    let urls = format!("{}/{SERVING}", stack.moto.endpoint);
    let fetched =
        support::debuginfod_find(&urls, &["debuginfo", &fx.build_id()], &fx.path("cache"));
    assert_eq!(fetched, std::fs::read(fx.path("app.debug")).unwrap());
    // A Sentry source bundle (sentry-cli, from the program's DWARF) lands where symbolicator
    // looks for the module's sources.
    run(
        fx.dir.path(),
        "sentry-cli debug-files bundle-sources app.debug >/dev/null",
    );
    index(&stack, &ctx, "ci/app.src.zip", &fx.path("app.src.zip")).await;
    let id = fx.build_id();
    let key = format!("unified/{}/{}/sourcebundle", &id[..2], &id[2..]);
    let got = published(&stack).await;
    assert!(
        got.get(&key) == Some(&std::fs::read(fx.path("app.src.zip")).unwrap()),
        "{key}"
    );
    // Its files serve debuginfod's `source/` keys too, under the paths the DWARF names.
    let dir = fx.dir.path().canonicalize().unwrap();
    let source = format!("buildid/{id}/source{}/prog.c", dir.display());
    assert_eq!(
        got.get(&source),
        Some(&std::fs::read(dir.join("prog.c")).unwrap()),
        "{source}"
    );
    // The text file in the tarball is recorded as skipped, with the archive and its path.
    let records = checks::manifest_records(&stack, SERVING).await;
    assert!(records
        .iter()
        .any(|r| r["entry"] == "notes.txt" && r["action"] == "skipped"));
}

#[path = "support/fault_proxy.rs"]
mod fault_proxy;

/// The same debug file twice in one zip (a library copied into two folders of a build
/// output, as CI trees often hold one): both entries are indexed in the one message, the
/// second sharing the first's keys, with no failure and no retry — the second entry meets keys
/// the first published in the same run, before that upload is finalized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_file_twice_in_one_archive_is_indexed_in_one_delivery() {
    let stack = Stack::new().await;
    let ctx = context(&stack).await;
    let fx = Fixtures::build();
    run(
        fx.dir.path(),
        "mkdir -p x/a x/b && cp app.debug x/a/ && cp app.debug x/b/ && cd x && zip -q -r ../twice.zip a b",
    );
    let response = index(&stack, &ctx, "ci/twice.zip", &fx.path("twice.zip")).await;
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let records = checks::manifest_records(&stack, SERVING).await;
    let actions: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["ingest_key"] == "ci/twice.zip")
        .map(|r| (r["entry"].as_str().unwrap(), r["action"].as_str().unwrap()))
        .collect();
    assert_eq!(actions.len(), 2, "{records:#?}");
    assert!(
        actions
            .iter()
            .all(|(_, action)| *action == "indexed" || *action == "unchanged"),
        "{actions:?}"
    );
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    // Deleting the archive unpublishes what both entries held.
    remove(&stack, &ctx, "ci/twice.zip").await;
    assert!(published(&stack).await.is_empty(), "keys left");
}

/// A cabinet (made by gcab) whose first file claims to start past its folder's data: the
/// `cab` crate panicked reading it, and the message failed on every delivery until the queue
/// gave up on it, its good entry unpublished and no record saying why. Now that entry is
/// rejected with its reason, the next one published, and the message succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cabinet_lying_about_an_entry_publishes_the_others_and_says_why() {
    let stack = Stack::new().await;
    let ctx = context(&stack).await;
    let fx = Fixtures::build();
    std::fs::write(fx.path("lies.txt"), "an entry whose offset lies\n").unwrap();
    run(fx.dir.path(), "gcab -c -n lies.pd_ lies.txt app.debug");
    let mut cab = std::fs::read(fx.path("lies.pd_")).unwrap();
    // CFHEADER (36 bytes), one CFFOLDER (8), then the first CFFILE: its size (4 bytes), then
    // its offset in the folder's uncompressed data (4), 0 for the first file.
    let offset = 36 + 8 + 4;
    assert_eq!(&cab[offset..offset + 4], &[0; 4]);
    cab[offset..offset + 4].copy_from_slice(&10_000_000u32.to_le_bytes());
    std::fs::write(fx.path("lies.pd_"), cab).unwrap();

    let response = index(&stack, &ctx, "ci/lies.pd_", &fx.path("lies.pd_")).await;
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let records = checks::manifest_records(&stack, SERVING).await;
    let of = |entry: &str| {
        records
            .iter()
            .find(|r| r["ingest_key"] == "ci/lies.pd_" && r["entry"] == entry)
            .unwrap_or_else(|| panic!("no record of {entry}: {records:#?}"))
    };
    let lies = of("lies.txt");
    assert_eq!(lies["action"], "rejected", "{lies}");
    assert!(
        lies["reason"].as_str().unwrap().contains("do not hold"),
        "{lies}"
    );
    assert_eq!(of("app.debug")["action"], "indexed");
    let build_id = support::build_id_of(&fx.path("app"));
    assert!(
        published(&stack)
            .await
            .contains_key(&format!("buildid/{build_id}/debuginfo")),
        "the good entry is served"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_cut_off_at_every_step_converges_when_redelivered() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    // A stored entry (ranged part copy), a deflated one (expanded) and a text file (skipped).
    run(
        fx.dir.path(),
        "zip -q -0 build.zip app.debug && zip -q -9 build.zip app.stripped notes.txt",
    );
    stack.upload("ci/build.zip", &fx.path("build.zip")).await;
    let created = stack.receive(1).await;
    let event = sqs_event(&created, &stack.queue_arn);

    // Run k dies after k S3 requests (one attempt each, so the cut is exactly there); the
    // message is redelivered until a run finishes.
    let proxy = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 0, 11).await;
    let dying = Arc::new(Context::new(
        config(&[]),
        stack.moto.s3_via_with(&proxy.endpoint, 1).await,
    ));
    let mut died = 0;
    let mut finished = false;
    for cut in 1..3000 {
        proxy.faults.cut_after(cut);
        match handle_indexer(&dying, event.clone()).await {
            Ok(answer) if answer["batchItemFailures"] == serde_json::json!([]) => {
                finished = true;
                break;
            }
            _ => died += 1,
        }
    }
    assert!(finished, "no run finished");
    assert!(
        died >= 20,
        "only {died} runs died: the cuts missed most steps"
    );

    let id = fx.build_id();
    let got = published(&stack).await;
    assert_eq!(
        got.get(&format!("buildid/{id}/debuginfo")),
        Some(&std::fs::read(fx.path("app.debug")).unwrap())
    );
    assert_eq!(
        got.get(&format!("buildid/{id}/executable")),
        Some(&std::fs::read(fx.path("app.stripped")).unwrap())
    );
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    // Both entries' uploads are complete, and each reached the manifest at least once.
    let uploads = stack.objects(SERVING, "_symdex/uploads/").await;
    assert_eq!(uploads.len(), 2);
    for (_, body) in &uploads {
        let upload: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(upload["state"], "indexed", "{upload}");
        assert_eq!(upload["source"], format!("s3://{INGEST}/ci/build.zip"));
    }
    let records = checks::manifest_records(&stack, SERVING).await;
    for entry in ["app.debug", "app.stripped", "notes.txt"] {
        assert!(
            records.iter().any(|r| r["entry"] == entry),
            "no record of {entry}"
        );
    }
}

/// Sources for debuggers through the Lambda: a tarball of the program's sources arrives
/// before its debug file; gdb lists `main` and debuginfod-find fetches the source from the
/// serving bucket (moto's HTTP endpoint), after the source file is gone from disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gdb_lists_sources_the_indexer_published_from_a_source_tarball() {
    let stack = Stack::new().await;
    let ctx = Arc::new(Context::new(
        config(&[("SYMDEX_SOURCE_EXTENSIONS", "c,h")]),
        stack.moto.s3().await,
    ));
    let fx = Fixtures::build();
    let dir = fx.dir.path().canonicalize().unwrap();
    let source = std::fs::read(dir.join("prog.c")).unwrap();
    run(
        &dir,
        "tar -czf src.tar.gz prog.c && mkdir run && cp app.stripped run/app",
    );
    index(&stack, &ctx, "ci/src.tar.gz", &dir.join("src.tar.gz")).await;
    let response = index(&stack, &ctx, "ci/app.debug", &dir.join("app.debug")).await;
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let path = format!("{}/prog.c", dir.display());
    let key = format!("buildid/{}/source{path}", fx.build_id());
    assert_eq!(published(&stack).await.get(&key), Some(&source), "{key}");
    let records = checks::manifest_records(&stack, SERVING).await;
    let debug = records
        .iter()
        .find(|r| r["kind"] == "debug")
        .expect("the debug file's record");
    assert_eq!(debug["sources"]["served"], 1, "{debug}");
    // debuginfod's response headers travel as object metadata (the CDN's viewer-response
    // function renames them): the whole file's size and its key.
    for (key, size) in [
        (
            format!("buildid/{}/debuginfo", fx.build_id()),
            std::fs::metadata(dir.join("app.debug")).unwrap().len(),
        ),
        (key.clone(), source.len() as u64),
    ] {
        let head = stack
            .s3
            .head_object()
            .bucket(SERVING)
            .key(&key)
            .send()
            .await
            .unwrap();
        let meta = head.metadata().cloned().unwrap_or_default();
        assert_eq!(
            meta.get("debuginfod-size"),
            Some(&size.to_string()),
            "{key}"
        );
        assert_eq!(meta.get("debuginfod-file"), Some(&key), "{key}");
    }
    std::fs::remove_file(dir.join("prog.c")).unwrap();
    stack.public_read().await;
    let urls = format!("{}/{SERVING}", stack.moto.endpoint);
    let build_id = fx.build_id();
    let fetched =
        support::debuginfod_find(&urls, &["source", &build_id, &path], &dir.join("cache"));
    assert_eq!(fetched, source);
    let out = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-iex",
            "set debuginfod enabled on",
            "-iex",
            "set debug-file-directory /nonexistent",
            "-ex",
            "list main",
            "./app",
        ])
        .current_dir(dir.join("run"))
        .env("DEBUGINFOD_URLS", &urls)
        .env("DEBUGINFOD_CACHE_PATH", dir.join("cache-gdb"))
        .env("HOME", dir.join("run"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("return compute(c);"),
        "gdb listed no source:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a serving-bucket key serves: its bytes, or its alias target's (one hop).
async fn served(stack: &Stack, key: &str) -> Option<Vec<u8>> {
    let head = stack.s3.head_object().bucket(SERVING).key(key).send().await;
    let target = head.ok()?.website_redirect_location().map(str::to_string);
    let key = target.as_deref().map_or(key, |t| t.trim_start_matches('/'));
    let object = stack.s3.get_object().bucket(SERVING).key(key).send().await;
    Some(
        object
            .ok()?
            .body
            .collect()
            .await
            .ok()?
            .into_bytes()
            .to_vec(),
    )
}

/// Two source tarballs tie for the path the debug file names (prog.c of other content): the
/// first serves it. Deleting the first from the ingest bucket (the remover) withdraws its offer
/// and hands the path to the second, in both alias modes (with redirects, the key becomes an
/// alias of the second tarball's entry), and the store audits clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_source_tarball_hands_its_paths_to_the_tarball_left() {
    for aliases in ["copy", "redirect"] {
        let stack = Stack::new().await;
        let settings = [
            ("SYMDEX_SOURCE_EXTENSIONS", "c,h"),
            ("SYMDEX_ALIASES", aliases),
        ];
        let ctx = Arc::new(Context::new(config(&settings), stack.moto.s3().await));
        let fx = Fixtures::build();
        let dir = fx.dir.path().canonicalize().unwrap();
        let source = std::fs::read(dir.join("prog.c")).unwrap();
        run(
            &dir,
            "tar -czf a.tar.gz prog.c && mkdir b && (cat prog.c; echo '/* b */') > b/prog.c \
             && tar -czf b.tar.gz -C b prog.c",
        );
        let edited = std::fs::read(dir.join("b/prog.c")).unwrap();
        index(&stack, &ctx, "ci/app.debug", &dir.join("app.debug")).await;
        index(&stack, &ctx, "ci/a/src.tar.gz", &dir.join("a.tar.gz")).await;
        index(&stack, &ctx, "ci/b/src.tar.gz", &dir.join("b.tar.gz")).await;
        let key = format!("buildid/{}/source{}/prog.c", fx.build_id(), dir.display());
        assert_eq!(served(&stack, &key).await, Some(source), "{aliases}: {key}");

        remove(&stack, &ctx, "ci/a/src.tar.gz").await;
        assert_eq!(served(&stack, &key).await, Some(edited), "{aliases}: {key}");
        let records = checks::manifest_records(&stack, SERVING).await;
        assert!(
            records.iter().any(|r| r["upload"]
                .as_str()
                .is_some_and(|u| u.contains("ci/b/src.tar.gz"))
                && r["published"]
                    .as_array()
                    .is_some_and(|p| p.contains(&Value::from(key.clone())))),
            "{aliases}: a record says the second tarball's entry published {key}"
        );
        let (problems, _) = checks::audited(&stack, SERVING).await;
        assert!(problems.is_empty(), "{aliases}: {problems:?}");
    }
}

/// With SYMDEX_ALIASES=redirect a source key is an alias of the source's first key: read
/// through the module's viewer-response function (a node stand-in for CloudFront runs the real
/// `edge/response.js`), debuginfod-find gets a 301, follows it, and fetches the source byte
/// for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debuginfod_find_follows_an_alias_redirect_through_the_edge_function() {
    use std::io::BufRead;
    let stack = Stack::new().await;
    let ctx = Arc::new(Context::new(
        config(&[
            ("SYMDEX_SOURCE_EXTENSIONS", "c,h"),
            ("SYMDEX_ALIASES", "redirect"),
        ]),
        stack.moto.s3().await,
    ));
    let fx = Fixtures::build();
    let dir = fx.dir.path().canonicalize().unwrap();
    let source = std::fs::read(dir.join("prog.c")).unwrap();
    run(&dir, "tar -czf src.tar.gz prog.c");
    index(&stack, &ctx, "ci/app.debug", &dir.join("app.debug")).await;
    index(&stack, &ctx, "ci/src.tar.gz", &dir.join("src.tar.gz")).await;
    stack.public_read().await;
    let path = format!("{}/prog.c", dir.display());
    let key = format!("buildid/{}/source{path}", fx.build_id());
    let head = stack
        .s3
        .head_object()
        .bucket(SERVING)
        .key(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(0), "{key} is an alias");
    assert!(head.website_redirect_location().is_some());

    let proxy_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/edge_proxy.mjs");
    let mut proxy = Command::new("node")
        .arg(proxy_script)
        .arg(format!("{}/{SERVING}", stack.moto.endpoint))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node (scripts/setup.sh installs it)");
    let mut lines = std::io::BufReader::new(proxy.stdout.take().unwrap()).lines();
    let port = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("listening ")
        .unwrap()
        .to_string();
    let out = Command::new("debuginfod-find")
        .args(["source", &fx.build_id(), &path])
        .env("DEBUGINFOD_URLS", format!("http://127.0.0.1:{port}"))
        .env("DEBUGINFOD_CACHE_PATH", dir.join("cache-edge"))
        .output()
        .unwrap();
    proxy.kill().unwrap();
    proxy.wait().unwrap();
    let log: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        out.status.success(),
        "{}\n{log:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fetched = String::from_utf8(out.stdout).unwrap();
    assert_eq!(std::fs::read(fetched.trim()).unwrap(), source);
    assert!(
        log.first().is_some_and(|l| l.starts_with("301 /buildid/"))
            && log.iter().any(|l| l.starts_with("200 /")),
        "one redirect, then the bytes: {log:?}"
    );
}

/// A batch of compressed archives processed at once (SYMDEX_CONCURRENCY) decodes within the
/// decoders' shared budget (SYMDEX_DECODER_MEMORY_MB; half the function's memory by
/// default): each walk reserves its decoder's memory as its stream's header says, the ones
/// over the budget wait for the decoders before them, and every archive is indexed. Here
/// the xz and 7z dictionaries (8 MiB) are each more than the 2 MiB budget: each is granted
/// the whole budget, alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_archives_decodes_within_the_shared_memory_budget() {
    let stack = Stack::new().await;
    let vars = [
        ("SYMDEX_DECODER_MEMORY_MB", "2"),
        ("SYMDEX_CONCURRENCY", "4"),
    ];
    let ctx = Arc::new(Context::new(config(&vars), stack.moto.s3().await));
    let fx = Fixtures::build();
    let dir = fx.dir.path();
    run(
        dir,
        "mkdir out && cp app.debug app.stripped out/ && tar -cJf a.tar.xz out \
         && tar -cJf b.tar.xz out && tar --zstd -cf c.tar.zst out \
         && 7zz a -t7z -bso0 -bsp0 d.7z out",
    );
    let shapes = ["a.tar.xz", "b.tar.xz", "c.tar.zst", "d.7z"];
    for shape in shapes {
        stack.upload(&format!("ci/{shape}"), &fx.path(shape)).await;
    }
    let messages = stack.receive(shapes.len()).await;
    let response = handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let records = checks::manifest_records(&stack, SERVING).await;
    for shape in shapes {
        // The same two files in each: published by one, `unchanged` for the others.
        let indexed = records
            .iter()
            .filter(|r| r["ingest_key"] == format!("ci/{shape}"))
            .filter(|r| r["action"] == "indexed" || r["action"] == "unchanged")
            .count();
        assert_eq!(indexed, 2, "{shape}: {records:#?}");
    }
    let memory = ctx.config.decoder_memory.expect("a budget");
    assert_eq!(memory.reserved(), 0, "every reservation given back");
    assert_eq!(memory.peak(), 2 << 20, "the budget, never more");
}

/// Every published key of a fresh serving bucket, SymStore's store-level marker included.
async fn published_with_markers(stack: &Stack) -> BTreeMap<String, Vec<u8>> {
    checks::published(stack, SERVING).await
}

/// An archive is one upload model with its files loose: the indexer Lambda publishes the same
/// keys, marker objects included, for a zip of an ELF pair and a PDB as for the three files
/// uploaded loose, each into a fresh serving bucket (the zip first, so no loose upload has
/// written the marker before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_and_its_files_loose_publish_identical_keys_markers_included() {
    use symdex_shared::testing::builders::{build_msf, dbi_stream, info_stream};
    let fx = Fixtures::build();
    let dir = fx.dir.path();
    let pdb = build_msf(
        4096,
        &[
            None,
            Some(info_stream([0x6d; 16], 2)),
            None,
            Some(dbi_stream(1, 0x8664)),
        ],
    );
    std::fs::write(dir.join("lib.pdb"), &pdb).unwrap();
    run(
        dir,
        "mkdir out && cp app.debug app.stripped lib.pdb out/ && zip -q -9 -r syms.zip out",
    );

    let zipped = Stack::new().await;
    let ctx = context(&zipped).await;
    let response = index(&zipped, &ctx, "ci/syms.zip", &fx.path("syms.zip")).await;
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    let from_zip = published_with_markers(&zipped).await;

    let loose = Stack::new().await;
    let ctx = context(&loose).await;
    for file in ["app.debug", "app.stripped", "lib.pdb"] {
        index(&loose, &ctx, &format!("ci/{file}"), &fx.path(file)).await;
    }
    let from_files = published_with_markers(&loose).await;

    assert!(
        from_files.contains_key("index2/index2.txt"),
        "the PDB's two-tier key needs SymStore's marker: {:?}",
        from_files.keys().collect::<Vec<_>>()
    );
    assert!(from_files
        .keys()
        .any(|k| k.starts_with("index2/") && k.contains("/lib.pdb/")));
    assert_eq!(
        from_zip.keys().collect::<Vec<_>>(),
        from_files.keys().collect::<Vec<_>>()
    );
    assert!(from_zip == from_files, "contents differ");
}
