//! `symdex check`: for every module an input names, the exact keys each client requests, asked
//! of a server (HEAD, redirects followed) or looked up in a store, and reported as found,
//! missing, forbidden or wrong content (size differs from what the store recorded), with who
//! published the key when the store knows. Exit status: 0 all found, 1 something missing,
//! 2 an error (unreadable input, an archive's entry `index` would reject, a server that did
//! not answer).
//!
//! For a PDB or Portable PDB, the `sourcelink` and `srcsrv` clients check each document
//! (source file) it names at the URL its Source Link map or srcsrv stream gives: served (the
//! bytes there have the checksum the PDB recorded), missing, wrong checksum, or not served by
//! this store (check/sources.rs).
//!
//! Inputs: anything `symdex keys` identifies (a binary also needs its companions: a PE's PDBs
//! from its CodeView records, an ELF's debug file, a Mach-O's dSYM), or a JSON list of modules
//! (`[{code_file, code_id, debug_file, debug_id, arch}]`, as crash pipelines carry them).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Serialize;
use symdex_shared::formats::Detail;
use symdex_shared::pipeline::default_prefixes;
use symdex_shared::refs::RefStore;
use symdex_shared::storage::Storage;
use symdex_shared::{keys_for, lookup_keys_for, Identity, Layout};

use crate::credentials::{redacted, split_userinfo, Credentialed};
use crate::deployment::StoreArg;
use crate::inputs::{expand_paths, identify_each, Outcome, Walked};

mod modules;
mod sources;
mod store_urls;

use modules::{listed_modules, module_identities};
use sources::{check_documents, wanted_documents, DocumentWanted};
use store_urls::StoreUrls;

#[derive(Args)]
pub struct CheckArgs {
    /// Binaries, debug files, directories, or JSON module lists (`.json`).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// A symbol server's base URL (symdex serve, CloudFront, any static host). User
    /// information in it (`https://user:token@host`) is sent as basic credentials and never
    /// printed; prefer --auth-token-file or --header.
    #[arg(long, required_unless_present = "store")]
    pub server: Option<String>,
    /// A file whose first line is a token, sent as `Authorization: Bearer <token>`.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// A token sent as `Authorization: Bearer <token>` (from the environment, not the
    /// command line, which other users of the machine can read).
    #[arg(
        long = "auth-token-env",
        hide = true,
        env = "SYMDEX_AUTH_TOKEN",
        hide_env_values = true
    )]
    pub auth_token: Option<String>,
    /// A header every request carries, `'Name: value'` (repeatable); never printed.
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = crate::credentials::parse_header)]
    pub headers: Vec<(String, String)>,
    /// A store directory or a deployment's serving bucket (`s3://BUCKET`): checked directly,
    /// or (with --server) only for who published each key and the size it should have.
    #[arg(long)]
    pub store: Option<StoreArg>,
    /// The store's public base URL, as `symdex sourcelink --url` was given it: a PDB's
    /// Source Link or srcsrv URL under `<URL>/src/` is the store's key `src/...` (default:
    /// --server; with neither, a URL whose path holds `/src/<product>/<build>/` is taken for
    /// the store's).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Which clients' requests to check (repeatable; default all).
    #[arg(long = "client", value_enum)]
    pub clients: Vec<Client>,
    /// JSON Lines output: one object per key checked.
    #[arg(long)]
    pub json: bool,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Seconds a request may take.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// How far an archive is expanded, as `index` takes it (an entry `index` would reject is
    /// not checked: an error, exit 2).
    #[command(flatten)]
    pub limits: crate::index::ArchiveLimits,
}

/// The clients symdex serves, each with the layout its requests follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Client {
    All,
    Windbg,
    DotnetSymbol,
    Gdb,
    Lldb,
    Debuginfod,
    SentryUnified,
    SentryNative,
    Breakpad,
    // Visual Studio and dotnet: a PDB's documents through its Source Link map (no doc
    // comment: clap would turn every value's help into the long form).
    Sourcelink,
    // WinDbg: a PDB's documents through its srcsrv stream.
    Srcsrv,
}

