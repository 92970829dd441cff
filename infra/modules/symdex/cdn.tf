# CloudFront in front of the private serving bucket: origin access control, 404 (not 403) for
# misses, a short negative-cache TTL, symdex's own prefixes never served, (var.upstreams)
# other symbol servers behind the bucket in origin groups, (var.compress) compressed answers
# from the stored copies, and (var.cors) CORS.

locals {
  # One origin group per upstream: the serving bucket first, the upstream when the bucket
  # answers 403 (a missing key without ListBucket) or 404. CloudFront appends the whole request
  # path to an origin's path, so the origin path is the url's path without the prefix
  # (variables.tf checks the url's path ends with it): symbols/x/y/z reaches
  # https://msdl.microsoft.com/download + /symbols/x/y/z.
  upstreams = [
    for i, u in var.upstreams : {
      index     = i
      group_id  = "upstream-${i}"
      origin_id = "upstream-${i}-origin"
      prefix    = trim(u.path_prefix, "/")
      https     = startswith(u.url, "https://")
      host      = regex("^https?://([^/:]+)", u.url)[0]
      port      = try(tonumber(regex("^https?://[^/:]+:([0-9]+)", u.url)[0]), null)
      origin_path = trimsuffix(
        trimsuffix(try(regex("^https?://[^/]+(.*)$", u.url)[0], ""), "/"),
        trim(u.path_prefix, "/") == "" ? "" : "/${trim(u.path_prefix, "/")}"
      )
      # Whether the serving bucket can answer on this upstream's behaviour (its path and a
      # layout's key root overlap): then its aliases are honoured there (edge/response.js).
      holds_own_keys = trim(u.path_prefix, "/") == "" || anytrue([
        for root in local.layout_roots :
        startswith("${trim(u.path_prefix, "/")}/", "${trim(root, "/")}/") || startswith("${trim(root, "/")}/", "${trim(u.path_prefix, "/")}/")
      ])
    }
  ]
  # The default behaviour falls through when an upstream has the empty prefix.
  default_upstream   = [for u in local.upstreams : u if u.prefix == ""]
  prefixed_upstreams = [for u in local.upstreams : u if u.prefix != ""]

  # An upstream's answer is kept at the edge for at most this long, whatever its Cache-Control
  # says: a key the bucket misses now may be uploaded later, and until the cached answer
  # expires the upload is shadowed by it (the managed CachingOptimized policy keeps answers up
  # to a year).
  upstream_cache_seconds   = var.upstream_cache_max_ttl_hours * 3600
  upstream_cache_policy_id = var.upstream_cache_policy_id != null ? var.upstream_cache_policy_id : one(aws_cloudfront_cache_policy.upstream[*].id)

  # Compressed answers (compress, edge_compression), on the behaviour the serving bucket answers
  # alone: the default one, unless an upstream has the empty prefix. An upstream's behaviour
  # already targets an origin group (the bucket, then the upstream), and a group has two members:
  # a third, the copy, cannot be put in front, so keys there (and the bucket's keys under an
  # upstream's prefix) are answered identity. The access function's instance on that behaviour
  # picks the encoding per request, names it in the header x-symdex-encoding (the cache key
  # below), and makes an origin group for the request (cf.createRequestOriginGroup): the origin
  # of the copies in that encoding (the bucket under origin path /_symdex/encoded/<encoding>,
  # where the indexer stores the copy of key K as _symdex/encoded/<encoding>/K) first, the plain
  # bucket when it answers 403 or 404: CloudFront retries a failed-over request with the same
  # URI, so a key without a copy answers its raw bytes.
  encoded_prefix  = "_symdex/encoded/"
  edge_encodings  = var.enable_cloudfront && var.edge_compression && length(local.default_upstream) == 0 ? local.compress : []
  negotiate       = length(local.edge_encodings) > 0
  encoding_header = "x-symdex-encoding"
  serving_policy  = local.negotiate ? aws_cloudfront_cache_policy.serving[0].id : "658327ea-f89d-4fab-a63d-7e88639e58f6"
  allowed_methods = var.cors ? ["GET", "HEAD", "OPTIONS"] : ["GET", "HEAD"]
  # The response function's CONFIG on the serving bucket's behaviour: its answers vary by
  # encoding where it negotiates.
  serving_response = { redirects = true, maxAge = 86400, vary = local.negotiate, cors = local.cors_config }
}

