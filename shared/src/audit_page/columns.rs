//! The manifest's records packed by column for the page: one array per field, each text a
//! position in the string table ([`Strings`]), in the order the records were read (the
//! order `symdex manifest query` prints them in).

use crate::manifest::Record;
use serde::Serialize;

use crate::audit_page::packing::{runs, sparse};
use crate::audit_page::strings::Strings;

/// One column per field the page shows; row `i` of every column is record `i` (written
/// packed: [`crate::audit_page::packing`]).
#[derive(Debug, Default, Serialize)]
pub struct Columns {
    /// The record's time split into its day (`YYYY-MM-DD`, the chart's and the date filter's
    /// unit) and the rest, both kept as written.
    #[serde(serialize_with = "runs")]
    pub day: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub clock: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub action: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub reason: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub upload: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub build: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub product: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub version: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub channel: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub expires: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub format: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub kind: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub arch: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub debug_id: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub code_id: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub name: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub code_file: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub debug_file: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub ingest_key: Vec<u32>,
    #[serde(serialize_with = "runs")]
    pub entry: Vec<u32>,
    pub ingest_size: Vec<Option<u64>>,
    /// Keys, each as the positions of its parts ([`Strings::key`]).
    #[serde(serialize_with = "sparse")]
    pub published: Vec<Vec<Vec<u32>>>,
    #[serde(serialize_with = "sparse")]
    pub unchanged: Vec<Vec<Vec<u32>>>,
    #[serde(serialize_with = "sparse")]
    pub conflicts: Vec<Vec<Vec<u32>>>,
    #[serde(serialize_with = "sparse")]
    pub removed: Vec<Vec<Vec<u32>>>,
    #[serde(serialize_with = "sparse")]
    pub held_by_products: Vec<Vec<u32>>,
    /// For a record with conflicts: the rows of the earlier records that held its
    /// conflicting keys ([`crate::audit_page::holders::Holders`]).
    #[serde(serialize_with = "sparse")]
    pub holders: Vec<Vec<u32>>,
    /// A debug file's sources: paths named, served, missing then (0s otherwise).
    #[serde(serialize_with = "sparse")]
    pub sources: Vec<[usize; 3]>,
}

impl Columns {
    pub fn len(&self) -> usize {
        self.day.len()
    }

    /// Appends one record (row [`Self::len`] before the call).
    pub fn push(&mut self, r: &Record, s: &mut Strings) {
        let (day, clock) = split_time(&r.time);
        self.day.push(s.id(day));
        self.clock.push(s.id(clock));
        self.action.push(s.opt(r.action.map(|a| a.as_str())));
        self.reason.push(s.opt(r.reason.as_deref()));
        self.upload.push(s.id(&r.upload));
        self.build.push(s.opt(r.meta.build.as_deref()));
        self.product.push(s.opt(r.meta.product.as_deref()));
        self.version.push(s.opt(r.meta.version.as_deref()));
        self.channel.push(s.opt(r.meta.channel.as_deref()));
        self.expires.push(s.opt(r.meta.expires.as_deref()));
        self.format.push(s.opt(r.format.map(|f| f.as_str())));
        self.kind.push(s.opt(r.kind.map(|k| k.as_str())));
        self.arch.push(s.opt(r.arch.map(|a| a.as_str())));
        let debug_id = r.debug_id.map(|id| id.to_string());
        self.debug_id.push(s.opt(debug_id.as_deref()));
        self.code_id
            .push(s.opt(r.code_id.as_ref().map(|id| id.as_str())));
        self.name.push(s.opt(r.name.as_deref()));
        self.code_file.push(s.opt(r.code_file.as_deref()));
        self.debug_file.push(s.opt(r.debug_file.as_deref()));
        self.ingest_key.push(s.id(&r.ingest_key));
        self.entry.push(s.opt(r.entry.as_deref()));
        self.ingest_size.push(r.ingest_size);
        let keys = |keys: &[String], s: &mut Strings| keys.iter().map(|k| s.key(k)).collect();
        self.published.push(keys(&r.published, s));
        self.unchanged.push(keys(&r.unchanged, s));
        self.conflicts.push(keys(&r.conflicts, s));
        self.removed.push(keys(&r.removed, s));
        let held = r.held_by_products.iter().map(|p| s.id(p)).collect();
        self.held_by_products.push(held);
        self.holders.push(Vec::new());
        self.sources
            .push(r.sources.as_ref().map_or([0; 3], |report| {
                [report.referenced, report.served, report.missing.len()]
            }));
    }
}

/// `2026-11-20T10:00:00Z` as (`2026-11-20`, `T10:00:00Z`); a time too short (a hand-made
/// record) is all day.
fn split_time(time: &str) -> (&str, &str) {
    match time.get(..10) {
        Some(day) => (day, &time[10..]),
        None => (time, ""),
    }
}
