//! The modules of an ELF core file, for `symdex check`: the files mapped into the process
//! (the `CORE`/`NT_FILE` note) and each one's GNU build id, read from its ELF header as the
//! kernel (coredump_filter bit 4) or gdb's `gcore` dumped it. Reads are bounded: the core is
//! read through a cache of the ranges asked for (`object::ReadCache`), never whole.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{ensure, Context};
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache, ReadRef};

/// One file mapped at `start`, from file offset `offset`.
struct Mapping {
    start: u64,
    offset: u64,
    name: String,
}

/// A note larger than this is not one a kernel or gdb writes.
const MAX_NOTE: u64 = 64 << 20;
/// How much of a mapped file's first page(s) is read to find its build id.
const HEAD_BYTES: u64 = 64 << 10;

/// The `NT_FILE` note: count, page size, `count` (start, end, page offset) triples, then
/// `count` NUL-terminated names.
fn parse_nt_file(desc: &[u8], endian: Endianness) -> anyhow::Result<Vec<Mapping>> {
    let word = |at: usize| -> Option<u64> {
        let bytes: [u8; 8] = desc.get(at..at + 8)?.try_into().ok()?;
        Some(match endian {
            Endianness::Little => u64::from_le_bytes(bytes),
            Endianness::Big => u64::from_be_bytes(bytes),
        })
    };
    let count = word(0).context("NT_FILE note is truncated")?;
    let page_size = word(8).context("NT_FILE note is truncated")?;
    // Each entry takes 24 bytes: a count the note cannot hold is a lie.
    ensure!(
        count.saturating_mul(24) <= desc.len() as u64,
        "NT_FILE note claims {count} files"
    );
    let count = count as usize;
    let mut names = desc[16 + 24 * count..].split(|&b| b == 0);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = 16 + 24 * i;
        let (Some(start), Some(offset)) = (word(at), word(at + 16)) else {
            anyhow::bail!("NT_FILE note is truncated");
        };
        let name = names.next().context("NT_FILE note lacks names")?;
        out.push(Mapping {
            start,
            offset: offset.saturating_mul(page_size),
            name: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Ok(out)
}

/// The GNU build id of the ELF image whose first page the core holds at `start`.
fn build_id_at(
    core: &ReadCache<std::fs::File>,
    loads: &[(u64, u64, u64)],
    start: u64,
) -> Option<String> {
    let &(vaddr, filesz, offset) = loads
        .iter()
        .find(|(vaddr, filesz, _)| *vaddr <= start && start < vaddr.saturating_add(*filesz))?;
    let available = (vaddr + filesz - start).min(HEAD_BYTES);
    let head: &[u8] = core
        .read_bytes_at(offset + (start - vaddr), available)
        .ok()?;
    let header = FileHeader64::<Endianness>::parse(head).ok()?;
    let endian = header.endian().ok()?;
    // The first page maps file offset 0, so the image's notes sit at their file offsets.
    for ph in header.program_headers(endian, head).ok()? {
        if ph.p_type(endian) != elf::PT_NOTE {
            continue;
        }
        let Ok(Some(mut notes)) = ph.notes(endian, head) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                let id: String = note.desc().iter().map(|b| format!("{b:02x}")).collect();
                return (!id.is_empty()).then_some(id);
            }
        }
    }
    None
}

/// (code file, build id) of every ELF image mapped in the core; images whose header the core
/// does not hold come with no id.
pub fn modules(path: &Path) -> anyhow::Result<Vec<(String, Option<String>)>> {
    let file = std::fs::File::open(path)?;
    let core = ReadCache::new(file);
    let header = FileHeader64::<Endianness>::parse(&core)
        .context("not a 64-bit ELF file (32-bit cores are not read)")?;
    let endian = header.endian()?;
    ensure!(header.e_type(endian) == elf::ET_CORE, "not a core file");
    let phdrs = header.program_headers(endian, &core)?;
    let loads: Vec<(u64, u64, u64)> = phdrs
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .map(|ph| (ph.p_vaddr(endian), ph.p_filesz(endian), ph.p_offset(endian)))
        .collect();
    let mut mappings = Vec::new();
    for ph in phdrs.iter().filter(|ph| ph.p_type(endian) == elf::PT_NOTE) {
        ensure!(
            ph.p_filesz(endian) <= MAX_NOTE,
            "a note segment of {} bytes",
            ph.p_filesz(endian)
        );
        let Some(mut notes) = ph.notes(endian, &core)? else {
            continue;
        };
        while let Some(note) = notes.next()? {
            if note.name() == b"CORE" && note.n_type(endian) == elf::NT_FILE {
                mappings.extend(parse_nt_file(note.desc(), endian)?);
            }
        }
    }
    ensure!(!mappings.is_empty(), "the core has no NT_FILE note");
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for mapping in mappings.iter().filter(|m| m.offset == 0) {
        if seen.insert(mapping.name.clone()) {
            out.push((
                mapping.name.clone(),
                build_id_at(&core, &loads, mapping.start),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{parse_nt_file, Endianness};

    #[test]
    fn lying_nt_file_notes_are_errors() {
        let mut desc = Vec::new();
        desc.extend(u64::MAX.to_le_bytes());
        desc.extend(4096u64.to_le_bytes());
        assert!(parse_nt_file(&desc, Endianness::Little).is_err());
        assert!(parse_nt_file(&desc[..4], Endianness::Little).is_err());
        let mut one = Vec::new();
        one.extend(1u64.to_le_bytes());
        one.extend(4096u64.to_le_bytes());
        one.extend(0x1000u64.to_le_bytes());
        one.extend(0x2000u64.to_le_bytes());
        one.extend(2u64.to_le_bytes());
        one.extend(b"/lib/x.so\0");
        let m = parse_nt_file(&one, Endianness::Little).unwrap();
        assert_eq!(
            (m[0].start, m[0].offset, m[0].name.as_str()),
            (0x1000, 8192, "/lib/x.so")
        );
    }
}
