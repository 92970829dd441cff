//! [`ListedUpload`]: what an audit holds of each upload record.

use std::cmp::Ordering;

use serde::Deserialize;

use super::names::Names;
use crate::refs::UploadState;

/// What an audit checks of an upload record ([`crate::refs::UploadRecord`], read by the same
/// field names): an audit holds every upload's at once, so the rest of each record (its
/// metadata, what a re-delivery is answered from, a debug file's source paths) is skipped as
/// it is parsed, and its names are held compactly ([`Names`]).
#[derive(Debug, Deserialize)]
pub(super) struct ListedUpload {
    pub(super) upload: String,
    #[serde(default)]
    pub(super) state: UploadState,
    pub(super) keys: Names,
    #[serde(default)]
    pub(super) planned: Names,
    #[serde(default)]
    pub(super) runs: Names,
}

impl ListedUpload {
    /// How many keys it lists: `keys`, then `planned`.
    pub(super) fn listed(&self) -> usize {
        self.keys.len() + self.planned.len()
    }

    /// The `index`th key it lists (of `keys`, then of `planned`), decoded into `key`.
    pub(super) fn listed_key_into(&self, index: usize, key: &mut Vec<u8>) {
        match index.checked_sub(self.keys.len()) {
            None => self.keys.name_into(index, key),
            Some(planned) => self.planned.name_into(planned, key),
        }
    }

    /// How the `index`th key it lists compares with `key`.
    pub(super) fn compare_listed(&self, index: usize, key: &str) -> Ordering {
        match index.checked_sub(self.keys.len()) {
            None => self.keys.compare(index, key),
            Some(planned) => self.planned.compare(planned, key),
        }
    }

    /// Every key it lists, in the order of [`Self::listed_key_into`].
    pub(super) fn listed_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.keys.iter().chain(self.planned.iter())
    }
}
