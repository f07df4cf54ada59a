//! The synchronous side by request: a [`SyncRequest`] (what `pipeopt sync`'s flags say) is
//! resolved into stages (an explicit partition, the balanced split of `--stages`, or
//! BaPipe's intra-layer partition) and stage costs, then run in one of its modes (simulate a
//! registered schedule, MixPipe's search, BaPipe's exploration, the schedule-optimum MILP,
//! MixPipe's hybrid); the answer is a [`SyncReport`], a serde value the command prints as
//! JSON or as tables, and for `--out` a [`SyncFile`] that `validate` judges.

mod report;

pub use report::{
    ExploreReport, FileSchedule, HybridReport, OptimalFound, OptimalReport, SearchReport,
    SimSummary, SimulatedReport, SolverReport, SyncFile, SyncOutcome, SyncReport,
};

use std::path::{Path, PathBuf};

use crate::milp::sync_schedule::{
    optimal_schedule, Formulation, SyncOptimum, SyncProblem, MAX_MICRO_BATCHES as MAX_OPTIMAL,
};
use crate::milp::MilpOptions;
use crate::model::Instance;
use crate::nets::analytic::analytic_rebuild;
use crate::partition::bapipe::balanced_partition;
use crate::partition::bapipe_intra::{intra_layer_partition, IntraLayerPartition};
use crate::schedule::sync::bapipe::{explore, micro_batch_counts, Accelerator};
use crate::schedule::sync::costs::{interpolated, micro_batch_size};
use crate::schedule::sync::hybrid::{self, HybridInput};
use crate::schedule::sync::mixpipe::{self, BatchPoint, SearchInput, MIXPIPE};
use crate::schedule::sync::sim::{simulate, Execution, PartitionError, StageCosts};
use crate::schedule::sync::torch_csv;
use crate::schedule::sync::{registry, Placement};
use crate::{Error, InputError};

/// What `pipeopt sync` is asked: the instance, how to cut it, and what to run on the cut.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// The instance file (one micro-batch's costs; its `meta.batch` the micro-batch size).
    pub instance: PathBuf,
    /// D, cut for balanced forward + backward time (`--stages`).
    pub stages: Option<usize>,
    /// Stage starts, 0-based (`--partition`).
    pub partition: Option<Vec<usize>>,
    /// BaPipe's intra-layer partition of `stages` (`--intra-layer`).
    pub intra_layer: bool,
    /// N (`--micro-batches`, default D).
    pub micro_batches: Option<usize>,
    /// The schedule's name or alias (`--schedule`), `optimal`, or the hybrid's approach.
    pub schedule: String,
    /// MixPipe's K and Gamma (`--k`, `--gamma`).
    pub k: Option<usize>,
    pub gamma: usize,
    /// Link bandwidth for activation transfers (bytes/s; `None`: free transfers).
    pub bandwidth: Option<f64>,
    /// Device memory in bytes (`--memory`).
    pub memory: Option<f64>,
    /// Profiles of the same network at other micro-batch sizes (`--profile`).
    pub profiles: Vec<PathBuf>,
    /// Samples per mini-batch (`--mini-batch`: `--explore`'s and `--hybrid`'s).
    pub mini_batch: Option<usize>,
    /// Streams to simulate instead of a registered schedule's: a file in the format of
    /// PyTorch's pipeline runtime (`--import-torch`; `schedule::sync::torch_csv`).
    pub import_torch: Option<PathBuf>,
    pub mode: SyncMode,
}

/// What runs on the stages.
#[derive(Debug, Clone)]
pub enum SyncMode {
    /// Simulate the registered schedule `SyncRequest::schedule` names.
    Simulate,
    /// MixPipe's K, Gamma and micro-batch size (`--search`).
    Search,
    /// BaPipe's schedule and micro-batch count (`--explore`) on `gpu` or `fpga`.
    Explore { accelerator: String },
    /// The schedule-optimum MILP (`--schedule optimal`).
    Optimal(OptimalRequest),
    /// MixPipe's W x D choice (`--hybrid`).
    Hybrid(HybridRequest),
}

