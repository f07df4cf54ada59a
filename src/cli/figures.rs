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
    /// The algorithm the ratio figure divides by: an algorithm of the table, by its label
    /// (default: madpipe, when the table has it).
    #[arg(long)]
    pub ratio_to: Option<String>,
}

pub fn run(args: FiguresArgs) -> anyhow::Result<ExitCode> {
    let rows = pipeopt::sweep::table::read_rows(&args.table)?;
    let mut algorithms: Vec<String> = rows.iter().map(|r| r.algorithm.clone()).collect();
    algorithms.sort();
    algorithms.dedup();
    let ratio_to = match &args.ratio_to {
        Some(name) => {
            pipeopt::sweep::table::check_algorithm(&algorithms, &args.table, name)?;
            name.as_str()
        }
        None => "madpipe",
    };
    for f in pipeopt::sweep::figures::write_figures(&rows, &args.out, Some(ratio_to))? {
        eprintln!("wrote {}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}
