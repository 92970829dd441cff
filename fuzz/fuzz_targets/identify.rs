//! Every format through the one entry point: no input may panic, hang or allocate without
//! bound; whatever is identified must key inside the layout grammars.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symdex_shared::layouts::grammar::is_valid_key;
use symdex_shared::{identify, keys_for, IdentifyOptions, Layout, MemReader};

fuzz_target!(|data: &[u8]| {
    for as_source in [false, true] {
        if let Ok(ids) = identify(&MemReader(data), &IdentifyOptions { as_source }) {
            for mut id in ids {
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
