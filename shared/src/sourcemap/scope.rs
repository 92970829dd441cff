//! The tenant of a join between uploads (THREATS.md, invariant 1: tenancy).

use std::fmt;

use crate::upload_meta::UploadMeta;

/// Whose uploads meet in the source joins: those of one product and one build. A debug file
/// of product A never sees an offer or a note of product B (the join records of two scopes
/// are different objects), whatever build string or paths either chose; uploads naming no
/// build share their product's scope, and uploads naming no product share the one scope of
/// uploads naming none.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Scope {
    product: Option<String>,
    build: Option<String>,
}

impl Scope {
    /// The scope of an upload with metadata `meta`.
    pub fn of(meta: &UploadMeta) -> Self {
        Scope {
            product: meta.product.clone().filter(|p| !p.is_empty()),
            build: meta.build.clone().filter(|b| !b.is_empty()),
        }
    }

    /// Whether it names a build (a build's first debug file lists its records: see
    /// `pipeline::sources`).
    pub fn names_build(&self) -> bool {
        self.build.is_some()
    }

    /// The string its join records are named by, one per scope (injective). Uploads naming
    /// no product keep the name a scope had before products took part (the build, or "" for
    /// none), so the records of a store written then are found. A product's scope starts
    /// with a NUL and its product's length; a build string holding a NUL (no metadata or
    /// flag carries one, but names are hostile) is told apart by a leading U+0001, so no
    /// build string reaches a product's scope.
    pub(crate) fn id(&self) -> String {
        let build = self.build.as_deref().unwrap_or("");
        match &self.product {
            None if build.contains('\0') => format!("\u{1}{build}"),
            None => build.to_string(),
            Some(product) => format!("\0{}:{product}\0{build}", product.len()),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let product = self.product.as_deref().unwrap_or("(none)");
        let build = self.build.as_deref().unwrap_or("(none)");
        write!(f, "product {product}, build {build}")
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;
    use crate::upload_meta::UploadMeta;

    fn meta(product: Option<&str>, build: Option<&str>) -> UploadMeta {
        UploadMeta {
            product: product.map(str::to_string),
            build: build.map(str::to_string),
            ..UploadMeta::default()
        }
    }

    #[test]
    fn products_never_share_a_scope_whatever_their_builds() {
        let a = Scope::of(&meta(Some("a"), Some("1")));
        let b = Scope::of(&meta(Some("b"), Some("1")));
        assert_ne!(a.id(), b.id());
        assert_ne!(
            Scope::of(&meta(Some("a"), None)).id(),
            Scope::of(&meta(Some("b"), None)).id()
        );
        // Without a product: the build alone, as before products took part.
        assert_eq!(Scope::of(&meta(None, Some("1"))).id(), "1");
        assert_eq!(Scope::of(&meta(None, None)).id(), "");
        // A build string cannot reach a product's scope.
        for build in [a.id(), format!("\0{}", b.id())] {
            assert_ne!(Scope::of(&meta(None, Some(&build))).id(), a.id());
            assert_ne!(Scope::of(&meta(None, Some(&build))).id(), b.id());
        }
        assert_ne!(
            Scope::of(&meta(Some("a\0b"), None)).id(),
            Scope::of(&meta(Some("a"), Some("b\0"))).id()
        );
        assert_eq!(a.to_string(), "product a, build 1");
        assert!(a.names_build() && !Scope::of(&meta(Some("a"), None)).names_build());
    }
}
