//! `best`: the best plan pipeopt can find for a case within a time limit, over every
//! allocation (contiguous or not), reported with the global lower bound of
//! [`global_bound`](crate::milp::global_bound) so that its distance to the optimum is known.
//!
//! A portfolio, then a local search, every candidate judged:
//! 1. **The contiguous optimum** (exact, milliseconds), the first incumbent.
//! 2. **The bound**, with at most two thirds of the time: the relaxation of `global_bound`
//!    either proves that no plan fits the case (reported as infeasible, with the proof) or
//!    gives a lower bound and the assignments its loop found feasible on the way. Where the
//!    contiguous optimum has no plan, MadPipe's plans (below) are made first, so that the
//!    bound knows a period to bisect below instead of spending its time on a proof that no
//!    period fits. A bound that says "infeasible" of a case with a judged plan is an
//!    internal error, never a result.
//! 3. **Seeds**: MadPipe's two phases with the paper's and with the full (`g` batches)
//!    estimate of its special processor (Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory
//!    Aware Dynamic Programming Algorithm for Pipelined Model Parallelism*, 2022); then, in
//!    increasing order of their allocation bound, the incumbent with a stage per layer and
//!    the relaxation's assignments, each scheduled by the exact scheduling MILP
//!    (`fixed_allocation`).
//! 4. **Local search** around the incumbent (a large-neighbourhood search on the
//!    assignment): move one layer to another processor (which shifts a cut or opens a stage),
//!    move a whole run of layers to another processor, exchange the processors of two runs.
//!    A candidate gets a stage per layer wherever consecutive layers share no stash (finer
//!    stages are never worse then). Each is first bounded by
//!    [`allocation_lower_bound`](crate::model::bounds::allocation_lower_bound) (loads and
//!    memory windows, microseconds) and dropped when that bound reaches the incumbent; the
//!    others are taken in increasing order of bound and asked by the scheduling MILP for a
//!    pattern below the incumbent. The first improvement becomes the incumbent and the
//!    search restarts around it.
//!
//! 5. **Exact checks** (docs/bounds.md): with time left and the gap open, is there a plan
//!    below the incumbent? [`decide_period`] runs the bound's loop just below the
//!    incumbent's period and hands every assignment that passes the relaxation to the
//!    scheduling MILP on its stages: first [`shared_tensor_relaxation`], one MILP that
//!    answers "no plan" for every way of cutting its runs into stages, then, when that
//!    does not decide, [`candidate_allocations`] (a stage per layer, both sides of each
//!    boundary between layers that share a tensor). A pattern found becomes
//!    the incumbent and the question is asked again; an assignment proven to have none is
//!    excluded; no assignment left proves the incumbent optimal (to 0.1%).
//!
//! The search stops when the incumbent is within the bound's precision of the global
//! bound (proven optimal), when the exact checks cannot decide, or at the time limit
//! (status `timeout`, the best judged plan reported). Runs are a pure function of the case and
//! the time limit, except where the limit cuts a solve.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::algorithm::{Outcome, Planner, Problem, Solution};
use crate::judge::judge;
use crate::milp::contiguous::contiguous_optimum;
use crate::milp::fixed_allocation::schedule_allocation_below;
use crate::milp::global_bound::{
    decide_period, global_lower_bound_learning, BoundOptions, Decision, GlobalBound, Premise,
    Relaxation, Verdict,
};
use crate::milp::madpipe::MadPipePlanner;
use crate::milp::{MilpOptions, SolveStatus};
use crate::model::bounds::allocation_lower_bound;
use crate::model::{Allocation, BatchGraph, Instance, Pattern, Placement, Stage};
use crate::partition::madpipe::MadPipeConfig;
use crate::units::Seconds;

/// The default wall-clock limit of `best`.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(60);

/// The `best` algorithm (module docs).
#[derive(Debug, Clone)]
pub struct BestPlanner {
    pub time_limit: Duration,
    pub milp: MilpOptions,
}

