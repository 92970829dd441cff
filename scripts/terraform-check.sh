#!/usr/bin/env bash
# `make test` part: terraform fmt -check and validate, offline. Says clearly what is missing
# instead of failing when terraform or the AWS provider mirror is not on this machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mirror=${TF_PLUGIN_MIRROR:-/opt/tf-plugins}
if ! command -v terraform >/dev/null 2>&1; then
  echo "terraform-check: SKIPPED: terraform is not installed (it is not in Debian's archive; install it from HashiCorp to check infra/)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/terraformrc"
export TF_CLI_CONFIG_FILE="$work/terraformrc" TF_IN_AUTOMATION=1
terraform fmt -check -recursive "$root/infra"
echo "terraform-check: fmt ok"
if [ ! -d "$mirror/registry.terraform.io/hashicorp/aws" ]; then
  echo "terraform-check: SKIPPED validate: no AWS provider mirror at $mirror (terraform init would need the network)"
  exit 0
fi
cp -r "$root/infra" "$work/"
for dir in modules/symdex examples/complete examples/private; do
  (cd "$work/infra/$dir" &&
    terraform init -backend=false -input=false -plugin-dir="$mirror" >/dev/null &&
    terraform validate -no-color)
  echo "terraform-check: validate ok: infra/$dir"
done
