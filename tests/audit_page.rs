//! `symdex audit --html`: the page, opened from disk in a real headless Chromium (Debian's
//! `chromium`, driven by npm `playwright-core` from tests/browser/, both installed by
//! scripts/setup.sh). It fetches nothing, agrees with `manifest query`, finds uploads by debug
//! id, shows conflicts with their holders and rejections with their reasons, shows hostile
//! names as text, and stays usable at 100,000 records.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{build_split_elf, symdex, Workdir};
use serde_json::{json, Value};
use symdex_shared::manifest::{Action, Record, SCHEMA_VERSION};
use symdex_shared::upload_meta::UploadMeta;

const CHROMIUM: &str = "/usr/bin/chromium";
/// A hostile name: markup that would run if the page ever parsed data as HTML, and terminal
/// escapes (ESC ... BEL retitles a terminal).
const HOSTILE_NAME: &str = "<script>alert(1)</script>\x1b]0;pwn\x07.pdb";
/// How the page shows it: as text, the control characters as visible escapes.
const HOSTILE_SHOWN: &str = "<script>alert(1)</script>\\x1b]0;pwn\\x07.pdb";
/// The 100,000-record page on this 2-core machine: opened and drawn within LOAD_BOUND, each
/// filter or search within FILTER_BOUND (measured in the browser, from the navigation or the
/// keystroke to the drawn table).
const LOAD_BOUND: Duration = Duration::from_secs(10);
const FILTER_BOUND: Duration = Duration::from_secs(3);

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// The browser and the driver are test prerequisites: missing, the test fails saying how to
/// install them (never a silent skip, in CI least of all).
fn require_browser() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium (apt-get install chromium)"
    );
    assert!(
        browser_dir().join("node_modules/playwright-core").is_dir(),
        "tests/browser/node_modules/playwright-core is missing: scripts/setup.sh runs npm ci there"
    );
}

/// Runs the page's probes in Chromium (tests/browser/audit_page.mjs) and returns what it saw.
fn browse(dir: &Path, page: &Path, probes: Value) -> Value {
    require_browser();
    let spec = json!({
        "chromium": CHROMIUM,
        "userDataDir": dir.join("chromium-profile"),
        "page": page,
        "timeoutMs": 60_000,
        "probes": probes,
    });
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).expect("write spec");
    let out = Command::new("node")
        .arg(browser_dir().join("audit_page.mjs"))
        .arg(&spec_path)
        .output()
        .expect("node (scripts/setup.sh installs nodejs)");
    assert!(
        out.status.success(),
        "the browser run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the driver's JSON");
    // Opened from disk, the page asks for nothing else, says nothing went wrong, and no
    // uploader's text ever ran as script.
    assert_eq!(seen["refused"], json!([]), "network requests: {seen}");
    let requests = seen["requests"].as_array().expect("requests");
    assert!(
        requests
            .iter()
            .all(|r| r.as_str().is_some_and(|r| r.starts_with("file://"))),
        "{requests:?}"
    );
    assert_eq!(seen["dialogs"], json!([]), "a dialog opened: script ran");
    assert_eq!(seen["errors"], json!([]), "script errors");
    seen
}

