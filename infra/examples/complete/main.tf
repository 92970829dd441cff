# A complete symbol server in one module call. `make deploy` applies this with the zips built by
# `make lambda` (for arm64 build them with cargo-lambda, or set architecture = "x86_64").

terraform {
  required_version = ">= 1.9"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40"
    }
  }
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "name" {
  description = "Globally unique name prefix (buckets are named after it)."
  type        = string
  default     = "symdex"
}

variable "architecture" {
  type    = string
  default = "arm64"
}

variable "indexer_zip" {
  type    = string
  default = "../../../target/lambda/symdex-indexer.zip"
}

variable "remover_zip" {
  type    = string
  default = "../../../target/lambda/symdex-remover.zip"
}

variable "sweeper_zip" {
  type    = string
  default = "../../../target/lambda/symdex-sweeper.zip"
}

provider "aws" {
  region = var.region
}

module "symdex" {
  source       = "../../modules/symdex"
  name         = var.name
  architecture = var.architecture
  indexer_zip  = var.indexer_zip
  remover_zip  = var.remover_zip
  sweeper_zip  = var.sweeper_zip
}

output "ingest_bucket" {
  value = module.symdex.ingest_bucket
}

output "windbg_symbol_path" {
  value = module.symdex.windbg_symbol_path
}

output "dotnet_symbol_server" {
  value = module.symdex.dotnet_symbol_server
}

output "debuginfod_urls" {
  value = module.symdex.debuginfod_urls
}

output "sentry_unified_url" {
  value = module.symdex.sentry_unified_url
}