# The serving bucket's behaviour with compressed answers: Managed-CachingOptimized's TTLs
# (symbols are immutable under their keys), but keyed on the encoding the access function
# chose instead of on Accept-Encoding (CloudFront's own normalisation knows gzip and br only,
# and would keep a zstd answer for viewers that cannot read it). The header is set on every
# request of that behaviour, whatever a viewer sent, so no viewer chooses another's answer.
resource "aws_cloudfront_cache_policy" "serving" {
  count       = local.negotiate ? 1 : 0
  name        = "${var.name}-serving"
  comment     = "symdex: own symbols, one answer per encoding (${local.encoding_header})"
  min_ttl     = 1
  default_ttl = 86400
  max_ttl     = 31536000
  parameters_in_cache_key_and_forwarded_to_origin {
    enable_accept_encoding_brotli = false
    enable_accept_encoding_gzip   = false
    cookies_config {
      cookie_behavior = "none"
    }
    headers_config {
      header_behavior = "whitelist"
      headers {
        items = [local.encoding_header]
      }
    }
    query_strings_config {
      query_string_behavior = "none"
    }
  }
}

resource "aws_cloudfront_cache_policy" "upstream" {
  count   = var.enable_cloudfront && length(var.upstreams) > 0 && var.upstream_cache_policy_id == null ? 1 : 0
  name    = "${var.name}-upstream"
  comment = "symdex: upstream answers kept at most ${var.upstream_cache_max_ttl_hours} h"
  min_ttl = 0
  # Without a Cache-Control of the upstream's: a day, as under CachingOptimized, or less.
  default_ttl = min(86400, local.upstream_cache_seconds)
  max_ttl     = local.upstream_cache_seconds
  # As CachingOptimized, but not even Accept-Encoding: no viewer header, cookie or query
  # string is in the cache key or reaches any origin (the behaviours do not compress).
  parameters_in_cache_key_and_forwarded_to_origin {
    enable_accept_encoding_brotli = false
    enable_accept_encoding_gzip   = false
    cookies_config {
      cookie_behavior = "none"
    }
    headers_config {
      header_behavior = "none"
    }
    query_strings_config {
      query_string_behavior = "none"
    }
  }
}

resource "aws_cloudfront_origin_access_control" "serving" {
  count                             = var.enable_cloudfront ? 1 : 0
  name                              = "${var.name}-serving"
  origin_access_control_origin_type = "s3"
  signing_behavior                  = "always"
  signing_protocol                  = "sigv4"
}

