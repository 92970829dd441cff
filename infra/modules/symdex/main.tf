locals {
  ingest_bucket  = coalesce(var.ingest_bucket_name, "${var.name}-ingest")
  serving_bucket = coalesce(var.serving_bucket_name, "${var.name}-serving")
  private_prefixes = [
    "${trim(var.manifest_prefix, "/")}/",
    "${trim(var.state_prefix, "/")}/",
  ]
  # Where a build's sources are served (src/<product>/<build>/<path>): case-sensitive paths,
  # never folded (edge/access.js), never asked of an upstream (cdn.tf).
  sources_prefix = "src/"
  # The SymSrv family's prefixes, folded to lowercase at the edge (edge/access.js) when they
  # are all distinct from the root (a layout at the root would fold debuginfod's paths too).
  symsrv_default_prefixes = { ssqp = "symbols/", symstore = "symbols/", symstore_index2 = "index2/", breakpad = "symbols/" }
  symsrv_prefixes = distinct([
    for layout, default in local.symsrv_default_prefixes :
    lookup(var.layout_prefixes, layout, default) if contains(var.layouts, layout)
  ])
  fold_case = (var.enable_cloudfront && var.case_insensitive_lookups && length(local.symsrv_prefixes) > 0
  && alltrue([for p in local.symsrv_prefixes : trim(p, "/") != ""]))
  fold_prefixes = local.fold_case ? [for p in local.symsrv_prefixes : "/${trim(p, "/")}/"] : []
  # One stored copy per artifact where something in front turns alias objects into redirects:
  # the CDN's viewer-response function (edge/response.js) or the S3 website endpoint.
  aliases = coalesce(var.aliases, var.enable_cloudfront || var.enable_website ? "redirect" : "copy")
  # The encodings of the stored copies, in symdex's order of preference (zstd first: the edge
  # answers it when a viewer weighs both alike).
  compress = [for e in ["zstd", "gzip"] : e if contains(var.compress, e)]
  function_env = merge(
    {
      SYMDEX_SERVING_BUCKET = aws_s3_bucket.serving.id
      # Events for any other bucket (a direct invoke naming the serving bucket, say) are
      # recorded as rejected and acknowledged.
      SYMDEX_INGEST_BUCKET          = aws_s3_bucket.ingest.id
      SYMDEX_LAYOUTS                = join(",", var.layouts)
      SYMDEX_MANIFEST_PREFIX        = trim(var.manifest_prefix, "/")
      SYMDEX_MULTIPART_THRESHOLD    = tostring(var.multipart_threshold_bytes)
      SYMDEX_FOLD_CASE              = tostring(local.fold_case)
      SYMDEX_ALIASES                = local.aliases
      SYMDEX_SOURCE_JOINS           = tostring(var.source_joins)
      SYMDEX_REFUSE_SRCSRV_COMMANDS = tostring(var.refuse_srcsrv_commands)
      # Copies under _symdex/encoded/<encoding>/ (cdn.tf serves them); empty: none made.
      SYMDEX_COMPRESS = join(",", local.compress)
      # A lease on a key outlives any invocation that took it (plus a margin for clock skew).
      SYMDEX_LEASE_SECONDS = tostring(var.timeout_seconds + 60)
      SYMDEX_CONCURRENCY   = tostring(var.message_concurrency)
      # Channel -> retention, stamped on each new upload; the sweeper acts on it.
      SYMDEX_RETENTION        = var.retention_policy
      SYMDEX_PRODUCT_PREFIXES = tostring(var.enforce_product_prefixes)
      # How far one archive may expand (archive bombs): each breach is a rejected record.
      SYMDEX_ARCHIVE_MAX_ENTRY_SIZE = tostring(var.archive_max_entry_bytes)
      SYMDEX_ARCHIVE_MAX_EXPANDED   = tostring(var.archive_max_expanded_bytes)
      SYMDEX_ARCHIVE_MAX_RATIO      = tostring(var.archive_max_ratio)
      SYMDEX_ARCHIVE_MAX_ENTRIES    = tostring(var.archive_max_entries)
    },
    { for layout, prefix in var.layout_prefixes : "SYMDEX_PREFIX_${upper(layout)}" => prefix },
    # Unset, the functions take half of their memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE).
    var.decoder_memory_mb == null ? {} : { SYMDEX_DECODER_MEMORY_MB = tostring(var.decoder_memory_mb) },
  )
}


