//! Microsoft cabinets: what `symstore /compress` and `makecab` write (`foo.pd_`, `foo.dl_`),
//! MSZIP, LZX or uncompressed folders, read with the `cab` crate.
//!
//! The crate (0.6, the only maintained cabinet reader) trusts the offsets and sizes a
//! cabinet claims where it seeks inside a folder and slices a block: a cabinet whose file
//! lies past its folder's data blocks, or whose uncompressed block is shorter than it says,
//! panics it (index out of bounds). Each call into it is therefore made under
//! [`catch_unwind`](std::panic::catch_unwind), and a panic is the cabinet's fault, told as
//! such: the whole cabinet malformed while its directory is read, else that entry rejected.
//! (Found by `archive::robustness`; writing a cabinet reader instead is not worth it for one
//! container.) Such a panic is not printed: the entry's record says what it said.

use std::io::{self, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ::cab::Cabinet;

use super::{sequential, ExpandError, Walk, WatchedReader};
use crate::panic_message;

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let bad = |e: io::Error| reader.classify("bad cabinet", e);
    let mut cabinet = unpanicking(|| Cabinet::new(sequential(reader))).map_err(bad)?;
    let files: Vec<(String, u64)> = cabinet
        .folder_entries()
        .flat_map(|folder| folder.file_entries())
        .map(|file| (file.name().to_string(), u64::from(file.uncompressed_size())))
        .collect();
    for (name, size) in files {
        if !walk.admit(&name)? {
            break;
        }
        if let Some(reason) = walk.over_limits(size, None) {
            walk.reject(&name, reason)?;
            continue;
        }
        let file = match unpanicking(|| cabinet.read_file(&name)) {
            Ok(file) => file,
            Err(e) => {
                walk.reject(&name, format!("unreadable cabinet entry: {e}"))?;
                continue;
            }
        };
        walk.entry(&name, &mut Unpanicking(file), None)?;
    }
    Ok(())
}

thread_local! {
    /// Set while this thread calls into the `cab` crate: a panic there is the cabinet's fault,
    /// reported as such, and not printed by the panic hook (with a backtrace, it read as
    /// symdex crashing).
    static IN_CAB_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `call`'s result, or its panic as an invalid-data error.
fn unpanicking<T>(call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_CAB_CALL.with(|c| c.get()) {
                hook(info);
            }
        }));
    });
    let was = IN_CAB_CALL.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(call));
    IN_CAB_CALL.with(|c| c.set(was));
    result.unwrap_or_else(|panic| {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the cabinet's offsets or sizes do not hold ({})",
                panic_message(&*panic)
            ),
        ))
    })
}

/// A reader of an entry whose reads are [`unpanicking`]: after a panic the entry's reader is
/// not read again (the entry is rejected), so its state no longer matters.
struct Unpanicking<R>(R);

impl<R: Read> Read for Unpanicking<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        unpanicking(|| self.0.read(buf))
    }
}
