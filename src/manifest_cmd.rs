//! `symdex manifest query`: the audit questions, answered from the manifest of a store.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use symdex_shared::manifest::latest::for_each_latest;
use symdex_shared::manifest::{for_each_record, Action, Query, Record};
use symdex_shared::missing_sources::MissingSources;
use symdex_shared::refs::RefStore;
use symdex_shared::storage::Storage;

use crate::deployment::StoreArg;

#[derive(Subcommand)]
pub enum ManifestCommand {
    /// Print manifest records matching every filter given.
    Query(QueryArgs),
}

#[derive(Args)]
pub struct QueryArgs {
    /// The store directory, or a deployment's serving bucket (`s3://BUCKET`: its manifest
    /// objects, gzip included, read as they are listed; the standard AWS environment).
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: StoreArg,
    #[arg(long)]
    pub debug_id: Option<String>,
    #[arg(long)]
    pub code_id: Option<String>,
    /// File name, code file or debug file (case-insensitive).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub build: Option<String>,
    #[arg(long)]
    pub action: Option<Action>,
    /// RFC 3339 time or YYYY-MM-DD.
    #[arg(long)]
    pub since: Option<String>,
    /// Records naming this key (who published it, who found it, who removed it: its
    /// history, as `--history` gives); the table also says which uploads reference it now.
    #[arg(long)]
    pub key: Option<String>,
    /// Only records that met a key holding other content.
    #[arg(long)]
    pub conflicts: bool,
    /// Retention channel.
    #[arg(long)]
    pub channel: Option<String>,
    /// Every record, in the order written: each decision of each upload, and the `repeated`
    /// records counting the uploads runs saw again. Without it (and without `--key`), each
    /// upload's latest decision (the records of its last run): what the store holds now.
    #[arg(long)]
    pub history: bool,
    /// The source files debug files name that the store does not serve now (no source upload
    /// matched them, or its upload was removed since), one line per path; the other filters
    /// select the debug files.
    #[arg(long)]
    pub missing_sources: bool,
    /// Output: a table, JSON Lines (the records as stored) or CSV.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The manifest prefix inside the store.
    #[arg(long, default_value = "_manifest")]
    pub prefix: String,
    /// Same as `--format json`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// One CSV field (RFC 4180: quoted when it holds a comma, quote or line break). A field a
/// spreadsheet would take for a formula (starting with `=`, `+`, `-`, `@`, a tab or a
/// carriage return: names and build metadata are the uploader's) is prefixed with `'`, as
/// OWASP advises. A few lines do not need the csv crate.
fn csv_field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        std::borrow::Cow::Owned(format!("'{value}"))
    } else {
        std::borrow::Cow::Borrowed(value)
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.into_owned()
    }
}

/// Text the uploader chose (entry names, keys, build metadata, reasons quoting them), fit for
/// a terminal: control characters (ESC, BEL, CR... which could retitle or clear a terminal)
/// and the invisible or bidirectional formatting characters that reorder what is shown are
/// written as visible escapes (`\x1b`, `\u{202e}`), never raw. JSON output stays exact.
/// `push` prints its file names and reasons through it too.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

const CSV_HEADER: &str =
    "time,action,upload,build,product,version,channel,expires,format,arch,debug_id,code_id,name,keys,reason";

fn csv_row(r: &Record) -> String {
    let keys = r.published.len() + r.unchanged.len() + r.removed.len();
    let keys = keys.to_string();
    let o = |v: &Option<String>| v.clone().unwrap_or_default();
    [
        r.time.clone(),
        r.action.map_or("", |a| a.as_str()).to_string(),
        r.upload.clone(),
        o(&r.meta.build),
        o(&r.meta.product),
        o(&r.meta.version),
        o(&r.meta.channel),
        o(&r.meta.expires),
        r.format.map_or("", |f| f.as_str()).to_string(),
        r.arch.map_or("", |a| a.as_str()).to_string(),
        r.debug_id.map(|id| id.to_string()).unwrap_or_default(),
        r.code_id.as_ref().map_or("", |id| id.as_str()).to_string(),
        r.name.clone().unwrap_or_else(|| r.ingest_key.clone()),
        keys,
        o(&r.reason),
    ]
    .iter()
    .map(|f| csv_field(f))
    .collect::<Vec<_>>()
    .join(",")
}

fn table_row(r: &Record) -> String {
    let keys = r.published.len() + r.unchanged.len() + r.removed.len();
    format!(
        "{:<20} {:<11} {:<14} {:<11} {:<8} {:<44} {:>5} {}{}",
        shown(&r.time),
        r.action.map_or("-", |a| a.as_str()),
        shown(r.meta.build.as_deref().unwrap_or("-")),
        r.format.map_or("-", |f| f.as_str()),
        r.arch.map_or("-", |a| a.as_str()),
        r.debug_id
            .map_or_else(|| "-".to_string(), |id| id.to_string()),
        keys,
        shown(r.name.as_deref().unwrap_or(&r.ingest_key)),
        r.reason
            .as_deref()
            .map(|s| format!("  ({})", shown(s)))
            .or_else(|| r.repeated.map(|c| format!(
                "  ({} unchanged, {} conflicts seen again)",
                c.unchanged, c.conflict
            )))
            .unwrap_or_default(),
    )
}

pub fn run(cmd: &ManifestCommand) -> anyhow::Result<ExitCode> {
    let ManifestCommand::Query(args) = cmd;
    // One runtime for the whole query: an S3 client's connections belong to the runtime
    // that made them.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(query(args))
}

