//! Debian, RPM, cpio and Alpine packages.

use super::{
    ar_of, bzip2, cpio_of, deb_of, expand_all, expand_seen_as, files, gzip, rpm_of, tar_of, xz,
    zip_of, zstd, Seen, A, B, REGULAR,
};
use crate::archive::{ExpandError, Options};
use crate::sniff::Container;

#[test]
fn debian_packages_are_expanded_through_their_data_tarball() {
    // An odd-sized entry and member: padding is skipped as ar writes it. (The tar writer
    // drops the `./` dpkg-deb's names start with: the integration test has them.)
    let debug = b"an odd-sized debug file";
    let tar = tar_of(&[
        ("./usr/lib/debug/.build-id/ab/cdef.debug", debug),
        ("./usr/share/doc/p/copyright", B),
    ]);
    for (name, bytes) in [
        ("data.tar", tar.clone()),
        ("data.tar.gz", gzip(&tar)),
        ("data.tar.xz", xz(&tar)),
        ("data.tar.zst", zstd(&tar)),
        ("data.tar.bz2", bzip2(&tar)),
    ] {
        let package = deb_of(name, &bytes);
        let seen = expand_all(&package, "p-dbgsym_1.0_amd64.ddeb", Options::default()).unwrap();
        let debug_entry = format!("{name}!/usr/lib/debug/.build-id/ab/cdef.debug");
        let copyright = format!("{name}!/usr/share/doc/p/copyright");
        assert_eq!(
            files(&seen),
            [(debug_entry.as_str(), &debug[..]), (copyright.as_str(), B)],
            "{name}"
        );
        let skipped: Vec<&str> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Skipped(entry, reason) if reason.contains("package metadata") => {
                    Some(entry.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(skipped, ["debian-binary", "control.tar.gz"], "{name}");
    }
    // Another member (a signature) is an entry like any other.
    let control = gzip(&tar_of(&[("./control", A)]));
    let signed = ar_of(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", &control),
        ("data.tar", &tar),
        ("_gpgbuilder", B),
    ]);
    let seen = expand_all(&signed, "p.deb", Options::default()).unwrap();
    assert_eq!(files(&seen).last(), Some(&("_gpgbuilder", B)));
}

#[test]
fn a_debian_package_in_a_zip_reaches_its_files() {
    use ::zip::CompressionMethod::Stored;
    let tar = tar_of(&[("./usr/lib/debug/x.debug", A)]);
    let package = deb_of("data.tar.xz", &xz(&tar));
    let zip = zip_of(&[("debs/p.ddeb", &package, Stored)]);
    let seen = expand_all(&zip, "artifact.zip", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [("debs/p.ddeb!/data.tar.xz!/usr/lib/debug/x.debug", A)]
    );
}

#[test]
fn a_malformed_debian_package_says_where() {
    let good = deb_of("data.tar", &tar_of(&[("a", A)]));
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "cut in a member",
            good[..good.len() - 700].to_vec(),
            "runs past the end",
        ),
        ("cut in a header", good[..120].to_vec(), "cut short"),
        (
            "a size that is not a number",
            {
                let mut bad = good.clone();
                bad[8 + 48..8 + 50].copy_from_slice(b"x1");
                bad
            },
            "not a number",
        ),
        (
            "a header without its end",
            {
                let mut bad = good.clone();
                bad[8 + 58] = b'!';
                bad
            },
            "no member header",
        ),
    ];
    for (what, bytes, says) in cases {
        let (_, result) = expand_seen_as(&bytes, Container::Deb, "p.deb", Options::default());
        match result {
            Err(ExpandError::Malformed(reason)) => {
                assert!(reason.contains(says), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // A newline after the last member is padding, not a header.
    let mut padded = good.clone();
    padded.push(b'\n');
    assert!(expand_all(&padded, "p.deb", Options::default()).is_ok());
    // A data member that is no tarball.
    let not_tar = deb_of("data.tar.gz", b"plain bytes, not gzip");
    match expand_seen_as(&not_tar, Container::Deb, "p.deb", Options::default()).1 {
        Err(ExpandError::Malformed(reason)) => {
            assert!(reason.contains("not a tarball"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rpm_packages_and_cpio_archives_are_expanded_entry_by_entry() {
    let debug = b"an odd-sized debug file";
    let cpio = cpio_of(&[
        ("./usr", 0o040_755, b""),
        ("./usr/lib/debug/app.debug", REGULAR, debug),
        ("./usr/lib/debug/link.debug", 0o120_777, b"app.debug"),
        ("./usr/bin/app", REGULAR, B),
        ("./dev/null", 0o020_666, b""),
    ]);
    let expected = [
        ("./usr/lib/debug/app.debug", &debug[..]),
        ("./usr/bin/app", B),
    ];
    for (name, bytes) in [
        ("a.cpio", cpio.clone()),
        ("a.cpio.gz", gzip(&cpio)),
        ("p.rpm", rpm_of(&cpio, 0, 0)),
        ("p-gz.rpm", rpm_of(&gzip(&cpio), 7, 4276)),
        ("p-xz.rpm", rpm_of(&xz(&cpio), 54, 1349)),
        ("p-zst.rpm", rpm_of(&zstd(&cpio), 1, 3)),
        ("p-bz2.rpm", rpm_of(&bzip2(&cpio), 2, 17)),
    ] {
        let seen = expand_all(&bytes, name, Options::default()).unwrap();
        assert_eq!(files(&seen), expected, "{name}");
        let skipped: Vec<&str> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Skipped(entry, _) => Some(entry.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            skipped,
            ["./usr/lib/debug/link.debug", "./dev/null"],
            "{name}"
        );
    }
}

#[test]
fn a_malformed_rpm_or_cpio_says_why_and_a_cut_entry_is_never_indexed() {
    let cpio = cpio_of(&[("./a.debug", REGULAR, A), ("./b.debug", REGULAR, B)]);
    let malformed = |bytes: &[u8], container| match expand_seen_as(
        bytes,
        container,
        "p.rpm",
        Options::default(),
    ) {
        (seen, Err(ExpandError::Malformed(reason))) => (seen, reason),
        other => panic!("{other:?}"),
    };
    // Header counts past the end of the file.
    let (_, reason) = malformed(&rpm_of(&cpio, 1_000_000, 0)[..2000], Container::Rpm);
    assert!(reason.contains("runs past the end"), "{reason}");
    let mut lying = rpm_of(&cpio, 0, 0);
    lying[96 + 12..96 + 16].copy_from_slice(&u32::MAX.to_be_bytes());
    let (_, reason) = malformed(&lying, Container::Rpm);
    assert!(reason.contains("runs past the end"), "{reason}");
    // A payload that is not one.
    let (_, reason) = malformed(&rpm_of(b"not a payload", 0, 0), Container::Rpm);
    assert!(reason.contains("no cpio archive"), "{reason}");
    // A name size claiming gigabytes is refused before anything is read into memory.
    let mut huge_name = cpio.clone();
    huge_name[6 + 8 * 11..6 + 8 * 12].copy_from_slice(b"FFFFFFFF");
    let (_, reason) = malformed(&huge_name, Container::Cpio);
    assert!(reason.contains("at most 4096"), "{reason}");
    // Not hex.
    let mut not_hex = cpio.clone();
    not_hex[6 + 8 * 6] = b'g';
    let (_, reason) = malformed(&not_hex, Container::Cpio);
    assert!(reason.contains("not hex"), "{reason}");
    // Cut inside the second entry: the first is indexed, the second rejected, never indexed
    // as the bytes that were there.
    // (The trailer takes 124 bytes, B 32 with its padding: 10 of B's bytes are left.)
    let cut = &cpio[..cpio.len() - 124 - 32 + 10];
    let (seen, result) = expand_seen_as(cut, Container::Cpio, "a.cpio", Options::default());
    assert_eq!(files(&seen), [("./a.debug", A)]);
    assert!(
        matches!(&seen[1], Seen::Rejected(entry, reason) if entry == "./b.debug" && reason.contains("ends inside")),
        "{seen:?}"
    );
    assert!(
        matches!(result, Err(ExpandError::Malformed(_))),
        "{result:?}"
    );
}

/// An Alpine package (`abuild`'s `.apk`, `-dbg` packages among them): gzip streams, one after
/// another, of tar segments whose end-of-archive blocks are cut (a signature, the control
/// segment, the data), read as one tarball.
#[test]
fn an_alpine_package_is_read_as_one_tarball() {
    let segment = |entries: &[(&str, &[u8])]| {
        let tar = tar_of(entries);
        gzip(&tar[..tar.len() - 1024])
    };
    let mut apk = segment(&[(".SIGN.RSA.ci.rsa.pub", b"signature")]);
    apk.extend(segment(&[(".PKGINFO", b"pkgname = app-dbg\n")]));
    apk.extend(gzip(&tar_of(&[("usr/lib/debug/app.debug", A)])));
    let seen = expand_all(&apk, "app-dbg-1.0-r0.apk", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [
            (".SIGN.RSA.ci.rsa.pub", &b"signature"[..]),
            (".PKGINFO", b"pkgname = app-dbg\n"),
            ("usr/lib/debug/app.debug", A),
        ]
    );
}
