//! Nesting, bombs, huge headers, malformed archives and panicking parsers.

use std::io;
use std::sync::Arc;

use super::{expand_all, expand_seen, files, gzip, tar_of, zip_of, Seen, A, B};
use crate::archive::{expand, expanded_name, Event, ExpandError, Limits, Options, Walker};
use crate::sniff::Container;
use crate::{MemReader, RangeReader};

#[test]
fn archives_nest_one_level_deep() {
    use ::zip::CompressionMethod::Deflated;
    let inner = gzip(&tar_of(&[("a.debug", A)]));
    let innermost = zip_of(&[("deep.txt", B, Deflated)]);
    let middle = zip_of(&[("deep.zip", &innermost, Deflated)]);
    let outer = zip_of(&[
        ("syms/inner.tar.gz", &inner, Deflated),
        ("middle.zip", &middle, Deflated),
    ]);
    let seen = expand_all(&outer, "outer.zip", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [
            ("syms/inner.tar.gz!/a.debug", A),
            ("middle.zip!/deep.zip", innermost.as_slice())
        ]
    );
}

#[test]
fn bombs_are_stopped_by_the_limits() {
    let zeros = vec![0u8; 8 << 20];
    let limits = Limits {
        max_ratio: 100,
        ..Limits::default()
    };
    let options = Options {
        limits,
        ..Options::default()
    };
    // A gzip bomb: no entry larger than 100x the archive is written.
    let seen = expand_all(&gzip(&zeros), "zeros.gz", options).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(name, reason)] if name == "zeros" && reason.contains("expands past")),
        "{seen:?}"
    );
    // A zip bomb is refused on its own claims, before a byte is expanded.
    let bomb = zip_of(&[("z", &zeros, ::zip::CompressionMethod::Deflated)]);
    let seen = expand_all(&bomb, "z.zip", options).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(_, reason)] if reason.contains("over the limits")),
        "{seen:?}"
    );
    // A tar.gz whose stream is a bomb: the big entry is rejected, and the stream stops at
    // the archive's budget (decoding the skipped bytes costs time too).
    let tar = tar_of(&[("a", A), ("zeros", &zeros), ("b", B)]);
    let (seen, result) = expand_seen(&gzip(&tar), "t.tar.gz", options);
    assert_eq!(files(&seen), [("a", A)]);
    assert!(
        matches!(&seen[1], Seen::Rejected(name, _) if name == "zeros"),
        "{seen:?}"
    );
    assert!(
        matches!(result, Err(ExpandError::Malformed(reason)) if reason.contains("expands past"))
    );

    // The number of entries.
    let many: Vec<(String, &[u8])> = (0..10).map(|i| (format!("e{i}"), A)).collect();
    let many: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    let options = Options {
        limits: Limits {
            max_entries: 3,
            ..Limits::default()
        },
        ..Options::default()
    };
    let seen = expand_all(&tar_of(&many), "many.tar", options).unwrap();
    assert_eq!(files(&seen).len(), 3);
    assert!(
        matches!(&seen[3], Seen::Rejected(name, reason) if name == "e3" && reason.contains("more than 3 entries"))
    );
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_huge_tar_extension_header_is_refused_before_it_is_read() {
    // A GNU long-name header declaring 1 GiB of name.
    let mut header = ::tar::Header::new_gnu();
    header.set_entry_type(::tar::EntryType::GNULongName);
    header.set_size(1 << 30);
    header.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend(vec![b'a'; 4 << 20]);
    let mut ustar = tar_of(&[("x", A)]);
    ustar.truncate(512);
    let err = expand_all(&gzip(&bytes), "long.tar.gz", Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExpandError::Malformed(reason) if reason.contains("extension header")),
        "{err}"
    );
}

