# The audit page in the deployment (audit_page): the sweeper writes `symdex audit`'s page of the
# serving bucket to _symdex/audit/index.html after each run (sweep_schedule), and CloudFront
# shows that folder to the audit grant alone: audit_token_sha256 (a bearer token, basic
# credentials whose password is the token, or a symdex_audit cookie) and/or audit_cidrs,
# checked by the access function (edge/access.js) before anything else of the reader's. A
# symbol reader's credentials never open it; every other private prefix stays unserved.
# Open it at the audit_page_url output (a browser asks for the token).

locals {
  # Where the sweeper writes the page (symdex_shared::audit_page::DEPLOYED_KEY).
  audit_prefix = "_symdex/audit/"
  audit_key    = "${local.audit_prefix}index.html"
  enable_audit = var.audit_page && var.enable_cloudfront
  # Managed policies: CachingDisabled (the page is rebuilt on every sweep and is nobody
  # else's: never kept at the edge) and SecurityHeadersPolicy (nosniff, frame-options, HSTS).
  caching_disabled_policy_id = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
  security_headers_policy_id = "67f7725c-6f97-4210-82d7-5512b31e9d03"
}
