//! `serve --upstream`: a request the store misses is asked of upstream symbol servers in
//! order, and the first one's 200 is streamed to the client while it is written to a cache on
//! disk; the cache answers it from then on, upstreams down or not.
//!
//! The rules, each kept here:
//! - Only misses go upstream: the store's own keys and its private folders never do (this is
//!   asked only after `file::answer` found nothing, for a path `paths.rs` allowed).
//! - One download per key at a time: the first request leads, the others wait for it and are
//!   answered from the cache (`inflight`).
//! - A partial download is never served from the cache (`disk.rs` renames a file into place
//!   only when it is whole), and a download whose identity is not the key's (`verify.rs`) is
//!   neither cached nor served: the client being streamed to gets every byte but the last
//!   chunk, then a broken response.
//! - A miss everywhere is 404 and remembered for [`MISS_TTL`], so a storm of misses does not
//!   reach the upstreams; an upstream's error or timeout is a miss with a line on stderr, never
//!   a hang (`--upstream-timeout` bounds a whole download).
//! - A cache that cannot be written (disk full) passes answers through, unverified and
//!   uncached, and says so once.

mod disk;
mod spec;
mod verify;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderName, HeaderValue, Response, StatusCode};
use tokio::sync::{mpsc, oneshot, watch};

pub use spec::Upstream;

use super::body::Body;
use super::cache::MemoryCache;
use super::file::{bare, Root, OCTET_STREAM};
use disk::{DiskCache, Partial};

/// How long a miss everywhere is answered 404 without asking again.
pub const MISS_TTL: Duration = Duration::from_secs(30);
/// Misses remembered at most (all forgotten at once past it: a bound, not a policy).
const MISSES_MAX: usize = 100_000;
/// How much of a download is read (and sent on) at a time.
const CHUNK: usize = 64 << 10;
/// The response header that says an answer came from upstream (`check --json` reports it).
pub const SOURCE_HEADER: HeaderName = HeaderName::from_static("x-symdex-source");

/// What `--upstream...` configured.
pub struct Settings {
    pub upstreams: Vec<Upstream>,
    pub cache_dir: PathBuf,
    pub cache_max_bytes: u64,
    pub timeout: Duration,
}

pub struct Upstreams {
    list: Vec<(Upstream, ureq::Agent)>,
    disk: DiskCache,
    /// The cache directory, opened for answering like the store (`file::answer`).
    cached: Root,
    misses: Mutex<HashMap<String, Instant>>,
    /// Keys being downloaded; a waiter's receiver sees its sender dropped when it is done.
    inflight: Mutex<HashMap<String, watch::Receiver<()>>>,
    said_unwritable: AtomicBool,
}

/// What the download told the request that leads it, once it knows.
enum First {
    /// Nobody had it (or every upstream failed).
    Miss,
    /// Being streamed: the body's length when the upstream said it.
    Streaming(Option<u64>),
    /// Already whole (an empty answer): answered from the cache, or a miss if it was refused.
    Done,
}

/// A request's part in a key's download: it leads it, or waits for the one in flight.
enum Turn {
    Lead(Leading),
    Wait(watch::Receiver<()>),
}

/// The download of one key: while it lives, others asking for the key wait for it.
struct Leading {
    upstreams: Arc<Upstreams>,
    key: String,
    _done: watch::Sender<()>,
}

