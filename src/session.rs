//! The store session `index`, `delete` and the retention commands share: the store opened for
//! writing under its writer lock, with the leases of a sole writer.

use std::path::Path;

use anyhow::Context;
use symdex_shared::refs::LeasePolicy;
use symdex_shared::storage::LocalStore;

/// The CLI holds the store's writer lock for its whole run: every lease it meets that is not
/// its own was left by a process that died.
pub fn exclusive_lease() -> LeasePolicy {
    LeasePolicy {
        exclusive: true,
        ..LeasePolicy::default()
    }
}

/// Opens a store for writing: takes the writer lock (waiting for another `symdex index` or
/// `delete` on the same store, and saying so), removes what a killed run left in `tmp`, and
/// names owners in the objects it writes where the file system can (`LocalStore::
/// naming_owners_as_marked`: a key one upload alone references then needs no record).
pub fn open_for_writing(
    path: &Path,
) -> anyhow::Result<(
    crate::crash::Store,
    symdex_shared::storage::local::WriterLock,
)> {
    let store =
        LocalStore::open(path).with_context(|| format!("cannot open store {}", path.display()))?;
    let lock = store
        .lock_writer(|| {
            say_err!(
                "symdex: another symdex process is writing to {}; waiting for it to finish",
                path.display()
            )
        })
        .with_context(|| format!("cannot lock store {}", path.display()))?;
    let leftovers = store.clean_temp(&lock)?;
    if leftovers > 0 {
        say_err!("symdex: removed {leftovers} temporary files left by an interrupted run");
    }
    let store = store
        .naming_owners_as_marked(Some(&lock))
        .with_context(|| format!("cannot write to store {}", path.display()))?;
    Ok((crate::crash::store(store), lock))
}
