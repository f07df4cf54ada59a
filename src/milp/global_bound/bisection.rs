//! The bound of a case: the relaxation at an infinite period first (is there a plan at
//! all?), then a bisection over the period, in two phases where the scheduled checks apply
//! (the closed forms alone, then with the checks), with the probe that decides whether a
//! known plan closes the case asked early (docs/bounds.md, "The relaxation").

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::infinite;
use super::probe::{probe, relaxation_milp, Learnt, Probe};
use super::relaxation::{relaxation_fits, tighten, Relaxation, Windows};
use super::{CLOSING_GAP, CLOSING_PROBE_AFTER, FIRST_PHASE_PRECISION};
use crate::milp::solver::MilpOptions;
use crate::model::bounds::period_lower_bound;
use crate::model::{Instance, Platform};
use crate::units::Seconds;

/// What [`global_lower_bound`] proved.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GlobalBound {
    /// Holds for every plan of the case; `f64::INFINITY` when `infeasible`.
    pub lower_bound: Seconds,
    /// Proven: no allocation and no pattern fits the case at any period.
    pub infeasible: bool,
    /// The smallest period at which an assignment was found to pass the relaxation (its
    /// closed forms at least; `assignment`), `None` when infeasible or when no probe
    /// found one. Probes that ended undecided lower the bisection's upper end, not this.
    pub relaxed_period: Option<Seconds>,
    /// The relaxation's processor of each layer at `relaxed_period` (0-based, in chain
    /// order), a starting point for plans; `None` when no solve produced one.
    pub assignment: Option<Vec<usize>>,
    /// Every assignment the relaxation found feasible on the way, the lowest period's
    /// last: starting points for plans, each meeting the exact windows of its stages.
    pub candidates: Vec<Vec<usize>>,
    /// True when the bisection reached its precision and its upper end is decided: a period
    /// where an assignment passed with every check answered (not one where a probe ended
    /// undecided, or passed only because a scheduled check was cut short by the time).
    pub complete: bool,
    /// Probes of the relaxation, one period each (a search over assignments, then, where
    /// it ran out of time, a loop of MILPs).
    pub solves: usize,
    /// Branch-and-bound nodes of the MILPs.
    pub nodes: u64,
    pub solve_seconds: f64,
    /// How the bound was obtained, in words.
    pub method: String,
}

impl GlobalBound {
    /// Keeps `a`, which passed a probe, as the latest candidate and the assignment.
    fn passed(&mut self, a: Vec<usize>) {
        self.candidates.retain(|c| c != &a);
        self.candidates.push(a.clone());
        self.assignment = Some(a);
    }
}

/// Options of [`global_lower_bound`].
#[derive(Debug, Clone, PartialEq)]
pub struct BoundOptions {
    /// Wall-clock limit for the whole search.
    pub time_limit: Option<Duration>,
    /// Relative precision of the bisection on the period.
    pub precision: f64,
    /// A period known to be reached by a valid plan (the bisection's upper end), if any.
    pub known_period: Option<Seconds>,
    /// Stop once the bound proven reaches this period, from this instant on (a caller
    /// content with a plan within a gap of it: `best`'s `gap_tolerance`); the bound is
    /// then `complete: false`. Where the closing probe's period reaches it, that probe,
    /// left undecided in the last phase (or passed with a check cut short), is asked again
    /// with the time the phase has left.
    pub enough: Option<(Seconds, Instant)>,
    pub threads: NonZeroU32,
}

impl Default for BoundOptions {
    fn default() -> Self {
        BoundOptions {
            time_limit: None,
            precision: 2e-3,
            known_period: None,
            enough: None,
            threads: NonZeroU32::MIN,
        }
    }
}

/// The bound of docs/bounds.md for `instance` on `platform`.
pub fn global_lower_bound(
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
) -> crate::error::Result<GlobalBound> {
    global_lower_bound_learning(instance, platform, options, &mut Learnt::default())
}

