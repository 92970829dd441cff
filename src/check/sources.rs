//! `check`'s source clients: for a PDB or Portable PDB, each document (source file) as
//! Visual Studio and dotnet find it through the Source Link map the PDB carries
//! (`sourcelink`), and as WinDbg finds it through the PDB's srcsrv stream (`srcsrv`): the URL
//! the client downloads, the store key that URL names (`src/<product>/<build>/<path>`), and
//! whether the bytes there have the checksum the PDB recorded (MD5, SHA-1 or SHA-256). Each
//! document is served, missing, of the wrong checksum, or not served by this store (a URL
//! elsewhere, or none).

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use symdex_shared::digest::{Md5, Sha1, Sha256};
use symdex_shared::formats::pdb::{read_srcsrv, SrcsrvUnread};
use symdex_shared::pdb_sources::{Checksum, ChecksumAlgorithm};
use symdex_shared::refs::RefStore;
use symdex_shared::storage::{CopySource, Storage};
use symdex_shared::{FileReader, Format, Identity};

use super::store_urls::StoreUrls;
use super::Client;
use crate::credentials::{redacted, Credentialed};
use crate::deployment::StoreArg;
use symdex_shared::pdb_sources::{SrcsrvLines, SrcsrvTarget as Target};

/// One document to check, as one client finds it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct DocumentWanted {
    input: String,
    module: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    debug_id: Option<String>,
    client: &'static str,
    /// The path the PDB records.
    document: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum: Option<Checksum>,
    /// What the client downloads it from.
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// The store key that URL names.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// Why the store serves it to this client under no key.
    #[serde(skip)]
    elsewhere: Option<String>,
    /// Why it could not be checked at all (its PDB unreadable as far as the srcsrv stream):
    /// an error, not a verdict.
    #[serde(skip)]
    unchecked: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum DocumentStatus {
    Served,
    Missing,
    WrongChecksum,
    NotInStore,
    Forbidden,
    Error,
}

