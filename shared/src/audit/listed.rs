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
/// uploads (upload index, index in [`ListedUpload::listed_key_into`]) and not by a string of
/// its own, with what the audit found of it (`found`, parallel to `at`).
///
/// Why it is held so (memory bound): the audit reads each upload record once (a second read
/// of 50,000 records costs as much as the check), so every upload's names are held anyway
/// ([`super::names::Names`]); a key is then 8 bytes here, 8 in `found` and 4 in `slots`,
/// where a `BTreeSet<&str>` of the keys accounted for and a `HashMap<&str, Option<&str>>` of
/// their owners (what this replaces) took about 24 and 40–64 bytes a key. A key met by name
/// is looked up by binary search over the names (20 comparisons at 650,000 keys, each
/// decoding a front-coded name), not hashed; one met as an upload's listed key is found
/// through `slots` without a search (most lookups: the keys' and the uploads' checks).
///
/// The invariant keeping the audit's findings: `found` answers exactly what those two maps
/// did — a key is accounted for iff it has a record or is `Owned` or `Changed` here, and is
/// known (has an owner) iff `Owned` — and each distinct key is looked at through its object
/// at most once ([`Found::Absent`] kept: looked at again, a settled store answers the same).
pub(super) struct ListedKeys {
    at: Vec<(u32, u32)>,
    found: Vec<Found>,
    /// Where each upload's listed keys start in `slots`.
    starts: Vec<u32>,
    /// For each upload's each listed key (from its start), its position in `at`.
    slots: Vec<u32>,
}

impl ListedKeys {
    /// The keys `uploads` list, sorted and without repeats (the first lister in the uploads'
    /// order kept), none looked at.
    pub(super) fn of(uploads: &[ListedUpload]) -> io::Result<Self> {
        let too_many = || io::Error::other("over 4 billion uploads or keys listed");
        let total = uploads.iter().map(ListedUpload::listed).sum();
        u32::try_from(total).map_err(|_| too_many())?;
        let (mut at, mut starts) = (Vec::with_capacity(total), Vec::with_capacity(uploads.len()));
        for (upload, listed) in uploads.iter().enumerate() {
            starts.push(at.len() as u32);
            let upload = u32::try_from(upload).map_err(|_| too_many())?;
            for index in 0..listed.listed() {
                at.push((upload, index as u32));
            }
        }
        // Stable: of the same key listed twice, the first in the uploads' order stays first.
        // Each comparison decodes both names (front coded) into buffers kept across them.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        at.sort_by(|x, y| {
            name_into(uploads, *x, &mut a);
            name_into(uploads, *y, &mut b);
            a.cmp(&b)
        });
        // The repeats dropped, and every listed key's slot set to where its name is kept
        // (`b`: the name kept last).
        let mut slots = vec![0; total];
        let mut kept = 0;
        for next in 0..at.len() {
            let (upload, index) = at[next];
            name_into(uploads, (upload, index), &mut a);
            if kept == 0 || a != b {
                at[kept] = (upload, index);
                kept += 1;
                std::mem::swap(&mut a, &mut b);
            }
            slots[(starts[upload as usize] + index) as usize] = (kept - 1) as u32;
        }
        at.truncate(kept);
        at.shrink_to_fit();
        let found = vec![Found::Unseen; at.len()];
        Ok(ListedKeys {
            at,
            found,
            starts,
            slots,
        })
    }

    /// Where `key` sits in the key order, if an upload lists it.
    fn position(&self, uploads: &[ListedUpload], key: &str) -> Option<usize> {
        let order = |&(upload, index): &(u32, u32)| -> Ordering {
            uploads[upload as usize].compare_listed(index as usize, key)
        };
        self.at.binary_search_by(order).ok()
    }

    /// Where the `index`th key the `upload`th upload lists sits in the key order (`None`:
    /// the uploads held are not these, none where objects name no owner).
    fn slot(&self, upload: usize, index: usize) -> Option<usize> {
        let start = *self.starts.get(upload)? as usize;
        Some(*self.slots.get(start + index)? as usize)
    }

    /// What was found of the `index`th key the `upload`th upload lists (`Unseen` also where
    /// no upload is held).
    pub(super) fn found_listed(&self, upload: usize, index: usize) -> Found {
        self.slot(upload, index)
            .map_or(Found::Unseen, |position| self.found[position])
    }

    /// Records what was found of the `index`th key the `upload`th upload lists.
    pub(super) fn set_listed(&mut self, upload: usize, index: usize, found: Found) {
        if let Some(position) = self.slot(upload, index) {
            self.found[position] = found;
        }
    }

    /// What was found of `key` (`Unseen` also for a key no upload lists).
    pub(super) fn found(&self, uploads: &[ListedUpload], key: &str) -> Found {
        self.position(uploads, key)
            .map_or(Found::Unseen, |position| self.found[position])
    }

    /// The keys accounted for through their objects (`Owned` or `Changed`), in key order.
    pub(super) fn accounted<'u>(
        &'u self,
        uploads: &'u [ListedUpload],
    ) -> impl Iterator<Item = String> + 'u {
        let accounted = |(at, found): (&(u32, u32), &Found)| {
            matches!(found, Found::Owned(_) | Found::Changed).then(|| {
                let mut name = Vec::new();
                name_into(uploads, *at, &mut name);
                String::from_utf8_lossy(&name).into_owned()
            })
        };
        self.at.iter().zip(&self.found).filter_map(accounted)
    }
}

