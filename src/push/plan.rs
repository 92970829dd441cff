//! What a push sends: every input identified locally by the rules `index` follows (nothing is
//! sent that `index` would skip), named under the ingest prefix, with the hashes that name its
//! content (taken as it is sent: `send.rs`) so that what the deployment already holds is
//! recognised.

use std::io::Read;
use std::path::{Path, PathBuf};

use md5::Digest as _;
use symdex_shared::formats::{Detail, FormatError};
use symdex_shared::layouts::{keys_for, Layout};
use symdex_shared::storage::check_key;
use symdex_shared::storage::s3::{part_size_for, UPLOAD_PART_SIZE};

use super::named::{secret_reason, Unclaimed};
use super::wanted::Wanted;
use crate::inputs::{identify_each, walk_paths, Identified, Outcome, SourceArgs, Walked};
use crate::ordered::{map_in_order_iter_on, workers};

/// Files above this size are uploaded in parts (`storage::s3::upload_file`).
pub const MULTIPART_THRESHOLD: u64 = UPLOAD_PART_SIZE;

/// One input of a push, as planned.
#[derive(Debug, Clone)]
pub enum Planned {
    /// To be sent (unless the deployment has it already).
    Send(Sendable),
    /// Not an artifact `index` would publish: not sent, with the reason.
    Skipped { shown: String, reason: String },
    /// Could not be read.
    Failed { shown: String, error: String },
}

/// An input to send, and how to recognise it where it already is.
#[derive(Debug, Clone)]
pub struct Sendable {
    pub path: PathBuf,
    pub shown: String,
    /// Its key in the ingest bucket.
    pub ingest_key: String,
    /// Its size when planned. Its hashes are taken when it is sent ([`sha256_of`],
    /// [`s3_etag_of`]), each only if wanted, while other inputs go up.
    pub size: u64,
    /// One serving key per identity (the first layout's, behind its default prefix): all
    /// present with this content means it is published already.
    pub probe_keys: Vec<String>,
    /// The paths debug files of the push name that it is sent as the source of (a file no
    /// format claims, or an archive holding such files; empty for the rest): the deployment
    /// may skip it first and index it as a source when the debug file comes.
    pub named_for: Vec<String>,
}

impl Sendable {
    /// Sent because a debug file of the push names it (or files in it) as a source.
    pub fn named_source(&self) -> bool {
        !self.named_for.is_empty()
    }
}

/// Plans every input under `paths`; `key_prefix` (empty or ending in `/`) and `build` name
/// them in the ingest bucket: `<key_prefix><build>/<path below the argument>`. A file no
/// format claims (loose, or an archive's entry) is sent when a debug file of this push names
/// it by the indexer's rule (`named::Unclaimed::named_for`: the deployment then indexes it as
/// that debug file's source), unless its name is secret-shaped; other such files are not
/// sent, as `index` would publish nothing of them.
pub fn plan(
    paths: &[PathBuf],
    key_prefix: &str,
    build: &str,
    sources: &SourceArgs,
    limits: symdex_shared::archive::Limits,
) -> Vec<Planned> {
    let walked = paths
        .iter()
        .flat_map(|arg| walk_paths(std::slice::from_ref(arg)).map(move |walked| (arg, walked)));
    // Each file identified on a worker (a core each) as the walk meets it, the plans kept in
    // input order.
    let mut files = Vec::new();
    map_in_order_iter_on(
        workers(),
        walked,
        |(arg, walked)| match &walked {
            Walked::File(path) => plan_file(arg, path, key_prefix, build, sources, limits),
            Walked::Skipped(path, reason) => FilePlan::done(Planned::Skipped {
                shown: shown_path(path),
                reason: reason.clone(),
            }),
            Walked::Error(path, err) => FilePlan::done(Planned::Failed {
                shown: shown_path(path),
                error: err.to_string(),
            }),
        },
        |plan| {
            files.push(plan);
            true
        },
    );
    let wants = Wanted::by_base_name(files.iter().flat_map(|f| f.wants.iter().cloned()));
    let mut out = Vec::new();
    for file in files {
        let planned = match &file.unclaimed {
            Some(unclaimed) => match unclaimed.named_for(&wants) {
                Ok(named_for) if !named_for.is_empty() => to_send(
                    &unclaimed.path,
                    unclaimed.ingest_key.clone(),
                    Vec::new(),
                    named_for,
                ),
                Ok(_) => file.planned,
                Err(reason) => Planned::Skipped {
                    shown: shown_path(&unclaimed.path),
                    reason,
                },
            },
            None => file.planned,
        };
        out.push(planned);
    }
    out
}

