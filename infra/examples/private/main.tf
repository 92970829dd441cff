# A private symbol server: readers need a token (or basic credentials) and an allowed network,
# try builds expire, CI roles upload only under their product, and the audit page is shown to
# the office network with its own token. `terraform validate` checks it
# offline (make tf-check); apply it like examples/complete.

terraform {
  required_version = ">= 1.9"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40"
    }
  }
}

provider "aws" {
  region = "us-east-1"
}

variable "audit_token_sha256" {
  description = "SHA-256 of the audit page's token: printf %s \"$TOKEN\" | sha256sum"
  type        = string
  sensitive   = true
}

module "symdex" {
  source           = "../../modules/symdex"
  name             = "symdex-private"
  architecture     = "x86_64"
  indexer_zip      = "../../../target/lambda/symdex-indexer.zip"
  remover_zip      = "../../../target/lambda/symdex-remover.zip"
  sweeper_zip      = "../../../target/lambda/symdex-sweeper.zip"
  retention_policy = "try=14d,nightly=60d,release=forever"
  require_auth     = true
  allowed_cidrs    = ["203.0.113.0/24", "2001:db8::/32"]
  ci_products      = ["app", "engine"]

  enforce_product_prefixes = true

  # The audit page, refreshed by the sweeper: from the office network, with the audit token
  # (a reader's token does not open it).
  audit_page         = true
  audit_token_sha256 = var.audit_token_sha256
  audit_cidrs        = ["203.0.113.0/24"]

  # Readers (only they: the access function is in front) also get Microsoft's symbols here.
  upstreams = [{ path_prefix = "symbols/", url = "https://msdl.microsoft.com/download/symbols/" }]
}

# GitHub Actions OIDC: the `app` repository's workflows may upload under app/ only.
data "aws_iam_openid_connect_provider" "github" {
  url = "https://token.actions.githubusercontent.com"
}

data "aws_iam_policy_document" "github_assume" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]
    principals {
      type        = "Federated"
      identifiers = [data.aws_iam_openid_connect_provider.github.arn]
    }
    condition {
      test     = "StringEquals"
      variable = "token.actions.githubusercontent.com:aud"
      values   = ["sts.amazonaws.com"]
    }
    condition {
      test     = "StringLike"
      variable = "token.actions.githubusercontent.com:sub"
      values   = ["repo:example-org/app:*"]
    }
  }
}

resource "aws_iam_role" "ci_app" {
  name               = "symdex-private-ci-app"
  assume_role_policy = data.aws_iam_policy_document.github_assume.json
}

resource "aws_iam_role_policy" "ci_app" {
  name   = "symdex-upload-app"
  role   = aws_iam_role.ci_app.id
  policy = module.symdex.ci_upload_policies["app"]
}

output "ci_role_arn" {
  value = aws_iam_role.ci_app.arn
}

output "access_tokens_kvs_arn" {
  value = module.symdex.access_tokens_kvs_arn
}

output "debuginfod_urls" {
  value = module.symdex.debuginfod_urls
}

output "audit_page_url" {
  value = module.symdex.audit_page_url
}
