//! Keys published at once, taken in turn ([`InTurn`]).

#[cfg(doc)]
use super::RefStore;

/// One key's turn among keys published at once ([`RefStore::publish_in_turn`]): it waits
/// for the key before it to decide, and tells the key after it when it has (or when it is
/// dropped: a key that failed keeps nobody waiting).
pub(crate) struct InTurn {
    pub(super) after: Option<tokio::sync::oneshot::Receiver<()>>,
    // Dropping the sender is the signal.
    pub(super) _tells: tokio::sync::oneshot::Sender<()>,
}

impl InTurn {
    /// Turns for `n` keys, in order.
    pub(crate) fn chain(n: usize) -> Vec<InTurn> {
        let mut turns = Vec::with_capacity(n);
        let mut after = None;
        for _ in 0..n {
            let (tells, next) = tokio::sync::oneshot::channel();
            turns.push(InTurn {
                after: after.replace(next),
                _tells: tells,
            });
        }
        turns
    }

    pub(super) async fn wait(&mut self) {
        if let Some(after) = self.after.take() {
            // Told or dropped: either way the key before has decided (or failed).
            let _ = after.await;
        }
    }
}
