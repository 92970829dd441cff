//! Mach-O, thin and fat (32- and 64-bit fat headers): one identity per slice, from LC_UUID,
//! the CPU type and the file type (MH_DSYM marks a debug companion).

use debugid::{CodeId, DebugId};
use object::macho::{self, FatArch32, FatArch64};
use object::read::macho::{FatArch, MachHeader, MachOFatFile};
use object::{Endianness, ReadCache, ReadRef};
use uuid::Uuid;

use super::{be_u32, hex, Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};
use crate::reader::{RangeReader, ReaderCursor};

/// KEYS.md §1: a `cafebabe` file with more architectures than this is a Java class file.
const MAX_FAT_ARCHES: u32 = 20;
/// Load command tables beyond this size are not read (real ones are tens of kilobytes).
const MAX_LOAD_COMMANDS_LEN: u32 = 16 * 1024 * 1024;

const FAT_MAGIC: u32 = 0xcafe_babe;
const FAT_MAGIC_64: u32 = 0xcafe_babf;
const MH_EXECUTE: u32 = 2;
const MH_DSYM: u32 = 10;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Macho;

pub fn is_macho(head: &[u8]) -> bool {
    match be_u32(head, 0) {
        Some(0xfeed_face | 0xfeed_facf | 0xcefa_edfe | 0xcffa_edfe) => true,
        Some(FAT_MAGIC) => be_u32(head, 4).is_some_and(|n| (1..=MAX_FAT_ARCHES).contains(&n)),
        Some(FAT_MAGIC_64) => true,
        _ => false,
    }
}

pub fn identify(reader: &dyn RangeReader) -> Result<Vec<Identity>, FormatError> {
    let cache = ReadCache::new(ReaderCursor::new(reader));
    let data = &cache;
    let magic = data
        .read_bytes_at(0, 4)
        .map_err(|()| FormatError::malformed(FORMAT, "truncated"))?;
    let magic = u32::from_be_bytes([magic[0], magic[1], magic[2], magic[3]]);
    match magic {
        FAT_MAGIC => {
            let fat = MachOFatFile::<FatArch32>::parse(data)
                .map_err(|e| FormatError::malformed(FORMAT, format!("fat header: {e}")))?;
            identify_slices(data, fat.arches())
        }
        FAT_MAGIC_64 => {
            let fat = MachOFatFile::<FatArch64>::parse(data)
                .map_err(|e| FormatError::malformed(FORMAT, format!("fat header: {e}")))?;
            identify_slices(data, fat.arches())
        }
        _ => identify_thin(data, 0).map(|id| vec![id]),
    }
}

fn identify_slices<'a, Fat: FatArch>(
    data: &'a ReadCache<ReaderCursor<'a>>,
    arches: &[Fat],
) -> Result<Vec<Identity>, FormatError> {
    if arches.is_empty() || arches.len() > MAX_FAT_ARCHES as usize {
        return Err(FormatError::malformed(
            FORMAT,
            format!("fat file with {} architectures", arches.len()),
        ));
    }
    let mut ids = Vec::with_capacity(arches.len());
    for (index, arch) in arches.iter().enumerate() {
        let (offset, size) = arch.file_range();
        let slice = data.range(offset, size);
        let mut id = identify_thin(slice, offset).map_err(|e| {
            FormatError::malformed(FORMAT, format!("slice {index} at offset {offset}: {e}"))
        })?;
        id.slice = Some(index as u32);
        ids.push(id);
    }
    Ok(ids)
}

/// One Mach-O image at offset 0 of `data` (`base` only for messages).
fn identify_thin<'a, R: ReadRef<'a>>(data: R, base: u64) -> Result<Identity, FormatError> {
    let magic = data
        .read_bytes_at(0, 4)
        .map_err(|()| FormatError::malformed(FORMAT, format!("truncated image at {base}")))?;
    match u32::from_be_bytes([magic[0], magic[1], magic[2], magic[3]]) {
        0xfeed_face | 0xcefa_edfe => identify_header::<macho::MachHeader32<Endianness>, R>(data),
        0xfeed_facf | 0xcffa_edfe => identify_header::<macho::MachHeader64<Endianness>, R>(data),
        other => Err(FormatError::malformed(
            FORMAT,
            format!("bad Mach-O magic {other:#010x}"),
        )),
    }
}

