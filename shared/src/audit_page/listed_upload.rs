//! What of an upload record the holdings' listing reads.

use serde::Deserialize;

/// What of an upload record the listing needs (the whole record holds much more).
#[derive(Deserialize)]
pub struct ListedUpload {
    #[serde(default)]
    pub product: Option<String>,
    #[serde(default)]
    pub keys: Vec<String>,
}
