//! symdex: identify debug artifacts and compute the keys symbol clients request.
//!
//! - [`archive`]: containers (zip, tar, compressed streams, CAB) expanded entry by entry.
//! - [`reader`]: the ranged-read trait every parser goes through.
//! - [`formats`]: detection by content and one parser per artifact format.
//! - [`identity`]: the identity model (Sentry-compatible debug and code ids).
//! - [`layouts`]: pure functions from an identity to the keys each client requests.
//! - [`encoded`]: compressed copies of published keys (what `serve` and the CDN negotiate).
//! - [`storage`]: the store trait (local directory; S3 in the Lambdas).
//! - [`pipeline`]: index/unindex an upload: identify, publish, reference, record.
//! - [`refs`], [`manifest`]: who needs each key; the append-only audit trail.
//! - [`retention`]: channels, retention policies and expiry.
//! - [`sourcemap`]: which uploaded source serves which path a debug file names.
//! - [`audit`]: the store's invariants, checked from the outside (`symdex verify`).
//! - [`audit_page`]: the manifest and the store as one HTML page (`symdex audit`, the sweeper).

pub mod arch;
pub mod archive;
pub mod audit;
pub mod audit_page;
pub mod digest;
pub mod encoded;
pub mod formats;
pub mod identity;
pub mod layouts;
pub mod manifest;
pub mod missing_sources;
pub mod pdb_sources;
pub mod pipeline;
pub mod reader;
pub mod refs;
pub mod retention;
pub mod sniff;
pub mod sourcelink;
pub mod sourcemap;
pub mod storage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod upload_id;
pub mod upload_meta;

/// The lib tests count what each thread allocates (`testing::allocations`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: testing::allocations::Counting = testing::allocations::Counting;

pub use arch::Arch;
pub use formats::{identify, identify_with_details, Format, FormatError, IdentifyOptions};
pub use identity::{Identity, Kind};
pub use layouts::{keys_for, lookup_keys_for, KeySet, Layout};
pub use reader::{CountingReader, FileReader, MemReader, RangeReader};

/// What a caught panic said, where it said it as text: a parser's panic on hostile bytes is
/// reported as that input's fault (archive/cab.rs, the archive walker, the Lambda's batch
/// handler), not as a crash.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}
