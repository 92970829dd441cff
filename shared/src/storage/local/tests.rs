//! Unit tests.

use std::fs;
use std::sync::atomic::Ordering;

use super::owners::{owner_attribute, parse_owner_attribute};
use super::{LocalStore, OWNERS_MARKER, TMP_DIR};
use crate::reader::RangeReader;
use crate::storage::{
    appended, content_sha1, CopySource, ObjectInfo, Precondition, Storage, StorageError,
};

fn store() -> (tempfile::TempDir, LocalStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    (dir, store)
}

/// A record is read whole whatever its size, at the buffer's first size and each size it
/// doubles to (where a read fills the buffer exactly and only the next one ends it).
#[test]
fn records_of_every_size_are_read_whole() {
    let (_d, s) = store();
    for size in [0, 1, 4095, 4096, 4097, 8192, 8193, 100_000] {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let key = format!("records/{size}.json");
        s.put_now(&key, &bytes).unwrap();
        let read = s.get_now(&key).unwrap().expect("the record");
        assert!(
            read.bytes == bytes,
            "{size} bytes read as {}",
            read.bytes.len()
        );
    }
}

/// `list_each` finds what `list` does, its bookkeeping directories left out alike.
#[tokio::test]
async fn list_each_finds_the_keys_list_does() {
    let (_d, s) = store();
    for key in ["a/b/c", "a/d", "b/e/f/g", "a-z"] {
        s.put_now(key, key.as_bytes()).unwrap();
    }
    for prefix in ["", "a", "a/", "b/e/", "zz"] {
        let mut found = Vec::new();
        s.list_each(prefix, &mut |key| found.push(key))
            .await
            .unwrap();
        found.sort();
        assert_eq!(found, s.list_now(prefix).unwrap(), "{prefix:?}");
    }
    assert_eq!(s.list_now("").unwrap().len(), 4);
}

#[test]
fn put_get_head_list_delete() {
    let (_d, s) = store();
    s.put_now("a/b/c.txt", b"hello").unwrap();
    assert_eq!(s.get_now("a/b/c.txt").unwrap().unwrap().bytes, b"hello");
    let info = s.head_now("a/b/c.txt").unwrap().unwrap();
    assert_eq!((info.size, info.etag), (5, content_sha1(b"hello")));
    assert_eq!(
        s.size_now("a/b").unwrap(),
        None,
        "directories are not objects"
    );
    s.put_now("a/x", b"1").unwrap();
    assert_eq!(s.list_now("a/").unwrap(), ["a/b/c.txt", "a/x"]);
    assert_eq!(s.list_now("a/b").unwrap(), ["a/b/c.txt"]);
    s.delete_now("a/b/c.txt").unwrap();
    s.delete_now("a/b/c.txt").unwrap();
    assert!(
        !s.root().join("a/b").exists(),
        "empty directories are removed"
    );
    assert_eq!(s.get_now("a/b/c.txt").unwrap(), None);
}

#[tokio::test]
async fn changes_are_counted_when_they_end_and_reads_are_not() {
    let (_d, s) = store();
    let before = s.changes();
    s.put("a/k", b"1").await.unwrap();
    assert_eq!(s.changes(), before + 1);
    s.read("a/k").await.unwrap();
    s.get("a/k").await.unwrap();
    s.head("a/k").await.unwrap();
    s.list("a/").await.unwrap();
    assert_eq!(s.changes(), before + 1, "reads are not changes");
    let version = s.put_if("a/k", b"2", Precondition::Absent).await.unwrap();
    assert!(version.is_none());
    assert_eq!(s.changes(), before + 2, "a failed change is counted too");
    let info = s.head("a/k").await.unwrap().unwrap();
    s.copy(&CopySource::Key("a/k"), "a/c", &info, None)
        .await
        .unwrap();
    s.delete("a/c").await.unwrap();
    assert_eq!(s.changes(), before + 4);
}

