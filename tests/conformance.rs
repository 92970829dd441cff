//! Conformance over ../shared (not part of `make test`: run by `make conformance`, which sets
//! SYMDEX_SHARED). Every corpus row must match expected.tsv; every fixture must be processed
//! without a panic.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::symdex;
use serde_json::Value;

fn shared_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("SYMDEX_SHARED").expect("set SYMDEX_SHARED to the shared/ directory"),
    )
}

fn keys_json(args: &[&str], path: &PathBuf) -> (Vec<Value>, std::process::ExitStatus) {
    let out = symdex()
        .arg("keys")
        .arg("--json")
        .args(args)
        .arg(path)
        .output()
        .expect("run symdex");
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    (rows, out.status)
}

#[test]
#[ignore = "needs ../shared; run by `make conformance`"]
fn corpus_matches_expected_identifiers() {
    let shared = shared_dir();
    let files = shared.join("corpus/files");
    let (rows, status) = keys_json(&["--source-ext", "c,cpp,cs"], &files);
    assert!(status.success());
    // Index symdex's rows by (relative path, arch); fat Mach-O files have one row per slice.
    let mut ours: HashMap<(String, String), Value> = HashMap::new();
    let mut by_path: HashMap<String, Vec<Value>> = HashMap::new();
    for row in rows {
        let rel = row["path"]
            .as_str()
            .unwrap()
            .strip_prefix(files.to_str().unwrap())
            .unwrap();
        let rel = rel.trim_start_matches('/').to_string();
        let arch = row["arch"].as_str().unwrap_or("").to_string();
        by_path.entry(rel.clone()).or_default().push(row.clone());
        ours.insert((rel, arch), row);
    }

    let expected = std::fs::read_to_string(shared.join("corpus/expected.tsv")).unwrap();
    let mut lines = expected.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c_file, c_format, c_arch, c_debug, c_code, c_value) = (
        col("file"),
        col("format"),
        col("arch"),
        col("debug_id"),
        col("code_id"),
        col("build_id_or_uuid_or_signature"),
    );
    let (mut total, mut matched, mut failures) = (0, 0, Vec::new());
    for line in lines.filter(|l| !l.trim().is_empty()) {
        total += 1;
        let f: Vec<&str> = line.split('\t').collect();
        let (file, format, arch) = (f[c_file], f[c_format], f[c_arch]);
        let row = ours.get(&(file.to_string(), arch.to_string())).or_else(|| {
            // `unknown` arch in expected.tsv: any sensible name is fine, if there is one row.
            let rows = by_path.get(file)?;
            (rows.len() == 1 && (arch == "unknown" || arch.is_empty())).then(|| &rows[0])
        });
        let Some(row) = row else {
            failures.push(format!("{file} ({arch}): no row"));
            continue;
        };
        let got = |k: &str| row[k].as_str().unwrap_or("").to_string();
        let mut problems = Vec::new();
        if got("format") != format {
            problems.push(format!("format {} != {format}", got("format")));
        }
        if format == "source" {
            if got("sha1") != f[c_value] {
                problems.push(format!("sha1 {} != {}", got("sha1"), f[c_value]));
            }
        } else {
            if got("debug_id") != f[c_debug] {
                problems.push(format!("debug_id {} != {}", got("debug_id"), f[c_debug]));
            }
            if got("code_id") != f[c_code] {
                problems.push(format!("code_id {} != {}", got("code_id"), f[c_code]));
            }
        }
        if problems.is_empty() {
            matched += 1;
        } else {
            failures.push(format!("{file} ({arch}): {}", problems.join("; ")));
        }
    }
    println!("conformance: {matched}/{total} corpus rows match expected.tsv");
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
#[ignore = "needs ../shared; run by `make conformance`"]
fn every_fixture_is_processed_without_a_panic() {
    let fixtures = shared_dir().join("fixtures");
    let (rows, status) = keys_json(&["--source"], &fixtures);
    // 101 is Rust's panic exit code; an I/O error would be 1 and is also a failure here.
    assert!(
        status.success(),
        "symdex keys failed over the fixtures: {status}"
    );
    let identified = rows.iter().filter(|r| r.get("error").is_none()).count();
    let errors = rows.len() - identified;
    println!(
        "conformance: {} fixture rows, {identified} identified, {errors} clear errors",
        rows.len()
    );
    assert!(identified > 0);
}
