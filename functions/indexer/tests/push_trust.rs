//! `symdex push` against what an uploader's tree, its file names and the endpoints it talks to
//! can hold (THREATS.md): a debug file whose DWARF names `.env` and `config/secrets.env`
//! (gcc `#line`, as an attacker or an unlucky `#include` writes it) gets neither sent
//! without a flag, while the sources it names by two path components or by their MD5 are sent
//! and published as its sources; a file sharing only a base name is not sent. Names holding
//! terminal escapes are printed escaped, names that are not UTF-8 are skipped, and a server or
//! S3 endpoint that accepts connections and never answers fails the push in bounded time.

mod pushing;
#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pushing::{cli, push, run_indexer, status_of};
use support::{build_id_of, run_in, Stack, INGEST, SERVING};
use symdex_shared::testing::builders::{build_elf, dwarf5_line_table_with_md5, with_section};

/// A program whose DWARF names secret-shaped files and sources by `#line` (relative: below
/// the compile directory `root`).
const PROGRAM: &str = r#"int compute(int x) { return x * 3 + 1; }
#line 1 "config/secrets.env"
int secret_a(void) { return 1; }
#line 1 "deploy/.env"
int secret_b(void) { return 2; }
#line 1 "src/util.c"
int util(void) { return 3; }
#line 1 "lib/other.c"
int other(void) { return 4; }
#line 20 "prog.c"
int main(int c, char **v) { return compute(c) + secret_a() + secret_b() + util() + other(); }
"#;

const TABLE_C: &[u8] = b"int table[4] = {1, 2, 3, 4};\n";

