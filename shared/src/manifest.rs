//! The manifest: append-only JSON Lines, one record per decision, partitioned by date
//! (`<prefix>/dt=YYYY-MM-DD/<time>-<run>.jsonl[.gz]`). Objects are written once and never
//! modified; readers take every object under the prefix. The schema is documented (and
//! versioned) in docs/manifest.md.

use std::borrow::Borrow;
use std::io::{self, Read, Write};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::identity::{Arch, CodeId, DebugId, DwarfPackage, Format, Kind, SplitDwarf};
use crate::pdb_sources::PdbSources;
use crate::storage::Storage;
use crate::upload_meta::UploadMeta;

pub mod fold;
pub mod latest;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// What happened to one artifact (or one upload, for `unpublished`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Newly published under at least one key.
    Indexed,
    /// Every key already held this content.
    Unchanged,
    /// Not an artifact (or nothing to key it by): nothing published.
    Skipped,
    /// Malformed, hostile or unusable name: nothing published.
    Rejected,
    /// A key already held different content and was not overwritten.
    Conflict,
    /// An upload was deleted: keys no other upload references were removed.
    Unpublished,
    /// An upload's retention passed: removed like a deletion (keys other uploads still
    /// reference stay).
    Expired,
    /// An upload's channel (and so its expiry) was changed by `symdex promote`.
    Promoted,
    /// Not an upload's decision: uploads of a run seen again whose decisions the manifest
    /// already holds (a re-run of unchanged inputs, a redelivery), counted in one record
    /// per run and upload metadata ([`Record::repeated`]) instead of one record each.
    Repeated,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Indexed => "indexed",
            Action::Unchanged => "unchanged",
            Action::Skipped => "skipped",
            Action::Rejected => "rejected",
            Action::Conflict => "conflict",
            Action::Unpublished => "unpublished",
            Action::Expired => "expired",
            Action::Promoted => "promoted",
            Action::Repeated => "repeated",
        }
    }
}

impl std::str::FromStr for Action {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_lowercase()))
            .map_err(|_| format!("unknown action {s:?}"))
    }
}

/// How an archive's own ending is recorded: an empty archive is `skipped`, a malformed one
/// `rejected` (the archive layer, below the manifest, names the ending; this names the action).
impl From<&crate::archive::Ending> for Action {
    fn from(ending: &crate::archive::Ending) -> Self {
        match ending {
            crate::archive::Ending::Empty(_) => Action::Skipped,
            crate::archive::Ending::Malformed(_) => Action::Rejected,
        }
    }
}

/// One manifest record. Optional fields are omitted when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub schema: u32,
    /// RFC 3339, UTC.
    pub time: String,
    pub action: Option<Action>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The upload's identity (what references point at).
    pub upload: String,
    /// Ingest location: bucket (S3 only), key or local path, version, ETag, size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_bucket: Option<String>,
    pub ingest_key: String,
    /// The path inside the ingest object, when the upload is an archive's entry (nested
    /// archives: `inner.tar.gz!/path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_size: Option<u64>,
    #[serde(flatten)]
    pub meta: UploadMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_id: Option<DebugId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_id: Option<CodeId>,
    /// The artifact's file name as uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_file: Option<String>,
    /// A DWARF package (`.dwp`): its index version and the DWO ids it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dwarf_package: Option<DwarfPackage>,
    /// A binary or debug file built with split DWARF: the DWO ids of its skeleton units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_dwarf: Option<SplitDwarf>,
    /// A PDB or Portable PDB: its documents with their checksums, its Source Link map and
    /// srcsrv stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb_sources: Option<PdbSources>,
    /// Keys this decision published (written now) ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<String>,
    /// ... found already holding this content ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchanged: Vec<String>,
    /// ... found holding other content (not overwritten) ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// The other products whose uploads hold this upload's conflicting keys (a cross-product
    /// conflict: another product's CI published these ids first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_by_products: Vec<String>,
    /// ... or removed (for `unpublished`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// An ELF debug file: the source paths its DWARF names, and what became of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<crate::sourcemap::SourceReport>,
    /// A `repeated` record: how many decisions of each kind it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeated: Option<RepeatCounts>,
    /// Producer, e.g. `symdex 0.1.0`.
    pub indexer: String,
    /// This record repeats a decision the manifest already holds: its upload was answered
    /// from its upload record, which says the run that decided it wrote its records to the
    /// manifest before the record was finalized. Never written: the manifest counts it in its
    /// run's `repeated` record instead ([`fold::fold_repeats`]).
    #[serde(skip)]
    pub repeats: bool,
}