#[test]
fn a_new_copy_never_replaces_what_is_there() {
    let (d, s) = store();
    let input = d.path().join("input.bin");
    fs::write(&input, b"new bytes").unwrap();
    let file = CopySource::File(&input);
    assert_eq!(s.copy_new_now(&file, "k/deep/one").unwrap(), Some(9));
    s.put_now("k/taken", b"theirs").unwrap();
    assert_eq!(s.copy_new_now(&file, "k/taken").unwrap(), None);
    assert_eq!(
        s.copy_new_now(&CopySource::Key("k/deep/one"), "k/taken")
            .unwrap(),
        None
    );
    assert_eq!(s.get_now("k/taken").unwrap().unwrap().bytes, b"theirs");
    assert_eq!(
        s.copy_new_now(&CopySource::Key("k/deep/one"), "k/two")
            .unwrap(),
        Some(9)
    );
    assert_eq!(s.get_now("k/two").unwrap().unwrap().bytes, b"new bytes");
    // A copy from a key that is not there says which.
    assert!(matches!(
        s.copy_now(&CopySource::Key("k/gone"), "k/other/three"),
        Err(StorageError::NotFound(key)) if key == "k/gone"
    ));
    assert!(s
        .copy_new_now(&CopySource::Key("k/gone"), "k/four")
        .is_err());
    assert_eq!(
        fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(),
        0,
        "no temporary file left behind"
    );
}

fn inode(s: &LocalStore, key: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(s.path_of(key).unwrap()).unwrap().ino()
}

/// A key copied from a file this handle just created, naming the same owner and content,
/// is a link of that very file (`Recent`): made even where the source key's name has gone
/// since while the file has another, and not where the file has no name left (no file is
/// brought back), nor for another owner or other content (the usual way then).
#[cfg(target_os = "linux")]
#[test]
fn a_key_of_a_file_just_created_is_a_link_of_it() {
    let (d, s) = store();
    let s = s.naming_owners();
    let input = d.path().join("input.bin");
    fs::write(&input, b"the bytes").unwrap();
    let known = ObjectInfo {
        size: 9,
        etag: content_sha1(b"the bytes"),
    };
    let copy_new = |source: &CopySource<'_>, key: &str, known: &ObjectInfo| {
        s.copy_new_owned_now(source, key, known, Some("up-a"))
    };
    assert_eq!(
        copy_new(&CopySource::File(&input), "a/one", &known).unwrap(),
        Some(9)
    );
    let file = inode(&s, "a/one");
    // Another name of the file, made outside the store; then the key's own name goes.
    fs::hard_link(s.path_of("a/one").unwrap(), d.path().join("kept")).unwrap();
    fs::remove_file(s.path_of("a/one").unwrap()).unwrap();
    // Asked to copy from `a/one`: a link of the file created under it, through its
    // descriptor (a copy by name would find nothing there).
    let from_one = CopySource::Key("a/one");
    assert_eq!(copy_new(&from_one, "b/two", &known).unwrap(), Some(9));
    assert_eq!(inode(&s, "b/two"), file);
    let owned = s.owned_now("b/two").unwrap().unwrap();
    assert_eq!(owned.owner.as_deref(), Some("up-a"));
    assert_eq!(owned.written, Some(known.clone()));
    assert_eq!(fs::read(s.path_of("b/two").unwrap()).unwrap(), b"the bytes");
    // Taken: nothing made.
    assert_eq!(copy_new(&from_one, "b/two", &known).unwrap(), None);
    // Other content named: not from the kept file (the source key is asked, and is gone).
    let other = ObjectInfo {
        size: 9,
        etag: content_sha1(b"other byt"),
    };
    assert!(copy_new(&from_one, "b/three", &other).is_err());
    // The file with no name left: not brought back; the copy finds no source.
    fs::remove_file(d.path().join("kept")).unwrap();
    fs::remove_file(s.path_of("b/two").unwrap()).unwrap();
    assert!(copy_new(&from_one, "b/four", &known).is_err());
    assert!(!s.path_of("b/four").unwrap().exists());
}

