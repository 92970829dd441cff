//! Identification of artifacts built here with public toolchains (gcc, clang-19, lld-19,
//! llvm-19), checked against what independent tools (readelf, llvm-readobj, llvm-pdbutil,
//! llvm-dwarfdump, llvm-objcopy) say about the same files.

mod common;

use common::{build_wasm_module, elf_debug_id, identify, padded_copy, readelf_build_id, Workdir};
use symdex_shared::formats::{identify_described, Detail};
use symdex_shared::reader::head::{HeadReader, HEAD_LEN};
use symdex_shared::{CountingReader, FileReader, Format, Kind};

/// `{EC2E5FC5-E5CE-2BA6-4C4C-44205044422E}` -> `ec2e5fc5-e5ce-2ba6-4c4c-44205044422e`.
fn braced_guid(s: &str) -> String {
    s.trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .to_ascii_lowercase()
}

fn field<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .trim()
}

fn build_gnu_elf(w: &Workdir) {
    w.run("g++", &["-g", "-O1", "-o", "app", "src.cpp"]);
    w.run("objcopy", &["--only-keep-debug", "app", "app.debug"]);
    w.run(
        "objcopy",
        &[
            "--strip-all",
            "--add-gnu-debuglink=app.debug",
            "app",
            "app.stripped",
        ],
    );
}

#[test]
fn elf_executable_debug_file_and_stripped_binary() {
    let w = Workdir::new();
    build_gnu_elf(&w);
    let build_id = readelf_build_id(&w, "app").expect("gcc writes a build id");
    let expected_debug_id = elf_debug_id(&build_id, true);

    let (app, _) = identify(&w.path("app"));
    let (debug, _) = identify(&w.path("app.debug"));
    let (stripped, _) = identify(&w.path("app.stripped"));
    for id in [&app[0], &debug[0], &stripped[0]] {
        assert_eq!(id.format, Format::Elf);
        assert_eq!(id.arch, "x86_64");
        assert_eq!(id.build_id.as_deref(), Some(build_id.as_str()));
        assert_eq!(id.code_id.as_ref().unwrap().as_str(), build_id);
        assert_eq!(id.debug_id.to_string(), expected_debug_id);
    }
    assert_eq!(app[0].kind, Kind::Executable);
    assert!(app[0].has_debug_info);
    assert_eq!(debug[0].kind, Kind::Debug);
    assert!(debug[0].has_debug_info);
    assert!(!stripped[0].has_debug_info);
    assert_eq!(stripped[0].debuglink.as_deref(), Some("app.debug"));
}

#[test]
fn elf_build_id_variants() {
    let w = Workdir::new();
    for (flag, len) in [("md5", 16), ("sha1", 20), ("0x0123456789abcdef", 8)] {
        let out = format!("app_{len}");
        w.run(
            "g++",
            &[
                "-O1",
                &format!("-Wl,--build-id={flag}"),
                "-o",
                &out,
                "src.cpp",
            ],
        );
        let expected = readelf_build_id(&w, &out).unwrap();
        assert_eq!(expected.len(), len * 2);
        let (ids, _) = identify(&w.path(&out));
        assert_eq!(ids[0].code_id.as_ref().unwrap().as_str(), expected);
        assert_eq!(
            ids[0].debug_id.to_string(),
            elf_debug_id(&expected, true),
            "{flag}"
        );
    }
}

#[test]
fn elf_without_build_id_hashes_the_first_page_of_text() {
    let w = Workdir::new();
    w.run(
        "g++",
        &["-O1", "-Wl,--build-id=none", "-o", "app", "src.cpp"],
    );
    assert_eq!(readelf_build_id(&w, "app"), None);
    // Extract .text independently and fold it the way Breakpad does.
    w.run(
        "objcopy",
        &["-O", "binary", "--only-section=.text", "app", "text.bin"],
    );
    let text = std::fs::read(w.path("text.bin")).unwrap();
    let mut folded = [0u8; 16];
    for (i, b) in text.iter().take(4096).enumerate() {
        folded[i % 16] ^= b;
    }
    let hex: String = folded.iter().map(|b| format!("{b:02x}")).collect();
    let (ids, _) = identify(&w.path("app"));
    assert!(ids[0].code_id.is_none());
    assert_eq!(ids[0].debug_id.to_string(), elf_debug_id(&hex, true));
}

