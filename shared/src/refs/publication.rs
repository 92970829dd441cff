//! What an upload wants at a key ([`Content`], [`OnDifferent`]) and what publishing it came
//! to ([`KeyOutcome`], [`Publication`]).

use super::RefStore;
use crate::storage::CopySource;

/// What [`RefStore::publish`] does where a key's record names other content than the
/// upload's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDifferent {
    /// Leave it, report a conflict.
    Conflict,
    /// Replace it (`--overwrite`).
    Overwrite,
    /// Take the published copy as this upload's: content symdex generates from an upload (a
    /// section, a sidecar) whose identity depends on how it was copied (an S3 part copy's
    /// ETag), so a live copy of it serves as well as a new one. An object written outside
    /// symdex is still a conflict.
    Adopt,
}

impl OnDifferent {
    /// `--overwrite` or not.
    pub(crate) fn overwrite(overwrite: bool) -> Self {
        if overwrite {
            OnDifferent::Overwrite
        } else {
            OnDifferent::Conflict
        }
    }
}

/// What one key's publication came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOutcome {
    /// Bytes were written now, or by this same upload in an earlier, unfinished attempt.
    Published,
    /// The key already held this content; the upload now references it.
    Unchanged,
    /// The key holds other content (not overwritten): not referenced.
    Conflict,
}

/// A key's outcome, with what its publication learned on the way of the key's alias target
/// (invariant 6: an upload finding an alias in place holds its target too), so that the
/// upload need not read the key's record again to find out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Publication {
    pub outcome: KeyOutcome,
    /// Found in place ([`KeyOutcome::Unchanged`]): the target the key's record names, as the
    /// publication left the record (every way to that outcome learns it). Else none.
    pub alias_of: Option<String>,
    /// A conflict the product rule made: an overwrite refused because another product's
    /// uploads (or uploads unknown) hold the key's bytes (overwrites.rs). Any other
    /// conflict (an object written outside symdex that adopting content meets, say) is not.
    pub refused: bool,
}

impl Publication {
    /// An outcome with the target its key's record names, where the publication learnt it
    /// (see `alias_of`), not refused by the product rule.
    pub(crate) fn new(outcome: KeyOutcome, alias_of: Option<String>) -> Self {
        Publication {
            outcome,
            alias_of,
            refused: false,
        }
    }

    /// An overwrite the product rule refused: a conflict, as without overwrite.
    pub(crate) fn refused() -> Self {
        Publication {
            outcome: KeyOutcome::Conflict,
            alias_of: None,
            refused: true,
        }
    }
}

impl From<KeyOutcome> for Publication {
    /// An outcome other than [`KeyOutcome::Unchanged`], which comes with its target.
    fn from(outcome: KeyOutcome) -> Self {
        debug_assert_ne!(
            outcome,
            KeyOutcome::Unchanged,
            "a key found in place names its target"
        );
        Publication::new(outcome, None)
    }
}

/// The content an upload wants at a key.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    pub etag: &'a str,
    pub size: u64,
    pub source: CopySource<'a>,
}

impl<'s> RefStore<'s> {
    /// The key a copy of `content` is an alias of, where the store writes aliases.
    pub(super) fn alias_target(&self, content: &Content<'_>) -> Option<String> {
        match content.source {
            CopySource::Key(target) if self.traits.key_copies_are_aliases => {
                Some(target.to_string())
            }
            _ => None,
        }
    }
}
