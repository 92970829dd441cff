//! The one body type `serve` answers with: nothing, bytes in memory (a short answer, or a file
//! from the memory cache: a reference count, no copy), or a file read a chunk at a time as the
//! connection takes it.
//!
//! Written here rather than boxed from `http-body-util`'s combinators: one enum, no allocation
//! per response, and the file's chunks read exactly when hyper asks for the next one (which
//! bounds what a slow reader holds: `file.rs`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// How much of a streamed file is read ahead of what the client took.
pub const READ_AHEAD: u64 = 64 << 10;

pub enum Body {
    Empty,
    /// Taken (`None`) once sent.
    Bytes(Option<Bytes>),
    File(FileChunks),
    /// Chunks as another task produces them (an upstream's answer being downloaded); an
    /// error ends the body unfinished, which the client sees as a failed download.
    Channel {
        chunks: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
        len: Option<u64>,
    },
}

impl Body {
    pub fn text(text: &'static str) -> Body {
        Body::Bytes(Some(Bytes::from_static(text.as_bytes())))
    }
}

/// `end - at` bytes of `file` from `at`, [`READ_AHEAD`] at a time. Read on the runtime's
/// thread: the file is a regular file (checked when opened, so nothing here can block like a
/// FIFO would), its pages mostly cached; a pool thread per read cost more than the read.
pub struct FileChunks {
    file: File,
    at: u64,
    end: u64,
}

impl FileChunks {
    pub fn new(file: File, start: u64, count: u64) -> FileChunks {
        FileChunks {
            file,
            at: start,
            end: start + count,
        }
    }

    fn next_chunk(&mut self) -> Option<io::Result<Bytes>> {
        if self.at >= self.end {
            return None;
        }
        let want = (self.end - self.at).min(READ_AHEAD) as usize;
        let mut buf = vec![0u8; want];
        match self.file.read_exact_at(&mut buf, self.at) {
            Ok(()) => {
                self.at += want as u64;
                Some(Ok(Bytes::from(buf)))
            }
            // Cut short (the file shrank): the body ends with the error.
            Err(e) => {
                self.at = self.end;
                Some(Err(e))
            }
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(match self.get_mut() {
            Body::Empty => None,
            Body::Bytes(bytes) => bytes.take().map(|b| Ok(Frame::data(b))),
            Body::File(chunks) => chunks.next_chunk().map(|r| r.map(Frame::data)),
            Body::Channel { chunks, .. } => {
                return chunks.poll_recv(cx).map(|c| c.map(|r| r.map(Frame::data)))
            }
        })
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Bytes(bytes) => bytes.is_none(),
            Body::File(chunks) => chunks.at >= chunks.end,
            Body::Channel { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(match self {
            Body::Empty => 0,
            Body::Bytes(bytes) => bytes.as_ref().map_or(0, |b| b.len() as u64),
            Body::File(chunks) => chunks.end.saturating_sub(chunks.at),
            Body::Channel { len: Some(len), .. } => *len,
            Body::Channel { len: None, .. } => return SizeHint::default(),
        })
    }
}

/// The bytes of a body whose frames are all ready (a test's read of an answer).
#[cfg(test)]
pub fn drain(mut body: Body) -> io::Result<Vec<u8>> {
    use http_body::Body as _;
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut all = Vec::new();
    while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
        all.extend_from_slice(frame?.data_ref().map(|b| &b[..]).unwrap_or_default());
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::{drain, Body, FileChunks};
    use std::io::Write;

    #[test]
    fn a_file_is_read_in_chunks_from_its_start() {
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&data).unwrap();
        let body = Body::File(FileChunks::new(file, 1000, 150_000));
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(150_000));
        assert_eq!(drain(body).unwrap(), &data[1000..151_000]);
    }

    #[test]
    fn a_file_that_shrank_ends_the_body_with_an_error() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(10).unwrap();
        let body = Body::File(FileChunks::new(file, 0, 100));
        assert!(drain(body).is_err());
    }
}
