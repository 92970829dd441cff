//! Byte-level builders of PDBs and Portable PDBs that name their sources (documents with
//! checksums, a Source Link map, a srcsrv stream), written from the published formats.

use uuid::Uuid;

use super::builders::{build_msf, dbi_stream, info_stream};

/// One document of a built PDB: its path, CodeView checksum kind (1 MD5, 2 SHA-1, 3 SHA-256)
/// and checksum bytes.
pub type PdbDocument<'a> = (&'a str, u8, &'a [u8]);

/// A PDB (MSF 7.00, 4 KiB blocks) whose one module names `documents` in its
/// `DEBUG_S_FILECHKSMS` subsection (after a line subsection the reader walks past), with a
/// `srcsrv` and a `sourcelink` named stream when given.
pub fn pdb_with_sources(
    guid: [u8; 16],
    documents: &[PdbDocument],
    srcsrv: Option<&[u8]>,
    sourcelink: Option<&[u8]>,
) -> Vec<u8> {
    let streams: Vec<(&str, &[u8])> = [("srcsrv", srcsrv), ("sourcelink", sourcelink)]
        .into_iter()
        .filter_map(|(name, bytes)| Some((name, bytes?)))
        .collect();
    pdb_with_named_streams(guid, documents, &streams)
}

/// [`pdb_with_sources`] with any named streams (`(name, bytes)`, names as given: two of one
/// name, or one in another case, as a hostile PDB may have them).
pub fn pdb_with_named_streams(
    guid: [u8; 16],
    documents: &[PdbDocument],
    streams: &[(&str, &[u8])],
) -> Vec<u8> {
    // Streams: 0 old directory, 1 info, 2 TPI, 3 DBI, 4 /names, 5 the module, then the
    // named ones in order.
    let mut names = vec![0u8];
    let mut checksums = Vec::new();
    for (path, kind, digest) in documents {
        checksums.extend((names.len() as u32).to_le_bytes());
        names.extend(path.as_bytes());
        names.push(0);
        checksums.push(digest.len() as u8);
        checksums.push(*kind);
        checksums.extend(*digest);
        checksums.resize(checksums.len().next_multiple_of(4), 0);
    }
    let mut string_table = Vec::new();
    string_table.extend(0xeffe_effeu32.to_le_bytes());
    string_table.extend(1u32.to_le_bytes());
    string_table.extend((names.len() as u32).to_le_bytes());
    string_table.extend(&names);
    string_table.extend(0u32.to_le_bytes()); // no hash buckets
    string_table.extend(0u32.to_le_bytes()); // no names hashed
    string_table.extend(0u32.to_le_bytes());

    let mut module = 4u32.to_le_bytes().to_vec(); // CV_SIGNATURE_C13, the symbols' whole
    let symbols = module.len() as u32;
    module.extend(0xf2u32.to_le_bytes()); // DEBUG_S_LINES, walked past
    module.extend(8u32.to_le_bytes());
    module.extend([0u8; 8]);
    module.extend(0xf4u32.to_le_bytes());
    module.extend((checksums.len() as u32).to_le_bytes());
    module.extend(&checksums);
    let c13 = module.len() as u32 - symbols;

    let mut entry = vec![0u8; 64];
    entry[34..36].copy_from_slice(&5u16.to_le_bytes());
    entry[36..40].copy_from_slice(&symbols.to_le_bytes());
    entry[44..48].copy_from_slice(&c13.to_le_bytes());
    entry.extend(b"a.obj\0a.obj\0");
    entry.resize(entry.len().next_multiple_of(4), 0);
    let mut dbi = dbi_stream(1, 0x8664);
    dbi[24..28].copy_from_slice(&(entry.len() as u32).to_le_bytes());
    dbi.extend(&entry);

    let mut named: Vec<(&str, u32)> = vec![("/names", 4)];
    named.extend(
        streams
            .iter()
            .zip(6..)
            .map(|((name, _), stream)| (*name, stream)),
    );
    let mut info = info_stream(guid, 1);
    info.truncate(info.len() - 4);
    let mut buffer = Vec::new();
    let mut entries = Vec::new();
    for (name, stream) in &named {
        entries.extend((buffer.len() as u32).to_le_bytes());
        entries.extend(stream.to_le_bytes());
        buffer.extend(name.as_bytes());
        buffer.push(0);
    }
    info.extend((buffer.len() as u32).to_le_bytes());
    info.extend(&buffer);
    info.extend((named.len() as u32).to_le_bytes()); // size
    info.extend((named.len() as u32).to_le_bytes()); // capacity
    info.extend(1u32.to_le_bytes()); // present: one word
    info.extend(((1u32 << named.len()) - 1).to_le_bytes());
    info.extend(0u32.to_le_bytes()); // deleted: none
    info.extend(&entries);
    info.extend(0u32.to_le_bytes()); // no feature codes

    let mut all = vec![
        Some(vec![0; 10]),
        Some(info),
        Some(vec![0; 56]),
        Some(dbi),
        Some(string_table),
        Some(module),
    ];
    all.extend(streams.iter().map(|(_, bytes)| Some(bytes.to_vec())));
    build_msf(4096, &all)
}

