//! Who owns a file: the extended attribute (`user.symdex.owner`) a file names its upload
//! in, packed small enough for ext4 to keep inside the inode.

use std::fs;
use std::io;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::OWNER_ATTRIBUTE;
use crate::storage::ObjectInfo;

/// The attribute naming `owner` as the writer of `written` ([`OWNER_ATTRIBUTE`]). Packed
/// where its parts are SHA-1s (always, for owners an upload's record names and a local
/// store's content): `1`, the owner's SHA-1 count, their 20 bytes each, the size (8 bytes,
/// little-endian), the content's 20 bytes — 50 bytes for the CLI's owners. Written out as
/// text (`<owner> <size> <SHA-1>`, 88 bytes) it outgrew the room ext4 keeps for attributes
/// in a 256-byte inode, and every object took a 4 KiB attribute block of its own.
pub(super) fn owner_attribute(owner: &str, written: &ObjectInfo) -> Vec<u8> {
    let packed = (|| {
        let segments: Vec<[u8; 20]> = owner.split('/').map(sha1_bytes).collect::<Option<_>>()?;
        let etag = sha1_bytes(&written.etag)?;
        let mut value = vec![1, u8::try_from(segments.len()).ok()?];
        segments.iter().for_each(|s| value.extend_from_slice(s));
        value.extend_from_slice(&written.size.to_le_bytes());
        value.extend_from_slice(&etag);
        Some(value)
    })();
    packed.unwrap_or_else(|| format!("{owner} {} {}", written.size, written.etag).into_bytes())
}

/// The owner and the content an attribute names; `None` for anything symdex did not write.
pub(super) fn parse_owner_attribute(value: &[u8]) -> Option<(String, ObjectInfo)> {
    if let [1, count, rest @ ..] = value {
        let owner_len = usize::from(*count) * 20;
        if *count == 0 || rest.len() != owner_len + 28 {
            return None;
        }
        let (owner, rest) = rest.split_at(owner_len);
        let (size, etag) = rest.split_at(8);
        let owner: Vec<String> = owner.chunks(20).map(crate::digest::hex).collect();
        let info = ObjectInfo {
            size: u64::from_le_bytes(size.try_into().ok()?),
            etag: crate::digest::hex(etag),
        };
        return Some((owner.join("/"), info));
    }
    let value = std::str::from_utf8(value).ok()?;
    let mut parts = value.split(' ');
    let (owner, size, etag) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || owner.is_empty() {
        return None;
    }
    let info = ObjectInfo {
        size: size.parse().ok()?,
        etag: etag.to_string(),
    };
    Some((owner.to_string(), info))
}

/// The 20 bytes 40 lowercase hex digits spell.
pub(super) fn sha1_bytes(hex: &str) -> Option<[u8; 20]> {
    if hex.bytes().any(|d| d.is_ascii_uppercase()) {
        return None;
    }
    crate::digest::unhex(hex)?.try_into().ok()
}

/// Sets the owner attribute of the file at `path` (not yet a key's: see
/// [`OWNER_ATTRIBUTE`]). `Unsupported` where the file system keeps no extended attributes.
#[cfg(target_os = "linux")]
pub(super) fn name_owner(path: &Path, value: &[u8]) -> io::Result<()> {
    use rustix::fs::{setxattr, XattrFlags};
    setxattr(path, OWNER_ATTRIBUTE, value, XattrFlags::empty()).map_err(|e| match e {
        rustix::io::Errno::OPNOTSUPP => io::Error::from(io::ErrorKind::Unsupported),
        e => io::Error::from(e),
    })
}

/// The owner attribute of an open file, if any.
#[cfg(target_os = "linux")]
pub(super) fn owner_of(file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    // An upload record's name (at most two SHA-1s and a slash), a size and a SHA-1: anything
    // longer was not written by symdex, and names nobody.
    let mut value = [0u8; 256];
    match rustix::fs::fgetxattr(file, OWNER_ATTRIBUTE, &mut value[..]) {
        Ok(n) => Ok(Some(value[..n].to_vec())),
        Err(
            rustix::io::Errno::NODATA | rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::RANGE,
        ) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn name_owner(_path: &Path, _value: &[u8]) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn owner_of(_file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    Ok(None)
}
