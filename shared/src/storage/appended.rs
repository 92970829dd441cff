//! Local record files that take a new version by appending it, not by replacing the file.
//!
//! Why: an index finalizes every upload by swapping its record, on the writer thread, at each
//! flush, while the lanes wait. Replacing the file (a temporary file created, written and
//! renamed over it) costs a new inode, a name made and removed, and frees the old inode —
//! which, on an ext4 without a journal, every allocation in the next minutes skips one
//! buffer lookup at a time (`recently_deleted` in ext4's `ialloc.c`). An append costs an open
//! and a write, and frees nothing: the finalizes went from 0.30–0.43 s to 0.1 s per 5,000
//! uploads (`docs/local-store-records.md`).
//!
//! The format, for the keys [`holds_versions`] names: the file holds its versions in the order
//! they were written, each ended by a line feed — except the first, which a create or a
//! replacement wrote bare (as every record was before). A version never holds a line feed
//! itself (the records are compact JSON; [`check`] refuses one). The current version is the
//! last whole line; text after the last line feed is an append cut short (a crash, a full
//! disk, or a read racing the write) and is not a version. Nothing is ever written in place
//! over existing bytes, so a concurrent reader sees a previous version or the new one, never
//! a mix. An append is only made onto a file that ends where a version ends, and only while
//! the file stays small ([`MAX_APPENDED`]); otherwise the record is replaced as before,
//! which also drops its history.
//!
//! The store's version of such a record (compare-and-swap, [`super::LocalStore`]) is the
//! SHA-1 of the whole file, so each append is a new version, and a cut-short append one too:
//! a writer holding the version before it fails its swap, reads again, and replaces the file.

/// The record files that grow by appending: upload records, updated once per artifact.
pub fn holds_versions(key: &str) -> bool {
    key.starts_with(super::UPLOADS_DIR)
}

/// Files grow by appending up to this size; a larger one is replaced (and so compacted).
pub const MAX_APPENDED: usize = 16 * 1024;

/// The current version of a record file of a key [`holds_versions`] names.
pub fn current(file: &[u8]) -> &[u8] {
    let Some(last_end) = memchr::memrchr(b'\n', file) else {
        // One bare version: written by a create or a replacement.
        return file;
    };
    // Whole lines end at `last_end`; anything after it is an append cut short.
    let whole = &file[..last_end];
    match memchr::memrchr(b'\n', whole) {
        Some(previous_end) => &whole[previous_end + 1..],
        None => whole,
    }
}

/// What to append to `file` to make `next` its current version; `None`: replace the file
/// instead (it ends in an append cut short, or would outgrow [`MAX_APPENDED`]).
pub fn append(file: &[u8], next: &[u8]) -> Option<Vec<u8>> {
    let ends_bare = !file.is_empty() && memchr::memchr(b'\n', file).is_none();
    let ends_whole = file.last() == Some(&b'\n');
    if !(ends_bare || ends_whole) || file.len() + next.len() + 2 > MAX_APPENDED {
        return None;
    }
    let mut chunk = Vec::with_capacity(next.len() + 2);
    if ends_bare {
        chunk.push(b'\n');
    }
    chunk.extend_from_slice(next);
    chunk.push(b'\n');
    Some(chunk)
}

/// Refuses a version with a line feed for a key [`holds_versions`] names (it would read as
/// two).
pub fn check(key: &str, bytes: &[u8]) -> std::io::Result<()> {
    if holds_versions(key) && memchr::memchr(b'\n', bytes).is_some() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{key}: a record version may not hold a line feed"),
        ));
    }
    Ok(())
}

