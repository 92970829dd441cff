//! A download being written to the upstream cache under a temporary name: removed unless the
//! cache keeps it (`DiskCache::keep`), and read back through the descriptor it is written
//! with (identified before it is kept; moved to memory when the disk fails mid-way), so that
//! verifying it needs no second descriptor.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use symdex_shared::RangeReader;

pub struct Partial {
    pub path: PathBuf,
    file: File,
    /// Where it goes once kept, relative to the cache's root.
    pub relative: String,
    /// Bytes written so far.
    len: u64,
    /// Renamed into place: nothing for the drop to remove (its descriptor is still closed).
    kept: bool,
}

impl Partial {
    /// A new file at `path` (which must not exist), to be kept as `relative`.
    pub fn create(path: PathBuf, relative: String) -> io::Result<Partial> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Partial {
            path,
            file,
            relative,
            len: 0,
            kept: false,
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Everything written so far, read back into memory.
    pub fn read_all(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len).map_err(io::Error::other)?;
        let mut all = vec![0u8; len];
        self.file.read_exact_at(&mut all, 0)?;
        Ok(all)
    }

    /// Renamed into place: nothing is left for the drop to remove.
    pub fn kept(mut self) {
        self.kept = true;
    }
}

impl RangeReader for Partial {
    fn size(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        self.file.read_exact_at(buf, offset)
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
