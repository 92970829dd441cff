//! Store-wide reads ([`RefStore::all_keys`], [`RefStore::uploads`] and their kin): every key
//! referenced, every upload record, a page at a time — for audits, `verify` and sweeps.

use std::collections::BTreeSet;
use std::io;

use serde::de::DeserializeOwned;

use super::keys::KeyRecord;
use super::uploads::UploadRecord;
use super::RefStore;
#[cfg(doc)]
use crate::storage::Storage;
use crate::storage::{ObjectInfo, STATE_PREFIX, UPLOADS_DIR};

impl<'s> RefStore<'s> {
    /// Every referenced key: the records, and the keys uploads list that have none, as their
    /// objects' owners stand for them (invariant 7).
    pub async fn all_keys(&self) -> io::Result<Vec<KeyRecord>> {
        if !self.traits.names_owners {
            return self.list_records(&format!("{STATE_PREFIX}/refs/")).await;
        }
        self.all_keys_of(&self.uploads().await?).await
    }

    /// [`Self::all_keys`], given every upload record.
    pub(super) async fn all_keys_of(&self, uploads: &[UploadRecord]) -> io::Result<Vec<KeyRecord>> {
        let mut records = self.recorded_keys().await?;
        if !self.traits.names_owners {
            return Ok(records);
        }
        let mut seen: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
        let owners = self
            .owners_of(uploads.iter().map(|u| u.upload.as_str()))
            .await?;
        for upload in uploads {
            for key in upload.all_keys() {
                if seen.insert(key.clone()) {
                    if let Some((record, _)) = self.owned_key_unread(&key, &owners).await? {
                        records.push(record);
                    }
                }
            }
        }
        records.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(records)
    }

    /// The keys that have a record (`_symdex/refs/`): every key, where objects name no owner;
    /// else those two uploads share or a removal holds (invariant 7).
    pub(crate) async fn recorded_keys(&self) -> io::Result<Vec<KeyRecord>> {
        self.list_records(&format!("{STATE_PREFIX}/refs/")).await
    }

    /// The owner each of `uploads` names its objects by ([`Self::owner_token`]), to its id:
    /// an object's owner is found here, not by reading its upload's record once per key.
    pub(crate) async fn owners_of<'u>(
        &self,
        uploads: impl ExactSizeIterator<Item = &'u str>,
    ) -> io::Result<std::collections::HashMap<String, &'u str>> {
        let mut owners = std::collections::HashMap::with_capacity(uploads.len());
        for upload in uploads {
            owners.insert(self.owner_token(upload).await?, upload);
        }
        Ok(owners)
    }

    /// The record a key without one stands for (invariant 7), read without the object's
    /// bytes where the store can ([`Storage::owned_unread`]), and what is there now (its size
    /// then, and the content named with the owner). The owner is looked up in `owners`
    /// ([`Self::owners_of`]), else by its upload record. `None` as [`Self::owned_key`].
    pub(crate) async fn owned_key_unread(
        &self,
        key: &str,
        owners: &std::collections::HashMap<String, &str>,
    ) -> io::Result<Option<(KeyRecord, ObjectInfo)>> {
        let Some(found) = self.store.owned_unread(key).await? else {
            return Ok(None);
        };
        let now = found.info.clone();
        let listed = |owner: &str| owners.get(owner).map(|u| u.to_string());
        let record = self.owned_key_of(key, found, listed).await?;
        Ok(record.map(|record| (record, now)))
    }

    pub(super) async fn list_records<T: DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> io::Result<Vec<T>> {
        let files = self.store.list(prefix).await?;
        // Sized once for every file: an audit holds every upload's record, and a vector grown
        // by doubling ends up to twice their size.
        let mut out = Vec::with_capacity(files.len());
        for file in files {
            if let Some(record) = self.read(&file).await? {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// One page of upload records in the order of their record files: those after the file
    /// `after` (a cursor; empty: from the start), at most `limit`. Returns them and the cursor
    /// of the next page (`None` when this page reached the end).
    pub async fn uploads_after(
        &self,
        after: &str,
        limit: usize,
    ) -> io::Result<(Vec<UploadRecord>, Option<String>)> {
        let mut files = self.store.list(UPLOADS_DIR).await?;
        files.sort();
        let rest: Vec<String> = files.into_iter().filter(|f| f.as_str() > after).collect();
        let page = &rest[..rest.len().min(limit)];
        let mut records = Vec::new();
        for file in page {
            // Gone since the listing: removed meanwhile.
            if let Some(record) = self.read(file).await? {
                records.push(record);
            }
        }
        let next = (rest.len() > page.len())
            .then(|| page.last().cloned())
            .flatten();
        Ok((records, next))
    }

    pub async fn uploads(&self) -> io::Result<Vec<UploadRecord>> {
        self.list_records(UPLOADS_DIR).await
    }

    /// [`Self::uploads`], each read as `T`: a view of [`UploadRecord`] naming only the fields
    /// a reader needs of every record (an audit holds them all at once).
    pub async fn uploads_as<T: DeserializeOwned>(&self) -> io::Result<Vec<T>> {
        self.list_records(UPLOADS_DIR).await
    }
}
