//! `symdex report misses`: the keys debuggers asked for and did not get, most requested first,
//! mapped back to what to re-upload (layout, file name, id). Reads `symdex serve
//! --access-log` files (JSON Lines) and CloudFront standard access logs (tab-separated W3C,
//! `#Fields:` header; `.gz` files too).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;

#[derive(Subcommand)]
pub enum ReportCommand {
    /// The most requested missing keys per layout, from access logs.
    Misses(MissesArgs),
}

#[derive(Args)]
pub struct MissesArgs {
    /// Access logs: `symdex serve --access-log` files or CloudFront standard logs.
    #[arg(required = true)]
    pub logs: Vec<PathBuf>,
    /// How many keys to list.
    #[arg(long, default_value_t = 50)]
    pub top: usize,
    /// JSON Lines output.
    #[arg(long)]
    pub json: bool,
}

/// What a missing key asked for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Wanted {
    /// `symbols` (SSQP, SymStore, Breakpad share it), `index2`, `debuginfod`, `unified`,
    /// `gdb`, `lldb`, or `other`.
    pub layout: &'static str,
    pub name: Option<String>,
    pub id: Option<String>,
    pub key: String,
}

/// Maps a requested key (under symdex's default prefixes) back to a file name and an id.
pub fn classify(path: &str) -> Wanted {
    let key = path.split('?').next().unwrap_or("").trim_start_matches('/');
    let key = percent_encoding::percent_decode_str(key)
        .decode_utf8_lossy()
        .into_owned();
    let parts: Vec<&str> = key.split('/').collect();
    let (layout, name, id) = match parts.as_slice() {
        ["buildid", id, what, ..] => ("debuginfod", Some(what.to_string()), Some(id.to_string())),
        ["symbols", name, id, _] => ("symbols", Some(name.to_string()), Some(id.to_string())),
        ["index2", _, name, id, _] => ("index2", Some(name.to_string()), Some(id.to_string())),
        ["unified", head, rest, kind] => (
            "unified",
            Some(kind.to_string()),
            Some(format!("{head}{rest}")),
        ),
        ["gdb", head, rest] => (
            "gdb",
            None,
            Some(format!("{head}{}", rest.trim_end_matches(".debug"))),
        ),
        ["lldb", a, b, c, d, e, f] => (
            "lldb",
            None,
            Some(format!("{a}{b}{c}{d}{e}{}", f.trim_end_matches(".app"))),
        ),
        _ => ("other", None, None),
    };
    Wanted {
        layout,
        name,
        id,
        key,
    }
}

/// One request of a log: (method, path, status).
type Request = (String, String, u16);

/// Requests of a JSON access log line (`symdex serve --access-log`).
fn from_json(line: &str) -> Option<Request> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    Some((
        v["method"].as_str()?.to_string(),
        v["path"].as_str()?.to_string(),
        u16::try_from(v["status"].as_u64()?).ok()?,
    ))
}

/// Requests of a CloudFront standard log: fields named by its `#Fields:` line.
fn from_cloudfront(text: &str) -> Vec<Request> {
    let mut fields: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(names) = line.strip_prefix("#Fields:") {
            fields = names.split_whitespace().collect();
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let values: Vec<&str> = line.split('\t').collect();
        let get = |name: &str| {
            fields
                .iter()
                .position(|f| *f == name)
                .and_then(|i| values.get(i).copied())
        };
        if let (Some(method), Some(path), Some(status)) =
            (get("cs-method"), get("cs-uri-stem"), get("sc-status"))
        {
            if let Ok(status) = status.parse() {
                out.push((method.to_string(), path.to_string(), status));
            }
        }
    }
    out
}

fn requests(path: &PathBuf) -> anyhow::Result<Vec<Request>> {
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_string(&mut text)
            .with_context(|| format!("{}: bad gzip", path.display()))?;
        text
    } else {
        String::from_utf8_lossy(&raw).into_owned()
    };
    if text.starts_with("#Version") || text.starts_with("#Fields") {
        return Ok(from_cloudfront(&text));
    }
    Ok(text.lines().filter_map(from_json).collect())
}

pub fn run(cmd: &ReportCommand) -> anyhow::Result<ExitCode> {
    let ReportCommand::Misses(args) = cmd;
    let mut counts: BTreeMap<Wanted, u64> = BTreeMap::new();
    let mut total = 0u64;
    for log in &args.logs {
        for (method, path, status) in requests(log)? {
            total += 1;
            if status == 404 && (method == "GET" || method == "HEAD") {
                *counts.entry(classify(&path)).or_default() += 1;
            }
        }
    }
    let mut ranked: Vec<(Wanted, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let misses: u64 = ranked.iter().map(|(_, n)| n).sum();
    ranked.truncate(args.top);
    if args.json {
        for (wanted, requests) in &ranked {
            let mut v = serde_json::to_value(wanted)?;
            v["requests"] = (*requests).into();
            say!("{v}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    say!(
        "{:>8} {:<11} {:<40} {:<45} KEY",
        "REQUESTS",
        "LAYOUT",
        "NAME",
        "ID"
    )?;
    for (w, n) in &ranked {
        say!(
            "{n:>8} {:<11} {:<40} {:<45} {}",
            w.layout,
            w.name.as_deref().unwrap_or("-"),
            w.id.as_deref().unwrap_or("-"),
            w.key
        )?;
    }
    say!("{misses} of {total} requests missed")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{classify, from_cloudfront};

    #[test]
    fn keys_map_back_to_names_and_ids() {
        let w = classify("/buildid/0123abcd/debuginfo");
        assert_eq!(
            (w.layout, w.id.as_deref()),
            ("debuginfod", Some("0123abcd"))
        );
        let w = classify("/symbols/Foo%20Bar.pdb/ABC1/Foo%20Bar.pdb");
        assert_eq!(w.layout, "symbols");
        assert_eq!(w.name.as_deref(), Some("Foo Bar.pdb"));
        assert_eq!(w.id.as_deref(), Some("ABC1"));
        let w = classify("/unified/01/23abcd/debuginfo");
        assert_eq!(w.id.as_deref(), Some("0123abcd"));
        let w = classify("/gdb/01/23abcd.debug");
        assert_eq!((w.layout, w.id.as_deref()), ("gdb", Some("0123abcd")));
        assert_eq!(classify("/favicon.ico").layout, "other");
    }

    #[test]
    fn cloudfront_standard_logs() {
        let log = "#Version: 1.0\n#Fields: date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status\n2026-11-23\t10:00:00\tFRA56-C1\t300\t203.0.113.9\tGET\td1.cloudfront.net\t/buildid/ab/debuginfo\t404\n2026-11-23\t10:00:01\tFRA56-C1\t300\t203.0.113.9\tGET\td1.cloudfront.net\t/buildid/cd/debuginfo\t200\n";
        assert_eq!(
            from_cloudfront(log),
            [
                ("GET".to_string(), "/buildid/ab/debuginfo".to_string(), 404),
                ("GET".to_string(), "/buildid/cd/debuginfo".to_string(), 200)
            ]
        );
    }
}
