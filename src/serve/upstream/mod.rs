//! `serve --upstream`: a request the store misses is asked of upstream symbol servers in
//! order, and the first one's 200 is streamed to the client while it is written to a cache on
//! disk; the cache answers it from then on, upstreams down or not.
//!
//! An upstream is trusted with nothing but answering (THREATS.md). The rules, each kept here:
//! - Only misses go upstream: the store's own keys and its private folders never do (this is
//!   asked only after `file::answer` found nothing, for a path `paths.rs` allowed), nor a path
//!   that names a private folder below an upstream's `PREFIX=` (`teamb/_symdex/...`).
//! - One download per key at a time: the first request leads, the others wait for it and are
//!   answered from the cache (`inflight`); at most `--upstream-downloads` at once.
//! - Only what is identified as the file the key names is served or cached (`verify.rs`),
//!   judged on the path the upstream was asked for. The client being streamed to gets every
//!   byte but the last chunk before that is known, then a broken response if it is refused. A
//!   partial download is never served from the cache (`disk.rs` renames a file into place
//!   only when it is whole and identified).
//! - Fail closed: a cache that cannot be written (disk full, read-only, out of descriptors)
//!   means identifying from memory, up to [`fetch::MEMORY_MAX`]; larger answers are refused
//!   (502), never passed through unidentified.
//! - Bounded: `--upstream-max-size` (and the cache's own size) cuts a larger answer, by its
//!   `Content-Length` before a byte is read or as it arrives; `--upstream-timeout` bounds a
//!   whole exchange; a HEAD of a miss is a HEAD upstream, not a download.
//! - A miss everywhere is 404 and a refused answer 502, each remembered for
//!   [`misses::MISS_TTL`] so a storm of them reaches the upstreams once; an upstream's error
//!   or timeout is a miss with a line on stderr, never a hang.
//! - A cached answer is asked for again once older than `--upstream-max-age`: replaced when
//!   the upstream answers, removed when it no longer has it, served as it is while the
//!   upstream fails or answers what is refused.
//! - Redirects are followed to the upstream's own host or `--upstream-redirect-host`s only,
//!   never to an internal address unless the upstream is on one (`client.rs`, `guard.rs`), and
//!   no printed line carries an upstream's credentials.

mod client;
mod disk;
mod fetch;
mod first;
mod guard;
mod leading;
mod misses;
mod origin;
mod partial;
mod remembered;
mod secret;
mod settings;
mod sink;
mod spec;
mod turn;
mod verify;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderName, HeaderValue, Response, StatusCode};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};

pub use settings::Settings;
pub use spec::{add_credentials, Upstream};

use super::body::Body;
use super::cache::MemoryCache;
use super::file::{answer_bytes, bare, Root, OCTET_STREAM};
use super::paths::is_private;
use client::{Asked, Client};
use disk::DiskCache;
use fetch::Fetch;
use first::First;
use leading::Leading;
use misses::Misses;
use remembered::Remembered;
use turn::Turn;

/// The response header that says an answer came from upstream (`check --json` reports it).
pub const SOURCE_HEADER: HeaderName = HeaderName::from_static("x-symdex-source");

pub struct Upstreams {
    clients: Vec<Client>,
    disk: DiskCache,
    /// The cache directory, opened for answering like the store (`file::answer`).
    cached: Root,
    misses: Misses,
    /// Keys being downloaded; a waiter's receiver sees its sender dropped when it is done.
    inflight: Mutex<HashMap<String, watch::Receiver<()>>>,
    /// Places for upstream exchanges at once (`--upstream-downloads`).
    downloads: Arc<Semaphore>,
    said_unwritable: AtomicBool,
    max_size: u64,
    max_age: Duration,
    timeout: Duration,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each map is whole after every statement that changes it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::text(text));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// An upstream answered what may not be served as the key.
fn refused() -> Response<Body> {
    plain(
        StatusCode::BAD_GATEWAY,
        "the upstream's answer was refused\n",
    )
}

impl Upstreams {
    pub fn new(settings: Settings) -> anyhow::Result<Upstreams> {
        use anyhow::Context;
        let disk =
            DiskCache::open(&settings.cache_dir, settings.cache_max_bytes).with_context(|| {
                format!(
                    "cannot use the upstream cache {}",
                    settings.cache_dir.display()
                )
            })?;
        let cached = Root::open(disk.root.canonicalize()?)?;
        let redirect_hosts: Arc<[String]> = settings.redirect_hosts.into();
        let clients = settings
            .upstreams
            .into_iter()
            .map(|upstream| Client::new(upstream, redirect_hosts.clone(), settings.timeout))
            .collect();
        Ok(Upstreams {
            clients,
            disk,
            cached,
            misses: Misses::default(),
            inflight: Mutex::new(HashMap::new()),
            downloads: Arc::new(Semaphore::new(settings.downloads.max(1))),
            said_unwritable: AtomicBool::new(false),
            max_size: settings.max_size,
            max_age: settings.max_age,
            timeout: settings.timeout,
        })
    }

