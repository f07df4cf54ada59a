//! The minimum-period periodic pattern of a fixed allocation.
//!
//! Formulation after Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware Dynamic
//! Programming Algorithm for Pipelined Model Parallelism* (ScaDL 2022), section 4.3, and
//! the ILP of its reference [1]: for a fixed allocation, every operation of one batch
//! (docs/model.md section 4) gets a start `t_o` in `[0, T)` and an integer shift `h_o`
//! (section 5), and the pattern must respect dependencies, exclusive resources modulo `T`
//! and memory (section 6).
//!
//! # T is searched, not a variable
//! For a fixed `T` every constraint is linear in `t` and `h`: dependencies
//! `h_a T + t_a + d_a <= h_b T + t_b`; circular disjunctions on each resource (one binary
//! per pair: which of the two arcs comes first on the circle of length `T`); memory at every
//! forward start of the processor, with binaries comparing start/end times. With `T` a
//! variable, the products `h T` and the big-M constants would need `T`-dependent
//! linearisations with much weaker relaxations; we instead scale the model by `1/T` (all
//! numbers O(1), which also keeps HiGHS's absolute tolerances relative to `T`) and search
//! `T` by bisection between a lower bound (the largest resource load or the memory bound of
//! the stashes' live windows, `model::bounds::allocation_lower_bound`, which halved the
//! solve time of MadPipe's second phase on experiments/memory.toml; then the largest `T`
//! proved infeasible) and an upper bound (a valid pattern: 1F1B* for a contiguous
//! allocation, otherwise the sequential pattern), to the relative precision
//! [`MilpOptions::period_precision`] (1e-4 by default). Feasibility is monotone in `T`
//! (stretching the starts of a valid pattern by `T'/T` keeps it valid and does not increase
//! live-batch counts), which makes bisection sound.
//!
//! # Memory
//! `live_s(tau) = [tau >= t_F] - [tau >= r] + k + h_B - h_F` (see `judge`), with
//! `t_B + d_B = k T + r`: `k` is a binary `w_s` (an operation lasts at most `T`), and the two
//! indicator terms are binaries tied to the start times with big-M constraints in the
//! conservative direction (an indicator may only over-count live batches). A processor's
//! memory is a step function that increases only at forward starts, so it suffices to bound
//! it at the forward start of each of its stages (with positive stash).
//!
//! # Shifts
//! Shifts are nondecreasing along the batch's chain of operations and, without loss of
//! generality, grow by at most 2 per dependency (any larger gap can be reduced by a whole
//! period for the rest of the chain, which keeps resources free and never increases a
//! live-batch count); the first operation has shift 0.
//!
//! # Exactness and margins
//! Each duration is inflated by `1e-8 T` in the model so that solutions within HiGHS's
//! tolerances (set to 1e-9) pass the exact judge; every pattern is judged before it is
//! returned. The lower bound is therefore exact up to that 1e-8 relative margin per
//! operation. A pattern the judge rejects is reported as an error (a bug), never returned.

use std::time::Instant;

use crate::algorithm::api::{Outcome, Planner, Problem, Solution};
use crate::judge::{judge, static_memory};
use crate::milp::ensure_judged_valid;
use crate::milp::solver::{MilpOptions, Model, SolveStatus, Var};
use crate::model::bounds::{allocation_lower_bound, resource_load_bound};
use crate::model::{Allocation, BatchGraph, Instance, OpKind, Pattern, PatternOp, Plan, Platform};
use crate::schedule::one_f_one_b_star;
use crate::units::Seconds;

/// Relative inflation of durations in the model (see the module docs).
const MARGIN: f64 = 1e-8;

/// What the scheduling search found.
#[derive(Debug, Clone, PartialEq)]
pub struct MilpOutcome {
    /// The best valid pattern (judged), or `None` when infeasible.
    pub pattern: Option<Pattern>,
    /// Its period.
    pub period: Option<Seconds>,
    /// A proven lower bound on the optimal period (see the module docs on margins).
    pub lower_bound: Seconds,
    pub status: SolveStatus,
    /// `(period - lower_bound) / period`, infinite without a pattern.
    pub gap: f64,
    /// Branch-and-bound nodes over all solves.
    pub nodes: u64,
    /// Number of MILPs solved.
    pub solves: usize,
    pub seconds: f64,
}