/// The Source Link custom debug information's kind.
const SOURCE_LINK: Uuid = Uuid::from_u128(0xcc110556_a091_4d38_9fec_25ab9a351a6a);
/// Document hash algorithms.
pub const MD5: Uuid = Uuid::from_u128(0x406ea660_64cf_4c82_b6f0_42d48172a799);
pub const SHA256: Uuid = Uuid::from_u128(0x8829d00f_11b8_4213_878b_770e8597ac16);
const CSHARP: Uuid = Uuid::from_u128(0x3f5162f8_07c6_11d3_9053_00c04fa302a1);

/// A blob heap being written: each blob behind its compressed length.
struct Blobs(Vec<u8>);

impl Blobs {
    fn add(&mut self, bytes: &[u8]) -> u16 {
        let at = self.0.len() as u16;
        compressed(&mut self.0, bytes.len() as u32);
        self.0.extend(bytes);
        at
    }
}

fn compressed(out: &mut Vec<u8>, n: u32) {
    if n < 0x80 {
        out.push(n as u8);
    } else if n < 0x4000 {
        out.extend(((n as u16) | 0x8000).to_be_bytes());
    } else {
        out.extend((n | 0xc000_0000).to_be_bytes());
    }
}

/// A Portable PDB (metadata root, `#Pdb`, `#~`, `#GUID`, `#Blob`) whose Document table
/// lists `documents` (path, hash algorithm, hash), with a Source Link custom debug
/// information on the module when given.
pub fn portable_pdb_with_sources(
    id: [u8; 20],
    documents: &[(&str, Uuid, &[u8])],
    sourcelink: Option<&[u8]>,
) -> Vec<u8> {
    let mut blobs = Blobs(vec![0]);
    let guids: Vec<Uuid> = vec![MD5, SHA256, SOURCE_LINK, CSHARP];
    let guid_index = |g: Uuid| {
        guids
            .iter()
            .position(|&x| x == g)
            .map_or(0, |i| i as u16 + 1)
    };
    let mut document_rows = Vec::new();
    for (path, algorithm, hash) in documents {
        let mut name = vec![b'/'];
        for part in path.split('/') {
            let index = if part.is_empty() {
                0
            } else {
                blobs.add(part.as_bytes())
            };
            compressed(&mut name, u32::from(index));
        }
        let name = blobs.add(&name);
        let hash = blobs.add(hash);
        for column in [name, guid_index(*algorithm), hash, guid_index(CSHARP)] {
            document_rows.extend(column.to_le_bytes());
        }
    }
    let mut cdi_rows = Vec::new();
    if let Some(json) = sourcelink {
        let value = blobs.add(json);
        // Parent: the module (HasCustomDebugInformation tag 7, row 1).
        for column in [(1u16 << 5) | 7, guid_index(SOURCE_LINK), value] {
            cdi_rows.extend(column.to_le_bytes());
        }
    }
    let mut tables = Vec::new();
    tables.extend(0u32.to_le_bytes());
    tables.extend([2, 0, 0, 1]); // version 2.0, narrow heaps
    let valid: u64 = (1 << 0x30) | (1 << 0x37);
    tables.extend(valid.to_le_bytes());
    tables.extend(0u64.to_le_bytes());
    tables.extend((documents.len() as u32).to_le_bytes());
    tables.extend((u32::from(sourcelink.is_some())).to_le_bytes());
    tables.extend(&document_rows);
    tables.extend(&cdi_rows);
    tables.resize(tables.len().next_multiple_of(4), 0);

    let mut pdb = id.to_vec();
    pdb.extend(0u32.to_le_bytes()); // no entry point
    pdb.extend(0u64.to_le_bytes()); // no type system tables referenced
    let guid_heap: Vec<u8> = guids.iter().flat_map(|g| g.to_bytes_le()).collect();
    let mut blob_heap = blobs.0;
    blob_heap.resize(blob_heap.len().next_multiple_of(4), 0);

    let streams: [(&[u8], &[u8]); 4] = [
        (b"#Pdb\0\0\0\0", &pdb),
        (b"#~\0\0", &tables),
        (b"#GUID\0\0\0", &guid_heap),
        (b"#Blob\0\0\0", &blob_heap),
    ];
    let version = b"PDB v1.0\0\0\0\0";
    let mut root = Vec::new();
    root.extend(b"BSJB");
    root.extend(1u16.to_le_bytes());
    root.extend(1u16.to_le_bytes());
    root.extend(0u32.to_le_bytes());
    root.extend((version.len() as u32).to_le_bytes());
    root.extend(version);
    root.extend(0u16.to_le_bytes());
    root.extend((streams.len() as u16).to_le_bytes());
    let headers: usize = streams.iter().map(|(name, _)| 8 + name.len()).sum();
    let mut offset = root.len() + headers;
    for (name, data) in &streams {
        root.extend((offset as u32).to_le_bytes());
        root.extend((data.len() as u32).to_le_bytes());
        root.extend(*name);
        offset += data.len();
    }
    for (_, data) in &streams {
        root.extend(*data);
    }
    root
}
