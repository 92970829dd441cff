//! Compressed copies in a local store (crate::encoded): a file at the copy's key (one flat
//! file of its encoding's directory, paths.rs), naming the content it encodes in its
//! attribute `user.symdex.encodes`, which `symdex serve` compares with the raw file's owner
//! attribute before it answers with the copy.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::owners::{owner_of, parse_owner_attribute, sha1_bytes};
use super::LocalStore;
use crate::storage::encoding::{EncodedMeta, Encoding, Staged, StoredCopy};
use crate::storage::{ObjectInfo, StorageError, StorageResult};

/// The attribute a copy names its raw content in: the raw size (8 bytes, little-endian) and
/// the content's SHA-1 (20 bytes).
const ENCODES_ATTRIBUTE: &str = "user.symdex.encodes";

/// A copy found in the store ([`LocalStore::open_copy`]).
struct OpenCopy {
    path: PathBuf,
    size: u64,
    modified: std::time::SystemTime,
    /// What its attribute says it encodes (`None`: it says nothing symdex wrote).
    meta: Option<EncodedMeta>,
}

/// A copy a local store can answer with: the copy's file and the raw size it decodes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedFile {
    pub path: PathBuf,
    pub size: u64,
    pub raw_size: u64,
}

impl LocalStore {
    /// Stores `staged` at `key` (a copy key), naming `meta`'s raw content. Replaces an older
    /// copy (made from content the key no longer holds) in one rename.
    ///
    /// A fresh copy is a file that never had another name: created unnamed in the store,
    /// its attribute set, linked to `key` where no copy is (a copy is never seen without
    /// its attribute, nor half written). The copies of an artifact's other keys are links
    /// of that file through its kept descriptor ([`StoredCopy::file`]). Either way a key
    /// already holding a copy gets the new one by a rename, as before.
    pub fn put_encoded_now(
        &self,
        key: &str,
        staged: &Staged,
        meta: &EncodedMeta,
    ) -> StorageResult<()> {
        let attribute = encodes_attribute(&meta.raw)
            .ok_or_else(|| StorageError::Io(io::Error::other("raw content is not a SHA-1")))?;
        let first = staged
            .stored_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|first| (first.key.clone(), first.file.clone()));
        // A copy is replaced by a rename, never changed in place: linked copies stay apart.
        if let Some((first, file)) = first {
            if let Some(file) = file {
                match self.link_open_file(&file, key) {
                    Ok(true) => return Ok(()),
                    // A copy is there (replaced below), or the first copy has no name left
                    // (the kernel links no such file): the usual way.
                    Ok(false) => {}
                    Err(StorageError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            let temp = self.temp_path();
            let same = self.encoded_now(&first)?.is_some_and(|(_, m)| &m == meta);
            if same && fs::hard_link(self.found_path(&first)?, &temp).is_ok() {
                self.commit(&temp, key, true)?;
                return Ok(());
            }
        }
        if let Some(file) = self.create_copy_unnamed(staged, &attribute, key)? {
            *staged.stored_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(StoredCopy {
                key: key.to_string(),
                file: Some(std::sync::Arc::new(file)),
            });
            return Ok(());
        }
        let temp = self.temp_path();
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            staged.write_all_to(&mut file)?;
            set_attribute(&temp, &attribute)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e.into());
        }
        self.commit(&temp, key, false)?;
        *staged.stored_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(StoredCopy {
            key: key.to_string(),
            file: None,
        });
        Ok(())
    }

