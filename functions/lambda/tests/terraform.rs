//! The Terraform module applied to moto_server: buckets, queues, notifications, functions (the
//! sweeper and its schedule too), IAM, CloudFront with its access function and token store,
//! Glue/Athena and alarms are created; an upload to the ingest bucket arrives on the
//! events queue and a delete on the removals queue; then everything is destroyed again.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::Moto;

const MIRROR: &str = "/opt/tf-plugins";

/// `terraform ARGS...` in `dir` (its own CLI configuration, offline), whatever it comes to.
fn terraform_output(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", dir.join("terraformrc"))
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .expect("run terraform")
}

/// `terraform ARGS...` in `dir`, which must succeed: its stdout.
fn terraform(dir: &Path, args: &[&str]) -> String {
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
fn init(dir: &Path) {
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

fn prerequisites() -> Result<(), String> {
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
fn plan_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let module: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../infra/modules/symdex")
        .canonicalize()
        .unwrap();
    std::fs::write(dir.path().join("terraformrc"), "").unwrap();
    std::fs::write(dir.path().join("bootstrap.zip"), "not read by a plan").unwrap();
    (dir, module)
}

fn root_config(module: &Path, endpoint: &str) -> String {
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
}}

output "ingest_bucket" {{ value = module.symdex.ingest_bucket }}
output "serving_bucket" {{ value = module.symdex.serving_bucket }}
output "events_queue_url" {{ value = module.symdex.events_queue_url }}
output "removals_queue_url" {{ value = module.symdex.removals_queue_url }}
output "debuginfod_urls" {{ value = module.symdex.debuginfod_urls }}
output "windbg_symbol_path" {{ value = module.symdex.windbg_symbol_path }}
output "sweeper_function" {{ value = module.symdex.sweeper_function }}
output "ci_upload_policies" {{ value = module.symdex.ci_upload_policies }}
"#,
        module = module.display()
    )
}