impl Client {
    const EACH: [Client; 10] = [
        Client::Windbg,
        Client::DotnetSymbol,
        Client::Gdb,
        Client::Lldb,
        Client::Debuginfod,
        Client::SentryUnified,
        Client::SentryNative,
        Client::Breakpad,
        Client::Sourcelink,
        Client::Srcsrv,
    ];

    fn name(self) -> &'static str {
        match self {
            Client::All => "all",
            Client::Windbg => "windbg",
            Client::DotnetSymbol => "dotnet-symbol",
            Client::Gdb => "gdb",
            Client::Lldb => "lldb",
            Client::Debuginfod => "debuginfod",
            Client::SentryUnified => "sentry-unified",
            Client::SentryNative => "sentry-native",
            Client::Breakpad => "breakpad",
            Client::Sourcelink => "sourcelink",
            Client::Srcsrv => "srcsrv",
        }
    }

    /// The layouts whose keys this client requests (gdb and lldb-19 ask debuginfod; Sentry's
    /// "native" source is the gdb layout for ELF, the lldb one for Mach-O; the source
    /// clients ask for documents, no layout's keys).
    fn layouts(self) -> &'static [Layout] {
        match self {
            Client::All | Client::Sourcelink | Client::Srcsrv => &[],
            Client::Windbg => &[Layout::Symstore],
            Client::DotnetSymbol => &[Layout::Ssqp],
            Client::Gdb | Client::Lldb | Client::Debuginfod => &[Layout::Debuginfod],
            Client::SentryUnified => &[Layout::Unified],
            Client::SentryNative => &[Layout::Gdb, Layout::Lldb],
            Client::Breakpad => &[Layout::Breakpad],
        }
    }
}

/// One key to check.
#[derive(Debug, Clone, Serialize)]
struct Wanted {
    input: String,
    module: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    debug_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code_id: Option<String>,
    client: &'static str,
    key: String,
    /// What the key is, where it is not the identity's own file (LLDB's DWARF package).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
}

/// What LLDB asks `buildid/<id>/debuginfo` for where a binary's skeleton units are in it.
const LLDB_DWP: &str = "LLDB's lookup of the binary's DWARF package (.dwp)";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Status {
    Found,
    Missing,
    Forbidden,
    WrongContent,
    Error,
}

#[derive(Debug, Serialize)]
struct Checked {
    #[serde(flatten)]
    wanted: Wanted,
    url: String,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// The upload whose bytes the store recorded at this key.
    #[serde(skip_serializing_if = "Option::is_none")]
    published_by: Option<String>,
    /// Where the server says the answer came from (`upstream` for `serve --upstream`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

/// The keys each selected client requests for one identity.
fn wanted_keys(input: &str, id: &Identity, name: &str, clients: &[Client], out: &mut Vec<Wanted>) {
    let prefixes = default_prefixes();
    for &client in clients {
        let layouts = client.layouts();
        if layouts.is_empty() {
            continue;
        }
        let mut keys: BTreeSet<String> = BTreeSet::new();
        for set in [
            keys_for(id, name, layouts),
            lookup_keys_for(id, name, layouts),
        ] {
            keys.extend(set.prefixed(&prefixes).map(|(_, key)| key));
        }
        let wanted = |key: String, note: Option<&'static str>| Wanted {
            input: input.to_string(),
            module: name.to_string(),
            debug_id: (!id.debug_id.is_nil()).then(|| id.debug_id.to_string()),
            code_id: id.code_id.as_ref().map(|c| c.as_str().to_string()),
            client: client.name(),
            key,
            note,
        };
        // Split DWARF: LLDB holding the binary asks `debuginfo` for its package, published
        // there once the two pair (shared pipeline/packages.rs); gdb, finding the skeletons,
        // asks no server for it.
        let split = split_dwarf_binary(id);
        let prefix = prefixes.get(&Layout::Debuginfod).map_or("", String::as_str);
        let dwp_key = split.map(|build_id| format!("{prefix}buildid/{build_id}/debuginfo"));
        if let (Some(key), Client::Lldb) = (&dwp_key, client) {
            keys.insert(key.clone());
        }
        for key in keys {
            let package = dwp_key.as_ref() == Some(&key);
            match client {
                Client::Lldb if package => out.push(wanted(key, Some(LLDB_DWP))),
                Client::Gdb if package => {}
                _ => out.push(wanted(key, None)),
            }
        }
        let Some(build_id) = split else {
            continue;
        };
        if client == Client::Gdb {
            say_err!(
                "symdex: {input}: split DWARF: gdb looks for the DWARF package only as \
                 {name}.dwp beside the binary (it asks no server for it); LLDB asks \
                 buildid/{build_id}/debuginfo"
            );
        }
    }
}

