//! Which download URLs are the store's own, and the key each names: `<base>/src/<rest>` is
//! the key `src/<rest>` (percent-decoded), where `base` is the store's public URL (what
//! `symdex sourcelink --url` and `srcsrv --url` were given). With no base known, a URL whose
//! path holds `/src/<product>/<build>/<path>` is taken for the store's: what those commands
//! write, wherever the store is reached.

use percent_encoding::percent_decode_str;

/// The store's public URL, split, when known.
pub(super) struct StoreUrls {
    base: Option<Base>,
}

struct Base {
    /// Host and port, lowercased, without user information.
    authority: String,
    /// Its path, without the `/` that may end it (empty for a host's root).
    path: String,
}

impl StoreUrls {
    /// From the store's public URL (`None`: not known, guessed from each URL's path).
    pub(super) fn new(base: Option<&str>) -> anyhow::Result<StoreUrls> {
        let base = match base {
            Some(url) => {
                let Some((authority, path)) = split(url) else {
                    anyhow::bail!("the store's URL is not an http:// or https:// URL");
                };
                Some(Base {
                    authority: authority.to_ascii_lowercase(),
                    path: path.trim_end_matches('/').to_string(),
                })
            }
            None => None,
        };
        Ok(StoreUrls { base })
    }

    /// Whether the store's URL is not known (each URL's key is read from its path alone).
    pub(super) fn guessing(&self) -> bool {
        self.base.is_none()
    }

    /// The store key `url` names, or why it names none (the reason a row shows).
    pub(super) fn key_of(&self, url: &str) -> Result<String, String> {
        let not_here = "not served by this store";
        let Some((authority, path)) = split(url) else {
            return Err(format!("{not_here}: not an http(s) URL"));
        };
        let rest = match &self.base {
            Some(base) => {
                let under = authority.eq_ignore_ascii_case(&base.authority)
                    && path
                        .strip_prefix(base.path.as_str())
                        .is_some_and(|r| r.starts_with("/src/"));
                if !under {
                    return Err(format!(
                        "{not_here}: not under {}{}/src/",
                        base.authority, base.path
                    ));
                }
                &path[base.path.len() + "/src/".len()..]
            }
            None => match path.find("/src/") {
                Some(at) => &path[at + "/src/".len()..],
                None => return Err(format!("{not_here}: its path holds no /src/")),
            },
        };
        let Ok(rest) = percent_decode_str(rest).decode_utf8() else {
            return Err(format!("{not_here}: its path is not UTF-8"));
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let plain = segments.iter().all(|s| {
            let odd = s.is_empty() || *s == "." || *s == "..";
            !(odd || s.contains('\\') || s.chars().any(char::is_control))
        });
        if segments.len() < 3 || !plain {
            return Err(format!(
                "{not_here}: not src/<product>/<build>/<path> (no empty, `.` or `..` segment)"
            ));
        }
        let key = format!("src/{rest}");
        symdex_shared::storage::check_key(&key).map_err(|e| format!("{not_here}: {e}"))?;
        Ok(key)
    }
}

/// An http(s) URL's authority (user information dropped) and path (query and fragment
/// dropped; `/` for none).
fn split(url: &str) -> Option<(&str, &str)> {
    let scheme_end = url.find("://")?;
    let scheme = &url[..scheme_end];
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let rest = &url[scheme_end + 3..];
    let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    (!authority.is_empty()).then_some((authority, if path.is_empty() { "/" } else { path }))
}

#[cfg(test)]
mod tests {
    use super::StoreUrls;

    #[test]
    fn keys_are_read_under_the_base_or_guessed_from_the_path() {
        let urls = StoreUrls::new(Some("https://user:secret@Sym.Example.com/base/")).unwrap();
        assert_eq!(
            urls.key_of("https://sym.example.com/base/src/app/1.0/x/a%20b.cpp?x=1"),
            Ok("src/app/1.0/x/a b.cpp".into())
        );
        for elsewhere in [
            "https://raw.githubusercontent.com/o/r/sha/src/a/b/c.cpp",
            "https://sym.example.com/other/src/app/1.0/a.cpp",
            "https://sym.example.com/base/src/app/1.0",
            "https://sym.example.com/base/src/app/../x/a.cpp",
            "https://sym.example.com/base/src/app/1.0/a%5Cb.cpp",
            "ftp://sym.example.com/base/src/app/1.0/a.cpp",
            "C:\\cache\\a.cpp",
        ] {
            let why = urls.key_of(elsewhere).unwrap_err();
            assert!(why.starts_with("not served by this store"), "{elsewhere}");
            assert!(!why.contains("secret"), "{why}");
        }
        let guessing = StoreUrls::new(None).unwrap();
        assert!(guessing.guessing());
        assert_eq!(
            guessing.key_of("http://127.0.0.1:1/src/app/7/Program.cs"),
            Ok("src/app/7/Program.cs".into())
        );
        assert!(guessing.key_of("https://h/a/b/c.cpp").is_err());
        assert!(StoreUrls::new(Some("s3://bucket")).is_err());
    }
}
