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
//!   an S3 object version's key and metadata are fixed), so a check once made stands. A
//!   round that refuses leaves the marks earlier rounds wrote for holders that still hold
//!   the key (harmless, and another overwrite of the same holder at once may need the same
//!   file: `RefStore::overwritten`), and holders count as overwritten (the record's
//!   "overwrote the bytes of") only once the swap displacing them was written and the copy
//!   replacing their bytes published (`PublishPlan::Replace`).
//! - a key without a record whose object names its owner (invariant 7): the holder of the
//!   `create` lease checks the owner's upload before it replaces the object
//!   (`RefStore::copy_under_lease`, `Found::Other`). The lease keeps the key's object the
//!   owner's meanwhile: the owner's removal and any sharer wait for it. A record holding a
//!   dead `create` lease is such a key too (its holder died before creating the object, so
//!   the record may not say what is there): the overwrite keeps it a creation
//!   (`RefStore::replace`), and its copy looks before it replaces.
//!
//! A holder's product is read once per [`RefStore`] (`products`): a product never changes
//! for an upload (above), so a kept answer is as good as a fresh one. A record that does not
//! parse counts as no record: that key is a conflict, the rest of the upload goes on.

use std::io;

use super::RefStore;

impl RefStore<'_> {
    /// Whether an overwrite by an upload of `product` (`None`: naming none) may replace the
    /// bytes `holders` hold: every one is an upload of that same product, as its upload
    /// record says (the invariant above). Stops at the first that is not; a holder without
    /// a readable record is not (fail closed). One read per holder and [`RefStore`], on the
    /// overwrite's path alone.
    pub(super) async fn may_overwrite<'h>(
        &self,
        product: Option<&str>,
        holders: impl IntoIterator<Item = &'h str>,
    ) -> io::Result<bool> {
        for holder in holders {
            if !self.is_of_product(holder, product).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `upload`'s record names `product` (`None`: none). `false` where the record
    /// is gone, or does not parse.
    async fn is_of_product(&self, upload: &str, product: Option<&str>) -> io::Result<bool> {
        if let Some(known) = self.known_product(upload) {
            return Ok(known.as_deref() == product);
        }
        let record = match self.upload(upload).await {
            Ok(Some(record)) => record,
            Ok(None) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => return Ok(false),
            Err(e) => return Err(e),
        };
        let same = record.meta.product.as_deref() == product;
        self.remember_product(&record.upload, record.meta.product);
        Ok(same)
    }

    /// The product `upload`'s record was read naming (`Some(None)`: none), if it was.
    fn known_product(&self, upload: &str) -> Option<Option<String>> {
        let products = self.products.lock().ok()?;
        products.get(upload).cloned()
    }

    /// Keeps the product an upload record names, read for whatever reason (an object's
    /// owner looked up, say): never changed for an upload, it needs no second read.
    pub(super) fn remember_product(&self, upload: &str, product: Option<String>) {
        if let Ok(mut products) = self.products.lock() {
            products.insert(upload.to_string(), product);
        }
    }

    /// Whether `upload`, of `product`, overwriting, may replace the object it found at `key`
    /// under its `create` lease, whose owner is `owner` (invariant 7): one written outside
    /// symdex (no owner) may be replaced; another upload's only where it is of `product`,
    /// and then that upload is first marked waiting for the key it loses (invariant 8: the
    /// overwriter's removal hands it back). An owner naming no upload record (gone, no
    /// upload's name, or not parsing): not (fail closed).
    ///
    /// `None`: may not. `Some(displaced)`: may, `displaced` the owner's upload, marked
    /// waiting (none for an object written outside symdex), noted once the copy is done.
    pub(super) async fn may_replace_owned(
        &self,
        key: &str,
        upload: &str,
        owner: Option<String>,
        product: Option<&str>,
    ) -> io::Result<Option<Option<String>>> {
        let Some(owner) = owner else {
            return Ok(Some(None));
        };
        // The owner's record, read here, keeps its product (`upload_by_owner`): one read.
        let earlier = match self.upload_named_by(&owner).await {
            Ok(Some(earlier)) => earlier,
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => return Ok(None),
            Err(e) => return Err(e),
        };
        if !self.may_overwrite(product, [earlier.as_str()]).await? {
            return Ok(None);
        }
        self.overwritten(key, upload, [earlier.clone()]).await?;
        Ok(Some(Some(earlier)))
    }
}
