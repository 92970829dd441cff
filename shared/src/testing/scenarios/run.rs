//! Running one scenario operation as the functions run it.

use crate::testing::index_bytes::IndexBytes;
use std::collections::BTreeSet;
use std::io;
use std::time::Duration;

use super::artifacts::Artifact;
use super::Op;
use crate::manifest::Record;
use crate::pipeline::RecordLookup;
use crate::pipeline::{Config, HandOver, Indexer};
use crate::refs::{LeasePolicy, UploadRecord, Wait};
use crate::storage::Storage;

thread_local! {
    /// Whether this thread's scenarios make compressed copies ([`compressing_copies`]).
    static COPIES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes every actor of the scenarios run on this thread (a `#[tokio::test]` runs its
/// actors on its own thread) store compressed copies: every schedule meets the encode step,
/// and the audit after each checks each copy encodes what its key holds.
#[cfg(test)]
pub fn compressing_copies() {
    COPIES.with(|copies| copies.set(true));
}

/// The configuration of every actor: leases never expire during a test, a busy key is given
/// up at once (the message is retried later), no sleeping.
pub fn config() -> Config {
    let compress = match COPIES.with(|copies| copies.get()) {
        true => crate::encoded::Encodings::zstd(),
        false => crate::encoded::Encodings::none(),
    };
    Config {
        compress,
        lease: LeasePolicy {
            exclusive: false,
            duration: Duration::from_secs(3600),
            wait: Wait {
                attempts: 2,
                first_pause: Duration::ZERO,
                max_pause: Duration::ZERO,
            },
        },
        ..Config::default()
    }
}

/// [`config`] for a sole writer, as the CLI runs holding the local store's writer lock:
/// every lease but its own was left by a process that died, and is taken over at once.
pub fn sole_writer_config() -> Config {
    let mut config = config();
    config.lease.exclusive = true;
    config
}

/// Runs one operation to its end on `store` (`Err`: it should be retried); a removal hands
/// the keys it frees to none of the uploads waiting for them.
pub async fn run_op(store: &dyn Storage, op: Op<'_>) -> io::Result<Vec<Record>> {
    run_op_as(store, op, false, &[]).await
}

/// Hands the keys a removal freed over as the Lambda does (pipeline/, `HandOver`): a
/// waiting upload is indexed again from its bytes, here one of the artifacts whose ingest
/// objects are there (not deleted in the scenario), its records written to the manifest
/// before it is finalized.
pub struct FromArtifacts<'a> {
    pub store: &'a dyn Storage,
    pub ingest: &'a [&'a Artifact],
    /// The configuration of the re-index ([`config`] or [`sole_writer_config`]).
    pub config: Config,
}

impl HandOver for FromArtifacts<'_> {
    fn reindex<'b>(
        &'b self,
        waiter: &'b UploadRecord,
        handed: &'b BTreeSet<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<()>> + Send + 'b>> {
        Box::pin(async move {
            let Some(artifact) = self.ingest.iter().find(|a| a.id == waiter.upload) else {
                return Ok(());
            };
            let recheck = Config {
                recheck: true,
                handed: handed.clone(),
                ..self.config.clone()
            };
            let indexer = Indexer::new(self.store, recheck);
            let upload = artifact.upload();
            let indexed = indexer.index_bytes(&upload, &artifact.bytes).await?;
            indexer.write_manifest(&indexed.records).await?;
            indexer.finalize(&indexed, true).await?;
            Ok(())
        })
    }
}

