//! The exact keys of KEYS.md §4 that real clients were found to request, end to end through
//! `symdex index`: WASM modules built by wasm-ld (16- and 20-byte build ids: SymbolStore's
//! whole-payload form beside the stripped id) and a split debug companion, and Breakpad files
//! of Linux, macOS and Windows modules (symbolicator's module-id form, Tecken's code-file form).

mod common;

use std::path::Path;

use common::{build_pe_and_pdb, build_wasm_module, index_json, verify_clean, Workdir};
use serde_json::Value;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `build_id` section payload as llvm-objcopy dumps it.
fn payload(w: &Workdir, module: &str) -> Vec<u8> {
    let dump = format!("{module}.bid");
    w.run(
        "llvm-objcopy-19",
        &[&format!("--dump-section=build_id={dump}"), module],
    );
    std::fs::read(w.path(&dump)).unwrap()
}

#[test]
fn wasm_ld_modules_under_both_id_forms_and_a_debug_companion() {
    let w = Workdir::new();
    for (module, style) in [("m16.wasm", "uuid"), ("m20.wasm", "sha1")] {
        build_wasm_module(&w, module, style);
    }
    // m20 split: code without DWARF, and the DWARF alone (custom sections only).
    w.run(
        "llvm-objcopy-19",
        &["--strip-debug", "m20.wasm", "m20.stripped.wasm"],
    );
    w.run(
        "llvm-objcopy-19",
        &["--only-keep-debug", "m20.wasm", "m20.debug.wasm"],
    );
    let p16 = payload(&w, "m16.wasm");
    let p20 = payload(&w, "m20.wasm");
    // --only-keep-debug drops `build_id` with the code: the companion carries it again.
    w.run(
        "llvm-objcopy-19",
        &["--add-section=build_id=m20.wasm.bid", "m20.debug.wasm"],
    );
    assert_eq!(
        (p16[0], p16.len()),
        (16, 17),
        "length byte, then 16 id bytes"
    );
    assert_eq!((p20[0], p20.len()), (20, 21));

    let store = w.path("store");
    let records = index_json(
        &store,
        &[
            &w.path("m16.wasm"),
            &w.path("m20.stripped.wasm"),
            &w.path("m20.debug.wasm"),
        ],
    );
    let kind_of = |name: &str| {
        records
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| (r["kind"].clone(), r["action"].clone()))
            .unwrap()
    };
    assert_eq!(
        kind_of("m20.debug.wasm").0,
        "debug",
        "custom sections only: a debug companion"
    );
    assert_eq!(
        kind_of("m20.debug.wasm").1,
        "indexed",
        "no conflict with the code module"
    );
    assert_eq!(kind_of("m20.stripped.wasm").1, "indexed");

    let exists = |key: &str| store.join(key).is_file();
    for (module, p) in [("m16.wasm", &p16), ("m20.stripped.wasm", &p20)] {
        let whole = hex(p);
        let id = hex(&p[1..]);
        for key in [
            // Microsoft.SymbolStore (dotnet-symbol) keys the whole payload.
            format!("symbols/{module}/{whole}/{module}"),
            format!("symbols/{module}/{id}/{module}"),
            format!("buildid/{id}/executable"),
            format!("buildid/{whole}/executable"),
            format!("unified/{}/{}/executable", &id[..2], &id[2..]),
            format!("unified/{}/{}/executable", &whole[..2], &whole[2..]),
            format!("gdb/{}/{}", &id[..2], &id[2..]),
        ] {
            assert!(exists(&key), "{module}: {key}");
        }
    }
    let id20 = hex(&p20[1..]);
    assert_eq!(
        std::fs::read(store.join(format!("buildid/{id20}/debuginfo"))).unwrap(),
        std::fs::read(w.path("m20.debug.wasm")).unwrap(),
        "debuginfod serves the companion as the module's debug info"
    );
    assert!(exists(&format!("gdb/{}/{}.debug", &id20[..2], &id20[2..])));
    verify_clean(&store);
}