/// `--schedule optimal`'s flags.
#[derive(Debug, Clone)]
pub struct OptimalRequest {
    pub placement: Option<String>,
    /// Each backward as its input and weight gradients, ordered freely.
    pub split_backward: bool,
    pub max_live: Option<Vec<usize>>,
    pub time_limit: Option<f64>,
    pub formulation: String,
    pub threads: u32,
}

/// `--hybrid`'s flags.
#[derive(Debug, Clone)]
pub struct HybridRequest {
    pub gpus: Option<usize>,
    pub allreduce_bandwidth: Option<f64>,
    pub server_gpus: Option<usize>,
    pub inter_server_bandwidth: Option<f64>,
    pub micro_batch_sizes: Vec<usize>,
}

/// Progress of a long run (the hybrid's (D, micro-batch size) pairs), for a bar on stderr.
pub trait Progress: Sync {
    fn start(&self, _steps: u64) {}
    fn step(&self) {}
    fn finish(&self) {}
}

/// No progress shown.
impl Progress for () {}

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

fn bad(flag: &str, reason: impl Into<String>) -> Error {
    InputError::new(flag, "", reason).into()
}

/// A failure of a schedule or the simulator on streams the crate drew itself.
fn internal(e: impl std::fmt::Display) -> Error {
    Error::internal(e)
}

/// The stages of a request: the instance they cut (the intra-layer partition's chain of
/// pieces when asked), their starts and costs, and the costs at every micro-batch size
/// profiled.
pub struct Stages {
    pub instance: Instance,
    pub intra: Option<IntraLayerPartition>,
    pub starts: Vec<usize>,
    pub costs: StageCosts,
    /// (micro-batch size, costs): the instance's own first, then `--profile`'s.
    pub points: Vec<(f64, StageCosts)>,
}

impl SyncRequest {
    /// The flags' ranges and agreements that do not need the instance.
    fn check(&self) -> Result<(), Error> {
        if let (Some(p), Some(d)) = (&self.partition, self.stages) {
            if p.len() != d && !matches!(self.mode, SyncMode::Hybrid(_)) {
                return Err(bad(
                    "--partition",
                    format!(
                        "gives {} stage starts but --stages is {d}; give one start per stage \
                         (or only one of the two flags)",
                        p.len()
                    ),
                ));
            }
        }
        if self.mini_batch == Some(0) {
            return Err(bad("--mini-batch", "must be at least 1 sample"));
        }
        Ok(())
    }

    /// BaPipe's intra-layer partition of `instance` into `--stages` stages, if asked.
    fn intra_layer(&self, instance: &Instance) -> Result<Option<IntraLayerPartition>, Error> {
        if !self.intra_layer {
            return Ok(None);
        }
        if self.partition.is_some() || !self.profiles.is_empty() {
            return Err(bad(
                "--intra-layer",
                "computes its own partition: give --stages, not --partition or --profile",
            ));
        }
        let d = match self.stages {
            Some(d) if d >= 1 => d,
            _ => return Err(bad("--intra-layer", "needs --stages D (at least 1)")),
        };
        let part = intra_layer_partition(
            instance,
            &vec![1.0; d],
            self.bandwidth.unwrap_or(f64::INFINITY),
        )
        .map_err(|e| bad("--intra-layer", e.to_string()))?;
        Ok(Some(part))
    }

