//! Source paths read from DWARF line tables: normalized, bounded, rejections counted.

use crate::formats::dwarf::{decompress, normalize, source_paths, MAX_DECOMPRESSED, MAX_PATH_LEN};
use crate::identity::{DwarfLayout, SectionRef};

#[test]
fn paths_are_normalized_like_debuginfod_clients_do() {
    assert_eq!(normalize(b"/a/./b//c/../d.c").unwrap(), "/a/b/d.c");
    assert_eq!(
        normalize(b"/home/ci/src/hello.c").unwrap(),
        "/home/ci/src/hello.c"
    );
    for bad in [
        &b"src/hello.c"[..],
        b"/../etc/passwd",
        b"/a/\x01b.c",
        b"/",
        b"/\xff.c",
    ] {
        assert!(normalize(bad).is_err(), "{bad:?}");
    }
    let long = format!("/{}", "a".repeat(MAX_PATH_LEN));
    assert!(normalize(long.as_bytes()).is_err());
}

#[test]
fn compressed_sections_decompress_within_their_header_size() {
    use std::io::Write;
    let payload = b"line table bytes".repeat(100);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&payload).unwrap();
    let stream = z.finish().unwrap();
    let mut raw = Vec::new();
    raw.extend_from_slice(&1u32.to_le_bytes());
    raw.extend_from_slice(&0u32.to_le_bytes());
    raw.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    raw.extend_from_slice(&1u64.to_le_bytes());
    raw.extend_from_slice(&stream);
    assert_eq!(decompress(&raw, true, true).unwrap(), payload);
    // A header that lies about the size, a huge size, an unknown type, a cut stream.
    let mut lying = raw.clone();
    lying[8..16].copy_from_slice(&10u64.to_le_bytes());
    assert!(decompress(&lying, true, true).is_err());
    let mut huge = raw.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(decompress(&huge, true, true).is_err());
    let mut unknown = raw.clone();
    unknown[0] = 9;
    assert!(decompress(&unknown, true, true).is_err());
    assert!(decompress(&raw[..40], true, true).is_err());
    assert!(decompress(&raw[..10], true, true).is_err());
    // A small stream claiming the most allowed reserves only what it could decode to.
    let mut claiming = raw.clone();
    claiming[8..16].copy_from_slice(&MAX_DECOMPRESSED.to_le_bytes());
    let (result, held) = crate::testing::allocations::measure(|| decompress(&claiming, true, true));
    assert!(result.is_err());
    assert!(
        held <= stream.len() * 1032 + (256 << 10),
        "{held} bytes held"
    );
}

#[test]
fn a_built_line_table_names_its_files_under_its_directory() {
    use crate::testing::builders::{build_elf, dwarf5_line_table, with_section};
    let table = dwarf5_line_table("/ci/work", &["src/a.c", "/usr/include/b.h", "../x/./c.c"]);
    let elf = with_section(
        build_elf(true, false, 62, Some(&[9; 20]), true),
        ".debug_line",
        &table,
    );
    let ids =
        crate::identify_with_details(&crate::reader::MemReader(elf), &Default::default()).unwrap();
    let sources = ids[0].sources.clone().expect("sources read");
    assert_eq!(
        sources.paths,
        ["/ci/work/src/a.c", "/ci/x/c.c", "/usr/include/b.h"]
    );
    // Every cut of the table is an error or fewer paths, never a panic.
    for cut in 0..table.len() {
        let elf = with_section(
            build_elf(true, false, 62, Some(&[9; 20]), true),
            ".debug_line",
            &table[..cut],
        );
        let ids = crate::identify_with_details(&crate::reader::MemReader(elf), &Default::default())
            .unwrap();
        assert!(ids[0].sources.as_ref().is_none_or(|s| s.paths.len() < 3));
    }
}

#[test]
fn md5s_a_line_table_records_are_kept_where_the_tables_agree() {
    use crate::testing::builders::{build_elf, dwarf5_line_table_with_md5, with_section};
    let first = dwarf5_line_table_with_md5(
        "/ci/work",
        &[("a.c", [0xa1; 16]), ("b.h", [0xb1; 16]), ("z.h", [0; 16])],
    );
    // A second unit naming b.h with other bytes (two builds of one header disagree).
    let second =
        dwarf5_line_table_with_md5("/ci/work", &[("b.h", [0xb2; 16]), ("c.c", [0xc1; 16])]);
    let elf = with_section(
        build_elf(true, false, 62, Some(&[9; 20]), true),
        ".debug_line",
        &[first, second].concat(),
    );
    let ids =
        crate::identify_with_details(&crate::reader::MemReader(elf), &Default::default()).unwrap();
    let sources = ids[0].sources.clone().expect("sources read");
    assert_eq!(
        sources.paths,
        [
            "/ci/work/a.c",
            "/ci/work/b.h",
            "/ci/work/c.c",
            "/ci/work/z.h"
        ]
    );
    let md5: Vec<(&str, &str)> = sources
        .md5
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_str()))
        .collect();
    let a1 = "a1".repeat(16);
    let c1 = "c1".repeat(16);
    // b.h disagrees, z.h records zeros: neither has one.
    assert_eq!(
        md5,
        [("/ci/work/a.c", a1.as_str()), ("/ci/work/c.c", c1.as_str())]
    );
}

#[test]
fn garbage_line_tables_are_rejected_not_panics() {
    let reader = crate::reader::MemReader(
        [0xffu8, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0]
            .iter()
            .chain([0u8; 4].iter())
            .chain([7u8, 0, 0, 0, 4, 0].iter())
            .copied()
            .collect::<Vec<u8>>(),
    );
    for size in [4, 12, 16, 22] {
        let layout = DwarfLayout {
            little_endian: true,
            is_64: true,
            sections: vec![SectionRef {
                name: ".debug_line".into(),
                offset: 0,
                size,
                compressed: false,
            }],
        };
        let found = source_paths(&reader, &layout);
        assert!(found.paths.is_empty());
        assert!(!found.rejected.is_empty(), "{size}");
    }
}
