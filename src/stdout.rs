//! Lines on standard output that end in an error, not a panic, when the reader has gone
//! (`symdex keys --json DIR | head -1`): `println!` panics there.
//!
//! A read-only command stops at the first line nobody reads: the error goes up to `main`,
//! which ends the run quietly ([`is_reader_gone`]). A command that changes the store prints
//! as it goes and must not stop half way for it (its records are in the manifest whoever
//! reads its output): it drops the lines ([`reader_gone`]) and finishes its work.

use std::fmt::Arguments;
use std::io::{self, Write};

/// Writes `line` and a line feed to standard output.
pub fn line(line: Arguments<'_>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(line)?;
    out.write_all(b"\n")
}

/// For `.or_else`: a reader gone is no error (the line is dropped); any other error stands
/// (a full disk under a redirect loses lines, and says so).
pub fn reader_gone(err: io::Error) -> io::Result<()> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(err)
    }
}

/// Whether `err` ends a run because standard output's reader went away: not worth a message
/// or a failing status (`| head` took what it wanted).
pub fn is_reader_gone(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
