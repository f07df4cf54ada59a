//! `pipeopt sync-sweep`: a grid of synchronous and bidirectional pipeline schedules
//! (GPipe, DAPPLE, GEMS, Chimera, MixPipe, BaPipe's GPU schedules) simulated on real
//! instances, after MixPipe (Zhang et al., *MixPipe: Efficient Bidirectional Pipeline
//! Parallelism for Training Large-Scale Models*, DAC 2023), section IV: bubble ratios,
//! per-worker memory (its Figure 7) and throughput under a memory budget (its Figures
//! 8-10).
//!
//! The grid (an experiment file, see `experiments/bidirectional.toml`): for each case (an
//! instance, a study name, pipeline depths D in GPUs and samples per pipeline per
//! iteration S), every micro-batch size B of the list that divides S gives N = S / B
//! micro-batches; every schedule that accepts (D, N) is simulated with and without
//! activation recomputation. A schedule that puts v stages on each GPU (interleaved 1F1B,
//! breadth-first, ZB-V, DualPipeV) runs on the same D GPUs with the chain cut into v D
//! stages (`experiments/interleaved.toml`), so that every approach at a D uses D GPUs.
//! "mixpipe" stands for the whole space of its eq. (5) (K = 2, 4, ..., D; Gamma = 0 ..
//! (D - K)/2) plus "K maximizing" when N > D.
//!
//! Costs at micro-batch size B: when the instance was made by `pipeopt instance` (its
//! `meta` names the model, the dtype and the device model, `times = "analytic"`), the same
//! network is rebuilt at B (`nets::instance`), after checking that the rebuild at the
//! file's own batch gives the file's layers exactly; so per-sample times fall as B grows
//! (fixed per-operation overheads: MixPipe's FLOPS(B), its Figure 2(a)). Other instances
//! are scaled linearly per sample (Zhang et al., DAC 2023, eq. (3)), which gives no
//! device-utilization effect. The stages are the balanced split
//! (`partition::bapipe::balanced_partition`) of the file's own batch, kept at every B.
//!
//! Recomputation (the paper's baselines use it when they would not fit): a stage keeps only
//! its input per live micro-batch and reruns its forward before its backward, so backward
//! time grows by the forward time; the peak adds one micro-batch's full stash of the largest
//! stage the worker holds (the rematerialised activations during a backward), an upper
//! bound since it is added at the checkpoints' peak.
//!
//! Outputs (each written atomically, through `sweep::table::write_tables`) in the
//! experiment's folder, `<output>/<name>/` (the header every experiment file shares,
//! `sweep::config::ExperimentHeader`; `results/<name>/` by default): `runs` (one row per
//! simulation), `best` (per case, D, S, memory budget and approach, the fitting run with
//! the highest throughput, with MixPipe's speedup over it) and, with `[optimum]`, `optimum`
//! (per configuration and placement, without a memory limit and, with `under_budgets`,
//! under each budget: the fastest schedule of the placement that fits against it), each
//! as Parquet, CSV and JSON, and the figures of `sweep::sync_figures`, which `pipeopt
//! sync-sweep` draws from the rows [`run`] returns. Shards follow `sweep::shard`: a shard
//! writes its journal and identity, and the run without one takes them in and writes the
//! tables (the best runs compare configurations, so a table needs them all).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::engine::{JobKind, RunContext, SweepOptions};
use super::shard::{take_in_shards, write_identity, ShardIdentity};
use super::table::{write_tables, TableFiles};
use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::milp::sync_schedule::{optimal_schedule, Formulation, SyncProblem};
use crate::milp::{MilpOptions, SolveStatus};
use crate::model::Instance;
use crate::nets::analytic::analytic_rebuild;
use crate::partition::bapipe::balanced_partition;
use crate::schedule::sync::hybrid::with_recompute;
use crate::schedule::sync::sim::{simulate, SimReport, StageCosts};
use crate::schedule::sync::{registry, OptimumTarget, Schedule, ScheduleKind};

#[path = "sync_config.rs"]
mod experiment;
pub use experiment::{Case, OptimumSettings, RawMemoryFigure, SyncExperiment};

