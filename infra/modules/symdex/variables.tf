variable "name" {
  description = "Name prefix of every resource (buckets get it too, so keep it DNS-safe)."
  type        = string
  default     = "symdex"
}

variable "ingest_bucket_name" {
  description = "Ingest bucket name; default <name>-ingest."
  type        = string
  default     = null
}

variable "serving_bucket_name" {
  description = "Serving bucket name; default <name>-serving."
  type        = string
  default     = null
}

variable "indexer_zip" {
  description = "Path of the indexer bootstrap zip (make lambda)."
  type        = string
}

variable "remover_zip" {
  description = "Path of the remover bootstrap zip (make lambda)."
  type        = string
}

variable "sweeper_zip" {
  description = "Path of the sweeper bootstrap zip (make lambda); null: no sweeper, nothing expires."
  type        = string
  default     = null
}

variable "retention_policy" {
  description = "Retention per upload channel (x-amz-meta-channel or a channel= key segment); uploads without a channel, or of a channel not named, never expire."
  type        = string
  default     = "try=28d,nightly=90d,release=forever"
  validation {
    condition     = can(regex("^\\s*([A-Za-z0-9._-]+\\s*=\\s*([0-9]+[smhdwy]|forever)\\s*(,\\s*|$))*$", var.retention_policy))
    error_message = "retention_policy is CHANNEL=RETENTION,... with RETENTION like 28d, 12h, 2w, 1y or forever."
  }
}

variable "sweep_schedule" {
  description = "EventBridge schedule of the sweeper."
  type        = string
  default     = "rate(15 minutes)"
}

variable "sweep_max_uploads" {
  description = "Upload records the sweeper examines per run (the rest in later runs)."
  type        = number
  default     = 2000
}

variable "ci_products" {
  description = "Products whose CI may upload: one IAM policy each (output ci_upload_policies), writes limited to <product>/ in the ingest bucket."
  type        = list(string)
  default     = []
}

variable "enforce_product_prefixes" {
  description = "Reject uploads whose product metadata differs from their key's first segment (SYMDEX_PRODUCT_PREFIXES). Required with ci_products."
  type        = bool
  default     = false
  # Without it a CI role limited to A/ still names its uploads' product in their metadata or a
  # product= key segment, and so joins product B's scope (THREATS.md, tenancy).
  validation {
    condition     = var.enforce_product_prefixes || length(var.ci_products) == 0
    error_message = "ci_products gives each product's CI a role that writes only under its prefix, but without enforce_product_prefixes = true an upload's product metadata (x-amz-meta-product, a product= key segment) may name another product and join its source scope: set enforce_product_prefixes = true."
  }
}

variable "allowed_cidrs" {
  description = "If set, only these viewer networks (IPv4/IPv6 CIDRs) may read symbols through CloudFront."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.allowed_cidrs : can(cidrhost(c, 0))])
    error_message = "allowed_cidrs must be CIDR blocks, e.g. 203.0.113.0/24 or 2001:db8::/32."
  }
  validation {
    condition     = length(var.allowed_cidrs) == 0 || var.enable_cloudfront
    error_message = "allowed_cidrs is enforced by CloudFront's access function: it needs enable_cloudfront = true (without CloudFront it would protect nothing)."
  }
}

variable "require_auth" {
  description = "Require a bearer token or basic credentials (hashes in the access_tokens KeyValueStore) for every read through CloudFront."
  type        = bool
  default     = false
  validation {
    condition     = !var.require_auth || var.enable_cloudfront
    error_message = "require_auth is enforced by CloudFront's access function: it needs enable_cloudfront = true (without CloudFront it would protect nothing)."
  }
}

variable "publish_edge_function" {
  description = "Publish the access function to LIVE (CloudFront runs only published functions; false only for test endpoints without PublishFunction, such as moto_server)."
  type        = bool
  default     = true
}