/// Owners named in the files' attribute: a key is a hard link only of a file naming the
/// same owner (links share it), the content written is named with it, and a change in
/// place (which keeps the attribute) shows against it.
#[test]
fn keys_name_their_owner_and_share_a_file_only_with_the_same_owner() {
    // Created from an unnamed temporary file, and from a named one where there are none.
    for unnamed in [true, false] {
        let (d, s) = store();
        let s = s.naming_owners();
        if !unnamed {
            s.unnamed_temp.store(false, Ordering::Relaxed);
        }
        let input = d.path().join("input.bin");
        fs::write(&input, b"the bytes").unwrap();
        let known = ObjectInfo {
            size: 9,
            etag: content_sha1(b"the bytes"),
        };
        let copy_new = |source: &CopySource<'_>, key: &str, owner: Option<&str>| {
            s.copy_new_owned_now(source, key, &known, owner).unwrap()
        };
        assert_eq!(
            copy_new(&CopySource::File(&input), "a/one", Some("up-a")),
            Some(9)
        );
        assert_eq!(
            copy_new(&CopySource::File(&input), "a/one", Some("up-b")),
            None
        );
        let from_one = CopySource::Key("a/one");
        assert_eq!(copy_new(&from_one, "a/two", Some("up-a")), Some(9));
        assert_eq!(copy_new(&from_one, "b/one", Some("up-b")), Some(9));
        assert_eq!(copy_new(&from_one, "n/one", None), Some(9));
        assert_eq!(
            inode(&s, "a/two"),
            inode(&s, "a/one"),
            "the same owner: a link"
        );
        assert_ne!(
            inode(&s, "b/one"),
            inode(&s, "a/one"),
            "another owner: a copy"
        );
        assert_ne!(inode(&s, "n/one"), inode(&s, "a/one"), "nobody: a copy");
        let owner = |key| s.owned_now(key).unwrap().unwrap().owner;
        assert_eq!(owner("a/two").as_deref(), Some("up-a"));
        assert_eq!(owner("b/one").as_deref(), Some("up-b"));
        assert_eq!(owner("n/one"), None);
        // An overwrite names its writer; the other names of the file it replaced keep theirs.
        s.copy_owned_now(&CopySource::Key("b/one"), "a/two", &known, Some("up-b"))
            .unwrap();
        assert_eq!(owner("a/two").as_deref(), Some("up-b"));
        assert_eq!(owner("a/one").as_deref(), Some("up-a"));
        let found = s.owned_now("a/one").unwrap().unwrap();
        assert_eq!(
            (found.written, found.info),
            (Some(known.clone()), known.clone())
        );
        // Changed in place: the attribute stays, and says what was written.
        fs::write(s.path_of("a/one").unwrap(), b"tampered").unwrap();
        let found = s.owned_now("a/one").unwrap().unwrap();
        assert_eq!(found.owner.as_deref(), Some("up-a"));
        assert_eq!(found.written, Some(known));
        assert_eq!(found.info.size, 8);
        // Deleting a name leaves the file's other names and their owner.
        let before = inode(&s, "b/one");
        s.delete_now("b/one").unwrap();
        assert_eq!(owner("a/two").as_deref(), Some("up-b"));
        assert_eq!(inode(&s, "a/two"), before);
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
    }
}

/// An owner attribute is packed where its parts are SHA-1s, small enough to stay inside
/// an ext4 inode of 256 bytes (60 bytes of value beside its name), and read back as
/// written; other owners are kept as text.
#[test]
fn owner_attributes_pack_sha1s_and_read_back() {
    let written = ObjectInfo {
        size: 123_456_789,
        etag: content_sha1(b"content"),
    };
    let flat = content_sha1(b"upload");
    let by_location = format!("{}/{flat}", content_sha1(b"location"));
    // Uppercase hex stays text: packed, it would read back lowercase.
    let upper = flat.to_ascii_uppercase();
    for owner in [
        flat.as_str(),
        by_location.as_str(),
        "up-a",
        "Not/Hex",
        &upper,
    ] {
        let value = owner_attribute(owner, &written);
        let parsed = parse_owner_attribute(&value);
        assert_eq!(
            parsed,
            Some((owner.to_string(), written.clone())),
            "{owner}"
        );
    }
    assert_eq!(owner_attribute(&flat, &written).len(), 50);
    assert_eq!(parse_owner_attribute(&[1, 1, 0]), None, "truncated");
    assert_eq!(parse_owner_attribute(&[1, 0]), None, "no owner");
    assert_eq!(
        parse_owner_attribute(b"store"),
        None,
        "the marker names no upload"
    );
}

