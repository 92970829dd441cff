//! What a PDB says about its sources: the documents its modules' line information names with
//! their checksums (each module's `DEBUG_S_FILECHKSMS` subsection, names in `/names`), the
//! `sourcelink` named stream (Source Link JSON) and the `srcsrv` named stream.
//!
//! Read after identification, on the whole file, within a byte budget: the stream directory
//! once, then only the structures that name files (the module list, each module's checksum
//! subsection found by walking the subsection headers of its C13 line information, the
//! string table). Line and symbol records are never read, so a gigabyte PDB costs a few
//! megabytes; what lies past the budget is named in `unread`.

use std::collections::HashSet;

use super::{io, Msf, DBI_HEADER_LEN, DBI_STREAM, INFO_HEADER_LEN, PDB_INFO_STREAM};
use crate::digest::hex;
use crate::formats::{le_u16, le_u32, FormatError};
use crate::pdb_sources::{
    Checksum, ChecksumAlgorithm, Document, PdbSources, SrcSrv, MAX_DOCUMENTS, MAX_SRCSRV_BYTES,
};
use crate::reader::{read_vec, RangeReader};
use crate::sourcelink::{SourceLinkMap, MAX_SOURCE_LINK_BYTES};

/// The most bytes read for documents (directory, string table, module list, checksum
/// subsections and the headers walked to find them).
pub(crate) const MAX_SOURCE_BYTES: u64 = 64 << 20;
/// The largest stream directory read whole (a multi-gigabyte PDB's is a few megabytes).
const MAX_DIRECTORY_READ: u32 = 32 << 20;
/// The most subsection headers walked, all modules together.
const MAX_SUBSECTIONS: u32 = 1_000_000;
/// How many bytes of a module's line information are read at once to walk its subsection
/// headers.
const HEADER_WINDOW: u64 = 4096;
/// The most bytes of the info stream read for its named-stream map.
const MAX_INFO_BYTES: u32 = 1 << 20;
/// `DEBUG_S_FILECHKSMS`: the subsection of a module's C13 lines listing its files.
const FILE_CHECKSUMS: u32 = 0xf4;
/// The `/names` stream's signature.
const NAMES_SIGNATURE: u32 = 0xeffe_effe;

/// The stream directory, read whole: each stream's size and blocks.
struct Directory<'m, 'r> {
    msf: &'m Msf<'r>,
    sizes: Vec<u32>,
    /// Each stream's first entry in `blocks`.
    starts: Vec<usize>,
    blocks: Vec<u32>,
}

/// Bytes left to read.
struct Budget(u64);

impl Budget {
    fn take(&mut self, len: usize) -> Result<(), String> {
        let len = len as u64;
        if len > self.0 {
            return Err(format!(
                "more than the {MAX_SOURCE_BYTES} bytes read for documents"
            ));
        }
        self.0 -= len;
        Ok(())
    }
}

fn text(err: FormatError) -> String {
    err.to_string()
}

impl<'m, 'r> Directory<'m, 'r> {
    fn open(msf: &'m Msf<'r>) -> Result<Self, String> {
        if msf.directory_len > MAX_DIRECTORY_READ {
            return Err(format!(
                "a stream directory of {} bytes (more than {MAX_DIRECTORY_READ} read)",
                msf.directory_len
            ));
        }
        let raw = msf
            .directory_bytes(0, msf.directory_len as usize)
            .map_err(text)?;
        let count = le_u32(&raw, 0).ok_or("empty stream directory")? as usize;
        if count > raw.len() / 4 {
            return Err(format!(
                "{count} streams in a directory of {} bytes",
                raw.len()
            ));
        }
        let sizes: Vec<u32> = (0..count)
            .map(|i| le_u32(&raw, 4 + 4 * i).unwrap_or(u32::MAX))
            .collect();
        let mut starts = Vec::with_capacity(count);
        let mut blocks = Vec::new();
        let mut at = 4 + 4 * count;
        for &size in &sizes {
            starts.push(blocks.len());
            let n = if size == u32::MAX {
                0
            } else {
                size.div_ceil(msf.block_size) as usize
            };
            for _ in 0..n {
                blocks.push(le_u32(&raw, at).ok_or("stream directory cut short")?);
                at += 4;
            }
        }
        Ok(Directory {
            msf,
            sizes,
            starts,
            blocks,
        })
    }

