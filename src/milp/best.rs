//! `best`: the best plan pipeopt can find for a case within a time limit, over every
//! allocation (contiguous or not), reported with the global lower bound of
//! [`global_bound`](crate::milp::global_bound) so that its distance to the optimum is known.
//!
//! A portfolio, then a local search, every candidate judged:
//! 0. **The coarser level** of a chain that has one (an op-level chain: its module
//!    boundaries, the block-level chain, or its single-tensor cuts: [`multilevel`]): `best`
//!    on the chain coarsened there, with `COARSE_LEVEL_SHARE` of the time, its plan lifted to
//!    the chain (the same pattern, the same period): the first incumbent. The phases below then search the
//!    chain itself (the bound with two thirds of the time the coarser level left).
//! 1. **The contiguous optimum** (exact, milliseconds), the first incumbent (or a better one).
//! 2. **The bound**, with at most two thirds of the time: the relaxation of `global_bound`
//!    either proves that no plan fits the case (reported as infeasible, with the proof) or
//!    gives a lower bound and the assignments its loop found feasible on the way. MadPipe's
//!    plans (below; a fraction of a second) are made first, so that the bound knows the
//!    best period of the portfolio's quick plans: below it, its closing probe asks whether
//!    any plan is 5% shorter, and where the contiguous optimum has no plan, the bound
//!    bisects below MadPipe's instead of spending its time on a proof that no period fits
//!    (MadPipe is skipped only where no plan is known and the bound's packing search proves
//!    at once that no plan fits at any period). A bound that says "infeasible" of a case
//!    with a judged plan is an internal error, never a result.
//! 3. **Seeds**: MadPipe's two phases with the paper's and with the full (`g` batches)
//!    estimate of its special processor (Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory
//!    Aware Dynamic Programming Algorithm for Pipelined Model Parallelism*, 2022), and the
//!    general MILP on 8 groups of layers (`ilp --coarsen 8`, at most 1 s; its
//!    non-contiguous allocations of whole groups beat every other seed on some
//!    memory-bound cases); then, in
//!    increasing order of their allocation bound, the incumbent's assignment and the
//!    relaxation's assignments, each scheduled over every stage structure of its runs
//!    ([`schedule_assignment_below`]: a stage per layer, consecutive layers that share a
//!    tensor free to form one stage, all decided by one MILP per period), together within
//!    a quarter of the time left, at least 10 s (`SEEDS_SHARE`), in two passes: each seed at
//!    most `SEED_FIRST_LIMIT` (3 s) first, then those whose MILP that limit cut short, up
//!    to `SCHEDULE_LIMIT` (10 s) each, with what the phase has left (the seed with the
//!    lowest bound is often one whose runs interleave and whose MILP cannot decide).
//!    Then, on chains of at most `FINEST_SEARCH_LAYERS` layers, the assignments with the
//!    lowest thresholds of the relaxation's closed forms, found by simulated annealing from
//!    the first seeds ([`anneal_assignments`]), each scheduled one stage per run below the
//!    incumbent, lowest threshold first, within a third of the time left.
//! 4. **Local search** around the incumbent (a large-neighbourhood search on the
//!    assignment): move one layer to another processor (which shifts a cut or opens a stage),
//!    move a whole run of layers to another processor, exchange the processors of two runs.
//!    Each candidate assignment is first bounded by
//!    [`allocation_lower_bound`](crate::model::bounds::allocation_lower_bound) (loads and
//!    memory windows, microseconds; on its stage structures' shared-tensor relaxation) and
//!    dropped when that bound reaches the incumbent; the others are taken in increasing
//!    order of bound and asked by the scheduling MILP for a pattern below the incumbent.
//!    The first improvement becomes the incumbent and the search restarts around it.
//!    When it stops with time left and the general MILP on groups was cut short, that MILP
//!    runs again (at most 3 s), and the search again around its plan if it is better.
//!
//! 5. **Exact checks** (docs/bounds.md): with time left and the gap open, is there a plan
//!    below a period `T`? [`decide_period`] runs the bound's loop at `T` and hands every
//!    assignment that passes the relaxation to the scheduling MILP over every stage
//!    structure of the assignment at `T` (one MILP, exact). A pattern found becomes the
//!    incumbent and the question is asked again; an assignment proven to have none is
//!    excluded; no assignment left proves that no plan is at `T` or below. While the
//!    incumbent is more than `CLOSING_GAP` (5%) above the bound, `T` is first that much
//!    below the incumbent (no assignment left there closes the case); then the geometric
//!    middle of the bound and the incumbent while the gap is wider than `HALVING_GAP`
//!    (each answer halves it); then just below the incumbent (no assignment left proves it
//!    optimal, to 0.1%).
//!
//! The search stops when the incumbent is within the bound's precision of the global
//! bound (proven optimal), when the exact checks cannot decide, or at the time limit
//! (status `timeout`, the best judged plan reported). With an [`Extension`], a case whose
//! exact checks end open with its plan near the bound gets them once more, up to the
//! extension's end, the closing question first with all of that time. With a gap tolerance
//! (`gap_tolerance`, from `gap_tolerance_after` on), every phase, the bound's bisection
//! included, also stops once the plan is proven within it of the bound: a finished answer
//! (status `valid`), with less time spent on a case that is closed enough. Runs are a pure
//! function of the case and the time limit, except where the limit cuts a solve.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::algorithm::api::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::judge::judge;
use crate::milp::contiguous::contiguous_optimum;
use crate::milp::fixed_allocation::{
    assignment_structures, runs_of, schedule_assignment_below, structures_lower_bound,
};
use crate::milp::general::general_optimum;
use crate::milp::global_bound::anneal::{anneal_assignments, canonical, AnnealOptions};
use crate::milp::global_bound::{
    decide_period, global_lower_bound_learning, infinite, BoundOptions, Decision, GlobalBound,
    Learnt, Relaxation, Verdict, CLOSING_GAP,
};
use crate::milp::madpipe::MadPipePlanner;
use crate::milp::multilevel;
use crate::milp::pattern_milp::{PatternMilp, Scope};
use crate::milp::{MilpOptions, SolveStatus};
use crate::model::{Allocation, Instance, Pattern, Placement};
use crate::partition::madpipe::MadPipeConfig;
use crate::units::Seconds;

