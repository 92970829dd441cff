//! DWARF: the source files an ELF debug file's line tables name, as absolute paths (what a
//! debuginfod client asks `/buildid/<id>/source/<path>` for).
//!
//! Bounded reads: only line-table *headers* are read (each unit's program is skipped by its
//! length), plus, for DWARF 4 and older, the root entry of each compilation unit (its
//! `DW_AT_comp_dir`, which the line table's directory 0 stands for). Strings are read where
//! their offsets point. A compressed section (`SHF_COMPRESSED`, zlib or zstd) is decompressed
//! whole, up to [`MAX_DECOMPRESSED`]. gimli parses each header from a buffer holding just the
//! header: the unit's length field is rewritten to end there, so gimli never needs the rest.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read};

use gimli::{AttributeValue, DebugAbbrevOffset, DebugLineOffset, EndianSlice, RunTimeEndian};

use crate::identity::SectionRef;
use crate::reader::{read_vec, RangeReader};

/// Most source paths recorded for one debug file (a large C++ program names tens of
/// thousands of headers; the rest are counted, not listed).
pub const MAX_SOURCE_PATHS: usize = 20_000;
/// Longest path recorded (longer ones are rejected: no client could request them as a key).
pub const MAX_PATH_LEN: usize = 768;
/// A line-table header larger than this is skipped (real ones are kilobytes).
const MAX_HEADER: u64 = 1 << 20;
/// How much of a compilation unit is read to parse its root entry.
const UNIT_HEAD: u64 = 16 * 1024;
/// Largest decompressed size of a compressed section read whole.
pub const MAX_DECOMPRESSED: u64 = 64 << 20;
/// Units walked per section at most (each costs a read).
const MAX_UNITS: usize = 500_000;
/// Longest string read at an offset.
const MAX_STRING: usize = 4096;

// What a debug file's DWARF holds is part of its identity (identity.rs); read here.
pub use crate::identity::{DwarfLayout, SourcePaths};

/// The section names [`DwarfLayout`] keeps.
pub const SOURCE_SECTIONS: [&str; 5] = [
    ".debug_line",
    ".debug_line_str",
    ".debug_str",
    ".debug_info",
    ".debug_abbrev",
];

/// One section's bytes: read by ranges from the file, or decompressed in memory.
enum Bytes<'a> {
    Range {
        reader: &'a dyn RangeReader,
        offset: u64,
        size: u64,
    },
    Owned(Vec<u8>),
}

impl Bytes<'_> {
    fn len(&self) -> u64 {
        match self {
            Bytes::Range { size, .. } => *size,
            Bytes::Owned(v) => v.len() as u64,
        }
    }

    /// Up to `len` bytes at `at` (fewer at the section's end).
    fn read(&self, at: u64, len: u64) -> io::Result<Cow<'_, [u8]>> {
        let len = len.min(self.len().saturating_sub(at));
        match self {
            Bytes::Range { reader, offset, .. } => {
                Ok(Cow::Owned(read_vec(*reader, offset + at, len as usize)?))
            }
            Bytes::Owned(v) => Ok(Cow::Borrowed(&v[at as usize..(at + len) as usize])),
        }
    }

    /// The NUL-terminated string at `at`.
    fn string(&self, at: u64) -> Option<Vec<u8>> {
        let bytes = self.read(at, MAX_STRING as u64).ok()?;
        let end = bytes.iter().position(|&b| b == 0)?;
        Some(bytes[..end].to_vec())
    }
}

