//! One probe of the relaxation at one period: the search over assignments first, then,
//! where it runs out of time, the MILP's loop of lazily added premises (a logic-based
//! Benders loop), each assignment that passes the closed forms handed to the scheduled
//! checks; and what the probes of one case learn ([`Learnt`]).

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::infinite;
use super::model::relaxation_model;
use super::premises::Premise;
use super::relaxation::{Relaxation, Windows};
use super::search;
use super::{FUTILE_MILP_LOOPS, SEARCH_SHARE, SEARCH_WITHOUT_LIMIT};
use crate::milp::solver::{MilpOptions, SolveStatus};

/// What the relaxation learnt of one case, kept across probes and calls on that case: the
/// premises found so far, and how far the search over assignments got at each period
/// ([`search::Frontiers`]: a later search at that period or a shorter one goes on from
/// there instead of walking again through what was already excluded).
#[derive(Debug, Clone, Default)]
pub struct Learnt {
    pub premises: Vec<Premise>,
    pub(super) frontiers: search::Frontiers,
    /// How the MILP's loops that followed an undecided search ended on this case: how
    /// many decided their probe, how many did not.
    pub(super) loops_after_search: LoopsAfterSearch,
}

/// How the MILP's loops after an undecided search have ended on one case ([`Learnt`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LoopsAfterSearch {
    pub(super) decided: usize,
    pub(super) undecided: usize,
}

impl LoopsAfterSearch {
    /// Counts the end of one loop (its probe's answer).
    pub(super) fn record(&mut self, answer: &Probe) {
        match answer {
            Probe::Infeasible | Probe::Feasible(_) => self.decided += 1,
            Probe::Undecided | Probe::TooLarge => self.undecided += 1,
        }
    }

    /// Whether the loop has shown it decides nothing on the case: `FUTILE_MILP_LOOPS`
    /// undecided and none decided. The search then takes the whole of each probe.
    pub(super) fn futile(&self) -> bool {
        self.decided == 0 && self.undecided >= FUTILE_MILP_LOOPS
    }
}

/// Answer of one relaxation solve.
pub(super) enum Probe {
    Infeasible,
    Feasible(Vec<usize>),
    Undecided,
    /// Not decided, and not even started: the MILP is too large to be set up within the
    /// time left ([`Model::setup_outlasts`](crate::milp::solver::Model::setup_outlasts)); a
    /// probe with less time cannot do better.
    TooLarge,
}

/// Solves the relaxation at `period`, adding the premises its solutions violate until one
/// satisfies every exact check ([`relaxation_fits`](super::relaxation_fits)) or none is
/// left. `learnt` keeps the premises found so far (those that cannot fit at `period` either
/// enter the first solve) and where the searches stopped (this one starts from the furthest
/// point reached at `period` or above).
pub(super) fn probe(
    relax: &Relaxation,
    period: f64,
    milp: &MilpOptions,
    time_left: Option<Duration>,
    nodes: &mut u64,
    learnt: &mut Learnt,
) -> crate::error::Result<Probe> {
    let at = ProbeAt {
        relax,
        period,
        milp,
        time_left,
        started: Instant::now(),
    };
    let mut cuts: Vec<Premise> = learnt
        .premises
        .iter()
        .filter(|h| match h {
            Premise::Exact(h) => !relax.holding_fits(h, period),
            Premise::Limited(_) => true,
            Premise::Excluded { period: t, .. } | Premise::Scheduled { period: t, .. } => {
                period <= *t
            }
        })
        .cloned()
        .collect();
    // The search first (module `search`): exact, and on the block chains usually decided
    // in milliseconds; the MILP's loop gets what it leaves of the time.
    let searched = period.is_finite() && relax.search;
    // Where the loop after the search has shown it decides nothing on this case, the
    // search gets the whole probe.
    let search_only = searched && learnt.loops_after_search.futile();
    if searched {
        match at.search(search_only, &mut cuts, learnt)? {
            infinite::Answer::Infeasible => return Ok(Probe::Infeasible),
            infinite::Answer::Feasible(a) => return Ok(Probe::Feasible(a)),
            infinite::Answer::Undecided if search_only => return Ok(Probe::Undecided),
            infinite::Answer::Undecided => {}
        }
    }
    let answer = at.milp_loop(searched, &mut cuts, nodes, learnt)?;
    if searched {
        learnt.loops_after_search.record(&answer);
    }
    Ok(answer)
}