resource "aws_cloudfront_distribution" "symbols" {
  count               = var.enable_cloudfront ? 1 : 0
  enabled             = true
  comment             = "${var.name} symbol server"
  price_class         = "PriceClass_100"
  wait_for_deployment = false
  # "/" would otherwise be a ListBucket request (CloudFront may list): fetch a key that never
  # exists instead, so the root answers 404 and no listing is ever exposed.
  default_root_object = "index.html"
  # The team's own host names (with certificate_arn).
  aliases = var.domain_names

  origin {
    origin_id                = "serving"
    domain_name              = aws_s3_bucket.serving.bucket_regional_domain_name
    origin_access_control_id = aws_cloudfront_origin_access_control.serving[0].id
  }

  # The compressed copies, one origin per encoding (the access function chooses them per
  # request, with the plain bucket behind: the locals above).
  dynamic "origin" {
    for_each = local.edge_encodings
    content {
      origin_id                = "serving-${origin.value}"
      domain_name              = aws_s3_bucket.serving.bucket_regional_domain_name
      origin_path              = "/${local.encoded_prefix}${origin.value}"
      origin_access_control_id = aws_cloudfront_origin_access_control.serving[0].id
    }
  }

  # symdex's own prefixes are routed to a path of the bucket that never holds objects, so they
  # answer 404 like any miss (no edge function needed).
  origin {
    origin_id                = "unserved"
    domain_name              = aws_s3_bucket.serving.bucket_regional_domain_name
    origin_path              = "/_unserved"
    origin_access_control_id = aws_cloudfront_origin_access_control.serving[0].id
  }

  # Upstream symbol servers (custom origins, TLS 1.2, the url's port or the scheme's).
  dynamic "origin" {
    for_each = local.upstreams
    content {
      origin_id   = origin.value.origin_id
      domain_name = origin.value.host
      origin_path = origin.value.origin_path
      custom_origin_config {
        http_port              = origin.value.https ? 80 : coalesce(origin.value.port, 80)
        https_port             = origin.value.https ? coalesce(origin.value.port, 443) : 443
        origin_protocol_policy = origin.value.https ? "https-only" : "http-only"
        origin_ssl_protocols   = ["TLSv1.2"]
      }
    }
  }

  dynamic "origin_group" {
    for_each = local.upstreams
    content {
      origin_id = origin_group.value.group_id
      failover_criteria {
        status_codes = [403, 404]
      }
      member {
        origin_id = "serving"
      }
      member {
        origin_id = origin_group.value.origin_id
      }
    }
  }

  # The audit page's folder (audit.tf), before the private prefix it lies under: the serving
  # bucket (whose policy lets CloudFront read the page's key alone), never cached, behind the
  # access function, which admits the audit grant only.
  dynamic "ordered_cache_behavior" {
    for_each = local.enable_audit ? [local.audit_prefix] : []
    content {
      path_pattern               = "${ordered_cache_behavior.value}*"
      target_origin_id           = "serving"
      allowed_methods            = local.allowed_methods
      cached_methods             = ["GET", "HEAD"]
      viewer_protocol_policy     = "redirect-to-https"
      compress                   = true
      cache_policy_id            = local.caching_disabled_policy_id
      response_headers_policy_id = local.security_headers_policy_id
      function_association {
        event_type   = "viewer-request"
        function_arn = aws_cloudfront_function.access[0].arn
      }
    }
  }

  # Behaviours match in order: symdex's private prefixes come first, so no upstream (not even
  # the default behaviour's) is ever asked for them.
  dynamic "ordered_cache_behavior" {
    for_each = local.private_prefixes
    content {
      path_pattern           = "${ordered_cache_behavior.value}*"
      target_origin_id       = "unserved"
      allowed_methods        = local.allowed_methods
      cached_methods         = ["GET", "HEAD"]
      viewer_protocol_policy = "redirect-to-https"
      cache_policy_id        = "658327ea-f89d-4fab-a63d-7e88639e58f6"
      dynamic "function_association" {
        for_each = aws_cloudfront_function.access
        content {
          event_type   = "viewer-request"
          function_arn = function_association.value.arn
        }
      }
    }
  }

  # A build's sources (src/<product>/<build>/<path>, what Source Link and srcsrv URLs name):
  # the serving bucket alone, so no upstream is ever asked for them (the default behaviour
  # fails over to one on the empty prefix, and a miss would tell it a product's paths), with
  # the default behaviour's functions: the same access control as own symbols, on hits too,
  # and alias redirects. Before the upstreams' prefixes, so none shadows it.
  dynamic "ordered_cache_behavior" {
    for_each = var.enable_cloudfront ? [local.sources_prefix] : []
    content {
      path_pattern           = "${ordered_cache_behavior.value}*"
      target_origin_id       = "serving"
      allowed_methods        = local.allowed_methods
      cached_methods         = ["GET", "HEAD"]
      viewer_protocol_policy = "redirect-to-https"
      compress               = false
      cache_policy_id        = local.serving_policy
      dynamic "function_association" {
        for_each = local.negotiate ? aws_cloudfront_function.access_serving : aws_cloudfront_function.access
        content {
          event_type   = "viewer-request"
          function_arn = function_association.value.arn
        }
      }
      function_association {
        event_type   = "viewer-response"
        function_arn = aws_cloudfront_function.response[0].arn
      }
    }
  }

  # Each upstream's prefix: the same access function as own symbols (before the cache, on hits
  # too: an upstream's answers are as private as own symbols); the upstream cache policy (at
  # most upstream_cache_max_ttl_hours; no viewer header, cookie or query string reaches any
  # origin); the upstream's own instance of the response function (redirects only where the
  # bucket can answer, edge/response.js).
  dynamic "ordered_cache_behavior" {
    for_each = local.prefixed_upstreams
    content {
      path_pattern           = "${ordered_cache_behavior.value.prefix}/*"
      target_origin_id       = ordered_cache_behavior.value.group_id
      allowed_methods        = local.allowed_methods
      cached_methods         = ["GET", "HEAD"]
      viewer_protocol_policy = "redirect-to-https"
      compress               = false
      cache_policy_id        = local.upstream_cache_policy_id
      dynamic "function_association" {
        for_each = aws_cloudfront_function.access
        content {
          event_type   = "viewer-request"
          function_arn = function_association.value.arn
        }
      }
      function_association {
        event_type   = "viewer-response"
        function_arn = aws_cloudfront_function.response_upstream[ordered_cache_behavior.value.index].arn
      }
    }
  }

  default_cache_behavior {
    target_origin_id       = length(local.default_upstream) > 0 ? local.default_upstream[0].group_id : "serving"
    allowed_methods        = local.allowed_methods
    cached_methods         = ["GET", "HEAD"]
    viewer_protocol_policy = "redirect-to-https"
    # CloudFront's own compression would re-encode raw answers per request (gzip or br, only
    # of 1 KB to 10 MB); the stored copies are answered instead.
    compress = false
    # Managed-CachingOptimized, or with compressed answers its twin keyed on the encoding:
    # symbols are immutable under their keys. In front of an upstream (the empty prefix), the
    # upstream cache policy.
    cache_policy_id = length(local.default_upstream) > 0 ? local.upstream_cache_policy_id : local.serving_policy
    # Access control (access.tf) runs before the cache, on hits too; with compressed answers
    # the instance that also picks the encoding.
    dynamic "function_association" {
      for_each = local.negotiate ? aws_cloudfront_function.access_serving : aws_cloudfront_function.access
      content {
        event_type   = "viewer-request"
        function_arn = function_association.value.arn
      }
    }
    # Alias redirects and debuginfod's response headers (edge/response.js).
    function_association {
      event_type   = "viewer-response"
      function_arn = length(local.default_upstream) > 0 ? aws_cloudfront_function.response_upstream[local.default_upstream[0].index].arn : aws_cloudfront_function.response[0].arn
    }
  }

  # A miss may be uploaded a minute later: cache 404s only briefly.
  custom_error_response {
    error_code            = 404
    error_caching_min_ttl = var.negative_cache_ttl_seconds
  }

  dynamic "logging_config" {
    for_each = aws_s3_bucket.logs
    content {
      bucket          = logging_config.value.bucket_domain_name
      prefix          = "cloudfront/"
      include_cookies = false
    }
  }

  restrictions {
    geo_restriction {
      restriction_type = "none"
    }
  }

  # CloudFront's default certificate (*.cloudfront.net) accepts TLS 1.0 and cannot be held to
  # more; with a certificate of the team's own, viewers must speak minimum_protocol_version.
  viewer_certificate {
    cloudfront_default_certificate = var.certificate_arn == null
    acm_certificate_arn            = var.certificate_arn
    ssl_support_method             = var.certificate_arn == null ? null : "sni-only"
    minimum_protocol_version       = var.certificate_arn == null ? null : var.minimum_protocol_version
  }

  tags       = var.tags
  depends_on = [aws_s3_bucket_ownership_controls.logs]
}