/// Reads the sections of `layout` and returns the source paths their line tables name:
/// every line table walked in turn ([`Found::read_unit`]), each of its files' paths kept.
pub fn source_paths(reader: &dyn RangeReader, layout: &DwarfLayout) -> SourcePaths {
    let mut found = Found::default();
    let Some(line) = found.open_section(reader, layout, ".debug_line") else {
        return found.into_source_paths();
    };
    let strings = Strings {
        line_str: found.open_section(reader, layout, ".debug_line_str"),
        str: found.open_section(reader, layout, ".debug_str"),
    };
    let mut tables = Tables {
        info: found.open_section(reader, layout, ".debug_info"),
        abbrev: found.open_section(reader, layout, ".debug_abbrev"),
        line,
        strings,
        endian: if layout.little_endian {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        },
        comp_dirs: None,
    };
    let mut offset = 0u64;
    let mut units = 0;
    while offset < tables.line.len() && units < MAX_UNITS {
        units += 1;
        let Some(next) = found.read_unit(&mut tables, offset) else {
            break;
        };
        offset = next;
    }
    found.into_source_paths()
}

/// The sections a line-table walk reads, and the compilation directories of DWARF 4 units
/// (read from `.debug_info` once, when a unit first needs them).
struct Tables<'a> {
    line: Bytes<'a>,
    strings: Strings<'a>,
    info: Option<Bytes<'a>>,
    abbrev: Option<Bytes<'a>>,
    endian: RunTimeEndian,
    comp_dirs: Option<HashMap<u64, Vec<u8>>>,
}

/// What the walk over the line tables found so far: the paths (at most
/// [`MAX_SOURCE_PATHS`], the rest counted as `dropped`), their MD5s where the tables give
/// them (`None`: tables that disagree on the path's MD5), and the rejections.
#[derive(Default)]
struct Found {
    paths: BTreeSet<String>,
    md5: BTreeMap<String, Option<String>>,
    dropped: usize,
    rejected: Rejections,
}

impl Found {
    /// The section called `name`, if `layout` has it and it opens (else the reason is a
    /// rejection).
    fn open_section<'a>(
        &mut self,
        reader: &'a dyn RangeReader,
        layout: &DwarfLayout,
        name: &str,
    ) -> Option<Bytes<'a>> {
        let s = layout.sections.iter().find(|s| s.name == name)?;
        match open(reader, s, layout) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                self.rejected.add(format!("{name}: {e}"));
                None
            }
        }
    }

    /// Reads the line table at `offset`, keeping the paths of its files. Returns where the
    /// next one starts; `None` where this one's extent is unreadable (the walk ends there).
    fn read_unit(&mut self, tables: &mut Tables<'_>, offset: u64) -> Option<u64> {
        let endian = tables.endian;
        let head = match UnitHead::read(&tables.line, offset, endian, true) {
            Ok(head) => head,
            Err(e) => {
                self.rejected.add(format!("line table at {offset}: {e}"));
                return None;
            }
        };
        let next = head.end;
        let header = head.header_end.and_then(|end| {
            (end - offset <= MAX_HEADER)
                .then(|| head.patched(&tables.line, end, endian))
                .and_then(Result::ok)
        });
        let Some(buffer) = header else {
            self.rejected.add(format!(
                "line table at {offset}: header unreadable or too large"
            ));
            return Some(next);
        };
        let debug_line = gimli::DebugLine::new(&buffer, endian);
        let program = match debug_line.program(DebugLineOffset(0), 8, None, None) {
            Ok(program) => program,
            Err(e) => {
                self.rejected.add(format!("line table at {offset}: {e}"));
                return Some(next);
            }
        };
        let header = program.header();
        // DWARF 4 and older: directory 0 is the unit's DW_AT_comp_dir, in .debug_info.
        let comp_dir = if header.version() <= 4 {
            let dirs =
                tables
                    .comp_dirs
                    .get_or_insert_with(|| match (&tables.info, &tables.abbrev) {
                        (Some(info), Some(abbrev)) => unit_comp_dirs(
                            info,
                            abbrev,
                            &tables.strings,
                            endian,
                            &mut self.rejected,
                        ),
                        _ => HashMap::new(),
                    });
            dirs.get(&offset).cloned()
        } else {
            // DWARF 5 names it as directory 0 itself.
            header.directory(0).and_then(|d| tables.strings.resolve(d))
        };
        for file in header.file_names() {
            match file_path(header, file, comp_dir.as_deref(), &tables.strings) {
                Ok(path) => {
                    // Kept for recorded paths only: as bounded as they are.
                    let recorded = header.file_has_md5().then(|| *file.md5());
                    self.add(path, recorded);
                }
                Err(reason) => self.rejected.add(reason),
            }
        }
        Some(next)
    }

    /// Keeps `path` (unless there are [`MAX_SOURCE_PATHS`] already: then it is counted), and
    /// the MD5 its table `recorded` for it (all zeros: none).
    fn add(&mut self, path: String, recorded: Option<[u8; 16]>) {
        if !self.paths.contains(&path) {
            if self.paths.len() >= MAX_SOURCE_PATHS {
                self.dropped += 1;
                return;
            }
            self.paths.insert(path.clone());
        }
        if let Some(digest) = recorded.filter(|d| *d != [0; 16]) {
            let digest = super::hex(&digest);
            self.md5
                .entry(path)
                .and_modify(|known| {
                    if known.as_deref() != Some(digest.as_str()) {
                        *known = None;
                    }
                })
                .or_insert(Some(digest));
        }
    }

    /// The paths found, the MD5s the tables agree on, and why anything was left out.
    fn into_source_paths(mut self) -> SourcePaths {
        if self.dropped > 0 {
            self.rejected.add(format!(
                "more than {MAX_SOURCE_PATHS} source paths: {} not recorded",
                self.dropped
            ));
        }
        let md5 = self
            .md5
            .into_iter()
            .filter_map(|(path, digest)| Some((path, digest?)))
            .collect();
        SourcePaths {
            paths: self.paths.into_iter().collect(),
            md5,
            rejected: self.rejected.into_lines(),
        }
    }
}