/// The build id of a binary whose skeleton units are in it (split DWARF): its package is
/// what LLDB asks `debuginfo` for.
fn split_dwarf_binary(id: &Identity) -> Option<&str> {
    let leaves = symdex_shared::layouts::debuginfod::leaves_debuginfo_to_package(id);
    id.build_id.as_deref().filter(|_| leaves)
}

/// What the inputs ask for: the keys, the documents, and whether an input failed.
type Asked = (Vec<Wanted>, Vec<DocumentWanted>, bool);

fn read_inputs(args: &CheckArgs, clients: &[Client], urls: &StoreUrls) -> anyhow::Result<Asked> {
    let mut wanted = Vec::new();
    let mut documents = Vec::new();
    let mut failed = false;
    for entry in expand_paths(&args.inputs) {
        let path = match entry {
            Walked::File(p) => p,
            Walked::Skipped(..) => continue,
            Walked::Error(p, e) => {
                say_err!("symdex: {}: {e}", p.display());
                failed = true;
                continue;
            }
        };
        let shown = path.display().to_string();
        // Inputs that list modules (by content; a JSON list by its name) ...
        let modules = listed_modules(&path);
        match modules {
            Some(Ok(modules)) => {
                for module in &modules {
                    for (id, name) in module_identities(module) {
                        wanted_keys(&shown, &id, &name, clients, &mut wanted);
                    }
                }
                continue;
            }
            Some(Err(e)) => {
                say_err!("symdex: {shown}: {e:#}");
                failed = true;
                continue;
            }
            // ... and the artifacts themselves.
            None => {}
        }
        // A package or archive: the artifacts it holds (its other files are no failure).
        let walked = identify_each(
            &path,
            |_| false,
            Detail::Sources,
            args.limits.into(),
            &mut |item| {
                match item.outcome {
                    Outcome::Identified(ids, _) => {
                        let file = (!item.in_archive).then_some(path.as_path());
                        for id in ids {
                            wanted_keys(&item.shown, &id, &item.name, clients, &mut wanted);
                            let (shown, name) = (&item.shown, &item.name);
                            wanted_documents(shown, &id, name, clients, file, urls, &mut documents);
                        }
                    }
                    Outcome::Skipped(_) => {}
                    // It may be an artifact: not checked is no pass.
                    Outcome::Rejected(reason) => {
                        say_err!("symdex: {}: not checked: {reason}", item.shown);
                        failed = true;
                    }
                    Outcome::Failed(e) if item.in_archive && !e.is_io() => {}
                    Outcome::Failed(e) => {
                        say_err!("symdex: {}: {e}", item.shown);
                        failed = true;
                    }
                }
                Ok(())
            },
        );
        if let Err(e) = walked {
            say_err!("symdex: {shown}: {e}");
            failed = true;
        }
    }
    // A binary and its debug file both name some keys (debuginfod's `debuginfo`): once each.
    let mut seen = BTreeSet::new();
    wanted.retain(|w| seen.insert((w.input.clone(), w.client, w.key.clone())));
    Ok((wanted, documents, failed))
}