/// The artifacts of `before` and `ops` whose ingest objects are there: not deleted by an
/// operation (`Delete`, or `Index` of a deleted object).
pub(super) fn in_ingest<'a>(before: &[&'a Artifact], ops: &[Op<'a>]) -> Vec<&'a Artifact> {
    let mut all: Vec<&'a Artifact> = before.to_vec();
    for op in ops {
        match op {
            Op::Index(a, _) | Op::Delete(a) | Op::Expire(a) | Op::Promote(a) | Op::Overwrite(a) => {
                all.push(a)
            }
            Op::IndexArchive(entries) | Op::DeleteArchive(entries) => all.extend(entries.iter()),
        }
    }
    all.retain(|a| !removed_by(ops, &a.id));
    all
}

/// Whether one of `ops` deletes the upload `id`'s ingest object: a deletion, or an index
/// that finds it gone (and takes the upload back).
pub(super) fn removed_by(ops: &[Op<'_>], id: &str) -> bool {
    ops.iter().any(|op| match op {
        Op::Delete(a) | Op::Index(a, false) => a.id == id,
        Op::DeleteArchive(entries) => entries.iter().any(|a| a.id == id),
        _ => false,
    })
}

/// [`run_op`]; `first_delivery`: an indexer runs as the Lambda runs a message's first
/// delivery alone in its invocation — it takes the upload record to be absent without reading
/// it (`PriorRead::absent`) and lists its keys by the finalize alone
/// (`Indexer::lists_keys_at_finalize`); else it reads the record first and lists the keys
/// right after publishing.
pub async fn run_op_as(
    store: &dyn Storage,
    op: Op<'_>,
    first_delivery: bool,
    ingest: &[&Artifact],
) -> io::Result<Vec<Record>> {
    run_op_configured(store, op, first_delivery, ingest, config()).await
}

/// [`run_op_as`] with `config`.
pub(super) async fn run_op_configured(
    store: &dyn Storage,
    op: Op<'_>,
    first_delivery: bool,
    ingest: &[&Artifact],
    config: Config,
) -> io::Result<Vec<Record>> {
    let hand_over = FromArtifacts {
        store,
        ingest,
        config: config.clone(),
    };
    let config = Config {
        overwrite: matches!(op, Op::Overwrite(_)),
        ..config
    };
    // As the Lambda's archive job: an indexer reading each record first (not a first
    // delivery's guess), every entry finalized once all are indexed.
    let whole_archive = matches!(op, Op::IndexArchive(_));
    let indexer = Indexer::new(store, config)
        .lists_keys_at_finalize(first_delivery && !whole_archive)
        .handing_over_to(&hand_over)
        .claiming_sources_through(&hand_over);
    match op {
        Op::Index(artifact, _) | Op::Overwrite(artifact) => {
            let alive = !matches!(op, Op::Index(_, false));
            let upload = artifact.upload();
            // A first delivery takes the upload record to be absent, unread (also on the
            // redeliveries here, as a wrong receive count would have it).
            let lookup = match first_delivery {
                true => RecordLookup::GuessAbsent,
                false => RecordLookup::Read,
            };
            let indexed = indexer
                .index_bytes_as(&upload, lookup, &artifact.bytes)
                .await?;
            let mut records = indexed.records.clone();
            records.extend(indexer.finalize(&indexed, alive).await?);
            Ok(records)
        }
        Op::IndexArchive(entries) => {
            let mut runs = Vec::new();
            let mut records = Vec::new();
            for artifact in entries {
                let indexed = indexer
                    .index_bytes(&artifact.upload(), &artifact.bytes)
                    .await?;
                records.extend(indexed.records.iter().cloned());
                runs.push(indexed);
            }
            for indexed in &runs {
                records.extend(indexer.finalize(indexed, true).await?);
            }
            Ok(records)
        }
        Op::DeleteArchive(entries) => {
            let mut removals = Vec::new();
            for artifact in entries {
                removals.extend(indexer.begin_unindex(&artifact.id).await?);
            }
            for removal in &removals {
                indexer.end_removal(removal).await?;
            }
            Ok(removals.into_iter().map(|r| r.record).collect())
        }
        Op::Delete(artifact) => Ok(indexer.unindex(&artifact.id).await?.into_iter().collect()),
        Op::Expire(artifact) => {
            let Some(removal) = indexer.expire(&artifact.id, far_future(), None).await? else {
                return Ok(Vec::new());
            };
            indexer
                .write_manifest(std::slice::from_ref(&removal.record))
                .await?;
            indexer.end_removal(&removal).await?;
            Ok(vec![removal.record])
        }
        Op::Promote(artifact) => Ok(indexer
            .promote(&artifact.id, "release", &Default::default())
            .await?
            .into_iter()
            .collect()),
    }
}

/// A time at which every upload of a finite retention has expired.
fn far_future() -> std::time::SystemTime {
    std::time::SystemTime::now() + Duration::from_secs(1000 * 86_400)
}
