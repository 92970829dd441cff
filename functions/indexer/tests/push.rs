//! `symdex push` against a deployment on moto_server: the ingest bucket's real S3 -> SQS
//! notifications are taken by the built indexer bootstrap (under the Runtime API harness)
//! while the CLI sends and, with `--wait`, follows its uploads in the manifest.
//!
//! The CLI binary is the workspace's `symdex`, built beside this package's bootstrap by
//! `cargo test --workspace` (`make test`).

#[path = "../../lambda/tests/support/fault_proxy.rs"]
mod fault_proxy;
mod pushing;
#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use pushing::{cli, json_lines, push, run_indexer, status_of};
use serde_json::Value;
use support::{sqs_event, Fixtures, Stack, INGEST, SERVING};
use symdex_shared::testing::builders::{build_msf, build_pe, codeview, dbi_stream, info_stream};

/// The inputs of [`build_inputs`] that are artifacts, by the end of their paths.
const ARTIFACTS: [&str; 5] = [
    "/app",
    "app.debug",
    "engine.dll",
    "engine.pdb",
    "bundle.zip",
];

/// A PE and its PDB (builders), the PE's bytes varied by `variant` while its keys stay.
fn pe_pdb(dir: &Path, variant: &str) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (guid, age) = ([0x5a; 16], 3);
    let pdb = dir.join("engine.pdb");
    let streams = [
        None,
        Some(info_stream(guid, age)),
        None,
        Some(dbi_stream(age, 0x8664)),
    ];
    std::fs::write(&pdb, build_msf(4096, &streams)).unwrap();
    let pe = dir.join("engine.dll");
    let entries = [codeview(
        guid,
        age,
        &format!("C:\\{variant}\\engine.pdb"),
        0,
        0,
    )];
    std::fs::write(&pe, build_pe(true, 0x8664, true, &entries, true)).unwrap();
    (pe, pdb)
}

