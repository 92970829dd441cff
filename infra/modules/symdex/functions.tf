resource "aws_cloudwatch_log_group" "indexer" {
  name              = "/aws/lambda/${var.name}-indexer"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_cloudwatch_log_group" "remover" {
  name              = "/aws/lambda/${var.name}-remover"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "indexer" {
  function_name                  = "${var.name}-indexer"
  role                           = aws_iam_role.indexer.arn
  filename                       = var.indexer_zip
  source_code_hash               = filebase64sha256(var.indexer_zip)
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  memory_size                    = var.indexer_memory_mb
  timeout                        = var.timeout_seconds
  reserved_concurrent_executions = var.reserved_concurrency
  # Archive entries larger than 4 MiB are expanded into /tmp, one per message in flight.
  ephemeral_storage {
    size = var.indexer_ephemeral_storage_mb
  }
  environment {
    variables = local.function_env
  }
  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.indexer.name
  }
  tags       = var.tags
  depends_on = [aws_iam_role_policy.indexer]
}

resource "aws_lambda_function" "remover" {
  function_name    = "${var.name}-remover"
  role             = aws_iam_role.remover.arn
  filename         = var.remover_zip
  source_code_hash = filebase64sha256(var.remover_zip)
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  memory_size      = var.remover_memory_mb
  timeout          = var.timeout_seconds
  environment {
    variables = local.function_env
  }
  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.remover.name
  }
  tags       = var.tags
  depends_on = [aws_iam_role_policy.remover]
}

resource "aws_lambda_event_source_mapping" "indexer" {
  event_source_arn                   = aws_sqs_queue.events.arn
  function_name                      = aws_lambda_function.indexer.arn
  batch_size                         = var.batch_size
  maximum_batching_window_in_seconds = 5
  function_response_types            = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "remover" {
  event_source_arn                   = aws_sqs_queue.removals.arn
  function_name                      = aws_lambda_function.remover.arn
  batch_size                         = var.batch_size
  maximum_batching_window_in_seconds = 5
  function_response_types            = ["ReportBatchItemFailures"]
}
