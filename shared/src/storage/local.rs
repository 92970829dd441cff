//! A directory as a store: keys are relative paths under its root. Writes go to a temporary
//! file in the store and are renamed into place; copies inside the store are hard links
//! (stored files are never modified in place, so sharing an inode is safe).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{check_key, CopySource, ObjectInfo, Storage};
use crate::reader::{FileReader, RangeReader};

/// Where temporary files live (inside the store, so renames stay on one file system).
const TMP_DIR: &str = "_symdex/tmp";

#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    counter: AtomicU64,
    /// Serialises conditional writes within this process.
    write_lock: Mutex<()>,
}

impl LocalStore {
    /// Opens (creating if needed) a store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(root.join(TMP_DIR))?;
        Ok(LocalStore {
            root,
            counter: AtomicU64::new(0),
            write_lock: Mutex::new(()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file behind `key` (validated: never outside the root).
    pub fn path_of(&self, key: &str) -> io::Result<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    fn temp_path(&self) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        self.root
            .join(TMP_DIR)
            .join(format!("{}-{n}-{nanos}", std::process::id()))
    }

    /// Moves a finished temporary file to `key`.
    fn commit(&self, temp: &Path, key: &str) -> io::Result<PathBuf> {
        let dest = self.path_of(key)?;
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(temp, &dest).inspect_err(|_| {
            let _ = fs::remove_file(temp);
        })?;
        Ok(dest)
    }
}

/// SHA-1 of a file's content, streamed.
pub fn file_sha1(path: &Path) -> io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = sha1_smol::Sha1::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.digest().to_string())
}

fn not_found_is_none<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Storage for LocalStore {
    fn open(&self, key: &str) -> io::Result<Box<dyn RangeReader + '_>> {
        Ok(Box::new(FileReader::open(&self.path_of(key)?)?))
    }

    fn size(&self, key: &str) -> io::Result<Option<u64>> {
        let path = self.path_of(key)?;
        Ok(not_found_is_none(fs::metadata(path))?
            .filter(|m| m.is_file())
            .map(|m| m.len()))
    }

    fn head(&self, key: &str) -> io::Result<Option<ObjectInfo>> {
        let Some(size) = self.size(key)? else {
            return Ok(None);
        };
        let etag = not_found_is_none(file_sha1(&self.path_of(key)?))?;
        Ok(etag.map(|etag| ObjectInfo { size, etag }))
    }

    fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        not_found_is_none(fs::read(self.path_of(key)?))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<ObjectInfo> {
        check_key(key)?;
        let temp = self.temp_path();
        fs::write(&temp, bytes)?;
        self.commit(&temp, key)?;
        Ok(ObjectInfo {
            size: bytes.len() as u64,
            etag: sha1_smol::Sha1::from(bytes).digest().to_string(),
        })
    }

    fn put_if(&self, key: &str, bytes: &[u8], expected: Option<&str>) -> io::Result<bool> {
        let _guard = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.head(key)?.map(|info| info.etag);
        if current.as_deref() != expected {
            return Ok(false);
        }
        self.put(key, bytes)?;
        Ok(true)
    }

    fn copy(&self, source: &CopySource<'_>, key: &str) -> io::Result<ObjectInfo> {
        check_key(key)?;
        let temp = self.temp_path();
        match source {
            // Inputs are copied, never linked: a build may later rewrite its output in place.
            CopySource::File(path) => {
                fs::copy(path, &temp)?;
            }
            CopySource::Key(src) => {
                let src = self.path_of(src)?;
                if fs::hard_link(&src, &temp).is_err() {
                    fs::copy(&src, &temp)?;
                }
            }
            CopySource::Object { bucket, key, .. } => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("a local store cannot copy from s3://{bucket}/{key}"),
                ))
            }
        }
        let size = fs::metadata(&temp)?.len();
        let etag = file_sha1(&temp)?;
        self.commit(&temp, key)?;
        Ok(ObjectInfo { size, etag })
    }

    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let mut keys = Vec::new();
        // Walk from the deepest directory the prefix names, then filter by the full prefix.
        let dir_part = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let start = if dir_part.is_empty() {
            self.root.clone()
        } else {
            self.path_of(dir_part)?
        };
        let mut stack = vec![start];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let path = entry.path();
                let file_type = entry.file_type()?;
                if file_type.is_dir() {
                    stack.push(path);
                } else if file_type.is_file() {
                    if let Ok(rel) = path.strip_prefix(&self.root) {
                        let key = rel
                            .to_string_lossy()
                            .replace(std::path::MAIN_SEPARATOR, "/");
                        if key.starts_with(prefix) && !key.starts_with(TMP_DIR) {
                            keys.push(key);
                        }
                    }
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn delete(&self, key: &str) -> io::Result<()> {
        let path = self.path_of(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        // Tidy empty directories up to the root, so a deleted build leaves no husks.
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.root || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("store")).unwrap();
        (dir, store)
    }

    #[test]
    fn put_get_head_list_delete() {
        let (_d, s) = store();
        let info = s.put("a/b/c.txt", b"hello").unwrap();
        assert_eq!(info.size, 5);
        assert_eq!(s.get("a/b/c.txt").unwrap().unwrap(), b"hello");
        assert_eq!(s.head("a/b/c.txt").unwrap().unwrap(), info);
        assert_eq!(s.size("a/b").unwrap(), None, "directories are not objects");
        s.put("a/x", b"1").unwrap();
        assert_eq!(s.list("a/").unwrap(), ["a/b/c.txt", "a/x"]);
        assert_eq!(s.list("a/b").unwrap(), ["a/b/c.txt"]);
        s.delete("a/b/c.txt").unwrap();
        s.delete("a/b/c.txt").unwrap();
        assert!(
            !s.root().join("a/b").exists(),
            "empty directories are removed"
        );
        assert_eq!(s.get("a/b/c.txt").unwrap(), None);
    }

    #[test]
    fn ranged_reads_and_copies() {
        let (d, s) = store();
        let input = d.path().join("input.bin");
        fs::write(&input, b"0123456789").unwrap();
        let info = s.copy(&CopySource::File(&input), "k/one").unwrap();
        s.copy(&CopySource::Key("k/one"), "k/two").unwrap();
        assert_eq!(s.head("k/two").unwrap().unwrap(), info);
        let mut buf = [0u8; 3];
        s.open("k/two").unwrap().read_exact_at(4, &mut buf).unwrap();
        assert_eq!(&buf, b"456");
        // Rewriting the input does not change the store.
        fs::write(&input, b"changed").unwrap();
        assert_eq!(s.get("k/one").unwrap().unwrap(), b"0123456789");
        assert!(s
            .copy(
                &CopySource::Object {
                    bucket: "b",
                    key: "k",
                    version_id: None,
                    size: 1,
                    etag: "e",
                },
                "x"
            )
            .is_err());
    }

    #[test]
    fn conditional_writes() {
        let (_d, s) = store();
        assert!(s.put_if("r", b"v1", None).unwrap());
        assert!(!s.put_if("r", b"v2", None).unwrap(), "already exists");
        let etag = s.head("r").unwrap().unwrap().etag;
        assert!(s.put_if("r", b"v2", Some(&etag)).unwrap());
        assert!(!s.put_if("r", b"v3", Some(&etag)).unwrap(), "stale etag");
        assert_eq!(s.get("r").unwrap().unwrap(), b"v2");
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let (_d, s) = store();
        for key in ["../x", "/etc/passwd", "a/../../x", ""] {
            assert!(s.put(key, b"x").is_err(), "{key}");
            assert!(s.get(key).is_err(), "{key}");
        }
    }
}
