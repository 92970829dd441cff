//! The symdex remover Lambda function (`bootstrap`): see `symdex_lambda::handle_remover`.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    symdex_lambda::run(symdex_lambda::Function::Remover).await
}