fn audit(store: &Path, html: &Path) {
    let out = symdex()
        .args(["audit", "--store"])
        .arg(store)
        .arg("--html")
        .arg(html)
        .output()
        .expect("run symdex audit");
    assert!(
        out.status.success(),
        "symdex audit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `symdex manifest query STORE ARGS --json`, one record per line.
fn query(store: &Path, args: &[&str]) -> Vec<Value> {
    let out = symdex()
        .args(["manifest", "query"])
        .arg(store)
        .args(args)
        .arg("--json")
        .output()
        .expect("run manifest query");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect()
}

fn index(w: &Workdir, store: &Path, inputs: &[&str], product: &str, build: &str) {
    let out = symdex()
        .arg("index")
        .args(inputs.iter().map(|i| w.path(i)))
        .arg("--store")
        .arg(store)
        .args(["--product", product, "--build", build, "--allow-conflicts"])
        .output()
        .expect("run symdex index");
    assert!(
        out.status.success(),
        "index: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `records` as one manifest object, in the manifest's own format (JSON Lines under
/// `_manifest/dt=DAY/`), named to sort at `stamp`.
fn write_manifest(store: &Path, day: &str, stamp: &str, records: &[Record]) {
    let dir = store.join(format!("_manifest/dt={day}"));
    std::fs::create_dir_all(&dir).expect("manifest dir");
    let mut body = String::new();
    for r in records {
        body.push_str(&serde_json::to_string(r).expect("record"));
        body.push('\n');
    }
    std::fs::write(dir.join(format!("{stamp}-0123456789ab.jsonl")), body).expect("write");
}

fn row_of(records: &[Value], pick: impl Fn(&Value) -> bool) -> usize {
    let found = records.iter().position(pick);
    found.unwrap_or_else(|| panic!("no such record in {records:#?}"))
}

/// Name and decision of each row a probe saw (columns: time, decision, product, build,
/// channel, format, arch, name...).
fn names_and_decisions(probe: &Value) -> Vec<(String, String)> {
    probe["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            let cell = |i: usize| row[i].as_str().unwrap_or_default().to_string();
            (cell(7), cell(1))
        })
        .collect()
}

fn ms(probe: &Value) -> Duration {
    Duration::from_millis(probe["ms"].as_u64().expect("ms"))
}

/// A store indexed for real: two products publishing debug files of one build id (a
/// cross-product conflict), a debug file whose source was never uploaded, a malformed
/// archive (rejected), a hostile file name; plus one record carrying markup and terminal
/// escapes in its name, written into the manifest as the manifest writes records.
fn indexed_store(w: &Workdir) -> PathBuf {
    let store = w.path("store");
    let build_id = "0xa1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
    build_split_elf(w, "a", build_id, "x * 2");
    build_split_elf(w, "b", build_id, "x * 3");
    std::fs::write(w.path("broken.zip"), b"PK\x03\x04\x14\x00\x00\x00garbage").expect("zip");
    let hostile_file = "<img src=x onerror=alert(2)>\x1b[31m.debug";
    std::fs::copy(w.path("a/app.debug"), w.path(hostile_file)).expect("copy");
    index(
        w,
        &store,
        &["a/app.debug", "a/app.stripped"],
        "prodA",
        "Build-1",
    );
    index(
        w,
        &store,
        &["b/app.debug", "broken.zip", hostile_file],
        "prodB",
        "B2",
    );
    let hostile = Record {
        schema: SCHEMA_VERSION,
        time: "2026-11-20T10:00:00Z".into(),
        action: Some(Action::Rejected),
        reason: Some(format!("name {HOSTILE_NAME:?} is not a valid name")),
        upload: format!("file:/in/{HOSTILE_NAME}"),
        ingest_key: format!("/in/{HOSTILE_NAME}"),
        name: Some(HOSTILE_NAME.into()),
        meta: UploadMeta {
            build: Some("B3".into()),
            product: Some("prodC".into()),
            ..UploadMeta::default()
        },
        indexer: "symdex 0.1.0".into(),
        ..Record::default()
    };
    write_manifest(&store, "2026-11-20", "20261120100000000000000", &[hostile]);
    store
}

/// The page answers the audit questions about [`indexed_store`]'s store, as `manifest query`
/// does.
#[test]
fn the_page_answers_the_audit_questions_in_a_real_browser() {
    let w = Workdir::new();
    let store = indexed_store(&w);

    let html = w.path("audit.html");
    audit(&store, &html);
    let all = query(&store, &[]);
    // The build as a person types it: `manifest query` folds ASCII case, and so does the page.
    let build_1 = query(&store, &["--build", "BUILD-1"]);
    let b2 = query(&store, &["--build", "B2"]);
    assert!(build_1.len() >= 2 && b2.len() >= 3, "{build_1:?} {b2:?}");
    let debug_id = build_1[0]["debug_id"]
        .as_str()
        .expect("debug id")
        .to_string();
    let with_id = query(&store, &["--debug-id", &debug_id]);
    let conflict = row_of(&all, |r| {
        r["action"] == "conflict" && r["product"] == "prodB"
    });
    assert_eq!(all[conflict]["held_by_products"], json!(["prodA"]));
    let rejected = row_of(&all, |r| r["name"] == "broken.zip");
    assert_eq!(all[rejected]["action"], "rejected");
    let reason = all[rejected]["reason"]
        .as_str()
        .expect("reason")
        .to_string();

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit_page");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let overview_png = shots.join("overview.png");
    let seen = browse(
        w.dir.path(),
        &html,
        json!([
            {"name": "overview", "load": true, "screenshot": overview_png},
            {"name": "build-1", "hash": "view=uploads&build=BUILD-1"},
            {"name": "b2", "hash": "view=uploads&build=B2"},
            {"name": "all", "hash": "view=uploads"},
            {"name": "search", "search": debug_id.to_uppercase()},
            {"name": "conflict", "hash": format!("view=conflicts&row={conflict}")},
            {"name": "rejected", "hash": format!("view=uploads&decision=rejected&row={rejected}")},
            {"name": "hostile", "hash": "view=uploads&q=alert"},
            {"name": "missing", "hash": "view=missing"},
            {"name": "store", "hash": "view=store"},
            {"name": "builds", "hash": "view=builds"},
        ]),
    );
    let probe = |name: &str| &seen["probes"][name];
    println!("overview screenshot: {}", overview_png.display());
    assert!(std::fs::metadata(&overview_png).is_ok_and(|m| m.len() > 10_000));

    // The page says how many records it read.
    let read = format!("{} records read", all.len());
    let source = probe("overview")["source"].as_str().unwrap_or_default();
    assert!(source.contains(&read), "{source}");

    // A build's rows are `manifest query --build B --json`'s lines, in the same order.
    for (name, lines) in [("build-1", &build_1), ("b2", &b2)] {
        assert_rows_are(probe(name), lines, name);
    }
    assert_eq!(probe("all")["count"], json!(all.len()));
    assert_eq!(probe("builds")["count"], json!(3), "Build-1, B2 and B3");

    // Searching a debug id (in another case) finds exactly the uploads that have it.
    assert_eq!(probe("search")["count"], json!(with_id.len()));
    assert!(with_id.len() >= 4, "{with_id:?}");
    for row in probe("search")["rows"].as_array().expect("rows") {
        assert_eq!(row[8], json!(debug_id), "{row}");
    }

    // A conflict shows both products and the upload holding its keys.
    let detail = probe("conflict")["detail"]
        .as_str()
        .expect("conflict detail");
    assert!(detail.contains("held by products\nprodA"), "{detail}");
    assert!(
        detail.contains("prodA · build Build-1 · app.debug"),
        "{detail}"
    );
    let held = names_and_decisions(probe("conflict"));
    assert!(held.iter().all(|(_, d)| d == "conflict"), "{held:?}");
    let rows = probe("conflict")["rows"].to_string();
    assert!(rows.contains("prodB ⇄ prodA"), "{rows}");

    // A rejected upload shows its reason, in the table and in its detail.
    let rows = probe("rejected")["rows"].as_array().expect("rows");
    assert!(rows.iter().any(|r| r[11] == json!(reason)), "{rows:?}");
    let detail = probe("rejected")["detail"].as_str().expect("detail");
    assert!(detail.contains(&reason), "{detail}");

    // Hostile names are text: shown, escapes visible, nothing ran (no dialog, asserted in
    // `browse`), no element added.
    let names: Vec<String> = names_and_decisions(probe("hostile"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&HOSTILE_SHOWN.to_string()), "{names:?}");
    assert!(names
        .iter()
        .any(|n| n.starts_with("<img src=x onerror=alert(2)>\\x1b[31m")));
    assert_eq!(
        probe("hostile")["scripts"],
        json!(2),
        "the page's own two scripts only"
    );

    // The debug file's source (prog.c, never uploaded) is missing; as manifest query says.
    let missing = query(&store, &["--missing-sources"]);
    assert!(!missing.is_empty());
    assert_eq!(probe("missing")["count"], json!(missing.len()));
    let text = probe("missing")["main"].as_str().unwrap_or_default();
    assert!(text.contains("prog.c"), "{text}");

    // The store's holdings: keys under the layouts, by product; every file of the store
    // outside its bookkeeping counted once, with its size.
    let text = probe("store")["main"].as_str().unwrap_or_default();
    assert!(text.contains("prodA\tdebuginfod"), "{text}");
    assert_holdings_are_the_files(&html, &store);
}

/// A view's rows are `lines` (`manifest query --json`'s records), in their order.
fn assert_rows_are(probe: &Value, lines: &[Value], name: &str) {
    assert_eq!(probe["count"], json!(lines.len()), "{name}");
    let expected: Vec<(String, String)> = lines
        .iter()
        .map(|r| {
            let s = |f: &str| r[f].as_str().unwrap_or_default().to_string();
            let name = Some(s("name")).filter(|n| !n.is_empty());
            let name = name.unwrap_or_else(|| s("ingest_key"));
            (name.replace('\x1b', "\\x1b"), s("action"))
        })
        .collect();
    assert_eq!(names_and_decisions(probe), expected, "{name}");
}

/// The page's holdings count every file of the store outside its bookkeeping once, with
/// its size.
fn assert_holdings_are_the_files(html: &Path, store: &Path) {
    let (files, bytes) = published_files(store);
    let lines = embedded(html)["holdings"]["lines"].clone();
    let sum = |field: &str| -> u64 {
        let lines = lines.as_array().expect("lines");
        lines.iter().map(|l| l[field].as_u64().unwrap_or(0)).sum()
    };
    assert_eq!((sum("keys"), sum("bytes")), (files, bytes), "{lines}");
}

/// The store's files outside `_symdex/` and `_manifest/`, less the two-tier layout's marker
/// (`verify` does not count it either), and their bytes.
fn published_files(store: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    for entry in walkdir::WalkDir::new(store) {
        let entry = entry.expect("walk");
        let rel = entry.path().strip_prefix(store).expect("under the store");
        let bookkeeping = rel.starts_with("_symdex")
            || rel.starts_with("_manifest")
            || rel.ends_with(symdex_shared::layouts::symstore_index2::MARKER_KEY);
        if entry.file_type().is_file() && !bookkeeping {
            files += 1;
            bytes += entry.metadata().expect("metadata").len();
        }
    }
    (files, bytes)
}

/// The data the page embeds.
fn embedded(html: &Path) -> Value {
    let page = std::fs::read_to_string(html).expect("page");
    let open = r#"<script type="application/json" id="audit-data">"#;
    let start = page.find(open).expect("data element") + open.len();
    let end = start + page[start..].find("</script>").expect("its end");
    serde_json::from_str(&page[start..end]).expect("the data")
}

/// 100,000 records (written in the manifest's format, over 40 days, 5 products, 2,000
/// builds) make a page that opens, filters and searches within the stated bounds.
#[test]
fn a_hundred_thousand_records_load_and_filter_within_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    const RECORDS: usize = 100_000;
    const DAYS: usize = 40;
    let actions = [
        Action::Indexed,
        Action::Unchanged,
        Action::Indexed,
        Action::Skipped,
        Action::Rejected,
        Action::Conflict,
        Action::Indexed,
    ];
    let channels = ["try", "nightly", "release"];
    let mut expected_conflict_nightly = 0;
    let mut expected_early_november = 0;
    for day in 0..DAYS {
        let date = format!("2026-10-{:02}", day % 30 + 1);
        let date = if day < 30 {
            date
        } else {
            format!("2026-11-{:02}", day - 29)
        };
        let records: Vec<Record> = (day * RECORDS / DAYS..(day + 1) * RECORDS / DAYS)
            .map(|i| {
                let action = actions[i % actions.len()];
                let channel = channels[i % channels.len()];
                if action == Action::Conflict && channel == "nightly" {
                    expected_conflict_nightly += 1;
                }
                synthetic(i, &date, action, channel)
            })
            .collect();
        if ("2026-11-01".."2026-11-06").contains(&date.as_str()) {
            expected_early_november += records.len();
        }
        let stamp = format!("{}000000000000000", date.replace('-', ""));
        write_manifest(&store, &date, &stamp, &records);
    }
    let html = dir.path().join("audit.html");
    let started = Instant::now();
    audit(&store, &html);
    let size = std::fs::metadata(&html).map(|m| m.len()).unwrap_or(0);
    println!(
        "symdex audit over {RECORDS} records: {:?}, page {size} bytes",
        started.elapsed()
    );
    let build = "build-1234";
    let in_build = query(&store, &["--build", build]).len();
    let seen = browse(
        dir.path(),
        &html,
        json!([
            {"name": "load", "load": true},
            {"name": "filter", "hash": "view=uploads&decision=conflict&channel=nightly"},
            {"name": "dates", "hash": "view=uploads&from=2026-11-01&to=2026-11-05"},
            {"name": "uploads", "hash": "view=uploads"},
            {"name": "typed", "search": format!("{:08x}-", 77_777)},
            {"name": "build", "hash": format!("view=uploads&build={build}")},
            {"name": "page", "hash": "view=uploads&page=1500"},
        ]),
    );
    let probe = |name: &str| &seen["probes"][name];
    for name in [
        "load", "filter", "dates", "uploads", "typed", "build", "page",
    ] {
        println!("{name}: {:?}", ms(probe(name)));
    }
    let source = probe("load")["source"].as_str().unwrap_or_default();
    assert!(source.contains("100000 records read"), "{source}");
    assert!(
        ms(probe("load")) < LOAD_BOUND,
        "load {:?}",
        ms(probe("load"))
    );
    for name in ["filter", "dates", "typed", "build", "page"] {
        assert!(
            ms(probe(name)) < FILTER_BOUND,
            "{name}: {:?}",
            ms(probe(name))
        );
    }
    assert_eq!(probe("filter")["count"], json!(expected_conflict_nightly));
    assert_eq!(probe("dates")["count"], json!(expected_early_november));
    assert!(expected_early_november > 0);
    assert_eq!(probe("typed")["count"], json!(1));
    assert_eq!(probe("build")["count"], json!(in_build));
    assert!(in_build > 0);
    // Paged: one page of rows drawn, whatever the number matched.
    assert_eq!(probe("page")["rows"].as_array().map(Vec::len), Some(50));
}

/// Record `i` of the synthetic manifest.
fn synthetic(i: usize, date: &str, action: Action, channel: &str) -> Record {
    let debug_id = format!("{i:08x}-0000-4000-8000-{:012x}", i * 7);
    let name = format!("lib{}.so.debug", i % 3000);
    let conflict = action == Action::Conflict;
    let key = format!("buildid/{i:040x}/debuginfo");
    Record {
        schema: SCHEMA_VERSION,
        time: format!("{date}T{:02}:{:02}:{:02}Z", i % 24, i % 60, (i / 60) % 60),
        action: Some(action),
        reason: (action == Action::Rejected).then(|| "a malformed zip archive".to_string()),
        upload: format!("s3://ingest/p{}/{name}@{i}", i % 5),
        ingest_key: format!("p{}/{name}", i % 5),
        ingest_size: Some(10_000 + (i as u64 % 5000)),
        meta: UploadMeta {
            build: Some(format!("build-{}", i % 2000)),
            product: Some(format!("product-{}", i % 5)),
            channel: Some(channel.to_string()),
            ..UploadMeta::default()
        },
        format: Some(symdex_shared::Format::Elf),
        arch: Some(symdex_shared::Arch::X86_64),
        debug_id: debug_id.parse().ok(),
        code_id: Some(format!("{i:040x}").into()),
        name: Some(name),
        published: if conflict { vec![] } else { vec![key.clone()] },
        conflicts: if conflict { vec![key] } else { vec![] },
        held_by_products: if conflict {
            vec![format!("product-{}", (i + 1) % 5)]
        } else {
            vec![]
        },
        indexer: "symdex 0.1.0".into(),
        ..Record::default()
    }
}