async fn receive_one(sqs: &aws_sdk_sqs::Client, queue: &str) -> Value {
    for _ in 0..20 {
        let resp = sqs
            .receive_message()
            .queue_url(queue)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in resp.messages.unwrap_or_default() {
            let body: Value = serde_json::from_str(m.body.as_deref().unwrap()).unwrap();
            if body.get("Records").is_some() {
                return body;
            }
        }
    }
    panic!("no S3 notification arrived on {queue}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_module_applies_to_moto_delivers_notifications_and_destroys() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be applied here");
        return;
    }
    let moto = Moto::start();
    let dir = tempfile::tempdir().unwrap();
    let module: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../infra/modules/symdex")
        .canonicalize()
        .unwrap();
    std::fs::write(dir.path().join("terraformrc"), "").unwrap();
    std::fs::write(
        dir.path().join("bootstrap"),
        "placeholder: moto does not run functions",
    )
    .unwrap();
    let zipped = Command::new("zip")
        .args(["-q", "bootstrap.zip", "bootstrap"])
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(zipped.success());
    std::fs::write(
        dir.path().join("main.tf"),
        root_config(&module, &moto.endpoint),
    )
    .unwrap();

    let d = dir.path();
    init(d);
    terraform(d, &["apply", "-auto-approve", "-input=false", "-no-color"]);
    let outputs: Value = serde_json::from_str(&terraform(d, &["output", "-json"])).unwrap();
    let out = |name: &str| outputs[name]["value"].as_str().unwrap().to_string();
    assert!(
        out("debuginfod_urls").starts_with("https://"),
        "CloudFront URL: {outputs}"
    );
    assert!(out("windbg_symbol_path").starts_with("srv*"));
    assert_eq!(out("sweeper_function"), "symdex-tf-sweeper");
    let policy: Value = serde_json::from_str(
        outputs["ci_upload_policies"]["value"]["demo"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(
        policy.to_string().contains("symdex-tf-ingest/demo/*"),
        "uploads only under the product's prefix: {policy}"
    );
    let state = terraform(d, &["state", "list"]);
    // Read access control: the function is deployed with the real store's id in its CONFIG.
    let shown: Value = serde_json::from_str(&terraform(d, &["show", "-json"])).unwrap();
    let resources: Vec<&Value> = shown["values"]["root_module"]["child_modules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["resources"].as_array().unwrap())
        .collect();
    let find = |address: &str| {
        resources
            .iter()
            .find(|r| r["address"] == address)
            .unwrap_or_else(|| panic!("{address} not created"))["values"]
            .clone()
    };
    let kvs = find("module.symdex.aws_cloudfront_key_value_store.tokens[0]");
    let function = find("module.symdex.aws_cloudfront_function.access[0]");
    let code = function["code"].as_str().unwrap();
    assert!(
        code.contains(&format!(
            r#"var CONFIG = {{"allowCidrs":["10.0.0.0/8","2001:db8::/32"],"auth":true,"foldPrefixes":["/symbols/","/index2/"],"kvsId":"{}"}};"#,
            kvs["id"].as_str().unwrap()
        )),
        "{code}"
    );
    // Keys folded to lowercase for the edge's case-insensitive lookups (the default).
    let indexer = find("module.symdex.aws_lambda_function.indexer");
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_FOLD_CASE"],
        "true"
    );
    // One stored copy per artifact behind the CDN: aliases are redirects.
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_ALIASES"],
        "redirect"
    );
    // Sources are joined unless the deployment says nobody uploads them.
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_SOURCE_JOINS"],
        "true"
    );
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_DECODER_MEMORY_MB"],
        "300"
    );
    for resource in [
        "module.symdex.aws_cloudwatch_event_rule.sweeper[0]",
        "module.symdex.aws_cloudwatch_event_target.sweeper[0]",
        "module.symdex.aws_lambda_permission.sweeper[0]",
        "module.symdex.aws_cloudwatch_metric_alarm.function[\"sweeper-errors\"]",
        "module.symdex.aws_s3_bucket.logs[0]",
        "module.symdex.aws_glue_catalog_table.cloudfront_logs[0]",
    ] {
        assert!(state.contains(resource), "{resource} not created:\n{state}");
    }

    let s3 = moto.s3().await;
    let sqs = moto.sqs().await;
    let ingest = out("ingest_bucket");
    // Conflicts are counted from the indexer's decisions.
    let conflicts = find("module.symdex.aws_cloudwatch_log_metric_filter.conflicts");
    assert!(
        conflicts["pattern"]
            .as_str()
            .unwrap()
            .contains("\"conflict\""),
        "{conflicts}"
    );
    // Only this account's ingest bucket may send to the queues.
    for queue in ["events", "removals"] {
        let policy = find(&format!("module.symdex.aws_sqs_queue_policy.{queue}"))["policy"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(policy.contains("aws:SourceAccount"), "{policy}");
        assert!(policy.contains("aws:SourceArn"), "{policy}");
    }
    // The functions act on the ingest bucket's events alone.
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_INGEST_BUCKET"],
        ingest.as_str()
    );
    let put = s3
        .put_object()
        .bucket(&ingest)
        .key("build=1/app.debug")
        .body(b"\x7fELF".to_vec().into())
        .send()
        .await
        .unwrap();
    let version = put
        .version_id()
        .expect("the ingest bucket is versioned")
        .to_string();
    let created = receive_one(&sqs, &out("events_queue_url")).await;
    assert_eq!(created["Records"][0]["eventName"], "ObjectCreated:Put");
    let raw_key = created["Records"][0]["s3"]["object"]["key"]
        .as_str()
        .unwrap();
    assert_eq!(
        symdex_lambda::events::decode_s3_key(raw_key),
        "build=1/app.debug"
    );
    // Deleting a version (moto sends no event for delete markers).
    s3.delete_object()
        .bucket(&ingest)
        .key("build=1/app.debug")
        .version_id(&version)
        .send()
        .await
        .unwrap();
    let removed = receive_one(&sqs, &out("removals_queue_url")).await;
    assert!(removed["Records"][0]["eventName"]
        .as_str()
        .unwrap()
        .starts_with("ObjectRemoved"));

    // moto implements no DeleteNamedQuery: forget the named queries, destroy the rest.
    for query in [
        "build_published",
        "who_published_debug_id",
        "rejected_last_day",
        "cross_product_conflicts",
        "missing_this_week",
    ] {
        terraform(
            d,
            &[
                "state",
                "rm",
                &format!("module.symdex.aws_athena_named_query.{query}[0]"),
            ],
        );
    }
    // Versioned ingest bucket: its old versions must go before the bucket can.
    let versions = s3
        .list_object_versions()
        .bucket(&ingest)
        .send()
        .await
        .unwrap();
    for v in versions.versions() {
        s3.delete_object()
            .bucket(&ingest)
            .key(v.key().unwrap())
            .version_id(v.version_id().unwrap())
            .send()
            .await
            .unwrap();
    }
    for m in versions.delete_markers() {
        s3.delete_object()
            .bucket(&ingest)
            .key(m.key().unwrap())
            .version_id(m.version_id().unwrap())
            .send()
            .await
            .unwrap();
    }
    terraform(
        d,
        &["destroy", "-auto-approve", "-input=false", "-no-color"],
    );
    let buckets = s3.list_buckets().send().await.unwrap();
    assert!(
        buckets
            .buckets()
            .iter()
            .all(|b| !b.name().unwrap_or("").starts_with("symdex-tf")),
        "buckets left behind"
    );
}

