//! An upload's id and where its bytes came from, in one spelling: [`UploadId`] and
//! [`Location`] are made and read here only (the pipeline's `Input` makes every id; removals,
//! `delete`, `push --wait` and a hand-over's re-read take them apart here).
//!
//! The spellings, as stores and manifests hold them:
//! - a location in an id: `file:<path>`, `s3:<bucket>/<key>`; in an upload record's `source`
//!   (what a person reads and a re-read opens): `<path>`, `s3://<bucket>/<key>`;
//! - a local upload: `file:<path>[!/<entry>]@<sha1>[#<scope>]`, the scope
//!   `product=<p>&build=<b>` (either alone) with `%&=#` escaped in both;
//! - an S3 upload: `s3:<bucket>/<key>@<version id, or the ETag unversioned>[!/<entry>]`.
//!
//! The id of a record about an input that published nothing has no version (`file:<path>`,
//! `s3:<bucket>/<key>[!/<entry>]`); it is never read back as an upload's.

use std::fmt;
use std::str::FromStr;

use crate::upload_meta::UploadMeta;

/// Where an upload's bytes came from: a local input file (its path as shown) or an object of
/// the ingest bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    File { path: String },
    S3 { bucket: String, key: String },
}

impl Location {
    /// From an upload record's `source`: `s3://<bucket>/<key>`, else a local path.
    pub fn of_source(source: &str) -> Location {
        match source
            .strip_prefix("s3://")
            .and_then(|rest| rest.split_once('/'))
        {
            Some((bucket, key)) => Location::S3 {
                bucket: bucket.to_string(),
                key: key.to_string(),
            },
            None => Location::File {
                path: source.to_string(),
            },
        }
    }

    /// As an upload record names it (`UploadRecord::source`): the path, or
    /// `s3://<bucket>/<key>`.
    pub fn source(&self) -> String {
        match self {
            Location::File { path } => path.clone(),
            Location::S3 { bucket, key } => format!("s3://{bucket}/{key}"),
        }
    }

    /// The ingest object's bucket and key.
    pub fn s3(&self) -> Option<(&str, &str)> {
        match self {
            Location::S3 { bucket, key } => Some((bucket, key)),
            Location::File { .. } => None,
        }
    }
}

/// As ids begin: `file:<path>`, `s3:<bucket>/<key>`.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File { path } => write!(f, "file:{path}"),
            Location::S3 { bucket, key } => write!(f, "s3:{bucket}/{key}"),
        }
    }
}

/// An upload's id: its location, the version of its bytes there, the archive entry it is,
/// and (a local upload) the product and build it was indexed for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UploadId {
    pub location: Location,
    /// A local file's content SHA-1; an S3 object's version id, or its ETag unversioned.
    /// `None`: an input known by its location alone (a record that published nothing).
    pub version: Option<String>,
    /// The path inside the archive at `location` (nested archives: `inner.tar.gz!/path`).
    pub entry: Option<String>,
    /// A local upload's product and build, escaped (`product=<p>&build=<b>`): the same file
    /// indexed for two products or builds is two uploads.
    pub scope: Option<String>,
}

impl UploadId {
    /// A local file's upload of content `sha1`, indexed for `meta`'s product and build.
    pub fn file(path: &str, entry: Option<&str>, sha1: &str, meta: &UploadMeta) -> UploadId {
        UploadId {
            location: Location::File {
                path: path.to_string(),
            },
            version: Some(sha1.to_string()),
            entry: entry.map(str::to_string),
            scope: scope_of(meta),
        }
    }

    /// [`UploadId::file`]'s spelling, made without building the id (every input of a
    /// re-index spells its id once).
    pub fn file_spelling(path: &str, entry: Option<&str>, sha1: &str, meta: &UploadMeta) -> String {
        let scope = scope_of(meta);
        let mut out =
            String::with_capacity(path.len() + 48 + scope.as_ref().map_or(0, String::len));
        // Writing to a String cannot fail.
        let _ = write_file_id(&mut out, path, entry, Some(sha1), scope.as_deref());
        out
    }

    /// An S3 object's upload at `version` (its version id, or its ETag unversioned).
    pub fn s3(bucket: &str, key: &str, version: Option<&str>, entry: Option<&str>) -> UploadId {
        UploadId {
            location: Location::S3 {
                bucket: bucket.to_string(),
                key: key.to_string(),
            },
            version: version.map(str::to_string),
            entry: entry.map(str::to_string),
            scope: None,
        }
    }