    /// The size of `stream`, `None` when it is absent or nil.
    fn size(&self, stream: u32) -> Option<u32> {
        self.sizes
            .get(stream as usize)
            .copied()
            .filter(|&s| s != u32::MAX)
    }

    /// `len` bytes at `offset` of `stream`, contiguous blocks read at once.
    fn read(
        &self,
        stream: u32,
        offset: u64,
        len: usize,
        budget: &mut Budget,
    ) -> Result<Vec<u8>, String> {
        let size = self.size(stream).ok_or(format!("no stream {stream}"))?;
        if offset + len as u64 > u64::from(size) {
            return Err(format!(
                "{len} bytes at {offset} of stream {stream} of {size} bytes"
            ));
        }
        budget.take(len)?;
        let bs = u64::from(self.msf.block_size);
        let first = self.starts[stream as usize];
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        while out.len() < len {
            let index = (pos / bs) as usize;
            let within = pos % bs;
            let mut take = (bs - within) as usize;
            let start_block = self.blocks[first + index];
            // Blocks that follow each other in the file are one read.
            let mut next = index + 1;
            while take < len - out.len()
                && self.blocks.get(first + next)
                    == Some(&(start_block.wrapping_add((next - index) as u32)))
            {
                take += bs as usize;
                next += 1;
            }
            let take = take.min(len - out.len());
            let at = self.msf.block_offset(start_block).map_err(text)? + within;
            // The last block read must lie in the file too.
            self.msf
                .block_offset(
                    start_block.saturating_add(((within as usize + take - 1) / bs as usize) as u32),
                )
                .map_err(text)?;
            out.extend(read_vec(self.msf.reader, at, take).map_err(|e| text(io(e)))?);
            pos += take as u64;
        }
        Ok(out)
    }

    /// The whole of `stream`, refused past `max` bytes.
    fn read_all(&self, stream: u32, max: usize, budget: &mut Budget) -> Result<Vec<u8>, String> {
        let size = self.size(stream).ok_or(format!("no stream {stream}"))? as usize;
        if size > max {
            return Err(format!(
                "stream {stream} of {size} bytes (more than {max} read)"
            ));
        }
        self.read(stream, 0, size, budget)
    }
}

/// The named streams of the info stream's map: (name, stream).
fn named_streams(info: &[u8]) -> Result<Vec<(String, u32)>, String> {
    let short = "named stream map cut short";
    let names_len = le_u32(info, INFO_HEADER_LEN).ok_or(short)? as usize;
    let names_at = INFO_HEADER_LEN + 4;
    let names = info
        .get(names_at..names_at.checked_add(names_len).ok_or(short)?)
        .ok_or(short)?;
    let mut at = names_at + names_len;
    if at == info.len() {
        // No map after the names: a PDB with no named streams (what minimal writers emit).
        return Ok(Vec::new());
    }
    let _size = le_u32(info, at).ok_or(short)?;
    let capacity = le_u32(info, at + 4).ok_or(short)? as usize;
    at += 8;
    let present_words = le_u32(info, at).ok_or(short)? as usize;
    if present_words > info.len() / 4 || capacity > present_words * 32 {
        return Err(format!("named stream map of {present_words} words"));
    }
    let present: Vec<u32> = (0..present_words)
        .map(|i| le_u32(info, at + 4 + 4 * i).unwrap_or(0))
        .collect();
    at += 4 + 4 * present_words;
    let deleted_words = le_u32(info, at).ok_or(short)? as usize;
    if deleted_words > info.len() / 4 {
        return Err(format!("named stream map of {deleted_words} deleted words"));
    }
    at += 4 + 4 * deleted_words;
    let entries = present
        .iter()
        .map(|w| w.count_ones() as usize)
        .sum::<usize>();
    let mut out = Vec::with_capacity(entries.min(info.len() / 8));
    for i in 0..entries {
        let key = le_u32(info, at + 8 * i).ok_or(short)? as usize;
        let stream = le_u32(info, at + 8 * i + 4).ok_or(short)?;
        let name = names
            .get(key..)
            .and_then(super::super::c_string)
            .ok_or("named stream with no name")?;
        out.push((name, stream));
    }
    Ok(out)
}

