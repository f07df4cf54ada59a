//! `pipeopt schedule`: the scheduling MILP on a plan's allocation
//! (`milp::fixed_allocation`), the new plan judged, written and reported.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::algorithm::{self, Problem};
use pipeopt::milp::fixed_allocation::FixedAllocationPlanner;
use pipeopt::milp::MilpOptions;
use pipeopt::model::Plan;
use pipeopt::units::parse_seconds;

#[derive(Args)]
pub struct ScheduleArgs {
    /// The plan file whose allocation to schedule.
    pub plan: PathBuf,
    /// Wall-clock limit of the whole search, e.g. 60s.
    #[arg(long, value_parser = parse_seconds)]
    pub time_limit: Option<f64>,
    /// HiGHS threads, 1 to 256 (default 1; HiGHS is given at most as many as the machine
    /// has cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Where to write the scheduled plan (atomically).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Print one JSON object (docs/model.md section 9).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ScheduleArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.plan)?;
    let options = MilpOptions::from_limits(args.time_limit, args.threads)?;
    let planner = FixedAllocationPlanner::for_plan(&plan, &args.plan, options)?;
    let (new, report) = algorithm::run(
        &planner,
        &Problem {
            instance: &plan.instance,
            platform: &plan.platform,
        },
    )?;
    super::finish_plan_command(&report, new.as_ref(), Some(&args.out), args.json)
}
