//! The minimum iteration time of a synchronous pipeline (docs/model.md section 7) over all
//! operation orders, as an exact MILP: D stages, N micro-batches, a fixed placement of stage
//! replicas on workers, per-stage durations and activation transfers, and a memory budget
//! per worker with the simulator's accounting.
//!
//! Pipeline scheduling with memory as an optimisation problem follows the line of OptPipe
//! (2025). Two classical formulations of machine scheduling are built here on the same
//! reductions (below):
//!
//! * **Disjunctive** (Manne, "On the job-shop scheduling problem", Operations Research
//!   1960): a start time per operation, one order binary per pair of operations that share a
//!   worker, big-M constraints. Any durations. Its relaxation is weak, but a good incumbent
//!   (a known schedule) shrinks every operation's window until most pairs are ordered by
//!   the windows alone: with Chimera's streams it proves D = N = 16 in seconds.
//! * **Time-indexed** (Pritsker, Watters and Wolfe, "Multiproject scheduling with limited
//!   resources: a zero-one programming approach", Management Science 1969): one binary per
//!   operation and time slot, precedences disaggregated per slot ("started by t" implies
//!   "the predecessor started by t - p - lag"), one operation per worker and slot, memory
//!   per worker and slot. Exact only when every duration and transfer is a multiple of one
//!   grid step (equal stages, the papers' backward = 2 x forward); its relaxation is strong
//!   even from a poor incumbent. `Formulation::Auto` takes it when the grid exists and the
//!   model stays small (`AUTO_TIME_INDEXED_CELLS`).
//!
//! Where we add to them:
//!
//! * **Memory by order, not by time** (disjunctive). A worker runs one operation at a time, so at the start
//!   of a forward the micro-batches live on that worker (section 6: forward started, backward
//!   not finished) are exactly the forwards ordered before it (itself included) minus the
//!   backwards ordered before it. The memory rows are therefore linear in the order binaries
//!   alone, and the simulator, which replays the same order, sees the same peaks (it counts
//!   a backward ending at a forward's start as finished, as the order does). Weights and
//!   buffers are what `sim` counts for the placement (read off its report on the sequential
//!   streams). Peaks only grow at forward starts, so one row per forward suffices. An
//!   optional cap on live micro-batches per worker (DAPPLE's D - s, GEMS's 1) uses the same
//!   rows with unit stashes.
//! * **Symmetry.** Micro-batches are identical, so relabelling, at every (replica, kind), the
//!   k-th operation run as micro-batch k keeps every dependency (the k-th input to arrive is
//!   there before the k-th consumer starts) and every live count: without loss of
//!   generality micro-batch i precedes i + 1 on each stage replica, for forwards and for
//!   backwards. This fixes most pairs of a replica (only a backward of i against a forward
//!   of j > i stays free).
//! * **Bounds that the LP sees.** Each operation's head (its chain of predecessors with
//!   transfers) and tail bound its start; a worker's load enters as "the makespan is at
//!   least an operation's start plus the work ordered after it plus the smallest tail on
//!   that worker" (and its mirror for heads), which carries the critical-path and load
//!   bounds into the relaxation. Big-M constants come from these windows.
//! * **Incumbent.** The best of the streams the caller proposes (the known schedules) and of
//!   the sequential streams (one micro-batch at a time) that fits memory is simulated and
//!   given to HiGHS as a MIP start; its makespan caps every window. The sequential streams
//!   are memory-minimal on every worker (one live micro-batch, which every forward's start
//!   needs anyway), so when they do not fit, no order does: that is the infeasibility proof.
//!
//! The solution's starts, sorted per worker, are the streams; `sim` replays them (an
//! operation starts when its worker and input are free) to a makespan no larger than the
//! MILP's, hence equal at the optimum. What is reported is always the simulated makespan,
//! beside HiGHS's dual bound and gap.
//!
//! Placements: `OneDirection` runs stage s on worker s for all N micro-batches (GPipe,
//! DAPPLE, BaPipe, ZB-H1, ZB-H2); `Bidirectional` adds the up pipeline of Chimera and
//! MixPipe (stage s on worker D-1-s), micro-batches `0..N/2` down and `N/2..N` up; `Gems` is
//! that placement under GEMS's rule of one live micro-batch per worker; `Interleaved2` and
//! `Interleaved4` put stage s on worker s mod (D/v) (Megatron-LM's interleaved 1F1B), and
//! `VShape` stages s and D-1-s on one of D/2 workers (ZB-V, DualPipeV). Recomputation is
//! not modelled.
//!
//! **The split backward** (`SyncProblem::split_backward`; docs/model.md section 7). Each
//! backward becomes two operations, the input gradient (which the stage before waits for)
//! and the weight gradient (which waits for its own input gradient only), ordered freely
//! on their worker like any other pair. The symmetry above holds per pass (the k-th input
//! gradient of a replica is micro-batch k's, and so on), and the memory rows charge an
//! input gradient the stash it frees and a weight gradient what it kept, as the simulator
//! does; the live count ends at the input gradient. Whole-backward proposals start the
//! search with their backwards split back to back.

use crate::Error;

/// Bad input to the schedule MILP (its problem or options).
fn bad(reason: String) -> Error {
    crate::InputError::new("sync --schedule optimal", "", reason).into()
}

use std::collections::HashMap;
use std::time::Instant;

use crate::milp::solver::{MilpOptions, Model, SolveResult, SolveStatus, Var};
use crate::schedule::sync::sim::{simulate, Execution, SimReport, StageCosts};
use crate::schedule::sync::{Instr, Pass, Pipeline, Schedule};