/// The key at `(upload, index)`, decoded into `name`.
fn name_into(uploads: &[ListedUpload], (upload, index): (u32, u32), name: &mut Vec<u8>) {
    uploads[upload as usize].listed_key_into(index as usize, name)
}

#[cfg(test)]
mod tests {
    use super::{Found, ListedKeys};
    use crate::audit::upload::ListedUpload;

    fn upload(name: &str, keys: &[&str], planned: &[&str]) -> ListedUpload {
        let record = serde_json::json!({"upload": name, "keys": keys, "planned": planned});
        serde_json::from_value(record).unwrap()
    }

    #[test]
    fn a_key_listed_twice_is_one_key_found_through_either_lister() {
        let uploads = [
            // Its planned `b` is also among its keys; its planned `a` is listed by u1.
            upload("u0", &["b", "d"], &["a", "b"]),
            upload("u1", &["a", "c\u{e9}"], &[]),
        ];
        let mut listed = ListedKeys::of(&uploads).unwrap();
        assert_eq!(listed.at, [(0, 2), (0, 0), (1, 1), (0, 1)]);
        listed.set_listed(1, 0, Found::Owned(Some(1)));
        assert_eq!(listed.found_listed(0, 2), Found::Owned(Some(1)));
        assert_eq!(listed.found(&uploads, "a"), Found::Owned(Some(1)));
        listed.set_listed(0, 3, Found::Changed);
        assert_eq!(listed.found_listed(0, 0), Found::Changed);
        listed.set_listed(0, 1, Found::Absent);
        assert_eq!(listed.found(&uploads, "d"), Found::Absent);
        assert_eq!(listed.found(&uploads, "c\u{e9}"), Found::Unseen);
        // Neither listed nor an upload held: not seen, and setting it changes nothing.
        assert_eq!(listed.found(&uploads, "e"), Found::Unseen);
        assert_eq!(listed.found_listed(2, 0), Found::Unseen);
        listed.set_listed(2, 0, Found::Changed);
        assert_eq!(listed.accounted(&uploads).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn no_uploads_list_nothing() {
        let listed = ListedKeys::of(&[]).unwrap();
        assert_eq!(listed.found(&[], "a"), Found::Unseen);
        assert_eq!(listed.found_listed(0, 0), Found::Unseen);
        assert_eq!(listed.accounted(&[]).count(), 0);
    }
}
