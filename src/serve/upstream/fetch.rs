//! One upstream answer being read: written to a [`Sink`] and streamed to the request that
//! leads the download as it arrives (all but its last chunk until it is identified), cut at
//! its size bound, identified once whole, then kept in the cache or refused.

use std::io::{self, Read};

use bytes::Bytes;
use http::{header, Response};
use tokio::sync::{mpsc, oneshot};

use super::first::First;
use super::remembered::Remembered;
use super::sink::Sink;
use super::Upstreams;

/// How much of a download is read (and sent on) at a time.
const CHUNK: usize = 64 << 10;
/// The most of one download held in memory when the cache cannot be written: what is
/// larger is refused rather than passed on unidentified.
pub const MEMORY_MAX: u64 = 32 << 20;

pub struct Fetch<'a> {
    pub upstreams: &'a Upstreams,
    pub key: &'a str,
    /// The path the upstream was asked for (the key, its prefix replaced): what is judged.
    pub rest: &'a str,
    /// Safe to print (no user information).
    pub url: String,
    /// Taken when the leading request has been told.
    pub first: Option<oneshot::Sender<First>>,
    pub chunks: Option<mpsc::Sender<io::Result<Bytes>>>,
}

impl Fetch<'_> {
    fn tell(&mut self, what: First) {
        if let Some(first) = self.first.take() {
            let _ = first.send(what);
        }
    }

    /// Sends `chunk` to the client being streamed to, if it is still there (a client gone
    /// does not stop the download: the cache still gets it).
    fn send(&mut self, chunk: io::Result<Bytes>) {
        if let Some(chunks) = &self.chunks {
            if chunks.blocking_send(chunk).is_err() {
                self.chunks = None;
            }
        }
    }

    /// The most `sink` may hold: `--upstream-max-size`, and no more than the cache can keep
    /// (`--upstream-cache-max`) or than a download is held in memory.
    fn limit(&self, sink: &Sink) -> u64 {
        let held_at_most = match sink {
            Sink::Disk(_) => self.upstreams.disk.max_bytes(),
            Sink::Memory(_) => MEMORY_MAX,
        };
        self.upstreams.max_size.min(held_at_most)
    }

    /// Ends the download without serving it: what was written removed, said, remembered, the
    /// request told (`first`, when it has not been yet) and any stream broken off (after the
    /// removal: a client that sees its answer end sees no partial file left).
    fn refuse(&mut self, sink: Sink, why: String, what: Remembered, first: First) -> Option<Bytes> {
        drop(sink);
        let how = match what {
            Remembered::Refused => "not served",
            _ => "failed",
        };
        self.upstreams
            .say(&format!("upstream {}: {why}: {how}", self.url));
        self.upstreams.misses.remember(self.key, what);
        self.tell(first);
        self.send(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
        None
    }

    /// Reads `response` to its end. The bytes, when they were identified in memory (the
    /// cache could not be written): what a request that is not streamed is answered with.
    pub fn run(mut self, response: Response<ureq::Body>) -> Option<Bytes> {
        let len = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut sink = match self.upstreams.disk.partial(self.key) {
            Ok(partial) => Sink::Disk(partial),
            Err(e) => {
                self.upstreams.say_unwritable(&e);
                Sink::Memory(Vec::new())
            }
        };
        if let Some(len) = len.filter(|&len| len > self.limit(&sink)) {
            let why = format!("{len} bytes, more than the {} allowed", self.limit(&sink));
            return self.refuse(sink, why, Remembered::Refused, First::Refused);
        }
        let mut reader = response.into_body().into_reader();
        let mut held: Option<Bytes> = None;
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.refuse(sink, e.to_string(), Remembered::Failed, First::Miss),
            };
            buf.truncate(n);
            let limit = self.limit(&sink);
            if sink.len() + n as u64 > limit {
                let why = format!("more than the {limit} bytes allowed");
                return self.refuse(sink, why, Remembered::Refused, First::Refused);
            }
            match sink.write(&buf, self.upstreams.max_size.min(MEMORY_MAX)) {
                Ok(None) => {}
                Ok(Some(e)) => self.upstreams.say_unwritable(&e),
                Err(e) => {
                    self.upstreams.say_unwritable(&e);
                    let why = "larger than a download held in memory".to_string();
                    return self.refuse(sink, why, Remembered::Failed, First::Miss);
                }
            }
            self.tell(First::Streaming(len));
            if let Some(previous) = held.replace(Bytes::from(buf)) {
                self.send(Ok(previous));
            }
        }
        if let Err(why) = sink.fits(self.rest) {
            return self.refuse(sink, why, Remembered::Refused, First::Done);
        }
        self.upstreams.misses.forget(self.key);
        let verified = match sink {
            Sink::Disk(partial) => {
                if let Err(e) = self.upstreams.disk.keep(partial) {
                    self.upstreams.say_unwritable(&e);
                }
                None
            }
            Sink::Memory(bytes) => Some(Bytes::from(bytes)),
        };
        self.tell(First::Done);
        if let Some(last) = held {
            self.send(Ok(last));
        }
        verified
    }
}
