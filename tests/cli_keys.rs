//! `symdex keys` end to end: the binary over real files, as a user runs it.

mod common;

use common::{symdex, Workdir};
use serde_json::Value;

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

#[test]
fn json_lines_for_a_directory_with_artifacts_sources_and_junk() {
    let w = Workdir::new();
    w.run("g++", &["-g", "-O1", "-o", "app", "src.cpp"]);
    std::fs::write(w.path("notes.txt"), "not an artifact").unwrap();
    std::fs::write(w.path("truncated.so"), b"\x7fELF\x02\x01\x01").unwrap();
    let out = symdex()
        .args(["keys", "--json", "--source-ext", "cpp"])
        .arg(w.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out.stdout);
    let by_name = |name: &str| {
        rows.iter()
            .find(|r| r["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
    };
    let app = by_name("/app");
    assert_eq!(app["format"], "elf");
    assert_eq!(app["kind"], "executable");
    assert_eq!(app["arch"], "x86_64");
    assert_eq!(app["code_file"], "app");
    assert!(app["bytes_read"].as_u64().unwrap() > 0);
    assert_eq!(
        app["build_id"],
        common::readelf_build_id(&w, "app").unwrap().as_str()
    );
    for key in ["debug_id", "code_id"] {
        assert!(app[key].is_string(), "{key} missing");
    }

    let src = by_name("src.cpp");
    assert_eq!(src["format"], "source");
    assert_eq!(src["kind"], "source");
    let sha1sum = w.run("sha1sum", &["src.cpp"]);
    assert_eq!(
        src["sha1"].as_str().unwrap(),
        sha1sum.split_whitespace().next().unwrap()
    );

    assert!(by_name("notes.txt")["error"]
        .as_str()
        .unwrap()
        .contains("unrecognized"));
    assert!(by_name("truncated.so")["error"]
        .as_str()
        .unwrap()
        .contains("malformed elf"));
}

#[test]
fn table_output_is_readable() {
    let w = Workdir::new();
    w.run(
        "g++",
        &[
            "-O1",
            "-Wl,--build-id=0x0123456789abcdef",
            "-o",
            "app",
            "src.cpp",
        ],
    );
    let out = symdex().arg("keys").arg(w.path("app")).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("FORMAT"));
    let row = lines.next().unwrap();
    assert!(row.contains("0123456789abcdef"), "{row}");
    assert!(
        row.contains("67452301-ab89-efcd-0000-000000000000"),
        "{row}"
    );
}

#[test]
fn io_failures_exit_non_zero() {
    let out = symdex()
        .args(["keys", "/nonexistent/symdex/input"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/symdex/input"));
}

#[test]
fn keys_and_lookup_keys_per_layout() {
    let w = Workdir::new();
    w.run(
        "g++",
        &["-g", "-O1", "-Wl,--build-id=sha1", "-o", "App", "src.cpp"],
    );
    w.run("objcopy", &["--strip-all", "App", "App.stripped"]);
    let bid = common::readelf_build_id(&w, "App").unwrap();
    let padded = format!("{bid:0<40}");
    let out = symdex()
        .args(["keys", "--json"])
        .arg(w.path("App.stripped"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let row = &json_lines(&out.stdout)[0];
    let keys = &row["keys"];
    assert_eq!(
        keys["ssqp"][0],
        format!("app.stripped/elf-buildid-{padded}/app.stripped").as_str()
    );
    assert!(keys["symstore"]
        .as_array()
        .unwrap()
        .contains(&Value::from(format!(
            "App.stripped/elf-buildid-{bid}/App.stripped"
        ))));
    assert_eq!(
        keys["debuginfod"][0],
        format!("buildid/{bid}/executable").as_str()
    );
    assert_eq!(
        keys["gdb"][0],
        format!("{}/{}", &bid[..2], &bid[2..]).as_str()
    );
    let lookup = &row["lookup_keys"];
    assert_eq!(
        lookup["ssqp"][0],
        format!("_.debug/elf-buildid-sym-{padded}/_.debug").as_str()
    );
    assert_eq!(
        lookup["debuginfod"][0],
        format!("buildid/{bid}/debuginfo").as_str()
    );

    // --layout selects layouts.
    let out = symdex()
        .args([
            "keys",
            "--json",
            "--layout",
            "debuginfod",
            "--layout",
            "gdb",
        ])
        .arg(w.path("App.stripped"))
        .output()
        .unwrap();
    let row = &json_lines(&out.stdout)[0];
    let layouts: Vec<&String> = row["keys"].as_object().unwrap().keys().collect();
    assert_eq!(layouts, ["debuginfod", "gdb"]);
    let bad = symdex()
        .args(["keys", "--layout", "nope", "x"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown layout"));
}

#[test]
fn an_archive_or_package_is_identified_entry_by_entry() {
    let w = Workdir::new();
    w.run(
        "g++",
        &["-g", "-O1", "-Wl,--build-id", "-o", "app", "src.cpp"],
    );
    std::fs::write(w.path("notes.txt"), "not an artifact").unwrap();
    w.run("ln", &["-s", "app", "app-link"]);
    w.run(
        "tar",
        &["-czf", "bundle.tar.gz", "app", "notes.txt", "app-link"],
    );
    let rows = keys_json(&w.path("bundle.tar.gz"));
    let loose = keys_json(&w.path("app"));
    let app = row_ending(&rows, "bundle.tar.gz!/app");
    // The entry is keyed as the same file loose (its name is the entry's).
    assert_eq!(app["keys"], loose[0]["keys"]);
    assert_eq!(app["code_id"], loose[0]["code_id"]);
    let notes = row_ending(&rows, "!/notes.txt");
    let says = |row: &Value| row["error"].as_str().unwrap_or_default().to_string();
    assert!(says(notes).contains("unrecognized"), "{notes}");
    // What index would not index says so, as its record would.
    let link = row_ending(&rows, "!/app-link");
    assert!(says(link).starts_with("skipped: a link entry"), "{link}");
    // The archive limits are index's: an entry over them is what index would reject.
    let out = symdex()
        .args(["keys", "--json", "--max-entry-size", "100"])
        .arg(w.path("bundle.tar.gz"))
        .output();
    let rows = json_lines(common::ok(out.unwrap()).as_bytes());
    let app = row_ending(&rows, "bundle.tar.gz!/app");
    assert!(says(app).starts_with("rejected: entry of"), "{app}");
}

/// `symdex keys --json PATH`, which must succeed: its rows.
fn keys_json(path: &std::path::Path) -> Vec<Value> {
    let out = symdex().args(["keys", "--json"]).arg(path).output();
    json_lines(common::ok(out.unwrap()).as_bytes())
}

/// The row whose path ends with `suffix`.
fn row_ending<'a>(rows: &'a [Value], suffix: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["path"].as_str().is_some_and(|p| p.ends_with(suffix)))
        .unwrap_or_else(|| panic!("no row for {suffix}: {rows:#?}"))
}

/// What `keys` prints is what plain positioned reads, one file at a time
/// (`SYMDEX_PLAIN_READS=1`), print: byte for byte, in JSON and as a table, over one artifact
/// of every format the builders make (each several times, so the workers finish out of
/// order), compilers' ELF files whose section tables, DWARF and compressed sections lie past
/// the head, an archive, sources, junk and truncated files.
#[test]
fn keys_prints_what_plain_reads_print_byte_for_byte() {
    let w = Workdir::new();
    // A large initialized array puts the section table and the DWARF well past 64 KiB.
    let big = "static char big[300000] = {1};\nint use(int i) { return big[i]; }\n";
    std::fs::write(
        w.path("big.c"),
        format!("{big}{}", common::prog_c("use(x)")),
    )
    .unwrap();
    w.run(
        "gcc",
        &["-g", "-O1", "-Wl,--build-id", "-o", "big", "big.c"],
    );
    w.run("gcc", &["-g", "-gz=zlib", "-O1", "-o", "big-gz", "big.c"]);
    w.run("objcopy", &["--only-keep-debug", "big", "big.debug"]);
    w.run("objcopy", &["--strip-all", "big", "big.stripped"]);
    w.run("gcc", &["-g", "-gdwarf-4", "-O1", "-o", "small", "big.c"]);
    w.run("tar", &["-czf", "some.tar.gz", "big", "src.cpp", "small"]);
    std::fs::write(w.path("notes.txt"), "not an artifact").unwrap();
    std::fs::write(w.path("empty"), "").unwrap();
    let elf = std::fs::read(w.path("big")).unwrap();
    std::fs::write(w.path("cut-in-head"), &elf[..70]).unwrap();
    std::fs::write(w.path("cut-past-head"), &elf[..100_000]).unwrap();
    let seeds = w.path("seeds");
    for copy in 0..5 {
        let dir = seeds.join(format!("copy{copy}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in symdex_shared::testing::fuzz_seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for args in [
        &["keys", "--json", "--source-ext", "cpp"][..],
        &["keys", "--json", "--details", "--source-ext", "cpp"],
        &["keys", "--details", "--source-ext", "cpp"],
        &["keys", "--source-ext", "cpp"],
        &["keys", "--json", "--layout", "ssqp,debuginfod"],
    ] {
        let run = |plain: &str| {
            let out = symdex()
                .args(args)
                .arg(w.dir.path())
                .env("SYMDEX_PLAIN_READS", plain)
                .output()
                .unwrap();
            (out.status.code(), out.stdout, out.stderr)
        };
        let (fast, plain) = (run("0"), run("1"));
        assert_eq!(fast.0, plain.0, "{args:?}: exit codes");
        assert!(
            fast.1 == plain.1,
            "{args:?}: the outputs differ\nfast:\n{}\nplain:\n{}",
            String::from_utf8_lossy(&fast.1),
            String::from_utf8_lossy(&plain.1)
        );
        assert_eq!(fast.2, plain.2, "{args:?}: what was said on stderr");
    }
    // Every kind of row is there: the comparison is not of nothing.
    let rows = keys_json(w.dir.path());
    assert!(rows.len() > 5 * symdex_shared::testing::fuzz_seeds().len());
    for suffix in [
        "/big-gz",
        "/big.debug",
        "some.tar.gz!/small",
        "/cut-past-head",
    ] {
        row_ending(&rows, suffix);
    }
    // The sources a debug file names are read with `--details` alone; the keys are the same.
    let out = symdex()
        .args(["keys", "--json", "--details"])
        .arg(w.dir.path())
        .output();
    let detailed = json_lines(common::ok(out.unwrap()).as_bytes());
    let (bare, full) = (
        row_ending(&rows, "/big.debug"),
        row_ending(&detailed, "/big.debug"),
    );
    assert!(bare.get("sources").is_none(), "{bare}");
    let sources = &full["sources"];
    assert!(sources.to_string().contains("big.c"), "{sources}");
    assert_eq!(bare["keys"], full["keys"]);
    assert_eq!(bare["lookup_keys"], full["lookup_keys"]);
    assert!(
        bare["bytes_read"].as_u64() < full["bytes_read"].as_u64(),
        "{bare}\n{full}"
    );
}