impl MilpOutcome {
    /// The solver's status, gap and nodes for reports.
    pub fn summary(&self) -> crate::model::SolverSummary {
        self.status.summary(self.gap, self.nodes)
    }
}

/// The minimum-period pattern of `allocation` that fits memory (module docs).
pub fn schedule_allocation(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    options: &MilpOptions,
) -> crate::error::Result<MilpOutcome> {
    schedule_allocation_below(instance, platform, allocation, options, None)
}

/// [`schedule_allocation`], but only periods below `cutoff` are of interest (the general
/// MILP's incumbent, when it asks about one allocation among many): the search first asks
/// for a pattern at `cutoff (1 - precision)`, and when there is none it stops with that
/// period as its proven bound and the best pattern it has (possibly above the cutoff),
/// status [`SolveStatus::Optimal`] meaning "optimal, or proven not below the cutoff".
pub fn schedule_allocation_below(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    options: &MilpOptions,
    cutoff: Option<Seconds>,
) -> crate::error::Result<MilpOutcome> {
    let started = Instant::now();
    instance.check()?;
    platform.check()?;
    allocation.check(instance.len(), platform.processors)?;
    let graph = BatchGraph::new(instance, platform, allocation);
    let order = graph
        .chain_order()
        .ok_or_else(|| crate::Error::internal("the batch graph is not a single chain"))?;
    let mut out = MilpOutcome {
        pattern: None,
        period: None,
        lower_bound: 0.0,
        status: SolveStatus::Infeasible,
        gap: f64::INFINITY,
        nodes: 0,
        solves: 0,
        seconds: 0.0,
    };

    // Lower bound: the largest resource load.
    let load_bound = resource_load_bound(&graph);
    if load_bound <= 0.0 {
        return Err(crate::InputError::new(
            "instance",
            "",
            "every operation of the allocation has zero duration: no finite optimum",
        )
        .into());
    }
    out.lower_bound = load_bound;
    // With memory (windows and averages, `model::bounds`): often much tighter.
    let bound = allocation_lower_bound(&graph, platform.memory);
    if bound.is_infinite() {
        out.seconds = started.elapsed().as_secs_f64();
        return Ok(out);
    }

    // Static memory above M: nothing fits.
    let statics = static_memory(instance, platform, allocation);
    if statics.iter().any(|&m| m > platform.memory) {
        out.seconds = started.elapsed().as_secs_f64();
        return Ok(out);
    }

    // Upper bound: the sequential pattern (memory-minimal: the live windows of one batch
    // nest, so if it does not fit, nothing does), improved by 1F1B* when contiguous.
    let seq = sequential_pattern(&graph, &order);
    let j = judge(instance, platform, allocation, &seq);
    if !j.valid {
        out.seconds = started.elapsed().as_secs_f64();
        return Ok(out);
    }
    let mut best = seq;
    if allocation.is_contiguous() {
        if let Ok(r) = one_f_one_b_star::min_period_fitting(instance, platform, allocation) {
            if r.pattern.period < best.period
                && judge(instance, platform, allocation, &r.pattern).valid
            {
                best = r.pattern;
            }
        }
    }

    let mut lo = load_bound.max(bound).min(best.period);
    let mut status = SolveStatus::Optimal;
    let deadline = options.time_limit.map(|d| started + d);
    // The period to beat: the best pattern's, or the caller's cutoff when lower.
    let precision = options.period_precision;
    let target = |best: &Pattern| cutoff.map_or(best.period, |c| c.min(best.period));
    let mut probe_cutoff = cutoff.is_some_and(|c| c < best.period);
    let mut first = true;
    while target(&best) - lo > precision * target(&best) * (1.0 + 1e-9) {
        // Below a cutoff, ask first whether the allocation beats it at all (one solve
        // rules most allocations out); then try the lower bound itself (often tight), then
        // bisect.
        let hi = target(&best);
        let t = if probe_cutoff {
            hi * (1.0 - precision)
        } else if first {
            lo
        } else {
            0.5 * (lo + hi)
        };
        if probe_cutoff {
            probe_cutoff = false;
        } else {
            first = false;
        }
        let left = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    status = SolveStatus::LimitWithIncumbent;
                    break;
                }
                Some(d - now)
            }
            None => None,
        };
        let r = feasibility(instance, platform, allocation, &graph, &order, &statics, t)
            .solve(options, left)?;
        out.solves += 1;
        out.nodes += r.nodes;
        match r.status {
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
                let p = to_pattern(&graph, &r.values, t);
                ensure_judged_valid(instance, platform, allocation, &p, "the scheduling MILP")?;
                best = p;
            }
            SolveStatus::Infeasible => lo = t,
            SolveStatus::NoSolutionWithinLimit => {
                status = SolveStatus::LimitWithIncumbent;
                break;
            }
        }
    }
    out.lower_bound = lo.min(best.period);
    if status == SolveStatus::Optimal && best.period > target(&best) {
        // Proven not below the cutoff: the bound is the cutoff's, not the pattern's.
        out.lower_bound = lo;
    }
    out.gap = (best.period - out.lower_bound) / best.period;
    out.period = Some(best.period);
    out.pattern = Some(best);
    out.status = status;
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

