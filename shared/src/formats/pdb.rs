//! MSF 7.00 PDB files: GUID from the PDB info stream (1), age from the DBI stream (3).
//!
//! Written by hand on purpose: the `pdb` crate reads the whole stream directory and the whole
//! DBI stream (megabytes in large PDBs) to answer two questions that live in the first 28 bytes
//! of stream 1 and the first 64 bytes of stream 3. Here the directory is read piecewise, so a
//! PDB of any size is identified with a handful of small ranged reads. The `pdb` crate is still
//! the reference: the tests check this reader against it.

mod sources;

use debugid::DebugId;

use super::{le_u16, le_u32, Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind};
use crate::reader::{read_vec, RangeReader};

/// The 32-byte signature of an MSF 7.00 container.
pub const MSF7_MAGIC: &[u8; 32] = b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0";

const SUPERBLOCK_LEN: usize = 56;
pub(crate) const PDB_INFO_STREAM: u32 = 1;
pub(crate) const DBI_STREAM: u32 = 3;
pub(crate) const INFO_HEADER_LEN: usize = 28;
pub(crate) const DBI_HEADER_LEN: usize = 64;
pub(crate) const DBI_SIGNATURE: u32 = 0xffff_ffff;
pub(crate) const DBI_VERSION_V70: u32 = 19990903;
/// The stream directory of a multi-gigabyte PDB is a few megabytes; more is a lie.
const MAX_DIRECTORY_BYTES: u32 = 256 * 1024 * 1024;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Pdb;

fn io(err: std::io::Error) -> FormatError {
    FormatError::from_io(Format::Pdb, err)
}

/// The MSF container: block size and where the stream directory's blocks are.
struct Msf<'r> {
    reader: &'r dyn RangeReader,
    block_size: u32,
    num_blocks: u32,
    /// Blocks holding the stream directory, in order.
    directory_blocks: Vec<u32>,
    directory_len: u32,
}

impl<'r> Msf<'r> {
    fn open(reader: &'r dyn RangeReader) -> Result<Self, FormatError> {
        let sb = read_vec(reader, 0, SUPERBLOCK_LEN).map_err(io)?;
        if !sb.starts_with(MSF7_MAGIC) {
            return Err(FormatError::malformed(FORMAT, "not an MSF 7.00 superblock"));
        }
        let field =
            |at| le_u32(&sb, at).ok_or_else(|| FormatError::malformed(FORMAT, "short superblock"));
        let block_size = field(32)?;
        let num_blocks = field(40)?;
        let directory_len = field(44)?;
        let block_map_addr = field(52)?;
        if !block_size.is_power_of_two() || !(512..=32768).contains(&block_size) {
            return Err(FormatError::malformed(
                FORMAT,
                format!("unsupported block size {block_size}"),
            ));
        }
        let capacity = u64::from(num_blocks) * u64::from(block_size);
        if directory_len == 0
            || directory_len > MAX_DIRECTORY_BYTES
            || u64::from(directory_len) > capacity
        {
            return Err(FormatError::malformed(
                FORMAT,
                format!("stream directory size {directory_len} is implausible"),
            ));
        }
        let mut msf = Msf {
            reader,
            block_size,
            num_blocks,
            directory_blocks: Vec::new(),
            directory_len,
        };
        let count = directory_len.div_ceil(block_size) as usize;
        // The block map: `count` block numbers, stored from block `block_map_addr` on.
        let raw = read_vec(reader, msf.block_offset(block_map_addr)?, count * 4).map_err(io)?;
        msf.directory_blocks = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for &block in &msf.directory_blocks {
            msf.block_offset(block)?;
        }
        Ok(msf)
    }

    fn block_offset(&self, block: u32) -> Result<u64, FormatError> {
        if block >= self.num_blocks {
            return Err(FormatError::malformed(
                FORMAT,
                format!("block {block} is past the last block {}", self.num_blocks),
            ));
        }
        Ok(u64::from(block) * u64::from(self.block_size))
    }

