//! `pipeopt merge`: the shards of one grid into one table (`sweep::table::merge`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct MergeArgs {
    /// The tables to merge: every shard of one sweep (`sweep --shard i/n`), each once. A
    /// table knows which experiment, configuration and shard it is (its Parquet metadata),
    /// whatever its file name; tables of other grids, or a missing shard, are refused.
    #[arg(required = true)]
    pub tables: Vec<PathBuf>,
    /// Output table (default: results/<dir of the first input>.parquet).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

pub fn run(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let out = match args.out {
        Some(o) => o,
        None => pipeopt::sweep::table::default_merge_output(&args.tables)?,
    };
    let n = pipeopt::sweep::table::merge(&args.tables, &out)?;
    eprintln!(
        "merged {} tables: {n} rows -> {}",
        args.tables.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
