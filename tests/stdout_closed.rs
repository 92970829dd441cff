//! Standard output's (and standard error's) reader gone before symdex writes (`symdex ... |
//! head -1` once head has its line, `2>&1 | head`): no panic. A command that changes the
//! store finishes its work and exits as it would have; a read-only one ends quietly with the
//! status of a process its pipe's reader ended (141), never a success it did not reach
//! (src/stdout.rs).

mod common;

use std::process::{Command, Output, Stdio};

use common::{symdex, Workdir};

/// Runs `command` with its standard output (and, if `stderr_too`, its standard error) a pipe
/// whose reading end is closed at once: every write to it fails (EPIPE; the Rust runtime
/// ignores SIGPIPE). symdex cannot write before the pipe is closed: it has not started yet.
fn with_readers_gone(mut command: Command, stderr_too: bool) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    if stderr_too {
        drop(child.stderr.take());
    }
    child.wait_with_output().unwrap()
}

fn no_panic(what: &str, out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_ne!(out.status.code(), Some(101), "{what}: {stderr}");
    stderr
}

fn ended_quietly(what: &str, out: &Output) {
    let stderr = no_panic(what, out);
    assert!(stderr.is_empty(), "{what}: {stderr}");
    assert_eq!(out.status.code(), Some(141), "{what}");
}

/// Two executables of distinct build ids.
fn two_inputs(w: &Workdir) -> [std::path::PathBuf; 2] {
    std::fs::write(w.path("prog.c"), "int main(void) { return 0; }\n").unwrap();
    w.run("gcc", &["-g", "-Wl,--build-id=0x01", "-o", "one", "prog.c"]);
    w.run("gcc", &["-g", "-Wl,--build-id=0x02", "-o", "two", "prog.c"]);
    [w.path("one"), w.path("two")]
}

#[test]
fn an_index_whose_readers_are_gone_finishes_its_work() {
    let w = Workdir::new();
    let inputs = two_inputs(&w);
    for (stderr_too, store) in [(false, "store-a"), (true, "store-b")] {
        let store = w.path(store);
        let mut index = symdex();
        index
            .args(["index", "--json", "--store"])
            .arg(&store)
            .args(&inputs);
        let out = with_readers_gone(index, stderr_too);
        no_panic("index --json", &out);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        // The index ran to its end: both uploads are recorded and their keys verify.
        let query = symdex()
            .args(["manifest", "query", "--format", "json"])
            .arg(&store)
            .output()
            .unwrap();
        let records = String::from_utf8_lossy(&query.stdout);
        let indexed = records.matches("\"action\":\"indexed\"").count();
        assert_eq!(indexed, 2, "the index did not finish: {records}");
        let verify = symdex().arg("verify").arg(&store).output().unwrap();
        assert!(verify.status.success(), "{verify:?}");
    }
}

#[test]
fn a_read_only_command_whose_reader_is_gone_ends_quietly_and_not_as_a_success() {
    let w = Workdir::new();
    let inputs = two_inputs(&w);
    let store = w.path("store");
    let index = symdex()
        .args(["index", "--store"])
        .arg(&store)
        .args(&inputs)
        .output()
        .unwrap();
    assert!(index.status.success(), "{index:?}");

    let mut keys = symdex();
    keys.args(["keys", "--json"]).args(&inputs);
    ended_quietly("keys --json", &with_readers_gone(keys, false));

    let mut query = symdex();
    query.args(["manifest", "query"]).arg(&store);
    ended_quietly("manifest query", &with_readers_gone(query, false));

    let mut verify = symdex();
    verify.arg("verify").arg(&store);
    ended_quietly("verify", &with_readers_gone(verify, false));
}

/// The CLI's own sources print through `say!` and `say_err!` only: a `println!` or an
/// `eprintln!` brought back (a merge, a new command) panics again where a reader is gone.
#[test]
fn the_cli_prints_through_say_only() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if ["println!(", "print!(", "eprint!(", "eprintln!("]
                    .iter()
                    .any(|m| code.contains(m))
                {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "print macros that panic:\n{}",
        found.join("\n")
    );
}
