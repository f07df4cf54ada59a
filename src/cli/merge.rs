//! `pipeopt merge`: the shards of one grid into one table (`sweep::table::merge`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct MergeArgs {
    /// The tables to merge.
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
