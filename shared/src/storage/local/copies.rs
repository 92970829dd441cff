//! Copies into the store: a new file created unnamed and linked into place, other keys
//! hard links to it, staged under the compare-and-swap lock where a write is conditional.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::sync::atomic::Ordering;

use super::owners::{name_owner, owner_attribute, owner_of, parse_owner_attribute};
use super::{not_found_is_none, LocalStore};
#[cfg(target_os = "linux")]
use super::{Recent, OWNER_ATTRIBUTE, RECENT_FILES, TMP_DIR};
use crate::storage::{check_key, CopySource, ObjectInfo, StorageError, StorageResult};

/// What naming a key after a file this handle created came to ([`LocalStore::link_recent`]).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) enum RecentLink {
    /// No such file is kept, or it no longer has a name (then copied the usual way).
    NotKept,
    /// The key was created, naming that file (of this size).
    Created(u64),
    /// The key exists already (not replaced).
    Exists,
}

impl LocalStore {
    /// [`Self::copy_now`] of a source whose size the caller knows (saves a stat of the
    /// source per linked key).
    pub(super) fn copy_known_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known_size: Option<u64>,
    ) -> StorageResult<u64> {
        check_key(key)?;
        // Another name for a stored file where the key is free: one link, no temporary name
        // (a stored file is complete, so its new name never shows a part of it).
        if let CopySource::Key(src) = source {
            let src = self.found_path(src)?;
            if let Ok(true) = self.link_new(&src, key) {
                return match known_size {
                    Some(size) => Ok(size),
                    None => Ok(fs::metadata(&src)?.len()),
                };
            }
            // Taken (replaced below, by a rename), or the source is missing (reported below).
        }
        let (temp, size, linked) = self.stage(source, true)?;
        self.commit(&temp, key, linked)?;
        Ok(size)
    }

    /// [`Self::copy_now`] only where `key` is free: the finished file gets its name by a hard
    /// link, which fails when the name exists (a rename would replace it). `None`: taken.
    pub fn copy_new_now(&self, source: &CopySource<'_>, key: &str) -> StorageResult<Option<u64>> {
        check_key(key)?;
        if let CopySource::Bytes(_) = source {
            if let Some((created, size)) = self.create_unnamed(source, None, key)? {
                return Ok(created.then_some(size));
            }
        }
        let (temp, size, _) = self.stage(source, true)?;
        let created = self.link_new(&temp, key);
        let _ = fs::remove_file(&temp);
        Ok(created?.then_some(size))
    }

    /// Creates `key` holding the bytes of `source` unless it exists, from a temporary file
    /// that never had a name (Linux `O_TMPFILE`, then `linkat` of its descriptor):
    /// a record costs four calls instead of five, and the temporary directory's entries are
    /// not touched (on a disk, each entry made and removed is journaled). `attribute`: the
    /// owner's, set before the file gets its name ([`OWNER_ATTRIBUTE`]). Whether it was
    /// created, and its size; `None` where the file system or the system cannot, or for a
    /// source it does not copy (the caller stages a named file instead).
    #[cfg(target_os = "linux")]
    pub(super) fn create_unnamed(
        &self,
        source: &CopySource<'_>,
        attribute: Option<&[u8]>,
        key: &str,
    ) -> StorageResult<Option<(bool, u64)>> {
        use std::io::Write;
        if !self.unnamed_temp.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // What fills the file: bytes at hand, or a file opened before the temporary one
        // (a missing source is reported without having made anything).
        enum Fill<'a> {
            Bytes(&'a [u8]),
            From(fs::File),
        }
        let fill = match source {
            CopySource::Bytes(bytes) => Fill::Bytes(bytes),
            CopySource::File(path) => Fill::From(fs::File::open(path)?),
            CopySource::Key(src) => match self.read_at(src, |p| fs::File::open(p))? {
                Ok(file) => Fill::From(file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StorageError::NotFound(src.to_string()))
                }
                Err(e) => return Err(e.into()),
            },
            _ => return Ok(None),
        };
        let Some(mut file) = self.open_unnamed()? else {
            return Ok(None);
        };
        let size = match fill {
            Fill::Bytes(bytes) => {
                file.write_all(bytes)?;
                bytes.len() as u64
            }
            // `io::copy` between files is `copy_file_range` on Linux, as `fs::copy` is.
            Fill::From(mut from) => io::copy(&mut from, &mut file)?,
        };
        if let Some(attribute) = attribute {
            rustix::fs::fsetxattr(
                &file,
                OWNER_ATTRIBUTE,
                attribute,
                rustix::fs::XattrFlags::empty(),
            )
            .map_err(io::Error::from)?;
        }
        let created = self.link_open_file(&file, key)?;
        if let (true, Some(attribute)) = (created, attribute) {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.len() >= RECENT_FILES {
                recent.pop_front();
            }
            recent.push_back(Recent {
                key: key.to_string(),
                attribute: attribute.to_vec(),
                size,
                file: std::sync::Arc::new(file),
            });
        }
        Ok(Some((created, size)))
    }

    /// A new temporary file of the store that has no name (`O_TMPFILE`); `None` where the
    /// file system or the kernel has none (named temporary files from then on).
    #[cfg(target_os = "linux")]
    pub(super) fn open_unnamed(&self) -> StorageResult<Option<fs::File>> {
        use rustix::fs::{openat, Mode, OFlags, CWD};
        if !self.unnamed_temp.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
        match openat(
            CWD,
            self.root.join(TMP_DIR),
            flags,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => Ok(Some(fs::File::from(fd))),
            Err(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL,
            ) => {
                self.unnamed_temp.store(false, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(io::Error::from(e).into()),
        }
    }

    /// [`Self::copy_new_owned_now`] from a file this handle created naming `attribute`
    /// ([`Recent`]): the key created (and the size) or there already, or no such file.
    #[cfg(target_os = "linux")]
    pub(super) fn link_recent(
        &self,
        source: &CopySource<'_>,
        attribute: &[u8],
        key: &str,
    ) -> StorageResult<RecentLink> {
        let CopySource::Key(src) = source else {
            return Ok(RecentLink::NotKept);
        };
        let found = (self.recent.lock().unwrap_or_else(|e| e.into_inner()))
            .iter()
            .rev()
            .find(|r| r.key == *src && r.attribute == attribute)
            .map(|r| (std::sync::Arc::clone(&r.file), r.size));
        let Some((file, size)) = found else {
            return Ok(RecentLink::NotKept);
        };
        match self.link_open_file(&file, key) {
            Ok(true) => Ok(RecentLink::Created(size)),
            Ok(false) => Ok(RecentLink::Exists),
            Err(StorageError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                Ok(RecentLink::NotKept)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Self::link_new_with`] naming an open file `key`: `linkat` of the descriptor itself
    /// (`AT_EMPTY_PATH`: Linux lets the file's opener since 6.10, and a privileged process
    /// always), else through `/proc/self/fd`. The `/proc` path costs a walk of `/proc`, the
    /// process and its descriptor table for every key (6% of a fresh index's time on a
    /// tmpfs); refused once (an older kernel, an unprivileged process), it is the way from
    /// then on. Both name the very file, so either links what the caller created.
    #[cfg(target_os = "linux")]
    pub(super) fn link_open_file(&self, file: &fs::File, key: &str) -> StorageResult<bool> {
        use rustix::fs::{AtFlags, CWD};
        use std::os::fd::AsRawFd;
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let through_proc = |dest: &Path| {
            rustix::fs::linkat(CWD, &proc_path, CWD, dest, AtFlags::SYMLINK_FOLLOW)
                .map_err(io::Error::from)
        };
        if !self.empty_path_links.load(Ordering::Relaxed) {
            return self.link_new_with(key, through_proc);
        }
        let linked = self.link_new_with(key, |dest| {
            rustix::fs::linkat(file, "", CWD, dest, AtFlags::EMPTY_PATH).map_err(io::Error::from)
        });
        match linked {
            // Refused: by a kernel that allows it the privileged only (`ENOENT` before 6.10,
            // which also means a file no name holds any more: `/proc` tells the two apart,
            // refusing that file too), or that knows no such flag.
            Err(StorageError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::PermissionDenied
                        | io::ErrorKind::InvalidInput
                ) =>
            {
                let linked = self.link_new_with(key, through_proc);
                if linked.is_ok() {
                    self.empty_path_links.store(false, Ordering::Relaxed);
                }
                linked
            }
            linked => linked,
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn link_open_file(&self, _file: &fs::File, _key: &str) -> StorageResult<bool> {
        Ok(false)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn link_recent(
        &self,
        _source: &CopySource<'_>,
        _attribute: &[u8],
        _key: &str,
    ) -> StorageResult<RecentLink> {
        Ok(RecentLink::NotKept)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn create_unnamed(
        &self,
        _source: &CopySource<'_>,
        _attribute: Option<&[u8]>,
        _key: &str,
    ) -> StorageResult<Option<(bool, u64)>> {
        Ok(None)
    }

    /// Gives `file` the name `key` too, unless the key exists (`false`); creates its
    /// directory when missing.
    pub(super) fn link_new(&self, file: &Path, key: &str) -> StorageResult<bool> {
        self.link_new_with(key, |dest| fs::hard_link(file, dest))
    }

    /// Names a file `key` by `link` (a hard link to the key's path, never replacing a name),
    /// unless the key exists (`false`); creates its directory when missing.
    pub(super) fn link_new_with(
        &self,
        key: &str,
        link: impl Fn(&Path) -> io::Result<()>,
    ) -> StorageResult<bool> {
        let dest = self.path_of(key)?;
        let mut attempts = 0;
        loop {
            match link(&dest) {
                Ok(()) => {
                    self.drop_legacy(key);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
                // The parent is missing (or a concurrent delete removed it, see `commit`): made,
                // and tried again. Missing again right after, it is `file` that is missing
                // (asking first would cost a stat for every new directory).
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                    attempts += 1;
                    let parent = dest.parent().ok_or(e)?;
                    if attempts > 1 && parent.is_dir() {
                        return Err(io::Error::from(io::ErrorKind::NotFound).into());
                    }
                    fs::create_dir_all(parent)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The bytes of `source` in a temporary file of the store: its path, its size, and whether
    /// it is a hard link of a stored file (only if `may_link`).
    pub(super) fn stage(
        &self,
        source: &CopySource<'_>,
        may_link: bool,
    ) -> StorageResult<(PathBuf, u64, bool)> {
        let temp = self.temp_path();
        let mut linked = false;
        let size = match source {
            // Inputs are copied, never linked: a build may later rewrite its output in place.
            CopySource::File(path) => fs::copy(path, &temp)?,
            CopySource::Bytes(bytes) => {
                fs::write(&temp, bytes)?;
                bytes.len() as u64
            }
            CopySource::Key(src) => {
                let src_path = self.found_path(src)?;
                if may_link && fs::hard_link(&src_path, &temp).is_ok() {
                    linked = true;
                    fs::metadata(&temp)?.len()
                } else {
                    match fs::copy(&src_path, &temp) {
                        Ok(size) => size,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(StorageError::NotFound(src.to_string()))
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            CopySource::Object { bucket, key, .. } | CopySource::Range { bucket, key, .. } => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("a local store cannot copy from s3://{bucket}/{key}"),
                )
                .into())
            }
        };
        Ok((temp, size, linked))
    }

    /// [`Self::copy_known_now`] naming `owner` in the object, where owners are kept, as the
    /// writer of `known`.
    pub(super) fn copy_owned_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<u64> {
        if !self.owners {
            return self.copy_known_now(source, key, Some(known.size));
        }
        check_key(key)?;
        let (temp, size, linked) = self.stage_owned(source, known, owner)?;
        // A rename replaces the object and its owner at once.
        self.commit(&temp, key, linked)?;
        Ok(size)
    }

    /// [`Self::copy_new_now`] naming `owner` in the object it creates, where owners are kept,
    /// as the writer of `known`.
    pub(super) fn copy_new_owned_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<Option<u64>> {
        if !self.owners {
            return self.copy_new_now(source, key);
        }
        check_key(key)?;
        let attribute = owner.map(|owner| owner_attribute(owner, known));
        if let Some(attribute) = &attribute {
            match self.link_recent(source, attribute, key)? {
                RecentLink::Created(size) => return Ok(Some(size)),
                RecentLink::Exists => return Ok(None),
                RecentLink::NotKept => {}
            }
        }
        if let Some((file, size)) = self.linkable(source, owner)? {
            return Ok(self.link_new(&file, key)?.then_some(size));
        }
        if let Some((created, size)) = self.create_unnamed(source, attribute.as_deref(), key)? {
            return Ok(created.then_some(size));
        }
        // Not linkable (asked above): a copy.
        let (temp, size) = self.stage_named(source, known, owner)?;
        let created = self.link_new(&temp, key);
        let _ = fs::remove_file(&temp);
        Ok(created?.then_some(size))
    }

    /// The stored file a copy of `source` naming `owner` may be a hard link of, and its size:
    /// one naming the same owner (a link shares the file's attribute, [`OWNER_ATTRIBUTE`]; a
    /// copy from a key is of the key's content, named there already).
    pub(super) fn linkable(
        &self,
        source: &CopySource<'_>,
        owner: Option<&str>,
    ) -> StorageResult<Option<(PathBuf, u64)>> {
        let CopySource::Key(src) = source else {
            return Ok(None);
        };
        let path = self.found_path(src)?;
        // Missing: reported by the copy that follows.
        let Some(file) = not_found_is_none(fs::File::open(&path))? else {
            return Ok(None);
        };
        let named = owner_of(&file)?.and_then(|value| parse_owner_attribute(&value));
        if named.as_ref().map(|(named, _)| named.as_str()) != owner {
            return Ok(None);
        }
        Ok(Some((path, file.metadata()?.len())))
    }

    /// [`Self::stage`] naming `owner` (when given) as the writer of `known` in the temporary
    /// file: a hard link only of a file naming the same owner, else a copy.
    pub(super) fn stage_owned(
        &self,
        source: &CopySource<'_>,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<(PathBuf, u64, bool)> {
        if let Some((file, size)) = self.linkable(source, owner)? {
            let temp = self.temp_path();
            fs::hard_link(&file, &temp)?;
            return Ok((temp, size, true));
        }
        let (temp, size) = self.stage_named(source, known, owner)?;
        Ok((temp, size, false))
    }

    /// A copy of `source` in a temporary file naming `owner` (when given) as the writer of
    /// `known`.
    pub(super) fn stage_named(
        &self,
        source: &CopySource<'_>,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<(PathBuf, u64)> {
        let (temp, size, _) = self.stage(source, false)?;
        if let Some(owner) = owner {
            if let Err(e) = name_owner(&temp, &owner_attribute(owner, known)) {
                let _ = fs::remove_file(&temp);
                return Err(e.into());
            }
        }
        Ok((temp, size))
    }
}
