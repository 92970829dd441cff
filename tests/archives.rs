//! Every upload shape CI produces, made with the real tools (zip, tar with gzip/zstd/xz/bzip2,
//! gzip, zstd, gcab for symstore's `/compress` CAB files, dpkg-deb and rpmbuild for packages,
//! 7-Zip's `7zz` for 7z archives): each entry publishes exactly what
//! the same file publishes uploaded loose, and a real client fetches a file that arrived
//! inside an archive.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{
    build_pe_and_pdb, build_split_elf, index_json, ok, symdex, verify_clean, Server, Workdir,
    SOURCE_CPP,
};

const BID: &str = "0x5ca1ab1e0123456789abcdef0123456789abcdef";
const BID_HEX: &str = "5ca1ab1e0123456789abcdef0123456789abcdef";

/// An RPM of the prebuilt `app.debug` and `app.stripped` as they are (no stripping, no
/// debuginfo subpackage of rpmbuild's own, no build-id links).
const APP_SPEC: &str = "Name: app-debuginfo
Version: 1.0
Release: 1
Summary: debug files
License: MIT
BuildArch: x86_64
%global debug_package %{nil}
%global _build_id_links none
%global __os_install_post %{nil}
%description
The debug files of app.
%install
mkdir -p %{buildroot}/usr/lib/debug %{buildroot}/usr/bin
cp %{_sourcedir}/app.debug %{buildroot}/usr/lib/debug/
cp %{_sourcedir}/app.stripped %{buildroot}/usr/bin/
%files
/usr/lib/debug/app.debug
/usr/bin/app.stripped
";

fn published(store: &Path) -> BTreeMap<String, Vec<u8>> {
    common::published_files(store)
}

fn index_into(store: &Path, inputs: &[&Path]) -> Vec<serde_json::Value> {
    let args: Vec<&std::ffi::OsStr> = inputs.iter().map(|p| p.as_os_str()).collect();
    index_json(store, &args)
}

/// `7zz a` with `args` (a 7z archive unless they name another type with `-t`), quietly.
fn seven_zip(w: &Workdir, args: &[&str]) {
    let mut command = vec!["a", "-bso0", "-bsp0"];
    if !args.iter().any(|a| a.starts_with("-t")) {
        command.push("-t7z");
    }
    command.extend_from_slice(args);
    w.run("7zz", &command);
}

/// An ELF program split into `out/app.debug` + `out/app.stripped`, and a DLL with its PDB.
fn artifacts() -> Workdir {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x * 7");
    std::fs::write(w.path("src.cpp"), SOURCE_CPP).unwrap();
    build_pe_and_pdb(&w, "lib.pdb", "lib.dll");
    w
}

