//! The `pipeopt` command line: parse, call the library, print JSON or a table. Nothing else.
//!
//! Exit status: 0 on success, 1 when a plan is invalid or an algorithm failed, 2 on bad
//! input (the message names the file and the field).

use std::path::PathBuf;
use std::process::ExitCode;

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
and judges every plan with one exact validator (see MODEL.md).\n\n\
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
    /// Plan an instance on a platform with one algorithm, judge the plan, report it.
    Plan(PlanArgs),
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
    /// Draw a plan's pattern over a few periods as SVG: one row per processor and per link,
    /// colour by batch.
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
struct PlanArgs {
    /// The instance file (JSON, MODEL.md section 9).
    #[arg(long, short = 'i')]
    instance: PathBuf,
    #[command(flatten)]
    platform: PlatformArgs,
    /// The algorithm: 1f1b* (a given partition scheduled by MadPipe's 1F1B*).
    #[arg(long, short = 'a')]
    algorithm: String,
    /// For 1f1b*: the 0-based index of each stage's first layer, e.g. 0,60,120,180; stage i
    /// goes on processor i.
    #[arg(long, value_delimiter = ',')]
    partition: Option<Vec<usize>>,
    /// For 1f1b*: the period to schedule at (default: the smallest that fits memory).
    #[arg(long, value_parser = parse_seconds)]
    period: Option<f64>,
    /// Write the plan file here (atomically).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Print one JSON object (MODEL.md section 9) instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan(args),
        Command::Validate { plan, json } => validate(plan, json),
        Command::Gantt { plan, out, periods } => {
            let plan = Plan::load(&plan)?;
            pipeopt::plot::gantt::write_svg(&plan, periods, &out)?;
            eprintln!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let instance = Instance::load(&args.instance)?;
    let platform = Platform {
        processors: args.platform.processors,
        memory: args.platform.memory,
        bandwidth: args.platform.bandwidth,
        full_duplex: args.platform.full_duplex,
    };
    platform.check()?;
    let options = Options {
        partition: args.partition,
        period: args.period,
    };
    let planner = algorithm::planner(&args.algorithm, &options)?;
    let (plan, report) = algorithm::run(
        planner.as_ref(),
        &Problem {
            instance: &instance,
            platform: &platform,
        },
    )?;
    if let (Some(path), Some(plan)) = (&args.out, &plan) {
        plan.save(path)?;
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