/// One simulation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncRow {
    pub instance: String,
    pub study: String,
    /// Pipeline depth D (GPUs per pipeline).
    pub stages: usize,
    /// The stages the chain is cut into: D, or v D for a schedule with v stages per GPU
    /// (interleaved, V-shaped); 0 in rows of journals written before the column.
    #[serde(default)]
    pub model_stages: usize,
    /// Samples per pipeline per iteration, S = N x B.
    pub samples: usize,
    /// W x S when the case gives the cluster's GPUs P (W = P / D pipelines).
    pub mini_batch: Option<usize>,
    pub micro_batch_size: usize,
    pub micro_batches: usize,
    pub recompute: bool,
    /// An approach of the schedule registry: gpipe, dapple, gems, chimera, mixpipe,
    /// 1f1b-sno, 1f1b-so, zb-h1, zb-h2, and those with several stages per GPU (zb-v,
    /// interleaved-2, interleaved-4, breadth-first-2, breadth-first-4, dualpipe-v).
    pub approach: String,
    /// The schedule with its parameters, e.g. mixpipe(K=4,Gamma=1), mixpipe-kmax.
    pub schedule: String,
    pub k: Option<usize>,
    pub gamma: Option<usize>,
    /// Where the costs at this B come from: "analytic" (the network rebuilt at B) or
    /// "linear" (scaled per sample).
    pub costs_from: String,
    pub makespan_seconds: f64,
    pub bubble_ratio: f64,
    /// The papers' closed form for this schedule, where they give one (nominal backward =
    /// 2 x forward, equal stages): (D-1)/(N+D-1) for GPipe, DAPPLE and 1F1B-SNO; Table I for
    /// Chimera and GEMS at N = D; eq. (1)'s N_bubbles / (D + N_bubbles) for MixPipe at
    /// N = D; (D/2-1)/(N+D/2-1) for K maximizing (section III-C).
    pub paper_bubble_ratio: Option<f64>,
    pub samples_per_second: f64,
    pub samples_per_second_per_gpu: f64,
    pub peak_memory_max: f64,
    pub peak_memory_min: f64,
    /// Per worker, bytes.
    pub peak_memory: Vec<f64>,
    /// Per worker, the most micro-batches live at once.
    pub peak_live: Vec<usize>,
    /// The placement whose exact optimum this run is compared with (one-direction for
    /// GPipe, DAPPLE and BaPipe's; bidirectional for GEMS, Chimera and MixPipe;
    /// one-direction+split, the backward split into input and weight gradients, for ZB-H1
    /// and ZB-H2); null when the experiment computes none for this configuration.
    pub optimum_placement: Option<String>,
    /// The MILP's status on this configuration: optimal, limit_with_incumbent, ...
    pub optimum_status: Option<String>,
    /// The minimum iteration time over every operation order on that placement (no memory
    /// limit) when proven (`optimum_status` optimal), else the MILP's proven lower bound.
    pub optimum_seconds: Option<f64>,
    /// makespan_seconds / optimum_seconds (>= 1; an upper bound on the true ratio when the
    /// optimum is only bounded).
    pub ratio_to_optimum: Option<f64>,
    /// The bubble ratio an iteration of optimum_seconds would have (same work).
    pub optimum_bubble_ratio: Option<f64>,
}

/// The exact optimum of one configuration (instance, D, B, N, recomputation) on one
/// placement, computed once and shared by every schedule of that placement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OptimumRow {
    pub instance: String,
    /// D, GPUs per pipeline.
    pub stages: usize,
    /// The stages of the placement (see [`SyncRow::model_stages`]).
    #[serde(default)]
    pub model_stages: usize,
    pub micro_batch_size: usize,
    pub micro_batches: usize,
    pub recompute: bool,
    /// one-direction, bidirectional, or one of them with `+split` (the backward split into
    /// input and weight gradients).
    pub placement: String,
    /// The memory budget per worker the orders are held to (bytes; the simulator's peak at
    /// most this); null: no limit.
    pub memory_budget: Option<f64>,
    /// optimal, limit_with_incumbent, no_solution_within_limit, or "error: ...".
    pub status: String,
    /// The simulated makespan of the MILP's best streams.
    pub best_seconds: Option<f64>,
    /// The largest per-worker peak of those streams (bytes).
    pub peak_memory_max: Option<f64>,
    /// HiGHS's proven lower bound.
    pub lower_bound_seconds: Option<f64>,
    /// (best - bound) / best.
    pub gap: Option<f64>,
    /// What the schedules are compared with: best_seconds when proven optimal, else the
    /// lower bound.
    pub optimum_seconds: Option<f64>,
    /// The bubble ratio at optimum_seconds.
    pub optimum_bubble_ratio: Option<f64>,
    /// The schedule HiGHS started from (the best simulated one of the placement).
    pub start: Option<String>,
    pub formulation: Option<String>,
    pub solve_seconds: f64,
    /// The fastest schedule of the sweep measured against this placement that fits the
    /// budget (any, without one), its iteration time, and that time over optimum_seconds.
    pub fastest_schedule: Option<String>,
    pub fastest_schedule_seconds: Option<f64>,
    pub fastest_ratio_to_optimum: Option<f64>,
}

/// The best fitting run of one approach on one case point and budget.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BestRow {
    pub instance: String,
    pub study: String,
    pub stages: usize,
    pub samples: usize,
    pub mini_batch: Option<usize>,
    pub memory_budget: f64,
    pub approach: String,
    /// Null when nothing of this approach fits.
    pub schedule: Option<String>,
    pub micro_batch_size: Option<usize>,
    pub micro_batches: Option<usize>,
    pub recompute: Option<bool>,
    pub samples_per_second_per_gpu: Option<f64>,
    pub bubble_ratio: Option<f64>,
    pub peak_memory_max: Option<f64>,
    /// MixPipe's best throughput divided by this approach's.
    pub mixpipe_speedup: Option<f64>,
    /// The chosen run's iteration time over its configuration's optimum (see SyncRow).
    pub ratio_to_optimum: Option<f64>,
    pub optimum_status: Option<String>,
    /// The optimum of the chosen run's configuration and placement under this memory
    /// budget (`[optimum] under_budgets`): proven, else HiGHS's lower bound; null where not
    /// computed (recomputation, whose rematerialized stash the MILP does not count) or when
    /// nothing of the approach fits.
    pub optimum_under_budget_seconds: Option<f64>,
    pub optimum_under_budget_status: Option<String>,
    /// The chosen run's iteration time over that optimum (>= 1).
    pub ratio_to_optimum_under_budget: Option<f64>,
}

/// What a synchronous sweep did: the common summary with its own part.
pub type SyncOutcome = super::engine::SweepSummary<SyncDetails>;

