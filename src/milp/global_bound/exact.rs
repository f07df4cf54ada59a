//! The exact checks at one period: [`decide_period`] hands every assignment that passes the
//! relaxation to the caller's exact check and excludes those it proves to have no plan, so
//! that "no assignment left" proves that no plan of the case has the period or a shorter
//! one (docs/bounds.md, "Exact checks: proving the plan optimal").

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::premises::Premise;
use super::probe::{probe, relaxation_milp, Learnt, Probe};
use super::relaxation::Relaxation;
use super::search;
use crate::milp::fixed_allocation::runs_of;

/// What an exact check says of one assignment at the period [`decide_period`] asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The check found a valid plan with this assignment that the caller keeps (better
    /// than the caller's own; at that period or below when the check is exact).
    Plan,
    /// Proven: no plan with this assignment at that period or below.
    NoPlan,
    /// Not decided (a time limit, or no exact check for this assignment).
    Unknown,
}

/// What [`decide_period`] proved.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No plan of the case has that period or a shorter one: the period is a lower bound.
    NoPlan,
    /// The exact check found a plan with this assignment.
    Plan(Vec<usize>),
    /// Neither: why, in words.
    Undecided(String),
}

/// Decides whether any plan of the case has period `period` or shorter, exactly when
/// `exact` is: the relaxation's loop, with every assignment that passes it handed to
/// `exact` (e.g. the scheduling MILP on its stages). An assignment proven to have no plan
/// at `period` is excluded (a no-good premise, kept in `learnt` for this period and shorter
/// ones) and the loop goes on; so does an assignment `exact` leaves unanswered, set aside
/// for the rest of this call only (nothing was proven of it: the search's positions in
/// `learnt` are moved back to it before returning, so that a later call asks it again).
/// It ends when the relaxation has no assignment left (every assignment either fails the
/// relaxation or was excluded: no plan, unless one was set aside: undecided), when `exact`
/// finds a plan, or undecided. A
/// combinatorial (logic-based) Benders decomposition whose subproblem is the exact
/// scheduling problem of one allocation.
pub fn decide_period(
    relax: &Relaxation,
    period: f64,
    threads: NonZeroU32,
    time_limit: Option<Duration>,
    learnt: &mut Learnt,
    exact: &mut dyn FnMut(&[usize]) -> crate::error::Result<Verdict>,
) -> crate::error::Result<Decision> {
    let started = Instant::now();
    let milp = relaxation_milp(threads);
    let mut nodes = 0;
    // Assignments whose exact check gave no answer: excluded for the rest of this search,
    // so that the others still get theirs (one of them may have a plan), and taken out of
    // `learnt` again before returning, since nothing was proven of them; while there is any,
    // "no plan" cannot be said.
    let mut skipped: Vec<Premise> = Vec::new();
    let mut decide = || -> crate::error::Result<Decision> {
        let undecided = |why: &str, skipped: &[Premise]| {
            Decision::Undecided(match skipped.first() {
                Some(Premise::Excluded { assignment, .. }) => format!(
                    "{why}; no exact answer for {} assignment(s), the first: {}",
                    skipped.len(),
                    runs_text(assignment)
                ),
                _ => why.to_string(),
            })
        };
        loop {
            let left = time_limit.map(|t| t.saturating_sub(started.elapsed()));
            if left.is_some_and(|t| t.is_zero()) {
                return Ok(undecided("time limit", &skipped));
            }
            let assignment = match probe(relax, period, &milp, left, &mut nodes, learnt)? {
                Probe::Infeasible if skipped.is_empty() => return Ok(Decision::NoPlan),
                Probe::Infeasible => return Ok(undecided("no other assignment passes", &skipped)),
                Probe::Undecided => {
                    return Ok(undecided("the relaxation's loop ended undecided", &skipped))
                }
                Probe::TooLarge => {
                    return Ok(undecided(
                        "the relaxation MILP is too large for the time left",
                        &skipped,
                    ))
                }
                Probe::Feasible(a) => a,
            };
            match exact(&assignment)? {
                Verdict::Plan => return Ok(Decision::Plan(assignment)),
                verdict => {
                    let excluded = Premise::Excluded { assignment, period };
                    if learnt.premises.contains(&excluded) {
                        // Solver tolerances let an excluded assignment through: stop (safe).
                        return Ok(undecided("an excluded assignment came back", &skipped));
                    }
                    if verdict == Verdict::Unknown {
                        skipped.push(excluded.clone());
                    }
                    learnt.premises.push(excluded);
                }
            }
        }
    };
    let decision = decide();
    learnt.premises.retain(|h| !skipped.contains(h));
    for h in &skipped {
        if let Premise::Excluded { assignment, .. } = h {
            learnt
                .frontiers
                .back_to(period, &search::Position::of(relax, assignment));
        }
    }
    decision
}

/// An assignment (`assignment[l]`: the processor of layer `l + 1`) as its runs of
/// consecutive layers, for a report: "layers 1-4 on 0, 5-89 on 1, 90-174 on 0".
fn runs_text(assignment: &[usize]) -> String {
    let runs: Vec<String> = runs_of(assignment)
        .stages
        .iter()
        .map(|s| {
            if s.first == s.last {
                format!("{} on {}", s.first, s.processor)
            } else {
                format!("{}-{} on {}", s.first, s.last, s.processor)
            }
        })
        .collect();
    format!("layers {}", runs.join(", "))
}

#[cfg(test)]
mod tests {
    use super::runs_text;

    #[test]
    fn an_assignment_reads_as_its_runs() {
        assert_eq!(
            runs_text(&[0, 0, 0, 0, 1, 1, 0, 2]),
            "layers 1-4 on 0, 5-6 on 1, 7 on 0, 8 on 2"
        );
        assert_eq!(runs_text(&[3]), "layers 1 on 3");
    }
}
