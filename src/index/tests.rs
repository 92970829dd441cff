//! Unit tests of `symdex index`'s reading.
use super::read::{read_small, READ_WHOLE_BELOW};

/// A small input is read whole in one go, whatever its status said; one that has grown
/// past the bound since is not held (read as a large one), and never more than the bound
/// plus a byte is read.
#[test]
fn a_small_input_is_read_whole_up_to_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::write(&small, b"0123456789").unwrap();
    // Its status said less than it holds now: all of it all the same.
    assert_eq!(
        read_small(&small, 3).unwrap().as_deref(),
        Some(&b"0123456789"[..])
    );
    let grown = dir.path().join("grown");
    std::fs::write(&grown, vec![7u8; READ_WHOLE_BELOW as usize + 10]).unwrap();
    assert_eq!(read_small(&grown, 10).unwrap(), None);
    let at_bound = dir.path().join("at-bound");
    std::fs::write(&at_bound, vec![7u8; READ_WHOLE_BELOW as usize]).unwrap();
    assert_eq!(
        read_small(&at_bound, READ_WHOLE_BELOW)
            .unwrap()
            .map(|b| b.len()),
        Some(READ_WHOLE_BELOW as usize)
    );
}

/// A careless operator's prefix under the store's private `_symdex/` (records, compressed
/// copies) is refused; other prefixes are taken as given.
#[test]
fn a_layout_prefix_under_the_private_prefix_is_refused() {
    let refused = super::parse_prefix("debuginfod=_symdex/encoded/zstd").unwrap_err();
    assert!(refused.contains("_symdex/"), "{refused}");
    assert!(super::parse_prefix("debuginfod=/_symdex/refs/").is_err());
    let taken = super::parse_prefix("unified=sentry").unwrap();
    assert_eq!(taken.1, "sentry/");
}
