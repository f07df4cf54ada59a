//! The minimum-period periodic pattern of a fixed allocation, or of an assignment over
//! every stage structure of its runs.
//!
//! MadPipe's second phase (Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware
//! Dynamic Programming Algorithm for Pipelined Model Parallelism*, ScaDL 2022, section 4.3,
//! and the ILP of its reference [1]): for a fixed allocation, every operation of one batch
//! (docs/model.md section 4) gets a start and a shift (section 5), and the pattern must
//! respect dependencies, exclusive resources modulo `T` and memory (section 6). The
//! feasibility MILP at one period is [`pattern_milp`](crate::milp::pattern_milp); this
//! module searches the period.
//!
//! # T is searched, not a variable
//! At a fixed `T` every constraint is linear; with `T` a variable, the products of shifts
//! and `T` would need `T`-dependent linearisations with much weaker relaxations. We scale
//! the model by `1/T` (all numbers O(1), which also keeps HiGHS's absolute tolerances
//! relative to `T`) and search `T` by bisection between a lower bound (the largest resource
//! load or the memory bound of the stashes' live windows,
//! `model::bounds::allocation_lower_bound`; then the largest `T` proved infeasible) and an
//! upper bound (a valid pattern: 1F1B* for a contiguous allocation, otherwise the
//! sequential pattern), to the relative precision [`MilpOptions::period_precision`] (1e-4
//! by default). Feasibility is monotone in `T` (stretching the starts of a valid pattern by
//! `T'/T` keeps it valid and does not increase live-batch counts), which makes bisection
//! sound.
//!
//! # Every stage structure of an assignment
//! [`schedule_assignment_below`] searches an assignment of layers to processors rather than
//! one allocation: a stage per layer, where consecutive layers of one processor that share
//! a stashed tensor may also form one stage, the choice made inside each MILP
//! ([`assignment_structures`]). Its lower bound starts from the allocation bound of the
//! shared-tensor relaxation ([`shared_tensor_relaxation`]), which holds for every such
//! structure; without a pattern to start from, the first solve is at the sequential period
//! (if nothing fits there, nothing fits at all).
//!
//! # Exactness and margins
//! Each duration is inflated by `1e-8 T` in the model so that solutions within HiGHS's
//! tolerances (set to 1e-9) pass the exact judge; every pattern is judged before it is
//! returned. The lower bound is therefore exact up to that 1e-8 relative margin per
//! operation. A pattern the judge rejects is reported as an error (a bug), never returned.
//!
//! # Speed
//! The pair formulation of `pattern_milp` replaced one with per-operation shifts, order
//! binaries and live-batch indicator binaries (kept in `tests/scheduling_milp.rs` as an
//! independent check). On ResNet-50's allocation (layer 1; layers 2-9 a stage per layer;
//! layers 10-18) on 4 processors at 16 GiB, the search went from 120 s without finishing
//! (0.0881 s found, 0.0880 s proven) to 13.8 s, proven optimal at 0.0881 s.

use std::time::Instant;

use crate::judge::ensure_judged_valid;
use crate::judge::{judge, static_memory};
use crate::milp::pattern_milp::{PatternMilp, Scope, MARGIN};
use crate::milp::solver::{MilpOptions, SolveStatus};
use crate::model::bounds::{allocation_lower_bound, resource_load_bound};
use crate::model::{Allocation, BatchGraph, Instance, Pattern, PatternOp, Plan, Platform};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::schedule::one_f_one_b_star;
use crate::units::Seconds;

/// What the scheduling search found.
#[derive(Debug, Clone, PartialEq)]
pub struct MilpOutcome {
    /// The best valid pattern (judged), or `None`: when infeasible (status `Infeasible`),
    /// or, over an assignment's stage structures with a cutoff, when none is below the
    /// cutoff (status `Optimal`, `lower_bound` the cutoff's) or the time ran out first.
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
    search(instance, platform, allocation, &[], options, cutoff).map(|(_, out)| out)
}