fn identify_header<'a, Mach: MachHeader<Endian = Endianness>, R: ReadRef<'a>>(
    data: R,
) -> Result<Identity, FormatError> {
    let header =
        Mach::parse(data, 0).map_err(|e| FormatError::malformed(FORMAT, format!("header: {e}")))?;
    let endian = header
        .endian()
        .map_err(|e| FormatError::malformed(FORMAT, format!("byte order: {e}")))?;
    if header.sizeofcmds(endian) > MAX_LOAD_COMMANDS_LEN {
        return Err(FormatError::malformed(
            FORMAT,
            "load command table too large",
        ));
    }
    let mut commands = header
        .load_commands(endian, data, 0)
        .map_err(|e| FormatError::malformed(FORMAT, format!("load commands: {e}")))?;
    let mut uuid = None;
    let mut has_dwarf = false;
    while let Some(command) = commands
        .next()
        .map_err(|e| FormatError::malformed(FORMAT, format!("load command: {e}")))?
    {
        if let Ok(Some(u)) = command.uuid() {
            uuid.get_or_insert(u.uuid);
        } else if let Ok(Some((segment, _))) = command.segment_64() {
            has_dwarf |= segment.segname.starts_with(b"__DWARF");
        } else if let Ok(Some((segment, _))) = command.segment_32() {
            has_dwarf |= segment.segname.starts_with(b"__DWARF");
        }
    }

    let kind = match header.filetype(endian).0 {
        MH_DSYM => Kind::Debug,
        MH_EXECUTE => Kind::Executable,
        _ => Kind::Library,
    };
    let mut id = Identity::new(Format::Macho, kind);
    id.arch = arch_name(header.cputype(endian).0, header.cpusubtype(endian).0);
    id.has_debug_info = has_dwarf || kind == Kind::Debug;
    if let Some(bytes) = uuid {
        id.debug_id = DebugId::from_uuid(Uuid::from_bytes(bytes));
        id.code_id = Some(CodeId::new(hex(&bytes)));
        id.uuid = Some(hex(&bytes));
    }
    Ok(id)
}