/// One file's plan, before the files no format claims are decided.
struct FilePlan {
    planned: Planned,
    /// The source paths its debug files name.
    wants: Vec<Wanted>,
    /// Files in it no format claims: sent if a debug file of the push names one.
    unclaimed: Option<Unclaimed>,
}

impl FilePlan {
    fn done(planned: Planned) -> Self {
        FilePlan {
            planned,
            wants: Vec::new(),
            unclaimed: None,
        }
    }
}

fn plan_file(
    arg: &Path,
    path: &Path,
    key_prefix: &str,
    build: &str,
    sources: &SourceArgs,
    limits: symdex_shared::archive::Limits,
) -> FilePlan {
    let shown = shown_path(path);
    let ingest_key = match ingest_key_of(arg, path, key_prefix, build) {
        Ok(key) => key,
        Err(reason) => return FilePlan::done(Planned::Skipped { shown, reason }),
    };
    let mut items: Vec<Identified> = Vec::new();
    let walked = identify_each(
        path,
        |p| sources.wants_source(p),
        Detail::Sources,
        limits,
        &mut |item| {
            items.push(item);
            Ok(())
        },
    );
    if let Err(e) = walked {
        return FilePlan::done(Planned::Failed {
            shown,
            error: e.to_string(),
        });
    }
    let archive = items.iter().any(|i| i.in_archive);
    // The deployment's default prefixes (a deployment with others is probed in vain, and
    // pushed: the indexer then finds the keys unchanged).
    let prefixes = symdex_shared::pipeline::default_prefixes();
    let mut probe_keys = Vec::new();
    let mut sendable = false;
    let mut reasons = Vec::new();
    let mut wants = Vec::new();
    let mut offered = Vec::new();
    let entry_prefix = format!("{}!/", path.display());
    for item in &items {
        match &item.outcome {
            Outcome::Identified(ids, _) => {
                sendable = true;
                for id in ids {
                    wants.extend(Wanted::of(id));
                    let keys = keys_for(id, &item.name, &Layout::ALL);
                    probe_keys.extend(keys.prefixed(&prefixes).map(|(_, key)| key).take(1));
                }
            }
            // The deployment records why (a truncated or hostile file): sent, so the
            // deployment's answer is the one reported.
            Outcome::Rejected(_) => sendable = true,
            Outcome::Failed(err) if err.is_io() => {
                return FilePlan::done(Planned::Failed {
                    shown,
                    error: err.to_string(),
                })
            }
            Outcome::Failed(FormatError::Unrecognized(reason)) => {
                // Offered as the indexer offers it: an entry by its path in the archive.
                let entry = item.shown.strip_prefix(&entry_prefix);
                offered.push(match (item.in_archive, entry) {
                    (true, Some(entry)) => entry.to_string(),
                    (true, None) => item.shown.clone(),
                    (false, _) => ingest_key.clone(),
                });
                reasons.push(reason.clone())
            }
            Outcome::Skipped(reason) => reasons.push(reason.clone()),
            Outcome::Failed(_) if item.in_archive => {}
            // Malformed as an artifact it claims to be: the deployment rejects it, saying why.
            Outcome::Failed(_) => sendable = true,
        }
    }
    if !sendable {
        let reason = match (archive, reasons.first()) {
            (true, _) => {
                "an archive holding no artifact, nor a source a debug file of this push names"
                    .to_string()
            }
            (false, Some(reason)) => match secret_reason(&ingest_key) {
                Some(secret) => format!("not an artifact: {reason}; {secret}"),
                None => format!(
                    "not an artifact, nor a source a debug file of this push names: {reason}"
                ),
            },
            (false, None) => "not an artifact".to_string(),
        };
        let unclaimed = (!offered.is_empty()).then(|| Unclaimed {
            path: path.to_path_buf(),
            ingest_key,
            offered,
            archive,
        });
        return FilePlan {
            planned: Planned::Skipped { shown, reason },
            wants,
            unclaimed,
        };
    }
    if archive {
        // Entries are published under their own content: nothing to probe by the archive's.
        probe_keys.clear();
    }
    FilePlan {
        planned: to_send(path, ingest_key, probe_keys, Vec::new()),
        wants,
        unclaimed: None,
    }
}

