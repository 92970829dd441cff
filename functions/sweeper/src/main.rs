//! The symdex sweeper Lambda function (`bootstrap`): see `symdex_lambda::handle_sweeper`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    symdex_lambda::run(symdex_lambda::Function::Sweeper).await
}
