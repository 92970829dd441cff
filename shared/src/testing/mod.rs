//! Test support shared by this crate's tests and the other crates' (feature `testing`).

pub mod builders;
pub mod interleave;
pub mod scenarios;