/// The synchronous part of a [`SyncOutcome`].
#[derive(Debug, Clone, Serialize)]
pub struct SyncDetails {
    /// Simulations (rows of `runs`).
    pub runs: usize,
    /// (configuration, placement) pairs solved by the optimum MILP.
    pub optimum_solves: usize,
    /// How many of them were proven optimal.
    pub optimum_proven: usize,
    /// (approach, D, N) shapes its schedules refused, counted per use.
    pub skipped_shapes: usize,
    /// The rows written, for the figures (`sweep::sync_figures::write_figures`); empty for a
    /// shard, which writes no table.
    #[serde(skip)]
    pub rows: Vec<SyncRow>,
    #[serde(skip)]
    pub best: Vec<BestRow>,
    #[serde(skip)]
    pub optimum: Vec<OptimumRow>,
}

/// One configuration and placement to solve.
struct OptimumJob {
    instance: String,
    d: usize,
    model_stages: usize,
    b: usize,
    n: usize,
    recompute: bool,
    target: OptimumTarget,
    /// The budget per worker the orders are held to; none: no limit.
    memory: Option<f64>,
    /// A lower bound known before the solve (under a budget, the optimum without one).
    known_bound: Option<f64>,
    /// The generated schedules of that placement at (D, N): HiGHS's starts.
    proposals: Vec<(String, Schedule)>,
}

fn solve_optimum(job: &OptimumJob, costs: &StageCosts, settings: &OptimumSettings) -> OptimumRow {
    let options = MilpOptions {
        time_limit: Some(std::time::Duration::from_secs_f64(
            settings.time_limit_seconds,
        )),
        ..MilpOptions::default()
    };
    let problem = SyncProblem {
        costs,
        placement: job.target.placement,
        micro_batches: job.n,
        memory: job.memory,
        live_cap: None,
        formulation: Formulation::Auto,
        split_backward: job.target.split_backward,
    };
    let t0 = std::time::Instant::now();
    let mut row = OptimumRow {
        instance: job.instance.clone(),
        stages: job.d,
        model_stages: job.model_stages,
        micro_batch_size: job.b,
        micro_batches: job.n,
        recompute: job.recompute,
        placement: job.target.name(),
        memory_budget: job.memory,
        status: String::new(),
        best_seconds: None,
        peak_memory_max: None,
        lower_bound_seconds: None,
        gap: None,
        optimum_seconds: None,
        optimum_bubble_ratio: None,
        start: None,
        formulation: None,
        solve_seconds: 0.0,
        fastest_schedule: None,
        fastest_schedule_seconds: None,
        fastest_ratio_to_optimum: None,
    };
    match optimal_schedule(&problem, &job.proposals, &options) {
        Err(e) => row.status = format!("error: {e}"),
        Ok(o) => {
            let mut status = o.status;
            row.best_seconds = o.makespan;
            row.lower_bound_seconds = Some(o.lower_bound).filter(|x| x.is_finite());
            row.gap = Some(o.gap).filter(|x| x.is_finite());
            // The known bound holds too where HiGHS left the question open; streams that
            // meet it are optimal.
            let open = matches!(
                status,
                SolveStatus::LimitWithIncumbent | SolveStatus::NoSolutionWithinLimit
            );
            if let (Some(known), true) = (job.known_bound, open) {
                let bound = row.lower_bound_seconds.map_or(known, |b| b.max(known));
                row.lower_bound_seconds = Some(bound);
                if let Some(best) = o.makespan {
                    row.gap = Some(((best - bound) / best).max(0.0));
                    if best <= bound * (1.0 + 1e-9) {
                        status = SolveStatus::Optimal;
                    }
                }
            }
            row.status = serde_json::to_value(status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            row.optimum_seconds = if status == SolveStatus::Optimal {
                o.makespan
            } else {
                row.lower_bound_seconds.filter(|x| *x > 0.0)
            };
            if let Some(r) = &o.report {
                row.peak_memory_max = r.memory.iter().map(|m| m.peak_bytes).reduce(f64::max);
                if let Some(opt) = row.optimum_seconds {
                    let busy = (1.0 - r.bubble_ratio) * r.makespan_seconds;
                    row.optimum_bubble_ratio = Some((1.0 - busy / opt).max(0.0));
                }
            }
            row.start = o.start;
            row.formulation = o.formulation.map(|f| {
                serde_json::to_value(f)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
        }
    }
    row.solve_seconds = t0.elapsed().as_secs_f64();
    row
}

/// A point of a case that uses a configuration: its study, S and mini-batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Use {
    pub study: String,
    pub samples: usize,
    pub mini_batch: Option<usize>,
}

/// One configuration of the grid, a job of the sweep engine: an instance cut into D
/// balanced stages, N micro-batches of B samples, with or without recomputation; every
/// schedule of every approach simulated on it (a row per use of the configuration by a
/// case), and its optimum per placement when the experiment asks. Self-contained, so that
/// a child process (`pipeopt sweep-job`) needs nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncJob {
    pub key: String,
    pub instance_path: PathBuf,
    /// D, GPUs per pipeline.
    pub stages: usize,
    /// The stages each GPU holds (its approaches': 1, or v for interleaved and V-shaped
    /// schedules): the chain is cut into `stages x stages_per_worker` stages.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub stages_per_worker: usize,
    pub micro_batch_size: usize,
    pub micro_batches: usize,
    pub recompute: bool,
    /// Bytes per second of the links; none: transfers are free.
    pub bandwidth: Option<f64>,
    pub approaches: Vec<String>,
    pub uses: Vec<Use>,
    pub optimum: Option<OptimumSettings>,
    /// The budgets the optimum is also solved under (`[optimum] under_budgets`, the
    /// experiment's `memory`); empty otherwise, and with recomputation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optimum_budgets: Vec<f64>,
}

fn one() -> usize {
    1
}

fn is_one(v: &usize) -> bool {
    *v == 1
}

impl SyncJob {
    /// The stages the chain is cut into.
    pub fn model_stages(&self) -> usize {
        self.stages * self.stages_per_worker
    }
}

/// What one configuration gave: its simulations (rows without their optimum columns when
/// none was asked), its optimum per placement, the (approach, D, N) shapes its schedules
/// refused (counted per use), or the error that stopped it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncRecord {
    pub key: String,
    pub rows: Vec<SyncRow>,
    pub optimum: Vec<OptimumRow>,
    pub skipped: usize,
    pub error: Option<String>,
    pub wall_seconds: f64,
}

