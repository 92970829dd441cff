//! `symdex check` against `symdex serve` and a store: exactly the modules left out are missing,
//! for each client family, with the URLs the real clients request (debuginfod-find's request,
//! read from serve's access log, is the URL check asked).

mod common;

use std::process::Command;

use common::{build_split_elf, ok, readelf_build_id, symdex, Server, Workdir};
use serde_json::Value;

fn check(args: &[&str]) -> (i32, Vec<Value>) {
    let out = symdex()
        .arg("check")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.code().unwrap_or(-1), rows)
}

/// Two programs, split; only the first one's files are indexed.
fn setup() -> (Workdir, String, String) {
    let w = Workdir::new();
    build_split_elf(
        &w,
        "in",
        "0x5e1ec7ed0000000000000000000000000000000a",
        "x * 11",
    );
    build_split_elf(
        &w,
        "out",
        "0x5e1ec7ed0000000000000000000000000000000b",
        "x * 13",
    );
    let store = w.path("store");
    ok(symdex()
        .args(["index", "--store"])
        .arg(&store)
        .arg(w.path("in"))
        .output()
        .unwrap());
    (
        w,
        "5e1ec7ed0000000000000000000000000000000a".into(),
        "5e1ec7ed0000000000000000000000000000000b".into(),
    )
}