#[test]
fn elf_other_architectures_and_big_endian() {
    let w = Workdir::new();
    let targets = [
        ("aarch64-linux-gnu", "arm64", true),
        ("i686-linux-gnu", "x86", true),
        ("armv7a-linux-gnueabihf", "arm", true),
        ("riscv64-linux-gnu", "riscv64", true),
        ("powerpc64-linux-gnu", "ppc64", false),
        ("mips-linux-gnu", "mips", false),
    ];
    for (target, arch, little_endian) in targets {
        let obj = format!("{target}.o");
        let lib = format!("{target}.so");
        w.run(
            "clang-19",
            &[
                &format!("--target={target}"),
                "-g",
                "-O1",
                "-fPIC",
                "-c",
                "src.cpp",
                "-o",
                &obj,
            ],
        );
        w.run(
            "ld.lld-19",
            &["-shared", "--build-id=sha1", "-o", &lib, &obj],
        );
        let build_id = readelf_build_id(&w, &lib).unwrap();
        let (ids, _) = identify(&w.path(&lib));
        assert_eq!(ids[0].arch, arch, "{target}");
        assert_eq!(
            ids[0].code_id.as_ref().unwrap().as_str(),
            build_id,
            "{target}"
        );
        assert_eq!(
            ids[0].debug_id.to_string(),
            elf_debug_id(&build_id, little_endian),
            "{target}"
        );
    }
}

fn build_pe(w: &Workdir, target: &str, debug: bool) -> (String, String) {
    let obj = format!("{target}.obj");
    let dll = format!("{target}.dll");
    let pdb = format!("{target}.pdb");
    w.run(
        "clang-19",
        &[
            &format!("--target={target}"),
            "-g",
            "-gcodeview",
            "-O1",
            "-c",
            "src.cpp",
            "-o",
            &obj,
        ],
    );
    let mut args = vec!["/dll", "/noentry", "/nodefaultlib", "/export:?foo@@YAHH@Z"];
    let out = format!("/out:{dll}");
    let pdb_arg = format!("/pdb:{pdb}");
    if debug {
        args.push("/debug");
        args.push(&pdb_arg);
    }
    args.push(&out);
    args.push(&obj);
    w.run("lld-link-19", &args);
    (dll, pdb)
}

#[test]
fn pe_and_pdb_match_llvm_tools() {
    let w = Workdir::new();
    for (target, arch) in [
        ("x86_64-pc-windows-msvc", "x86_64"),
        ("i686-pc-windows-msvc", "x86"),
        ("aarch64-pc-windows-msvc", "arm64"),
    ] {
        let (dll, pdb) = build_pe(&w, target, true);
        let dir = w.run("llvm-readobj-19", &["--coff-debug-directory", &dll]);
        let guid = braced_guid(field(&dir, "PDBGUID:"));
        let age: u32 = field(&dir, "PDBAge:").parse().unwrap();
        let headers = w.run("llvm-readobj-19", &["--file-headers", &dll]);
        let stamp = field(&headers, "TimeDateStamp:");
        let stamp = &stamp[stamp.find("(0x").unwrap() + 3..stamp.len() - 1];
        let size: u32 = field(&headers, "SizeOfImage:").parse().unwrap();

        let (pe, _) = identify(&w.path(&dll));
        let pe = &pe[0];
        assert_eq!(pe.format, Format::Pe);
        assert_eq!(pe.arch, arch);
        assert_eq!(pe.kind, Kind::Library);
        assert_eq!(pe.debug_id.to_string(), format!("{guid}-{age:x}"));
        assert_eq!(
            pe.code_id.as_ref().unwrap().as_str(),
            format!("{}{size:x}", stamp.to_ascii_lowercase())
        );
        assert_eq!(pe.debug_file.as_deref(), Some(field(&dir, "PDBFileName:")));

        let summary = w.run("llvm-pdbutil-19", &["dump", "-summary", &pdb]);
        let (ids, _) = identify(&w.path(&pdb));
        assert_eq!(ids[0].format, Format::Pdb);
        assert_eq!(ids[0].arch, arch);
        let pdb_guid = braced_guid(field(&summary, "GUID:"));
        let pdb_age: u32 = field(&summary, "Age:").parse().unwrap();
        assert_eq!(
            ids[0].debug_id.to_string(),
            format!("{pdb_guid}-{pdb_age:x}")
        );
        assert_eq!(ids[0].debug_id, pe.debug_id, "the PE and its PDB agree");
    }
}

#[test]
fn pe_without_debug_directory() {
    let w = Workdir::new();
    let (dll, _) = build_pe(&w, "x86_64-pc-windows-msvc", false);
    let dir = w.run("llvm-readobj-19", &["--coff-debug-directory", &dll]);
    assert!(!dir.contains("DebugEntry"), "{dir}");
    let (ids, _) = identify(&w.path(&dll));
    assert!(ids[0].debug_id.is_nil());
    assert!(ids[0].pdb_references.is_empty());
    assert!(ids[0].code_id.is_some());
}