/// One probe: the relaxation, its period, the solver's options and the probe's time.
struct ProbeAt<'a> {
    relax: &'a Relaxation,
    period: f64,
    milp: &'a MilpOptions,
    time_left: Option<Duration>,
    started: Instant,
}

impl ProbeAt<'_> {
    /// The search over assignments, within `SEARCH_SHARE` of the probe's time (all of it
    /// when `search_only`), from where the searches at this period or above stopped; the
    /// premises it learns join `cuts` and `learnt`.
    fn search(
        &self,
        search_only: bool,
        cuts: &mut Vec<Premise>,
        learnt: &mut Learnt,
    ) -> crate::error::Result<infinite::Answer> {
        let (relax, period) = (self.relax, self.period);
        let share = self.time_left.map_or(SEARCH_WITHOUT_LIMIT, |t| {
            if search_only {
                t
            } else {
                t.mul_f64(SEARCH_SHARE)
            }
        });
        let deadline = Instant::now() + share;
        let probe_deadline = self.time_left.map(|t| self.started + t);
        let mut premises: Vec<Premise> = cuts
            .iter()
            .filter(|h| matches!(h, Premise::Scheduled { .. } | Premise::Excluded { .. }))
            .cloned()
            .collect();
        let known = premises.len();
        let threads = self.milp.threads;
        let mut leaf = |a: &[usize]| relax.scheduled_premises(a, period, threads, probe_deadline);
        let from = learnt.frontiers.start(period);
        let (answer, reached) = search::decide_from(
            relax,
            period,
            &mut premises,
            Some(deadline),
            &mut leaf,
            &from,
            u64::MAX,
        )?;
        learnt.frontiers.record(period, reached);
        for h in premises.drain(known..) {
            if !learnt.premises.contains(&h) {
                learnt.premises.push(h.clone());
            }
            if !cuts.contains(&h) {
                cuts.push(h);
            }
        }
        Ok(answer)
    }

    /// The MILP's loop with the premises `cuts`, those it learns added to them and to
    /// `learnt`, until an assignment passes every check or none is left.
    fn milp_loop(
        &self,
        searched: bool,
        cuts: &mut Vec<Premise>,
        nodes: &mut u64,
        learnt: &mut Learnt,
    ) -> crate::error::Result<Probe> {
        let (relax, period, milp) = (self.relax, self.period, self.milp);
        let (time_left, started) = (self.time_left, self.started);
        // Plain windows first: their premises are general and the loop converges fast; the
        // waits only once an assignment passes them.
        let mut waited = !period.is_finite();
        let mut windows = if waited {
            Windows::Waited
        } else {
            Windows::Plain { extra: 0.0 }
        };
        let mut first = true;
        Ok('solves: loop {
            let left = time_left.map(|t| t.saturating_sub(started.elapsed()));
            if left.is_some_and(|t| t.is_zero()) {
                break 'solves Probe::Undecided;
            }
            let (model, layout) = relaxation_model(relax, period, cuts, left);
            if model.over_budget() || model.setup_outlasts(left) {
                // Before the first solve, the model is too large for the probe; after, the
                // probe has used its time. Where the search ran, a shorter period may still be
                // decided by it: undecided, not too large.
                break 'solves if first && !searched {
                    Probe::TooLarge
                } else {
                    Probe::Undecided
                };
            }
            first = false;
            let r = model.solve(milp, left)?;
            *nodes += r.nodes;
            let assignment: Vec<usize> = match r.status {
                SolveStatus::Infeasible => break 'solves Probe::Infeasible,
                SolveStatus::NoSolutionWithinLimit => break 'solves Probe::Undecided,
                SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => layout
                    .x
                    .iter()
                    .map(|row| {
                        row.iter()
                            .enumerate()
                            .max_by(|a, b| r.values[a.1 .0].total_cmp(&r.values[b.1 .0]))
                            .map(|(p, _)| p)
                            .unwrap_or(0)
                    })
                    .collect(),
            };
            let mut violated = relax.violated(&assignment, period, windows);
            if violated.is_empty() && !waited {
                // The plain windows hold: now the waits (docs/bounds.md, "Waits forced by
                // the period"), with every premise learnt so far.
                waited = true;
                windows = Windows::Waited;
                violated = relax.violated(&assignment, period, windows);
            }
            if violated.is_empty() {
                // The closed forms hold: now each processor's own scheduling problem.
                let deadline = time_left.map(|t| started + t);
                violated = relax.scheduled_premises(&assignment, period, milp.threads, deadline)?;
            }
            if violated.is_empty() {
                break 'solves Probe::Feasible(assignment);
            }
            for h in violated {
                if !cuts.contains(&h) {
                    if !learnt.premises.contains(&h) {
                        learnt.premises.push(h.clone());
                    }
                    cuts.push(h);
                } else {
                    // A solution that violates a premise already cut off: the solver's
                    // tolerances let it through; stop rather than loop (undecided is safe).
                    break 'solves Probe::Undecided;
                }
            }
        })
    }
}

