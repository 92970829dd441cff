//! Zip archives (and nupkg, snupkg, aar, apk, ipa, jar): the central directory is read through
//! ranged reads; each entry is expanded, or, stored uncompressed, reported as a byte range.

use ::zip::result::ZipError;
use ::zip::{CompressionMethod, ZipArchive};

use super::{windowed, Event, ExpandError, Walk, WatchedReader};
use crate::reader::RangeReader;

/// Read-ahead of zip reads: the central directory in GETs of this size, and a deflated entry's
/// data (whose large reads skip the window anyway).
const ZIP_WINDOW: usize = 64 << 10;

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let bad = |e: ZipError| reader.classify("bad zip archive", e);
    // A zip is read where its directory and headers are, and its stored entries are not read
    // at all (with ranges): a small window wastes little.
    let mut archive = ZipArchive::new(windowed(reader, ZIP_WINDOW)).map_err(bad)?;
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(bad)?;
        let name = entry.name().to_string();
        if entry.is_dir() {
            continue;
        }
        if !walk.admit(&name)? {
            break;
        }
        if entry.is_symlink() {
            walk.skip(&name, "a symbolic link entry (not followed)")?;
            continue;
        }
        if entry.encrypted() {
            walk.reject(&name, "an encrypted zip entry")?;
            continue;
        }
        let (size, compressed, entry_crc32) =
            (entry.size(), entry.compressed_size(), entry.crc32());
        if let Some(reason) = walk.over_limits(size, Some(compressed)) {
            walk.reject(&name, reason)?;
            continue;
        }
        if walk.options.stored_ranges
            && walk.depth == 0
            && entry.compression() == CompressionMethod::Stored
            && compressed == size
        {
            let offset = entry.data_start();
            if offset
                .checked_add(size)
                .is_none_or(|end| end > reader.size())
            {
                walk.reject(&name, "a stored entry that lies outside the archive")?;
                continue;
            }
            walk.expanded += size;
            let entry = walk.name(&name);
            let crc32 = entry_crc32;
            (walk.visit)(Event::Stored {
                entry,
                offset,
                size,
                crc32,
            })?;
            continue;
        }
        drop(entry);
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(ZipError::UnsupportedArchive(what)) => {
                walk.reject(&name, format!("unsupported zip entry: {what}"))?;
                continue;
            }
            Err(e) => return Err(bad(e)),
        };
        walk.entry(&name, &mut entry, Some(compressed))?;
    }
    Ok(())
}