/// Reads what a PDB says about its sources; every failure is a line of `unread`.
pub fn read_sources(reader: &dyn RangeReader) -> PdbSources {
    // Until its srcsrv stream is found and read whole, or found absent, a PDB's may define
    // SRCSRVCMD unseen (`PdbSources::srcsrv_unchecked`).
    let mut sources = PdbSources {
        srcsrv_unchecked: true,
        ..PdbSources::default()
    };
    let msf = match Msf::open(reader) {
        Ok(msf) => msf,
        Err(err) => {
            sources.unread.push(err.to_string());
            return sources;
        }
    };
    let mut budget = Budget(MAX_SOURCE_BYTES);
    let directory = match Directory::open(&msf) {
        Ok(directory) => directory,
        Err(reason) => {
            sources.unread.push(reason);
            return sources;
        }
    };
    let named = directory
        .read_all(PDB_INFO_STREAM, MAX_INFO_BYTES as usize, &mut budget)
        .and_then(|info| named_streams(&info));
    let map_read = named.is_ok();
    let named = match named {
        Ok(named) => named,
        Err(reason) => {
            sources.unread.push(format!("named streams: {reason}"));
            Vec::new()
        }
    };
    // Which of two streams named srcsrv (in any case: how a debugger looks a name up is its
    // own) a debugger opens is not known: one is checked only where it is the only one.
    let srcsrv_named = named
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("srcsrv"))
        .count();
    let stream_of = |name: &str| named.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
    if srcsrv_named > 1 {
        sources.unread.push(format!(
            "srcsrv stream: {srcsrv_named} streams of that name (which one a debugger opens \
             is its own): no document's srcsrv URL is vouched for"
        ));
    } else if srcsrv_named == 1 && stream_of("srcsrv").is_none() {
        sources
            .unread
            .push("srcsrv stream: named in another case, not read".to_string());
    }
    if let Some(stream) = stream_of("sourcelink") {
        let map = directory
            .read_all(stream, MAX_SOURCE_LINK_BYTES, &mut budget)
            .and_then(|json| SourceLinkMap::parse(&json).map_err(|e| e.to_string()));
        match map {
            Ok(map) => sources.source_link = Some(map),
            Err(reason) => sources.unread.push(format!("sourcelink stream: {reason}")),
        }
    }
    // The stream parsed once: its summary now, its documents' URLs once they are read.
    let mut srcsrv_lines = None;
    let mut srcsrv_read_whole = false;
    if let Some(stream) = stream_of("srcsrv") {
        let size = directory.size(stream).unwrap_or(0);
        let head = (size as usize).min(MAX_SRCSRV_BYTES);
        match directory.read(stream, 0, head, &mut budget) {
            Ok(bytes) => {
                let (srcsrv, lines) = SrcSrv::read(&bytes, size);
                if let Some(why) = lines.ambiguity() {
                    sources.unread.push(format!("srcsrv stream: {why}"));
                }
                sources.srcsrv = Some(srcsrv);
                srcsrv_lines = Some(lines);
                srcsrv_read_whole = head == size as usize;
            }
            Err(reason) => sources.unread.push(format!("srcsrv stream: {reason}")),
        }
        if head < size as usize {
            sources.unread.push(format!(
                "srcsrv stream: {size} bytes, the first {MAX_SRCSRV_BYTES} read: no \
                 document's srcsrv URL is vouched for"
            ));
        }
    }
    // Checked: the map read, and its one srcsrv stream (if any, by that exact name) whole.
    sources.srcsrv_unchecked = match srcsrv_named {
        _ if !map_read => true,
        0 => false,
        1 => !srcsrv_read_whole,
        _ => true,
    };
    let names = stream_of("/names").map(|stream| string_table(&directory, stream, &mut budget));
    match names {
        Some(Ok(names)) => documents(&directory, &names, &mut budget, &mut sources),
        Some(Err(reason)) => sources.unread.push(format!("/names stream: {reason}")),
        None => {}
    }
    // A stream read in part, or one of two a debugger chooses between, may say otherwise
    // where it was not read (a second SRCSRVTRG past the cut, the other stream's own):
    // its target and URLs are vouched for by nothing read (its size and commands are kept).
    if sources.srcsrv_unchecked {
        if let Some(srcsrv) = sources.srcsrv.as_mut() {
            srcsrv.target = None;
        }
    } else if let Some(lines) = srcsrv_lines {
        SrcSrv::urls(&lines, &mut sources.documents);
    }
    sources
}

