//! The relaxation at one period as a feasibility MILP (HiGHS): the assignment binaries with
//! relabelling symmetry broken, crossing indicators, transfer levels, facts 1-4 as rows and
//! the premises learnt so far as lazily added rows (docs/bounds.md, "The relaxation" and
//! "Exact windows, added lazily"). Rows are scaled so that times are in units of the period
//! and bytes in units of the memory.

use super::premises::Premise;
use super::relaxation::{level_periods, transfer_levels, Relaxation};
use crate::milp::solver::{Model, Var};

/// The variables of the relaxation MILP.
pub(super) struct Layout {
    /// `x[l][p]`: layer `l` on processor `p`.
    pub(super) x: Vec<Vec<Var>>,
}

/// The relaxation at `period` (possibly infinite) as a feasibility MILP, with a row per
/// processor label for each premise, built within `left` ([`Model::set_budget`]: past it,
/// [`Model::over_budget`] and not solved).
pub(super) fn relaxation_model(
    relax: &Relaxation,
    period: f64,
    premises: &[Premise],
    left: Option<std::time::Duration>,
) -> (Model, Layout) {
    let mut rows = Rows::new(relax, period, left);
    rows.levels();
    for p in 0..rows.procs {
        rows.memory_at_forward_starts(p);
        if rows.finite {
            rows.load_and_average_memory(p);
        }
    }
    rows.link_loads();
    for premise in premises {
        rows.premise(premise);
    }
    (rows.m, Layout { x: rows.x })
}

/// The MILP under construction, with its variables.
struct Rows<'a> {
    relax: &'a Relaxation,
    period: f64,
    finite: bool,
    n: usize,
    procs: usize,
    cuts: usize,
    /// The memory (bytes are in its units) and the capacities with the slack.
    mem: f64,
    cap_mem: f64,
    cap_time: f64,
    m: Model,
    x: Vec<Vec<Var>>,
    /// `out_of[c][p]`: layer `c` on `p` and `c + 1` elsewhere; `into[c][p]` the converse;
    /// `cross[c]`: the cut crosses at all. Pushed down by every row they enter.
    out_of: Vec<Vec<Var>>,
    into: Vec<Vec<Var>>,
    cross: Vec<Var>,
    /// Fact 3's transfer levels: `level[l][q-1]` is forced to one when the transfers `X_l`
    /// downstream of layer `l` exceed `q / LEVELS_PER_PERIOD + slack` periods.
    level: Vec<Vec<Var>>,
}

impl<'a> Rows<'a> {
    /// The assignment (with restricted-growth symmetry breaking) and the crossing
    /// indicators.
    fn new(relax: &'a Relaxation, period: f64, left: Option<std::time::Duration>) -> Self {
        let n = relax.layers;
        let procs = relax.processors.min(n).max(1);
        let mut m = Model::new();
        m.set_budget(left);
        let x: Vec<Vec<Var>> = (0..n)
            .map(|_| (0..procs).map(|_| m.binary(0.0)).collect())
            .collect();
        for l in 0..n {
            let terms: Vec<(Var, f64)> = x[l].iter().map(|&v| (v, 1.0)).collect();
            m.row(1.0, 1.0, &terms);
            for p in 1..procs {
                if p > l {
                    m.le(&[(x[l][p], 1.0)], 0.0);
                } else {
                    // Processor p holds layer l only if processor p-1 holds an earlier layer.
                    let mut terms = vec![(x[l][p], 1.0)];
                    terms.extend((0..l).map(|k| (x[k][p - 1], -1.0)));
                    m.le(&terms, 0.0);
                }
            }
        }
        let cuts = n.saturating_sub(1);
        let mut out_of = vec![Vec::new(); cuts];
        let mut into = vec![Vec::new(); cuts];
        let mut cross = Vec::with_capacity(cuts);
        for c in 0..cuts {
            let u = m.continuous(0.0, 0.0, 1.0);
            for p in 0..procs {
                let o = m.continuous(0.0, 0.0, 1.0);
                let i = m.continuous(0.0, 0.0, 1.0);
                m.ge(&[(o, 1.0), (x[c][p], -1.0), (x[c + 1][p], 1.0)], 0.0);
                m.ge(&[(i, 1.0), (x[c + 1][p], -1.0), (x[c][p], 1.0)], 0.0);
                m.ge(&[(u, 1.0), (x[c][p], -1.0), (x[c + 1][p], 1.0)], 0.0);
                out_of[c].push(o);
                into[c].push(i);
            }
            cross.push(u);
        }
        Rows {
            relax,
            period,
            finite: period.is_finite(),
            n,
            procs,
            cuts,
            mem: relax.memory,
            cap_mem: 1.0 + relax.slack,
            cap_time: 1.0 + relax.slack,
            m,
            x,
            out_of,
            into,
            cross,
            level: vec![Vec::new(); n],
        }
    }