/// `llvm-dwarfdump --uuid`: (arch, uuid lowercase) per slice.
fn dwarfdump_uuids(w: &Workdir, file: &str) -> Vec<(String, String)> {
    w.run("llvm-dwarfdump-19", &["--uuid", file])
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("UUID: ")?;
            let (uuid, rest) = rest.split_once(' ')?;
            let arch = rest.trim_start_matches('(').split(')').next()?;
            Some((arch.to_string(), uuid.to_ascii_lowercase()))
        })
        .collect()
}

#[test]
fn mach_o_thin_fat_and_dsym() {
    let w = Workdir::new();
    common::build_macho(&w);
    for file in ["libm_arm64.dylib", "libm.dylib", "libm.dwarf"] {
        let mut expected = dwarfdump_uuids(&w, file);
        let (ids, _) = identify(&w.path(file));
        let mut got: Vec<(String, String)> = ids
            .iter()
            .map(|id| (id.arch.to_string(), id.debug_id.to_string()))
            .collect();
        expected.sort();
        got.sort();
        assert_eq!(got, expected, "{file}");
        let want_kind = if file.ends_with(".dwarf") {
            Kind::Debug
        } else {
            Kind::Library
        };
        assert!(ids.iter().all(|id| id.kind == want_kind), "{file}");
    }
    let (fat, _) = identify(&w.path("libm.dylib"));
    assert_eq!(fat.len(), 2);
    assert_eq!(fat[1].slice, Some(1));
}

#[test]
fn wasm_build_id_matches_the_section() {
    let w = Workdir::new();
    build_wasm_module(&w, "m.wasm", "sha1");
    w.run(
        "llvm-objcopy-19",
        &["--dump-section=build_id=bid.bin", "m.wasm"],
    );
    let section = std::fs::read(w.path("bid.bin")).unwrap();
    assert_eq!(
        section[0] as usize,
        section.len() - 1,
        "length byte then the id"
    );
    let hex: String = section[1..].iter().map(|b| format!("{b:02x}")).collect();
    let (ids, _) = identify(&w.path("m.wasm"));
    assert_eq!(ids[0].code_id.as_ref().unwrap().as_str(), hex);
    assert!(ids[0].has_debug_info);
    let uuid = &hex[..32];
    let expected = format!(
        "{}-{}-{}-{}-{}",
        &uuid[..8],
        &uuid[8..12],
        &uuid[12..16],
        &uuid[16..20],
        &uuid[20..]
    );
    assert_eq!(ids[0].debug_id.to_string(), expected);
}

/// Identification reads kilobytes, not the file: every binary format padded to 100 MB.
#[test]
fn identification_reads_under_256_kib_of_a_100_mb_file() {
    const HUNDRED_MB: u64 = 100 * 1024 * 1024;
    let w = Workdir::new();
    build_gnu_elf(&w);
    let (dll, pdb) = build_pe(&w, "x86_64-pc-windows-msvc", true);
    common::build_macho(&w);
    for file in [
        "app",
        "app.debug",
        dll.as_str(),
        pdb.as_str(),
        "libm.dylib",
        "libm.dwarf",
    ] {
        let (plain, _) = identify(&w.path(file));
        let padded = w.path(&format!("{file}.padded"));
        padded_copy(&w.path(file), &padded, HUNDRED_MB);
        let (ids, bytes_read) = identify(&padded);
        assert_eq!(ids, plain, "{file}: padding changed the identity");
        assert!(bytes_read < 256 * 1024, "{file}: read {bytes_read} bytes");
        eprintln!("{file}: {bytes_read} bytes read of {HUNDRED_MB}");
        // Through its head (what `keys`, `push` and `index` read), with the details a
        // report shows: the same identities, from the head and a few blocks past it.
        let opened = FileReader::open(&padded).unwrap();
        let head = HeadReader::new(CountingReader::new(opened)).unwrap();
        let plain_reader = CountingReader::new(FileReader::open(&padded).unwrap());
        let described =
            identify_described(&plain_reader, &Default::default(), Detail::Sources).unwrap();
        let asked = CountingReader::new(&head);
        assert_eq!(
            identify_described(&asked, &Default::default(), Detail::Sources).unwrap(),
            described
        );
        assert_eq!(asked.bytes_read(), plain_reader.bytes_read());
        let underneath = head.into_inner();
        let (read, requests) = (underneath.bytes_read(), underneath.requests());
        assert!(
            read < (HEAD_LEN + 256 * 1024) as u64,
            "{file}: read {read} bytes"
        );
        eprintln!(
            "{file} through its head: {read} bytes in {requests} reads, where plain reads \
             took {} in {}",
            plain_reader.bytes_read(),
            plain_reader.requests()
        );
    }
}