async fn query(args: &QueryArgs) -> anyhow::Result<ExitCode> {
    let store = args.store.open().await?;
    let store: &dyn Storage = &*store;
    let query = Query {
        debug_id: args.debug_id.clone(),
        code_id: args.code_id.clone(),
        name: args.name.clone(),
        build: args.build.clone(),
        action: args.action,
        since: args.since.clone(),
        key: args.key.clone(),
        conflicts: args.conflicts,
        channel: args.channel.clone(),
    };
    let format = if args.json { Format::Json } else { args.format };
    if args.missing_sources {
        return missing_sources(store, args, &query, format).await;
    }
    match format {
        Format::Csv => say!("{CSV_HEADER}")?,
        Format::Table => say!(
            "{:<20} {:<11} {:<14} {:<11} {:<8} {:<44} {:>5} NAME",
            "TIME",
            "ACTION",
            "BUILD",
            "FORMAT",
            "ARCH",
            "DEBUG_ID",
            "KEYS"
        )?,
        Format::Json => {}
    }
    // Streamed: records are printed as they are read, one manifest object in memory at a time.
    let mut matched = 0usize;
    let print = |r: Record| -> std::io::Result<()> {
        if !query.matches(&r) {
            return Ok(());
        }
        matched += 1;
        match format {
            Format::Json => say!("{}", serde_json::to_string(&r)?)?,
            Format::Csv => say!("{}", csv_row(&r))?,
            Format::Table => say!("{}", table_row(&r))?,
        }
        Ok(())
    };
    let since = args.since.as_deref();
    // `repeated` records are no upload's decision: asked for, they are history. A key's
    // records are its story: who published it, met it, removed it.
    if args.history || args.key.is_some() || args.action == Some(Action::Repeated) {
        for_each_record(store, &args.prefix, since, print).await?;
    } else {
        for_each_latest(store, &args.prefix, since, print).await?;
    }
    if format != Format::Table {
        return Ok(ExitCode::SUCCESS);
    }
    say!("{matched} records")?;
    if let Some(key) = &args.key {
        let key = key.trim_start_matches('/');
        let now = RefStore::new(store).key(key).await?;
        match now {
            Some(k) if !k.refs.is_empty() => {
                let (key, count) = (shown(key), k.refs.len());
                say!("{key}: published, referenced by {count} uploads:")?;
                for upload in &k.refs {
                    say!("  {}", shown(upload))?;
                }
            }
            _ => say!("{}: not published now", shown(key))?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--missing-sources`: the manifest replayed in order (`MissingSources`): what the debug
/// files the filters select want and the store does not serve now.
async fn missing_sources(
    store: &dyn Storage,
    args: &QueryArgs,
    query: &Query,
    format: Format,
) -> anyhow::Result<ExitCode> {
    let mut replay: MissingSources<Record> = MissingSources::default();
    let see = |r: Record| -> std::io::Result<()> {
        replay.see(&r, |r| query.matches(r).then(|| r.clone()));
        Ok(())
    };
    for_each_record(store, &args.prefix, args.since.as_deref(), see).await?;
    if format == Format::Csv {
        say!("build_id,name,upload,path")?;
    } else if format == Format::Table {
        say!("{:<42} {:<24} PATH", "BUILD_ID", "NAME")?;
    }
    let mut count = 0usize;
    for (want, key, path) in replay.missing() {
        let r = &want.about;
        let name = r.name.as_deref().unwrap_or(&r.ingest_key);
        let build_id = want.build_id.as_str();
        count += 1;
        match format {
            Format::Json => say!(
                "{}",
                serde_json::json!({
                    "build_id": build_id,
                    "name": name,
                    "upload": r.upload,
                    "build": r.meta.build,
                    "path": path,
                    "key": key,
                })
            )?,
            Format::Csv => say!(
                "{},{},{},{}",
                csv_field(build_id),
                csv_field(name),
                csv_field(&r.upload),
                csv_field(path)
            )?,
            Format::Table => say!(
                "{:<42} {:<24} {}",
                shown(build_id),
                shown(name),
                shown(path)
            )?,
        }
    }
    if format == Format::Table {
        say!("{count} source files missing")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{csv_field, csv_row, shown, Record, CSV_HEADER};

    #[test]
    fn uploader_text_reaches_terminals_escaped_and_spreadsheets_as_text() {
        assert_eq!(shown("plain name.pdb"), "plain name.pdb");
        assert_eq!(
            shown("evil\x1b]0;PWNED\x07\x1b[2J\r.sym"),
            "evil\\x1b]0;PWNED\\x07\\x1b[2J\\r.sym"
        );
        assert_eq!(shown("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\u{9b}c");
        for formula in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx"] {
            assert_eq!(csv_field(formula), format!("'{formula}"));
        }
        assert_eq!(csv_field("=a,b"), "\"'=a,b\"");
        assert_eq!(csv_field("a=b"), "a=b");
    }

    #[test]
    fn csv_fields_are_quoted_when_they_must_be() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        let header_fields = CSV_HEADER.split(',').count();
        let row = csv_row(&Record {
            reason: Some("a, b".into()),
            ..Record::default()
        });
        assert!(row.ends_with(",\"a, b\""), "{row}");
        assert_eq!(
            row.matches(',').count(),
            header_fields,
            "one comma is inside quotes"
        );
    }
}