/// The synchronous schedules' jobs.
pub struct Synchronous;

impl JobKind for Synchronous {
    type Job = SyncJob;
    type Record = SyncRecord;
    const TAG: &'static str = "synchronous";
    fn job_key(job: &SyncJob) -> &str {
        &job.key
    }
    fn record_key(record: &SyncRecord) -> &str {
        &record.key
    }
    fn is_error(record: &SyncRecord) -> bool {
        record.error.is_some()
    }
    fn read_record(value: serde_json::Value) -> Result<SyncRecord, serde_json::Error> {
        serde_json::from_value(value)
    }
    fn run(job: &SyncJob, ctx: &RunContext) -> SyncRecord {
        let started = std::time::Instant::now();
        let mut record = match run_configuration(job) {
            Ok(r) => r,
            Err(e) => Self::failed(job, ctx, e.to_string(), 0.0),
        };
        record.wall_seconds = started.elapsed().as_secs_f64();
        record
    }
    fn failed(job: &SyncJob, _ctx: &RunContext, message: String, wall: f64) -> SyncRecord {
        SyncRecord {
            key: job.key.clone(),
            rows: Vec::new(),
            optimum: Vec::new(),
            skipped: 0,
            error: Some(message),
            wall_seconds: wall,
        }
    }
    fn set_wall(record: &mut SyncRecord, wall: f64) {
        record.wall_seconds = wall;
    }
    fn error_message(record: &SyncRecord) -> Option<String> {
        record.error.clone()
    }
    fn describe(record: &SyncRecord) -> String {
        match (&record.error, record.rows.first()) {
            (Some(e), _) => format!("error: {e}"),
            (None, Some(r)) => format!(
                "{} D={} B={} N={}{}",
                r.instance,
                r.stages,
                r.micro_batch_size,
                r.micro_batches,
                if r.recompute { " recompute" } else { "" }
            ),
            (None, None) => "no schedule".into(),
        }
    }
}

/// The configurations of the grid, in a stable order, with keys that change with anything
/// that changes their records (the instance's content, the settings).
pub fn jobs(exp: &SyncExperiment) -> Result<Vec<SyncJob>, InputError> {
    // A configuration per stages per worker of the approaches (one, and v for interleaved
    // and V-shaped schedules): the chain is cut into v D stages for those.
    let per_worker = |s: &String| registry::approach(s).map_or(1, |a| a.stages_per_worker);
    let mut stages_per_worker: Vec<usize> = exp.schedules.iter().map(per_worker).collect();
    stages_per_worker.sort_unstable();
    stages_per_worker.dedup();
    type Config = (PathBuf, usize, usize, usize, bool, usize);
    let mut order: Vec<Config> = Vec::new();
    let mut uses: HashMap<Config, Vec<Use>> = HashMap::new();
    let mut hashes: HashMap<PathBuf, String> = HashMap::new();
    for case in &exp.cases {
        let inst = Instance::load(&case.instance)?;
        hashes.insert(case.instance.clone(), inst.content_hash());
        for (d, s) in case.points() {
            if d > inst.len() {
                return Err(InputError::new(
                    case.instance.display().to_string(),
                    "",
                    format!("D = {d} stages but only {} layers", inst.len()),
                ));
            }
            for &b in &exp.micro_batch_sizes {
                if s % b != 0 {
                    continue;
                }
                let n = s / b;
                if case.n_equals_d && n != d {
                    continue;
                }
                for (&recompute, &v) in exp
                    .recompute
                    .iter()
                    .flat_map(|r| stages_per_worker.iter().map(move |v| (r, v)))
                {
                    let config = (case.instance.clone(), d, b, n, recompute, v);
                    let entry = uses.entry(config.clone()).or_insert_with(|| {
                        order.push(config);
                        Vec::new()
                    });
                    let u = Use {
                        study: case.study.clone(),
                        samples: s,
                        mini_batch: case.gpus.map(|p| p / d * s),
                    };
                    if !entry.contains(&u) {
                        entry.push(u);
                    }
                }
            }
        }
    }
    let bandwidth = Some(exp.bandwidth).filter(|b| b.is_finite());
    Ok(order
        .into_iter()
        .map(|config| {
            let (path, d, b, n, recompute, v) = config.clone();
            let uses = uses.remove(&config).unwrap_or_default();
            let optimum_budgets = match exp.optimum {
                Some(o) if o.under_budgets && !recompute => exp.memory.clone(),
                _ => Vec::new(),
            };
            let mut id = serde_json::json!([
                hashes[&path],
                d,
                b,
                n,
                recompute,
                bandwidth,
                exp.schedules,
                uses,
                exp.optimum
            ]);
            if !optimum_budgets.is_empty() {
                id.as_array_mut()
                    .expect("an array")
                    .push(serde_json::json!(optimum_budgets));
            }
            if v > 1 {
                id.as_array_mut()
                    .expect("an array")
                    .push(serde_json::json!({ "stages_per_worker": v }));
            }
            let key = super::engine::key_of(&id);
            SyncJob {
                key,
                instance_path: path,
                stages: d,
                stages_per_worker: v,
                micro_batch_size: b,
                micro_batches: n,
                recompute,
                bandwidth,
                approaches: exp
                    .schedules
                    .iter()
                    .filter(|s| per_worker(s) == v)
                    .cloned()
                    .collect(),
                uses,
                optimum: exp.optimum,
                optimum_budgets,
            }
        })
        .collect())
}