/// The stage structures of an assignment (`assignment[l]`: the processor of layer `l + 1`)
/// that the scheduling search chooses from: a stage per layer, where two consecutive
/// layers of one processor that share a stashed tensor (`stash_overlap`) may also form one
/// stage. Every other boundary between layers of one processor stays cut: with nothing
/// shared, a finer stage frees each layer's stash at its own backward and allocates it at
/// its own forward, and a pattern of the coarser stage is still one of the finer ones
/// (their operations back to back), so finer is never worse. So the search over these is
/// exact for the assignment, every stage structure included. With tensors shared further
/// apart (`stash_shared`), merges are not modelled: one stage per run of layers, which is
/// a restriction (not exact).
pub fn assignment_structures(instance: &Instance, assignment: &[usize]) -> (Allocation, Vec<bool>) {
    let n = assignment.len();
    if !instance.stash_shared.is_empty() {
        return (runs_of(assignment), Vec::new());
    }
    let finest = finest_stages(assignment);
    let mergeable = (0..n)
        .map(|l| {
            l + 1 < n && assignment[l] == assignment[l + 1] && instance.stash_overlap(l + 1) > 0.0
        })
        .collect();
    (finest, mergeable)
}

/// The stage structures a scheduling MILP over an assignment decides between: those of
/// [`assignment_structures`] where it charges the stashes themselves; where it charges
/// per-layer stash charges instead (`pattern_milp::Scope::stash_charges`, for tensors shared
/// further apart than neighbours), a stage per layer with any two consecutive layers of one
/// processor free to merge.
pub fn charged_structures(
    instance: &Instance,
    assignment: &[usize],
    charged: bool,
) -> (Allocation, Vec<bool>) {
    if !charged {
        return assignment_structures(instance, assignment);
    }
    let n = assignment.len();
    let consecutive = (0..n)
        .map(|l| l + 1 < n && assignment[l] == assignment[l + 1])
        .collect();
    (finest_stages(assignment), consecutive)
}

/// One stage per layer, on its processor in `assignment`.
pub fn finest_stages(assignment: &[usize]) -> Allocation {
    Allocation::new(
        (0..assignment.len())
            .map(|l| crate::model::Stage {
                first: l + 1,
                last: l + 1,
                processor: assignment[l],
            })
            .collect(),
    )
}

/// One stage per maximal run of consecutive layers on one processor.
pub fn runs_of(assignment: &[usize]) -> Allocation {
    let mut stages: Vec<crate::model::Stage> = Vec::new();
    for (i, &p) in assignment.iter().enumerate() {
        match stages.last_mut() {
            Some(s) if s.processor == p => s.last = i + 1,
            _ => stages.push(crate::model::Stage {
                first: i + 1,
                last: i + 1,
                processor: p,
            }),
        }
    }
    Allocation::new(stages)
}

/// [`schedule_allocation_below`] over every stage structure of an assignment
/// ([`assignment_structures`]): the best pattern found with the allocation it is for, and
/// a lower bound valid for every stage structure of the assignment.
pub fn schedule_assignment_below(
    instance: &Instance,
    platform: &Platform,
    assignment: &[usize],
    options: &MilpOptions,
    cutoff: Option<Seconds>,
) -> crate::error::Result<(Allocation, MilpOutcome)> {
    let (finest, mergeable) = assignment_structures(instance, assignment);
    search(instance, platform, &finest, &mergeable, options, cutoff)
}

/// The instance in which each layer after a boundary in `open` (1-based: between layers
/// `l` and `l + 1`) is charged its stash less the tensor it shares with the layer before
/// (overlaps then all zero): with a stage per layer, every pattern of every stage
/// structure that may merge across `open` is one of its patterns at the same period with
/// no more memory (a merged stage keeps the first layer's whole stash and the others' less
/// the shared tensor, each over a window inside the stage's). So its bounds hold for all
/// of them.
pub fn shared_tensor_relaxation(instance: &Instance, open: &[usize]) -> Instance {
    let mut relaxed = instance.clone();
    for (i, layer) in relaxed.layers.iter_mut().enumerate() {
        let l = i + 1;
        let shared = if open.contains(&(l - 1)) {
            instance.stash_overlap(l - 1)
        } else {
            0.0
        };
        layer.stash = Some((instance.stash(l) - shared).max(0.0));
        layer.stash_overlap = None;
    }
    relaxed
}

