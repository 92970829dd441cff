//! The audit page: a store's manifest and holdings as one self-contained HTML page: what was
//! published, when, by which build, what went wrong, and what the store holds now. The audit
//! questions of `manifest query`, for people who would rather look than write filters.
//!
//! One renderer for every place the page is made: `symdex audit --html` and `serve --audit`
//! (the CLI, over a directory or an `s3://` store) and the sweeper Lambda, which writes it to
//! the serving bucket at [`DEPLOYED_KEY`] for the edge to show to an audit grant only.

mod columns;
mod data;
mod holders;
mod holdings;
mod line;
mod listed_upload;
mod packing;
mod page;
mod strings;

#[cfg(test)]
mod tests;

use std::io;

use crate::storage::Storage;

pub use crate::audit_page::data::PageData;
pub use crate::audit_page::holdings::Holdings;
pub use crate::audit_page::line::Line;

/// Where a deployment keeps the page in its serving bucket: under symdex's private state
/// prefix (`_symdex/`, never a symbol key: no layout's grammar admits it, and the functions
/// refuse a layout prefix there), in a folder of its own that the edge serves to the audit
/// grant alone.
pub const DEPLOYED_KEY: &str = "_symdex/audit/index.html";

/// The folder of [`DEPLOYED_KEY`] (what the edge gates).
pub const DEPLOYED_PREFIX: &str = "_symdex/audit/";

/// The page of `store`'s manifest under `prefix` and of what it holds (`shown_as` names the
/// store on it), and what it was made of. Memory grows with the records read (packed by
/// column: 100,000 records make a page of a few MB), as `symdex audit` has always taken it.
pub async fn read_and_render(
    store: &dyn Storage,
    shown_as: &str,
    prefix: &str,
) -> io::Result<(PageData, String)> {
    let data = PageData::read(store, shown_as, prefix).await?;
    let html = page::render(&data).map_err(io::Error::other)?;
    Ok((data, html))
}
