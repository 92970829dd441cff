locals {
  alarm_queues    = var.enable_alarms ? { events = aws_sqs_queue.events_dlq.name, removals = aws_sqs_queue.removals_dlq.name } : {}
  alarm_functions = var.enable_alarms ? { indexer = aws_lambda_function.indexer.function_name, remover = aws_lambda_function.remover.function_name } : {}
}

resource "aws_cloudwatch_metric_alarm" "dlq_depth" {
  for_each            = local.alarm_queues
  alarm_name          = "${var.name}-${each.key}-dlq-not-empty"
  alarm_description   = "Messages symdex could not process after ${var.max_receive_count} tries: see the function's logs."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.value }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each            = local.alarm_functions
  alarm_name          = "${var.name}-${each.key}-errors"
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = each.value }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "function_throttles" {
  for_each            = local.alarm_functions
  alarm_name          = "${var.name}-${each.key}-throttles"
  namespace           = "AWS/Lambda"
  metric_name         = "Throttles"
  dimensions          = { FunctionName = each.value }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}
