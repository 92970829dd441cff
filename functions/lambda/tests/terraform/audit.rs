//! The audit page in the plan (audit_page): a behaviour of its own for its folder (the
//! serving bucket, never cached, behind the access function that admits the audit grant
//! alone: edge/audit.test.mjs runs that function), its URL an output; and the configurations
//! that would show it to the wrong people refused. (The sweeper's SYMDEX_AUDIT_PAGE is known
//! only once the buckets exist: its environment names them.)

use serde_json::Value;

use crate::config::{
    assert_plan_outcomes, init, plan_args, plan_dir, prerequisites, root_config, terraform,
    PlanCase, MOCKED_ENDPOINT,
};
use crate::support::Moto;

const TOKEN_SHA256: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// A root module whose audit variables (and require_auth: the access function's code is
/// known at plan time without the token store) are the plan's `-var`s.
fn audit_root(module: &std::path::Path, endpoint: &str) -> String {
    let config = root_config(module, endpoint)
        .replace(
            "  require_auth             = true\n",
            "  require_auth             = false\n  audit_page = var.audit_page\n  audit_token_sha256 = var.audit_token_sha256\n  audit_cidrs = var.audit_cidrs\n",
        );
    let variables = "variable \"audit_page\" { type = bool }\nvariable \"audit_token_sha256\" {\n  type    = string\n  default = null\n}\nvariable \"audit_cidrs\" {\n  type    = list(string)\n  default = []\n}\n\n";
    format!(
        "{variables}{config}output \"audit_page_url\" {{ value = module.symdex.audit_page_url }}\n"
    )
}

fn after(plan: &Value, address: &str) -> Value {
    plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("{address} is not planned"))["change"]["after"]
        .clone()
}

/// The CONFIG the planned access function runs with (the rest of its code is the tested
/// source: the other plan test says so).
fn access_config(plan: &Value) -> Value {
    let function = after(plan, "module.symdex.aws_cloudfront_function.access[0]");
    let code = function["code"].as_str().unwrap();
    let line = code
        .lines()
        .find_map(|l| l.strip_prefix("var CONFIG = "))
        .unwrap();
    serde_json::from_str(line.trim_end_matches(';')).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_page_plans_behind_its_own_grant() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let moto = Moto::start();
    let (dir, module) = plan_dir();
    let d = dir.path();
    std::fs::write(d.join("main.tf"), audit_root(&module, &moto.endpoint)).unwrap();
    init(d);
    let plan = |vars: &[String]| -> Value {
        let mut args = plan_args(vars);
        args.push("-out=tfplan".into());
        terraform(d, &args);
        serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap()
    };

    let on = plan(&[
        "audit_page=true".into(),
        format!("audit_token_sha256={}", TOKEN_SHA256.to_uppercase()),
        r#"audit_cidrs=["192.0.2.0/24"]"#.into(),
    ]);
    // The edge admits the audit grant there (the hash only, lowercased), readers' rules apart.
    let config = access_config(&on);
    assert_eq!(
        config["audit"],
        serde_json::json!({
            "prefix": "/_symdex/audit/",
            "tokenSha256": TOKEN_SHA256,
            "cidrs": ["192.0.2.0/24"],
        }),
        "{config}"
    );
    // Its folder's behaviour comes before the private prefix it lies under: the serving bucket,
    // never cached, the access function on the viewer request.
    let distribution = after(&on, "module.symdex.aws_cloudfront_distribution.symbols[0]");
    let ordered = distribution["ordered_cache_behavior"].as_array().unwrap();
    let patterns: Vec<&str> = ordered
        .iter()
        .map(|b| b["path_pattern"].as_str().unwrap())
        .collect();
    assert_eq!(
        patterns[..3],
        ["_symdex/audit/*", "_manifest/*", "_symdex/*"],
        "{patterns:?}"
    );
    let page = &ordered[0];
    assert_eq!(page["target_origin_id"], "serving");
    assert_eq!(
        page["cache_policy_id"], "4135ea2d-6df8-44a3-9df3-4b5a84be39ad",
        "CachingDisabled"
    );
    let events: Vec<&str> = page["function_association"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["viewer-request"]);
    assert_eq!(
        ordered[2]["target_origin_id"], "unserved",
        "the rest of _symdex/"
    );
    // Its URL is an output (the distribution's name is known once created).
    assert_eq!(
        on["output_changes"]["audit_page_url"]["after_unknown"], true,
        "{}",
        on["output_changes"]
    );

    // Off (the default): no folder, no audit configuration at the edge, no URL.
    let off = plan(&["audit_page=false".into()]);
    assert_eq!(access_config(&off)["audit"], Value::Null);
    let distribution = after(&off, "module.symdex.aws_cloudfront_distribution.symbols[0]");
    assert!(distribution["ordered_cache_behavior"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["path_pattern"] != "_symdex/audit/*"));
    assert_eq!(
        off["output_changes"]["audit_page_url"]["after"],
        Value::Null
    );
}

/// What would show the page to nobody or to too many does not plan, each naming its problem;
/// a token alone or a CIDR list alone does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_audit_configurations_do_not_plan() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let (dir, module) = plan_dir();
    let d = dir.path();
    std::fs::write(d.join("main.tf"), audit_root(&module, MOCKED_ENDPOINT)).unwrap();
    init(d);
    let token = format!("audit_token_sha256 = \"{TOKEN_SHA256}\"");
    let cases: Vec<PlanCase> = vec![
        (
            vec!["audit_page=true".into()],
            Some("audit_page needs a grant"),
        ),
        (
            vec![
                "audit_page=true".into(),
                r#"audit_cidrs=["0.0.0.0/0"]"#.into(),
            ],
            Some("wider than /8"),
        ),
        (
            vec!["audit_page=true".into(), r#"audit_cidrs=["::/0"]"#.into()],
            Some("wider than /8"),
        ),
        (
            vec![
                "audit_page=true".into(),
                token.clone(),
                r#"audit_cidrs=["10.0.0.0/4"]"#.into(),
            ],
            Some("wider than /8"),
        ),
        (
            vec![
                "audit_page=true".into(),
                r#"audit_cidrs=["10.0.0.1"]"#.into(),
            ],
            Some("with their length"),
        ),
        (
            vec![
                "audit_page=true".into(),
                r#"audit_token_sha256 = "my-secret-token""#.into(),
            ],
            Some("must be a SHA-256"),
        ),
        (
            vec![
                "audit_page=true".into(),
                format!("audit_token_sha256 = \"{}\"", &TOKEN_SHA256[1..]),
            ],
            Some("must be a SHA-256"),
        ),
        (vec!["audit_page=true".into(), token.clone()], None),
        (
            vec![
                "audit_page=true".into(),
                r#"audit_cidrs=["192.0.2.0/24", "2001:db8:a::/48"]"#.into(),
            ],
            None,
        ),
    ];
    assert_plan_outcomes(d, &cases);
}
