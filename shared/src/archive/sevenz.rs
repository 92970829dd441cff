//! 7z archives (`7zz a`, `7z a`: how Windows builds and Qt's debug-info packages ship their
//! PDBs and `.debug` files), read with `sevenz-rust2` — pure Rust, its LZMA/LZMA2 the
//! `lzma-rust2` the xz streams use. Built in: LZMA, LZMA2, PPMd (what `-m0=PPMd` writes for
//! text, sources), the BCJ/BCJ2 and delta filters, bzip2 and stored blocks. Not built in
//! (Deflate would switch every gzip stream's decoder to another crate, zstd would bring a C
//! library, for rare archives): Deflate, zstd and the other plugins, and AES: a block using
//! one has its entries rejected, saying why.
//!
//! A 7z archive's files live in blocks (a solid archive: many files in one block), each block
//! one stream decoded from its start, so a file is reached only by decoding every file before
//! it in its block. An entry over the limits is therefore decoded through, and counted
//! against the archive's budget, where that budget allows; where it does not, the rest of
//! its block is rejected, saying why (no entry goes without a record). The crate bounds what
//! an archive's header makes it allocate (header buffers and dictionaries by
//! [`MEM_LIMIT_KIB`], counts by the header's size) and decodes no more of a file than the
//! header declares for it.

use std::io::{self, Read};

use ::sevenz_rust2::{Archive, ArchiveEntry, BlockDecoder, Password};

use super::{sequential, ExpandError, Walk, WatchedReader};

/// Memory a block's decoder (its dictionary and the decoder's own state) and the archive's
/// header may each take: 7-Zip's `-mx9` gives a large file a 128 MiB dictionary
/// (`LZMA2:27`, 128.1 MiB to decode); as for xz, up to a 256 MiB one (`-md=256m`).
pub(super) const MEM_LIMIT_KIB: usize = 257 * 1024;

/// Windows file attributes a 7z entry may carry: p7zip and 7-Zip on Unix keep the file's mode
/// in the high 16 bits, flagged by `UNIX_EXTENSION`.
const UNIX_EXTENSION: u32 = 0x8000;
const REPARSE_POINT: u32 = 0x400;
const UNIX_FILE_TYPE: u32 = 0o170000;
const UNIX_SYMLINK: u32 = 0o120000;

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let bad = |e: ::sevenz_rust2::Error| reader.classify("bad 7z archive", describe(&e));
    let mut source = sequential(reader);
    let password = Password::empty();
    let archive =
        Archive::read_with_memory_limit(&mut source, &password, MEM_LIMIT_KIB).map_err(bad)?;
    let files = &archive.files;
    // One past each block's last file with data: the files from the block's first up to it
    // are the ones the block hands over, in order (empty files between them included).
    let mut block_ends = vec![0; archive.blocks.len()];
    for (index, block) in archive.stream_map.file_block_index.iter().enumerate() {
        if let Some(end) = block.and_then(|block| block_ends.get_mut(block)) {
            *end = index + 1;
        }
    }
    // Files are handed over in blocks; `visited` keeps the files without data (empty files,
    // directories) that no block hands over for the end.
    let mut visited = vec![false; files.len()];
    for (block, &end) in block_ends.iter().enumerate() {
        let first = archive.stream_map.block_first_file_index.get(block);
        let Some(&first) = first.filter(|&&first| first <= files.len()) else {
            return Err(ExpandError::Malformed(format!(
                "block {block} has no files"
            )));
        };
        let end = end.clamp(first, files.len());
        let mut handed = 0;
        let rest_reason = if archive.is_file_encrypted(first) {
            "an encrypted 7z entry (symdex is given no password)".to_string()
        } else {
            // The block's decoders' memory, reserved from the walks' shared budget while the
            // block is decoded (memory.rs).
            let _reserved = walk.reserve(block_memory(&archive.blocks[block]));
            let mut stop: Option<Stop> = None;
            let decoder = BlockDecoder::new_with_memory_limit(
                1,
                MEM_LIMIT_KIB,
                block,
                &archive,
                &password,
                &mut source,
            );
            let decoded = decoder.for_each_entries(&mut |entry, data| {
                let index = first + handed;
                handed += 1;
                if let Some(seen) = visited.get_mut(index) {
                    *seen = true;
                }
                match visit(walk, entry, data) {
                    Ok(Visited::Next) => Ok(true),
                    Ok(Visited::Stop(why)) => {
                        stop = Some(why);
                        Ok(false)
                    }
                    Err(e) => {
                        stop = Some(Stop::Failed(e));
                        Ok(false)
                    }
                }
            });
            match (decoded, stop) {
                (_, Some(Stop::Failed(e))) => return Err(e),
                (_, Some(Stop::Spent)) => return Ok(()),
                (_, Some(Stop::RestOfBlock(reason))) => reason,
                (Ok(_), None) => continue,
                // Reading the archive failed (worth a retry), or the block's data does not
                // decode: its entries not handed over are rejected.
                (Err(e), None) => match reader.classify("not decoded", describe(&e)) {
                    ExpandError::Malformed(reason) => reason,
                    io => return Err(io),
                },
            }
        };
        let rest = (first + handed).min(end)..end;
        for (entry, seen) in files[rest.clone()].iter().zip(&mut visited[rest]) {
            *seen = true;
            if entry.is_directory() || entry.is_anti_item() {
                continue;
            }
            if !walk.admit(entry.name())? {
                return Ok(());
            }
            walk.reject(entry.name(), rest_reason.clone())?;
        }
    }
    for (index, entry) in files.iter().enumerate() {
        if visited[index] {
            continue;
        }
        // (An entry without data is over no limit but the spent budget's.)
        if let Visited::Stop(Stop::Spent) = visit(walk, entry, &mut io::empty())? {
            return Ok(());
        }
    }
    Ok(())
}