/// The default wall-clock limit of `best`.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(60);

/// The `best` algorithm (module docs).
#[derive(Debug, Clone)]
pub struct BestPlanner {
    pub time_limit: Duration,
    pub milp: MilpOptions,
    /// Stop once the plan is proven within this relative gap of the global bound (`0.05`:
    /// at most 5% above the optimum). At most [`PRECISION`], the default, asks for a plan
    /// proven optimal to that precision.
    pub gap_tolerance: f64,
    /// The tolerance applies from this long after the start; before, only a plan proven
    /// optimal stops the search (so that the cases proven optimal quickly keep their tight
    /// bounds, and the others give their time back).
    pub gap_tolerance_after: Duration,
    /// More time for the exact checks of a case left open near its bound (`None`: none).
    pub extension: Option<Extension>,
}

/// More time for a case whose plan is near its bound ([`BestPlanner::extension`]): when the
/// exact checks end (at the time limit, or undecided before it) with the plan not within the
/// gap tolerance but at most `below_gap` above the global bound, they start again from the
/// closing question and go on until `until` after the start (the whole of it for that
/// question, whose "no plan" closes the case). Once per run. On a grid of cases,
/// the time goes where it can close one, not to every case alike.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extension {
    /// The whole time a case may take with the extension (more than the time limit).
    pub until: Duration,
    /// Extended only when the plan is at most this relative gap above the bound.
    pub below_gap: f64,
}

/// The gap below which an extension applies when `--extend-below-gap` is not given.
pub const DEFAULT_EXTEND_BELOW_GAP: f64 = 0.10;

impl Default for BestPlanner {
    fn default() -> Self {
        BestPlanner {
            time_limit: DEFAULT_TIME_LIMIT,
            milp: MilpOptions::default(),
            gap_tolerance: PRECISION,
            gap_tolerance_after: Duration::ZERO,
            extension: None,
        }
    }
}

/// The relative precision to which `best` proves a plan optimal: a plan at most this much
/// above the global bound is optimal to it.
pub const PRECISION: f64 = 1e-3;

/// `gap` as a gap tolerance: a finite relative gap of 0 or more (0.05 is 5%), or why not.
/// The one check of `--gap-tolerance`, on the command line and in experiment files.
pub fn checked_gap_tolerance(gap: f64) -> Result<f64, String> {
    if gap.is_finite() && gap >= 0.0 {
        Ok(gap)
    } else {
        Err(format!(
            "must be a relative gap of 0 or more (0.05 is 5%), got {gap}"
        ))
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

/// The seed of the general MILP: this many groups of layers ([`general_optimum`]), at most
/// `COARSE_FIRST_LIMIT` before the seeds and, when that did not decide it, at most
/// `COARSE_LIMIT` again after the local search. Its median solve on the memory grid is
/// 0.2 s; run for 3 s before the seeds, it found three shorter plans there but took the
/// time that the plans of two other cases needed (docs/bounds.md).
const COARSE_GROUPS: usize = 8;
const COARSE_FIRST_LIMIT: Duration = Duration::from_secs(1);
const COARSE_LIMIT: Duration = Duration::from_secs(3);

/// Simulated annealing on the relaxation's thresholds ([`anneal_assignments`]): runs (one
/// from each of the first seeds), iterations per run, the assignments it offers as seeds,
/// and the most time it takes (a quarter of what is left at most).
const ANNEAL_STARTS: usize = 3;
const ANNEAL_ITERATIONS: u64 = 4000;
const ANNEAL_KEEP: usize = 4;
const ANNEAL_LIMIT: Duration = Duration::from_millis(1500);

/// Which stage structures of an assignment the scheduling MILP decides among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Structures {
    /// Every structure ([`schedule_assignment_below`]) on chains of at most
    /// `FINEST_SEARCH_LAYERS` layers, the runs cut by [`refined_runs`] on longer ones.
    Every,
    /// One stage per run of layers (a much smaller MILP).
    Runs,
}

/// The longest one scheduling MILP of the seeds and of the local search may take.
const SCHEDULE_LIMIT: Duration = Duration::from_secs(10);

/// The longest a seed's scheduling MILP may take on the seeds' first pass; the seeds it cut
/// short are asked again, up to `SCHEDULE_LIMIT` each, with what the phase has left. The
/// seed with the lowest bound is often an assignment whose runs interleave and whose MILP
/// cannot decide within the limit: on ResNet-101 on 4 processors at 16 GiB, 24 GB/s, one
/// such seed took the whole phase (10 s) and the grid's plan stayed at 0.0647 s, while the
/// third seed (nearly contiguous) gives 0.0550 s in 2.4 s, 1.4% above the bound.
const SEED_FIRST_LIMIT: Duration = Duration::from_secs(3);

/// What scheduling one assignment below the incumbent gave: whether its plan became the
/// incumbent, and whether the MILP's time limit stopped it before it decided.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    improved: bool,
    cut_short: bool,
}

