//! [`ListedKeys`]: every key the upload records list, once, and what the audit found of it.

use std::cmp::Ordering;
use std::io;

use super::upload::ListedUpload;

/// What the audit found of a key the uploads list, kept beside it in [`ListedKeys`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Not looked at (yet, or at all: a key with a record is checked by its record).
    Unseen,
    /// Neither a record nor an object standing for one (gone, or naming no listed owner).
    Absent,
    /// Its object stands for its record: the owner named, by index in the uploads (`None`:
    /// an owner no listed upload is).
    Owned(Option<u32>),
    /// Listed by an upload, its object naming another (or nobody): reported `changed`, and
    /// accounted for (what is there is no orphan).
    Changed,
}

/// Every key the uploads list, once, in key order, each named by where it sits in the
/// uploads (upload index, index in [`ListedUpload::listed_key`]) and not by a string of its
/// own, with what the audit found of it (`found`, parallel to `at`).
///
/// Why it is held so (memory bound): the audit reads each upload record once (a second read
/// of 50,000 records costs as much as the check), so every upload's names are held anyway
/// ([`super::names::Names`]); a key is then 8 bytes here and 8 in `found`, where a
/// `BTreeSet<&str>` of the keys accounted for and a `HashMap<&str, Option<&str>>` of their
/// owners (what this replaces) took about 24 and 40–64 bytes a key. A key is looked up by
/// binary search over the names (20 string comparisons at 650,000 keys), not hashed.
///
/// The invariant keeping the audit's findings: `found` answers exactly what those two maps
/// did — a key is accounted for iff it has a record or is `Owned` or `Changed` here, and is
/// known (has an owner) iff `Owned` — and each distinct key is looked at through its object
/// at most once ([`Found::Absent`] kept: looked at again, a settled store answers the same).
pub(super) struct ListedKeys {
    at: Vec<(u32, u32)>,
    found: Vec<Found>,
}

impl ListedKeys {
    /// The keys `uploads` list, sorted and without repeats (the first lister in the uploads'
    /// order kept), none looked at.
    pub(super) fn of(uploads: &[ListedUpload]) -> io::Result<Self> {
        let too_many = || io::Error::other("over 4 billion uploads or keys in one upload");
        let total = uploads.iter().map(ListedUpload::listed).sum();
        let mut at = Vec::with_capacity(total);
        for (upload, listed) in uploads.iter().enumerate() {
            let upload = u32::try_from(upload).map_err(|_| too_many())?;
            for index in 0..listed.listed() {
                at.push((upload, u32::try_from(index).map_err(|_| too_many())?));
            }
        }
        // Stable: of the same key listed twice, the first in the uploads' order stays first.
        at.sort_by(|a, b| name(uploads, *a).cmp(name(uploads, *b)));
        at.dedup_by(|later, first| name(uploads, *later) == name(uploads, *first));
        at.shrink_to_fit();
        let found = vec![Found::Unseen; at.len()];
        Ok(ListedKeys { at, found })
    }

    /// Where `key` sits in the key order, if an upload lists it.
    fn position(&self, uploads: &[ListedUpload], key: &str) -> Option<usize> {
        let order = |at: &(u32, u32)| -> Ordering { name(uploads, *at).cmp(key) };
        self.at.binary_search_by(order).ok()
    }

    /// What was found of `key` (`Unseen` also for a key no upload lists).
    pub(super) fn found(&self, uploads: &[ListedUpload], key: &str) -> Found {
        self.position(uploads, key)
            .map_or(Found::Unseen, |position| self.found[position])
    }

    /// Records what was found of `key`, a key an upload lists (any other is ignored).
    pub(super) fn set(&mut self, uploads: &[ListedUpload], key: &str, found: Found) {
        if let Some(position) = self.position(uploads, key) {
            self.found[position] = found;
        }
    }

    /// The keys accounted for through their objects (`Owned` or `Changed`), in key order.
    pub(super) fn accounted<'u>(
        &'u self,
        uploads: &'u [ListedUpload],
    ) -> impl Iterator<Item = &'u str> + 'u {
        let accounted = |(at, found): (&(u32, u32), &Found)| {
            matches!(found, Found::Owned(_) | Found::Changed).then(|| name(uploads, *at))
        };
        self.at.iter().zip(&self.found).filter_map(accounted)
    }
}

/// The key at `(upload, index)`.
fn name(uploads: &[ListedUpload], (upload, index): (u32, u32)) -> &str {
    uploads[upload as usize].listed_key(index as usize)
}