# ---------------------------------------------------------------- ingest bucket
resource "aws_s3_bucket" "ingest" {
  bucket = local.ingest_bucket
  tags   = var.tags
}

resource "aws_s3_bucket_versioning" "ingest" {
  bucket = aws_s3_bucket.ingest.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "ingest" {
  bucket = aws_s3_bucket.ingest.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "ingest" {
  bucket                  = aws_s3_bucket.ingest.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_lifecycle_configuration" "ingest" {
  bucket = aws_s3_bucket.ingest.id
  rule {
    id     = "expire-old-versions"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_retention_days
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

# TLS only: the whole policy of every bucket the module creates but the serving bucket (whose
# policy carries the same statement among its own).
locals {
  tls_only_buckets = merge(
    { ingest = aws_s3_bucket.ingest.arn },
    local.enable_access_logs ? { logs = aws_s3_bucket.logs[0].arn } : {},
    var.enable_athena ? { athena = aws_s3_bucket.athena_results[0].arn } : {},
  )
}

data "aws_iam_policy_document" "tls_only" {
  for_each = local.tls_only_buckets
  statement {
    sid       = "TLSOnly"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [each.value, "${each.value}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

# The TLS rule is the ingest bucket's only statement; test endpoints speaking plain HTTP
# (moto_server) turn it off with require_tls = false.
resource "aws_s3_bucket_policy" "ingest" {
  count      = var.require_tls ? 1 : 0
  bucket     = aws_s3_bucket.ingest.id
  policy     = data.aws_iam_policy_document.tls_only["ingest"].json
  depends_on = [aws_s3_bucket_public_access_block.ingest]
}

resource "aws_s3_bucket_notification" "ingest" {
  bucket = aws_s3_bucket.ingest.id
  queue {
    id        = "symdex-created"
    queue_arn = aws_sqs_queue.events.arn
    events    = ["s3:ObjectCreated:*"]
  }
  queue {
    id        = "symdex-removed"
    queue_arn = aws_sqs_queue.removals.arn
    events    = ["s3:ObjectRemoved:*"]
  }
  depends_on = [aws_sqs_queue_policy.events, aws_sqs_queue_policy.removals]
}

# ---------------------------------------------------------------- serving bucket
resource "aws_s3_bucket" "serving" {
  bucket = local.serving_bucket
  tags   = var.tags
}

resource "aws_s3_bucket_server_side_encryption_configuration" "serving" {
  bucket = aws_s3_bucket.serving.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "serving" {
  bucket = aws_s3_bucket.serving.id
  # Only the static-website mode needs a public bucket policy.
  block_public_acls       = true
  block_public_policy     = !var.enable_website
  ignore_public_acls      = true
  restrict_public_buckets = !var.enable_website
}

resource "aws_s3_bucket_lifecycle_configuration" "serving" {
  count  = var.manifest_retention_days > 0 ? 1 : 0
  bucket = aws_s3_bucket.serving.id
  rule {
    id     = "expire-manifest"
    status = "Enabled"
    filter {
      prefix = "${trim(var.manifest_prefix, "/")}/"
    }
    expiration {
      days = var.manifest_retention_days
    }
  }
}

resource "aws_s3_bucket_website_configuration" "serving" {
  count  = var.enable_website ? 1 : 0
  bucket = aws_s3_bucket.serving.id
  # No index page exists: directory-style requests answer like misses. Without anonymous
  # ListBucket (which would expose listings) S3 websites answer misses with 403; use CloudFront
  # where clients need 404s.
  index_document {
    suffix = "index.html"
  }
}

data "aws_iam_policy_document" "serving" {
  dynamic "statement" {
    for_each = var.require_tls ? [1] : []
    content {
      sid       = "TLSOnly"
      effect    = "Deny"
      actions   = ["s3:*"]
      resources = [aws_s3_bucket.serving.arn, "${aws_s3_bucket.serving.arn}/*"]
      principals {
        type        = "*"
        identifiers = ["*"]
      }
      condition {
        test     = "Bool"
        variable = "aws:SecureTransport"
        values   = ["false"]
      }
      # The S3 website endpoint speaks plain HTTP only.
      dynamic "condition" {
        for_each = var.enable_website ? [1] : []
        content {
          test     = "StringNotEquals"
          variable = "aws:PrincipalType"
          values   = ["Anonymous"]
        }
      }
    }
  }

  dynamic "statement" {
    for_each = var.enable_cloudfront ? [1] : []
    content {
      sid     = "CloudFrontReadsSymbolsOnly"
      actions = ["s3:GetObject"]
      not_resources = [
        for p in local.private_prefixes : "${aws_s3_bucket.serving.arn}/${p}*"
      ]
      principals {
        type        = "Service"
        identifiers = ["cloudfront.amazonaws.com"]
      }
      condition {
        test     = "StringEquals"
        variable = "AWS:SourceArn"
        values   = [aws_cloudfront_distribution.symbols[0].arn]
      }
    }
  }

  # The audit page (audit.tf): its one key, under the private state prefix, for the edge to
  # show to the audit grant alone.
  dynamic "statement" {
    for_each = local.enable_audit ? [1] : []
    content {
      sid       = "CloudFrontReadsTheAuditPage"
      actions   = ["s3:GetObject"]
      resources = ["${aws_s3_bucket.serving.arn}/${local.audit_key}"]
      principals {
        type        = "Service"
        identifiers = ["cloudfront.amazonaws.com"]
      }
      condition {
        test     = "StringEquals"
        variable = "AWS:SourceArn"
        values   = [aws_cloudfront_distribution.symbols[0].arn]
      }
    }
  }

  # The compressed copies (cdn.tf), read through their keys only: the access function refuses
  # a viewer's path to them, and the bucket's behaviour asks for them under an origin path.
  dynamic "statement" {
    for_each = length(local.edge_encodings) > 0 ? [1] : []
    content {
      sid       = "CloudFrontReadsCompressedCopies"
      actions   = ["s3:GetObject"]
      resources = [for e in local.edge_encodings : "${aws_s3_bucket.serving.arn}/${local.encoded_prefix}${e}/*"]
      principals {
        type        = "Service"
        identifiers = ["cloudfront.amazonaws.com"]
      }
      condition {
        test     = "StringEquals"
        variable = "AWS:SourceArn"
        values   = [aws_cloudfront_distribution.symbols[0].arn]
      }
    }
  }

  # ListBucket lets S3 answer 404 (not 403) for a missing key; CloudFront's OAC needs it.
  dynamic "statement" {
    for_each = var.enable_cloudfront ? [1] : []
    content {
      sid       = "CloudFrontSees404s"
      actions   = ["s3:ListBucket"]
      resources = [aws_s3_bucket.serving.arn]
      principals {
        type        = "Service"
        identifiers = ["cloudfront.amazonaws.com"]
      }
      condition {
        test     = "StringEquals"
        variable = "AWS:SourceArn"
        values   = [aws_cloudfront_distribution.symbols[0].arn]
      }
    }
  }

  dynamic "statement" {
    for_each = var.enable_website ? [1] : []
    content {
      sid     = "WebsiteReadsSymbolsOnly"
      actions = ["s3:GetObject"]
      not_resources = [
        for p in local.private_prefixes : "${aws_s3_bucket.serving.arn}/${p}*"
      ]
      principals {
        type        = "*"
        identifiers = ["*"]
      }
    }
  }
}

resource "aws_s3_bucket_policy" "serving" {
  count      = var.require_tls || var.enable_cloudfront || var.enable_website ? 1 : 0
  bucket     = aws_s3_bucket.serving.id
  policy     = data.aws_iam_policy_document.serving.json
  depends_on = [aws_s3_bucket_public_access_block.serving]
}
