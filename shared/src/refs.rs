//! References: which uploads need each published key (SymStore's `refs.ptr`, as JSON objects).
//!
//! - `_symdex/refs/<key>.json`: the key's content identity and the uploads referencing it.
//! - `_symdex/uploads/<sha1 of upload id>.json`: one upload, its metadata and its keys.
//! - `_symdex/ids/<debug id>.json`: PDB names recorded by PEs' CodeView records, and where a PDB
//!   with that id was published, so a PDB is reachable under the exact name its PE uses.
//!
//! Updates are read-modify-write with a conditional put and retries, so concurrent indexers
//! (Lambda invocations) do not lose each other's references.

use std::collections::BTreeSet;
use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::manifest::UploadMeta;
use crate::storage::Storage;

/// Root of symdex's own bookkeeping inside a store (never served).
pub const STATE_PREFIX: &str = "_symdex";
/// Attempts of one read-modify-write before giving up.
const MAX_ATTEMPTS: usize = 16;

/// Who references one published key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub key: String,
    /// Content identity of what was written (ETag or SHA-1).
    pub etag: String,
    pub size: u64,
    /// Upload ids.
    pub refs: BTreeSet<String>,
}

/// One upload and everything it published.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    pub upload: String,
    /// Where it came from: a local path or `s3://bucket/key`.
    pub source: String,
    #[serde(flatten)]
    pub meta: UploadMeta,
    pub etag: String,
    pub size: u64,
    pub time: String,
    pub keys: BTreeSet<String>,
}

/// PE <-> PDB name aliasing for one debug id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRecord {
    /// A key holding the PDB's content, once one was published.
    pub pdb_key: Option<String>,
    /// PDB file names as PEs' CodeView records spell them.
    pub names: BTreeSet<String>,
}

/// Bookkeeping over a store.
pub struct RefStore<'s> {
    store: &'s dyn Storage,
}

fn upload_file(upload: &str) -> String {
    format!(
        "{STATE_PREFIX}/uploads/{}.json",
        sha1_smol::Sha1::from(upload).digest()
    )
}

fn key_file(key: &str) -> String {
    format!("{STATE_PREFIX}/refs/{key}.json")
}

fn source_file(source: &str) -> String {
    format!(
        "{STATE_PREFIX}/sources/{}.json",
        sha1_smol::Sha1::from(source).digest()
    )
}

/// The uploads of one ingest location (for removals by key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub source: String,
    pub uploads: BTreeSet<String>,
}

fn id_file(debug_id: &str) -> String {
    format!("{STATE_PREFIX}/ids/{debug_id}.json")
}

fn parse<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> io::Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{key}: {e}")))
}

impl<'s> RefStore<'s> {
    pub fn new(store: &'s dyn Storage) -> Self {
        RefStore { store }
    }

