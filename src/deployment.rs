//! A deployed store as the CLI names it: `s3://BUCKET[/PREFIX]`, and the S3 client every
//! command that talks to a deployment builds (the standard AWS environment, as the Lambdas).

use std::fmt;

use aws_sdk_s3::Client;
use symdex_shared::storage::s3::S3Store;
use symdex_shared::storage::{LocalStore, Storage, StorageError};

/// `s3://BUCKET[/PREFIX]`: a bucket and a key prefix in it (no leading or trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    pub prefix: String,
}

impl S3Url {
    /// The prefix followed by `/`, or nothing at the bucket's root.
    pub fn key_prefix(&self) -> String {
        if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        }
    }
}

impl S3Url {
    /// The bucket as a store, through the standard AWS environment (checked by listing its
    /// manifest prefix's first key).
    pub async fn open(&self) -> anyhow::Result<S3Store> {
        let client = client().await;
        if let Err(problem) = check_bucket(&client, &self.bucket, "_manifest/").await {
            anyhow::bail!("{problem}");
        }
        Ok(S3Store::new(client, self.bucket.clone()))
    }
}

impl std::str::FromStr for S3Url {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let rest = s
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{s:?} is not an s3://BUCKET[/PREFIX] URL"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        // S3's bucket naming rules (3-63 of a-z, 0-9, '.', '-').
        let valid = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if !valid {
            return Err(format!("{s:?}: {bucket:?} is not an S3 bucket name"));
        }
        Ok(S3Url {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }
}

impl fmt::Display for S3Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "s3://{}", self.bucket),
            prefix => write!(f, "s3://{}/{prefix}", self.bucket),
        }
    }
}

/// A store as commands name it: a directory, or a deployment's serving bucket.
#[derive(Debug, Clone)]
pub enum StoreArg {
    Dir(std::path::PathBuf),
    S3(S3Url),
}

impl std::str::FromStr for StoreArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if !s.starts_with("s3://") {
            return Ok(StoreArg::Dir(s.into()));
        }
        let url: S3Url = s.parse()?;
        if !url.prefix.is_empty() {
            return Err(format!(
                "{s:?}: a deployment's store is its serving bucket's root (s3://BUCKET)"
            ));
        }
        Ok(StoreArg::S3(url))
    }
}

impl StoreArg {
    /// The store, opened: a directory that must exist, or the bucket through the standard AWS
    /// environment (checked by listing its manifest prefix's first key).
    pub async fn open(&self) -> anyhow::Result<Box<dyn Storage>> {
        match self {
            StoreArg::Dir(dir) => {
                if !dir.is_dir() {
                    anyhow::bail!("no store at {}", dir.display());
                }
                Ok(Box::new(
                    LocalStore::open(dir)?.naming_owners_as_marked(None)?,
                ))
            }
            StoreArg::S3(url) => Ok(Box::new(url.open().await?)),
        }
    }
}

/// The client for a deployment: the SDK's standard retries with backoff, up to 5 attempts
/// (throttling and 5xx), as the Lambdas use.
pub async fn client() -> aws_sdk_s3::Client {
    symdex_shared::storage::s3::client_from_env(5).await
}

