//! Who holds each key, replayed from the manifest: a conflict's row names the earlier uploads
//! whose content its keys hold, and the keys left at the end are what the manifest says is
//! published now (compared with the store's own listing on the page).

use std::collections::{BTreeSet, HashMap};

use crate::manifest::Record;

/// Key -> the row of the latest record that published it or found it holding its content,
/// and the row of the record that published it (what a key is attributed to: a key another
/// product's upload found unchanged stays its publisher's).
#[derive(Debug, Default)]
pub struct Holders {
    live: HashMap<String, u32>,
    publisher: HashMap<String, u32>,
}

impl Holders {
    /// Takes record `row`, in the manifest's order; returns, for a record with conflicts,
    /// the rows holding its conflicting keys (those the manifest knows of).
    pub fn see(&mut self, row: u32, r: &Record) -> Vec<u32> {
        let holders: BTreeSet<u32> = r
            .conflicts
            .iter()
            .filter_map(|key| self.live.get(key).copied())
            .collect();
        for key in r.published.iter().chain(&r.unchanged) {
            self.live.insert(key.clone(), row);
        }
        for key in &r.published {
            self.publisher.insert(key.clone(), row);
        }
        for key in &r.removed {
            self.live.remove(key);
            self.publisher.remove(key);
        }
        holders.into_iter().collect()
    }

    /// Every key the manifest says is published now, with the row it is attributed to: its
    /// publisher's, or (a key no record published, found already there) the latest holder's.
    pub fn live(&self) -> impl Iterator<Item = (&str, u32)> {
        self.live.iter().map(|(key, latest)| {
            let row = self.publisher.get(key).unwrap_or(latest);
            (key.as_str(), *row)
        })
    }
}
