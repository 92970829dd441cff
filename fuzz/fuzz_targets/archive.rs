//! The archive reader as `symdex index` drives it: entries read one at a time through a byte
//! limit whatever sizes the archive claims; a hostile zip is an error or a bounded read.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(mut archive) = zip::ZipArchive::new(std::io::Cursor::new(data)) else {
        return;
    };
    for index in 0..archive.len().min(1000) {
        let Ok(mut entry) = archive.by_index(index) else {
            continue;
        };
        let _ = (
            entry.name().len(),
            entry.is_symlink(),
            entry.size(),
            entry.compressed_size(),
        );
        let mut sink = Vec::new();
        let read = (&mut entry).take(LIMIT + 1).read_to_end(&mut sink);
        assert!(read.map_or(true, |n| n as u64 <= LIMIT + 1));
    }
});
