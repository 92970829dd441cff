//! Portable PDB (ECMA-335 metadata with a `#Pdb` stream): the 20-byte PDB id, GUID + stamp.
//!
//! Hand-written: no crate in the dependency set reads ECMA-335 metadata roots, and the id sits
//! in a fixed place: the metadata root's stream headers say where `#Pdb` is.

mod sources;

use debugid::DebugId;

use super::{le_u16, le_u32, Format, FormatError};
use crate::identity::{Identity, Kind};
use crate::reader::{read_vec, RangeReader};

const METADATA_SIGNATURE: &[u8; 4] = b"BSJB";
const MAX_STREAMS: u16 = 64;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::PortablePdb;

/// The stream headers of a metadata root at the start of `head`: (name, offset, size).
fn stream_headers(head: &[u8]) -> Result<Vec<(String, u32, u32)>, String> {
    if !head.starts_with(METADATA_SIGNATURE) {
        return Err("no metadata signature".into());
    }
    let version_len = le_u32(head, 12).ok_or("short metadata root")? as usize;
    if version_len > 255 {
        return Err(format!("version string of {version_len} bytes"));
    }
    let mut pos = 16 + version_len.next_multiple_of(4);
    let streams = le_u16(head, pos + 2).ok_or("short metadata root")?;
    if streams > MAX_STREAMS {
        return Err(format!("{streams} metadata streams"));
    }
    pos += 4;
    let mut out = Vec::with_capacity(usize::from(streams));
    for _ in 0..streams {
        let offset = le_u32(head, pos).ok_or("stream headers run past the head")?;
        let size = le_u32(head, pos + 4).ok_or("stream headers run past the head")?;
        let name_start = pos + 8;
        let name_len = head
            .get(name_start..)
            .and_then(|rest| rest.iter().take(32).position(|&b| b == 0))
            .ok_or("unterminated stream name")?;
        let name = String::from_utf8_lossy(&head[name_start..name_start + name_len]);
        out.push((name.into_owned(), offset, size));
        pos = name_start + (name_len + 1).next_multiple_of(4);
    }
    Ok(out)
}

/// Where the `#Pdb` stream is, from a metadata root at the start of `head`.
fn pdb_stream(head: &[u8]) -> Result<(u32, u32), String> {
    stream_headers(head)?
        .into_iter()
        .find(|(name, _, _)| name == "#Pdb")
        .map(|(_, offset, size)| (offset, size))
        .ok_or_else(|| "no #Pdb stream".into())
}

pub use sources::read_sources;

