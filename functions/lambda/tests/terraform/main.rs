//! The Terraform module, planned offline and applied to moto_server (one test binary: the
//! helpers and the root configuration are shared).
//! - `apply`: buckets, queues, notifications, functions (the sweeper and its schedule too),
//!   IAM, CloudFront with its access function, token store and an upstream's origin group,
//!   Glue/Athena and alarms are created; an upload to the ingest bucket arrives on the events
//!   queue and a delete on the removals queue; then everything is destroyed again.
//! - `plan`: what the edge runs, the refused combinations, the upstreams' origin groups.
//! - `audit`: the audit page's folder behind its own grant, and its unsafe configurations.

#[path = "../support/mod.rs"]
mod support;

mod apply;
mod audit;
mod config;
mod plan;
