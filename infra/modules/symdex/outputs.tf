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

# What compression costs and saves, at list prices (us-east-1 and CloudFront's first 10 TB in
# the US and Europe, 2025) and the measured size of a DWARF debug file's copy (zstd -3: 20% of
# the raw bytes, gzip -6: 24%); docs/deploy.md works an example through.
locals {
  copy_share         = { zstd = 0.20, gzip = 0.24 }
  egress_usd_per_gb  = 0.085
  storage_usd_per_gb = 0.023
}

output "compression" {
  description = "Compressed copies (compress) and the edge's answers with them: the encodings stored (SYMDEX_COMPRESS) and those CloudFront answers (edge_encodings; empty without CloudFront or in front of a default upstream, and never on an upstream's prefix), the cache key's header, and per TB: egress saved when debug files are downloaded in the preferred encoding, and storage the copies add each month (plus one PUT, $0.005 per 1,000, per copy stored; docs/deploy.md, compressed answers)."
  value = {
    copies                             = local.compress
    edge_encodings                     = local.edge_encodings
    copy_prefix                        = local.encoded_prefix
    cache_key_header                   = local.negotiate ? local.encoding_header : null
    cors                               = var.cors
    egress_saved_usd_per_tb_downloaded = local.negotiate ? floor(1000 * local.egress_usd_per_gb * (1 - local.copy_share[local.edge_encodings[0]]) * 100 + 0.5) / 100 : 0
    storage_usd_per_tb_stored_month    = floor(1000 * local.storage_usd_per_gb * sum(concat([0], [for e in local.compress : local.copy_share[e]])) * 100 + 0.5) / 100
  }
}
