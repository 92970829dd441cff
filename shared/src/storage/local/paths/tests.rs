//! The flat copies' mapping, and a store written before it (nested copies) still read,
//! listed, replaced and deleted.
use std::fs;
use std::path::{Path, PathBuf};

use super::super::LocalStore;
use super::{
    key_of, legacy_relative_path, relative_path, walk_root, FLAT_SEPARATOR, MAX_FLAT_NAME,
};
use crate::encoded::{compress, copy_key, EncodedMeta, Encoding, ENCODED_PREFIX};
use crate::layouts::grammar::{is_valid_key, is_valid_source_link_key};
use crate::layouts::{Layout, Name};
use crate::storage::{check_key, content_sha1, ObjectInfo};

/// A key of every layout (each checked against its grammar, so the list stays true).
const LAYOUT_KEYS: [(Option<Layout>, &str); 13] = [
    (
        Some(Layout::Ssqp),
        "foo.pdb/497b72f6390a44fc878e5a2d63b6cc4b1/foo.pdb",
    ),
    (
        Some(Layout::Ssqp),
        "_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd700000000/_.debug",
    ),
    (
        Some(Layout::Symstore),
        "Foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1b/Foo.pdb",
    ),
    (
        Some(Layout::SymstoreIndex2),
        "fo/foo.exe/542D574Ec2000/foo.exe",
    ),
    (
        Some(Layout::Breakpad),
        "crash.pdb/3249D99D0C4049318610F4E4FB0B69361/crash.sym",
    ),
    (Some(Layout::Debuginfod), "buildid/180a373d/debuginfo"),
    (
        Some(Layout::Debuginfod),
        "buildid/180a373d/section/.debug_line",
    ),
    (
        Some(Layout::Debuginfod),
        "buildid/180a373d/source/home/ci/src/a b+c.c",
    ),
    (
        Some(Layout::Unified),
        "32/49d99d0c4049318610f4e4fb0b69361/breakpad.meta",
    ),
    (Some(Layout::Gdb), "18/0a373d.debug"),
    (
        Some(Layout::Lldb),
        "497B/72F6/390A/44FC/878E/5A2D63B6CC4B.app",
    ),
    (None, "src/app/1.2/sub dir/main.cpp"),
    (
        None,
        "symbols/_.debug/elf-buildid-sym-180a373d6afbabf0eb1f09be1bc45bd796a71085/_.debug",
    ),
];