impl DocumentStatus {
    fn as_str(self) -> &'static str {
        match self {
            DocumentStatus::Served => "served",
            DocumentStatus::Missing => "missing",
            DocumentStatus::WrongChecksum => "wrong-checksum",
            DocumentStatus::NotInStore => "not-in-store",
            DocumentStatus::Forbidden => "forbidden",
            DocumentStatus::Error => "error",
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct DocumentChecked {
    #[serde(flatten)]
    wanted: DocumentWanted,
    status: DocumentStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// The upload whose bytes the store recorded at the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    published_by: Option<String>,
}

/// The documents of `id` (a PDB or Portable PDB that names its sources) each selected source
/// client asks for. `srcsrv_of`: the PDB's srcsrv stream, read when a client needs its lines
/// (`None`: the PDB is not at hand to read, inside an archive).
pub(super) fn wanted_documents(
    input: &str,
    id: &Identity,
    name: &str,
    clients: &[Client],
    srcsrv_of: Option<&Path>,
    urls: &StoreUrls,
    out: &mut Vec<DocumentWanted>,
) {
    let Some(sources) = id.pdb_sources.as_ref() else {
        return;
    };
    if !matches!(id.format, Format::Pdb | Format::PortablePdb) || sources.documents.is_empty() {
        return;
    }
    for reason in &sources.unread {
        say_err!("symdex: {input}: its documents may not all be checked: {reason}");
    }
    let wanted = |client: Client, index: usize, target: Result<String, String>| {
        let document = &sources.documents[index];
        let (url, key, elsewhere) = match target {
            Ok(url) => match urls.key_of(&url) {
                Ok(key) => (Some(url), Some(key), None),
                Err(why) => (Some(url), None, Some(why)),
            },
            Err(why) => (None, None, Some(why)),
        };
        DocumentWanted {
            input: input.to_string(),
            module: name.to_string(),
            debug_id: (!id.debug_id.is_nil()).then(|| id.debug_id.to_string()),
            client: client.name(),
            document: document.path.clone(),
            checksum: document.checksum.clone(),
            url,
            key,
            elsewhere,
            unchecked: None,
        }
    };
    let count = sources.documents.len();
    if clients.contains(&Client::Sourcelink) {
        match &sources.source_link {
            Some(map) => {
                for (index, document) in sources.documents.iter().enumerate() {
                    let url = map
                        .resolve(&document.path)
                        .ok_or_else(|| "no Source Link entry maps it".to_string());
                    out.push(wanted(Client::Sourcelink, index, url));
                }
            }
            None => say_err!(
                "symdex: {input}: no Source Link map: Visual Studio and dotnet find its \
                 {count} documents at no URL"
            ),
        }
    }
    if clients.contains(&Client::Srcsrv) && id.format == Format::Pdb {
        // The stream itself where the PDB is at hand (its rows say why a document is fetched
        // otherwise); inside an archive, the URLs identification read of it by the same
        // reader. A stream identification could not read (`srcsrv_unchecked`: a truncated
        // PDB, one named in another case) may be there all the same: its documents are
        // listed, not passed over as if the PDB had none.
        let unchecked = sources.srcsrv_unchecked.then(|| {
            let why = sources.unread.join("; ");
            format!("srcsrv stream not checked: {why}")
        });
        let (lines, refused, unreadable) = match (srcsrv_of.map(srcsrv_lines), unchecked) {
            (Some(Ok(Some(lines))), _) => (Some(lines), None, None),
            // Refused (read in part, one of two streams named srcsrv, or the one named in
            // another case): every document is listed, found at no URL this check vouches
            // for. Not read at all (a corrupt PDB, or one not at hand that identification
            // could not read): every document is an error, nothing being known of where it
            // is fetched.
            (Some(Err(unread)), _) => {
                say_err!("symdex: {input}: srcsrv stream not checked: {unread}");
                let why = Some(format!("srcsrv stream not checked: {unread}"));
                match unread {
                    SrcsrvUnread::Refused(_) => (None, why, None),
                    SrcsrvUnread::Unreadable(_) => (None, None, why),
                }
            }
            (Some(Ok(None)), Some(why)) => (None, Some(why), None),
            (None, Some(why)) if sources.srcsrv.is_none() => (None, None, Some(why)),
            (Some(Ok(None)), None) | (None, _) if sources.srcsrv.is_none() => {
                say_err!("symdex: {input}: no srcsrv stream: WinDbg finds its documents at no URL");
                return;
            }
            (Some(Ok(None)), None) => return,
            (None, _) => (None, None, None),
        };
        for (index, document) in sources.documents.iter().enumerate() {
            let target = lines.as_ref().map(|l| l.target(&document.path));
            let url = match (refused.as_ref().or(unreadable.as_ref()), target) {
                (Some(why), _) => Err(why.clone()),
                (None, Some(Target::Url(url))) => Ok(url),
                (None, Some(Target::Elsewhere(why))) => Err(why),
                (None, None) => document
                    .srcsrv_url
                    .clone()
                    .ok_or_else(|| "the srcsrv stream gives it no download URL".to_string()),
            };
            let mut row = wanted(Client::Srcsrv, index, url);
            row.unchecked = unreadable.clone();
            out.push(row);
        }
    }
}

/// The srcsrv stream of the PDB at `pdb`, read (`None`: it has none), or why not: it could
/// not be read, or [`read_srcsrv`] refuses it.
fn srcsrv_lines(pdb: &Path) -> Result<Option<SrcsrvLines>, SrcsrvUnread> {
    let reader = FileReader::open(pdb).map_err(|e| SrcsrvUnread::Unreadable(e.to_string()))?;
    let bytes = read_srcsrv(&reader)?;
    Ok(bytes.map(|bytes| SrcsrvLines::parse(&bytes)))
}

/// What a key holds, as far as a document's check needs: its digest by the document's
/// algorithm (`None` when the PDB recorded none), or why it was not read.
#[derive(Debug, Clone)]
enum Fetched {
    Held(Option<String>),
    Missing,
    Forbidden(String),
    Failed(String),
}

/// A key and the algorithm its bytes are hashed by: each fetched once, whichever clients
/// and documents name it.
type Fetch = (String, Option<ChecksumAlgorithm>);

/// Checks every wanted document: at `server` (GET of the key under it, with its
/// credentials) when given, else in `store`; who published each key read from `store`.
pub(super) fn check_documents(
    wanted: Vec<DocumentWanted>,
    server: Option<&(Credentialed, ureq::Agent)>,
    store: Option<&StoreArg>,
    concurrency: usize,
) -> anyhow::Result<Vec<DocumentChecked>> {
    let fetches: HashSet<Fetch> = wanted
        .iter()
        .filter_map(|w| Some((w.key.clone()?, w.checksum.as_ref().map(|c| c.algorithm))))
        .collect();
    if fetches.is_empty() {
        return Ok(wanted.into_iter().map(|w| judged(w, None, None)).collect());
    }
    let (records, mut fetched) = match store {
        Some(store) => crate::block_on(async {
            let opened = store.open().await?;
            let records = published(&*opened, &fetches).await;
            let fetched = match server {
                Some(_) => HashMap::new(),
                None => from_store(&*opened, &fetches).await,
            };
            anyhow::Ok((records, fetched))
        })??,
        None => (HashMap::new(), HashMap::new()),
    };
    if let Some(server) = server {
        fetched = from_server(server, fetches, concurrency);
    }
    Ok(wanted
        .into_iter()
        .map(|w| {
            let fetch = w
                .key
                .clone()
                .map(|key| (key, w.checksum.as_ref().map(|c| c.algorithm)));
            let got = fetch.as_ref().and_then(|f| fetched.get(f)).cloned();
            let by = w.key.as_ref().and_then(|k| records.get(k)).cloned();
            judged(w, got, by)
        })
        .collect())
}

/// The row of one document from what its key holds.
fn judged(
    wanted: DocumentWanted,
    fetched: Option<Fetched>,
    published_by: Option<String>,
) -> DocumentChecked {
    if let Some(why) = &wanted.unchecked {
        return DocumentChecked {
            status: DocumentStatus::Error,
            detail: Some(why.clone()),
            published_by,
            wanted,
        };
    }
    let (status, detail) = match (&wanted.elsewhere, fetched) {
        (Some(why), _) => (DocumentStatus::NotInStore, Some(why.clone())),
        (None, None) => (DocumentStatus::Error, Some("not checked".into())),
        (None, Some(Fetched::Missing)) => (DocumentStatus::Missing, None),
        (None, Some(Fetched::Forbidden(why))) => (DocumentStatus::Forbidden, Some(why)),
        (None, Some(Fetched::Failed(why))) => (DocumentStatus::Error, Some(why)),
        (None, Some(Fetched::Held(digest))) => match (&wanted.checksum, digest) {
            (Some(want), Some(got)) if want.digest.eq_ignore_ascii_case(&got) => {
                (DocumentStatus::Served, None)
            }
            (Some(want), Some(got)) => (
                DocumentStatus::WrongChecksum,
                Some(format!(
                    "{} {got}, the PDB recorded {}",
                    want.algorithm, want.digest
                )),
            ),
            _ => (
                DocumentStatus::Served,
                Some("the PDB recorded no checksum to compare".into()),
            ),
        },
    };
    DocumentChecked {
        wanted,
        status,
        detail,
        published_by,
    }
}

/// Who first published each key, as the store's records say (a record that cannot be read
/// counts as none).
async fn published(store: &dyn Storage, fetches: &HashSet<Fetch>) -> HashMap<String, String> {
    let refs = RefStore::new(store);
    let mut out = HashMap::new();
    for (key, _) in fetches {
        if out.contains_key(key) {
            continue;
        }
        if let Ok(Some(record)) = refs.key(key).await {
            if !record.refs.is_empty() && !record.by.is_empty() {
                out.insert(key.clone(), record.by);
            }
        }
    }
    out
}

/// Each key's bytes, hashed as they stream out of the store.
async fn from_store(store: &dyn Storage, fetches: &HashSet<Fetch>) -> HashMap<Fetch, Fetched> {
    let mut out = HashMap::new();
    for fetch in fetches {
        let (key, algorithm) = fetch;
        let got = match store.size(key).await {
            Ok(None) => Fetched::Missing,
            Err(e) => Fetched::Failed(e.to_string()),
            Ok(Some(_)) => {
                let mut hasher = Hasher::new(*algorithm);
                match store.read_source(&CopySource::Key(key), &mut hasher).await {
                    Ok(_) => Fetched::Held(hasher.hex()),
                    Err(e) => Fetched::Failed(e.to_string()),
                }
            }
        };
        out.insert(fetch.clone(), got);
    }
    out
}

/// Each key fetched from the server (GET, redirects followed), `concurrency` at once.
fn from_server(
    server: &(Credentialed, ureq::Agent),
    fetches: HashSet<Fetch>,
    concurrency: usize,
) -> HashMap<Fetch, Fetched> {
    let queue = Mutex::new(fetches.into_iter());
    let out = Mutex::new(HashMap::new());
    std::thread::scope(|scope| {
        for _ in 0..concurrency.clamp(1, 64) {
            scope.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.next());
                let Some(fetch) = next else { break };
                let got = fetch_one(server, &fetch);
                if let Ok(mut out) = out.lock() {
                    out.insert(fetch, got);
                }
            });
        }
    });
    out.into_inner().unwrap_or_default()
}

