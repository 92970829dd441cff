//! The digest a debug file records of a source it names, as a want matches offers by it: an
//! MD5 (DWARF 5 line tables, CodeView with clang), a SHA-1 (older C# compilers, MSVC with
//! `/ZH:SHA1`) or a SHA-256 (Portable PDBs, MSVC by default).

use super::Offer;

/// One recorded digest of a wanted file (lowercase hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentDigest<'a> {
    Md5(&'a str),
    Sha1(&'a str),
    Sha256(&'a str),
}

impl<'a> ContentDigest<'a> {
    /// The strongest of the digests given.
    pub fn strongest(
        md5: Option<&'a str>,
        sha1: Option<&'a str>,
        sha256: Option<&'a str>,
    ) -> Option<Self> {
        sha256
            .map(ContentDigest::Sha256)
            .or(sha1.map(ContentDigest::Sha1))
            .or(md5.map(ContentDigest::Md5))
    }

    /// The digest's hex.
    pub fn value(self) -> &'a str {
        match self {
            ContentDigest::Md5(v) | ContentDigest::Sha1(v) | ContentDigest::Sha256(v) => v,
        }
    }

    /// The offer's digest of the same algorithm, if it carries one (an offer written before
    /// it carried SHA-1 and SHA-256 has only its MD5, or none).
    pub fn of_offer(self, offer: &Offer) -> Option<&str> {
        match self {
            ContentDigest::Md5(_) => offer.md5.as_deref(),
            ContentDigest::Sha1(_) => offer.sha1.as_deref(),
            ContentDigest::Sha256(_) => offer.sha256.as_deref(),
        }
    }

    /// The algorithm's name, as records say it.
    pub fn algorithm(self) -> &'static str {
        match self {
            ContentDigest::Md5(_) => "MD5",
            ContentDigest::Sha1(_) => "SHA-1",
            ContentDigest::Sha256(_) => "SHA-256",
        }
    }
}
