//! The `pipeopt` command line: parse, call the library, print JSON or a table. Nothing else.
//!
//! Exit status (README, "Exit status"): 0 when a result was produced, "infeasible"
//! included; 1 when a plan is invalid (`validate`), an algorithm or solver failed, or a
//! file (stdout included) could not be written; 2 on bad input (the message names the file
//! and the field). The library says which ([`pipeopt::Error::exit_code`]); `anyhow` only
//! carries its errors, and those of serde, up to here.

use std::process::ExitCode;

mod cli;

use clap::{Parser, Subcommand};
use pipeopt::InputError;

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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import another tool's profile or an ONNX model as an instance (JSON, docs/model.md
    /// section 9).
    #[command(subcommand)]
    Import(cli::import::ImportCommand),
    /// Make an instance of a built-in network from its exact tensor shapes (no GPU).
    ///
    /// Weights, outputs and stashes come exactly from the shapes; with `--times analytic`
    /// forward and backward times come from FLOP counts and bytes moved on a roofline device
    /// model (see src/nets/analytic.rs). Networks: resnet50, resnet101, inception_v3,
    /// densenet121, vgg16, bert48, gpt24.
    Instance(cli::instance::InstanceArgs),
    /// Measure a built-in network with libtorch, layer by layer, and write its instance
    /// (feature `torch`; on a GPU for real numbers).
    ///
    /// Per chain layer: forward and backward times (median over --reps after --warmup,
    /// between device synchronizations), output and weight bytes, and on CUDA the stash
    /// autograd really keeps (caching allocator statistics). Also measures the whole
    /// network's forward pass and training step with the same binary and compares them with
    /// the sums of the layers, and compares every layer with the analytic model
    /// (`pipeopt instance --times analytic`). See src/exec/profile.rs.
    Profile(cli::profile::ProfileArgs),
    /// Run a plan with libtorch on one device standing in for its P processors and compare
    /// measured durations, period, memory and gradients with the model (feature `torch`).
    Execute(cli::execute::ExecuteArgs),
    /// Fit a device model's rates and overheads to measured per-layer times (the
    /// `.report.json` files of `pipeopt profile`) and write it as TOML for --device-model.
    ///
    /// Per direction, the six values of the roofline (conv, conv1x1, matmul, mem_bw, per_op,
    /// per_layer) that minimize the worst factor between the analytic and the measured time
    /// of any layer (argmin's Nelder-Mead on their logarithms); reports that worst factor in
    /// sample and with each network left out. See src/nets/fit.rs.
    FitDevice(cli::fit_device::FitDeviceArgs),
    /// Simulate a synchronous or bidirectional pipeline schedule (GPipe, DAPPLE, GEMS,
    /// Chimera, MixPipe, BaPipe): iteration time, bubble ratio, memory of every worker;
    /// MixPipe's search of K and Gamma (--search), BaPipe's exploration (--explore).
    Sync(Box<cli::sync::SyncArgs>),
    /// Run a grid of synchronous schedules (an experiment file such as
    /// experiments/bidirectional.toml): bubble ratios, per-worker memory and the best
    /// throughput under a memory budget; writes results/<name>/ (CSV, JSON, figures).
    ///
    /// With an [optimum] table in the file (time_limit = "20s", max_micro_batches = 16),
    /// each configuration (instance, D, B, N, recomputation) is also solved once per
    /// placement by the exact schedule MILP (`sync --schedule optimal`, no memory limit):
    /// optimum.csv, and in runs.csv every run's optimum_seconds (the proven optimum, or the
    /// MILP's lower bound when its status is not optimal) and ratio_to_optimum.
    SyncSweep(cli::sync_sweep::SyncSweepArgs),
    /// Plan an instance on a platform with one algorithm, judge the plan, report it.
    Plan(cli::plan::PlanArgs),
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
    Bound(cli::bound::BoundArgs),
    /// Find the best periodic pattern for a plan's allocation with the scheduling MILP
    /// (minimum period that fits memory; any allocation, several stages per processor
    /// allowed), judge it and write the new plan.
    Schedule(cli::schedule::ScheduleArgs),
    /// Run a partitioner on its own, with its own objective.
    #[command(subcommand)]
    Partition(cli::partition::PartitionCommand),
    /// Judge a plan file: validity, period, exact memory peaks, resource loads.
    ///
    /// Exits 1 when the plan is invalid, naming the first violation with the operations and
    /// batch numbers involved. A plan with an allocation and no pattern (status planned,
    /// e.g. `madpipe-dp --out`) is reported as "planned: allocation without a schedule"
    /// (exit 0). The exit status is the verdict even when stdout is closed.
    Validate(cli::validate::ValidateArgs),
    /// Run an experiment (a TOML grid): parallel, resumable, shardable; writes
    /// results/<name>.parquet and .csv.
    ///
    /// Every finished job is appended to results/<name>/journal.jsonl at once, so a sweep
    /// killed at any moment and run again loses and duplicates nothing. Each job runs in its
    /// own process by default: a solver crash or hang costs one row, recorded as an error.
    Sweep(cli::sweep::SweepArgs),
    /// Run one sweep job read as JSON from stdin and print its row (used by `sweep`).
    #[command(hide = true)]
    SweepJob,
    /// Merge the shards of one grid (`sweep --shard i/n`) into one table, one row per job,
    /// in grid order; refuses tables of other experiments or configurations, a shard given
    /// twice or missing, and tables that are no sweep's shard.
    Merge(cli::merge::MergeArgs),
    /// Draw the figures of a results table (periods, ratios, speedups) as SVG files.
    Figures(cli::figures::FiguresArgs),
    /// Summarise a results table: runs, valid, infeasible, mean speedup, and geometric means
    /// of period ratios to one algorithm (Beaumont et al., ScaDL 2022, Figure 7).
    Table(cli::table::TableArgs),
    /// Draw a plan's pattern over a few periods as SVG (PNG when --out ends in .png): one row
    /// per processor and per link, colour by batch; or one iteration of a `sync --out` file,
    /// one row per worker.
    Gantt(cli::gantt::GanttArgs),
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // `println!` panics when stdout is closed (`| head -3`) or full (`> /dev/full`). Such a
    // panic is not a bug: a closed pipe ends the command quietly (the reader has what it
    // wanted, as in ripgrep), a full disk is a failed write (exit status 1).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if stdout_failure(info.payload()).is_none() {
            default_hook(info)
        }
    }));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli))) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
        Err(payload) => match stdout_failure(payload.as_ref()) {
            Some(m) if m.contains("Broken pipe") => ExitCode::SUCCESS,
            Some(m) => {
                eprintln!("error: stdout: {m}");
                ExitCode::from(1)
            }
            None => std::panic::resume_unwind(payload),
        },
    }
}