    /// The stages of `instance`: an explicit partition, the balanced split, or the
    /// intra-layer partition; with their costs and those of every profile.
    pub fn stages(&self, instance: Instance) -> Result<Stages, Error> {
        let intra = self.intra_layer(&instance)?;
        let instance = intra.as_ref().map_or(instance, |p| p.instance.clone());
        let starts = match (&self.partition, self.stages) {
            _ if intra.is_some() => intra.as_ref().map(|p| p.starts.clone()).unwrap_or_default(),
            (Some(p), _) => p.clone(),
            (None, Some(d)) if d >= 1 && d <= instance.len() => {
                balanced_partition(&instance, d).map_err(|e| bad("--stages", e.to_string()))?
            }
            (None, Some(d)) => {
                return Err(bad(
                    "--stages",
                    format!("must be between 1 and L = {} (got {d})", instance.len()),
                ))
            }
            (None, None) => return Err(bad("--stages", "give --stages or --partition")),
        };
        let bandwidth = self.bandwidth.unwrap_or(f64::INFINITY);
        let costs = StageCosts::from_instance(&instance, &starts, bandwidth)
            .map_err(|e| costs_error(e, "--partition"))?;
        let mut points = vec![(micro_batch_size(&instance), costs.clone())];
        for path in &self.profiles {
            let other = Instance::load(path)?;
            if other.len() != instance.len() {
                return Err(bad(
                    "--profile",
                    format!(
                        "{} has {} layers, not {}",
                        path.display(),
                        other.len(),
                        instance.len()
                    ),
                ));
            }
            let c = StageCosts::from_instance(&other, &starts, bandwidth)
                .map_err(|e| costs_error(e, "--profile"))?;
            points.push((micro_batch_size(&other), c));
        }
        Ok(Stages {
            instance,
            intra,
            starts,
            costs,
            points,
        })
    }
}

/// A stage-cost error, charged to `--bandwidth` or to `flag`, where the stages or their
/// costs came from.
fn costs_error(e: PartitionError, flag: &str) -> Error {
    match e {
        PartitionError::Bandwidth(why) => bad("--bandwidth", why),
        PartitionError::Invalid(_) => bad(flag, e.to_string()),
    }
}

/// Runs `request` (module docs).
pub fn run(request: &SyncRequest, progress: &dyn Progress) -> Result<SyncOutcome, Error> {
    request.check()?;
    let instance = Instance::load(&request.instance)?;
    if let SyncMode::Hybrid(h) = &request.mode {
        if request.intra_layer {
            return Err(bad("--intra-layer", "is not available with --hybrid"));
        }
        return run_hybrid(request, h, &instance, progress);
    }
    if request.import_torch.is_some() && !matches!(request.mode, SyncMode::Simulate) {
        return Err(bad(
            "--import-torch",
            "simulates the file's streams: not with --search, --explore, --hybrid or --schedule optimal",
        ));
    }
    if let Some(path) = &request.import_torch {
        let imported = Imported::read(path)?;
        // Without --stages or --partition, the file's ranks are the stages.
        let mut request = request.clone();
        if request.stages.is_none() && request.partition.is_none() {
            request.stages = Some(imported.ranks);
        }
        let stages = request.stages(instance)?;
        return run_imported(&request, stages, imported);
    }
    let stages = request.stages(instance)?;
    let n = request.micro_batches.unwrap_or(stages.costs.stages());
    match &request.mode {
        SyncMode::Explore { accelerator } => run_explore(request, accelerator, &stages, n),
        SyncMode::Search => run_search(request, &stages),
        SyncMode::Optimal(o) => run_optimal(request, o, &stages, n),
        SyncMode::Simulate | SyncMode::Hybrid(_) => run_simulate(request, stages, n),
    }
}

fn outcome(report: SyncReport) -> SyncOutcome {
    SyncOutcome { report, file: None }
}

/// One registered schedule on the stages.
fn run_simulate(request: &SyncRequest, stages: Stages, n: usize) -> Result<SyncOutcome, Error> {
    let d = stages.costs.stages();
    let kind = registry::parse(&request.schedule)?.configure(d, n, request.k, request.gamma)?;
    let schedule = kind
        .generate_for(d, n, &stages.costs)
        .map_err(|e| bad("--schedule", e.to_string()))?;
    let r = simulate(&schedule, &stages.costs, kind.execution()).map_err(internal)?;
    let named = (FileSchedule::Kind(kind), kind.name());
    Ok(simulated(request, stages, schedule, n, r, named))
}

