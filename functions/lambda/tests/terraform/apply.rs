use std::process::Command;

use serde_json::Value;

use crate::config::{init, plan_dir, prerequisites, root_config, terraform, UPSTREAM_LINE};

const CACHING_DISABLED: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
use crate::support::Moto;

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
    // The plan's directory, with a real zip in place of the stand-in (an apply uploads it).
    let (dir, module) = plan_dir();
    std::fs::remove_file(dir.path().join("bootstrap.zip")).unwrap();
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
    // moto_server has no cache-policy API: the upstream's behaviour gets a managed policy
    // (CachingDisabled) instead of the module's own, and the copies are made but not answered
    // at the edge (edge_compression = false: no policy keyed on the encoding); the plan test
    // checks both policies. CORS on: every behaviour allows OPTIONS.
    let config = root_config(&module, &moto.endpoint).replace(
        UPSTREAM_LINE,
        &format!("{UPSTREAM_LINE}  upstream_cache_policy_id = \"{CACHING_DISABLED}\"\n  compress = [\"zstd\", \"gzip\"]\n  edge_compression = false\n  cors = true\n"),
    );
    assert!(config.contains(CACHING_DISABLED), "root_config changed");
    std::fs::write(dir.path().join("main.tf"), config).unwrap();

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
    // What `symdex push --wait` needs and no more: writes only under the product's prefix,
    // listings only of its own prefix and of the manifest, reads of the serving bucket only.
    let as_list = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
            _ => Vec::new(),
        }
    };
    let mut granted = Vec::new();
    for statement in policy["Statement"].as_array().unwrap() {
        let actions = as_list(&statement["Action"]);
        let resources = as_list(&statement["Resource"]);
        for action in &actions {
            granted.push(action.clone());
            match action.as_str() {
                "s3:PutObject" | "s3:AbortMultipartUpload" | "s3:DeleteObject" => assert!(
                    resources
                        .iter()
                        .all(|r| r.ends_with("symdex-tf-ingest/demo/*")),
                    "{statement}"
                ),
                "s3:ListBucket" => {
                    let prefixes = as_list(&statement["Condition"]["StringLike"]["s3:prefix"]);
                    assert!(
                        prefixes == ["demo/*"] || prefixes == ["_manifest/*"],
                        "{statement}"
                    );
                }
                "s3:GetObject" => assert!(
                    resources.iter().all(|r| !r.contains("_symdex/")),
                    "never the private state: {statement}"
                ),
                other => panic!("{other} granted to CI: {statement}"),
            }
        }
    }
    for needed in ["s3:PutObject", "s3:GetObject", "s3:ListBucket"] {
        assert!(granted.iter().any(|g| g == needed), "{needed}: {policy}");
    }
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
            r#"var CONFIG = {{"allowCidrs":["10.0.0.0/8","2001:db8::/32"],"audit":null,"auth":true,"cors":{{"origins":["*"]}},"encodings":[],"foldPrefixes":["/symbols/","/index2/"],"kvsId":"{}"}};"#,
            kvs["id"].as_str().unwrap()
        )),
        "{code}"
    );
    // The audit page is off unless asked for (audit_page): the sweeper is told so.
    let sweeper = find("module.symdex.aws_lambda_function.sweeper[0]");
    assert_eq!(
        sweeper["environment"][0]["variables"]["SYMDEX_AUDIT_PAGE"], "false",
        "{sweeper}"
    );
    // The upstream's origin group, as the endpoint holds it after the apply (read back).
    let distribution = find("module.symdex.aws_cloudfront_distribution.symbols[0]");
    let groups = distribution["origin_group"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{distribution}");
    assert_eq!(groups[0]["origin_id"], "upstream-0");
    // Its behaviour runs the upstream's instance of the response function, the default
    // behaviour (the bucket alone) the bucket's.
    let viewer_response = |behaviour: &Value| -> String {
        behaviour["function_association"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["event_type"] == "viewer-response")
            .unwrap_or_else(|| panic!("no viewer-response function on {behaviour}"))["function_arn"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let symbols = distribution["ordered_cache_behavior"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["path_pattern"] == "symbols/*")
        .unwrap();
    let upstream_function = find("module.symdex.aws_cloudfront_function.response_upstream[0]");
    let bucket_function = find("module.symdex.aws_cloudfront_function.response[0]");
    assert_ne!(upstream_function["arn"], bucket_function["arn"]);
    assert_eq!(
        viewer_response(symbols),
        upstream_function["arn"].as_str().unwrap()
    );
    assert_eq!(symbols["cache_policy_id"], CACHING_DISABLED);
    assert_eq!(
        viewer_response(&distribution["default_cache_behavior"][0]),
        bucket_function["arn"].as_str().unwrap()
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
    // PDBs whose srcsrv stream runs commands are published unless the deployment refuses them.
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_REFUSE_SRCSRV_COMMANDS"],
        "false"
    );
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_DECODER_MEMORY_MB"],
        "300"
    );
    // The copies the indexer makes (zstd first), staged in its /tmp.
    assert_eq!(
        indexer["environment"][0]["variables"]["SYMDEX_COMPRESS"],
        "zstd,gzip"
    );
    assert_eq!(indexer["ephemeral_storage"][0]["size"], 4096);
    // Preflights reach the access function on every behaviour.
    for behaviour in std::iter::once(&distribution["default_cache_behavior"][0]).chain(
        distribution["ordered_cache_behavior"]
            .as_array()
            .unwrap()
            .iter(),
    ) {
        assert!(
            behaviour["allowed_methods"]
                .as_array()
                .unwrap()
                .contains(&Value::from("OPTIONS")),
            "{behaviour}"
        );
    }
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

    // The view `latest`: each upload's latest decision, the manifest's columns and its date.
    let latest = find("module.symdex.aws_glue_catalog_table.latest[0]");
    let manifest = find("module.symdex.aws_glue_catalog_table.manifest[0]");
    assert_eq!(latest["table_type"], "VIRTUAL_VIEW");
    let view = latest_view_definition(&latest);
    let sql = view["originalSql"].as_str().unwrap();
    for part in [
        "rank() OVER (PARTITION BY upload ORDER BY regexp_extract(\"$path\", '[^/]*$') DESC)",
        "WHERE action <> 'repeated'",
        "WHERE decision = 1",
    ] {
        assert!(sql.contains(part), "{part} not in {sql}");
    }
    let columns = |table: &Value| -> Vec<String> {
        table["storage_descriptor"][0]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mut expected = columns(&manifest);
    expected.push("dt".into());
    let in_view: Vec<String> = view["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(in_view, expected);
    assert_eq!(columns(&latest), expected);
    assert!(expected.contains(&"repeated".to_string()));
    // A PDB's sources (documents, Source Link map, srcsrv stream), read by the JSON SerDe;
    // tests/athena_columns.rs holds its type to the record's JSON.
    assert!(expected.contains(&"pdb_sources".to_string()));
    assert!(
        find("module.symdex.aws_athena_named_query.build_published[0]")["query"]
            .as_str()
            .unwrap()
            .contains(".latest WHERE build = 'X'"),
        "what a build published is its uploads' latest decisions"
    );

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

/// The definition an Athena view carries in its Glue table (`/* Presto View: <base64 JSON> */`).
fn latest_view_definition(table: &Value) -> Value {
    use base64::Engine;
    let text = table["view_original_text"].as_str().unwrap();
    let encoded = text
        .strip_prefix("/* Presto View: ")
        .and_then(|t| t.strip_suffix(" */"))
        .unwrap_or_else(|| panic!("not a Presto view: {text}"));
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}