fn fetch_one((server, agent): &(Credentialed, ureq::Agent), (key, algorithm): &Fetch) -> Fetched {
    let url = format!(
        "{}/{}",
        server.base.trim_end_matches('/'),
        crate::serve::url_path(key.split('/'))
    );
    let mut request = agent.get(&url);
    for (name, value) in &server.headers {
        request = request.header(name, value);
    }
    match request.call() {
        Ok(response) => match response.status().as_u16() {
            200..=299 => {
                let mut hasher = Hasher::new(*algorithm);
                let mut body = response.into_body();
                match io::copy(&mut body.as_reader(), &mut hasher) {
                    Ok(_) => Fetched::Held(hasher.hex()),
                    Err(e) => Fetched::Failed(redacted(&e.to_string())),
                }
            }
            404 | 410 => Fetched::Missing,
            code @ (401 | 403) => Fetched::Forbidden(format!("HTTP {code}")),
            code => Fetched::Failed(format!("HTTP {code}")),
        },
        Err(e) => Fetched::Failed(redacted(&e.to_string())),
    }
}

/// A digest by a PDB's checksum algorithm, written to as bytes stream by (none: the bytes
/// are only counted through).
enum Hasher {
    Md5(Md5),
    Sha1(Sha1),
    Sha256(Sha256),
    None,
}

