//! `symdex serve`: a store over HTTP, as debuggers expect a symbol server to behave: GET and
//! HEAD, byte ranges, `application/octet-stream`, 404 (never 403) for anything missing, and
//! nothing outside the store or inside symdex's own bookkeeping.
//!
//! The rooms: `paths.rs` (which file a request names: private folders refused in every
//! spelling), `request.rs` (one request's answer and log line), `file.rs` (the file opened
//! beneath the store: regular files only, no symbolic link followed, ranges), `negotiate.rs`
//! (a key's compressed copy for a client that accepts it, `accept.rs` reading
//! `Accept-Encoding`), `raw_size.rs` (the file's size before any coding), `max_size.rs`
//! (debuginfod's size limit: 406), `cors.rs` (`--cors`), `cache.rs` (small files kept in
//! memory), `body.rs` (bytes or a file streamed a chunk at a time), `conn.rs` (a client must
//! keep reading; per-address caps), `audit.rs` (the audit page on `--audit`, to loopback or
//! token holders only). Connections are served here over
//! hyper directly: TCP_NODELAY (no 40 ms stall per kept-alive request), a header-read timeout
//! (idle connections are closed), a progress timeout (a client that takes no bytes is
//! dropped), a cap on open connections (accepting pauses at the cap) and optionally per
//! client address.

mod accept;
mod audit;
mod body;
mod cache;
mod conn;
mod cors;
mod file;
mod max_size;
mod negotiate;
mod paths;
mod raw_size;
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
    /// `symbols/=https://msdl.microsoft.com/download/symbols/`. Only answers identified as the
    /// file the key names are served; user information in the URL is sent as basic
    /// credentials and never printed.
    // Parsed in `run`, not by clap: clap's error would quote the value, credentials and all.
    #[arg(long, value_name = "[PREFIX=]URL")]
    pub upstream: Vec<String>,
    /// Credentials for upstreams, one `URL CREDENTIALS` per line (`URL` as given to
    /// `--upstream`; `user:password` sent as basic credentials, a token as a bearer token),
    /// kept out of the command line and every printed line.
    #[arg(long, value_name = "FILE")]
    pub upstream_credentials: Option<PathBuf>,
    /// Where upstream answers are kept (default: $XDG_CACHE_HOME/symdex/upstream, else
    /// ~/.cache/symdex/upstream): a new or empty directory, or one symdex made (it holds a
    /// `.symdex-upstream-cache` file); any other is refused.
    #[arg(long, value_name = "DIR")]
    pub upstream_cache: Option<PathBuf>,
    /// MiB the upstream cache may hold (least recently used evicted first); a larger answer is
    /// refused.
    #[arg(long, default_value_t = 4096, value_name = "MIB")]
    pub upstream_cache_max: u64,
    /// MiB an upstream answer may have: a larger `Content-Length` is refused before the body
    /// is read, a larger body cut where it passes it.
    #[arg(long, default_value_t = 4096, value_name = "MIB")]
    pub upstream_max_size: u64,
    /// Hours a cached upstream answer is served before it is asked for again (replaced when
    /// the upstream answers, removed when it no longer has it, kept while it fails).
    #[arg(long, default_value_t = 24.0, value_name = "HOURS")]
    pub upstream_max_age: f64,
    /// Upstream downloads at once (others wait, up to --upstream-timeout, then get 503).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub upstream_downloads: usize,
    /// A host (`HOST` or `HOST:PORT`, `*.DOMAIN` for any below it) upstream redirects may
    /// lead to besides the upstream's own, e.g. `*.blob.core.windows.net`, where msdl sends
    /// downloads. Hosts resolving to loopback, private or link-local addresses are refused
    /// unless the upstream itself is on one.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub upstream_redirect_host: Vec<String>,
    /// Seconds an upstream has for a whole answer (a trickle is cut there; a miss to the
    /// client).
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub upstream_timeout: u64,
    /// Serve `symdex audit`'s page of this store at /_symdex/audit.html, rebuilt from the
    /// manifest at each request: only where --addr is a loopback address or
    /// --auth-token-file is given (403 elsewhere).
    #[arg(long)]
    pub audit: bool,
    /// Let pages of any origin read answers (CORS: `Access-Control-Allow-Origin: *`, debuginfod's
    /// headers exposed, preflight `OPTIONS` answered 204 without credentials; the GET still
    /// needs them). The audit page is never shared so.
    #[arg(long)]
    pub cors: bool,
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
    let mut upstreams = args
        .upstream
        .iter()
        .map(|text| text.parse::<upstream::Upstream>())
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| anyhow::anyhow!("--upstream {e}"))?;
    if upstreams.iter().any(|u| u.authorization.is_some()) {
        say_err!(
            "symdex: credentials in an --upstream URL are never printed, but other users of \
             this machine see them in its process list; --upstream-credentials FILE keeps \
             them off it"
        );
    }
    if let Some(path) = &args.upstream_credentials {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        upstream::add_credentials(&mut upstreams, &text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let max_age = std::time::Duration::try_from_secs_f64(args.upstream_max_age * 3600.0)
        .map_err(|_| anyhow::anyhow!("--upstream-max-age: hours, 0 or more"))?;
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
        upstreams,
        redirect_hosts: args.upstream_redirect_host.clone(),
        cache_dir,
        cache_max_bytes: args.upstream_cache_max.saturating_mul(1 << 20),
        max_size: args.upstream_max_size.saturating_mul(1 << 20),
        max_age,
        downloads: args.upstream_downloads.max(1),
        timeout: std::time::Duration::from_secs(args.upstream_timeout.max(1)),
    })?;
    Ok(Some(Arc::new(upstreams)))
}

/// Raises the soft limit on open files to the hard one (the soft default, 1024, is a few
/// hundred connections), and returns the limit in force.
fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct given, alive for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

/// Connections `open_files` descriptors leave room for: three each (the connection, the
/// file it is sent, or with `--upstream` the upstream's socket and the partial download
/// beside it), a few kept for the listener, logs and the cache.
fn default_max_connections(open_files: u64) -> usize {
    let open_files = usize::try_from(open_files).unwrap_or(usize::MAX);
    (open_files.saturating_sub(32) / 3).clamp(16, 4096)
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
    let open_files = raise_open_files();
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
    for upstream in upstreams.iter().flat_map(|u| u.list()) {
        let under = match upstream.prefix.as_str() {
            "" => "misses".to_string(),
            prefix => format!("misses under /{prefix}"),
        };
        // The base holds no user information (taken out when parsed): safe to print.
        let _ = writeln!(out, "  upstream:   {under} -> {}", upstream.base);
    }
    if args.audit {
        let _ = writeln!(out, "  audit page: http://{addr}{}", audit::AUDIT_PATH);
    }
    let _ = out.flush();
    let credentials_given = credentials.is_some();
    let served = Arc::new(request::Served {
        root,
        cache: cache::MemoryCache::new(args.memory_cache.saturating_mul(1 << 20)),
        credentials,
        access_log: access_log.map(std::sync::Mutex::new),
        fold_case: args.fold_case,
        quiet: args.quiet,
        upstreams,
        audit: args.audit.then(|| {
            // Loopback: the machine's own users; with credentials: those holding the token.
            let shown = addr.ip().is_loopback() || credentials_given;
            audit::AuditPage::new(store.clone(), shown)
        }),
        cors: args.cors,
    });
    let accepting = Arc::new(Accepting {
        served,
        limit: Arc::new(tokio::sync::Semaphore::new(
            args.max_connections
                .unwrap_or_else(|| default_max_connections(open_files))
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