/// The report and `--out` file of streams simulated on the stages (`named`: what the file
/// and the report call the schedule).
fn simulated(
    request: &SyncRequest,
    stages: Stages,
    schedule: crate::schedule::sync::Schedule,
    n: usize,
    r: crate::schedule::sync::sim::SimReport,
    named: (FileSchedule, String),
) -> SyncOutcome {
    let Stages {
        instance,
        intra,
        starts,
        costs,
        ..
    } = stages;
    let d = costs.stages();
    let samples = n as f64 * micro_batch_size(&instance);
    let summary = SimSummary::new(&r, request.memory);
    let file = SyncFile {
        instance: instance.name.clone(),
        schedule: named.0,
        stages: d,
        micro_batches: n,
        partition: starts.clone(),
        costs,
        streams: schedule,
        report: summary.clone(),
        timeline: r.timeline,
        solver: None,
    };
    let report = SimulatedReport {
        command: "sync",
        instance: instance.name,
        schedule: named.1,
        stages: d,
        micro_batches: n,
        partition: starts,
        samples_per_second: samples / r.makespan_seconds,
        intra_layer: intra,
        simulated: summary,
        memory_budget: request.memory,
    };
    SyncOutcome {
        report: SyncReport::Simulated(report),
        file: Some(file),
    }
}

/// A file in PyTorch's format, read (`--import-torch`).
struct Imported {
    source: String,
    schedule: crate::schedule::sync::Schedule,
    ranks: usize,
    micro_batches: usize,
}

impl Imported {
    fn read(path: &Path) -> Result<Imported, Error> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::new(&source, "", format!("cannot be read: {e}")))?;
        let (schedule, ranks, micro_batches) =
            torch_csv::read(&text).map_err(|e| InputError::new(&source, "", e.to_string()))?;
        Ok(Imported {
            source,
            schedule,
            ranks,
            micro_batches,
        })
    }
}

/// The streams of a file in PyTorch's format (`--import-torch`) on the stages: D must be
/// the stages', N is the file's.
fn run_imported(
    request: &SyncRequest,
    stages: Stages,
    imported: Imported,
) -> Result<SyncOutcome, Error> {
    let Imported {
        source,
        schedule,
        ranks,
        micro_batches: n,
    } = imported;
    let d = stages.costs.stages();
    if ranks != d {
        return Err(bad(
            "--import-torch",
            format!("{source} has {ranks} ranks, but the instance is cut into {d} stages (--stages or --partition)"),
        ));
    }
    if request.micro_batches.is_some_and(|m| m != n) {
        return Err(bad(
            "--micro-batches",
            format!("{source} runs {n} micro-batches; leave --micro-batches out or give {n}"),
        ));
    }
    // PyTorch runs one operation at a time per rank, a transfer after its producer.
    let r = simulate(&schedule, &stages.costs, Execution::Serial)
        .map_err(|e| InputError::new(&source, "", format!("its streams cannot run: {e}")))?;
    let name = format!("imported from {source}");
    let file_schedule = FileSchedule::Imported {
        name: "imported",
        file: source,
    };
    Ok(simulated(
        request,
        stages,
        schedule,
        n,
        r,
        (file_schedule, name),
    ))
}

/// BaPipe's schedule and micro-batch count (`bapipe::explore`).
fn run_explore(
    request: &SyncRequest,
    accelerator: &str,
    stages: &Stages,
    n: usize,
) -> Result<SyncOutcome, Error> {
    let d = stages.starts.len();
    let accelerator = match accelerator {
        "gpu" => Accelerator::Gpu,
        "fpga" => Accelerator::Fpga,
        other => return Err(bad("--accelerator", format!("gpu or fpga, not {other:?}"))),
    };
    let memory = request.memory.unwrap_or(f64::INFINITY);
    let base_batch = micro_batch_size(&stages.instance);
    let mini = request
        .mini_batch
        .unwrap_or((n as f64 * base_batch).round() as usize);
    if request.mini_batch.is_some() && mini < d {
        return Err(bad(
            "--mini-batch",
            format!("{mini} samples cannot make the D = {d} micro-batches of the smallest count"),
        ));
    }
    let counts = micro_batch_counts(d, mini);
    let costs_at = |size: f64| interpolated(&stages.points, size);
    let exploration = explore(accelerator, mini, &counts, &costs_at, memory).map_err(internal)?;
    Ok(outcome(SyncReport::Explored(ExploreReport {
        command: "sync",
        mode: "explore",
        instance: stages.instance.name.clone(),
        stages: d,
        partition: stages.starts.clone(),
        mini_batch: mini,
        accelerator,
        exploration,
    })))
}