/// The build tree `out/` under the canonical `root`: gcc's `app.debug` (its build id
/// returned), a builder's `table.debug` whose DWARF 5 names `/elsewhere/gen/table.c` with the
/// MD5 of `vendored/table.c`, the files they name and files nothing names.
fn tree(root: &Path) -> (PathBuf, String) {
    std::fs::write(root.join("prog.c"), PROGRAM).unwrap();
    run_in(root, &["gcc", "-g", "-O0", "-o", "app", "prog.c"]);
    let out = root.join("out");
    for dir in ["config", "deploy", "src", "misc", "vendored"] {
        std::fs::create_dir_all(out.join(dir)).unwrap();
    }
    run_in(
        root,
        &["objcopy", "--only-keep-debug", "app", "out/app.debug"],
    );
    let mut md5 = symdex_shared::digest::Md5::default();
    md5.update(TABLE_C);
    let md5 = md5.digest();
    let table_debug = with_section(
        build_elf(true, false, 62, Some(&[0x7a; 20]), true),
        ".debug_line",
        &dwarf5_line_table_with_md5("/elsewhere", &[("gen/table.c", md5)]),
    );
    std::fs::write(out.join("table.debug"), table_debug).unwrap();
    for (name, text) in [
        ("config/secrets.env", &b"DB_PASSWORD=hunter2\n"[..]),
        ("deploy/.env", b"API_TOKEN=s3cr3t\n"),
        ("src/util.c", b"int util(void) { return 3; }\n"),
        ("misc/other.c", b"int other(void) { return 4; }\n"),
        ("vendored/table.c", TABLE_C),
        ("notes.txt", b"not an artifact\n"),
    ] {
        std::fs::write(out.join(name), text).unwrap();
    }
    (out, build_id_of(&root.join("app")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_a_debug_file_names_are_not_sent_and_its_sources_are() {
    let stack = Arc::new(Stack::new().await);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (out, build_id) = tree(&root);
    let (stop, indexer) = run_indexer(&stack);
    let out_arg = out.to_str().unwrap();
    let args = [out_arg, "--build", "b1", "--product", "app", "--wait"];

    let (output, lines) = push(&stack, &[&args[..], &["--timeout", "120"]].concat()).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{lines:?}\n{stderr}");
    for (name, wanted) in [
        ("src/util.c", format!("{}/src/util.c", root.display())),
        ("vendored/table.c", "/elsewhere/gen/table.c".to_string()),
    ] {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "published", "{line}");
        assert_eq!(line["source_for"], serde_json::json!([wanted]), "{line}");
    }
    let util = status_of(&lines, "src/util.c");
    let util_key = format!("buildid/{build_id}/source{}/src/util.c", root.display());
    assert!(util["keys"].as_array().unwrap().contains(&util_key.into()));
    for (name, what) in [
        ("config/secrets.env", "secret-shaped (secrets file)"),
        ("deploy/.env", "secret-shaped (environment file)"),
    ] {
        let line = status_of(&lines, name);
        assert_eq!(
            (&line["status"], &line["sent"]),
            (&"skipped".into(), &false.into())
        );
        let reason = line["reason"].as_str().unwrap();
        assert!(reason.contains(what), "{line}");
        assert!(
            reason.contains("a debug file of this push names it"),
            "{line}"
        );
    }
    // Only the base name in common (lib/other.c is named), no MD5: not sent.
    for name in ["misc/other.c", "notes.txt"] {
        let line = status_of(&lines, name);
        assert_eq!(
            (&line["status"], &line["sent"]),
            (&"skipped".into(), &false.into())
        );
    }
    let sent: Vec<String> = stack.keys(INGEST, "app/b1/").await;
    assert!(
        !sent
            .iter()
            .any(|k| k.ends_with(".env") || k.ends_with("other.c")),
        "{sent:?}"
    );
    let published = stack
        .objects(SERVING, &format!("buildid/{build_id}/source"))
        .await;
    assert!(
        published.iter().all(|(k, _)| k.ends_with("/src/util.c")),
        "{published:?}"
    );

    // Flagged (`--source-ext env` flags secrets.env, not `.env`, which has no extension):
    // sent, and the deployment, whose own settings flag no `env` sources, refuses it, saying
    // why.
    let flagged = [&args[..], &["--timeout", "120", "--source-ext", "env"]].concat();
    let (output, lines) = push(&stack, &flagged).await;
    assert_eq!(output.status.code(), Some(0), "{lines:?}");
    let secrets = status_of(&lines, "config/secrets.env");
    assert_eq!(
        (&secrets["status"], &secrets["sent"]),
        (&"skipped".into(), &true.into())
    );
    assert!(
        secrets["reason"]
            .as_str()
            .unwrap()
            .contains("secret-shaped"),
        "{secrets}"
    );
    assert_eq!(status_of(&lines, "deploy/.env")["sent"], false);
    let published = stack
        .objects(SERVING, &format!("buildid/{build_id}/source"))
        .await;
    assert!(
        !published.iter().any(|(k, _)| k.ends_with(".env")),
        "{published:?}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    indexer.await.unwrap();
}

/// `symdex push ARGS...` printing its table (no `--json`), with `env`.
async fn push_table(args: &[&str], env: Vec<(&'static str, String)>) -> Output {
    let mut command = Command::new(cli());
    command.arg("push").args(args).envs(env);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_printed_escaped_and_names_not_utf8_are_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let stack = Stack::new().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let elf = build_elf(true, false, 62, Some(&[0x3c; 20]), false);
    std::fs::write(out.join("evil\u{1b}[31m\u{202e}.so"), &elf).unwrap();
    for name in [&b"lib\xff.so"[..], b"lib\xfe.so"] {
        std::fs::write(out.join(std::ffi::OsStr::from_bytes(name)), &elf).unwrap();
    }
    let ingest = format!("s3://{INGEST}");
    let args = [out.to_str().unwrap(), "--build", "b1", "--ingest", &ingest];
    let output = push_table(&args, stack.moto.env()).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(!output.stdout.contains(&0x1b), "{stdout}");
    assert!(!stdout.contains('\u{202e}'), "{stdout}");
    assert!(stdout.contains("evil\\x1b[31m\\u{202e}.so"), "{stdout}");
    for shown in ["lib\\xff.so", "lib\\xfe.so"] {
        let row = stdout
            .lines()
            .find(|l| l.contains(shown))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(
            row.starts_with("skipped") && row.contains("not UTF-8"),
            "{row}"
        );
    }
    // Nothing under a lossy name: no key holds U+FFFD.
    let sent = stack.objects(INGEST, "").await;
    assert!(
        sent.iter().all(|(k, _)| !k.contains('\u{fffd}')),
        "{sent:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_or_endpoint_that_never_answers_fails_the_push_in_time() {
    // Connections are accepted (by the backlog) and never answered while it lives.
    let hung = TcpListener::bind("127.0.0.1:0").unwrap();
    let hung_url = format!("http://{}", hung.local_addr().unwrap());
    let stack = Stack::new().await;
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("lib.so");
    std::fs::write(&elf, build_elf(true, false, 62, Some(&[0x4d; 20]), false)).unwrap();
    let (ingest, serving) = (format!("s3://{INGEST}"), format!("s3://{SERVING}"));
    let base = [elf.to_str().unwrap(), "--build", "b1", "--ingest", &ingest];
    let with_server = [
        &base[..],
        &["--serving", &serving, "--server", &hung_url, "--wait"],
        &["--timeout", "600", "--request-timeout", "2"],
    ]
    .concat();
    let started = Instant::now();
    let output = push_table(&with_server, stack.moto.env()).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        stderr.contains("did not answer within 2 s (--request-timeout)"),
        "{stderr}"
    );

    // The S3 endpoint itself: each attempt given up, the SDK's retries counted.
    let mut env = stack.moto.env();
    env.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    env.push(("AWS_ENDPOINT_URL", hung_url.clone()));
    let started = Instant::now();
    let output = push_table(&[&base[..], &["--request-timeout", "2"]].concat(), env).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr.contains("did not answer in time"), "{stderr}");
    drop(hung);
}