/// The absolute path of one `file` of a line table's `header`: its name under its directory
/// (a relative directory under the unit's `comp_dir`), normalized. `Err`: why it is not
/// recorded.
fn file_path(
    header: &gimli::LineProgramHeader<EndianSlice<'_, RunTimeEndian>>,
    file: &gimli::FileEntry<EndianSlice<'_, RunTimeEndian>>,
    comp_dir: Option<&[u8]>,
    strings: &Strings<'_>,
) -> Result<String, String> {
    let Some(name) = strings.resolve(file.path_name()) else {
        return Err("a file name in a form symdex does not read".to_string());
    };
    let dir = if header.version() <= 4 && file.directory_index() == 0 {
        comp_dir.map(<[u8]>::to_vec)
    } else {
        file.directory(header).and_then(|d| strings.resolve(d))
    };
    // A relative directory (DWARF 4 include directories) is under the comp dir.
    let dir = match (dir, comp_dir) {
        (Some(d), Some(c)) if !d.starts_with(b"/") => Some(join(c, &d)),
        (Some(d), _) => Some(d),
        (None, _) => None,
    };
    let joined = if name.starts_with(b"/") {
        name
    } else {
        match dir {
            Some(dir) => join(&dir, &name),
            None => name,
        }
    };
    normalize(&joined)
}

/// Rejection reasons, counted by kind so a file with thousands of the same problem says so in
/// one line.
#[derive(Default)]
struct Rejections(std::collections::BTreeMap<String, usize>);

impl Rejections {
    fn add(&mut self, reason: String) {
        if self.0.len() < 64 || self.0.contains_key(&reason) {
            *self.0.entry(reason).or_default() += 1;
        }
    }

