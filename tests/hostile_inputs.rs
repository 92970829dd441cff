//! Inputs as an attacker or a careless CI job makes them: every one ends in a manifest record
//! with a reason, nothing panics, and the store stays consistent.

mod common;

use std::io::Write;
use std::path::Path;

use common::{build_split_elf, index_json, symdex, verify_clean, Workdir};
use serde_json::Value;

#[test]
fn an_over_long_build_id_is_rejected_with_its_reason() {
    let w = Workdir::new();
    build_split_elf(&w, "long", &format!("0x{}", "ab".repeat(512)), "x + 2");
    let store = w.path("store");
    let records = index_json(&store, &[w.path("long/app.debug").to_str().unwrap()]);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["action"], "rejected");
    assert!(
        records[0]["reason"].as_str().unwrap().contains("512 bytes"),
        "{}",
        records[0]
    );
    verify_clean(&store);
}

#[test]
fn keys_too_long_for_their_records_are_rejected_with_the_reason() {
    let w = Workdir::new();
    build_split_elf(&w, "p", &format!("0x{}", "cd".repeat(64)), "x + 5");
    let store = w.path("store");
    // A layout prefix that leaves no room for a 64-byte build id under `_symdex/refs/`.
    let prefix = format!("debuginfod={}", "long/".repeat(180));
    let records = index_json(
        &store,
        &["--prefix", &prefix, w.path("p/app.debug").to_str().unwrap()],
    );
    assert_eq!(records[0]["action"], "indexed", "the other layouts publish");
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap()
            .contains("too long for its record"),
        "{}",
        records[0]
    );
    assert!(!store.join("long").exists());
    verify_clean(&store);
}

#[test]
fn reserved_names_keep_their_name_independent_keys() {
    let w = Workdir::new();
    build_split_elf(
        &w,
        "p",
        "0x5555555555555555555555555555555555555555",
        "x + 3",
    );
    std::fs::create_dir_all(w.path("odd")).unwrap();
    for name in [
        "CON",
        "nul.debug",
        "a:b.debug",
        "trailing.",
        "evil\u{202E}gubed.so",
    ] {
        std::fs::copy(w.path("p/app.stripped"), w.path(&format!("odd/{name}"))).unwrap();
    }
    let store = w.path("store");
    let records = index_json(&store, &[w.path("odd").to_str().unwrap()]);
    assert_eq!(records.len(), 5);
    for r in &records {
        assert!(
            r["reason"].as_str().is_some(),
            "every unsafe name says why: {r}"
        );
    }
    // The binary is still published by build id (debuginfod), under no unsafe name.
    assert!(store
        .join("buildid/5555555555555555555555555555555555555555/executable")
        .is_file());
    assert!(!store.join("symbols/CON").exists() && !store.join("symbols/con").exists());
    verify_clean(&store);
}

