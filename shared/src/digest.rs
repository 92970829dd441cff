//! SHA-1, symdex's content identity (a local store's versions and ETags, sources, upload and
//! record names). The `sha1` crate uses the CPU's SHA extensions where it has them: several
//! times faster than a portable implementation, and a re-index hashes every input again.

use sha1::Digest;

/// A streaming SHA-1.
#[derive(Clone, Default)]
pub struct Sha1(sha1::Sha1);

impl Sha1 {
    pub fn new() -> Self {
        Sha1::default()
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The digest, lowercase hex.
    pub fn hex(self) -> String {
        crate::formats::hex(&self.0.finalize())
    }
}

/// A streaming MD5: not an identity symdex chooses, but the one DWARF 5 line tables record
/// for each source file (`DW_LNCT_MD5`, clang emits it), which a source upload is matched
/// against (sourcemap.rs).
#[derive(Clone, Default)]
pub struct Md5(md5::Md5);

impl Md5 {
    pub fn update(&mut self, bytes: &[u8]) {
        md5::Digest::update(&mut self.0, bytes);
    }

    /// The digest, as a line table records it.
    pub fn digest(self) -> [u8; 16] {
        md5::Digest::finalize(self.0).into()
    }

    /// The digest, lowercase hex.
    pub fn hex(self) -> String {
        crate::formats::hex(&self.digest())
    }
}

/// SHA-1 of `bytes`, lowercase hex.
pub fn sha1_hex(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(bytes);
    hasher.hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        // Streaming in pieces gives the same digest as one call.
        let big = vec![b'x'; 600_000];
        let mut hasher = Sha1::new();
        for chunk in big.chunks(7_001) {
            hasher.update(chunk);
        }
        assert_eq!(hasher.hex(), sha1_hex(&big));
        let mut md5 = Md5::default();
        md5.update(b"a");
        md5.update(b"bc");
        assert_eq!(md5.hex(), "900150983cd24fb0d6963f7d28e17f72");
    }
}
