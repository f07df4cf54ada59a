//! `pipeopt plan`: one algorithm of the registry on an instance and a platform, its plan
//! judged and reported.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::builder::{EnumValueParser, PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use pipeopt::algorithm::{self, Algorithm, Problem};
use pipeopt::milp::general::IlpSearch;
use pipeopt::model::{Instance, Status};
use pipeopt::units::parse_seconds;

use super::{remove_stale, Human, PlatformArgs};

#[derive(Args)]
pub struct PlanArgs {
    /// The instance file (JSON, docs/model.md section 9).
    #[arg(long, short = 'i')]
    pub instance: PathBuf,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// The algorithm.
    #[arg(long, short = 'a', value_parser = algorithm_parser())]
    pub algorithm: Algorithm,
    #[command(flatten)]
    pub options: AlgorithmFlags,
    /// Write the plan file here (atomically).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print one JSON object (docs/model.md section 9) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The algorithm's options as flags: each is the key of the same name in an experiment
/// file's `options` table (`--time-limit` is `time_limit`). An algorithm refuses a flag it
/// does not read, naming the algorithms that do.
#[derive(Args, serde::Serialize)]
pub struct AlgorithmFlags {
    /// For 1f1b* and milp-schedule: the 0-based index of each stage's first layer, e.g.
    /// 0,60,120,180; stage i goes on processor i.
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<Vec<usize>>,
    /// For 1f1b* and pipedream: the period to schedule at (default: the smallest that fits
    /// memory).
    #[arg(long, value_parser = parse_seconds)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<f64>,
    /// For every algorithm: wall-clock limit, e.g. 60s (ilp: 10 min when not given, best:
    /// 60 s, the others none). At the limit the best plan found so far is reported with
    /// status "timeout", or none; the command returns within max(1 s, 10%) of the limit on
    /// any chain (a watchdog stops a run still going then, reporting "timeout" without a
    /// plan). A limit reached is never reported as "infeasible".
    #[arg(long, value_parser = parse_seconds)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<f64>,
    /// For madpipe, milp-schedule, contiguous-opt, ilp and best: HiGHS threads, 1 to 256
    /// (default 1; HiGHS is given at most as many as the machine has cores).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// For best: stop once the plan is proven within this relative gap of the global
    /// lower bound, e.g. 0.05 (at most 5% above the optimum). Default: run until the plan is
    /// proven optimal (to 0.1%) or the time limit.
    #[arg(long, value_parser = parse_relative_gap)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_tolerance: Option<f64>,
    /// For best: apply --gap-tolerance only this long after the start, e.g. 10s; before, it
    /// keeps looking for a plan proven optimal (default: from the start).
    #[arg(long, value_parser = parse_seconds)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_tolerance_after: Option<f64>,
    /// For best: a case whose exact checks end open with its plan near the global bound
    /// (within --extend-below-gap) gets its exact checks extended to this much time in all,
    /// e.g. 60s; the question whose "no plan" would close the case gets all of it. Spends a
    /// grid's time where it can close a case.
    #[arg(long, value_parser = parse_seconds)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_to: Option<f64>,
    /// For best, with --extend-to: the largest relative gap to the bound at which it applies
    /// (default 0.1, 10%).
    #[arg(long, value_parser = parse_relative_gap)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_below_gap: Option<f64>,
    /// For the general MILP `ilp`: first cut the chain into this many groups of consecutive
    /// layers (a DP minimising the largest group's fwd+bwd); the MILP then places groups.
    /// Exact for the chain only without it (or with N >= layers), on chains whose layers
    /// share no stashed tensor (a group is always its own stage); 16 is a good start on
    /// real networks.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coarsen: Option<usize>,
    /// For madpipe: let its second phase also move the first phase's stages between
    /// processors (the general MILP over those stages, from the fixed allocation's pattern).
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remap_stages: bool,
    /// For the general MILP `ilp`: how it searches. `enumerate` lists every allocation of the
    /// groups with a lower bound on its period (loads, memory windows) and runs the
    /// scheduling MILP on them in increasing order of bound until the bound reaches the
    /// shortest period found; `monolithic` solves one MILP that places and schedules
    /// together (period by bisection); `auto` (default) enumerates up to 200000 allocations
    /// (8 groups always).
    #[arg(long, value_parser = ilp_search_parser())]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ilp_search: Option<IlpSearch>,
}

/// The parser of `--algorithm`: the registry's names, aliases and help
/// ([`Algorithm::descriptor`]).
fn algorithm_parser() -> impl TypedValueParser<Value = Algorithm> {
    PossibleValuesParser::new(Algorithm::ALL.iter().map(|a| {
        let d = a.descriptor();
        PossibleValue::new(d.name)
            .aliases(d.aliases.iter().copied())
            .help(d.help)
    }))
    .map(|name| Algorithm::parse(&name).expect("a name the registry listed"))
}

/// `--ilp-search`: the library's [`IlpSearch`] by name, with the help its values show.
#[derive(Clone, Copy, clap::ValueEnum)]
enum IlpSearchFlag {
    /// `enumerate` on chains with at most 200000 allocations (`MAX_ENUMERATED`), handing
    /// over to `monolithic` after 48 scheduling MILPs (`MAX_EXAMINED`) or, uncoarsened,
    /// when one of them takes 5 s (`EXAMINATION_TIME`); `monolithic` otherwise.
    Auto,
    /// Every allocation with its lower bound, the scheduling MILP on each in increasing order
    /// of bound; beyond 200000 allocations (`MAX_ENUMERATED`), the warm start only, with a
    /// note.
    Enumerate,
    /// One MILP placing the groups and scheduling them together, the period by bisection.
    Monolithic,
}

/// The parser of `--ilp-search`.
fn ilp_search_parser() -> impl TypedValueParser<Value = IlpSearch> {
    EnumValueParser::<IlpSearchFlag>::new().map(|flag| match flag {
        IlpSearchFlag::Auto => IlpSearch::Auto,
        IlpSearchFlag::Enumerate => IlpSearch::Enumerate,
        IlpSearchFlag::Monolithic => IlpSearch::Monolithic,
    })
}

/// How long past its time limit a run may go before the watchdog stops it: max(0.5 s, 5%),
/// half the tolerance the limit promises (max(1 s, 10%)), the other half for the exit.
fn watchdog_grace(limit: f64) -> Duration {
    Duration::from_secs_f64((0.05 * limit).max(0.5))
}

/// The guarantee behind `--time-limit`: the planners read the clock (each phase stops at
/// its deadline, and a phase that cannot read it is not started when its size says it would
/// outlast it), but a phase of a solver that does not look at the clock (HiGHS's presolve)
/// could still run past it. Past the limit and [`watchdog_grace`], this thread prints
/// `report` (status "timeout", no plan), removes a stale `--out` and ends the process
/// without running destructors (the planner's thread is still in its work). The [`Watch`] it
/// returns is marked done by the main thread once the planner returned; the thread then does
/// nothing.
fn watchdog(
    started: Instant,
    limit: f64,
    report: pipeopt::model::PlanReport,
    json: bool,
    out: Option<PathBuf>,
) -> Arc<Mutex<Watch>> {
    let watch = Arc::new(Mutex::new(Watch {
        done: false,
        report,
    }));
    let shared = Arc::clone(&watch);
    let at = started + Duration::from_secs_f64(limit) + watchdog_grace(limit);
    std::thread::spawn(move || {
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let mut watch = shared.lock().unwrap_or_else(|e| e.into_inner());
        if watch.done {
            return;
        }
        watch.report.solve_seconds = Some(started.elapsed().as_secs_f64());
        if let Some(path) = &out {
            let _ = remove_stale(path);
        }
        let text = if json {
            serde_json::to_string(&watch.report).map_or_else(|e| e.to_string(), |t| t + "\n")
        } else {
            Human(&watch.report).to_string()
        };
        let _ = super::emit(&text, ExitCode::SUCCESS);
        // SAFETY: `_exit` ends the process at once; stdout was flushed by `emit`.
        unsafe { libc::_exit(0) }
    });
    watch
}

/// What the watchdog and the main thread share: whether the planner returned, and the
/// report the watchdog prints if it did not.
struct Watch {
    done: bool,
    report: pipeopt::model::PlanReport,
}

/// A relative gap such as 0.05 (5%), checked as `best` checks it (a NaN would otherwise
/// reach `best` as a missing option, since JSON has no NaN).
fn parse_relative_gap(text: &str) -> Result<f64, String> {
    let gap = text
        .parse::<f64>()
        .map_err(|_| format!("expected a relative gap such as 0.05 (5%), got {text:?}"))?;
    pipeopt::milp::best::checked_gap_tolerance(gap)
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let platform = args.platform.platform()?;
    // The watchdog is armed before the instance is read: reading a long chain is part of
    // the run the limit bounds.
    let name = args.algorithm.descriptor().name;
    let watch = pipeopt::planner::checked_time_limit(args.options.time_limit)?.map(|limit| {
        let stem = args.instance.file_stem().unwrap_or_default();
        let mut report = algorithm::empty_report(name, &stem.to_string_lossy(), &platform);
        report.status = Status::Timeout;
        let limit = limit.as_secs_f64();
        report.messages.push(format!(
            "{name} had not returned {:.1} s after its time limit of {limit} s: stopped \
             without a plan (nothing was proven)",
            watchdog_grace(limit).as_secs_f64()
        ));
        watchdog(started, limit, report, args.json, args.out.clone())
    });
    let instance = Instance::load(&args.instance)?;
    if let Some(w) = &watch {
        w.lock().unwrap_or_else(|e| e.into_inner()).report.instance = instance.name.clone();
    }
    if platform.memory < 1048576.0 {
        eprintln!(
            "warning: --memory is {} bytes; sizes without a unit are bytes (did you mean {}GiB?)",
            platform.memory, platform.memory
        );
    }
    let configured = args
        .algorithm
        .configure(serde_json::to_value(&args.options)?)?;
    let planner = configured.planner()?;
    let problem = Problem {
        instance: &instance,
        platform: &platform,
    };
    let (plan, report) = algorithm::run(planner.as_ref(), &problem).map_err(|e| {
        // The planners name the instance's fields; the file is ours to name.
        if e.source == "instance" {
            e.in_file(&args.instance)
        } else {
            e
        }
    })?;
    // The watchdog stands down (or, past its deadline and printing, ends the process).
    let _finished = watch.as_ref().map(|w| {
        let mut watch = w.lock().unwrap_or_else(|e| e.into_inner());
        watch.done = true;
        watch
    });
    super::finish_plan_command(&report, plan.as_ref(), args.out.as_deref(), args.json)
}
