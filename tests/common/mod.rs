//! Test support: builds fixtures with public toolchains (../shared/spec/FIXTURES.md recipes)
//! into a temporary directory, and reads expectations from independent tools.
#![allow(dead_code)]

pub mod windows;

use std::path::{Path, PathBuf};
use std::process::Command;

pub const SOURCE_CPP: &str = r#"
int foo(int x) { return x * 2 + 1; }
int main() { return foo(3); }
"#;

/// A scratch directory with the helper's source file in it.
pub struct Workdir {
    pub dir: tempfile::TempDir,
}

impl Workdir {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("src.cpp"), SOURCE_CPP).expect("write src.cpp");
        Workdir { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `program args...` in the work directory; panics with its stderr on failure.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        run_in(self.dir.path(), program, args)
    }
}

pub fn run_in(dir: &Path, program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {program} ({e}); scripts/setup.sh installs the test toolchains")
        });
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The symdex binary built for these tests.
pub fn symdex() -> Command {
    Command::new(env!("CARGO_BIN_EXE_symdex"))
}

/// `readelf -n`: the GNU build id, lowercase hex.
pub fn readelf_build_id(w: &Workdir, file: &str) -> Option<String> {
    let out = w.run("readelf", &["-n", file]);
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .map(|s| s.trim().to_string())
}

/// The Sentry debug id of an ELF build id (first 16 bytes, GUID byte order if little-endian),
/// computed here from the hex string independently of symdex.
pub fn elf_debug_id(build_id_hex: &str, little_endian: bool) -> String {
    let mut hex: String = build_id_hex.chars().take(32).collect();
    while hex.len() < 32 {
        hex.push('0');
    }
    let b = |i: usize| &hex[i * 2..i * 2 + 2];
    let (d1, d2, d3) = if little_endian {
        (
            format!("{}{}{}{}", b(3), b(2), b(1), b(0)),
            format!("{}{}", b(5), b(4)),
            format!("{}{}", b(7), b(6)),
        )
    } else {
        (
            hex[0..8].to_string(),
            hex[8..12].to_string(),
            hex[12..16].to_string(),
        )
    };
    format!("{d1}-{d2}-{d3}-{}-{}", &hex[16..20], &hex[20..32])
}

/// A copy of `src` padded with zeros to `size` bytes (sparse: cheap on disk).
pub fn padded_copy(src: &Path, dst: &Path, size: u64) {
    std::fs::copy(src, dst).expect("copy");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dst)
        .expect("open");
    f.set_len(size).expect("set_len");
}

