//! One line of the holdings' comparison.

use serde::Serialize;

/// One (product, layout) line of the comparison.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub product: String,
    pub layout: String,
    /// Keys and bytes the store holds now.
    pub keys: u64,
    pub bytes: u64,
    /// Keys the manifest says are published now.
    pub published: u64,
}