#[test]
fn breakpad_files_for_linux_mac_and_windows_modules() {
    let w = Workdir::new();
    let build_id = "1d8f2556ed30c02f74f5a3c1fc68f0ed70ac2477";
    let files = [
        (
            "linux.sym",
            format!(
                "MODULE Linux x86_64 56258F1D30ED2FC074F5A3C1FC68F0ED0 libfoo.so\nINFO CODE_ID {} libfoo.so\nFILE 0 foo.c\n",
                build_id.to_ascii_uppercase()
            ),
        ),
        (
            "mac.sym",
            "MODULE mac arm64 9A3F5B7E1C2D4E6F8A9B0C1D2E3F4A5B0 libm.dylib\nINFO CODE_ID 9A3F5B7E1C2D4E6F8A9B0C1D2E3F4A5B\nFILE 0 m.c\n".to_string(),
        ),
        (
            "crash.sym",
            "MODULE windows x86 3249D99D0C4049318610F4E4FB0B69361 crash.pdb\nINFO CODE_ID 5AB380779000 crash.exe\nFILE 0 c.c\n".to_string(),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(w.path(name), text).unwrap();
    }
    let store = w.path("store");
    let inputs: Vec<_> = files.iter().map(|(n, _)| w.path(n)).collect();
    let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
    index_json(&store, &inputs);
    for key in [
        // symbolicator: an ELF module's .sym under its code id (the GNU build id) ...
        format!("unified/1d/{}/breakpad", &build_id[2..]),
        // ... and symsorter's Breakpad-id form beside it.
        "unified/56/258f1d30ed2fc074f5a3c1fc68f0ed0/breakpad".to_string(),
        // macOS: the UUID without age; Windows: the Breakpad id.
        "unified/9a/3f5b7e1c2d4e6f8a9b0c1d2e3f4a5b/breakpad".to_string(),
        "unified/32/49d99d0c4049318610f4e4fb0b69361/breakpad".to_string(),
        // Breakpad repositories: by debug file and id, and by code file and code id (Tecken).
        "symbols/crash.pdb/3249D99D0C4049318610F4E4FB0B69361/crash.sym".to_string(),
        "symbols/crash.exe/5AB380779000/crash.sym".to_string(),
        format!(
            "symbols/libfoo.so/{}/libfoo.sym",
            build_id.to_ascii_uppercase()
        ),
    ] {
        assert!(store.join(&key).is_file(), "{key}");
    }
    verify_clean(&store);
}

/// A PDZ: the streams of a PDB built by clang/lld-link, exported by llvm-pdbutil and written
/// into an MSFZ container (zstd chunk, zstd directory) by the byte-level builder that follows
/// the MSFZ specification. It gets Microsoft.SymbolStore's key only: no client that expects an
/// MSF PDB is handed a PDZ.
#[test]
fn a_pdz_gets_symbol_stores_msfz0_key_and_its_pdbs_debug_id() {
    let w = Workdir::new();
    build_pe_and_pdb(&w, "lib.pdb", "lib.dll");
    let streams: Vec<Option<Vec<u8>>> = (0..5)
        .map(|n| {
            let out = format!("s{n}.bin");
            w.run(
                "llvm-pdbutil-19",
                &[
                    "export",
                    &format!("--stream={n}"),
                    &format!("--out={out}"),
                    "lib.pdb",
                ],
            );
            Some(std::fs::read(w.path(&out)).unwrap())
        })
        .collect();
    let pdz = symdex_shared::testing::builders::build_msfz(&streams, true);
    std::fs::write(w.path("lib.pdz"), &pdz).unwrap();

    let store = w.path("store");
    let records = index_json(&store, &[&w.path("lib.pdb"), &w.path("lib.pdz")]);
    let of = |format: &str| records.iter().find(|r| r["format"] == format).unwrap();
    let (pdb, pdz_record) = (of("pdb"), of("pdz"));
    assert_eq!(
        pdz_record["debug_id"], pdb["debug_id"],
        "the same PDB in either container"
    );
    let debug_id = pdb["debug_id"].as_str().unwrap();
    let (uuid, age) = debug_id.rsplit_once('-').unwrap();
    let key = format!(
        "symbols/lib.pdz/{}{age}/msfz0/lib.pdz",
        uuid.replace('-', "")
    );
    assert_eq!(
        pdz_record["published"].as_array().unwrap(),
        &vec![Value::String(key.clone())],
        "only SymbolStore's key"
    );
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), pdz);
    verify_clean(&store);
}
