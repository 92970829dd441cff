//! A published key's record ([`KeyRecord`]): who references the key, and the lease of a
//! change to its object in progress; read as the record, or where objects name their owner,
//! as the object's owner alone (invariant 7).

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

use super::layout::key_file;
use super::lease::Lease;
use super::RefStore;

/// Who references one published key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub key: String,
    /// Content identity of what was written (ETag or SHA-1).
    pub etag: String,
    pub size: u64,
    /// Upload ids.
    pub refs: BTreeSet<String>,
    /// The upload whose bytes were first written here (empty: adopted, written outside
    /// symdex). Lets a retried run report the keys it published as published again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The object is an alias of this key, holding no bytes of its own (invariant 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<String>,
}

impl<'s> RefStore<'s> {
    /// Who references `key`: its record, or for a key without one, the upload its object
    /// names as owner (invariant 7).
    pub async fn key(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        let record = self.read(&key_file(key)).await?;
        if record.is_some() || !self.owners_named() {
            return Ok(record);
        }
        self.owned_key(key).await
    }

    /// A key is live when its record has references and no removal in progress.
    pub(crate) async fn is_live(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        Ok(self
            .key(key)
            .await?
            .filter(|r| !r.refs.is_empty() && r.lease.as_ref().is_none_or(|l| l.op != "remove")))
    }
}
