//! `symdex delete`: a build's or an input's uploads taken back through the same protocol as
//! an index.

use super::*;

#[derive(Args)]
pub struct DeleteArgs {
    /// The store directory.
    #[arg(long, default_value = DEFAULT_STORE)]
    pub store: PathBuf,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub limits: ArchiveLimits,
    /// Delete every upload of this build.
    #[arg(long, required_unless_present = "input")]
    pub build: Option<String>,
    /// Delete the uploads of these input paths (a directory deletes everything under it).
    #[arg(long, num_args = 1..)]
    pub input: Vec<PathBuf>,
}

pub fn delete(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    crate::block_on(delete_async(args))?
}

pub(super) async fn delete_async(args: &DeleteArgs) -> anyhow::Result<ExitCode> {
    let (store, _lock) = open_for_writing(&args.store)?;
    let hand_over = FromFiles::new(&store, &args.keys, args.limits);
    let indexer = Indexer::new(&store, args.keys.config()).handing_over_to(&hand_over);
    let inputs: Vec<String> = args
        .input
        .iter()
        .map(|p| absolute(p).to_string_lossy().into_owned())
        .collect();
    let mut removals = Vec::new();
    for upload in indexer.refs().uploads().await? {
        let by_build = args.build.is_some() && upload.meta.build == args.build;
        let by_input = inputs.iter().any(|input| {
            upload.source == *input
                || upload.source.starts_with(&format!("{input}/"))
                || upload.source.starts_with(&format!("{input}!/"))
        });
        if by_build || by_input {
            removals.extend(indexer.begin_unindex(&upload.upload).await?);
        }
    }
    let records: Vec<Record> = removals.iter().map(|r| r.record.clone()).collect();
    // The manifest first (a run killed before the uploads are forgotten reports them again),
    // then the keys freed are handed over — to none of the uploads deleted here, all marked
    // removing by now.
    indexer.write_manifest(&records).await?;
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    let removed: usize = records.iter().map(|r| r.removed.len()).sum();
    println!(
        "symdex: {} uploads deleted, {removed} keys unpublished",
        records.len()
    );
    Ok(ExitCode::SUCCESS)
}
