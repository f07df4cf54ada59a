//! What the bound learns cannot fit ([`Premise`]), kept across the probes of a case, and
//! the premises the closed forms give against an assignment that fails them: its
//! processors' runs, with the crossing cuts or the transfer limit that matter
//! (docs/bounds.md, "Exact windows, added lazily").

use super::relaxation::{Holding, Relaxation, Windows};

/// What the bound has learnt cannot fit (docs/bounds.md, "Exact windows, added lazily").
#[derive(Debug, Clone, PartialEq)]
pub enum Premise {
    /// These runs on one processor with these cuts crossing.
    Exact(Holding),
    /// These runs on one processor, their boundary cuts crossing, and more transfers on
    /// their free cuts than [`Relaxation::transfer_limit`] allows at the period.
    Limited(Holding),
    /// This assignment (labels as the MILP chose them), which an exact check proved to have no plan
    /// at `period` or below ([`decide_period`](super::decide_period)); it excludes nothing at
    /// longer periods.
    Excluded { assignment: Vec<usize>, period: f64 },
    /// Each holding's runs on a processor of its own (distinct processors) with all their
    /// cuts crossing, which the scheduling MILP focused on those processors proved to have
    /// no pattern at `period` (docs/bounds.md, "Scheduled premises"); valid at `period` and
    /// below. Usually one processor; a group where each passes alone.
    /// With `tail: Some(x)` (one holding, its cuts only down to its last layer): and the
    /// cuts crossing below its last layer carry at least `x` seconds of one-way transfer;
    /// proven with those layers as a pure delay (`Scope::tail`, "Generalising a proof").
    Scheduled {
        holdings: Vec<Holding>,
        period: f64,
        tail: Option<f64>,
    },
}

/// Whether distinct processors of `assignment` hold the runs of each of `holdings` (one
/// processor each), with every cut of theirs crossing: where a [`Premise::Scheduled`]
/// applies. `assignment` must reach every layer and cut of `holdings`.
pub(super) fn held_apart(holdings: &[Holding], assignment: &[usize]) -> bool {
    let mut used: Vec<usize> = Vec::with_capacity(holdings.len());
    holdings.iter().all(|h| {
        let q = assignment[h.runs[0].0];
        let fresh = !used.contains(&q);
        used.push(q);
        fresh
            && h.runs
                .iter()
                .all(|&(f, l)| assignment[f..=l].iter().all(|&p| p == q))
            && h.cuts.iter().all(|&c| assignment[c] != assignment[c + 1])
    })
}

impl Relaxation {
    /// Drops whole runs of `h` while it still cannot fit at `period` (`h` must not fit).
    fn fewer_runs(&self, mut h: Holding, period: f64, windows: Windows) -> Holding {
        let mut k = 0;
        while h.runs.len() > 1 && k < h.runs.len() {
            let mut t = h.clone();
            t.runs.remove(k);
            if self.holding_fits_with(&t, period, windows) {
                k += 1;
            } else {
                h = t;
            }
        }
        let first = h.runs[0].0;
        h.cuts.retain(|&c| c + 1 >= first);
        h
    }

    /// Drops the cuts of `h` that bound no run while it still cannot fit at `period`.
    fn fewer_cuts(&self, mut h: Holding, period: f64, windows: Windows) -> Holding {
        // Cheapest transfers first: dropping them is the likeliest to keep the proof.
        let mut order = h.cuts.clone();
        order.sort_by(|&a, &b| self.comm[a].total_cmp(&self.comm[b]));
        for c in order {
            if h.is_boundary(c) {
                continue;
            }
            let mut t = h.clone();
            t.cuts.retain(|&x| x != c);
            if !self.holding_fits_with(&t, period, windows) {
                h = t;
            }
        }
        h
    }

    /// The cuts that may cross without bounding a run of `h`: every cut from the first
    /// run's first layer on, except the runs' insides and boundaries.
    pub(super) fn free_cuts(&self, h: &Holding) -> Vec<usize> {
        let first = h.runs[0].0;
        (first..self.layers.saturating_sub(1))
            .filter(|&c| !h.is_boundary(c) && !h.runs.iter().any(|&(f, l)| f <= c && c < l))
            .collect()
    }

