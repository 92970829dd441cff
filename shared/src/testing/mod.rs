//! Test support shared by this crate's tests and the other crates' (feature `testing`).

#[cfg(test)]
pub mod allocations;
pub mod builders;
pub mod failing;
pub mod index_bytes;
pub mod interleave;
pub mod scenarios;
pub mod source_pdbs;

/// Asserts that two stores' files (key -> bytes) are the same, naming the first key that
/// differs rather than printing bytes (which may be megabytes). `context` says which run.
pub fn assert_same_files(
    got: &std::collections::BTreeMap<String, Vec<u8>>,
    want: &std::collections::BTreeMap<String, Vec<u8>>,
    context: &str,
) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{context}: the store's files"
    );
    for (key, bytes) in got {
        assert!(want[key] == *bytes, "{context}: {key} differs");
    }
}

/// Seed inputs for the fuzz targets, made by the same builders the tests use: one well-formed
/// artifact of each format the builders know.
pub fn fuzz_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use builders::{
        build_dwp, build_elf, build_msf, build_msfz, build_pe, build_split_binary, codeview,
        dbi_stream, dwarf5_line_table, dwarf5_line_table_with_md5, info_stream, with_section, Unit,
    };
    let guid = [7u8; 16];
    let pdb_streams = vec![
        Some(vec![]),
        Some(info_stream(guid, 1)),
        None,
        Some(dbi_stream(1, 0x8664)),
    ];
    vec![
        ("elf64.bin", build_elf(true, false, 62, Some(&[0x5a; 20]), true)),
        ("elf32be.bin", build_elf(false, true, 8, Some(&[0x11; 8]), false)),
        ("elf-no-id.bin", build_elf(true, false, 183, None, false)),
        (
            "elf-dwarf5-lines.bin",
            with_section(
                build_elf(true, false, 62, Some(&[0x6b; 20]), true),
                ".debug_line",
                &dwarf5_line_table("/ci/work", &["src/a.c", "../include/b.h"]),
            ),
        ),
        (
            "elf-dwarf5-md5.bin",
            with_section(
                build_elf(true, false, 62, Some(&[0x6c; 20]), true),
                ".debug_line",
                &dwarf5_line_table_with_md5("/ci/work", &[("a.c", [1; 16]), ("b.h", [2; 16])]),
            ),
        ),
        (
            "pe.bin",
            build_pe(true, 0x8664, true, &[codeview(guid, 1, "C:\\b\\a.pdb", 0, 0)], true),
        ),
        ("dwp-v2.bin", build_dwp(2, &[0x5cc8_2758_0275_ff35, 0x8e92_ec6f_450b_ffe7])),
        ("dwp-v5.bin", build_dwp(5, &[0x57ae_4f79_97db_4c94])),
        (
            "elf-skeletons.bin",
            build_split_binary(&[Unit::Skeleton4(0x5857_625a_300c_75c2), Unit::Skeleton5(9)]),
        ),
        ("pdb.bin", build_msf(4096, &pdb_streams)),
        ("pdz.bin", build_msfz(&pdb_streams, true)),
        ("pdz-plain.bin", build_msfz(&pdb_streams, false)),
        (
            "pdb-sources.bin",
            source_pdbs::pdb_with_sources(
                guid,
                &[("C:\\b\\a.cpp", 1, &[1; 16]), ("C:\\b\\a.h", 3, &[2; 32])],
                Some(b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\nSRCSRVCMD=x\r\n"),
                Some(br#"{"documents":{"C:\\b\\*":"https://s/*"}}"#),
            ),
        ),
        (
            "portablepdb-sources.bin",
            source_pdbs::portable_pdb_with_sources(
                [8; 20],
                &[("/src/a.cs", source_pdbs::SHA256, &[3; 32])],
                Some(br#"{"documents":{"/src/*":"https://s/*"}}"#),
            ),
        ),
        (
            "breakpad.sym",
            b"MODULE Linux x86_64 56258F1D30ED2FC074F5A3C1FC68F0ED0 libfoo.so\nINFO CODE_ID 1D8F2556ED30C02F74F5A3C1FC68F0ED70AC2477 libfoo.so\n".to_vec(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    /// `make fuzz` runs this to write the seed corpus into `$SYMDEX_FUZZ_SEEDS`.
    #[test]
    #[ignore = "writes the fuzz seed corpus; run by `make fuzz`"]
    fn write_fuzz_seeds() {
        let dir = std::env::var("SYMDEX_FUZZ_SEEDS").expect("set SYMDEX_FUZZ_SEEDS");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in super::fuzz_seeds() {
            std::fs::write(std::path::Path::new(&dir).join(name), bytes).unwrap();
        }
    }

    #[test]
    fn every_fuzz_seed_is_identified() {
        for (name, bytes) in super::fuzz_seeds() {
            let ids = crate::identify_with_details(&crate::MemReader(&bytes), &Default::default());
            assert!(ids.is_ok(), "{name}: {ids:?}");
        }
    }
}