/// What a `repeated` record stands for: decisions already in the manifest, by action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatCounts {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unchanged: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflict: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Record {
    /// A record of `action` about `upload`, which came from `ingest_key` (in `ingest_bucket`
    /// on S3): the fields every record has; callers add what they know.
    pub fn about(
        action: Action,
        upload: String,
        ingest_bucket: Option<String>,
        ingest_key: String,
    ) -> Record {
        Record {
            schema: SCHEMA_VERSION,
            time: now_rfc3339(),
            action: Some(action),
            upload,
            ingest_bucket,
            name: Some(crate::identity::file_name_of(&ingest_key).to_string()),
            ingest_key,
            indexer: indexer_version(),
            ..Record::default()
        }
    }

    /// Every key this record says the artifact is (or was) reachable under.
    pub fn all_keys(&self) -> impl Iterator<Item = &String> {
        self.published
            .iter()
            .chain(&self.unchanged)
            .chain(&self.conflicts)
            .chain(&self.removed)
    }
}

/// Current time as RFC 3339 (seconds, UTC).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The producer string recorded in every record.
pub fn indexer_version() -> String {
    format!("symdex {}", env!("CARGO_PKG_VERSION"))
}

/// Writes one manifest object holding `records` (nothing when empty). Returns its key.
pub async fn write<R: Borrow<Record>>(
    store: &dyn Storage,
    prefix: &str,
    records: &[R],
    gzip: bool,
) -> io::Result<Option<String>> {
    let Some(first) = records.first().map(R::borrow) else {
        return Ok(None);
    };
    // Records are ~1 KB each: sized once, not doubled through a re-index's thousands.
    let mut body = Vec::with_capacity(records.len().saturating_mul(1536));
    for record in records {
        serde_json::to_writer(&mut body, record.borrow())?;
        body.push(b'\n');
    }
    // The partition is the decisions' day; the name starts with when the object is written,
    // to the nanosecond, so objects list in the order they were written even within one
    // second (a query replays them in that order: a removal right after an index).
    let date = first.time.get(..10).unwrap_or("unknown");
    let written = humantime::format_rfc3339_nanos(SystemTime::now()).to_string();
    let stamp: String = written.chars().filter(char::is_ascii_digit).collect();
    // Unique among writers of the same nanosecond: this process, its count of objects, what
    // they hold (not a hash of the whole body: a re-index's manifest is tens of megabytes).
    static WRITTEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let last = records.last().map_or("", |r| r.borrow().upload.as_str());
    let unique = crate::digest::sha1_hex(
        format!(
            "{written}\n{}\n{count}\n{}\n{}\n{last}",
            std::process::id(),
            body.len(),
            first.upload
        )
        .as_bytes(),
    );
    let prefix = prefix.trim_end_matches('/');
    let key = if gzip {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&body)?;
        body = encoder.finish()?;
        format!("{prefix}/dt={date}/{stamp}-{}.jsonl.gz", &unique[..12])
    } else {
        format!("{prefix}/dt={date}/{stamp}-{}.jsonl", &unique[..12])
    };
    store.put(&key, &body).await?;
    Ok(Some(key))
}

/// Reads every record under `prefix` (plain and gzip objects), sorted by time.
pub async fn read_all(store: &dyn Storage, prefix: &str) -> io::Result<Vec<Record>> {
    let mut records = Vec::new();
    for_each_record(store, prefix, None, |r| {
        records.push(r);
        Ok(())
    })
    .await?;
    records.sort_by(|a, b| a.time.cmp(&b.time));
    Ok(records)
}