    fn into_lines(self) -> Vec<String> {
        self.0
            .into_iter()
            .map(|(reason, n)| {
                if n == 1 {
                    reason
                } else {
                    format!("{reason} ({n} times)")
                }
            })
            .collect()
    }
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// An absolute path with `.`, `..` and repeated slashes resolved lexically (what debuginfod
/// clients do before they ask), or why it cannot be a source key.
pub fn normalize(path: &[u8]) -> Result<String, String> {
    let text =
        std::str::from_utf8(path).map_err(|_| "a source path that is not UTF-8".to_string())?;
    if !text.starts_with('/') {
        return Err("a relative source path without a compilation directory".to_string());
    }
    if text.chars().any(char::is_control) {
        return Err("a source path with control characters".to_string());
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("a source path climbing above the root".to_string());
                }
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err("an empty source path".to_string());
    }
    let normalized = format!("/{}", parts.join("/"));
    if normalized.len() > MAX_PATH_LEN {
        return Err(format!("a source path longer than {MAX_PATH_LEN} bytes"));
    }
    Ok(normalized)
}

/// The string sections attribute values point into.
struct Strings<'a> {
    line_str: Option<Bytes<'a>>,
    str: Option<Bytes<'a>>,
}

impl Strings<'_> {
    fn resolve(&self, value: AttributeValue<EndianSlice<'_, RunTimeEndian>>) -> Option<Vec<u8>> {
        match value {
            AttributeValue::String(s) => Some(s.slice().to_vec()),
            AttributeValue::DebugLineStrRef(o) => self.line_str.as_ref()?.string(o.0 as u64),
            AttributeValue::DebugStrRef(o) => self.str.as_ref()?.string(o.0 as u64),
            _ => None,
        }
    }
}

/// The start of one unit (line table or compilation unit): its extent, and where a line
/// table's header ends.
struct UnitHead {
    start: u64,
    /// Bytes of the length field (4, or 12 for 64-bit DWARF).
    length_field: u64,
    end: u64,
    header_end: Option<u64>,
}

impl UnitHead {
    fn read(
        section: &Bytes<'_>,
        start: u64,
        endian: RunTimeEndian,
        line: bool,
    ) -> Result<Self, String> {
        let head = section
            .read(start, 32)
            .map_err(|e| format!("unreadable: {e}"))?;
        let u32_at = |at: usize| -> Option<u64> {
            let b: [u8; 4] = head.get(at..at + 4)?.try_into().ok()?;
            Some(u64::from(match endian {
                RunTimeEndian::Little => u32::from_le_bytes(b),
                RunTimeEndian::Big => u32::from_be_bytes(b),
            }))
        };
        let u64_at = |at: usize| -> Option<u64> {
            let b: [u8; 8] = head.get(at..at + 8)?.try_into().ok()?;
            Some(match endian {
                RunTimeEndian::Little => u64::from_le_bytes(b),
                RunTimeEndian::Big => u64::from_be_bytes(b),
            })
        };
        let u16_at = |at: usize| -> Option<u16> {
            let b: [u8; 2] = head.get(at..at + 2)?.try_into().ok()?;
            Some(match endian {
                RunTimeEndian::Little => u16::from_le_bytes(b),
                RunTimeEndian::Big => u16::from_be_bytes(b),
            })
        };
        let truncated = || "truncated unit header".to_string();
        let first = u32_at(0).ok_or_else(truncated)?;
        let (length, length_field, offset_size) = if first == 0xffff_ffff {
            (u64_at(4).ok_or_else(truncated)?, 12u64, 8usize)
        } else if first >= 0xffff_fff0 {
            return Err(format!("reserved unit length {first:#x}"));
        } else {
            (first, 4, 4)
        };
        let end = start
            .checked_add(length_field)
            .and_then(|s| s.checked_add(length))
            .filter(|&end| end <= section.len())
            .ok_or_else(|| format!("unit length {length} runs past the section"))?;
        if length == 0 {
            return Err("empty unit".to_string());
        }
        let header_end = if line {
            let mut at = length_field as usize;
            let version = u16_at(at).ok_or_else(truncated)?;
            at += 2;
            if version >= 5 {
                at += 2; // address_size, segment_selector_size
            }
            let header_length = if offset_size == 8 {
                u64_at(at)
            } else {
                u32_at(at)
            }
            .ok_or_else(truncated)?;
            (start + at as u64 + offset_size as u64)
                .checked_add(header_length)
                .filter(|&e| e <= end)
        } else {
            None
        };
        Ok(UnitHead {
            start,
            length_field,
            end,
            header_end,
        })
    }

