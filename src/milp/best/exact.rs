//! `best`'s phase 9, the exact checks (module docs of `best`, docs/bounds.md): is there any
//! plan below a period? The relaxation's loop at that period, each assignment that passes
//! it scheduled over every stage structure ([`decide_period`]): a plan found becomes the
//! incumbent and the question is asked again below it; "no plan" raises the bound, and just
//! below the incumbent closes the case. With an extension, once more.
//!
//! Where tensors are shared between layers further apart than neighbours (`stash_shared`,
//! op-level chains), a merged stage's stash is no sum of pairwise terms: the scheduling MILP
//! then charges each layer the global bound's per-layer charges, which never exceed what
//! any stage keeps (`global_bound::stash_charges`). Its "no pattern" is still a proof for
//! every stage structure; a pattern it finds is judged with the real stashes, and when it
//! does not fit them, the stage structure it chose is scheduled again with them (a plan, or
//! no answer for that assignment).

use std::time::Duration;

use super::{Incumbent, Portfolio, Stop, PRECISION};
use crate::milp::fixed_allocation::charged_structures;
use crate::milp::global_bound::{
    decide_period, stash_charges, Decision, Relaxation, Verdict, CLOSING_GAP,
};
use crate::milp::pattern_milp::{PatternMilp, Scope, StashCharges};
use crate::milp::SolveStatus;
use crate::model::{Allocation, Instance};

/// The exact checks ask about the middle of the bound and the incumbent while the gap is
/// wider than this, and just below the incumbent after.
const HALVING_GAP: f64 = 0.004;

/// The longest chain the exact checks take on. Each check is one MILP over every stage
/// structure of the assignment, with a stage per layer: its pairs grow with the square of
/// a processor's layers. On the block-level chains (18-63 layers) the checks close most
/// open cases; on the op-level ones (174-430 layers) none answered within 5-60 s, and on
/// ResNet-50's 174 ops on 2 processors building and presolving one MILP ran 3 s past a
/// 60-s limit.
pub(super) const EXACT_CHECK_LAYERS: usize = 64;

/// What an exact check of assignment `a` schedules: a stage per layer and the merges open
/// to the MILP, over every stage structure of `a`. With `charges` (tensors shared further
/// apart), every two consecutive layers of one processor may merge, each charged its
/// per-layer charge: a relaxation of every stage structure (module docs).
fn check_scope(
    instance: &Instance,
    a: &[usize],
    charges: Option<&StashCharges>,
) -> (Allocation, Scope) {
    let (finest, mergeable) = charged_structures(instance, a, charges.is_some());
    let scope = Scope {
        stash_charges: charges.cloned(),
        ..Scope::every_stage_structure(mergeable)
    };
    (finest, scope)
}

/// One question of the exact checks: its period, and whether it may take only a third of
/// the time left.
#[derive(Debug, Clone, Copy)]
struct Question {
    target: f64,
    third: bool,
}

