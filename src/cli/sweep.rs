//! `pipeopt sweep` (an experiment grid, `sweep::run`) and the hidden `sweep-job` its
//! child processes run.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::sweep::{config::Experiment, run as sweep_run};

#[derive(Args)]
pub struct SweepArgs {
    /// The experiment file (see experiments/*.toml).
    pub experiment: PathBuf,
    /// Run only shard i of n (1-based, e.g. 3/16): jobs i-1, i-1+n, ... of the grid.
    /// Tables go to results/<name>/shard-i-of-n.parquet; `merge` joins them.
    #[arg(long)]
    pub shard: Option<pipeopt::sweep::run::Shard>,
    /// Parallel jobs (default: the experiment's `workers`, 0 = one per core).
    #[arg(long, short = 'j')]
    pub workers: Option<usize>,
    /// How jobs are isolated.
    #[arg(long, value_parser = super::isolation_parser(), default_value = "process")]
    pub isolation: pipeopt::sweep::run::Isolation,
    /// Print a JSON summary instead of a line for people.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let exp = Experiment::load(&args.experiment)?;
    eprintln!("{}: {} jobs", exp.name, exp.len());
    let opts = sweep_run::SweepOptions {
        shard: args.shard,
        isolation: args.isolation,
        workers: args.workers,
        progress: !args.json,
        executable: None,
    };
    let summary = sweep_run::sweep(&exp, &opts)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{}: {} jobs ({} already done, {} run, {} of them retried errors; {} error rows) in {:.1} s -> {} and {}",
            summary.experiment,
            summary.jobs,
            summary.already_done,
            summary.ran,
            summary.retried,
            summary.errors,
            summary.seconds,
            summary.parquet.display(),
            summary.csv.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `pipeopt sweep-job`: one job as JSON on stdin (`{"kind", "job", "context"}`), its record
/// as JSON on stdout.
pub fn run_job() -> anyhow::Result<ExitCode> {
    use pipeopt::sweep::engine::{child_main, read_child_input, JobKind};
    let (kind, input) = read_child_input()?;
    match kind.as_str() {
        k if k == sweep_run::Periodic::TAG => child_main::<sweep_run::Periodic>(input)?,
        k if k == pipeopt::sweep::sync::Synchronous::TAG => {
            child_main::<pipeopt::sweep::sync::Synchronous>(input)?
        }
        other => anyhow::bail!("sweep-job: unknown kind of job {other:?}"),
    }
    Ok(ExitCode::SUCCESS)
}
