//! Split DWARF built here with the three public toolchains that write it (clang-19 DWARF 5 +
//! `llvm-dwp-19`, GCC DWARF 4 + binutils `dwp`, `rustc -C split-debuginfo=packed`): `symdex
//! keys --json` identifies each `.dwp` as a DWARF package with the DWO ids
//! `llvm-dwarfdump-19 --debug-cu-index` lists, and each binary (and its debug file) by the same
//! ids of its skeleton units; `symdex index` records both and publishes nothing for the package.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{index_json, ok, padded_copy, symdex, Workdir};
use serde_json::Value;

const UNIT_A: &str = "struct A { int x; };\nA a = {47};\nint foo(int v) { return v + a.x; }\n";
const UNIT_MAIN: &str = "int foo(int);\nint main() { return foo(1); }\n";
const RUST: &str = "pub struct Point { pub x: i32, pub y: i32 }\n\
pub static ORIGIN: Point = Point { x: 47, y: 11 };\n\
fn main() { println!(\"{}\", ORIGIN.x + ORIGIN.y); }\n";

/// One toolchain's output: `<name>/app` and `<name>/app.dwp`, the `.dwo` files removed.
struct Built {
    name: &'static str,
    /// The index version `llvm-dwarfdump` must print.
    version: u16,
}