    /// Layer `l` starts a run of processor `p` (layer 0 on `p`, or `l` on `p` and `l - 1`
    /// elsewhere).
    fn starts(&self, l: usize, p: usize) -> Var {
        if l == 0 {
            self.x[0][p]
        } else {
            self.into[l - 1][p]
        }
    }

    /// Static memory of processor `p`, scaled by `1 / M`: terms to add to a row.
    fn static_terms(&self, p: usize) -> Vec<(Var, f64)> {
        let (relax, mem) = (self.relax, self.mem);
        let mut t: Vec<(Var, f64)> = (0..self.n)
            .map(|l| (self.x[l][p], 3.0 * relax.weights[l] / mem))
            .collect();
        for c in 0..self.cuts {
            let b = 2.0 * relax.out[c] / mem;
            t.push((self.out_of[c][p], b));
            t.push((self.into[c][p], b));
        }
        t
    }

    /// Fact 3's transfer levels, at a finite period: a binary per layer and level, forced
    /// to one when the transfers downstream exceed the level.
    fn levels(&mut self) {
        if !self.finite {
            return;
        }
        let (relax, period, cuts) = (self.relax, self.period, self.cuts);
        for l in 0..self.n {
            let most: f64 = (l..cuts).map(|c| 2.0 * relax.comm[c] / period).sum();
            for q in 1..=transfer_levels(most * period, period, relax.slack) {
                let b = self.m.binary(0.0);
                let mut row: Vec<(Var, f64)> = (l..cuts)
                    .map(|c| (self.cross[c], 2.0 * relax.comm[c] / period))
                    .collect();
                row.push((b, -most));
                self.m.le(&row, level_periods(q) + relax.slack);
                self.level[l].push(b);
            }
        }
    }

    /// Fact 3 at the forward start of each layer `i` of `p` (big-M when `i` is elsewhere),
    /// once for each level of `X_i` (big-M when the level is off).
    fn memory_at_forward_starts(&mut self, p: usize) {
        let (relax, period, mem, cap_mem) = (self.relax, self.period, self.mem, self.cap_mem);
        let static_max: f64 =
            (3.0 * relax.weights.iter().sum::<f64>() + 4.0 * relax.out.iter().sum::<f64>()) / mem;
        for i in 0..self.n {
            for k in 0..=self.level[i].len() {
                let mut terms = self.static_terms(p);
                let mut worst = static_max;
                for j in 0..self.n {
                    let copies = if j <= i {
                        relax.copies_before(i, j, period, k)
                    } else {
                        relax.copies_always(j, period)
                    };
                    let coef = copies * relax.stash[j] / mem;
                    if coef > 0.0 {
                        terms.push((self.x[j][p], coef));
                        worst += coef;
                    }
                    // A run's first layer starts a stage, which keeps its whole stash.
                    let extra = copies * (relax.own[j] - relax.stash[j]) / mem;
                    if extra > 0.0 {
                        terms.push((self.starts(j, p), extra));
                        worst += extra;
                    }
                }
                let big = (worst - cap_mem).max(0.0);
                if big <= 0.0 {
                    continue;
                }
                terms.push((self.x[i][p], big));
                let mut hi = cap_mem + big;
                if k > 0 {
                    terms.push((self.level[i][k - 1], big));
                    hi += big;
                }
                self.m.le(&terms, hi);
            }
        }
    }

    /// Fact 1 (the load of `p`) and fact 4 (its average memory, windows with the transfers
    /// downstream), at a finite period.
    fn load_and_average_memory(&mut self, p: usize) {
        let (relax, period, mem, n, cuts) = (self.relax, self.period, self.mem, self.n, self.cuts);
        let terms: Vec<(Var, f64)> = (0..n)
            .map(|l| (self.x[l][p], relax.u[l] / period))
            .collect();
        self.m.le(&terms, self.cap_time);
        let mut terms = self.static_terms(p);
        for j in 0..n {
            if relax.stash[j] <= 0.0 {
                continue;
            }
            let comm_max: f64 = (j..cuts).map(|c| 2.0 * relax.comm[c] / period).sum();
            // omega >= x S(j)/T + sum_{c >= j} 2 comm_c cross_c / T - comm_max (1 - x)
            let omega = self.m.continuous(0.0, 0.0, f64::INFINITY);
            let mut def = vec![
                (omega, 1.0),
                (self.x[j][p], -(relax.suffix(j) / period) - comm_max),
            ];
            for c in j..cuts {
                def.push((self.cross[c], -2.0 * relax.comm[c] / period));
            }
            self.m.ge(&def, -comm_max);
            terms.push((omega, relax.stash[j] / mem));
            let extra = (relax.own[j] - relax.stash[j]) / mem * relax.suffix(j) / period;
            if extra > 0.0 {
                terms.push((self.starts(j, p), extra));
            }
        }
        self.m.le(&terms, self.cap_mem);
    }