pub fn is_portable_pdb(head: &[u8]) -> bool {
    pdb_stream(head).is_ok()
}

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let head = crate::reader::read_up_to(reader, 0, super::SNIFF_LEN)
        .map_err(|e| FormatError::from_io(Format::PortablePdb, e))?;
    let (offset, size) =
        pdb_stream(&head).map_err(|reason| FormatError::malformed(FORMAT, reason))?;
    if size < 20 {
        return Err(FormatError::malformed(
            FORMAT,
            format!("#Pdb stream of {size} bytes"),
        ));
    }
    let pdb_id = read_vec(reader, u64::from(offset), 20)
        .map_err(|e| FormatError::from_io(Format::PortablePdb, e))?;
    let stamp = le_u32(&pdb_id, 16).unwrap_or(0);
    let mut id = Identity::new(Format::PortablePdb, Kind::Debug);
    id.debug_id = DebugId::from_guid_age(&pdb_id[..16], stamp)
        .map_err(|_| FormatError::malformed(FORMAT, "bad PDB id"))?;
    id.has_debug_info = true;
    Ok(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{identify, is_portable_pdb, read_sources, METADATA_SIGNATURE};
    use crate::reader::MemReader;
    use crate::Format;

    /// A metadata root with `#~` (empty) and `#Pdb` (the id) streams.
    pub(crate) fn build_portable_pdb(guid: [u8; 16], stamp: u32) -> Vec<u8> {
        let version = b"PDB v1.0\0\0\0\0";
        let mut m = Vec::new();
        m.extend(METADATA_SIGNATURE);
        m.extend(1u16.to_le_bytes());
        m.extend(1u16.to_le_bytes());
        m.extend(0u32.to_le_bytes());
        m.extend((version.len() as u32).to_le_bytes());
        m.extend(version);
        m.extend(0u16.to_le_bytes());
        m.extend(2u16.to_le_bytes());
        let header_len = m.len() + 16 + 12;
        let pdb_offset = header_len as u32;
        m.extend(pdb_offset.to_le_bytes());
        m.extend(32u32.to_le_bytes());
        m.extend(b"#Pdb\0\0\0\0");
        m.extend((pdb_offset + 32).to_le_bytes());
        m.extend(0u32.to_le_bytes());
        m.extend(b"#~\0\0");
        assert_eq!(m.len(), header_len);
        m.extend(guid);
        m.extend(stamp.to_le_bytes());
        m.extend([0u8; 12]);
        m
    }

    #[test]
    fn id_is_guid_plus_stamp() {
        let guid = [
            0x84, 0xdc, 0x64, 0xc9, 0x07, 0x5f, 0x41, 0x4e, 0xad, 0x5e, 0x94, 0xbd, 0x05, 0x7a,
            0xa5, 0xe8,
        ];
        let file = build_portable_pdb(guid, 0xa28b_2175);
        assert!(is_portable_pdb(&file));
        let id = identify(&MemReader(file)).unwrap();
        assert_eq!(
            id.debug_id.to_string(),
            "c964dc84-5f07-4e41-ad5e-94bd057aa5e8-a28b2175"
        );
        assert_eq!(id.format, Format::PortablePdb);
    }

    #[test]
    fn documents_and_source_link_are_read() {
        use crate::pdb_sources::ChecksumAlgorithm;
        use crate::testing::source_pdbs::{portable_pdb_with_sources, MD5, SHA256};
        let json = br#"{"documents":{"/src/*":"https://s/src/p/1/*"}}"#;
        let file = portable_pdb_with_sources(
            [5; 20],
            &[
                ("/src/app/Program.cs", SHA256, &[0x11; 32]),
                ("/src/app/Gen.cs", MD5, &[0x22; 16]),
            ],
            Some(json),
        );
        let ids =
            crate::formats::identify_with_details(&MemReader(file.clone()), &Default::default())
                .unwrap();
        let sources = ids[0].pdb_sources.clone().unwrap();
        assert_eq!(sources.unread, Vec::<String>::new());
        assert_eq!(sources.documents[0].path, "/src/app/Program.cs");
        let sha = sources.documents[0].checksum.clone().unwrap();
        assert_eq!(
            (sha.algorithm, sha.digest),
            (ChecksumAlgorithm::Sha256, "11".repeat(32))
        );
        assert_eq!(sources.documents[1].path, "/src/app/Gen.cs");
        assert_eq!(
            sources.documents[1].checksum.as_ref().unwrap().algorithm,
            ChecksumAlgorithm::Md5
        );
        assert_eq!(
            sources
                .source_link
                .unwrap()
                .resolve("/src/app/Gen.cs")
                .as_deref(),
            Some("https://s/src/p/1/app/Gen.cs")
        );
        // Hostile: every cut, every byte of the tables and heaps lying; never a panic.
        for cut in 0..file.len() {
            read_sources(&MemReader(file[..cut].to_vec()));
        }
        for at in 0..file.len() {
            for value in [0xff, 0x80, 0xc0, 0x00] {
                let mut bad = file.clone();
                bad[at] = value;
                read_sources(&MemReader(bad));
            }
        }
    }

    #[test]
    fn broken_roots_are_rejected() {
        let file = build_portable_pdb([1; 16], 1);
        assert!(identify(&MemReader(file[..60].to_vec())).is_err());
        let mut lying = file.clone();
        lying[12..16].copy_from_slice(&100_000u32.to_le_bytes());
        assert!(!is_portable_pdb(&lying));
        assert!(!is_portable_pdb(b"BSJB"));
    }
}
