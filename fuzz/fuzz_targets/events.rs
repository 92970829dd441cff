//! Event parsing: SQS, SNS-wrapped, direct S3 and EventBridge JSON from anyone who can write
//! to the queue. Decoding answers events or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = symdex_lambda::events::decode(&value);
        let _ = symdex_lambda::events::is_sqs_batch(&value);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = symdex_lambda::events::decode_s3_key(text);
    }
});
