//! An upstream's credentials: an `Authorization` header value that no printed line, `Debug`
//! output included, ever shows.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// `Authorization: Basic` for `user:password`, `Bearer` for a bare token.
    pub fn from_credentials(credentials: &str) -> Secret {
        use base64::Engine;
        match credentials.contains(':') {
            true => Secret(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            )),
            false => Secret(format!("Bearer {credentials}")),
        }
    }

    /// An `Authorization` header value as it is.
    pub fn header(value: String) -> Secret {
        Secret(value)
    }

    /// The header value, for the request that sends it and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