    /// The unit's first `until - start` bytes, its length field rewritten to end there.
    fn patched(
        &self,
        section: &Bytes<'_>,
        until: u64,
        endian: RunTimeEndian,
    ) -> io::Result<Vec<u8>> {
        let mut buffer = section.read(self.start, until - self.start)?.into_owned();
        let length = buffer.len() as u64 - self.length_field;
        let at = if self.length_field == 12 { 4 } else { 0 };
        let bytes: Vec<u8> = match (self.length_field, endian) {
            (12, RunTimeEndian::Little) => length.to_le_bytes().to_vec(),
            (12, RunTimeEndian::Big) => length.to_be_bytes().to_vec(),
            (_, RunTimeEndian::Little) => (length as u32).to_le_bytes().to_vec(),
            (_, RunTimeEndian::Big) => (length as u32).to_be_bytes().to_vec(),
        };
        buffer
            .get_mut(at..at + bytes.len())
            .ok_or_else(|| io::Error::other("short unit"))?
            .copy_from_slice(&bytes);
        Ok(buffer)
    }
}

/// `DW_AT_comp_dir` of every compilation unit, by its `DW_AT_stmt_list` (line table offset).
fn unit_comp_dirs(
    info: &Bytes<'_>,
    abbrev: &Bytes<'_>,
    strings: &Strings<'_>,
    endian: RunTimeEndian,
    rejected: &mut Rejections,
) -> HashMap<u64, Vec<u8>> {
    let mut dirs = HashMap::new();
    let mut abbreviations: HashMap<u64, gimli::Abbreviations> = HashMap::new();
    let mut offset = 0u64;
    let mut units = 0;
    while offset < info.len() && units < MAX_UNITS {
        units += 1;
        let head = match UnitHead::read(info, offset, endian, false) {
            Ok(head) => head,
            Err(e) => {
                rejected.add(format!("compilation unit at {offset}: {e}"));
                break;
            }
        };
        let next = head.end;
        let until = head.end.min(offset + UNIT_HEAD);
        if let Some((stmt_list, dir)) = head
            .patched(info, until, endian)
            .ok()
            .and_then(|buffer| root_entry(&buffer, abbrev, &mut abbreviations, strings, endian))
        {
            dirs.insert(stmt_list, dir);
        }
        offset = next;
    }
    dirs
}

/// The line table offset and compilation directory of a unit's root entry.
fn root_entry(
    buffer: &[u8],
    abbrev: &Bytes<'_>,
    cache: &mut HashMap<u64, gimli::Abbreviations>,
    strings: &Strings<'_>,
    endian: RunTimeEndian,
) -> Option<(u64, Vec<u8>)> {
    let header = gimli::DebugInfo::new(buffer, endian)
        .units()
        .next()
        .ok()??;
    let abbrev_offset = header.debug_abbrev_offset().0 as u64;
    if !cache.contains_key(&abbrev_offset) {
        let bytes = abbrev.read(abbrev_offset, MAX_HEADER).ok()?;
        let table = gimli::DebugAbbrev::new(&bytes, endian)
            .abbreviations(DebugAbbrevOffset(0))
            .ok()?;
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(abbrev_offset, table);
    }
    let abbreviations = cache.get(&abbrev_offset)?;
    let mut entries = header.entries(abbreviations);
    let root = entries.next_dfs().ok()??;
    let stmt_list = match root.attr_value(gimli::DW_AT_stmt_list)? {
        AttributeValue::DebugLineRef(o) => o.0 as u64,
        AttributeValue::SecOffset(o) => o as u64,
        _ => return None,
    };
    let dir = strings.resolve(root.attr_value(gimli::DW_AT_comp_dir)?)?;
    Some((stmt_list, dir))
}

