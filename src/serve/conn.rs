//! `serve`'s connections, bounded: a client must keep taking what it asked for (a write that
//! waits on it for the progress timeout ends the connection), and may hold at most so many
//! connections from one address.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose writes must make progress: a write or flush still waiting on the client
/// after `stall` fails (`TimedOut`), which ends the connection and frees its place and its
/// buffers. A client that sends a request and never reads holds nothing for longer.
pub struct Progressing<S> {
    inner: S,
    stall: Duration,
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Progressing<S> {
    pub fn new(inner: S, stall: Duration) -> Self {
        Progressing {
            inner,
            stall,
            waiting: None,
        }
    }

    /// What a write that is waiting on the client comes to: still waiting, or timed out.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stall = self.stall;
        let waiting = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        match waiting.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no bytes for the progress timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(
        &mut self,
        done: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match done {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.waiting = None;
                ready
            }
        }
    }
}

use std::future::Future;

impl<S: AsyncRead + Unpin> AsyncRead for Progressing<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Progressing<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(done, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let done = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(done, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(done, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Connections open per client address, for `--max-connections-per-ip`.
#[derive(Clone, Default)]
pub struct PerAddress {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection counted for its address until it is dropped.
pub struct Counted {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    address: IpAddr,
}

impl PerAddress {
    /// Counts a connection from `address`, unless that address holds `cap` already.
    pub fn admit(&self, address: IpAddr, cap: usize) -> Option<Counted> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(address).or_default();
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(Counted {
            open: self.open.clone(),
            address,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::net::IpAddr;
    use std::time::Duration;

    use super::{PerAddress, Progressing};

    #[test]
    fn an_address_holds_at_most_its_cap_and_gets_places_back() {
        let counts = PerAddress::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = counts.admit(a, 2).unwrap();
        let _second = counts.admit(a, 2).unwrap();
        assert!(counts.admit(a, 2).is_none());
        assert!(counts.admit(b, 2).is_some());
        drop(first);
        assert!(counts.admit(a, 2).is_some());
    }

    #[tokio::test]
    async fn a_write_the_client_never_takes_times_out() {
        use tokio::io::AsyncWriteExt;
        // A pipe whose reader never reads: writes stop once its buffer is full.
        let (writer, _reader) = tokio::io::duplex(1024);
        let mut conn = Progressing::new(writer, Duration::from_millis(200));
        let chunk = vec![0u8; 64 << 10];
        let failed = conn.write_all(&chunk).await.unwrap_err();
        assert_eq!(failed.kind(), io::ErrorKind::TimedOut);
    }
}