/// One batch at a time: every operation back to back, shift 0, period = total duration.
fn sequential_pattern(graph: &BatchGraph, order: &[usize]) -> Pattern {
    let total: f64 = graph.ops.iter().map(|o| o.duration).sum();
    let mut t = 0.0;
    let mut ops = Vec::with_capacity(order.len());
    // A zero-duration last operation would start at T: give the period a hair more.
    let period = if total > 0.0 { total } else { 1.0 };
    let period = if graph.ops[*order.last().unwrap_or(&0)].duration <= 0.0 {
        period * (1.0 + 1e-12) + f64::MIN_POSITIVE
    } else {
        period
    };
    for &i in order {
        ops.push(PatternOp {
            kind: graph.ops[i].id.kind,
            stage: graph.ops[i].id.stage,
            start: t,
            shift: 0,
        });
        t += graph.ops[i].duration;
    }
    sort_ops(&mut ops);
    Pattern { period, ops }
}

fn sort_ops(ops: &mut [PatternOp]) {
    ops.sort_by_key(|o| (o.stage, o.kind));
}

/// Column layout of the feasibility model.
struct Cols {
    t: Vec<Var>,
    h: Vec<Var>,
}

/// The feasibility MILP at period `t` (times scaled by `1/t`).
fn feasibility(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    graph: &BatchGraph,
    order: &[usize],
    statics: &[f64],
    period: f64,
) -> Model {
    let n = graph.ops.len();
    let d: Vec<f64> = graph
        .ops
        .iter()
        .map(|o| o.duration / period + MARGIN)
        .collect();
    let mut m = Model::new();
    let mut pos = vec![0; n];
    for (k, &i) in order.iter().enumerate() {
        pos[i] = k;
    }
    let cols = Cols {
        t: (0..n).map(|_| m.continuous(0.0, 0.0, 1.0)).collect(),
        h: (0..n)
            .map(|i| m.integer(0.0, 0.0, 2.0 * pos[i] as f64))
            .collect(),
    };
    // Dependencies: h_a + t_a + d_a <= h_b + t_b, and h_b - h_a <= 2.
    for &(a, b) in &graph.deps {
        m.le(
            &[
                (cols.h[a], 1.0),
                (cols.t[a], 1.0),
                (cols.h[b], -1.0),
                (cols.t[b], -1.0),
            ],
            -d[a],
        );
        m.le(&[(cols.h[b], 1.0), (cols.h[a], -1.0)], 2.0);
    }
    // Resources: arcs on the circle of length 1 pairwise disjoint.
    for i in 0..n {
        if graph.ops[i].duration <= 0.0 {
            continue;
        }
        for j in i + 1..n {
            if graph.ops[j].duration <= 0.0 || graph.ops[j].resource != graph.ops[i].resource {
                continue;
            }
            let y = m.binary(0.0);
            let (ti, tj) = (cols.t[i], cols.t[j]);
            // y = 1: i then j.  t_i + d_i <= t_j ;  t_j + d_j <= t_i + 1.
            m.le(&[(ti, 1.0), (tj, -1.0), (y, 2.0)], 2.0 - d[i]);
            m.le(&[(tj, 1.0), (ti, -1.0), (y, 2.0)], 3.0 - d[j]);
            // y = 0: j then i.  t_j + d_j <= t_i ;  t_i + d_i <= t_j + 1.
            m.le(&[(tj, 1.0), (ti, -1.0), (y, -2.0)], -d[j]);
            m.le(&[(ti, 1.0), (tj, -1.0), (y, -2.0)], 1.0 - d[i]);
        }
    }
    // Memory, in units of M.
    let sums = instance.sums();
    let mem = platform.memory;
    for (p, &static_p) in statics.iter().enumerate() {
        let stages: Vec<(usize, usize, usize, f64)> = allocation
            .stages
            .iter()
            .enumerate()
            .filter(|(_, st)| st.processor == p)
            .filter_map(|(s, st)| {
                let stash = sums.stash(st.first, st.last);
                let f = graph.find(crate::model::OpId {
                    kind: OpKind::F,
                    stage: s,
                })?;
                let b = graph.find(crate::model::OpId {
                    kind: OpKind::B,
                    stage: s,
                })?;
                (stash > 0.0).then_some((s, f, b, stash / mem))
            })
            .collect();
        if stages.is_empty() {
            continue;
        }
        // r_s = t_B + d_B - w_s in [0, 1].
        let mut r = Vec::new();
        let mut w = Vec::new();
        for &(_, _, b, _) in &stages {
            let rs = m.continuous(0.0, 0.0, 1.0);
            let ws = m.binary(0.0);
            m.row(d[b], d[b], &[(rs, 1.0), (cols.t[b], -1.0), (ws, 1.0)]);
            r.push(rs);
            w.push(ws);
        }
        let cap = (mem - static_p) / mem;
        for (e, &(_, fe, _, _)) in stages.iter().enumerate() {
            // Memory at tau = t_{F_e}.
            let tau = cols.t[fe];
            let mut terms: Vec<(Var, f64)> = Vec::new();
            let mut constant = 0.0;
            for (k, &(_, fk, bk, sigma)) in stages.iter().enumerate() {
                // [tau >= t_{F_k}] <= a.
                if k == e {
                    constant += sigma;
                } else {
                    let a = m.binary(0.0);
                    // a = 0  =>  tau + margin <= t_{F_k}.
                    m.le(&[(tau, 1.0), (cols.t[fk], -1.0), (a, -2.0)], -MARGIN);
                    terms.push((a, sigma));
                }
                // c <= [tau >= r_k].
                let c = m.binary(0.0);
                m.le(&[(r[k], 1.0), (tau, -1.0), (c, 1.0)], 1.0);
                terms.push((c, -sigma));
                terms.push((w[k], sigma));
                terms.push((cols.h[bk], sigma));
                terms.push((cols.h[fk], -sigma));
            }
            m.le(&terms, cap - constant);
        }
    }
    // The first operation of the chain has shift 0.
    m.row(0.0, 0.0, &[(cols.h[order[0]], 1.0)]);
    m
}