/// A schedule generated for a configuration: its name, its kind and its streams (`None`
/// when the kind has none at this D and N).
type Generated = (String, ScheduleKind, Option<Schedule>);

/// Simulates every schedule of one configuration, then solves its optimum per placement.
fn run_configuration(job: &SyncJob) -> Result<SyncRecord, InputError> {
    let (d, n) = (job.model_stages(), job.micro_batches);
    let inst = Instance::load(&job.instance_path)?;
    let mut rows = Vec::new();
    let mut skipped = 0;
    if d > inst.len() {
        // v D stages of a chain shorter than that: no schedule of these approaches.
        let kinds: usize = job
            .approaches
            .iter()
            .map(|a| approach_kinds(a, d, n).len())
            .sum();
        return Ok(SyncRecord {
            key: job.key.clone(),
            rows,
            optimum: Vec::new(),
            skipped: kinds * job.uses.len(),
            error: None,
            wall_seconds: 0.0,
        });
    }
    let (costs, transient, from) = configuration_costs(job, &inst)?;
    // The generated schedules of this (D, N), by name, in the order first met.
    let mut generated: Vec<Generated> = Vec::new();
    for approach in &job.approaches {
        for kind in approach_kinds(approach, d, n) {
            let name = kind.name();
            let at = match generated.iter().position(|(g, _, _)| *g == name) {
                Some(at) => at,
                None => {
                    generated.push((name.clone(), kind, kind.generate(d, n).ok()));
                    generated.len() - 1
                }
            };
            let schedule = generated[at].2.as_ref();
            let simulated =
                schedule.and_then(|s| Some((s, simulate(s, &costs, kind.execution()).ok()?)));
            let Some((schedule, r)) = simulated else {
                skipped += job.uses.len();
                continue;
            };
            let run = Run {
                approach,
                kind,
                name: &name,
                costs_from: from,
            };
            rows.extend(run.rows(job, &inst, schedule, &r, &transient));
        }
    }
    let optimum = match job.optimum.filter(|o| n <= o.max_micro_batches) {
        Some(settings) => optimum_rows(job, &inst, &generated, &costs, &settings, &mut rows),
        None => Vec::new(),
    };
    Ok(SyncRecord {
        key: job.key.clone(),
        rows,
        optimum,
        skipped,
        error: None,
        wall_seconds: 0.0,
    })
}

/// A configuration's stage costs (at its micro-batch size: the network rebuilt there, else
/// scaled linearly from the file's own batch; with recomputation's when it recomputes), the
/// stash each stage rematerializes per worker (recomputation's, else none), and where the
/// costs came from (`analytic` or `linear`).
fn configuration_costs(
    job: &SyncJob,
    inst: &Instance,
) -> Result<(StageCosts, Vec<f64>, &'static str), InputError> {
    let (d, b) = (job.model_stages(), job.micro_batch_size);
    let path = &job.instance_path;
    let bandwidth = job.bandwidth.unwrap_or(f64::INFINITY);
    let own_batch = inst
        .meta
        .get("batch")
        .and_then(|v| v.as_f64())
        .filter(|b| *b > 0.0)
        .unwrap_or(1.0);
    let starts = balanced_partition(inst, d).map_err(|e| InputError::file(path, e))?;
    let costs_of = |inst: &Instance| {
        StageCosts::from_instance(inst, &starts, bandwidth).map_err(|e| InputError::file(path, e))
    };
    let (plain, from) = match analytic_rebuild(inst, path, b)? {
        Some(at_b) => (costs_of(&at_b)?, "analytic"),
        None => (
            crate::schedule::sync::costs::scaled_by(&costs_of(inst)?, b as f64 / own_batch),
            "linear",
        ),
    };
    Ok(if job.recompute {
        (with_recompute(&plain), plain.stash_bytes.clone(), from)
    } else {
        (plain.clone(), vec![0.0; d], from)
    })
}

/// One schedule of an approach, simulated on a configuration.
struct Run<'a> {
    approach: &'a String,
    kind: ScheduleKind,
    name: &'a String,
    costs_from: &'static str,
}

