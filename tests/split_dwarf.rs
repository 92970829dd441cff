//! Split DWARF built here with the three public toolchains that write it (clang-19 DWARF 5 +
//! `llvm-dwp-19`, GCC DWARF 4 + binutils `dwp`, `rustc -C split-debuginfo=packed`): `symdex
//! keys --json` identifies each `.dwp` as a DWARF package with the DWO ids
//! `llvm-dwarfdump-19 --debug-cu-index` lists, and each binary (and its debug file) by the same
//! ids of its skeleton units; `symdex index` pairs them in any order and publishes the package
//! at `buildid/<binary's build id>/debuginfo`, where LLDB 23 finds it; stale packages, another
//! product's, and a package beside a separate debug file publish nothing and say why.

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

/// The build id `readelf -n` prints for `file`.
fn build_id_of(file: &Path) -> String {
    let out = common::run_in(
        file.parent().unwrap(),
        "readelf",
        &["-n", file.to_str().unwrap()],
    );
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build id in:\n{out}"))
        .trim()
        .to_string()
}

/// Every record of the store's manifest, in the order written (a package indexed again by
/// its binary's hand-over is recorded there, not in the binary's run's output).
fn manifest(store: &Path) -> Vec<Value> {
    let out = ok(symdex()
        .args(["manifest", "query", "--json"])
        .arg(store)
        .output()
        .unwrap());
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The last record of the input named `name` among `records`.
fn last<'r>(records: &'r [Value], name: &str) -> &'r Value {
    records
        .iter()
        .rev()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no record of {name}: {records:?}"))
}

/// `dir` holding copies of `files` (paths under the work directory) and nothing else.
fn folder(w: &Workdir, dir: &str, files: &[String]) -> std::path::PathBuf {
    let to = w.path(dir);
    std::fs::create_dir_all(&to).unwrap();
    for file in files {
        let from = w.path(file);
        std::fs::copy(&from, to.join(from.file_name().unwrap())).unwrap();
    }
    to
}

/// The package's record is `indexed` and published at `buildid/<binary's id>/debuginfo`, which
/// holds its bytes; the binary leaves that key to it.
fn check_paired(store: &Path, dir: &Path, what: &str) {
    let key = format!("buildid/{}/debuginfo", build_id_of(&dir.join("app")));
    let records = manifest(store);
    let package = last(&records, "app.dwp");
    assert_eq!(package["action"], "indexed", "{what}: {package}");
    assert_eq!(package["published"], serde_json::json!([key]), "{what}");
    let served = std::fs::read(store.join(&key)).unwrap();
    assert_eq!(
        served,
        std::fs::read(dir.join("app.dwp")).unwrap(),
        "{what}"
    );
    common::verify_clean(store);
}

