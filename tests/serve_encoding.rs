//! `symdex serve` negotiates: a client that accepts zstd or gzip gets a key's compressed copy
//! (made at ingest, stored under `_symdex/encoded/<encoding>/<key>`), decoding to the very
//! file; a client that does not, a range, and a key without a current copy get the raw bytes;
//! `X-DEBUGINFOD-MAXSIZE` below the raw size is 406. Raw HTTP, so every header is seen as
//! sent.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::{build_split_elf, index_json, symdex, Server, Workdir};
use symdex_shared::encoded::{compress, copy_key, worth_keeping, EncodedMeta, Encoding};
use symdex_shared::storage::local::{key_of, relative_path};
use symdex_shared::storage::{LocalStore, ObjectInfo};

const BUILD_ID: &str = "5eadbeef00112233445566778899aabbccddeeff";
const KEY: &str = "buildid/5eadbeef00112233445566778899aabbccddeeff/debuginfo";

/// A store holding one split ELF debug file (`KEY`) indexed with `--compress compress`, and
/// its bytes.
fn store_with_debug_file(w: &Workdir, compress: &str) -> (PathBuf, Vec<u8>) {
    build_split_elf(w, "p", &format!("0x{BUILD_ID}"), "x * 7 + 1");
    let store = w.path("store");
    let input = w.path("p/app.debug");
    index_json(
        &store,
        &["--compress".as_ref(), compress.as_ref(), input.as_os_str()],
    );
    let raw = std::fs::read(store.join(KEY)).unwrap();
    assert_eq!(raw, std::fs::read(&input).unwrap());
    (store, raw)
}

/// The copy of `key` in `encoding` the store holds, if any.
fn stored_copy(store: &Path, key: &str, encoding: Encoding) -> Option<Vec<u8>> {
    std::fs::read(store.join(relative_path(&copy_key(encoding, key)))).ok()
}

/// Stores `key`'s copy in `encoding` as the indexer does, naming the content `etag` (the raw
/// file's SHA-1 unless a test wants a stale copy); returns its bytes. For the cases the
/// indexer never makes: a stale copy, a copy behind a link.
fn put_copy(store: &Path, key: &str, encoding: Encoding, etag: Option<&str>) -> Vec<u8> {
    let path = store.join(key);
    let size = std::fs::metadata(&path).unwrap().len();
    let sha1 = symdex_shared::digest::file_sha1(&path).unwrap();
    let staged = compress(encoding, &mut std::fs::File::open(&path).unwrap(), size).unwrap();
    assert!(worth_keeping(size, staged.size), "{key} would keep no copy");
    let meta = EncodedMeta {
        encoding,
        raw: ObjectInfo {
            size,
            etag: etag.unwrap_or(&sha1).to_string(),
        },
    };
    let copy = copy_key(encoding, key);
    LocalStore::open(store)
        .unwrap()
        .put_encoded_now(&copy, &staged, &meta)
        .unwrap();
    std::fs::read(store.join(relative_path(&copy))).unwrap()
}

/// A header of an answer (`exchange` lowercases the head).
fn header(head: &str, name: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(|v| v.trim().to_string())
}

/// A GET of `KEY` with `extra` header lines: (status, head, body).
fn get(server: &Server, extra: &str) -> (u16, String, Vec<u8>) {
    server.request("GET", &format!("/{KEY}"), extra)
}

fn zstd_decoded(body: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(body).unwrap()
}

