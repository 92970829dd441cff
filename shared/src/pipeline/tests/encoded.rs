//! Compressed copies (crate::encoded, pipeline/encode.rs): made once for the keys an upload
//! publishes, decoding to their bytes, kept only where worth it, removed with their key,
//! withdrawn when their key changed meanwhile, and checked by verify.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{assert_audit_clean, index_and_finalize};
use crate::encoded::{
    compress, copy_key, decode, staged_in_memory, EncodedMeta, Encoding, Encodings,
    MEMORY_STAGING_MAX,
};
use crate::pipeline::Config;
use crate::storage::hooked::{BeforeChange, Hooked};
use crate::storage::{LocalStore, ObjectInfo, Storage, StorageResult};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::{config, Artifact, Artifacts};

fn compressing(encodings: &str) -> Config {
    Config {
        compress: encodings.parse().unwrap(),
        ..config()
    }
}

/// A source of `bytes` (keyed as a source: one key holding them).
fn source_of(bytes: Vec<u8>) -> Artifact {
    let mut artifact = Artifacts::new().source;
    artifact.bytes = bytes;
    artifact
}

fn compressible() -> Vec<u8> {
    (0..4000)
        .map(|i| format!("int value_{i} = {i};\n"))
        .collect::<String>()
        .into_bytes()
}

async fn copies_in(store: &LocalStore) -> BTreeSet<String> {
    store
        .list("_symdex/encoded/")
        .await
        .unwrap()
        .into_iter()
        .collect()
}

#[tokio::test]
async fn every_published_key_gets_copies_that_decode_to_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let artifact = source_of(compressible());
    let indexed = index_and_finalize(&store, compressing("zstd,gzip"), &artifact).await;
    let published: Vec<String> = indexed
        .records
        .iter()
        .flat_map(|r| r.published.clone())
        .collect();
    assert!(!published.is_empty());
    let mut expected = BTreeSet::new();
    for key in &published {
        for encoding in Encoding::ALL {
            let copy = copy_key(encoding, key);
            let stored = store.read(&copy).await.unwrap().expect(&copy);
            assert!(stored.len() * 4 <= artifact.bytes.len() * 3, "{copy}");
            let mut back = Vec::new();
            decode(encoding, &stored[..], &mut back).unwrap();
            assert_eq!(back, artifact.bytes, "{copy}");
            let served = store.current_copy(key, encoding).unwrap().expect("current");
            assert_eq!(served.raw_size, artifact.bytes.len() as u64);
            expected.insert(copy);
        }
    }
    assert_eq!(copies_in(&store).await, expected);
    assert_audit_clean(&store).await;
}

/// An upload over [`MEMORY_STAGING_MAX`] is staged the other way, streamed into temporary
/// files: its copies are stored from them, decode to its bytes, and pass the audit (which
/// decodes every copy) as the small uploads' in-memory copies do.
#[tokio::test]
async fn an_upload_over_the_memory_bound_gets_copies_staged_in_files_that_decode_to_it() {
    let mut bytes = Vec::new();
    for i in 0.. {
        if bytes.len() as u64 > MEMORY_STAGING_MAX + 4096 {
            break;
        }
        bytes.extend_from_slice(format!("int value_{i} = {i};\n").as_bytes());
    }
    assert!(!staged_in_memory(bytes.len() as u64));
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let artifact = source_of(bytes);
    let indexed = index_and_finalize(&store, compressing("zstd,gzip"), &artifact).await;
    let published: Vec<&String> = indexed.records.iter().flat_map(|r| &r.published).collect();
    assert!(!published.is_empty());
    let mut expected = BTreeSet::new();
    for key in published {
        assert_eq!(
            store.read(key).await.unwrap().as_ref(),
            Some(&artifact.bytes)
        );
        for encoding in Encoding::ALL {
            let copy = copy_key(encoding, key);
            let stored = store.read(&copy).await.unwrap().expect(&copy);
            assert!(stored.len() * 4 <= artifact.bytes.len(), "{copy}");
            let mut back = Vec::new();
            decode(encoding, &stored[..], &mut back).unwrap();
            assert!(back == artifact.bytes, "{copy} decodes to the raw bytes");
            let served = store.current_copy(key, encoding).unwrap().expect("current");
            assert_eq!(served.raw_size, artifact.bytes.len() as u64);
            expected.insert(copy);
        }
    }
    assert_eq!(copies_in(&store).await, expected);
    assert_audit_clean(&store).await;
}

#[tokio::test]
async fn small_or_incompressible_uploads_and_stores_without_compression_keep_no_copy() {
    // An xorshift stream: bytes no codec shrinks.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    for (name, bytes, config) in [
        ("random", random, compressing("zstd,gzip")),
        ("small", b"int main;\n".to_vec(), compressing("zstd,gzip")),
        ("off", compressible(), compressing("none")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let indexed = index_and_finalize(&store, config, &source_of(bytes)).await;
        assert!(
            indexed.records.iter().any(|r| !r.published.is_empty()),
            "{name}"
        );
        assert!(copies_in(&store).await.is_empty(), "{name}");
        assert_audit_clean(&store).await;
    }
}