/// A build's output: an ELF program and its debug file, a PE and its PDB, a zip holding a
/// program of its own, and a text file that is no artifact.
fn build_inputs(fx: &Fixtures) -> PathBuf {
    let root = fx.dir.path();
    let inputs = root.join("out");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::copy(fx.path("app.stripped"), inputs.join("app")).unwrap();
    std::fs::copy(fx.path("app.debug"), inputs.join("app.debug")).unwrap();
    std::fs::copy(fx.path("notes.txt"), inputs.join("notes.txt")).unwrap();
    pe_pdb(&inputs.join("win"), "release");
    // An archive holding a program of its own.
    std::fs::write(root.join("other.c"), "int main(void) { return 7; }\n").unwrap();
    support::run_in(
        root,
        &[
            "sh",
            "-c",
            "mkdir z && gcc -g -o z/other other.c && zip -q -r out/bundle.zip z",
        ],
    );
    inputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_waits_for_each_outcome_and_a_rerun_sends_nothing() {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let root = fx.dir.path();
    let inputs = build_inputs(&fx);
    let (stop, indexer) = run_indexer(&stack);

    let out_dir = inputs.to_str().unwrap();
    let args = [
        "--build",
        "b1",
        "--product",
        "app",
        "--wait",
        "--timeout",
        "120",
    ];
    let (out, lines) = push(&stack, &[&[out_dir][..], &args[..]].concat()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{lines:?}\n{stderr}");
    for name in ARTIFACTS {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "published", "{line}");
        assert_eq!(line["sent"], true, "{line}");
        assert!(!line["keys"].as_array().unwrap().is_empty(), "{line}");
    }
    let notes = status_of(&lines, "notes.txt");
    assert_eq!(notes["status"], "skipped");
    assert!(notes["reason"]
        .as_str()
        .unwrap()
        .contains("not an artifact"));
    assert_eq!(lines.last().unwrap()["exit"], 0);
    // Every key said published is live, and the ingest objects carry the metadata.
    let serving = stack.objects(SERVING, "").await;
    let serving_keys: Vec<&str> = serving.iter().map(|(k, _)| k.as_str()).collect();
    for line in lines.iter().filter(|l| l["status"] == "published") {
        for key in line["keys"].as_array().unwrap() {
            assert!(serving_keys.contains(&key.as_str().unwrap()), "{key}");
        }
    }
    let head = stack
        .s3
        .head_object()
        .bucket(INGEST)
        .key("app/b1/app.debug")
        .send()
        .await
        .unwrap();
    let meta = head.metadata().unwrap();
    assert_eq!(meta["build"], "b1");
    assert_eq!(meta["product"], "app");
    assert_eq!(meta["symdex-sha256"].len(), 64);
    // The manifest of the deployment, queried from the CLI (no Athena), agrees with the same
    // inputs indexed into a directory store.
    let query = |store: &str| {
        let out = Command::new(cli())
            .args(["manifest", "query", store, "--build", "b1", "--json"])
            .envs(stack.moto.env())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut found: Vec<(String, String, String)> = json_lines(&out.stdout)
            .into_iter()
            .filter(|r| r["action"] == "indexed")
            .map(|r| {
                let field = |f: &str| r[f].as_str().unwrap_or("-").to_string();
                (field("format"), field("debug_id"), field("code_id"))
            })
            .collect();
        found.sort();
        found
    };
    let local = root.join("local-store");
    let indexed = Command::new(cli())
        .args([
            "index",
            "--store",
            local.to_str().unwrap(),
            "--build",
            "b1",
            out_dir,
        ])
        .output()
        .unwrap();
    assert!(
        indexed.status.success(),
        "{}",
        String::from_utf8_lossy(&indexed.stderr)
    );
    let deployed = query(&format!("s3://{SERVING}"));
    assert_eq!(
        deployed.len(),
        5,
        "app, app.debug, dll, pdb, the zip's program: {deployed:?}"
    );
    assert_eq!(deployed, query(local.to_str().unwrap()));

    let ingest_before = stack.objects(INGEST, "").await.len();
    assert_eq!(ingest_before, 5, "notes.txt is not sent");

    // The same push again: nothing sent, everything already published.
    let (out, lines) = push(&stack, &[&[out_dir][..], &args[..]].concat()).await;
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    for name in ARTIFACTS {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "already-published", "{line}");
        assert_eq!(line["sent"], false, "{line}");
        if name != "bundle.zip" {
            // Decided by its key in the serving bucket (an archive, by the deployment's records).
            assert_eq!(line["keys"].as_array().unwrap().len(), 1, "{line}");
        }
    }
    assert_eq!(stack.objects(INGEST, "").await.len(), ingest_before);
    // Asked of the serving side by URL instead (here the bucket's own endpoint, readable by
    // anyone as CloudFront's origin access makes it for viewers, answering with the objects'
    // ETags as CloudFront does): the artifacts it serves with these bytes are not sent.
    stack.public_read().await;
    let by_url = Command::new(cli())
        .args([
            "push",
            out_dir,
            "--build",
            "b1",
            "--product",
            "app",
            "--json",
        ])
        .args(["--ingest", &format!("s3://{INGEST}")])
        .args(["--server", &format!("{}/{SERVING}", stack.moto.endpoint)])
        .envs(stack.moto.env())
        .output()
        .unwrap();
    assert_eq!(by_url.status.code(), Some(0));
    let lines: Vec<Value> = json_lines(&by_url.stdout);
    for name in ["/app", "app.debug", "engine.dll", "engine.pdb"] {
        assert_eq!(
            status_of(&lines, name)["status"],
            "already-published",
            "{lines:?} {}",
            String::from_utf8_lossy(&by_url.stderr)
        );
    }
    assert_eq!(status_of(&lines, "bundle.zip")["sent"], false, "{lines:?}");
    // Decided by the one key asked of the server, not by the deployment's records.
    assert_eq!(
        status_of(&lines, "/app")["keys"].as_array().unwrap().len(),
        1
    );

    // A truncated artifact is rejected, other bytes under the same keys are a conflict.
    let bad = root.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let elf = std::fs::read(fx.path("app")).unwrap();
    std::fs::write(bad.join("truncated"), &elf[..300]).unwrap();
    pe_pdb(&bad.join("win"), "other");
    std::fs::remove_file(bad.join("win/engine.pdb")).unwrap();
    let args = [
        "--build",
        "b2",
        "--product",
        "app",
        "--wait",
        "--timeout",
        "120",
    ];
    let (out, lines) = push(&stack, &[&[bad.to_str().unwrap()][..], &args[..]].concat()).await;
    assert_eq!(out.status.code(), Some(1), "{lines:?}");
    let truncated = status_of(&lines, "truncated");
    assert_eq!(truncated["status"], "rejected", "{truncated}");
    assert!(!truncated["reason"].as_str().unwrap().is_empty());
    let conflict = status_of(&lines, "engine.dll");
    assert_eq!(conflict["status"], "conflict", "{conflict}");
    // Held by the first push's PE, named by its ingest object.
    let held_by = conflict["held_by"].as_array().unwrap();
    assert!(
        held_by
            .iter()
            .any(|u| u.as_str().unwrap().contains("/app/b1/win/engine.dll@")),
        "{conflict}"
    );
    assert!(
        !conflict["keys"].as_array().unwrap().is_empty(),
        "{conflict}"
    );

    stop.store(true, Ordering::Relaxed);
    indexer.await.unwrap();
}

