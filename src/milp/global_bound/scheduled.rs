//! The scheduled checks: an assignment that passes the closed forms goes, processor by
//! processor and then in groups, to the scheduling MILP focused on those processors, and a
//! proof that they have no pattern becomes a premise, generalised while a weaker check
//! still proves it (docs/bounds.md, "Scheduled premises" to "Groups of processors").

use std::num::NonZeroU32;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::premises::Premise;
use super::relaxation::{Holding, Relaxation, Scheduling, Unproven, Windows};
use super::{GENERALISING_LIMIT, QUICK_CHECK_LIMIT};
use crate::milp::solver::{MilpOptions, SolveStatus};

/// What a generalisation of a proof that took `proof` gets.
fn generalising(proof: Duration) -> Duration {
    (proof * 4).max(GENERALISING_LIMIT)
}

/// The scheduled checks of one assignment at one period: where their answers are kept, and
/// the time they may take.
struct Checks<'a> {
    s: &'a Scheduling,
    period: f64,
    threads: NonZeroU32,
    deadline: Option<Instant>,
}

impl Checks<'_> {
    /// The most a check may take now: the check limit, within the deadline.
    fn limit(&self) -> Duration {
        self.deadline
            .map_or(self.s.check_limit, |d| {
                d.saturating_duration_since(Instant::now())
            })
            .min(self.s.check_limit)
    }

    /// One focused check on `group` (holding `holdings`) within `at_most`, unless one like
    /// it proved nothing before.
    fn check(
        &self,
        a: &[usize],
        group: &[usize],
        left_out: &[bool],
        holdings: &[Holding],
        at_most: Duration,
    ) -> crate::error::Result<Option<bool>> {
        let (s, period) = (self.s, self.period);
        let limit = self.limit().min(at_most);
        if limit.is_zero() {
            return Ok(None);
        }
        // A pattern found at or below the period answers the check; a check cut short
        // there with as much time spares it unanswered.
        let (has_pattern, spared) = s.answered.lock().map_or((false, false), |m| {
            m.get(holdings).map_or((false, false), |u: &Unproven| {
                (u.has_pattern(period), u.spares(period, limit))
            })
        });
        if has_pattern {
            return Ok(Some(true));
        }
        if spared {
            return Ok(None);
        }
        let focus = Focus {
            assignment: a,
            group,
            left_out,
            tail: None,
        };
        let answer = focused_check(s, focus, period, self.threads, limit)?;
        if answer != Some(false) {
            if let Ok(mut m) = s.answered.lock() {
                let u = m.entry(holdings.to_vec()).or_default();
                match answer {
                    Some(true) => {
                        u.feasible_from = Some(u.feasible_from.map_or(period, |t| t.min(period)))
                    }
                    _ => u.record_cut_short(period, limit),
                }
            }
        }
        Ok(answer)
    }
}

/// What the checks of single processors found: a premise, or none (an assignment that
/// passes them, with a check cut short or not).
enum Singles {
    Proven(Premise),
    Passed { cut_short: bool },
}

impl Relaxation {
    /// Whether the assignment that last passed [`Self::scheduled_premises`] passed with a
    /// check cut short by the time (a processor's, or the group's): it passed the
    /// relaxation, but a longer check might still exclude it.
    pub(super) fn passed_unanswered(&self) -> bool {
        self.scheduling
            .as_ref()
            .is_some_and(|s| s.unanswered.load(Ordering::Relaxed))
    }