/// Sentry's architecture name for a Mach-O CPU type and subtype (raw values from
/// `<mach/machine.h>`).
pub fn arch_name(cputype: u32, cpusubtype: u32) -> Arch {
    const ABI64: u32 = 0x0100_0000;
    const ABI64_32: u32 = 0x0200_0000;
    const X86: u32 = 7;
    const ARM: u32 = 12;
    const PPC: u32 = 18;
    let subtype = cpusubtype & 0x00ff_ffff;
    match cputype {
        X86 => Arch::X86,
        t if t == X86 | ABI64 && subtype == 8 => Arch::X86_64h,
        t if t == X86 | ABI64 => Arch::X86_64,
        t if t == ARM | ABI64 && subtype == 2 => Arch::Arm64e,
        t if t == ARM | ABI64 => Arch::Arm64,
        t if t == ARM | ABI64_32 => Arch::Arm64_32,
        ARM => match subtype {
            6 => Arch::Armv6,
            9 => Arch::Armv7,
            10 => Arch::Armv7f,
            11 => Arch::Armv7s,
            12 => Arch::Armv7k,
            15 => Arch::Armv7m,
            16 => Arch::Armv7em,
            _ => Arch::Arm,
        },
        PPC => Arch::Ppc,
        t if t == PPC | ABI64 => Arch::Ppc64,
        _ => Arch::Unknown,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{identify, is_macho, FAT_MAGIC, FAT_MAGIC_64, MH_DSYM, MH_EXECUTE};
    use crate::reader::MemReader;
    use crate::Kind;

    const CPU_X86_64: u32 = 0x0100_0007;
    const CPU_ARM64: u32 = 0x0100_000c;
    const MH_DYLIB: u32 = 6;
    const LC_UUID: u32 = 0x1b;
    const LC_SEGMENT_64: u32 = 0x19;

    /// A minimal little-endian 64-bit Mach-O: header, LC_UUID, optionally a __DWARF segment.
    pub(crate) fn build_thin(cputype: u32, filetype: u32, uuid: [u8; 16], dwarf: bool) -> Vec<u8> {
        let mut cmds = Vec::new();
        cmds.extend(LC_UUID.to_le_bytes());
        cmds.extend(24u32.to_le_bytes());
        cmds.extend(uuid);
        let mut ncmds = 1u32;
        if dwarf {
            ncmds += 1;
            cmds.extend(LC_SEGMENT_64.to_le_bytes());
            cmds.extend(72u32.to_le_bytes());
            let mut name = [0u8; 16];
            name[..7].copy_from_slice(b"__DWARF");
            cmds.extend(name);
            cmds.extend([0u8; 48]);
        }
        let mut f = Vec::new();
        f.extend(0xfeed_facfu32.to_le_bytes());
        f.extend(cputype.to_le_bytes());
        f.extend(0u32.to_le_bytes());
        f.extend(filetype.to_le_bytes());
        f.extend(ncmds.to_le_bytes());
        f.extend((cmds.len() as u32).to_le_bytes());
        f.extend(0u32.to_le_bytes());
        f.extend(0u32.to_le_bytes());
        f.extend(cmds);
        f
    }

    /// A fat file (32- or 64-bit fat header) holding the given slices, 4 KiB aligned.
    pub(crate) fn build_fat(slices: &[(u32, Vec<u8>)], fat64: bool) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend(if fat64 { FAT_MAGIC_64 } else { FAT_MAGIC }.to_be_bytes());
        f.extend((slices.len() as u32).to_be_bytes());
        let mut offset = 4096u64;
        let mut bodies = Vec::new();
        for (cputype, body) in slices {
            f.extend(cputype.to_be_bytes());
            f.extend(0u32.to_be_bytes());
            if fat64 {
                f.extend(offset.to_be_bytes());
                f.extend((body.len() as u64).to_be_bytes());
                f.extend(12u32.to_be_bytes());
                f.extend(0u32.to_be_bytes());
            } else {
                f.extend((offset as u32).to_be_bytes());
                f.extend((body.len() as u32).to_be_bytes());
                f.extend(12u32.to_be_bytes());
            }
            bodies.push((offset, body));
            offset += (body.len() as u64).div_ceil(4096) * 4096;
        }
        for (at, body) in bodies {
            f.resize(at as usize, 0);
            f.extend(body);
        }
        f
    }

    const U1: [u8; 16] = *b"\x49\x7b\x72\xf6\x39\x0a\x44\xfc\x87\x8e\x5a\x2d\x63\xb6\xcc\x4b";
    const U2: [u8; 16] = [0x11; 16];

    #[test]
    fn thin_dylib_and_dsym() {
        let ids = identify(&MemReader(build_thin(CPU_ARM64, MH_DYLIB, U1, false))).unwrap();
        assert_eq!(ids.len(), 1);
        assert_eq!(ids[0].arch, "arm64");
        assert_eq!(ids[0].kind, Kind::Library);
        assert_eq!(
            ids[0].debug_id.to_string(),
            "497b72f6-390a-44fc-878e-5a2d63b6cc4b"
        );
        assert_eq!(
            ids[0].code_id.as_ref().unwrap().as_str(),
            "497b72f6390a44fc878e5a2d63b6cc4b"
        );
        let ids = identify(&MemReader(build_thin(CPU_X86_64, MH_DSYM, U1, true))).unwrap();
        assert_eq!(ids[0].kind, Kind::Debug);
        assert!(ids[0].has_debug_info);
    }

    #[test]
    fn fat_files_yield_one_identity_per_slice() {
        for fat64 in [false, true] {
            let file = build_fat(
                &[
                    (CPU_X86_64, build_thin(CPU_X86_64, MH_EXECUTE, U1, false)),
                    (CPU_ARM64, build_thin(CPU_ARM64, MH_EXECUTE, U2, false)),
                ],
                fat64,
            );
            assert!(is_macho(&file));
            let ids = identify(&MemReader(file)).unwrap();
            assert_eq!(ids.len(), 2);
            assert_eq!((ids[0].arch.as_str(), ids[0].slice), ("x86_64", Some(0)));
            assert_eq!((ids[1].arch.as_str(), ids[1].slice), ("arm64", Some(1)));
            assert_eq!(
                ids[1].uuid.as_deref(),
                Some("11111111111111111111111111111111")
            );
            assert_eq!(ids[1].kind, Kind::Executable);
        }
    }

    #[test]
    fn java_class_files_are_not_fat_mach_o() {
        let mut class = vec![0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x34];
        class.extend([0u8; 32]);
        assert!(!is_macho(&class));
    }

    #[test]
    fn broken_slices_are_errors() {
        let mut file = build_fat(
            &[(CPU_ARM64, build_thin(CPU_ARM64, MH_DYLIB, U1, false))],
            false,
        );
        // Slice offset past the end of the file.
        file[16..20].copy_from_slice(&0x7fff_0000u32.to_be_bytes());
        assert!(identify(&MemReader(file)).is_err());
        let thin = build_thin(CPU_ARM64, MH_DYLIB, U1, false);
        assert!(identify(&MemReader(thin[..40].to_vec())).is_err());
    }
}
