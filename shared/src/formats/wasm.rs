//! WebAssembly modules: the `build_id` custom section (tool-conventions BuildId.md) and
//! whether DWARF is present (`.debug_info` custom section).
//!
//! Hand-written: `object`'s WASM reader parses the whole module with `wasmparser`; identifying
//! needs only the section headers, which are walked here with one small read per section.

use debugid::{CodeId, DebugId};
use uuid::Uuid;

use super::{hex, Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};
use crate::reader::{read_up_to, RangeReader};

/// Modules with more sections than this are not walked further (real ones have a few dozen).
const MAX_SECTIONS: usize = 10_000;
/// Bytes read at the start of each section: id, size, and a custom section's name.
const SECTION_HEAD_LEN: usize = 64;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Wasm;

/// Decodes an unsigned LEB128 u32 at `*pos`.
fn varuint32(data: &[u8], pos: &mut usize) -> Option<u32> {
    let mut result: u32 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *data.get(*pos)?;
        *pos += 1;
        result |= u32::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(result);
        }
    }
    None
}

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let io = |e| FormatError::from_io(Format::Wasm, e);
    let header = read_up_to(reader, 0, 8).map_err(io)?;
    if header.len() < 8 || &header[..4] != b"\0asm" {
        return Err(FormatError::malformed(FORMAT, "truncated header"));
    }
    let mut id = Identity::new(Format::Wasm, Kind::Library);
    id.arch = Arch::Wasm32;
    let size = reader.size();
    let mut offset = 8u64;
    let mut sections = 0;
    let mut has_code = false;
    while offset < size {
        sections += 1;
        if sections > MAX_SECTIONS {
            return Err(FormatError::malformed(
                FORMAT,
                format!("more than {MAX_SECTIONS} sections"),
            ));
        }
        let head = read_up_to(reader, offset, SECTION_HEAD_LEN).map_err(io)?;
        let mut pos = 1;
        let section_id = head[0];
        let len = varuint32(&head, &mut pos).ok_or_else(|| {
            FormatError::malformed(FORMAT, format!("bad section size at offset {offset}"))
        })?;
        let body = offset + pos as u64;
        let end = body + u64::from(len);
        if end > size {
            return Err(FormatError::malformed(
                FORMAT,
                format!("section at offset {offset} runs past the end"),
            ));
        }
        // Section 10 is the code section: a module without one is a debug companion.
        has_code |= section_id == 10;
        if section_id == 0 {
            let name_len = varuint32(&head, &mut pos)
                .ok_or_else(|| FormatError::malformed(FORMAT, "bad custom section name"))?
                as usize;
            let name = head.get(pos..pos + name_len).unwrap_or(&[]);
            let payload = offset + (pos + name_len) as u64;
            match name {
                b"build_id" if id.build_id.is_none() => {
                    let take = usize::try_from(end.saturating_sub(payload))
                        .unwrap_or(0)
                        .min(4096);
                    let raw = read_up_to(reader, payload, take).map_err(io)?;
                    // Tool-conventions BuildId.md: varuint32 length, then the id. Older
                    // producers (and the symbolic / SymbolStore fixtures) wrote the raw id
                    // with no length: when the length does not span the payload, take it all.
                    let mut p = 0;
                    let bytes = match varuint32(&raw, &mut p) {
                        Some(n) if p + n as usize == raw.len() => &raw[p..],
                        _ => &raw[..],
                    };
                    if !bytes.is_empty() {
                        if bytes.len() != raw.len() {
                            id.build_id_payload = Some(hex(&raw));
                        }
                        let mut first16 = [0u8; 16];
                        let k = bytes.len().min(16);
                        first16[..k].copy_from_slice(&bytes[..k]);
                        id.debug_id = DebugId::from_uuid(Uuid::from_bytes(first16));
                        id.code_id = Some(CodeId::new(hex(bytes)));
                        id.build_id = Some(hex(bytes));
                    }
                }
                b".debug_info" => id.has_debug_info = true,
                _ => {}
            }
        }
        offset = end;
    }
    // KEYS.md §2: custom sections only (what `llvm-objcopy --only-keep-debug` leaves) plus
    // DWARF is a debug companion, not a second module that would conflict with the real one.
    if !has_code && id.has_debug_info {
        id.kind = Kind::Debug;
    }
    Ok(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::identify;
    use crate::formats::hex;
    use crate::reader::MemReader;
    use crate::Kind;

    fn leb(mut v: u32) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn custom(name: &str, payload: &[u8]) -> Vec<u8> {
        let mut body = leb(name.len() as u32);
        body.extend(name.as_bytes());
        body.extend(payload);
        let mut s = vec![0u8];
        s.extend(leb(body.len() as u32));
        s.extend(body);
        s
    }

    /// A module with one empty function, an optional build id and optional `.debug_info`.
    pub(crate) fn build_wasm(build_id: Option<&[u8]>, debug_info: bool) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend([1u8, 4, 1, 0x60, 0, 0]); // type section: one func type () -> ()
        m.extend([3u8, 2, 1, 0]); // function section: one function of type 0
        m.extend([10u8, 4, 1, 2, 0, 0x0b]); // code section: one body, no locals, `end`
        if debug_info {
            m.extend(custom(".debug_info", &[0u8; 200]));
        }
        if let Some(id) = build_id {
            let mut payload = leb(id.len() as u32);
            payload.extend(id);
            m.extend(custom("build_id", &payload));
        }
        m
    }

    #[test]
    fn build_id_without_its_length_byte() {
        let bid: Vec<u8> = (0x53..0x63).collect();
        let id = identify(&MemReader(build_wasm(Some(&bid), true))).unwrap();
        assert_eq!(id.build_id.as_deref(), Some(hex(&bid).as_str()));
        assert_eq!(
            id.debug_id.to_string(),
            "53545556-5758-595a-5b5c-5d5e5f606162"
        );
        assert!(id.has_debug_info);
        assert_eq!(id.arch, "wasm32");
    }

    #[test]
    fn long_ids_keep_their_full_code_id() {
        let bid = [0xabu8; 20];
        let id = identify(&MemReader(build_wasm(Some(&bid), false))).unwrap();
        assert_eq!(id.code_id.unwrap().as_str(), "ab".repeat(20));
        assert_eq!(
            id.debug_id.to_string(),
            "abababab-abab-abab-abab-abababababab"
        );
    }

    #[test]
    fn legacy_build_id_without_length_is_taken_whole() {
        let raw: Vec<u8> = (0xb0..0xc0).collect();
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend(custom("build_id", &raw));
        let id = identify(&MemReader(m)).unwrap();
        assert_eq!(id.build_id.as_deref(), Some(hex(&raw).as_str()));
    }

    #[test]
    fn the_whole_payload_is_kept_when_it_has_a_length_byte() {
        let bid = [0xabu8; 20];
        let id = identify(&MemReader(build_wasm(Some(&bid), true))).unwrap();
        assert_eq!(
            id.build_id_payload.as_deref(),
            Some(format!("14{}", "ab".repeat(20)).as_str()),
            "LLVM's payload: varuint32 length 20, then the id"
        );
        assert_eq!(id.kind, Kind::Library, "a module with code");
        let mut legacy = b"\0asm\x01\0\0\0".to_vec();
        legacy.extend(custom("build_id", &bid));
        assert_eq!(identify(&MemReader(legacy)).unwrap().build_id_payload, None);
    }

    #[test]
    fn custom_sections_only_with_dwarf_is_a_debug_companion() {
        let bid = [0x11u8; 16];
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend(custom(".debug_info", &[0u8; 64]));
        let mut payload = leb(16);
        payload.extend(bid);
        m.extend(custom("build_id", &payload));
        let id = identify(&MemReader(m)).unwrap();
        assert_eq!(id.kind, Kind::Debug);
        assert_eq!(id.build_id.as_deref(), Some("11".repeat(16).as_str()));
    }

    #[test]
    fn no_build_id_means_nil() {
        let id = identify(&MemReader(build_wasm(None, false))).unwrap();
        assert!(id.debug_id.is_nil());
        assert!(id.code_id.is_none());
    }

    #[test]
    fn truncated_and_lying_sections_are_errors() {
        let m = build_wasm(Some(&[1, 2, 3, 4]), true);
        assert!(identify(&MemReader(m[..m.len() - 3].to_vec())).is_err());
        let mut lying = b"\0asm\x01\0\0\0".to_vec();
        lying.extend([0u8, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(identify(&MemReader(lying)).is_err());
        assert!(identify(&MemReader(b"\0asm".to_vec())).is_err());
    }
}