    /// For a premise that keeps only its runs' boundary cuts: the transfers (one
    /// direction, seconds) of further crossing cuts beyond which it cannot fit at `period`
    /// wherever they lie. `None` when it fits with every free cut crossing;
    /// `Some(negative)` when it cannot fit even with none.
    pub(super) fn transfer_limit(&self, h: &Holding, period: f64) -> Option<f64> {
        let most: f64 = self.free_cuts(h).iter().map(|&c| self.comm[c]).sum();
        if self.holding_fits_with(h, period, Windows::Plain { extra: most }) {
            return None;
        }
        if !self.holding_fits_with(h, period, Windows::Plain { extra: 0.0 }) {
            return Some(-1.0);
        }
        let (mut lo, mut hi) = (0.0, most);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if self.holding_fits_with(h, period, Windows::Plain { extra: mid }) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // `hi` does not fit: more than `hi` cannot fit either.
        Some(hi)
    }

    /// The premises that `assignment` violates at `period`, one per processor that cannot
    /// fit: a transfer limit on its runs when that alone excludes the assignment, else the
    /// runs with the crossing cuts that matter.
    pub(super) fn violated(
        &self,
        assignment: &[usize],
        period: f64,
        windows: Windows,
    ) -> Vec<Premise> {
        let mut out = Vec::new();
        for p in 0..self.processors {
            let Some(h) = Holding::of(assignment, p) else {
                continue;
            };
            if self.holding_fits_with(&h, period, windows) {
                continue;
            }
            let h = self.fewer_runs(h, period, windows);
            let bounded = Holding {
                runs: h.runs.clone(),
                cuts: h
                    .cuts
                    .iter()
                    .copied()
                    .filter(|&c| h.is_boundary(c))
                    .collect(),
            };
            let crossing: f64 = self
                .free_cuts(&bounded)
                .iter()
                .filter(|&&c| assignment[c] != assignment[c + 1])
                .map(|&c| self.comm[c])
                .sum();
            match self.transfer_limit(&bounded, period) {
                Some(limit) if crossing > limit => out.push(Premise::Limited(bounded)),
                _ => out.push(Premise::Exact(self.fewer_cuts(h, period, windows))),
            }
        }
        out
    }

    /// The one-way transfer of the cuts of `assignment` (its first layers, possibly not
    /// all) that cross below the last layer of `h`'s runs.
    pub(super) fn tail_transfer(&self, h: &Holding, assignment: &[usize]) -> f64 {
        let last = h.runs.last().map_or(0, |r| r.1);
        (last + 1..assignment.len().saturating_sub(1))
            .filter(|&c| assignment[c] != assignment[c + 1])
            .map(|c| self.comm[c])
            .sum()
    }

    /// Whether `transfer` (from [`Relaxation::tail_transfer`]) reaches what a tail premise
    /// was proven with: its own cut set's sum, added up in another order, counts.
    pub(super) fn reaches(transfer: f64, proven: f64) -> bool {
        transfer >= proven * (1.0 - 1e-12)
    }
}

/// Whether `assignment` obeys the rows of `premise` at `period` (every processor label): the
/// tests' reading of a premise, independent of the search's pruning.
#[cfg(test)]
pub(super) fn obeys(
    relax: &Relaxation,
    premise: &Premise,
    assignment: &[usize],
    period: f64,
) -> bool {
    let crosses = |c: usize| assignment[c] != assignment[c + 1];
    let h = match premise {
        Premise::Exact(h) | Premise::Limited(h) => h,
        Premise::Excluded {
            assignment: a,
            period: t,
        } => return period > *t || a.as_slice() != assignment,
        Premise::Scheduled {
            holdings,
            period: t,
            tail,
        } => {
            return period > *t
                || !held_apart(holdings, assignment)
                || tail.is_some_and(|x| {
                    !Relaxation::reaches(relax.tail_transfer(&holdings[0], assignment), x)
                })
        }
    };
    let holds_on = |q: usize| {
        h.runs
            .iter()
            .all(|&(f, l)| (f..=l).all(|k| assignment[k] == q))
            && h.cuts.iter().all(|&c| crosses(c))
    };
    (0..relax.processors)
        .filter(|&q| holds_on(q))
        .all(|_| match premise {
            Premise::Exact(_) | Premise::Excluded { .. } | Premise::Scheduled { .. } => false,
            Premise::Limited(h) => match relax.transfer_limit(h, period) {
                None => true,
                Some(r) if r < 0.0 => false,
                Some(r) => {
                    let x: f64 = relax
                        .free_cuts(h)
                        .iter()
                        .filter(|&&c| crosses(c))
                        .map(|&c| relax.comm[c])
                        .sum();
                    x <= r + relax.slack * period
                }
            },
        })
}