#[test]
fn every_archive_shape_publishes_what_its_files_publish_loose() {
    let w = artifacts();
    let (debug, stripped, pdb) = (
        w.path("out/app.debug"),
        w.path("out/app.stripped"),
        w.path("lib.pdb"),
    );
    // What the files publish loose.
    let loose = |name: &str, files: &[&Path]| {
        let store = w.path(&format!("loose-{name}"));
        index_into(&store, files);
        published(&store)
    };
    let elf_pair = loose("elf", &[&debug, &stripped]);
    let debug_only = loose("debug", &[&debug]);
    let stripped_only = loose("stripped", &[&stripped]);
    let pdb_only = loose("pdb", &[&pdb]);
    let dll_only = loose("dll", &[&w.path("lib.dll")]);
    assert!(elf_pair.contains_key(&format!("buildid/{BID_HEX}/debuginfo")));
    assert!(pdb_only.keys().any(|k| k.starts_with("symbols/lib.pdb/")));

    // The shapes, made by the tools CI uses.
    w.run("zip", &["-q", "-0", "-r", "stored.zip", "out"]);
    w.run("zip", &["-q", "-9", "-r", "deflated.zip", "out"]);
    w.run("zip", &["-q", "-Z", "bzip2", "-r", "bzip2.zip", "out"]);
    w.run("cp", &["deflated.zip", "symbols.snupkg"]);
    w.run("tar", &["-czf", "debug.tar.gz", "out"]);
    w.run("tar", &["--zstd", "-cf", "debug.tar.zst", "out"]);
    w.run("tar", &["-cJf", "debug.tar.xz", "out"]);
    w.run("tar", &["-cjf", "debug.tar.bz2", "out"]);
    w.run("tar", &["--lzip", "-cf", "debug.tar.lz", "out"]);
    w.run("tar", &["-cf", "debug.tar", "out"]);
    w.run("sh", &["-c", "gzip -c out/app.debug > app.debug.gz"]);
    w.run(
        "sh",
        &["-c", "zstd -q -c out/app.stripped > app.stripped.zst"],
    );
    w.run("sh", &["-c", "xz -c out/app.debug > app.debug.xz"]);
    w.run("sh", &["-c", "bzip2 -c out/app.debug > app.debug.bz2"]);
    w.run("sh", &["-c", "lzip -c out/app.debug > app.debug.lz"]);
    // symstore /compress: a cabinet holding the file under its own name, MSZIP-compressed.
    w.run("gcab", &["-c", "-n", "-z", "lib.pd_", "lib.pdb"]);
    // A Debian package of both files (as a -dbgsym package holds its debug file), in each of
    // dpkg-deb's compressions, and one in a zip (a CI artifact as it is downloaded).
    w.run(
        "sh",
        &[
            "-c",
            "mkdir -p pkg/DEBIAN pkg/usr/lib/debug pkg/usr/bin \
             && printf 'Package: app-dbgsym\\nVersion: 1.0\\nArchitecture: amd64\\nMaintainer: ci <ci@example.com>\\nDescription: debug symbols\\n' > pkg/DEBIAN/control \
             && cp out/app.debug pkg/usr/lib/debug/ && cp out/app.stripped pkg/usr/bin/ \
             && dpkg-deb --build -Zxz pkg app-dbgsym.ddeb \
             && dpkg-deb --build -Zgzip pkg app.deb \
             && dpkg-deb --build -Zzstd pkg app-zstd.deb \
             && dpkg-deb --build -Znone pkg app-none.deb \
             && zip -q -0 debs.zip app-dbgsym.ddeb >/dev/null",
        ],
    );

    // 7z archives as 7-Zip writes them: solid LZMA2 at -mx9 (with its executable filter
    // for the ELF files), a block per file in bzip2, LZMA, and a DLL through BCJ2.
    for args in [
        &["-mx=9", "symbols.7z", "out"][..],
        &["-ms=off", "-m0=BZip2", "debug-bzip2.7z", "out"],
        &["-m0=LZMA", "lib-pdb.7z", "lib.pdb"],
        &["-mf=BCJ2", "lib-dll.7z", "lib.dll"],
        // A zip in Deflate64 (what Windows' compressed folders write for large files).
        &["-tzip", "-mm=Deflate64", "deflate64.zip", "out"],
        // Zips in the methods the zip crate is built without (symdex decodes them).
        &["-tzip", "-mm=LZMA", "lzma.zip", "out"],
        &["-tzip", "-mm=XZ", "xz.zip", "out"],
        &["-tzip", "-mm=BZip2", "bzip2-7z.zip", "lib.pdb"],
        // PPMd, what 7-Zip gives text and sources when asked: a 7z block, and a zip entry.
        &["-m0=PPMd", "ppmd.7z", "out"],
        &["-tzip", "-mm=PPMd", "ppmd.zip", "out/app.debug"],
    ] {
        seven_zip(&w, args);
    }

    // An RPM of both files (a -debuginfo package), its payload in each compression rpmbuild
    // writes.
    std::fs::write(w.path("app.spec"), APP_SPEC).unwrap();
    for (payload, rpm) in [
        ("w9.gzdio", "app-gz.rpm"),
        ("w6.xzdio", "app-xz.rpm"),
        ("w19.zstdio", "app-zst.rpm"),
    ] {
        let top = w.path(&format!("rpm-{payload}"));
        let defines = [
            format!("_topdir {}", top.display()),
            format!("_sourcedir {}", w.path("out").display()),
            format!("_binary_payload {payload}"),
        ];
        let mut args = vec!["-bb", "--nodeps", "--quiet"];
        for define in &defines {
            args.extend(["--define", define]);
        }
        args.push("app.spec");
        w.run("rpmbuild", &args);
        let built = top.join("RPMS/x86_64/app-debuginfo-1.0-1.x86_64.rpm");
        std::fs::rename(built, w.path(rpm)).unwrap();
    }
    for (shape, expected) in [
        ("stored.zip", &elf_pair),
        ("deflated.zip", &elf_pair),
        ("symbols.snupkg", &elf_pair),
        ("debug.tar.gz", &elf_pair),
        ("debug.tar.zst", &elf_pair),
        ("debug.tar.xz", &elf_pair),
        ("debug.tar.bz2", &elf_pair),
        ("debug.tar", &elf_pair),
        ("app.debug.gz", &debug_only),
        ("app.debug.xz", &debug_only),
        ("app.debug.bz2", &debug_only),
        ("app.debug.lz", &debug_only),
        ("debug.tar.lz", &elf_pair),
        ("app.stripped.zst", &stripped_only),
        ("lib.pd_", &pdb_only),
        ("app-dbgsym.ddeb", &elf_pair),
        ("app.deb", &elf_pair),
        ("app-zstd.deb", &elf_pair),
        ("app-none.deb", &elf_pair),
        ("debs.zip", &elf_pair),
        ("app-gz.rpm", &elf_pair),
        ("app-xz.rpm", &elf_pair),
        ("app-zst.rpm", &elf_pair),
        ("symbols.7z", &elf_pair),
        ("debug-bzip2.7z", &elf_pair),
        ("lib-pdb.7z", &pdb_only),
        ("lib-dll.7z", &dll_only),
        ("deflate64.zip", &elf_pair),
        ("bzip2.zip", &elf_pair),
        ("lzma.zip", &elf_pair),
        ("xz.zip", &elf_pair),
        ("bzip2-7z.zip", &pdb_only),
        ("ppmd.7z", &elf_pair),
        ("ppmd.zip", &debug_only),
    ] {
        let store = w.path(&format!("store-{shape}"));
        let archive = w.path(shape);
        let records = index_into(&store, &[&archive]);
        let got = published(&store);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "{shape}: keys differ from the loose files'"
        );
        assert!(got == *expected, "{shape}: contents differ");
        // Each entry is its own upload: the archive and the path inside it.
        let indexed: Vec<_> = records
            .iter()
            .filter(|r| r["action"] == "indexed")
            .collect();
        assert!(!indexed.is_empty(), "{shape}: {records:#?}");
        for r in indexed {
            assert_eq!(r["ingest_key"], archive.to_str().unwrap(), "{r}");
            assert!(r["entry"].is_string(), "{r}");
        }
        verify_clean(&store);
    }
}