impl Hasher {
    fn new(algorithm: Option<ChecksumAlgorithm>) -> Self {
        match algorithm {
            Some(ChecksumAlgorithm::Md5) => Hasher::Md5(Md5::default()),
            Some(ChecksumAlgorithm::Sha1) => Hasher::Sha1(Sha1::new()),
            Some(ChecksumAlgorithm::Sha256) => Hasher::Sha256(Sha256::default()),
            None => Hasher::None,
        }
    }

    /// The digest, lowercase hex.
    fn hex(self) -> Option<String> {
        match self {
            Hasher::Md5(h) => Some(h.hex()),
            Hasher::Sha1(h) => Some(h.hex()),
            Hasher::Sha256(h) => Some(h.hex()),
            Hasher::None => None,
        }
    }
}

impl Write for Hasher {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Hasher::Md5(h) => h.update(bytes),
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::None => {}
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Prints each document's row (JSON Lines with `json`) and the count line; returns how many
/// failed (missing, wrong checksum, forbidden) and how many could not be checked.
pub(super) fn report(checked: &[DocumentChecked], json: bool) -> anyhow::Result<(usize, usize)> {
    let mut counts: HashMap<DocumentStatus, usize> = HashMap::new();
    for row in checked {
        *counts.entry(row.status).or_default() += 1;
        if json {
            say!("{}", serde_json::to_string(row)?)?;
            continue;
        }
        let wanted = &row.wanted;
        say!(
            "{:<13} {:<14} {:<24} {} -> {}{}{}",
            row.status.as_str(),
            wanted.client,
            wanted.module,
            wanted.document,
            wanted.url.as_deref().unwrap_or("(no URL)"),
            row.detail
                .as_deref()
                .map(|d| format!("  ({d})"))
                .unwrap_or_default(),
            row.published_by
                .as_deref()
                .map(|b| format!("  [published by {b}]"))
                .unwrap_or_default(),
        )?;
    }
    if checked.is_empty() {
        return Ok((0, 0));
    }
    let count = |s| counts.get(&s).copied().unwrap_or(0);
    let (missing, wrong, forbidden, errors) = (
        count(DocumentStatus::Missing),
        count(DocumentStatus::WrongChecksum),
        count(DocumentStatus::Forbidden),
        count(DocumentStatus::Error),
    );
    say_err!(
        "symdex: {} documents served, {missing} missing, {wrong} wrong, {} not served by this \
         store, {forbidden} forbidden, {errors} errors",
        count(DocumentStatus::Served),
        count(DocumentStatus::NotInStore),
    );
    Ok((missing + wrong + forbidden, errors))
}

#[cfg(test)]
mod tests {
    use symdex_shared::formats::pdb::read_sources;
    use symdex_shared::pdb_sources::PdbSources;
    use symdex_shared::testing::source_pdbs::pdb_with_named_streams;
    use symdex_shared::{Format, Identity, Kind, MemReader};