/// The allocation bound (`model::bounds::allocation_lower_bound`: loads and memory
/// windows) of every stage structure of `finest` that merges only where `mergeable` says
/// so: with merges, computed on the shared-tensor relaxation
/// ([`shared_tensor_relaxation`]), which charges a merged stage no more than it keeps.
pub fn structures_lower_bound(
    instance: &Instance,
    platform: &Platform,
    finest: &Allocation,
    mergeable: &[bool],
) -> Seconds {
    let open: Vec<usize> = (0..finest.stages.len())
        .filter(|&s| mergeable.get(s).copied().unwrap_or(false))
        .map(|s| finest.stages[s].last)
        .collect();
    if open.is_empty() {
        return allocation_lower_bound(
            &BatchGraph::new(instance, platform, finest),
            platform.memory,
        );
    }
    let relaxed = shared_tensor_relaxation(instance, &open);
    allocation_lower_bound(
        &BatchGraph::new(&relaxed, platform, finest),
        platform.memory,
    )
}

/// The period search of [`schedule_allocation_below`], over `allocation` or, where
/// `mergeable` says so, over its stages merged (a stage per layer then; module docs of
/// `pattern_milp`). Returns the allocation of the best pattern with the outcome.
fn search(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    mergeable: &[bool],
    options: &MilpOptions,
    cutoff: Option<Seconds>,
) -> crate::error::Result<(Allocation, MilpOutcome)> {
    let started = Instant::now();
    instance.check()?;
    platform.check()?;
    allocation.check(instance.len(), platform.processors)?;
    let merges = mergeable.iter().any(|&m| m);
    let graph = BatchGraph::new(instance, platform, allocation);
    let order = graph
        .chain_order()
        .ok_or_else(|| crate::Error::internal("the batch graph is not a single chain"))?;
    let mut search = PeriodSearch::new(instance, platform, allocation, mergeable, options, started);

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
    search.out.lower_bound = load_bound;
    // With memory (windows and averages, `model::bounds`): often much tighter.
    let bound = structures_lower_bound(instance, platform, allocation, mergeable);
    if bound.is_infinite() {
        return Ok(search.done());
    }
    // Static memory above M: nothing fits (merges change no static memory).
    let statics = static_memory(instance, platform, allocation);
    if statics.iter().any(|&m| m > platform.memory) {
        return Ok(search.done());
    }
    search.best = first_pattern(instance, platform, allocation, &graph, &order, merges);
    if search.best.is_none() && !merges {
        return Ok(search.done());
    }
    // Without a pattern yet (merges only), the sequential period of the chain bounds the
    // search from above: at it, one batch at a time, the merged structure that keeps the
    // least memory fits if any does.
    // (A hair above it, for the model's margins on every duration.)
    search.sequential_period = graph.ops.iter().map(|o| o.duration).sum::<f64>()
        * (1.0 + 4.0 * MARGIN * graph.ops.len() as f64);
    search.cutoff = cutoff;
    search.lo = load_bound.max(bound);
    if let Some(b) = &search.best {
        search.lo = search.lo.min(b.period);
    }
    let (searched, proven_empty) = search.first_solve()?;
    search.bisect(searched)?;
    Ok(search.finish(proven_empty))
}

