//! `best`: the best plan pipeopt can find for a case within a time limit, over every
//! allocation (contiguous or not), reported with the global lower bound of
//! [`global_bound`](crate::milp::global_bound) so that its distance to the optimum is known.
//!
//! One run is a portfolio (`Portfolio`: the incumbent, the deadline, the bound, the
//! assignments tried, the seconds of each phase and why the search stopped), whose phases
//! `BestPlanner::plan` calls in this order; every candidate is judged, and only a better
//! one becomes the incumbent:
//! 0. **The coarser level** of a chain that has one (an op-level chain: its module
//!    boundaries, the block-level chain, or its single-tensor cuts: [`coarser_level`]):
//!    `best` on the chain coarsened there, with `COARSE_LEVEL_SHARE` (70%) of the time, its
//!    plan lifted to the chain (the same pattern, the same period): the first incumbent. The
//!    phases below then search the chain itself (the bound with `BOUND_SHARE_AFTER` (90%)
//!    of the time the coarser level left: the others end within fractions of a second on
//!    op chains).
//! 1. **The contiguous optimum** (exact, milliseconds).
//! 2. **MadPipe**: its two phases with the paper's and with the full (`g` batches) estimate
//!    of its special processor (Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware
//!    Dynamic Programming Algorithm for Pipelined Model Parallelism*, 2022; a fraction of a
//!    second), before the bound, so that the bound knows the best period of the quick plans:
//!    below it, its closing probe asks whether any plan is 5% shorter, and where the
//!    contiguous optimum has no plan, the bound bisects below MadPipe's instead of spending
//!    its time on a proof that no period fits. Where no plan is known and the bound's
//!    packing search proves at once that no plan fits at any period, MadPipe waits until
//!    after the bound (which then says so without MadPipe's seconds). Skipped after a
//!    coarser level, whose own `best` made MadPipe's plans of the coarse chain.
//! 3. **The bound**, with at most two thirds of the time limit (after a coarser level, 90%
//!    of the time it left): the relaxation of `global_bound` either proves that no plan
//!    fits the case (reported as infeasible, with the proof) or gives a lower bound and the
//!    assignments its loop found feasible on the way. A bound that says "infeasible" of a
//!    case with a judged plan is an internal error, never a result.
//! 4. **The general MILP on groups**: 8 groups of layers (`ilp --coarsen 8`, at most 1 s);
//!    its non-contiguous allocations of whole groups beat every other seed on some
//!    memory-bound cases.
//! 5. **Seeds**: in increasing order of their allocation bound, the incumbent's assignment
//!    and the relaxation's assignments, each scheduled over every stage structure of its
//!    runs
//!    ([`schedule_assignment_below`](crate::milp::fixed_allocation::schedule_assignment_below):
//!    a stage per layer, consecutive layers that share a tensor free to form one stage, all
//!    decided by one MILP per period), together within a quarter of the time left, at least
//!    10 s (`SEEDS_SHARE`), in two passes: each seed at most `SEED_FIRST_LIMIT` (3 s) first,
//!    then those whose MILP that limit cut short, up to `SCHEDULE_LIMIT` (10 s) each, with
//!    what the phase has left (the seed with the lowest bound is often one whose runs
//!    interleave and whose MILP cannot decide).
//! 6. **Annealing**: on chains of at most `FINEST_SEARCH_LAYERS` layers, the assignments with
//!    the lowest thresholds of the relaxation's closed forms, found by simulated annealing
//!    from the first seeds
//!    ([`anneal_assignments`](crate::milp::global_bound::anneal::anneal_assignments)), each
//!    scheduled one stage per run below the incumbent, lowest threshold first, within a third
//!    of the time left.
//! 7. **Local search** around the incumbent (a large-neighbourhood search on the
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
//! 8. **The descent**, on chains whose tensors are shared further apart than neighbours
//!    (op-level chains), with the time left: the relaxation probed at one period at a time,
//!    `DESCENT_STEP` (8%) below the shorter of the incumbent and the last period where an
//!    assignment passed (the step halved after a probe left undecided, down to 2%), each
//!    probe within 0.3 s; each assignment that passes is scheduled below the incumbent (its
//!    runs), and a plan found starts one more local search. A probe that
//!    passes none proves that no plan is that short: the bound rises to it. What the exact
//!    checks find on the other chains, quicker: an assignment that passes the closed forms
//!    near the threshold often schedules near it, and the bound's bisection, which works up
//!    from below, passes few.
//! 9. **Exact checks** (docs/bounds.md): with time left and the gap open, is there a plan
//!    below a period `T`? [`decide_period`](crate::milp::global_bound::decide_period) runs
//!    the bound's loop at `T` and hands every assignment that passes the relaxation to the
//!    scheduling MILP over every stage structure of the assignment at `T` (one MILP, exact;
//!    where tensors are shared further apart, a relaxation whose "none" is still a proof,
//!    its pattern judged and, where it does not fit the real stashes, its stage structure
//!    scheduled again with them: [`exact`]).
//!    A pattern found becomes the incumbent and the question is asked again; an assignment
//!    proven to have none is excluded; no assignment left proves that no plan is at `T` or
//!    below. While the incumbent is more than `CLOSING_GAP` (5%) above the bound, `T` is
//!    first that much below the incumbent (no assignment left there closes the case); then
//!    the geometric middle of the bound and the incumbent while the gap is wider than
//!    `HALVING_GAP` (each answer halves it); then just below the incumbent (no assignment
//!    left proves it optimal, to 0.1%). With an [`Extension`], a case whose exact checks
//!    end open with its plan near the bound gets them once more, up to the extension's end,
//!    the closing question first with all of that time.
//!
//! The report then gives the incumbent with the bound. The search stops when the incumbent
//! is within the bound's precision of the global bound (proven optimal), when the exact
//! checks cannot decide, or at the time limit (status `timeout`, the best judged plan
//! reported; also when the bound's bisection was cut short). With a gap tolerance
//! (`gap_tolerance`, from `gap_tolerance_after` on), every phase, the bound's bisection
//! included, also stops once the plan is proven within it of the bound: a finished answer
//! (status `valid`), with less time spent on a case that is closed enough. Runs are a pure
//! function of the case and the time limit, except where the limit cuts a solve.

