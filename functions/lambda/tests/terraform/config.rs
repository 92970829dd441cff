//! Running terraform offline, and the root configuration the tests plan and apply.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const MIRROR: &str = "/opt/tf-plugins";

/// `terraform ARGS...` in `dir` (its own CLI configuration, offline), whatever it comes to.
pub fn terraform_output(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("terraformrc"))
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .expect("run terraform")
}

/// `terraform ARGS...` in `dir`, which must succeed: its stdout.
pub fn terraform(dir: &Path, args: &[&str]) -> String {
    let out = terraform_output(dir, args);
    assert!(
        out.status.success(),
        "terraform {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `terraform init` offline, from the provider mirror.
pub fn init(dir: &Path) {
    terraform(
        dir,
        &[
            "init",
            "-backend=false",
            "-input=false",
            "-no-color",
            &format!("-plugin-dir={MIRROR}"),
        ],
    );
}

pub fn prerequisites() -> Result<(), String> {
    if Command::new("terraform").arg("version").output().is_err() {
        return Err("terraform is not installed".into());
    }
    if !Path::new(MIRROR)
        .join("registry.terraform.io/hashicorp/aws")
        .is_dir()
    {
        return Err(format!("no AWS provider mirror at {MIRROR}"));
    }
    Ok(())
}

/// A directory to plan the module in (an empty CLI configuration, a stand-in for the
/// functions' zips, which a plan does not read), and the module's path.
pub fn plan_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let module: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../infra/modules/symdex")
        .canonicalize()
        .unwrap();
    std::fs::write(dir.path().join("terraformrc"), "").unwrap();
    std::fs::write(dir.path().join("bootstrap.zip"), "not read by a plan").unwrap();
    (dir, module)
}

/// An edge function's source as the module deploys it (access.tf: comment lines and
/// indentation removed, CloudFront taking at most 10 KB; edge/harness.mjs's `deployed` for the
/// node tests).
pub fn deployed(source: &str) -> String {
    source
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The line of [`root_config`] that sets `upstreams`.
pub const UPSTREAM_LINE: &str = "  upstreams = [{ path_prefix = \"symbols/\", url = \"https://msdl.microsoft.com/download/symbols/\" }]\n";

pub fn root_config(module: &Path, endpoint: &str) -> String {
    let services = [
        "s3",
        "sqs",
        "lambda",
        "iam",
        "sts",
        "cloudwatch",
        "logs",
        "cloudfront",
        "glue",
        "athena",
        "events",
    ];
    let endpoints: String = services
        .iter()
        .map(|s| format!("    {s} = \"{endpoint}\"\n"))
        .collect();
    format!(
        r#"provider "aws" {{
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true
  endpoints {{
{endpoints}  }}
}}

module "symdex" {{
  source       = "{module}"
  name         = "symdex-tf"
  architecture = "x86_64"
  indexer_zip  = "bootstrap.zip"
  remover_zip  = "bootstrap.zip"
  sweeper_zip  = "bootstrap.zip"
  # moto_server speaks plain HTTP.
  require_tls  = false
  # Retention, upload permissions and read access control on (moto creates the access
  # function and its KeyValueStore, but has no PublishFunction).
  retention_policy         = "try=7d,release=forever"
  ci_products              = ["demo"]
  enforce_product_prefixes = true
  allowed_cidrs            = ["10.0.0.0/8", "2001:db8::/32"]
  require_auth             = true
  publish_edge_function    = false
  # The archive decoders' shared budget, set (unset: half of indexer_memory_mb).
  decoder_memory_mb        = 300
  # Microsoft's symbol server behind symbols/: an origin group after the serving bucket.
  upstreams = [{{ path_prefix = "symbols/", url = "https://msdl.microsoft.com/download/symbols/" }}]
}}

output "ingest_bucket" {{ value = module.symdex.ingest_bucket }}
output "serving_bucket" {{ value = module.symdex.serving_bucket }}
output "events_queue_url" {{ value = module.symdex.events_queue_url }}
output "removals_queue_url" {{ value = module.symdex.removals_queue_url }}
output "debuginfod_urls" {{ value = module.symdex.debuginfod_urls }}
output "windbg_symbol_path" {{ value = module.symdex.windbg_symbol_path }}
output "sweeper_function" {{ value = module.symdex.sweeper_function }}
output "ci_upload_policies" {{ value = module.symdex.ci_upload_policies }}
output "compression" {{ value = module.symdex.compression }}
"#,
        module = module.display()
    )
}
