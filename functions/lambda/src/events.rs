//! Event decoding: S3 event notifications (direct, inside SQS messages, inside SNS
//! notifications) and EventBridge "Object Created"/"Object Deleted" events.

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Removed,
    /// A delete marker was created (versioned bucket): the key as a whole is gone.
    DeleteMarker,
}

/// One object change, with its key decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEvent {
    pub change: Change,
    pub bucket: String,
    pub key: String,
    pub version_id: Option<String>,
    pub etag: Option<String>,
    pub size: Option<u64>,
}

/// S3 notification keys are URL-encoded with `+` for a space: `+` first, then `%XX`.
pub fn decode_s3_key(raw: &str) -> String {
    let plus_as_space = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&plus_as_space)
        .decode_utf8_lossy()
        .into_owned()
}

fn text(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().map(str::to_string).filter(|s| !s.is_empty())
}

fn number(v: &Value, path: &[&str]) -> Option<u64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_u64()
}

fn change_of(name: &str) -> Option<Change> {
    if name.contains("DeleteMarkerCreated") {
        Some(Change::DeleteMarker)
    } else if name.starts_with("ObjectCreated") || name == "Object Created" {
        Some(Change::Created)
    } else if name.starts_with("ObjectRemoved") || name == "Object Deleted" {
        Some(Change::Removed)
    } else {
        None
    }
}

/// The object changes in one message body (or direct invocation payload). A test event
/// (`s3:TestEvent`) and events of other kinds yield nothing; anything unrecognisable is an error.
pub fn decode(body: &Value) -> Result<Vec<ObjectEvent>, String> {
    if body.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(Vec::new());
    }
    // SNS envelope: the S3 notification is the Message string.
    if body.get("Type").and_then(Value::as_str) == Some("Notification") {
        let message = body
            .get("Message")
            .and_then(Value::as_str)
            .ok_or("SNS notification without Message")?;
        let inner: Value =
            serde_json::from_str(message).map_err(|e| format!("SNS Message is not JSON: {e}"))?;
        return decode(&inner);
    }
    if let Some(records) = body.get("Records").and_then(Value::as_array) {
        let mut out = Vec::new();
        for record in records {
            let name = text(record, &["eventName"]).unwrap_or_default();
            let Some(change) = change_of(&name) else {
                continue;
            };
            let bucket =
                text(record, &["s3", "bucket", "name"]).ok_or("S3 record without bucket name")?;
            let raw_key =
                text(record, &["s3", "object", "key"]).ok_or("S3 record without object key")?;
            out.push(ObjectEvent {
                change,
                bucket,
                key: decode_s3_key(&raw_key),
                version_id: text(record, &["s3", "object", "versionId"]),
                etag: text(record, &["s3", "object", "eTag"]),
                size: number(record, &["s3", "object", "size"]),
            });
        }
        return Ok(out);
    }
    if let Some(detail_type) = body.get("detail-type").and_then(Value::as_str) {
        if body.get("source").and_then(Value::as_str) != Some("aws.s3") {
            return Err(format!("EventBridge event from {:?}", body.get("source")));
        }
        let Some(mut change) = change_of(detail_type) else {
            return Ok(Vec::new());
        };
        if text(body, &["detail", "deletion-type"]).as_deref() == Some("Delete Marker Created") {
            change = Change::DeleteMarker;
        }
        // EventBridge carries the key as is (not URL-encoded).
        return Ok(vec![ObjectEvent {
            change,
            bucket: text(body, &["detail", "bucket", "name"])
                .ok_or("EventBridge event without bucket")?,
            key: text(body, &["detail", "object", "key"]).ok_or("EventBridge event without key")?,
            version_id: text(body, &["detail", "object", "version-id"]),
            etag: text(body, &["detail", "object", "etag"]),
            size: number(body, &["detail", "object", "size"]),
        }]);
    }
    Err("not an S3 or EventBridge event".to_string())
}

/// Whether a Lambda payload is an SQS batch.
pub fn is_sqs_batch(payload: &Value) -> bool {
    payload
        .get("Records")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(|r| r.get("eventSource"))
        .and_then(Value::as_str)
        == Some("aws:sqs")
}

#[cfg(test)]
mod tests {
    use super::{decode, decode_s3_key, is_sqs_batch, Change};
    use serde_json::json;

    #[test]
    fn keys_are_decoded_plus_first() {
        assert_eq!(decode_s3_key("my+file%2B1.pdb"), "my file+1.pdb");
        assert_eq!(decode_s3_key("dir/caf%C3%A9.so"), "dir/café.so");
        assert_eq!(decode_s3_key("plain"), "plain");
    }

    #[test]
    fn s3_notification_records() {
        let body = json!({"Records": [
            {"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
             "s3": {"bucket": {"name": "ingest"}, "object": {"key": "a+b/Foo%2BBar.pdb", "size": 12, "eTag": "abc", "versionId": "v1"}}},
            {"eventSource": "aws:s3", "eventName": "ObjectRemoved:DeleteMarkerCreated",
             "s3": {"bucket": {"name": "ingest"}, "object": {"key": "x"}}},
            {"eventSource": "aws:s3", "eventName": "ObjectRestore:Completed",
             "s3": {"bucket": {"name": "ingest"}, "object": {"key": "y"}}}
        ]});
        let events = decode(&body).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].key, "a b/Foo+Bar.pdb");
        assert_eq!(
            (
                events[0].change,
                events[0].size,
                events[0].version_id.as_deref()
            ),
            (Change::Created, Some(12), Some("v1"))
        );
        assert_eq!(events[1].change, Change::DeleteMarker);
    }

    #[test]
    fn test_events_eventbridge_sns_and_garbage() {
        assert!(
            decode(&json!({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"}))
                .unwrap()
                .is_empty()
        );
        let eb = json!({"version": "0", "detail-type": "Object Created", "source": "aws.s3",
            "detail": {"bucket": {"name": "ingest"}, "object": {"key": "raw/a b+c.so", "size": 5, "etag": "e", "version-id": "v"}}});
        let events = decode(&eb).unwrap();
        assert_eq!(
            events[0].key, "raw/a b+c.so",
            "EventBridge keys are not URL-encoded"
        );
        let sns = json!({"Type": "Notification", "Message": serde_json::to_string(&json!({"Records": [
            {"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": {"key": "k"}}}]})).unwrap()});
        assert_eq!(decode(&sns).unwrap()[0].bucket, "b");
        assert!(decode(&json!({"hello": 1})).is_err());
        assert!(is_sqs_batch(
            &json!({"Records": [{"eventSource": "aws:sqs"}]})
        ));
        assert!(!is_sqs_batch(&eb));
    }
}