/// A PDB's `srcsrv` stream, whole, `Ok(None)` when it has none (or only one named in
/// another case, which [`read_sources`] leaves unread): each document's line of it, which
/// [`read_sources`] keeps none of (a manifest record need not carry a line a file), is what
/// `symdex check` resolves URLs from. Refused (`Err`, why) where [`read_sources`] vouches for
/// no URL of it either: longer than the [`MAX_SRCSRV_BYTES`] read, or one of several streams
/// named srcsrv in any case (which one a debugger opens is its own).
pub fn read_srcsrv(reader: &dyn RangeReader) -> Result<Option<Vec<u8>>, SrcsrvUnread> {
    let unreadable = SrcsrvUnread::Unreadable;
    let msf = Msf::open(reader).map_err(text).map_err(unreadable)?;
    let mut budget = Budget(MAX_SOURCE_BYTES);
    let directory = Directory::open(&msf).map_err(unreadable)?;
    let info = directory
        .read_all(PDB_INFO_STREAM, MAX_INFO_BYTES as usize, &mut budget)
        .map_err(unreadable)?;
    let named = named_streams(&info).map_err(unreadable)?;
    let srcsrv_named = named
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("srcsrv"))
        .count();
    if srcsrv_named > 1 {
        return Err(SrcsrvUnread::Refused(format!(
            "{srcsrv_named} streams are named srcsrv: which one a debugger opens is its own"
        )));
    }
    let Some(stream) = named.iter().find(|(n, _)| n == "srcsrv").map(|(_, s)| *s) else {
        return Ok(None);
    };
    let size = directory.size(stream).unwrap_or(0) as usize;
    if size > MAX_SRCSRV_BYTES {
        return Err(SrcsrvUnread::Refused(format!(
            "{size} bytes, more than the {MAX_SRCSRV_BYTES} read: its unread part may say \
             otherwise"
        )));
    }
    directory
        .read(stream, 0, size, &mut budget)
        .map(Some)
        .map_err(unreadable)
}

/// Why [`read_srcsrv`] gives no stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SrcsrvUnread {
    /// Read, and what a debugger takes for the stream is not known from it (several named
    /// srcsrv, longer than is read): its documents are found at no URL symdex vouches for.
    Refused(String),
    /// The PDB could not be read as far as its stream (corrupt, or truncated): nothing about
    /// its documents is known.
    Unreadable(String),
}

impl std::fmt::Display for SrcsrvUnread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SrcsrvUnread::Refused(why) => f.write_str(why),
            SrcsrvUnread::Unreadable(why) => write!(f, "the PDB cannot be read: {why}"),
        }
    }
}

/// The `/names` string buffer (the strings checksum entries point into).
fn string_table(
    directory: &Directory,
    stream: u32,
    budget: &mut Budget,
) -> Result<Vec<u8>, String> {
    let header = directory.read(stream, 0, 12, budget)?;
    if le_u32(&header, 0) != Some(NAMES_SIGNATURE) {
        return Err("not a string table".into());
    }
    let len = le_u32(&header, 8).unwrap_or(0) as usize;
    directory.read(stream, 12, len, budget)
}