/// [`global_lower_bound`], starting from what `learnt` holds (learnt on the same case) and
/// leaving there everything it learns, for a later [`decide_period`](super::decide_period).
pub fn global_lower_bound_learning(
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
    learnt: &mut Learnt,
) -> crate::error::Result<GlobalBound> {
    instance.check()?;
    platform.check()?;
    bound_of(
        Relaxation::new(instance, platform),
        instance,
        platform,
        options,
        learnt,
    )
}

/// [`global_lower_bound_learning`] with the relaxation `relax` of `instance` on `platform`.
pub(super) fn bound_of(
    relax: Relaxation,
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
    learnt: &mut Learnt,
) -> crate::error::Result<GlobalBound> {
    let started = Instant::now();
    let relax = if options.time_limit.is_some() {
        relax.under_time_limit()
    } else {
        relax
    };
    let mut b = Bisection::new(
        options,
        started,
        period_lower_bound(instance, platform),
        learnt,
    );
    let (answer, proven_by_search) = b.infinite_period(&relax)?;
    let infinite_undecided = match answer {
        Probe::Infeasible => return Ok(b.infeasible(proven_by_search)),
        Probe::Undecided | Probe::TooLarge => true,
        Probe::Feasible(a) => {
            b.out.passed(a);
            false
        }
    };
    let lo = b.lo;
    let mut hi = relax.sequential_period().max(lo);
    if let Some(known) = options.known_period {
        hi = hi.min(known.max(lo));
    }
    // The smallest period at which an assignment was found to pass (`relaxed_period`; set
    // with `out.assignment`, never without it).
    if let Some(a) = &b.out.assignment {
        if relaxation_fits(&relax, a, hi) {
            hi = tighten(&relax, a, lo, hi, options.precision);
            b.feasible_at = Some(hi);
        }
    }
    b.out.method = "relaxation (assignment, cuts, loads, stash windows) decided by a search over \
                  assignments or a MILP, bisected on the period"
        .into();
    // Two phases when the scheduled checks apply: the closed forms alone first (cheap
    // probes, at most half of the time), then, from the bound they prove, the scheduled
    // checks too (docs/bounds.md, "Scheduled premises"). Premises carry over.
    let closed_forms = relax.clone().closed_forms_only();
    let phases: Vec<(&Relaxation, f64)> = if relax.scheduling.is_some() {
        vec![(&closed_forms, 0.5), (&relax, 1.0)]
    } else {
        vec![(&relax, 1.0)]
    };
    let upper = hi;
    let two_phases = phases.len() > 1;
    let mut undecided = infinite_undecided;
    let phase_count = phases.len();
    for (phase, (phase_relax, share)) in phases.into_iter().enumerate() {
        if b.enough() {
            b.stopped_early = upper > b.lo * (1.0 + options.precision);
            break;
        }
        let precision = if two_phases && phase == 0 {
            // Before a second phase, the first needs no fine precision: the second goes
            // on from where it stops.
            options.precision.max(FIRST_PHASE_PRECISION)
        } else {
            options.precision
        };
        let mut ph = Phase::new(&b, phase_relax, phase, share, precision, upper);
        ph.last = phase + 1 == phase_count;
        loop {
            b.bisect(&mut ph)?;
            if !b.retry(&mut ph)? {
                break;
            }
        }
        // Complete: the precision reached, the upper end a period where an assignment
        // passed with every check answered (or the first upper end), nothing left too
        // large.
        let phase_complete = ph.hi <= b.lo * (1.0 + precision)
            && ph.undecided_at.last().is_none_or(|&u| u != ph.hi)
            && !ph.too_large;
        undecided = infinite_undecided || !phase_complete;
    }
    b.out.lower_bound = b.lo;
    // A period where only the closed forms passed may lie below what the scheduled checks
    // then proved.
    b.out.relaxed_period = b.feasible_at.filter(|&t| t >= b.lo);
    b.out.complete = !undecided && !b.stopped_early;
    Ok(b.finish())
}