    /// The id of the archive upload this is an entry of (`None`: not an entry).
    pub fn archive(&self) -> Option<UploadId> {
        self.entry.as_ref()?;
        Some(UploadId {
            entry: None,
            ..self.clone()
        })
    }

    /// Whether `id` is this upload or one of its entries (an archive's).
    pub fn holds(&self, id: &str) -> bool {
        match id.parse::<UploadId>() {
            Ok(other) => other == *self || other.archive().as_ref() == Some(self),
            Err(_) => false,
        }
    }
}

/// `product=<p>&build=<b>` (either alone), `%&=#` escaped in both; or, with a build alone, the
/// form ids had before products (`build=<b>`, unescaped).
fn scope_of(meta: &UploadMeta) -> Option<String> {
    // `%`, `&`, `=` and `#` of a product or build are escaped there: `--product 'b&build=1'`
    // names no other product's upload.
    let part = |text: &str| {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '%' | '&' | '=' | '#' => out.push_str(&format!("%{:02X}", c as u32)),
                c => out.push(c),
            }
        }
        out
    };
    match (&meta.product, &meta.build) {
        (Some(product), Some(build)) => {
            Some(format!("product={}&build={}", part(product), part(build)))
        }
        (Some(product), None) => Some(format!("product={}", part(product))),
        (None, Some(build)) => Some(format!("build={build}")),
        (None, None) => None,
    }
}

impl fmt::Display for UploadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entry = |f: &mut fmt::Formatter<'_>| match &self.entry {
            Some(entry) => write!(f, "!/{entry}"),
            None => Ok(()),
        };
        let version = |f: &mut fmt::Formatter<'_>| match &self.version {
            Some(version) => write!(f, "@{version}"),
            None => Ok(()),
        };
        match &self.location {
            Location::File { path } => write_file_id(
                f,
                path,
                self.entry.as_deref(),
                self.version.as_deref(),
                self.scope.as_deref(),
            ),
            Location::S3 { .. } => {
                write!(f, "{}", self.location)?;
                version(f)?;
                entry(f)
            }
        }
    }
}

/// A local upload's id: the entry belongs to the path, its content's hash follows.
fn write_file_id(
    out: &mut impl fmt::Write,
    path: &str,
    entry: Option<&str>,
    version: Option<&str>,
    scope: Option<&str>,
) -> fmt::Result {
    write!(out, "file:{path}")?;
    if let Some(entry) = entry {
        write!(out, "!/{entry}")?;
    }
    if let Some(version) = version {
        write!(out, "@{version}")?;
    }
    if let Some(scope) = scope {
        write!(out, "#{scope}")?;
    }
    Ok(())
}

/// An id that is none of the spellings above.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an upload id: {0:?}")]
pub struct NotAnUploadId(pub String);

/// Read back from its spelling. A path or key may hold `@` and `!/` itself: a local upload's
/// version is the last `@` followed by a SHA-1 (then the end or its scope), an S3 upload's the
/// first `@` before its entry followed by no `/` or `@` (version ids and ETags hold neither);
/// an entry begins at the first `!/` after the path (or the version).
impl FromStr for UploadId {
    type Err = NotAnUploadId;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        let wrong = || NotAnUploadId(id.to_string());
        if let Some(rest) = id.strip_prefix("file:") {
            return Ok(parse_file(rest));
        }
        let rest = id.strip_prefix("s3:").ok_or_else(wrong)?;
        let (bucket, rest) = rest.split_once('/').ok_or_else(wrong)?;
        Ok(parse_s3(bucket, rest))
    }
}

fn parse_file(rest: &str) -> UploadId {
    let is_sha1 = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let versioned = rest.rmatch_indices('@').find_map(|(at, _)| {
        let after = &rest[at + 1..];
        let (sha1, scope) = match after.split_once('#') {
            Some((sha1, scope)) => (sha1, Some(scope)),
            None => (after, None),
        };
        is_sha1(sha1).then_some((at, sha1, scope))
    });
    let (head, version, scope) = match versioned {
        Some((at, sha1, scope)) => (&rest[..at], Some(sha1), scope),
        None => (rest, None, None),
    };
    let (path, entry) = match head.split_once("!/") {
        Some((path, entry)) => (path, Some(entry)),
        None => (head, None),
    };
    UploadId {
        location: Location::File {
            path: path.to_string(),
        },
        version: version.map(str::to_string),
        entry: entry.map(str::to_string),
        scope: scope.map(str::to_string),
    }
}