mod assignments;
pub mod coarser_level;
mod exact;
mod phases;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::judge::judge;
use crate::milp::fixed_allocation::{
    runs_of, schedule_allocation_below, schedule_assignment_below,
};
use crate::milp::global_bound::{GlobalBound, Learnt, Relaxation};
use crate::milp::{MilpOptions, SolveStatus};
use crate::model::{Allocation, Instance, Pattern, Platform};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::units::Seconds;
use assignments::{assignment_lower_bound, refined_runs, Structures, FINEST_SEARCH_LAYERS};

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

/// The message of `best`'s report that says where its plan came from, before the source.
const PLAN_SOURCE: &str = "best plan from: ";

/// Where the plan of a report of `best` came from (a phase, or the coarser level), read
/// from its messages.
pub fn plan_source(messages: &[String]) -> Option<&str> {
    messages.iter().find_map(|m| m.strip_prefix(PLAN_SOURCE))
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
        problem.check_milp_range()?;
        let mut portfolio = Portfolio::new(self, problem);
        portfolio.coarser_level()?;
        portfolio.contiguous_optimum()?;
        portfolio.madpipe_before_bound();
        let bound = portfolio.bound()?;
        if bound.infeasible {
            return portfolio.no_plan_fits(&bound);
        }
        portfolio.madpipe_after_bound();
        portfolio.general_milp_on_groups()?;
        let anneal_starts = portfolio.seeds(&bound.candidates)?;
        // The relaxation's closed forms, for the annealing, the descent and the exact checks.
        let relax = Relaxation::new(problem.instance, problem.platform);
        portfolio.annealing(&relax, anneal_starts)?;
        portfolio.local_search()?;
        portfolio.descent(&relax)?;
        portfolio.exact_checks(&relax)?;
        Ok(portfolio.report(&bound))
    }

    fn bound_is_global(&self) -> bool {
        true
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

/// Why the search ended before the plan was proven within the gap asked for, as the phases
/// meet it: a stop at the limit makes the plan's status `timeout`.
#[derive(Debug, Clone, PartialEq)]
enum Stop {
    /// The bound's bisection did not reach its precision within its time.
    BoundIncomplete,
    /// The time limit (or the extension's end) stopped a phase.
    Clock,
    /// The exact checks were not tried: the chain has this many layers, more than
    /// `exact::EXACT_CHECK_LAYERS`.
    ChainTooLong(usize),
    /// The exact checks could not decide; why, in words.
    Undecided(String),
}

impl Stop {
    /// Whether the search stopped at a limit (status `timeout`) rather than where the
    /// methods end.
    fn at_limit(&self) -> bool {
        matches!(self, Stop::BoundIncomplete | Stop::Clock)
    }

    /// What the report says of it, if anything.
    fn message(&self) -> Option<String> {
        match self {
            Stop::BoundIncomplete | Stop::Clock => None,
            Stop::ChainTooLong(layers) => Some(format!(
                "exact checks not tried: {layers} layers (they take chains of at most {}: \
                 each is one MILP over every stage structure, a stage per layer)",
                exact::EXACT_CHECK_LAYERS
            )),
            Stop::Undecided(why) => Some(format!("exact checks stopped: {why}")),
        }
    }
}

/// What scheduling one assignment below the incumbent gave: whether its plan became the
/// incumbent, and whether the MILP's time limit stopped it before it decided.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    improved: bool,
    cut_short: bool,
}

