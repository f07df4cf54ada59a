//! `pipeopt table`: a summary of a results table (`sweep::table::summary`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::InputError;

#[derive(Args)]
pub struct TableArgs {
    /// The results table (Parquet).
    pub table: PathBuf,
    /// Columns to group by, besides the algorithm (e.g. memory, processors, instance): any
    /// column of the table.
    #[arg(long, value_delimiter = ',', default_value = "memory")]
    pub by: Vec<String>,
    /// Divide each period by this algorithm's period on the same case (an algorithm of the
    /// table, by its label).
    #[arg(long)]
    pub ratio_to: Option<String>,
    /// Print one JSON object, {"table": ..., "rows": [...]}, instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TableArgs) -> anyhow::Result<ExitCode> {
    let df = pipeopt::sweep::table::read_frame(&args.table)?;
    pipeopt::sweep::table::check_summary_args(
        &df,
        &args.table,
        &args.by,
        args.ratio_to.as_deref(),
    )?;
    let summary = pipeopt::sweep::table::summary(&df, &args.by, args.ratio_to.as_deref())
        .map_err(|e| InputError::file(&args.table, e))?;
    if args.json {
        let out = serde_json::json!({
            "table": args.table,
            "rows": pipeopt::sweep::table::to_json(&summary),
        });
        println!("{out}");
    } else {
        std::env::set_var("POLARS_FMT_MAX_ROWS", "200");
        std::env::set_var("POLARS_FMT_MAX_COLS", "20");
        std::env::set_var("POLARS_TABLE_WIDTH", "220");
        std::env::set_var("POLARS_FMT_STR_LEN", "40");
        println!("{summary}");
    }
    Ok(ExitCode::SUCCESS)
}