    /// The scheduled checks of `assignment` at `period` (docs/bounds.md, "Scheduled
    /// premises"): each processor's focused MILP ([`Self::single_checks`]), then, when none
    /// is proven alone, the tightest processors together ([`Self::group_check`]). The
    /// premise of the first proof, or none; an assignment that passes with a check cut
    /// short passes unanswered ([`Self::passed_unanswered`]). An assignment where a layer or
    /// a cut alone overloads its resource gets no check (see the body).
    pub(super) fn scheduled_premises(
        &self,
        assignment: &[usize],
        period: f64,
        threads: NonZeroU32,
        deadline: Option<Instant>,
    ) -> crate::error::Result<Vec<Premise>> {
        let Some(s) = &self.scheduling else {
            return Ok(Vec::new());
        };
        s.unanswered.store(false, Ordering::Relaxed);
        if !period.is_finite() {
            return Ok(Vec::new());
        }
        // A premise records a processor's runs and the cuts from the one before its first
        // layer on, not the cuts above it: it rests on the operations above the processor
        // never deciding its check, which holds when each of them fits its resource alone
        // (waits of up to a period then put their pairs anywhere modulo `T`). An assignment
        // where a layer or a crossing cut alone overloads its resource has no plan, and the
        // closed forms exclude it: it gets no check.
        let cap = period * (1.0 + self.slack);
        let alone = self.u.iter().all(|&u| u <= cap)
            && (0..self.layers.saturating_sub(1)).all(|c| {
                assignment[c] == assignment[c + 1] || self.link_factor * self.comm[c] <= cap
            });
        if !alone {
            return Ok(Vec::new());
        }
        let checks = Checks {
            s,
            period,
            threads,
            deadline,
        };
        let order = self.tightest_first(assignment, period);
        let cut_short = match self.single_checks(&checks, assignment, &order)? {
            Singles::Proven(premise) => return Ok(vec![premise]),
            Singles::Passed { cut_short } => cut_short,
        };
        // No proof: the assignment passes (unless a group below is proven), answered or not.
        s.unanswered.store(cut_short, Ordering::Relaxed);
        Ok(self
            .group_check(&checks, assignment, &order)?
            .into_iter()
            .collect())
    }

    /// Each processor of `assignment` with its runs, tightest first by the closed forms (its
    /// load over the period, its average memory over the memory): the time goes where a
    /// proof is likeliest.
    fn tightest_first(&self, assignment: &[usize], period: f64) -> Vec<(f64, usize, Holding)> {
        let mut order: Vec<(f64, usize, Holding)> = (0..self.processors)
            .filter_map(|p| Holding::of(assignment, p).map(|h| (p, h)))
            .map(|(p, h)| {
                let load: f64 = h
                    .runs
                    .iter()
                    .map(|&(f, l)| self.u[f..=l].iter().sum::<f64>())
                    .sum();
                let memory = self
                    .holding_need(&h, period, Windows::Waited)
                    .map_or(f64::INFINITY, |need| need / self.memory);
                ((load / period).max(memory), p, h)
            })
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        order
    }

    /// The check focused on each processor of `order` alone (a processor of more than
    /// `MAX_SCHEDULED_LAYERS` layers with its later ones left out), in two passes: each
    /// within `QUICK_CHECK_LIMIT`, then those cut short within the full limit, the fewest
    /// layers first. The first proof gives the premise ([`Self::generalised`]).
    fn single_checks(
        &self,
        checks: &Checks,
        assignment: &[usize],
        order: &[(f64, usize, Holding)],
    ) -> crate::error::Result<Singles> {
        let max_layers = checks.s.max_layers;
        // Two passes: each processor first within `QUICK_CHECK_LIMIT`, then those cut short
        // within the full limit. One proof is enough, and most come in a fraction of a
        // second, while a large processor's check may run to the limit and prove nothing.
        let mut cut_short = vec![false; order.len()];
        // The second pass takes the checks of the fewest layers first: a large one runs to
        // its limit more often than not, and it would leave a smaller one, which often
        // proves in a second, without the time the probe has left.
        let tightest_first: Vec<usize> = (0..order.len()).collect();
        let mut fewest_layers_first = tightest_first.clone();
        fewest_layers_first.sort_by_key(|&k| order[k].2.layers().min(max_layers));
        for (pass, at_most, visit) in [
            (0, QUICK_CHECK_LIMIT, &tightest_first),
            (1, Duration::MAX, &fewest_layers_first),
        ] {
            for &k in visit {
                let (_, p, h) = &order[k];
                if pass == 1 && !cut_short[k] {
                    continue;
                }
                // A processor of more layers than a check can take is checked on its first
                // ones, the others left out (a relaxation: `Scope::left_out`).
                let p = *p;
                let left_out = after_first(assignment, p, max_layers);
                let h = Holding::kept(assignment, p, &left_out).unwrap_or_else(|| h.clone());
                let started = Instant::now();
                match checks.check(
                    assignment,
                    &[p],
                    &left_out,
                    std::slice::from_ref(&h),
                    at_most,
                )? {
                    Some(false) => {}
                    Some(true) => {
                        cut_short[k] = false;
                        continue;
                    }
                    None => {
                        cut_short[k] = true;
                        continue;
                    }
                }
                let spent = started.elapsed();
                // One proof excludes the assignment: the time of the other checks is better
                // spent on the assignments that come next.
                let premise = self.generalised(checks, assignment, p, &left_out, h, spent)?;
                return Ok(Singles::Proven(premise));
            }
        }
        Ok(Singles::Passed {
            cut_short: cut_short.iter().any(|&c| c),
        })
    }