/// What the store recorded at a key: its size and who first published it.
/// What the store recorded at each wanted key (its size, and the upload that first published
/// it), read once before the checks start. A record that cannot be read counts as none.
async fn recorded(store: &dyn Storage, wanted: &[Wanted]) -> Recorded {
    let refs = RefStore::new(store);
    let keys: BTreeSet<&str> = wanted.iter().map(|w| w.key.as_str()).collect();
    let mut out = HashMap::new();
    for key in keys {
        if let Ok(Some(record)) = refs.key(key).await {
            if !record.refs.is_empty() {
                out.insert(key.to_string(), (record.size, record.by));
            }
        }
    }
    out
}

/// Per key: the size the store recorded and the upload that first published it.
type Recorded = HashMap<String, (u64, String)>;
/// Per key: the size of the object a bucket holds there, if any.
type Objects = HashMap<String, Option<u64>>;

/// What a store holds at each wanted key, looked at once before the checks: a directory's
/// files are looked at as each key is checked; a bucket's objects by a HEAD each, here.
enum Held<'a> {
    Dir(&'a Path),
    Objects(String, Objects),
}

/// The records of the wanted keys (and, for a bucket checked without --server, what it holds
/// at each), read in one runtime: an S3 client's connections belong to the runtime that made
/// them.
fn look_up(
    store: &StoreArg,
    wanted: &[Wanted],
    with_server: bool,
) -> anyhow::Result<(Recorded, Option<Objects>)> {
    crate::block_on(async {
        let opened = store.open().await?;
        let records = recorded(&*opened, wanted).await;
        let objects = match store {
            StoreArg::S3(_) if !with_server => {
                let mut objects = HashMap::new();
                for w in wanted {
                    if !objects.contains_key(&w.key) {
                        let size = opened.head(&w.key).await.ok().flatten().map(|i| i.size);
                        objects.insert(w.key.clone(), size);
                    }
                }
                Some(objects)
            }
            _ => None,
        };
        anyhow::Ok((records, objects))
    })?
}

fn check_one(
    wanted: Wanted,
    server: Option<&(Credentialed, ureq::Agent)>,
    held: Option<&Held>,
    record: Option<&(u64, String)>,
) -> Checked {
    let published_by = record.map(|(_, by)| by.clone()).filter(|b| !b.is_empty());
    let mut source = None;
    let (url, status, size, detail) = match (server, held) {
        (Some((server, agent)), _) => {
            let url = format!(
                "{}/{}",
                server.base.trim_end_matches('/'),
                crate::serve::url_path(wanted.key.split('/'))
            );
            let mut request = agent.head(&url);
            for (name, value) in &server.headers {
                request = request.header(name, value);
            }
            match request.call() {
                Ok(response) => {
                    let code = response.status().as_u16();
                    // `serve --upstream` says which answers came from an upstream.
                    source = response
                        .headers()
                        .get(crate::serve::SOURCE_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let size = response
                        .headers()
                        .get("content-length")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    let status = match code {
                        200..=299 => Status::Found,
                        404 | 410 => Status::Missing,
                        401 | 403 => Status::Forbidden,
                        _ => Status::Error,
                    };
                    (url, status, size, Some(format!("HTTP {code}")))
                }
                Err(e) => (url, Status::Error, None, Some(redacted(&e.to_string()))),
            }
        }
        (None, Some(Held::Objects(bucket, objects))) => {
            let url = format!("s3://{bucket}/{}", wanted.key);
            match objects.get(&wanted.key).copied().flatten() {
                Some(size) => (url, Status::Found, Some(size), None),
                None => (url, Status::Missing, None, None),
            }
        }
        (None, Some(Held::Dir(root))) => {
            let path = root.join(&wanted.key);
            let url = path.display().to_string();
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => (url, Status::Found, Some(m.len()), None),
                _ => (url, Status::Missing, None, None),
            }
        }
        (None, None) => (String::new(), Status::Error, None, None),
    };
    let (status, detail) = match (status, size, record) {
        (Status::Found, Some(got), Some((want, _))) if got != *want => (
            Status::WrongContent,
            Some(format!("{got} bytes, the store recorded {want}")),
        ),
        _ => (status, detail),
    };
    Checked {
        wanted,
        url,
        status,
        detail,
        published_by,
        source,
    }
}