    use super::{judged, wanted_documents, DocumentStatus, StoreUrls};
    use crate::check::Client;

    /// What `check --client srcsrv` makes of the PDB `pdb`, its stream read from `at_hand`
    /// (the same file, or another).
    fn statuses(pdb: &[u8], at_hand: &[u8]) -> Vec<DocumentStatus> {
        statuses_of(read_sources(&MemReader(pdb.to_vec())), Some(at_hand))
    }

    /// What `check --client srcsrv` makes of a PDB identification read as `sources`, its
    /// stream read again from `at_hand` (`None`: not at hand, inside an archive).
    fn statuses_of(sources: PdbSources, at_hand: Option<&[u8]>) -> Vec<DocumentStatus> {
        let mut id = Identity::new(Format::Pdb, Kind::Debug);
        id.pdb_sources = Some(sources);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.pdb");
        if let Some(bytes) = at_hand {
            std::fs::write(&path, bytes).unwrap();
        }
        let urls = StoreUrls::new(Some("https://sym.example/")).unwrap();
        let mut wanted = Vec::new();
        let clients = [Client::Srcsrv];
        let at_hand = at_hand.map(|_| path.as_path());
        wanted_documents(
            "app.pdb",
            &id,
            "app.pdb",
            &clients,
            at_hand,
            &urls,
            &mut wanted,
        );
        wanted
            .into_iter()
            .map(|w| judged(w, None, None).status)
            .collect()
    }

    /// A PDB that cannot be read as far as its srcsrv stream is an error (nothing is known of
    /// where WinDbg fetches its documents); a stream refused as read two ways, or one pointing
    /// outside the store, is a verdict.
    #[test]
    fn an_unreadable_srcsrv_stream_is_an_error_and_a_refused_one_is_not() {
        let stream: &[u8] = b"SRCSRV: variables --\r\nSRCSRVTRG=https://elsewhere/%var2%\r\n\
            SRCSRV: source files --\r\nC:\\b\\a.cpp*a.cpp\r\nSRCSRV: end --\r\n";
        let documents: &[(&str, u8, &[u8])] = &[(r"C:\b\a.cpp", 1, &[0xab; 16])];
        let pdb = pdb_with_named_streams([7; 16], documents, &[("srcsrv", stream)]);
        assert_eq!(statuses(&pdb, &pdb), [DocumentStatus::NotInStore]);
        let cut = &pdb[..pdb.len() / 2];
        assert_eq!(statuses(&pdb, cut), [DocumentStatus::Error]);
        let two = pdb_with_named_streams(
            [7; 16],
            documents,
            &[("srcsrv", stream), ("SRCSRV", stream)],
        );
        assert_eq!(statuses(&two, &two), [DocumentStatus::NotInStore]);
        // Identification could not read the stream (a PDB cut or corrupt past its
        // documents): not passed over as a PDB without one, whether its stream fails to read
        // here too or the PDB is not at hand.
        let mut unread = read_sources(&MemReader(pdb.clone()));
        unread.srcsrv = None;
        unread.srcsrv_unchecked = true;
        unread.unread = vec!["malformed pdb: truncated".into()];
        let not_a_pdb: &[u8] = b"not a pdb";
        assert_eq!(
            statuses_of(unread.clone(), Some(not_a_pdb)),
            [DocumentStatus::Error]
        );
        assert_eq!(statuses_of(unread.clone(), None), [DocumentStatus::Error]);
        // Read whole here after all: its lines decide.
        assert_eq!(
            statuses_of(unread, Some(&pdb)),
            [DocumentStatus::NotInStore]
        );
        // No stream at all: no rows (said on stderr).
        let none = pdb_with_named_streams([7; 16], documents, &[]);
        assert_eq!(statuses(&none, &none), []);
    }
}
