//! Running terraform offline, and the root configuration the tests plan and apply.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const MIRROR: &str = "/opt/tf-plugins";

/// `terraform ARGS...` in `dir` (its own CLI configuration, offline), whatever it comes to.
pub fn terraform_output<S: AsRef<str>>(dir: &Path, args: &[S]) -> std::process::Output {
    Command::new("terraform")
        .args(args.iter().map(AsRef::as_ref))
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("terraformrc"))
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .expect("run terraform")
}

/// `terraform ARGS...` in `dir`, which must succeed: its stdout.
pub fn terraform<S: AsRef<str> + std::fmt::Debug>(dir: &Path, args: &[S]) -> String {
    let out = terraform_output(dir, args);
    assert!(
        out.status.success(),
        "terraform {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `terraform plan` offline and unlocked (tests plan side by side over one directory, with
/// no state to protect), setting the root module's `vars` (`name=value`, as `-var` takes).
pub fn plan_args<S: AsRef<str>>(vars: &[S]) -> Vec<String> {
    let mut args: Vec<String> = [
        "plan",
        "-input=false",
        "-no-color",
        "-refresh=false",
        "-lock=false",
    ]
    .map(String::from)
    .to_vec();
    args.extend(vars.iter().map(|v| format!("-var={}", v.as_ref())));
    args
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

/// The endpoint of configurations only [`assert_plan_outcomes`] plans: its mocked provider
/// calls nothing (port 9, discard, where nothing listens here).
pub const MOCKED_ENDPOINT: &str = "http://127.0.0.1:9";

/// A configuration to plan and what its plan must come to: the root module's variables
/// (`name = <HCL expression>`), and the problem its refusal names, or `None` where it plans.
pub type PlanCase<'a> = (Vec<String>, Option<&'a str>);

/// The AWS provider as `terraform test` mocks it: the data sources' values are made up, and
/// the policy documents' JSON must be a policy for the provider's validation of the roles.
const MOCKED_PROVIDER: &str = r#"mock_provider "aws" {
  mock_data "aws_iam_policy_document" {
    defaults = {
      json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
    }
  }
}
"#;

/// Plans every case over `dir`'s initialised configuration in one `terraform test` run and
/// asserts each outcome: refused with its problem named, or planned. Returns each case's
/// diagnostics, whitespace folded.
///
/// Why not a `terraform plan` each: a plan starts the AWS provider three times (schema,
/// validation, plan), about 10 s of CPU however small the configuration, and these lists hold
/// dozens of cases. `terraform test` starts it once for all of them and mocks it
/// (`mock_provider`). What stays real: the provider's schema, its static checks of resource
/// arguments, and everything the module refuses (variable validations and the access
/// function's size preconditions, none reading a data source). What does not: the provider's
/// own plan step and the data sources (every policy document reads as an empty policy). So a
/// refusal here is the refusal a real plan makes, and "planned" means terraform's checks
/// passed; each test plans its accepted shapes for real too, against moto.
///
/// Each case is a test file of its own (a run that fails skips the rest of its file).
pub fn assert_plan_outcomes(dir: &Path, cases: &[PlanCase]) -> Vec<String> {
    let file = |i: usize| format!("case_{i:03}.tftest.hcl");
    for (i, (vars, _)) in cases.iter().enumerate() {
        let vars: String = vars.iter().map(|v| format!("    {v}\n")).collect();
        let run = format!("run \"plan\" {{\n  command = plan\n  variables {{\n{vars}  }}\n}}\n");
        std::fs::write(dir.join(file(i)), format!("{MOCKED_PROVIDER}{run}")).unwrap();
    }
    let out = terraform_output(dir, &["test", "-no-color", "-json"]);
    // Per file: the run's status, and its diagnostics' text with whitespace folded.
    let mut status = std::collections::HashMap::<String, String>::new();
    let mut problems = std::collections::HashMap::<String, String>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(path) = message["@testfile"].as_str() else {
            continue;
        };
        match message["type"].as_str() {
            Some("test_run") if message["test_run"]["progress"] == "complete" => {
                let run_status = message["test_run"]["status"].as_str().unwrap_or("");
                status.insert(path.to_string(), run_status.to_string());
            }
            // Errors only: a warning naming a problem is no refusal.
            Some("diagnostic") if message["diagnostic"]["severity"] == "error" => {
                let d = &message["diagnostic"];
                let text = format!(
                    "{} {}",
                    d["summary"].as_str().unwrap_or(""),
                    d["detail"].as_str().unwrap_or("")
                );
                let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let all = problems.entry(path.to_string()).or_default();
                all.push_str(&folded);
                all.push(' ');
            }
            _ => {}
        }
    }
    let mut diagnostics_of_cases = Vec::with_capacity(cases.len());
    for (i, (vars, problem)) in cases.iter().enumerate() {
        let path = file(i);
        let diagnostics = problems.remove(&path).unwrap_or_default();
        let Some(run_status) = status.get(&path) else {
            panic!(
                "{vars:?} ({path}) was not planned: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        match problem {
            Some(problem) => {
                assert_eq!(run_status, "error", "{vars:?}: {diagnostics}");
                assert!(diagnostics.contains(problem), "{vars:?}: {diagnostics}");
            }
            None => assert_eq!(run_status, "pass", "{vars:?} did not plan: {diagnostics}"),
        }
        diagnostics_of_cases.push(diagnostics);
    }
    diagnostics_of_cases
}