/// The state of one bound's bisection across its phases.
struct Bisection<'a> {
    options: &'a BoundOptions,
    milp: MilpOptions,
    started: Instant,
    out: GlobalBound,
    learnt: &'a mut Learnt,
    /// The highest period proven to have no plan (or the instance's bound).
    lo: f64,
    /// The smallest period where an assignment was found to pass.
    feasible_at: Option<f64>,
    /// Whether the bisection stopped because the bound reached what the caller asked for.
    stopped_early: bool,
}

/// One phase of the bisection: its relaxation, its time and where it stands.
struct Phase<'r> {
    relax: &'r Relaxation,
    started: Instant,
    limit: Option<Duration>,
    /// Whether this is the last phase.
    last: bool,
    precision: f64,
    hi: f64,
    solves: usize,
    too_large: bool,
    /// The second phase's threshold is at or above the first's: it gallops up from there
    /// (steps of 1%, 2%, 4%...) until a probe passes, then bisects.
    step: Option<f64>,
    /// With a known plan, once the first probes have taught the loop its premises (in the
    /// first phase; at once in the second), the next one decides whether that plan is
    /// within `CLOSING_GAP` of optimal; the bisection then goes on from what it proved.
    closing: Option<f64>,
    closing_after: usize,
    /// Periods where a probe ended undecided or passed by an assignment whose check was
    /// cut short (decreasing), and the shortest where one passed with every check answered
    /// (or the upper end). The phase is complete when its upper end is the latter.
    undecided_at: Vec<f64>,
    passed_at: f64,
    /// The closing probe's period, when its answer left the case open: undecided, or
    /// passed by an assignment whose check was cut short.
    closing_open: Option<f64>,
}

impl<'r> Phase<'r> {
    /// Phase `index` with `relax`, `share` of the time left and `precision`, below `upper`.
    fn new(
        b: &Bisection,
        relax: &'r Relaxation,
        index: usize,
        share: f64,
        precision: f64,
        upper: f64,
    ) -> Self {
        let started = Instant::now();
        let limit = b.time_left().map(|t| t.mul_f64(share));
        let hi = upper.max(b.lo);
        Phase {
            relax,
            started,
            limit,
            last: false,
            precision,
            hi,
            solves: 0,
            too_large: false,
            step: (index > 0).then_some(0.01),
            closing: b
                .options
                .known_period
                .map(|known| known / (1.0 + CLOSING_GAP * 0.99))
                .filter(|&t| t > b.lo * (1.0 + precision) && t < hi),
            closing_after: if index == 0 { CLOSING_PROBE_AFTER } else { 0 },
            undecided_at: Vec::new(),
            passed_at: hi,
            closing_open: None,
        }
    }

    /// What is left of the phase's time.
    fn left(&self) -> Option<Duration> {
        self.limit.map(|t| t.saturating_sub(self.started.elapsed()))
    }
}

impl<'a> Bisection<'a> {
    /// A bisection from `lower_bound` (the instance's own bound), started at `started`.
    fn new(
        options: &'a BoundOptions,
        started: Instant,
        lower_bound: f64,
        learnt: &'a mut Learnt,
    ) -> Self {
        Bisection {
            options,
            milp: relaxation_milp(options.threads),
            started,
            out: GlobalBound {
                lower_bound,
                infeasible: false,
                relaxed_period: None,
                assignment: None,
                candidates: Vec::new(),
                complete: false,
                solves: 0,
                nodes: 0,
                solve_seconds: 0.0,
                method: "instance bounds (loads, heaviest layer, cheapest cut)".into(),
            },
            learnt,
            lo: lower_bound,
            feasible_at: None,
            stopped_early: false,
        }
    }