variable "architecture" {
  description = "Lambda architecture: arm64 (default) or x86_64."
  type        = string
  default     = "arm64"
  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

variable "layouts" {
  description = "Key layouts to publish (SYMDEX_LAYOUTS)."
  type        = list(string)
  default     = ["ssqp", "symstore", "symstore_index2", "breakpad", "debuginfod", "unified", "gdb", "lldb"]
}

variable "layout_prefixes" {
  description = "Key prefix per layout (SYMDEX_PREFIX_<LAYOUT>); unset layouts keep symdex's defaults."
  type        = map(string)
  default     = {}
  validation {
    # Every function's write grant is the layouts' prefixes: an empty one is the whole bucket
    # (debuginfod's keys start with buildid/ of their own, so its prefix may be empty).
    condition = alltrue([
      for layout, prefix in var.layout_prefixes : layout == "debuginfod" || trim(prefix, "/") != ""
    ])
    error_message = "layout_prefixes: a layout's prefix may not be empty (only debuginfod's, whose keys start with buildid/): it would grant every function writes to the whole serving bucket."
  }
  validation {
    condition = alltrue([
      for prefix in values(var.layout_prefixes) : trim(prefix, "/") == "" || (
        !startswith("${trim(prefix, "/")}/", "${trim(var.manifest_prefix, "/")}/") &&
        !startswith("${trim(prefix, "/")}/", "${trim(var.state_prefix, "/")}/")
      )
    ])
    error_message = "layout_prefixes: a layout's prefix may not lie under the private manifest_prefix or state_prefix (never served, and its records would mix with the keys)."
  }
  validation {
    # src/ holds builds' sources: case-sensitive paths, which a SymSrv layout's folded
    # (lowercased) keys would not be.
    condition = alltrue([
      for prefix in values(var.layout_prefixes) : trim(prefix, "/") == "" || (
        !startswith("${trim(prefix, "/")}/", "src/") && !startswith("src/", "${trim(prefix, "/")}/")
      )
    ])
    error_message = "layout_prefixes: a layout's prefix may not overlap src/, where builds' sources are served (src/<product>/<build>/<path>)."
  }
}

variable "manifest_prefix" {
  description = "Prefix of the manifest in the serving bucket (never served)."
  type        = string
  default     = "_manifest"
}

variable "state_prefix" {
  description = "Prefix of symdex's reference records in the serving bucket (never served)."
  type        = string
  default     = "_symdex"
}

variable "indexer_memory_mb" {
  type    = number
  default = 512
}

variable "indexer_ephemeral_storage_mb" {
  description = "The indexer's /tmp (512-10240 MB): archive entries over 4 MiB are expanded there, and a published file's compressed copy (compress) over 1 MiB is staged there before its upload (copies of smaller files are staged in memory), one of each per message in flight (message_concurrency), so it bounds the largest entry indexed and the largest file compressed."
  type        = number
  default     = 4096
  validation {
    condition     = var.indexer_ephemeral_storage_mb >= 512 && var.indexer_ephemeral_storage_mb <= 10240
    error_message = "Lambda ephemeral storage is 512 to 10240 MB."
  }
}

variable "archive_max_entry_bytes" {
  description = "Largest archive entry indexed (larger ones are rejected with the reason). Keep it below indexer_ephemeral_storage_mb / message_concurrency."
  type        = number
  default     = 1073741824
}

variable "archive_max_expanded_bytes" {
  description = "Bytes one archive may expand to in all (the rest of it is rejected)."
  type        = number
  default     = 68719476736
}

variable "archive_max_ratio" {
  description = "Largest expansion ratio of an archive entry and of a whole archive."
  type        = number
  default     = 1000
}

variable "archive_max_entries" {
  description = "Most entries indexed from one archive."
  type        = number
  default     = 1000000
}

variable "compress" {
  description = "Encodings of the compressed copies the indexer stores beside each published file worth it (at least 1 KiB, shrinking by a quarter or more) under _symdex/encoded/<encoding>/ (SYMDEX_COMPRESS): \"zstd\" and/or \"gzip\"; [] stores none. Behind CloudFront the serving bucket's own behaviour answers them to viewers whose Accept-Encoding takes them (output compression; docs/deploy.md, compressed answers: what they cost and save)."
  type        = list(string)
  default     = ["zstd"]
  validation {
    condition     = alltrue([for e in var.compress : contains(["zstd", "gzip"], e)])
    error_message = "compress: ${join(", ", [for e in var.compress : jsonencode(e) if !contains(["zstd", "gzip"], e)])} is not an encoding symdex stores: list \"zstd\" and/or \"gzip\" ([] stores no copies)."
  }
}

variable "edge_compression" {
  description = "Behind CloudFront, answer the compressed copies (compress) to viewers that accept them. false: the copies are still made, every answer is identity (before turning compressed answers on for a deployment, say, or for test endpoints without the cache-policy API, such as moto_server)."
  type        = bool
  default     = true
}

variable "remover_memory_mb" {
  type    = number
  default = 256
}

variable "timeout_seconds" {
  description = "Function timeout; the queue's visibility timeout is six times this."
  type        = number
  default     = 120
}

variable "decoder_memory_mb" {
  description = "Memory the archive decoders (xz, lzip, zstd, 7z, zip's LZMA and PPMd) of the messages in flight take at once (SYMDEX_DECODER_MEMORY_MB): a walk over it waits for the decoders before it, so that several large archives in one batch cannot take more than the function has. null: half of indexer_memory_mb."
  type        = number
  default     = null
  validation {
    condition     = var.decoder_memory_mb == null ? true : var.decoder_memory_mb >= 16
    error_message = "decoder_memory_mb is at least 16 (or null: half of indexer_memory_mb)."
  }
}

variable "message_concurrency" {
  description = "Messages of one SQS batch an invocation processes at once (SYMDEX_CONCURRENCY)."
  type        = number
  default     = 4
  validation {
    condition     = var.message_concurrency >= 1 && var.message_concurrency <= 64
    error_message = "message_concurrency must be between 1 and 64."
  }
}

variable "batch_size" {
  description = "SQS messages per invocation."
  type        = number
  default     = 10
}

variable "reserved_concurrency" {
  description = "Reserved concurrency of the indexer (null: unreserved)."
  type        = number
  default     = null
}

variable "max_receive_count" {
  description = "Deliveries before a message goes to the dead-letter queue."
  type        = number
  default     = 5
}

variable "noncurrent_version_retention_days" {
  description = "Days old ingest object versions are kept."
  type        = number
  default     = 30
}

variable "log_retention_days" {
  type    = number
  default = 30
}

variable "manifest_retention_days" {
  description = "Days manifest objects are kept (0: forever)."
  type        = number
  default     = 0
}

variable "multipart_threshold_bytes" {
  type    = number
  default = 5368709120
}

variable "enable_cloudfront" {
  description = "Serve through CloudFront with origin access control (recommended)."
  type        = bool
  default     = true
}

variable "aliases" {
  description = "How an artifact's keys after the first are stored (SYMDEX_ALIASES): \"redirect\" (zero-byte objects redirecting to the first, one stored copy; answered as 301s by the CDN's viewer-response function and the S3 website endpoint) or \"copy\" (full copies, for buckets read through the plain REST endpoint). Default: redirect behind CloudFront or the website endpoint, else copy."
  type        = string
  default     = null
  validation {
    condition     = var.aliases == null || contains(["copy", "redirect"], coalesce(var.aliases, "copy"))
    error_message = "aliases is \"copy\" or \"redirect\"."
  }
}

variable "source_joins" {
  description = "Join debug files and uploaded sources for debuginfod's source requests (SYMDEX_SOURCE_JOINS). false for a deployment nobody uploads sources to: a debug file then costs no source-join records (one or two S3 requests for each record its source paths fall into, up to 256 per build)."
  type        = bool
  default     = true
}

variable "refuse_srcsrv_commands" {
  description = "Reject PDBs whose srcsrv stream runs commands (SRCSRVCMD), which debuggers execute on the developer's machine to fetch sources (SYMDEX_REFUSE_SRCSRV_COMMANDS). false: they are published and their manifest records say they run commands."
  type        = bool
  default     = false
}

variable "case_insensitive_lookups" {
  description = "Behind CloudFront: requests under the SymSrv family's prefixes (ssqp, symstore, symstore_index2, breakpad; default symbols/ and index2/) are lowercased at the edge and those keys are stored lowercase (SYMDEX_FOLD_CASE), so any casing resolves, as SymSrv over IIS does."
  type        = bool
  default     = true
}

variable "enable_website" {
  description = "Also (or instead) serve as an S3 static website (public read of the layout prefixes; misses answer 403 there, CloudFront answers 404)."
  type        = bool
  default     = false
  validation {
    condition     = !var.enable_website || (!var.require_auth && length(var.allowed_cidrs) == 0)
    error_message = "enable_website makes the serving bucket's symbols publicly readable (website and REST endpoints alike), which would bypass require_auth and allowed_cidrs: turn the website off for a private deployment."
  }
}

variable "enable_access_logs" {
  description = "CloudFront standard access logs to a <serving>-logs bucket (and an Athena table over them)."
  type        = bool
  default     = true
}

variable "access_log_retention_days" {
  description = "Days access logs are kept."
  type        = number
  default     = 90
}

variable "negative_cache_ttl_seconds" {
  description = "How long CloudFront caches a 404 (a symbol may be uploaded soon after a miss)."
  type        = number
  default     = 30
}

variable "enable_athena" {
  description = "Glue table (partition projection) and Athena workgroup with named audit queries."
  type        = bool
  default     = true
}

variable "enable_alarms" {
  type    = bool
  default = true
}

variable "alarm_actions" {
  description = "SNS topic ARNs (or other actions) notified by the alarms."
  type        = list(string)
  default     = []
}

variable "require_tls" {
  description = "Deny non-TLS requests to both buckets (turn off only for plain-HTTP test endpoints)."
  type        = bool
  default     = true
}

variable "tags" {
  type    = map(string)
  default = {}
}

variable "certificate_arn" {
  description = "An ACM certificate (us-east-1) for domain_names; with it, viewers must speak minimum_protocol_version (CloudFront's default certificate allows TLS 1.0)."
  type        = string
  default     = null
}

variable "domain_names" {
  description = "Host names the distribution answers for (needs certificate_arn)."
  type        = list(string)
  default     = []
  validation {
    condition     = length(var.domain_names) == 0 || var.certificate_arn != null
    error_message = "domain_names need a certificate_arn (an ACM certificate in us-east-1 covering them)."
  }
}

variable "minimum_protocol_version" {
  description = "The oldest TLS CloudFront accepts from viewers, with certificate_arn (e.g. TLSv1.2_2021)."
  type        = string
  default     = "TLSv1.2_2021"
  validation {
    condition     = contains(["TLSv1.2_2018", "TLSv1.2_2019", "TLSv1.2_2021", "TLSv1.3_2025"], var.minimum_protocol_version)
    error_message = "minimum_protocol_version is one of TLSv1.2_2018, TLSv1.2_2019, TLSv1.2_2021, TLSv1.3_2025."
  }
}

variable "cors" {
  description = "Let web pages on other origins (cors_origins) fetch symbols through CloudFront and read debuginfod's headers: a preflight OPTIONS is answered 204 at the edge without credentials (browsers send none), with Access-Control-Allow-Methods GET, HEAD, OPTIONS and Allow-Headers Authorization, Range, X-DEBUGINFOD-MAXSIZE; every answer names the allowed origin and exposes X-Debuginfod-Size, X-Debuginfod-File, X-Debuginfod-Archive and Content-Encoding. Reads keep their access control (require_auth, allowed_cidrs; the allow-list applies to preflights too)."
  type        = bool
  default     = false
  validation {
    condition     = !var.cors || var.enable_cloudfront
    error_message = "cors is answered by CloudFront's functions: it needs enable_cloudfront = true."
  }
}

variable "cors_origins" {
  description = "The origins (scheme://host[:port]) whose pages may read symbols with cors on; [\"*\"] (the default): any page. With a list, a viewer's Origin is named back when listed, and answers say Vary: Origin."
  type        = list(string)
  default     = ["*"]
  validation {
    condition = length(var.cors_origins) > 0 && alltrue([
      for o in var.cors_origins : o == "*" || can(regex("^(?i)https?://[a-z0-9-]+(\\.[a-z0-9-]+)*(:[0-9]{1,5})?$", o))
    ])
    error_message = "cors_origins: each is an origin as browsers send it, scheme://host[:port] with no path or trailing slash (https://profiler.example.com, http://localhost:8080), or [\"*\"] for any; not ${jsonencode([for o in var.cors_origins : o if !(o == "*" || can(regex("^(?i)https?://[a-z0-9-]+(\\.[a-z0-9-]+)*(:[0-9]{1,5})?$", o)))])}."
  }
  validation {
    condition     = !contains(var.cors_origins, "*") || length(var.cors_origins) == 1
    error_message = "cors_origins: \"*\" allows every origin; list it alone, or list the origins without it."
  }
}

variable "upstreams" {
  description = "Other symbol servers CloudFront falls through to: a request under path_prefix that the serving bucket misses (403/404) is asked of url, whose path must end with the prefix (symbols/ -> https://msdl.microsoft.com/download/symbols/; buildid/ -> https://debuginfod.example.org/buildid/; \"\" for the default behaviour, the whole request path appended to url). One upstream per prefix; https:// only, unless allow_plain_http_upstreams. Upstream answers are cached at the edge for at most upstream_cache_max_ttl_hours, not copied into the bucket, and not identity-checked (symdex serve --upstream checks them); the edge's access control applies to them as to own symbols, and a redirect in them is never followed off the deployment's site."
  type = list(object({
    path_prefix = string
    url         = string
  }))
  default = []
  validation {
    condition = alltrue([
      for u in var.upstreams : can(regex("^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[^?#]*)?$", u.url))
    ])
    error_message = "upstreams: url is http(s)://host[:port][/path], without a query or fragment."
  }
  validation {
    condition = alltrue([
      for u in var.upstreams : trim(u.path_prefix, "/") == "" || endswith(
        trimsuffix(try(regex("^https?://[^/]+(.*)$", u.url)[0], ""), "/"),
        "/${trim(u.path_prefix, "/")}"
      )
    ])
    error_message = "upstreams: url's path must end with path_prefix (CloudFront appends the whole request path to the origin's path: symbols/ needs a url ending in /symbols/)."
  }
  validation {
    condition     = length(distinct([for u in var.upstreams : trim(u.path_prefix, "/")])) == length(var.upstreams)
    error_message = "upstreams: one upstream per path_prefix (an origin group fails over once)."
  }
  validation {
    condition = alltrue([
      for u in var.upstreams : trim(u.path_prefix, "/") == "" || (
        !startswith("${trim(u.path_prefix, "/")}/", "${trim(var.manifest_prefix, "/")}/") &&
        !startswith("${trim(u.path_prefix, "/")}/", "${trim(var.state_prefix, "/")}/") &&
        !startswith("${trim(var.manifest_prefix, "/")}/", "${trim(u.path_prefix, "/")}/") &&
        !startswith("${trim(var.state_prefix, "/")}/", "${trim(u.path_prefix, "/")}/")
      )
    ])
    error_message = "upstreams: a path_prefix may not overlap the private manifest_prefix or state_prefix (never served, never asked of anyone)."
  }
  validation {
    condition = alltrue([
      for u in var.upstreams : trim(u.path_prefix, "/") == "" || (
        !startswith("${trim(u.path_prefix, "/")}/", "src/") && !startswith("src/", "${trim(u.path_prefix, "/")}/")
      )
    ])
    error_message = "upstreams: a path_prefix may not overlap src/, where builds' sources are served from the bucket alone (never asked of anyone)."
  }
  validation {
    condition     = length(var.upstreams) == 0 || var.enable_cloudfront
    error_message = "upstreams are CloudFront origin groups: they need enable_cloudfront = true."
  }
  # Plain HTTP between the edge and an upstream lets anyone on the path answer for it (and
  # those answers are cached and served to readers as symbols): only by an explicit opt-in.
  validation {
    condition     = var.allow_plain_http_upstreams || alltrue([for u in var.upstreams : !startswith(u.url, "http://")])
    error_message = "upstreams: ${join(", ", [for u in var.upstreams : "\"${u.path_prefix}\" -> ${u.url}" if startswith(u.url, "http://")])} would be fetched in plain HTTP (anyone on the path could answer for it); use https://, or set allow_plain_http_upstreams = true to accept that."
  }
}

