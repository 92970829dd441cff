//! What a function keeps between invocations (its configuration and the serving-bucket
//! store), and the S3 reads every handler shares.

use std::sync::atomic::{AtomicU64, Ordering};

use symdex_shared::archive;
use symdex_shared::formats::source::may_be_text;
use symdex_shared::pipeline::{ByteSource, Identified, Markers};
use symdex_shared::reader::RangeReader;
use symdex_shared::storage::s3::{S3Object, S3Store};
use symdex_shared::storage::StorageError;
use symdex_shared::{FormatError, IdentifyOptions, Identity};

use crate::config::LambdaConfig;

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// What a function keeps between invocations: configuration and the serving-bucket store.
pub struct Context {
    pub config: LambdaConfig,
    pub store: S3Store,
    /// The store-level marker objects were written (once per process, not per object).
    pub(crate) markers: Markers,
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
            markers: Markers::default(),
        }
    }
}

/// Reads what identification leaves out of debug files (the source paths their DWARF names,
/// compressed sections decompressed, a PDB's documents: `formats::read_debug_details`) on a blocking thread, through
/// ranged GETs of 64 KiB blocks (the last 64 kept): a small debug file costs one GET, or
/// none when the object's first block is already read and holds it.
async fn read_debug_details(
    object: S3Object,
    mut ids: Vec<Identity>,
) -> std::io::Result<Vec<Identity>> {
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let reader = symdex_shared::reader::BlockCache::new(object.blocking(handle), 64 << 10, 64);
        for id in &mut ids {
            symdex_shared::formats::read_debug_details(&reader, id);
        }
        ids
    })
    .await
    .map_err(std::io::Error::other)
}

/// An S3 object's bytes (or a range of one: an archive's stored entry), identified by ranged
/// GETs over prefetched blocks (`S3Object::identify`); what identification needs past
/// [`MAX_PREFETCH_BLOCKS`](symdex_shared::storage::s3) refuses it.
pub(crate) struct ObjectBytes {
    object: S3Object,
    /// Whether what no format claims is looked at as an archive (an ingest object, not an
    /// archive's entry).
    archives: bool,
    /// Bytes fetched by identification (for the decision's log line).
    fetched: AtomicU64,
}

impl ObjectBytes {
    /// An ingest object: an archive is walked.
    pub(crate) fn object(object: S3Object) -> Self {
        ObjectBytes {
            object,
            archives: true,
            fetched: AtomicU64::new(0),
        }
    }

    /// An archive's stored entry, read in place.
    pub(crate) fn entry(object: S3Object) -> Self {
        ObjectBytes {
            archives: false,
            ..ObjectBytes::object(object)
        }
    }

    /// Bytes fetched so far by identification.
    pub(crate) fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }
}

impl ByteSource for ObjectBytes {
    async fn identify(&self, options: &IdentifyOptions) -> std::io::Result<Identified> {
        let archives = self.archives;
        let identify = |reader: &dyn RangeReader| {
            let identified = symdex_shared::identify(reader, options);
            // Only what no format claims is looked at as an archive.
            let container = match &identified {
                Err(FormatError::Unrecognized(_)) if archives => {
                    archive::detect_reader(reader).ok().flatten()
                }
                _ => None,
            };
            (identified, container)
        };
        match self.object.identify(identify).await {
            Ok(((identified, container), fetched)) => {
                self.fetched.fetch_add(fetched, Ordering::Relaxed);
                Ok(match container {
                    Some(container) => Identified::Archive(container),
                    None => Identified::Formats(identified),
                })
            }
            // Not a storage failure: the artifact asks for more reads than identification
            // allows.
            Err(StorageError::TooLarge(reason)) => Ok(Identified::Refused(reason)),
            Err(e) => Err(e.into()),
        }
    }

    /// The object as opened, first block included: a debug file within it reads its details
    /// from the bytes at hand.
    async fn debug_details(&self, ids: Vec<Identity>) -> std::io::Result<Vec<Identity>> {
        read_debug_details(self.object.clone(), ids).await
    }

    /// Binary data is no source a debug file names: read from the blocks identification
    /// fetched (refused: too large to be one).
    async fn may_be_text(&self) -> std::io::Result<bool> {
        match self.object.identify(may_be_text).await {
            Ok((text, _)) => Ok(text),
            Err(StorageError::TooLarge(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
