//! `symdex serve`: a store over HTTP, as debuggers expect a symbol server to behave: GET and
//! HEAD, byte ranges, `application/octet-stream`, 404 (never 403) for anything missing, and
//! nothing outside the store or inside symdex's own bookkeeping.
//!
//! The rooms: `paths.rs` (which file a request names: private folders refused in every
//! spelling), `request.rs` (one request's answer and log line), `file.rs` (the file opened
//! beneath the store: regular files only, no symbolic link followed, ranges), `cache.rs`
//! (small files kept in memory), `body.rs` (bytes or a file streamed a chunk at a time),
//! `conn.rs` (a client must keep reading; per-address caps). Connections are served here over
//! hyper directly: TCP_NODELAY (no 40 ms stall per kept-alive request), a header-read timeout
//! (idle connections are closed), a progress timeout (a client that takes no bytes is
//! dropped), a cap on open connections (accepting pauses at the cap) and optionally per
//! client address.

mod body;
mod cache;
mod conn;
mod file;
mod paths;
mod request;
mod upstream;

pub use paths::url_path;
pub use upstream::SOURCE_HEADER;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct ServeArgs {
    /// The store directory.
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: PathBuf,
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Seconds a client has to send a request's headers (idle connections are closed then).
    #[arg(long, default_value_t = 10)]
    pub header_timeout: u64,
    /// Connections served at once (default: what the open-files limit allows).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Connections one client address may hold at once (default: no cap of its own); further
    /// ones are closed at once.
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// Seconds a client may take no bytes of a response before its connection is closed
    /// (a client that asks and never reads holds no buffer or connection past it).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub send_timeout: u64,
    /// Require credentials: one token, `user:password` or `sha256:<hex>` per line (auth.rs);
    /// requests without them get 401 and a basic-auth challenge.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// Append a JSON access log (one object per request: time, method, path, status, bytes,
    /// range, ms, agent) to FILE; `symdex report misses FILE` reads it.
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Case-insensitive lookups under `/symbols/` and `/index2/` (what SymSrv over IIS does),
    /// for a store indexed with `symdex index --fold-case`: request paths there are lowercased.
    #[arg(long)]
    pub fold_case: bool,
    /// No line per request on stderr (the `--access-log` file, if any, is still written).
    #[arg(long)]
    pub quiet: bool,
    /// MiB of small files (up to 256 KiB each) kept in memory, least recently used evicted
    /// first; every request still opens its file, so a changed or deleted file is never
    /// answered from memory. 0: none.
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub memory_cache: usize,
    /// Ask this symbol server for what the store misses, in the order given: `URL` (the request
    /// path appended) or `PREFIX=URL` (only paths under PREFIX, PREFIX replaced by URL), e.g.
    /// `symbols/=https://msdl.microsoft.com/download/symbols/`.
    #[arg(long, value_name = "[PREFIX=]URL")]
    pub upstream: Vec<upstream::Upstream>,
    /// Where upstream answers are kept (default: $XDG_CACHE_HOME/symdex/upstream, else
    /// ~/.cache/symdex/upstream).
    #[arg(long, value_name = "DIR")]
    pub upstream_cache: Option<PathBuf>,
    /// MiB the upstream cache may hold (least recently used evicted first).
    #[arg(long, default_value_t = 4096, value_name = "MIB")]
    pub upstream_cache_max: u64,
    /// Seconds an upstream has for a whole answer (a trickle is cut there; a miss to the
    /// client).
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub upstream_timeout: u64,
}

/// The upstream cache's default place, outside any store.
fn default_upstream_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("symdex").join("upstream")
}

/// The upstreams `--upstream` names, with their cache (which must lie outside the store: it
/// would be served as keys), or `None` without any.
fn open_upstreams(
    args: &ServeArgs,
    store: &std::path::Path,
) -> anyhow::Result<Option<Arc<upstream::Upstreams>>> {
    if args.upstream.is_empty() {
        return Ok(None);
    }
    let cache_dir = args
        .upstream_cache
        .clone()
        .unwrap_or_else(default_upstream_cache);
    std::fs::create_dir_all(&cache_dir)
        .with_context(|| format!("cannot create the upstream cache {}", cache_dir.display()))?;
    if cache_dir
        .canonicalize()
        .is_ok_and(|dir| dir.starts_with(store))
    {
        anyhow::bail!("the upstream cache must be outside the store (it would be served as keys)");
    }
    let upstreams = upstream::Upstreams::new(upstream::Settings {
        upstreams: args.upstream.clone(),
        cache_dir,
        cache_max_bytes: args.upstream_cache_max.saturating_mul(1 << 20),
        timeout: std::time::Duration::from_secs(args.upstream_timeout.max(1)),
    })?;
    Ok(Some(Arc::new(upstreams)))
}