#[test]
fn packages_pair_with_their_binaries_in_any_order_and_go_with_their_build() {
    let w = Workdir::new();
    for b in build_all(&w) {
        let dir = w.path(b.name);
        let key = format!("buildid/{}/debuginfo", build_id_of(&dir.join("app")));
        let app = folder(&w, &format!("{}-app", b.name), &[format!("{}/app", b.name)]);
        let dwp = folder(
            &w,
            &format!("{}-dwp", b.name),
            &[format!("{}/app.dwp", b.name)],
        );
        let build = ["--product", "p", "--build", "b1"];
        // One run, both files.
        let store = w.path(&format!("{}-one", b.name));
        let records = index_json(&store, &[&build[..], &[dir.to_str().unwrap()]].concat());
        check_paired(&store, &dir, b.name);
        assert_eq!(last(&records, "app")["action"], "indexed");
        assert!(!last(&records, "app")["published"]
            .as_array()
            .unwrap()
            .contains(&Value::from(key.as_str())));
        // `check` knows LLDB's lookup of the package, and says where gdb looks for it.
        let checked = |store: &Path| {
            let out = symdex()
                .args([
                    "check", "--json", "--client", "lldb", "--client", "gdb", "--store",
                ])
                .arg(store)
                .arg(dir.join("app"))
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(
                stderr.contains("only as app.dwp beside the binary"),
                "{stderr}"
            );
            let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let dwp: Vec<&Value> = rows.iter().filter(|r| r["key"] == key.as_str()).collect();
            assert_eq!(dwp.len(), 1, "{rows:?}");
            assert_eq!(dwp[0]["client"], "lldb");
            assert!(dwp[0]["note"].as_str().unwrap().contains(".dwp"));
            dwp[0]["status"].as_str().unwrap().to_string()
        };
        assert_eq!(checked(&store), "found", "{}", b.name);
        // Two runs, either order.
        for (first, second, order) in [(&app, &dwp, "binary first"), (&dwp, &app, "package first")]
        {
            let store = w.path(&format!("{}-{}", b.name, order.replace(' ', "-")));
            index_json(&store, &[&build[..], &[first.to_str().unwrap()]].concat());
            index_json(&store, &[&build[..], &[second.to_str().unwrap()]].concat());
            check_paired(&store, &dir, &format!("{} {order}", b.name));
            if order == "binary first" {
                let alone = w.path(&format!("{}-alone", b.name));
                index_json(&alone, &[&build[..], &[first.to_str().unwrap()]].concat());
                assert_eq!(checked(&alone), "missing", "{}", b.name);
            }
            // Deleting the build takes the key with the package's upload.
            ok(symdex()
                .args([
                    "delete",
                    "--store",
                    store.to_str().unwrap(),
                    "--build",
                    "b1",
                ])
                .output()
                .unwrap());
            assert!(!store.join(&key).exists(), "{} {order}", b.name);
            common::verify_clean(&store);
        }
    }
}

