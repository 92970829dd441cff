# ObjectCreated -> events queue -> indexer; ObjectRemoved -> removals queue -> remover.
# Each queue has a dead-letter queue: a message failing max_receive_count times lands there.

resource "aws_sqs_queue" "events_dlq" {
  name                      = "${var.name}-events-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue" "events" {
  name                       = "${var.name}-events"
  visibility_timeout_seconds = var.timeout_seconds * 6
  message_retention_seconds  = 345600
  sqs_managed_sse_enabled    = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.events_dlq.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

resource "aws_sqs_queue" "removals_dlq" {
  name                      = "${var.name}-removals-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue" "removals" {
  name                       = "${var.name}-removals"
  visibility_timeout_seconds = var.timeout_seconds * 6
  sqs_managed_sse_enabled    = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.removals_dlq.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

data "aws_iam_policy_document" "s3_sends" {
  for_each = {
    events   = aws_sqs_queue.events.arn
    removals = aws_sqs_queue.removals.arn
  }
  statement {
    actions   = ["sqs:SendMessage"]
    resources = [each.value]
    principals {
      type        = "Service"
      identifiers = ["s3.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_s3_bucket.ingest.arn]
    }
    # Bucket names are global: the bucket must also be this account's (a deleted bucket's
    # name taken by another account cannot send).
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

data "aws_caller_identity" "current" {}

resource "aws_sqs_queue_policy" "events" {
  queue_url = aws_sqs_queue.events.id
  policy    = data.aws_iam_policy_document.s3_sends["events"].json
}

resource "aws_sqs_queue_policy" "removals" {
  queue_url = aws_sqs_queue.removals.id
  policy    = data.aws_iam_policy_document.s3_sends["removals"].json
}