/// Hands every record under `prefix` to `f`, one manifest object at a time in the objects'
/// order (their names start with the date and time they were written), so memory holds one
/// object whatever the manifest's size. With `since` (`YYYY-MM-DD...`), the date partitions
/// before that day are not read at all.
pub async fn for_each_record(
    store: &dyn Storage,
    prefix: &str,
    since: Option<&str>,
    mut f: impl FnMut(Record) -> io::Result<()>,
) -> io::Result<()> {
    let objects = objects(store, prefix, since).await?;
    for_each_record_of(store, &objects, |_, record: Record| f(record)).await
}

/// The manifest objects under `prefix` in the order they were written (their names start
/// with the date and time), without the date partitions before `since` (`YYYY-MM-DD...`).
pub async fn objects(
    store: &dyn Storage,
    prefix: &str,
    since: Option<&str>,
) -> io::Result<Vec<String>> {
    let prefix = format!("{}/", prefix.trim_end_matches('/'));
    let since_day = since.and_then(|s| s.get(..10));
    let mut keys = store.list(&prefix).await?;
    keys.retain(|key| {
        let day = key
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_prefix("dt="))
            .and_then(|rest| rest.get(..10));
        !matches!((day, since_day), (Some(day), Some(since)) if day < since)
    });
    // By the name's own stamp, when it was written (to the nanosecond), not by its date
    // partition, which is its first decision's day: a run that began before midnight is
    // written after it.
    keys.sort_by(|a, b| a.rsplit('/').next().cmp(&b.rsplit('/').next()));
    Ok(keys)
}

/// Hands every record of the manifest `objects` to `f` with the index of its object, one
/// object in memory at a time, each record parsed as `T` (a [`Record`], or the few fields a
/// caller reads) as it is handed over.
pub async fn for_each_record_of<T: serde::de::DeserializeOwned>(
    store: &dyn Storage,
    objects: &[String],
    mut f: impl FnMut(usize, T) -> io::Result<()>,
) -> io::Result<()> {
    for (index, key) in objects.iter().enumerate() {
        let Some(raw) = store.get(key).await?.map(|v| v.bytes) else {
            continue;
        };
        for_each_in(key, &raw, |record| f(index, record))?;
    }
    Ok(())
}

/// The records of the manifest object `key` holding `raw` (gzip when the name says so);
/// nothing for an object that is not a manifest object.
pub fn records_in(key: &str, raw: &[u8]) -> io::Result<Vec<Record>> {
    let mut records = Vec::new();
    for_each_in(key, raw, |record| {
        records.push(record);
        Ok(())
    })?;
    Ok(records)
}

/// Hands `f` each record of the manifest object `key` holding `raw`, parsed as `T`, one line
/// at a time.
fn for_each_in<T: serde::de::DeserializeOwned>(
    key: &str,
    raw: &[u8],
    mut f: impl FnMut(T) -> io::Result<()>,
) -> io::Result<()> {
    let text = if key.ends_with(".gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(raw).read_to_string(&mut s)?;
        std::borrow::Cow::Owned(s)
    } else if key.ends_with(".jsonl") {
        String::from_utf8_lossy(raw)
    } else {
        return Ok(());
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let record = serde_json::from_str(line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{key}: bad record: {e}"),
            )
        })?;
        f(record)?;
    }
    Ok(())
}

/// Filters for `symdex manifest query`.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub debug_id: Option<String>,
    pub code_id: Option<String>,
    /// Matches the file name, code file or debug file (case-insensitive).
    pub name: Option<String>,
    pub build: Option<String>,
    pub action: Option<Action>,
    /// RFC 3339 time or `YYYY-MM-DD`: records at or after it.
    pub since: Option<String>,
    /// Records naming this key (published, unchanged, conflicting or removed).
    pub key: Option<String>,
    /// Only records that met a key holding other content.
    pub conflicts: bool,
    pub channel: Option<String>,
}