/// [`client`], each request (each attempt) given up after `timeout`: connecting, and until
/// the answer's first byte (an upload's body included), so that an endpoint that accepts
/// connections and never answers fails the command instead of hanging it.
pub async fn client_timing_out(timeout: std::time::Duration) -> aws_sdk_s3::Client {
    let client = client().await;
    let timeouts = aws_sdk_s3::config::timeout::TimeoutConfig::builder()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .build();
    let config = client
        .config()
        .to_builder()
        .timeout_config(timeouts)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Says what a failed request to `bucket` means for the person running the CLI: a missing
/// bucket, missing credentials or a missing permission by name, else the error itself.
pub fn explain(bucket: &str, err: &StorageError) -> String {
    let text = err.to_string();
    let lower = text.to_ascii_lowercase();
    if lower.contains("nosuchbucket") {
        format!("the bucket {bucket} does not exist")
    } else if lower.contains("credentials") {
        format!("no AWS credentials for {bucket} (the standard chain: AWS_ACCESS_KEY_ID, AWS_PROFILE, an instance or OIDC role): {text}")
    } else if lower.contains("accessdenied")
        || lower.contains("http 403")
        || lower.contains("forbidden")
    {
        format!("no permission on the bucket {bucket}: {text}")
    } else {
        format!("{bucket}: {text}")
    }
}

/// Whether `bucket` can be reached with the credentials at hand, asking for one key under
/// `prefix` (what the module's CI policies allow: a listing of the product's own prefix, not
/// the bucket's): a clear problem if not.
pub async fn check_bucket(client: &Client, bucket: &str, prefix: &str) -> Result<(), String> {
    let listed = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .max_keys(1)
        .send()
        .await;
    listed.map(|_| ()).map_err(|e| listing_problem(bucket, &e))
}

/// Every object of `bucket` under `prefix` (after `start_after`, in key order), page by page;
/// a failure said as [`check_bucket`] says it.
pub async fn list_objects(
    client: &Client,
    bucket: &str,
    prefix: &str,
    start_after: Option<String>,
) -> Result<Vec<aws_sdk_s3::types::Object>, String> {
    let mut objects = Vec::new();
    let mut pages = client
        .list_objects_v2()
        .bucket(bucket)
        .prefix(prefix)
        .set_start_after(start_after)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| listing_problem(bucket, &e))?;
        objects.extend(page.contents().iter().cloned());
    }
    Ok(objects)
}

/// A failed ListObjectsV2 of `bucket`, for the person running the CLI ([`explain`]).
fn listing_problem(
    bucket: &str,
    e: &aws_sdk_s3::error::SdkError<
        aws_sdk_s3::operation::list_objects_v2::ListObjectsV2Error,
        aws_sdk_s3::config::http::HttpResponse,
    >,
) -> String {
    let code = e
        .as_service_error()
        .and_then(|s| s.meta().code())
        .map(str::to_string);
    let status = e.raw_response().map(|r| r.status().as_u16());
    let timed_out = match e {
        aws_sdk_s3::error::SdkError::TimeoutError(_) => true,
        aws_sdk_s3::error::SdkError::DispatchFailure(failure) => failure.is_timeout(),
        _ => false,
    };
    if timed_out {
        // Said plainly: the SDK's own text is a nest of connector types.
        return format!(
            "{bucket}: the S3 endpoint did not answer in time (every attempt was given up \
             after the request timeout)"
        );
    }
    let text = match (code, status) {
        (Some(code), Some(status)) => format!("{code} (HTTP {status})"),
        (None, Some(404)) => "NoSuchBucket".to_string(),
        (None, Some(403)) => "AccessDenied (HTTP 403)".to_string(),
        _ => format!("{e:?}"),
    };
    explain(bucket, &StorageError::Io(std::io::Error::other(text)))
}

#[cfg(test)]
mod tests {
    use super::S3Url;

    #[test]
    fn s3_urls_parse_and_print() {
        let url: S3Url = "s3://acme-ingest/app/ci/".parse().unwrap();
        assert_eq!(url.bucket, "acme-ingest");
        assert_eq!(url.prefix, "app/ci");
        assert_eq!(url.key_prefix(), "app/ci/");
        assert_eq!(url.to_string(), "s3://acme-ingest/app/ci");
        let root: S3Url = "s3://acme-ingest".parse().unwrap();
        assert_eq!(root.key_prefix(), "");
        for bad in ["acme", "s3://", "s3://AB", "s3://a_b/x", "https://acme/x"] {
            assert!(bad.parse::<S3Url>().is_err(), "{bad}");
        }
    }
}