/// Identifies one file through the library, counting bytes read.
pub fn identify(path: &Path) -> (Vec<symdex_shared::Identity>, u64) {
    let reader = symdex_shared::CountingReader::new(
        symdex_shared::FileReader::open(path).expect("open artifact"),
    );
    let ids = symdex_shared::identify(&reader, &Default::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (ids, reader.bytes_read())
}

/// A small C program built with `--build-id=<build_id>` and split into `<dir>/app.debug` and
/// `<dir>/app.stripped` (FIXTURES.md: gcc + objcopy).
/// The source `build_split_elf` compiles, `body` computing `compute(x)`.
pub fn prog_c(body: &str) -> String {
    format!("int compute(int x) {{ return {body}; }}\nint main(int c, char **v) {{ return compute(c); }}\n")
}

pub fn build_split_elf(w: &Workdir, dir: &str, build_id: &str, body: &str) {
    std::fs::create_dir_all(w.path(dir)).unwrap();
    std::fs::write(w.path(&format!("{dir}/prog.c")), prog_c(body)).unwrap();
    let d = |f: &str| format!("{dir}/{f}");
    w.run(
        "gcc",
        &[
            "-g",
            "-O0",
            &format!("-Wl,--build-id={build_id}"),
            "-o",
            &d("app"),
            &d("prog.c"),
        ],
    );
    w.run(
        "objcopy",
        &["--only-keep-debug", &d("app"), &d("app.debug")],
    );
    w.run(
        "objcopy",
        &[
            "--strip-all",
            &format!("--add-gnu-debuglink={}", d("app.debug")),
            &d("app"),
            &d("app.stripped"),
        ],
    );
    std::fs::remove_file(w.path(&d("app"))).unwrap();
    std::fs::remove_file(w.path(&d("prog.c"))).unwrap();
}

/// A running `symdex serve`, stopped on drop.
pub struct Server {
    child: std::process::Child,
    pub addr: String,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Server {
    pub fn start(store: &Path) -> Server {
        Self::start_with(store, &[], None)
    }

    /// `serve` run by `wrapper` (a program and its arguments, which execs the rest).
    pub fn start_wrapped(store: &Path, wrapper: &[&str]) -> Server {
        let mut command = Command::new(wrapper[0]);
        command
            .args(&wrapper[1..])
            .arg(env!("CARGO_BIN_EXE_symdex"));
        Self::spawn(command, store, &[])
    }

    /// `serve` with extra arguments, under `ulimit -n <open_files>` when given.
    pub fn start_with(store: &Path, args: &[&str], open_files: Option<u32>) -> Server {
        let command = match open_files {
            Some(limit) => {
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_symdex"));
                c
            }
            None => symdex(),
        };
        Self::spawn(command, store, args)
    }

    /// `serve` listening on `addr` (e.g. every address, `0.0.0.0:0`), with extra arguments;
    /// requests go to it through 127.0.0.1.
    pub fn start_on(store: &Path, addr: &str, args: &[&str]) -> Server {
        let mut server = Self::spawn_on(symdex(), store, addr, args);
        server.addr = server.addr.replace("0.0.0.0", "127.0.0.1");
        server
    }

    fn spawn(command: Command, store: &Path, args: &[&str]) -> Server {
        Self::spawn_on(command, store, "127.0.0.1:0", args)
    }

    fn spawn_on(mut command: Command, store: &Path, addr: &str, args: &[&str]) -> Server {
        use std::io::BufRead;
        let mut child = command
            .arg("serve")
            .arg(store)
            .args(["--addr", addr])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .split("http://")
            .nth(1)
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .trim()
            .to_string();
        Server {
            child,
            addr,
            _stdout: stdout,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's resident memory, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// One raw HTTP/1.1 request: (status, headers lowercased, body).
    pub fn request(&self, method: &str, path: &str, extra: &str) -> (u16, String, Vec<u8>) {
        self.raw(&format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{extra}\r\n",
            self.addr
        ))
    }

    /// Sends `request` as it is: (status, headers lowercased, body).
    pub fn raw(&self, request: &str) -> (u16, String, Vec<u8>) {
        exchange(&self.addr, request)
            .unwrap_or_else(|| panic!("no HTTP answer from {} to {request:?}", self.addr))
    }
}

/// Sends `request` as it is to `addr` and reads to the end: (status, headers lowercased,
/// body), or `None` when no whole answer came back (no server, a connection reset, closed
/// before the headers).
pub fn exchange(addr: &str, request: &str) -> Option<(u16, String, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    // A server that hangs fails the test rather than holding it.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, head, raw[split + 4..].to_vec()))
}

/// A GET of `path` on `addr` with `Connection: close` ([`exchange`]).
pub fn get(addr: &str, path: &str) -> Option<(u16, String, Vec<u8>)> {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
}

/// `python3 -m http.server` over a directory: a static file server that knows nothing of
/// symdex, its request log in a file. Stopped on drop.
pub struct StaticServer {
    child: std::process::Child,
    pub addr: String,
    log: PathBuf,
}

impl StaticServer {
    pub fn start(dir: &Path, log: &Path) -> StaticServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--directory")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).expect("the server's log"))
            .spawn()
            .expect("python3 -m http.server");
        let server = StaticServer {
            child,
            addr: format!("127.0.0.1:{port}"),
            log: log.to_path_buf(),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while get(&server.addr, "/").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "python3 -m http.server never came up"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }

    /// How many GETs of paths containing `part` it logged.
    pub fn asked(&self, part: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET ") && l.contains(part))
            .count()
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key as a URL path: every byte but unreserved characters and `/` percent-encoded (keys
/// hold characters a URL must encode).
pub fn url_path(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// gdb run by [`debuginfod_client`] with its debug files from the server alone, running `ex`
/// on `program` in one batch.
pub fn gdb_via_debuginfod(w: &Workdir, server: &Server, ex: &str, program: &str) -> Command {
    let mut gdb = debuginfod_client("gdb", w, server);
    gdb.args([
        "-batch",
        "-nx",
        "-iex",
        "set debuginfod enabled on",
        "-iex",
        "set debug-file-directory /nonexistent",
        "-ex",
        ex,
        program,
    ]);
    gdb
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A PE DLL and its PDB (FIXTURES.md: clang-19 + lld-link-19), the PDB named `pdb_name`.
pub fn build_pe_and_pdb(w: &Workdir, pdb_name: &str, dll: &str) {
    w.run(
        "clang-19",
        &[
            "--target=x86_64-pc-windows-msvc",
            "-g",
            "-gcodeview",
            "-O1",
            "-c",
            "src.cpp",
            "-o",
            "o.obj",
        ],
    );
    w.run(
        "lld-link-19",
        &[
            "/dll",
            "/noentry",
            "/nodefaultlib",
            "/debug",
            &format!("/pdb:{pdb_name}"),
            &format!("/out:{dll}"),
            "/export:?foo@@YAHH@Z",
            "o.obj",
        ],
    );
}

/// A WASM module built by clang-19/wasm-ld with `--build-id=<style>` (FIXTURES.md).
pub fn build_wasm_module(w: &Workdir, out: &str, style: &str) {
    w.run(
        "clang-19",
        &[
            "--target=wasm32",
            "-nostdlib",
            "-g",
            "-O1",
            "-Wl,--no-entry",
            "-Wl,--export=_Z3fooi",
            &format!("-Wl,--build-id={style}"),
            "-o",
            out,
            "src.cpp",
        ],
    );
}

/// The output of a run that must succeed (its stdout; both streams shown when it failed).
pub fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "symdex failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The manifest records of a successful `symdex index --json --store STORE ARGS...` (conflicts
/// included: the records say them; `conflicts_fail_the_run_unless_allowed` checks the exit).
pub fn index_json<S: AsRef<std::ffi::OsStr>>(store: &Path, args: &[S]) -> Vec<serde_json::Value> {
    ok(symdex()
        .args(["index", "--json", "--allow-conflicts", "--store"])
        .arg(store)
        .args(args)
        .output()
        .unwrap())
    .lines()
    .filter(|l| l.starts_with('{'))
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

/// `symdex verify` succeeds and finds no problem.
pub fn verify_clean(store: &Path) {
    let out = symdex()
        .args(["verify", "--deep"])
        .arg(store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(" 0 problems"),
        "{text}"
    );
}

/// A debugger or debuginfod-find run in `<w>/run` against `server`, with a cache of its own
/// and no home configuration.
pub fn debuginfod_client(program: &str, w: &Workdir, server: &Server) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(w.path("run"))
        .env("DEBUGINFOD_URLS", server.url())
        .env("DEBUGINFOD_CACHE_PATH", w.path(&format!("cache-{program}")))
        .env("HOME", w.path("run"));
    cmd
}

/// LLDB 23: the console script of PyPI's `lldb-for-pwndbg` in the venv scripts/setup.sh makes
/// under the repository, `.work/lldb23-venv/bin/lldb` (it execs the wheel's bundled lldb, told
/// where the venv Python's shared libpython is). Missing, broken or another version, the test
/// fails saying how to install it: never a silent skip, in CI least of all.
pub fn lldb23() -> PathBuf {
    let lldb = Path::new(env!("CARGO_MANIFEST_DIR")).join(".work/lldb23-venv/bin/lldb");
    let version = Command::new(&lldb).arg("--version").output();
    match &version {
        Ok(out) if String::from_utf8_lossy(&out.stdout).starts_with("lldb version 23.1.") => lldb,
        _ => panic!(
            "{} is not LLDB 23.1 ({version:?}): bash scripts/setup.sh installs it \
             (PyPI lldb-for-pwndbg==23.1.0.post2 in .work/lldb23-venv)",
            lldb.display()
        ),
    }
}

/// Runs `client` (a `debuginfod-find` set up to ask a server), which must succeed: the bytes
/// of the file whose path it printed.
pub fn fetched_by(mut client: Command) -> Vec<u8> {
    let out = client
        .output()
        .expect("debuginfod-find (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{client:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fetched = String::from_utf8(out.stdout).unwrap();
    std::fs::read(fetched.trim()).unwrap()
}

/// Every published key of a local store with its bytes (bookkeeping and manifests left out).
pub fn published_files(store: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    files_of(store, |key| {
        !key.starts_with("_symdex/") && !key.starts_with("_manifest/")
    })
}

/// The files of a store directory whose keys `keep` keeps, with their bytes (a record's
/// current version: upload records keep the versions before it, `storage::appended`).
pub fn files_of(
    store: &Path,
    keep: impl Fn(&str) -> bool,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(store)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let key = e
                .path()
                .strip_prefix(store)
                .ok()?
                .to_string_lossy()
                .into_owned();
            keep(&key).then(|| {
                let file = std::fs::read(e.path()).unwrap();
                let bytes = symdex_shared::storage::appended::into_content(&key, file);
                (key, bytes)
            })
        })
        .collect()
}

/// `libm.dylib` (fat: arm64 + x86_64) and `libm.dwarf` (fat dSYM DWARF), with the thin
/// slices and their dSYM bundles, from `src.cpp` in `w` (clang-19, ld64.lld-19, dsymutil-19,
/// llvm-lipo-19).
pub fn build_macho(w: &Workdir) {
    for arch in ["arm64", "x86_64"] {
        let obj = format!("m_{arch}.o");
        let lib = format!("libm_{arch}.dylib");
        w.run(
            "clang-19",
            &[
                &format!("--target={arch}-apple-macos11"),
                "-g",
                "-O1",
                "-c",
                "src.cpp",
                "-o",
                &obj,
            ],
        );
        w.run(
            "ld64.lld-19",
            &[
                "-arch",
                arch,
                "-dylib",
                "-platform_version",
                "macos",
                "11.0",
                "11.0",
                "-install_name",
                "@rpath/libm.dylib",
                "-undefined",
                "dynamic_lookup",
                "-o",
                &lib,
                &obj,
            ],
        );
        w.run("dsymutil-19", &[&lib, "-o", &format!("libm_{arch}.dSYM")]);
    }
    w.run(
        "llvm-lipo-19",
        &[
            "-create",
            "libm_arm64.dylib",
            "libm_x86_64.dylib",
            "-output",
            "libm.dylib",
        ],
    );
    w.run(
        "llvm-lipo-19",
        &[
            "-create",
            "libm_arm64.dSYM/Contents/Resources/DWARF/libm_arm64.dylib",
            "libm_x86_64.dSYM/Contents/Resources/DWARF/libm_x86_64.dylib",
            "-output",
            "libm.dwarf",
        ],
    );
}

/// A copy of the store `before` (as `<w>/<name>`) in which `delete --input <input>` was killed
/// before its change `crash_after` (the CLI's crash switch). `None`: the delete made fewer
/// changes and finished.
pub fn store_with_killed_delete(
    w: &Workdir,
    before: &Path,
    name: &str,
    input: &Path,
    crash_after: u64,
) -> Option<PathBuf> {
    let store = w.path(name);
    w.run(
        "cp",
        &["-a", before.to_str().unwrap(), store.to_str().unwrap()],
    );
    let killed = symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(input)
        .env("SYMDEX_CRASH_AFTER_WRITES", crash_after.to_string())
        .output()
        .unwrap();
    (!killed.status.success()).then_some(store)
}

/// The state of the upload record of the input file `input` in a local store (`None`: none).
pub fn upload_state(store: &Path, input: &Path) -> Option<String> {
    let records = files_of(store, |k| k.starts_with("_symdex/uploads/"));
    records.values().find_map(|bytes| {
        let record: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let source = record["source"].as_str()?;
        (Path::new(source) == input)
            .then(|| record["state"].as_str().unwrap_or("indexed").to_string())
    })
}