/// Parses the command line, or says how to end: clap's message for a bad one (exit 2), or
/// the help or version text on stdout (exit 0, or 1 when stdout cannot take it: `--help >
/// /dev/full` is a failed write, not a success; a closed pipe ends quietly with 0).
///
/// An option's one value may start with `-` (`--memory -1GiB`, `-p -1`): it then reaches
/// the flag's own check, whose message names the flag and the range, instead of clap's
/// "unexpected argument '-1' found". Options of several values take negative numbers.
fn parse() -> Result<Cli, ExitCode> {
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

/// The exit status for an error: the library's kind ([`pipeopt::Error::exit_code`]: 2 for
/// bad input, 1 otherwise), 2 for bad input found here, 1 for anything else.
fn exit_code(e: &anyhow::Error) -> u8 {
    if let Some(e) = e.downcast_ref::<pipeopt::Error>() {
        e.exit_code()
    } else if e.downcast_ref::<InputError>().is_some() {
        2
    } else {
        1
    }
}

/// The message of a panic raised by `println!` failing to write stdout, if it is one.
fn stdout_failure(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))?;
    text.strip_prefix("failed printing to stdout: ")
        .map(str::to_string)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Import(command) => cli::import::run(command),
        Command::Instance(args) => cli::instance::run(args),
        Command::Profile(args) => cli::profile::run(args),
        Command::Execute(args) => cli::execute::run(args),
        Command::FitDevice(args) => cli::fit_device::run(args),
        Command::Sync(args) => cli::sync::run(*args),
        Command::SyncSweep(args) => cli::sync_sweep::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Bound(args) => cli::bound::run(args),
        Command::Schedule(args) => cli::schedule::run(args),
        Command::Partition(command) => cli::partition::run(command),
        Command::Validate(args) => cli::validate::run(args),
        Command::Sweep(args) => cli::sweep::run(args),
        Command::SweepJob => cli::sweep::run_job(),
        Command::Merge(args) => cli::merge::run(args),
        Command::Figures(args) => cli::figures::run(args),
        Command::Table(args) => cli::table::run(args),
        Command::Gantt(args) => cli::gantt::run(args),
    }
}
