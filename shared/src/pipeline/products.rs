//! Products meeting at a key (THREATS.md, tenancy): ids are global, so one product's upload
//! may meet keys another's holds. Such a conflict names the other product, and an overwrite
//! never replaces another product's bytes (refs/overwrites.rs).

use std::collections::BTreeSet;
use std::io;

use super::sources::NO_PRODUCT;
use super::Indexer;
use crate::manifest::Record;

/// Why a record is a conflict, where nothing more telling was said: the keys hold other
/// bytes, which an overwrite would have replaced — unless `refused`: an overwrite the
/// product rule refused (another product's bytes, or bytes of uploads whose records cannot
/// be read, refs/overwrites.rs). Any other conflict of an overwriting run (a sidecar meeting
/// an object written outside symdex: adopted content never overwrites) keeps the usual text.
pub(super) fn conflict_reason(refused: bool) -> &'static str {
    if refused {
        "keys hold different content of another product's uploads (or of uploads unknown); \
         not overwritten: an overwrite replaces only its own product's bytes"
    } else {
        "keys hold different content; not overwritten (use overwrite to force)"
    }
}

impl Indexer<'_> {
    /// Ids are global, so one product's CI can publish another's first (ids of reproducible
    /// builds are predictable). A conflict whose keys are held by an upload of another product
    /// says so, loudly, and names that product for audits (`held_by_products`); the later
    /// upload's bytes are not published either way. Asked for an upload that names its
    /// product, or overwrites, and meets a conflict: a few reads of the holders' records, on
    /// a rare path. An overwriter naming no product is product "none"'s (refs/overwrites.rs):
    /// every product a holder names is another.
    pub(super) async fn flag_cross_product(&self, record: &mut Record) -> io::Result<()> {
        let product = match record.meta.product.as_deref() {
            Some(product) => product,
            None if self.config.overwrite => NO_PRODUCT,
            None => return Ok(()),
        };
        let names = self
            .other_products(&record.upload, Some(product), &record.conflicts)
            .await?;
        if names.is_empty() {
            return Ok(());
        }
        record.reason = Some(format!(
            "cross-product conflict: keys already published by product {} hold other bytes; \
             not published for {product} (ids are global: audit who uploaded them first)",
            names.join(", ")
        ));
        record.held_by_products = names;
        Ok(())
    }

    /// The products other than `product` whose uploads (but `upload`) hold `keys` (the
    /// first few: an artifact's keys are all held by the same upload; an upload naming no
    /// product is [`NO_PRODUCT`]'s). Empty for an upload naming no product: it is no tenant
    /// to be told apart from others.
    pub(super) async fn other_products(
        &self,
        upload: &str,
        product: Option<&str>,
        keys: &[String],
    ) -> io::Result<Vec<String>> {
        /// Conflicting keys looked at.
        const LOOKED_AT: usize = 4;
        let Some(product) = product else {
            return Ok(Vec::new());
        };
        let mut holders = BTreeSet::new();
        for key in keys.iter().take(LOOKED_AT) {
            if let Some(held) = self.refs.key(key).await? {
                holders.extend(held.refs.into_iter().filter(|u| *u != upload));
            }
        }
        let mut products = BTreeSet::new();
        for holder in holders {
            if let Some(other) = self.refs.upload(&holder).await? {
                // An upload naming no product is no tenant's: another than this one's.
                let other = other.meta.product.unwrap_or_else(|| NO_PRODUCT.to_string());
                if other != product {
                    products.insert(other);
                }
            }
        }
        Ok(products.into_iter().collect())
    }
}
