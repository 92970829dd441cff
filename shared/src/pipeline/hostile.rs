//! Hostile inputs through the whole pipeline: an artifact of any format, corrupted or cut
//! short, uploaded under any name (`..`, control characters, 300 characters, ...), loose or as
//! an archive's entry of that path, is indexed
//! into a store and finalized without an error. It gets a manifest record; everything it
//! publishes lies inside a layout's grammar under that layout's prefix; and `verify` finds
//! the store as promised.

use proptest::prelude::*;

use crate::formats::robustness::{corrupted, edit, seed_at};
use crate::formats::IdentifyOptions;
use crate::layouts::grammar::is_valid_key;
use crate::pipeline::{Config, EntryOf, Indexer, Upload};
use crate::storage::{CopySource, LocalStore, Storage};
use crate::testing::index_bytes::IndexBytes;
use crate::testing::scenarios::config;
use crate::upload_meta::UploadMeta;

/// Whether `key` is a key of one of `config`'s layouts, under its prefix.
fn inside_a_layout(config: &Config, key: &str) -> bool {
    config.layouts.iter().any(|layout| {
        let prefix = config.prefixes.get(layout).map_or("", String::as_str);
        key.strip_prefix(prefix)
            .is_some_and(|rest| is_valid_key(*layout, rest))
    })
}

/// Indexes `bytes` uploaded as `name` (loose, or `in_archive` as an entry of that path) and
/// checks the promises of the module's doc.
fn index_hostile(bytes: Vec<u8>, name: &str, as_source: bool, in_archive: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap().with_owners();
    let config = config();
    let (id, ingest_key, entry) = if in_archive {
        let entry = EntryOf {
            path: name.to_string(),
            archive_etag: "0".repeat(40),
            archive_size: 1 << 20,
        };
        let archive = "/ci/build.zip";
        (
            format!("file:{archive}!/{name}"),
            archive.to_string(),
            Some(entry),
        )
    } else {
        (format!("file:/ci/{name}"), format!("/ci/{name}"), None)
    };
    let upload = Upload {
        id,
        source: CopySource::Bytes(&bytes),
        ingest_bucket: None,
        ingest_key,
        entry,
        ingest_version: None,
        etag: crate::storage::content_sha1(&bytes),
        size: bytes.len() as u64,
        meta: UploadMeta::default(),
        options: IdentifyOptions { as_source },
        source_path: None,
        file_stamp: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let indexer = Indexer::new(&store, config.clone());
        let indexed = indexer
            .index_bytes(&upload, &bytes)
            .await
            .expect("a hostile input is a record, not an error");
        assert!(!indexed.records.is_empty(), "no record for {name:?}");
        indexer.write_manifest(&indexed.records).await.unwrap();
        indexer.finalize(&indexed, true).await.unwrap();
        // The store's marker objects (written by the driver before its first publish) are
        // the store's, no upload's.
        let markers: Vec<String> = config.marker_objects().into_iter().map(|m| m.0).collect();
        for key in store.list("").await.unwrap() {
            if key.starts_with("_symdex/")
                || key.starts_with("_manifest/")
                || markers.contains(&key)
            {
                continue;
            }
            assert!(
                inside_a_layout(&config, &key),
                "{key:?} published for {name:?} is inside no layout"
            );
        }
        let audit = crate::audit::audit(&store, "_manifest").await.unwrap();
        assert!(audit.problems.is_empty(), "{:#?}", audit.problems);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_artifact_under_any_name_is_recorded_and_keyed_inside_the_layouts(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        name in crate::layouts::properties::hostile_name(),
        as_source in any::<bool>(),
        in_archive in any::<bool>(),
    ) {
        let data = corrupted(seed_at(seed), edits, cut);
        index_hostile(data, &name, as_source, in_archive);
    }
}