/// The CLI's store names owners once a writer marked it so, and refuses a copy that lost
/// the attributes (a `cp -r`), whose keys would look written outside symdex.
#[test]
fn a_marked_store_names_owners_and_a_copy_without_attributes_is_refused() {
    let (d, s) = store();
    let unmarked = LocalStore::open(s.root()).unwrap();
    let reader = unmarked.naming_owners_as_marked(None).unwrap();
    assert!(
        !reader.traits().names_owners,
        "a reader does not mark a store"
    );
    let lock = s.lock_writer(|| {}).unwrap();
    let writer = s.naming_owners_as_marked(Some(&lock)).unwrap();
    assert!(writer.traits().names_owners);
    let reader = LocalStore::open(writer.root()).unwrap();
    assert!(
        reader
            .naming_owners_as_marked(None)
            .unwrap()
            .traits()
            .names_owners
    );
    drop(lock);
    // Copied file by file: `fs::copy` keeps no extended attributes, as `cp -r` does not.
    let copy = d.path().join("copy");
    fs::create_dir_all(copy.join("_symdex")).unwrap();
    fs::copy(writer.root().join(OWNERS_MARKER), copy.join(OWNERS_MARKER)).unwrap();
    let copied = LocalStore::open(&copy).unwrap();
    let lock = copied.lock_writer(|| {}).unwrap();
    let refused = copied.naming_owners_as_marked(Some(&lock)).unwrap_err();
    assert!(refused.to_string().contains("lost them"), "{refused}");
    let reader = LocalStore::open(&copy).unwrap();
    assert!(reader.naming_owners_as_marked(None).is_err());
}

#[test]
fn a_record_is_created_alike_from_an_unnamed_or_a_named_temporary_file() {
    for unnamed in [true, false] {
        let (_d, s) = store();
        if !unnamed {
            s.unnamed_temp.store(false, Ordering::Relaxed);
        }
        let bytes = CopySource::Bytes(b"{\"refs\":[]}");
        assert_eq!(
            s.copy_new_now(&bytes, "r/new/dir/rec.json").unwrap(),
            Some(11)
        );
        assert_eq!(s.copy_new_now(&bytes, "r/new/dir/rec.json").unwrap(), None);
        s.put_now("r/theirs.json", b"theirs").unwrap();
        assert_eq!(s.copy_new_now(&bytes, "r/theirs.json").unwrap(), None);
        assert_eq!(
            s.get_now("r/theirs.json").unwrap().unwrap().bytes,
            b"theirs"
        );
        let created = s.get_now("r/new/dir/rec.json").unwrap().unwrap();
        assert_eq!(created.bytes, b"{\"refs\":[]}");
        let mode = fs::metadata(s.path_of("r/new/dir/rec.json").unwrap())
            .unwrap()
            .permissions();
        assert!(!mode.readonly(), "created writable, as a named file is");
        assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
        // The condition holds for a creation through put_if too.
        assert!(s
            .put_if_now("r/new/dir/rec.json", b"x", Precondition::Absent)
            .unwrap()
            .is_none());
    }
}

#[test]
fn ranged_reads_and_copies() {
    let (d, s) = store();
    let input = d.path().join("input.bin");
    fs::write(&input, b"0123456789").unwrap();
    assert_eq!(s.copy_now(&CopySource::File(&input), "k/one").unwrap(), 10);
    assert_eq!(s.copy_now(&CopySource::Key("k/one"), "k/two").unwrap(), 10);
    assert_eq!(
        s.head_now("k/two").unwrap().unwrap(),
        s.head_now("k/one").unwrap().unwrap()
    );
    let mut buf = [0u8; 3];
    crate::reader::FileReader::open(&s.path_of("k/two").unwrap())
        .unwrap()
        .read_exact_at(4, &mut buf)
        .unwrap();
    assert_eq!(&buf, b"456");
    // Rewriting the input does not change the store.
    fs::write(&input, b"changed").unwrap();
    assert_eq!(s.get_now("k/one").unwrap().unwrap().bytes, b"0123456789");
    assert!(s
        .copy_now(
            &CopySource::Object {
                bucket: "b",
                key: "k",
                version_id: None,
                size: 1,
                etag: "e",
                seen: None,
            },
            "x"
        )
        .is_err());
}

