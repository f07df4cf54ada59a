//! `pipeopt sweep` (an experiment grid, `sweep::run`) and the hidden `sweep-job` its
//! child processes run.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::sweep::engine::SweepSummary;
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
    eprintln!("{}: {} jobs", exp.header.name, exp.len());
    let opts = sweep_run::SweepOptions {
        shard: args.shard,
        isolation: args.isolation,
        workers: args.workers,
        progress: !args.json,
        executable: None,
    };
    let summary = sweep_run::sweep(&exp, &opts)?;
    print_summary(&summary, "sweep", "jobs", args.json, serde_json::Map::new())?;
    if !args.json {
        print_files(&summary.files);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints what both kinds of sweep share of a run's summary: with `json`, the whole summary
/// as one JSON object (the kind's own fields beside the common ones, `command` and `extra`
/// added); otherwise one line for people, counting the jobs as `noun` ("jobs",
/// "configurations"). The caller prints its kind's own lines after it.
pub fn print_summary<X: serde::Serialize>(
    summary: &SweepSummary<X>,
    command: &str,
    noun: &str,
    json: bool,
    extra: serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    if json {
        let mut value = serde_json::to_value(summary)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("command".into(), command.into());
            object.extend(extra);
        }
        println!("{value}");
        return Ok(());
    }
    let shard = summary
        .shard
        .as_ref()
        .map(|s| format!(" shard {s}"))
        .unwrap_or_default();
    println!(
        "{}{shard}: {} {noun} ({} already done, {} run now, {} of them retried errors; {} \
         errors) in {:.1} s",
        summary.experiment,
        summary.jobs,
        summary.already_done,
        summary.ran,
        summary.retried,
        summary.errors,
        summary.wall_seconds,
    );
    Ok(())
}

/// `wrote FILE`, a line per file a sweep wrote.
pub fn print_files(files: &[PathBuf]) {
    for f in files {
        println!("wrote {}", f.display());
    }
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
