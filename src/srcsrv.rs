//! `symdex srcsrv`: a srcsrv stream for a linked PDB, written into it after the link
//! (`pdbstr`, `/pdbstream:srcsrv=`) for debuggers that read no Source Link: each document
//! under a build root is downloaded from `<url>/src/<product>/<build>/<path under the root>`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use symdex_shared::pdb_sources::Document;
use symdex_shared::sourcelink::{relative_to_roots, store_base, BuildRoot};
use symdex_shared::{FileReader, Format};

use crate::sourcelink::Served;

#[derive(Args)]
pub struct SrcsrvArgs {
    /// The linked PDB whose documents the stream lists.
    pub pdb: PathBuf,
    #[command(flatten)]
    pub served: Served,
}

pub fn run(args: &SrcsrvArgs) -> anyhow::Result<ExitCode> {
    let served = &args.served;
    let base =
        store_base(&served.url, &served.product, &served.build).map_err(anyhow::Error::msg)?;
    let reader =
        FileReader::open(&args.pdb).with_context(|| format!("opening {}", args.pdb.display()))?;
    let ids = symdex_shared::identify_with_details(&reader, &Default::default())
        .with_context(|| format!("reading {}", args.pdb.display()))?;
    let Some(pdb) = ids.into_iter().find(|id| id.format == Format::Pdb) else {
        anyhow::bail!(
            "{} is not a PDB (a srcsrv stream is written into MSF PDBs only)",
            args.pdb.display()
        );
    };
    let sources = pdb.pdb_sources.unwrap_or_default();
    if sources.documents.is_empty() {
        say_err!("symdex: {}: names no documents", args.pdb.display());
    }
    for reason in &sources.unread {
        say_err!("symdex: {}: not read: {reason}", args.pdb.display());
    }
    let (stream, left_out) = srcsrv_stream(&sources.documents, &served.roots, &base);
    for path in &left_out {
        say_err!("symdex: {path}: left out (under no --root, or holds `%` or `*`)");
    }
    let stdout = io::stdout();
    let mut out = crate::stdout::Marked(stdout.lock());
    out.write_all(stream.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A srcsrv stream (version 2) whose target is `<base>/%var2%`, one line for each document
/// under a root (`<its path>*<path below the root>`), and the documents left out: under no
/// root, or with a character srcsrv gives a meaning (`%` starts a variable, `*` separates
/// fields) or that ends a line.
pub fn srcsrv_stream(
    documents: &[Document],
    roots: &[BuildRoot],
    base: &str,
) -> (String, Vec<String>) {
    let mut lines = Vec::new();
    let mut left_out = Vec::new();
    for document in documents {
        let path = &document.path;
        let plain = |s: &str| !s.contains(['%', '*', '\r', '\n']);
        match relative_to_roots(roots, path).filter(|rel| plain(path) && plain(rel)) {
            Some(relative) => lines.push(format!("{path}*{relative}")),
            None => left_out.push(path.clone()),
        }
    }
    let mut stream = String::new();
    let mut line = |s: &str| {
        stream.push_str(s);
        stream.push_str("\r\n");
    };
    line("SRCSRV: ini ------------------------------------------------");
    line("VERSION=2");
    line("VERCTRL=http");
    line("SRCSRV: variables ------------------------------------------");
    line(&format!("SRCSRVTRG={base}/%var2%"));
    line("SRCSRV: source files ---------------------------------------");
    for entry in &lines {
        line(entry);
    }
    line("SRCSRV: end ------------------------------------------------");
    (stream, left_out)
}

#[cfg(test)]
mod tests {
    use super::srcsrv_stream;
    use symdex_shared::pdb_sources::Document;
    use symdex_shared::sourcelink::BuildRoot;

    #[test]
    fn documents_under_no_root_or_with_srcsrv_characters_are_left_out() {
        let doc = |p: &str| Document {
            path: p.into(),
            checksum: None,
            srcsrv_url: None,
        };
        let roots: Vec<BuildRoot> = vec![r"C:\b".parse().unwrap()];
        let (stream, left) = srcsrv_stream(
            &[
                doc(r"C:\b\x\a.cpp"),
                doc(r"C:\other\b.h"),
                doc(r"C:\b\100%.h"),
            ],
            &roots,
            "https://s/src/p/1",
        );
        assert!(stream.contains("SRCSRVTRG=https://s/src/p/1/%var2%\r\n"));
        assert!(stream.contains("C:\\b\\x\\a.cpp*x/a.cpp\r\n"));
        assert_eq!(left, [r"C:\other\b.h", r"C:\b\100%.h"]);
        assert!(
            stream.ends_with("SRCSRV: end ------------------------------------------------\r\n")
        );
    }
}
