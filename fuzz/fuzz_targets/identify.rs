//! Every format through the one entry point the indexer calls (with the debug details it
//! reads: DWARF line tables and their MD5s, served sections): no input may panic, hang or
//! allocate without bound; whatever is identified must key inside the layout grammars.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symdex_shared::layouts::grammar::is_valid_key;
use symdex_shared::{identify_with_details, keys_for, IdentifyOptions, Layout, MemReader};

fuzz_target!(|data: &[u8]| {
    for as_source in [false, true] {
        if let Ok(ids) = identify_with_details(&MemReader(data), &IdentifyOptions { as_source }) {
            for mut id in ids {
                if let Some(sources) = &id.sources {
                    for (path, md5) in &sources.md5 {
                        assert!(sources.paths.binary_search(path).is_ok(), "{path:?}");
                        assert!(md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit()));
                    }
                }
                id.fill_file_names("fuzzed.bin");
                let set = keys_for(&id, "fuzzed.bin", &Layout::ALL);
                for (layout, keys) in &set.keys {
                    for key in keys {
                        assert!(is_valid_key(*layout, key), "{layout}: {key:?}");
                    }
                }
            }
        }
    }
});