/// The first pattern of an allocation: the sequential pattern (memory-minimal: the live
/// windows of one batch nest, so if it does not fit, nothing does), improved by 1F1B* when
/// contiguous. With merges, the sequential pattern of the finest stages may not fit while a
/// merged one does: the MILP then decides from the load bound up.
fn first_pattern(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    graph: &BatchGraph,
    order: &[usize],
    merges: bool,
) -> Option<Pattern> {
    let seq = sequential_pattern(graph, order);
    let mut best: Option<Pattern> = judge(instance, platform, allocation, &seq)
        .valid
        .then_some(seq);
    if best.is_none() && !merges {
        return None;
    }
    if allocation.is_contiguous() {
        if let Ok(r) = one_f_one_b_star::min_period_fitting(instance, platform, allocation) {
            if best.as_ref().is_none_or(|b| r.pattern.period < b.period)
                && judge(instance, platform, allocation, &r.pattern).valid
            {
                best = Some(r.pattern);
            }
        }
    }
    best
}

/// The bisection of one allocation's period between a proven lower bound `lo` and the best
/// pattern found, one scheduling MILP per period tried.
struct PeriodSearch<'a> {
    instance: &'a Instance,
    platform: &'a Platform,
    allocation: &'a Allocation,
    options: &'a MilpOptions,
    scope: Scope,
    started: Instant,
    deadline: Option<Instant>,
    /// The period to beat when lower than the best pattern's.
    cutoff: Option<Seconds>,
    /// The chain's sequential period (with margins): the search's ceiling without a pattern.
    sequential_period: Seconds,
    best: Option<Pattern>,
    /// The allocation of `best` (stages merged where its solution said so).
    best_allocation: Allocation,
    /// No pattern below `lo` (proven).
    lo: Seconds,
    /// `Optimal` until a solve runs out of time.
    status: SolveStatus,
    out: MilpOutcome,
}

impl<'a> PeriodSearch<'a> {
    fn new(
        instance: &'a Instance,
        platform: &'a Platform,
        allocation: &'a Allocation,
        mergeable: &[bool],
        options: &'a MilpOptions,
        started: Instant,
    ) -> Self {
        PeriodSearch {
            instance,
            platform,
            allocation,
            options,
            scope: Scope::every_stage_structure(mergeable.to_vec()),
            started,
            deadline: options.time_limit.map(|d| started + d),
            cutoff: None,
            sequential_period: f64::INFINITY,
            best: None,
            best_allocation: allocation.clone(),
            lo: 0.0,
            status: SolveStatus::Optimal,
            out: MilpOutcome {
                pattern: None,
                period: None,
                lower_bound: 0.0,
                status: SolveStatus::Infeasible,
                gap: f64::INFINITY,
                nodes: 0,
                solves: 0,
                seconds: 0.0,
            },
        }
    }

    fn done(mut self) -> (Allocation, MilpOutcome) {
        self.out.seconds = self.started.elapsed().as_secs_f64();
        (self.best_allocation, self.out)
    }

    /// The time left: `None` when it ran out, `Some(None)` without a limit.
    fn time_left(&self) -> Option<Option<std::time::Duration>> {
        match self.deadline {
            Some(d) => {
                let now = Instant::now();
                (now < d).then(|| Some(d - now))
            }
            None => Some(None),
        }
    }

    /// The period to beat: the best pattern's, or the caller's cutoff when lower.
    fn target(&self) -> Seconds {
        let upper = self
            .best
            .as_ref()
            .map_or(self.sequential_period, |b| b.period);
        self.cutoff.map_or(upper, |c| c.min(upper))
    }