#[test]
fn malformed_archives_say_so_and_corrupt_entries_are_rejected() {
    use ::zip::CompressionMethod::Deflated;
    let zip = zip_of(&[("a", A, Deflated)]);
    let err = expand_all(&zip[..zip.len() - 10], "cut.zip", Options::default()).unwrap_err();
    assert!(matches!(err, ExpandError::Malformed(_)), "{err}");

    // A gzip stream cut in the middle: the one entry is unreadable.
    let gz = gzip(&vec![7u8; 100_000]);
    let seen = expand_all(&gz[..gz.len() / 2], "cut.gz", Options::default()).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(name, reason)] if name == "cut" && reason.contains("unreadable")),
        "{seen:?}"
    );

    // A corrupt deflate stream inside a zip: that entry is rejected, the next one indexed.
    let data = vec![9u8; 50_000];
    let mut zip = zip_of(&[("bad", &data, Deflated), ("good", B, Deflated)]);
    zip[60] ^= 0xff;
    zip[70] ^= 0xff;
    let seen = expand_all(&zip, "x.zip", Options::default()).unwrap();
    assert!(
        matches!(&seen[0], Seen::Rejected(name, _) if name == "bad"),
        "{seen:?}"
    );
    assert_eq!(files(&seen), [("good", B)]);
}

#[test]
fn a_visitor_error_stops_the_walk() {
    let tar = tar_of(&[("a", A), ("b", B)]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = MemReader(tar);
    let mut calls = 0;
    let err = expand(
        &reader,
        Container::Tar,
        "t.tar",
        &Options::default(),
        scratch.path(),
        &mut |_| {
            calls += 1;
            Err(io::Error::other("publishing failed"))
        },
    )
    .unwrap_err();
    assert!(matches!(err, ExpandError::Io(_)));
    assert_eq!(calls, 1);
}

#[test]
fn names_of_single_compressed_files() {
    assert_eq!(expanded_name("a/b/foo.debug.gz"), "foo.debug");
    assert_eq!(expanded_name("syms.tgz"), "syms.tar");
    assert_eq!(expanded_name("syms.tlz"), "syms.tar");
    assert_eq!(expanded_name(".gz"), ".gz");
    assert_eq!(expanded_name("plain"), "plain");
}

/// An archive whose reads past its first 512 bytes panic, as a parser's bug would.
struct PanicsPastTheHeader(Vec<u8>);

impl RangeReader for PanicsPastTheHeader {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        assert!(offset < 512, "a parser's bug");
        MemReader(&self.0).read_exact_at(offset, buf)
    }
}

/// `keys` and `check` call [`expand`] on their own thread: a parser's panic is the archive's
/// fault, told as malformed after the entries before it, not a panic of the command; a panic
/// in the caller's own `visit` is the caller's and goes on.
#[test]
fn expand_tells_a_parser_panic_as_a_malformed_archive() {
    let tar = tar_of(&[("a", &vec![2u8; 256]), ("b", &vec![1u8; 2 << 20])]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = PanicsPastTheHeader(tar);
    let mut seen = Vec::new();
    let walked = expand(
        &reader,
        Container::Tar,
        "t.tar",
        &Options::default(),
        scratch.path(),
        &mut |event| {
            if let Event::File { entry, .. } = event {
                seen.push(entry);
            }
            Ok(())
        },
    );
    assert!(
        matches!(&walked, Err(ExpandError::Malformed(reason)) if reason.contains("panicked: a parser's bug")),
        "{walked:?}"
    );
    assert_eq!(seen, ["a"]);

    let ours = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        expand(
            &MemReader(&tar_of(&[("a", A)])),
            Container::Tar,
            "t.tar",
            &Options::default(),
            scratch.path(),
            &mut |_| panic!("the caller's bug"),
        )
    }));
    let panic = ours.expect_err("the caller's panic was caught");
    assert_eq!(crate::panic_message(&*panic), "the caller's bug");
}

/// A walk whose parser panics ends with the archive malformed (a record saying why), not an
/// I/O error that would be retried until the queue gives up: the same bytes panic again.
#[tokio::test]
async fn a_walk_that_panics_ends_with_the_archive_malformed() {
    let tar = tar_of(&[("a", A), ("b", &vec![1u8; 2 << 20])]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = Arc::new(PanicsPastTheHeader(tar));
    let mut walk = Walker::start(
        reader,
        Container::Tar,
        "t.tar".into(),
        Options::default(),
        scratch.path().into(),
    )
    .unwrap();
    while walk.next().await.is_some() {}
    let err = walk.finish().unwrap_err();
    assert!(
        matches!(&err, ExpandError::Malformed(reason) if reason.contains("panicked: a parser's bug")),
        "{err}"
    );
}