#[test]
fn deleting_an_archive_unpublishes_what_only_it_referenced() {
    let w = artifacts();
    w.run("tar", &["-czf", "debug.tar.gz", "out"]);
    let store = w.path("store");
    index_json(
        &store,
        &[w.path("debug.tar.gz").to_str().unwrap(), "--build", "a"],
    );
    // The stripped binary also uploaded loose, by another build.
    index_json(
        &store,
        &[w.path("out/app.stripped").to_str().unwrap(), "--build", "b"],
    );
    ok(symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(w.path("debug.tar.gz"))
        .output()
        .unwrap());
    let keys = published(&store);
    assert!(!keys.contains_key(&format!("buildid/{BID_HEX}/debuginfo")));
    assert_eq!(
        keys.get(&format!("buildid/{BID_HEX}/executable")),
        Some(&std::fs::read(w.path("out/app.stripped")).unwrap()),
        "the loose upload still references the binary"
    );
    verify_clean(&store);
}

/// What 7-Zip writes that symdex does not take, each with a record that says why: a Deflate
/// block (its entries rejected, naming the method), a symbolic link stored as one (`-snl`:
/// skipped; the file beside it indexed), an archive cut short (rejected as malformed), an
/// encrypted zip entry (rejected as encrypted).
#[test]
fn sevenz_entries_symdex_does_not_take_are_recorded_with_their_reason() {
    let w = artifacts();
    w.run("ln", &["-s", "out/app.debug", "link.debug"]);
    let sevenz = |args: &[&str]| seven_zip(&w, args);
    sevenz(&["-m0=Deflate", "deflate.7z", "out"]);
    sevenz(&[
        "-tzip",
        "-pSecret",
        "-mem=AES256",
        "aes.zip",
        "out/app.debug",
    ]);
    sevenz(&["-snl", "links.7z", "link.debug", "out/app.stripped"]);
    let links = std::fs::read(w.path("links.7z")).unwrap();
    std::fs::write(w.path("cut.7z"), &links[..links.len() - 20]).unwrap();
    let store = w.path("store");
    let inputs = ["deflate.7z", "links.7z", "cut.7z", "aes.zip"].map(|f| w.path(f));
    let records = index_into(&store, &inputs.each_ref().map(|p| p.as_path()));
    let of = |input: &str| -> Vec<(String, String, String)> {
        records
            .iter()
            .filter(|r| r["ingest_key"].as_str().unwrap().ends_with(input))
            .map(|r| {
                let text = |field: &str| r[field].as_str().unwrap_or_default().to_string();
                (text("action"), text("entry"), text("reason"))
            })
            .collect()
    };
    let deflate = of("/deflate.7z");
    assert_eq!(deflate.len(), 2, "{deflate:#?}");
    assert!(
        deflate
            .iter()
            .all(|(action, _, reason)| action == "rejected" && reason.contains("DEFLATE")),
        "{deflate:#?}"
    );
    let mut links = of("/links.7z");
    links.sort();
    assert_eq!(links.len(), 2, "{links:#?}");
    assert_eq!(
        (links[0].0.as_str(), links[0].1.as_str()),
        ("indexed", "out/app.stripped")
    );
    assert_eq!(
        (links[1].0.as_str(), links[1].1.as_str()),
        ("skipped", "link.debug")
    );
    assert!(links[1].2.contains("symbolic link"), "{links:#?}");
    let zip = of("/aes.zip");
    assert!(
        matches!(&zip[..], [(action, entry, reason)] if action == "rejected" && entry == "out/app.debug" && reason.contains("encrypted")),
        "{zip:#?}"
    );
    let cut = of("/cut.7z");
    assert!(
        matches!(&cut[..], [(action, _, reason)] if action == "rejected" && reason.contains("malformed 7z")),
        "{cut:#?}"
    );
    verify_clean(&store);
}