/// MixPipe's K, Gamma and micro-batch size (`mixpipe::search`), the best simulated.
fn run_search(request: &SyncRequest, stages: &Stages) -> Result<SyncOutcome, Error> {
    let d = stages.starts.len();
    let memory = request
        .memory
        .ok_or_else(|| bad("--memory", "--search needs the device memory"))?;
    let max = |v: &Vec<f64>| v.iter().cloned().fold(0.0, f64::max);
    let profile: Vec<BatchPoint> = stages
        .points
        .iter()
        .map(|(b, c)| BatchPoint {
            batch: *b,
            stage_seconds: (0..d)
                .map(|s| c.forward_seconds[s] + c.backward_seconds[s])
                .fold(0.0, f64::max),
            activation_bytes: max(&c.stash_bytes),
        })
        .collect();
    let input = SearchInput {
        stages: d,
        profile,
        replica_bytes: 2.0 * max(&stages.costs.weight_bytes),
        memory_budget_bytes: memory,
    };
    let candidates = mixpipe::search(&input).map_err(internal)?;
    let best = candidates
        .iter()
        .find(|c| c.micro_batch >= 1)
        .copied()
        .ok_or_else(|| bad("--memory", "no K and Gamma fit one sample in this memory"))?;
    let kind = MIXPIPE.with_k_gamma(best.k, best.gamma);
    let at = interpolated(&stages.points, best.micro_batch as f64);
    let schedule = kind.generate(d, d).map_err(internal)?;
    let r = simulate(&schedule, &at, kind.execution()).map_err(internal)?;
    Ok(outcome(SyncReport::Searched(SearchReport {
        command: "sync",
        mode: "search",
        instance: stages.instance.name.clone(),
        stages: d,
        micro_batches: d,
        partition: stages.starts.clone(),
        best,
        planned_samples_per_second: best.samples_per_second,
        samples_per_second: (best.micro_batch * d) as f64 / r.makespan_seconds,
        simulated: SimSummary::new(&r, Some(memory)),
        candidates,
        schedule: kind.name(),
    })))
}

/// `--schedule optimal`'s placement, live caps and solver options, checked.
fn optimal_problem<'a>(
    o: &OptimalRequest,
    request: &SyncRequest,
    costs: &'a StageCosts,
    n: usize,
) -> Result<(SyncProblem<'a>, MilpOptions), Error> {
    let d = costs.stages();
    let placement = match o.placement.as_deref() {
        None => {
            return Err(bad(
                "--placement",
                format!(
                    "--schedule optimal needs --placement: {}",
                    Placement::names()
                ),
            ))
        }
        Some(p) => Placement::parse(p).ok_or_else(|| {
            bad(
                "--placement",
                format!("one of {}, not {p:?}", Placement::names()),
            )
        })?,
    };
    placement
        .check_stages(d)
        .map_err(|reason| bad("--stages", reason))?;
    let workers = placement.workers(d);
    if n > MAX_OPTIMAL {
        return Err(bad(
            "--micro-batches",
            format!(
                "--schedule optimal takes at most {MAX_OPTIMAL} micro-batches (its model grows as N^2 D), got {n}"
            ),
        ));
    }
    if placement.two_pipelines() && n % 2 != 0 {
        return Err(bad(
            "--micro-batches",
            format!(
                "the {} placement needs an even N (half per pipeline), got {n}",
                placement.name()
            ),
        ));
    }
    let live_cap = match &o.max_live {
        None => None,
        Some(v) if v.contains(&0) => return Err(bad("--max-live", "every cap must be at least 1")),
        Some(v) if v.len() == 1 => Some(vec![v[0]; workers]),
        Some(v) if v.len() == workers => Some(v.clone()),
        Some(v) => {
            return Err(bad(
                "--max-live",
                format!("one number, or one per worker ({workers}), not {}", v.len()),
            ))
        }
    };
    if let Some(t) = o.time_limit {
        if !(t > 0.0 && t.is_finite()) {
            return Err(bad("--time-limit", format!("must be positive, got {t}")));
        }
    }
    let formulation = Formulation::parse(&o.formulation).ok_or_else(|| {
        bad(
            "--formulation",
            format!("auto, disjunctive or time-indexed, not {:?}", o.formulation),
        )
    })?;
    let threads = std::num::NonZeroU32::new(o.threads)
        .ok_or_else(|| bad("--threads", "must be at least 1"))?;
    let options = MilpOptions {
        time_limit: o.time_limit.map(std::time::Duration::from_secs_f64),
        threads,
        ..Default::default()
    };
    let problem = SyncProblem {
        costs,
        placement,
        micro_batches: n,
        memory: request.memory,
        live_cap,
        formulation,
        split_backward: o.split_backward,
    };
    Ok((problem, options))
}