/// The most micro-batches an exact schedule is asked for (`sync --schedule optimal`, a
/// synchronous experiment's `optimum.max_micro_batches`): the model grows as N^2 D and is
/// built before HiGHS looks at its time limit.
pub const MAX_MICRO_BATCHES: usize = 256;

/// Where the stage replicas live (the registry's placements; each schedule's descriptor
/// says which it warm-starts).
pub use crate::schedule::sync::Placement;

/// Which MILP to solve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Formulation {
    /// Time-indexed when every duration and transfer lies on a common grid and the model
    /// stays small (at most `AUTO_TIME_INDEXED_CELLS` operation-slots), disjunctive otherwise.
    #[default]
    Auto,
    /// Start times and order binaries with big-M constraints: any durations.
    Disjunctive,
    /// One binary per operation and grid slot: durations on a common grid only.
    TimeIndexed,
}

impl Formulation {
    /// Parses `auto`, `disjunctive` or `time-indexed`.
    pub fn parse(text: &str) -> Option<Formulation> {
        match text {
            "auto" => Some(Formulation::Auto),
            "disjunctive" => Some(Formulation::Disjunctive),
            "time-indexed" => Some(Formulation::TimeIndexed),
            _ => None,
        }
    }
}

/// The largest time-indexed model `Formulation::Auto` builds: operations x slots. Measured
/// on equal stages with Chimera's streams as incumbent: at D = N = 16, backward = 2 x
/// forward (512 operations x 76 slots) the time-indexed model is still 9% from optimal after
/// 60 s, while the disjunctive one, whose windows the incumbent tightens, proves 5D - 4 in
/// 10 s; at D = 8 both prove it in seconds.
pub const AUTO_TIME_INDEXED_CELLS: f64 = 20_000.0;

/// One synchronous iteration to schedule.
#[derive(Debug, Clone)]
pub struct SyncProblem<'a> {
    pub costs: &'a StageCosts,
    pub placement: Placement,
    pub micro_batches: usize,
    /// Bytes per worker (the simulator's peak: weights, buffers, live stashes).
    pub memory: Option<f64>,
    /// Most live micro-batches per worker (one entry per worker).
    pub live_cap: Option<Vec<usize>>,
    pub formulation: Formulation,
    /// Each backward as its input gradient then its weight gradient, free to be ordered
    /// apart (docs/model.md section 7, zero-bubble schedules); whole otherwise.
    pub split_backward: bool,
}

/// What the MILP found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncOptimum {
    /// The best streams (simulated, fitting memory), `None` when infeasible.
    pub schedule: Option<Schedule>,
    /// Their simulated makespan.
    pub makespan: Option<f64>,
    /// The simulator's report on them.
    #[serde(skip)]
    pub report: Option<SimReport>,
    /// A proven lower bound on every order's makespan under the memory budget (infinite when
    /// infeasible).
    pub lower_bound: f64,
    pub status: SolveStatus,
    /// `(makespan - lower_bound) / makespan`, infinite without streams.
    pub gap: f64,
    pub nodes: u64,
    /// Order binaries of the model (pairs on one worker left free by symmetry and windows).
    pub binaries: usize,
    /// The formulation solved (`None` when the sequential streams already decide).
    pub formulation: Option<Formulation>,
    /// Where HiGHS's first incumbent came from (a proposed schedule's name, or `sequential`).
    pub start: Option<String>,
    pub seconds: f64,
}

#[derive(Debug, Clone, Copy)]
struct Op {
    instr: Instr,
    worker: usize,
    dur: f64,
}

/// Whether `a` runs before `b` on their worker: a constant, or a binary (or its complement).
#[derive(Debug, Clone, Copy)]
enum Before {
    Always,
    Never,
    /// `x` (true) or `1 - x` (false).
    Var(Var, bool),
}

/// One micro-batch at a time, in micro-batch order (memory-minimal on every worker); with
/// `split_backward`, each backward as its input gradient then its weight gradient.
pub fn sequential_streams(
    d: usize,
    n: usize,
    placement: Placement,
    split_backward: bool,
) -> Schedule {
    let mut s: Schedule = vec![Vec::new(); placement.workers(d)];
    let mut batches: Vec<(Pipeline, usize)> = placement
        .pipelines(n)
        .into_iter()
        .flat_map(|(p, r)| r.map(move |m| (p, m)))
        .collect();
    batches.sort_by_key(|&(_, m)| m);
    for (pipeline, micro_batch) in batches {
        for stage in 0..d {
            let op = Instr::new(Pass::Forward, stage, micro_batch, pipeline);
            s[placement.worker(pipeline, stage, d)].push(op);
        }
        for stage in (0..d).rev() {
            let worker = &mut s[placement.worker(pipeline, stage, d)];
            worker.extend(
                backward_passes(split_backward)
                    .iter()
                    .map(|&pass| Instr::new(pass, stage, micro_batch, pipeline)),
            );
        }
    }
    s
}

/// `schedule` with each whole backward run as its input gradient then its weight gradient.
pub fn with_backwards_split(schedule: &Schedule) -> Schedule {
    schedule
        .iter()
        .map(|stream| {
            stream
                .iter()
                .flat_map(|&op| match op.pass() {
                    Pass::Backward => vec![
                        op.with_pass(Pass::BackwardInput),
                        op.with_pass(Pass::BackwardWeight),
                    ],
                    _ => vec![op],
                })
                .collect()
        })
        .collect()
}

/// The passes of one backward: whole, or its input then its weight gradient.
fn backward_passes(split_backward: bool) -> &'static [Pass] {
    if split_backward {
        &[Pass::BackwardInput, Pass::BackwardWeight]
    } else {
        &[Pass::Backward]
    }
}