/// A push interrupted half-way and run again sends only what the first run did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_killed_half_way_sends_only_the_rest_when_run_again() {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let inputs = fx.dir.path().join("many");
    std::fs::create_dir_all(&inputs).unwrap();
    // Distinct files (no indexer runs here): a program with different trailing bytes each.
    let total = 40;
    let program = std::fs::read(fx.path("app")).unwrap();
    for i in 0..total {
        let mut bytes = program.clone();
        bytes.extend(std::iter::repeat_n(i as u8, 256 * 1024));
        std::fs::write(inputs.join(format!("p{i:02}")), bytes).unwrap();
    }
    let mut first = Command::new(cli())
        .args([
            "push",
            inputs.to_str().unwrap(),
            "--build",
            "b9",
            "--jobs",
            "1",
        ])
        .args(["--ingest", &format!("s3://{INGEST}")])
        .envs(stack.moto.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once something is in the bucket, whatever else it had sent by then.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while stack.keys(INGEST, "").await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "nothing was sent");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    first.kill().unwrap();
    let _ = first.wait();
    // What the bucket holds once the first run is dead. moto may still be storing the one
    // object whose body the run had sent (`--jobs 1`: one request in flight) when it died.
    let there: std::collections::BTreeSet<String> =
        stack.keys(INGEST, "").await.into_iter().collect();
    assert!(
        there.len() < total,
        "the first run was not stopped half-way"
    );

    let (out, lines) = {
        let mut command = Command::new(cli());
        command
            .args(["push", inputs.to_str().unwrap(), "--build", "b9", "--json"])
            .args(["--ingest", &format!("s3://{INGEST}")])
            .envs(stack.moto.env());
        let out = command.output().unwrap();
        let lines: Vec<Value> = json_lines(&out.stdout);
        (out, lines)
    };
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let files: Vec<&Value> = lines.iter().filter(|l| l.get("path").is_some()).collect();
    assert_eq!(files.len(), total);
    assert!(files.iter().all(|l| l["status"] == "uploaded"), "{files:?}");
    let kept: std::collections::BTreeSet<String> = files
        .iter()
        .filter(|l| l["sent"] == false)
        .filter_map(|l| l["ingest_key"].as_str().map(str::to_string))
        .collect();
    assert!(
        kept.is_superset(&there),
        "sent again what was there: {files:?}"
    );
    assert!(
        kept.len() <= there.len() + 1,
        "kept more than was there and the one request in flight: {files:?}"
    );
    assert_eq!(stack.keys(INGEST, "").await.len(), total);
}

