//! What the store holds now, next to what the manifest says was published: keys and bytes
//! by product and layout. The store's side is its own listing (every object outside the
//! bookkeeping prefixes, as `verify` walks them) with the products of the upload records
//! that list each key; the manifest's side is the replay of [`Holders`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;

use crate::layouts::grammar::is_valid_key;
use crate::layouts::Layout;
use crate::pipeline::default_prefixes;
use crate::refs::RefStore;
use crate::storage::Storage;
use serde::Serialize;

use crate::audit_page::holders::Holders;
use crate::audit_page::line::Line;
use crate::audit_page::listed_upload::ListedUpload;

/// The comparison, with the keys each side has and the other does not.
#[derive(Debug, Default, Serialize)]
pub struct Holdings {
    pub lines: Vec<Line>,
    /// Held by the store, and no record says it was published (or a removal said it went).
    pub unrecorded: u64,
    /// Published by the manifest's account, and not in the store.
    pub absent: u64,
    /// A few of each, for a person to look up.
    pub unrecorded_examples: Vec<String>,
    pub absent_examples: Vec<String>,
}

const EXAMPLES: usize = 20;

/// The product shown for keys no upload (or record) names one for.
const NO_PRODUCT: &str = "(none)";

impl Holdings {
    /// Lists the store and compares it with the manifest's live keys (`holders`, whose rows'
    /// products are `product_of`).
    pub async fn read(
        store: &dyn Storage,
        manifest_prefix: &str,
        holders: &Holders,
        product_of: impl Fn(u32) -> String + Sync,
    ) -> io::Result<Holdings> {
        let uploads: Vec<ListedUpload> = RefStore::new(store).uploads_as().await?;
        let mut product_by_key: HashMap<&str, &str> = HashMap::new();
        for upload in &uploads {
            let product = upload.product.as_deref().unwrap_or(NO_PRODUCT);
            for key in &upload.keys {
                product_by_key.entry(key.as_str()).or_insert(product);
            }
        }
        let live: HashMap<&str, u32> = holders.live().collect();
        let prefixes = default_prefixes();
        let mut lines: BTreeMap<(String, String), Line> = BTreeMap::new();
        let mut holdings = Holdings::default();
        // Each key is counted as it is listed, not held (a store has hundreds of thousands):
        // only the recorded keys seen are kept, to find those the store lacks.
        let mut seen: HashSet<&str> = HashSet::with_capacity(live.len());
        let mut each = |key: String, size: u64| {
            if crate::audit::is_bookkeeping(&key, manifest_prefix) {
                return;
            }
            let recorded = live.get_key_value(key.as_str());
            // The manifest's attribution first, so that both columns count a key under one
            // product; a key no record names goes by the upload records that list it.
            let product = match (recorded, product_by_key.get(key.as_str())) {
                (Some((_, row)), _) => product_of(*row),
                (None, Some(p)) => p.to_string(),
                (None, None) => NO_PRODUCT.to_string(),
            };
            let line = line_of(&mut lines, product, layout_of(&key, &prefixes));
            line.keys += 1;
            line.bytes += size;
            match recorded {
                Some((recorded, _)) => {
                    seen.insert(recorded);
                }
                None => {
                    holdings.unrecorded += 1;
                    example(&mut holdings.unrecorded_examples, &key);
                }
            }
        };
        store.list_sized_each("", &mut each).await?;
        for (key, row) in &live {
            line_of(&mut lines, product_of(*row), layout_of(key, &prefixes)).published += 1;
            if !seen.contains(key) {
                holdings.absent += 1;
                example(&mut holdings.absent_examples, key);
            }
        }
        holdings.lines = lines.into_values().collect();
        holdings.unrecorded_examples.sort();
        holdings.absent_examples.sort();
        Ok(holdings)
    }
}

fn line_of(
    lines: &mut BTreeMap<(String, String), Line>,
    product: String,
    layout: String,
) -> &mut Line {
    lines
        .entry((product.clone(), layout.clone()))
        .or_insert_with(|| Line {
            product,
            layout,
            ..Line::default()
        })
}

fn example(examples: &mut Vec<String>, key: &str) {
    if examples.len() < EXAMPLES {
        examples.push(key.to_string());
    }
}

/// The layouts whose grammar `key` fits behind their default prefix (`ssqp+symstore` where
/// both name the same key); a key under another prefix is named by its first directory.
pub fn layout_of(key: &str, prefixes: &BTreeMap<Layout, String>) -> String {
    let fits: Vec<&str> = Layout::ALL
        .iter()
        .filter(|layout| {
            let prefix = prefixes.get(layout).map_or("", String::as_str);
            key.strip_prefix(prefix)
                .is_some_and(|rest| is_valid_key(**layout, rest))
        })
        .map(|layout| layout.as_str())
        .collect();
    if !fits.is_empty() {
        return fits.join("+");
    }
    match key.split_once('/') {
        Some((dir, _)) => format!("other: {dir}/"),
        None => "other".to_string(),
    }
}
