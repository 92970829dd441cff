//! [`ListedUpload`]: what an audit holds of each upload record.

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

    /// The `index`th key it lists (of `keys`, then of `planned`).
    pub(super) fn listed_key(&self, index: usize) -> &str {
        match index.checked_sub(self.keys.len()) {
            None => self.keys.name(index),
            Some(planned) => self.planned.name(planned),
        }
    }

    /// Every key it lists, in the order of [`Self::listed_key`].
    pub(super) fn listed_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.keys.iter().chain(self.planned.iter())
    }
}
