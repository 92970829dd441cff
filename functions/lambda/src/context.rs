//! What a function keeps between invocations (its configuration and the serving-bucket
//! store), and the S3 reads every handler shares.

use std::sync::atomic::AtomicBool;

use symdex_shared::storage::s3::S3Store;

use crate::config::LambdaConfig;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// What a function keeps between invocations: configuration and the serving-bucket store.
pub struct Context {
    pub config: LambdaConfig,
    pub store: S3Store,
    /// The store-level marker objects were written (once per process, not per object).
    pub(crate) prepared: AtomicBool,
}

impl Context {
    /// Builds the S3 client from the standard AWS environment (incl. AWS_ENDPOINT_URL), with
    /// the SDK's standard retries (backoff on throttling and 5xx).
    pub async fn from_env() -> Result<Self, Error> {
        let config = LambdaConfig::from_env()?;
        let client = symdex_shared::storage::s3::client_from_env(5).await;
        Ok(Self::new(config, client))
    }

    pub fn new(config: LambdaConfig, client: aws_sdk_s3::Client) -> Self {
        let store = S3Store::new(client, config.serving_bucket.clone())
            .with_multipart_threshold(config.multipart_threshold)
            .with_redirect_aliases(config.redirect_aliases)
            .with_conditional_copies(config.conditional_copies);
        Context {
            config,
            store,
            prepared: AtomicBool::new(false),
        }
    }
}

/// Reads what identification leaves out of debug files (the source paths their DWARF names,
/// compressed sections decompressed: `elf::read_debug_details`) on a blocking thread, through
/// ranged GETs of 64 KiB blocks (the last 64 kept): a small debug file costs one GET, or
/// none when the object's first block is already read and holds it.
pub(crate) async fn read_debug_details(
    object: symdex_shared::storage::s3::S3Object,
    mut ids: Vec<symdex_shared::Identity>,
) -> std::io::Result<Vec<symdex_shared::Identity>> {
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let reader = symdex_shared::reader::BlockCache::new(object.blocking(handle), 64 << 10, 64);
        for id in &mut ids {
            symdex_shared::formats::elf::read_debug_details(&reader, id);
        }
        ids
    })
    .await
    .map_err(std::io::Error::other)
}

/// `Indexer::identify_named` for an object in S3: a file no format claims that a debug file of
/// its scope names (sourcemap.rs, "sources without flags"), identified as the source it is
/// there — `None`: indexed as identified (also where a source's read would be refused as
/// too large: it stays what it was). The join record is read (or the file noted) first.
pub(crate) async fn identify_named(
    indexer: &symdex_shared::pipeline::Indexer<'_>,
    upload: &symdex_shared::pipeline::Upload<'_>,
    object: &symdex_shared::storage::s3::S3Object,
    identified: &Result<Vec<symdex_shared::Identity>, symdex_shared::formats::FormatError>,
) -> std::io::Result<Option<Vec<symdex_shared::Identity>>> {
    if !matches!(
        identified,
        Err(symdex_shared::formats::FormatError::Unrecognized(_))
    ) {
        return Ok(None);
    }
    // Binary data is no source a debug file names: no join record asked for it (read from
    // the blocks identification fetched).
    match object
        .identify(|reader| symdex_shared::formats::source::may_be_text(reader))
        .await
    {
        Ok((true, _)) => {}
        Ok((false, _)) | Err(symdex_shared::storage::StorageError::TooLarge(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let Some(named) = indexer.named_by(upload, identified).await? else {
        return Ok(None);
    };
    let options = symdex_shared::IdentifyOptions { as_source: true };
    let as_source = match object
        .identify(|reader| symdex_shared::identify(reader, &options))
        .await
    {
        Ok((as_source, _)) => as_source,
        Err(symdex_shared::storage::StorageError::TooLarge(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let admitted = symdex_shared::pipeline::admits(&named, &as_source);
    Ok(admitted.then(|| as_source.ok()).flatten())
}
