//! `pipeopt figures`: the figures of a results table (`sweep::figures`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct FiguresArgs {
    /// The results table (Parquet).
    pub table: PathBuf,
    /// The directory to write into.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// The algorithm the ratio figure divides by.
    #[arg(long, default_value = "madpipe")]
    pub ratio_to: String,
}

pub fn run(args: FiguresArgs) -> anyhow::Result<ExitCode> {
    let rows = pipeopt::sweep::table::read_rows(&args.table)?;
    for f in pipeopt::sweep::figures::write_figures(&rows, &args.out, Some(&args.ratio_to))? {
        eprintln!("wrote {}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}
