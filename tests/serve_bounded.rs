//! `symdex serve` bounded per client and in total: responses are streamed (clients that never
//! read hold no file in memory), a client that takes no bytes for the progress timeout loses
//! its connection (and its place under `--max-connections`), one range implementation for
//! every size, and nothing but regular files inside the store are served (a FIFO does not
//! block, no symbolic link is followed).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Server, Workdir};

/// A store of plain files (serve needs no index to serve them): a small and a large file.
fn store(w: &Workdir, large: usize) -> std::path::PathBuf {
    let store = w.path("store");
    std::fs::create_dir_all(store.join("keys")).unwrap();
    std::fs::create_dir_all(store.join("_symdex")).unwrap();
    let small: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(store.join("keys/small"), &small).unwrap();
    let large: Vec<u8> = (0..large).map(|i| (i % 253) as u8).collect();
    std::fs::write(store.join("keys/large"), &large).unwrap();
    std::fs::write(store.join("_symdex/record.json"), "{}").unwrap();
    store
}

/// Connections that ask for `path` and never read a byte of the answer.
fn non_readers(server: &Server, path: &str, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|_| {
            let mut stream = TcpStream::connect(&server.addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            stream
        })
        .collect()
}

#[test]
fn clients_that_never_read_hold_no_file_in_memory() {
    let w = Workdir::new();
    let store = store(&w, 8 << 20);
    let server = Server::start(&store);
    // Warm up (the runtime's threads, the page cache) before the baseline.
    assert_eq!(server.request("GET", "/keys/large", "").0, 200);
    let before = server.rss_kib();
    let held = non_readers(&server, "/keys/large", 40);
    // Each answer goes as far as the socket buffers take it; give the server time to get
    // there (the memory is measured, not the time).
    std::thread::sleep(Duration::from_secs(2));
    let grown = server.rss_kib().saturating_sub(before);
    eprintln!("40 non-readers of an 8 MB file: the server grew by {grown} KiB");
    assert!(
        grown < 100 << 10,
        "40 clients that never read grew the server by {grown} KiB"
    );
    // And the server still answers.
    assert_eq!(server.request("GET", "/keys/small", "").0, 200);
    drop(held);
}

#[test]
fn clients_that_stop_reading_are_dropped_at_the_progress_timeout() {
    let w = Workdir::new();
    let store = store(&w, 20 << 20);
    let server = Server::start_with(
        &store,
        &["--max-connections", "4", "--send-timeout", "2"],
        None,
    );
    let held = non_readers(&server, "/keys/large", 4);
    let started = Instant::now();
    let (status, _, body) = server.request("GET", "/keys/small", "");
    assert_eq!((status, body.len()), (200, 1000));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "answered before the non-readers were dropped: {waited:?}"
    );
    assert!(waited < Duration::from_secs(30), "{waited:?}");
    // Every non-reader's connection is closed by its own timeout (they all stalled about when
    // the first did), each short of its 20 MB.
    std::thread::sleep(Duration::from_secs(3));
    for mut stream in held {
        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        assert!(got < 20 << 20, "a dropped client got the whole file");
    }
}

#[test]
fn a_client_address_holds_at_most_its_cap() {
    let w = Workdir::new();
    let store = store(&w, 20 << 20);
    let server = Server::start_with(&store, &["--max-connections-per-ip", "2"], None);
    let held = non_readers(&server, "/keys/large", 2);
    std::thread::sleep(Duration::from_millis(300));
    let mut third = TcpStream::connect(&server.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = write!(third, "GET /keys/small HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = [0u8; 64];
    let read = third.read(&mut buf);
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a third connection from one address was served"
    );
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.request("GET", "/keys/small", "").0, 200);
}

#[test]
fn ranges_are_answered_alike_for_small_and_large_files() {
    let w = Workdir::new();
    let store = store(&w, 9 << 20);
    let server = Server::start(&store);
    for (path, len) in [("/keys/small", 1000usize), ("/keys/large", 9 << 20)] {
        let file = std::fs::read(store.join(path.trim_start_matches('/'))).unwrap();
        let ask = |range: &str| server.request("GET", path, &format!("Range: {range}\r\n"));
        let (status, head, body) = ask("bytes=0-9");
        assert_eq!((status, body.as_slice()), (206, &file[..10]), "{path}");
        assert!(
            head.contains(&format!("content-range: bytes 0-9/{len}")),
            "{head}"
        );
        let (status, _, body) = ask(&format!("bytes={}-", len - 5));
        assert_eq!((status, body.as_slice()), (206, &file[len - 5..]), "{path}");
        let (status, _, body) = ask("bytes=-7");
        assert_eq!((status, body.as_slice()), (206, &file[len - 7..]), "{path}");
        // Invalid (last before first): ignored, the whole file.
        let (status, _, body) = ask("bytes=5-3");
        assert_eq!((status, body.len()), (200, len), "{path}");
        // Unsatisfiable: 416 with the size.
        let (status, head, _) = ask(&format!("bytes={len}-"));
        assert_eq!(status, 416, "{path}");
        assert!(
            head.contains(&format!("content-range: bytes */{len}")),
            "{head}"
        );
        // Several ranges: the whole file.
        let (status, _, body) = ask("bytes=0-1,4-5");
        assert_eq!((status, body), (200, file.clone()), "{path}");
        // HEAD: the size, no body.
        let (status, head, body) = server.request("HEAD", path, "");
        assert_eq!((status, body.len()), (200, 0));
        assert!(head.contains(&format!("content-length: {len}")), "{head}");
    }
}

#[test]
fn only_regular_files_inside_the_store_are_served() {
    let w = Workdir::new();
    let store = store(&w, 1 << 10);
    std::fs::write(w.path("outside"), "secret outside the store").unwrap();
    let link = |target: &std::path::Path, name: &str| {
        std::os::unix::fs::symlink(target, store.join("keys").join(name)).unwrap()
    };
    link(&w.path("outside"), "out");
    link(&store.join("_symdex/record.json"), "private");
    link(&store.join("keys/small"), "alias");
    let fifo = store.join("keys/fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let server = Server::start(&store);
    let started = Instant::now();
    assert_eq!(server.request("GET", "/keys/fifo", "").0, 404, "a FIFO");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the FIFO blocked"
    );
    assert_eq!(server.request("GET", "/keys/out", "").0, 404, "a link out");
    assert_eq!(
        server.request("GET", "/keys/private", "").0,
        404,
        "into _symdex"
    );
    // No link at all: a store symdex writes holds hard links only.
    assert_eq!(
        server.request("GET", "/keys/alias", "").0,
        404,
        "a link inside"
    );
    assert_eq!(
        server.request("GET", "/keys/small", "").0,
        200,
        "its target"
    );
    for spelling in [
        "/_symdex/record.json",
        "/_SYMDEX/record.json",
        "/_Symdex/record.json",
        "//_sYmDeX/record.json",
        "/%5FSYMDEX/record.json",
        "/_MANIFEST/",
        "/keys/../_symdex/record.json",
    ] {
        assert_eq!(server.request("GET", spelling, "").0, 404, "{spelling}");
    }
    // Still answering after all that.
    assert_eq!(server.request("GET", "/keys/small", "").0, 200);
}