/// The content of the file at `key`: its current version where the key [`holds_versions`],
/// else the file.
pub fn into_content(key: &str, file: Vec<u8>) -> Vec<u8> {
    if !holds_versions(key) {
        return file;
    }
    let current = current(&file);
    if current.len() == file.len() {
        file
    } else {
        current.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::{append, check, current, holds_versions, into_content, MAX_APPENDED};
    use proptest::prelude::*;

    /// The file after writing `versions` in turn (the first bare), as the store writes them
    /// while they fit.
    fn written(versions: &[&[u8]]) -> Vec<u8> {
        let mut file = versions[0].to_vec();
        for next in &versions[1..] {
            let chunk = append(&file, next).expect("fits");
            file.extend_from_slice(&chunk);
        }
        file
    }

    #[test]
    fn the_last_whole_version_is_current() {
        assert_eq!(current(b"{\"a\":1}"), b"{\"a\":1}");
        assert_eq!(current(&written(&[b"v1", b"v2"])), b"v2");
        assert_eq!(written(&[b"v1", b"v2", b"v3"]), b"v1\nv2\nv3\n");
        assert_eq!(current(&written(&[b"v1", b"v2", b"v3"])), b"v3");
    }

    #[test]
    fn an_append_cut_short_is_not_a_version_and_is_not_appended_to() {
        // Cut after its line feed, in the middle, before its own line feed.
        assert_eq!(current(b"v1\n"), b"v1");
        assert_eq!(current(b"v1\nv2-cu"), b"v1");
        assert_eq!(current(b"v1\nv2\nv3"), b"v2");
        assert_eq!(append(b"v1\nv2-cu", b"v3"), None, "replaced instead");
        assert_eq!(append(b"v1\n", b"v2").as_deref(), Some(&b"v2\n"[..]));
        assert_eq!(append(b"", b"v1"), None, "an empty file is replaced");
    }

    #[test]
    fn a_file_grows_only_to_its_bound() {
        let big = vec![b'x'; MAX_APPENDED / 2];
        let file = written(&[&big[..100], &big[..MAX_APPENDED / 2 - 100]]);
        assert!(file.len() < MAX_APPENDED);
        assert_eq!(append(&file, &big), None);
    }

    #[test]
    fn only_upload_records_hold_versions_and_refuse_a_line_feed() {
        assert!(holds_versions("_symdex/uploads/ab.json"));
        assert!(holds_versions("_symdex/uploads/ab/cd.json"));
        assert!(!holds_versions("_symdex/refs/gdb/ab.json"));
        assert!(!holds_versions("gdb/ab/cdef.debug"));
        assert!(check("_symdex/uploads/ab.json", b"{\"a\":\"\\n\"}").is_ok());
        assert!(check("_symdex/uploads/ab.json", b"{\n}").is_err());
        assert!(check("gdb/ab/cdef.debug", b"\n\n").is_ok());
        let object = b"line\nline\n".to_vec();
        assert_eq!(into_content("gdb/ab/cdef.debug", object.clone()), object);
        assert_eq!(into_content("_symdex/uploads/ab.json", object), b"line");
    }

    proptest! {
        /// Whatever versions were written, and wherever a reader's view of the file ends,
        /// it reads a version that was written: the last one it holds in full.
        #[test]
        fn every_prefix_reads_as_a_written_version(
            versions in proptest::collection::vec("[a-z{}\":,]{1,40}", 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let versions: Vec<&[u8]> = versions.iter().map(|v| v.as_bytes()).collect();
            let file = written(&versions);
            prop_assert_eq!(current(&file), *versions.last().unwrap());
            // A view cut at any byte past the first version (a reader racing an append).
            let at = versions[0].len() + cut.index(file.len() - versions[0].len() + 1);
            let seen = current(&file[..at]);
            // Where each version's bytes end, its line feed included: the first is bare,
            // the second's chunk starts with the line feed that ends the first.
            let mut ends = vec![versions[0].len()];
            let mut end = versions[0].len() + 1;
            for v in &versions[1..] {
                end += v.len() + 1;
                ends.push(end);
            }
            let whole_before = ends
                .iter()
                .zip(&versions)
                .rfind(|(end, _)| **end <= at)
                .map(|(_, v)| *v);
            prop_assert_eq!(Some(seen), whole_before);
        }
    }
}