fn fits(problem: &SyncProblem, caps: &Option<Vec<usize>>, r: &SimReport) -> bool {
    let memory_ok = problem
        .memory
        .is_none_or(|m| r.memory.iter().all(|w| w.peak_bytes <= m * (1.0 + 1e-12)));
    let live_ok = caps
        .as_ref()
        .is_none_or(|c| r.memory.iter().zip(c).all(|(w, &c)| w.peak_live <= c));
    memory_ok && live_ok
}

/// The minimum-makespan streams of `problem` (module docs). `proposals` are named streams
/// to start from (any that do not fit memory, or do not match the placement, are skipped).
pub fn optimal_schedule(
    problem: &SyncProblem,
    proposals: &[(String, Schedule)],
    options: &MilpOptions,
) -> crate::error::Result<SyncOptimum> {
    let started = Instant::now();
    let costs = problem.costs;
    let (d, n, placement) = (costs.stages(), problem.micro_batches, problem.placement);
    let caps = checked_live_caps(problem)?;
    let mut out = SyncOptimum {
        schedule: None,
        makespan: None,
        report: None,
        lower_bound: f64::INFINITY,
        status: SolveStatus::Infeasible,
        gap: f64::INFINITY,
        nodes: 0,
        binaries: 0,
        formulation: None,
        start: None,
        seconds: 0.0,
    };
    let ops = operations(costs, placement, n, problem.split_backward);
    let index: HashMap<Instr, usize> = ops.iter().enumerate().map(|(i, o)| (o.instr, i)).collect();
    let unit = ops.iter().map(|o| o.dur).fold(0.0, f64::max);
    if !(unit > 0.0 && unit.is_finite()) {
        return Err(bad(
            "every operation has zero (or non-finite) duration: no optimum to search".into(),
        ));
    }

    // The sequential streams: memory-minimal, so the feasibility test and the base memory.
    let sequential = sequential_streams(d, n, placement, problem.split_backward);
    let seq = simulate(&sequential, costs, Execution::Serial).map_err(Error::internal)?;
    if !fits(problem, &caps, &seq) {
        out.seconds = started.elapsed().as_secs_f64();
        return Ok(out);
    }
    let base: Vec<f64> = seq
        .memory
        .iter()
        .map(|m| m.weight_bytes + m.buffer_bytes)
        .collect();
    let mut best = best_proposal(
        ("sequential".into(), sequential, seq),
        &proposals_for(problem, proposals),
        &ops,
        &index,
        |s| {
            simulate(s, costs, Execution::Serial)
                .ok()
                .filter(|r| fits(problem, &caps, r))
        },
    );
    let ub = best.2.makespan_seconds / unit;
    let preds = precedences(&ops, &index, placement, n, costs, unit);
    let dur: Vec<f64> = ops.iter().map(|o| o.dur / unit).collect();
    let windows = Windows::new(&ops, &preds, &dur, placement.workers(d), ub);
    out.lower_bound = windows.lb0 * unit;
    if windows.lb0 >= ub * (1.0 - 1e-9) {
        // The windows' bound (critical path, a worker's load) already meets the incumbent.
        out.lower_bound = best.2.makespan_seconds;
        out.status = SolveStatus::Optimal;
        return Ok(with_streams(out, best, started));
    }

    let ctx = Ctx {
        ops: &ops,
        preds: &preds,
        dur: &dur,
        head: &windows.head,
        tail: &windows.tail,
        latest: &windows.latest,
        by_worker: &windows.by_worker,
        rmin: &windows.rmin,
        qmin: &windows.qmin,
        lb0: windows.lb0,
        ub,
        slack: 1e-9 * ub.max(1.0),
        base: &base,
        memory: problem.memory,
        caps: &caps,
        costs,
        incumbent: &best.1,
        incumbent_starts: best
            .2
            .timeline
            .intervals
            .iter()
            .flatten()
            .map(|&(s, _, op)| (index[&op], s / unit))
            .collect(),
    };
    let grid = time_grid(problem.formulation, &dur, &preds, ub)?;
    out.formulation = Some(if grid.is_some() {
        Formulation::TimeIndexed
    } else {
        Formulation::Disjunctive
    });
    let (solved, orders, binaries) = match grid {
        Some(g) => time_indexed(&ctx, g, options)?,
        None => disjunctive(&ctx, options)?,
    };
    out.binaries = binaries;
    out.start = Some(best.0.clone());
    out.nodes = solved.nodes;
    let mut status = solved.status;
    if solved.dual_bound.is_finite() {
        out.lower_bound = out.lower_bound.max(solved.dual_bound * unit);
    }
    if let Some(orders) = orders {
        let streams: Schedule = orders
            .iter()
            .map(|ks| ks.iter().map(|&k| ops[k].instr).collect())
            .collect();
        let r = simulate(&streams, costs, Execution::Serial).map_err(Error::internal)?;
        if !fits(problem, &caps, &r) {
            return Err(Error::internal(
                "the MILP's streams exceed the memory budget or the live cap in simulation",
            ));
        }
        if r.makespan_seconds < best.2.makespan_seconds {
            best = ("milp".into(), streams, r);
        }
    } else if status == SolveStatus::NoSolutionWithinLimit {
        // The incumbent we handed over is valid whatever HiGHS made of it.
        status = SolveStatus::LimitWithIncumbent;
    }
    if status == SolveStatus::Infeasible {
        return Err(Error::internal(format!(
            "HiGHS calls the model infeasible although the {} streams fit",
            best.0
        )));
    }
    out.status = status;
    Ok(with_streams(out, best, started))
}