/// Connections the open-files limit leaves room for (each one is a descriptor; files being
/// served and the listener need some too).
fn default_max_connections() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1024);
    (soft.saturating_sub(32) / 2).clamp(16, 4096)
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.store.is_dir() {
        anyhow::bail!("no store at {}", args.store.display());
    }
    let store = args.store.canonicalize()?;
    let credentials = args
        .auth_token_file
        .as_deref()
        .map(crate::auth::Credentials::load)
        .transpose()?;
    let access_log = match &args.access_log {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the access log {}", path.display()))?,
        ),
        None => None,
    };
    let root = file::Root::open(store.clone())
        .with_context(|| format!("cannot open the store {}", store.display()))?;
    let upstreams = open_upstreams(args, &store)?;
    let listener = std::net::TcpListener::bind(args.addr)
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    // Ignore write errors: whoever started us may have stopped reading stdout.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "symdex: serving {} on http://{addr}", store.display());
    let _ = writeln!(out, "  debuginfod: DEBUGINFOD_URLS=http://{addr}");
    let _ = writeln!(
        out,
        "  WinDbg/VS:  srv*http://{addr}/symbols   dotnet-symbol: --server-path http://{addr}/symbols"
    );
    if credentials.is_some() {
        let _ = writeln!(
            out,
            "  credentials required (Authorization: Bearer <token>, or basic auth)"
        );
    }
    for upstream in &args.upstream {
        let under = match upstream.prefix.as_str() {
            "" => "misses".to_string(),
            prefix => format!("misses under /{prefix}"),
        };
        let _ = writeln!(out, "  upstream:   {under} -> {}", upstream.base);
    }
    let _ = out.flush();
    let served = Arc::new(request::Served {
        root,
        cache: cache::MemoryCache::new(args.memory_cache.saturating_mul(1 << 20)),
        credentials,
        access_log: access_log.map(std::sync::Mutex::new),
        fold_case: args.fold_case,
        quiet: args.quiet,
        upstreams,
    });
    let accepting = Arc::new(Accepting {
        served,
        limit: Arc::new(tokio::sync::Semaphore::new(
            args.max_connections
                .unwrap_or_else(default_max_connections)
                .max(1),
        )),
        per_address: conn::PerAddress::default(),
        max_per_address: args.max_connections_per_ip.map(|cap| cap.max(1)),
        header_timeout: std::time::Duration::from_secs(args.header_timeout.max(1)),
        send_timeout: std::time::Duration::from_secs(args.send_timeout.max(1)),
    });
    // One single-threaded runtime per core, each accepting on the one listening socket (the
    // kernel wakes whichever is free; not SO_REUSEPORT, which would let a second server bind
    // the same port silently) and serving its connections itself: no request moves between
    // threads (measured: 1.2-1.5x the work-stealing runtime's req/s on small files). Every
    // bound (connections, per address, the cache) is shared by all.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workers = Vec::new();
    for _ in 0..cores {
        let listener = listener.try_clone()?;
        let accepting = accepting.clone();
        workers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?;
                accepting.accept_until_interrupted(listener).await
            })
        }));
    }
    for worker in workers {
        match worker.join() {
            Ok(result) => result?,
            Err(_) => anyhow::bail!("a serving thread panicked"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What every serving thread accepts connections with.
struct Accepting {
    served: Arc<request::Served>,
    /// Connections open at once, all threads together.
    limit: Arc<tokio::sync::Semaphore>,
    per_address: conn::PerAddress,
    max_per_address: Option<usize>,
    header_timeout: std::time::Duration,
    send_timeout: std::time::Duration,
}

impl Accepting {
    /// Accepts and serves connections on this thread's runtime until Ctrl-C.
    async fn accept_until_interrupted(
        &self,
        listener: tokio::net::TcpListener,
    ) -> anyhow::Result<()> {
        let shutdown = tokio::signal::ctrl_c();
        tokio::pin!(shutdown);
        loop {
            // At the cap, stop accepting: new connections wait in the listen backlog.
            let permit = tokio::select! {
                permit = self.limit.clone().acquire_owned() => permit?,
                _ = &mut shutdown => return Ok(()),
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of descriptors and the like: wait for a connection to end.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => return Ok(()),
            };
            let counted = match self.max_per_address {
                Some(cap) => match self.per_address.admit(peer.ip(), cap) {
                    Some(counted) => Some(counted),
                    // Over its address's cap: closed at once (dropped), its place kept.
                    None => continue,
                },
                None => None,
            };
            let _ = stream.set_nodelay(true);
            let stream = conn::Progressing::new(stream, self.send_timeout);
            let served = self.served.clone();
            let service =
                hyper::service::service_fn(move |request| request::handle(served.clone(), request));
            let header_timeout = self.header_timeout;
            tokio::spawn(async move {
                let (_permit, _counted) = (permit, counted);
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    // A response is queued a chunk or two ahead of the socket, no more: a slow
                    // reader holds that much of its file (body.rs streams the rest).
                    .max_buf_size(128 << 10)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}
