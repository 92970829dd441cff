//! Where a download is written while it arrives, to be identified once whole: a partial file
//! in the cache, or, when the cache cannot be written (disk full, read-only, out of
//! descriptors), a buffer in memory of bounded size. Never nowhere: what cannot be identified
//! is not served.

use std::io;

use symdex_shared::MemReader;

use super::partial::Partial;

pub enum Sink {
    Disk(Partial),
    Memory(Vec<u8>),
}

impl Sink {
    pub fn len(&self) -> u64 {
        match self {
            Sink::Disk(partial) => partial.len(),
            Sink::Memory(bytes) => bytes.len() as u64,
        }
    }

    /// Appends `bytes`. A failed write to disk moves what was written to memory (read back
    /// through the partial's own descriptor), when it fits in `memory_max`, and says why the
    /// disk failed; `Err` when it does not fit either.
    pub fn write(&mut self, bytes: &[u8], memory_max: u64) -> Result<Option<io::Error>, io::Error> {
        match self {
            Sink::Memory(held) => {
                held.extend_from_slice(bytes);
                Ok(None)
            }
            Sink::Disk(partial) => match partial.write(bytes) {
                Ok(()) => Ok(None),
                Err(failed) => {
                    let fits = partial.len() + bytes.len() as u64 <= memory_max;
                    if !fits {
                        return Err(failed);
                    }
                    // What the failed write left is cut off: only what it reported written
                    // is read back.
                    let mut held = partial.read_all()?;
                    held.extend_from_slice(bytes);
                    *self = Sink::Memory(held);
                    Ok(Some(failed))
                }
            },
        }
    }

    /// `Ok` when the bytes written may be served as `rest` (`verify::fits`).
    pub fn fits(&self, rest: &str) -> Result<(), String> {
        match self {
            Sink::Disk(partial) => super::verify::fits(rest, partial),
            Sink::Memory(bytes) => super::verify::fits(rest, &MemReader(bytes.as_slice())),
        }
    }
}
