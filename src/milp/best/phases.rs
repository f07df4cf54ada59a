//! `best`'s phases 0 to 8 (module docs of `best`), each a method of the portfolio, in the
//! order `BestPlanner::plan` calls them: the coarser level, the contiguous optimum, MadPipe,
//! the bound, the general MILP on groups, the seeds, the annealing, the local search and
//! the descent.

use std::time::{Duration, Instant};

use super::assignments::{assignment_of, neighbours, Structures, FINEST_SEARCH_LAYERS};
use super::coarser_level;
use super::{Attempt, Incumbent, Portfolio, Stop, PRECISION};
use crate::milp::contiguous::contiguous_optimum;
use crate::milp::general::general_optimum;
use crate::milp::global_bound::anneal::{anneal_assignments, canonical, AnnealOptions};
use crate::milp::global_bound::{
    global_lower_bound_learning, infinite, probe_period, BoundOptions, GlobalBound, Learnt,
    ProbeAnswer, Relaxation,
};
use crate::milp::madpipe::MadPipePlanner;
use crate::milp::SolveStatus;
use crate::model::Placement;
use crate::partition::madpipe::MadPipeConfig;
use crate::planner::{Outcome, Planner};

/// The seed of the general MILP: this many groups of layers ([`general_optimum`]), at most
/// `COARSE_FIRST_LIMIT` before the seeds and, when that did not decide it, at most
/// `COARSE_LIMIT` again after the local search: a short first try leaves the seeds and the
/// annealing their time, and its plan, when it comes later, still gives the local search a
/// new start (docs/bounds.md).
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

/// The descent (phase 8): each probe `DESCENT_STEP` below the last period that passed
/// (or the incumbent's), that step halved after a probe left undecided, down to
/// `DESCENT_LEAST_STEP`; each probe within `DESCENT_PROBE_LIMIT`. A probe that passes an
/// assignment takes milliseconds on the op chains; one left undecided takes its whole limit.
const DESCENT_STEP: f64 = 0.08;
const DESCENT_LEAST_STEP: f64 = 0.02;
const DESCENT_PROBE_LIMIT: Duration = Duration::from_millis(300);

/// The longest one scheduling MILP of the seeds and of the local search may take.
const SCHEDULE_LIMIT: Duration = Duration::from_secs(10);

/// The longest a seed's scheduling MILP may take on the seeds' first pass; the seeds it cut
/// short are asked again, up to `SCHEDULE_LIMIT` each, with what the phase has left. The
/// seed with the lowest bound is often an assignment whose runs interleave and whose MILP
/// cannot decide within the limit, while a later, nearly contiguous one gives a plan in a
/// few seconds.
const SEED_FIRST_LIMIT: Duration = Duration::from_secs(3);

/// The local search (with the general MILP on groups) takes at most this share of the
/// time left when it starts, so that the exact checks, which both find plans and prove
/// them, keep time on chains whose every-structure MILPs are slow; never less than one of
/// its MILPs may take ([`phase_limit`]).
const LOCAL_SEARCH_SHARE: f64 = 1.0 / 3.0;

/// The seeds together take at most this share of the time left when they start (never
/// less than one of their MILPs may take). Less than the local search's, so that the
/// annealing after them, whose plans the exact checks often prove optimal, is not cut
/// short (results/README.md, "How far exact reaches").
const SEEDS_SHARE: f64 = 1.0 / 4.0;