fn solver_report(o: &SyncOptimum) -> SolverReport {
    SolverReport {
        status: o.status,
        lower_bound: o.lower_bound,
        gap: o.gap.is_finite().then_some(o.gap),
        nodes: o.nodes,
        binaries: o.binaries,
        started_from: o.start.clone(),
        formulation: o.formulation,
        seconds: o.seconds,
    }
}

/// The exact MILP (`milp::sync_schedule`), started from the placement's registered warm
/// starts.
fn run_optimal(
    request: &SyncRequest,
    o: &OptimalRequest,
    stages: &Stages,
    n: usize,
) -> Result<SyncOutcome, Error> {
    let costs = &stages.costs;
    let d = costs.stages();
    let (problem, options) = optimal_problem(o, request, costs, n)?;
    let placement = problem.placement;
    let proposals = placement.known_schedules(d, n);
    let opt = optimal_schedule(&problem, &proposals, &options)?;
    let solver = solver_report(&opt);
    let mut report = OptimalReport {
        command: "sync",
        instance: stages.instance.name.clone(),
        schedule: "optimal",
        placement: placement.name(),
        split_backward: problem.split_backward,
        stages: d,
        micro_batches: n,
        partition: stages.starts.clone(),
        solver: solver.clone(),
        found: OptimalFound::Infeasible {
            status: "infeasible",
            makespan: None,
        },
        memory_budget: request.memory,
    };
    let (Some(schedule), Some(r)) = (opt.schedule, opt.report) else {
        return Ok(outcome(SyncReport::Optimal(report)));
    };
    let summary = SimSummary::new(&r, request.memory);
    let samples = n as f64 * micro_batch_size(&stages.instance);
    let file = SyncFile {
        instance: stages.instance.name.clone(),
        schedule: FileSchedule::Optimal {
            name: "optimal",
            placement: placement.name(),
        },
        stages: d,
        micro_batches: n,
        partition: stages.starts.clone(),
        costs: costs.clone(),
        streams: schedule.clone(),
        report: summary.clone(),
        timeline: r.timeline.clone(),
        solver: Some(solver),
    };
    report.found = OptimalFound::Streams {
        status: opt.status,
        simulated: summary,
        samples_per_second: samples / r.makespan_seconds,
        streams: schedule,
    };
    Ok(SyncOutcome {
        report: SyncReport::Optimal(report),
        file: Some(file),
    })
}