#[test]
fn conditional_writes() {
    let (_d, s) = store();
    let v1 = s
        .put_if_now("r", b"v1", Precondition::Absent)
        .unwrap()
        .unwrap();
    assert!(s
        .put_if_now("r", b"v2", Precondition::Absent)
        .unwrap()
        .is_none());
    let read = s.get_now("r").unwrap().unwrap();
    assert_eq!(read.version, v1, "get returns the version it read");
    let v2 = s
        .put_if_now("r", b"v2", Precondition::Version(&v1))
        .unwrap()
        .unwrap();
    assert!(
        s.put_if_now("r", b"v3", Precondition::Version(&v1))
            .unwrap()
            .is_none(),
        "stale version"
    );
    assert_eq!(s.get_now("r").unwrap().unwrap().bytes, b"v2");
    assert!(!s.delete_if_now("r", &v1).unwrap(), "stale delete refused");
    assert!(s.delete_if_now("r", &v2).unwrap());
    assert!(s.get_now("r").unwrap().is_none());
    assert!(
        s.list_now("").unwrap().is_empty(),
        "no temporary or lock files listed"
    );
}

/// An upload record takes its versions by appending (`appended`): its inode stays (none
/// is freed), every append is a new version, the history stays out of reads, and a stale
/// version still loses its swap.
#[test]
fn an_upload_record_grows_by_appends_in_one_inode() {
    use std::os::unix::fs::MetadataExt;
    let (_d, s) = store();
    let key = "_symdex/uploads/ab.json";
    let inode = || fs::metadata(s.path_of(key).unwrap()).unwrap().ino();
    let v1 = s.put_if_now(key, b"{\"v\":1}", Precondition::Absent);
    let v1 = v1.unwrap().unwrap();
    let first = inode();
    let v2 = s.put_if_now(key, b"{\"v\":2}", Precondition::Version(&v1));
    let v2 = v2.unwrap().unwrap();
    let v3 = s.put_if_now(key, b"{\"v\":3}", Precondition::Version(&v2));
    let v3 = v3.unwrap().unwrap();
    assert_eq!(inode(), first, "appended, not replaced");
    let file = fs::read(s.path_of(key).unwrap()).unwrap();
    assert_eq!(file, b"{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
    let read = s.get_now(key).unwrap().unwrap();
    assert_eq!(
        (read.bytes.as_slice(), read.version.as_str()),
        (&b"{\"v\":3}"[..], &*v3)
    );
    assert_eq!(v3, content_sha1(&file), "the whole file's SHA-1");
    assert_eq!(s.read_now(key).unwrap().unwrap(), b"{\"v\":3}");
    let head = s.head_now(key).unwrap().unwrap();
    assert_eq!((head.size, head.etag), (7, content_sha1(b"{\"v\":3}")));
    assert_eq!(s.size_now(key).unwrap(), Some(7));
    // A stale version loses its swap and its delete.
    assert!(s
        .put_if_now(key, b"x", Precondition::Version(&v2))
        .unwrap()
        .is_none());
    assert!(!s.delete_if_now(key, &v2).unwrap(), "stale delete refused");
    assert!(s.delete_if_now(key, &v3).unwrap());
    assert!(s.get_now(key).unwrap().is_none());
    // A line feed would read as two versions: refused, written by any path.
    assert!(s.put_now(key, b"{\n}").is_err());
    assert!(s.put_if_now(key, b"{\n}", Precondition::Absent).is_err());
}

/// An append cut short (a crash, a full disk) leaves the version before it readable; the
/// next swap, made from that read, replaces the file, as does one that would outgrow
/// [`appended::MAX_APPENDED`].
#[test]
fn an_append_cut_short_reads_as_the_version_before_and_is_replaced() {
    use std::io::Write;
    let (_d, s) = store();
    let key = "_symdex/uploads/ab/cd.json";
    let v1 = s.put_if_now(key, b"{\"v\":1}", Precondition::Absent);
    let v1 = v1.unwrap().unwrap();
    let path = s.path_of(key).unwrap();
    fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"\n{\"v\":"))
        .unwrap();
    let read = s.get_now(key).unwrap().unwrap();
    assert_eq!(read.bytes, b"{\"v\":1}");
    assert_ne!(read.version, v1, "the cut-short append changed the file");
    assert!(s
        .put_if_now(key, b"{\"v\":2}", Precondition::Version(&v1))
        .unwrap()
        .is_none());
    let v2 = s.put_if_now(key, b"{\"v\":2}", Precondition::Version(&read.version));
    assert_eq!(v2.unwrap().unwrap(), content_sha1(b"{\"v\":2}"), "replaced");
    assert_eq!(fs::read(&path).unwrap(), b"{\"v\":2}");
    // Grown to its bound, the file is replaced by the new version alone.
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(appended::MAX_APPENDED / 3));
    let mut version = content_sha1(b"{\"v\":2}");
    for _ in 0..4 {
        let written = s.put_if_now(key, big.as_bytes(), Precondition::Version(&version));
        version = written.unwrap().unwrap();
        assert!(fs::metadata(&path).unwrap().len() <= appended::MAX_APPENDED as u64);
        assert_eq!(s.get_now(key).unwrap().unwrap().bytes, big.as_bytes());
    }
    assert_eq!(
        s.list_now("").unwrap(),
        vec![key.to_string()],
        "no temporary files"
    );
}