/// Clear errors, exit 2: a bucket that does not exist; no credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_or_missing_credentials_is_an_error_naming_it() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let run = |ingest: &str, env: Vec<(&'static str, String)>| {
        Command::new(cli())
            .args(["push", fx.path("app").to_str().unwrap(), "--build", "b"])
            .args(["--ingest", ingest])
            .env_remove("AWS_PROFILE")
            .envs(env)
            .output()
            .unwrap()
    };
    let out = run("s3://no-such-bucket", stack.moto.env());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no-such-bucket does not exist"), "{stderr}");

    let no_credentials: Vec<_> = stack
        .moto
        .env()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("AWS_ACCESS_KEY") && !k.starts_with("AWS_SECRET"))
        .chain([
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".to_string()),
            ("AWS_CONFIG_FILE", "/nonexistent".to_string()),
        ])
        .collect();
    let out = run(&format!("s3://{INGEST}"), no_credentials);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no AWS credentials"), "{stderr}");
}

/// `symdex` against a deployment as against a directory: the same inputs pushed (indexed by
/// the bootstrap) and indexed locally; `verify`, `check --store`, `expire --dry-run` and
/// `promote` agree between `s3://` and the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_audits_and_promotes_a_deployment_as_it_does_a_directory() {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let inputs = build_inputs(&fx);
    let (stop, indexer) = run_indexer(&stack);
    let out_dir = inputs.to_str().unwrap();
    let args = [
        "--build",
        "b1",
        "--channel",
        "try",
        "--wait",
        "--timeout",
        "120",
    ];
    let (out, lines) = push(&stack, &[&[out_dir][..], &args[..]].concat()).await;
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    stop.store(true, Ordering::Relaxed);
    indexer.await.unwrap();
    let local = fx.dir.path().join("local-store");
    let local = local.to_str().unwrap();
    let deployed = format!("s3://{SERVING}");
    let symdex = |args: &[&str]| {
        let out = Command::new(cli())
            .args(args)
            .envs(stack.moto.env())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = symdex(&[
        "index",
        "--store",
        local,
        "--build",
        "b1",
        "--channel",
        "try",
        out_dir,
    ]);
    assert_eq!(code, Some(0), "{err}");

    for store in [local, deployed.as_str()] {
        let (code, out, err) = symdex(&["verify", store]);
        assert_eq!(code, Some(0), "{store}: {out}{err}");
        assert!(out.contains(", 0 problems"), "{store}: {out}");
    }

    // check: debuginfod's keys of the program and its debug file, found in both.
    let program = inputs.join("app");
    let checked = |store: &str| -> Vec<(String, String)> {
        let (code, out, err) = symdex(&[
            "check",
            "--store",
            store,
            "--client",
            "debuginfod",
            "--json",
            program.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{store}: {out}{err}");
        let mut rows: Vec<(String, String)> = json_lines(out.as_bytes())
            .into_iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap_or_default().to_string(),
                    r["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let from_bucket = checked(&deployed);
    assert!(!from_bucket.is_empty());
    assert!(
        from_bucket.iter().all(|(_, status)| status == "found"),
        "{from_bucket:?}"
    );
    assert_eq!(from_bucket, checked(local));
    // expire --dry-run: the try uploads would go in a century, from both.
    let expiry = |store: &str| {
        let (code, out, err) = symdex(&[
            "expire",
            "--store",
            store,
            "--dry-run",
            "--now",
            "2126-01-01T00:00:00Z",
            "--policy",
            "try=1d",
        ]);
        assert_eq!(code, Some(0), "{store}: {err}");
        out.lines().last().unwrap_or_default().to_string()
    };
    let summary = expiry(&deployed);
    assert!(summary.contains("5 uploads would expire"), "{summary}");
    assert_eq!(
        summary.split(',').next(),
        expiry(local).split(',').next(),
        "the same uploads"
    );
    let (code, _, err) = symdex(&[
        "expire",
        "--store",
        &deployed,
        "--now",
        "2126-01-01T00:00:00Z",
    ]);
    assert_eq!(code, Some(1), "a real expiry is the sweeper's: {err}");
    assert!(
        err.contains("sweeper") && err.contains("aws lambda invoke"),
        "says how to run the sweeper now: {err}"
    );

    // promote: to release, in both; nothing would expire then.
    for store in [local, deployed.as_str()] {
        let (code, out, err) = symdex(&[
            "promote", "--store", store, "--build", "b1", "--policy", "try=1d",
        ]);
        assert_eq!(code, Some(0), "{store}: {err}");
        assert!(
            out.contains("5 uploads of build b1 promoted to release"),
            "{store}: {out}"
        );
        assert!(expiry(store).contains(" 0 uploads would expire"), "{store}");
    }
    let (_, promoted, _) = symdex(&[
        "manifest", "query", &deployed, "--action", "promoted", "--json",
    ]);
    assert_eq!(promoted.lines().count(), 5, "{promoted}");

    // audit: the deployment's page counts the keys the directory's counts, by product and
    // layout, from the bucket's own listing (bytes differ: S3 keeps aliases, which hold none).
    let audited = |store: &str| {
        let page = fx.dir.path().join("audit.html");
        let (code, out, err) =
            symdex(&["audit", "--store", store, "--html", page.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{store}: {out}{err}");
        let html = std::fs::read_to_string(&page).unwrap();
        let open = r#"<script type="application/json" id="audit-data">"#;
        let start = html.find(open).unwrap() + open.len();
        let end = start + html[start..].find("</script>").unwrap();
        let data: Value = serde_json::from_str(&html[start..end]).unwrap();
        assert!(
            data["records"].as_u64().unwrap() >= 10,
            "{store}: {}",
            data["records"]
        );
        let lines: Vec<(Value, Value, Value, Value)> = data["holdings"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["product"].clone(),
                    l["layout"].clone(),
                    l["keys"].clone(),
                    l["published"].clone(),
                )
            })
            .collect();
        assert!(!lines.is_empty(), "{store}");
        (
            lines,
            data["holdings"]["unrecorded"].clone(),
            data["holdings"]["absent"].clone(),
        )
    };
    assert_eq!(audited(&deployed), audited(local));

    // delete --build: the deployment's ingest objects go, and its remover (run here on the
    // removal notifications) unpublishes what the directory's delete unpublishes.
    let (code, out, err) = symdex(&["delete", "--store", &deployed, "--build", "b1"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("5 ingest objects of build b1 deleted"),
        "{out}"
    );
    assert!(stack.objects(INGEST, "").await.is_empty());
    let removed = stack.receive(5).await;
    let ctx = Arc::new(symdex_lambda::Context::new(
        support::config(&[]),
        stack.moto.s3().await,
    ));
    let response = symdex_lambda::handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(
        response["batchItemFailures"],
        serde_json::json!([]),
        "{response}"
    );
    let (code, _, err) = symdex(&["delete", "--store", local, "--build", "b1"]);
    assert_eq!(code, Some(0), "{err}");
    let unpublished = |store: &str| {
        let (_, out, _) = symdex(&[
            "manifest",
            "query",
            store,
            "--action",
            "unpublished",
            "--json",
        ]);
        let mut removed: Vec<String> = json_lines(out.as_bytes())
            .into_iter()
            .flat_map(|r| r["removed"].as_array().cloned().unwrap_or_default())
            .map(|k| k.as_str().unwrap().to_string())
            .filter(|k| k.starts_with("buildid/"))
            .collect();
        removed.sort();
        removed
    };
    let gone = unpublished(&deployed);
    assert!(!gone.is_empty());
    assert_eq!(gone, unpublished(local));
    let left = stack.objects(SERVING, "buildid/").await;
    assert!(
        left.is_empty(),
        "{:?}",
        left.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    let (code, out, _) = symdex(&["verify", &deployed]);
    assert_eq!(code, Some(0), "{out}");
}

/// A failing S3: throttling, errors and resets are retried with backoff (every input sent);
/// an endpoint that fails every request after the first is reported per input, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_retries_a_failing_s3_and_reports_each_input_it_could_not_send() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let inputs = fx.dir.path().join("few");
    std::fs::create_dir_all(&inputs).unwrap();
    let program = std::fs::read(fx.path("app")).unwrap();
    for i in 0..6u8 {
        let mut bytes = program.clone();
        bytes.push(i);
        std::fs::write(inputs.join(format!("p{i}")), bytes).unwrap();
    }
    let via = |proxy: &fault_proxy::FaultProxy| {
        let mut command = Command::new(cli());
        command
            .args([
                "push",
                inputs.to_str().unwrap(),
                "--build",
                "b",
                "--json",
                "--jobs",
                "1",
            ])
            .args(["--ingest", &format!("s3://{INGEST}")])
            .envs(stack.moto.env())
            .env("AWS_ENDPOINT_URL", &proxy.endpoint);
        command
    };

    let flaky = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 20, 7).await;
    let mut command = via(&flaky);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let lines = json_lines(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let faults = &flaky.faults;
    let injected = faults.slow_down.load(Ordering::Relaxed)
        + faults.internal_error.load(Ordering::Relaxed)
        + faults.reset_before.load(Ordering::Relaxed)
        + faults.reset_after.load(Ordering::Relaxed);
    assert!(injected > 0, "no fault was injected");
    let ingest = stack.objects(INGEST, "").await;
    assert_eq!(ingest.len(), 6);
    for (key, bytes) in &ingest {
        let name = key.rsplit('/').next().unwrap();
        assert_eq!(bytes, &std::fs::read(inputs.join(name)).unwrap(), "{key}");
    }

    let dead = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 0, 1).await;
    // The reachability check and the listing of the build's prefix pass; everything after
    // them is reset.
    dead.faults.cut_after(2);
    std::fs::remove_dir_all(&inputs).unwrap();
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::write(inputs.join("late"), {
        let mut bytes = program.clone();
        bytes.push(99);
        bytes
    })
    .unwrap();
    let mut command = via(&dead);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let lines = json_lines(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    let late = status_of(&lines, "late");
    assert_eq!(late["status"], "failed", "{late}");
    assert!(!late["reason"].as_str().unwrap().is_empty());
}

/// A file above the multipart threshold goes up in parts (several at once, each streamed
/// from the file, and read from it again for a retry) through an S3 failing a fifth of its
/// requests, and comes back byte-identical, with the CRC-32 its parts carried declared on the
/// object; a re-run knows it by the ETag its parts make, and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_goes_in_parts_and_a_rerun_knows_it() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let dir = fx.dir.path().join("large");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = std::fs::read(fx.path("app")).unwrap();
    bytes.extend((0..70u32 * 1024 * 1024 / 4).flat_map(|i| i.to_le_bytes()));
    std::fs::write(dir.join("big"), &bytes).unwrap();
    let run = |endpoint: &str| {
        let out = Command::new(cli())
            .args(["push", dir.to_str().unwrap(), "--build", "b", "--json"])
            .args(["--ingest", &format!("s3://{INGEST}")])
            .envs(stack.moto.env())
            .env("AWS_ENDPOINT_URL", endpoint)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Value> = json_lines(&out.stdout);
        status_of(&lines, "big").clone()
    };
    let flaky = fault_proxy::FaultProxy::start(&stack.moto.endpoint, 20, 11).await;
    let first = {
        let endpoint = flaky.endpoint.clone();
        let run = &run;
        tokio::task::block_in_place(|| run(&endpoint))
    };
    assert_eq!(first["sent"], true);
    let log = flaky.faults.log.lock().unwrap().clone();
    let parts = log.iter().filter(|r| r.contains("partNumber=")).count();
    let faults = &flaky.faults;
    let injected = faults.slow_down.load(Ordering::Relaxed)
        + faults.internal_error.load(Ordering::Relaxed)
        + faults.reset_before.load(Ordering::Relaxed)
        + faults.reset_after.load(Ordering::Relaxed);
    assert!(
        parts >= 5 && injected > 0,
        "{parts} parts, {injected} faults"
    );
    let head = stack
        .s3
        .head_object()
        .bucket(INGEST)
        .key("b/big")
        .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    let etag = head.e_tag().unwrap();
    assert!(
        etag.trim_matches('"').ends_with("-5"),
        "five 16 MiB parts: {etag}"
    );
    assert!(
        head.checksum_crc32().is_some(),
        "the parts' CRC-32 declared when the upload began: {head:?}"
    );
    let stored = stack.objects(INGEST, "b/").await;
    assert_eq!(stored.len(), 1);
    assert!(stored[0].1 == bytes, "the bytes differ");
    let endpoint = stack.moto.endpoint.clone();
    let again = tokio::task::block_in_place(|| run(&endpoint));
    assert_eq!(again["sent"], false, "known by its ETag");
}
