//! Lines on standard output and standard error that end in an error, or in nothing, not a
//! panic, when the reader has gone (`symdex keys --json DIR | head -1`, `2>&1 | head`):
//! `println!` and `eprintln!` panic there.
//!
//! A read-only command stops at the first line nobody reads: the error goes up to `main`,
//! which ends the run quietly with the status a process killed by SIGPIPE shows in a shell
//! ([`READER_GONE_STATUS`]), never a success it did not reach (`check`'s and `verify`'s
//! verdicts are printed as they are found). A command that changes the store prints as it
//! goes and must not stop half way for it (its records are in the manifest whoever reads its
//! output): it drops the lines ([`reader_gone`]), finishes its work and exits with its own
//! status. Lines to standard error are dropped when it fails ([`err_line`]): nobody is left
//! to tell.

use std::fmt::{self, Arguments};
use std::io::{self, Write};

/// 128 + SIGPIPE: what a shell reports of a process its pipe's reader ended.
pub const READER_GONE_STATUS: u8 = 141;

/// The mark an error from a write to standard output carries when its reader has gone, so
/// that `main` tells it from a broken pipe anywhere else (a socket, a child process).
#[derive(Debug)]
struct ReaderGone;

impl fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output's reader has gone")
    }
}

impl std::error::Error for ReaderGone {}

/// An error of a write to standard output, marked where it says the reader has gone.
pub fn gone(err: io::Error) -> io::Error {
    if err.kind() == io::ErrorKind::BrokenPipe {
        io::Error::new(io::ErrorKind::BrokenPipe, ReaderGone)
    } else {
        err
    }
}

/// A writer of standard output (locked, or buffered over it) whose errors are marked as
/// [`gone`] marks them: for commands that write their rows themselves.
pub struct Marked<W>(pub W);

impl<W: Write> Write for Marked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(gone)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(gone)
    }
}

/// Writes `line` and a line feed to standard output.
pub fn line(line: Arguments<'_>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(gone)
}

/// Writes `line` and a line feed to standard error; a failure is dropped.
pub fn err_line(line: Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(line).and_then(|()| err.write_all(b"\n"));
}

/// For `.or_else` after a write to standard output: a reader gone is no error (the line is
/// dropped); any other error stands (a full disk under a redirect loses lines, and says so).
pub fn reader_gone(err: io::Error) -> io::Result<()> {
    if err.kind() == io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(err)
    }
}

/// Whether `err` came from a write to standard output whose reader has gone ([`gone`]).
pub fn is_reader_gone(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(now) = cause {
        let marked = now
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|inner| inner.is::<ReaderGone>());
        if marked || now.is::<ReaderGone>() {
            return true;
        }
        cause = now.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::{gone, is_reader_gone};

    #[test]
    fn only_a_marked_broken_pipe_is_a_reader_gone() {
        let marked = anyhow::Error::from(gone(io::Error::from(io::ErrorKind::BrokenPipe)))
            .context("writing a row");
        assert!(is_reader_gone(marked.as_ref()));
        // A broken pipe of a socket or a child process is an error like any other.
        let socket = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(!is_reader_gone(socket.as_ref()));
        let other = anyhow::Error::from(gone(io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!is_reader_gone(other.as_ref()));
    }
}
