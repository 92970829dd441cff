//! Reads shared by everyone asking for the same name while one is in flight
//! ([`SharedReads`]): an upload's listing, the upload an owner names.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

/// Reads shared by everyone asking for the same name while one is in flight (and after,
/// where the answer is kept): one cell per name ([`SharedReads::read`]).
pub(super) struct SharedReads<T>(Mutex<HashMap<String, Arc<tokio::sync::OnceCell<T>>>>);

impl<T> Default for SharedReads<T> {
    fn default() -> Self {
        SharedReads(Mutex::default())
    }
}

/// Names a [`SharedReads`] keeps at most: a few per upload a run meets.
const SHARED_READS: usize = 1024;

impl<T: Clone> SharedReads<T> {
    /// `read` of `name`, made once for everyone asking while it is in flight; its answer stays
    /// for later askers only where `keep` says so (else, like a failed read, the next asker
    /// reads afresh). Also says whether this caller's `read` made the answer.
    pub(super) async fn read<Fut>(
        &self,
        name: &str,
        read: impl FnOnce() -> Fut,
        keep: impl Fn(&T) -> bool,
    ) -> io::Result<(T, bool)>
    where
        Fut: std::future::Future<Output = io::Result<T>>,
    {
        let cell = match self.0.lock() {
            Ok(mut cells) => {
                if cells.len() >= SHARED_READS && !cells.contains_key(name) {
                    cells.clear();
                }
                Arc::clone(cells.entry(name.to_string()).or_default())
            }
            Err(_) => Arc::default(),
        };
        let mut ours = false;
        let answer = cell
            .get_or_try_init(|| {
                ours = true;
                read()
            })
            .await
            .cloned();
        if !answer.as_ref().is_ok_and(&keep) {
            if let Ok(mut cells) = self.0.lock() {
                if cells.get(name).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                    cells.remove(name);
                }
            }
        }
        Ok((answer?, ours))
    }
}