#[test]
fn exactly_the_modules_left_out_are_missing_for_every_client() {
    let (w, indexed, left_out) = setup();
    let server = Server::start(&w.path("store"));
    let store = w.path("store");
    let binaries = [w.path("in/app.stripped"), w.path("out/app.stripped")];
    let args: Vec<String> = [
        "--server",
        &server.url(),
        "--store",
        store.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(binaries.iter().map(|p| p.display().to_string()))
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, rows) = check(&args);
    assert_eq!(code, 1, "something is missing");
    let clients: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["client"].as_str().unwrap()).collect();
    for client in [
        "gdb",
        "lldb",
        "debuginfod",
        "sentry-unified",
        "sentry-native",
    ] {
        assert!(clients.contains(client), "{client}: {clients:?}");
    }
    for row in &rows {
        let key = row["key"].as_str().unwrap();
        let from_indexed = row["input"].as_str().unwrap().contains("/in/");
        let want = if from_indexed { "found" } else { "missing" };
        assert_eq!(row["status"], want, "{row}");
        if from_indexed {
            assert!(
                row["published_by"].as_str().unwrap().contains("/in/"),
                "{row}"
            );
        }
        let id = if from_indexed { &indexed } else { &left_out };
        assert!(key.contains(&id[..2]), "{key} names the module's id");
    }

    // The store alone answers the same.
    let (code, only_store) = check(&[
        "--store",
        store.to_str().unwrap(),
        "--client",
        "debuginfod",
        binaries[1].to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(only_store.iter().all(|r| r["status"] == "missing"));
    let (code, all_found) = check(&[
        "--store",
        store.to_str().unwrap(),
        binaries[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{all_found:?}");

    // A key whose bytes changed behind symdex's back: wrong content.
    let debuginfo = store.join(format!("buildid/{indexed}/debuginfo"));
    std::fs::write(&debuginfo, b"truncated").unwrap();
    let (code, rows) = check(&[
        "--server",
        &server.url(),
        "--store",
        store.to_str().unwrap(),
        "--client",
        "debuginfod",
        binaries[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let row = rows
        .iter()
        .find(|r| r["key"] == format!("buildid/{indexed}/debuginfo"))
        .unwrap();
    assert_eq!(row["status"], "wrong-content", "{row}");
}

#[test]
fn check_asks_the_url_debuginfod_find_requests() {
    let (w, _, left_out) = setup();
    let log = w.path("access.jsonl");
    let server = Server::start_with(
        &w.path("store"),
        &["--access-log", log.to_str().unwrap()],
        None,
    );
    let found = Command::new("debuginfod-find")
        .env("DEBUGINFOD_URLS", server.url())
        .env("DEBUGINFOD_CACHE_PATH", w.path("cache"))
        .args(["debuginfo", &left_out])
        .output()
        .unwrap();
    assert!(!found.status.success());
    let requested: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["path"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let (code, rows) = check(&[
        "--server",
        &server.url(),
        "--client",
        "debuginfod",
        w.path("out/app.stripped").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let urls: Vec<String> = rows
        .iter()
        .map(|r| {
            r["url"]
                .as_str()
                .unwrap()
                .trim_start_matches(&server.url())
                .to_string()
        })
        .collect();
    for path in &requested {
        assert!(
            urls.contains(path),
            "debuginfod-find asked {path}; check asked {urls:?}"
        );
    }
    let build_id = readelf_build_id(&w, "out/app.stripped").unwrap();
    assert_eq!(build_id, left_out);
}

/// [`setup`]'s store behind `serve --auth-token-file` with `token`, and `modules.json` listing
/// the indexed program by code file and id.
fn private_server(token: &str) -> (Workdir, Server) {
    let (w, indexed, _) = setup();
    std::fs::write(w.path("tokens"), format!("{token}\n")).unwrap();
    let server = Server::start_with(
        &w.path("store"),
        &["--auth-token-file", w.path("tokens").to_str().unwrap()],
        None,
    );
    std::fs::write(
        w.path("modules.json"),
        serde_json::json!([{ "code_file": "/opt/app", "code_id": indexed }]).to_string(),
    )
    .unwrap();
    (w, server)
}

#[test]
fn a_private_server_is_forbidden_not_missing_and_a_module_list_works() {
    let (w, server) = private_server("reader-token");
    let (code, rows) = check(&[
        "--server",
        &server.url(),
        "--client",
        "debuginfod",
        w.path("modules.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["status"] == "forbidden"), "{rows:?}");
    let open = Server::start(&w.path("store"));
    let (code, rows) = check(&[
        "--server",
        &open.url(),
        "--client",
        "debuginfod",
        w.path("modules.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{rows:?}");
    // A server that does not answer is an error (2), not a miss.
    let (code, _) = check(&[
        "--server",
        "http://127.0.0.1:9",
        "--timeout",
        "2",
        w.path("modules.json").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
}

/// A minidump written byte by byte from the published format (MINIDUMP_HEADER, one
/// ModuleListStream, MINIDUMP_MODULE records with their name strings and CodeView records).
fn write_minidump(path: &std::path::Path, modules: &[(&str, Vec<u8>)]) {
    let list_rva = 32 + 12;
    let mut tail_rva = list_rva + 4 + 108 * modules.len() as u32;
    let mut records = Vec::new();
    let mut tail = Vec::new();
    for (index, (name, cv)) in modules.iter().enumerate() {
        let name_rva = tail_rva + tail.len() as u32;
        let utf16: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        tail.extend((utf16.len() as u32).to_le_bytes());
        tail.extend(&utf16);
        tail.extend([0, 0]);
        let cv_rva = tail_rva + tail.len() as u32;
        tail.extend(cv);
        let mut m = Vec::new();
        m.extend((0x7f00_0000_0000u64 + (index as u64) * 0x10_0000).to_le_bytes());
        m.extend(0x1000u32.to_le_bytes()); // SizeOfImage
        m.extend(0u32.to_le_bytes()); // CheckSum
        m.extend(0x5f2b_2d4au32.to_le_bytes()); // TimeDateStamp
        m.extend(name_rva.to_le_bytes());
        m.extend([0u8; 52]); // VS_FIXEDFILEINFO
        m.extend((cv.len() as u32).to_le_bytes());
        m.extend(cv_rva.to_le_bytes());
        m.extend([0u8; 8 + 16]); // MiscRecord, Reserved0, Reserved1
        assert_eq!(m.len(), 108);
        records.extend(m);
    }
    tail_rva += 0;
    let mut out = Vec::new();
    out.extend(b"MDMP");
    out.extend(0xa793u32.to_le_bytes());
    out.extend(1u32.to_le_bytes()); // streams
    out.extend(32u32.to_le_bytes()); // directory
    out.extend([0u8; 4 + 4 + 8]); // checksum, time, flags
    out.extend(4u32.to_le_bytes()); // ModuleListStream
    out.extend((4 + records.len() as u32).to_le_bytes());
    out.extend(list_rva.to_le_bytes());
    out.extend((modules.len() as u32).to_le_bytes());
    out.extend(records);
    assert_eq!(out.len() as u32, tail_rva);
    out.extend(tail);
    std::fs::write(path, out).unwrap();
}

/// Breakpad's ELF CodeView record: `BpEL` and the build id.
fn cv_elf(build_id_hex: &str) -> Vec<u8> {
    let mut cv = 0x4270_454cu32.to_le_bytes().to_vec();
    cv.extend(
        (0..build_id_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&build_id_hex[i..i + 2], 16).unwrap()),
    );
    cv
}

/// A PDB 7.0 CodeView record: `RSDS`, GUID, age, PDB path.
fn cv_pdb(guid: [u8; 16], age: u32, pdb: &str) -> Vec<u8> {
    let mut cv = b"RSDS".to_vec();
    cv.extend(guid);
    cv.extend(age.to_le_bytes());
    cv.extend(pdb.as_bytes());
    cv.push(0);
    cv
}

#[test]
fn a_minidump_lists_the_modules_to_check() {
    let (w, indexed, left_out) = setup();
    let store = w.path("store");
    let dump = w.path("crash.dmp");
    write_minidump(
        &dump,
        &[
            ("/opt/in/app", cv_elf(&indexed)),
            ("/opt/out/app", cv_elf(&left_out)),
            (
                "C:\\app\\plugin.dll",
                cv_pdb([7; 16], 3, "C:\\build\\Plugin.pdb"),
            ),
        ],
    );
    let (code, rows) = check(&["--store", store.to_str().unwrap(), dump.to_str().unwrap()]);
    assert_eq!(code, 1, "{rows:?}");
    let status = |needle: &str, client: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["key"].as_str().unwrap().contains(needle) && r["client"] == client)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        status(&indexed, "debuginfod"),
        ["found", "found"],
        "{rows:?}"
    );
    assert_eq!(status(&left_out, "debuginfod"), ["missing", "missing"]);
    let pdb = status("Plugin.pdb/07070707070707070707070707070707", "windbg");
    assert_eq!(pdb, ["missing"], "{rows:?}");
    let dll = status("plugin.dll/5F2B2D4A1000/plugin.dll", "windbg");
    assert_eq!(dll, ["missing"], "the PE by its code id: {rows:?}");

    // Garbage that starts like a minidump is an error, not a panic.
    let mut broken = std::fs::read(&dump).unwrap();
    broken.truncate(40);
    std::fs::write(w.path("broken.dmp"), broken).unwrap();
    let (code, _) = check(&[
        "--store",
        store.to_str().unwrap(),
        w.path("broken.dmp").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
}

#[test]
fn an_elf_core_lists_the_mapped_images_to_check() {
    let w = Workdir::new();
    std::fs::write(
        w.path("crash.c"),
        "#include <stdlib.h>\nint main(void) { abort(); }\n",
    )
    .unwrap();
    w.run(
        "gcc",
        &[
            "-g",
            "-Wl,--build-id=0x5e1ec7ed000000000000000000000000000000cc",
            "-o",
            "crash",
            "crash.c",
        ],
    );
    let store = w.path("store");
    ok(symdex()
        .args(["index", "--store"])
        .arg(&store)
        .arg(w.path("crash"))
        .output()
        .unwrap());
    // A real core: the program dies of SIGABRT under gdb, which writes the core (gcore).
    let gdb = Command::new("gdb")
        .current_dir(w.path(""))
        .args([
            "-batch",
            "-nx",
            "-ex",
            "run",
            "-ex",
            "gcore core.crash",
            "./crash",
        ])
        .output()
        .unwrap();
    assert!(
        w.path("core.crash").is_file(),
        "gdb wrote no core: {}",
        String::from_utf8_lossy(&gdb.stderr)
    );
    let (code, rows) = check(&[
        "--store",
        store.to_str().unwrap(),
        "--client",
        "debuginfod",
        w.path("core.crash").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "libc is not in the store");
    let status_of = |module: &str| -> Vec<&str> {
        rows.iter()
            .filter(|r| r["module"] == module)
            .map(|r| r["status"].as_str().unwrap())
            .collect()
    };
    assert_eq!(status_of("crash"), ["found", "found"], "{rows:?}");
    let crash_key = rows.iter().find(|r| r["module"] == "crash").unwrap()["key"].clone();
    assert!(
        crash_key
            .as_str()
            .unwrap()
            .contains("5e1ec7ed000000000000000000000000000000cc"),
        "the build id read from the core: {crash_key}"
    );
    let libc: Vec<&Value> = rows
        .iter()
        .filter(|r| r["module"].as_str().unwrap().starts_with("libc.so"))
        .collect();
    assert!(!libc.is_empty(), "libc's build id was read: {rows:?}");
    assert!(libc.iter().all(|r| r["status"] == "missing"));

    // A truncated core is an error, not a panic.
    let core = std::fs::read(w.path("core.crash")).unwrap();
    std::fs::write(w.path("core.cut"), &core[..200]).unwrap();
    let (code, _) = check(&[
        "--store",
        store.to_str().unwrap(),
        w.path("core.cut").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
}

#[test]
fn a_directory_given_as_the_server_is_refused_before_any_request() {
    let (w, _, _) = setup();
    let store = w.path("store");
    let out = symdex()
        .args(["check", "--json", "--server"])
        .arg(&store)
        .arg(w.path("in"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no key was checked");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("goes with --store"), "{stderr}");
    // The same store with --store is checked: the programs' keys are found.
    let (code, rows) = check(&[
        "--store",
        store.to_str().unwrap(),
        w.path("in").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{rows:#?}");
    assert!(!rows.is_empty());
}

#[test]
fn a_package_is_checked_by_the_artifacts_it_holds() {
    let (w, _, _) = setup();
    let store = w.path("store");
    // A Debian package of each program's files (the first indexed, the second not).
    let package = |dir: &str| {
        w.run(
            "sh",
            &[
                "-c",
                &format!(
                    "mkdir -p pkg-{dir}/DEBIAN pkg-{dir}/usr/lib/debug && cp {dir}/* pkg-{dir}/usr/lib/debug/ \
                     && printf 'Package: p\\nVersion: 1\\nArchitecture: amd64\\nMaintainer: m <m@example.com>\\nDescription: d\\n' > pkg-{dir}/DEBIAN/control \
                     && dpkg-deb --build pkg-{dir} {dir}.deb > /dev/null"
                ),
            ],
        );
        w.path(&format!("{dir}.deb")).to_str().unwrap().to_string()
    };
    let (indexed, not_indexed) = (package("in"), package("out"));
    let store_arg = store.to_str().unwrap();
    let (code, rows) = check(&["--store", store_arg, "--client", "gdb", &indexed]);
    assert_eq!(code, 0, "{rows:#?}");
    assert!(rows.len() >= 2, "both files' keys: {rows:#?}");
    assert!(rows.iter().all(|r| r["input"]
        .as_str()
        .is_some_and(|i| i.contains(".deb!/data.tar"))));
    let (code, rows) = check(&["--store", store_arg, "--client", "gdb", &not_indexed]);
    assert_eq!(code, 1, "{rows:#?}");
    assert!(rows.iter().all(|r| r["status"] == "missing"), "{rows:#?}");
}

/// An entry `index` would reject (here over `--max-entry-size`) is not read, so what it is is
/// not known: the check does not pass it (exit 2, saying which), where it used to leave it out
/// and pass on the rest. With the limits `index` used, the same archive passes.
#[test]
fn an_archive_entry_over_the_limits_is_not_passed_unchecked() {
    let (w, _, _) = setup();
    let store = w.path("store");
    w.run("zip", &["-q", "-r", "in.zip", "in"]);
    let zip = w.path("in.zip");
    let (store_arg, zip_arg) = (store.to_str().unwrap(), zip.to_str().unwrap());
    let (code, rows) = check(&["--store", store_arg, "--client", "gdb", zip_arg]);
    assert_eq!(code, 0, "{rows:#?}");
    let out = symdex()
        .args(["check", "--json", "--client", "gdb", "--store", store_arg])
        .args(["--max-entry-size", "1000", zip_arg])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in.zip!/in/") && stderr.contains("not checked: entry of"),
        "{stderr}"
    );
}

/// A private server checked with its token given by file, by environment, by header and as
/// URL user information: found every way, and the token is nowhere in what `check` prints
/// (table and JSON, stdout and stderr).
#[test]
fn credentials_reach_a_private_server_and_are_never_printed() {
    let token = "s3cr3t-t0ken";
    let (w, server) = private_server(token);
    let modules = w.path("modules.json");
    let with_userinfo = server.url().replacen("://", &format!("://ci:{token}@"), 1);
    let header = format!("Authorization: Bearer {token}");
    let ways: Vec<(Vec<String>, Option<&str>)> = vec![
        (
            vec![
                "--server".into(),
                server.url(),
                "--auth-token-file".into(),
                w.path("tokens").to_string_lossy().into(),
            ],
            None,
        ),
        (vec!["--server".into(), server.url()], Some(token)),
        (
            vec!["--server".into(), server.url(), "--header".into(), header],
            None,
        ),
        (vec!["--server".into(), with_userinfo], None),
    ];
    for (args, env_token) in ways {
        for json in [true, false] {
            let mut command = symdex();
            command
                .arg("check")
                .args(&args)
                .args(["--client", "debuginfod"])
                .arg(&modules);
            if json {
                command.arg("--json");
            }
            match env_token {
                Some(t) => command.env("SYMDEX_AUTH_TOKEN", t),
                None => command.env_remove("SYMDEX_AUTH_TOKEN"),
            };
            let out = command.output().unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
            assert!(stdout.contains("found"), "{args:?}: {stdout}");
            assert!(
                !stdout.contains(token) && !stderr.contains(token),
                "{args:?} printed the token: {stdout}{stderr}"
            );
        }
    }
}