    /// The upstreams, in the order they are asked.
    pub fn list(&self) -> impl Iterator<Item = &Upstream> {
        self.clients.iter().map(|c| &c.upstream)
    }

    /// The path `client`'s upstream is asked for `key` at, when it is under its prefix and
    /// names no private folder there (in any spelling `paths::is_private` folds).
    fn rest_for<'k>(client: &Client, key: &'k str) -> Option<&'k str> {
        client
            .upstream
            .rest(key)
            .filter(|rest| !rest.split('/').any(is_private))
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
        if !self
            .clients
            .iter()
            .any(|c| Self::rest_for(c, key).is_some())
        {
            return None;
        }
        // Twice at most: once more after waiting for another request's download.
        for _ in 0..2 {
            match self.known(memory, key, head, range, false) {
                Known::Serve(answer) => return Some(answer),
                Known::Miss => return None,
                Known::Ask => {}
            }
            if head {
                return self.head(key).await;
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
                Turn::Lead(leading) => return self.lead(leading, memory, range).await,
            }
        }
        None
    }

    /// The answer the cache and the remembered misses give for `key`, if they decide it
    /// (`after` a download: nothing left to ask, a miss then).
    fn known(
        &self,
        memory: &MemoryCache,
        key: &str,
        head: bool,
        range: Option<&str>,
        after: bool,
    ) -> Known {
        let cached = self.disk.lookup(key);
        let stale = cached.as_ref().map(|(_, age)| *age >= self.max_age);
        let from_cache = |relative: &str| match self.cached_answer(memory, relative, head, range) {
            Some(answer) => Known::Serve(answer),
            None => Known::Miss,
        };
        match (cached.as_ref(), stale, self.misses.get(key)) {
            (Some((relative, _)), Some(false), _) => from_cache(relative),
            (_, _, Some(Remembered::Missing)) => Known::Miss,
            // Asked again lately, and the upstream failed or answered what is refused: the
            // copy that was identified when it came stays.
            (Some((relative, _)), _, Some(_)) => from_cache(relative),
            // A HEAD does not ask again for what is cached.
            (Some((relative, _)), _, None) if head || after => from_cache(relative),
            (None, _, Some(Remembered::Refused)) => Known::Serve(refused()),
            (None, _, Some(Remembered::Failed)) => Known::Miss,
            (_, _, None) if after => Known::Miss,
            (_, _, None) => Known::Ask,
        }
    }

    /// A place for an upstream exchange, waited for at most the upstream timeout; `None`
    /// when all are taken that long.
    async fn place(&self) -> Option<OwnedSemaphorePermit> {
        let acquire = self.downloads.clone().acquire_owned();
        match tokio::time::timeout(self.timeout, acquire).await {
            Ok(Ok(permit)) => Some(permit),
            _ => None,
        }
    }

    /// Downloads `leading.key`: a plain GET is streamed as it arrives; a range is answered
    /// once the download is whole (from the cache, or from memory).
    async fn lead(
        self: &Arc<Self>,
        leading: Leading,
        memory: &MemoryCache,
        range: Option<&str>,
    ) -> Option<Response<Body>> {
        let key = leading.key.clone();
        let Some(place) = self.place().await else {
            return Some(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many upstream downloads\n",
            ));
        };
        let streaming = range.is_none();
        let (first_tx, first_rx) = oneshot::channel();
        let (chunks_tx, chunks_rx) = mpsc::channel(4);
        let this = self.clone();
        let download = tokio::task::spawn_blocking(move || {
            let chunks = streaming.then_some(chunks_tx);
            let verified = this.download(&leading.key, first_tx, chunks);
            drop((leading, place));
            verified
        });
        if streaming {
            match first_rx.await {
                Ok(First::Streaming(len)) => return Some(streamed(chunks_rx, len)),
                Ok(First::Refused) => return Some(refused()),
                Ok(First::Done | First::Miss) | Err(_) => {}
            }
        }
        if let Ok(Some(bytes)) = download.await {
            return answer_bytes(bytes, false, range).map(from_upstream);
        }
        match self.known(memory, &key, false, range, true) {
            Known::Serve(answer) => Some(answer),
            Known::Miss | Known::Ask => None,
        }
    }

    fn cached_answer(
        &self,
        memory: &MemoryCache,
        relative: &str,
        head: bool,
        range: Option<&str>,
    ) -> Option<Response<Body>> {
        super::file::answer(&self.cached, memory, relative, head, range).map(from_upstream)
    }

    pub(super) fn forget_inflight(&self, key: &str) {
        lock(&self.inflight).remove(key);
    }

    /// One line on stderr about the upstreams, any user information in it taken out.
    fn say(&self, line: &str) {
        say_err!("symdex: {}", crate::credentials::redacted(line));
    }

    fn say_unwritable(&self, error: &io::Error) {
        if !self.said_unwritable.swap(true, Ordering::Relaxed) {
            self.say(&format!(
                "upstream cache {}: {error}; answers are identified in memory (up to {} MiB \
                 each, larger ones refused) and not cached",
                self.disk.root.display(),
                fetch::MEMORY_MAX >> 20
            ));
        }
    }

    /// A HEAD of a key nothing is known of: a HEAD of each upstream in order, answered with
    /// what the first that has it says (its length); nothing is downloaded.
    async fn head(self: &Arc<Self>, key: &str) -> Option<Response<Body>> {
        let place = self.place().await?;
        let this = self.clone();
        let key = key.to_string();
        let asked = tokio::task::spawn_blocking(move || {
            let _place = place;
            this.head_upstreams(&key)
        });
        asked.await.ok().flatten()
    }

    fn head_upstreams(&self, key: &str) -> Option<Response<Body>> {
        let mut failed = false;
        for client in &self.clients {
            let Some(rest) = Self::rest_for(client, key) else {
                continue;
            };
            match client.ask(true, rest) {
                Asked::Found(response) => {
                    let len = response
                        .headers()
                        .get(header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    if len.is_some_and(|len| len > self.max_size) {
                        self.misses.remember(key, Remembered::Refused);
                        return Some(refused());
                    }
                    let mut answer = bare(StatusCode::OK, &[(header::CONTENT_TYPE, OCTET_STREAM)]);
                    if let Some(len) = len {
                        answer
                            .headers_mut()
                            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
                    }
                    return Some(from_upstream(answer));
                }
                Asked::Missing => {}
                Asked::Failed(why) => {
                    self.say(&format!("upstream {}: {why}", client.upstream.url_of(rest)));
                    failed = true;
                }
            }
        }
        let what = if failed {
            Remembered::Failed
        } else {
            Remembered::Missing
        };
        self.misses.remember(key, what);
        None
    }

    /// Asks each upstream in order; the first 200 is read to the end ([`Fetch`]). The bytes,
    /// when they were identified in memory.
    fn download(
        &self,
        key: &str,
        first: oneshot::Sender<First>,
        chunks: Option<mpsc::Sender<io::Result<Bytes>>>,
    ) -> Option<Bytes> {
        let mut failed = false;
        for client in &self.clients {
            let Some(rest) = Self::rest_for(client, key) else {
                continue;
            };
            let url = client.upstream.url_of(rest);
            match client.ask(false, rest) {
                Asked::Found(response) => {
                    let fetch = Fetch {
                        upstreams: self,
                        key,
                        rest,
                        url,
                        first: Some(first),
                        chunks,
                    };
                    return fetch.run(response);
                }
                Asked::Missing => {}
                Asked::Failed(why) => {
                    self.say(&format!("upstream {url}: {why}"));
                    failed = true;
                }
            }
        }
        match failed {
            true => self.misses.remember(key, Remembered::Failed),
            false => {
                // No upstream has it any more: neither does the cache.
                self.disk.forget(key);
                self.misses.remember(key, Remembered::Missing);
            }
        }
        let _ = first.send(First::Miss);
        None
    }
}