impl Portfolio<'_> {
    /// Phase 9: the exact checks, while the gap is open and the time lasts; then, once, the
    /// extension's, for a case left open with its plan near the bound.
    pub(super) fn exact_checks(&mut self, relax: &Relaxation) -> crate::error::Result<()> {
        let layers = self.instance().len();
        let applies = layers <= EXACT_CHECK_LAYERS;
        if !self.closed() && !applies {
            self.stop(Stop::ChainTooLong(layers));
        }
        let charges = applies.then(|| stash_charges(self.instance())).flatten();
        // Whether the extension moved the deadline (once at most).
        let mut extended = false;
        while !self.closed() && applies {
            self.questions(relax, charges.as_ref(), extended)?;
            if extended || !self.extend() {
                break;
            }
            extended = true;
        }
        self.lap("exact checks");
        if self.left().is_zero() && !self.closed() {
            self.stop(Stop::Clock);
        }
        Ok(())
    }

    /// The questions, until one cannot be decided, the case closes or the time is up.
    /// Before halving, while the plan is more than `CLOSING_GAP` above the bound: is there a
    /// plan within it? "No plan" there closes the case, and it is the easiest question to
    /// prove (fewer assignments pass a shorter period). Then halving the gap while it is
    /// wide: "no plan" at the geometric middle of the bound and the incumbent raises the
    /// bound there, a plan lowers the incumbent below it. Where that cannot be decided, just
    /// below the incumbent.
    fn questions(
        &mut self,
        relax: &Relaxation,
        charges: Option<&StashCharges>,
        extended: bool,
    ) -> crate::error::Result<()> {
        let mut closing = true;
        let mut halving = true;
        while let Some(known) = self.incumbent.as_ref().map(Incumbent::period) {
            if self.closed() || self.left().is_zero() {
                break;
            }
            let closes = closing && known > self.lower * (1.0 + CLOSING_GAP);
            let halves = !closes && halving && known > self.lower * (1.0 + HALVING_GAP);
            let target = if closes {
                known / (1.0 + 0.99 * CLOSING_GAP)
            } else if halves {
                (self.lower * known).sqrt()
            } else {
                known / (1.0 + 0.999 * PRECISION)
            };
            // An answer cut short ends the closing question, then the halving, then the
            // phase: a third of the time left for each of the first two, so that the checks
            // below the incumbent keep some. Within an extension, the closing question gets
            // all of it: its "no plan" is what the extension is for.
            let question = Question {
                target,
                third: (closes && !extended) || halves,
            };
            match self.decide(relax, charges, question)? {
                Decision::NoPlan => self.lower = self.lower.max(target),
                Decision::Plan(_) => {}
                Decision::Undecided(_) if closes => closing = false,
                Decision::Undecided(_) if halves => halving = false,
                Decision::Undecided(why) => {
                    self.stop(Stop::Undecided(why));
                    break;
                }
            }
        }
        Ok(())
    }

    /// The time `question` may take now. Each exact check takes its own share of what is
    /// left when it starts, so the last check of a question may run past the question's
    /// share: a check cut short at the question's deadline would lose the plan it finds.
    fn question_time(&self, question: Question) -> Duration {
        if question.third {
            self.left() / 3
        } else {
            self.left()
        }
    }

    /// Whether there is a plan at `question`'s period or below: [`decide_period`] with
    /// [`Portfolio::exact_check`] on every assignment that passes the relaxation.
    fn decide(
        &mut self,
        relax: &Relaxation,
        charges: Option<&StashCharges>,
        question: Question,
    ) -> crate::error::Result<Decision> {
        // The loop learns into `learnt` while each exact check may change the incumbent.
        let mut learnt = std::mem::take(&mut self.learnt);
        let decision = decide_period(
            relax,
            question.target,
            self.planner.milp.threads,
            Some(self.question_time(question)),
            &mut learnt,
            &mut |a: &[usize]| self.exact_check(a, charges, question),
        );
        self.learnt = learnt;
        decision
    }

    /// The scheduling MILP of assignment `a` over every stage structure, at `question`'s
    /// period (with `charges`, a relaxation of them: module docs): a plan there becomes the
    /// incumbent.
    fn exact_check(
        &mut self,
        a: &[usize],
        charges: Option<&StashCharges>,
        question: Question,
    ) -> crate::error::Result<Verdict> {
        let limit = self.question_time(question);
        if limit.is_zero() {
            return Ok(Verdict::Unknown);
        }
        self.schedules += 1;
        self.proofs += 1;
        let (instance, platform) = (self.problem.instance, self.problem.platform);
        let (finest, scope) = check_scope(instance, a, charges);
        let Some(milp) = PatternMilp::new(instance, platform, &finest, question.target, &scope)
        else {
            // Static memory alone does not fit: no plan at any period.
            return Ok(Verdict::NoPlan);
        };
        let r = milp.model.solve(&self.milp(limit), Some(limit))?;
        Ok(match r.status {
            SolveStatus::Infeasible => Verdict::NoPlan,
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
                let (allocation, pattern) = milp.decoder.decode(&r.values);
                if self.offer(allocation.clone(), pattern, "exact check") {
                    Verdict::Plan
                } else if charges.is_some() {
                    self.structure_check(&allocation, question)?
                } else {
                    // Judged invalid or not better: cannot happen for a solution at the
                    // target (it is judged exactly); say nothing.
                    Verdict::Unknown
                }
            }
            SolveStatus::NoSolutionWithinLimit => Verdict::Unknown,
        })
    }

    /// The stage structure a relaxed exact check chose, scheduled with its real stashes at
    /// `question`'s period: a plan, or no answer for its assignment (another structure
    /// may still fit).
    fn structure_check(
        &mut self,
        allocation: &Allocation,
        question: Question,
    ) -> crate::error::Result<Verdict> {
        let limit = self.question_time(question);
        if limit.is_zero() {
            return Ok(Verdict::Unknown);
        }
        let (instance, platform) = (self.problem.instance, self.problem.platform);
        let exact = Scope::default();
        let Some(milp) = PatternMilp::new(instance, platform, allocation, question.target, &exact)
        else {
            return Ok(Verdict::Unknown);
        };
        self.schedules += 1;
        let r = milp.model.solve(&self.milp(limit), Some(limit))?;
        if matches!(
            r.status,
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent
        ) {
            let (allocation, pattern) = milp.decoder.decode(&r.values);
            if self.offer(allocation, pattern, "exact check") {
                return Ok(Verdict::Plan);
            }
        }
        Ok(Verdict::Unknown)
    }

    /// The extension ([`Extension`](super::Extension)): once, for a case left open with its
    /// plan near the bound, the deadline moves to the extension's end and the questions
    /// start again from the closing one, with the premises learnt so far. Whether it did.
    fn extend(&mut self) -> bool {
        let (Some(extension), Some(known)) = (
            self.planner.extension,
            self.incumbent.as_ref().map(Incumbent::period),
        ) else {
            return false;
        };
        let near = known <= self.lower * (1.0 + extension.below_gap);
        let until = self.started + extension.until;
        if self.closed() || !near || until <= self.deadline {
            return false;
        }
        self.deadline = until;
        self.messages.push(format!(
            "extended to {:.0} s: the plan is {:.1}% above the bound (at most {:.1}%)",
            extension.until.as_secs_f64(),
            100.0 * (known / self.lower - 1.0),
            100.0 * extension.below_gap
        ));
        true
    }
}