    /// The premise of a proof (within `spent`) on processor `p` of `assignment` holding `h`
    /// (its layers `left_out` left out), in the most general form that a weaker check still
    /// proves: [`generalisations`], then the layers below it as a pure delay
    /// ([`Self::tail_generalisation`]); else `h` itself.
    fn generalised(
        &self,
        checks: &Checks,
        assignment: &[usize],
        p: usize,
        left_out: &[bool],
        h: Holding,
        spent: Duration,
    ) -> crate::error::Result<Premise> {
        let period = checks.period;
        let mut proven = vec![h];
        let mut generalised = false;
        for (a, out, general) in generalisations(assignment, &[p], left_out) {
            if general != proven
                && checks.check(&a, &[p], &out, &general, generalising(spent))? == Some(false)
            {
                proven = general;
                generalised = true;
                break;
            }
        }
        // None of those: the layers after the processor's last kept one as a pure delay
        // (`Scope::tail`), which holds wherever at least as much transfer crosses there.
        if !generalised {
            if let Some((tail, holding, transfer)) =
                self.tail_generalisation(assignment, p, left_out)
            {
                let limit = checks.limit().min(generalising(spent));
                if !limit.is_zero()
                    && focused_check(
                        checks.s,
                        Focus {
                            assignment,
                            group: &[p],
                            left_out,
                            tail: Some(tail),
                        },
                        period,
                        checks.threads,
                        limit,
                    )? == Some(false)
                {
                    return Ok(Premise::Scheduled {
                        holdings: vec![holding],
                        period,
                        tail: Some(transfer),
                    });
                }
            }
        }
        Ok(Premise::Scheduled {
            holdings: proven,
            period,
            tail: None,
        })
    }