/// A section's bytes: a range of the file, or decompressed (`SHF_COMPRESSED`).
fn open<'a>(
    reader: &'a dyn RangeReader,
    section: &SectionRef,
    layout: &DwarfLayout,
) -> Result<Bytes<'a>, String> {
    if !section.compressed {
        return Ok(Bytes::Range {
            reader,
            offset: section.offset,
            size: section.size,
        });
    }
    read_compressed(reader, section, layout).map(Bytes::Owned)
}

/// An `SHF_COMPRESSED` section, read and decompressed whole (at most [`MAX_DECOMPRESSED`]
/// either way).
pub(crate) fn read_compressed(
    reader: &dyn RangeReader,
    section: &SectionRef,
    layout: &DwarfLayout,
) -> Result<Vec<u8>, String> {
    if section.size > MAX_DECOMPRESSED {
        return Err(format!("compressed section of {} bytes", section.size));
    }
    let raw = read_vec(reader, section.offset, section.size as usize).map_err(|e| e.to_string())?;
    decompress(&raw, layout.is_64, layout.little_endian)
}

/// The contents of an `SHF_COMPRESSED` section: an `Elf32_Chdr`/`Elf64_Chdr`, then a zlib
/// (`ELFCOMPRESS_ZLIB`) or zstd (`ELFCOMPRESS_ZSTD`) stream of `ch_size` bytes, at most
/// [`MAX_DECOMPRESSED`].
pub fn decompress(raw: &[u8], is_64: bool, little_endian: bool) -> Result<Vec<u8>, String> {
    let u32_at = |at: usize| -> Option<u64> {
        let b: [u8; 4] = raw.get(at..at + 4)?.try_into().ok()?;
        Some(u64::from(if little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }))
    };
    let u64_at = |at: usize| -> Option<u64> {
        let b: [u8; 8] = raw.get(at..at + 8)?.try_into().ok()?;
        Some(if little_endian {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    };
    let short = || "truncated compression header".to_string();
    let (kind, size, data) = if is_64 {
        (
            u32_at(0).ok_or_else(short)?,
            u64_at(8).ok_or_else(short)?,
            24,
        )
    } else {
        (
            u32_at(0).ok_or_else(short)?,
            u32_at(4).ok_or_else(short)?,
            12,
        )
    };
    if size > MAX_DECOMPRESSED {
        return Err(format!(
            "decompresses to {size} bytes (at most {MAX_DECOMPRESSED})"
        ));
    }
    let stream = raw.get(data..).ok_or_else(short)?;
    // What the header claims is reserved only as far as the stream could decode to (zlib
    // expands at most 1032:1; a zstd block of 128 KiB can be 4 bytes): a small section
    // claiming 64 MiB reserves no more than it could fill.
    let most = stream.len() as u64 * if kind == 1 { 1032 } else { 32 * 1024 };
    let mut out = Vec::with_capacity(size.min(most) as usize);
    // One byte more than the header says: a stream that is longer is a lie too.
    let result = match kind {
        1 => flate2::read::ZlibDecoder::new(stream)
            .take(size + 1)
            .read_to_end(&mut out),
        2 => ruzstd::decoding::StreamingDecoder::new(stream)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
            .and_then(|d| d.take(size + 1).read_to_end(&mut out)),
        other => return Err(format!("compression type {other}")),
    };
    result.map_err(|e| format!("does not decompress: {e}"))?;
    if out.len() as u64 != size {
        return Err(format!(
            "decompresses to {} bytes, header says {size}",
            out.len()
        ));
    }
    Ok(out)
}

pub(crate) mod ranged;

#[cfg(test)]
mod tests;