/// The proposals as the problem runs them: with the split, each whole backward becomes its
/// two parts back to back (never longer: the stage before gets its gradient when the input
/// gradient ends).
fn proposals_for(
    problem: &SyncProblem,
    proposals: &[(String, Schedule)],
) -> Vec<(String, Schedule)> {
    proposals
        .iter()
        .map(|(name, s)| {
            let s = if problem.split_backward {
                with_backwards_split(s)
            } else {
                s.clone()
            };
            (name.clone(), s)
        })
        .collect()
}

/// `out` with the chosen streams (named, simulated), its gap from `out.lower_bound`.
fn with_streams(
    mut out: SyncOptimum,
    (name, streams, report): (String, Schedule, SimReport),
    started: Instant,
) -> SyncOptimum {
    let makespan = report.makespan_seconds;
    out.lower_bound = out.lower_bound.min(makespan);
    out.gap = (makespan - out.lower_bound) / makespan;
    out.start.get_or_insert(name);
    out.makespan = Some(makespan);
    out.schedule = Some(streams);
    out.report = Some(report);
    out.seconds = started.elapsed().as_secs_f64();
    out
}

/// The problem's sizes checked (at least one stage and one micro-batch, an even N for the
/// two-pipeline placements, a positive cap per worker), and the live-micro-batch caps the
/// model keeps: the problem's, or one per worker under GEMS's rule.
fn checked_live_caps(problem: &SyncProblem) -> crate::error::Result<Option<Vec<usize>>> {
    let (d, n, placement) = (
        problem.costs.stages(),
        problem.micro_batches,
        problem.placement,
    );
    if d == 0 || n == 0 {
        return Err(bad(format!(
            "the optimal schedule needs at least one stage and one micro-batch (D = {d}, N = {n})"
        )));
    }
    placement.check_stages(d).map_err(bad)?;
    let workers = placement.workers(d);
    if placement.two_pipelines() && n % 2 != 0 {
        return Err(bad(format!(
            "the {} placement needs an even number of micro-batches (half per pipeline), got N = {n}",
            placement.name()
        )));
    }
    if let Some(c) = &problem.live_cap {
        if c.len() != workers || c.contains(&0) {
            return Err(bad(format!(
                "the live-micro-batch cap needs one positive entry per worker ({workers})"
            )));
        }
    }
    if placement == Placement::Gems {
        return Ok(Some(vec![1; d]));
    }
    Ok(problem.live_cap.clone())
}

/// Every forward and backward (or input and weight gradient) of the iteration with its
/// worker and duration, micro-batch by micro-batch of each pipeline.
fn operations(costs: &StageCosts, placement: Placement, n: usize, split_backward: bool) -> Vec<Op> {
    let d = costs.stages();
    let mut ops: Vec<Op> = Vec::new();
    for (pipeline, range) in placement.pipelines(n) {
        for micro_batch in range {
            for stage in 0..d {
                let worker = placement.worker(pipeline, stage, d);
                let passes = std::iter::once(&Pass::Forward).chain(backward_passes(split_backward));
                ops.extend(passes.map(|&pass| {
                    let instr = Instr::new(pass, stage, micro_batch, pipeline);
                    Op {
                        instr,
                        worker,
                        dur: costs.seconds(instr),
                    }
                }));
            }
        }
    }
    ops
}

/// The incumbent handed to HiGHS: the fastest of `sequential` and the proposals that run
/// exactly the operations `ops` on their workers and that `simulated` accepts (it returns
/// the simulation of streams that fit).
fn best_proposal(
    sequential: (String, Schedule, SimReport),
    proposals: &[(String, Schedule)],
    ops: &[Op],
    index: &HashMap<Instr, usize>,
    simulated: impl Fn(&Schedule) -> Option<SimReport>,
) -> (String, Schedule, SimReport) {
    let workers = sequential.1.len();
    let mut best = sequential;
    for (name, s) in proposals {
        let same_ops = s.len() == workers
            && s.iter().map(Vec::len).sum::<usize>() == ops.len()
            && s.iter().enumerate().all(|(w, st)| {
                st.iter()
                    .all(|i| index.get(i).is_some_and(|&k| ops[k].worker == w))
            });
        if !same_ops {
            continue;
        }
        if let Some(r) = simulated(s) {
            if r.makespan_seconds < best.2.makespan_seconds {
                best = (name.clone(), s.clone(), r);
            }
        }
    }
    best
}

/// Each operation's predecessors with the lag after their end, in units: its input (the
/// transfer's time when it comes from another worker) and, by symmetry, the previous
/// micro-batch of the same pipeline and kind.
fn precedences(
    ops: &[Op],
    index: &HashMap<Instr, usize>,
    placement: Placement,
    n: usize,
    costs: &StageCosts,
    unit: f64,
) -> Vec<Vec<(usize, f64)>> {
    let d = costs.stages();
    let lag = |from: Instr, to: Instr| -> f64 {
        let (a, b) = (ops[index[&from]].worker, ops[index[&to]].worker);
        if a == b {
            0.0
        } else {
            let cut = if to.is_forward() {
                from.stage()
            } else {
                to.stage()
            };
            costs.transfer_seconds[cut] / unit
        }
    };
    let previous = |i: Instr| -> Option<Instr> {
        let (pass, stage, micro_batch, pipeline) = i.parts();
        let lo = placement
            .pipelines(n)
            .into_iter()
            .find(|(p, r)| *p == pipeline && r.contains(&micro_batch))
            .map(|(_, r)| r.start)?;
        (micro_batch > lo).then(|| Instr::new(pass, stage, micro_batch - 1, pipeline))
    };
    // A gradient comes from the next stage's input gradient where backwards are split.
    let producer = |dep: Instr| match dep.pass() {
        Pass::Backward if !index.contains_key(&dep) => dep.with_pass(Pass::BackwardInput),
        _ => dep,
    };
    let mut preds: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ops.len()];
    for (k, o) in ops.iter().enumerate() {
        if let Some(i) = o.instr.input(d).map(producer) {
            preds[k].push((index[&i], lag(i, o.instr)));
        }
        if let Some(p) = previous(o.instr) {
            preds[k].push((index[&p], 0.0));
        }
    }
    preds
}

