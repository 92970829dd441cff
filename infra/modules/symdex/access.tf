# Access control at the edge, each part optional: an IP allow-list and credentials (bearer
# tokens or HTTP basic) checked by one CloudFront Function (edge/access.js, tested under node)
# against a KeyValueStore holding SHA-256 hashes only. Put a reader's secret with
#   aws cloudfront-keyvaluestore put-key --kvs-arn <access_tokens_kvs_arn> \
#     --key "sha256:$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" --value reader \
#     --if-match <ETag from describe-key-value-store>
# (for basic credentials hash `user:password`).

locals {
  # Also wherever the edge negotiates encodings or answers CORS preflights: on every behaviour,
  # so that no path reaches a compressed copy directly and every behaviour answers preflights.
  enable_access_function = var.enable_cloudfront && (var.require_auth || length(var.allowed_cidrs) > 0 || local.fold_case || var.audit_page || local.negotiate || var.cors)
  # The CONFIG of every instance but the serving bucket's own behaviour's (cdn.tf), which
  # negotiates encodings too.
  access_settings = {
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
    encodings = []
    cors      = local.cors_config
  }
  cors_config = var.cors ? { origins = [for o in var.cors_origins : lower(o)] } : null
  access_config = {
    others  = local.access_settings
    serving = merge(local.access_settings, { encodings = local.edge_encodings })
  }
  # CloudFront Functions take at most 10 KB of code: each function is deployed without its
  # comment lines and indentation (edge/harness.mjs's deployed() is this expression, and
  # edge/size.test.mjs checks the sizes).
  edge_source = {
    for f in ["access", "response"] : f => replace(file("${path.module}/edge/${f}.js"), "/(?m)^[ \t]*(//.*)?\n?/", "")
  }
  # The access function's code, and its size with the token store's id (known once the store
  # exists) as long as any: what the plan can check against CloudFront's limit.
  access_code = {
    for k, config in local.access_config : k => replace(local.edge_source["access"], "/var CONFIG = .*;/", "var CONFIG = ${jsonencode(config)};")
  }
  access_code_size = {
    for k, config in local.access_config : k => length(replace(local.edge_source["access"], "/var CONFIG = .*;/", "var CONFIG = ${jsonencode(merge(config, { kvsId = var.require_auth ? "00000000-0000-0000-0000-000000000000" : "" }))};"))
  }
}

resource "aws_cloudfront_key_value_store" "tokens" {
  count   = var.enable_cloudfront && var.require_auth ? 1 : 0
  name    = "${var.name}-tokens"
  comment = "symdex readers: sha256:<hex of token or user:password>"
}

resource "aws_cloudfront_function" "access" {
  count                        = local.enable_access_function ? 1 : 0
  name                         = "${var.name}-access"
  runtime                      = "cloudfront-js-2.0"
  comment                      = "symdex: IP allow-list, credentials, case-insensitive lookups, audit grant, CORS"
  publish                      = var.publish_edge_function
  code                         = local.access_code["others"]
  key_value_store_associations = var.require_auth ? [aws_cloudfront_key_value_store.tokens[0].arn] : []
  lifecycle {
    precondition {
      condition     = local.access_code_size["others"] <= 10240
      error_message = "The access function would be ${local.access_code_size["others"]} bytes, over CloudFront's 10 KB: allowed_cidrs, audit_cidrs and cors_origins are part of its code; list fewer (wider networks)."
    }
  }
}

# The same function on the serving bucket's own behaviour (cdn.tf), which also picks the
# compressed copy for each request (CONFIG.encodings; edge/access.js says how). Its own
# instance because a function cannot tell which behaviour it runs on: the others must keep
# their origin (an upstream's origin group, the unserved path, the audit page).
resource "aws_cloudfront_function" "access_serving" {
  count                        = local.enable_access_function && local.negotiate ? 1 : 0
  name                         = "${var.name}-access-serving"
  runtime                      = "cloudfront-js-2.0"
  comment                      = "symdex: the access function with Accept-Encoding negotiation, on the serving bucket's behaviour"
  publish                      = var.publish_edge_function
  code                         = local.access_code["serving"]
  key_value_store_associations = var.require_auth ? [aws_cloudfront_key_value_store.tokens[0].arn] : []
  lifecycle {
    precondition {
      condition     = local.access_code_size["serving"] <= 10240
      error_message = "The access function would be ${local.access_code_size["serving"]} bytes, over CloudFront's 10 KB: allowed_cidrs, audit_cidrs and cors_origins are part of its code; list fewer (wider networks)."
    }
  }
}
