//! What an uploader says of an upload besides its bytes: its build, product, version,
//! retention channel and source root (CLI flags, S3 object metadata or key segments). Every
//! manifest record carries it (`manifest::Record`, flattened).

use serde::{Deserialize, Serialize};

/// Upload metadata: which build published the artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Retention channel (`try`, `nightly`, `release`...): see retention.rs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// When the upload expires (RFC 3339, UTC); absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// The directory the build's sources were compiled in: a source upload then serves
    /// exactly `<source_root>/<path>` (sourcemap.rs); absent: matched by path suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_root: Option<String>,
}

#[cfg(test)]
impl UploadMeta {
    /// Metadata with every field set (records' round trips).
    pub(crate) fn with_every_field() -> UploadMeta {
        let s = |v: &str| Some(v.to_string());
        UploadMeta {
            build: s("b"),
            product: s("p"),
            version: s("1.0"),
            channel: s("try"),
            expires: s("2027-01-01T00:00:00Z"),
            source_root: s("/src"),
        }
    }
}
