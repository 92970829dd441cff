//! The symdex indexer Lambda function: `lambda_runtime` around `symdex_lambda::handle_indexer`.

use std::sync::Arc;

use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    symdex_lambda::init_logging();
    let ctx = Arc::new(symdex_lambda::Context::from_env().await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let ctx = ctx.clone();
        async move { symdex_lambda::handle_indexer(&ctx, event.payload).await }
    }))
    .await
}