/// Builds the three, each in a directory of its own, and removes every `.dwo` and object file
/// (what is left: the binary and its package).
fn build_all(w: &Workdir) -> Vec<Built> {
    for dir in ["clang", "gcc", "rust"] {
        std::fs::create_dir_all(w.path(dir)).unwrap();
    }
    for dir in ["clang", "gcc"] {
        std::fs::write(w.path(&format!("{dir}/a.cpp")), UNIT_A).unwrap();
        std::fs::write(w.path(&format!("{dir}/main.cpp")), UNIT_MAIN).unwrap();
    }
    std::fs::write(w.path("rust/r2.rs"), RUST).unwrap();
    let split = |dir: &str, compiler: &str, dwarf: &str, packer: &str| {
        let run = |program: &str, args: &[&str]| common::run_in(&w.path(dir), program, args);
        for unit in ["a", "main"] {
            let (src, obj) = (format!("{unit}.cpp"), format!("{unit}.o"));
            run(compiler, &["-gsplit-dwarf", dwarf, "-c", &src, "-o", &obj]);
        }
        run(compiler, &["a.o", "main.o", "-o", "app"]);
        run(packer, &["-e", "app", "-o", "app.dwp"]);
    };
    split("clang", "clang++-19", "-gdwarf-5", "llvm-dwp-19");
    split("gcc", "g++", "-gdwarf-4", "dwp");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    common::run_in(
        &w.path("rust"),
        &rustc,
        &[
            "-C",
            "split-debuginfo=packed",
            "-C",
            "debuginfo=2",
            "r2.rs",
            "-o",
            "app",
        ],
    );
    for dir in ["clang", "gcc", "rust"] {
        for entry in std::fs::read_dir(w.path(dir)).unwrap() {
            let path = entry.unwrap().path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if matches!(ext, "dwo" | "o" | "cpp" | "rs") {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    vec![
        Built {
            name: "clang",
            version: 5,
        },
        Built {
            name: "gcc",
            version: 2,
        },
        Built {
            name: "rust",
            version: 2,
        },
    ]
}

/// `llvm-dwarfdump-19 --debug-cu-index`: the index version and the units' signatures (their
/// DWO ids), 16 lowercase hex digits, sorted.
fn dwarfdump_cu_index(dwp: &Path) -> (u16, Vec<String>) {
    let out = common::run_in(
        dwp.parent().unwrap(),
        "llvm-dwarfdump-19",
        &["--debug-cu-index", dwp.to_str().unwrap()],
    );
    let version = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = "))
        .and_then(|rest| rest.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no version in:\n{out}"));
    // Rows: `<slot> 0x<signature> [<info range>) ...`.
    let mut ids: Vec<String> = out
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.next()?.parse::<u32>().ok()?;
            let id = words.next()?.strip_prefix("0x")?;
            (id.len() == 16).then(|| id.to_ascii_lowercase())
        })
        .collect();
    ids.sort();
    assert!(!ids.is_empty(), "no units in:\n{out}");
    (version, ids)
}

/// `symdex keys --json` of `paths`: one row per file, by file name.
fn keys_json(paths: &[&Path]) -> BTreeMap<String, Value> {
    let out = ok(symdex()
        .arg("keys")
        .arg("--json")
        .args(paths)
        .output()
        .unwrap());
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|row| {
            let path = row["path"].as_str().unwrap();
            let name = Path::new(path).file_name().unwrap().to_str().unwrap();
            (name.to_string(), row)
        })
        .collect()
}

fn ids_of(value: &Value) -> Vec<String> {
    let ids = value["dwo_ids"]
        .as_array()
        .unwrap_or_else(|| panic!("{value}"));
    ids.iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn packages_and_binaries_are_identified_by_the_dwo_ids_dwarfdump_lists() {
    let w = Workdir::new();
    for built in build_all(&w) {
        let dir = w.path(built.name);
        let (app, dwp) = (dir.join("app"), dir.join("app.dwp"));
        // A debug file keeps the skeletons too.
        common::run_in(&dir, "objcopy", &["--only-keep-debug", "app", "app.debug"]);
        let (version, expected) = dwarfdump_cu_index(&dwp);
        assert_eq!(version, built.version, "{}", built.name);
        let rows = keys_json(&[&app, &dwp, &dir.join("app.debug")]);
        let package = &rows["app.dwp"];
        assert_eq!(package["format"], "dwp", "{}: {package}", built.name);
        assert_eq!(package["kind"], "debug", "{}", built.name);
        assert!(package.get("error").is_none() && package.get("build_id").is_none());
        assert_eq!(package["dwarf_package"]["index_version"], version);
        assert_eq!(
            ids_of(&package["dwarf_package"]),
            expected,
            "{}",
            built.name
        );
        assert_eq!(package["keys"], serde_json::json!({}), "{}", built.name);
        for binary in ["app", "app.debug"] {
            let row = &rows[binary];
            assert_eq!(row["format"], "elf", "{}", built.name);
            assert_eq!(
                ids_of(&row["split_dwarf"]),
                expected,
                "{} {binary}: {row}",
                built.name
            );
            assert!(row["split_dwarf"].get("unread").is_none(), "{row}");
        }
        // The table lists them under each row.
        let table = ok(symdex().arg("keys").args([&dwp, &app]).output().unwrap());
        for id in &expected {
            let package = format!("dwo_id  {:<16} {id}", format!("package v{version}"));
            let skeleton = format!("dwo_id  skeleton         {id}");
            assert!(table.contains(&package), "{package:?} in\n{table}");
            assert!(table.contains(&skeleton), "{skeleton:?} in\n{table}");
        }
        // Identifying a 4 GiB package reads its headers and index, not the file.
        let huge = dir.join("huge.dwp");
        padded_copy(&dwp, &huge, 4 << 30);
        let rows = keys_json(&[&huge]);
        assert_eq!(ids_of(&rows["huge.dwp"]["dwarf_package"]), expected);
        let read = rows["huge.dwp"]["bytes_read"].as_u64().unwrap();
        assert!(read < 64 << 10, "{}: {read} bytes read", built.name);
        std::fs::remove_file(huge).unwrap();
    }
}

#[test]
fn the_manifest_records_the_ids_and_the_package_publishes_nothing() {
    let w = Workdir::new();
    let built = build_all(&w);
    // The binaries and their packages alone in one run folder.
    let run = w.path("run");
    std::fs::create_dir_all(&run).unwrap();
    for b in &built {
        for file in ["app", "app.dwp"] {
            let to = run.join(format!("{}-{file}", b.name));
            std::fs::rename(w.path(b.name).join(file), to).unwrap();
        }
    }
    let store = w.path("store");
    let first = index_json(&store, &[&run]);
    // Run again: the records of uploads found indexed say the same (answered from their
    // upload records, which keep the ids).
    let again = index_json(&store, &[&run]);
    for (records, indexed) in [(first, "indexed"), (again, "unchanged")] {
        check_records(&records, &built, &run, indexed);
    }
    common::verify_clean(&store);
}

/// Each package's record `skipped` with its ids and its reason, each binary's `indexed` (the
/// action of its run) with its skeletons' ids.
fn check_records(records: &[Value], built: &[Built], run: &Path, indexed: &str) {
    for b in built {
        let (_, expected) = dwarfdump_cu_index(&run.join(format!("{}-app.dwp", b.name)));
        let record = |name: String| {
            records
                .iter()
                .find(|r| r["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no record of {name}: {records:?}"))
        };
        let package = record(format!("{}-app.dwp", b.name));
        assert_eq!(package["action"], "skipped", "{package}");
        assert_eq!(package["format"], "dwp");
        assert!(
            package["reason"]
                .as_str()
                .unwrap()
                .contains("a DWARF package"),
            "{package}"
        );
        assert_eq!(ids_of(&package["dwarf_package"]), expected);
        assert!(package.get("published").is_none(), "{package}");
        let binary = record(format!("{}-app", b.name));
        assert_eq!(binary["action"], indexed, "{binary}");
        assert_eq!(ids_of(&binary["split_dwarf"]), expected);
    }
}