impl Query {
    pub fn matches(&self, r: &Record) -> bool {
        let eq = |want: &Option<String>, got: &Option<String>| {
            want.as_ref()
                .is_none_or(|w| got.as_ref().is_some_and(|g| g.eq_ignore_ascii_case(w)))
        };
        let debug_id = r.debug_id.map(|id| id.to_string());
        let code_id = r.code_id.as_ref().map(|id| id.as_str().to_string());
        let name_matches = self.name.as_ref().is_none_or(|want| {
            [&r.name, &r.code_file, &r.debug_file].iter().any(|n| {
                n.as_ref().is_some_and(|n| {
                    n.eq_ignore_ascii_case(want)
                        || crate::identity::file_name_of(n).eq_ignore_ascii_case(want)
                })
            })
        });
        let key = self.key.as_ref().map(|k| k.trim_start_matches('/'));
        eq(&self.debug_id, &debug_id)
            && eq(&self.code_id, &code_id)
            && eq(&self.channel, &r.meta.channel)
            && key.is_none_or(|k| r.all_keys().any(|have| have == k))
            && (!self.conflicts || !r.conflicts.is_empty())
            && eq(&self.build, &r.meta.build)
            && name_matches
            && self.action.is_none_or(|a| r.action == Some(a))
            && self
                .since
                .as_ref()
                .is_none_or(|since| r.time.as_str() >= since.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        indexer_version, read_all, write, Action, CodeId, DwarfPackage, Query, Record, SplitDwarf,
        SCHEMA_VERSION,
    };
    use crate::identity::DwoId;
    use crate::storage::LocalStore;
    use crate::upload_meta::UploadMeta;
    use crate::{Arch, Format, Kind};

    fn record(action: Action, time: &str, build: &str) -> Record {
        Record {
            schema: SCHEMA_VERSION,
            time: time.into(),
            action: Some(action),
            upload: "file:/x".into(),
            ingest_key: "/x/Foo.pdb".into(),
            meta: UploadMeta {
                build: Some(build.into()),
                ..Default::default()
            },
            debug_id: "497b72f6-390a-44fc-878e-5a2d63b6cc4b-1".parse().ok(),
            name: Some("Foo.pdb".into()),
            indexer: indexer_version(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn write_and_read_back_plain_and_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let a = vec![record(Action::Indexed, "2026-11-20T10:00:00Z", "1")];
        let b = vec![record(Action::Conflict, "2026-11-21T10:00:00Z", "2")];
        let ka = write(&store, "_manifest", &a, false)
            .await
            .unwrap()
            .unwrap();
        let kb = write(&store, "_manifest/", &b, true)
            .await
            .unwrap()
            .unwrap();
        assert!(ka.starts_with("_manifest/dt=2026-11-20/"), "{ka}");
        let stamp = |k: &str| {
            k.rsplit('/')
                .next()
                .unwrap()
                .split('-')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(stamp(&ka).len(), 23, "to the nanosecond: {ka}");
        assert!(kb.ends_with(".jsonl.gz"), "{kb}");
        assert_eq!(
            write::<Record>(&store, "_manifest", &[], false)
                .await
                .unwrap(),
            None
        );
        let all = read_all(&store, "_manifest").await.unwrap();
        assert_eq!(all, [a[0].clone(), b[0].clone()]);
    }

    /// Every field comes back where it was written, the upload's metadata (flattened among
    /// the record's own fields) included; fields a reader does not know are passed over.
    #[test]
    fn records_read_as_written() {
        let s = |v: &str| Some(v.to_string());
        let v = |v: &str| vec![v.to_string()];
        let full = Record {
            reason: s("why"),
            ingest_bucket: s("bucket"),
            entry: s("inner.tar!/a"),
            ingest_version: s("v1"),
            ingest_etag: s("etag"),
            ingest_size: Some(7),
            meta: UploadMeta::with_every_field(),
            format: Some(Format::Elf),
            kind: Some(Kind::Debug),
            arch: Some(Arch::X86_64),
            code_id: Some(CodeId::new("abcd".into())),
            code_file: s("app"),
            debug_file: s("app.debug"),
            dwarf_package: Some(DwarfPackage {
                index_version: 5,
                dwo_ids: vec![DwoId(1), DwoId(0x57ae_4f79_97db_4c94)],
            }),
            split_dwarf: Some(SplitDwarf {
                dwo_ids: vec![DwoId(u64::MAX)],
                unread: v("a unit header: unexpected end of input"),
            }),
            published: v("k/1"),
            unchanged: v("k/2"),
            conflicts: v("k/3"),
            held_by_products: v("other"),
            removed: v("k/4"),
            source_paths: v("/src/a.c"),
            ..record(Action::Indexed, "2026-11-20T10:00:00Z", "b")
        };
        let text = serde_json::to_string(&full).unwrap();
        assert!(text.contains(r#""channel":"try""#), "flattened: {text}");
        // The vocabulary is written as the names it always had.
        for field in [
            r#""format":"elf""#,
            r#""kind":"debug""#,
            r#""arch":"x86_64""#,
            r#""dwarf_package":{"index_version":5,"dwo_ids":["0000000000000001","57ae4f7997db4c94"]}"#,
            r#""split_dwarf":{"dwo_ids":["ffffffffffffffff"],"unread":["#,
        ] {
            assert!(text.contains(field), "{field} in {text}");
        }
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), full);
        let sparse = r#"{"schema":1,"time":"t","action":null,"upload":"u","ingest_key":"k",
            "indexer":"i","build":"7","later_field":{"x":[1]}}"#;
        let read: Record = serde_json::from_str(sparse).unwrap();
        assert_eq!((read.meta.build.as_deref(), read.action), (Some("7"), None));
        assert!(serde_json::from_str::<Record>(r#"{"schema":1}"#).is_err());
    }

    #[test]
    fn queries_by_key_conflicts_and_channel() {
        let mut r = record(Action::Conflict, "2026-11-20T10:00:00Z", "1");
        r.published = vec!["symbols/a".into()];
        r.conflicts = vec!["symbols/b".into()];
        r.meta.channel = Some("try".into());
        let matches = |q: Query| q.matches(&r);
        assert!(matches(Query {
            key: Some("symbols/a".into()),
            ..Query::default()
        }));
        assert!(matches(Query {
            key: Some("/symbols/b".into()),
            conflicts: true,
            channel: Some("TRY".into()),
            ..Query::default()
        }));
        assert!(!matches(Query {
            key: Some("symbols/c".into()),
            ..Query::default()
        }));
    }

    #[tokio::test]
    async fn queries_filter() {
        let r = record(Action::Indexed, "2026-11-20T10:00:00Z", "1234");
        let q = |f: fn(&mut Query)| {
            let mut q = Query::default();
            f(&mut q);
            q.matches(&r)
        };
        assert!(q(|_| {}));
        assert!(q(|q| q.build = Some("1234".into())));
        assert!(!q(|q| q.conflicts = true), "no conflicting key");
        assert!(!q(|q| q.key = Some("symbols/x".into())));
        assert!(!q(|q| q.channel = Some("try".into())));
        assert!(!q(|q| q.build = Some("999".into())));
        assert!(q(|q| q.name = Some("foo.PDB".into())));
        assert!(q(
            |q| q.debug_id = Some("497B72F6-390A-44FC-878E-5A2D63B6CC4B-1".into())
        ));
        assert!(q(|q| q.action = Some(Action::Indexed)));
        assert!(!q(|q| q.action = Some(Action::Rejected)));
        assert!(q(|q| q.since = Some("2026-11-20".into())));
        assert!(!q(|q| q.since = Some("2026-11-21".into())));
        assert_eq!("conflict".parse::<Action>().unwrap(), Action::Conflict);
    }
}
