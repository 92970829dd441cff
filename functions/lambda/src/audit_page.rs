//! The audit page in a deployment (SYMDEX_AUDIT_PAGE): after each sweep, the sweeper writes
//! `symdex audit`'s page of the serving bucket (its manifest, and what it holds now) to the
//! bucket itself at [`DEPLOYED_KEY`], under symdex's private prefix. The edge shows that one
//! folder to the module's audit grant alone (a token or CIDR list of its own, never a symbol
//! reader's grant: edge/access.js); the bucket's other private objects stay unserved.
//!
//! The page is rebuilt whole each time from the manifest, in the memory `symdex audit` takes
//! for it (packed by column: 100,000 records make a page of a few MB), and replaced in one
//! PUT: a viewer never reads half a page. It is never cached (`Cache-Control: no-store`).

use aws_sdk_s3::primitives::ByteStream;
use serde_json::{json, Value};
use symdex_shared::audit_page::{read_and_render, DEPLOYED_KEY};

use crate::context::{Context, Error};

/// Writes the page; answers where, and how many records and bytes it holds.
pub async fn write_audit_page(ctx: &Context) -> Result<Value, Error> {
    let bucket = &ctx.config.serving_bucket;
    let shown_as = format!("s3://{bucket}");
    let prefix = &ctx.config.pipeline.manifest_prefix;
    let (data, html) = read_and_render(&ctx.store, &shown_as, prefix).await?;
    let bytes = html.len();
    ctx.store
        .client()
        .put_object()
        .bucket(bucket)
        .key(DEPLOYED_KEY)
        .content_type("text/html; charset=utf-8")
        .cache_control("no-store")
        .body(ByteStream::from(html.into_bytes()))
        .send()
        .await?;
    tracing::info!(
        key = DEPLOYED_KEY,
        records = data.records,
        bytes,
        "audit page written"
    );
    Ok(json!({ "key": DEPLOYED_KEY, "records": data.records, "bytes": bytes }))
}

/// After a sweep: the page, when the deployment asks for it, into the run's answer. A page
/// that fails is logged and answered, and does not fail the sweep (done and recorded by then;
/// the next run writes the page again).
pub async fn refresh_after_sweep(ctx: &Context, answer: &mut Value) {
    if !ctx.config.audit_page {
        return;
    }
    let written = match write_audit_page(ctx).await {
        Ok(written) => written,
        Err(e) => {
            tracing::error!(error = %e, key = DEPLOYED_KEY, "audit page not written");
            json!({ "error": e.to_string() })
        }
    };
    answer["audit_page"] = written;
}