enum Visited {
    Next,
    Stop(Stop),
}

/// Why a block's walk stopped before its end.
enum Stop {
    /// The archive's budget is spent (its rejection recorded): no more entries.
    Spent,
    /// The block's remaining entries are rejected with this reason.
    RestOfBlock(String),
    /// The visitor or reading failed (set by a block's callback, which cannot return it).
    Failed(ExpandError),
}

/// One file of the archive with its data (what the crate has not read of it, it decodes
/// through after: the block goes on from there).
fn visit(
    walk: &mut Walk<'_>,
    entry: &ArchiveEntry,
    data: &mut dyn Read,
) -> Result<Visited, ExpandError> {
    let name = entry.name();
    if entry.is_directory() {
        return Ok(Visited::Next);
    }
    if !walk.admit(name)? {
        return Ok(Visited::Stop(Stop::Spent));
    }
    if entry.is_anti_item() {
        walk.skip(name, "a 7z anti-item (marks a file deleted; no data)")?;
        return Ok(Visited::Next);
    }
    let attributes = entry
        .has_windows_attributes
        .then_some(entry.windows_attributes);
    let is_link = attributes.is_some_and(|a| {
        a & REPARSE_POINT != 0
            || (a & UNIX_EXTENSION != 0 && (a >> 16) & UNIX_FILE_TYPE == UNIX_SYMLINK)
    });
    if is_link {
        walk.skip(name, "a symbolic link entry (not followed)")?;
        return Ok(Visited::Next);
    }
    let size = entry.size();
    if let Some(reason) = walk.over_limits(size, None) {
        walk.reject(name, reason)?;
        // The block goes on past this entry only by decoding it: within the archive's budget
        // that is done (and counted), past it the rest of the block is not decoded.
        if size <= walk.left() {
            walk.expanded += size;
            return Ok(Visited::Next);
        }
        return Ok(Visited::Stop(Stop::RestOfBlock(format!(
            "not decoded: it follows `{name}`, over the limits, in the same 7z block"
        ))));
    }
    walk.entry(name, data, None)?;
    Ok(Visited::Next)
}

/// What decoding `block` takes, by its coders' properties: an LZMA or LZMA2 decoder its
/// dictionary, a PPMd decoder its model's memory (each at most [`MEM_LIMIT_KIB`]: the crate
/// refuses more) and its state, anything else (filters, bzip2, a stored block) a few MiB at
/// most.
fn block_memory(block: &::sevenz_rust2::Block) -> u64 {
    use ::sevenz_rust2::EncoderMethod;
    let most = (MEM_LIMIT_KIB as u64) << 10;
    block
        .coders
        .iter()
        .map(|coder| {
            let properties = coder.properties();
            let needs = match coder.encoder_method_id() {
                EncoderMethod::ID_LZMA2 => properties
                    .first()
                    .and_then(|&property| super::memory::lzma2_memory(property)),
                // A dictionary size after the lc/lp/pb byte; up to 6 MiB of probabilities.
                EncoderMethod::ID_LZMA => properties
                    .get(1..5)
                    .and_then(|size| size.try_into().ok())
                    .map(|size| {
                        super::memory::window_memory(u64::from(u32::from_le_bytes(size)))
                            + (6 << 20)
                    }),
                // The model's memory after the order byte, allocated whole at the start.
                EncoderMethod::ID_PPMD => properties
                    .get(1..5)
                    .and_then(|size| size.try_into().ok())
                    .map(|size| u64::from(u32::from_le_bytes(size)) + (1 << 20)),
                _ => Some(4 << 20),
            };
            needs.map_or(most, |needs| needs.min(most))
        })
        .sum()
}

/// The crate's error in words (its `Display` is its `Debug`).
fn describe(error: &::sevenz_rust2::Error) -> String {
    use ::sevenz_rust2::Error;
    match error {
        Error::UnsupportedCompressionMethod(method) => {
            format!("compressed with {method}, which symdex does not decode")
        }
        Error::PasswordRequired | Error::MaybeBadPassword(_) => {
            "encrypted (symdex is given no password)".to_string()
        }
        Error::Io(e, context) if context.is_empty() => e.to_string(),
        Error::Io(e, context) => format!("{context}: {e}"),
        Error::Other(what) | Error::Unsupported(what) => what.to_string(),
        Error::ChecksumVerificationFailed => "a checksum does not match".to_string(),
        Error::MaxMemLimited { max_kb, actaul_kb } => {
            format!("its decoder needs {actaul_kb} KiB of memory, over the {max_kb} KiB allowed")
        }
        other => format!("{other:?}"),
    }
}
