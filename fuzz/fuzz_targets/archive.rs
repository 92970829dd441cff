//! The archive layer as `symdex index` and the indexer Lambda drive it: any bytes, detected as
//! whatever container their magic says, expand within the limits (every entry bounded, the
//! scratch directory emptied) or stop with an error — never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symdex_shared::archive::{self, Event, Expanded, Limits, Options};
use symdex_shared::MemReader;

const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let reader = MemReader(data);
    let Ok(Some(container)) = archive::detect_reader(&reader) else {
        return;
    };
    let scratch = tempfile::tempdir().expect("scratch");
    let options = Options {
        limits: Limits {
            max_entry_size: LIMIT,
            max_expanded: 4 * LIMIT,
            max_ratio: 1000,
            max_entries: 1000,
        },
        stored_ranges: data.first().is_some_and(|b| b & 1 == 1),
    };
    let mut entries = 0u64;
    let _ = archive::expand(&reader, container, "fuzz.bin", &options, scratch.path(), &mut |event| {
        entries += 1;
        if let Event::File { data, size, .. } = event {
            assert!(size <= LIMIT);
            if let Expanded::Bytes(bytes) = data {
                assert_eq!(bytes.len() as u64, size);
            }
        }
        Ok(())
    });
    assert!(entries <= 2 * 1000 + 2);
    assert_eq!(std::fs::read_dir(scratch.path()).map_or(0, |d| d.count()), 0);
});
