//! The end of every multipart upload: completed with its parts, or aborted. A completion whose
//! answer was lost (a reset connection, a timeout: a retry would find no such upload) may
//! have happened, so a failed completion is checked against the object now at the key, by the
//! caller's proof; only an upload neither completed nor proven is aborted.

use aws_sdk_s3::operation::complete_multipart_upload::CompleteMultipartUploadOutput;
use aws_sdk_s3::operation::head_object::HeadObjectOutput;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;

use super::sdk_err;
use crate::storage::StorageResult;

/// One multipart upload begun at `bucket`/`key`.
pub(super) struct Begun<'a> {
    pub(super) client: &'a Client,
    pub(super) bucket: &'a str,
    pub(super) key: &'a str,
    pub(super) upload_id: &'a str,
}

impl Begun<'_> {
    /// Completes the upload with `parts` (`If-None-Match: if_none_match` when given), and
    /// answers `done` of the completion. When `parts` failed, it is aborted. When the
    /// completion fails, the object at the key is read: `proof` of its HEAD answers what a
    /// completion that happened would (a lost answer), else the upload is aborted and the
    /// completion's error returned. Aborts are best effort: parts of an unfinished upload
    /// would otherwise be billed until a lifecycle rule ends them.
    pub(super) async fn complete<T>(
        &self,
        parts: StorageResult<Vec<CompletedPart>>,
        if_none_match: Option<String>,
        done: impl FnOnce(&CompleteMultipartUploadOutput) -> T,
        proof: impl FnOnce(&HeadObjectOutput) -> Option<T>,
    ) -> StorageResult<T> {
        let parts = match parts {
            Ok(parts) => parts,
            Err(e) => {
                self.abort().await;
                return Err(e);
            }
        };
        let completed = self
            .client
            .complete_multipart_upload()
            .bucket(self.bucket)
            .key(self.key)
            .upload_id(self.upload_id)
            .set_if_none_match(if_none_match)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await;
        let error = match completed {
            Ok(out) => return Ok(done(&out)),
            Err(e) => sdk_err("CompleteMultipartUpload", e),
        };
        let head = self
            .client
            .head_object()
            .bucket(self.bucket)
            .key(self.key)
            .send()
            .await;
        if let Some(proven) = head.ok().as_ref().and_then(proof) {
            // Not worth failing for; said on stderr, so it stays visible in the logs.
            eprintln!(
                "symdex: multipart upload of {} completed despite: {error}",
                self.key
            );
            return Ok(proven);
        }
        self.abort().await;
        Err(error)
    }

    async fn abort(&self) {
        let _ = self
            .client
            .abort_multipart_upload()
            .bucket(self.bucket)
            .key(self.key)
            .upload_id(self.upload_id)
            .send()
            .await;
    }
}