/// One module's stream and where its C13 line information lies in it.
struct ModuleLines {
    stream: u32,
    offset: u64,
    len: u64,
}

/// The modules of the DBI stream's module list that have C13 line information.
fn modules(directory: &Directory, budget: &mut Budget) -> Result<Vec<ModuleLines>, String> {
    let header = directory.read(DBI_STREAM, 0, DBI_HEADER_LEN, budget)?;
    let list_len = le_u32(&header, 24).ok_or("short DBI header")? as usize;
    let list = directory.read(DBI_STREAM, DBI_HEADER_LEN as u64, list_len, budget)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 64 <= list.len() {
        let field = |o| le_u32(&list, at + o).unwrap_or(0);
        let stream = le_u16(&list, at + 34).unwrap_or(u16::MAX);
        let (symbols, c11, c13) = (field(36), field(40), field(44));
        // Two NUL-terminated names follow the fixed part, then padding to 4.
        let mut end = at + 64;
        for _ in 0..2 {
            let nul = list[end..]
                .iter()
                .position(|&b| b == 0)
                .ok_or("module list entry without its names")?;
            end += nul + 1;
        }
        at = end.next_multiple_of(4);
        if stream != u16::MAX && c13 > 0 {
            out.push(ModuleLines {
                stream: u32::from(stream),
                offset: u64::from(symbols) + u64::from(c11),
                len: u64::from(c13),
            });
        }
    }
    Ok(out)
}

/// The documents of every module, each once, into `sources`.
fn documents(directory: &Directory, names: &[u8], budget: &mut Budget, sources: &mut PdbSources) {
    let modules = match modules(directory, budget) {
        Ok(modules) => modules,
        Err(reason) => {
            sources.unread.push(format!("module list: {reason}"));
            return;
        }
    };
    let mut seen: HashSet<u32> = HashSet::new();
    let mut walked = 0u32;
    for (index, module) in modules.iter().enumerate() {
        let found = module_checksums(directory, module, budget, &mut walked);
        let entries = match found {
            Ok(entries) => entries,
            Err(reason) => {
                let later = modules.len() - index - 1;
                // Past the budget, or with many broken modules, the rest is left unread.
                if budget.0 == 0 || walked >= MAX_SUBSECTIONS || sources.unread.len() >= 100 {
                    sources.unread.push(format!(
                        "module {index}: {reason}; {later} later modules not read"
                    ));
                    return;
                }
                sources.unread.push(format!("module {index}: {reason}"));
                continue;
            }
        };
        if let Err(reason) = add_entries(&entries, names, &mut seen, sources) {
            sources.unread.push(format!("module {index}: {reason}"));
            return;
        }
    }
}

/// The bytes of a module's `DEBUG_S_FILECHKSMS` subsection (empty when it has none).
fn module_checksums(
    directory: &Directory,
    module: &ModuleLines,
    budget: &mut Budget,
    walked: &mut u32,
) -> Result<Vec<u8>, String> {
    let mut pos = 0u64;
    // Headers are read a window at a time: line subsections (one a function) are mostly a
    // few dozen bytes, so one read finds many headers.
    let mut window: (u64, Vec<u8>) = (0, Vec::new());
    while pos + 8 <= module.len {
        *walked += 1;
        if *walked > MAX_SUBSECTIONS {
            return Err(format!("more than {MAX_SUBSECTIONS} line subsections"));
        }
        let in_window = pos >= window.0 && pos + 8 <= window.0 + window.1.len() as u64;
        if !in_window {
            let len = (module.len - pos).min(HEADER_WINDOW) as usize;
            window = (
                pos,
                directory.read(module.stream, module.offset + pos, len, budget)?,
            );
        }
        let at = (pos - window.0) as usize;
        let kind = le_u32(&window.1, at).unwrap_or(0) & 0x7fff_ffff;
        let len = u64::from(le_u32(&window.1, at + 4).unwrap_or(0));
        let end = pos + 8 + len;
        if end > module.len {
            return Err(format!("a subsection of {len} bytes past its lines"));
        }
        if kind == FILE_CHECKSUMS {
            // One a module: what writers emit, and all a debugger reads.
            let data = pos + 8;
            if end <= window.0 + window.1.len() as u64 {
                let from = (data - window.0) as usize;
                return Ok(window.1[from..from + len as usize].to_vec());
            }
            return directory.read(module.stream, module.offset + data, len as usize, budget);
        }
        pos = end.next_multiple_of(4);
    }
    Ok(Vec::new())
}

