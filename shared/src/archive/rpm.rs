//! RPM packages (`*-debuginfo.rpm` holds a build's debug files under `/usr/lib/debug/`): a
//! lead, a signature header, a header, and the payload, a cpio archive compressed with gzip,
//! xz, zstd or bzip2. The payload's files are the package's entries (`./usr/bin/app`).
//!
//! Read by hand: only the payload's offset is needed, and it follows from the two headers'
//! counts (each header is 16 bytes, 16 per index entry, and its data); nothing of the headers
//! is read into memory. (The `rpm` crate parses every tag, with a dependency tree of its own.)

use super::{compressed, cpio, detect, Container, ExpandError, Part, Walk, WatchedReader};
use crate::formats::be_u32;
use crate::reader::{read_up_to, RangeReader};

use crate::sniff::{RPM_HEADER_MAGIC as HEADER_MAGIC, RPM_LEAD as LEAD};

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let signature = header_end(reader, LEAD, "signature")?;
    // The signature header is padded to 8 bytes; the header is not.
    let header = signature.next_multiple_of(8);
    let payload = header_end(reader, header, "header")?;
    let part = Part::new(reader, payload, reader.size() - payload);
    let part = WatchedReader::new(&part, walk.failed.clone());
    let head =
        read_up_to(&part, 0, super::DETECT_LEN).map_err(|e| part.classify("bad RPM payload", e))?;
    match detect(&head) {
        Some(stream) if stream.is_compressed_stream() => {
            let mut payload = compressed::decoded(walk, &part, stream)?;
            cpio::expand(walk, &part, &mut payload)
        }
        Some(Container::Cpio) => {
            cpio::expand(walk, &part, &mut super::sequential(&part))
        }
        _ => Err(ExpandError::Malformed(format!(
            "the payload at offset {payload} is no cpio archive, plain or compressed with gzip, xz, zstd or bzip2"
        ))),
    }
}

/// Where the header at `at` ends, from its counts; checked against the file's size.
fn header_end(reader: &WatchedReader<'_>, at: u64, what: &str) -> Result<u64, ExpandError> {
    let bytes = read_up_to(reader, at, 16).map_err(|e| reader.classify("bad RPM", e))?;
    // Magic, version, reserved; the index entries' count and the data's size.
    let header = (
        bytes.starts_with(HEADER_MAGIC),
        be_u32(&bytes, 8),
        be_u32(&bytes, 12),
    );
    let (true, Some(entries), Some(data)) = header else {
        return Err(ExpandError::Malformed(format!(
            "no {what} header at offset {at}"
        )));
    };
    let (entries, data) = (u64::from(entries), u64::from(data));
    let end = at + 16 + entries * 16 + data;
    if end > reader.size() {
        return Err(ExpandError::Malformed(format!(
            "the {what} header at offset {at} ({entries} entries, {data} bytes of data) runs past the end of the package ({} bytes)",
            reader.size()
        )));
    }
    Ok(end)
}
