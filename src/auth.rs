//! `symdex serve --auth-token-file`: who may read the store. Each line of the file is one
//! secret (blank lines and `#` comments aside), or its SHA-256 as `sha256:<hex>` so the file
//! need not hold secrets:
//!
//! - a token, sent as `Authorization: Bearer <token>` (elfutils' `DEBUGINFOD_HEADERS_FILE`,
//!   Sentry's custom headers), or as the password of HTTP basic credentials with any user
//!   name (dotnet-symbol's and Visual Studio's personal-access-token convention);
//! - `user:password`, sent as HTTP basic credentials (WinDbg and Visual Studio prompt for
//!   them, or take them in the URL).
//!
//! The CloudFront Function of the Terraform module (infra/modules/symdex/edge/access.js)
//! applies the same rules against a KeyValueStore of the same hashes.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use sha2::{Digest, Sha256};

pub struct Credentials {
    digests: HashSet<[u8; 32]>,
}

fn digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    symdex_shared::formats::unhex(hex)?.try_into().ok()
}

impl Credentials {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut digests = HashSet::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let entry = match line.strip_prefix("sha256:") {
                Some(hex) => parse_hex(hex)
                    .with_context(|| format!("line {}: sha256: wants 64 hex digits", number + 1))?,
                None => digest(line.as_bytes()),
            };
            digests.insert(entry);
        }
        anyhow::ensure!(
            !digests.is_empty(),
            "no credentials (every request would be refused)"
        );
        Ok(Credentials { digests })
    }

    /// Whether an `Authorization` header value carries one of the secrets.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, value)) = authorization.and_then(|a| a.trim().split_once(' ')) else {
            return false;
        };
        let value = value.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self.digests.contains(&digest(value.as_bytes()));
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(value) else {
            return false;
        };
        let password = match decoded.iter().position(|&b| b == b':') {
            Some(colon) => &decoded[colon + 1..],
            None => return false,
        };
        self.digests.contains(&digest(&decoded)) || self.digests.contains(&digest(password))
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::Credentials;
    use base64::Engine;

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn tokens_and_basic_credentials() {
        let hashed = format!("sha256:{:x}", Sha256::digest(b"hashed-token"));
        let creds =
            Credentials::parse(&format!("# ci\nplain-token\nci:s3cret\n{hashed}\n")).unwrap();
        assert!(creds.allows(Some("Bearer plain-token")));
        assert!(creds.allows(Some("bearer hashed-token")));
        assert!(
            creds.allows(Some(&basic("anyone:plain-token"))),
            "token as password"
        );
        assert!(creds.allows(Some(&basic("ci:s3cret"))));
        assert!(
            !creds.allows(Some(&basic("other:s3cret"))),
            "the pair, not the password"
        );
        assert!(!creds.allows(Some("Bearer wrong")));
        assert!(!creds.allows(Some("Bearer")));
        assert!(!creds.allows(Some("Basic !!!")));
        assert!(!creds.allows(Some(&basic("no-colon"))));
        assert!(!creds.allows(Some("Digest plain-token")));
        assert!(!creds.allows(None));
        // The digest in either case.
        let upper = format!("sha256:{:X}", Sha256::digest(b"upper-token"));
        let creds = Credentials::parse(&upper).unwrap();
        assert!(creds.allows(Some("Bearer upper-token")));
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(Credentials::parse("# nothing\n\n").is_err());
        assert!(Credentials::parse("sha256:abc\n").is_err());
        // 64 characters, but signs are no hex digits (`from_str_radix` read `+f` as `0f`).
        assert!(Credentials::parse(&format!("sha256:{}\n", "+f".repeat(32))).is_err());
    }
}
