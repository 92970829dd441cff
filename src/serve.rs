//! `symdex serve`: a store over HTTP, as debuggers expect a symbol server to behave: GET and
//! HEAD, byte ranges, `application/octet-stream`, 404 (never 403) for anything missing, and
//! nothing outside the store or inside symdex's own bookkeeping.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use clap::Args;
use tower_http::services::ServeDir;

#[derive(Args)]
pub struct ServeArgs {
    /// The store directory.
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: PathBuf,
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
}

/// Top-level directories that are symdex's state, never symbols.
const PRIVATE_PREFIXES: [&str; 2] = ["/_symdex", "/_manifest"];

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain")],
        "not found\n",
    )
        .into_response()
}

/// Answers 404 for private paths, non-GET/HEAD methods and anything the file service refuses;
/// sets the content type; writes one access-log line per request.
async fn guard(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    // Compare what the file service will see: the percent-decoded path.
    let path = percent_encoding::percent_decode_str(request.uri().path())
        .decode_utf8_lossy()
        .into_owned();
    let range = request
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let private = PRIVATE_PREFIXES
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")));
    let response = if private {
        not_found()
    } else if method != Method::GET && method != Method::HEAD {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
        )
            .into_response()
    } else {
        let mut response = next.run(request).await;
        let status = response.status();
        if status.is_success()
            || status == StatusCode::RANGE_NOT_SATISFIABLE
            || status == StatusCode::NOT_MODIFIED
        {
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            );
            response
        } else if status.is_redirection()
            || status == StatusCode::FORBIDDEN
            || status == StatusCode::NOT_FOUND
        {
            // Directories, unreadable files and misses all look the same: not found.
            not_found()
        } else {
            response
        }
    };
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    eprintln!(
        "{} {method} {path} {} {length}{} {}ms",
        symdex_shared::manifest::now_rfc3339(),
        response.status().as_u16(),
        range.map(|r| format!(" range={r}")).unwrap_or_default(),
        started.elapsed().as_millis()
    );
    response
}

pub fn router(store: PathBuf) -> Router {
    let files = ServeDir::new(store).append_index_html_on_directories(false);
    Router::new()
        .fallback_service(files)
        .layer(middleware::from_fn(guard))
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.store.is_dir() {
        anyhow::bail!("no store at {}", args.store.display());
    }
    let store = args.store.canonicalize()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let addr = listener.local_addr()?;
        // Ignore write errors: whoever started us may have stopped reading stdout.
        let mut out = std::io::stdout();
        let _ = writeln!(out, "symdex: serving {} on http://{addr}", store.display());
        let _ = writeln!(out, "  debuginfod: DEBUGINFOD_URLS=http://{addr}");
        let _ = writeln!(
            out,
            "  WinDbg/VS:  srv*http://{addr}/symbols   dotnet-symbol: --server-path http://{addr}/symbols"
        );
        let _ = out.flush();
        let app = router(store).into_make_service();
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
