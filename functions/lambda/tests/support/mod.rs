//! Test support for the Lambda functions: a real moto_server on 127.0.0.1 (started here, one
//! per test, stopped on drop), SDK clients pointed at it, and fixtures built with gcc.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use serde_json::{json, Value};

pub mod runtime_api;

pub const REGION: &str = "us-east-1";

/// A moto_server process.
pub struct Moto {
    child: Child,
    pub endpoint: String,
}

impl Moto {
    pub fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start moto_server ({e}); scripts/setup.sh installs it")
            });
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    /// The environment a function (or the SDK) needs to talk to this endpoint.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", REGION.into()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
    }

    async fn sdk_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(&self.endpoint)
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "testing", "testing", None, None, "test",
            ))
            .load()
            .await
    }

    pub async fn s3(&self) -> aws_sdk_s3::Client {
        let conf = aws_sdk_s3::config::Builder::from(&self.sdk_config().await)
            .force_path_style(true)
            .build();
        aws_sdk_s3::Client::from_conf(conf)
    }

    /// An S3 client for another endpoint (a proxy in front of this moto), with the SDK's
    /// standard retries as the functions configure them.
    pub async fn s3_via(&self, endpoint: &str) -> aws_sdk_s3::Client {
        self.s3_via_with(endpoint, 5).await
    }

    /// [`Self::s3_via`] with `attempts` tries per request (1: the first failure is final).
    pub async fn s3_via_with(&self, endpoint: &str, attempts: u32) -> aws_sdk_s3::Client {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(endpoint)
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "testing", "testing", None, None, "test",
            ))
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(attempts))
            .load()
            .await;
        aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk)
                .force_path_style(true)
                .build(),
        )
    }

    pub async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.sdk_config().await)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment a bootstrap binary gets from Lambda, pointed at a Runtime API endpoint.
pub fn lambda_env(function: &str, runtime_api: &str, moto: &Moto) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = moto
        .env()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (k, v) in [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", function.to_string()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_string()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512".to_string()),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            format!("/aws/lambda/{function}"),
        ),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "test".to_string()),
        ("SYMDEX_SERVING_BUCKET", SERVING.to_string()),
        // moto_server copies over an existing object despite `If-None-Match`.
        ("SYMDEX_CONDITIONAL_COPY", "false".to_string()),
    ] {
        env.push((k.to_string(), v));
    }
    env
}

/// Ingest and serving buckets, and a queue receiving the ingest bucket's notifications.
pub struct Stack {
    pub moto: Moto,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub queue_url: String,
    pub queue_arn: String,
}

pub const INGEST: &str = "symdex-ingest";
pub const SERVING: &str = "symdex-serving";

impl Stack {
    pub async fn new() -> Stack {
        let moto = Moto::start();
        let s3 = moto.s3().await;
        let sqs = moto.sqs().await;
        for bucket in [INGEST, SERVING] {
            s3.create_bucket().bucket(bucket).send().await.unwrap();
        }
        let queue_url = sqs
            .create_queue()
            .queue_name("symdex-events")
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap();
        let queue_arn =
            attrs.attributes.unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone();
        use aws_sdk_s3::types::{Event, NotificationConfiguration, QueueConfiguration};
        let notifications = NotificationConfiguration::builder()
            .queue_configurations(
                QueueConfiguration::builder()
                    .queue_arn(&queue_arn)
                    .events(Event::S3ObjectCreated)
                    .events(Event::S3ObjectRemoved)
                    .build()
                    .unwrap(),
            )
            .build();
        s3.put_bucket_notification_configuration()
            .bucket(INGEST)
            .notification_configuration(notifications)
            .send()
            .await
            .unwrap();
        let stack = Stack {
            moto,
            s3,
            sqs,
            queue_url,
            queue_arn,
        };
        // Setting up notifications sends an s3:TestEvent; drain it.
        stack.drain().await;
        stack
    }

    pub async fn upload(&self, key: &str, path: &Path) {
        self.s3
            .put_object()
            .bucket(INGEST)
            .key(key)
            .body(ByteStream::from_path(path).await.unwrap())
            .metadata("build", "ci-42")
            .send()
            .await
            .unwrap();
    }

