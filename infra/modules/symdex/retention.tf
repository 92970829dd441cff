# Retention: the sweeper function, run by an EventBridge schedule, removes uploads whose
# retention (SYMDEX_RETENTION, by channel) has passed, through the reference-counted delete,
# and deletes their ingest object versions. One run at a time (reserved concurrency 1); each
# run examines a bounded page of upload records and resumes where the last one stopped.

locals {
  enable_sweeper = var.sweeper_zip != null
}

resource "aws_cloudwatch_log_group" "sweeper" {
  count             = local.enable_sweeper ? 1 : 0
  name              = "/aws/lambda/${var.name}-sweeper"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_iam_role" "sweeper" {
  count              = local.enable_sweeper ? 1 : 0
  name               = "${var.name}-sweeper"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

data "aws_iam_policy_document" "sweeper" {
  count = local.enable_sweeper ? 1 : 0
  # Unpublishing expired keys, listing upload records (iam.tf).
  source_policy_documents = [data.aws_iam_policy_document.unpublish.json]
  statement {
    sid       = "DeleteExpiredIngestVersions"
    actions   = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    resources = ["${aws_s3_bucket.ingest.arn}/*"]
  }
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.sweeper[0].arn}:*"]
  }
}

resource "aws_iam_role_policy" "sweeper" {
  count  = local.enable_sweeper ? 1 : 0
  name   = "${var.name}-sweeper"
  role   = aws_iam_role.sweeper[0].id
  policy = data.aws_iam_policy_document.sweeper[0].json
}

resource "aws_lambda_function" "sweeper" {
  count                          = local.enable_sweeper ? 1 : 0
  function_name                  = "${var.name}-sweeper"
  role                           = aws_iam_role.sweeper[0].arn
  filename                       = var.sweeper_zip
  source_code_hash               = filebase64sha256(var.sweeper_zip)
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  memory_size                    = var.remover_memory_mb
  timeout                        = var.timeout_seconds
  reserved_concurrent_executions = 1
  environment {
    variables = merge(local.function_env, {
      SYMDEX_SWEEP_MAX_UPLOADS = tostring(var.sweep_max_uploads)
      # After each run, the audit page to _symdex/audit/index.html (audit.tf).
      SYMDEX_AUDIT_PAGE = tostring(local.enable_audit)
    })
  }
  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.sweeper[0].name
  }
  tags       = var.tags
  depends_on = [aws_iam_role_policy.sweeper]
}

resource "aws_cloudwatch_event_rule" "sweeper" {
  count               = local.enable_sweeper ? 1 : 0
  name                = "${var.name}-sweeper"
  description         = "symdex: remove uploads whose retention has passed"
  schedule_expression = var.sweep_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "sweeper" {
  count = local.enable_sweeper ? 1 : 0
  rule  = aws_cloudwatch_event_rule.sweeper[0].name
  arn   = aws_lambda_function.sweeper[0].arn
}

resource "aws_lambda_permission" "sweeper" {
  count         = local.enable_sweeper ? 1 : 0
  statement_id  = "AllowEventBridgeSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.sweeper[0].function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.sweeper[0].arn
}

# Upload permissions for CI: one policy per product, allowing uploads only under that
# product's prefix of the ingest bucket. With enforce_product_prefixes the indexer also
# rejects uploads whose `product` metadata names another product. What `symdex push --wait`
# needs besides: its own uploads read back and listed (a re-run sends only what is missing),
# published keys looked at (what is served already is not sent; `--wait` checks keys are
# live), and the manifest listed and read (each upload's outcome). Nothing else is listed.
data "aws_iam_policy_document" "ci_upload" {
  for_each = toset(var.ci_products)
  statement {
    sid       = "UploadUnderOwnProduct"
    actions   = ["s3:PutObject", "s3:AbortMultipartUpload"]
    resources = ["${aws_s3_bucket.ingest.arn}/${each.value}/*"]
  }
  statement {
    sid       = "ReadOwnUploads"
    actions   = ["s3:GetObject"]
    resources = ["${aws_s3_bucket.ingest.arn}/${each.value}/*"]
  }
  statement {
    sid       = "ListOwnUploads"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.ingest.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${each.value}/*"]
    }
  }
  statement {
    sid     = "ReadPublishedAndManifest"
    actions = ["s3:GetObject"]
    resources = concat(
      [for root in local.layout_roots : "${aws_s3_bucket.serving.arn}/${root}*" if root != ""],
      ["${aws_s3_bucket.serving.arn}/${trim(var.manifest_prefix, "/")}/*"]
    )
  }
  statement {
    sid       = "ListManifest"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.serving.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${trim(var.manifest_prefix, "/")}/*"]
    }
  }
  statement {
    sid       = "DeleteOwnUploads"
    actions   = ["s3:DeleteObject"]
    resources = ["${aws_s3_bucket.ingest.arn}/${each.value}/*"]
  }
}
