//! Whose bytes an overwrite may replace (THREATS.md: an uploader of product A must never
//! publish, shadow, delete or expire anything of product B; ids such as build ids are
//! global, so two products' uploads may meet at one key).
//!
//! **Invariant: an overwrite replaces only bytes held solely by uploads of the overwriter's
//! own product.** An upload naming no product counts as product "none": it overwrites only
//! uploads naming none, and never a product's. Where any upload holding the bytes is another
//! product's, or its upload record cannot be read (fail closed: nobody may give away what
//! nobody is known to own), the key is a conflict exactly as without overwrite — the later
//! upload waits for the key (invariant 8), and its manifest record names the other product
//! (`Indexer::flag_cross_product`). Objects written outside symdex (no record, no owner)
//! hold no upload's bytes and stay overwritable.
//!
//! Kept wherever an overwrite displaces an upload's bytes:
//! - a key whose record names other content: [`RefStore::decide`] swaps the record to name
//!   the overwriter alone only once every holder that swap displaces is marked waiting
//!   (`earlier ⊆ marked_waiting`, `PublishPlan::MarkWaiting`), and `plan_key` checks each
//!   holder here before it marks any. The swap is a compare-and-swap on the record the
//!   decision read: a holder added after the check (another product's upload sharing the
//!   old bytes) changed the record, so the swap fails, and the decision on the record read
//!   again meets a holder not marked, which asks for a new round of marking — and of this
//!   check. A product never changes for an upload (a local upload's id names its product;
//!   an S3 object version's key and metadata are fixed), so a check once made stands.
//! - a key without a record whose object names its owner (invariant 7): the holder of the
//!   `create` lease checks the owner's upload before it replaces the object
//!   (`RefStore::copy_under_lease`, `Found::Other`). The lease keeps the key's object the
//!   owner's meanwhile: the owner's removal and any sharer wait for it.

use std::io;

use super::RefStore;

impl RefStore<'_> {
    /// Whether an overwrite by an upload of `product` (`None`: naming none) may replace the
    /// bytes `holders` hold: every one is an upload of that same product, as its upload
    /// record says (the invariant above). A holder without a record: `false` (fail closed).
    /// One read per holder, on the overwrite's path alone.
    pub(super) async fn may_overwrite<'h>(
        &self,
        product: Option<&str>,
        holders: impl IntoIterator<Item = &'h str>,
    ) -> io::Result<bool> {
        for holder in holders {
            let Some(record) = self.upload(holder).await? else {
                return Ok(false);
            };
            if record.meta.product.as_deref() != product {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `upload`, of `product`, overwriting, may replace the object it found at `key`
    /// under its `create` lease, whose owner is `owner` (invariant 7): one written outside
    /// symdex (no owner) may be replaced; another upload's only where it is of `product`,
    /// and then that upload is first marked waiting for the key it loses (invariant 8: the
    /// overwriter's removal hands it back). An owner naming no upload record (gone, or no
    /// upload's name): `false` (fail closed).
    pub(super) async fn may_replace_owned(
        &self,
        key: &str,
        upload: &str,
        owner: Option<String>,
        product: Option<&str>,
    ) -> io::Result<bool> {
        let Some(owner) = owner else {
            return Ok(true);
        };
        let Some(earlier) = self.upload_named_by(&owner).await? else {
            return Ok(false);
        };
        if !self.may_overwrite(product, [earlier.as_str()]).await? {
            return Ok(false);
        }
        self.overwritten(key, upload, [earlier]).await?;
        Ok(true)
    }
}