/// The ingest key of the file at `path` under the argument `arg`, or why it has none: a
/// name that is not UTF-8 (a lossy conversion would map two such names to one key, and one
/// upload would replace the other), or one no key may hold.
fn ingest_key_of(arg: &Path, path: &Path, key_prefix: &str, build: &str) -> Result<String, String> {
    let rel = path
        .strip_prefix(arg)
        .ok()
        .filter(|r| !r.as_os_str().is_empty());
    let name = match rel {
        Some(rel) => rel.as_os_str(),
        None => path.file_name().unwrap_or(path.as_os_str()),
    };
    let Some(name) = name.to_str() else {
        return Err(
            "its name is not UTF-8: an ingest key is UTF-8 text, and a converted name could \
             be another file's (rename it to send it)"
                .to_string(),
        );
    };
    let below = match rel {
        Some(_) => name,
        None => symdex_shared::identity::file_name_of(name),
    };
    let ingest_key = format!("{key_prefix}{build}/{below}");
    match check_key(&ingest_key) {
        Ok(_) => Ok(ingest_key),
        Err(e) => Err(format!("its ingest key would be invalid: {e}")),
    }
}

/// A path as push prints it: as it is where it is UTF-8, any other byte written `\xNN`, so
/// that two names differing only in such bytes are told apart.
#[cfg(unix)]
pub fn shown_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut shown = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        shown.push_str(chunk.valid());
        for byte in chunk.invalid() {
            shown.push_str(&format!("\\x{byte:02x}"));
        }
    }
    shown
}

/// A path as push prints it (names there are UTF-16: what is not valid shows as U+FFFD).
#[cfg(not(unix))]
pub fn shown_path(path: &Path) -> String {
    path.display().to_string()
}

/// An input to send, with its size.
fn to_send(
    path: &Path,
    ingest_key: String,
    probe_keys: Vec<String>,
    named_for: Vec<String>,
) -> Planned {
    let shown = shown_path(path);
    match std::fs::metadata(path) {
        Ok(meta) => Planned::Send(Sendable {
            path: path.to_path_buf(),
            shown,
            ingest_key,
            size: meta.len(),
            probe_keys,
            named_for,
        }),
        Err(e) => Planned::Failed {
            shown,
            error: e.to_string(),
        },
    }
}

/// Reads the file at `path` through, handing each read to `update`.
fn read_through(path: &Path, mut update: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        update(&buf[..n]);
    }
}

/// SHA-256 of the file at `path`, which an upload carries in its metadata (`symdex-sha256`):
/// the content's name for audits, whatever ETag S3 gives it.
pub fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut sha256 = sha2::Sha256::new();
    read_through(path, |bytes| sha256.update(bytes))?;
    Ok(hex(&sha256.finalize()))
}