    /// One solve at `t`: `Some(true)` a pattern (kept), `Some(false)` none, `None` the time
    /// ran out.
    fn solve_at(&mut self, t: f64) -> crate::error::Result<Option<bool>> {
        let Some(left) = self.time_left() else {
            return Ok(None);
        };
        let (instance, platform) = (self.instance, self.platform);
        let Some(milp) = PatternMilp::new(instance, platform, self.allocation, t, &self.scope)
        else {
            // Static memory alone does not fit (checked before): nothing fits.
            return Ok(Some(false));
        };
        let r = milp.model.solve(self.options, left)?;
        self.out.solves += 1;
        self.out.nodes += r.nodes;
        Ok(match r.status {
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
                let (a, p) = milp.decoder.decode(&r.values);
                ensure_judged_valid(instance, platform, &a, &p, "the scheduling MILP")?;
                self.best = Some(p);
                self.best_allocation = a;
                Some(true)
            }
            SolveStatus::Infeasible => Some(false),
            SolveStatus::NoSolutionWithinLimit => None,
        })
    }

    /// Without a pattern (merges only): one solve at the cutoff (below it, nothing else
    /// matters) or at the sequential period (it decides whether anything fits at all).
    /// Returns whether there is a pattern to improve, and whether none exists at all.
    fn first_solve(&mut self) -> crate::error::Result<(bool, bool)> {
        if self.best.is_some() {
            return Ok((true, false));
        }
        let precision = self.options.period_precision;
        let sequential_period = self.sequential_period;
        let t = match self.cutoff {
            Some(c) if c < sequential_period => c * (1.0 - precision),
            _ => sequential_period,
        };
        if self.lo >= t {
            return Ok((false, t >= sequential_period));
        }
        Ok(match self.solve_at(t)? {
            Some(true) => (true, false),
            Some(false) => {
                self.lo = t;
                (false, t >= sequential_period)
            }
            None => {
                self.status = SolveStatus::LimitWithIncumbent;
                (false, false)
            }
        })
    }

    /// Below a cutoff, ask first whether the allocation beats it at all (one solve rules
    /// most allocations out); then try the lower bound itself (often tight), then bisect.
    fn bisect(&mut self, searched: bool) -> crate::error::Result<()> {
        let precision = self.options.period_precision;
        let mut probe_cutoff = self
            .cutoff
            .is_some_and(|c| self.best.as_ref().is_some_and(|b| c < b.period));
        let mut first = true;
        while searched
            && self.status == SolveStatus::Optimal
            && self.target() - self.lo > precision * self.target() * (1.0 + 1e-9)
        {
            let hi = self.target();
            let t = if probe_cutoff {
                hi * (1.0 - precision)
            } else if first {
                self.lo
            } else {
                0.5 * (self.lo + hi)
            };
            if probe_cutoff {
                probe_cutoff = false;
            } else {
                first = false;
            }
            match self.solve_at(t)? {
                Some(true) => {}
                Some(false) => self.lo = t,
                None => self.status = SolveStatus::LimitWithIncumbent,
            }
        }
        Ok(())
    }

    /// The outcome: the best pattern with its proven bound, or why there is none (none at
    /// all, none below the cutoff with the cutoff as the proven bound, or the time ran out).
    fn finish(mut self, proven_empty: bool) -> (Allocation, MilpOutcome) {
        let (lo, status) = (self.lo, self.status);
        let target = self.target();
        let Some(best) = self.best.take() else {
            self.out.status = if proven_empty {
                SolveStatus::Infeasible
            } else if status == SolveStatus::LimitWithIncumbent {
                SolveStatus::NoSolutionWithinLimit
            } else {
                SolveStatus::Optimal
            };
            self.out.lower_bound = if proven_empty { f64::INFINITY } else { lo };
            return self.done();
        };
        self.out.lower_bound = lo.min(best.period);
        if status == SolveStatus::Optimal && best.period > target {
            // Proven not below the cutoff: the bound is the cutoff's, not the pattern's.
            self.out.lower_bound = lo;
        }
        self.out.gap = (best.period - self.out.lower_bound) / best.period;
        self.out.period = Some(best.period);
        self.out.pattern = Some(best);
        self.out.status = status;
        self.done()
    }
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
        problem.check_milp_range()?;
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

/// The options of `milp-schedule`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MilpScheduleOptions {
    /// Each stage's first layer, 0-based (`--partition`); stage `i` goes on processor `i`.
    pub partition: Vec<usize>,
    /// Wall-clock limit of the solver (`--time-limit`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// HiGHS threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

impl AlgorithmOptions for MilpScheduleOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        Ok(Box::new(MilpSchedulePlanner::new(
            self.partition.clone(),
            MilpOptions::from_limits(self.time_limit, self.threads)?,
        )))
    }
}

impl Planner for MilpSchedulePlanner {
    fn name(&self) -> String {
        "milp-schedule".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.check_milp_range()?;
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