    /// When no processor of `order` is proven alone: the tightest together (as many as
    /// `MAX_SCHEDULED_LAYERS` layers allow, not every used one unless there are two; the
    /// transfers of the cuts between two of them share their link), first without the one
    /// with the most layers (its operations make the largest part of the MILP), then with
    /// it. A proof gives a premise on the group, its members dropped while it still holds;
    /// a group's check cut short leaves the assignment's pass unanswered.
    fn group_check(
        &self,
        checks: &Checks,
        assignment: &[usize],
        order: &[(f64, usize, Holding)],
    ) -> crate::error::Result<Option<Premise>> {
        let s = checks.s;
        let greedy = |candidates: &[(f64, usize, Holding)]| {
            let mut group: Vec<(usize, Holding)> = Vec::new();
            let mut layers = 0;
            for (_, p, h) in candidates {
                if layers + h.layers() <= s.max_layers {
                    layers += h.layers();
                    group.push((*p, h.clone()));
                }
            }
            group
        };
        let largest = order
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, _, h))| h.layers())
            .map(|(i, _)| i);
        let without_largest: Vec<(f64, usize, Holding)> = order
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != largest)
            .map(|(_, c)| c.clone())
            .collect();
        // A group of every used processor is the whole assignment's own problem, which the
        // exact checks of `best` decide: checked here only on two processors, where it is
        // the only group (and the bound alone has no other way to exclude an assignment
        // whose processors each pass alone); on more, its MILP costs the probes more time
        // than it proves (docs/bounds.md, "Groups of processors").
        let used = assignment.iter().copied().max().map_or(0, |m| m + 1);
        // Whether a group's check was cut short: an assignment that passes then passes
        // unanswered, as when a processor's was.
        let group_cut_short = std::cell::Cell::new(false);
        let proves = |group: &[(usize, Holding)]| -> crate::error::Result<bool> {
            if group.len() < 2 || (group.len() >= used && used > 2) {
                return Ok(false);
            }
            let (members, holdings) = in_chain_order(group);
            let answer = checks.check(assignment, &members, &[], &holdings, s.group_limit)?;
            if answer.is_none() {
                group_cut_short.set(true);
            }
            Ok(answer == Some(false))
        };
        let small = greedy(&without_largest);
        let full = greedy(order);
        let mut group = if proves(&small)? {
            small
        } else if full != small && proves(&full)? {
            full
        } else {
            if group_cut_short.get() {
                s.unanswered.store(true, Ordering::Relaxed);
            }
            return Ok(None);
        };
        // Fewer members while the proof holds, the most layers first: a premise on fewer
        // layers excludes more assignments, and its check is a smaller MILP.
        let mut by_size: Vec<Holding> = group.iter().map(|(_, h)| h.clone()).collect();
        by_size.sort_by_key(|h| std::cmp::Reverse(h.layers()));
        for h in by_size {
            if group.len() <= 2 {
                break;
            }
            let fewer: Vec<(usize, Holding)> =
                group.iter().filter(|(_, g)| g != &h).cloned().collect();
            if proves(&fewer)? {
                group = fewer;
            }
        }
        let (members, mut holdings) = in_chain_order(&group);
        for (a, left_out, general) in generalisations(assignment, &members, &[]) {
            if general != holdings
                && checks.check(&a, &members, &left_out, &general, GENERALISING_LIMIT)?
                    == Some(false)
            {
                holdings = general;
                break;
            }
        }
        Ok(Some(Premise::Scheduled {
            holdings,
            period: checks.period,
            tail: None,
        }))
    }

    /// The tail generalisation of a proof on processor `p` of `assignment` (its layers
    /// `left_out` left out): the first layer after its last kept one (where
    /// `Scope::tail` starts), its holding with only the cuts up to that layer, and the
    /// one-way transfer of the cuts crossing below it. `None` when the kept layers end the
    /// chain.
    pub(super) fn tail_generalisation(
        &self,
        assignment: &[usize],
        p: usize,
        left_out: &[bool],
    ) -> Option<(usize, Holding, f64)> {
        let mut h = Holding::kept(assignment, p, left_out)?;
        let last = h.runs.last()?.1;
        if last + 1 >= self.layers {
            return None;
        }
        h.cuts.retain(|&c| c <= last);
        let transfer = self.tail_transfer(&h, assignment);
        Some((last + 1, h, transfer))
    }
}

/// Which layers of processor `p` in `assignment` a check keeping its first `keep` ones
/// leaves out (`left_out[l]`: layer `l` is `p`'s and not among them).
fn after_first(assignment: &[usize], p: usize, keep: usize) -> Vec<bool> {
    let mut kept = 0;
    assignment
        .iter()
        .map(|&q| {
            let mine = q == p;
            kept += usize::from(mine);
            mine && kept > keep
        })
        .collect()
}

/// The processors of a group and their holdings, in the chain order of their first layers
/// (the form a premise on the group is kept in).
pub(super) fn in_chain_order(group: &[(usize, Holding)]) -> (Vec<usize>, Vec<Holding>) {
    let mut group = group.to_vec();
    group.sort_by_key(|(_, h)| h.runs[0].0);
    group.into_iter().unzip()
}

