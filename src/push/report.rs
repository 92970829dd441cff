//! What a push prints (a table, or JSON Lines and a summary) and its exit status.

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use super::{Line, Status};
use crate::manifest_cmd::shown;

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
    let mut out = io::BufWriter::new(crate::stdout::Marked(stdout.lock()));
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for line in lines {
        *counts.entry(line.status.as_str()).or_default() += 1;
        if json {
            writeln!(out, "{}", serde_json::to_string(line)?)?;
            continue;
        }
        writeln!(out, "{}", table_row(line))?;
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

/// One input's row of the table: file names, keys and reasons are the uploader's (a name
/// may hold terminal escapes), shown escaped as the manifest's table shows them.
fn table_row(line: &Line) -> String {
    let mut detail = match (&line.reason, line.keys.len()) {
        (Some(reason), _) => reason.clone(),
        (None, 0) => line.ingest_key.clone().unwrap_or_default(),
        (None, n) => format!("{n} keys"),
    };
    if let Some(first) = line.source_for.first() {
        let more = match line.source_for.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        detail.push_str(&format!("; sent as the source of {first}{more}"));
    }
    format!(
        "{:<18} {}  {}",
        line.status.as_str(),
        shown(&line.path),
        shown(&detail)
    )
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

#[cfg(test)]
mod tests {
    use super::table_row;
    use crate::push::{Line, Status};

    #[test]
    fn names_reach_the_terminal_escaped_and_named_sources_say_so() {
        let line = Line {
            path: "out/\u{1b}[31mred\u{202e}.c".into(),
            status: Status::Uploaded,
            ingest_key: Some("app/b1/\u{1b}[31mred\u{202e}.c".into()),
            source_for: vec!["/ci/a.c".into(), "/ci/b.c".into()],
            sent: true,
            keys: Vec::new(),
            reason: None,
            held_by_products: Vec::new(),
            held_by: Vec::new(),
        };
        let row = table_row(&line);
        assert!(
            !row.contains('\u{1b}') && !row.contains('\u{202e}'),
            "{row}"
        );
        assert!(row.contains("out/\\x1b[31mred\\u{202e}.c"), "{row}");
        assert!(row.contains("app/b1/\\x1b[31mred"), "{row}");
        assert!(
            row.ends_with("; sent as the source of /ci/a.c and 1 more"),
            "{row}"
        );
    }
}