    /// Lets anyone read the serving bucket's objects, as CloudFront's origin access does for
    /// its viewers: its REST endpoint then stands in for the distribution.
    pub async fn public_read(&self) {
        let policy = serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": format!("arn:aws:s3:::{SERVING}/*"),
            }]
        });
        self.s3
            .put_bucket_policy()
            .bucket(SERVING)
            .policy(policy.to_string())
            .send()
            .await
            .unwrap();
    }

    /// Puts `bytes` at `key` of the ingest bucket with exactly `metadata`.
    pub async fn put(&self, key: &str, bytes: Vec<u8>, metadata: &[(&str, &str)]) {
        let metadata = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.s3
            .put_object()
            .bucket(INGEST)
            .key(key)
            .body(bytes.into())
            .set_metadata(Some(metadata))
            .send()
            .await
            .unwrap();
    }

    /// Uploads `path` at `key` and runs the indexer on the notification that arrives.
    pub async fn upload_and_index(&self, key: &str, path: &Path) {
        self.upload(key, path).await;
        let ctx = std::sync::Arc::new(symdex_lambda::Context::new(
            config(&[]),
            self.moto.s3().await,
        ));
        self.index_received(&ctx, 1).await;
    }

    /// Runs the indexer `ctx` on the notifications of `count` uploads, in one batch, which
    /// must succeed whole.
    pub async fn index_received(&self, ctx: &std::sync::Arc<symdex_lambda::Context>, count: usize) {
        let created = self.receive(count).await;
        let response = symdex_lambda::handle_indexer(ctx, sqs_event(&created, &self.queue_arn))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    }

    /// Receives messages until `count` arrived (or 30 s passed), deleting them from the queue
    /// as a Lambda event source mapping would after a successful batch.
    pub async fn receive(&self, count: usize) -> Vec<aws_sdk_sqs::types::Message> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while out.len() < count && Instant::now() < deadline {
            let resp = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .message_system_attribute_names(
                    aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount,
                )
                .send()
                .await
                .unwrap();
            for m in resp.messages.unwrap_or_default() {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(m.receipt_handle.clone().unwrap())
                    .send()
                    .await
                    .unwrap();
                out.push(m);
            }
        }
        assert!(
            out.len() >= count,
            "only {} of {count} notifications arrived",
            out.len()
        );
        out
    }

    pub async fn drain(&self) {
        loop {
            let resp = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            let messages = resp.messages.unwrap_or_default();
            if messages.is_empty() {
                return;
            }
            for m in messages {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(m.receipt_handle.unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    /// Every key of a bucket under `prefix`, in order, listed only (no object is read).
    pub async fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut pages = self
            .s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            keys.extend(
                page.unwrap()
                    .contents()
                    .iter()
                    .map(|o| o.key().unwrap().to_string()),
            );
        }
        keys.sort();
        keys
    }

    /// Every key of a bucket under `prefix` with its content.
    pub async fn objects(&self, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for key in self.keys(bucket, prefix).await {
            let body = self.read(bucket, &key).await;
            out.push((key, body));
        }
        out
    }

    /// The content of an object that must be there.
    pub async fn read(&self, bucket: &str, key: &str) -> Vec<u8> {
        let object = self.s3.get_object().bucket(bucket).key(key).send().await;
        let body = object.unwrap().body.collect().await.unwrap();
        body.into_bytes().to_vec()
    }
}

/// EventBridge's scheduled event for the sweeper, as its rule delivers it at `at`.
pub fn scheduled_event(at: std::time::SystemTime) -> Value {
    json!({
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": symdex_shared::retention::format_time(at),
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/symdex-sweeper"],
        "detail": {}
    })
}

/// The Lambda SQS event for a set of received messages (what the event source mapping sends),
/// with the receive count SQS gave each (1 where it gave none).
pub fn sqs_event(messages: &[aws_sdk_sqs::types::Message], queue_arn: &str) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            let received = m
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .map_or("1", String::as_str);
            json!({
                "messageId": m.message_id.clone().unwrap(),
                "receiptHandle": m.receipt_handle.clone().unwrap_or_default(),
                "body": m.body.clone().unwrap(),
                "attributes": {"ApproximateReceiveCount": received, "SentTimestamp": "0", "SenderId": "s3", "ApproximateFirstReceiveTimestamp": "0"},
                "messageAttributes": {},
                "md5OfBody": m.md5_of_body.clone().unwrap_or_default(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION
            })
        })
        .collect();
    json!({ "Records": records })
}

/// `event` (an SQS event) as SQS delivers it again after a failure or a timeout: each
/// message's receive count one higher.
pub fn redelivered(event: &Value) -> Value {
    let mut again = event.clone();
    for record in again["Records"].as_array_mut().into_iter().flatten() {
        let count = &mut record["attributes"]["ApproximateReceiveCount"];
        let received: u64 = count.as_str().and_then(|c| c.parse().ok()).unwrap_or(1);
        *count = json!((received + 1).to_string());
    }
    again
}

/// A scratch directory with an ELF program split into stripped binary + debug file.
pub struct Fixtures {
    pub dir: tempfile::TempDir,
}

/// The GNU build id of an ELF file, as readelf prints it.
pub fn build_id_of(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap()
        .trim()
        .to_string()
}

/// Runs a toolchain command (`args[0]` with the rest) in `dir`; panics unless it succeeds.
pub fn run_in(dir: &Path, args: &[&str]) {
    let status = Command::new(args[0])
        .args(&args[1..])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{args:?}");
}

impl Fixtures {
    pub fn build() -> Fixtures {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prog.c"), "int compute(int x) { return x * 3 + 1; }\nint main(int c, char **v) { return compute(c); }\n").unwrap();
        let run = |args: &[&str]| run_in(dir.path(), args);
        run(&["gcc", "-g", "-O0", "-o", "app", "prog.c"]);
        run(&["objcopy", "--only-keep-debug", "app", "app.debug"]);
        run(&[
            "objcopy",
            "--strip-all",
            "--add-gnu-debuglink=app.debug",
            "app",
            "app.stripped",
        ]);
        std::fs::write(dir.path().join("notes.txt"), "not an artifact").unwrap();
        Fixtures { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn build_id(&self) -> String {
        build_id_of(&self.path("app"))
    }
}

/// A program built with split DWARF by clang-19 (DWARF 5): `app`, whose two skeleton units
/// name their DWO ids, and `app.dwp`, its package by `llvm-dwp-19` (the `.dwo` files gone).
pub fn split_dwarf() -> Fixtures {
    let dir = tempfile::tempdir().unwrap();
    let units = [
        (
            "a.cpp",
            "struct A { int x; };\nA a = {47};\nint foo(int v) { return v + a.x; }\n",
        ),
        ("main.cpp", "int foo(int);\nint main() { return foo(1); }\n"),
    ];
    let run = |args: &[&str]| run_in(dir.path(), args);
    for (name, text) in units {
        std::fs::write(dir.path().join(name), text).unwrap();
        let object = name.replace(".cpp", ".o");
        run(&[
            "clang++-19",
            "-gsplit-dwarf",
            "-gdwarf-5",
            "-c",
            name,
            "-o",
            &object,
        ]);
    }
    run(&["clang++-19", "a.o", "main.o", "-o", "app"]);
    run(&["llvm-dwp-19", "-e", "app", "-o", "app.dwp"]);
    for unit in ["a", "main"] {
        std::fs::remove_file(dir.path().join(format!("{unit}.dwo"))).unwrap();
    }
    Fixtures { dir }
}

/// `debuginfod-find ARGS...` against the serving bucket at `urls` (moto's HTTP endpoint),
/// caching under `cache`, which must succeed: the bytes of the file it fetched.
pub fn debuginfod_find(urls: &str, args: &[&str], cache: &Path) -> Vec<u8> {
    let out = Command::new("debuginfod-find")
        .args(args)
        .env("DEBUGINFOD_URLS", urls)
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .output()
        .expect("debuginfod-find (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "debuginfod-find {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fetched = String::from_utf8(out.stdout).unwrap();
    std::fs::read(fetched.trim()).unwrap()
}

/// A Lambda configuration for the test stack.
pub fn config(extra: &[(&str, &str)]) -> symdex_lambda::LambdaConfig {
    // moto_server copies over an existing object despite `If-None-Match` on CopyObject.
    let mut vars: std::collections::HashMap<String, String> = [
        ("SYMDEX_SERVING_BUCKET".to_string(), SERVING.to_string()),
        ("SYMDEX_CONDITIONAL_COPY".to_string(), "false".to_string()),
    ]
    .into();
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    symdex_lambda::LambdaConfig::from_lookup(|k| vars.get(k).cloned()).unwrap()
}

/// Runs a built bootstrap binary for one invocation of `event` under a Runtime API harness:
/// returns the function's response body and what it logged.
pub async fn invoke_bootstrap(
    exe: &str,
    function: &str,
    moto: &Moto,
    event: String,
) -> (Value, String) {
    let api = runtime_api::RuntimeApi::start(vec![("req-1".into(), event)]);
    let mut child = Command::new(exe)
        .envs(lambda_env(function, &api.addr, moto))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let responses =
        tokio::task::spawn_blocking(move || api.wait_responses(1, Duration::from_secs(120)))
            .await
            .unwrap();
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    assert_eq!(responses[0].0, "req-1");
    let response = serde_json::from_str(&responses[0].1).unwrap();
    (
        response,
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}
