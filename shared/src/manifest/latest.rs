//! Each upload's latest decision: what `symdex manifest query` answers by default (the whole
//! history with `--history`), as the Athena view `latest` does.
//!
//! An upload's latest decision is the records of the last manifest object holding records
//! of it (objects are named by the time they were written; a run writes its records of an
//! upload in one object). `repeated` records are no upload's decision ([`super::fold`]) and
//! are left out.

use std::collections::HashMap;
use std::io;

use serde::Deserialize;

use super::{for_each_record_of, objects, Action, Record};
use crate::digest::Sha1;
use crate::storage::Storage;

/// Hands `f` the records of each upload's latest decision under `prefix` (from the date
/// partitions since `since`, as [`super::for_each_record`]), in the manifest's order. Two
/// passes over the same objects: memory holds, per upload, 16 bytes of its id's SHA-1 and
/// the index of its last object (under 50 bytes with the table's slack), never the records.
/// A cryptographic hash, not the map's own: upload ids are the uploader's names, and two that
/// collided would hide one upload's decision behind the other's (128 bits: no birthday
/// search finds a pair).
pub async fn for_each_latest(
    store: &dyn Storage,
    prefix: &str,
    since: Option<&str>,
    mut f: impl FnMut(Record) -> io::Result<()>,
) -> io::Result<()> {
    let objects = objects(store, prefix, since).await?;
    let mut last: HashMap<UploadHash, u32> = HashMap::new();
    // The first pass parses only what it keeps of each record.
    for_each_record_of(store, &objects, |object, record: UploadOf| {
        if record.action != Some(Action::Repeated) {
            last.insert(hash_of(&record.upload), object_number(object)?);
        }
        Ok(())
    })
    .await?;
    last.shrink_to_fit();
    for_each_record_of(store, &objects, |object, record: Record| {
        let latest = last.get(&hash_of(&record.upload)) == Some(&object_number(object)?);
        if latest && record.action != Some(Action::Repeated) {
            f(record)?;
        }
        Ok(())
    })
    .await
}

/// What the first pass reads of a record.
#[derive(Deserialize)]
struct UploadOf {
    upload: String,
    action: Option<Action>,
}

/// 16 bytes of an upload id's SHA-1.
type UploadHash = [u8; 16];

fn hash_of(upload: &str) -> UploadHash {
    let mut sha1 = Sha1::new();
    sha1.update(upload.as_bytes());
    let digest = sha1.digest();
    let mut hash = [0u8; 16];
    hash.copy_from_slice(&digest[..16]);
    hash
}

/// An object's index as the map holds it (a manifest of over 4 billion objects is refused).
fn object_number(index: usize) -> io::Result<u32> {
    u32::try_from(index).map_err(|_| io::Error::other("more manifest objects than a query counts"))
}

#[cfg(test)]
mod tests {
    use super::for_each_latest;
    use crate::manifest::{write, Action, Record};
    use crate::storage::local::LocalStore;

    fn record(action: Action, upload: &str) -> Record {
        Record::about(action, upload.to_string(), None, format!("ci/{upload}"))
    }

    async fn latest(store: &LocalStore) -> Vec<(String, Action)> {
        let mut seen = Vec::new();
        for_each_latest(store, "_manifest", None, |r| {
            seen.push((r.upload, r.action.unwrap_or(Action::Skipped)));
            Ok(())
        })
        .await
        .unwrap();
        seen
    }

    #[tokio::test]
    async fn each_upload_answers_with_the_records_of_its_last_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let mut pdb_alias = record(Action::Indexed, "pe");
        pdb_alias.published = vec!["alias".into()];
        let first = [
            record(Action::Indexed, "a"),
            record(Action::Indexed, "pe"),
            pdb_alias,
            record(Action::Conflict, "c"),
        ];
        write(&store, "_manifest", &first, false).await.unwrap();
        // Object names carry the nanosecond they were written: the next run's sorts after.
        let mut repeated = record(Action::Repeated, "");
        repeated.upload = String::new();
        let second = [record(Action::Unpublished, "a"), repeated];
        write(&store, "_manifest", &second, true).await.unwrap();
        assert_eq!(
            latest(&store).await,
            [
                ("pe".to_string(), Action::Indexed),
                ("pe".to_string(), Action::Indexed),
                ("c".to_string(), Action::Conflict),
                ("a".to_string(), Action::Unpublished),
            ]
        );
    }
}