    fn time_left(&self) -> Option<Duration> {
        self.options
            .time_limit
            .map(|t| t.saturating_sub(self.started.elapsed()))
    }

    /// Whether the bound proven so far is all the caller asked for.
    fn enough(&self) -> bool {
        self.options
            .enough
            .is_some_and(|(e, from)| self.lo >= e && Instant::now() >= from)
    }

    /// The bound of a case proven infeasible at an infinite period (by the packing search,
    /// or by the MILP).
    fn infeasible(mut self, proven_by_search: bool) -> GlobalBound {
        self.out.infeasible = true;
        self.out.lower_bound = f64::INFINITY;
        self.out.complete = true;
        self.out.method = format!(
            "relaxation infeasible at every period: no allocation holds one batch of its \
             layers (proven by {})",
            if proven_by_search {
                "the packing search"
            } else {
                "the MILP"
            }
        );
        self.finish()
    }

    fn finish(mut self) -> GlobalBound {
        self.out.solve_seconds = self.started.elapsed().as_secs_f64();
        self.out
    }

    /// The relaxation at an infinite period: does any assignment hold one batch of each of
    /// its layers? With a known plan, at most half of the time (undecided, the bisection
    /// still proves what it can); without one, nine tenths: a proof that no plan exists is
    /// then what closes the case. Its answer, and whether the packing search gave it.
    fn infinite_period(&mut self, relax: &Relaxation) -> crate::error::Result<(Probe, bool)> {
        let share = if self.options.known_period.is_some() {
            0.5
        } else {
            0.9
        };
        // The packing search first (docs/bounds.md, "Infeasible cases"): exact and usually
        // fast. It gets half of that share, but at least a second even when the limit has
        // passed (it needs milliseconds on the real chains) and at most a minute.
        let packing_time = self
            .time_left()
            .map_or(Duration::from_secs(60), |t| t.mul_f64(share * 0.5))
            .clamp(Duration::from_secs(1), Duration::from_secs(60));
        let packing =
            match infinite::Packing::new(relax).decide(Some(Instant::now() + packing_time)) {
                infinite::Answer::Infeasible => Probe::Infeasible,
                // Checked like a MILP solution; one that failed would go to the MILP instead.
                infinite::Answer::Feasible(a)
                    if relaxation_fits(relax, &a, f64::INFINITY)
                        && relax
                            .violated(&a, f64::INFINITY, Windows::Waited)
                            .is_empty() =>
                {
                    Probe::Feasible(a)
                }
                _ => Probe::Undecided,
            };
        let proven_by_search = matches!(packing, Probe::Infeasible);
        // Where the packing search decided, its answer stands; the MILP's loop decides only
        // where the search ran out of time.
        let answer = match packing {
            Probe::Undecided => {
                self.out.solves += 1;
                let budget = self.time_left().map(|t| t.mul_f64(share));
                probe(
                    relax,
                    f64::INFINITY,
                    &self.milp,
                    budget,
                    &mut self.out.nodes,
                    self.learnt,
                )?
            }
            decided => decided,
        };
        Ok((answer, proven_by_search))
    }

