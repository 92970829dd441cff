//! SHA-1, symdex's content identity (a local store's versions and ETags, sources, upload and
//! record names). The `sha1` crate uses the CPU's SHA extensions where it has them: several
//! times faster than a portable implementation, and a re-index hashes every input again.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

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
        hex(&self.0.finalize())
    }

    /// The digest's 20 bytes.
    pub fn digest(self) -> [u8; 20] {
        self.0.finalize().into()
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
        hex(&self.digest())
    }
}

/// SHA-256 (the `sha2` crate): what Portable PDBs record of each source document.
#[derive(Clone, Default)]
pub struct Sha256(sha2::Sha256);

impl Sha256 {
    pub fn update(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.0, bytes);
    }

    /// The digest, lowercase hex.
    pub fn hex(self) -> String {
        hex(&sha2::Digest::finalize(self.0))
    }
}

/// SHA-1 of `bytes`, lowercase hex.
pub fn sha1_hex(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(bytes);
    hasher.hex()
}

/// The bytes `text` spells in hex digits, two per byte, either case; `None` for anything
/// else (an odd length, a sign: `u8::from_str_radix` would take `+f` for `0f`). What [`hex`]
/// writes, read back; by hand because the digits are all there is to it.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |d: u8| char::from(d).to_digit(16).map(|n| n as u8);
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// SHA-1 of a file's content, streamed.
pub fn file_sha1(path: &Path) -> io::Result<String> {
    sha1_of(&mut fs::File::open(path)?)
}

/// SHA-1 of an open file's content from where it is, streamed.
pub(crate) fn sha1_of(file: &mut fs::File) -> io::Result<String> {
    let mut hasher = Sha1::new();
    // No bigger than the file (plus one byte to see its end): a re-index hashes every input,
    // and zeroing a 256 KiB buffer for each small one cost as much as hashing it.
    let size = file.metadata().map_or(0, |m| m.len());
    let mut buf = vec![0u8; size.saturating_add(1).clamp(4096, 256 * 1024) as usize];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.hex())
}

/// A writer that hashes what passes through it (SHA-1, the local store's content identity):
/// an archive entry is hashed while it is expanded, not read again.
pub struct Sha1Writer<W> {
    inner: W,
    hasher: Sha1,
}

impl<W: io::Write> Sha1Writer<W> {
    pub fn new(inner: W) -> Self {
        Sha1Writer {
            inner,
            hasher: Sha1::new(),
        }
    }

    /// The writer and the hex SHA-1 of everything written.
    pub fn finish(self) -> (W, String) {
        (self.inner, self.hasher.hex())
    }
}

impl<W: io::Write> io::Write for Sha1Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::{sha1_hex, Md5, Sha1};

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