/// One run of `best` on one case: what its phases share (module docs). The phases are its
/// methods, in `phases` (0 to 8) and `exact` (9); [`Portfolio::report`] makes the outcome.
struct Portfolio<'a> {
    planner: &'a BestPlanner,
    problem: &'a Problem<'a>,
    started: Instant,
    /// When the search ends: the time limit after `started`, moved later once by an
    /// extension ([`Extension`]).
    deadline: Instant,
    /// The gap tolerance (at least [`PRECISION`]) and when it applies from.
    tolerance: f64,
    tolerant_from: Instant,
    /// Seconds spent in each phase, for the report, and when the current phase started.
    phases: Vec<(&'static str, f64)>,
    phase_started: Instant,
    messages: Vec<String>,
    incumbent: Option<Incumbent>,
    /// The global lower bound: the bound phase's, raised by the descent or the exact checks.
    lower: Seconds,
    /// What the bound's loop learnt, kept for the exact checks.
    learnt: Learnt,
    /// Canonical assignments scheduled over every stage structure (or about to be).
    tried: HashSet<Vec<usize>>,
    /// Scheduling MILPs run, and those of them in exact checks.
    schedules: usize,
    proofs: usize,
    /// Whether a coarser level ran first. Its `best` made MadPipe's plans of the coarse
    /// chain, so the chain's own MadPipe phase is skipped (its dynamic program, which does
    /// not look at the clock, takes seconds on chains of hundreds of layers and its plans
    /// are longer), and the bound takes nearly all the time it left.
    after_coarser_level: bool,
    /// A period where a probe of the descent passed no assignment (no plan is that short).
    descent_no_plan: Option<Seconds>,
    /// Whether MadPipe ran before the bound.
    madpipe_first: bool,
    /// Whether the general MILP on groups is to run again after the local search: it has
    /// not decided the groups' optimum yet.
    coarse_open: bool,
    /// Why the phases stopped early, in order.
    stops: Vec<Stop>,
}

impl<'a> Portfolio<'a> {
    fn new(planner: &'a BestPlanner, problem: &'a Problem<'a>) -> Self {
        let started = Instant::now();
        Portfolio {
            planner,
            problem,
            started,
            deadline: started + planner.time_limit,
            tolerance: planner.gap_tolerance.max(PRECISION),
            tolerant_from: started + planner.gap_tolerance_after,
            phases: Vec::new(),
            phase_started: Instant::now(),
            messages: Vec::new(),
            incumbent: None,
            lower: 0.0,
            learnt: Learnt::default(),
            tried: HashSet::new(),
            schedules: 0,
            proofs: 0,
            after_coarser_level: false,
            descent_no_plan: None,
            madpipe_first: false,
            coarse_open: false,
            stops: Vec::new(),
        }
    }
}

