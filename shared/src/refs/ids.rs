//! Debug-id records: the PDB names PEs ask for and where a PDB with that id was published
//! (invariant 5).

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

use super::layout::id_file;
use super::prior::Prior;
use super::swap::{parse, Step};
use super::uploads::PriorRead;
use super::RefStore;
use crate::storage::{Precondition, Versioned};

/// PE <-> PDB name aliasing for one debug id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRecord {
    /// A key holding the PDB's content, once one was published.
    pub pdb_key: Option<String>,
    /// The file name that copy was uploaded under (set with `pdb_key`; absent in records
    /// written before it was kept): a PE naming the PDB so has nothing to alias — its keys
    /// are the PDB's own — and records its name without asking whether the copy is live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb_name: Option<String>,
    /// PDB file names as PEs' CodeView records spell them.
    pub names: BTreeSet<String>,
}

impl<'s> RefStore<'s> {
    /// A debug id's record (empty where there is none), with the read kept for an
    /// [`Self::update_id_on`] that follows.
    pub(crate) async fn id_read(&self, debug_id: &str) -> io::Result<(IdRecord, PriorRead)> {
        let file = id_file(debug_id);
        let read = self.store.get(&file).await?;
        let record = read.as_ref().map(|v| parse(&file, &v.bytes)).transpose()?;
        Ok((record.unwrap_or_default(), PriorRead(read)))
    }

    /// Creates a debug id's record as `record` where there is none: a first delivery's guess
    /// that its PE or PDB is the first of the two to arrive (or the only one) — one write, no
    /// read. `false`: a record is there, unchanged (the caller reads and updates it as it
    /// would have without the guess). Only a write checks a guess.
    pub async fn create_id(&self, debug_id: &str, record: &IdRecord) -> io::Result<bool> {
        let bytes = serde_json::to_vec(record)?;
        let created = self
            .store
            .put_if(&id_file(debug_id), &bytes, Precondition::Absent)
            .await?;
        Ok(created.is_some())
    }

    /// [`Self::update_id`], swapping first on the record as `prior` read it (no read again
    /// while it is current). Leaving it as it is, decided on that read, is as good as
    /// decided on a later one: the read came after everything the caller did before.
    pub(crate) async fn update_id_on(
        &self,
        debug_id: &str,
        prior: PriorRead,
        f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        self.update_id_from(debug_id, Prior::of(prior.0), f).await
    }

    /// Updates a debug id's record; `f` returns whether it changed anything.
    pub async fn update_id(
        &self,
        debug_id: &str,
        f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        self.update_id_from(debug_id, Prior::Unread, f).await
    }

    /// [`Self::update_id`] from what was `prefetched` of the record, if anything.
    pub(super) async fn update_id_from(
        &self,
        debug_id: &str,
        prefetched: Prior<Versioned>,
        mut f: impl FnMut(&mut IdRecord) -> bool,
    ) -> io::Result<IdRecord> {
        let file = id_file(debug_id);
        let (record, _) = self
            .update_versioned(&file, prefetched, |current: Option<IdRecord>| {
                let mut record = current.unwrap_or_default();
                if f(&mut record) {
                    Ok(Step::Write(record.clone(), record))
                } else {
                    Ok(Step::Keep(record))
                }
            })
            .await?;
        Ok(record)
    }
}