/// What [`seeds_in_two_passes`] hears of one seed.
#[derive(Debug, Clone, Copy)]
enum SeedStep {
    /// Scheduled (within the cap it was given).
    Tried(Attempt),
    /// Not scheduled: its bound cannot beat the incumbent.
    Skipped,
    /// The seeds end here (the plan is within the gap asked for, or the time is up).
    Stop,
}

/// The seeds, in their order, each first with at most `SEED_FIRST_LIMIT`, then those it cut
/// short, in the same order, with at most `SCHEDULE_LIMIT`; every cap also within what the
/// phase has left (`phase_left`), and nothing once that is zero. `step` schedules one seed
/// (its bound, its assignment, its cap) or says to skip it or to stop. So one seed whose
/// MILP cannot decide takes at most `SEED_FIRST_LIMIT` from the others before they are tried.
fn seeds_in_two_passes(
    seeds: Vec<(f64, Vec<usize>)>,
    phase_left: impl Fn() -> Duration,
    mut step: impl FnMut(f64, &[usize], Duration) -> crate::error::Result<SeedStep>,
) -> crate::error::Result<()> {
    let mut pass = seeds;
    for per_seed in [SEED_FIRST_LIMIT, SCHEDULE_LIMIT] {
        let mut cut_short = Vec::new();
        for (b, assignment) in pass {
            let cap = per_seed.min(phase_left());
            if cap.is_zero() {
                return Ok(());
            }
            match step(b, &assignment, cap)? {
                SeedStep::Stop => return Ok(()),
                SeedStep::Skipped => {}
                SeedStep::Tried(tried) => {
                    if tried.cut_short && per_seed < SCHEDULE_LIMIT {
                        cut_short.push((b, assignment));
                    }
                }
            }
        }
        pass = cut_short;
    }
    Ok(())
}

/// The exact checks ask about the middle of the bound and the incumbent while the gap is
/// wider than this, and just below the incumbent after.
const HALVING_GAP: f64 = 0.004;

/// The local search (with the general MILP on groups) takes at most this share of the
/// time left when it starts, so that the exact checks, which both find plans and prove
/// them, keep time on chains whose every-structure MILPs are slow; never less than one of
/// its MILPs may take ([`phase_limit`]).
const LOCAL_SEARCH_SHARE: f64 = 1.0 / 3.0;

/// The seeds together take at most this share of the time left when they start (never
/// less than one of their MILPs may take). Less than the local search's: on random chains
/// of 16 layers, with a third, the seeds' every-structure MILPs took 18 of 60 s and the
/// annealing after them was cut short before the plan that the exact checks then prove
/// optimal in 2 s (results/README.md, "How far exact reaches").
const SEEDS_SHARE: f64 = 1.0 / 4.0;

/// The most a phase with share `share` may take of the time `left`: that share of it, but
/// at least `SCHEDULE_LIMIT` (with the grid's 12 s, where the bound takes two thirds, a
/// share of the 4 s left cut the seeds' MILPs short and lost plans they find in 5-7 s).
fn phase_limit(left: Duration, share: f64) -> Duration {
    left.mul_f64(share).max(SCHEDULE_LIMIT)
}

/// Chains of at most this many layers are searched over every stage structure of an
/// assignment (a stage per layer, merges of layers that share a tensor decided by the
/// MILP); longer ones with their runs of layers cut into a few stages ([`refined_runs`]),
/// whose MILP is much smaller (a plan search then, not exact for the assignment).
const FINEST_SEARCH_LAYERS: usize = 40;

/// The most stages [`refined_runs`] cuts an assignment into.
const REFINED_STAGES: usize = 24;

/// [`refined_runs`] cuts runs only on chains of at most this many layers (a bound per
/// possible cut per step: op-level chains of 174-426 layers keep one stage per run).
const REFINED_MAX_LAYERS: usize = 100;

/// On chains longer than `FINEST_SEARCH_LAYERS`, the stage structure the seeds and the
/// local search schedule an assignment with, below the incumbent's period `cutoff`: its
/// runs of layers, each cut further where the allocation bound (loads and memory windows,
/// microseconds) says a finer stage helps most (it frees its stash at its own backward),
/// one cut at a time, while that bound is at or above `cutoff`, and then while a cut
/// lowers it by at least 1%; at most `REFINED_STAGES` stages. With one stage per run
/// alone, every neighbour of DenseNet-121's plans was bounded above the incumbent and the
/// local search ended at once (docs/bounds.md, "Plans on long chains").
fn refined_runs(
    instance: &Instance,
    platform: &crate::model::Platform,
    assignment: &[usize],
    cutoff: Option<Seconds>,
) -> Allocation {
    let mut allocation = runs_of(assignment);
    let Some(cutoff) = cutoff else {
        return allocation;
    };
    if assignment.len() > REFINED_MAX_LAYERS {
        return allocation;
    }
    // The allocation bound of exactly these stages (none merged).
    let bound_of = |a: &Allocation| structures_lower_bound(instance, platform, a, &[]);
    let mut bound = bound_of(&allocation);
    while allocation.stages.len() < REFINED_STAGES {
        let mut better: Option<(Seconds, Allocation)> = None;
        for (s, stage) in allocation.stages.iter().enumerate() {
            for last in stage.first..stage.last {
                let mut stages = allocation.stages.clone();
                stages[s].last = last;
                stages.insert(
                    s + 1,
                    crate::model::Stage {
                        first: last + 1,
                        last: stage.last,
                        processor: stage.processor,
                    },
                );
                let candidate = Allocation::new(stages);
                let b = bound_of(&candidate);
                if b < better.as_ref().map_or(bound, |(t, _)| *t) {
                    better = Some((b, candidate));
                }
            }
        }
        let Some((b, finer)) = better else {
            break;
        };
        if bound < cutoff && b > bound * 0.99 {
            break;
        }
        allocation = finer;
        bound = b;
    }
    allocation
}

