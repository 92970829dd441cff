//! Sources no flag names (sourcemap.rs, "sources without flags"): which files no format
//! claims a push sends, decided by the rule the indexer publishes them by
//! (`sourcemap::unflagged_may_serve`), so that what the deployment would refuse is not sent,
//! and nothing secret-shaped leaves the machine without a flag (THREATS.md, invariant 2).

use std::io::Read;
use std::path::{Path, PathBuf};

use symdex_shared::digest::Md5;
use symdex_shared::sourcemap::{base_name, secret_shaped, unflagged_may_serve};

use super::wanted::{ByBaseName, Wanted};

/// A file no format claims, or an archive holding only such files (and no artifact): not sent
/// unless a debug file of the push names what it holds.
#[derive(Debug, Clone)]
pub struct Unclaimed {
    pub path: PathBuf,
    pub ingest_key: String,
    /// The paths its files are offered under, as the indexer offers them
    /// (`pipeline::sources::offer_of`): a loose file's ingest key, an archive's entry paths.
    pub offered: Vec<String>,
    /// An archive: its entries' MD5s are not computed here (each would be a second
    /// decompression), so where a want records one an entry sharing its path may be named,
    /// and the deployment decides by the entry's bytes.
    pub archive: bool,
}

impl Unclaimed {
    /// The wanted paths of `wants` it is sent as the source of (none: nothing names it), or
    /// why it is not sent though a debug file names it (a secret-shaped name).
    pub fn named_for(&self, wants: &ByBaseName) -> Result<Vec<String>, String> {
        let mut named_for = Vec::new();
        let mut refused = None;
        for offered in &self.offered {
            let Some(wants) = wants.get(base_name(offered)) else {
                continue;
            };
            let md5 = self.md5_if_asked(wants);
            let naming = wants.iter().filter(|w| {
                unflagged_may_serve(&w.path, w.md5.as_deref(), offered, md5.as_deref())
            });
            for want in naming {
                match secret_shaped(offered) {
                    Some(what) => {
                        refused.get_or_insert((offered, what, &want.path));
                    }
                    None if !named_for.contains(&want.path) => named_for.push(want.path.clone()),
                    None => {}
                }
            }
        }
        match (named_for.is_empty(), refused) {
            (true, Some((offered, what, wanted))) => {
                let which = match self.archive {
                    true => format!("its entry {offered}"),
                    false => "it".to_string(),
                };
                Err(format!(
                    "a debug file of this push names {which} ({wanted}), but the name is \
                     secret-shaped ({what}): not sent as a source unless flagged as one \
                     (--source, --source-ext)"
                ))
            }
            _ => Ok(named_for),
        }
    }

    /// A loose file's MD5, where a want of its base name (`wants`) records one (else unneeded:
    /// the path rule decides); `None` for an archive's entry or an unreadable file (whose
    /// read then fails when it is sent).
    fn md5_if_asked(&self, wants: &[Wanted]) -> Option<String> {
        if self.archive || !wants.iter().any(|w| w.md5.is_some()) {
            return None;
        }
        md5_hex(&self.path).ok()
    }
}

/// Why a file no format claims and no flag names is never sent as a source, whatever names
/// it: its name is secret-shaped (the indexer refuses it too, and records why).
pub fn secret_reason(offered: &str) -> Option<String> {
    secret_shaped(offered).map(|what| {
        format!(
            "its name is secret-shaped ({what}): never sent as a source unless flagged as one \
             (--source, --source-ext)"
        )
    })
}

/// The MD5 of the file at `path`, lowercase hex (what DWARF 5 records of a source).
fn md5_hex(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut md5 = Md5::default();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        md5.update(&buf[..n]);
    }
    Ok(md5.hex())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{md5_hex, Unclaimed};
    use crate::push::wanted::{ByBaseName, Wanted};

    fn want(path: &str, md5: Option<&str>) -> Wanted {
        Wanted {
            path: path.to_string(),
            md5: md5.map(str::to_string),
        }
    }

    /// `wants` as `named_for` takes them.
    fn by_base(wants: &[Wanted]) -> ByBaseName {
        Wanted::by_base_name(wants.iter().cloned())
    }

    fn loose(path: &Path, ingest_key: &str) -> Unclaimed {
        Unclaimed {
            path: path.to_path_buf(),
            ingest_key: ingest_key.to_string(),
            offered: vec![ingest_key.to_string()],
            archive: false,
        }
    }

    #[test]
    fn a_file_is_named_by_two_components_or_its_md5_never_by_its_base_name_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("util.c");
        std::fs::write(&file, b"int util;\n").unwrap();
        let md5 = md5_hex(&file).unwrap();
        let util = loose(&file, "app/b1/src/util.c");
        // Two trailing components, no MD5 recorded (gcc).
        let named = util.named_for(&by_base(&[want("/ci/w/src/util.c", None)]));
        assert_eq!(named, Ok(vec!["/ci/w/src/util.c".to_string()]));
        // The base name alone, no MD5: not named.
        assert_eq!(
            util.named_for(&by_base(&[want("/ci/w/lib/util.c", None)])),
            Ok(vec![])
        );
        // The base name and its MD5 (clang): named; another MD5: not.
        let same = util.named_for(&by_base(&[want("/ci/w/lib/util.c", Some(&md5))]));
        assert_eq!(same, Ok(vec!["/ci/w/lib/util.c".to_string()]));
        let other = "00112233445566778899aabbccddeeff";
        assert_eq!(
            util.named_for(&by_base(&[want("/ci/w/src/util.c", Some(other))])),
            Ok(vec![])
        );
    }

    #[test]
    fn a_secret_shaped_file_a_debug_file_names_is_refused_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.env");
        std::fs::write(&file, b"TOKEN=1\n").unwrap();
        let md5 = md5_hex(&file).unwrap();
        let secrets = loose(&file, "app/b1/config/secrets.env");
        for wants in [
            vec![want("/ci/w/config/secrets.env", None)],
            vec![want("/x/secrets.env", Some(&md5))],
        ] {
            let refused = secrets.named_for(&by_base(&wants)).unwrap_err();
            assert!(
                refused.contains("secret-shaped (secrets file)"),
                "{refused}"
            );
            assert!(refused.contains(&wants[0].path), "{refused}");
        }
        // An archive's secret entry is refused by its name; another entry named sends it.
        let archive = Unclaimed {
            path: file.clone(),
            ingest_key: "app/b1/src.tgz".into(),
            offered: vec!["app/.env".into(), "app/main.c".into()],
            archive: true,
        };
        let refused = archive
            .named_for(&by_base(&[want("/ci/app/.env", None)]))
            .unwrap_err();
        assert!(refused.contains("its entry app/.env"), "{refused}");
        let both = [want("/ci/app/.env", None), want("/ci/app/main.c", None)];
        assert_eq!(
            archive.named_for(&by_base(&both)),
            Ok(vec!["/ci/app/main.c".to_string()])
        );
    }
}