variable "allow_plain_http_upstreams" {
  description = "Accept http:// urls in upstreams (edge-to-upstream in plain HTTP: anyone on the path can answer for the upstream, and the answer is cached and served). Off: such upstreams do not plan."
  type        = bool
  default     = false
}

variable "upstream_cache_max_ttl_hours" {
  description = "Longest time (hours) CloudFront keeps an answer on an upstream's behaviour, whatever the upstream's Cache-Control says (also the default TTL when it says nothing, up to one day): how long an upstream's answer can shadow a later upload of the same key."
  type        = number
  default     = 24
  validation {
    condition     = var.upstream_cache_max_ttl_hours >= 1 && var.upstream_cache_max_ttl_hours <= 8760 && floor(var.upstream_cache_max_ttl_hours) == var.upstream_cache_max_ttl_hours
    error_message = "upstream_cache_max_ttl_hours is a whole number of hours from 1 to 8760 (a year)."
  }
}

variable "upstream_cache_policy_id" {
  description = "A cache policy of your own for the upstreams' behaviours instead of the one the module makes from upstream_cache_max_ttl_hours (its max TTL is then yours to keep short). Also for test endpoints without the cache-policy API, such as moto_server."
  type        = string
  default     = null
  validation {
    # The managed policies that keep answers up to a year: what the module's own policy is
    # there to prevent.
    condition     = !contains(["658327ea-f89d-4fab-a63d-7e88639e58f6", "b2884449-e4de-46a7-ac36-70bc7f1ddd6d"], coalesce(var.upstream_cache_policy_id, "-"))
    error_message = "upstream_cache_policy_id: the managed CachingOptimized policies cache for up to a year, so an upstream's answer could shadow a later upload that long; leave it null (upstream_cache_max_ttl_hours) or give a policy with a short max TTL."
  }
}