fn parse_s3(bucket: &str, rest: &str) -> UploadId {
    // The version: the first `@` before the first `!/` whose text up to the next `!/` (or the
    // end) holds no `/` or `@` (a key may hold both; version ids and ETags hold neither).
    let before_entry = rest.find("!/").unwrap_or(rest.len());
    let versioned = rest[..before_entry].match_indices('@').find_map(|(at, _)| {
        let after = &rest[at + 1..];
        let (version, entry) = match after.split_once("!/") {
            Some((version, entry)) => (version, Some(entry)),
            None => (after, None),
        };
        let plain = !version.is_empty() && !version.contains(['/', '@']);
        plain.then_some((at, version, entry))
    });
    let (key, version, entry) = match versioned {
        Some((at, version, entry)) => (&rest[..at], Some(version), entry),
        None => match rest.split_once("!/") {
            Some((key, entry)) => (key, None, Some(entry)),
            None => (rest, None, None),
        },
    };
    UploadId::s3(bucket, key, version, entry)
}

#[cfg(test)]
mod tests {
    use super::{Location, UploadId};
    use crate::upload_meta::UploadMeta;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn meta(product: Option<&str>, build: Option<&str>) -> UploadMeta {
        UploadMeta {
            product: product.map(str::to_string),
            build: build.map(str::to_string),
            ..UploadMeta::default()
        }
    }

    /// Every spelling reads back as what made it, `@`, `!/` and `#` in paths and keys too.
    #[test]
    fn ids_read_back_as_they_were_made() {
        let ids = [
            UploadId::file("/b/app.so", None, SHA, &meta(None, None)),
            UploadId::file("/b/a@2/x#y.so", None, SHA, &meta(None, Some("7"))),
            UploadId::file(
                "/b/a.zip",
                Some("in/c@d.so"),
                SHA,
                &meta(Some("p&q"), Some("1")),
            ),
            UploadId::file("/b/a.tar", Some("i.tgz!/x.so"), SHA, &meta(Some("p"), None)),
            UploadId::s3("ingest", "app/lib@1.2.so", Some("v1"), None),
            UploadId::s3("ingest", "app/a.zip", Some("etag-3"), Some("d/x@y.pdb")),
            UploadId::s3("ingest", "app/a@b/c.zip", Some("3Lg.z_1"), Some("x.so")),
        ];
        let m = meta(Some("p&q"), Some("1"));
        assert_eq!(
            UploadId::file_spelling("/b/a.zip", Some("x"), SHA, &m),
            UploadId::file("/b/a.zip", Some("x"), SHA, &m).to_string()
        );
        for id in ids {
            let spelled = id.to_string();
            assert_eq!(spelled.parse::<UploadId>(), Ok(id), "{spelled}");
        }
    }

    #[test]
    fn spellings_are_those_stores_hold() {
        let id = UploadId::file("/b/a.zip", Some("x.so"), SHA, &meta(Some("p&q"), Some("1")));
        assert_eq!(
            id.to_string(),
            format!("file:/b/a.zip!/x.so@{SHA}#product=p%26q&build=1")
        );
        let id = UploadId::s3("ingest", "k/a.zip", Some("v9"), Some("x.so"));
        assert_eq!(id.to_string(), "s3:ingest/k/a.zip@v9!/x.so");
        assert_eq!(id.location.source(), "s3://ingest/k/a.zip");
        assert_eq!(Location::of_source("s3://ingest/k/a.zip"), id.location);
        assert_eq!(
            id.archive().map(|a| a.to_string()).as_deref(),
            Some("s3:ingest/k/a.zip@v9")
        );
        assert!(UploadId::s3("ingest", "k/a.zip", Some("v9"), None).holds(&id.to_string()));
        assert!(!UploadId::s3("ingest", "k/a.zip", Some("v8"), None).holds(&id.to_string()));
        assert!("http://x".parse::<UploadId>().is_err());
    }
}