/// Whether the relaxation has a solution at `period` (possibly infinite): `None` when the
/// solve ended undecided at the options' limit.
pub fn relaxation_feasible(
    relax: &Relaxation,
    period: f64,
    options: &MilpOptions,
) -> crate::error::Result<Option<bool>> {
    let mut nodes = 0;
    Ok(
        match probe(
            relax,
            period,
            options,
            None,
            &mut nodes,
            &mut Learnt::default(),
        )? {
            Probe::Infeasible => Some(false),
            Probe::Feasible(_) => Some(true),
            Probe::Undecided | Probe::TooLarge => None,
        },
    )
}

/// What one probe at one period says to a caller looking for plans ([`probe_period`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// No assignment passes the relaxation: no plan has this period or a shorter one.
    NoPlan,
    /// An assignment that passes it (processor of each layer, 0-based), a starting point
    /// for a plan near that period.
    Assignment(Vec<usize>),
    /// Neither, within the time given.
    Undecided,
}

/// One probe of `relax` at `period` within `time_limit`, outside a bisection: what it
/// learns stays in `learnt` (premises, and where the search stopped), for a later bound or
/// probe of the same case.
pub fn probe_period(
    relax: &Relaxation,
    period: f64,
    time_limit: Duration,
    threads: NonZeroU32,
    learnt: &mut Learnt,
) -> crate::error::Result<ProbeAnswer> {
    let mut nodes = 0;
    let milp = relaxation_milp(threads);
    Ok(
        match probe(relax, period, &milp, Some(time_limit), &mut nodes, learnt)? {
            Probe::Infeasible => ProbeAnswer::NoPlan,
            Probe::Feasible(a) => ProbeAnswer::Assignment(a),
            Probe::Undecided | Probe::TooLarge => ProbeAnswer::Undecided,
        },
    )
}

/// The solver options of the relaxation MILP: a feasibility problem solved over and over,
/// where HiGHS's sub-MIP heuristics (RENS, RINS) and its feasibility jump spend time
/// without changing an answer (docs/bounds.md, "Solver settings").
pub(super) fn relaxation_milp(threads: NonZeroU32) -> MilpOptions {
    MilpOptions {
        threads,
        mip_rel_gap: 1e-4,
        sub_mip_heuristics: false,
        feasibility_jump: false,
        ..MilpOptions::default()
    }
}
