//! Retention with a fixed clock (`expire --now`): try builds expire after their retention
//! while keys they share with a release stay; promotion stops expiry; `--dry-run` changes
//! nothing; a policy given to `expire` recomputes expiries.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{build_split_elf, index_json, ok, symdex, verify_clean, Workdir};
use symdex_shared::retention::format_time;

const DAY: Duration = Duration::from_secs(86_400);

/// A split ELF program (`b/app.debug`, `b/app.stripped`) built with `build_id`, in a work
/// directory whose `store` is the store: (work dir, store, debug file).
fn program(build_id: &str, body: &str) -> (Workdir, PathBuf, PathBuf) {
    let w = Workdir::new();
    build_split_elf(&w, "b", build_id, body);
    let (store, debug) = (w.path("store"), w.path("b/app.debug"));
    (w, store, debug)
}

fn days_from_now(days: u32) -> String {
    format_time(SystemTime::now() + days * DAY)
}

/// `symdex index --build BUILD --channel CHANNEL FILES...`: its manifest records.
fn index_build(
    store: &Path,
    build: &str,
    channel: &str,
    files: &[&PathBuf],
) -> Vec<serde_json::Value> {
    let flags = ["--build", build, "--channel", channel];
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(|a| a.as_ref()).collect();
    args.extend(files.iter().map(|f| f.as_os_str()));
    index_json(store, &args)
}

fn expire(store: &Path, args: &[&str]) -> String {
    ok(symdex()
        .args(["expire", "--store"])
        .arg(store)
        .args(args)
        .output()
        .unwrap())
}

/// Every file of the store with its content (the whole tree, bookkeeping included).
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn number_before(text: &str, what: &str) -> u64 {
    let at = text
        .find(what)
        .unwrap_or_else(|| panic!("{what:?} in {text}"));
    text[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a number before {what:?} in {text}"))
}

#[test]
fn try_builds_expire_and_keys_shared_with_a_release_stay() {
    let (w, store, debug) = program("0x5e1ec7ed00000000000000000000000000000001", "x * 5");
    let stripped = w.path("b/app.stripped");
    let try_records = index_build(&store, "try-1", "try", &[&debug, &stripped]);
    for record in &try_records {
        assert_eq!(record["channel"], "try");
        assert!(record["expires"].as_str().is_some(), "{record}");
    }
    let release = index_build(&store, "rel-1", "release", &[&debug]);
    assert!(release[0].get("expires").is_none(), "release: forever");
    let bid = "5e1ec7ed00000000000000000000000000000001";
    let debuginfo = store.join(format!("buildid/{bid}/debuginfo"));
    let executable = store.join(format!("buildid/{bid}/executable"));
    assert!(debuginfo.is_file() && executable.is_file());

    // Within the 28 days of `try`: nothing goes.
    let out = expire(&store, &["--now", &days_from_now(27)]);
    assert!(out.contains("0 uploads expired"), "{out}");

    // A dry run after them reports what would go and changes nothing at all.
    let before = tree(&store);
    let dry = expire(&store, &["--dry-run", "--now", &days_from_now(29)]);
    assert_eq!(number_before(&dry, "uploads would expire"), 2, "{dry}");
    assert!(
        dry.contains(&format!("would unpublish buildid/{bid}/executable")),
        "{dry}"
    );
    assert!(
        !dry.contains(&format!("would unpublish buildid/{bid}/debuginfo")),
        "{dry}"
    );
    let freed = number_before(&dry, "bytes freed");
    assert!(
        freed >= std::fs::metadata(&stripped).unwrap().len(),
        "{dry}"
    );
    assert_eq!(tree(&store), before, "--dry-run changed the store");

    let out = expire(&store, &["--now", &days_from_now(29)]);
    assert_eq!(number_before(&out, "uploads expired"), 2, "{out}");
    assert_eq!(number_before(&out, "bytes freed"), freed, "{out}");
    assert!(debuginfo.is_file(), "the release still references it");
    assert!(!executable.exists(), "only the try build had it");
    verify_clean(&store);

    let query = ok(symdex()
        .args(["manifest", "query", "--action", "expired"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(query.contains("\n2 records"), "{query}");
    assert_eq!(query.matches(" expired ").count(), 2, "{query}");

    // Run again: nothing left to expire.
    let out = expire(&store, &["--now", &days_from_now(400)]);
    assert!(out.contains("0 uploads expired"), "{out}");
    assert!(debuginfo.is_file());
}

#[test]
fn a_promoted_build_does_not_expire() {
    let (_work, store, debug) = program("0x5e1ec7ed00000000000000000000000000000002", "x * 7");
    index_build(&store, "nightly-9", "nightly", &[&debug]);
    let out = ok(symdex()
        .args(["promote", "--build", "nightly-9", "--store"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(
        out.contains("1 uploads of build nightly-9 promoted to release"),
        "{out}"
    );
    assert!(
        out.contains("channel nightly -> release; expires never"),
        "{out}"
    );
    // The same upload delivered again keeps what the promotion made of it.
    let again = index_build(&store, "nightly-9", "nightly", &[&debug]);
    assert_eq!(again[0]["action"], "unchanged");
    assert_eq!(again[0]["channel"], "release", "{again:?}");
    assert!(again[0].get("expires").is_none(), "{again:?}");
    let out = expire(&store, &["--now", &days_from_now(4000)]);
    assert!(out.contains("0 uploads expired"), "{out}");
    assert!(store
        .join("buildid/5e1ec7ed00000000000000000000000000000002/debuginfo")
        .is_file());
    // An unknown build is an error, not a silent success.
    let missing = symdex()
        .args(["promote", "--build", "nope", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(!missing.status.success());
}

#[test]
fn a_policy_given_to_expire_recomputes_and_bad_channels_are_rejected() {
    let (_work, store, debug) = program("0x5e1ec7ed00000000000000000000000000000003", "x * 9");
    index_build(&store, "n-1", "nightly", &[&debug]);
    // Recorded: 90 days. Under a 7-day policy it is due after 8.
    let out = expire(&store, &["--dry-run", "--now", &days_from_now(8)]);
    assert!(out.contains("0 uploads would expire"), "{out}");
    let out = expire(
        &store,
        &["--now", &days_from_now(8), "--policy", "nightly=7d"],
    );
    assert!(out.contains("1 uploads expired"), "{out}");
    assert!(!store
        .join("buildid/5e1ec7ed00000000000000000000000000000003/debuginfo")
        .exists());

    // A channel that is not a plain name is rejected, with its reason in the manifest.
    let records = index_json(
        &store,
        &["--channel".as_ref(), "../x".as_ref(), debug.as_os_str()],
    );
    assert_eq!(records[0]["action"], "rejected", "{records:?}");
    assert!(records[0]["reason"].as_str().unwrap().contains("channel"));
    // A bad policy is a usage error.
    let bad = symdex()
        .args(["expire", "--policy", "try=soon", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(!bad.status.success());
}