impl Drop for Leading {
    fn drop(&mut self) {
        // Forgotten before the sender drops (after this body): a waiter woken by the drop
        // finds the cache filled or the miss recorded, never this download still in flight.
        lock(&self.upstreams.inflight).remove(&self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each map is whole after every statement that changes it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Upstreams {
    pub fn new(settings: Settings) -> anyhow::Result<Upstreams> {
        use anyhow::Context;
        let disk =
            DiskCache::open(&settings.cache_dir, settings.cache_max_bytes).with_context(|| {
                format!(
                    "cannot open the upstream cache {}",
                    settings.cache_dir.display()
                )
            })?;
        let cached = Root::open(disk.root.canonicalize()?)?;
        let list = settings
            .upstreams
            .into_iter()
            .map(|upstream| {
                let agent = ureq::Agent::config_builder()
                    .timeout_global(Some(settings.timeout))
                    // Redirects within the same scheme (an https upstream never sends us to
                    // plain http).
                    .https_only(upstream.https())
                    .max_redirects(5)
                    .user_agent(concat!("symdex/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .new_agent();
                (upstream, agent)
            })
            .collect();
        Ok(Upstreams {
            list,
            disk,
            cached,
            misses: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            said_unwritable: AtomicBool::new(false),
        })
    }

    /// The answer for `key`, which the store does not have: from the cache, or from the first
    /// upstream that has it; `None` for a miss everywhere.
    pub async fn answer(
        self: &Arc<Self>,
        memory: &MemoryCache,
        key: &str,
        head: bool,
        range: Option<&str>,
    ) -> Option<Response<Body>> {
        if !self.list.iter().any(|(u, _)| u.url_for(key).is_some()) {
            return None;
        }
        // Twice at most: once more after waiting for another request's download.
        for _ in 0..2 {
            if let Some(response) = self.cached_answer(memory, key, head, range) {
                return Some(response);
            }
            if self.missed_lately(key) {
                return None;
            }
            let turn = {
                let mut inflight = lock(&self.inflight);
                match inflight.get(key) {
                    Some(waiting) => Turn::Wait(waiting.clone()),
                    None => {
                        let (done, waiting) = watch::channel(());
                        inflight.insert(key.to_string(), waiting);
                        Turn::Lead(Leading {
                            upstreams: self.clone(),
                            key: key.to_string(),
                            _done: done,
                        })
                    }
                }
            };
            match turn {
                // Returns when the leader's download ends (its sender is dropped).
                Turn::Wait(mut waiting) => {
                    let _ = waiting.changed().await;
                }
                Turn::Lead(leading) => return self.lead(leading, memory, head, range).await,
            }
        }
        None
    }

    /// Downloads `leading.key`: a plain GET is streamed as it arrives; a HEAD or a range is
    /// answered from the cache once the download is whole.
    async fn lead(
        self: &Arc<Self>,
        leading: Leading,
        memory: &MemoryCache,
        head: bool,
        range: Option<&str>,
    ) -> Option<Response<Body>> {
        let key = leading.key.clone();
        let streaming = !head && range.is_none();
        let (first_tx, first_rx) = oneshot::channel();
        let (chunks_tx, chunks_rx) = mpsc::channel(4);
        let this = self.clone();
        let download = tokio::task::spawn_blocking(move || {
            let chunks = streaming.then_some(chunks_tx);
            this.download(&leading.key, first_tx, chunks);
            drop(leading);
        });
        if streaming {
            match first_rx.await {
                Ok(First::Streaming(len)) => return Some(streamed(chunks_rx, len)),
                Ok(First::Done) => {}
                Ok(First::Miss) | Err(_) => return None,
            }
        }
        let _ = download.await;
        self.cached_answer(memory, &key, head, range)
    }

    fn cached_answer(
        &self,
        memory: &MemoryCache,
        key: &str,
        head: bool,
        range: Option<&str>,
    ) -> Option<Response<Body>> {
        let relative = self.disk.lookup(key)?;
        let mut response = super::file::answer(&self.cached, memory, &relative, head, range)?;
        response
            .headers_mut()
            .insert(SOURCE_HEADER, HeaderValue::from_static("upstream"));
        Some(response)
    }

    fn missed_lately(&self, key: &str) -> bool {
        let misses = lock(&self.misses);
        misses.get(key).is_some_and(|at| at.elapsed() < MISS_TTL)
    }

    fn record_miss(&self, key: &str) {
        let mut misses = lock(&self.misses);
        if misses.len() >= MISSES_MAX {
            misses.clear();
        }
        misses.insert(key.to_string(), Instant::now());
    }

    fn say_unwritable(&self, error: &io::Error) {
        if !self.said_unwritable.swap(true, Ordering::Relaxed) {
            eprintln!(
                "symdex: upstream cache {}: {error}; passing answers through without caching",
                self.disk.root.display()
            );
        }
    }

    /// Asks each upstream in order; the first 200 is read to the end, written to a partial
    /// cache file and sent on `chunks` (all but its last chunk until it is verified).
    fn download(
        &self,
        key: &str,
        first: oneshot::Sender<First>,
        chunks: Option<mpsc::Sender<io::Result<Bytes>>>,
    ) {
        for (upstream, agent) in &self.list {
            let Some(url) = upstream.url_for(key) else {
                continue;
            };
            let response = match agent.get(&url).call() {
                Ok(response) => response,
                Err(ureq::Error::StatusCode(404 | 403 | 410)) => continue,
                Err(e) => {
                    eprintln!("symdex: upstream {url}: {e}");
                    continue;
                }
            };
            let len = response
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let reader = response.into_body().into_reader();
            Fetch {
                upstreams: self,
                key,
                rest: upstream.rest(key).unwrap_or(key),
                url: &url,
                first: Some(first),
                chunks,
                len,
            }
            .run(reader);
            return;
        }
        self.record_miss(key);
        let _ = first.send(First::Miss);
    }
}

/// One upstream answer being read.
struct Fetch<'a> {
    upstreams: &'a Upstreams,
    key: &'a str,
    /// The key below the upstream's URL.
    rest: &'a str,
    url: &'a str,
    /// Taken when the leading request has been told.
    first: Option<oneshot::Sender<First>>,
    chunks: Option<mpsc::Sender<io::Result<Bytes>>>,
    len: Option<u64>,
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

    fn run(mut self, mut reader: impl Read) {
        let mut partial = match self.upstreams.disk.partial(self.key) {
            Ok(partial) => Some(partial),
            Err(e) => {
                self.upstreams.say_unwritable(&e);
                None
            }
        };
        let mut held: Option<Bytes> = None;
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("symdex: upstream {}: {e}", self.url);
                    self.tell(First::Miss);
                    self.send(Err(e));
                    return;
                }
            };
            buf.truncate(n);
            if let Some(file) = partial.as_mut().map(|p| &mut p.file) {
                if let Err(e) = file.write_all(&buf) {
                    self.upstreams.say_unwritable(&e);
                    partial = None;
                }
            }
            self.tell(First::Streaming(self.len));
            if let Some(previous) = held.replace(Bytes::from(buf)) {
                self.send(Ok(previous));
            }
        }
        match self.finish(partial) {
            Ok(()) => {
                self.tell(First::Done);
                if let Some(last) = held {
                    self.send(Ok(last));
                }
            }
            Err(why) => {
                eprintln!("symdex: upstream {}: {why}: not served", self.url);
                self.tell(First::Done);
                self.send(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
            }
        }
    }

    /// Verifies the whole download and puts it in the cache.
    fn finish(&self, partial: Option<Partial>) -> Result<(), String> {
        let Some(partial) = partial else {
            // Nothing on disk to identify: passed through as it came (said once).
            return Ok(());
        };
        verify::fits(self.key, self.rest, &partial.path)?;
        if let Err(e) = self.upstreams.disk.keep(partial) {
            self.upstreams.say_unwritable(&e);
        }
        Ok(())
    }
}

/// The response that streams a download to the client as it arrives.
fn streamed(chunks: mpsc::Receiver<io::Result<Bytes>>, len: Option<u64>) -> Response<Body> {
    let mut headers = vec![
        (header::CONTENT_TYPE, OCTET_STREAM),
        (SOURCE_HEADER, HeaderValue::from_static("upstream")),
    ];
    headers.extend(len.map(|len| (header::CONTENT_LENGTH, HeaderValue::from(len))));
    let mut response = bare(StatusCode::OK, &headers);
    *response.body_mut() = Body::Channel { chunks, len };
    response
}

#[cfg(test)]
mod tests {
    //! The single flight driven through its interleaving: every request is polled until it
    //! has taken its turn (the leader's download held at the upstream, the others waiting on
    //! it), and only then is the upstream let answer. No sleeps: each step is a poll whose
    //! outcome the code above decides.

    use super::*;
    use std::future::Future;
    use std::io::BufRead;
    use std::net::TcpListener;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;
    use std::task::Poll;

    const KEY: &str = "symbols/notes.txt/0123ABCD/notes.txt";
    const TEXT: &[u8] = b"a text no format claims: served as it came\n";

    /// An upstream that counts the requests it reads and answers each with `status` only
    /// when `release` says so (dropping `release` closes what is held unanswered).
    struct HeldUpstream {
        url: String,
        asked: Arc<AtomicUsize>,
        release: std::sync::mpsc::Sender<()>,
    }

    fn held_upstream(status: &'static str) -> HeldUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("address"));
        let asked = Arc::new(AtomicUsize::new(0));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let counted = asked.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = io::BufReader::new(&stream);
                let mut line = String::new();
                while request.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                counted.fetch_add(1, Ordering::SeqCst);
                if released.recv().is_err() {
                    return;
                }
                let body = if status.starts_with("200") { TEXT } else { b"" };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body);
            }
        });
        HeldUpstream {
            url,
            asked,
            release,
        }
    }

    fn upstreams_of(url: &str, cache: &std::path::Path) -> Arc<Upstreams> {
        let settings = Settings {
            upstreams: vec![format!("symbols/={url}").parse().expect("upstream")],
            cache_dir: cache.to_path_buf(),
            cache_max_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
        };
        Arc::new(Upstreams::new(settings).expect("upstreams"))
    }

    type Asking<'a> = Pin<Box<dyn Future<Output = Option<Response<Body>>> + 'a>>;

    /// Eight requests for `KEY` that have each taken their turn while the upstream holds its
    /// answer, then the upstream let answer once; their answers.
    fn eight_requests_while_held(upstream: &HeldUpstream) -> Vec<Option<(StatusCode, Vec<u8>)>> {
        let cache = tempfile::tempdir().expect("cache dir");
        let upstreams = upstreams_of(&upstream.url, cache.path());
        let memory = MemoryCache::new(1 << 20);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut asking: Vec<Asking<'_>> = (0..8)
                .map(|_| Box::pin(upstreams.answer(&memory, KEY, false, None)) as Asking<'_>)
                .collect();
            // The first poll makes the first request the leader, its download held at the
            // upstream; each other's first poll finds it in flight and waits.
            std::future::poll_fn(|cx| {
                for request in asking.iter_mut() {
                    assert!(
                        request.as_mut().poll(cx).is_pending(),
                        "answered while held"
                    );
                }
                Poll::Ready(())
            })
            .await;
            assert_eq!(lock(&upstreams.inflight).len(), 1, "one download in flight");
            upstream.release.send(()).expect("upstream listening");
            let mut responses = Vec::new();
            for request in asking {
                responses.push(request.await);
            }
            // The waiters were answered once the download had ended: the leader's streamed
            // body holds every chunk by now.
            assert!(
                lock(&upstreams.inflight).is_empty(),
                "nothing left in flight"
            );
            let drain = super::super::body::drain;
            responses
                .into_iter()
                .map(|r| r.map(|r| (r.status(), drain(r.into_body()).expect("body"))))
                .collect()
        })
    }

    #[test]
    fn requests_arriving_during_a_download_wait_for_it_and_are_answered_from_the_cache() {
        let upstream = held_upstream("200 OK");
        let answers = eight_requests_while_held(&upstream);
        for answer in &answers {
            assert_eq!(answer, &Some((StatusCode::OK, TEXT.to_vec())));
        }
        assert_eq!(
            upstream.asked.load(Ordering::SeqCst),
            1,
            "one upstream request"
        );
    }

    #[test]
    fn requests_arriving_during_a_download_that_misses_get_the_miss_without_asking_again() {
        let upstream = held_upstream("404 Not Found");
        let answers = eight_requests_while_held(&upstream);
        assert!(answers.iter().all(Option::is_none), "{answers:?}");
        assert_eq!(
            upstream.asked.load(Ordering::SeqCst),
            1,
            "the miss is remembered"
        );
    }
}