#[test]
fn symbolic_links_in_a_walk_are_recorded_as_skipped() {
    let w = Workdir::new();
    build_split_elf(
        &w,
        "p",
        "0x6666666666666666666666666666666666666666",
        "x + 4",
    );
    let dir = w.path("walk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(w.path("p/app.debug"), dir.join("real.debug")).unwrap();
    std::os::unix::fs::symlink(w.path("p/app.stripped"), dir.join("to-file")).unwrap();
    std::os::unix::fs::symlink(w.path("p"), dir.join("to-dir")).unwrap();
    std::os::unix::fs::symlink(w.path("nowhere"), dir.join("dangling")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop"), dir.join("loop")).unwrap();
    let store = w.path("store");
    let records = index_json(&store, &[dir.to_str().unwrap()]);
    let skipped: Vec<&Value> = records
        .iter()
        .filter(|r| r["action"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 4, "{records:#?}");
    for (name, says) in [
        ("to-file", "to a file"),
        ("to-dir", "to a directory"),
        ("dangling", "dangling"),
        ("loop", "cannot be resolved"),
    ] {
        let r = skipped.iter().find(|r| r["name"] == name).unwrap();
        assert!(r["reason"].as_str().unwrap().contains(says), "{r}");
    }
    assert!(
        records.iter().any(|r| r["action"] == "indexed"),
        "the real file is indexed"
    );
    // A link named on the command line is followed.
    let named = index_json(&store, &[dir.join("to-file").to_str().unwrap()]);
    assert_eq!(named[0]["action"], "indexed");
    verify_clean(&store);
}

/// `symdex index --json` under coreutils' `timeout`: an input that blocks the run (a FIFO
/// opened for reading waits for a writer) fails the test instead of hanging it.
fn index_json_within(store: &Path, args: &[&Path], seconds: u32) -> Vec<Value> {
    let out = std::process::Command::new("timeout")
        .arg(seconds.to_string())
        .arg(env!("CARGO_BIN_EXE_symdex"))
        .args(["index", "--json", "--store"])
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} (124: timed out): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn special_files_are_recorded_as_skipped_without_being_read() {
    let w = Workdir::new();
    build_split_elf(
        &w,
        "p",
        "0x6767676767676767676767676767676767676767",
        "x + 5",
    );
    let dir = w.path("walk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(w.path("p/app.debug"), dir.join("real.debug")).unwrap();
    w.run("mkfifo", &[dir.join("pipe").to_str().unwrap()]);
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
    let store = w.path("store");
    let records = index_json_within(&store, &[&dir], 120);
    for (name, says) in [("pipe", "named pipe"), ("socket", "a socket")] {
        let r = records.iter().find(|r| r["name"] == name);
        let r = r.unwrap_or_else(|| panic!("no record of {name}: {records:#?}"));
        assert_eq!(r["action"], "skipped", "{r}");
        assert!(r["reason"].as_str().unwrap().contains(says), "{r}");
    }
    assert!(records
        .iter()
        .any(|r| r["name"] == "real.debug" && r["action"] == "indexed"));
    // Named on the command line, as a device or a FIFO (read, `/dev/zero` never ends).
    let named = [Path::new("/dev/zero"), &dir.join("pipe")];
    let records = index_json_within(&store, &named, 120);
    assert_eq!(records.len(), 2, "{records:#?}");
    for r in &records {
        assert_eq!(r["action"], "skipped", "{r}");
    }
    assert!(records[0]["reason"]
        .as_str()
        .unwrap()
        .contains("character device"));
    verify_clean(&store);
}

fn write_zip(path: &Path, entries: &[(&str, Vec<u8>)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        zip.start_file(*name, options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
}

#[test]
fn zip_bombs_are_rejected_by_their_limits_before_they_fill_the_disk() {
    let w = Workdir::new();
    let bomb = w.path("bomb.zip");
    let zeros = vec![0u8; 40 << 20];
    write_zip(
        &bomb,
        &[
            ("a.bin", zeros.clone()),
            ("b.bin", zeros.clone()),
            ("c.bin", zeros),
        ],
    );
    assert!(
        std::fs::metadata(&bomb).unwrap().len() < 1 << 20,
        "a small archive"
    );
    let store = w.path("store");
    let records = index_json(&store, &["--max-ratio", "100", bomb.to_str().unwrap()]);
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r["action"], "rejected");
        assert!(
            r["reason"].as_str().unwrap().contains("over the limits"),
            "{r}"
        );
    }
    // Nothing was expanded: no temporary files, nothing large anywhere in the store.
    let largest = walkdir::WalkDir::new(&store)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .max()
        .unwrap_or(0);
    assert!(
        largest < 1 << 20,
        "largest file in the store: {largest} bytes"
    );

    // A total limit: what fits is indexed, the rest rejected with the reason.
    let noise = |seed: u8| -> Vec<u8> {
        (0..600_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 ^ seed)
            .collect()
    };
    let many = w.path("many.zip");
    write_zip(
        &many,
        &[
            ("1.bin", noise(1)),
            ("2.bin", noise(2)),
            ("3.bin", noise(3)),
        ],
    );
    let records = index_json(
        &store,
        &["--max-expanded", "1000000", many.to_str().unwrap()],
    );
    let actions: Vec<&str> = records
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["skipped", "rejected", "rejected"], "{records:#?}");
    verify_clean(&store);
}

/// Runs `command` to its end, which must succeed: its peak resident memory (VmHWM, KiB,
/// polled every 2 ms) and its standard output.
fn run_measuring_peak(command: &mut std::process::Command) -> (u64, String) {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kib) = text
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
            {
                peak = kib;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    (peak, text)
}

#[test]
fn a_hundred_thousand_entry_zip_is_indexed_in_bounded_memory() {
    let w = Workdir::new();
    let big = w.path("big.zip");
    {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&big).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for i in 0..100_000 {
            zip.start_file(format!("dir/e{i}.txt"), options).unwrap();
            writeln!(zip, "entry {i}").unwrap();
        }
        zip.finish().unwrap();
    }
    let store = w.path("store");
    let (peak, text) =
        run_measuring_peak(symdex().args(["index", "--store"]).arg(&store).arg(&big));
    assert!(text.contains("100000 skipped"), "{text}");
    // Records are written and forgotten every few thousand uploads: memory does not grow
    // with the number of entries (it peaked near 70 MiB when this was written).
    assert!(
        peak > 0 && peak < 200 * 1024,
        "peak resident memory {peak} KiB"
    );
    assert!(
        text.matches("manifest: ").count() >= 20,
        "the manifest is written in parts"
    );
}

#[test]
fn manifest_query_streams_in_memory_independent_of_the_manifest() {
    let w = Workdir::new();
    let store = w.path("store");
    // 12 manifest objects of 15,000 records each (about 70 MB of JSON Lines).
    let objects = 12;
    let per_object = 15_000;
    let padding = "p".repeat(200);
    let write_object = |o: usize| -> u64 {
        let dir = store.join("_manifest/dt=2026-01-01");
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::with_capacity(per_object * 420);
        for i in 0..per_object {
            let debug_id = format!("{:08x}-0000-0000-0000-{:012x}", o, i);
            text.push_str(&format!(
                r#"{{"schema":1,"time":"2026-01-01T00:00:{:02}Z","action":"indexed","upload":"file:/ci/{o}/{i}@x","ingest_key":"/ci/{o}/{i}","format":"elf","debug_id":"{debug_id}","name":"lib{i}.so","reason":"{padding}","indexer":"symdex test"}}"#,
                o % 60
            ));
            text.push('\n');
        }
        std::fs::write(dir.join(format!("202601010000{o:02}-{o:012}.jsonl")), &text).unwrap();
        text.len() as u64
    };
    let query_with = |mode: &[&str]| {
        run_measuring_peak(
            symdex()
                .args([
                    "manifest",
                    "query",
                    "--json",
                    "--debug-id",
                    "0000000b-0000-0000-0000-000000000007",
                ])
                .args(mode)
                .arg(&store),
        )
    };
    let query = || query_with(&["--history"]);
    // The same query over one object, then over all twelve: what the eleven others add to the
    // peak is what the query keeps of them.
    let first = write_object(0);
    let (peak_one, text) = query();
    assert_eq!(text.lines().count(), 0, "{text}");
    let (latest_one, text) = query_with(&[]);
    assert_eq!(text.lines().count(), 0, "{text}");
    let total = first + (1..objects).map(write_object).sum::<u64>();
    let (peak_all, text) = query();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("lib7.so"));
    // One object (about 6 MB) at a time, never the whole manifest: eleven more objects (66 MB)
    // add less than one object's size to the peak.
    assert!(
        peak_one > 0 && (peak_all - peak_one.min(peak_all)) * 1024 < first,
        "peak resident memory {peak_one} KiB over one object, {peak_all} KiB over {total} bytes"
    );
    // Each upload's latest decision (the default) holds a few bytes per upload besides: 64
    // at most for the 165,000 uploads the eleven objects add, not their records' bytes.
    let (latest_all, text) = query_with(&[]);
    assert_eq!(text.lines().count(), 1, "{text}");
    let uploads_added = (objects - 1) * per_object;
    assert!(
        (latest_all - latest_one.min(latest_all)) * 1024 < (uploads_added * 64) as u64,
        "peak resident memory {latest_one} KiB over one object, {latest_all} KiB for the latest \
         decisions of {} uploads",
        objects * per_object
    );
}

/// Source paths from DWARF are untrusted: climbing above `/`, control characters, relative
/// names, names no key can hold. Each is recorded with its reason; the sane one is served and
/// no key leaves the layout grammar (`verify` checks every key).
#[test]
fn hostile_source_paths_in_dwarf_are_rejected_with_reasons() {
    use symdex_shared::testing::builders::{build_elf, dwarf5_line_table, with_section};
    let w = Workdir::new();
    let long = format!("{}.c", "a".repeat(900));
    let table = dwarf5_line_table(
        "/ci/work",
        &[
            "src/ok.c",
            "../../../../etc/passwd",
            "src/bell\u{7}.c",
            &long,
            "src/con.c:stream",
        ],
    );
    let elf = with_section(
        build_elf(true, false, 62, Some(&[0x42; 20]), true),
        ".debug_line",
        &table,
    );
    std::fs::write(w.path("hostile.debug"), elf).unwrap();
    for (name, body) in [("ok.c", "int ok;\n"), ("con.c:stream", "x")] {
        std::fs::create_dir_all(w.path("src")).unwrap();
        std::fs::write(w.path(&format!("src/{name}")), body).unwrap();
    }
    let store = w.path("store");
    let records = index_json(
        &store,
        &[
            "--source-ext",
            "c,c:stream",
            w.path("src").to_str().unwrap(),
            w.path("hostile.debug").to_str().unwrap(),
        ],
    );
    // (The builder's ELF keeps its .text: an unstripped binary with DWARF.)
    let debug = records
        .iter()
        .find(|r| r["sources"].is_object())
        .expect("the record of the file with DWARF");
    let report = &debug["sources"];
    let rejected = report["rejected"].to_string();
    for reason in [
        "climbing above the root",
        "control characters",
        "longer than",
    ] {
        assert!(rejected.contains(reason), "{reason}: {report}");
    }
    // `con.c:stream` is a path, but no valid key name (a Windows stream): not served.
    assert!(
        report["unserved"].to_string().contains("con.c:stream"),
        "{report}"
    );
    let key = format!("buildid/{}/source/ci/work/src/ok.c", "42".repeat(20));
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), b"int ok;\n");
    assert_eq!(report["served"], 1, "{report}");
    verify_clean(&store);
}

#[test]
fn names_with_terminal_escapes_reach_the_terminal_escaped() {
    let w = Workdir::new();
    // A truncated ELF (rejected, so its line is printed) named to recolour the terminal.
    let name = "app\u{1b}[31m\u{202e}.debug";
    let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
    elf.resize(40, 0);
    std::fs::write(w.path(name), elf).unwrap();
    let out = symdex()
        .args(["index", "--store"])
        .arg(w.path("store"))
        .arg(w.path(name))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rejected"), "{stderr}");
    assert!(stderr.contains("app\\x1b[31m\\u{202e}.debug"), "{stderr}");
    assert!(
        !out.stderr.contains(&0x1b) && !stderr.contains('\u{202e}'),
        "{stderr}"
    );
}
