# Access control at the edge, each part optional: an IP allow-list and credentials (bearer
# tokens or HTTP basic) checked by one CloudFront Function (edge/access.js, tested under node)
# against a KeyValueStore holding SHA-256 hashes only. Put a reader's secret with
#   aws cloudfront-keyvaluestore put-key --kvs-arn <access_tokens_kvs_arn> \
#     --key "sha256:$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" --value reader \
#     --if-match <ETag from describe-key-value-store>
# (for basic credentials hash `user:password`).

locals {
  enable_access_function = var.enable_cloudfront && (var.require_auth || length(var.allowed_cidrs) > 0 || local.fold_case || var.audit_page)
  access_config = jsonencode({
    allowCidrs   = var.allowed_cidrs
    auth         = var.require_auth
    foldPrefixes = local.fold_prefixes
    kvsId        = var.require_auth ? aws_cloudfront_key_value_store.tokens[0].id : ""
    # The audit page's folder, for its own grant alone (audit.tf); null when off.
    audit = var.audit_page ? {
      prefix      = "/${local.audit_prefix}"
      tokenSha256 = var.audit_token_sha256 == null ? "" : lower(var.audit_token_sha256)
      cidrs       = var.audit_cidrs
    } : null
  })
}

resource "aws_cloudfront_key_value_store" "tokens" {
  count   = var.enable_cloudfront && var.require_auth ? 1 : 0
  name    = "${var.name}-tokens"
  comment = "symdex readers: sha256:<hex of token or user:password>"
}

resource "aws_cloudfront_function" "access" {
  count   = local.enable_access_function ? 1 : 0
  name    = "${var.name}-access"
  runtime = "cloudfront-js-2.0"
  comment = "symdex: IP allow-list, credentials, case-insensitive lookups, audit grant"
  publish = var.publish_edge_function
  code = replace(
    file("${path.module}/edge/access.js"),
    "/var CONFIG = .*;/",
    "var CONFIG = ${local.access_config};"
  )
  key_value_store_associations = var.require_auth ? [aws_cloudfront_key_value_store.tokens[0].arn] : []
}
