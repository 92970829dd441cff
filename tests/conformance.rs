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
    let (c_stamp, c_size, c_kind, c_features, c_notes) = (
        col("pe_timestamp"),
        col("pe_sizeofimage"),
        col("kind"),
        col("features"),
        col("notes"),
    );
    let mut keys_checked = 0;
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
        // The SSQP key (Breakpad key for .sym files), computed here from expected.tsv alone.
        let expected_key = expected_key(
            file,
            format,
            f[c_debug],
            f[c_code],
            f[c_value],
            f[c_stamp],
            f[c_size],
            f[c_kind],
            f[c_features],
            f[c_notes],
        );
        if let Some((layout, key)) = expected_key {
            let keys: Vec<&str> = row["keys"][layout]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if keys.contains(&key.as_str()) {
                keys_checked += 1;
            } else {
                problems.push(format!("{layout} key {key} not in {keys:?}"));
            }
        }
        if problems.is_empty() {
            matched += 1;
        } else {
            failures.push(format!("{file} ({arch}): {}", problems.join("; ")));
        }
    }
    println!("conformance: {matched}/{total} corpus rows match expected.tsv ({keys_checked} with their ssqp/breakpad key)");
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
#[ignore = "needs ../shared; run by `make conformance`"]
fn every_fixture_is_processed_without_a_panic() {
    let fixtures = shared_dir().join("fixtures");
    let (rows, status) = keys_json(&["--source", "--details"], &fixtures);
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

/// Microsoft.SymbolStore's own PDZ vector: the same PDB in an MSF and an MSFZ container has one
/// debug id, and the PDZ is keyed `<name>/<guid><age>/msfz0/<name>` (nothing else).
#[test]
#[ignore = "needs ../shared; run by `make conformance`"]
fn symbol_stores_pdz_and_wasm_vectors() {
    let dir = shared_dir().join("fixtures/ssqp-upstream");
    let (pdb, _) = keys_json(&[], &dir.join("HelloWorld.pdb"));
    let (pdz, status) = keys_json(&[], &dir.join("HelloWorld.pdz"));
    assert!(status.success());
    assert_eq!(pdz[0]["format"], "pdz");
    assert_eq!(pdz[0]["debug_id"], pdb[0]["debug_id"]);
    let ssqp = pdb[0]["keys"]["ssqp"][0].as_str().unwrap();
    let id = ssqp.split('/').nth(1).unwrap();
    assert_eq!(
        pdz[0]["keys"]["ssqp"],
        serde_json::json!([format!("helloworld.pdz/{id}/msfz0/helloworld.pdz")])
    );
    println!("conformance: HelloWorld.pdz -> helloworld.pdz/{id}/msfz0/helloworld.pdz");

    // Its WASM vectors: the whole build_id payload is the key; a module of custom sections
    // only is a debug companion; no build id, no key.
    let wasm = |name: &str| keys_json(&[], &dir.join(name)).0.remove(0);
    let module = wasm("test_module.wasm");
    let id = module["build_id"].as_str().unwrap().to_string();
    assert_eq!(
        module["keys"]["ssqp"][0],
        format!("test_module.wasm/{id}/test_module.wasm")
    );
    assert_eq!(wasm("test_module_symbols.wasm")["kind"], "debug");
    assert!(wasm("test_module_no_buildid.wasm")["keys"]["ssqp"].is_null());
    println!(
        "conformance: SymbolStore WASM vectors keyed as test_module.wasm/{id}/test_module.wasm"
    );
}

/// The key a client would request for a corpus row, from expected.tsv's columns only.
#[allow(clippy::too_many_arguments)]
fn expected_key(
    file: &str,
    format: &str,
    debug_id: &str,
    code_id: &str,
    value: &str,
    stamp: &str,
    size: &str,
    kind: &str,
    features: &str,
    notes: &str,
) -> Option<(&'static str, String)> {
    let name = file.rsplit('/').next().unwrap().to_ascii_lowercase();
    let triple = |id: String| Some(("ssqp", format!("{name}/{id}/{name}")));
    let guid = |d: &str| d.get(..36).unwrap().replace('-', "");
    match format {
        "pe" => {
            let stamp = u32::from_str_radix(stamp.trim_start_matches("0x"), 16).unwrap();
            let size = u32::from_str_radix(size.trim_start_matches("0x"), 16).unwrap();
            triple(format!("{stamp:08X}{size:x}"))
        }
        "pdb" => triple(format!(
            "{}{}",
            guid(debug_id),
            debug_id.get(37..).unwrap_or("0")
        )),
        "portablepdb" => triple(format!("{}FFFFFFFF", guid(debug_id))),
        "elf" => {
            let bytes = code_id.len() / 2;
            if !(8..=20).contains(&bytes) {
                return None;
            }
            let padded = format!("{code_id:0<40}");
            if features.split(',').any(|f| f == "debug") || kind == "dbg" {
                Some(("ssqp", format!("_.debug/elf-buildid-sym-{padded}/_.debug")))
            } else {
                triple(format!("elf-buildid-{padded}"))
            }
        }
        "macho" if kind == "dbg" => {
            Some(("ssqp", format!("_.dwarf/mach-uuid-sym-{code_id}/_.dwarf")))
        }
        "macho" => triple(format!("mach-uuid-{code_id}")),
        "wasm" if !code_id.is_empty() => triple(code_id.to_string()),
        "source" => triple(format!("sha1-{value}")),
        "breakpad" => {
            // notes: "... MODULE <os> <arch> <ID> <name>"
            let module = notes.split("MODULE ").nth(1)?;
            let mut parts = module.splitn(4, ' ');
            let (_os, _arch, id, module_name) =
                (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
            let module_name = module_name.split(';').next()?.trim();
            let sym = match module_name.strip_suffix(".pdb") {
                Some(stem) => format!("{stem}.sym"),
                None => format!("{module_name}.sym"),
            };
            Some(("breakpad", format!("{module_name}/{id}/{sym}")))
        }
        _ => None,
    }
}

/// Real clang 19 output (DWARF 5) records each source file's MD5, which source matching
/// uses (sourcemap.rs); gcc 12's does not. The corpus' clang builds of one `basic.cpp` for
/// three targets (each line table laid out its own way) must agree on its MD5.
#[test]
#[ignore = "needs ../shared; run by `make conformance`"]
fn clang_line_tables_record_each_sources_md5() {
    let dir = shared_dir().join("corpus/files/elf/built-gcc12-clang19");
    let (rows, status) = keys_json(&["--details"], &dir);
    assert!(status.success());
    let mut clang_md5s = std::collections::BTreeSet::new();
    let (mut clang, mut gcc) = (0, 0);
    for row in &rows {
        let path = row["path"].as_str().unwrap_or_default();
        let name = path.rsplit('/').next().unwrap_or_default();
        let Some(sources) = row.get("sources") else {
            continue;
        };
        let paths = sources["paths"].as_array().cloned().unwrap_or_default();
        let md5 = sources.get("md5").and_then(Value::as_object);
        if name.starts_with("clang_") {
            clang += 1;
            let md5 = md5.unwrap_or_else(|| panic!("{name}: no MD5 recorded: {sources}"));
            for p in &paths {
                let digest = md5.get(p.as_str().unwrap()).and_then(Value::as_str);
                let digest = digest.unwrap_or_else(|| panic!("{name}: no MD5 for {p}"));
                assert_eq!(digest.len(), 32, "{name}: {digest}");
                clang_md5s.insert((p.as_str().unwrap().to_string(), digest.to_string()));
            }
        } else if name.starts_with("gcc_") {
            gcc += 1;
            assert!(md5.is_none(), "{name}: gcc records no MD5: {sources}");
        }
    }
    assert!(
        clang >= 2 && gcc >= 1,
        "{clang} clang and {gcc} gcc files with sources"
    );
    let basic: Vec<_> = clang_md5s
        .iter()
        .filter(|(p, _)| p.ends_with("/basic.cpp"))
        .collect();
    assert_eq!(basic.len(), 1, "one basic.cpp, one MD5: {clang_md5s:?}");
    println!(
        "conformance: {clang} clang files record source MD5s (basic.cpp {}), {gcc} gcc files none",
        basic[0].1
    );
}