/// The checks that would make a proof on the processors `members` of `assignment` (their
/// layers `left_out` left out) a more general premise, most general first, each with its
/// holdings ([`kept_holdings`]): every other layer on one processor outside them (only the
/// boundary cuts of the members' runs crossing), with every layer after the last kept one
/// left out on the processor that holds it (no cut crossing after it) or not, and the
/// assignment itself with those layers left out. Each is a
/// relaxation of the problem it generalises (fewer transfers on the chain), so a proof of
/// it is a premise on fewer cuts.
fn generalisations(
    assignment: &[usize],
    members: &[usize],
    left_out: &[bool],
) -> Vec<(Vec<usize>, Vec<bool>, Vec<Holding>)> {
    let n = assignment.len();
    let mut left_out = left_out.to_vec();
    left_out.resize(n, false);
    let other = (0..)
        .find(|q| !members.contains(q))
        .expect("a label outside finitely many members");
    let alone: Vec<usize> = assignment
        .iter()
        .map(|&q| if members.contains(&q) { q } else { other })
        .collect();
    let kept = |l: usize| members.contains(&assignment[l]) && !left_out[l];
    let last = (0..n).rev().find(|&l| kept(l));
    // `a` with every layer after the last kept one left out on the processor of that one.
    let free_after = |a: &[usize]| -> Option<(Vec<usize>, Vec<bool>)> {
        let last = last.filter(|&l| l + 1 < n)?;
        let mut free = a.to_vec();
        let mut free_out = left_out.clone();
        for l in last + 1..n {
            free[l] = a[last];
            free_out[l] = true;
        }
        Some((free, free_out))
    };
    let mut out = Vec::new();
    let mut push = |(a, left_out): (Vec<usize>, Vec<bool>)| {
        let holdings = kept_holdings(&a, members, &left_out);
        out.push((a, left_out, holdings));
    };
    if let Some(free) = free_after(&alone) {
        push(free);
    }
    push((alone, left_out.clone()));
    if let Some(free) = free_after(assignment) {
        push(free);
    }
    out
}

/// The holdings of the processors `members` in `assignment`, in chain order: each one's
/// layers not `left_out` ([`Holding::kept`]; the premise a proof of the focused check
/// gives, `Premise::Scheduled`).
fn kept_holdings(assignment: &[usize], members: &[usize], left_out: &[bool]) -> Vec<Holding> {
    let mut holdings: Vec<Holding> = members
        .iter()
        .filter_map(|&p| Holding::kept(assignment, p, left_out))
        .collect();
    holdings.sort_by_key(|h| h.runs[0].0);
    holdings
}

/// What a focused check looks at: the processors `group` of `assignment`, their layers
/// `left_out` left out of them, and the layers from `tail` on as a pure delay
/// (`Scope::tail`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Focus<'a> {
    pub(super) assignment: &'a [usize],
    pub(super) group: &'a [usize],
    pub(super) left_out: &'a [bool],
    pub(super) tail: Option<usize>,
}

/// The scheduling MILP that [`focused_check`] solves; `None` when the group's static
/// memory alone does not fit.
pub(super) fn focused_milp(
    s: &Scheduling,
    focus: Focus,
    period: f64,
) -> Option<crate::milp::pattern_milp::PatternMilp> {
    use crate::milp::fixed_allocation::charged_structures;
    use crate::milp::pattern_milp::{PatternMilp, Scope};
    let Focus {
        assignment,
        group,
        left_out,
        tail,
    } = focus;
    // Every stage structure of the assignment, merges only on the group: a stage per layer,
    // consecutive layers of one processor free to merge where they share a tensor, or,
    // with tensors shared further apart, wherever they are consecutive, each layer charged
    // the relaxation's charges (docs/bounds.md, "Tensors shared further apart").
    let (allocation, mut mergeable) =
        charged_structures(&s.instance, assignment, s.stash_charges.is_some());
    for (l, m) in mergeable.iter_mut().enumerate() {
        *m &= group.contains(&assignment[l]);
    }
    let scope = Scope {
        focus: Some(group.to_vec()),
        mergeable,
        left_out: left_out.to_vec(),
        tail,
        stash_charges: s.stash_charges.clone(),
    };
    PatternMilp::new(&s.instance, &s.platform, &allocation, period, &scope)
}

/// Whether the processors of `focus` can fit at `period` by the scheduling MILP focused on
/// them (a stage per layer, their own consecutive layers that share a tensor free to
/// merge): `Some(false)` proven not, `None` undecided within `limit`.
pub(super) fn focused_check(
    s: &Scheduling,
    focus: Focus,
    period: f64,
    threads: NonZeroU32,
    limit: Duration,
) -> crate::error::Result<Option<bool>> {
    let Some(milp) = focused_milp(s, focus, period) else {
        return Ok(Some(false));
    };
    let options = MilpOptions {
        threads,
        time_limit: Some(limit),
        feasibility_jump: false,
        ..MilpOptions::default()
    };
    let r = milp.model.solve(&options, Some(limit))?;
    Ok(match r.status {
        SolveStatus::Infeasible => Some(false),
        SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => Some(true),
        SolveStatus::NoSolutionWithinLimit => None,
    })
}