/// `response` marked as an upstream's answer.
fn from_upstream(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(SOURCE_HEADER, HeaderValue::from_static("upstream"));
    response
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

/// What the cache and the remembered misses say of a key ([`Upstreams::known`]).
enum Known {
    /// They decide it: this answer.
    Serve(Response<Body>),
    /// They decide it: nothing to serve (a miss).
    Miss,
    /// They do not decide it: the upstream is asked.
    Ask,
}

#[cfg(test)]
mod tests {
    //! The single flight driven through its interleaving: every request is polled until it
    //! has taken its turn (the leader's download held at the upstream, the others waiting on
    //! it), and only then is the upstream let answer. No sleeps: each step is a poll whose
    //! outcome the code above decides.

    use super::{lock, MemoryCache, Settings, Upstreams};
    use crate::serve::body::Body;
    use http::{Response, StatusCode};
    use std::future::Future;
    use std::io::{self, BufRead, Write};
    use std::net::TcpListener;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Poll;
    use std::time::Duration;

    /// A cabinet-compressed name: a format symdex does not read, served as it comes.
    const KEY: &str = "symbols/notes.pd_/0123ABCD/notes.pd_";
    const TEXT: &[u8] = b"bytes of a format symdex does not read: served as they came\n";

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
            redirect_hosts: Vec::new(),
            cache_dir: cache.to_path_buf(),
            cache_max_bytes: 1 << 20,
            max_size: 1 << 20,
            max_age: Duration::from_secs(3600),
            downloads: 4,
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
