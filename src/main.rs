//! The `pipeopt` command line: parse, call the library, print JSON or a table. Nothing else.
//!
//! Exit status (README, "Exit status"): 0 when a result was produced, "infeasible"
//! included; 1 when a plan is invalid (`validate`), an algorithm or solver failed, or a
//! file (stdout included) could not be written; 2 on bad input (the message names the file
//! and the field). The library says which ([`pipeopt::Error::exit_code`]); `anyhow` only
//! carries its errors, and those of serde, up to here.

use std::path::PathBuf;
use std::process::ExitCode;

mod sync_cli;

use clap::{Args, Parser, Subcommand};
use pipeopt::algorithm::{self, Options, Problem};
use pipeopt::judge::judge_plan;
use pipeopt::model::{Instance, Plan, PlanReport, Platform, Status};
use pipeopt::units::{parse_bandwidth, parse_bytes, parse_seconds, ShowBytes, ShowSeconds};
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
pipeopt plan --instance resnet50.json --processors 4 --memory 8GiB --bandwidth 12GB/s \\\n      \
--algorithm 1f1b* --partition 0,60,120,180 --out plan.json\n  \
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
    /// Import another tool's profile as an instance (JSON, docs/model.md section 9).
    #[command(subcommand)]
    Import(ImportCommand),
    /// Make an instance of a built-in network from its exact tensor shapes (no GPU).
    ///
    /// Weights, outputs and stashes come exactly from the shapes; with `--times analytic`
    /// forward and backward times come from FLOP counts and bytes moved on a roofline device
    /// model (see src/nets/analytic.rs). Networks: resnet50, resnet101, inception_v3,
    /// densenet121, vgg16, bert48, gpt24.
    Instance(InstanceArgs),
    /// Measure a built-in network with libtorch, layer by layer, and write its instance
    /// (feature `torch`; on a GPU for real numbers).
    ///
    /// Per chain layer: forward and backward times (median over --reps after --warmup,
    /// between device synchronizations), output and weight bytes, and on CUDA the stash
    /// autograd really keeps (caching allocator statistics). Also measures the whole
    /// network's forward pass and training step with the same binary and compares them with
    /// the sums of the layers, and compares every layer with the analytic model
    /// (`pipeopt instance --times analytic`). See src/exec/profile.rs.
    Profile(ProfileArgs),
    /// Run a plan with libtorch on one device standing in for its P processors and compare
    /// measured durations, period, memory and gradients with the model (feature `torch`).
    Execute(ExecuteArgs),
    /// Simulate a synchronous or bidirectional pipeline schedule (GPipe, DAPPLE, GEMS,
    /// Chimera, MixPipe, BaPipe): iteration time, bubble ratio, memory of every worker;
    /// MixPipe's search of K and Gamma (--search), BaPipe's exploration (--explore).
    Sync(Box<sync_cli::SyncArgs>),
    /// Run a grid of synchronous schedules (an experiment file such as
    /// experiments/bidirectional.toml): bubble ratios, per-worker memory and the best
    /// throughput under a memory budget; writes results/<name>/ (CSV, JSON, figures).
    ///
    /// With an [optimum] table in the file (time_limit = "20s", max_micro_batches = 16),
    /// each configuration (instance, D, B, N, recomputation) is also solved once per
    /// placement by the exact schedule MILP (`sync --schedule optimal`, no memory limit):
    /// optimum.csv, and in runs.csv every run's optimum_seconds (the proven optimum, or the
    /// MILP's lower bound when its status is not optimal) and ratio_to_optimum.
    SyncSweep(sync_cli::SyncSweepArgs),
    /// Plan an instance on a platform with one algorithm, judge the plan, report it.
    Plan(PlanArgs),
    /// Prove a lower bound on the period of every plan of a case: any allocation
    /// (contiguous or not), any periodic pattern, memory included; or prove that no plan fits.
    ///
    /// The bound is the smallest period at which a relaxation of the problem (which
    /// processor holds each layer; loads of processors and links; static memory; at every
    /// forward start, the batches each stash must hold along one batch's chain; average
    /// memory over the stashes' windows) has a solution, found by a MILP (HiGHS) bisected on
    /// the period. "infeasible" means that even one batch at a time fits no allocation.
    /// See src/milp/global_bound.rs for the argument.
    Bound(BoundArgs),
    /// Find the best periodic pattern for a plan's allocation with the scheduling MILP
    /// (minimum period that fits memory; any allocation, several stages per processor
    /// allowed), judge it and write the new plan.
    Schedule {
        /// The plan file whose allocation to schedule.
        plan: PathBuf,
        /// Wall-clock limit of the whole search, e.g. 60s.
        #[arg(long, value_parser = parse_seconds)]
        time_limit: Option<f64>,
        /// HiGHS threads (default 1).
        #[arg(long)]
        threads: Option<usize>,
        /// Where to write the scheduled plan (atomically).
        #[arg(long, short = 'o')]
        out: PathBuf,
        /// Print one JSON object (docs/model.md section 9).
        #[arg(long)]
        json: bool,
    },
    /// Run a partitioner on its own, with its own objective.
    #[command(subcommand)]
    Partition(PartitionCommand),
    /// Judge a plan file: validity, period, exact memory peaks, resource loads.
    ///
    /// Exits 1 when the plan is invalid, naming the first violation with the operations and
    /// batch numbers involved.
    Validate {
        /// The plan file (JSON, as written by `plan --out`).
        plan: PathBuf,
        /// Print one JSON object: {"valid", "period", "peak_memory", "violations", ...}.
        #[arg(long)]
        json: bool,
    },
    /// Run an experiment (a TOML grid): parallel, resumable, shardable; writes
    /// results/<name>.parquet and .csv.
    ///
    /// Every finished job is appended to results/<name>/journal.jsonl at once, so a sweep
    /// killed at any moment and run again loses and duplicates nothing. Each job runs in its
    /// own process by default: a solver crash or hang costs one row, recorded as an error.
    Sweep {
        /// The experiment file (see experiments/*.toml).
        experiment: PathBuf,
        /// Run only shard i of n (1-based, e.g. 3/16): jobs i-1, i-1+n, ... of the grid.
        /// Tables go to results/<name>/shard-i-of-n.parquet; `merge` joins them.
        #[arg(long)]
        shard: Option<pipeopt::sweep::run::Shard>,
        /// Parallel jobs (default: the experiment's `workers`, 0 = one per core).
        #[arg(long, short = 'j')]
        workers: Option<usize>,
        /// How jobs are isolated.
        #[arg(long, value_enum, default_value = "process")]
        isolation: pipeopt::sweep::run::Isolation,
        /// Print a JSON summary instead of a line for people.
        #[arg(long)]
        json: bool,
    },
    /// Run one sweep job read as JSON from stdin and print its row (used by `sweep`).
    #[command(hide = true)]
    SweepJob,
    /// Merge Parquet tables (the shards of one grid) into one, one row per job.
    Merge {
        /// The tables to merge.
        #[arg(required = true)]
        tables: Vec<PathBuf>,
        /// Output table (default: results/<dir of the first input>.parquet).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
    },
    /// Draw the figures of a results table (periods, ratios, speedups) as SVG files.
    Figures {
        /// The results table (Parquet).
        table: PathBuf,
        /// The directory to write into.
        #[arg(long, short = 'o')]
        out: PathBuf,
        /// The algorithm the ratio figure divides by.
        #[arg(long, default_value = "madpipe")]
        ratio_to: String,
    },
    /// Summarise a results table: runs, valid, infeasible, mean speedup, and geometric means
    /// of period ratios to one algorithm (Beaumont et al., ScaDL 2022, Figure 7).
    Table {
        /// The results table (Parquet).
        table: PathBuf,
        /// Columns to group by, besides the algorithm (e.g. memory, processors, instance).
        #[arg(long, value_delimiter = ',', default_value = "memory")]
        by: Vec<String>,
        /// Divide each period by this algorithm's period on the same case.
        #[arg(long)]
        ratio_to: Option<String>,
        /// Print one JSON object, {"table": ..., "rows": [...]}, instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Draw a plan's pattern over a few periods as SVG (PNG when --out ends in .png): one row
    /// per processor and per link, colour by batch; or one iteration of a `sync --out` file,
    /// one row per worker.
    Gantt {
        /// The plan file.
        plan: PathBuf,
        /// Where to write the SVG.
        #[arg(long)]
        out: PathBuf,
        /// How many periods to draw.
        #[arg(long, default_value_t = 3)]
        periods: usize,
    },
}

