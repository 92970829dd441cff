use serde_json::Value;

use crate::config::{
    assert_plan_outcomes, deployed, init, plan_args, plan_dir, prerequisites, root_config,
    terraform, terraform_output, PlanCase, UPSTREAM_LINE,
};
use crate::support::Moto;

/// What a plan (`terraform show -json`) says `address` will be after the change (`field`:
/// `after`, or `after_unknown` for what is known only once applied).
fn change_of(plan: &Value, address: &str, field: &str) -> Value {
    plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["address"] == address)
        .unwrap_or_else(|| panic!("{address} is not planned"))["change"][field]
        .clone()
}

/// What the module deploys at the edge is what the node tests exercise: exactly the source of
/// infra/modules/symdex/edge/access.js (without comment lines and indentation) with its CONFIG
/// line set from the variables, on the viewer-request of every cache behaviour, with the token
/// store when credentials are on; the serving bucket's behaviour runs its own instance, which
/// negotiates the compressed copies (`compress`, zstd by default).
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
    let planned = |plan: &Value, address: &str| change_of(plan, address, "after");

    // IP allow-list only: the whole code is known at plan time.
    let ips = plan(false);
    let source = deployed(&std::fs::read_to_string(module.join("edge/access.js")).unwrap());
    let default_config = "var CONFIG = { allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null, encodings: [], cors: null };";
    assert!(
        source.contains(default_config),
        "the CONFIG line of access.js moved"
    );
    for (address, encodings) in [
        ("module.symdex.aws_cloudfront_function.access[0]", "[]"),
        (
            "module.symdex.aws_cloudfront_function.access_serving[0]",
            r#"["zstd"]"#,
        ),
    ] {
        let function = planned(&ips, address);
        let expected = source.replace(
            default_config,
            &format!(r#"var CONFIG = {{"allowCidrs":["10.0.0.0/8","2001:db8::/32"],"audit":null,"auth":false,"cors":null,"encodings":{encodings},"foldPrefixes":["/symbols/","/index2/"],"kvsId":""}};"#),
        );
        let code = function["code"].as_str().unwrap();
        assert_eq!(code, expected, "{address}");
        assert!(code.len() <= 10 * 1024, "{address}: {} bytes", code.len());
        assert_eq!(function["runtime"], "cloudfront-js-2.0");
    }
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
    let mut targets = Vec::new();
    for behaviour in behaviours {
        targets.push(behaviour["target_origin_id"].as_str().unwrap().to_string());
        assert!(
            events(behaviour).contains(&"viewer-request".to_string()),
            "{behaviour}"
        );
    }
    // The upstream's behaviour is among those checked: its answers pass the same function.
    assert!(targets.contains(&"upstream-0".to_string()), "{targets:?}");
    // So are builds' sources (src/, Source Link's and srcsrv's URLs): the bucket alone, with
    // the serving behaviour's functions (access control, alias redirects).
    let sources = distribution["ordered_cache_behavior"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["path_pattern"] == "src/*")
        .expect("a behaviour for src/*");
    assert_eq!(sources["target_origin_id"], "serving");
    assert_eq!(
        events(sources),
        events(&distribution["default_cache_behavior"][0])
    );
    // debuginfod's headers from object metadata, on the serving behaviour.
    assert!(
        events(&distribution["default_cache_behavior"][0]).contains(&"viewer-response".to_string())
    );
    let headers = planned(&ips, "module.symdex.aws_cloudfront_function.response[0]");
    assert_eq!(
        headers["code"].as_str().unwrap(),
        deployed(&std::fs::read_to_string(module.join("edge/response.js")).unwrap()).replace(
            "var CONFIG = { redirects: true, maxAge: 86400, vary: false, cors: null };",
            r#"var CONFIG = {"cors":null,"maxAge":86400,"redirects":true,"vary":true};"#
        )
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
    for address in [
        "module.symdex.aws_cloudfront_function.access[0]",
        "module.symdex.aws_cloudfront_function.access_serving[0]",
    ] {
        let unknown = change_of(&tokens, address, "after_unknown");
        assert_eq!(unknown["code"], true, "the code names the store's id");
        // The association (the store's ARN) is known only once the store exists.
        let association = &unknown["key_value_store_associations"];
        assert!(
            *association == true || *association == serde_json::json!([true]),
            "{unknown}"
        );
    }
}

/// Unsafe combinations are refused at plan time, each naming its problem: the website (public
/// read) with access control, access control without CloudFront (which enforces it), a
/// layout prefix that is empty (a write grant to the whole bucket) or private, and CI roles
/// per product without product prefixes enforced. The safe combinations still plan.
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
        // Upstreams are planned by their own test (they need CloudFront).
        .replace(UPSTREAM_LINE, "")
        .replace(
            "  require_auth             = true\n",
            "  require_auth             = var.require_auth\n  enable_website = var.enable_website\n  enable_cloudfront = var.enable_cloudfront\n  layout_prefixes = var.layout_prefixes\n",
        )
        .replace(
            "  enforce_product_prefixes = true\n",
            "  enforce_product_prefixes = var.enforce\n",
        );
    let variables = "variable \"require_auth\" { type = bool }\nvariable \"allowed_cidrs\" { type = list(string) }\nvariable \"enable_website\" { type = bool }\nvariable \"enable_cloudfront\" { type = bool }\nvariable \"layout_prefixes\" { type = map(string) }\nvariable \"enforce\" {\n  type    = bool\n  default = true\n}\n\n";
    std::fs::write(d.join("main.tf"), format!("{variables}{config}")).unwrap();
    init(d);
    // (require_auth, allowed_cidrs, enable_website, enable_cloudfront, layout_prefixes)
    let vars = |(auth, cidrs, website, cloudfront, prefixes): (bool, &str, bool, bool, &str)| {
        vec![
            format!("require_auth = {auth}"),
            format!("allowed_cidrs = {cidrs}"),
            format!("enable_website = {website}"),
            format!("enable_cloudfront = {cloudfront}"),
            format!("layout_prefixes = {prefixes}"),
        ]
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
        (
            (false, no_cidrs, false, true, r#"{symstore = "src/syms/"}"#),
            "may not overlap src/",
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
    // ci_products (the root config's `["demo"]`) without product prefixes enforced.
    let mut unenforced = vars((true, cidrs, false, true, defaults));
    unenforced.push("enforce = false".into());
    let cases: Vec<PlanCase> = refused
        .iter()
        .map(|(case, problem)| (vars(*case), Some(*problem)))
        .chain(planned.iter().map(|case| (vars(*case), None)))
        .chain([(unenforced, Some("set enforce_product_prefixes = true"))])
        .collect();
    assert_plan_outcomes(d, &cases);

    // The website's shapes planned for real as well (its public-read bucket policy, the
    // website configuration, the layouts' prefixes in the policies): the provider's own plan
    // step, which the mocked one skips. Side by side: plans save nothing here.
    std::thread::scope(|scope| {
        let website = planned.iter().filter(|(_, _, website, _, _)| *website);
        let plans: Vec<_> = website
            .map(|case| {
                scope.spawn(move || {
                    let vars: Vec<String> = vars(*case)
                        .iter()
                        .map(|v| v.replacen(" = ", "=", 1))
                        .collect();
                    terraform(d, &plan_args(&vars));
                })
            })
            .collect();
        assert_eq!(plans.len(), 2, "the website's accepted shapes");
        for plan in plans {
            plan.join().unwrap();
        }
    });
}

/// `upstreams` become origin groups: the serving bucket first, the upstream (a custom origin
/// whose path maps the prefix onto the url) when the bucket answers 403 or 404; each prefix's
/// behaviour targets its group with the access function in front, after the private prefixes'
/// behaviours; the empty prefix is the default behaviour's. Upstream behaviours keep answers
/// at most `upstream_cache_max_ttl_hours`, and run the response function with redirects only
/// where the bucket can answer. Upstreams that cannot be mapped, or are plain HTTP without
/// `allow_plain_http_upstreams`, are refused at plan time, each naming its problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_plan_origin_groups_failing_over_on_404_and_bad_ones_do_not_plan() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let moto = Moto::start();
    let (dir, module) = plan_dir();
    let d = dir.path();
    let config = root_config(&module, &moto.endpoint)
        .replace(
            UPSTREAM_LINE,
            "  upstreams = var.upstreams\n  enable_cloudfront = var.enable_cloudfront\n  allow_plain_http_upstreams = var.allow_plain_http\n  upstream_cache_max_ttl_hours = var.ttl_hours\n  upstream_cache_policy_id = var.policy_id\n",
        )
        .replace(
            "  require_auth             = true\n",
            "  require_auth = var.enable_cloudfront\n",
        )
        .replace(
            "  allowed_cidrs            = [\"10.0.0.0/8\", \"2001:db8::/32\"]\n",
            "",
        );
    assert!(config.contains("var.upstreams"), "root_config changed");
    let variables = "variable \"upstreams\" {\n  type = list(object({ path_prefix = string, url = string }))\n}\nvariable \"enable_cloudfront\" { type = bool }\nvariable \"allow_plain_http\" {\n  type    = bool\n  default = false\n}\nvariable \"ttl_hours\" {\n  type    = number\n  default = 24\n}\nvariable \"policy_id\" {\n  type    = string\n  default = null\n}\n\n";
    std::fs::write(d.join("main.tf"), format!("{variables}{config}")).unwrap();
    init(d);
    // `extra`: more variables (`name=value`).
    let plan = |upstreams: &str, cloudfront: bool, extra: &[&str]| {
        let mut vars = vec![
            format!("upstreams={upstreams}"),
            format!("enable_cloudfront={cloudfront}"),
        ];
        vars.extend(extra.iter().map(|v| v.to_string()));
        let mut args = plan_args(&vars);
        args.push("-out=tfplan".into());
        terraform_output(d, &args)
    };

    let upstreams = r#"[{path_prefix = "symbols/", url = "https://msdl.microsoft.com/download/symbols/"},
            {path_prefix = "/debian/buildid", url = "http://debuginfod.internal:8002/debian/buildid"},
            {path_prefix = "", url = "https://debuginfod.debian.net"}]"#;
    // Refused, each naming its problem: plain HTTP to an upstream (naming the upstream and the
    // opt-in), upstreams that cannot be mapped, and a year-long managed cache policy (what the
    // module's own policy is there to prevent; one of the operator's own replaces it).
    let msdl =
        r#"[{path_prefix = "symbols/", url = "https://msdl.microsoft.com/download/symbols/"}]"#;
    let refused = [
        (upstreams, true, "", "allow_plain_http_upstreams = true"),
        (
            r#"[{path_prefix = "symbols/", url = "https://msdl.microsoft.com/download/"}]"#,
            true,
            "",
            "url's path must end with path_prefix",
        ),
        (
            r#"[{path_prefix = "", url = "http://debuginfod.internal"}]"#,
            true,
            "",
            r#"upstreams: "" -> http://debuginfod.internal would be fetched in plain HTTP"#,
        ),
        (
            r#"[{path_prefix = "symbols/", url = "https://a.example/symbols/"}, {path_prefix = "/symbols", url = "https://b.example/symbols"}]"#,
            true,
            "",
            "one upstream per path_prefix",
        ),
        (
            r#"[{path_prefix = "_symdex/", url = "https://a.example/_symdex/"}]"#,
            true,
            "",
            "may not overlap the private",
        ),
        (
            r#"[{path_prefix = "src/", url = "https://a.example/src/"}]"#,
            true,
            "",
            "may not overlap src/",
        ),
        (
            r#"[{path_prefix = "symbols/", url = "https://a.example/symbols/?x=1"}]"#,
            true,
            "",
            "without a query",
        ),
        (
            r#"[{path_prefix = "symbols/", url = "https://a.example/symbols/"}]"#,
            false,
            "",
            "need enable_cloudfront",
        ),
        (
            msdl,
            true,
            r#"policy_id = "658327ea-f89d-4fab-a63d-7e88639e58f6""#,
            "upstream_cache_policy_id: the managed CachingOptimized policies",
        ),
    ];
    let cases: Vec<PlanCase> = refused
        .iter()
        .map(|(upstreams, cloudfront, extra, problem)| {
            let mut vars = vec![
                format!("upstreams = {upstreams}"),
                format!("enable_cloudfront = {cloudfront}"),
            ];
            vars.extend((!extra.is_empty()).then(|| extra.to_string()));
            (vars, Some(*problem))
        })
        .collect();
    let diagnostics = assert_plan_outcomes(d, &cases);
    let plain_http = &diagnostics[0];
    assert!(
        plain_http.contains(
            r#"upstreams: "/debian/buildid" -> http://debuginfod.internal:8002/debian/buildid would be fetched in plain HTTP"#
        ),
        "{plain_http}"
    );
    assert!(
        !plain_http.contains("msdl.microsoft.com"),
        "only the plain-HTTP upstream is named: {plain_http}"
    );

    // With the opt-in it plans, and so does the rest of this test.
    let out = plan(upstreams, true, &["allow_plain_http=true", "ttl_hours=6"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap();
    let distribution = change_of(
        &shown,
        "module.symdex.aws_cloudfront_distribution.symbols[0]",
        "after",
    );
    let origin = |id: &str| -> Value {
        distribution["origin"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["origin_id"] == id)
            .unwrap_or_else(|| panic!("no origin {id}"))
            .clone()
    };
    // (group, upstream host, origin path, protocol policy, port)
    let expected = [
        (
            "upstream-0",
            "msdl.microsoft.com",
            "/download",
            "https-only",
            443,
        ),
        ("upstream-1", "debuginfod.internal", "", "http-only", 8002),
        ("upstream-2", "debuginfod.debian.net", "", "https-only", 443),
    ];
    let groups = distribution["origin_group"].as_array().unwrap();
    assert_eq!(groups.len(), expected.len(), "{groups:?}");
    for (group_id, host, path, policy, port) in expected {
        let group = groups
            .iter()
            .find(|g| g["origin_id"] == group_id)
            .unwrap_or_else(|| panic!("no origin group {group_id}"));
        let mut codes: Vec<u64> = group["failover_criteria"][0]["status_codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        codes.sort();
        assert_eq!(codes, [403, 404], "{group}");
        let members: Vec<&str> = group["member"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["origin_id"].as_str().unwrap())
            .collect();
        let upstream_id = format!("{group_id}-origin");
        assert_eq!(
            members,
            ["serving", upstream_id.as_str()],
            "the bucket first"
        );
        let upstream = origin(&upstream_id);
        assert_eq!(upstream["domain_name"], host);
        assert_eq!(upstream["origin_path"], path);
        let custom = &upstream["custom_origin_config"][0];
        assert_eq!(custom["origin_protocol_policy"], policy);
        let port_field = if policy == "https-only" {
            "https_port"
        } else {
            "http_port"
        };
        assert_eq!(custom[port_field], port, "{custom}");
    }
    // Behaviours: the private prefixes first (never asked of anyone), then builds' sources
    // (the bucket alone: never asked of an upstream), then each upstream's.
    let ordered: Vec<(String, String)> = distribution["ordered_cache_behavior"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            assert!(
                b["function_association"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["event_type"] == "viewer-request"),
                "access control on {b}"
            );
            (
                b["path_pattern"].as_str().unwrap().to_string(),
                b["target_origin_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let owned = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        ordered,
        owned(&[
            ("_manifest/*", "unserved"),
            ("_symdex/*", "unserved"),
            ("src/*", "serving"),
            ("symbols/*", "upstream-0"),
            ("debian/buildid/*", "upstream-1"),
        ])
    );
    assert_eq!(
        distribution["default_cache_behavior"][0]["target_origin_id"],
        "upstream-2"
    );
    // Every behaviour targets an origin group of two now (the bucket, then an upstream): the
    // compressed copies (compress, zstd by default) cannot be put in front, so the edge answers
    // identity everywhere: no copies' origin, no per-encoding cache key, no negotiating instance.
    assert!(
        distribution["origin"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| !o["origin_id"].as_str().unwrap().starts_with("serving-")),
        "{distribution}"
    );
    for r in shown["resource_changes"].as_array().unwrap() {
        let address = r["address"].as_str().unwrap();
        assert!(
            !address.contains("access_serving") && !address.contains("cache_policy.serving"),
            "{address}"
        );
    }
    assert_eq!(
        shown["output_changes"]["compression"]["after"]["edge_encodings"],
        serde_json::json!([]),
        "{}",
        shown["output_changes"]
    );

    // The upstreams' cache policy: at most the hours asked for (6 here), whatever an upstream's
    // Cache-Control says, and nothing of the viewer's in the key or forwarded.
    let policy = change_of(
        &shown,
        "module.symdex.aws_cloudfront_cache_policy.upstream[0]",
        "after",
    );
    assert_eq!(policy["max_ttl"], 6 * 3600, "{policy}");
    assert_eq!(policy["default_ttl"], 6 * 3600, "{policy}");
    assert_eq!(policy["min_ttl"], 0, "{policy}");
    let parameters = &policy["parameters_in_cache_key_and_forwarded_to_origin"][0];
    assert_eq!(
        parameters["headers_config"][0]["header_behavior"], "none",
        "{policy}"
    );
    assert_eq!(
        parameters["cookies_config"][0]["cookie_behavior"], "none",
        "{policy}"
    );
    assert_eq!(
        parameters["query_strings_config"][0]["query_string_behavior"], "none",
        "{policy}"
    );
    // Every upstream behaviour uses it (its id is known once created); the private prefixes
    // keep the managed policy (they answer 404 from the bucket only), and so do builds'
    // sources (the bucket alone, immutable under their keys).
    let unknown = change_of(
        &shown,
        "module.symdex.aws_cloudfront_distribution.symbols[0]",
        "after_unknown",
    );
    let managed = "658327ea-f89d-4fab-a63d-7e88639e58f6";
    for (i, (pattern, _)) in ordered.iter().enumerate() {
        let planned = &distribution["ordered_cache_behavior"][i]["cache_policy_id"];
        let later = &unknown["ordered_cache_behavior"][i]["cache_policy_id"];
        if pattern.starts_with('_') || pattern == "src/*" {
            assert_eq!(planned, managed, "{pattern}");
        } else {
            assert_eq!(*later, true, "{pattern}: {planned}");
        }
    }
    assert_eq!(
        unknown["default_cache_behavior"][0]["cache_policy_id"], true,
        "the default behaviour is upstream-2's"
    );
    // The response function on each upstream's behaviour: the tested source with its CONFIG
    // line set. symbols/ and the default behaviour hold own keys (their aliases redirect);
    // debian/buildid/ holds none (every answer there is the upstream's: no redirect).
    let source = deployed(&std::fs::read_to_string(module.join("edge/response.js")).unwrap());
    let default_config =
        "var CONFIG = { redirects: true, maxAge: 86400, vary: false, cors: null };";
    assert!(
        source.contains(default_config),
        "response.js's CONFIG line moved"
    );
    for (i, redirects) in [(0, true), (1, false), (2, true)] {
        let function = change_of(
            &shown,
            &format!("module.symdex.aws_cloudfront_function.response_upstream[{i}]"),
            "after",
        );
        assert_eq!(
            function["code"].as_str().unwrap(),
            source.replace(
                default_config,
                &format!(
                    r#"var CONFIG = {{"cors":null,"maxAge":21600,"redirects":{redirects},"vary":false}};"#
                )
            ),
            "upstream-{i}"
        );
    }

    // A cache policy of the operator's own replaces the module's.
    let own = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
    let out = plan(msdl, true, &[&format!("policy_id={own}")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap();
    // (The serving bucket's own policy, keyed on the encoding, is the default behaviour's.)
    assert!(shown["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["address"] != "module.symdex.aws_cloudfront_cache_policy.upstream[0]"));
    let distribution = change_of(
        &shown,
        "module.symdex.aws_cloudfront_distribution.symbols[0]",
        "after",
    );
    let symbols = distribution["ordered_cache_behavior"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["path_pattern"] == "symbols/*")
        .unwrap();
    assert_eq!(symbols["cache_policy_id"], own);
}

/// `compress` and `cors` at the edge. The serving bucket's behaviour gets an origin per
/// encoding (the bucket under `/_symdex/encoded/<encoding>`: the origins the access function
/// names in the origin group it makes per request, before the plain `serving` origin, as
/// edge/compression.test.mjs runs it), a cache policy keyed on `x-symdex-encoding` alone (not
/// on Accept-Encoding), and its own instance of the access function with the encodings in
/// zstd-first order; the response function there says Vary. `cors` allows OPTIONS on every
/// behaviour and puts the (lowercased) origins in both functions. The indexer's /tmp stages
/// the copies. Encodings symdex does not store, origins that are not origins, and CORS without
/// CloudFront are refused at plan time, naming the problem; so is an access function that
/// would not fit CloudFront's 10 KB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_answers_and_cors_plan_and_unsafe_settings_do_not() {
    if let Err(missing) = prerequisites() {
        eprintln!("SKIPPED: {missing}: the Terraform module cannot be planned here");
        return;
    }
    let moto = Moto::start();
    let (dir, module) = plan_dir();
    let d = dir.path();
    let config = root_config(&module, &moto.endpoint)
        // The default behaviour is the bucket's (an upstream there would be a group already).
        .replace(UPSTREAM_LINE, "")
        .replace(
            "  require_auth             = true\n",
            "  require_auth = false\n  compress = var.compress\n  cors = var.cors\n  cors_origins = var.cors_origins\n  enable_cloudfront = var.enable_cloudfront\n",
        )
        .replace(
            "  allowed_cidrs            = [\"10.0.0.0/8\", \"2001:db8::/32\"]\n",
            "  allowed_cidrs = var.allowed_cidrs\n",
        );
    assert!(config.contains("var.cors_origins"), "root_config changed");
    let variables = "variable \"compress\" { type = list(string) }\nvariable \"cors\" { type = bool }\nvariable \"cors_origins\" { type = list(string) }\nvariable \"enable_cloudfront\" {\n  type    = bool\n  default = true\n}\nvariable \"allowed_cidrs\" {\n  type    = list(string)\n  default = [\"10.0.0.0/8\", \"2001:db8::/32\"]\n}\n\n";
    std::fs::write(d.join("main.tf"), format!("{variables}{config}")).unwrap();
    init(d);
    let plan = |vars: &[&str]| {
        let mut args = plan_args(vars);
        args.push("-out=tfplan".into());
        terraform_output(d, &args)
    };

    let out = plan(&[
        r#"compress=["gzip", "zstd"]"#,
        "cors=true",
        r#"cors_origins=["https://Profiler.example.com", "http://localhost:8080"]"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap();
    let after = |address: &str| change_of(&shown, address, "after");
    let distribution = after("module.symdex.aws_cloudfront_distribution.symbols[0]");
    let unknown = change_of(
        &shown,
        "module.symdex.aws_cloudfront_distribution.symbols[0]",
        "after_unknown",
    );

    // The copies' origins: the same bucket (its name known once created), an origin path per
    // encoding, origin access control as the plain bucket's.
    let origins = distribution["origin"].as_array().unwrap();
    let mut paths: Vec<(String, String)> = origins
        .iter()
        .map(|o| {
            (
                o["origin_id"].as_str().unwrap().to_string(),
                o["origin_path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    paths.sort();
    let owned = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        paths,
        owned(&[
            ("serving", ""),
            ("serving-gzip", "/_symdex/encoded/gzip"),
            ("serving-zstd", "/_symdex/encoded/zstd"),
            ("unserved", "/_unserved"),
        ])
    );
    for (i, o) in origins.iter().enumerate() {
        assert_eq!(
            unknown["origin"][i]["origin_access_control_id"], true,
            "{o}: signed like the bucket's"
        );
    }
    // No group is configured: the access function makes one per request, from origins the
    // distribution holds (node tests: serving-<encoding>, then serving, on 403/404).
    assert!(
        distribution["origin_group"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{distribution}"
    );
    let source = std::fs::read_to_string(module.join("edge/access.js")).unwrap();
    assert!(source
        .contains("originIds: [{ originId: 'serving-' + encoding }, { originId: 'serving' }]"));
    assert!(source.contains("failoverCriteria: { statusCodes: [403, 404] }"));

    // The serving bucket's behaviour: CloudFront compresses nothing itself, the cache key is
    // the encoding the function chose, OPTIONS is allowed for preflights.
    let default = &distribution["default_cache_behavior"][0];
    assert_eq!(default["target_origin_id"], "serving");
    assert_eq!(default["compress"], false);
    assert_eq!(
        default["allowed_methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect::<std::collections::BTreeSet<_>>(),
        ["GET", "HEAD", "OPTIONS"].into()
    );
    assert_eq!(
        unknown["default_cache_behavior"][0]["cache_policy_id"], true,
        "the module's own policy (its id known once created)"
    );
    let policy = after("module.symdex.aws_cloudfront_cache_policy.serving[0]");
    // CachingOptimized's TTLs.
    assert_eq!(policy["min_ttl"], 1, "{policy}");
    assert_eq!(policy["default_ttl"], 86400, "{policy}");
    assert_eq!(policy["max_ttl"], 31536000, "{policy}");
    let parameters = &policy["parameters_in_cache_key_and_forwarded_to_origin"][0];
    assert_eq!(parameters["enable_accept_encoding_gzip"], false);
    assert_eq!(parameters["enable_accept_encoding_brotli"], false);
    let headers = &parameters["headers_config"][0];
    assert_eq!(headers["header_behavior"], "whitelist");
    assert_eq!(
        headers["headers"][0]["items"],
        serde_json::json!(["x-symdex-encoding"])
    );
    assert_eq!(
        parameters["cookies_config"][0]["cookie_behavior"], "none",
        "{policy}"
    );
    assert_eq!(
        parameters["query_strings_config"][0]["query_string_behavior"], "none",
        "{policy}"
    );
    // Every other behaviour allows preflights too (the access function answers them there).
    for b in distribution["ordered_cache_behavior"].as_array().unwrap() {
        assert!(
            b["allowed_methods"]
                .as_array()
                .unwrap()
                .contains(&Value::from("OPTIONS")),
            "{b}"
        );
    }

    // The functions: the tested sources with their CONFIG lines.
    let access = deployed(&source);
    let default_config = "var CONFIG = { allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null, encodings: [], cors: null };";
    let cors = r#"{"origins":["https://profiler.example.com","http://localhost:8080"]}"#;
    for (address, encodings) in [
        ("module.symdex.aws_cloudfront_function.access[0]", "[]"),
        (
            "module.symdex.aws_cloudfront_function.access_serving[0]",
            r#"["zstd","gzip"]"#,
        ),
    ] {
        let config = format!(
            r#"var CONFIG = {{"allowCidrs":["10.0.0.0/8","2001:db8::/32"],"audit":null,"auth":false,"cors":{cors},"encodings":{encodings},"foldPrefixes":["/symbols/","/index2/"],"kvsId":""}};"#
        );
        assert_eq!(
            after(address)["code"].as_str().unwrap(),
            access.replace(default_config, &config),
            "{address}"
        );
    }
    let response = deployed(&std::fs::read_to_string(module.join("edge/response.js")).unwrap());
    assert_eq!(
        after("module.symdex.aws_cloudfront_function.response[0]")["code"]
            .as_str()
            .unwrap(),
        response.replace(
            "var CONFIG = { redirects: true, maxAge: 86400, vary: false, cors: null };",
            &format!(
                r#"var CONFIG = {{"cors":{cors},"maxAge":86400,"redirects":true,"vary":true}};"#
            )
        )
    );

    // The indexer stages a copy in /tmp (its environment, SYMDEX_COMPRESS among it, names the
    // buckets: known once they exist; the apply test reads it).
    let indexer = after("module.symdex.aws_lambda_function.indexer");
    assert_eq!(indexer["ephemeral_storage"][0]["size"], 4096, "{indexer}");
    let compression = &shown["output_changes"]["compression"]["after"];
    assert_eq!(compression["copies"], serde_json::json!(["zstd", "gzip"]));
    assert_eq!(
        compression["edge_encodings"],
        serde_json::json!(["zstd", "gzip"])
    );
    assert_eq!(compression["cache_key_header"], "x-symdex-encoding");
    assert_eq!(compression["egress_saved_usd_per_tb_downloaded"], 68.0);
    assert_eq!(compression["storage_usd_per_tb_stored_month"], 10.12);

    // Off: no copies' origins, no own policy, the managed one; GET and HEAD only.
    let out = plan(&["compress=[]", "cors=false", r#"cors_origins=["*"]"#]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_str(&terraform(d, &["show", "-json", "tfplan"])).unwrap();
    let distribution = change_of(
        &shown,
        "module.symdex.aws_cloudfront_distribution.symbols[0]",
        "after",
    );
    let default = &distribution["default_cache_behavior"][0];
    assert_eq!(
        default["cache_policy_id"],
        "658327ea-f89d-4fab-a63d-7e88639e58f6"
    );
    assert_eq!(default["allowed_methods"].as_array().unwrap().len(), 2);
    assert_eq!(distribution["origin"].as_array().unwrap().len(), 2);
    assert!(shown["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(
            |r| r["address"] != "module.symdex.aws_cloudfront_function.access_serving[0]"
                && r["type"] != "aws_cloudfront_cache_policy"
        ));
    assert_eq!(
        shown["output_changes"]["compression"]["after"]["storage_usd_per_tb_stored_month"],
        0
    );

    // Refused, each naming its problem.
    let many_cidrs = format!(
        "allowed_cidrs=[{}]",
        (0..400)
            .map(|i| format!("\"2001:db8:{i:x}::/48\""))
            .collect::<Vec<_>>()
            .join(",")
    );
    let refused: [(&[&str], &str); 7] = [
        (
            &[r#"compress=["br"]"#, "cors=false", r#"cors_origins=["*"]"#],
            r#"compress: "br" is not an encoding symdex stores"#,
        ),
        (
            &[
                r#"compress=["zstd", "deflate"]"#,
                "cors=false",
                r#"cors_origins=["*"]"#,
            ],
            r#""deflate" is not an encoding symdex stores"#,
        ),
        (
            &[
                r#"compress=["zstd"]"#,
                "cors=true",
                r#"cors_origins=["https://profiler.example.com/"]"#,
            ],
            "cors_origins: each is an origin as browsers send it",
        ),
        (
            &[
                r#"compress=["zstd"]"#,
                "cors=true",
                r#"cors_origins=["profiler.example.com"]"#,
            ],
            "cors_origins: each is an origin as browsers send it",
        ),
        (
            &[
                r#"compress=["zstd"]"#,
                "cors=true",
                r#"cors_origins=["*", "https://a.example"]"#,
            ],
            r#"cors_origins: "*" allows every origin"#,
        ),
        (
            &[
                r#"compress=["zstd"]"#,
                "cors=true",
                r#"cors_origins=["*"]"#,
                "enable_cloudfront=false",
                "allowed_cidrs=[]",
            ],
            "cors is answered by CloudFront's functions",
        ),
        (
            &[
                r#"compress=["zstd"]"#,
                "cors=false",
                r#"cors_origins=["*"]"#,
                &many_cidrs,
            ],
            "over CloudFront's 10 KB",
        ),
    ];
    let cases: Vec<PlanCase> = refused
        .iter()
        .map(|(vars, problem)| (vars.iter().map(|v| v.to_string()).collect(), Some(*problem)))
        .collect();
    assert_plan_outcomes(d, &cases);
}