impl Portfolio<'_> {
    fn instance(&self) -> &Instance {
        self.problem.instance
    }

    fn platform(&self) -> &Platform {
        self.problem.platform
    }

    /// The time left before the deadline.
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The time left before `until` or the deadline, whichever comes first.
    fn left_until(&self, until: Instant) -> Duration {
        until
            .saturating_duration_since(Instant::now())
            .min(self.left())
    }

    /// Ends the current phase: its seconds go to the report under `name`.
    fn lap(&mut self, name: &'static str) {
        self.phases
            .push((name, self.phase_started.elapsed().as_secs_f64()));
        self.phase_started = Instant::now();
    }

    /// Notes why a phase stopped early, with its message.
    fn stop(&mut self, why: Stop) {
        self.messages.extend(why.message());
        self.stops.push(why);
    }

    /// The relative gap to the bound at which the search stops now: the tolerance once it
    /// applies, the precision before.
    fn stop_gap(&self) -> f64 {
        if Instant::now() >= self.tolerant_from {
            self.tolerance
        } else {
            PRECISION
        }
    }

    /// Whether the plan is within the gap asked for: every phase stops there.
    fn closed(&self) -> bool {
        self.incumbent
            .as_ref()
            .is_some_and(|i| i.period() <= self.lower * (1.0 + self.stop_gap()))
    }

    /// The incumbent's period, the one to beat (infinite without a plan).
    fn cutoff(&self) -> Seconds {
        self.incumbent
            .as_ref()
            .map_or(f64::INFINITY, Incumbent::period)
    }

    /// The MILP options of every MILP of the portfolio, within `limit`: without HiGHS's
    /// feasibility jump, which on the bound's and the exact checks' feasibility models took
    /// time that proofs needed (docs/bounds.md, "Solver settings").
    fn milp(&self, limit: Duration) -> MilpOptions {
        MilpOptions {
            time_limit: Some(limit),
            feasibility_jump: false,
            ..self.planner.milp.clone()
        }
    }

    /// Judges a plan and keeps it when it beats the incumbent; whether it did.
    fn offer(&mut self, allocation: Allocation, pattern: Pattern, source: &str) -> bool {
        let j = judge(self.instance(), self.platform(), &allocation, &pattern);
        if !j.valid {
            return false;
        }
        if self
            .incumbent
            .as_ref()
            .is_none_or(|i| j.period < i.period())
        {
            self.incumbent = Some(Incumbent {
                allocation,
                pattern,
                source: source.to_string(),
            });
            return true;
        }
        false
    }

    /// An assignment with its lower bound over every stage structure.
    fn bounded(&self, assignment: Vec<usize>) -> (f64, Vec<usize>) {
        (
            assignment_lower_bound(self.instance(), self.platform(), &assignment),
            assignment,
        )
    }

    /// Asks the scheduling MILP, within `cap`, for a pattern of `assignment` below the
    /// incumbent: with `Structures::Every`, over every stage structure of it
    /// ([`schedule_assignment_below`]; on chains longer than `FINEST_SEARCH_LAYERS`, its
    /// runs of layers cut by [`refined_runs`]); with `Structures::Runs`, one stage per run.
    fn attempt(
        &mut self,
        assignment: &[usize],
        source: &str,
        cap: Duration,
        structures: Structures,
    ) -> crate::error::Result<Attempt> {
        let (instance, platform) = (self.problem.instance, self.problem.platform);
        let cutoff = self.incumbent.as_ref().map(Incumbent::period);
        let limit = self.left().min(cap);
        if limit.is_zero() {
            return Ok(Attempt {
                improved: false,
                cut_short: true,
            });
        }
        self.schedules += 1;
        let milp = self.milp(limit);
        let (allocation, out) =
            if instance.len() <= FINEST_SEARCH_LAYERS && structures == Structures::Every {
                schedule_assignment_below(instance, platform, assignment, &milp, cutoff)?
            } else {
                let stages = match structures {
                    Structures::Every => refined_runs(instance, platform, assignment, cutoff),
                    Structures::Runs => runs_of(assignment),
                };
                let out = schedule_allocation_below(instance, platform, &stages, &milp, cutoff)?;
                (stages, out)
            };
        let cut_short = matches!(
            out.status,
            SolveStatus::LimitWithIncumbent | SolveStatus::NoSolutionWithinLimit
        );
        let improved = match out.pattern {
            Some(p) => self.offer(allocation, p, source),
            None => false,
        };
        Ok(Attempt {
            improved,
            cut_short,
        })
    }

    /// The outcome: the incumbent with the bound (the bound phase's `bound`, raised by the
    /// descent or the exact checks), and what the phases did.
    fn report(mut self, bound: &GlobalBound) -> Outcome {
        self.messages.push(format!(
            "global bound {:.6} s ({}, {} MILPs); {} allocations scheduled, {} of them in exact checks",
            self.lower, bound.method, bound.solves, self.schedules, self.proofs
        ));
        // The descent's "no plan" (op chains) and the exact checks (the other chains) raise
        // the bound after its phase; each says so in its own words.
        let before_exact = self
            .descent_no_plan
            .map_or(bound.lower_bound, |t| t.max(bound.lower_bound));
        if let Some(t) = self.descent_no_plan.filter(|&t| t > bound.lower_bound) {
            self.messages.push(format!(
                "the descent raised the bound from {:.6} s to {t:.6} s (no assignment passes \
                 the relaxation there)",
                bound.lower_bound
            ));
        }
        if self.lower > before_exact {
            self.messages.push(format!(
                "the exact checks raised the bound from {before_exact:.6} s"
            ));
        }
        self.messages.push(format!(
            "seconds per phase: {}",
            self.phases
                .iter()
                .filter(|(_, t)| *t >= 0.05)
                .map(|(name, t)| format!("{name} {t:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let Some(best) = self.incumbent.take() else {
            return Outcome::NoPlanWithinLimit {
                reason: format!(
                    "no plan found within {:?} (none proven impossible: {})",
                    self.planner.time_limit,
                    self.messages.join("; ")
                ),
                lower_bound: Some(self.lower),
            };
        };
        // A plan proven optimal (to the precision), or within the gap asked for, is a
        // finished answer, whatever limits the phases before the proof met.
        let finished = best.period() <= self.lower * (1.0 + self.stop_gap());
        self.messages.push(format!("{PLAN_SOURCE}{}", best.source));
        let mut sol = Solution::new(best.allocation, Some(best.pattern));
        sol.lower_bound = Some(self.lower);
        sol.stopped_at_limit = !finished && self.stops.iter().any(Stop::at_limit);
        sol.messages = self.messages;
        Outcome::Found(sol)
    }
}
