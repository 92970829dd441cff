//! A request's part in a key's download: it leads it, or waits for the one in flight.

use tokio::sync::watch;

use super::leading::Leading;

pub enum Turn {
    Lead(Leading),
    Wait(watch::Receiver<()>),
}