/// Whether exact checks can answer on this instance: none when tensors are shared between
/// layers further apart (`stash_shared`), whose merged stages the scheduling MILP does not
/// model.
fn exact_checks_may_apply(instance: &Instance) -> bool {
    instance.stash_shared.is_empty()
}

/// A lower bound on the period of every stage structure of an assignment
/// ([`assignment_structures`]).
fn assignment_lower_bound(
    instance: &Instance,
    platform: &crate::model::Platform,
    assignment: &[usize],
) -> f64 {
    let (finest, mergeable) = assignment_structures(instance, assignment);
    structures_lower_bound(instance, platform, &finest, &mergeable)
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
    let runs: Vec<(usize, usize)> = runs_of(assignment)
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

/// The options of `best`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestOptions {
    /// Wall-clock limit of the whole portfolio (`--time-limit`; [`DEFAULT_TIME_LIMIT`]
    /// when not given).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// HiGHS threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Stop once the plan is proven within this relative gap of the global bound
    /// (`--gap-tolerance 0.05`: at most 5% above the optimum); by default, a plan proven
    /// optimal to [`PRECISION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_tolerance: Option<f64>,
    /// The gap tolerance applies only this long after the start (`--gap-tolerance-after
    /// 10s`); before, a plan proven optimal is sought. From the start when not given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub gap_tolerance_after: Option<Seconds>,
    /// A case left open with its plan near the bound (`--extend-below-gap`) gets its exact
    /// checks extended to this much time in all (`--extend-to 60s`); none when not given
    /// ([`Extension`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub extend_to: Option<Seconds>,
    /// The largest relative gap to the bound (0.1 is 10%) at which `--extend-to` applies;
    /// [`DEFAULT_EXTEND_BELOW_GAP`] when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_below_gap: Option<f64>,
}

impl AlgorithmOptions for BestOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        let milp = MilpOptions::from_limits(self.time_limit, self.threads)?;
        let gap_tolerance = self
            .gap_tolerance
            .map_or(Ok(PRECISION), checked_gap_tolerance)
            .map_err(|why| crate::InputError::new("--gap-tolerance", "", why))?;
        let gap_tolerance_after = match self.gap_tolerance_after {
            None => Duration::ZERO,
            Some(t) => Duration::try_from_secs_f64(t).map_err(|_| {
                crate::InputError::new(
                    "--gap-tolerance-after",
                    "",
                    format!("must be a duration of 0 s or more, got {t}"),
                )
            })?,
        };
        let time_limit = milp.time_limit.unwrap_or(DEFAULT_TIME_LIMIT);
        let below_gap = self
            .extend_below_gap
            .map_or(Ok(DEFAULT_EXTEND_BELOW_GAP), checked_gap_tolerance)
            .map_err(|why| crate::InputError::new("--extend-below-gap", "", why))?;
        let extension = match self.extend_to {
            None if self.extend_below_gap.is_some() => {
                return Err(crate::InputError::new(
                    "--extend-below-gap",
                    "",
                    "applies only with --extend-to (the time a case near its bound may take)",
                ))
            }
            None => None,
            Some(t) => match Duration::try_from_secs_f64(t) {
                Ok(until) if until > time_limit => Some(Extension { until, below_gap }),
                _ => {
                    return Err(crate::InputError::new(
                        "--extend-to",
                        "",
                        format!(
                            "must be a duration longer than the time limit ({} s), got {t}",
                            time_limit.as_secs_f64()
                        ),
                    ))
                }
            },
        };
        Ok(Box::new(BestPlanner {
            time_limit,
            milp: MilpOptions {
                time_limit: None,
                ..milp
            },
            gap_tolerance,
            gap_tolerance_after,
            extension,
        }))
    }
}