/// Counts the copies a store is asked to write.
#[derive(Default)]
struct CountCopies(AtomicUsize);

impl BeforeChange for CountCopies {
    fn before_change(&self, op: &'static str, _key: &str) -> StorageResult<()> {
        if op == "put_encoded" {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_re_index_compresses_nothing_again_and_a_removal_takes_the_copies_with_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::open(dir.path()).unwrap();
    let store = Hooked::new(
        LocalStore::open(dir.path()).unwrap(),
        CountCopies::default(),
    );
    let artifact = source_of(compressible());
    let indexer = crate::pipeline::Indexer::new(&store, compressing("zstd"));
    let first = indexer
        .index_bytes(&artifact.upload(), &artifact.bytes)
        .await
        .unwrap();
    indexer.finalize(&first, true).await.unwrap();
    let made = store.hook().0.load(Ordering::Relaxed);
    assert!(made > 0);
    let again = indexer
        .index_bytes(&artifact.upload(), &artifact.bytes)
        .await
        .unwrap();
    indexer.finalize(&again, true).await.unwrap();
    assert_eq!(
        store.hook().0.load(Ordering::Relaxed),
        made,
        "no copy made again"
    );
    assert!(!copies_in(&local).await.is_empty());
    indexer.unindex(&artifact.id).await.unwrap();
    assert!(
        copies_in(&local).await.is_empty(),
        "removed with their keys"
    );
    assert_audit_clean(&local).await;
}

#[tokio::test]
async fn a_copy_of_content_its_key_no_longer_holds_is_withdrawn_and_verify_names_one_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let artifact = source_of(compressible());
    let indexed = index_and_finalize(&store, compressing("none"), &artifact).await;
    let key = indexed.records[0].published[0].clone();
    // Staged from other bytes than the key holds (a removal and another upload's publish
    // between the copy's staging and its write).
    let other = compressible().repeat(2);
    let staged = compress(Encoding::Zstd, &mut &other[..], other.len() as u64).unwrap();
    let meta = EncodedMeta {
        encoding: Encoding::Zstd,
        raw: ObjectInfo {
            size: other.len() as u64,
            etag: crate::storage::content_sha1(&other),
        },
    };
    let indexer = crate::pipeline::Indexer::new(&store, compressing("zstd"));
    assert!(indexer.store_copy(&key, &staged, &meta).await.is_err());
    assert!(copies_in(&store).await.is_empty(), "withdrawn");
    assert_eq!(store.current_copy(&key, Encoding::Zstd).unwrap(), None);
    // Left behind (a writer dying between its write and its look): verify names it, and
    // `serve` does not answer with it.
    store
        .put_encoded(&copy_key(Encoding::Zstd, &key), &staged, &meta)
        .await
        .unwrap();
    assert_eq!(store.current_copy(&key, Encoding::Zstd).unwrap(), None);
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    let kinds: Vec<&str> = audit.problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, ["copy"], "{:?}", audit.problems);
    // A copy whose key is gone is an orphan.
    indexer.unindex(&artifact.id).await.unwrap();
    store
        .put_encoded(&copy_key(Encoding::Zstd, &key), &staged, &meta)
        .await
        .unwrap();
    let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
    let kinds: Vec<&str> = audit.problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, ["orphan"], "{:?}", audit.problems);
    assert_eq!(Encodings::zstd().to_string(), "zstd");
}

/// An overwrite replaces a key's content: the old content's copies go before the object
/// changes (under its lease), and the new content's are made — or none, where the overwriter
/// makes none: no copy is left stating the old content.
#[tokio::test]
async fn an_overwrite_takes_the_old_copies_before_the_object_changes() {
    let a = Artifacts::new();
    for (second, expect_copies) in [("zstd", true), ("none", false)] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let first = index_and_finalize(&store, compressing("zstd"), &a.pdb).await;
        let keys: Vec<String> = first
            .records
            .iter()
            .flat_map(|r| r.published.clone())
            .collect();
        let copied: Vec<&String> = keys
            .iter()
            .filter(|k| store.current_copy(k, Encoding::Zstd).unwrap().is_some())
            .collect();
        assert!(!copied.is_empty(), "the PDB's keys have copies");
        let overwrite = Config {
            overwrite: true,
            ..compressing(second)
        };
        index_and_finalize(&store, overwrite, &a.pdb_rebuilt).await;
        for key in &copied {
            assert_eq!(
                store.read(key).await.unwrap(),
                Some(a.pdb_rebuilt.bytes.clone())
            );
            let copy = store.read(&copy_key(Encoding::Zstd, key)).await.unwrap();
            assert_eq!(copy.is_some(), expect_copies, "{second}: {key}");
            if let Some(copy) = copy {
                let mut back = Vec::new();
                decode(Encoding::Zstd, &copy[..], &mut back).unwrap();
                assert!(back == a.pdb_rebuilt.bytes, "{key}: the new content's copy");
            }
        }
        assert_audit_clean(&store).await;
    }
}
