//! What an uploader says of an upload besides its bytes: its build, product, version,
//! retention channel and source root (CLI flags, S3 object metadata or key segments). Every
//! manifest record carries it (`manifest::Record`, flattened).

use serde::{Deserialize, Serialize};

/// Upload metadata: which build published the artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Never `Some("")`: an empty product is none ([`product_named`]), as read back too.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deserialize_product"
    )]
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

/// The product an uploader named, as symdex takes it: an empty name (`--product ""`, an empty
/// `x-amz-meta-product` or `product=` segment) is none. Every comparison of products (whose
/// bytes an overwrite may replace, refs/overwrites.rs; the source joins' scope; the products
/// a conflict names) then agrees on what naming none is: front ends build [`UploadMeta`]
/// through this, and records read back go through it too (written before it, they may
/// hold `""`).
pub fn product_named(product: Option<String>) -> Option<String> {
    product.filter(|p| !p.is_empty())
}

fn deserialize_product<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(deserializer).map(product_named)
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

#[cfg(test)]
mod tests {
    use super::{product_named, UploadMeta};

    /// An empty product is no product, named so or read back from a record written before.
    #[test]
    fn an_empty_product_is_none() {
        assert_eq!(product_named(Some(String::new())), None);
        assert_eq!(product_named(None), None);
        assert_eq!(product_named(Some("p".into())), Some("p".into()));
        let read: UploadMeta = serde_json::from_str(r#"{"product": "", "build": "b"}"#).unwrap();
        assert_eq!(read.product, None);
        assert_eq!(read.build.as_deref(), Some("b"));
        let read: UploadMeta = serde_json::from_str(r#"{"product": "p"}"#).unwrap();
        assert_eq!(read.product.as_deref(), Some("p"));
        let read: UploadMeta = serde_json::from_str("{}").unwrap();
        assert_eq!(read, UploadMeta::default());
    }
}