/// The most a phase with share `share` may take of the time `left`: that share of it, but
/// at least `SCHEDULE_LIMIT` (a share of a short time left would cut short every MILP of
/// the phase and lose the plans they find given their own limit).
fn phase_limit(left: Duration, share: f64) -> Duration {
    left.mul_f64(share).max(SCHEDULE_LIMIT)
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

/// What the general MILP on groups gave: whether its plan became the incumbent, and
/// whether it decided the groups' optimum.
struct CoarseSeed {
    improved: bool,
    decided: bool,
}

impl Portfolio<'_> {
    /// Phase 0: on a chain with a coarser level (an op-level chain), `best` on that level
    /// first, its plan lifted: the first incumbent, which every later phase can only
    /// improve.
    pub(super) fn coarser_level(&mut self) -> crate::error::Result<()> {
        let Some(level) = coarser_level::coarser_level(self.problem) else {
            return Ok(());
        };
        let share = self
            .planner
            .time_limit
            .mul_f64(coarser_level::COARSE_LEVEL_SHARE);
        let lifted = coarser_level::lifted_plan(self.planner, self.problem, &level, share)?;
        self.messages.push(match &lifted {
            Some(l) => format!(
                "coarser level: {} layers, plan of period {} s lifted",
                l.coarse_layers, l.pattern.period
            ),
            None => format!("coarser level: {} layers, no plan", level.groups.len()),
        });
        if let Some(lifted) = lifted {
            let source = format!(
                "the chain coarsened to {} layers ({}), lifted",
                lifted.coarse_layers, lifted.source
            );
            self.offer(lifted.allocation, lifted.pattern, &source);
        }
        self.lap("coarser level");
        self.after_coarser_level = true;
        Ok(())
    }

    /// Phase 1: the contiguous optimum (exact, milliseconds): the first incumbent, and the
    /// upper end of the bound's bisection.
    pub(super) fn contiguous_optimum(&mut self) -> crate::error::Result<()> {
        let contiguous = contiguous_optimum(
            self.instance(),
            self.platform(),
            Some(self.left().min(Duration::from_secs(10))),
        )?;
        if let Some((a, p)) = contiguous.best {
            self.offer(a, p, "contiguous optimum");
        }
        self.lap("contiguous optimum");
        Ok(())
    }

    /// Phase 2: MadPipe's plans come before the bound: the bound's closing probe asks
    /// whether a plan 5% shorter than the best known exists, and where the contiguous
    /// optimum has no plan, a known period lets the bound bisect below it instead of
    /// spending its time on a proof that no period fits. Unless, with no plan known, the
    /// packing search (milliseconds) proves at once that no plan fits: the bound then says
    /// so without MadPipe's seconds.
    pub(super) fn madpipe_before_bound(&mut self) {
        self.madpipe_first = self.incumbent.is_some() || !self.no_plan_at_all();
        if self.madpipe_first {
            self.madpipe();
        }
        self.lap("MadPipe");
    }

    /// MadPipe's plans after the bound, unless they came before it.
    pub(super) fn madpipe_after_bound(&mut self) {
        if !self.madpipe_first && !self.closed() {
            self.madpipe();
        }
        self.lap("MadPipe");
    }

    /// Whether the packing search proves, within a second, that no plan fits at any period.
    fn no_plan_at_all(&self) -> bool {
        let relax = Relaxation::new(self.instance(), self.platform());
        let limit = self.left().min(Duration::from_secs(1));
        infinite::Packing::new(&relax).decide(Some(Instant::now() + limit))
            == infinite::Answer::Infeasible
    }

    /// MadPipe's two plans (each cut to a few seconds), offered as incumbents.
    fn madpipe(&mut self) {
        if self.after_coarser_level {
            return;
        }
        for (label, full) in [("madpipe", false), ("madpipe-g", true)] {
            if self.left().is_zero() {
                break;
            }
            let planner = MadPipePlanner {
                config: MadPipeConfig {
                    special_full_batches: full,
                    ..MadPipeConfig::default()
                },
                milp: self.milp(self.left().min(Duration::from_secs(5)) / 2),
                remap_stages: false,
            };
            if let Ok(Outcome::Found(sol)) = planner.plan(self.problem) {
                if let (Placement::Stages(allocation), Some(p)) = (sol.placement, sol.pattern) {
                    self.offer(allocation, p, label);
                }
            }
        }
    }

    /// Phase 3: the bound, with at most two thirds of the time limit, or after a coarser
    /// level `coarser_level::BOUND_SHARE_AFTER` of the time it left (and no further than
    /// the gap asked for needs). When it proves that no plan fits, the run ends with
    /// [`Portfolio::no_plan_fits`].
    pub(super) fn bound(&mut self) -> crate::error::Result<GlobalBound> {
        let limit = if self.after_coarser_level {
            self.left().mul_f64(coarser_level::BOUND_SHARE_AFTER)
        } else {
            self.planner.time_limit * 2 / 3
        };
        let options = BoundOptions {
            time_limit: Some(limit.min(self.left())),
            threads: self.planner.milp.threads,
            known_period: self.incumbent.as_ref().map(Incumbent::period),
            enough: self
                .incumbent
                .as_ref()
                .map(|i| (i.period() / (1.0 + self.tolerance), self.tolerant_from)),
            ..BoundOptions::default()
        };
        let bound = global_lower_bound_learning(
            self.problem.instance,
            self.problem.platform,
            &options,
            &mut self.learnt,
        )?;
        self.lower = bound.lower_bound;
        if !bound.complete {
            self.stop(Stop::BoundIncomplete);
        }
        self.lap("bound");
        Ok(bound)
    }

    /// The answer when the bound proves that no plan fits the case: infeasible, or an
    /// internal error when a judged plan says otherwise.
    pub(super) fn no_plan_fits(&self, bound: &GlobalBound) -> crate::error::Result<Outcome> {
        if let Some(i) = &self.incumbent {
            return Err(crate::error::Error::Internal(format!(
                "the global bound says no plan fits, yet {} has a valid plan of period {} s",
                i.source,
                i.period()
            )));
        }
        Ok(Outcome::Infeasible {
            reason: format!(
                "no allocation fits the case at any period: {}",
                bound.method
            ),
            lower_bound: None,
        })
    }

    /// Phase 4: the general MILP on a few groups of layers (`ilp --coarsen 8`), whose
    /// non-contiguous allocations of whole groups beat every other seed on some
    /// memory-bound cases: its plan, when better, is the incumbent whose assignment the
    /// seeds and the local search start from.
    pub(super) fn general_milp_on_groups(&mut self) -> crate::error::Result<()> {
        self.coarse_open = self.instance().len() > COARSE_GROUPS;
        if self.coarse_open && !self.closed() && !self.left().is_zero() {
            self.coarse_open = !self
                .coarse_seed(self.left().min(COARSE_FIRST_LIMIT))?
                .decided;
            self.lap("general MILP on groups");
        }
        Ok(())
    }

    /// The general MILP on groups within `limit`, its plan offered.
    fn coarse_seed(&mut self, limit: Duration) -> crate::error::Result<CoarseSeed> {
        let coarse = general_optimum(
            self.instance(),
            self.platform(),
            Some(COARSE_GROUPS),
            &self.milp(limit),
        )?;
        let decided = matches!(
            coarse.status,
            SolveStatus::Optimal | SolveStatus::Infeasible
        );
        let improved = coarse.best.is_some_and(|(allocation, pattern)| {
            self.offer(allocation, pattern, "general MILP on 8 groups")
        });
        Ok(CoarseSeed { improved, decided })
    }

    /// Phase 5: seeds in increasing order of their bound: the incumbent's assignment over
    /// every stage structure (finer stages free stashes earlier; consecutive layers that
    /// share a tensor keep it once in one stage), and the relaxation's assignments
    /// `candidates` (each passed the relaxation at the period it was found at), in two
    /// passes ([`seeds_in_two_passes`]) within the phase. Returns the first seeds, the
    /// annealing's starts.
    pub(super) fn seeds(
        &mut self,
        candidates: &[Vec<usize>],
    ) -> crate::error::Result<Vec<Vec<usize>>> {
        let layers = self.instance().len();
        let mut seeds: Vec<(f64, Vec<usize>)> = Vec::new();
        let incumbent = self
            .incumbent
            .as_ref()
            .map(|i| assignment_of(&i.allocation, layers));
        for a in incumbent.iter().chain(candidates.iter().rev()) {
            let a = canonical(a);
            if self.tried.insert(a.clone()) {
                seeds.push(self.bounded(a));
            }
        }
        seeds.sort_by(|x, y| x.0.total_cmp(&y.0));
        let starts: Vec<Vec<usize>> = seeds
            .iter()
            .map(|(_, a)| a.clone())
            .take(ANNEAL_STARTS)
            .collect();
        let seeds_until = Instant::now() + phase_limit(self.left(), SEEDS_SHARE);
        seeds_in_two_passes(
            seeds,
            || seeds_until.saturating_duration_since(Instant::now()),
            |b, assignment, cap| {
                let cutoff = self.cutoff();
                if self.closed() || self.left().is_zero() {
                    return Ok(SeedStep::Stop);
                }
                if b >= cutoff * (1.0 - PRECISION) {
                    return Ok(SeedStep::Skipped);
                }
                let tried = self.attempt(assignment, "seed", cap, Structures::Every)?;
                Ok(SeedStep::Tried(tried))
            },
        )?;
        self.lap("seeds");
        Ok(starts)
    }

    /// Phase 6: the assignments whose relaxation thresholds are lowest, by simulated
    /// annealing from `starts`, lowest threshold first, scheduled one stage per run within
    /// a third of the time left. Only on chains of at most `FINEST_SEARCH_LAYERS` layers:
    /// on longer ones they split into many runs whose stages interleave, and schedule far
    /// above their thresholds.
    pub(super) fn annealing(
        &mut self,
        relax: &Relaxation,
        starts: Vec<Vec<usize>>,
    ) -> crate::error::Result<()> {
        let layers = self.instance().len();
        if self.closed() || layers > FINEST_SEARCH_LAYERS || self.left().is_zero() {
            return Ok(());
        }
        let hi = self
            .incumbent
            .as_ref()
            .map_or_else(|| relax.sequential_period(), Incumbent::period);
        let phase_end = Instant::now() + self.left() / 3;
        let annealed = anneal_assignments(
            relax,
            self.lower,
            hi,
            &AnnealOptions {
                starts,
                iterations: ANNEAL_ITERATIONS,
                deadline: Some(Instant::now() + self.left().mul_f64(0.25).min(ANNEAL_LIMIT)),
                keep: ANNEAL_KEEP,
                seed: layers as u64,
            },
        )
        .map_err(|e| crate::error::Error::Internal(format!("simulated annealing: {e}")))?;
        for (threshold, a) in annealed {
            let cutoff = self.cutoff();
            let cap = phase_end.saturating_duration_since(Instant::now());
            if self.closed() || cap.is_zero() || threshold >= cutoff * (1.0 - PRECISION) {
                break;
            }
            // Not marked as tried: the local search may still schedule it over every
            // stage structure.
            if !self.tried.contains(&a) {
                self.attempt(&a, "annealing", cap, Structures::Runs)?;
            }
        }
        self.lap("annealing");
        Ok(())
    }

    /// Phase 7: local search around the incumbent; then, when the general MILP on groups
    /// was cut short before the seeds, that MILP again with more time, and the local search
    /// again around its plan when it is better. Together within `LOCAL_SEARCH_SHARE` of the
    /// time left.
    pub(super) fn local_search(&mut self) -> crate::error::Result<()> {
        let until = Instant::now() + phase_limit(self.left(), LOCAL_SEARCH_SHARE);
        self.descend(until)?;
        self.lap("local search");
        if !self.coarse_open || self.closed() || self.left_until(until).is_zero() {
            return Ok(());
        }
        let coarse = self.coarse_seed(self.left_until(until).min(COARSE_LIMIT))?;
        self.lap("general MILP on groups");
        if coarse.improved {
            self.descend(until)?;
            self.lap("local search");
        }
        Ok(())
    }

    /// The local search proper, until `until`: the neighbours of the incumbent's assignment
    /// that their bound does not rule out, in increasing order of it, each scheduled below
    /// the incumbent; the first improvement restarts the search around the new incumbent.
    fn descend(&mut self, until: Instant) -> crate::error::Result<()> {
        let (layers, processors) = (self.instance().len(), self.platform().processors);
        while let Some(current) = self
            .incumbent
            .as_ref()
            .map(|i| canonical(&assignment_of(&i.allocation, layers)))
        {
            if self.closed() {
                break;
            }
            self.tried.insert(current.clone());
            let cutoff = self.cutoff();
            let mut candidates: Vec<(f64, Vec<usize>)> = neighbours(&current, processors)
                .into_iter()
                .filter(|a| !self.tried.contains(a))
                .map(|a| self.bounded(a))
                .filter(|(b, _)| *b < cutoff * (1.0 - PRECISION))
                .collect();
            candidates.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut improved = false;
            for (_, a) in candidates {
                if self.left().is_zero() {
                    self.stop(Stop::Clock);
                    return Ok(());
                }
                if self.left_until(until).is_zero() {
                    return Ok(());
                }
                // The incumbent (hence the cutoff the candidates were bounded against)
                // changes only on an improvement, which ends this pass.
                self.tried.insert(a.clone());
                let cap = SCHEDULE_LIMIT.min(self.left_until(until));
                if self
                    .attempt(&a, "local search", cap, Structures::Every)?
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
        Ok(())
    }

    /// Phase 8, on chains whose tensors are shared further apart than neighbours (op-level
    /// chains), with the time left: the descent. The relaxation is probed `DESCENT_STEP`
    /// below the shorter of the incumbent's period and the last period where an assignment
    /// passed, each assignment that passes scheduled below the incumbent (its runs); a probe
    /// left undecided halves the step, down to `DESCENT_LEAST_STEP`; a probe that passes no
    /// assignment proves that no plan is that short (the bound rises to it) and ends the
    /// descent. A plan found is the start of one more local search. What the exact checks
    /// find on the other chains, quicker (op chains are too long for them): an assignment
    /// that passes the closed forms near the threshold often schedules near it, while the
    /// bound's bisection, which works up from below, passes few (its probes near the
    /// threshold end undecided), and single-layer moves do not reach it. On ResNet-50 on 4 processors at 6 GiB, 24 GB/s, the other phases end at
    /// 126.2 ms and the descent's assignments reach 98.3 ms (cuts inside three bottlenecks,
    /// the stem and the last block on one processor).
    pub(super) fn descent(&mut self, relax: &Relaxation) -> crate::error::Result<()> {
        if self.instance().stash_shared.is_empty() || self.closed() {
            return Ok(());
        }
        // The period the next probe is `step` below: the shorter of the incumbent's and
        // the last period where an assignment passed.
        let Some(mut from) = self.incumbent.as_ref().map(Incumbent::period) else {
            return Ok(());
        };
        let mut step = DESCENT_STEP;
        let mut improved = false;
        // Its own premises and search frontiers, so that each short probe searches afresh
        // (the descent was measured this way only; the bound's `learnt` is left as the
        // bound left it).
        let mut learnt = Learnt::default();
        let relax = relax.clone().under_time_limit();
        while step >= DESCENT_LEAST_STEP && !self.left().is_zero() && !self.closed() {
            let target = from * (1.0 - step);
            let answer = probe_period(
                &relax,
                target,
                DESCENT_PROBE_LIMIT.min(self.left()),
                self.planner.milp.threads,
                &mut learnt,
            )?;
            match answer {
                ProbeAnswer::NoPlan => {
                    self.lower = self.lower.max(target);
                    self.descent_no_plan = Some(target);
                    break;
                }
                ProbeAnswer::Undecided => step /= 2.0,
                ProbeAnswer::Assignment(a) => {
                    let a = canonical(&a);
                    let cap = SEED_FIRST_LIMIT.min(self.left());
                    if self.tried.insert(a.clone()) && !cap.is_zero() {
                        improved |= self
                            .attempt(&a, "descent", cap, Structures::Every)?
                            .improved;
                    }
                    from = target.min(self.cutoff());
                }
            }
        }
        self.lap("descent");
        if improved {
            self.descend(self.deadline)?;
            self.lap("local search");
        }
        Ok(())
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
}