/// Each operation's window and the lower bound they give, in units: heads and tails over
/// the precedence DAG, the latest start within the incumbent's makespan `ub`, and each
/// worker's smallest head and tail around its total work.
struct Windows {
    head: Vec<f64>,
    tail: Vec<f64>,
    latest: Vec<f64>,
    by_worker: Vec<Vec<usize>>,
    rmin: Vec<f64>,
    qmin: Vec<f64>,
    lb0: f64,
}

impl Windows {
    fn new(
        ops: &[Op],
        preds: &[Vec<(usize, f64)>],
        dur: &[f64],
        workers: usize,
        ub: f64,
    ) -> Windows {
        // Heads and tails over the precedence DAG (topological order by longest-path
        // relaxation).
        let topo = topological(preds);
        let mut head = vec![0.0f64; ops.len()];
        for &k in &topo {
            for &(p, l) in &preds[k] {
                head[k] = head[k].max(head[p] + dur[p] + l);
            }
        }
        let mut tail = vec![0.0f64; ops.len()];
        for &k in topo.iter().rev() {
            for &(p, l) in &preds[k] {
                tail[p] = tail[p].max(dur[k] + l + tail[k]);
            }
        }
        let latest: Vec<f64> = (0..ops.len()).map(|k| ub - dur[k] - tail[k]).collect();
        let mut by_worker: Vec<Vec<usize>> = vec![Vec::new(); workers];
        for (k, o) in ops.iter().enumerate() {
            by_worker[o.worker].push(k);
        }
        let mut lb0 = (0..ops.len())
            .map(|k| head[k] + dur[k] + tail[k])
            .fold(0.0, f64::max);
        let rmin: Vec<f64> = by_worker
            .iter()
            .map(|ks| ks.iter().map(|&k| head[k]).fold(f64::INFINITY, f64::min))
            .collect();
        let qmin: Vec<f64> = by_worker
            .iter()
            .map(|ks| ks.iter().map(|&k| tail[k]).fold(f64::INFINITY, f64::min))
            .collect();
        for (w, ks) in by_worker.iter().enumerate() {
            lb0 = lb0.max(rmin[w] + ks.iter().map(|&k| dur[k]).sum::<f64>() + qmin[w]);
        }
        Windows {
            head,
            tail,
            latest,
            by_worker,
            rmin,
            qmin,
            lb0,
        }
    }
}

/// The time-indexed formulation's grid (in units), `None` for the disjunctive one:
/// `formulation` decides, `Auto` by the grid's existence and the model's size.
fn time_grid(
    formulation: Formulation,
    dur: &[f64],
    preds: &[Vec<(usize, f64)>],
    ub: f64,
) -> crate::error::Result<Option<f64>> {
    Ok(match formulation {
        Formulation::Disjunctive => None,
        Formulation::TimeIndexed | Formulation::Auto => {
            let lags = preds.iter().flatten().map(|&(_, l)| l);
            let g = common_grid(dur.iter().copied().chain(lags));
            let slots = g.map(|g| (ub / g).round());
            match (formulation, g, slots) {
                (Formulation::TimeIndexed, None, _) => return Err(bad(
                    "the time-indexed formulation needs durations and transfers on a common grid (integer multiples of one step)".into()
                )),
                (Formulation::TimeIndexed, Some(g), _) => Some(g),
                (_, Some(g), Some(t)) if t * dur.len() as f64 <= AUTO_TIME_INDEXED_CELLS => Some(g),
                _ => None,
            }
        }
    })
}

/// Everything both formulations share (times in units of the longest operation).
struct Ctx<'a> {
    ops: &'a [Op],
    preds: &'a [Vec<(usize, f64)>],
    dur: &'a [f64],
    head: &'a [f64],
    tail: &'a [f64],
    latest: &'a [f64],
    by_worker: &'a [Vec<usize>],
    rmin: &'a [f64],
    qmin: &'a [f64],
    lb0: f64,
    ub: f64,
    slack: f64,
    base: &'a [f64],
    memory: Option<f64>,
    caps: &'a Option<Vec<usize>>,
    costs: &'a StageCosts,
    incumbent: &'a Schedule,
    /// The incumbent's simulated starts, by operation index.
    incumbent_starts: Vec<(usize, f64)>,
}

/// A solve: HiGHS's answer, the per-worker orders of its incumbent (operation indices), and
/// the number of binaries.
type Solved = (SolveResult, Option<Vec<Vec<usize>>>, usize);

/// The disjunctive formulation (module docs).
fn disjunctive(ctx: &Ctx, options: &MilpOptions) -> crate::error::Result<Solved> {
    let mut model = Model::new();
    let m = Disjunctive::new(ctx, &mut model);
    m.precedence_and_order_rows(&mut model);
    m.makespan_rows(&mut model);
    m.memory_rows(&mut model);
    m.set_incumbent(&mut model);
    let solved = model.solve(options, None)?;
    let orders = solved
        .status
        .has_solution()
        .then(|| m.orders(&solved.values));
    Ok((solved, orders, m.free.len()))
}

