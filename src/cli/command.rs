//! The command tree of the `pipeopt` binary: its commands, each one's arguments (a file of
//! this module each), the parsing of a command line and the dispatch to the command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pipeopt",
    version,
    about = "Partitioning, allocation and scheduling for pipeline-parallel DNN training",
    long_about = "pipeopt finds partitionings, allocations and periodic schedules of a profiled \
network (a chain of layers) on P processors of memory M joined by links of bandwidth beta, \
and judges every plan with one exact validator (see docs/model.md).\n\n\
A typical session:\n  \
pipeopt import pipedream ../shared/pipedream-profiles/resnet50.txt --out resnet50.json\n  \
pipeopt plan --instance resnet50.json --processors 4 --memory 16GiB --bandwidth 12GB/s \\\n      \
--algorithm '1f1b*' --partition 0,20,60,110 --out plan.json\n  \
pipeopt validate plan.json\n  \
pipeopt gantt plan.json --out plan.svg\n\n\
Units: sizes as 16GiB or 3GB, bandwidths as 12GB/s or 100Mbps, durations as 1.5ms or 60s. \
Files store seconds and bytes. Every command that produces a result takes --json and then \
prints exactly one JSON object on stdout."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Import another tool's profile or an ONNX model as an instance (JSON, docs/model.md
    /// section 9).
    #[command(subcommand)]
    Import(super::import::ImportCommand),
    /// Make an instance of a built-in network from its exact tensor shapes (no GPU).
    ///
    /// Weights, outputs and stashes come exactly from the shapes; with `--times analytic`
    /// forward and backward times come from FLOP counts and bytes moved on a roofline device
    /// model (see src/nets/analytic.rs). The networks are `--model`'s values.
    Instance(super::instance::InstanceArgs),
    /// Measure a built-in network with libtorch, layer by layer, and write its instance
    /// (feature `torch`; on a GPU for real numbers).
    ///
    /// Per chain layer: forward and backward times (median over --reps after --warmup,
    /// between device synchronizations), output and weight bytes, and on CUDA the stash
    /// autograd really keeps (caching allocator statistics). Also measures the whole
    /// network's forward pass and training step with the same binary and compares them with
    /// the sums of the layers, and compares every layer with the analytic model
    /// (`pipeopt instance --times analytic`). See src/exec/profile.rs.
    Profile(super::profile::ProfileArgs),
    /// Run a plan with libtorch on one device standing in for its P processors and compare
    /// measured durations, period, memory and gradients with the model (feature `torch`).
    Execute(super::execute::ExecuteArgs),
    /// Fit a device model's rates and overheads to measured per-layer times (the
    /// `.report.json` files of `pipeopt profile`) and write it as TOML for --device-model.
    ///
    /// Per direction, the six values of the roofline (conv, conv1x1, matmul, mem_bw, per_op,
    /// per_layer) that minimize the worst factor between the analytic and the measured time
    /// of any layer (argmin's Nelder-Mead on their logarithms); reports that worst factor in
    /// sample and with each network left out. See src/nets/fit.rs.
    FitDevice(super::fit_device::FitDeviceArgs),
    /// Simulate a synchronous or bidirectional pipeline schedule (GPipe, DAPPLE, GEMS,
    /// Chimera, MixPipe, BaPipe): iteration time, bubble ratio, memory of every worker;
    /// MixPipe's search of K and Gamma (--search), BaPipe's exploration (--explore).
    Sync(Box<super::sync::SyncArgs>),
    /// Run a grid of synchronous schedules (an experiment file such as
    /// experiments/bidirectional.toml): bubble ratios, per-worker memory and the best
    /// throughput under a memory budget; writes results/<name>/ (CSV, JSON, figures).
    ///
    /// With an [optimum] table in the file (time_limit = "20s", max_micro_batches = 16),
    /// each configuration (instance, D, B, N, recomputation) is also solved once per
    /// placement by the exact schedule MILP (`sync --schedule optimal`, no memory limit):
    /// optimum.csv, and in runs.csv every run's optimum_seconds (the proven optimum, or the
    /// MILP's lower bound when its status is not optimal) and ratio_to_optimum. With
    /// under_budgets = true, also under each memory budget of the file (configurations
    /// without recomputation): optimum.csv's memory_budget column, the fastest schedule of
    /// the placement that fits each budget over that optimum (fastest_ratio_to_optimum),
    /// best.csv's ratio_to_optimum_under_budget and figure optimum-under-budget.svg.
    SyncSweep(super::sync_sweep::SyncSweepArgs),
    /// Plan an instance on a platform with one algorithm, judge the plan, report it.
    Plan(super::plan::PlanArgs),
    /// Prove a lower bound on the period of every plan of a case: any allocation
    /// (contiguous or not), any periodic pattern, memory included; or prove that no plan fits.
    ///
    /// The bound is the smallest period at which a relaxation of the problem (which
    /// processor holds each layer; loads of processors and links; static memory; at every
    /// forward start, the batches each stash must hold along one batch's chain; average
    /// memory over the stashes' windows) has a solution, decided at each period by a search
    /// over assignments (a MILP through HiGHS where the search runs out of time) and
    /// bisected on the period. "infeasible" means that even one batch at a time fits no
    /// allocation.
    /// See docs/bounds.md for the argument.
    Bound(super::bound::BoundArgs),
    /// Find the best periodic pattern for a plan's allocation with the scheduling MILP
    /// (minimum period that fits memory; any allocation, several stages per processor
    /// allowed), judge it and write the new plan.
    Schedule(super::schedule::ScheduleArgs),
    /// Run a partitioner on its own, with its own objective.
    #[command(subcommand)]
    Partition(super::partition::PartitionCommand),
    /// Judge a plan file: validity, period, exact memory peaks, resource loads.
    ///
    /// Exits 1 when the plan is invalid, naming the first violation with the operations and
    /// batch numbers involved. A plan with an allocation and no pattern (status planned,
    /// e.g. `madpipe-dp --out`) is reported as "planned: allocation without a schedule"
    /// (exit 0). The exit status is the verdict even when stdout is closed.
    Validate(super::validate::ValidateArgs),
    /// Run an experiment (a TOML grid): parallel, resumable, shardable; writes
    /// results/<name>.parquet and .csv.
    ///
    /// Every finished job is appended to results/<name>/journal.jsonl at once, so a sweep
    /// killed at any moment and run again loses and duplicates nothing. Each job runs in its
    /// own process by default: a solver crash or hang costs one row, recorded as an error.
    Sweep(super::sweep::SweepArgs),
    /// Run one sweep job read as JSON from stdin and print its row (used by `sweep`).
    #[command(hide = true)]
    SweepJob,
    /// Merge the shards of one grid (`sweep --shard i/n`) into one table, one row per job,
    /// in grid order; refuses tables of other experiments or configurations, a shard given
    /// twice or missing, and tables that are no sweep's shard.
    Merge(super::merge::MergeArgs),
    /// Draw the figures of a results table (periods, ratios, speedups) as SVG files.
    Figures(super::figures::FiguresArgs),
    /// Summarise a results table: runs, valid, infeasible, mean speedup, and geometric means
    /// of period ratios to one algorithm (Beaumont et al., ScaDL 2022, Figure 7).
    Table(super::table::TableArgs),
    /// Draw a plan's pattern over a few periods as SVG (PNG when --out ends in .png): one row
    /// per processor and per link, colour by batch; or one iteration of a `sync --out` file,
    /// one row per worker.
    Gantt(super::gantt::GanttArgs),
}