    /// Reads `len` bytes at `offset` of the stream directory, following its block list.
    fn directory_bytes(&self, offset: u64, len: usize) -> Result<Vec<u8>, FormatError> {
        if offset + len as u64 > u64::from(self.directory_len) {
            return Err(FormatError::malformed(
                FORMAT,
                "stream directory is shorter than its stream table",
            ));
        }
        let bs = u64::from(self.block_size);
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        while out.len() < len {
            let block = self.directory_blocks[(pos / bs) as usize];
            let within = pos % bs;
            let take = ((bs - within) as usize).min(len - out.len());
            let at = self.block_offset(block)? + within;
            out.extend(read_vec(self.reader, at, take).map_err(io)?);
            pos += take as u64;
        }
        Ok(out)
    }

    fn directory_u32(&self, offset: u64) -> Result<u32, FormatError> {
        let b = self.directory_bytes(offset, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The first `len` bytes of `stream`, or `None` when the stream is absent or shorter.
    fn stream_head(&self, stream: u32, len: usize) -> Result<Option<Vec<u8>>, FormatError> {
        let num_streams = self.directory_u32(0)?;
        if stream >= num_streams {
            return Ok(None);
        }
        // Directory: num_streams, sizes[num_streams], then each stream's block list in order.
        let blocks_for = |size: u32| {
            if size == u32::MAX {
                0 // a nil stream
            } else {
                u64::from(size.div_ceil(self.block_size))
            }
        };
        let mut list_offset = 4 + 4 * u64::from(num_streams);
        for earlier in 0..stream {
            let size = self.directory_u32(4 + 4 * u64::from(earlier))?;
            list_offset += 4 * blocks_for(size);
        }
        let size = self.directory_u32(4 + 4 * u64::from(stream))?;
        if size == u32::MAX || (size as usize) < len {
            return Ok(None);
        }
        // Every header read here fits in the stream's first block (blocks are >= 512 bytes).
        let first_block = self.directory_u32(list_offset)?;
        let at = self.block_offset(first_block)?;
        read_vec(self.reader, at, len).map(Some).map_err(io)
    }
}

pub use sources::{read_sources, read_srcsrv, SrcsrvUnread};

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let msf = Msf::open(reader)?;
    let info = msf
        .stream_head(PDB_INFO_STREAM, INFO_HEADER_LEN)?
        .ok_or_else(|| FormatError::malformed(FORMAT, "no PDB info stream"))?;
    let dbi = msf.stream_head(DBI_STREAM, DBI_HEADER_LEN)?;
    identity_from_streams(Format::Pdb, &info, dbi.as_deref())
}

/// The identity of a PDB from the heads of its info stream (1) and DBI stream (3), whatever
/// container they came from (MSF here, MSFZ in `pdz.rs`).
pub(crate) fn identity_from_streams(
    format: Format,
    info: &[u8],
    dbi: Option<&[u8]>,
) -> Result<Identity, FormatError> {
    if info.len() < INFO_HEADER_LEN {
        return Err(FormatError::malformed(format, "PDB info stream too short"));
    }
    // Info stream header: version, signature (timestamp), age, GUID.
    let info_age = le_u32(info, 8).unwrap_or(0);
    let guid = &info[12..28];

    let dbi_header = dbi
        .filter(|h| le_u32(h, 0) == Some(DBI_SIGNATURE) && le_u32(h, 4) == Some(DBI_VERSION_V70));
    // KEYS.md §2: the DBI age wins when its header is valid (it is what the PE's CodeView
    // record carries after incremental links), else the info-stream age.
    let age = dbi_header.and_then(|h| le_u32(h, 8)).unwrap_or(info_age);
    let machine = dbi_header.and_then(|h| le_u16(h, 58));

    let mut id = Identity::new(format, Kind::Debug);
    id.debug_id = DebugId::from_guid_age(guid, age)
        .map_err(|_| FormatError::malformed(format, "bad GUID in info stream"))?;
    id.age = Some(age);
    id.arch = machine.map_or(Arch::Unknown, super::pe::arch_name);
    id.has_debug_info = true;
    Ok(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{identify, DebugId};
    use crate::reader::MemReader;
    pub(crate) use crate::testing::builders::{build_msf, dbi_stream, info_stream};
    use crate::{FormatError, Kind};

    const GUID: [u8; 16] = [
        0xf6, 0x72, 0x7b, 0x49, 0x0a, 0x39, 0xfc, 0x44, 0x87, 0x8e, 0x5a, 0x2d, 0x63, 0xb6, 0xcc,
        0x4b,
    ];

    fn pdb(block_size: u32, info_age: u32, dbi: Option<Vec<u8>>) -> Vec<u8> {
        build_msf(
            block_size,
            &[
                Some(vec![0; 10]),
                Some(info_stream(GUID, info_age)),
                Some(vec![1; 700]),
                dbi,
            ],
        )
    }

    #[test]
    fn age_comes_from_the_dbi_stream() {
        let file = pdb(4096, 1, Some(dbi_stream(0x1b, 0x8664)));
        let id = identify(&MemReader(file)).unwrap();
        assert_eq!(
            id.debug_id.to_string(),
            "497b72f6-390a-44fc-878e-5a2d63b6cc4b-1b"
        );
        assert_eq!(id.age, Some(0x1b));
        assert_eq!(id.arch, "x86_64");
        assert_eq!(id.kind, Kind::Debug);
    }

    #[test]
    fn invalid_dbi_header_falls_back_to_the_info_age() {
        let mut bad = dbi_stream(7, 0x14c);
        bad[4] ^= 1; // wrong version
        let id = identify(&MemReader(pdb(1024, 3, Some(bad)))).unwrap();
        assert_eq!(id.age, Some(3));
        assert_eq!(id.arch, "unknown");
        let id = identify(&MemReader(pdb(512, 5, None))).unwrap();
        assert_eq!(id.age, Some(5));
    }

    #[test]
    fn every_block_size_works() {
        for bs in [512, 1024, 2048, 4096, 8192] {
            let id = identify(&MemReader(pdb(bs, 1, Some(dbi_stream(2, 0x14c))))).unwrap();
            assert_eq!(id.age, Some(2), "block size {bs}");
            assert_eq!(id.arch, "x86");
        }
    }

    #[test]
    fn matches_the_pdb_crate() {
        let file = pdb(4096, 1, Some(dbi_stream(0x2a, 0x14c)));
        let mut reference = ::pdb::PDB::open(std::io::Cursor::new(file.clone())).unwrap();
        let info = reference.pdb_information().unwrap();
        let dbi = reference.debug_information().unwrap();
        let id = identify(&MemReader(file)).unwrap();
        let expected = DebugId::from_parts(info.guid, dbi.age().unwrap());
        assert_eq!(id.debug_id, expected);
        assert_eq!(dbi.machine_type().unwrap(), ::pdb::MachineType::X86);
        assert_eq!(id.arch, "x86");
    }

    #[test]
    fn hostile_superblocks_are_errors() {
        let good = pdb(4096, 1, Some(dbi_stream(2, 0x14c)));
        let patch = |at: usize, v: u32| {
            let mut f = good.clone();
            f[at..at + 4].copy_from_slice(&v.to_le_bytes());
            f
        };
        for file in [
            patch(32, 1000),        // block size not a power of two
            patch(32, 1 << 20),     // block size too large
            patch(44, u32::MAX),    // directory size absurd
            patch(44, 0),           // no directory
            patch(52, 0x7fff_ffff), // block map past the end
            patch(40, 2),           // fewer blocks than referenced
            good[..5000].to_vec(),  // truncated
        ] {
            let err = identify(&MemReader(file)).unwrap_err();
            assert!(matches!(err, FormatError::Malformed { .. }), "{err}");
        }
    }
}
