//! What a push prints (a table, or JSON Lines and a summary) and its exit status.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use super::{Line, Status};

/// A progress bar on a terminal (stderr), hidden otherwise.
pub fn progress(len: u64, what: &'static str, show: bool) -> indicatif::ProgressBar {
    if !show || !io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len}") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

pub fn print(lines: &[Line], json: bool) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for line in lines {
        *counts.entry(line.status.as_str()).or_default() += 1;
        if json {
            writeln!(out, "{}", serde_json::to_string(line)?)?;
            continue;
        }
        let detail = match (&line.reason, line.keys.len()) {
            (Some(reason), _) => reason.clone(),
            (None, 0) => line.ingest_key.clone().unwrap_or_default(),
            (None, n) => format!("{n} keys"),
        };
        writeln!(out, "{:<18} {}  {detail}", line.status.as_str(), line.path)?;
    }
    let code = exit_status(lines);
    if json {
        let summary = serde_json::json!({ "summary": counts, "inputs": lines.len(), "exit": code });
        writeln!(out, "{summary}")?;
    } else {
        let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        writeln!(
            out,
            "symdex push: {} inputs: {}",
            lines.len(),
            parts.join(", ")
        )?;
    }
    out.flush()
}

/// 2: something could not be read or sent; 1: rejected, in conflict or timed out; else 0.
fn exit_status(lines: &[Line]) -> u8 {
    if lines.iter().any(|l| l.status == Status::Failed) {
        2
    } else if lines.iter().any(|l| {
        matches!(
            l.status,
            Status::Rejected | Status::Conflict | Status::Timeout
        )
    }) {
        1
    } else {
        0
    }
}

pub fn exit_code(lines: &[Line]) -> ExitCode {
    ExitCode::from(exit_status(lines))
}