impl Run<'_> {
    /// The run's row for each use of the configuration: `r` is its simulation, `transient`
    /// the stash a worker rematerializes per stage.
    fn rows(
        &self,
        job: &SyncJob,
        inst: &Instance,
        schedule: &Schedule,
        r: &SimReport,
        transient: &[f64],
    ) -> Vec<SyncRow> {
        let (d, m, b, n) = (
            job.stages,
            job.model_stages(),
            job.micro_batch_size,
            job.micro_batches,
        );
        let peaks: Vec<f64> = (0..schedule.len())
            .map(|w| {
                let extra = schedule[w]
                    .iter()
                    .map(|op| transient[op.stage()])
                    .fold(0.0, f64::max);
                r.memory[w].peak_bytes + extra
            })
            .collect();
        let (k, gamma) = (self.kind.schedule.k_gamma_columns)(m, self.kind.params);
        job.uses
            .iter()
            .map(|u| {
                let sps = u.samples as f64 / r.makespan_seconds;
                SyncRow {
                    instance: inst.name.clone(),
                    study: u.study.clone(),
                    stages: d,
                    model_stages: m,
                    samples: u.samples,
                    mini_batch: u.mini_batch,
                    micro_batch_size: b,
                    micro_batches: n,
                    recompute: job.recompute,
                    approach: self.approach.clone(),
                    schedule: self.name.clone(),
                    k,
                    gamma,
                    costs_from: self.costs_from.to_string(),
                    makespan_seconds: r.makespan_seconds,
                    bubble_ratio: r.bubble_ratio,
                    paper_bubble_ratio: self.kind.paper_bubble_ratio(m, n),
                    samples_per_second: sps,
                    samples_per_second_per_gpu: sps / d as f64,
                    peak_memory_max: peaks.iter().cloned().fold(0.0, f64::max),
                    peak_memory_min: peaks.iter().cloned().fold(f64::INFINITY, f64::min),
                    peak_memory: peaks.clone(),
                    peak_live: r.memory.iter().map(|m| m.peak_live).collect(),
                    optimum_placement: None,
                    optimum_status: None,
                    optimum_seconds: None,
                    ratio_to_optimum: None,
                    optimum_bubble_ratio: None,
                }
            })
            .collect()
    }
}

/// The optimum of a configuration, once per placement, started from that placement's
/// generated schedules; each row of `rows` gets its placement's optimum and its ratio to it.
fn optimum_rows(
    job: &SyncJob,
    inst: &Instance,
    generated: &[Generated],
    costs: &StageCosts,
    settings: &OptimumSettings,
    rows: &mut [SyncRow],
) -> Vec<OptimumRow> {
    let mut by_placement: BTreeMap<String, OptimumJob> = BTreeMap::new();
    for (name, kind, schedule) in generated {
        let (Some(target), Some(schedule)) = (kind.optimum_target(), schedule) else {
            continue;
        };
        by_placement
            .entry(target.name())
            .or_insert_with(|| OptimumJob {
                instance: inst.name.clone(),
                d: job.stages,
                model_stages: job.model_stages(),
                b: job.micro_batch_size,
                n: job.micro_batches,
                recompute: job.recompute,
                target,
                memory: None,
                known_bound: None,
                proposals: Vec::new(),
            })
            .proposals
            .push((name.clone(), schedule.clone()));
    }
    // The split backward's optimum also starts from the whole-backward schedules of its
    // placement (the MILP splits them): it is at most theirs.
    let whole: BTreeMap<String, Vec<(String, Schedule)>> = by_placement
        .iter()
        .filter(|(_, o)| !o.target.split_backward)
        .map(|(k, o)| (k.clone(), o.proposals.clone()))
        .collect();
    for o in by_placement
        .values_mut()
        .filter(|o| o.target.split_backward)
    {
        if let Some(more) = whole.get(&o.target.whole().name()) {
            o.proposals.extend(more.iter().cloned());
        }
    }
    let mut optimum = Vec::new();
    for o in by_placement.values() {
        let free = solve_optimum(o, costs, settings);
        log_optimum(&free);
        for &budget in &job.optimum_budgets {
            let row = optimum_under_budget(o, &free, budget, costs, settings);
            log_optimum(&row);
            optimum.push(row);
        }
        optimum.push(free);
    }
    for r in rows.iter_mut() {
        // The row's schedule was generated above, under its name.
        let kind = generated
            .iter()
            .find(|(g, _, _)| *g == r.schedule)
            .map(|g| g.1);
        let Some(target) = kind.and_then(ScheduleKind::optimum_target) else {
            continue;
        };
        let Some(o) = optimum
            .iter()
            .find(|o| o.placement == target.name() && o.memory_budget.is_none())
        else {
            continue;
        };
        r.optimum_placement = Some(o.placement.clone());
        r.optimum_status = Some(o.status.clone());
        r.optimum_seconds = o.optimum_seconds;
        if let Some(opt) = o.optimum_seconds {
            r.ratio_to_optimum = Some(r.makespan_seconds / opt);
            let busy = (1.0 - r.bubble_ratio) * r.makespan_seconds;
            r.optimum_bubble_ratio = Some((1.0 - busy / opt).max(0.0));
        }
    }
    for o in &mut optimum {
        let fastest = rows
            .iter()
            .filter(|r| r.optimum_placement.as_ref() == Some(&o.placement))
            .filter(|r| o.memory_budget.is_none_or(|m| r.peak_memory_max <= m))
            .min_by(|a, b| a.makespan_seconds.total_cmp(&b.makespan_seconds));
        if let Some(r) = fastest {
            o.fastest_schedule = Some(r.schedule.clone());
            o.fastest_schedule_seconds = Some(r.makespan_seconds);
            o.fastest_ratio_to_optimum = o.optimum_seconds.map(|t| r.makespan_seconds / t);
        }
    }
    optimum
}