#[derive(Args)]
struct InstanceArgs {
    /// The network.
    #[arg(long)]
    model: String,
    /// Image side in pixels (square images; ignored by the transformers).
    #[arg(long, default_value_t = 224)]
    image: usize,
    /// Batch size (samples per batch).
    #[arg(long)]
    batch: usize,
    /// Where times come from: `analytic` (FLOPs on a roofline device model). Measured
    /// times come from `pipeopt profile` (feature `torch`, on a GPU).
    #[arg(long, value_parser = ["analytic"], default_value = "analytic")]
    times: String,
    /// Element type: float32 or float16.
    #[arg(long, default_value = "float32")]
    dtype: String,
    /// Device model for analytic times: h100 (rates fitted to measured H100 profiles), h100-peak
    /// or v100 (datasheet rooflines).
    #[arg(long, default_value = "h100")]
    device_model: String,
    /// Chain layers: `block` (one per block: bottleneck, Inception module, dense layer) or
    /// `op` (the DAG of leaf ops linearized like a PipeDream profile; exact stashes with
    /// `stash_overlap` and `stash_shared`).
    #[arg(long, value_parser = ["block", "op"], default_value = "block")]
    granularity: String,
    /// Where to write the instance (atomically).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ProfileArgs {
    /// The network: resnet50, resnet101, inception_v3, densenet121, vgg16, bert48, gpt24.
    #[arg(long)]
    model: String,
    /// Image side in pixels (square images; ignored by the transformers).
    #[arg(long, default_value_t = 224)]
    image: usize,
    /// Batch size (samples per batch).
    #[arg(long)]
    batch: usize,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cuda")]
    device: String,
    /// Element type: float32 or float16.
    #[arg(long, default_value = "float32")]
    dtype: String,
    /// Untimed repetitions before the timed ones.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed repetitions (the median is kept).
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Seed of the weights and the batch.
    #[arg(long, default_value_t = 0)]
    seed: i64,
    /// The device's name, recorded in meta (e.g. "$(nvidia-smi --query-gpu=name
    /// --format=csv,noheader)").
    #[arg(long)]
    device_name: Option<String>,
    /// Device model of the analytic comparison: h100, h100-peak or v100.
    #[arg(long, default_value = "h100")]
    device_model: String,
    /// Where to write the measured instance (atomically).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Where to write the whole profile report (JSON: per layer measured and analytic,
    /// whole network against the sums).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ExecuteArgs {
    /// The plan file (it must carry a pattern).
    plan: PathBuf,
    /// The network to run (its layers and sizes must match the plan's instance): `mlp` (the
    /// small test network of `tests/exec.rs`) or resnet50, resnet101, inception_v3,
    /// densenet121, vgg16, bert48, gpt24 at --image and --batch (plan for the instance
    /// `pipeopt profile` or `pipeopt instance` wrote for the same sizes).
    #[arg(long, default_value = "mlp")]
    network: String,
    /// Image side in pixels of the network's input (not for mlp).
    #[arg(long, default_value_t = 224)]
    image: usize,
    /// Samples per batch (not for mlp).
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Element type: float32 or float16 (not for mlp).
    #[arg(long, default_value = "float32")]
    dtype: String,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Periods to run (one new batch enters per period).
    #[arg(long, default_value_t = 30)]
    periods: usize,
    /// Print the whole report as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum PartitionCommand {
    /// PipeDream's optimizer (Narayanan et al., SOSP 2019, section 3.1): a DP over the
    /// chain and the levels of a hierarchical machine (`--processors 4 4 --bandwidth 24GB/s
    /// 3GB/s`: 4 servers of 4 GPUs, innermost level first). Prints PipeDream's own
    /// objective under `objective` (the slowest stage's time, its "Time per stage in
    /// pipeline") and the stages.
    Pipedream {
        /// The instance file.
        #[arg(long, short = 'i')]
        instance: PathBuf,
        /// Components per level, innermost first.
        #[arg(long, num_args = 1.., required = true)]
        processors: Vec<usize>,
        /// Bandwidth of each level, innermost first.
        #[arg(long, num_args = 1.., required = true, value_parser = parse_bandwidth)]
        bandwidth: Vec<f64>,
        /// Allow replicated (data-parallel) stages; default: a straight pipeline.
        #[arg(long)]
        replicate: bool,
        /// PipeDream's memory constraint (`--use_memory_constraint --memory_size`).
        #[arg(long, value_parser = parse_bytes)]
        memory: Option<f64>,
        /// Activation compression ratio; `none` ignores activation transfers (PipeDream's
        /// default when the flag is absent there). Default here: 1.
        #[arg(long, default_value = "1")]
        activation_compression_ratio: String,
        /// Let a range leave some of its components unused (`--use_fewer_machines`).
        #[arg(long)]
        fewer_machines: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ImportCommand {
    /// PipeDream's graph.txt: the DAG linearized into a chain (a depth-first topological
    /// order; out = every tensor crossing the cut; zero-cost nodes grouped where a cut is
    /// useless).
    Pipedream {
        /// The graph.txt file.
        file: PathBuf,
        /// Where to write the instance (atomically).
        #[arg(long, short = 'o')]
        out: PathBuf,
        /// The instance's name (default: the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Print a JSON summary on stdout.
        #[arg(long)]
        json: bool,
        /// Import a DAG that does not look like a whole network (a source that is not an
        /// Input, a node with no path to the output, too few edges): by default an error
        /// naming the node, since a file cut short still parses.
        #[arg(long)]
        accept_incomplete: bool,
    },
}

#[derive(Args)]
struct PlatformArgs {
    /// P: number of processors.
    #[arg(long, short = 'p')]
    processors: usize,
    /// M: memory of each processor, e.g. 8GiB.
    #[arg(long, short = 'm', value_parser = parse_bytes)]
    memory: f64,
    /// beta: bandwidth of every link, e.g. 12GB/s.
    #[arg(long, short = 'b', value_parser = parse_bandwidth)]
    bandwidth: f64,
    /// Links carry forward and backward transfers at the same time.
    #[arg(long)]
    full_duplex: bool,
}

#[derive(Args)]
struct BoundArgs {
    /// The instance file (JSON, docs/model.md section 9).
    #[arg(long, short = 'i')]
    instance: PathBuf,
    #[command(flatten)]
    platform: PlatformArgs,
    /// Wall-clock limit of the search, e.g. 30s; at the limit the bound proven so far is
    /// reported ("complete": false).
    #[arg(long, value_parser = parse_seconds)]
    time_limit: Option<f64>,
    /// Relative precision of the bisection on the period (default 0.001).
    #[arg(long, default_value_t = 1e-3)]
    precision: f64,
    /// Print one JSON object: {"lower_bound", "infeasible", "method", "solve_seconds", ...}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PlanArgs {
    /// The instance file (JSON, docs/model.md section 9).
    #[arg(long, short = 'i')]
    instance: PathBuf,
    #[command(flatten)]
    platform: PlatformArgs,
    /// The algorithm.
    #[arg(long, short = 'a', value_enum)]
    algorithm: algorithm::Algorithm,
    /// For 1f1b*: the 0-based index of each stage's first layer, e.g. 0,60,120,180; stage i
    /// goes on processor i.
    #[arg(long, value_delimiter = ',')]
    partition: Option<Vec<usize>>,
    /// For 1f1b*: the period to schedule at (default: the smallest that fits memory).
    #[arg(long, value_parser = parse_seconds)]
    period: Option<f64>,
    /// For the MILPs (madpipe, milp-schedule, contiguous-opt, ilp): wall-clock limit, e.g.
    /// 60s (ilp: 10 min when not given). At the limit the best plan found so far is
    /// reported with status "timeout".
    #[arg(long, value_parser = parse_seconds)]
    time_limit: Option<f64>,
    /// For the MILPs: HiGHS threads (default 1).
    #[arg(long)]
    threads: Option<usize>,
    /// For the general MILP `ilp`: first cut the chain into this many groups of consecutive
    /// layers (a DP minimising the largest group's fwd+bwd); the MILP then places groups.
    /// Exact for the chain only without it (or with N >= layers); 16 is a good start on
    /// real networks.
    #[arg(long)]
    coarsen: Option<usize>,
    /// For madpipe: let its second phase also move the first phase's stages between
    /// processors (the general MILP over those stages, from the fixed allocation's pattern).
    #[arg(long)]
    remap_stages: bool,
    /// For the general MILP `ilp`: how it searches. `enumerate` lists every allocation of the
    /// groups with a lower bound on its period (loads, memory windows) and runs the
    /// scheduling MILP on them in increasing order of bound until the bound reaches the best
    /// period found; `monolithic` solves one MILP that places and schedules together (period
    /// by bisection); `auto` (default) enumerates up to 200000 allocations (8 groups always).
    #[arg(long, value_enum)]
    ilp_search: Option<pipeopt::milp::general::IlpSearch>,
    /// Write the plan file here (atomically).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Print one JSON object (docs/model.md section 9) instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Sync(args) => sync_cli::run(*args),
        Command::SyncSweep(args) => sync_cli::run_sweep(args),
        Command::Plan(args) => plan(args),
        Command::Bound(args) => bound(args),
        Command::Instance(args) => make_instance(args),
        Command::Execute(args) => execute(args),
        Command::Profile(args) => profile(args),
        Command::Import(ImportCommand::Pipedream {
            file,
            out,
            name,
            json,
            accept_incomplete,
        }) => {
            let instance = pipeopt::io::pipedream::import_pipedream_with(
                &file,
                name.as_deref(),
                accept_incomplete,
            )?;
            let text = serde_json::to_vec_pretty(&instance)?;
            pipeopt::error::write_atomic(&out, &text)?;
            let summary = pipeopt::io::pipedream::import_summary(&instance, &out);
            if json {
                println!("{summary}");
            } else {
                let sums = instance.sums();
                println!(
                    "{}: {} DAG nodes -> {} chain layers, U(1,L) = {}, weights {} -> {}",
                    instance.name,
                    summary["dag_nodes"],
                    instance.len(),
                    ShowSeconds(sums.u(1, instance.len())),
                    ShowBytes(sums.weights(1, instance.len())),
                    out.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate { plan, json } => validate(plan, json),
        Command::Schedule {
            plan,
            time_limit,
            threads,
            out,
            json,
        } => schedule(plan, time_limit, threads, out, json),
        Command::Partition(PartitionCommand::Pipedream {
            instance,
            processors,
            bandwidth,
            replicate,
            memory,
            activation_compression_ratio,
            fewer_machines,
            json,
        }) => {
            use pipeopt::partition::pipedream::{
                partition, partition_json, Level, PipeDreamConfig,
            };
            if processors.len() != bandwidth.len() {
                return Err(InputError::new(
                    "--bandwidth",
                    "",
                    format!(
                        "{} levels of --processors but {} bandwidths; give one per level",
                        processors.len(),
                        bandwidth.len()
                    ),
                )
                .into());
            }
            let activation_compression = match activation_compression_ratio.as_str() {
                "none" => None,
                r => Some(r.parse::<f64>().map_err(|_| {
                    InputError::new(
                        "--activation-compression-ratio",
                        "",
                        format!("{r:?} is neither a number nor `none`"),
                    )
                })?),
            };
            let inst = Instance::load(&instance)?;
            let config = PipeDreamConfig {
                levels: processors
                    .iter()
                    .zip(&bandwidth)
                    .map(|(&processors, &bandwidth)| Level {
                        processors,
                        bandwidth,
                    })
                    .collect(),
                straight: !replicate,
                activation_compression,
                memory,
                fewer_machines,
            };
            let started = std::time::Instant::now();
            let result = match partition(&inst, &config) {
                Ok(r) => r,
                Err(pipeopt::partition::pipedream::PipeDreamError::Config(e)) => {
                    return Err(e.into())
                }
                // No partition is a result ("infeasible"), like `plan`'s: exit 0, and with
                // --json still one object.
                Err(e) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::json!({
                                "instance": inst.name,
                                "status": "infeasible",
                                "objective": null,
                                "stages": [],
                                "messages": [e.to_string()],
                            })
                        );
                    } else {
                        println!("{e}");
                    }
                    return Ok(ExitCode::SUCCESS);
                }
            };
            let seconds = started.elapsed().as_secs_f64();
            let j = partition_json(&inst, &config, &result, seconds);
            if json {
                println!("{j}");
            } else {
                println!(
                    "{}: PipeDream objective (slowest stage) {} on {} of {} processors, {} stages, solved in {}",
                    inst.name,
                    ShowSeconds(result.objective),
                    result.processors_used,
                    config.total_processors(),
                    result.stages.len(),
                    ShowSeconds(seconds)
                );
                println!("{:>6} {:>6} {:>8}", "first", "last", "replicas");
                for st in &result.stages {
                    println!("{:>6} {:>6} {:>8}", st.first, st.last, st.replicas);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sweep {
            experiment,
            shard,
            workers,
            isolation,
            json,
        } => {
            use pipeopt::sweep::{config::Experiment, run};
            let exp = Experiment::load(&experiment)?;
            eprintln!("{}: {} jobs", exp.name, exp.len());
            let opts = run::SweepOptions {
                shard,
                isolation,
                workers,
                progress: !json,
                executable: None,
            };
            let summary = run::sweep(&exp, &opts)?;
            if json {
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
        Command::SweepJob => {
            pipeopt::sweep::run::sweep_job_main()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge { tables, out } => {
            let out = match out {
                Some(o) => o,
                None => {
                    let dir = tables[0]
                        .parent()
                        .and_then(|d| d.file_name())
                        .ok_or_else(|| {
                            InputError::new("--out", "", "cannot guess the output name; give --out")
                        })?;
                    let base = tables[0]
                        .parent()
                        .and_then(|d| d.parent())
                        .unwrap_or(std::path::Path::new("."));
                    base.join(format!("{}.parquet", dir.to_string_lossy()))
                }
            };
            let n = pipeopt::sweep::table::merge(&tables, &out)?;
            eprintln!(
                "merged {} tables: {n} rows -> {}",
                tables.len(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Figures {
            table,
            out,
            ratio_to,
        } => {
            let rows = pipeopt::sweep::table::read_rows(&table)?;
            for f in pipeopt::sweep::figures::write_figures(&rows, &out, Some(&ratio_to))? {
                eprintln!("wrote {}", f.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Table {
            table,
            by,
            ratio_to,
            json,
        } => {
            let df = pipeopt::sweep::table::read_frame(&table)?;
            let summary = pipeopt::sweep::table::summary(&df, &by, ratio_to.as_deref())
                .map_err(|e| InputError::file(&table, e))?;
            if json {
                let out = serde_json::json!({
                    "table": table,
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
        Command::Gantt { plan, out, periods } => {
            if !out
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("svg") || e.eq_ignore_ascii_case("png"))
            {
                return Err(InputError::new(
                    "--out",
                    "",
                    format!(
                        "{}: gantt writes SVG or PNG; name the file *.svg or *.png",
                        out.display()
                    ),
                )
                .into());
            }
            if pipeopt::plot::sync_gantt::is_sync_file(&plan) {
                pipeopt::plot::sync_gantt::write_svg(&plan, &out)?;
                eprintln!("wrote {}", out.display());
                return Ok(ExitCode::SUCCESS);
            }
            let plan = Plan::load(&plan)?;
            pipeopt::plot::gantt::write_svg(&plan, periods, &out)?;
            eprintln!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `--dtype`: float32 or float16.
fn parse_dtype(s: &str) -> Result<pipeopt::nets::DType, InputError> {
    pipeopt::nets::DType::parse(s)
        .ok_or_else(|| InputError::new("--dtype", "", format!("is {s:?}; use float32 or float16")))
}

/// `--device-model`: a preset of `nets::DeviceModel`.
fn parse_device_model(s: &str) -> Result<pipeopt::nets::DeviceModel, InputError> {
    pipeopt::nets::DeviceModel::preset(s).ok_or_else(|| {
        InputError::new(
            "--device-model",
            "",
            format!("is {s:?}; use h100, h100-peak or v100"),
        )
    })
}

fn make_instance(args: InstanceArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::nets::instance;
    let dtype = parse_dtype(&args.dtype)?;
    let device = parse_device_model(&args.device_model)?;
    if args.batch == 0 {
        return Err(InputError::new("--batch", "", "must be at least 1").into());
    }
    let inst = match pipeopt::nets::Granularity::parse(&args.granularity) {
        Some(pipeopt::nets::Granularity::Op) => pipeopt::nets::network(&args.model, args.image)
            .and_then(|net| pipeopt::nets::op_instance(&net, args.batch, dtype, &device)),
        _ => instance(&args.model, args.image, args.batch, dtype, &device),
    }
    .map_err(|e| InputError::new("--model", "", e.to_string()))?;
    inst.check()?;
    let text = serde_json::to_string_pretty(&inst)? + "\n";
    pipeopt::error::write_atomic(&args.out, text.as_bytes())?;
    let sums = inst.sums();
    let l = inst.len();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "instance": args.out,
                "name": inst.name,
                "layers": l,
                "sequential_seconds": sums.u(1, l),
                "weights_bytes": sums.weights(1, l),
                "stash_bytes": sums.stash(1, l),
                "meta": inst.meta,
            })
        );
    } else {
        println!(
            "{}: {} chain layers, U(1,L) = {}, weights {}, stash {} -> {}",
            inst.name,
            l,
            ShowSeconds(sums.u(1, l)),
            ShowBytes(sums.weights(1, l)),
            ShowBytes(sums.stash(1, l)),
            args.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What the libtorch commands do in a build without the `torch` feature.
#[cfg(not(feature = "torch"))]
fn without_torch(command: &str) -> anyhow::Result<ExitCode> {
    Err(InputError::new(
        command,
        "",
        "this pipeopt was built without libtorch; rebuild with `--features torch` \
         (run `source .ci/setup-torch.sh` first, see README)",
    )
    .into())
}

#[cfg(not(feature = "torch"))]
fn profile(_args: ProfileArgs) -> anyhow::Result<ExitCode> {
    without_torch("profile")
}

#[cfg(feature = "torch")]
fn profile(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::exec::profile::{profile, ProfileOptions};
    let dtype = parse_dtype(&args.dtype)?;
    let device_model = parse_device_model(&args.device_model)?;
    if args.batch == 0 || args.reps == 0 {
        return Err(InputError::new("--batch/--reps", "", "must be at least 1").into());
    }
    let desc = pipeopt::nets::network(&args.model, args.image)
        .map_err(|e| InputError::new("--model", "", e.to_string()))?;
    let options = ProfileOptions {
        batch: args.batch,
        dtype,
        device: pipeopt::exec::parse_device(&args.device)?,
        warmup: args.warmup,
        reps: args.reps,
        seed: args.seed,
        device_name: args.device_name.clone(),
        device_model,
    };
    let (inst, report) = profile(&desc, &options)?;
    inst.check()?;
    let text = serde_json::to_string_pretty(&inst)? + "\n";
    pipeopt::error::write_atomic(&args.out, text.as_bytes())?;
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        pipeopt::error::write_atomic(path, text.as_bytes())?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:>11} {:>11} {:>11} {:>11} {:>7} {:>11} {:>11}",
        "layer", "fwd", "bwd", "an. fwd", "an. bwd", "an/meas", "stash", "an. stash"
    );
    for m in &report.layers {
        println!(
            "{:<24} {:>11} {:>11} {:>11} {:>11} {:>7.2} {:>11} {:>11}",
            m.name,
            ShowSeconds(m.fwd).to_string(),
            ShowSeconds(m.bwd).to_string(),
            ShowSeconds(m.analytic_fwd).to_string(),
            ShowSeconds(m.analytic_bwd).to_string(),
            (m.analytic_fwd + m.analytic_bwd) / (m.fwd + m.bwd),
            m.stash_measured
                .map(|b| ShowBytes(b).to_string())
                .unwrap_or_else(|| "-".into()),
            ShowBytes(m.analytic_stash).to_string(),
        );
    }
    println!(
        "{} on {}: sum of layer forwards {} vs whole forward {} (ratio {:.3}); \
         sum of fwd+bwd {} vs training step {} (ratio {:.3}); analytic/measured per layer \
         {:.2}..{:.2} (geometric mean {:.2}), total {:.2}; sizes equal to the analytic ones: \
         out {}, weights {}, stash {} layers differ -> {}",
        report.model,
        report.device,
        ShowSeconds(report.sum_fwd),
        ShowSeconds(report.whole_forward),
        report.forward_ratio,
        ShowSeconds(report.sum_fwd_bwd),
        ShowSeconds(report.whole_step),
        report.step_ratio,
        report.analytic_time_ratio.0,
        report.analytic_time_ratio.2,
        report.analytic_time_ratio.1,
        report.analytic_total_ratio,
        report.out_equal,
        report.weights_equal,
        report.stash_differences.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "torch"))]
fn execute(_args: ExecuteArgs) -> anyhow::Result<ExitCode> {
    without_torch("execute")
}

#[cfg(feature = "torch")]
fn execute(args: ExecuteArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.plan)?;
    let device = pipeopt::exec::parse_device(&args.device)?;
    let dtype = parse_dtype(&args.dtype)?;
    let spec = pipeopt::exec::NetworkSpec {
        name: args.network.clone(),
        image: args.image,
        batch: args.batch,
        dtype,
    };
    let report = pipeopt::exec::execute_builtin(&plan, &spec, device, args.periods)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} on {}: {} batches, period predicted {} replayed {} (wall {} per period)",
            report.network,
            report.device,
            report.batches,
            ShowSeconds(report.predicted_period),
            ShowSeconds(report.replayed_period),
            ShowSeconds(report.wall_per_period)
        );
        for p in &report.processors {
            println!(
                "  processor {}: peak predicted {} measured {}",
                p.processor,
                ShowBytes(p.predicted_peak),
                ShowBytes(p.measured_peak)
            );
        }
        if let Some(g) = &report.gradients {
            println!(
                "  gradients: max relative error {:.2e} (tolerance {:.0e}) {}",
                g.max_relative_error,
                g.tolerance,
                if g.passed { "ok" } else { "FAILED" }
            );
        }
    }
    let ok = report.gradients.as_ref().is_none_or(|g| g.passed);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn schedule(
    plan_path: PathBuf,
    time_limit: Option<f64>,
    threads: Option<usize>,
    out: PathBuf,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&plan_path)?;
    if plan.bipartition.is_some() {
        return Err(InputError::new(
            plan_path.display().to_string(),
            "bipartition",
            "the scheduling MILP schedules allocations (one range of layers per stage); \
             a Bi-Partition plan splits a layer's forward and backward",
        )
        .into());
    }
    let options = Options {
        time_limit,
        threads,
        ..Options::default()
    }
    .milp()?;
    let name = if plan.algorithm.ends_with("+milp") {
        plan.algorithm.clone()
    } else {
        format!("{}+milp", plan.algorithm)
    };
    let planner = pipeopt::milp::fixed_allocation::FixedAllocationPlanner {
        allocation: plan.allocation(),
        options,
        name,
    };
    let (new, report) = algorithm::run(
        &planner,
        &Problem {
            instance: &plan.instance,
            platform: &plan.platform,
        },
    )?;
    match &new {
        Some(new) => new.save(&out)?,
        None => remove_stale(&out)?,
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report);
        if new.is_some() {
            println!("plan written to {}", out.display());
        }
    }
    Ok(if report.status == Status::Error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn bound(args: BoundArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::milp::global_bound::{global_lower_bound, BoundOptions};
    let instance = Instance::load(&args.instance)?;
    let platform = args.platform.platform()?;
    if !(args.precision.is_finite() && args.precision > 0.0 && args.precision < 1.0) {
        return Err(InputError::new(
            "--precision",
            "",
            format!("must be in (0, 1), got {}", args.precision),
        )
        .into());
    }
    let options = BoundOptions {
        time_limit: Options {
            time_limit: args.time_limit,
            ..Options::default()
        }
        .milp()?
        .time_limit,
        precision: args.precision,
        ..BoundOptions::default()
    };
    let b = global_lower_bound(&instance, &platform, &options)?;
    if args.json {
        let mut v = serde_json::to_value(&b)?;
        if b.infeasible {
            v["lower_bound"] = serde_json::Value::Null;
        }
        v["instance"] = instance.name.clone().into();
        v["processors"] = platform.processors.into();
        v["memory"] = platform.memory.into();
        v["bandwidth"] = platform.bandwidth.into();
        println!("{v}");
    } else {
        println!(
            "{} | P = {}, M = {}, beta = {:.3} GB/s",
            instance.name,
            platform.processors,
            ShowBytes(platform.memory),
            platform.bandwidth / 1e9
        );
        if b.infeasible {
            println!(
                "infeasible      no allocation fits, at any period (proof: {})",
                b.method
            );
        } else {
            println!("lower bound     {}", ShowSeconds(b.lower_bound));
            if let Some(t) = b.relaxed_period {
                println!(
                    "relaxed period  {} (the relaxation is feasible there)",
                    ShowSeconds(t)
                );
            }
            println!("method          {}", b.method);
            println!("complete        {}", b.complete);
        }
        println!(
            "solve time      {} ({} MILPs, {} nodes)",
            ShowSeconds(b.solve_seconds),
            b.solves,
            b.nodes
        );
    }
    Ok(ExitCode::SUCCESS)
}

impl PlatformArgs {
    fn platform(&self) -> Result<Platform, InputError> {
        let platform = Platform {
            processors: self.processors,
            memory: self.memory,
            bandwidth: self.bandwidth,
            full_duplex: self.full_duplex,
        };
        platform.check()?;
        Ok(platform)
    }
}

fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let instance = Instance::load(&args.instance)?;
    let platform = args.platform.platform()?;
    if platform.memory < 1048576.0 {
        eprintln!(
            "warning: --memory is {} bytes; sizes without a unit are bytes (did you mean {}GiB?)",
            platform.memory, platform.memory
        );
    }
    let options = Options {
        partition: args.partition,
        period: args.period,
        time_limit: args.time_limit,
        threads: args.threads,
        coarsen: args.coarsen,
        remap_stages: args.remap_stages,
        ilp_search: args.ilp_search,
        ..Options::default()
    };
    let planner = args.algorithm.planner(&options)?;
    let (plan, report) = algorithm::run(
        planner.as_ref(),
        &Problem {
            instance: &instance,
            platform: &platform,
        },
    )?;
    match (&args.out, &plan) {
        (Some(path), Some(plan)) => plan.save(path)?,
        (Some(path), None) => remove_stale(path)?,
        _ => {}
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report);
        if let (Some(path), Some(_)) = (&args.out, &plan) {
            println!("plan written to {}", path.display());
        }
    }
    Ok(if report.status == Status::Error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// With no plan to write (infeasible, error), an older file at `--out` would pass for this
/// run's result: remove it.
fn remove_stale(path: &std::path::Path) -> Result<(), InputError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            eprintln!("no plan: removed the older {}", path.display());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InputError::file(path, e)),
    }
}

fn print_report(r: &PlanReport) {
    println!(
        "{} on {} | P = {}, M = {}, beta = {:.3} GB/s",
        r.algorithm,
        r.instance,
        r.processors,
        ShowBytes(r.memory),
        r.bandwidth / 1e9
    );
    println!("status          {:?}", r.status);
    let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| ShowSeconds(v).to_string());
    println!("period          {}", opt(r.period));
    println!("planned period  {}", opt(r.planned_period));
    println!("lower bound     {}", opt(r.lower_bound));
    println!("solve time      {}", opt(r.solve_seconds));
    if !r.stages.is_empty() {
        println!("stages:");
        for (i, s) in r.stages.iter().enumerate() {
            println!(
                "  {i:>3}: layers {:>4}..={:<4} on processor {}",
                s.first, s.last, s.processor
            );
        }
    }
    if !r.peak_memory.is_empty() {
        println!("memory peaks:");
        for (p, m) in r.peak_memory.iter().enumerate() {
            println!(
                "  processor {p:>2}: {:>12}  ({:.1}% of M)",
                ShowBytes(*m).to_string(),
                100.0 * m / r.memory
            );
        }
    }
    for m in &r.messages {
        println!("note: {m}");
    }
}

fn validate(path: PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&path)?;
    let j = judge_plan(&plan);
    if json {
        let violations: Vec<String> = j.violations.iter().map(|v| v.to_string()).collect();
        let out = serde_json::json!({
            "valid": j.valid,
            "period": if j.valid { Some(j.period) } else { None },
            "peak_memory": j.peak_memory,
            "violations": violations,
            "violation_details": j.violations,
            "loads": j.loads,
        });
        println!("{out}");
    } else {
        if j.valid {
            println!(
                "valid: period {} ({} batches/s)",
                ShowSeconds(j.period),
                1.0 / j.period
            );
        } else {
            println!("INVALID: {}", j.violations[0]);
            if j.violations.len() > 1 {
                println!("  ... and {} more violation(s)", j.violations.len() - 1);
            }
        }
        for (p, m) in j.peak_memory.iter().enumerate() {
            println!(
                "  processor {p:>2}: peak {:>12} of {}",
                ShowBytes(*m).to_string(),
                ShowBytes(plan.platform.memory)
            );
        }
        for l in &j.loads {
            println!(
                "  {:<24} busy {:>12} ({:.1}%)",
                l.resource,
                ShowSeconds(l.busy).to_string(),
                100.0 * l.utilization
            );
        }
    }
    Ok(if j.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