/// Whether `a` runs before `b` in every schedule of the reduced space (`Some(true)`), after
/// it (`Some(false)`), or either: on one stage of one pipeline, micro-batches of one pass
/// run in order, and a micro-batch's forward before its backward (its input gradient
/// before its weight gradient).
fn forced_order(a: Instr, b: Instr) -> Option<bool> {
    if a.pipeline() != b.pipeline() || a.stage() != b.stage() {
        return None;
    }
    // Each pass's place in a micro-batch's sequence.
    let rank = |i: Instr| match i.pass() {
        Pass::Forward => 0,
        Pass::Backward | Pass::BackwardInput => 1,
        Pass::BackwardWeight => 2,
    };
    let (i, j) = (a.micro_batch(), b.micro_batch());
    match rank(a).cmp(&rank(b)) {
        std::cmp::Ordering::Equal => Some(i < j),
        std::cmp::Ordering::Less => (j >= i).then_some(true),
        std::cmp::Ordering::Greater => (i >= j).then_some(false),
    }
}

/// Adds `coef * [o before t]` (`rel`) to a linear form: terms plus a constant.
fn add_before(terms: &mut Vec<(Var, f64)>, constant: &mut f64, rel: Before, coef: f64) {
    match rel {
        Before::Always => *constant += coef,
        Before::Never => {}
        Before::Var(x, true) => terms.push((x, coef)),
        Before::Var(x, false) => {
            *constant += coef;
            terms.push((x, -coef));
        }
    }
}

/// The disjunctive model's variables: the makespan, a start per operation, and whether
/// each pair on a worker runs in order (a constant where precedence or the windows decide,
/// a binary otherwise).
struct Disjunctive<'c, 'a> {
    ctx: &'c Ctx<'a>,
    makespan: Var,
    start: Vec<Var>,
    before: HashMap<(usize, usize), Before>,
    /// The pairs `(a, b)` left free, with their binary (1: `a` before `b`).
    free: Vec<(usize, usize, Var)>,
}

impl<'c, 'a> Disjunctive<'c, 'a> {
    /// The variables: the makespan, the starts in their windows, a binary per free pair.
    fn new(ctx: &'c Ctx<'a>, model: &mut Model) -> Self {
        let (ops, dur, head, latest) = (ctx.ops, ctx.dur, ctx.head, ctx.latest);
        let (ub, slack) = (ctx.ub, ctx.slack);
        let makespan = model.continuous(1.0, (ctx.lb0 - slack).min(ub), ub + slack);
        let start: Vec<Var> = (0..ops.len())
            .map(|k| model.continuous(0.0, head[k] - slack, latest[k] + slack))
            .collect();
        let mut before: HashMap<(usize, usize), Before> = HashMap::new();
        let mut free: Vec<(usize, usize, Var)> = Vec::new();
        for ks in ctx.by_worker {
            for (ia, &a) in ks.iter().enumerate() {
                for &b in &ks[ia + 1..] {
                    let mut rel = forced_order(ops[a].instr, ops[b].instr);
                    // Windows: b cannot finish before a's earliest start + ... and vice versa.
                    if rel.is_none() && head[a] + dur[a] > latest[b] + slack {
                        rel = Some(false);
                    }
                    if rel.is_none() && head[b] + dur[b] > latest[a] + slack {
                        rel = Some(true);
                    }
                    let r = match rel {
                        Some(true) => Before::Always,
                        Some(false) => Before::Never,
                        None => {
                            let x = model.binary(0.0);
                            free.push((a, b, x));
                            Before::Var(x, true)
                        }
                    };
                    before.insert((a, b), r);
                    before.insert(
                        (b, a),
                        match r {
                            Before::Always => Before::Never,
                            Before::Never => Before::Always,
                            Before::Var(x, s) => Before::Var(x, !s),
                        },
                    );
                }
            }
        }
        Disjunctive {
            ctx,
            makespan,
            start,
            before,
            free,
        }
    }

    /// Precedences; forced pairs as precedences, free ones as disjunctions.
    fn precedence_and_order_rows(&self, model: &mut Model) {
        let (ctx, start) = (self.ctx, &self.start);
        let (dur, head, latest, slack) = (ctx.dur, ctx.head, ctx.latest, ctx.slack);
        for (k, ps) in ctx.preds.iter().enumerate() {
            for &(p, l) in ps {
                model.ge(&[(start[k], 1.0), (start[p], -1.0)], dur[p] + l);
            }
        }
        for &(a, b, x) in &self.free {
            let m1 = dur[a] + latest[a] - head[b] + slack;
            let m2 = dur[b] + latest[b] - head[a] + slack;
            // x = 1: s_b >= s_a + d_a; x = 0: s_a >= s_b + d_b.
            model.ge(&[(start[b], 1.0), (start[a], -1.0), (x, -m1)], dur[a] - m1);
            model.ge(&[(start[a], 1.0), (start[b], -1.0), (x, m2)], dur[b]);
        }
        for ks in ctx.by_worker {
            for (ia, &a) in ks.iter().enumerate() {
                for &b in &ks[ia + 1..] {
                    match self.before[&(a, b)] {
                        Before::Always => model.ge(&[(start[b], 1.0), (start[a], -1.0)], dur[a]),
                        Before::Never => model.ge(&[(start[a], 1.0), (start[b], -1.0)], dur[b]),
                        Before::Var(..) => {}
                    }
                }
            }
        }
    }