/// The optimum of `job`'s placement under `budget`. Where the optimum without a limit
/// (`free`) is proven and its streams fit the budget, it is this one too (a limit only
/// removes orders); otherwise the MILP solves it with the budget, from the placement's
/// schedules (those that fit start it), the free optimum's bound its bound too.
fn optimum_under_budget(
    job: &OptimumJob,
    free: &OptimumRow,
    budget: f64,
    costs: &StageCosts,
    settings: &OptimumSettings,
) -> OptimumRow {
    let fits = free.peak_memory_max.is_some_and(|p| p <= budget);
    if free.status == "optimal" && fits {
        return OptimumRow {
            memory_budget: Some(budget),
            start: Some("the optimum without a limit, which fits".into()),
            solve_seconds: 0.0,
            ..free.clone()
        };
    }
    // A limit only removes orders: what bounds the optimum without one bounds this one.
    let known_bound = if free.status == "optimal" {
        free.best_seconds
    } else {
        free.lower_bound_seconds
    };
    let limited = OptimumJob {
        memory: Some(budget),
        known_bound,
        proposals: job.proposals.clone(),
        instance: job.instance.clone(),
        ..*job
    };
    solve_optimum(&limited, costs, settings)
}

fn log_optimum(row: &OptimumRow) {
    let budget = row.memory_budget.map_or(String::new(), |m| {
        format!(" under {:.1} GiB", m / 1024f64.powi(3))
    });
    let cut = if row.model_stages > row.stages {
        format!(" ({} stages)", row.model_stages)
    } else {
        String::new()
    };
    eprintln!(
        "optimum: {} D={}{cut} N={} B={}{} {}{budget}: {} in {:.1} s",
        row.instance,
        row.stages,
        row.micro_batches,
        row.micro_batch_size,
        if row.recompute { " recompute" } else { "" },
        row.placement,
        row.status,
        row.solve_seconds
    );
}

/// The rows of every record, in the tables' order.
fn sorted_rows(records: &[SyncRecord]) -> Vec<SyncRow> {
    let mut out: Vec<SyncRow> = records
        .iter()
        .flat_map(|r| r.rows.iter().cloned())
        .collect();
    out.sort_by(|a, b| {
        (
            &a.instance,
            &a.study,
            a.stages,
            a.samples,
            &a.approach,
            a.micro_batch_size,
        )
            .cmp(&(
                &b.instance,
                &b.study,
                b.stages,
                b.samples,
                &b.approach,
                b.micro_batch_size,
            ))
            .then(a.recompute.cmp(&b.recompute))
            .then(a.schedule.cmp(&b.schedule))
    });
    out
}

/// The optimum of every record, in the tables' order.
fn sorted_optimum(records: &[SyncRecord]) -> Vec<OptimumRow> {
    let mut out: Vec<OptimumRow> = records
        .iter()
        .flat_map(|r| r.optimum.iter().cloned())
        .collect();
    out.sort_by(|a, b| {
        (
            &a.instance,
            a.stages,
            a.micro_batch_size,
            a.micro_batches,
            a.recompute,
            &a.placement,
        )
            .cmp(&(
                &b.instance,
                b.stages,
                b.micro_batch_size,
                b.micro_batches,
                b.recompute,
                &b.placement,
            ))
            .then(match (a.memory_budget, b.memory_budget) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            })
    });
    out
}

/// The schedules the approach `approach` (checked when the file loads) stands for at (D, N).
fn approach_kinds(approach: &str, d: usize, n: usize) -> Vec<ScheduleKind> {
    registry::approach(approach).map_or_else(Vec::new, |a| a.kinds(d, n))
}

/// Per (instance, study, D, S, budget, approach): the fitting run with the highest
/// throughput (ties: the smaller peak), and MixPipe's speedup over it.
pub fn best_rows(
    rows: &[SyncRow],
    optimum: &[OptimumRow],
    budgets: &[f64],
    approaches: &[String],
) -> Vec<BestRow> {
    let mut points: BTreeMap<(String, String, usize, usize), Option<usize>> = BTreeMap::new();
    for r in rows {
        points.insert(
            (r.instance.clone(), r.study.clone(), r.stages, r.samples),
            r.mini_batch,
        );
    }
    let mut out = Vec::new();
    for ((inst, study, d, s), mini) in &points {
        for &budget in budgets {
            let best_of = |approach: &str| {
                rows.iter()
                    .filter(|r| {
                        &r.instance == inst
                            && &r.study == study
                            && r.stages == *d
                            && r.samples == *s
                            && r.approach == approach
                            && r.peak_memory_max <= budget
                    })
                    .max_by(|a, b| {
                        a.samples_per_second
                            .total_cmp(&b.samples_per_second)
                            .then(b.peak_memory_max.total_cmp(&a.peak_memory_max))
                    })
            };
            let mix = best_of("mixpipe").map(|r| r.samples_per_second_per_gpu);
            for approach in approaches {
                let b = best_of(approach);
                let limited = b.and_then(|r| optimum_under(optimum, r, budget));
                out.push(BestRow {
                    instance: inst.clone(),
                    study: study.clone(),
                    stages: *d,
                    samples: *s,
                    mini_batch: *mini,
                    memory_budget: budget,
                    approach: approach.clone(),
                    schedule: b.map(|r| r.schedule.clone()),
                    micro_batch_size: b.map(|r| r.micro_batch_size),
                    micro_batches: b.map(|r| r.micro_batches),
                    recompute: b.map(|r| r.recompute),
                    samples_per_second_per_gpu: b.map(|r| r.samples_per_second_per_gpu),
                    bubble_ratio: b.map(|r| r.bubble_ratio),
                    peak_memory_max: b.map(|r| r.peak_memory_max),
                    mixpipe_speedup: match (mix, b) {
                        (Some(m), Some(r)) => Some(m / r.samples_per_second_per_gpu),
                        _ => None,
                    },
                    ratio_to_optimum: b.and_then(|r| r.ratio_to_optimum),
                    optimum_status: b.and_then(|r| r.optimum_status.clone()),
                    optimum_under_budget_seconds: limited.and_then(|o| o.optimum_seconds),
                    optimum_under_budget_status: limited.map(|o| o.status.clone()),
                    ratio_to_optimum_under_budget: match (b, limited) {
                        (Some(r), Some(o)) => o.optimum_seconds.map(|t| r.makespan_seconds / t),
                        _ => None,
                    },
                })
            }
        }
    }
    out
}