/// Parses the command line, or says how to end: clap's message for a bad one (exit 2), or
/// the help or version text on stdout (exit 0, or 1 when stdout cannot take it: `--help >
/// /dev/full` is a failed write, not a success; a closed pipe ends quietly with 0).
///
/// An option's one value may start with `-` (`--memory -1GiB`, `-p -1`): it then reaches
/// the flag's own check, whose message names the flag and the range, instead of clap's
/// "unexpected argument '-1' found". Options of several values take negative numbers.
pub fn parse() -> Result<Cli, ExitCode> {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = hyphen_values(Cli::command())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => Ok(cli),
        Err(e) if e.use_stderr() => e.exit(),
        Err(e) => {
            use std::io::Write;
            match e.print().and_then(|()| std::io::stdout().flush()) {
                Ok(()) => Err(ExitCode::SUCCESS),
                Err(w) if w.kind() == std::io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
                Err(w) => {
                    eprintln!("error: stdout: {w}");
                    Err(ExitCode::from(1))
                }
            }
        }
    }
}

/// `cmd` with every option of one value allowed to take a value that starts with `-`, and
/// every option of several values allowed negative numbers, in every subcommand.
fn hyphen_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.is_positional() || !a.get_action().takes_values() {
            a
        } else if a.get_num_args().is_none_or(|n| n.max_values() <= 1) {
            a.allow_hyphen_values(true)
        } else {
            a.allow_negative_numbers(true)
        }
    })
    .mut_subcommands(hyphen_values)
}

/// Runs the command the line names.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Import(command) => super::import::run(command),
        Command::Instance(args) => super::instance::run(args),
        Command::Profile(args) => super::profile::run(args),
        Command::Execute(args) => super::execute::run(args),
        Command::FitDevice(args) => super::fit_device::run(args),
        Command::Sync(args) => super::sync::run(*args),
        Command::SyncSweep(args) => super::sync_sweep::run(args),
        Command::Plan(args) => super::plan::run(args),
        Command::Bound(args) => super::bound::run(args),
        Command::Schedule(args) => super::schedule::run(args),
        Command::Partition(command) => super::partition::run(command),
        Command::Validate(args) => super::validate::run(args),
        Command::Sweep(args) => super::sweep::run(args),
        Command::SweepJob => super::sweep::run_job(),
        Command::Merge(args) => super::merge::run(args),
        Command::Figures(args) => super::figures::run(args),
        Command::Table(args) => super::table::run(args),
        Command::Gantt(args) => super::gantt::run(args),
    }
}
