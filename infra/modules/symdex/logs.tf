# CloudFront standard access logs, to a log bucket with a retention, and an Athena table over
# them with the named query "most requested missing symbols this week" (`symdex report misses`
# reads the same files, downloaded).

locals {
  enable_access_logs = var.enable_cloudfront && var.enable_access_logs
  # The standard log's fields, in file order (tab-separated, two header lines).
  cloudfront_log_columns = [
    ["date", "date"], ["time", "string"], ["x_edge_location", "string"], ["sc_bytes", "bigint"],
    ["c_ip", "string"], ["cs_method", "string"], ["cs_host", "string"], ["cs_uri_stem", "string"],
    ["sc_status", "int"], ["cs_referrer", "string"], ["cs_user_agent", "string"],
    ["cs_uri_query", "string"], ["cs_cookie", "string"], ["x_edge_result_type", "string"],
    ["x_edge_request_id", "string"], ["x_host_header", "string"], ["cs_protocol", "string"],
    ["cs_bytes", "bigint"], ["time_taken", "float"], ["x_forwarded_for", "string"],
    ["ssl_protocol", "string"], ["ssl_cipher", "string"], ["x_edge_response_result_type", "string"],
    ["cs_protocol_version", "string"], ["fle_status", "string"], ["fle_encrypted_fields", "int"],
    ["c_port", "int"], ["time_to_first_byte", "float"], ["x_edge_detailed_result_type", "string"],
    ["sc_content_type", "string"], ["sc_content_len", "bigint"], ["sc_range_start", "bigint"],
    ["sc_range_end", "bigint"],
  ]
  access_logs_table = var.enable_athena && local.enable_access_logs ? "${aws_glue_catalog_database.manifest[0].name}.cloudfront_logs" : ""
}

resource "aws_s3_bucket" "logs" {
  count         = local.enable_access_logs ? 1 : 0
  bucket        = "${local.serving_bucket}-logs"
  force_destroy = true
  tags          = var.tags
}

# CloudFront standard logging writes with ACLs: the bucket must allow them.
resource "aws_s3_bucket_ownership_controls" "logs" {
  count  = local.enable_access_logs ? 1 : 0
  bucket = aws_s3_bucket.logs[0].id
  rule {
    object_ownership = "BucketOwnerPreferred"
  }
}

resource "aws_s3_bucket_public_access_block" "logs" {
  count                   = local.enable_access_logs ? 1 : 0
  bucket                  = aws_s3_bucket.logs[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_lifecycle_configuration" "logs" {
  count  = local.enable_access_logs ? 1 : 0
  bucket = aws_s3_bucket.logs[0].id
  rule {
    id     = "expire-access-logs"
    status = "Enabled"
    filter {}
    expiration {
      days = var.access_log_retention_days
    }
  }
}

resource "aws_glue_catalog_table" "cloudfront_logs" {
  count         = var.enable_athena && local.enable_access_logs ? 1 : 0
  name          = "cloudfront_logs"
  database_name = aws_glue_catalog_database.manifest[0].name
  table_type    = "EXTERNAL_TABLE"
  parameters = {
    EXTERNAL                 = "TRUE"
    "skip.header.line.count" = "2"
  }
  storage_descriptor {
    location      = "s3://${aws_s3_bucket.logs[0].id}/cloudfront/"
    input_format  = "org.apache.hadoop.mapred.TextInputFormat"
    output_format = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
    ser_de_info {
      serialization_library = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
      parameters = {
        "field.delim"          = "\t"
        "serialization.format" = "\t"
      }
    }
    dynamic "columns" {
      for_each = local.cloudfront_log_columns
      content {
        name = columns.value[0]
        type = columns.value[1]
      }
    }
  }
}

resource "aws_athena_named_query" "missing_this_week" {
  count       = var.enable_athena && local.enable_access_logs ? 1 : 0
  name        = "${var.name}: most requested missing symbols this week"
  workgroup   = aws_athena_workgroup.audit[0].id
  database    = aws_glue_catalog_database.manifest[0].name
  description = "Keys debuggers asked for and got 404 in the last 7 days; the path names the file and id to re-upload (symdex report misses does the mapping)."
  query       = "SELECT cs_uri_stem AS key, count(*) AS requests, count(DISTINCT c_ip) AS clients FROM ${local.access_logs_table} WHERE sc_status = 404 AND cs_method IN ('GET', 'HEAD') AND date >= current_date - interval '7' day GROUP BY cs_uri_stem ORDER BY requests DESC LIMIT 100"
}

# TLS only (main.tf, tls_only): require_tls = false for plain-HTTP test endpoints.
resource "aws_s3_bucket_policy" "logs" {
  count      = local.enable_access_logs && var.require_tls ? 1 : 0
  bucket     = aws_s3_bucket.logs[0].id
  policy     = data.aws_iam_policy_document.tls_only["logs"].json
  depends_on = [aws_s3_bucket_public_access_block.logs]
}
