//! Credentials `check` sends to a private server, taken so that they are never printed: a
//! token from a file or the environment (`Authorization: Bearer`), headers given whole, or
//! user information in the server's URL (`https://user:token@host`, sent as basic
//! credentials). Every URL `check` prints is the server's without its user information.

use base64::Engine;
use percent_encoding::percent_decode_str;

/// A server's base URL without user information, and the headers every request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentialed {
    /// Safe to print.
    pub base: String,
    /// `(name, value)`: never printed.
    pub headers: Vec<(String, String)>,
}

/// `url` with its user information (`user:password@`) taken out, and that information as a
/// basic `Authorization` header.
pub fn split_userinfo(url: &str) -> Credentialed {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Credentialed {
            base: url.to_string(),
            headers: Vec::new(),
        };
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return Credentialed {
            base: url.to_string(),
            headers: Vec::new(),
        };
    };
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let pair = format!("{}:{}", decode(user), decode(password));
    let basic = base64::engine::general_purpose::STANDARD.encode(pair);
    Credentialed {
        base: format!("{scheme}://{host}{path}"),
        headers: vec![("Authorization".into(), format!("Basic {basic}"))],
    }
}

/// Any user information in `text` (a URL, or an error message quoting one) replaced by
/// `***`: for every line printed about a server.
pub fn redacted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rsplit_once('@') {
            Some((_, host)) => {
                out.push_str("***@");
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

/// A `--header 'Name: value'` argument.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or("a header is `Name: value`".to_string())?;
    let name = name.trim();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid {
        return Err("a header is `Name: value`, the name a token".into());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// The first non-empty line of a token file, trimmed.
pub fn token_from_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the token file {}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("the token file {} is empty", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{parse_header, redacted, split_userinfo};
    use base64::Engine;

    #[test]
    fn user_information_becomes_a_header_and_leaves_the_url() {
        let c = split_userinfo("https://ci:s%40cret@symbols.example.com/base");
        assert_eq!(c.base, "https://symbols.example.com/base");
        let expected = base64::engine::general_purpose::STANDARD.encode("ci:s@cret");
        assert_eq!(
            c.headers,
            [("Authorization".to_string(), format!("Basic {expected}"))]
        );
        let plain = split_userinfo("http://127.0.0.1:8080");
        assert_eq!(plain.base, "http://127.0.0.1:8080");
        assert!(plain.headers.is_empty());
    }

    #[test]
    fn redaction_takes_out_every_user_information() {
        assert_eq!(
            redacted("error: https://u:t0ken@h/x failed, see http://a@b"),
            "error: https://***@h/x failed, see http://***@b"
        );
        assert_eq!(redacted("no url here"), "no url here");
    }

    #[test]
    fn headers_are_name_and_value() {
        assert_eq!(
            parse_header("Authorization: Bearer x:y").unwrap(),
            ("Authorization".into(), "Bearer x:y".into())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("bad name: v").is_err());
    }
}
