//! The compare-and-swap every record changes by ([`RefStore::update`] and its kin): a
//! [`Step`] decided on each read, retried where another writer got there first, paused
//! while somebody else's lease is live.

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::patience::{busy, Patience};
use super::prior::Prior;
use super::RefStore;
use crate::storage::{Precondition, Versioned};

/// Compare-and-swap attempts of one update before giving up (each attempt lost a race, so
/// this many means heavy contention; the caller retries the whole message later).
pub(super) const MAX_ATTEMPTS: usize = 64;

/// One step of a read-modify-write.
pub(super) enum Step<T, R> {
    Write(T, R),
    Delete(R),
    Keep(R),
    /// Nothing written, and what was read handed back: the caller learns more, then may
    /// decide again on that read.
    KeepRead(R),
    /// Somebody else's live lease: wait, then read again.
    Wait(String),
}

/// Whether `current` (a record as read) already holds `value`, serialised as `bytes`.
/// Records are written compact; stores written before that hold them pretty-printed, and an
/// unchanged one is left as it is (a re-index writes no record).
fn same_record<T: Serialize>(current: &[u8], bytes: &[u8], value: &T) -> io::Result<bool> {
    Ok(current == bytes
        || (current.starts_with(b"{\n") && current == serde_json::to_vec_pretty(value)?))
}

/// A record read. Checked as UTF-8 whole, then parsed as text: `from_slice` checks each
/// string it reads on its own, a sixth of parsing the upload records a re-index reads.
pub(super) fn parse<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> io::Result<T> {
    let invalid = |e: &dyn std::fmt::Display| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{key}: {e}"))
    };
    let text = std::str::from_utf8(bytes).map_err(|e| invalid(&e))?;
    serde_json::from_str(text).map_err(|e| invalid(&e))
}

impl<'s> RefStore<'s> {
    pub(super) async fn read<T: DeserializeOwned>(&self, file: &str) -> io::Result<Option<T>> {
        match self.store.read(file).await? {
            Some(bytes) => parse(file, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Read-modify-write of one JSON object by compare-and-swap on the version read; retried
    /// when another writer got there first, paused while somebody else's lease is live.
    pub(super) async fn update<T, R, F>(&self, file: &str, f: F) -> io::Result<R>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
    {
        Ok(self.update_versioned(file, Prior::Unread, f).await?.0)
    }

    /// [`Self::update`], also returning the record as it now stands when the update wrote it
    /// (or found it already so): its bytes and version (`None` when it wrote nothing).
    /// `prefetched`: what the caller just read of `file`, used instead of a first read (a
    /// compare-and-swap on its version is as safe as on a fresh one).
    pub(super) async fn update_versioned<T, R, F>(
        &self,
        file: &str,
        prefetched: Prior<Versioned>,
        f: F,
    ) -> io::Result<(R, Option<Versioned>)>
    where
        T: Serialize + DeserializeOwned,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
    {
        self.update_decoded(file, prefetched, |v| parse(file, &v.bytes), f)
            .await
    }

    /// [`Self::update_versioned`] with the decoding of what was read given (a cache).
    pub(super) async fn update_decoded<T, R, F, D>(
        &self,
        file: &str,
        mut prefetched: Prior<Versioned>,
        decode: D,
        mut f: F,
    ) -> io::Result<(R, Option<Versioned>)>
    where
        T: Serialize,
        F: FnMut(Option<T>) -> io::Result<Step<T, R>>,
        D: Fn(&Versioned) -> io::Result<T>,
    {
        let mut patience = Patience::new(self.policy.wait);
        for _ in 0..MAX_ATTEMPTS {
            let current = match prefetched.take() {
                Prior::Read(read) => Some(read),
                Prior::Absent => None,
                Prior::Unread => self.store.get(file).await?,
            };
            let version = current.as_ref().map(|v| v.version.clone());
            let value = current.as_ref().map(&decode).transpose()?;
            let done = match (f(value)?, version) {
                (Step::Keep(r), _) => return Ok((r, None)),
                (Step::KeepRead(r), _) => return Ok((r, current)),
                (Step::Wait(why), _) => {
                    patience.wait(&why).await?;
                    continue;
                }
                (Step::Write(new, r), version) => {
                    let bytes = serde_json::to_vec(&new)?;
                    // Writing what is already there changes nothing: the update takes effect
                    // at the read (its result depends on nothing else), and a re-index of an
                    // unchanged store writes no record.
                    if let Some(current) = current {
                        if same_record(&current.bytes, &bytes, &new)? {
                            return Ok((r, Some(current)));
                        }
                    }
                    let condition = match &version {
                        Some(v) => Precondition::Version(v),
                        None => Precondition::Absent,
                    };
                    let written = self.store.put_if(file, &bytes, condition).await?;
                    written.map(|version| (r, Some(Versioned { bytes, version })))
                }
                (Step::Delete(r), Some(version)) => self
                    .store
                    .delete_if(file, &version)
                    .await?
                    .then_some((r, None)),
                (Step::Delete(r), None) => Some((r, None)),
            };
            if let Some(done) = done {
                return Ok(done);
            }
        }
        Err(busy(&format!("{file}: too many concurrent updates")))
    }
}