fn gzip_decoded(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The answer is the raw bytes, whole: no coding, the raw size everywhere.
fn assert_identity(answer: &(u16, String, Vec<u8>), raw: &[u8], what: &str) {
    let (status, head, body) = answer;
    assert_eq!(*status, 200, "{what}: {head}");
    assert_eq!(header(head, "content-encoding"), None, "{what}: {head}");
    assert_eq!(body, raw, "{what}");
    assert_eq!(header(head, "content-length"), Some(raw.len().to_string()));
    assert_eq!(
        header(head, "x-debuginfod-size"),
        Some(raw.len().to_string())
    );
}

/// The answer is `encoding`'s copy: `copy`'s bytes, decoding to `raw`.
fn assert_coded(answer: &(u16, String, Vec<u8>), encoding: &str, copy: &[u8], raw: &[u8]) {
    let (status, head, body) = answer;
    assert_eq!(*status, 200, "{head}");
    assert_eq!(header(head, "content-encoding").as_deref(), Some(encoding));
    assert_eq!(body, copy, "{encoding}: the stored copy, as it is");
    let decoded = match encoding {
        "zstd" => zstd_decoded(body),
        _ => gzip_decoded(body),
    };
    assert_eq!(decoded, raw, "{encoding} decodes to the file");
    assert_eq!(header(head, "content-length"), Some(copy.len().to_string()));
    assert_eq!(
        header(head, "x-debuginfod-size"),
        Some(raw.len().to_string())
    );
    assert_eq!(header(head, "accept-ranges"), None, "{head}");
    assert!(copy.len() < raw.len());
}

#[test]
fn answers_are_negotiated_from_the_copies_the_index_made() {
    let w = Workdir::new();
    let (store, raw) = store_with_debug_file(&w, "zstd,gzip");
    let zstd = stored_copy(&store, KEY, Encoding::Zstd).expect("index made a zstd copy");
    let gzip = stored_copy(&store, KEY, Encoding::Gzip).expect("index made a gzip copy");
    let server = Server::start(&store);
    let vary = |head: &str| header(head, "vary");

    // No Accept-Encoding (samply's symsrv, curl without --compressed): the raw bytes.
    let plain = get(&server, "");
    assert_identity(&plain, &raw, "no header");
    assert_eq!(
        vary(&plain.1).as_deref(),
        Some("accept-encoding"),
        "{}",
        plain.1
    );

    let zstd_answer = get(&server, "Accept-Encoding: zstd\r\n");
    assert_coded(&zstd_answer, "zstd", &zstd, &raw);
    assert_eq!(vary(&zstd_answer.1).as_deref(), Some("accept-encoding"));
    assert_coded(
        &get(&server, "Accept-Encoding: gzip\r\n"),
        "gzip",
        &gzip,
        &raw,
    );
    // What libdebuginfod sends.
    let elfutils = "Accept-Encoding: deflate, gzip, br, zstd\r\n";
    assert_coded(&get(&server, elfutils), "zstd", &zstd, &raw);
    assert_coded(
        &get(&server, "Accept-Encoding: gzip, zstd\r\n"),
        "zstd",
        &zstd,
        &raw,
    );
    let no_zstd = "Accept-Encoding: zstd;q=0, gzip\r\n";
    assert_coded(&get(&server, no_zstd), "gzip", &gzip, &raw);
    let gzip_first = "Accept-Encoding: zstd;q=0.5, gzip;q=0.8\r\n";
    assert_coded(&get(&server, gzip_first), "gzip", &gzip, &raw);
    assert_coded(&get(&server, "Accept-Encoding: *\r\n"), "zstd", &zstd, &raw);
    for alone in ["identity", "br", "deflate", "zstd;q=0.5, identity"] {
        let answer = get(&server, &format!("Accept-Encoding: {alone}\r\n"));
        assert_identity(&answer, &raw, alone);
        assert_eq!(
            vary(&answer.1).as_deref(),
            Some("accept-encoding"),
            "{alone}"
        );
    }

    // A range is of the raw bytes, whatever is accepted.
    let (status, head, body) = get(&server, "Accept-Encoding: zstd\r\nRange: bytes=16-31\r\n");
    assert_eq!(status, 206, "{head}");
    assert_eq!(body, &raw[16..32]);
    assert_eq!(header(&head, "content-encoding"), None);
    let whole = format!("bytes 16-31/{}", raw.len());
    assert_eq!(header(&head, "content-range"), Some(whole));
    assert_eq!(
        header(&head, "x-debuginfod-size"),
        Some(raw.len().to_string())
    );

    // HEAD: the headers the same GET gets, no body.
    for (accept, encoding, length) in [("zstd", Some("zstd"), zstd.len()), ("", None, raw.len())] {
        let extra = format!("Accept-Encoding: {accept}\r\n");
        let (status, head, body) = server.request("HEAD", &format!("/{KEY}"), &extra);
        assert!(status == 200 && body.is_empty(), "{head}");
        assert_eq!(header(&head, "content-encoding").as_deref(), encoding);
        assert_eq!(header(&head, "content-length"), Some(length.to_string()));
        assert_eq!(
            header(&head, "x-debuginfod-size"),
            Some(raw.len().to_string())
        );
        assert_eq!(vary(&head).as_deref(), Some("accept-encoding"));
    }
}

/// `symdex index --source-ext c FILES...` run in `dir` (default compression): the keys
/// published, in order.
fn index_sources(store: &Path, dir: &Path, files: &[&str]) -> Vec<String> {
    let out = symdex()
        .current_dir(dir)
        .args(["index", "--json", "--source-ext", "c", "--store"])
        .arg(store)
        .args(files)
        .output()
        .unwrap();
    common::ok(out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .flat_map(|l| {
            let record: serde_json::Value = serde_json::from_str(l).unwrap();
            let keys = record["published"].as_array().cloned().unwrap_or_default();
            keys.into_iter().map(|k| k.as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn small_or_incompressible_keys_have_no_copy_and_answer_the_raw_bytes() {
    let w = Workdir::new();
    let (store, raw) = store_with_debug_file(&w, "none");
    assert_eq!(
        stored_copy(&store, KEY, Encoding::Zstd),
        None,
        "--compress none"
    );
    // 1 MiB of random bytes and a 7-byte file, indexed as sources with zstd copies on.
    std::fs::create_dir_all(w.path("src")).unwrap();
    let noise: Vec<u8> = {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..1 << 20)
            .map(|_| {
                // xorshift64*: bytes no coding can shrink.
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    };
    std::fs::write(w.path("src/noise.c"), &noise).unwrap();
    std::fs::write(w.path("src/tiny.c"), "int x;\n").unwrap();
    let keys = index_sources(&store, w.dir.path(), &["src/noise.c", "src/tiny.c"]);
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        !store.join("_symdex/encoded").exists(),
        "no copy stored: {:?}",
        common::files_of(&store, |k| k.starts_with("_symdex/encoded/")).keys()
    );
    let server = Server::start(&store);
    let zstd = "Accept-Encoding: zstd, gzip\r\n";
    assert_identity(&get(&server, zstd), &raw, "indexed without copies");
    for (key, bytes, varies) in [
        (&keys[0], &noise[..], true),
        (&keys[1], &b"int x;\n"[..], false),
    ] {
        let (status, head, body) = server.request("GET", &format!("/{key}"), zstd);
        assert!(status == 200 && body == bytes, "{key}: {head}");
        assert_eq!(header(&head, "content-encoding"), None, "{key}");
        // Under 1 KiB a key never has a copy: its answers do not vary.
        assert_eq!(header(&head, "vary").is_some(), varies, "{key}: {head}");
    }
    // Nothing acceptable (the raw bytes refused, no copy): the raw bytes all the same, not 406.
    let refused = "Accept-Encoding: identity;q=0, zstd\r\n";
    let (status, head, body) = server.request("GET", &format!("/{}", keys[0]), refused);
    assert!(status == 200 && body == noise, "{head}");
}

#[test]
fn copies_that_do_not_encode_the_key_now_are_never_answered() {
    let w = Workdir::new();
    let (store, raw) = store_with_debug_file(&w, "none");
    let server = Server::start(&store);
    let zstd = "Accept-Encoding: zstd, gzip\r\n";

    // A copy naming other content (left from an older file at the key): never answered.
    let other = "0123456789abcdef0123456789abcdef01234567";
    put_copy(&store, KEY, Encoding::Zstd, Some(other));
    assert_identity(&get(&server, zstd), &raw, "a stale zstd copy");
    // A good gzip copy is still answered when the zstd one is stale.
    let gzip = put_copy(&store, KEY, Encoding::Gzip, None);
    assert_coded(&get(&server, zstd), "gzip", &gzip, &raw);

    // A copy reached through a symbolic link is not followed, however good its content.
    let good = put_copy(&store, KEY, Encoding::Zstd, None);
    let copy_path = store.join(relative_path(&copy_key(Encoding::Zstd, KEY)));
    std::fs::rename(&copy_path, w.path("outside.zst")).unwrap();
    std::os::unix::fs::symlink(w.path("outside.zst"), &copy_path).unwrap();
    assert_coded(&get(&server, zstd), "gzip", &gzip, &raw);
    std::fs::remove_file(&copy_path).unwrap();
    std::fs::rename(w.path("outside.zst"), &copy_path).unwrap();
    assert_coded(&get(&server, zstd), "zstd", &good, &raw);

    // The raw file replaced (another content at the key, as a re-index with --overwrite
    // would): its old copies no longer encode it.
    let replaced = [raw.as_slice(), b"more"].concat();
    let temp = w.path("replacement");
    std::fs::write(&temp, &replaced).unwrap();
    std::fs::rename(&temp, store.join(KEY)).unwrap();
    let (status, head, body) = get(&server, zstd);
    assert!(status == 200 && body == replaced, "{head}");
    assert_eq!(header(&head, "content-encoding"), None);

    // A file written by hand names no content in an owner attribute: its copy is current
    // while the file is no newer than the copy (the rule LocalStore::current_copy keeps).
    let only_zstd = "Accept-Encoding: zstd\r\n";
    let by_hand: Vec<u8> = raw.iter().map(|b| b ^ 0x5a).collect();
    std::fs::write(&temp, &by_hand).unwrap();
    std::fs::rename(&temp, store.join(KEY)).unwrap();
    let copy = put_copy(&store, KEY, Encoding::Zstd, None);
    assert_coded(&get(&server, only_zstd), "zstd", &copy, &by_hand);
    // Written again at the same size after its copy: the copy no longer counts.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let copy_file = std::fs::File::options()
        .write(true)
        .open(store.join(relative_path(&copy_key(Encoding::Zstd, KEY))))
        .unwrap();
    copy_file.set_modified(hour_ago).unwrap();
    let again: Vec<u8> = raw.iter().map(|b| b ^ 0x33).collect();
    std::fs::write(&temp, &again).unwrap();
    std::fs::rename(&temp, store.join(KEY)).unwrap();
    let (status, head, body) = get(&server, only_zstd);
    assert!(status == 200 && body == again, "{head}");
    assert_eq!(header(&head, "content-encoding"), None);
}

#[test]
fn a_file_over_the_clients_max_size_is_406() {
    let w = Workdir::new();
    // The index's default: zstd copies.
    let (store, raw) = store_with_debug_file(&w, "zstd");
    let zstd = stored_copy(&store, KEY, Encoding::Zstd).expect("a zstd copy");
    let server = Server::start(&store);
    let limit = |n: &str| format!("X-DEBUGINFOD-MAXSIZE: {n}\r\nAccept-Encoding: zstd\r\n");
    assert_eq!(get(&server, &limit("100")).0, 406);
    assert_eq!(
        server.request("HEAD", &format!("/{KEY}"), &limit("100")).0,
        406
    );
    // The raw size is compared, not the copy's: a limit the copy fits is still 406.
    let between = (zstd.len() + 1).to_string();
    let (status, head, _) = get(&server, &limit(&between));
    assert_eq!(status, 406, "{head}");
    assert_eq!(header(&head, "x-debuginfod-size"), None);
    assert_coded(
        &get(&server, &limit(&raw.len().to_string())),
        "zstd",
        &zstd,
        &raw,
    );
    // Not a positive number: no limit.
    for ignored in ["0", "-1", "abc", ""] {
        assert_eq!(get(&server, &limit(ignored)).0, 200, "{ignored:?}");
    }
    // A miss stays a miss.
    let (status, _, _) = server.request("GET", "/buildid/00/debuginfo", &limit("100"));
    assert_eq!(status, 404);
}

#[test]
fn the_max_size_applies_to_upstream_answers_too() {
    let w = Workdir::new();
    build_split_elf(&w, "p", &format!("0x{BUILD_ID}"), "x * 7 + 1");
    let debug = std::fs::read(w.path("p/app.debug")).unwrap();
    // A static tree upstream holding the debug file at its debuginfod path; an empty store.
    let tree = w.path("tree");
    std::fs::create_dir_all(tree.join(KEY).parent().unwrap()).unwrap();
    std::fs::write(tree.join(KEY), &debug).unwrap();
    let upstream = common::StaticServer::start(&tree, &w.path("upstream.log"));
    let store = w.path("store");
    std::fs::create_dir_all(&store).unwrap();
    let cache = w.path("upstream-cache");
    let args = [
        "--upstream",
        &format!("http://{}", upstream.addr),
        "--upstream-cache",
        cache.to_str().unwrap(),
    ];
    let server = Server::start_with(&store, &args, None);
    let limited = "X-DEBUGINFOD-MAXSIZE: 100\r\nAccept-Encoding: zstd\r\n";
    // The first answer is the download streamed as it arrives; it still says its length.
    assert_eq!(get(&server, limited).0, 406);
    // From the upstream cache: the same limit, and the raw bytes within it.
    assert_eq!(get(&server, limited).0, 406);
    let (status, head, body) = get(&server, "Accept-Encoding: zstd\r\n");
    assert!(status == 200 && body == debug, "{head}");
    assert_eq!(
        header(&head, "content-encoding"),
        None,
        "upstream answers are identity"
    );
    assert_eq!(
        header(&head, "x-debuginfod-size"),
        Some(debug.len().to_string())
    );
    assert_eq!(upstream.asked(KEY), 1, "asked once, then cached");
}

/// A store written before copies were flat files (each at its nested path,
/// `_symdex/encoded/zstd/buildid/<id>/debuginfo`) verifies clean, answers with its copies,
/// and deletes them with their directories.
#[test]
fn a_store_of_nested_copies_is_served_verified_and_deleted() {
    let w = Workdir::new();
    let (store, raw) = store_with_debug_file(&w, "zstd");
    let copies = common::files_of(&store, |k| k.starts_with("_symdex/encoded/"));
    assert!(!copies.is_empty());
    for flat in copies.keys() {
        assert!(
            !flat
                .trim_start_matches("_symdex/encoded/zstd/")
                .contains('/'),
            "{flat}"
        );
        let nested = store.join(key_of(flat.clone()));
        std::fs::create_dir_all(nested.parent().unwrap()).unwrap();
        std::fs::rename(store.join(flat), &nested).unwrap();
    }
    let zstd = std::fs::read(store.join(copy_key(Encoding::Zstd, KEY))).expect("nested");
    common::verify_clean(&store);
    let server = Server::start(&store);
    assert_coded(
        &get(&server, "Accept-Encoding: zstd\r\n"),
        "zstd",
        &zstd,
        &raw,
    );
    drop(server);

    common::ok(
        symdex()
            .args(["delete", "--store"])
            .arg(&store)
            .arg("--input")
            .arg(w.path("p/app.debug"))
            .output()
            .unwrap(),
    );
    let left = common::files_of(&store, |k| k.starts_with("_symdex/encoded"));
    assert!(left.is_empty(), "{:?}", left.keys());
    assert!(
        !store.join("_symdex/encoded").exists(),
        "no empty directory left"
    );
    common::verify_clean(&store);
}
