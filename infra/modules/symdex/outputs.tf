locals {
  base_url = var.enable_cloudfront ? "https://${aws_cloudfront_distribution.symbols[0].domain_name}" : (
    var.enable_website ? "http://${aws_s3_bucket_website_configuration.serving[0].website_endpoint}" : ""
  )
  symbols_prefix = trim(local.layout_prefixes["ssqp"], "/")
  unified_prefix = trim(local.layout_prefixes["unified"], "/")
}

output "ingest_bucket" {
  description = "Upload build artifacts here."
  value       = aws_s3_bucket.ingest.id
}

output "serving_bucket" {
  value = aws_s3_bucket.serving.id
}

output "events_queue_url" {
  value = aws_sqs_queue.events.id
}

output "events_dlq_url" {
  value = aws_sqs_queue.events_dlq.id
}

output "removals_queue_url" {
  value = aws_sqs_queue.removals.id
}

output "indexer_function" {
  value = aws_lambda_function.indexer.function_name
}

output "remover_function" {
  value = aws_lambda_function.remover.function_name
}

output "symbol_server_url" {
  description = "Base URL of the symbol server (CloudFront, or the S3 website endpoint)."
  value       = local.base_url
}

output "windbg_symbol_path" {
  description = "_NT_SYMBOL_PATH / Visual Studio symbol server entry."
  value       = local.base_url == "" ? "" : "srv*C:\\symbols*${local.base_url}/${local.symbols_prefix}"
}

output "dotnet_symbol_server" {
  description = "dotnet-symbol --server-path value."
  value       = local.base_url == "" ? "" : "${local.base_url}/${local.symbols_prefix}"
}

output "debuginfod_urls" {
  description = "DEBUGINFOD_URLS for gdb, lldb and debuginfod-find."
  value       = local.base_url
}

output "sentry_unified_url" {
  description = "Sentry custom symbol server (type HTTP, layout 'unified')."
  value       = local.base_url == "" ? "" : "${local.base_url}/${local.unified_prefix}/"
}

output "athena_workgroup" {
  value = var.enable_athena ? aws_athena_workgroup.audit[0].name : ""
}

output "manifest_table" {
  value = local.table
}

output "sweeper_function" {
  description = "The scheduled sweeper (empty without sweeper_zip). Promote a build: aws lambda invoke --cli-binary-format raw-in-base64-out --function-name <this> --payload '{\"promote\":{\"build\":\"B\"}}' out.json"
  value       = join("", aws_lambda_function.sweeper[*].function_name)
}

output "ci_upload_policies" {
  description = "Product -> IAM policy JSON for that product's CI role (uploads only under <product>/)."
  value       = { for product, doc in data.aws_iam_policy_document.ci_upload : product => doc.json }
}

output "access_tokens_kvs_arn" {
  description = "KeyValueStore of reader credential hashes (require_auth)."
  value       = join("", aws_cloudfront_key_value_store.tokens[*].arn)
}

output "access_logs_bucket" {
  description = "CloudFront access logs (cloudfront/ prefix): symdex report misses reads them."
  value       = join("", aws_s3_bucket.logs[*].id)
}

output "audit_page_url" {
  description = "The audit page (audit_page): open it in a browser and give the audit token as the password (any user name), or send it as Authorization: Bearer; null when off."
  value       = local.enable_audit ? "${local.base_url}/${local.audit_key}" : null
}