/// `relative`, spelt as a walk spells it: `/` separators.
fn spelt(relative: &Path) -> String {
    relative
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

#[test]
fn every_layouts_copies_are_one_flat_file_and_map_back() {
    for (layout, key) in LAYOUT_KEYS {
        match layout {
            Some(layout) => assert!(is_valid_key(layout, key), "{layout}: {key}"),
            None if key.starts_with("src/") => assert!(is_valid_source_link_key(key), "{key}"),
            None => {}
        }
        for encoding in Encoding::ALL {
            let copy = copy_key(encoding, key);
            let path = relative_path(&copy);
            let dir = format!("{ENCODED_PREFIX}{encoding}");
            assert_eq!(path.parent(), Some(Path::new(&dir)), "{copy}: {path:?}");
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            assert_eq!(name, key.replace('/', "\\"), "{copy}");
            assert_eq!(
                key_of(spelt(&path)),
                copy,
                "the walk gives the copy key back"
            );
            assert_eq!(legacy_relative_path(&copy), Some(PathBuf::from(&copy)));
            assert_eq!(key_of(copy.clone()), copy, "the nested path is the key");
        }
        // The raw key itself keeps its own path.
        assert_eq!(relative_path(key), PathBuf::from(key));
        assert_eq!(legacy_relative_path(key), None);
        assert_eq!(key_of(key.to_string()), key);
    }
}

#[test]
fn a_copy_whose_flat_name_is_too_long_keeps_its_nested_path() {
    let component = "a".repeat(120);
    let fits = format!("{component}/{}", "b".repeat(MAX_FLAT_NAME - 121));
    let long = format!("{component}/{}", "b".repeat(MAX_FLAT_NAME - 120));
    assert_eq!((fits.len(), long.len()), (MAX_FLAT_NAME, MAX_FLAT_NAME + 1));
    let copy = copy_key(Encoding::Zstd, &fits);
    let name = relative_path(&copy).file_name().map(|n| n.len());
    assert_eq!(name, Some(MAX_FLAT_NAME), "the longest flat name");
    let copy = copy_key(Encoding::Zstd, &long);
    assert_eq!(relative_path(&copy), PathBuf::from(&copy), "nested");
    assert_eq!(
        legacy_relative_path(&copy),
        None,
        "one path: no other to look at"
    );
    assert_eq!(key_of(copy.clone()), copy);
    // A raw key of one component is its own flat name: nothing to fall back to.
    let single = copy_key(Encoding::Gzip, "index2.txt");
    assert_eq!(relative_path(&single), PathBuf::from(&single));
    assert_eq!(legacy_relative_path(&single), None);
    // Keys under `_symdex/encoded/` that are no copy's (an unknown encoding) keep theirs.
    let other = "_symdex/encoded/br/buildid/ab/debuginfo";
    assert_eq!(relative_path(other), PathBuf::from(other));
}

#[test]
fn no_key_holds_the_flat_separator() {
    let with = format!("buildid/ab{FLAT_SEPARATOR}cd/debuginfo");
    assert!(check_key(&with).is_err(), "{with}");
    assert!(check_key(&copy_key(Encoding::Zstd, &with)).is_err());
    // A layout's name is a file's last component (a `\` separates too): never holds it.
    let given = format!("a{FLAT_SEPARATOR}b.pdb");
    let name = Name::new(&given).map(|n| n.as_given());
    assert!(
        !matches!(name, Ok(n) if n.contains(FLAT_SEPARATOR)),
        "{name:?}"
    );
    for layout in [Layout::Symstore, Layout::Ssqp, Layout::Debuginfod] {
        let key = format!(
            "a{FLAT_SEPARATOR}b.pdb/497B72F6390A44FC878E5A2D63B6CC4B1/a{FLAT_SEPARATOR}b.pdb"
        );
        assert!(!is_valid_key(layout, &key), "{layout}: {key}");
    }
    let (_d, store) = store();
    assert!(store.path_of(&with).is_err());
    assert!(store.put_now(&with, b"x").is_err());
}

#[test]
fn a_listing_inside_the_copies_walks_their_flat_directory() {
    assert_eq!(
        walk_root("_symdex/encoded/zstd/buildid/ab"),
        "_symdex/encoded/zstd"
    );
    assert_eq!(
        walk_root("_symdex/encoded/zstd/buildid/"),
        "_symdex/encoded/zstd"
    );
    assert_eq!(walk_root("_symdex/encoded/zstd/"), "_symdex/encoded/zstd");
    assert_eq!(walk_root("_symdex/encoded/"), "_symdex/encoded");
    assert_eq!(walk_root("buildid/ab/"), "buildid/ab");
    assert_eq!(walk_root("buildid"), "");
}

fn store() -> (tempfile::TempDir, LocalStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path().join("store")).unwrap();
    (dir, store)
}

/// A raw key's bytes, compressible.
fn raw_bytes(key: &str) -> Vec<u8> {
    key.bytes().cycle().take(64 * 1024).collect()
}

/// Publishes `key` and stores its zstd copy (as the encode step does): the copy's key.
fn publish_with_copy(store: &LocalStore, key: &str) -> String {
    let bytes = raw_bytes(key);
    store.put_now(key, &bytes).unwrap();
    let size = bytes.len() as u64;
    let staged = compress(Encoding::Zstd, &mut &bytes[..], size).unwrap();
    let meta = EncodedMeta {
        encoding: Encoding::Zstd,
        raw: ObjectInfo {
            size,
            etag: content_sha1(&bytes),
        },
    };
    let copy = copy_key(Encoding::Zstd, key);
    store.put_encoded_now(&copy, &staged, &meta).unwrap();
    copy
}

/// Moves `copy`'s flat file to its nested path: the store as the code before flat copies
/// wrote it (the same file, its attribute with it).
fn make_nested(store: &LocalStore, copy: &str) {
    let nested = store.root().join(copy);
    fs::create_dir_all(nested.parent().unwrap()).unwrap();
    fs::rename(store.root().join(relative_path(copy)), &nested).unwrap();
}

/// Every directory under the store's copies.
fn copy_dirs(store: &LocalStore) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut todo = vec![store.root().join(ENCODED_PREFIX)];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
                todo.push(entry.path());
            }
        }
    }
    dirs
}

