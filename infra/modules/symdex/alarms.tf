locals {
  alarm_queues = var.enable_alarms ? { events = aws_sqs_queue.events_dlq.name, removals = aws_sqs_queue.removals_dlq.name } : {}
  alarm_functions = merge(
    { indexer = aws_lambda_function.indexer.function_name, remover = aws_lambda_function.remover.function_name },
    { for f in aws_lambda_function.sweeper : "sweeper" => f.function_name },
  )
  function_alarms = var.enable_alarms ? {
    for pair in setproduct(keys(local.alarm_functions), ["Errors", "Throttles"]) :
    "${pair[0]}-${lower(pair[1])}" => { function = local.alarm_functions[pair[0]], metric = pair[1] }
  } : {}
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

# Errors and throttles of each function: one alarm per (function, metric).
resource "aws_cloudwatch_metric_alarm" "function" {
  for_each            = local.function_alarms
  alarm_name          = "${var.name}-${each.key}"
  namespace           = "AWS/Lambda"
  metric_name         = each.value.metric
  dimensions          = { FunctionName = each.value.function }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}

# Uploads whose keys were found holding other bytes (a conflict: another build, or another
# product, published those ids first): counted from the indexer's decision logs, and alarmed
# on, so a squatted or clashing id does not go unnoticed.
resource "aws_cloudwatch_log_metric_filter" "conflicts" {
  name           = "${var.name}-conflicts"
  log_group_name = aws_cloudwatch_log_group.indexer.name
  pattern        = "{ $.fields.message = \"decision\" && $.fields.action = \"conflict\" }"
  metric_transformation {
    name          = "Conflicts"
    namespace     = "symdex/${var.name}"
    value         = "1"
    default_value = "0"
  }
}

resource "aws_cloudwatch_metric_alarm" "conflicts" {
  count               = var.enable_alarms ? 1 : 0
  alarm_name          = "${var.name}-conflicts"
  alarm_description   = "An upload found its keys holding other bytes: `symdex manifest query --conflicts` (or the Athena query) says which, and who holds them."
  namespace           = "symdex/${var.name}"
  metric_name         = "Conflicts"
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}
