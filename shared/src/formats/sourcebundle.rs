//! Sentry source bundles (`sentry-cli debug-files bundle-sources`, symsorter): a zip archive
//! behind an 8-byte header (`SYSB`, then a little-endian u32 version) whose `manifest.json`
//! names the debug file the sources belong to: its debug id, code id, object name and arch.
//! symbolicator looks them up under `unified/<id>/sourcebundle` and the native
//! `<debug file's path>.src.zip` forms (layouts).

use std::io::Read;
use std::str::FromStr;

use serde::Deserialize;

use super::{Format, FormatError};
use crate::arch::Arch;
use crate::identity::{CodeId, DebugId, Identity, Kind};
use crate::reader::{RangeReader, ReaderCursor};

pub const MAGIC: &[u8; 4] = b"SYSB";
/// The manifest lists every file of the bundle; larger than this it is not read.
const MAX_MANIFEST: u64 = 16 << 20;

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    debug_id: Option<String>,
    #[serde(default)]
    code_id: Option<String>,
    #[serde(default)]
    object_name: Option<String>,
    #[serde(default)]
    arch: Option<String>,
    /// Zip entry name -> what it holds (`path`: the absolute path the debug file names).
    #[serde(default)]
    files: std::collections::BTreeMap<String, FileInfo>,
}

#[derive(Deserialize)]
struct FileInfo {
    #[serde(default)]
    path: Option<String>,
}

/// Most files of one bundle served as sources.
const MAX_FILES: usize = 100_000;

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let malformed = |reason: String| FormatError::malformed(Format::SourceBundle, reason);
    let cursor = std::io::BufReader::with_capacity(64 << 10, ReaderCursor::new(reader));
    let mut archive = zip::ZipArchive::new(cursor).map_err(|e| match e {
        zip::result::ZipError::Io(e) => FormatError::from_io(Format::SourceBundle, e),
        other => malformed(format!("bad zip archive: {other}")),
    })?;
    let mut entry = archive
        .by_name("manifest.json")
        .map_err(|e| malformed(format!("manifest.json: {e}")))?;
    if entry.size() > MAX_MANIFEST {
        return Err(malformed(format!(
            "manifest.json of {} bytes (at most {MAX_MANIFEST} are read)",
            entry.size()
        )));
    }
    let mut text = Vec::new();
    (&mut entry)
        .take(MAX_MANIFEST + 1)
        .read_to_end(&mut text)
        .map_err(|e| malformed(format!("manifest.json: {e}")))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| malformed(format!("manifest.json: {e}")))?;
    let debug_id = manifest
        .debug_id
        .as_deref()
        .ok_or_else(|| malformed("manifest.json has no debug_id".into()))
        .and_then(|d| DebugId::from_str(d).map_err(|_| malformed(format!("bad debug_id {d:?}"))))?;
    let mut id = Identity::new(Format::SourceBundle, Kind::Source);
    id.debug_id = debug_id;
    id.code_id = manifest
        .code_id
        .filter(|c| !c.is_empty() && c.len() <= 128 && c.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|c| CodeId::new(c.to_ascii_lowercase()));
    id.arch = manifest
        .arch
        .as_deref()
        .map_or(Arch::Unknown, Arch::from_name);
    id.debug_file = manifest.object_name;
    // Its files serve debuginfod `source/` keys too (sourcemap.rs), by the paths recorded.
    id.bundle_files = manifest
        .files
        .into_iter()
        .filter_map(|(entry, info)| Some((entry, info.path?)))
        .filter(|(_, path)| path.starts_with('/'))
        .take(MAX_FILES)
        .collect();
    Ok(id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{identify, MAGIC};
    use crate::reader::MemReader;
    use crate::{Format, FormatError};
    use std::io::Write;

    /// A source bundle as symbolic writes one: header, then a zip with the manifest and files.
    pub fn bundle(manifest: &str) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        out.write_all(MAGIC).unwrap();
        out.write_all(&2u32.to_le_bytes()).unwrap();
        let mut zip = zip::ZipWriter::new(out);
        let options = zip::write::SimpleFileOptions::default();
        zip.start_file("manifest.json", options).unwrap();
        zip.write_all(manifest.as_bytes()).unwrap();
        zip.start_file("files/src/main.c", options).unwrap();
        zip.write_all(b"int main() { return 0; }\n").unwrap();
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn the_manifest_names_the_debug_file() {
        let bytes = bundle(
            r#"{"files":{},"debug_id":"faa9207b-627f-3c60-4bae-ac1cd514e670","code_id":"7B20a9fa7f62603c4baeac1cd514e670d0b02ac1","object_name":"app.debug","arch":"x86_64"}"#,
        );
        let id = identify(&MemReader(bytes)).unwrap();
        assert_eq!(id.format, Format::SourceBundle);
        assert_eq!(
            id.debug_id.to_string(),
            "faa9207b-627f-3c60-4bae-ac1cd514e670"
        );
        assert_eq!(
            id.code_id.unwrap().as_str(),
            "7b20a9fa7f62603c4baeac1cd514e670d0b02ac1"
        );
        assert_eq!(id.debug_file.as_deref(), Some("app.debug"));
        assert_eq!(id.arch, "x86_64");
        let with_files = bundle(
            r#"{"files":{"files/_/_/src/main.c":{"type":"source","path":"/src/main.c"},"files/x":{"type":"source","path":"relative.c"}},"debug_id":"faa9207b-627f-3c60-4bae-ac1cd514e670"}"#,
        );
        let id = identify(&MemReader(with_files)).unwrap();
        assert_eq!(
            id.bundle_files,
            [(
                "files/_/_/src/main.c".to_string(),
                "/src/main.c".to_string()
            )]
        );
    }

    #[test]
    fn broken_bundles_are_malformed() {
        for manifest in [r#"{"files":{}}"#, r#"{"debug_id":"nope"}"#, "not json"] {
            let err = identify(&MemReader(bundle(manifest))).unwrap_err();
            assert!(
                matches!(err, FormatError::Malformed { .. }),
                "{manifest}: {err}"
            );
        }
        let mut cut = bundle(r#"{"debug_id":"faa9207b-627f-3c60-4bae-ac1cd514e670"}"#);
        cut.truncate(cut.len() / 2);
        assert!(identify(&MemReader(cut)).is_err());
    }
}
