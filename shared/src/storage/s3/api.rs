//! The `Storage` trait over S3.

use super::writes::Write;
use super::{sdk_err, S3Store, OWNER_META};
use crate::storage::encoding::{EncodedMeta, Staged};
use crate::storage::{
    check_key, CopySource, ObjectInfo, Owned, Precondition, Storage, StorageError, StorageFuture,
    StoreTraits, Versioned,
};

impl Storage for S3Store {
    fn read_source<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        out: &'a mut (dyn std::io::Write + Send),
    ) -> StorageFuture<'a, u64> {
        Box::pin(self.read_source_now(source, out))
    }
    fn put_encoded<'a>(
        &'a self,
        key: &'a str,
        staged: &'a Staged,
        meta: &'a EncodedMeta,
    ) -> StorageFuture<'a, ()> {
        Box::pin(self.put_encoded_now(key, staged, meta))
    }
    fn encoded<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<(u64, EncodedMeta)>> {
        Box::pin(self.encoded_now(key))
    }
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        Box::pin(async move {
            check_key(key)?;
            Ok(self
                .head_object(&self.bucket, key, None)
                .await?
                .map(|(info, _)| info))
        })
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        Box::pin(self.get_now(key))
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()> {
        Box::pin(async move { self.put_now(key, bytes, None).await.map(|_| ()) })
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        Box::pin(self.put_if_now(key, bytes, condition))
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(self.delete_if_now(key, version))
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64> {
        let write = Write {
            only_new: false,
            owner,
        };
        Box::pin(async move { Ok(self.copy_now(source, key, known, write).await?.size) })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>> {
        let write = Write {
            only_new: true,
            owner,
        };
        Box::pin(async move {
            match self.copy_now(source, key, known, write).await {
                Ok(info) => Ok(Some(info.size)),
                Err(StorageError::PreconditionFailed(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        Box::pin(self.list_now(prefix))
    }
    fn list_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(self.list_pages(prefix, each))
    }
    fn list_sized_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String, u64) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(self.list_sized_pages(prefix, each))
    }
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .max_keys(1)
                .send()
                .await
                .map_err(|e| sdk_err("ListObjectsV2", e))?;
            Ok(!page.contents().is_empty())
        })
    }
    fn read_settled<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            let known = self.settled.lock().ok().and_then(|s| s.get(key).cloned());
            if let Some(bytes) = known {
                return Ok(Some(bytes));
            }
            let read = self.get_now(key).await?.map(|v| v.bytes);
            if let Some(bytes) = &read {
                self.remember_settled(key, bytes);
            }
            Ok(read)
        })
    }
    fn create_settled<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let created = self.put_if_now(key, bytes, Precondition::Absent).await?;
            if created.is_some() {
                self.remember_settled(key, bytes);
            }
            Ok(created.is_some())
        })
    }
    fn traits(&self) -> StoreTraits {
        StoreTraits {
            names_owners: true,
            uploads_by_location: true,
            key_copies_are_aliases: self.redirect_aliases,
            versions_are_free: true,
            source_records: true,
        }
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(self.delete_now(key))
    }
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move {
            check_key(key)?;
            let found = self.head_object_versioned(&self.bucket, key, None).await?;
            Ok(found.map(|(info, meta, _, redirect)| Owned {
                info,
                owner: meta.get(OWNER_META).cloned(),
                alias_of: redirect.map(|r| r.trim_start_matches('/').to_string()),
                written: None,
            }))
        })
    }
    fn creates_only_new(&self, source: &CopySource<'_>, size: u64) -> bool {
        // Everything but a single CopyObject is a PutObject or a CompleteMultipartUpload,
        // whose `If-None-Match` every S3 we know honours.
        let single_copy = match source {
            CopySource::Object { .. } => true,
            CopySource::Key(_) => !self.redirect_aliases,
            _ => false,
        };
        !single_copy || size >= self.multipart_threshold || self.conditional_copies
    }
}
