//! Standard output's reader gone before symdex writes (`symdex ... | head -1` once head has
//! its line): no panic. A command that changes the store finishes its work and exits as it
//! would have; a read-only one ends quietly (src/stdout.rs).

mod common;

use std::process::{Command, Output, Stdio};

use common::{symdex, Workdir};

/// Runs `command` with its standard output a pipe whose reading end is closed at once: every
/// write to it fails (EPIPE; the Rust runtime ignores SIGPIPE).
fn with_stdout_closed(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

fn quiet_success(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(!stderr.contains("Broken pipe"), "{what}: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
}

#[test]
fn a_reader_gone_is_no_panic_and_an_index_still_finishes() {
    let w = Workdir::new();
    std::fs::write(w.path("prog.c"), "int main(void) { return 0; }\n").unwrap();
    w.run("gcc", &["-g", "-o", "app", "prog.c"]);
    let store = w.path("store");

    let mut index = symdex();
    index
        .args(["index", "--json", "--store"])
        .arg(&store)
        .arg(w.path("app"));
    quiet_success("index --json", &with_stdout_closed(index));
    // The index ran to its end: its upload is recorded and its keys verify.
    let query = symdex()
        .args(["manifest", "query", "--format", "json"])
        .arg(&store)
        .output()
        .unwrap();
    let records = String::from_utf8_lossy(&query.stdout);
    assert!(
        records.contains("\"action\":\"indexed\""),
        "the index did not finish: {records}"
    );
    let verify = symdex().arg("verify").arg(&store).output().unwrap();
    assert!(verify.status.success(), "{verify:?}");

    let mut keys = symdex();
    keys.args(["keys", "--json"]).arg(w.path("app"));
    quiet_success("keys --json", &with_stdout_closed(keys));

    let mut query = symdex();
    query.args(["manifest", "query"]).arg(&store);
    quiet_success("manifest query", &with_stdout_closed(query));
}