/// The pattern from a solution of the feasibility model.
fn to_pattern(graph: &BatchGraph, values: &[f64], period: f64) -> Pattern {
    let n = graph.ops.len();
    let mut ops = Vec::with_capacity(n);
    for (i, op) in graph.ops.iter().enumerate() {
        let mut start = values[i] * period;
        let mut shift = values[n + i].round() as i64;
        if start >= period {
            start = (start - period).max(0.0);
            shift += 1;
        }
        if start < 0.0 {
            start = 0.0;
        }
        ops.push(PatternOp {
            kind: op.id.kind,
            stage: op.id.stage,
            start,
            shift,
        });
    }
    sort_ops(&mut ops);
    Pattern { period, ops }
}

/// The best pattern for a plan's allocation (`pipeopt schedule PLAN.json`): the plan with
/// its pattern replaced by the MILP's (when one fits), its `lower_bound` set to the
/// search's bound, and the search's outcome. The plan's algorithm name gets `+milp`. A
/// Bi-Partition plan is refused, as by [`FixedAllocationPlanner::for_plan`].
pub fn schedule_plan(
    plan: &Plan,
    options: &MilpOptions,
) -> crate::error::Result<(Plan, MilpOutcome)> {
    let allocation = plan.allocation().ok_or_else(|| {
        crate::InputError::new(
            "plan",
            "bipartition",
            "the scheduling MILP schedules allocations (one range of layers per stage); \
             a Bi-Partition plan splits a layer's forward and backward",
        )
    })?;
    let out = schedule_allocation(&plan.instance, &plan.platform, allocation, options)?;
    let mut new = plan.clone();
    new.pattern = out.pattern.clone();
    new.lower_bound = Some(out.lower_bound);
    new.solve_seconds = Some(out.seconds);
    if !new.algorithm.ends_with("+milp") {
        new.algorithm.push_str("+milp");
    }
    Ok((new, out))
}