/// The server with every credential `args` give it: the URL's user information, a token (by
/// file or environment), headers given whole (the last word on a name).
fn credentialed(base: &str, args: &CheckArgs) -> anyhow::Result<Credentialed> {
    let mut server = split_userinfo(base);
    let token = match &args.auth_token_file {
        Some(file) => Some(crate::credentials::token_from_file(file)?),
        None => args.auth_token.clone().filter(|t| !t.is_empty()),
    };
    if let Some(token) = token {
        server
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
        server
            .headers
            .push(("Authorization".into(), format!("Bearer {token}")));
    }
    for (name, value) in &args.headers {
        server
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        server.headers.push((name.clone(), value.clone()));
    }
    Ok(server)
}

pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let clients: Vec<Client> = if args.clients.is_empty() || args.clients.contains(&Client::All) {
        Client::EACH.to_vec()
    } else {
        let mut c = args.clients.clone();
        c.sort();
        c.dedup();
        c
    };
    // Checked before any input is read: a directory given as the server would otherwise be
    // an "invalid format" error for every key.
    if let Some(base) = &args.server {
        let lower = base.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            anyhow::bail!(
                "--server {}: not an http:// or https:// URL (a store directory goes with --store)",
                redacted(base)
            );
        }
    }
    let server = match &args.server {
        Some(base) => Some(credentialed(base, args)?),
        None => None,
    };
    let urls = StoreUrls::new(args.public_url.as_deref().or(args.server.as_deref()))
        .map_err(|e| anyhow::anyhow!("--public-url: {e}"))?;
    let (wanted, documents, input_failed) = read_inputs(args, &clients, &urls)?;
    if urls.guessing() && !documents.is_empty() {
        say_err!(
            "symdex: source URLs whose path holds /src/<product>/<build>/ are taken for the \
             store's (--public-url names the store's URL)"
        );
    }
    let (records, objects) = match &args.store {
        Some(store) => look_up(store, &wanted, server.is_some())?,
        None => (HashMap::new(), None),
    };
    let server = server.map(|server| {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(args.timeout.max(1))))
            .http_status_as_error(false)
            .max_redirects(5)
            .build()
            .into();
        (server, agent)
    });
    let held = match (&args.store, objects) {
        (Some(StoreArg::Dir(dir)), _) => Some(Held::Dir(dir)),
        (Some(StoreArg::S3(url)), Some(objects)) => {
            Some(Held::Objects(url.bucket.clone(), objects))
        }
        _ => None,
    };
    let bar = if args.json || wanted.len() < 50 {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(wanted.len() as u64)
    };
    let queue = Mutex::new(wanted.into_iter().enumerate());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..args.concurrency.clamp(1, 64) {
            scope.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.next());
                let Some((index, item)) = next else { break };
                let record = records.get(&item.key);
                let checked = check_one(item, server.as_ref(), held.as_ref(), record);
                bar.inc(1);
                if let Ok(mut results) = results.lock() {
                    results.push((index, checked));
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(index, _)| *index);
    let counts = print_rows(&results, args.json)?;
    let [found, missing, forbidden, wrong, errors] = counts;
    say_err!(
        "symdex: {found} found, {missing} missing, {forbidden} forbidden, {wrong} wrong content, {errors} errors"
    );
    let documents = check_documents(
        documents,
        server.as_ref(),
        args.store.as_ref(),
        args.concurrency,
    )?;
    let (documents_failed, document_errors) = sources::report(&documents, args.json)?;
    Ok(if input_failed || errors + document_errors > 0 {
        ExitCode::from(2)
    } else if missing + forbidden + wrong + documents_failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints each key's row (JSON Lines with `json`); returns the count of each status.
fn print_rows(results: &[(usize, Checked)], json: bool) -> anyhow::Result<[usize; 5]> {
    let mut counts = [0usize; 5];
    for (_, checked) in results {
        counts[checked.status as usize] += 1;
        if json {
            say!("{}", serde_json::to_string(checked)?)?;
        } else {
            say!(
                "{:<13} {:<14} {:<24} {}{}{}{}",
                serde_json::to_value(checked.status)?.as_str().unwrap_or(""),
                checked.wanted.client,
                checked.wanted.module,
                checked.url,
                checked
                    .detail
                    .as_deref()
                    .filter(|_| checked.status != Status::Found)
                    .map(|d| format!("  ({d})"))
                    .unwrap_or_default(),
                checked
                    .published_by
                    .as_deref()
                    .map(|b| format!("  [published by {b}]"))
                    .unwrap_or_default(),
                checked
                    .source
                    .as_deref()
                    .map(|s| format!("  [from {s}]"))
                    .unwrap_or_default()
                    + &checked
                        .wanted
                        .note
                        .map(|n| format!("  [{n}]"))
                        .unwrap_or_default(),
            )?;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::modules::ModuleEntry;
    use super::{module_identities, wanted_keys, Client};
    use symdex_shared::formats::Format;

    #[test]
    fn listed_modules_stand_for_their_debug_files() {
        let pdb: ModuleEntry = serde_json::from_value(serde_json::json!({
            "code_file": "C:\\app\\app.exe", "code_id": "5F2B2D4A1000",
            "debug_file": "C:\\build\\App.pdb",
            "debug_id": "497b72f6-390a-44fc-878e-5a2d63b6cc4b-1", "arch": "x86_64"
        }))
        .unwrap();
        let ids = module_identities(&pdb);
        assert_eq!(ids[0].1, "App.pdb");
        assert_eq!(ids[0].0.format, Format::Pdb);
        assert_eq!(ids[1].1, "app.exe");
        let mut keys = Vec::new();
        wanted_keys("m.json", &ids[0].0, &ids[0].1, &[Client::Windbg], &mut keys);
        assert_eq!(
            keys[0].key,
            "symbols/App.pdb/497B72F6390A44FC878E5A2D63B6CC4B1/App.pdb"
        );
        let elf: ModuleEntry = serde_json::from_value(serde_json::json!({
            "code_file": "/usr/lib/libc.so.6", "code_id": "AABBCCDD00112233"
        }))
        .unwrap();
        let mut keys = Vec::new();
        for (id, name) in module_identities(&elf) {
            wanted_keys("m.json", &id, &name, &[Client::Debuginfod], &mut keys);
        }
        let keys: Vec<&str> = keys.iter().map(|w| w.key.as_str()).collect();
        assert!(
            keys.contains(&"buildid/aabbccdd00112233/debuginfo"),
            "{keys:?}"
        );
        assert!(
            keys.contains(&"buildid/aabbccdd00112233/executable"),
            "{keys:?}"
        );
        // A Mach-O module (code id = debug id = LC_UUID): the lldb layout's UUID directories.
        let macho: ModuleEntry = serde_json::from_value(serde_json::json!({
            "code_file": "/Applications/App.app/Contents/MacOS/App",
            "code_id": "c0bcc3f19827324bbfa6a0ea5d1c9b42",
            "debug_id": "c0bcc3f1-9827-324b-bfa6-a0ea5d1c9b42"
        }))
        .unwrap();
        let mut keys = Vec::new();
        for (id, name) in module_identities(&macho) {
            assert_eq!(id.format, Format::Macho);
            wanted_keys("m.json", &id, &name, &[Client::SentryNative], &mut keys);
        }
        let keys: Vec<&str> = keys.iter().map(|w| w.key.as_str()).collect();
        assert!(
            keys.contains(&"lldb/C0BC/C3F1/9827/324B/BFA6/A0EA5D1C9B42"),
            "{keys:?}"
        );
        let nothing: ModuleEntry = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(module_identities(&nothing).is_empty());
    }

    #[test]
    fn keys_become_url_paths() {
        assert_eq!(
            crate::serve::url_path("symbols/my app+1/ID/my app+1".split('/')),
            "symbols/my%20app%2B1/ID/my%20app%2B1"
        );
    }
}
