//! Concurrent index / re-index / delete scenarios, run through seeded interleavings of their
//! storage steps on any store, each ending with the store's invariants checked and its
//! references compared with a serial run of the uploads that should survive.
//!
//! Actors that give up on a busy key (a live lease) fail as an SQS message would; they are
//! then redelivered one at a time, as SQS would, before the checks.

mod artifacts;
mod catalog;
mod check;
mod run;
mod split_dwarf;
#[cfg(test)]
mod tests;

pub use artifacts::{Artifact, Artifacts, ARCHIVE, SOURCES_NAMED};
use catalog::every_scenario;
pub use check::check;
pub use run::{config, run_op, run_op_as, sole_writer_config, FromArtifacts};

/// What an actor does.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Index and finalize; `alive: false` when the ingest object was deleted meanwhile.
    Index(&'a Artifact, bool),
    Delete(&'a Artifact),
    /// Expire (at a time every `try` upload has expired), record, forget.
    Expire(&'a Artifact),
    /// Promote to `release`.
    Promote(&'a Artifact),
    /// Index with `overwrite` (differing bytes at its keys replaced) and finalize.
    Overwrite(&'a Artifact),
    /// Index an archive's entries one after another, then finalize them all, as the Lambda
    /// indexes one archive object (functions/lambda/src/archives.rs): an entry meets keys
    /// the entries before it published in the same run, not yet finalized.
    IndexArchive(&'a [Artifact]),
    /// Delete an archive: each entry's removal begun, then each ended, as the remover removes
    /// one object's uploads.
    DeleteArchive(&'a [Artifact]),
}

/// What a scenario must end with: the references and objects of a serial run of ...
pub enum Survivors<'a> {
    /// ... exactly these uploads;
    Exactly(Vec<&'a Artifact>),
    /// ... one of these sets (a race either side may win; `check` ties it to the outcome);
    OneOf(Vec<Vec<&'a Artifact>>),
    /// ... what one of these serial runs leaves (where the order decides more than which
    /// uploads survive: a shared sidecar keeps the first publisher's name);
    OneOfRuns(Vec<Vec<Op<'a>>>),
    /// ... what the uploads before and the operations in any order leave, run one by one;
    AnyOrder,
    /// ... or, for conflicting bytes under one key, one upload's bytes per key (none of a
    /// deleted upload's).
    Conflict,
}

/// One scenario: uploads indexed before, the concurrent operations, the uploads expected to
/// survive (`None`: either of two conflicting uploads may win).
pub struct Scenario<'a> {
    pub name: &'static str,
    pub before: Vec<&'a Artifact>,
    pub ops: Vec<Op<'a>>,
    pub survivors: Survivors<'a>,
}

pub fn scenarios(a: &Artifacts) -> Vec<Scenario<'_>> {
    let only = only_scenarios();
    let mut all = every_scenario(a);
    all.retain(|s| s.name.contains(only.as_str()));
    all
}

/// `SYMDEX_SCENARIO=<part of a name>` runs only those scenarios (while working on one race);
/// empty: every one.
fn only_scenarios() -> String {
    std::env::var("SYMDEX_SCENARIO").unwrap_or_default()
}

/// Whether every scenario runs: what a test's count over all of them (deaths tried, copies
/// made) holds for, and not for the few `SYMDEX_SCENARIO` picks.
pub fn every_scenario_runs() -> bool {
    only_scenarios().is_empty()
}

/// How many schedules each scenario runs: `SYMDEX_SCHEDULES`, or `default`.
pub fn schedules(default: u64) -> u64 {
    env_number("SYMDEX_SCHEDULES").unwrap_or(default)
}

/// The seeds a scenario runs: [`schedules`] of them from `SYMDEX_SEED_BASE` (0 unless set).
/// CI runs the same seeds every time (a failure replays); a hunt for races they miss sets the
/// base past them, so that more time buys schedules never tried rather than the same ones.
pub fn seeds(default: u64) -> std::ops::Range<u64> {
    let base = seed_base();
    base..base + schedules(default)
}

/// `SYMDEX_SEED_BASE`, added to the seeds of every schedule-driven test (S3 ones included).
pub fn seed_base() -> u64 {
    env_number("SYMDEX_SEED_BASE").unwrap_or(0)
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
