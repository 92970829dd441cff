//! The symdex indexer Lambda function (`bootstrap`): see `symdex_lambda::handle_indexer`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    symdex_lambda::run(symdex_lambda::Function::Indexer).await
}