/// Every copy the store lists is one it holds, current, decoding to its key's bytes: what
/// `symdex verify` checks of copies (audit/copies.rs).
fn assert_copies_verify(store: &LocalStore, keys: &[&str]) {
    let mut wanted: Vec<String> = keys.iter().map(|k| copy_key(Encoding::Zstd, k)).collect();
    wanted.sort();
    assert_eq!(
        store.list_now(ENCODED_PREFIX).unwrap(),
        wanted,
        "listed once each"
    );
    for key in keys {
        let copy = copy_key(Encoding::Zstd, key);
        let (_, meta) = store
            .encoded_now(&copy)
            .unwrap()
            .expect("names what it encodes");
        let raw = store.head_now(key).unwrap().expect("its key");
        assert_eq!(meta.raw, raw, "{copy}");
        let current = store
            .current_copy(key, Encoding::Zstd)
            .unwrap()
            .expect("current");
        let bytes = store.read_now(&copy).unwrap().expect("the copy's bytes");
        assert_eq!(
            fs::read(&current.path).unwrap(),
            bytes,
            "served from the file found"
        );
        let decoded = zstd::stream::decode_all(&bytes[..]).unwrap();
        assert_eq!(decoded, raw_bytes(key), "{copy} decodes to its key");
    }
}

#[test]
fn copies_are_flat_files_listed_read_and_deleted_by_their_keys() {
    let (_d, store) = store();
    let keys = ["buildid/180a373d/debuginfo", "18/0a373d.debug"];
    for key in keys {
        publish_with_copy(&store, key);
    }
    assert_eq!(
        copy_dirs(&store),
        [store.root().join("_symdex/encoded/zstd")]
    );
    assert_copies_verify(&store, &keys);
    let under = store.list_now("_symdex/encoded/zstd/buildid/").unwrap();
    assert_eq!(
        under,
        [copy_key(Encoding::Zstd, keys[0])],
        "a prefix inside the copies"
    );
    for key in keys {
        let copy = copy_key(Encoding::Zstd, key);
        store.delete_now(&copy).unwrap();
        assert_eq!(store.read_now(&copy).unwrap(), None);
    }
    assert!(
        !store.root().join(ENCODED_PREFIX).exists(),
        "no empty directory left"
    );
}

#[test]
fn a_store_of_nested_copies_is_read_listed_replaced_and_deleted() {
    let (_d, new) = store();
    let keys = [
        "buildid/180a373d/debuginfo",
        "index2/_/_.debug/elf-buildid-sym-180a373d/_.debug",
        "32/49d99d0c/executable",
    ];
    let copies: Vec<String> = keys.iter().map(|k| publish_with_copy(&new, k)).collect();
    copies.iter().for_each(|copy| make_nested(&new, copy));
    // Opened as the old store it now is.
    let store = LocalStore::open(new.root()).unwrap();
    assert!(store.may_hold_nested_copies());
    for copy in &copies {
        assert!(!store.root().join(relative_path(copy)).exists());
    }
    assert_copies_verify(&store, &keys);

    // A write goes flat, and the nested copy goes (with its directories).
    publish_with_copy(&store, keys[0]);
    assert!(store.root().join(relative_path(&copies[0])).is_file());
    assert!(!store.root().join("_symdex/encoded/zstd/buildid").exists());
    assert_copies_verify(&store, &keys);

    // A copy left at both (a writer killed between the two): listed once, read flat,
    // deleted at both.
    let flat = store.root().join(relative_path(&copies[1]));
    fs::hard_link(store.root().join(&copies[1]), &flat).unwrap();
    assert_copies_verify(&store, &keys);
    store.delete_now(&copies[1]).unwrap();
    assert!(!flat.exists() && !store.root().join(&copies[1]).exists());
    assert!(!store.root().join("_symdex/encoded/zstd/index2").exists());

    // A nested copy alone is deleted, its directories with it.
    store.delete_now(&copies[2]).unwrap();
    assert_eq!(store.read_now(&copies[2]).unwrap(), None);
    assert_eq!(
        copy_dirs(&store),
        [store.root().join("_symdex/encoded/zstd")]
    );
    assert_eq!(store.list_now(ENCODED_PREFIX).unwrap(), [copies[0].clone()]);
}