impl Default for BestPlanner {
    fn default() -> Self {
        BestPlanner {
            time_limit: DEFAULT_TIME_LIMIT,
            milp: MilpOptions::default(),
        }
    }
}

/// The incumbent: an allocation, its judged pattern and where it came from.
struct Incumbent {
    allocation: Allocation,
    pattern: Pattern,
    source: String,
}

impl Incumbent {
    fn period(&self) -> Seconds {
        self.pattern.period
    }
}

/// Processor of each layer (0-based) of an allocation.
fn assignment_of(allocation: &Allocation, layers: usize) -> Vec<usize> {
    let mut a = vec![0; layers];
    for s in &allocation.stages {
        for l in s.first..=s.last {
            a[l - 1] = s.processor;
        }
    }
    a
}

/// Relabels processors in order of first use (the canonical form up to symmetry).
fn canonical(assignment: &[usize]) -> Vec<usize> {
    let mut map = std::collections::HashMap::new();
    assignment
        .iter()
        .map(|&p| {
            let next = map.len();
            *map.entry(p).or_insert(next)
        })
        .collect()
}

/// Stages of an assignment: layer `l + 1` joins the stage of layer `l` when both are on one
/// processor and `join(l)` says so (`l` 1-based, the layer before).
fn stages_of(assignment: &[usize], join: impl Fn(usize) -> bool) -> Allocation {
    let mut stages: Vec<Stage> = Vec::new();
    for (i, &p) in assignment.iter().enumerate() {
        match stages.last_mut() {
            Some(s) if s.processor == p && join(i) => s.last = i + 1,
            _ => stages.push(Stage {
                first: i + 1,
                last: i + 1,
                processor: p,
            }),
        }
    }
    Allocation::new(stages)
}

/// One stage per maximal run of consecutive layers on one processor.
fn allocation_of(assignment: &[usize]) -> Allocation {
    stages_of(assignment, |_| true)
}

/// The allocation of an assignment with a stage per layer wherever two layers of one
/// processor share no stash (no `stash_overlap`, no shared tensor): with nothing shared,
/// a finer stage frees each layer's stash at its own backward and allocates it at its own
/// forward, and a pattern of the coarser stages is still one of the finer ones (their
/// operations back to back), so the finer allocation is never worse.
fn split_allocation(instance: &Instance, assignment: &[usize]) -> Allocation {
    if !instance.stash_shared.is_empty() {
        return allocation_of(assignment);
    }
    stages_of(assignment, |l| instance.stash_overlap(l) > 0.0)
}

/// Most stage boundaries inside runs whose both choices the exact check tries (`2^k`
/// allocations per assignment) when the shared-tensor relaxation alone does not decide.
const MAX_OPEN_BOUNDARIES: usize = 3;

/// The boundaries (1-based: between layers `l` and `l + 1`) of an assignment's runs whose
/// two layers share a stashed tensor (`stash_overlap`): a stage may end there or not.
pub fn open_boundaries(instance: &Instance, assignment: &[usize]) -> Vec<usize> {
    (1..assignment.len())
        .filter(|&l| assignment[l - 1] == assignment[l] && instance.stash_overlap(l) > 0.0)
        .collect()
}

/// Every allocation of an assignment that can be the best one: a stage per layer, except
/// that each of the `open` boundaries may be cut or not (`2^k` allocations).
pub fn candidate_allocations(assignment: &[usize], open: &[usize]) -> Vec<Allocation> {
    (0..1usize << open.len())
        .map(|mask| {
            stages_of(assignment, |l| {
                open.iter()
                    .position(|&c| c == l)
                    .is_some_and(|k| mask & (1 << k) != 0)
            })
        })
        .collect()
}