/// The hybrid search's cluster and mini-batch from the request, checked.
fn hybrid_input<'a>(
    request: &SyncRequest,
    h: &'a HybridRequest,
    instance: &Instance,
) -> Result<HybridInput<'a>, Error> {
    let gpus = h.gpus.filter(|&p| p >= 1).ok_or_else(|| {
        bad(
            "--gpus",
            "--hybrid needs the cluster's GPU count (at least 1)",
        )
    })?;
    let mini_batch = request
        .mini_batch
        .filter(|&m| m >= 1)
        .ok_or_else(|| bad("--mini-batch", "--hybrid needs the mini-batch B^ (samples)"))?;
    let allreduce = h.allreduce_bandwidth.ok_or_else(|| {
        bad(
            "--allreduce-bandwidth",
            "--hybrid needs the all-reduce bandwidth",
        )
    })?;
    if let Some(i) = h.micro_batch_sizes.iter().position(|&b| b == 0) {
        return Err(bad(
            "--micro-batch-sizes",
            format!("entry {i} is 0; sizes are at least 1"),
        ));
    }
    let Some(approach) = registry::approach(&request.schedule) else {
        return Err(bad(
            "--schedule",
            format!(
                "--hybrid takes {}, not {:?}",
                one_of(&registry::approach_names()),
                request.schedule
            ),
        ));
    };
    let server_gpus = h.server_gpus.unwrap_or(gpus);
    if server_gpus == 0 {
        return Err(bad("--server-gpus", "must be at least 1"));
    }
    let inter = match (h.inter_server_bandwidth, server_gpus < gpus) {
        (Some(b), _) => b,
        (None, false) => allreduce,
        (None, true) => {
            return Err(bad(
                "--inter-server-bandwidth",
                format!("{gpus} GPUs in servers of {server_gpus}: give the link between servers"),
            ))
        }
    };
    Ok(HybridInput {
        gpus,
        mini_batch,
        micro_batch_sizes: &h.micro_batch_sizes,
        memory_budget_bytes: request.memory.unwrap_or(f64::INFINITY),
        allreduce_bytes_per_second: allreduce,
        server_gpus,
        inter_server_bytes_per_second: inter,
        approach,
        max_stages: request.stages.unwrap_or(usize::MAX).min(instance.len()),
    })
}

/// How many (D, micro-batch size) pairs the hybrid search simulates.
fn hybrid_pairs(input: &HybridInput) -> u64 {
    let (gpus, mini_batch) = (input.gpus, input.mini_batch);
    input
        .depths()
        .map(|d| {
            let s = mini_batch / (gpus / d);
            input
                .micro_batch_sizes
                .iter()
                .filter(|&&b| b > 0 && s % b == 0)
                .count() as u64
        })
        .sum::<u64>()
}

/// MixPipe's W x D choice (eq. (6)), see `schedule::sync::hybrid`.
fn run_hybrid(
    request: &SyncRequest,
    h: &HybridRequest,
    instance: &Instance,
    progress: &dyn Progress,
) -> Result<SyncOutcome, Error> {
    let input = hybrid_input(request, h, instance)?;
    let bandwidth = request.bandwidth.unwrap_or(f64::INFINITY);
    // Costs at micro-batch size b: the network rebuilt at b when the instance is an
    // analytic pipeopt one, else scaled linearly per sample (eq. (3)).
    let mut at_b: std::collections::HashMap<usize, Instance> = Default::default();
    for &b in &h.micro_batch_sizes {
        if let Some(i) = analytic_rebuild(instance, &request.instance, b)? {
            at_b.insert(b, i);
        }
    }
    progress.start(hybrid_pairs(&input));
    let costs_at = |m: usize, b: usize| {
        progress.step();
        let starts = balanced_partition(instance, m).ok()?;
        hybrid::stage_costs_at(instance, at_b.get(&b), &starts, b, bandwidth)
    };
    let rows = hybrid::search(&input, &costs_at).map_err(internal)?;
    progress.finish();
    let best = rows
        .iter()
        .filter(|r| r.samples_per_second.is_some())
        .max_by(|a, b| {
            a.samples_per_second
                .unwrap_or(0.0)
                .total_cmp(&b.samples_per_second.unwrap_or(0.0))
        })
        .cloned();
    Ok(outcome(SyncReport::Hybrid(HybridReport {
        command: "sync",
        mode: "hybrid",
        instance: instance.name.clone(),
        approach: request.schedule.clone(),
        gpus: input.gpus,
        mini_batch: input.mini_batch,
        costs_from: if at_b.is_empty() {
            "linear"
        } else {
            "analytic"
        },
        best,
        candidates: rows,
    })))
}