/// The ETag S3 gives the file at `path` (of `size` bytes) when push uploads it: its MD5, or
/// above [`MULTIPART_THRESHOLD`] the MD5 of its parts' MD5s and their count. It is the content
/// identity the indexer records on every key it publishes, so what the deployment holds is
/// compared by it — computed only where something is there to compare (a re-push), not for a
/// new file.
pub fn s3_etag_of(path: &Path, size: u64) -> std::io::Result<String> {
    let multipart = size > MULTIPART_THRESHOLD;
    let part_size = if multipart {
        part_size_for(size)
    } else {
        u64::MAX
    };
    let mut part = md5::Md5::new();
    let mut part_digests = Vec::new();
    let mut in_part = 0u64;
    read_through(path, |mut bytes| {
        while !bytes.is_empty() {
            let want =
                usize::try_from(part_size - in_part).map_or(bytes.len(), |w| w.min(bytes.len()));
            part.update(&bytes[..want]);
            in_part += want as u64;
            bytes = &bytes[want..];
            if in_part == part_size {
                part_digests.push(part.finalize_reset());
                in_part = 0;
            }
        }
    })?;
    if !multipart {
        return Ok(hex(&part.finalize()));
    }
    if in_part > 0 {
        part_digests.push(part.finalize_reset());
    }
    let mut whole = md5::Md5::new();
    for digest in &part_digests {
        whole.update(digest);
    }
    Ok(format!("{}-{}", hex(&whole.finalize()), part_digests.len()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use md5::Digest as _;
    use symdex_shared::storage::s3::part_size_for;
    use symdex_shared::testing::builders::{
        build_elf, dwarf5_line_table, dwarf5_line_table_with_md5, with_section,
    };

    use super::{hex, plan, s3_etag_of, sha256_of, Planned, Sendable, MULTIPART_THRESHOLD};
    use crate::inputs::SourceArgs;

    fn no_sources() -> SourceArgs {
        SourceArgs {
            source: false,
            source_ext: Vec::new(),
        }
    }

    fn plan_with(path: &Path, sources: &SourceArgs) -> Vec<Planned> {
        plan(
            &[path.to_path_buf()],
            "app/",
            "b7",
            sources,
            symdex_shared::archive::Limits::default(),
        )
    }

    /// The input shown ending with `name`, planned to be sent.
    fn sent<'a>(planned: &'a [Planned], name: &str) -> Option<&'a Sendable> {
        planned.iter().find_map(|p| match p {
            Planned::Send(s) if s.shown.ends_with(name) => Some(s),
            _ => None,
        })
    }

    /// The reason the input shown ending with `name` is skipped (panics if it is not).
    fn skipped<'a>(planned: &'a [Planned], name: &str) -> &'a str {
        planned
            .iter()
            .find_map(|p| match p {
                Planned::Skipped { shown, reason } if shown.ends_with(name) => {
                    Some(reason.as_str())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name} is not skipped: {planned:?}"))
    }

    #[test]
    fn inputs_are_named_below_prefix_and_build_and_non_artifacts_are_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("sub")).unwrap();
        let elf = build_elf(true, false, 62, Some(&[7; 20]), false);
        std::fs::write(out.join("sub/lib.so"), &elf).unwrap();
        std::fs::write(out.join("notes.txt"), b"hello").unwrap();
        let planned = plan(
            std::slice::from_ref(&out),
            "app/",
            "b7",
            &no_sources(),
            symdex_shared::archive::Limits::default(),
        );
        assert_eq!(planned.len(), 2, "{planned:?}");
        let mut sent = 0;
        for item in &planned {
            match item {
                Planned::Send(s) => {
                    sent += 1;
                    assert_eq!(s.ingest_key, "app/b7/sub/lib.so");
                    assert_eq!(s.size, elf.len() as u64);
                    assert!(s.probe_keys.iter().all(|k| !k.is_empty()));
                }
                Planned::Skipped { shown, reason } => {
                    assert!(shown.ends_with("notes.txt"), "{shown}");
                    assert!(reason.starts_with("not an artifact"), "{reason}");
                }
                Planned::Failed { error, .. } => panic!("{error}"),
            }
        }
        assert_eq!(sent, 1);

        // A name no ingest key may hold (a control character) is not sent, and says why.
        let hostile = dir.path().join("hostile");
        std::fs::create_dir_all(&hostile).unwrap();
        std::fs::write(hostile.join("evil\u{1b}[2J.so"), &elf).unwrap();
        let planned = plan(
            std::slice::from_ref(&hostile),
            "",
            "b7",
            &no_sources(),
            symdex_shared::archive::Limits::default(),
        );
        match planned.as_slice() {
            [Planned::Skipped { reason, .. }] => {
                assert!(reason.contains("ingest key would be invalid"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_no_format_claims_is_sent_when_a_debug_file_of_the_push_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("src")).unwrap();
        let debug = with_section(
            build_elf(true, false, 62, Some(&[0x6b; 20]), true),
            ".debug_line",
            &dwarf5_line_table("/ci/work", &["src/hello.c"]),
        );
        std::fs::write(out.join("app.debug"), &debug).unwrap();
        std::fs::write(out.join("src/hello.c"), b"int main(void) { return 0; }\n").unwrap();
        std::fs::write(out.join("src/other.c"), b"int other;\n").unwrap();
        std::fs::write(out.join("notes.txt"), b"hello").unwrap();
        let plan_of = |path: &Path| {
            plan(
                &[path.to_path_buf()],
                "app/",
                "b7",
                &no_sources(),
                symdex_shared::archive::Limits::default(),
            )
        };
        let planned = plan_of(&out);
        let sent = |name: &str| {
            planned.iter().find_map(|p| match p {
                Planned::Send(s) if s.shown.ends_with(name) => Some(s.clone()),
                _ => None,
            })
        };
        let hello = sent("src/hello.c").expect("the named source is sent");
        assert_eq!(hello.named_for, ["/ci/work/src/hello.c"]);
        assert_eq!(hello.ingest_key, "app/b7/src/hello.c");
        assert!(!sent("app.debug")
            .expect("the debug file is sent")
            .named_source());
        for name in ["src/other.c", "notes.txt"] {
            assert!(sent(name).is_none(), "{name} is named by no debug file");
            let skipped = planned.iter().any(|p| {
                matches!(p, Planned::Skipped { shown, reason }
                    if shown.ends_with(name) && reason.contains("nor a source"))
            });
            assert!(skipped, "{name}: {planned:?}");
        }
        // Without the debug file in the push, nothing names it.
        let alone = plan_of(&out.join("src"));
        assert!(alone.iter().all(|p| matches!(p, Planned::Skipped { .. })));
    }

    #[test]
    fn a_file_a_pdb_of_the_push_names_is_sent() {
        use symdex_shared::testing::source_pdbs::pdb_with_sources;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("src")).unwrap();
        let text = b"int main() { return 0; }\n";
        let md5 = {
            let mut md5 = symdex_shared::digest::Md5::default();
            md5.update(text);
            md5.digest()
        };
        // CodeView's CHKSUM_TYPE_MD5 is 1.
        let pdb = pdb_with_sources([3; 16], &[("C:\\b\\src\\main.cpp", 1, &md5)], None, None);
        std::fs::write(out.join("app.pdb"), pdb).unwrap();
        std::fs::write(out.join("src/main.cpp"), text).unwrap();
        std::fs::write(out.join("src/other.cpp"), b"int other;\n").unwrap();
        let planned = plan_with(&out, &no_sources());
        let main = sent(&planned, "src/main.cpp").expect("the document is sent");
        assert_eq!(main.named_for, ["C:/b/src/main.cpp"]);
        assert!(sent(&planned, "src/other.cpp").is_none());
    }

    #[test]
    fn a_small_file_is_its_md5_and_a_large_one_the_md5_of_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"hello").unwrap();
        assert_eq!(
            sha256_of(&small).unwrap(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(
            s3_etag_of(&small, 5).unwrap(),
            "5d41402abc4b2a76b9719d911017c592"
        );

        let large = dir.path().join("large");
        let part = part_size_for(MULTIPART_THRESHOLD + 1) as usize;
        let bytes: Vec<u8> = (0..part + 10).map(|i| (i % 251) as u8).collect();
        std::fs::write(&large, &bytes).unwrap();
        let etag = s3_etag_of(&large, bytes.len() as u64).unwrap();
        let mut whole = md5::Md5::new();
        whole.update(md5::Md5::digest(&bytes[..part]));
        whole.update(md5::Md5::digest(&bytes[part..]));
        assert_eq!(etag, format!("{}-2", hex(&whole.finalize())));
    }

    #[test]
    fn secret_shaped_files_a_debug_file_names_are_sent_only_when_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("config")).unwrap();
        let env = b"TOKEN=hunter2\n";
        let env_md5: [u8; 16] = md5::Md5::digest(env).into();
        // clang records the MD5 of `.env` (by `#line`, or an `#include`), gcc names
        // config/secrets.env by its two trailing components.
        let mut debug = build_elf(true, false, 62, Some(&[0x5e; 20]), true);
        debug = with_section(
            debug,
            ".debug_line",
            &dwarf5_line_table_with_md5("/elsewhere", &[(".env", env_md5)]),
        );
        std::fs::write(out.join("app.debug"), &debug).unwrap();
        let gcc = with_section(
            build_elf(true, false, 62, Some(&[0x5f; 20]), true),
            ".debug_line",
            &dwarf5_line_table("/ci/w", &["config/secrets.env"]),
        );
        std::fs::write(out.join("lib.debug"), &gcc).unwrap();
        std::fs::write(out.join(".env"), env).unwrap();
        std::fs::write(out.join("config/secrets.env"), b"KEY=1\n").unwrap();

        let planned = plan_with(&out, &no_sources());
        for (name, wanted, what) in [
            (".env", "/elsewhere/.env", "environment file"),
            (
                "config/secrets.env",
                "/ci/w/config/secrets.env",
                "secrets file",
            ),
        ] {
            assert!(sent(&planned, name).is_none(), "{name}: {planned:?}");
            let reason = skipped(&planned, name);
            assert!(
                reason.contains(&format!("secret-shaped ({what})")),
                "{reason}"
            );
            assert!(reason.contains(wanted), "{reason}");
        }
        // Flagged: sent as the sources the flags make them (the deployment decides by its own
        // source settings whether it publishes them).
        let flagged = SourceArgs {
            source: true,
            source_ext: Vec::new(),
        };
        let planned = plan_with(&out, &flagged);
        for name in [".env", "config/secrets.env"] {
            let sent = sent(&planned, name).unwrap_or_else(|| panic!("{name}: {planned:?}"));
            assert!(
                !sent.named_source(),
                "{name}: sent as flagged, not as named"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn two_names_that_are_not_utf8_are_skipped_each_shown_apart() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let elf = build_elf(true, false, 62, Some(&[9; 20]), false);
        let names: Vec<PathBuf> = [&b"lib\xff.so"[..], &b"lib\xfe.so"[..]]
            .iter()
            .map(|n| dir.path().join(std::ffi::OsStr::from_bytes(n)))
            .collect();
        for name in &names {
            std::fs::write(name, &elf).unwrap();
        }
        let planned = plan_with(dir.path(), &no_sources());
        assert_eq!(planned.len(), 2, "{planned:?}");
        for shown in ["lib\\xff.so", "lib\\xfe.so"] {
            let reason = skipped(&planned, shown);
            assert!(reason.contains("not UTF-8"), "{reason}");
        }
        // Named on the command line, alike.
        let planned = plan_with(&names[0], &no_sources());
        assert!(skipped(&planned, "lib\\xff.so").contains("not UTF-8"));
    }
}