/// A given allocation (any: several stages per processor allowed) scheduled by
/// [`schedule_allocation`]: what `pipeopt schedule PLAN.json` runs on a plan's allocation.
#[derive(Debug, Clone)]
pub struct FixedAllocationPlanner {
    pub allocation: Allocation,
    pub options: MilpOptions,
    /// The name the new plan carries (the old plan's algorithm, `+milp`).
    pub name: String,
}

impl FixedAllocationPlanner {
    /// The planner of `pipeopt schedule`: the allocation of `plan` (read from `path`), its
    /// new plan named after the old one's algorithm with `+milp` (once). A Bi-Partition
    /// plan is refused: the MILP schedules allocations (one range of layers per stage).
    pub fn for_plan(
        plan: &Plan,
        path: &std::path::Path,
        options: MilpOptions,
    ) -> Result<Self, crate::InputError> {
        let Some(allocation) = plan.allocation() else {
            return Err(crate::InputError::new(
                path.display().to_string(),
                "bipartition",
                "the scheduling MILP schedules allocations (one range of layers per stage); \
                 a Bi-Partition plan splits a layer's forward and backward",
            ));
        };
        let name = if plan.algorithm.ends_with("+milp") {
            plan.algorithm.clone()
        } else {
            format!("{}+milp", plan.algorithm)
        };
        Ok(FixedAllocationPlanner {
            allocation: allocation.clone(),
            options,
            name,
        })
    }
}

impl Planner for FixedAllocationPlanner {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        let out = schedule_allocation(
            problem.instance,
            problem.platform,
            &self.allocation,
            &self.options,
        )?;
        Ok(outcome_of(self.allocation.clone(), out))
    }
}

/// The `milp-schedule` algorithm: a given contiguous partition (`--partition`, stage `i`
/// on processor `i`, like `1f1b*`) scheduled by [`schedule_allocation`].
#[derive(Debug, Clone)]
pub struct MilpSchedulePlanner {
    pub partition: Vec<usize>,
    pub options: MilpOptions,
}

/// Turns a search outcome on a fixed allocation into a planner outcome.
pub fn outcome_of(allocation: Allocation, mut out: MilpOutcome) -> Outcome {
    let summary = out.summary();
    match out.pattern.take() {
        None => Outcome::Infeasible {
            reason: "no periodic pattern of this allocation fits in memory".into(),
            lower_bound: None,
        },
        Some(pattern) => {
            let mut sol = Solution::new(allocation, Some(pattern));
            sol.lower_bound = Some(out.lower_bound);
            sol.stopped_at_limit = out.status != SolveStatus::Optimal;
            sol.solver = Some(summary);
            Outcome::Found(sol)
        }
    }
}

impl MilpSchedulePlanner {
    /// The planner of `milp-schedule`: `partition` as `--partition` gives it (each stage's
    /// first layer, 0-based), checked against the instance when it plans.
    pub fn new(partition: Vec<usize>, options: MilpOptions) -> Self {
        MilpSchedulePlanner { partition, options }
    }
}

impl Planner for MilpSchedulePlanner {
    fn name(&self) -> String {
        "milp-schedule".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        let allocation = problem.partition_allocation(&self.partition)?;
        let out = schedule_allocation(
            problem.instance,
            problem.platform,
            &allocation,
            &self.options,
        )?;
        Ok(outcome_of(allocation, out))
    }
}