    /// Fact 1 on links: pair indicators, only where a link could be overloaded.
    fn link_loads(&mut self) {
        let (relax, period, procs, cap_time) = (self.relax, self.period, self.procs, self.cap_time);
        let total_comm: f64 = relax.comm.iter().map(|c| relax.link_factor * c).sum();
        if !(self.finite && total_comm > period * cap_time && procs >= 2) {
            return;
        }
        for p in 0..procs {
            for q in p + 1..procs {
                let mut load = Vec::with_capacity(self.cuts);
                for c in 0..self.cuts {
                    let y = self.m.continuous(0.0, 0.0, 1.0);
                    let x = &self.x;
                    self.m
                        .ge(&[(y, 1.0), (x[c][p], -1.0), (x[c + 1][q], -1.0)], -1.0);
                    self.m
                        .ge(&[(y, 1.0), (x[c][q], -1.0), (x[c + 1][p], -1.0)], -1.0);
                    load.push((y, relax.link_factor * relax.comm[c] / period));
                }
                self.m.le(&load, cap_time);
            }
        }
    }

    /// A premise learnt lazily (docs/bounds.md, "Exact windows, added lazily"), on every
    /// processor: not all of its layers there with all of its cuts crossing (and, for a
    /// transfer limit, not more transfers on its free cuts than the limit).
    fn premise(&mut self, premise: &Premise) {
        let (relax, period, n, procs) = (self.relax, self.period, self.n, self.procs);
        let (h, free, limit) = match premise {
            Premise::Excluded { assignment, .. } => {
                // No good: not every layer where the excluded assignment has it.
                let terms: Vec<(Var, f64)> = assignment
                    .iter()
                    .enumerate()
                    .filter(|&(_, &p)| p < procs)
                    .map(|(l, &p)| (self.x[l][p], 1.0))
                    .collect();
                self.m.le(&terms, n as f64 - 1.0);
                return;
            }
            Premise::Exact(h) => (h, Vec::new(), None),
            Premise::Scheduled {
                holdings,
                tail: Some(x),
                ..
            } => match holdings.as_slice() {
                // Excluded when the cuts below its last layer carry at least `x`: a row like
                // a transfer limit's, a little weaker than the premise (the slack), which is
                // safe.
                [h] => {
                    let last = h.runs.last().map_or(0, |r| r.1);
                    let below: Vec<usize> = (last + 1..n.saturating_sub(1)).collect();
                    (h, below, Some(*x))
                }
                _ => return,
            },
            Premise::Scheduled { holdings, .. } => match holdings.as_slice() {
                [h] => (h, Vec::new(), None),
                // A group: rows for every assignment of distinct labels would be too many;
                // the search prunes by it, and the loop stops undecided (safe) when a
                // solution comes back that it excludes.
                _ => return,
            },
            Premise::Limited(h) => match relax.transfer_limit(h, period) {
                None => return,
                Some(r) if r < 0.0 || !self.finite => (h, Vec::new(), None),
                Some(r) => (h, relax.free_cuts(h), Some(r)),
            },
        };
        // A limit that no assignment can pass is no row.
        if limit.is_some_and(|r| free.iter().map(|&c| relax.comm[c]).sum::<f64>() <= r) {
            return;
        }
        let size = (h.layers() + h.cuts.len()) as f64;
        for p in 0..procs {
            let mut terms: Vec<(Var, f64)> = h
                .runs
                .iter()
                .flat_map(|&(f, l)| (f..=l).map(|k| (self.x[k][p], 1.0)))
                .chain(h.cuts.iter().map(|&c| (self.cross[c], 1.0)))
                .collect();
            match limit {
                None => self.m.le(&terms, size - 1.0),
                Some(r) => {
                    // sum_free comm cross / T <= r / T + big * (size - premise terms)
                    let most: f64 = free.iter().map(|&c| relax.comm[c]).sum();
                    let big = (most - r) / period;
                    terms.iter_mut().for_each(|t| t.1 = big);
                    terms.extend(
                        free.iter()
                            .map(|&c| (self.cross[c], relax.comm[c] / period)),
                    );
                    self.m.le(&terms, r / period + big * size + relax.slack);
                }
            }
        }
    }
}