#[test]
fn stale_packages_foreign_packages_and_debug_files_beside_packages_publish_nothing() {
    let w = Workdir::new();
    build_all(&w);
    let dir = w.path("clang");
    let key = format!("buildid/{}/debuginfo", build_id_of(&dir.join("app")));
    // Another product's package with the very ids: nothing for this product's binary.
    let store = w.path("tenants");
    let app = folder(&w, "t-app", &["clang/app".into()]);
    let dwp = folder(&w, "t-dwp", &["clang/app.dwp".into()]);
    index_json(
        &store,
        &["--product", "a", "--build", "1", app.to_str().unwrap()],
    );
    let records = index_json(
        &store,
        &["--product", "b", "--build", "1", dwp.to_str().unwrap()],
    );
    let package = last(&records, "app.dwp");
    assert_eq!(package["action"], "skipped", "{package}");
    assert!(!store.join(&key).exists());
    common::verify_clean(&store);

    // A stale package: the binary rebuilt with one unit changed.
    let stale = w.path("stale");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::copy(dir.join("app.dwp"), stale.join("app.dwp")).unwrap();
    std::fs::write(
        stale.join("a.cpp"),
        UNIT_A.replace("int x;", "int x; int y;"),
    )
    .unwrap();
    std::fs::write(stale.join("main.cpp"), UNIT_MAIN).unwrap();
    for unit in ["a", "main"] {
        let (src, obj) = (format!("{unit}.cpp"), format!("{unit}.o"));
        common::run_in(
            &stale,
            "clang++-19",
            &["-gsplit-dwarf", "-gdwarf-5", "-c", &src, "-o", &obj],
        );
    }
    common::run_in(&stale, "clang++-19", &["a.o", "main.o", "-o", "app"]);
    let (_, old) = dwarfdump_cu_index(&stale.join("app.dwp"));
    let rows = keys_json(&[&stale.join("app")]);
    let new = ids_of(&rows["app"]["split_dwarf"]);
    let gone: Vec<&String> = old.iter().filter(|id| !new.contains(id)).collect();
    assert_eq!(gone.len(), 1, "{old:?} {new:?}");
    for order in ["binary first", "package first"] {
        let store = w.path(&format!("stale-{}", order.replace(' ', "-")));
        let app = folder(&w, &format!("stale-app-{order}"), &["stale/app".into()]);
        let dwp = folder(&w, &format!("stale-dwp-{order}"), &["stale/app.dwp".into()]);
        let (first, second) = if order == "binary first" {
            (&app, &dwp)
        } else {
            (&dwp, &app)
        };
        index_json(&store, &["--build", "2", first.to_str().unwrap()]);
        index_json(&store, &["--build", "2", second.to_str().unwrap()]);
        let records = manifest(&store);
        let package = last(&records, "app.dwp");
        assert_eq!(package["action"], "skipped", "{order}: {package}");
        let reason = package["reason"].as_str().unwrap();
        assert!(
            reason.contains("stale") && reason.contains(gone[0].as_str()),
            "{order}: {reason}"
        );
        let stale_key = format!("buildid/{}/debuginfo", build_id_of(&stale.join("app")));
        assert!(!store.join(&stale_key).exists(), "{order}");
        common::verify_clean(&store);
    }

    // A stripped binary with a separate debug file and a package: LLDB asks one URL for both.
    let split = w.path("split");
    std::fs::create_dir_all(&split).unwrap();
    std::fs::copy(dir.join("app.dwp"), split.join("app.dwp")).unwrap();
    std::fs::copy(dir.join("app"), split.join("app")).unwrap();
    common::run_in(
        &split,
        "objcopy",
        &["--only-keep-debug", "app", "app.debug"],
    );
    common::run_in(&split, "objcopy", &["--strip-debug", "app"]);
    let store = w.path("collision");
    let debug = folder(
        &w,
        "c-debug",
        &["split/app".into(), "split/app.debug".into()],
    );
    let dwp = folder(&w, "c-dwp", &["split/app.dwp".into()]);
    index_json(&store, &[debug.to_str().unwrap()]);
    let records = index_json(&store, &[dwp.to_str().unwrap()]);
    let package = last(&records, "app.dwp");
    assert_eq!(package["action"], "conflict", "{package}");
    let reason = package["reason"].as_str().unwrap();
    assert!(
        reason.contains("LLDB asks") && reason.contains("no .debug"),
        "{reason}"
    );
    assert_eq!(
        std::fs::read(store.join(&key)).unwrap(),
        std::fs::read(split.join("app.debug")).unwrap()
    );
}

#[test]
fn lldb_23_finds_the_package_where_it_asks_and_not_without_the_server() {
    let w = Workdir::new();
    let lldb = common::lldb23();
    for b in build_all(&w) {
        let dir = w.path(b.name);
        let store = w.path(&format!("{}-store", b.name));
        index_json(&store, &[dir.to_str().unwrap()]);
        let run = w.path(&format!("{}-run", b.name));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::copy(dir.join("app"), run.join("app")).unwrap();
        let (variable, printed) = match b.name {
            "rust" => ("ORIGIN", "(r2::Point) ORIGIN = (x = 47, y = 11)"),
            _ => ("a", "(A) a = (x = 47)"),
        };
        let server = common::Server::start(&store);
        let ask = |urls: Option<&str>, cache: &str| {
            let mut cmd = std::process::Command::new(&lldb);
            cmd.current_dir(&run)
                .env("HOME", &run)
                .env("DEBUGINFOD_CACHE_PATH", run.join(cache))
                .env_remove("DEBUGINFOD_URLS")
                .args(["--no-lldbinit", "--batch", "-o", "target create ./app"])
                .args(["-o", &format!("target variable {variable}")]);
            if let Some(urls) = urls {
                cmd.env("DEBUGINFOD_URLS", urls);
            }
            let out = cmd.output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        };
        let said = ask(Some(&server.url()), "cache");
        assert!(said.contains(printed), "{}: LLDB 23 said:\n{said}", b.name);
        drop(server);
        let said = ask(None, "cache-none");
        assert!(
            !said.contains(printed),
            "{}: without the server:\n{said}",
            b.name
        );
    }
}