    fn read<T: DeserializeOwned>(&self, file: &str) -> io::Result<Option<T>> {
        match self.store.get(file)? {
            Some(bytes) => parse(file, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Read-modify-write of one JSON object: `f` gets the current value (or `None`) and returns
    /// the new one (`None` deletes it). Retried when another writer got there first.
    fn update<T, F>(&self, file: &str, mut f: F) -> io::Result<Option<T>>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> Option<T>,
    {
        for _ in 0..MAX_ATTEMPTS {
            let current = self.store.get(file)?;
            let etag = match &current {
                Some(bytes) => Some(sha1_or_etag(self.store, file, bytes)?),
                None => None,
            };
            let value = current.as_deref().map(|b| parse(file, b)).transpose()?;
            match f(value) {
                Some(new) => {
                    let bytes = serde_json::to_vec_pretty(&new)?;
                    if self.store.put_if(file, &bytes, etag.as_deref())? {
                        return Ok(Some(new));
                    }
                }
                None => {
                    self.store.delete(file)?;
                    return Ok(None);
                }
            }
        }
        Err(io::Error::other(format!(
            "{file}: too many concurrent updates"
        )))
    }

    pub fn key(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        self.read(&key_file(key))
    }

    /// Adds `upload` to the references of `key`, creating the record with `etag`/`size`
    /// (or replacing them when `replace_content`, after an overwrite).
    pub fn add_ref(
        &self,
        key: &str,
        upload: &str,
        etag: &str,
        size: u64,
        replace_content: bool,
    ) -> io::Result<KeyRecord> {
        let updated = self.update(&key_file(key), |current: Option<KeyRecord>| {
            let mut record = current.unwrap_or_else(|| KeyRecord {
                key: key.to_string(),
                etag: etag.to_string(),
                size,
                refs: BTreeSet::new(),
            });
            if replace_content {
                record.etag = etag.to_string();
                record.size = size;
            }
            record.refs.insert(upload.to_string());
            Some(record)
        })?;
        updated.ok_or_else(|| io::Error::other("reference record vanished"))
    }

    /// Removes `upload` from `key`'s references; returns the references left (the record is
    /// deleted when none are).
    pub fn remove_ref(&self, key: &str, upload: &str) -> io::Result<BTreeSet<String>> {
        let left = self.update(&key_file(key), |current: Option<KeyRecord>| {
            let mut record = current?;
            record.refs.remove(upload);
            (!record.refs.is_empty()).then_some(record)
        })?;
        Ok(left.map(|r| r.refs).unwrap_or_default())
    }

    pub fn all_keys(&self) -> io::Result<Vec<KeyRecord>> {
        let prefix = format!("{STATE_PREFIX}/refs/");
        let mut out = Vec::new();
        for file in self.store.list(&prefix)? {
            if let Some(record) = self.read(&file)? {
                out.push(record);
            }
        }
        Ok(out)
    }

    pub fn upload(&self, upload: &str) -> io::Result<Option<UploadRecord>> {
        self.read(&upload_file(upload))
    }

    /// Records (or extends) an upload with the keys it references.
    pub fn put_upload(&self, record: &UploadRecord) -> io::Result<()> {
        self.update(
            &upload_file(&record.upload),
            |current: Option<UploadRecord>| {
                let mut new = record.clone();
                if let Some(old) = current {
                    new.keys.extend(old.keys);
                }
                Some(new)
            },
        )?;
        self.update(
            &source_file(&record.source),
            |current: Option<SourceRecord>| {
                let mut source = current.unwrap_or_else(|| SourceRecord {
                    source: record.source.clone(),
                    ..Default::default()
                });
                source.uploads.insert(record.upload.clone());
                Some(source)
            },
        )?;
        Ok(())
    }

    pub fn delete_upload(&self, upload: &str) -> io::Result<()> {
        if let Some(record) = self.upload(upload)? {
            self.update(
                &source_file(&record.source),
                |current: Option<SourceRecord>| {
                    let mut source = current?;
                    source.uploads.remove(upload);
                    (!source.uploads.is_empty()).then_some(source)
                },
            )?;
        }
        self.store.delete(&upload_file(upload))
    }

    /// The uploads indexed from one ingest location (`s3://bucket/key` or a path).
    pub fn uploads_of_source(&self, source: &str) -> io::Result<BTreeSet<String>> {
        Ok(self
            .read::<SourceRecord>(&source_file(source))?
            .map(|r| r.uploads)
            .unwrap_or_default())
    }

    pub fn uploads(&self) -> io::Result<Vec<UploadRecord>> {
        let prefix = format!("{STATE_PREFIX}/uploads/");
        let mut out = Vec::new();
        for file in self.store.list(&prefix)? {
            if let Some(record) = self.read(&file)? {
                out.push(record);
            }
        }
        Ok(out)
    }

    pub fn id(&self, debug_id: &str) -> io::Result<IdRecord> {
        Ok(self.read(&id_file(debug_id))?.unwrap_or_default())
    }

    pub fn update_id(&self, debug_id: &str, f: impl Fn(&mut IdRecord)) -> io::Result<IdRecord> {
        let updated = self.update(&id_file(debug_id), |current: Option<IdRecord>| {
            let mut record = current.unwrap_or_default();
            f(&mut record);
            Some(record)
        })?;
        Ok(updated.unwrap_or_default())
    }
}

/// The etag a conditional write must name: the store's own (S3 ETag or local SHA-1).
fn sha1_or_etag(store: &dyn Storage, file: &str, bytes: &[u8]) -> io::Result<String> {
    match store.head(file)? {
        Some(info) => Ok(info.etag),
        None => Ok(sha1_smol::Sha1::from(bytes).digest().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStore;

    #[test]
    fn references_are_counted_per_upload() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let refs = RefStore::new(&store);
        refs.add_ref("symbols/a/1/a", "u1", "e1", 10, false)
            .unwrap();
        refs.add_ref("symbols/a/1/a", "u2", "e2", 11, false)
            .unwrap();
        let record = refs.key("symbols/a/1/a").unwrap().unwrap();
        assert_eq!(record.etag, "e1", "content identity is the first writer's");
        assert_eq!(record.refs.len(), 2);
        assert_eq!(refs.remove_ref("symbols/a/1/a", "u1").unwrap().len(), 1);
        assert!(refs.remove_ref("symbols/a/1/a", "u2").unwrap().is_empty());
        assert_eq!(refs.key("symbols/a/1/a").unwrap(), None);
        assert!(refs.remove_ref("symbols/a/1/a", "u2").unwrap().is_empty());
    }

    #[test]
    fn uploads_and_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let refs = RefStore::new(&store);
        let mut up = UploadRecord {
            upload: "file:/a".into(),
            ..Default::default()
        };
        up.keys.insert("k1".into());
        refs.put_upload(&up).unwrap();
        up.keys = ["k2".to_string()].into();
        refs.put_upload(&up).unwrap();
        assert_eq!(refs.upload("file:/a").unwrap().unwrap().keys.len(), 2);
        up.source = "s3://b/k".into();
        refs.put_upload(&up).unwrap();
        assert!(refs
            .uploads_of_source("s3://b/k")
            .unwrap()
            .contains("file:/a"));
        assert_eq!(refs.uploads().unwrap().len(), 1);
        refs.delete_upload("file:/a").unwrap();
        assert!(refs.upload("file:/a").unwrap().is_none());
        assert!(refs.uploads_of_source("s3://b/k").unwrap().is_empty());
        refs.update_id("abc", |r| {
            r.names.insert("Foo.PDB".into());
        })
        .unwrap();
        assert!(refs.id("abc").unwrap().names.contains("Foo.PDB"));
    }
}
