//! An HTTP proxy between the functions and moto_server that fails a share of the requests the
//! way S3 and networks do: 503 SlowDown, 500 InternalError, a connection reset before the
//! request is forwarded, and a reset *after* moto applied it (the answer is lost). Seeded, so
//! a run can be replayed.

#![allow(dead_code)] // shared by tests and the bench, each using a part

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use symdex_shared::testing::interleave::Rng;

/// How many requests met each fault.
#[derive(Debug, Default)]
pub struct Faults {
    pub forwarded: AtomicU64,
    pub slow_down: AtomicU64,
    pub internal_error: AtomicU64,
    pub reset_before: AtomicU64,
    pub reset_after: AtomicU64,
    /// When set (`cut_after(n)`): requests still forwarded before every later one is reset,
    /// as if the function died there. `i64::MAX` (the default of `start`): no cut.
    pub budget: std::sync::atomic::AtomicI64,
    /// Every request forwarded, as `METHOD /path?query` (what the endpoint was asked).
    pub log: Mutex<Vec<String>>,
    /// Requests being answered now.
    pub in_flight: AtomicU64,
    /// Requests that arrived while no other was being answered: the round trips a client
    /// waited for one after another (requests made at once count once).
    pub rounds: AtomicU64,
}

/// A request being answered (`Faults::in_flight`), until dropped.
struct InFlight<'a>(&'a Faults);

impl<'a> InFlight<'a> {
    fn new(faults: &'a Faults) -> Self {
        if faults.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            faults.rounds.fetch_add(1, Ordering::SeqCst);
        }
        InFlight(faults)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Faults {
    /// Forwards `n` more requests, then resets every one until the next call.
    pub fn cut_after(&self, n: i64) {
        self.budget.store(n, Ordering::SeqCst);
    }

    /// The round trips counted since the last call ([`Faults::rounds`]).
    pub fn take_rounds(&self) -> u64 {
        self.rounds.swap(0, Ordering::SeqCst)
    }
}

pub struct FaultProxy {
    pub endpoint: String,
    pub faults: Arc<Faults>,
}

type Upstream = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

fn error_response(status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the test proxy</Message></Error>"
    );
    Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

async fn forward(
    upstream: &Upstream,
    authority: &str,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let (mut parts, body) = request.into_parts();
    let body = body.collect().await.map_err(BoxError::other)?.to_bytes();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.to_string());
    parts.uri = format!("http://{authority}{path}")
        .parse()
        .map_err(BoxError::other)?;
    let response = upstream
        .request(Request::from_parts(parts, Full::new(body)))
        .await
        .map_err(BoxError::other)?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(BoxError::other)?.to_bytes();
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// A concrete error type (a boxed one trips hyper's higher-ranked bounds).
type BoxError = std::io::Error;

/// One request: `roll` (0..100) below `percent` picks one of the four faults.
async fn handle(
    request: Request<Incoming>,
    client: &Upstream,
    authority: &str,
    roll: usize,
    percent: usize,
    faults: &Faults,
) -> Result<Response<Full<Bytes>>, BoxError> {
    if faults.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
        faults.reset_before.fetch_add(1, Ordering::Relaxed);
        return Err(BoxError::other("cut: the function died here"));
    }
    if roll >= percent {
        faults.forwarded.fetch_add(1, Ordering::Relaxed);
        let line = format!(
            "{} {}",
            request.method(),
            request.uri().path_and_query().map_or("/", |p| p.as_str())
        );
        faults.log.lock().unwrap().push(line);
        return forward(client, authority, request).await;
    }
    match roll * 4 / percent.max(1) {
        0 => {
            faults.slow_down.fetch_add(1, Ordering::Relaxed);
            Ok(error_response(StatusCode::SERVICE_UNAVAILABLE, "SlowDown"))
        }
        1 => {
            faults.internal_error.fetch_add(1, Ordering::Relaxed);
            Ok(error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
            ))
        }
        2 => {
            faults.reset_before.fetch_add(1, Ordering::Relaxed);
            Err(BoxError::other("injected reset before forwarding"))
        }
        _ => {
            forward(client, authority, request).await?;
            faults.reset_after.fetch_add(1, Ordering::Relaxed);
            Err(BoxError::other("injected reset after moto answered"))
        }
    }
}

impl FaultProxy {
    /// Proxies to `upstream` (`http://host:port`), failing `percent` of the requests.
    pub async fn start(upstream: &str, percent: usize, seed: u64) -> FaultProxy {
        Self::start_with_latency(upstream, percent, seed, std::time::Duration::ZERO).await
    }

    /// [`Self::start`], each request also delayed by `latency` (S3's is tens of ms).
    pub async fn start_with_latency(
        upstream: &str,
        percent: usize,
        seed: u64,
        latency: std::time::Duration,
    ) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let authority = upstream.trim_start_matches("http://").to_string();
        let faults = Arc::new(Faults {
            budget: std::sync::atomic::AtomicI64::new(i64::MAX),
            ..Faults::default()
        });
        let rng = Arc::new(Mutex::new(Rng::new(seed)));
        let client: Upstream = Client::builder(TokioExecutor::new()).build_http();
        let counters = faults.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (client, authority, rng, faults) = (
                    client.clone(),
                    authority.clone(),
                    rng.clone(),
                    counters.clone(),
                );
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let (client, authority, rng, faults) = (
                            client.clone(),
                            authority.clone(),
                            rng.clone(),
                            faults.clone(),
                        );
                        async move {
                            let _answering = InFlight::new(&faults);
                            if !latency.is_zero() {
                                tokio::time::sleep(latency).await;
                            }
                            let roll = rng.lock().unwrap().below(100);
                            handle(request, &client, &authority, roll, percent, &faults).await
                        }
                    });
                    // An error from the service closes the connection: the client sees a reset.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FaultProxy { endpoint, faults }
    }
}