#[test]
fn keys_cannot_escape_the_root() {
    let (_d, s) = store();
    for key in ["../x", "/etc/passwd", "a/../../x", ""] {
        assert!(s.put_now(key, b"x").is_err(), "{key}");
        assert!(s.get_now(key).is_err(), "{key}");
    }
}

/// An artifact's compressed copies are one file: the first created unnamed and linked, the
/// others links of it through its kept descriptor; a copy already at a key (of other content)
/// is replaced, and no temporary file is left.
#[test]
fn an_artifacts_copies_are_links_of_the_first() {
    // Both staging paths: a copy staged in a temporary file, and one staged in memory.
    for in_memory in [false, true] {
        artifacts_copies_are_links_of_the_first(in_memory);
    }
}

fn artifacts_copies_are_links_of_the_first(in_memory: bool) {
    use crate::encoded::{compress, compress_bytes, copy_key, EncodedMeta, Encoding};
    use std::os::unix::fs::MetadataExt;
    let (_d, s) = store();
    if !s.can_name_owners().unwrap() {
        return;
    }
    let staged_of = |raw: &[u8]| {
        let staged = if in_memory {
            compress_bytes(Encoding::Zstd, raw).unwrap()
        } else {
            compress(Encoding::Zstd, &mut &raw[..], raw.len() as u64).unwrap()
        };
        let raw = ObjectInfo {
            size: raw.len() as u64,
            etag: content_sha1(raw),
        };
        let meta = EncodedMeta {
            encoding: Encoding::Zstd,
            raw,
        };
        (staged, meta)
    };
    let (older, older_meta) = staged_of(&b"older bytes ".repeat(400));
    let (staged, meta) = staged_of(&b"raw bytes ".repeat(500));
    let keys = [
        "buildid/ab/debuginfo",
        "buildid/ab/executable",
        "gdb/ab/cd.debug",
    ]
    .map(|key| copy_key(Encoding::Zstd, key));
    s.put_encoded_now(&keys[2], &older, &older_meta).unwrap();
    for key in &keys {
        s.put_encoded_now(key, &staged, &meta).unwrap();
    }
    let mut bytes = Vec::new();
    staged.write_all_to(&mut bytes).unwrap();
    let inode = |key: &str| fs::metadata(s.path_of(key).unwrap()).unwrap().ino();
    for key in &keys {
        assert_eq!(inode(key), inode(&keys[0]), "{key}");
        let (size, named) = s.encoded_now(key).unwrap().expect("a copy");
        assert_eq!((size, named), (staged.size, meta.clone()), "{key}");
        assert_eq!(fs::read(s.path_of(key).unwrap()).unwrap(), bytes, "{key}");
    }
    let left: Vec<_> = fs::read_dir(s.root().join(TMP_DIR)).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