/// What the module deploys at the edge is what the node tests exercise: exactly the source of
/// infra/modules/symdex/edge/access.js with its CONFIG line set from the variables, on the
/// viewer-request of every cache behaviour, with the token store when credentials are on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planned_access_function_is_the_tested_source_with_its_configuration() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let moto = Moto::start();
    let (dir, module) = plan_dir();
    let d = dir.path();
    let config = root_config(&module, &moto.endpoint).replace(
        "  require_auth             = true\n",
        "  require_auth             = var.require_auth\n",
    );
    std::fs::write(
        d.join("main.tf"),
        format!("variable \"require_auth\" {{\n  type = bool\n}}\n\n{config}"),
    )
    .unwrap();
    init(d);
    let plan = |require_auth: bool| -> Value {
        terraform(
            d,
            &[
                "plan",
                "-input=false",
                "-no-color",
                "-out=tfplan",
                &format!("-var=require_auth={require_auth}"),
            ],
        );
        serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap()
    };
    let planned = |plan: &Value, address: &str| -> Value {
        plan["resource_changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == address)
            .unwrap_or_else(|| panic!("{address} is not planned"))["change"]["after"]
            .clone()
    };

    // IP allow-list only: the whole code is known at plan time.
    let ips = plan(false);
    let function = planned(&ips, "module.symdex.aws_cloudfront_function.access[0]");
    let source = std::fs::read_to_string(module.join("edge/access.js")).unwrap();
    let expected = source.replace(
        "var CONFIG = { allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '' };",
        r#"var CONFIG = {"allowCidrs":["10.0.0.0/8","2001:db8::/32"],"auth":false,"foldPrefixes":["/symbols/","/index2/"],"kvsId":""};"#,
    );
    assert_ne!(expected, source, "the CONFIG line of access.js moved");
    assert_eq!(function["code"].as_str().unwrap(), expected);
    assert_eq!(function["runtime"], "cloudfront-js-2.0");
    let distribution = planned(&ips, "module.symdex.aws_cloudfront_distribution.symbols[0]");
    let behaviours = std::iter::once(&distribution["default_cache_behavior"][0]).chain(
        distribution["ordered_cache_behavior"]
            .as_array()
            .unwrap()
            .iter(),
    );
    let events = |behaviour: &Value| -> Vec<String> {
        behaviour["function_association"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["event_type"].as_str().unwrap().to_string())
            .collect()
    };
    for behaviour in behaviours {
        assert!(
            events(behaviour).contains(&"viewer-request".to_string()),
            "{behaviour}"
        );
    }
    // debuginfod's headers from object metadata, on the serving behaviour.
    assert!(
        events(&distribution["default_cache_behavior"][0]).contains(&"viewer-response".to_string())
    );
    let headers = planned(&ips, "module.symdex.aws_cloudfront_function.response[0]");
    assert_eq!(
        headers["code"].as_str().unwrap(),
        std::fs::read_to_string(module.join("edge/response.js")).unwrap()
    );
    assert!(ips["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["type"] != "aws_cloudfront_key_value_store"));

    // Credentials on: the token store is created and associated.
    let tokens = plan(true);
    planned(
        &tokens,
        "module.symdex.aws_cloudfront_key_value_store.tokens[0]",
    );
    let unknown = tokens["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == "module.symdex.aws_cloudfront_function.access[0]")
        .unwrap()["change"]["after_unknown"]
        .clone();
    assert_eq!(unknown["code"], true, "the code names the store's id");
    // The association (the store's ARN) is known only once the store exists.
    let association = &unknown["key_value_store_associations"];
    assert!(
        *association == true || *association == serde_json::json!([true]),
        "{unknown}"
    );
}

/// Unsafe combinations are refused at plan time, each naming its problem: the website (public
/// read) with access control, access control without CloudFront (which enforces it), and a
/// layout prefix that is empty (a write grant to the whole bucket) or private. The safe
/// combinations still plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_combinations_do_not_plan_and_safe_ones_do() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let moto = Moto::start();
    let (dir, module) = plan_dir();
    let d = dir.path();
    let config = root_config(&module, &moto.endpoint)
        .replace(
            "  allowed_cidrs            = [\"10.0.0.0/8\", \"2001:db8::/32\"]\n",
            "  allowed_cidrs            = var.allowed_cidrs\n",
        )
        .replace(
            "  require_auth             = true\n",
            "  require_auth             = var.require_auth\n  enable_website = var.enable_website\n  enable_cloudfront = var.enable_cloudfront\n  layout_prefixes = var.layout_prefixes\n",
        );
    let variables = "variable \"require_auth\" { type = bool }\nvariable \"allowed_cidrs\" { type = list(string) }\nvariable \"enable_website\" { type = bool }\nvariable \"enable_cloudfront\" { type = bool }\nvariable \"layout_prefixes\" { type = map(string) }\n\n";
    std::fs::write(d.join("main.tf"), format!("{variables}{config}")).unwrap();
    init(d);
    // (require_auth, allowed_cidrs, enable_website, enable_cloudfront, layout_prefixes)
    let plan = |vars: (bool, &str, bool, bool, &str)| {
        let (auth, cidrs, website, cloudfront, prefixes) = vars;
        terraform_output(
            d,
            &[
                "plan",
                "-input=false",
                "-no-color",
                "-refresh=false",
                // Plans run side by side over one directory (no state to protect).
                "-lock=false",
                &format!("-var=require_auth={auth}"),
                &format!("-var=allowed_cidrs={cidrs}"),
                &format!("-var=enable_website={website}"),
                &format!("-var=enable_cloudfront={cloudfront}"),
                &format!("-var=layout_prefixes={prefixes}"),
            ],
        )
    };
    let no_cidrs = "[]";
    let cidrs = r#"["10.0.0.0/8"]"#;
    let defaults = "{}";
    let refused = [
        (
            (true, no_cidrs, true, true, defaults),
            "enable_website makes",
        ),
        ((false, cidrs, true, true, defaults), "enable_website makes"),
        (
            (true, no_cidrs, false, false, defaults),
            "require_auth is enforced by CloudFront",
        ),
        (
            (false, cidrs, false, false, defaults),
            "allowed_cidrs is enforced by CloudFront",
        ),
        (
            (false, no_cidrs, false, true, r#"{unified = ""}"#),
            "may not be empty",
        ),
        (
            (
                false,
                no_cidrs,
                false,
                true,
                r#"{symstore = "_symdex/syms/"}"#,
            ),
            "may not lie under",
        ),
        (
            (false, no_cidrs, false, true, r#"{unified = "_manifest/"}"#),
            "may not lie under",
        ),
    ];
    let planned = [
        (true, cidrs, false, true, defaults),
        (false, no_cidrs, true, false, defaults),
        (
            false,
            no_cidrs,
            true,
            true,
            r#"{debuginfod = "", unified = "sentry/"}"#,
        ),
    ];
    // Expected: a problem named, or `None` for a plan that must succeed.
    let cases: Vec<_> = refused
        .iter()
        .map(|(vars, problem)| (*vars, Some(*problem)))
        .chain(planned.iter().map(|vars| (*vars, None)))
        .collect();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let plan = &plan;
        let handles: Vec<_> = cases
            .chunks(cases.len().div_ceil(3))
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|(vars, problem)| (*vars, *problem, plan(*vars)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    for (vars, problem, out) in outcomes {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        match problem {
            Some(problem) => {
                assert!(!out.status.success(), "{vars:?} planned");
                assert!(stderr.contains(problem), "{vars:?}: {stderr}");
            }
            None => assert!(out.status.success(), "{vars:?} did not plan: {stderr}"),
        }
    }
}
