//! Everything the page shows, read from a store in one pass over its manifest and one
//! listing of its objects: what is embedded (as JSON) in the page.

use std::io;

use crate::manifest::for_each_record;
use crate::missing_sources::MissingSources;
use crate::storage::Storage;
use serde::Serialize;

use crate::audit_page::columns::Columns;
use crate::audit_page::holders::Holders;
use crate::audit_page::holdings::Holdings;
use crate::audit_page::strings::Strings;

/// The page's data. Field names are the page script's (page.js reads them).
#[derive(Debug, Serialize)]
pub struct PageData {
    /// The store as it was named, and when the page was made (RFC 3339).
    pub store: String,
    pub generated: String,
    /// How many records were read (every one is a row).
    pub records: usize,
    pub strings: Strings,
    pub columns: Columns,
    /// Sources a debug file wants that the store does not serve now: (row of the debug
    /// file's latest record, path, source key), as `manifest query --missing-sources`.
    pub missing: Vec<(u32, u32, u32)>,
    pub holdings: Holdings,
}

impl PageData {
    /// Reads the manifest under `prefix` in `store` (named `shown_as` on the page) and lists
    /// the store's objects.
    pub async fn read(store: &dyn Storage, shown_as: &str, prefix: &str) -> io::Result<PageData> {
        let mut strings = Strings::default();
        let mut columns = Columns::default();
        let mut holders = Holders::default();
        let mut wanted: MissingSources<u32> = MissingSources::default();
        let see = |r: crate::manifest::Record| -> io::Result<()> {
            let row = u32::try_from(columns.len())
                .map_err(|_| io::Error::other("more records than a page can show"))?;
            columns.push(&r, &mut strings);
            let held = holders.see(row, &r);
            if let Some(slot) = columns.holders.last_mut() {
                *slot = held;
            }
            wanted.see(&r, |_| Some(row));
            Ok(())
        };
        for_each_record(store, prefix, None, see).await?;
        let missing = wanted
            .missing()
            .map(|(want, key, path)| (want.about, strings.id(path), strings.id(key)))
            .collect();
        let products: Vec<String> = columns
            .product
            .iter()
            .map(|&id| strings.get(id).to_string())
            .collect();
        let product_of = |row: u32| {
            usize::try_from(row)
                .ok()
                .and_then(|row| products.get(row))
                .filter(|p| !p.is_empty())
                .map_or_else(|| "(none)".to_string(), String::clone)
        };
        let holdings = Holdings::read(store, prefix, &holders, product_of).await?;
        Ok(PageData {
            store: shown_as.to_string(),
            generated: crate::manifest::now_rfc3339(),
            records: columns.len(),
            strings,
            columns,
            missing,
            holdings,
        })
    }
}