# On the way out, on the serving bucket's behaviours: alias objects (SYMDEX_ALIASES=redirect)
# become 301s to the key holding the bytes (a path of this site only), X-Debuginfod-Size /
# X-Debuginfod-File (user metadata of every `buildid/` object, and of every compressed copy:
# the raw size) get their debuginfod names, answers say Vary: Accept-Encoding where the
# behaviour negotiates, and CORS headers with cors on.
resource "aws_cloudfront_function" "response" {
  count   = var.enable_cloudfront ? 1 : 0
  name    = "${var.name}-response"
  runtime = "cloudfront-js-2.0"
  comment = "symdex: alias redirects, debuginfod response headers, Vary, CORS"
  publish = var.publish_edge_function
  code = replace(
    local.edge_source["response"],
    "/var CONFIG = .*;/",
    "var CONFIG = ${jsonencode(local.serving_response)};"
  )
}

# The same function for each upstream's behaviour, its CONFIG line replaced: redirects only
# where the serving bucket can answer (edge/response.js says why), and viewers keep a 301 no
# longer than the edge keeps an upstream's answer.
resource "aws_cloudfront_function" "response_upstream" {
  count   = var.enable_cloudfront ? length(local.upstreams) : 0
  name    = "${var.name}-response-upstream-${count.index}"
  runtime = "cloudfront-js-2.0"
  comment = "symdex: the response function on upstream ${count.index}'s behaviour"
  publish = var.publish_edge_function
  code = replace(
    local.edge_source["response"],
    "/var CONFIG = .*;/",
    "var CONFIG = ${jsonencode({ redirects = local.upstreams[count.index].holds_own_keys, maxAge = min(86400, local.upstream_cache_seconds), vary = false, cors = local.cors_config })};"
  )
}
