//! Unit tests.
use crate::storage::s3::{copy_source_header, object_metadata, unquote, CONTENT_ETAG_META};

#[test]
fn copy_source_headers_encode_keys() {
    assert_eq!(
        copy_source_header("b", "a b/c+d.pdb", None),
        "b/a%20b/c%2Bd.pdb"
    );
    assert_eq!(copy_source_header("b", "k", Some("v1")), "b/k?versionId=v1");
    assert_eq!(unquote("\"abc\""), "abc");
}

#[test]
fn debuginfod_files_carry_their_headers_as_metadata() {
    let meta = object_metadata("buildid/ab/debuginfo", 42, "e", None);
    assert_eq!(meta["debuginfod-size"], "42");
    assert_eq!(meta["debuginfod-file"], "buildid/ab/debuginfo");
    assert_eq!(meta[CONTENT_ETAG_META], "e");
    let prefixed = object_metadata("cdn/buildid/ab/source/src/\u{e9}.c", 7, "e", None);
    assert_eq!(prefixed["debuginfod-size"], "7");
    assert!(!prefixed.contains_key("debuginfod-file"), "not ASCII");
    let other = object_metadata("symbols/a.pdb/ID/a.pdb", 1, "e", None);
    assert_eq!(other.len(), 1);
}