/// The shared-tensor relaxation of an assignment: the instance in which each layer after an
/// `open` boundary is charged its stash less the tensor it shares with the layer before
/// (overlaps then all zero), to be scheduled with a stage per layer.
///
/// Every plan of every allocation in [`candidate_allocations`] is a plan of this relaxation
/// at the same period: where a candidate cuts the boundary, the relaxation charges the
/// second layer less; where it merges the two layers into one stage, the stage's forward
/// and backward are the layers' operations back to back, and the relaxation charges the
/// first layer its whole stash and the second its stash less the shared tensor, each over
/// its own window, which lies inside the stage's: never more than the stage keeps. So a
/// proof that the relaxation has no pattern at a period holds for all `2^k` allocations at
/// once.
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

/// Whether exact checks can answer on this instance: none when tensors are shared between
/// layers further apart (`stash_shared`), whose stages [`candidate_allocations`] does not
/// cover.
fn exact_checks_may_apply(instance: &Instance) -> bool {
    instance.stash_shared.is_empty()
}

/// The neighbours of an assignment (module docs), canonical, without repeats.
fn neighbours(assignment: &[usize], processors: usize) -> Vec<Vec<usize>> {
    let n = assignment.len();
    let used = assignment.iter().copied().max().map_or(0, |m| m + 1);
    let targets = used.min(processors - 1) + 1; // the used processors and one fresh one
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |a: Vec<usize>| {
        let c = canonical(&a);
        if seen.insert(c.clone()) {
            out.push(c);
        }
    };
    // Runs of consecutive layers on one processor (0-based, inclusive).
    let runs: Vec<(usize, usize)> = allocation_of(assignment)
        .stages
        .iter()
        .map(|s| (s.first - 1, s.last - 1))
        .collect();
    // Move one layer to another processor (a cut shifted by one layer, or a layer split
    // off onto a processor of its own).
    for l in 0..n {
        for q in 0..targets {
            if q != assignment[l] {
                let mut a = assignment.to_vec();
                a[l] = q;
                push(a);
            }
        }
    }
    // Move a run to another processor.
    for &(first, last) in &runs {
        for q in 0..targets {
            if q != assignment[first] {
                let mut a = assignment.to_vec();
                a[first..=last].iter_mut().for_each(|p| *p = q);
                push(a);
            }
        }
    }
    // Exchange the processors of two runs.
    for (i, &(f1, l1)) in runs.iter().enumerate() {
        for &(f2, l2) in &runs[i + 1..] {
            let (p1, p2) = (assignment[f1], assignment[f2]);
            if p1 != p2 {
                let mut a = assignment.to_vec();
                a[f1..=l1].iter_mut().for_each(|p| *p = p2);
                a[f2..=l2].iter_mut().for_each(|p| *p = p1);
                push(a);
            }
        }
    }
    out.retain(|a| a != &canonical(assignment));
    out
}

