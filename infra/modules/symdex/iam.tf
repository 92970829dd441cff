# Least privilege: the indexer reads the ingest bucket and writes only the serving layouts, the
# manifest and its reference records; only the remover (and the sweeper) deletes serving
# objects, reading the ingest bucket to hand freed keys over; no function but the sweeper
# (expired versions) deletes ingest objects, and none writes them.

locals {
  default_prefixes = {
    ssqp            = "symbols/"
    symstore        = "symbols/"
    breakpad        = "symbols/"
    symstore_index2 = "index2/"
    debuginfod      = ""
    unified         = "unified/"
    gdb             = "gdb/"
    lldb            = "lldb/"
  }
  layout_prefixes = merge(local.default_prefixes, var.layout_prefixes)
  # Key roots each enabled layout writes under (debuginfod's keys start with buildid/).
  layout_roots = distinct([
    for layout in var.layouts :
    local.layout_prefixes[layout] != "" ? local.layout_prefixes[layout] : (layout == "debuginfod" ? "buildid/" : "")
  ])
  # A build's sources are published under their own root (main.tf's sources_prefix).
  writable_roots = distinct(concat(local.layout_roots, [local.sources_prefix], local.private_prefixes))
  writable_objects = contains(local.writable_roots, "") ? ["${aws_s3_bucket.serving.arn}/*"] : [
    for root in local.writable_roots : "${aws_s3_bucket.serving.arn}/${root}*"
  ]
}

data "aws_iam_policy_document" "assume_lambda" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "indexer" {
  name               = "${var.name}-indexer"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

resource "aws_iam_role" "remover" {
  name               = "${var.name}-remover"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = var.tags
}

data "aws_iam_policy_document" "indexer" {
  # The audit page's folder is the sweeper's alone (audit.tf): no other function writes there.
  statement {
    sid       = "NeverTheAuditPage"
    effect    = "Deny"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.serving.arn}/${local.audit_prefix}*"]
  }
  statement {
    sid       = "ReadIngest"
    actions   = ["s3:GetObject", "s3:GetObjectVersion"]
    resources = ["${aws_s3_bucket.ingest.arn}/*"]
  }
  statement {
    sid = "WriteServingLayoutsManifestAndReferences"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:AbortMultipartUpload",
    ]
    resources = local.writable_objects
  }
  statement {
    sid       = "HeadMissingKeysAs404"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.serving.arn, aws_s3_bucket.ingest.arn]
  }
  statement {
    sid       = "ConsumeEvents"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"]
    resources = [aws_sqs_queue.events.arn]
  }
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.indexer.arn}:*"]
  }
}

# What unpublishing needs: the remover's and the sweeper's (retention.tf) common part. A key
# an upload frees is handed to the uploads waiting for it (another upload's other bytes were
# there), which are indexed again from their ingest objects (refs/, invariant 8): read, and
# a gone one answered 404 (ListBucket), not 403.
data "aws_iam_policy_document" "unpublish" {
  statement {
    sid       = "UnpublishServingKeys"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = local.writable_objects
  }
  statement {
    sid       = "ReindexWaitingUploads"
    actions   = ["s3:GetObject", "s3:GetObjectVersion"]
    resources = ["${aws_s3_bucket.ingest.arn}/*"]
  }
  statement {
    sid       = "HeadMissingKeysAs404"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.serving.arn, aws_s3_bucket.ingest.arn]
  }
}

data "aws_iam_policy_document" "remover" {
  source_policy_documents = [data.aws_iam_policy_document.unpublish.json]
  # The audit page's folder is the sweeper's alone (audit.tf): no other function writes there.
  statement {
    sid       = "NeverTheAuditPage"
    effect    = "Deny"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.serving.arn}/${local.audit_prefix}*"]
  }
  statement {
    sid       = "ConsumeRemovals"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"]
    resources = [aws_sqs_queue.removals.arn]
  }
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.remover.arn}:*"]
  }
}

resource "aws_iam_role_policy" "indexer" {
  name   = "${var.name}-indexer"
  role   = aws_iam_role.indexer.id
  policy = data.aws_iam_policy_document.indexer.json
}

resource "aws_iam_role_policy" "remover" {
  name   = "${var.name}-remover"
  role   = aws_iam_role.remover.id
  policy = data.aws_iam_policy_document.remover.json
}