variable "audit_page" {
  description = "The sweeper writes the audit page (symdex audit's) to the serving bucket after each run (sweep_schedule), and CloudFront shows it at the audit_page_url output to the audit grant alone (audit_token_sha256 and/or audit_cidrs), never to symbol readers. Needs enable_cloudfront and sweeper_zip."
  type        = bool
  default     = false
  validation {
    condition     = !var.audit_page || var.audit_token_sha256 != null || length(var.audit_cidrs) > 0
    error_message = "audit_page needs a grant of its own: audit_token_sha256 (printf %s \"$TOKEN\" | sha256sum) and/or audit_cidrs. Without one the page would be shown to nobody, or (were the grant a reader's) to every symbol reader."
  }
  validation {
    condition     = !var.audit_page || (var.enable_cloudfront && var.sweeper_zip != null)
    error_message = "audit_page: the sweeper writes the page (sweeper_zip) and CloudFront's access function guards it (enable_cloudfront = true)."
  }
  validation {
    condition     = !var.audit_page || trim(var.state_prefix, "/") == "_symdex"
    error_message = "audit_page: the functions write the page under _symdex/audit/: state_prefix must stay _symdex."
  }
}

variable "audit_token_sha256" {
  description = "SHA-256 (64 hex digits) of the audit page's token: printf %s \"$TOKEN\" | sha256sum. Only the hash is kept (in the access function's code); the token is the page's password."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.audit_token_sha256 == null || can(regex("^[0-9a-fA-F]{64}$", var.audit_token_sha256))
    error_message = "audit_token_sha256 must be a SHA-256 in hex (64 digits), not the token itself: printf %s \"$TOKEN\" | sha256sum."
  }
}

variable "audit_cidrs" {
  description = "Viewer networks (IPv4/IPv6 CIDRs) the audit page is shown to; with audit_token_sha256 too, both must hold."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.audit_cidrs : can(cidrhost(c, 0)) && strcontains(c, "/")])
    error_message = "audit_cidrs must be CIDR blocks with their length, e.g. 203.0.113.0/24 or 2001:db8::/48."
  }
  validation {
    condition = alltrue([
      for c in var.audit_cidrs : try(
        tonumber(split("/", c)[1]) >= (strcontains(c, ":") ? 32 : 8), false
      )
    ])
    error_message = "audit_cidrs: a network wider than /8 (IPv4) or /32 (IPv6), such as 0.0.0.0/0 or ::/0, would show the audit page to much of the Internet."
  }
}