#[test]
fn hostile_archives_are_recorded_not_fatal() {
    let w = Workdir::new();
    std::fs::write(w.path("a.txt"), "hello").unwrap();
    w.run("tar", &["-czf", "good.tar.gz", "a.txt"]);
    let good = std::fs::read(w.path("good.tar.gz")).unwrap();
    // A truncated gzip stream, a cabinet header over garbage, a zip with a cut directory.
    std::fs::write(w.path("cut.tar.gz"), &good[..good.len() / 2]).unwrap();
    let mut cab = b"MSCF\0\0\0\0".to_vec();
    cab.extend([0xffu8; 64]);
    std::fs::write(w.path("bad.cab"), &cab).unwrap();
    std::fs::write(w.path("bad.zip"), b"PK\x03\x04 not really a zip").unwrap();
    let store = w.path("store");
    let out = symdex()
        .args(["index", "--json", "--store"])
        .arg(&store)
        .args(["cut.tar.gz", "bad.cab", "bad.zip", "good.tar.gz"].map(|f| w.path(f)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_input = |name: &str| -> Vec<&serde_json::Value> {
        records
            .iter()
            .filter(|r| r["ingest_key"].as_str().unwrap().ends_with(name))
            .collect()
    };
    for bad in ["cut.tar.gz", "bad.cab", "bad.zip"] {
        let rs = by_input(bad);
        assert!(
            !rs.is_empty()
                && rs
                    .iter()
                    .all(|r| r["action"] == "rejected" && r["reason"].is_string()),
            "{bad}: {rs:#?}"
        );
    }
    // The good archive after them was still indexed (its text entry is not an artifact).
    let good = by_input("good.tar.gz");
    assert_eq!(good.len(), 1);
    assert_eq!(good[0]["entry"], "a.txt");
    assert_eq!(good[0]["action"], "skipped");
    verify_clean(&store);
}

#[test]
fn debuginfod_find_fetches_a_debug_file_that_arrived_in_a_tarball() {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x - 5");
    w.run("tar", &["--zstd", "-cf", "debug.tar.zst", "out"]);
    let store = w.path("store");
    index_json(&store, &[w.path("debug.tar.zst").to_str().unwrap()]);
    let server = Server::start(&store);
    let mut find = Command::new("debuginfod-find");
    find.args(["debuginfo", BID_HEX])
        .env("DEBUGINFOD_URLS", server.url())
        .env("DEBUGINFOD_CACHE_PATH", w.path("cache"));
    assert_eq!(
        common::fetched_by(find),
        std::fs::read(w.path("out/app.debug")).unwrap()
    );
}

#[test]
fn a_sentry_source_bundle_is_published_where_symbolicator_looks() {
    let w = Workdir::new();
    std::fs::write(
        w.path("prog.c"),
        "int twice(int x) { return 2 * x; }\nint main(int c, char **v) { return twice(c); }\n",
    )
    .unwrap();
    w.run(
        "gcc",
        &[
            "-g",
            "-O0",
            &format!("-Wl,--build-id={BID}"),
            "-o",
            "app",
            "prog.c",
        ],
    );
    w.run("objcopy", &["--only-keep-debug", "app", "app.debug"]);
    // sentry-cli reads the DWARF line tables and bundles the sources they name.
    let out = Command::new("sentry-cli")
        .args(["debug-files", "bundle-sources", "app.debug"])
        .current_dir(w.path("."))
        .output()
        .expect("sentry-cli (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bundle = std::fs::read(w.path("app.src.zip")).unwrap();
    // Loose, and inside a CI zip as well.
    w.run("zip", &["-q", "bundles.zip", "app.src.zip"]);
    for input in ["app.src.zip", "bundles.zip"] {
        let store = w.path(&format!("store-{input}"));
        let records = index_json(&store, &[w.path(input).to_str().unwrap()]);
        let r = records
            .iter()
            .find(|r| r["action"] == "indexed")
            .unwrap_or_else(|| panic!("{records:#?}"));
        assert_eq!(r["format"], "sourcebundle");
        assert_eq!(r["code_id"], BID_HEX);
        assert_eq!(r["debug_file"], "app.debug");
        let keys = published(&store);
        let breakpad_id = {
            let id = r["debug_id"].as_str().unwrap().replace('-', "");
            format!("{}0", id.to_ascii_uppercase())
        };
        for key in [
            format!("unified/{}/{}/sourcebundle", &BID_HEX[..2], &BID_HEX[2..]),
            format!("gdb/{}/{}.src.zip", &BID_HEX[..2], &BID_HEX[2..]),
            format!("symbols/app.debug/{breakpad_id}/app.debug.src.zip"),
        ] {
            assert_eq!(
                keys.get(&key),
                Some(&bundle),
                "{input}: {key} in {:?}",
                keys.keys()
            );
        }
        verify_clean(&store);
    }
}

/// One upload model for archives and loose files: a zip of an ELF pair, a DLL and its PDB
/// publishes, into a fresh store, the same keys with the same bytes as the four files loose
/// into another, the store-level marker objects (SymStore's `index2/index2.txt`) included.
#[test]
fn an_archive_and_its_files_loose_publish_identical_keys_markers_included() {
    let w = artifacts();
    w.run("cp", &["lib.pdb", "lib.dll", "out/"]);
    w.run("zip", &["-q", "-9", "-r", "all.zip", "out"]);
    let zipped = w.path("zipped");
    index_into(&zipped, &[&w.path("all.zip")]);
    let loose = w.path("loose");
    let files = [
        "out/app.debug",
        "out/app.stripped",
        "out/lib.pdb",
        "out/lib.dll",
    ]
    .map(|f| w.path(f));
    index_into(
        &loose,
        &files.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
    );
    let (from_zip, from_files) = (published(&zipped), published(&loose));
    assert!(from_files.contains_key("index2/index2.txt"));
    assert!(from_files
        .keys()
        .any(|k| k.starts_with("index2/li/lib.pdb/")));
    assert_eq!(
        from_zip.keys().collect::<Vec<_>>(),
        from_files.keys().collect::<Vec<_>>()
    );
    assert!(from_zip == from_files, "contents differ");
    verify_clean(&zipped);
}