impl Planner for BestPlanner {
    fn name(&self) -> String {
        "best".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        let started = Instant::now();
        let deadline = started + self.time_limit;
        let left = || deadline.saturating_duration_since(Instant::now());
        let (instance, platform) = (problem.instance, problem.platform);
        let layers = instance.len();
        let mut messages: Vec<String> = Vec::new();

        let mut incumbent: Option<Incumbent> = None;
        // Judges a plan and keeps it when it beats the incumbent.
        let offer = |inc: &mut Option<Incumbent>,
                     allocation: Allocation,
                     pattern: Pattern,
                     source: &str| {
            let j = judge(instance, platform, &allocation, &pattern);
            if !j.valid {
                return false;
            }
            if inc.as_ref().is_none_or(|i| j.period < i.period()) {
                *inc = Some(Incumbent {
                    allocation,
                    pattern,
                    source: source.to_string(),
                });
                return true;
            }
            false
        };
        // 1. The contiguous optimum (exact, milliseconds): the first incumbent, and the
        // upper end of the bound's bisection.
        let contiguous = contiguous_optimum(
            instance,
            platform,
            Some(left().min(Duration::from_secs(10))),
        )?;
        if let Some((a, p)) = contiguous.best {
            offer(&mut incumbent, a, p, "contiguous optimum");
        }
        let milp_with = |limit: Duration| MilpOptions {
            time_limit: Some(limit),
            ..self.milp.clone()
        };
        // MadPipe's two plans (each cut to a few seconds).
        let madpipe = |inc: &mut Option<Incumbent>| {
            for (label, full) in [("madpipe", false), ("madpipe-g", true)] {
                if left().is_zero() {
                    break;
                }
                let planner = MadPipePlanner {
                    config: MadPipeConfig {
                        special_full_batches: full,
                        ..MadPipeConfig::default()
                    },
                    milp: milp_with(left().min(Duration::from_secs(5)) / 2),
                    remap_stages: false,
                };
                if let Ok(Outcome::Found(sol)) = planner.plan(problem) {
                    if let (Placement::Stages(allocation), Some(p)) = (sol.placement, sol.pattern) {
                        offer(inc, allocation, p, label);
                    }
                }
            }
        };
        // 2. Where the contiguous optimum has no plan, MadPipe's plans come before the bound:
        // a known period lets the bound bisect below it instead of spending its time on a
        // proof that no period fits.
        let madpipe_first = incumbent.is_none();
        if madpipe_first {
            madpipe(&mut incumbent);
        }
        // 3. The bound, with at most two thirds of the time.
        let mut pool: Vec<Premise> = Vec::new();
        let bound: GlobalBound = global_lower_bound_learning(
            instance,
            platform,
            &BoundOptions {
                time_limit: Some((self.time_limit * 2 / 3).min(left())),
                threads: self.milp.threads,
                known_period: incumbent.as_ref().map(Incumbent::period),
                ..BoundOptions::default()
            },
            &mut pool,
        )?;
        if bound.infeasible {
            if let Some(i) = &incumbent {
                return Err(crate::error::Error::Internal(format!(
                    "the global bound says no plan fits, yet {} has a valid plan of period {} s",
                    i.source,
                    i.period()
                )));
            }
            return Ok(Outcome::Infeasible {
                reason: format!(
                    "no allocation fits the case at any period: {}",
                    bound.method
                ),
                lower_bound: None,
            });
        }
        let mut lower = bound.lower_bound;
        let precision = 1e-3;
        let closed_at = |inc: &Option<Incumbent>, lower: Seconds| {
            inc.as_ref()
                .is_some_and(|i| i.period() <= lower * (1.0 + precision))
        };
        let closed = |inc: &Option<Incumbent>| closed_at(inc, lower);

        // 4. MadPipe's plans, unless they came first.
        if !madpipe_first && !closed(&incumbent) {
            madpipe(&mut incumbent);
        }
        let mut tried: HashSet<Vec<usize>> = HashSet::new();
        let mut schedules = 0usize;
        // Asks the scheduling MILP for a pattern of `allocation` below the incumbent.
        let attempt = |inc: &mut Option<Incumbent>,
                       allocation: Allocation,
                       source: &str,
                       schedules: &mut usize|
         -> crate::error::Result<bool> {
            let cutoff = inc.as_ref().map(|i| i.period());
            let limit = left().min(Duration::from_secs(10));
            if limit.is_zero() {
                return Ok(false);
            }
            *schedules += 1;
            let out = schedule_allocation_below(
                instance,
                platform,
                &allocation,
                &milp_with(limit),
                cutoff,
            )?;
            Ok(match out.pattern {
                Some(p) => offer(inc, allocation, p, source),
                None => false,
            })
        };
        let bounded = |allocation: Allocation| {
            let g = BatchGraph::new(instance, platform, &allocation);
            (allocation_lower_bound(&g, platform.memory), allocation)
        };
        // 5. Seeds in increasing order of their allocation bound: the incumbent with a stage
        // per layer (finer stages free stashes earlier, at the price of keeping a tensor
        // two layers share twice), and the relaxation's assignments (each passed the exact
        // windows at the period it was found at).
        let mut seeds: Vec<(f64, Allocation)> = Vec::new();
        if let Some(i) = &incumbent {
            if instance.stash_shared.is_empty() {
                let finest = stages_of(&assignment_of(&i.allocation, layers), |_| false);
                if finest.stages.len() > i.allocation.stages.len() {
                    seeds.push(bounded(finest));
                }
            }
        }
        for a in &bound.candidates {
            let a = canonical(a);
            if tried.insert(a.clone()) {
                seeds.push(bounded(split_allocation(instance, &a)));
            }
        }
        seeds.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (b, allocation) in seeds {
            let cutoff = incumbent.as_ref().map_or(f64::INFINITY, |i| i.period());
            if closed(&incumbent) || left().is_zero() || b >= cutoff * (1.0 - precision) {
                break;
            }
            attempt(&mut incumbent, allocation, "seed", &mut schedules)?;
        }

        // 6. Local search around the incumbent.
        let mut stopped_by_clock = false;
        'search: while let Some(current) = incumbent
            .as_ref()
            .map(|i| canonical(&assignment_of(&i.allocation, layers)))
        {
            if closed(&incumbent) {
                break;
            }
            tried.insert(current.clone());
            let cutoff = incumbent.as_ref().map_or(f64::INFINITY, |i| i.period());
            let mut candidates: Vec<(f64, Allocation, Vec<usize>)> =
                neighbours(&current, platform.processors)
                    .into_iter()
                    .filter(|a| !tried.contains(a))
                    .filter_map(|a| {
                        let (b, allocation) = bounded(split_allocation(instance, &a));
                        (b < cutoff * (1.0 - precision)).then_some((b, allocation, a))
                    })
                    .collect();
            candidates.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut improved = false;
            for (_, allocation, a) in candidates {
                if left().is_zero() {
                    stopped_by_clock = true;
                    break 'search;
                }
                // The incumbent (hence the cutoff the candidates were bounded against)
                // changes only on an improvement, which ends this pass.
                tried.insert(a);
                if attempt(&mut incumbent, allocation, "local search", &mut schedules)? {
                    improved = true;
                    break;
                }
            }
            if !improved {
                break;
            }
        }
        // 7. Exact checks: is there any plan below the incumbent? The relaxation's loop at
        // just below its period, each assignment that passes scheduled exactly
        // ([`decide_period`]): a plan found becomes the incumbent and the question is asked
        // again below it; "no plan" closes the case.
        let mut proofs = 0usize;
        if !closed(&incumbent) && !exact_checks_may_apply(instance) {
            messages.push(
                "exact checks not tried: the instance shares tensors between layers further \
                 apart than neighbours (stash_shared)"
                    .to_string(),
            );
        }
        if !closed(&incumbent) && exact_checks_may_apply(instance) {
            let relax = Relaxation::new(instance, platform);
            while let Some(known) = incumbent.as_ref().map(Incumbent::period) {
                if closed_at(&incumbent, lower) || left().is_zero() {
                    break;
                }
                let target = known / (1.0 + 0.999 * precision);
                // Ask the scheduling MILP just above the target, so that "none below its
                // cutoff" covers the target itself.
                let sched_precision = self.milp.period_precision;
                let cutoff = target / (1.0 - sched_precision) * (1.0 + 1e-9);
                // Asks the scheduling MILP for a pattern of `allocation` (of `on`, the instance
                // or its shared-tensor relaxation) at the target or below: `Ok(None)` when
                // proven to have none, `Ok(Some(p))` with a pattern below the incumbent, and
                // `Err(())` when it cannot say (time, or only patterns above).
                let mut ask =
                    |on: &Instance,
                     allocation: &Allocation|
                     -> crate::error::Result<Result<Option<Pattern>, ()>> {
                        let limit = left(); // an answer cut short ends the phase
                        if limit.is_zero() {
                            return Ok(Err(()));
                        }
                        schedules += 1;
                        proofs += 1;
                        let out = schedule_allocation_below(
                            on,
                            platform,
                            allocation,
                            &milp_with(limit),
                            Some(cutoff),
                        )?;
                        // Proven: no pattern at the target or below (the bisection's bound), or
                        // none at any period (memory, before any solve).
                        let no_plan_at_all =
                            out.pattern.is_none() && out.status == SolveStatus::Infeasible;
                        if out.lower_bound >= target || no_plan_at_all {
                            return Ok(Ok(None));
                        }
                        Ok(out.pattern.filter(|p| p.period < known).map(Some).ok_or(()))
                    };
                let mut exact = |a: &[usize]| -> crate::error::Result<Verdict> {
                    let open = open_boundaries(instance, a);
                    if !open.is_empty() {
                        // One MILP for all 2^k allocations: the shared-tensor relaxation.
                        let split = stages_of(a, |_| false);
                        let relaxed = shared_tensor_relaxation(instance, &open);
                        match ask(&relaxed, &split)? {
                            Ok(None) => return Ok(Verdict::NoPlan),
                            Ok(Some(p)) => {
                                // Its pattern may fit the instance itself.
                                if offer(&mut incumbent, split, p, "exact check") {
                                    return Ok(Verdict::Plan);
                                }
                            }
                            Err(()) => {}
                        }
                        if open.len() > MAX_OPEN_BOUNDARIES {
                            return Ok(Verdict::Unknown);
                        }
                    }
                    let mut verdict = Verdict::NoPlan;
                    for allocation in candidate_allocations(a, &open) {
                        match ask(instance, &allocation)? {
                            Ok(None) => {}
                            Ok(Some(p)) => {
                                if offer(&mut incumbent, allocation, p, "exact check") {
                                    return Ok(Verdict::Plan);
                                }
                                verdict = Verdict::Unknown;
                            }
                            Err(()) => verdict = Verdict::Unknown,
                        }
                    }
                    Ok(verdict)
                };
                match decide_period(
                    &relax,
                    target,
                    self.milp.threads,
                    Some(left()),
                    &mut pool,
                    &mut exact,
                )? {
                    Decision::NoPlan => lower = lower.max(target),
                    Decision::Plan(_) => {}
                    Decision::Undecided(why) => {
                        messages.push(format!("exact checks stopped: {why}"));
                        break;
                    }
                }
            }
        }
        if left().is_zero() && !closed_at(&incumbent, lower) {
            stopped_by_clock = true;
        }
        messages.push(format!(
            "global bound {:.6} s ({}, {} MILPs); {} allocations scheduled, {} of them in exact checks",
            lower, bound.method, bound.solves, schedules, proofs
        ));
        let Some(best) = incumbent else {
            return Ok(Outcome::NoPlanWithinLimit {
                reason: format!(
                    "no plan found within {:?} (none proven impossible: {})",
                    self.time_limit,
                    messages.join("; ")
                ),
                lower_bound: Some(lower),
            });
        };
        messages.push(format!("best plan from: {}", best.source));
        let mut sol = Solution::new(best.allocation, Some(best.pattern));
        sol.lower_bound = Some(lower);
        sol.stopped_at_limit = stopped_by_clock || !bound.complete;
        sol.messages = messages;
        Ok(Outcome::Found(sol))
    }

    fn bound_is_global(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_and_runs() {
        assert_eq!(canonical(&[2, 2, 0, 1, 0]), vec![0, 0, 1, 2, 1]);
        let a = allocation_of(&[0, 0, 1, 0]);
        assert_eq!(a.stages.len(), 3);
        assert_eq!(assignment_of(&a, 4), vec![0, 0, 1, 0]);
        let n = neighbours(&[0, 0, 1, 1], 3);
        assert!(n.contains(&vec![0, 0, 0, 1]));
        assert!(n.contains(&vec![0, 1, 1, 1]));
        assert!(n.contains(&vec![0, 0, 0, 0]));
        assert!(n.contains(&vec![0, 0, 1, 2]));
        assert!(!n.contains(&vec![0, 0, 1, 1]));
        assert!(n.iter().all(|a| a == &canonical(a)));
    }
}