    /// Makespan rows: tails, and the work ordered after (before) each operation.
    fn makespan_rows(&self, model: &mut Model) {
        let (ctx, start, c) = (self.ctx, &self.start, self.makespan);
        let dur = ctx.dur;
        for (w, ks) in ctx.by_worker.iter().enumerate() {
            for &a in ks {
                model.ge(&[(c, 1.0), (start[a], -1.0)], dur[a] + ctx.tail[a]);
                let (mut after, mut k_after) = (vec![(c, 1.0), (start[a], -1.0)], 0.0);
                let (mut prior, mut k_prior) = (vec![(start[a], 1.0)], 0.0);
                for &b in ks {
                    if b == a {
                        continue;
                    }
                    // C - s_a - sum d_b [a before b] >= d_a + qmin.
                    add_before(&mut after, &mut k_after, self.before[&(a, b)], -dur[b]);
                    // s_a - sum d_b [b before a] >= rmin.
                    add_before(&mut prior, &mut k_prior, self.before[&(b, a)], -dur[b]);
                }
                model.ge(&after, dur[a] + ctx.qmin[w] - k_after);
                model.ge(&prior, ctx.rmin[w] - k_prior);
            }
        }
    }

    /// Memory and live caps, at every forward start.
    fn memory_rows(&self, model: &mut Model) {
        let ctx = self.ctx;
        let ops = ctx.ops;
        for (w, ks) in ctx.by_worker.iter().enumerate() {
            for &t in ks.iter().filter(|&&k| ops[k].instr.is_forward()) {
                let mut rows: Vec<(Vec<f64>, f64)> = Vec::new();
                if let Some(m) = ctx.memory {
                    let scale = m.max(1.0);
                    rows.push((
                        ks.iter()
                            .map(|&k| stash_change(ctx.costs, ops[k].instr) / scale)
                            .collect(),
                        (m - ctx.base[w]) / scale,
                    ));
                }
                if let Some(cap) = ctx.caps {
                    rows.push((
                        ks.iter().map(|&k| live_change(ops[k].instr)).collect(),
                        cap[w] as f64,
                    ));
                }
                for (weights, budget) in rows {
                    let (mut terms, mut constant) = (
                        Vec::new(),
                        weights[ks.iter().position(|&k| k == t).unwrap()],
                    );
                    for (i, &o) in ks.iter().enumerate() {
                        if o == t || weights[i] == 0.0 {
                            continue;
                        }
                        add_before(&mut terms, &mut constant, self.before[&(o, t)], weights[i]);
                    }
                    model.le(&terms, budget - constant + 1e-9);
                }
            }
        }
    }

    /// The MIP start: the incumbent's simulated starts and orders.
    fn set_incumbent(&self, model: &mut Model) {
        let ctx = self.ctx;
        let mut values = vec![0.0; model.num_vars()];
        values[self.makespan.0] = ctx.ub;
        let mut position: HashMap<Instr, usize> = HashMap::new();
        for stream in ctx.incumbent {
            for (i, op) in stream.iter().enumerate() {
                position.insert(*op, i);
            }
        }
        for &(k, s) in &ctx.incumbent_starts {
            values[self.start[k].0] = s;
        }
        for &(a, b, x) in &self.free {
            values[x.0] = if position[&ctx.ops[a].instr] < position[&ctx.ops[b].instr] {
                1.0
            } else {
                0.0
            };
        }
        model.set_start(values);
    }

    /// Each worker's operations in the order of a solution's starts (ties by its order
    /// binaries).
    fn orders(&self, values: &[f64]) -> Vec<Vec<usize>> {
        let start = &self.start;
        self.ctx
            .by_worker
            .iter()
            .map(|ks| {
                let mut order = ks.clone();
                order.sort_by(|&a, &b| {
                    values[start[a].0]
                        .total_cmp(&values[start[b].0])
                        .then_with(|| match self.before[&(a, b)] {
                            Before::Always => std::cmp::Ordering::Less,
                            Before::Never => std::cmp::Ordering::Greater,
                            Before::Var(x, s) => {
                                if (values[x.0] > 0.5) == s {
                                    std::cmp::Ordering::Less
                                } else {
                                    std::cmp::Ordering::Greater
                                }
                            }
                        })
                });
                order
            })
            .collect()
    }
}

/// What an operation adds to its worker's activations when it starts (a forward) or ends
/// (the rest), as the simulator counts them: a forward its stage's stash; a whole backward
/// frees it; an input gradient frees all but what the weight gradient keeps, which that
/// frees.
fn stash_change(costs: &StageCosts, op: Instr) -> f64 {
    let stage = op.stage();
    let (stash, kept) = (costs.stash_bytes[stage], costs.weight_gradient_stash(stage));
    match op.pass() {
        Pass::Forward => stash,
        Pass::Backward => -stash,
        Pass::BackwardInput => -(stash - kept),
        Pass::BackwardWeight => -kept,
    }
}

/// What an operation adds to its worker's live micro-batches (a forward's start to its
/// backward's or input gradient's end).
fn live_change(op: Instr) -> f64 {
    match op.pass() {
        Pass::Forward => 1.0,
        Pass::Backward | Pass::BackwardInput => -1.0,
        Pass::BackwardWeight => 0.0,
    }
}