impl Planner for BestPlanner {
    fn name(&self) -> String {
        "best".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        let started = Instant::now();
        // Moved later once, by an extension ([`Extension`]).
        let deadline = std::cell::Cell::new(started + self.time_limit);
        // Seconds spent in each phase, for the report.
        let mut phases: Vec<(&str, f64)> = Vec::new();
        let mut phase_started = Instant::now();
        let mut lap = |name: &'static str, phases: &mut Vec<(&str, f64)>| {
            phases.push((name, phase_started.elapsed().as_secs_f64()));
            phase_started = Instant::now();
        };
        let left = || deadline.get().saturating_duration_since(Instant::now());
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
        // 0. On a chain with a coarser level (an op-level chain), `best` on that level first,
        // its plan lifted: the first incumbent, which every later phase can only improve.
        let mut coarse_spent = Duration::ZERO;
        if let Some(level) = multilevel::coarser_level(problem) {
            let share = self.time_limit.mul_f64(multilevel::COARSE_LEVEL_SHARE);
            let lifted = multilevel::lifted_plan(self, problem, &level, share)?;
            messages.push(match &lifted {
                Some(l) => format!(
                    "coarser level: {} layers, plan of period {} s lifted",
                    l.coarse_layers, l.pattern.period
                ),
                None => format!(
                    "coarser level: {} layers, no plan",
                    level.groups.len()
                ),
            });
            if let Some(lifted) = lifted {
                let source = format!(
                    "the chain coarsened to {} layers ({}), lifted",
                    lifted.coarse_layers, lifted.source
                );
                offer(&mut incumbent, lifted.allocation, lifted.pattern, &source);
            }
            lap("coarser level", &mut phases);
            coarse_spent = started.elapsed();
        }
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
        lap("contiguous optimum", &mut phases);
        // Every MILP of the portfolio without HiGHS's feasibility jump: on the bound's
        // and the exact checks' feasibility models it took time that proofs needed
        // (docs/bounds.md, "Solver settings").
        let milp_with = |limit: Duration| MilpOptions {
            time_limit: Some(limit),
            feasibility_jump: false,
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
        // 2. MadPipe's plans come before the bound: the bound's closing probe asks whether a
        // plan 5% shorter than the best known exists, and where the contiguous optimum has
        // no plan, a known period lets the bound bisect below it instead of spending its
        // time on a proof that no period fits. Unless, with no plan known, the packing
        // search (milliseconds) proves at once that no plan fits: the bound then says so
        // without MadPipe's seconds.
        let no_plan_at_all = || {
            let relax = Relaxation::new(instance, platform);
            let limit = left().min(Duration::from_secs(1));
            infinite::Packing::new(&relax).decide(Some(Instant::now() + limit))
                == infinite::Answer::Infeasible
        };
        let madpipe_first = incumbent.is_some() || !no_plan_at_all();
        if madpipe_first {
            madpipe(&mut incumbent);
        }
        lap("MadPipe", &mut phases);
        // 3. The bound, with at most two thirds of the time (and no further than the gap
        // asked for needs).
        let tolerance = self.gap_tolerance.max(PRECISION);
        let tolerant_from = started + self.gap_tolerance_after;
        let stop_gap = || {
            if Instant::now() >= tolerant_from {
                tolerance
            } else {
                PRECISION
            }
        };
        let mut learnt = Learnt::default();
        let bound: GlobalBound = global_lower_bound_learning(
            instance,
            platform,
            &BoundOptions {
                time_limit: Some(
                    (self.time_limit.saturating_sub(coarse_spent) * 2 / 3).min(left()),
                ),
                threads: self.milp.threads,
                known_period: incumbent.as_ref().map(Incumbent::period),
                enough: incumbent
                    .as_ref()
                    .map(|i| (i.period() / (1.0 + tolerance), tolerant_from)),
                ..BoundOptions::default()
            },
            &mut learnt,
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
        let precision = PRECISION;
        // Whether the plan is within the gap asked for: every phase stops there.
        let closed_at = |inc: &Option<Incumbent>, lower: Seconds| {
            inc.as_ref()
                .is_some_and(|i| i.period() <= lower * (1.0 + stop_gap()))
        };
        let closed = |inc: &Option<Incumbent>| closed_at(inc, lower);

        lap("bound", &mut phases);
        // 4. MadPipe's plans, unless they came first; then the general MILP on a few groups
        // of layers (`ilp --coarsen 8`), whose non-contiguous allocations of whole groups
        // beat every other seed on some memory-bound cases: its plan, when better, is the
        // incumbent whose assignment the seeds and the local search start from.
        if !madpipe_first && !closed(&incumbent) {
            madpipe(&mut incumbent);
        }
        lap("MadPipe", &mut phases);
        // The general MILP on groups within `limit`: whether its plan became the incumbent,
        // and whether it decided the groups' optimum.
        let coarse_seed =
            |inc: &mut Option<Incumbent>, limit: Duration| -> crate::error::Result<(bool, bool)> {
                let coarse =
                    general_optimum(instance, platform, Some(COARSE_GROUPS), &milp_with(limit))?;
                let decided = matches!(
                    coarse.status,
                    SolveStatus::Optimal | SolveStatus::Infeasible
                );
                let improved = coarse.best.is_some_and(|(allocation, pattern)| {
                    offer(inc, allocation, pattern, "general MILP on 8 groups")
                });
                Ok((improved, decided))
            };
        // Whether the general MILP on groups is to run again after the local search, with
        // more time: it has not decided the groups' optimum yet.
        let mut coarse_open = layers > COARSE_GROUPS;
        if coarse_open && !closed(&incumbent) && !left().is_zero() {
            coarse_open = !coarse_seed(&mut incumbent, left().min(COARSE_FIRST_LIMIT))?.1;
            lap("general MILP on groups", &mut phases);
        }
        let mut tried: HashSet<Vec<usize>> = HashSet::new();
        let mut schedules = 0usize;
        // Asks the scheduling MILP for a pattern of `assignment` below the incumbent, over
        // every stage structure of it ([`assignment_structures`]; on chains longer than
        // `FINEST_SEARCH_LAYERS`, its runs of layers cut by [`refined_runs`]).
        let attempt = |inc: &mut Option<Incumbent>,
                       assignment: &[usize],
                       source: &str,
                       schedules: &mut usize,
                       cap: Duration,
                       structures: Structures|
         -> crate::error::Result<Attempt> {
            let cutoff = inc.as_ref().map(|i| i.period());
            let limit = left().min(cap);
            if limit.is_zero() {
                return Ok(Attempt {
                    improved: false,
                    cut_short: true,
                });
            }
            *schedules += 1;
            let (allocation, out) =
                if layers <= FINEST_SEARCH_LAYERS && structures == Structures::Every {
                    schedule_assignment_below(
                        instance,
                        platform,
                        assignment,
                        &milp_with(limit),
                        cutoff,
                    )?
                } else {
                    let stages = match structures {
                        Structures::Every => refined_runs(instance, platform, assignment, cutoff),
                        Structures::Runs => runs_of(assignment),
                    };
                    let out = crate::milp::fixed_allocation::schedule_allocation_below(
                        instance,
                        platform,
                        &stages,
                        &milp_with(limit),
                        cutoff,
                    )?;
                    (stages, out)
                };
            let cut_short = matches!(
                out.status,
                SolveStatus::LimitWithIncumbent | SolveStatus::NoSolutionWithinLimit
            );
            let improved = match out.pattern {
                Some(p) => offer(inc, allocation, p, source),
                None => false,
            };
            Ok(Attempt {
                improved,
                cut_short,
            })
        };
        let bounded = |assignment: Vec<usize>| {
            (
                assignment_lower_bound(instance, platform, &assignment),
                assignment,
            )
        };
        // 5. Seeds in increasing order of their bound: the incumbent's assignment over every
        // stage structure (finer stages free stashes earlier; consecutive layers that share a
        // tensor keep it once in one stage), and the relaxation's assignments (each passed
        // the relaxation at the period it was found at).
        let mut seeds: Vec<(f64, Vec<usize>)> = Vec::new();
        if let Some(i) = &incumbent {
            let a = canonical(&assignment_of(&i.allocation, layers));
            if tried.insert(a.clone()) {
                seeds.push(bounded(a));
            }
        }
        for a in bound.candidates.iter().rev() {
            let a = canonical(a);
            if tried.insert(a.clone()) {
                seeds.push(bounded(a));
            }
        }
        seeds.sort_by(|x, y| x.0.total_cmp(&y.0));
        let starts: Vec<Vec<usize>> = seeds
            .iter()
            .map(|(_, a)| a.clone())
            .take(ANNEAL_STARTS)
            .collect();
        // Two passes ([`seeds_in_two_passes`]), within the phase.
        let seeds_until = Instant::now() + phase_limit(left(), SEEDS_SHARE);
        seeds_in_two_passes(
            seeds,
            || seeds_until.saturating_duration_since(Instant::now()),
            |b, assignment, cap| {
                let cutoff = incumbent.as_ref().map_or(f64::INFINITY, |i| i.period());
                if closed(&incumbent) || left().is_zero() {
                    return Ok(SeedStep::Stop);
                }
                if b >= cutoff * (1.0 - precision) {
                    return Ok(SeedStep::Skipped);
                }
                Ok(SeedStep::Tried(attempt(
                    &mut incumbent,
                    assignment,
                    "seed",
                    &mut schedules,
                    cap,
                    Structures::Every,
                )?))
            },
        )?;
        lap("seeds", &mut phases);
        // 6. The assignments whose relaxation thresholds are lowest, by simulated annealing
        // from the seeds' assignments, lowest threshold first, scheduled one stage per run
        // within a third of the time left (on chains of at most `FINEST_SEARCH_LAYERS`
        // layers: on longer ones they split into many runs whose stages interleave, and
        // schedule far above their thresholds).
        // The relaxation's closed forms, for the annealing and the exact checks.
        let relax = Relaxation::new(instance, platform);
        if !closed(&incumbent) && layers <= FINEST_SEARCH_LAYERS && !left().is_zero() {
            let hi = incumbent
                .as_ref()
                .map_or_else(|| relax.sequential_period(), Incumbent::period);
            let phase_end = Instant::now() + left() / 3;
            let annealed = anneal_assignments(
                &relax,
                lower,
                hi,
                &AnnealOptions {
                    starts,
                    iterations: ANNEAL_ITERATIONS,
                    deadline: Some(Instant::now() + left().mul_f64(0.25).min(ANNEAL_LIMIT)),
                    keep: ANNEAL_KEEP,
                    seed: layers as u64,
                },
            )
            .map_err(|e| crate::error::Error::Internal(format!("simulated annealing: {e}")))?;
            for (threshold, a) in annealed {
                let cutoff = incumbent.as_ref().map_or(f64::INFINITY, |i| i.period());
                let cap = phase_end.saturating_duration_since(Instant::now());
                if closed(&incumbent) || cap.is_zero() || threshold >= cutoff * (1.0 - precision) {
                    break;
                }
                // Not marked as tried: the local search may still schedule it over every
                // stage structure.
                if !tried.contains(&a) {
                    attempt(
                        &mut incumbent,
                        &a,
                        "annealing",
                        &mut schedules,
                        cap,
                        Structures::Runs,
                    )?;
                }
            }
            lap("annealing", &mut phases);
        }
        // 7. Local search around the incumbent; then, when its first run was cut short, the
        // general MILP on groups again with more time, and the local search again around
        // its plan when it is better.
        let mut stopped_by_clock = false;
        let search_until = Instant::now() + phase_limit(left(), LOCAL_SEARCH_SHARE);
        let search_left = || {
            search_until
                .saturating_duration_since(Instant::now())
                .min(left())
        };
        for round in 0..2 {
            if round == 1 {
                if !coarse_open || closed(&incumbent) || search_left().is_zero() {
                    break;
                }
                let (improved, _) = coarse_seed(&mut incumbent, search_left().min(COARSE_LIMIT))?;
                lap("general MILP on groups", &mut phases);
                if !improved {
                    break;
                }
            }
            'search: while let Some(current) = incumbent
                .as_ref()
                .map(|i| canonical(&assignment_of(&i.allocation, layers)))
            {
                if closed(&incumbent) {
                    break;
                }
                tried.insert(current.clone());
                let cutoff = incumbent.as_ref().map_or(f64::INFINITY, |i| i.period());
                let mut candidates: Vec<(f64, Vec<usize>)> =
                    neighbours(&current, platform.processors)
                        .into_iter()
                        .filter(|a| !tried.contains(a))
                        .map(bounded)
                        .filter(|(b, _)| *b < cutoff * (1.0 - precision))
                        .collect();
                candidates.sort_by(|x, y| x.0.total_cmp(&y.0));
                let mut improved = false;
                for (_, a) in candidates {
                    if left().is_zero() {
                        stopped_by_clock = true;
                        break 'search;
                    }
                    if search_left().is_zero() {
                        break 'search;
                    }
                    // The incumbent (hence the cutoff the candidates were bounded against)
                    // changes only on an improvement, which ends this pass.
                    tried.insert(a.clone());
                    if attempt(
                        &mut incumbent,
                        &a,
                        "local search",
                        &mut schedules,
                        SCHEDULE_LIMIT.min(search_left()),
                        Structures::Every,
                    )?
                    .improved
                    {
                        improved = true;
                        break;
                    }
                }
                if !improved {
                    break;
                }
            }
            lap("local search", &mut phases);
        }
        // 8. Exact checks: is there any plan below the incumbent? The relaxation's loop at
        // just below its period, each assignment that passes scheduled exactly over every
        // stage structure ([`decide_period`]): a plan found becomes the incumbent and the
        // question is asked again below it; "no plan" closes the case.
        let mut proofs = 0usize;
        if !closed(&incumbent) && !exact_checks_may_apply(instance) {
            messages.push(
                "exact checks not tried: the instance shares tensors between layers further \
                 apart than neighbours (stash_shared)"
                    .to_string(),
            );
        }
        // Whether the deadline was moved by the extension (once at most).
        let mut extended = false;
        while !closed_at(&incumbent, lower) && exact_checks_may_apply(instance) {
            // Halving the gap while it is wide: "no plan" at the geometric middle of the
            // bound and the incumbent raises the bound there, a plan lowers the incumbent
            // below it. Where that cannot be decided, just below the incumbent.
            // Before halving, while the plan is more than `CLOSING_GAP` above the bound: is
            // there a plan within it? "No plan" there closes the case, and it is the easiest
            // question to prove (fewer assignments pass a shorter period).
            let mut closing = true;
            let mut halving = true;
            while let Some(known) = incumbent.as_ref().map(Incumbent::period) {
                if closed_at(&incumbent, lower) || left().is_zero() {
                    break;
                }
                let closes = closing && known > lower * (1.0 + CLOSING_GAP);
                let halves = !closes && halving && known > lower * (1.0 + HALVING_GAP);
                let target = if closes {
                    known / (1.0 + 0.99 * CLOSING_GAP)
                } else if halves {
                    (lower * known).sqrt()
                } else {
                    known / (1.0 + 0.999 * precision)
                };
                // An answer cut short ends the closing question, then the halving, then the
                // phase: a third of the time left for each of the first two, so that the
                // checks below the incumbent keep some. Each exact check takes its own third
                // of what is left when it starts, so the last check of a question may run
                // past the question's third (measured: that is how DenseNet-121 on 5
                // processors at 8 GiB, 12 GB/s finds its 0.1105 s plan within 20 s; with one
                // deadline per question it keeps 0.1217 s). Within an extension, the
                // closing question gets all of it: its "no plan" is what the extension is
                // for.
                let question_time = || {
                    if (closes && !extended) || halves {
                        left() / 3
                    } else {
                        left()
                    }
                };
                let mut exact = |a: &[usize]| -> crate::error::Result<Verdict> {
                    let limit = question_time();
                    if limit.is_zero() {
                        return Ok(Verdict::Unknown);
                    }
                    schedules += 1;
                    proofs += 1;
                    let (finest, mergeable) = assignment_structures(instance, a);
                    let scope = Scope {
                        focus: None,
                        mergeable,
                        left_out: Vec::new(),
                        tail: None,
                    };
                    let Some(milp) = PatternMilp::new(instance, platform, &finest, target, &scope)
                    else {
                        // Static memory alone does not fit: no plan at any period.
                        return Ok(Verdict::NoPlan);
                    };
                    let r = milp.model.solve(&milp_with(limit), Some(limit))?;
                    Ok(match r.status {
                        SolveStatus::Infeasible => Verdict::NoPlan,
                        SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
                            let (allocation, pattern) = milp.decoder.decode(&r.values);
                            if offer(&mut incumbent, allocation, pattern, "exact check") {
                                Verdict::Plan
                            } else {
                                // Judged invalid or not better: cannot happen for a solution
                                // at the target (it is judged exactly); say nothing.
                                Verdict::Unknown
                            }
                        }
                        SolveStatus::NoSolutionWithinLimit => Verdict::Unknown,
                    })
                };
                match decide_period(
                    &relax,
                    target,
                    self.milp.threads,
                    Some(question_time()),
                    &mut learnt,
                    &mut exact,
                )? {
                    Decision::NoPlan => lower = lower.max(target),
                    Decision::Plan(_) => {}
                    Decision::Undecided(_) if closes => closing = false,
                    Decision::Undecided(_) if halves => halving = false,
                    Decision::Undecided(why) => {
                        messages.push(format!("exact checks stopped: {why}"));
                        break;
                    }
                }
            }
            // The extension: once, for a case left open with its plan near the bound; the
            // questions start again from the closing one, with the premises learnt so far.
            let (Some(extension), Some(known)) =
                (self.extension, incumbent.as_ref().map(Incumbent::period))
            else {
                break;
            };
            let near = known <= lower * (1.0 + extension.below_gap);
            let until = started + extension.until;
            if extended || closed_at(&incumbent, lower) || !near || until <= deadline.get() {
                break;
            }
            extended = true;
            deadline.set(until);
            messages.push(format!(
                "extended to {:.0} s: the plan is {:.1}% above the bound (at most {:.1}%)",
                extension.until.as_secs_f64(),
                100.0 * (known / lower - 1.0),
                100.0 * extension.below_gap
            ));
        }
        lap("exact checks", &mut phases);
        if left().is_zero() && !closed_at(&incumbent, lower) {
            stopped_by_clock = true;
        }
        messages.push(format!(
            "global bound {:.6} s ({}, {} MILPs); {} allocations scheduled, {} of them in exact checks",
            lower, bound.method, bound.solves, schedules, proofs
        ));
        if lower > bound.lower_bound {
            messages.push(format!(
                "the exact checks raised the bound from {:.6} s",
                bound.lower_bound
            ));
        }
        messages.push(format!(
            "seconds per phase: {}",
            phases
                .iter()
                .filter(|(_, t)| *t >= 0.05)
                .map(|(name, t)| format!("{name} {t:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
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
        // A plan proven optimal (to the precision) is a finished answer, whatever limits the
        // phases before the proof met.
        // So is a plan within the gap asked for.
        let finished = best.period() <= lower * (1.0 + stop_gap());
        messages.push(format!("best plan from: {}", best.source));
        let mut sol = Solution::new(best.allocation, Some(best.pattern));
        sol.lower_bound = Some(lower);
        sol.stopped_at_limit = !finished && (stopped_by_clock || !bound.complete);
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

    /// Runs [`seeds_in_two_passes`] on seeds `0..n` (bound = index) with `phase` left
    /// throughout; `cut_short(seed, call)` says whether that seed's `call`-th schedule is cut
    /// short. Returns the (seed, cap in seconds) of every schedule, in order.
    fn passes(
        n: usize,
        phase: Duration,
        cut_short: impl Fn(usize, usize) -> bool,
        stop_after: Option<usize>,
    ) -> Vec<(usize, f64)> {
        let seeds = (0..n).map(|i| (i as f64, vec![i])).collect();
        let mut calls: Vec<(usize, f64)> = Vec::new();
        seeds_in_two_passes(
            seeds,
            || phase,
            |_, assignment, cap| {
                if stop_after == Some(calls.len()) {
                    return Ok(SeedStep::Stop);
                }
                let seed = assignment[0];
                let call = calls.iter().filter(|(s, _)| *s == seed).count();
                calls.push((seed, cap.as_secs_f64()));
                Ok(SeedStep::Tried(Attempt {
                    improved: false,
                    cut_short: cut_short(seed, call),
                }))
            },
        )
        .unwrap();
        calls
    }

    #[test]
    fn a_seed_cut_short_waits_for_the_others() {
        let first = SEED_FIRST_LIMIT.as_secs_f64();
        let full = SCHEDULE_LIMIT.as_secs_f64();
        let long = Duration::from_secs(100);
        // Seed 0 cannot decide within its first cap: seeds 1 and 2 come before its second try.
        let calls = passes(3, long, |seed, _| seed == 0, None);
        assert_eq!(calls, vec![(0, first), (1, first), (2, first), (0, full)]);
        // Cut short again on the second pass: not a third time.
        let calls = passes(2, long, |_, _| true, None);
        assert_eq!(calls, vec![(0, first), (1, first), (0, full), (1, full)]);
        // Decided seeds are not asked again.
        assert_eq!(passes(2, long, |_, _| false, None).len(), 2);
        // The phase caps every call, and a phase with nothing left schedules nothing.
        let calls = passes(2, Duration::from_secs(1), |_, _| true, None);
        assert_eq!(calls, vec![(0, 1.0), (1, 1.0), (0, 1.0), (1, 1.0)]);
        assert!(passes(2, Duration::ZERO, |_, _| true, None).is_empty());
        // A stop ends both passes.
        assert_eq!(passes(3, long, |_, _| true, Some(1)), vec![(0, first)]);
    }

    #[test]
    fn canonical_forms_and_runs() {
        assert_eq!(canonical(&[2, 2, 0, 1, 0]), vec![0, 0, 1, 2, 1]);
        let a = runs_of(&[0, 0, 1, 0]);
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

    /// The refined structure keeps the assignment, stops at its cap, never raises the
    /// bound of one stage per run, and lowers it where memory binds.
    #[test]
    fn refined_runs_cut_runs_where_the_bound_falls() {
        use crate::model::Platform;
        let instance = crate::nets::random::random_chain(3, 30);
        let full = crate::nets::random::one_processor_memory(&instance);
        let assignment: Vec<usize> = (0..30).map(|l| usize::from(l >= 12)).collect();
        let runs = runs_of(&assignment);
        let mut lowered = 0;
        for share in [0.4, 0.5, 0.6, 0.7, 0.8, 1.0] {
            let platform = Platform::new(2, share * full, 6.0);
            let bound_of = |a: &Allocation| structures_lower_bound(&instance, &platform, a, &[]);
            // Without an incumbent, nothing to beat: one stage per run.
            assert_eq!(refined_runs(&instance, &platform, &assignment, None), runs);
            let runs_bound = bound_of(&runs);
            let cutoff = if runs_bound.is_finite() {
                0.5 * runs_bound
            } else {
                1.0
            };
            let refined = refined_runs(&instance, &platform, &assignment, Some(cutoff));
            refined.check(30, 2).unwrap();
            assert_eq!(assignment_of(&refined, 30), assignment);
            assert!(refined.stages.len() >= 2 && refined.stages.len() <= REFINED_STAGES);
            let refined_bound = bound_of(&refined);
            assert!(
                refined_bound <= runs_bound,
                "{refined_bound} above {runs_bound}"
            );
            if refined_bound < runs_bound * 0.99 {
                lowered += 1;
            }
        }
        assert!(
            lowered > 0,
            "no memory level where cutting runs lowers the bound"
        );
    }
}
