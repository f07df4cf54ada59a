//! `pipeopt gantt`: a plan's pattern, or one iteration of a `sync --out` file, drawn
//! (`plot::gantt`, `plot::sync_gantt`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::model::Plan;
use pipeopt::InputError;

#[derive(Args)]
pub struct GanttArgs {
    /// The plan file.
    pub plan: PathBuf,
    /// Where to write the SVG.
    #[arg(long)]
    pub out: PathBuf,
    /// How many periods to draw, 1 to 1000.
    #[arg(long, default_value_t = 3, value_parser = parse_periods)]
    pub periods: usize,
}

fn parse_periods(text: &str) -> Result<usize, String> {
    super::parse_count(text, 1, pipeopt::plot::gantt::MAX_PERIODS)
}

pub fn run(args: GanttArgs) -> anyhow::Result<ExitCode> {
    if !args
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg") || e.eq_ignore_ascii_case("png"))
    {
        return Err(InputError::new(
            "--out",
            "",
            format!(
                "{}: gantt writes SVG or PNG; name the file *.svg or *.png",
                args.out.display()
            ),
        )
        .into());
    }
    if pipeopt::plot::sync_gantt::is_sync_file(&args.plan) {
        pipeopt::plot::sync_gantt::write_svg(&args.plan, &args.out)?;
        eprintln!("wrote {}", args.out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let plan = Plan::load(&args.plan)?;
    // The drawing's errors name the plan's field; the file is this one.
    pipeopt::plot::gantt::write_svg(&plan, args.periods, &args.out).map_err(|e| match e {
        pipeopt::Error::Input(i) => pipeopt::Error::Input(i.in_file(&args.plan)),
        other => other,
    })?;
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