    /// A new copy at `key` from a file created unnamed ([`LocalStore::open_unnamed`]), its
    /// attribute set before it has a name: the file, linked. `None`: no unnamed files here,
    /// or a copy is at `key` already (the caller replaces it by a rename).
    #[cfg(target_os = "linux")]
    fn create_copy_unnamed(
        &self,
        staged: &Staged,
        attribute: &[u8],
        key: &str,
    ) -> StorageResult<Option<fs::File>> {
        let Some(mut file) = self.open_unnamed()? else {
            return Ok(None);
        };
        staged.write_all_to(&mut file)?;
        rustix::fs::fsetxattr(
            &file,
            ENCODES_ATTRIBUTE,
            attribute,
            rustix::fs::XattrFlags::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::OPNOTSUPP => io::Error::from(io::ErrorKind::Unsupported),
            e => io::Error::from(e),
        })?;
        Ok(self.link_open_file(&file, key)?.then_some(file))
    }

    #[cfg(not(target_os = "linux"))]
    fn create_copy_unnamed(
        &self,
        _staged: &Staged,
        _attribute: &[u8],
        _key: &str,
    ) -> StorageResult<Option<fs::File>> {
        Ok(None)
    }

    /// What the copy at `key` says it encodes, and its own size.
    pub fn encoded_now(&self, key: &str) -> StorageResult<Option<(u64, EncodedMeta)>> {
        Ok(self
            .open_copy(key)?
            .and_then(|copy| copy.meta.map(|meta| (copy.size, meta))))
    }

    /// The copy at `key` (a copy key), opened: where it was found, its size and what its
    /// attribute says it encodes, read from the open file (the very file found).
    fn open_copy(&self, key: &str) -> StorageResult<Option<OpenCopy>> {
        let Some((encoding, _)) = crate::storage::encoding::raw_key_of(key) else {
            return Ok(None);
        };
        let opened = self.read_at(key, |path| Ok((fs::File::open(path)?, path.to_path_buf())))?;
        let (file, path) = match opened {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let metadata = file.metadata()?;
        let meta = file_attribute_of(&file)?
            .and_then(|value| parse_encodes_attribute(&value))
            .map(|raw| EncodedMeta { encoding, raw });
        Ok(Some(OpenCopy {
            path,
            size: metadata.len(),
            modified: metadata.modified()?,
            meta,
        }))
    }

    /// The copy of `key` in `encoding` to answer with, if there is one that encodes what the
    /// file at `key` holds now (its owner attribute names the same content): fail closed, a
    /// copy whose raw file changed or names nothing is not answered with.
    pub fn current_copy(&self, key: &str, encoding: Encoding) -> io::Result<Option<EncodedFile>> {
        let copy = crate::storage::encoding::copy_key(encoding, key);
        let Some(OpenCopy {
            path,
            size,
            modified,
            meta: Some(meta),
        }) = self.open_copy(&copy)?
        else {
            return Ok(None);
        };
        let raw = match self.read_at(key, |p| fs::File::open(p))? {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let raw_meta = raw.metadata()?;
        let raw_size = raw_meta.len();
        let current = encodes_now(&raw, &raw_meta, &meta.raw, || Ok(modified))?;
        Ok(current.then_some(EncodedFile {
            path,
            size,
            raw_size,
        }))
    }

    /// Whether `copy`, an open copy file, encodes what `raw`, the open file of its key
    /// (`raw_meta` what it is now), holds: [`LocalStore::current_copy`]'s check, on files the
    /// caller opened itself. `symdex serve` opens both beneath the store without following a
    /// link and answers with the very copy it checked: no path is looked up between the
    /// check and the answer. Fail closed: a copy naming nothing is not current.
    pub fn copy_encodes(
        raw: &fs::File,
        raw_meta: &fs::Metadata,
        copy: &fs::File,
    ) -> io::Result<bool> {
        let Some(encodes) = file_attribute_of(copy)?.and_then(|v| parse_encodes_attribute(&v))
        else {
            return Ok(false);
        };
        encodes_now(raw, raw_meta, &encodes, || copy.metadata()?.modified())
    }
}

/// Whether a copy naming `encodes` encodes what `raw` (`raw_meta` what it is now) holds: the
/// raw file's owner attribute names the same content at its size. A store whose files name no
/// owner: the raw file must be no newer than the copy (`copy_time`; a key written again since
/// was replaced by a newer file).
fn encodes_now(
    raw: &fs::File,
    raw_meta: &fs::Metadata,
    encodes: &ObjectInfo,
    copy_time: impl FnOnce() -> io::Result<std::time::SystemTime>,
) -> io::Result<bool> {
    if raw_meta.len() != encodes.size {
        return Ok(false);
    }
    Ok(
        match owner_of(raw)?.and_then(|value| parse_owner_attribute(&value)) {
            Some((_, written)) => &written == encodes,
            None => raw_meta.modified()? <= copy_time()?,
        },
    )
}

/// The attribute naming `raw`; `None` where its identity is not a SHA-1 (every local
/// store's content is named by one).
fn encodes_attribute(raw: &ObjectInfo) -> Option<Vec<u8>> {
    let sha1 = sha1_bytes(&raw.etag)?;
    let mut value = raw.size.to_le_bytes().to_vec();
    value.extend_from_slice(&sha1);
    Some(value)
}

fn parse_encodes_attribute(value: &[u8]) -> Option<ObjectInfo> {
    if value.len() != 28 {
        return None;
    }
    let (size, sha1) = value.split_at(8);
    Some(ObjectInfo {
        size: u64::from_le_bytes(size.try_into().ok()?),
        etag: crate::digest::hex(sha1),
    })
}

#[cfg(target_os = "linux")]
fn set_attribute(path: &Path, value: &[u8]) -> io::Result<()> {
    use rustix::fs::{setxattr, XattrFlags};
    setxattr(path, ENCODES_ATTRIBUTE, value, XattrFlags::empty()).map_err(|e| match e {
        rustix::io::Errno::OPNOTSUPP => io::Error::from(io::ErrorKind::Unsupported),
        e => io::Error::from(e),
    })
}

/// The attribute of an open copy file, if any.
#[cfg(target_os = "linux")]
fn file_attribute_of(file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    let mut value = [0u8; 64];
    match rustix::fs::fgetxattr(file, ENCODES_ATTRIBUTE, &mut value[..]) {
        Ok(n) => Ok(Some(value[..n].to_vec())),
        Err(
            rustix::io::Errno::NODATA | rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::RANGE,
        ) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Without extended attributes a copy can name no raw content: none is made.
#[cfg(not(target_os = "linux"))]
fn set_attribute(_path: &Path, _value: &[u8]) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(not(target_os = "linux"))]
fn file_attribute_of(_file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    Ok(None)
}