/// The time-indexed formulation on a grid of `g` units (module docs).
fn time_indexed(ctx: &Ctx, g: f64, options: &MilpOptions) -> crate::error::Result<Solved> {
    let ops = ctx.ops;
    let slot = |x: f64| (x / g).round() as i64;
    let horizon = slot(ctx.ub);
    let p: Vec<i64> = ctx.dur.iter().map(|&x| slot(x)).collect();
    let first: Vec<i64> = ctx.head.iter().map(|&x| slot(x)).collect();
    let last: Vec<i64> = (0..ops.len())
        .map(|k| horizon - p[k] - slot(ctx.tail[k]))
        .collect();
    let mut model = Model::new();
    let c = model.continuous(1.0, ctx.lb0.min(ctx.ub) - ctx.slack, ctx.ub + ctx.slack);
    // y[k][t - first[k]]: operation k starts in slot t.
    let y: Vec<Vec<Var>> = (0..ops.len())
        .map(|k| (first[k]..=last[k]).map(|_| model.binary(0.0)).collect())
        .collect();
    let binaries = y.iter().map(Vec::len).sum();
    let var = |k: usize, t: i64| -> Option<Var> {
        (t >= first[k] && t <= last[k]).then(|| y[k][(t - first[k]) as usize])
    };
    // Started by slot t (inclusive).
    let started_by = |terms: &mut Vec<(Var, f64)>, k: usize, t: i64, coef: f64| {
        for u in first[k]..=t.min(last[k]) {
            terms.push((y[k][(u - first[k]) as usize], coef));
        }
    };
    for k in 0..ops.len() {
        let once: Vec<(Var, f64)> = y[k].iter().map(|&v| (v, 1.0)).collect();
        model.row(1.0, 1.0, &once);
        // C >= end + tail.
        let mut row = vec![(c, 1.0)];
        for t in first[k]..=last[k] {
            let end = (t + p[k]) as f64 * g + ctx.tail[k];
            row.push((var(k, t).expect("in window"), -end));
        }
        model.ge(&row, 0.0);
        // Precedences, disaggregated: started by t implies the predecessor started by
        // t - p - lag.
        for &(a, l) in &ctx.preds[k] {
            let lag = p[a] + slot(l);
            for t in first[k]..=last[k] {
                let mut row = Vec::new();
                started_by(&mut row, k, t, 1.0);
                started_by(&mut row, a, t - lag, -1.0);
                model.le(&row, 0.0);
            }
        }
    }
    for (w, ks) in ctx.by_worker.iter().enumerate() {
        for t in 0..horizon {
            // One operation at a time.
            let mut row = Vec::new();
            for &k in ks {
                for u in (t - p[k] + 1).max(first[k])..=t.min(last[k]) {
                    row.push((y[k][(u - first[k]) as usize], 1.0));
                }
            }
            if row.len() > 1 {
                model.le(&row, 1.0);
            }
            // Live stashes at t: forwards started by t, less what backwards (input and
            // weight gradients) ended by t freed.
            let mut budgets: Vec<(Vec<f64>, f64)> = Vec::new();
            if let Some(m) = ctx.memory {
                let scale = m.max(1.0);
                budgets.push((
                    ks.iter()
                        .map(|&k| stash_change(ctx.costs, ops[k].instr) / scale)
                        .collect(),
                    (m - ctx.base[w]) / scale,
                ));
            }
            if let Some(cap) = ctx.caps {
                budgets.push((
                    ks.iter().map(|&k| live_change(ops[k].instr)).collect(),
                    cap[w] as f64,
                ));
            }
            for (weights, budget) in budgets {
                let mut row = Vec::new();
                for (i, &k) in ks.iter().enumerate() {
                    if weights[i] == 0.0 {
                        continue;
                    }
                    if ops[k].instr.is_forward() {
                        started_by(&mut row, k, t, weights[i]);
                    } else {
                        started_by(&mut row, k, t - p[k], weights[i]);
                    }
                }
                if !row.is_empty() {
                    model.le(&row, budget + 1e-9);
                }
            }
        }
    }
    let mut values = vec![0.0; model.num_vars()];
    values[c.0] = ctx.ub;
    for &(k, s) in &ctx.incumbent_starts {
        if let Some(v) = var(k, slot(s)) {
            values[v.0] = 1.0;
        }
    }
    model.set_start(values);
    let solved = model.solve(options, None)?;
    let orders = solved.status.has_solution().then(|| {
        let at = |k: usize| {
            y[k].iter()
                .position(|v| solved.values[v.0] > 0.5)
                .map_or(i64::MAX, |i| first[k] + i as i64)
        };
        ctx.by_worker
            .iter()
            .map(|ks| {
                let mut order = ks.clone();
                order.sort_by_key(|&k| (at(k), slot(ctx.head[k])));
                order
            })
            .collect()
    });
    Ok((solved, orders, binaries))
}

/// The largest step `g` (a divisor of the smallest positive value by 1..=24) of which every
/// value is an integer multiple (to 1e-9), if any.
fn common_grid(values: impl Iterator<Item = f64> + Clone) -> Option<f64> {
    let smallest = values
        .clone()
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if !smallest.is_finite() {
        return None;
    }
    (1..=24).map(|k| smallest / k as f64).find(|&g| {
        values.clone().all(|v| {
            let q = v / g;
            (q - q.round()).abs() <= 1e-9 * q.abs().max(1.0)
        })
    })
}

/// A topological order of the precedence DAG (Kahn).
fn topological(preds: &[Vec<(usize, f64)>]) -> Vec<usize> {
    let n = preds.len();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (k, ps) in preds.iter().enumerate() {
        for &(p, _) in ps {
            succs[p].push(k);
            indeg[k] += 1;
        }
    }
    let mut queue: Vec<usize> = (0..n).filter(|&k| indeg[k] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(k) = queue.pop() {
        order.push(k);
        for &s in &succs[k] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                queue.push(s);
            }
        }
    }
    order
}
