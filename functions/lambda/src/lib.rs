//! The symdex Lambda functions' shared part: configuration from the environment, event
//! decoding, and the two handlers (plain async fns over the event payload) driving the shared
//! pipeline over S3. The `functions/indexer` and `functions/remover` binaries only wire these
//! into `lambda_runtime`.

pub mod config;
pub mod events;
pub mod handler;

pub use config::LambdaConfig;
pub use handler::{handle_indexer, handle_remover, Context};

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
