//! The symdex Lambda functions' shared part: configuration from the environment, event
//! decoding, and the handlers (plain async fns over the event payload) driving the shared
//! pipeline over S3. The `functions/indexer`, `functions/remover` and `functions/sweeper` binaries only wire these
//! into `lambda_runtime`.

pub mod archives;
pub mod audit_page;
mod batch;
pub mod config;
pub mod context;
pub mod events;
pub mod handler;
pub mod sweeper;

pub use config::LambdaConfig;
pub use handler::{handle_indexer, handle_remover, Context, Error};
pub use sweeper::handle_sweeper;

/// JSON logs, one object per line (CloudWatch-friendly); `RUST_LOG` filters.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .try_init();
}

/// Which function a bootstrap binary is.
#[derive(Debug, Clone, Copy)]
pub enum Function {
    Indexer,
    Remover,
    /// Scheduled: removes expired uploads (sweeper.rs).
    Sweeper,
}

/// The whole `main` of a bootstrap binary: logging, context from the environment, and the
/// Lambda runtime loop around the function's handler.
pub async fn run(function: Function) -> Result<(), lambda_runtime::Error> {
    use std::sync::Arc;
    init_logging();
    let ctx = Arc::new(Context::from_env().await?);
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let ctx = ctx.clone();
            async move {
                match function {
                    Function::Indexer => handle_indexer(&ctx, event.payload).await,
                    Function::Remover => handle_remover(&ctx, event.payload).await,
                    Function::Sweeper => handle_sweeper(&ctx, event.payload).await,
                }
            }
        },
    ))
    .await
}