/// Adds a checksum subsection's entries not seen before (by name offset) to `sources`.
fn add_entries(
    entries: &[u8],
    names: &[u8],
    seen: &mut HashSet<u32>,
    sources: &mut PdbSources,
) -> Result<(), String> {
    let mut at = 0usize;
    while at + 6 <= entries.len() {
        let name = le_u32(entries, at).unwrap_or(0);
        let size = usize::from(entries[at + 4]);
        let kind = entries[at + 5];
        let digest = entries
            .get(at + 6..at + 6 + size)
            .ok_or("a checksum past its subsection")?;
        at = (at + 6 + size).next_multiple_of(4);
        if !seen.insert(name) {
            continue;
        }
        if sources.documents.len() >= MAX_DOCUMENTS {
            return Err(format!("more than {MAX_DOCUMENTS} documents"));
        }
        let path = names
            .get(name as usize..)
            .and_then(super::super::c_string)
            .ok_or(format!("document name at {name} not in the string table"))?;
        let algorithm = match kind {
            1 => Some(ChecksumAlgorithm::Md5),
            2 => Some(ChecksumAlgorithm::Sha1),
            3 => Some(ChecksumAlgorithm::Sha256),
            _ => None,
        };
        let checksum = algorithm
            .filter(|a| a.digest_len() == size)
            .map(|algorithm| Checksum {
                algorithm,
                digest: hex(digest),
            });
        sources.documents.push(Document {
            path,
            checksum,
            srcsrv_url: None,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{read_sources, read_srcsrv, SrcsrvUnread};
    use crate::pdb_sources::{ChecksumAlgorithm, MAX_SRCSRV_BYTES};
    use crate::reader::MemReader;
    use crate::testing::source_pdbs::{pdb_with_named_streams, pdb_with_sources, PdbDocument};

    const SOURCE_LINK: &[u8] = br#"{"documents":{"C:\\b\\*":"https://s/src/p/1/*"}}"#;
    const SRCSRV: &[u8] = b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\n\
        SRCSRVTRG=%targ%\\%var2%\r\nSRCSRVCMD=git show %var2%\r\nSRCSRV: source files --\r\n\
        SRCSRV: end --\r\n";

    fn sample() -> Vec<u8> {
        pdb_with_sources(
            [3; 16],
            &[
                (r"C:\b\a.cpp", 1, &[0xab; 16]),
                (r"C:\b\a.h", 3, &[0xcd; 32]),
                (r"C:\b\gen.h", 0, &[]),
                (r"C:\b\odd.h", 1, &[1; 3]),
            ],
            Some(SRCSRV),
            Some(SOURCE_LINK),
        )
    }

    #[test]
    fn documents_checksums_source_link_and_srcsrv_are_read() {
        let sources = read_sources(&MemReader(sample()));
        assert_eq!(sources.unread, Vec::<String>::new());
        let paths: Vec<&str> = sources.documents.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            [r"C:\b\a.cpp", r"C:\b\a.h", r"C:\b\gen.h", r"C:\b\odd.h"]
        );
        let a = sources.documents[0].checksum.as_ref().unwrap();
        assert_eq!(a.algorithm, ChecksumAlgorithm::Md5);
        assert_eq!(a.digest, "ab".repeat(16));
        let h = sources.documents[1].checksum.as_ref().unwrap();
        assert_eq!(h.algorithm, ChecksumAlgorithm::Sha256);
        // No checksum, and one whose length is not its algorithm's: none.
        assert_eq!(sources.documents[2].checksum, None);
        assert_eq!(sources.documents[3].checksum, None);
        let map = sources.source_link.unwrap();
        assert_eq!(
            map.resolve(r"C:\b\x\y.cpp").as_deref(),
            Some("https://s/src/p/1/x/y.cpp")
        );
        let srcsrv = sources.srcsrv.unwrap();
        assert!(srcsrv.commands);
        assert_eq!(srcsrv.size, SRCSRV.len() as u32);
    }

    /// A srcsrv stream defining `SRCSRVTRG` twice, differently (a store's URL first, another
    /// host's after it): no document gets a URL, no target is recorded, and the sources say
    /// why. The stream itself was read whole: nothing about its commands is unchecked.
    #[test]
    fn a_srcsrv_stream_read_two_ways_gives_no_urls() {
        let stream = b"SRCSRV: variables --\r\nSRCSRVTRG=https://s/src/p/1/%var2%\r\n\
            SRCSRV: source files --\r\nC:\\b\\a.cpp*a.cpp\r\nSRCSRV: variables --\r\n\
            SRCSRVTRG=https://elsewhere/%var2%\r\nSRCSRV: end --\r\n";
        let file = pdb_with_sources(
            [3; 16],
            &[(r"C:\b\a.cpp", 1, &[0xab; 16])],
            Some(stream),
            None,
        );
        let sources = read_sources(&MemReader(file));
        assert_eq!(sources.documents[0].srcsrv_url, None);
        assert_eq!(
            sources.srcsrv.as_ref().and_then(|s| s.target.as_deref()),
            None
        );
        assert!(
            sources
                .unread
                .iter()
                .any(|why| why.contains("SRCSRVTRG twice")),
            "{:?}",
            sources.unread
        );
        assert!(!sources.srcsrv_unchecked);
        // The same stream without its second definition gives the URL.
        let cut = &stream[..find(stream, b"a.cpp\r\n") + 7];
        let file = pdb_with_sources([3; 16], &[(r"C:\b\a.cpp", 1, &[0xab; 16])], Some(cut), None);
        let sources = read_sources(&MemReader(file));
        assert_eq!(
            sources.documents[0].srcsrv_url.as_deref(),
            Some("https://s/src/p/1/a.cpp")
        );
    }

    /// A srcsrv stream longer than is read, or one of two named srcsrv: its documents get
    /// no URL and no target is recorded (what was not read may say otherwise), its size and
    /// commands are kept, the sources say why; `read_srcsrv` (`symdex check`) refuses it.
    #[test]
    fn a_srcsrv_stream_not_read_whole_or_not_alone_gives_no_urls() {
        let plain: &[u8] = b"SRCSRV: variables --\r\nSRCSRVTRG=https://s/src/p/1/%var2%\r\n\
            SRCSRV: source files --\r\nC:\\b\\a.cpp*a.cpp\r\nSRCSRV: end --\r\n";
        let mut long = plain.to_vec();
        long.resize(MAX_SRCSRV_BYTES + 1, b'\n');
        let other: &[u8] = b"SRCSRV: variables --\r\nSRCSRVTRG=https://elsewhere/%var2%\r\n";
        let document: &[PdbDocument] = &[(r"C:\b\a.cpp", 1, &[0xab; 16])];
        let pdb = |streams: &[(&str, &[u8])]| pdb_with_named_streams([3; 16], document, streams);
        for (what, file, says) in [
            ("longer", pdb(&[("srcsrv", &long)]), "bytes, the first"),
            (
                "two",
                pdb(&[("srcsrv", plain), ("srcsrv", other)]),
                "2 streams",
            ),
            (
                "two cases",
                pdb(&[("srcsrv", plain), ("SrcSrv", other)]),
                "2 streams",
            ),
        ] {
            let sources = read_sources(&MemReader(file.clone()));
            assert!(sources.srcsrv_unchecked, "{what}");
            assert_eq!(sources.documents[0].srcsrv_url, None, "{what}");
            let srcsrv = sources.srcsrv.as_ref().unwrap();
            assert_eq!(srcsrv.target, None, "{what}");
            assert!(srcsrv.size > 0 && !srcsrv.commands, "{what}");
            assert!(
                sources.unread.iter().any(|why| why.contains(says)),
                "{what}: {:?}",
                sources.unread
            );
            let Err(SrcsrvUnread::Refused(refused)) = read_srcsrv(&MemReader(file)) else {
                panic!("{what}: not refused");
            };
            assert!(!refused.starts_with("srcsrv"), "{what}: {refused}");
        }
        // The one stream read whole gives its URL, to both readers.
        let file = pdb(&[("srcsrv", plain)]);
        let sources = read_sources(&MemReader(file.clone()));
        assert_eq!(
            sources.documents[0].srcsrv_url.as_deref(),
            Some("https://s/src/p/1/a.cpp")
        );
        // Cut short, the PDB cannot be read as far as its stream: no refusal, unreadable.
        let cut = file[..file.len() / 2].to_vec();
        assert!(matches!(
            read_srcsrv(&MemReader(cut)),
            Err(SrcsrvUnread::Unreadable(_))
        ));
        assert_eq!(read_srcsrv(&MemReader(file)), Ok(Some(plain.to_vec())));
    }

    #[test]
    fn a_checksum_subsection_past_the_header_window_is_read_whole() {
        let paths: Vec<String> = (0..300).map(|i| format!("/w/src/file{i}.cpp")).collect();
        let digest = [9u8; 16];
        let documents: Vec<(&str, u8, &[u8])> =
            paths.iter().map(|p| (p.as_str(), 1, &digest[..])).collect();
        let file = pdb_with_sources([3; 16], &documents, None, None);
        let sources = read_sources(&MemReader(file));
        assert_eq!(sources.unread, Vec::<String>::new());
        assert_eq!(sources.documents.len(), 300);
        assert_eq!(sources.documents[299].path, "/w/src/file299.cpp");
    }

    #[test]
    fn the_pdb_crate_reads_the_same_streams() {
        let file = sample();
        let mut pdb = ::pdb::PDB::open(std::io::Cursor::new(file)).unwrap();
        let stream = pdb.named_stream(b"sourcelink").unwrap();
        assert_eq!(stream.as_slice(), SOURCE_LINK);
        let strings = pdb.string_table().unwrap();
        // The first document's name is the table's first string (offset 1).
        let first = strings.get(::pdb::StringRef(1)).unwrap().to_string();
        assert_eq!(first, r"C:\b\a.cpp");
    }

    #[test]
    fn a_broken_source_link_or_string_table_is_unread_not_fatal() {
        let bad_map = pdb_with_sources([3; 16], &[("/a.c", 1, &[0; 16])], None, Some(b"{"));
        let sources = read_sources(&MemReader(bad_map));
        assert_eq!(sources.documents.len(), 1);
        assert!(sources.source_link.is_none());
        assert!(
            sources.unread[0].starts_with("sourcelink stream: "),
            "{:?}",
            sources.unread
        );
        // The string table's length lies.
        let mut file = pdb_with_sources([3; 16], &[("/a.c", 1, &[0; 16])], None, None);
        let at = find(&file, &0xeffe_effeu32.to_le_bytes()) + 8;
        file[at..at + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let sources = read_sources(&MemReader(file));
        assert!(sources.documents.is_empty());
        assert!(
            sources.unread[0].starts_with("/names stream: "),
            "{:?}",
            sources.unread
        );
    }

    fn find(haystack: &[u8], needle: &[u8]) -> usize {
        haystack
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
    }

    #[test]
    fn every_cut_and_every_byte_lying_ends_without_a_panic() {
        let file = sample();
        for cut in (0..file.len()).step_by(97) {
            read_sources(&MemReader(file[..cut].to_vec()));
        }
        // Every byte of the blocks that hold the directory, the info, DBI and module streams.
        for at in (0..file.len()).filter(|i| i % 4096 < 160) {
            for value in [0xff, 0x7f, 0x00] {
                let mut bad = file.clone();
                bad[at] = value;
                read_sources(&MemReader(bad));
            }
        }
    }
}