    /// Bisects the phase's period until its precision, its time, a closed case or a model
    /// too large ends it.
    fn bisect(&mut self, ph: &mut Phase) -> crate::error::Result<()> {
        while ph.hi > self.lo * (1.0 + ph.precision) {
            if self.enough() {
                self.stopped_early = true;
                break;
            }
            if ph.left().is_some_and(|t| t.is_zero()) {
                break;
            }
            let due = if ph.solves >= ph.closing_after {
                ph.closing.take()
            } else {
                None
            };
            let (lo, hi) = (self.lo, ph.hi);
            let next = match ph.step {
                Some(s) if lo * (1.0 + s) < hi => lo * (1.0 + s),
                _ => 0.5 * (lo + hi),
            };
            let closing_probe = due.filter(|&t| t > lo && t < hi);
            let mid = closing_probe.unwrap_or(next);
            self.out.solves += 1;
            ph.solves += 1;
            // A probe gets at most a third of what is left (but a second at least), so that
            // one hard period near the threshold leaves time for easier ones below it.
            let budget = ph
                .left()
                .map(|t| (t / 3).max(Duration::from_secs(1)).min(t));
            match probe(
                ph.relax,
                mid,
                &self.milp,
                budget,
                &mut self.out.nodes,
                self.learnt,
            )? {
                Probe::Infeasible => {
                    self.lo = mid;
                    ph.step = ph.step.map(|s| 2.0 * s);
                }
                Probe::Feasible(a) => {
                    ph.hi = tighten(ph.relax, &a, lo, mid, ph.precision).min(mid);
                    self.feasible_at = Some(ph.hi);
                    // A pass by an assignment whose check was cut short is left open like
                    // an undecided probe (a longer check might exclude it), and retried
                    // where undecided ones are.
                    if ph.relax.passed_unanswered() {
                        ph.undecided_at.push(ph.hi);
                        if closing_probe.is_some() {
                            ph.closing_open = Some(mid);
                        }
                    } else {
                        ph.passed_at = ph.hi;
                    }
                    self.out.passed(a);
                    ph.step = None;
                }
                Probe::Undecided => {
                    ph.hi = mid;
                    ph.undecided_at.push(mid);
                    ph.step = None;
                    if closing_probe.is_some() {
                        ph.closing_open = Some(mid);
                    }
                }
                Probe::TooLarge => {
                    // Every later probe of the phase builds a model as large, with less
                    // time: the phase ends here.
                    ph.too_large = true;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Asks again, with the time the phase has left, a period that the bisection left
    /// open; whether the bisection goes on after it.
    fn retry(&mut self, ph: &mut Phase) -> crate::error::Result<bool> {
        // Without a known plan (the bound alone, which has nothing else to spend its time
        // on), a bisection that closed in on a period left undecided asks it again with all
        // the time the phase has left: the premises learnt since often decide it.
        let retry = ph.undecided_at.last().copied().filter(|&t| {
            t == ph.hi
                && t > self.lo
                && !ph.too_large
                && self.options.known_period.is_none()
                && !self.enough()
        });
        // With a known plan and a caller for whom the closing answer is enough (a gap
        // tolerance of `CLOSING_GAP` or more), the last phase asks its closing question
        // again with the time the bisection below it left: the premises learnt below often
        // decide it, and "no assignment" there is all the caller needs.
        let retry = retry.or_else(|| {
            ph.closing_open.take().filter(|&t| {
                ph.last
                    && t > self.lo
                    && !ph.too_large
                    && !self.enough()
                    && self.options.enough.is_some_and(|(e, _)| t >= e)
            })
        });
        let Some(t) = retry else {
            return Ok(false);
        };
        let Some(budget) = ph.left().filter(|&b| b >= Duration::from_secs(1)) else {
            return Ok(false);
        };
        self.out.solves += 1;
        match probe(
            ph.relax,
            t,
            &self.milp,
            Some(budget),
            &mut self.out.nodes,
            self.learnt,
        )? {
            Probe::Infeasible => {
                self.lo = t;
                // Every period left undecided at or below `t` is decided with it.
                ph.undecided_at.retain(|&u| u > t);
                ph.hi = ph
                    .undecided_at
                    .last()
                    .map_or(ph.passed_at, |&u| u.min(ph.passed_at));
                ph.step = None;
                Ok(true)
            }
            Probe::Feasible(a) => {
                self.feasible_at = Some(t);
                // Answered, the period is decided.
                if !ph.relax.passed_unanswered() {
                    ph.undecided_at.retain(|&u| u != t);
                }
                self.out.passed(a);
                Ok(false)
            }
            Probe::Undecided | Probe::TooLarge => Ok(false),
        }
    }
}