/// The optimum under `budget` of the configuration and placement that `run` is measured
/// against, where the sweep solved one.
fn optimum_under<'a>(
    optimum: &'a [OptimumRow],
    run: &SyncRow,
    budget: f64,
) -> Option<&'a OptimumRow> {
    let placement = run.optimum_placement.as_ref()?;
    optimum.iter().find(|o| {
        &o.placement == placement
            && o.memory_budget == Some(budget)
            && o.instance == run.instance
            && o.stages == run.stages
            && o.micro_batch_size == run.micro_batch_size
            && o.micro_batches == run.micro_batches
            && o.recompute == run.recompute
    })
}

/// Runs (the rest of) the experiment on the sweep engine, one job per configuration
/// ([`SyncJob`]), its journal at `out_dir/journal.jsonl`, and writes its tables into
/// `out_dir` (Parquet, CSV and JSON; the caller draws the figures from the rows returned:
/// `sweep::sync_figures`). A shard (`sweep::shard`) runs into its own journal and records
/// its identity beside it; the run without a shard takes the shards in first.
pub fn run(
    exp: &SyncExperiment,
    out_dir: &Path,
    opts: &SweepOptions,
) -> Result<SyncOutcome, crate::Error> {
    let t0 = std::time::Instant::now();
    let header = &exp.header;
    let mut all = jobs(exp)?;
    if let Some(shard) = opts.shard {
        all = shard.of(all);
    }
    let ctx = RunContext {
        experiment: header.name.clone(),
        config_hash: header.config_hash.clone(),
        git_revision: super::run::git_revision(),
    };
    let mut files = Vec::new();
    let journal = match opts.shard {
        Some(s) => {
            files.push(write_identity(
                out_dir,
                &ShardIdentity::of(header, Some(s)),
            )?);
            out_dir.join(s.journal_name())
        }
        None => {
            take_in_shards::<Synchronous>(out_dir, header)?;
            out_dir.join("journal.jsonl")
        }
    };
    let done = super::engine::execute::<Synchronous>(
        &all,
        &journal,
        &ctx,
        &opts.engine(header.workers, header.timeout(), &header.name),
    )?;
    let summary = |files: Vec<PathBuf>, details: SyncDetails| {
        SyncOutcome::new::<Synchronous>(
            &header.name,
            opts.shard,
            all.len(),
            &done,
            journal.clone(),
            files,
            details,
            t0,
        )
    };
    if opts.shard.is_some() {
        // A shard's records wait in its journal for the run that writes the tables.
        let optimum = done.records.iter().flat_map(|r| &r.optimum);
        let details = SyncDetails {
            runs: done.records.iter().map(|r| r.rows.len()).sum(),
            optimum_solves: optimum.clone().count(),
            optimum_proven: optimum.filter(|o| o.status == "optimal").count(),
            skipped_shapes: done.records.iter().map(|r| r.skipped).sum(),
            rows: Vec::new(),
            best: Vec::new(),
            optimum: Vec::new(),
        };
        return Ok(summary(files, details));
    }
    let rows = sorted_rows(&done.records);
    let optimum = sorted_optimum(&done.records);
    let skipped = done.records.iter().map(|r| r.skipped).sum();
    let best = best_rows(&rows, &optimum, &exp.memory, &exp.schedules);
    std::fs::create_dir_all(out_dir).map_err(|e| crate::Error::io(out_dir, e))?;
    let mut runs_files = TableFiles::in_dir(out_dir, "runs");
    runs_files.compact_json = true; // the largest table
    files.extend(write_tables(&rows, &runs_files)?);
    files.extend(write_tables(&best, &TableFiles::in_dir(out_dir, "best"))?);
    if exp.optimum.is_some() {
        files.extend(write_tables(
            &optimum,
            &TableFiles::in_dir(out_dir, "optimum"),
        )?);
    }
    let details = SyncDetails {
        runs: rows.len(),
        optimum_solves: optimum.len(),
        optimum_proven: optimum.iter().filter(|o| o.status == "optimal").count(),
        skipped_shapes: skipped,
        rows,
        best,
        optimum,
    };
    let outcome = summary(files, details);
    drop(done.journal); // the lock, once the tables are written
    Ok(outcome)
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
