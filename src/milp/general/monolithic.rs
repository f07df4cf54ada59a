//! The monolithic MILP of `ilp`: one model places the groups on processors and schedules
//! one batch's operations at a fixed period, and [`Monolithic`] bisects the period over it
//! (Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021; the parent module's docs, sections
//! "Variables" to "Warm start", state the formulation).

// Index loops mirror the formulation (x[g][p], z[c]...) and read better than iterators here.
#![allow(clippy::needless_range_loop)]

use std::time::{Duration, Instant};

use super::{ungroup, GeneralOutcome, MARGIN};
use crate::judge::ensure_judged_valid;
use crate::milp::solver::{MilpOptions, Model, SolveStatus, Var};
use crate::model::{Allocation, Instance, OpKind, Pattern, PatternOp, Platform, Stage};
use crate::units::Seconds;

/// Operation indices of one batch in chain order (module docs).
pub(super) struct Ops {
    pub(super) groups: usize,
}

impl Ops {
    pub(super) fn len(&self) -> usize {
        4 * self.groups - 2
    }
    pub(super) fn f(&self, g: usize) -> usize {
        2 * g
    }
    pub(super) fn cf(&self, c: usize) -> usize {
        2 * c + 1
    }
    pub(super) fn b(&self, g: usize) -> usize {
        4 * self.groups - 3 - 2 * g
    }
    pub(super) fn cb(&self, c: usize) -> usize {
        4 * self.groups - 4 - 2 * c
    }
}

/// The variables of one feasibility model that the solution is read from.
pub(super) struct Layout {
    x: Vec<Vec<Var>>,
    t: Vec<Var>,
    h: Vec<Var>,
}

/// Adds the disjunction of operations `i` and `j` (one before the other modulo the period),
/// relaxed unless the terms given (1 when the pair shares a resource) sum to 1.
type Disjunction<'a> = dyn Fn(&mut Model, usize, usize, Option<Vec<(Var, f64)>>) + 'a;

/// The transfers' exclusive resources: for each pair of transfers `(operation, cut,
/// backward)` of `comms`, the disjunction that keeps them apart modulo the period, relaxed
/// unless they share a resource. `z[c]` lists `(p, q, var)`: cut `c` crosses from `p` to `q`.
/// A link is one resource in half duplex; in full duplex each direction is one, the
/// activation of a cut crossing from `p` to `q` on `p -> q` and its gradient on `q -> p`.
fn transfer_disjunctions(
    m: &mut Model,
    z: &[Vec<(usize, usize, Var)>],
    comms: &[(usize, usize, bool)],
    processors: usize,
    full_duplex: bool,
    disjunction: &Disjunction,
) {
    // The links' resources: each link (`a < b`) in half duplex, each direction `a -> b` in
    // full duplex.
    let resources: Vec<(usize, usize)> = (0..processors)
        .flat_map(|a| (0..processors).map(move |b| (a, b)))
        .filter(|&(a, b)| if full_duplex { a != b } else { a < b })
        .collect();
    // Indicators that the transfer (cut `c`, `backward`) runs on resource `(a, b)`.
    let on = |c: usize, backward: bool, (a, b): (usize, usize)| -> Vec<(Var, f64)> {
        z[c].iter()
            .filter(|&&(p, q, _)| match (full_duplex, backward) {
                (false, _) => (p, q) == (a, b) || (p, q) == (b, a),
                (true, false) => (p, q) == (a, b),
                (true, true) => (p, q) == (b, a),
            })
            .map(|&(_, _, v)| (v, 1.0))
            .collect()
    };
    for (k, &(i, ci, bi)) in comms.iter().enumerate() {
        for &(j, cj, bj) in &comms[k + 1..] {
            if ci == cj {
                // A cut's two transfers go opposite ways: one resource only in half duplex.
                if !full_duplex {
                    let crossing = z[ci].iter().map(|&(_, _, v)| (v, 1.0)).collect();
                    disjunction(m, i, j, Some(crossing));
                }
                continue;
            }
            // v >= [i on resource e] + [j on resource e] - 1 for every resource e.
            let v = m.continuous(0.0, 0.0, 1.0);
            for &e in &resources {
                let mut terms = vec![(v, 1.0)];
                for (w, k) in on(ci, bi, e).into_iter().chain(on(cj, bj, e)) {
                    terms.push((w, -k));
                }
                m.ge(&terms, -1.0);
            }
            disjunction(m, i, j, Some(vec![(v, 1.0)]));
        }
    }
}

/// The feasibility MILP at `period` for the grouped instance (module docs), built within
/// `left` ([`Model::set_budget`]: past it the model is not solved).
pub(super) fn feasibility(
    grouped: &Instance,
    platform: &Platform,
    period: Seconds,
    left: Option<Duration>,
) -> (Model, Layout) {
    let g_n = grouped.len();
    let ops = Ops { groups: g_n };
    let mut m = Model::new();
    m.set_budget(left);
    let d = Durations::new(grouped, platform, period);
    let x = placement(&mut m, g_n, platform.processors);
    let z = crossings(&mut m, &x, &d, platform);
    capacity_cuts(&mut m, &x, &z, &d, platform);
    let s = same_processor(&mut m, &x);
    let (t, h) = times_and_shifts(&mut m, &ops, &d, &z);
    let chain = Chain {
        ops: &ops,
        d: &d,
        z: &z,
        t: &t,
    };
    exclusive_resources(&mut m, &chain, &s, platform);
    let vars = Vars {
        x: &x,
        z: &z,
        s: &s,
        t: &t,
        h: &h,
    };
    memory_rows(&mut m, grouped, platform, &ops, &d, &vars);
    (m, Layout { x, t, h })
}

/// The grouped chain's durations, scaled by `1/T` (with the margin).
struct Durations {
    f: Vec<f64>,
    b: Vec<f64>,
    /// One transfer of each cut, when it crosses.
    c: Vec<f64>,
}

impl Durations {
    fn new(grouped: &Instance, platform: &Platform, period: Seconds) -> Durations {
        let g_n = grouped.len();
        let sums = grouped.sums();
        Durations {
            f: (1..=g_n)
                .map(|g| sums.u_f(g, g) / period + MARGIN)
                .collect(),
            b: (1..=g_n)
                .map(|g| sums.u_b(g, g) / period + MARGIN)
                .collect(),
            c: (1..g_n)
                .map(|c| sums.a(c) / platform.bandwidth / period + MARGIN)
                .collect(),
        }
    }
}

/// The variables the memory rows are written in.
struct Vars<'a> {
    x: &'a [Vec<Var>],
    z: &'a [Vec<(usize, usize, Var)>],
    s: &'a [Vec<Option<Var>>],
    t: &'a [Var],
    h: &'a [Var],
}

/// `x[g][p]`: group `g` on processor `p`, exactly one; symmetry broken (module docs).
fn placement(m: &mut Model, g_n: usize, p_n: usize) -> Vec<Vec<Var>> {
    let x: Vec<Vec<Var>> = (0..g_n)
        .map(|_| (0..p_n).map(|_| m.binary(0.0)).collect())
        .collect();
    for xg in &x {
        let terms: Vec<(Var, f64)> = xg.iter().map(|&v| (v, 1.0)).collect();
        m.row(1.0, 1.0, &terms);
    }
    m.row(1.0, 1.0, &[(x[0][0], 1.0)]);
    for g in 1..g_n {
        for p in 1..p_n {
            let mut terms = vec![(x[g][p], 1.0)];
            terms.extend((0..g).map(|h| (x[h][p - 1], -1.0)));
            m.le(&terms, 0.0);
        }
    }
    x
}

/// Crossings: `z[c]` lists `(p, q, var)` for `p != q`, `var = x[c][p] x[c+1][q]`.
fn crossings(
    m: &mut Model,
    x: &[Vec<Var>],
    d: &Durations,
    platform: &Platform,
) -> Vec<Vec<(usize, usize, Var)>> {
    let (g_n, p_n) = (x.len(), platform.processors);
    let mut z: Vec<Vec<(usize, usize, Var)>> = Vec::with_capacity(g_n.saturating_sub(1));
    for c in 0..g_n.saturating_sub(1) {
        let mut zc = Vec::new();
        for p in 0..p_n {
            for q in 0..p_n {
                if p == q {
                    continue;
                }
                let v = m.continuous(0.0, 0.0, 1.0);
                m.ge(&[(v, 1.0), (x[c][p], -1.0), (x[c + 1][q], -1.0)], -1.0);
                m.le(&[(v, 1.0), (x[c][p], -1.0)], 0.0);
                m.le(&[(v, 1.0), (x[c + 1][q], -1.0)], 0.0);
                zc.push((p, q, v));
            }
        }
        // A cut whose transfers cannot fit in one period must not cross.
        let per_link = if platform.full_duplex { 1.0 } else { 2.0 };
        if per_link * (d.c[c] - MARGIN) > 1.0 {
            let terms: Vec<(Var, f64)> = zc.iter().map(|&(_, _, v)| (v, 1.0)).collect();
            m.le(&terms, 0.0);
        }
        z.push(zc);
    }
    z
}

/// Capacity cuts (implied by the disjunctions, but not by their LP relaxation): a processor
/// computes at most one period of work, a link carries at most one period of transfers
/// (both directions of a cut in half duplex; per direction in full duplex).
fn capacity_cuts(
    m: &mut Model,
    x: &[Vec<Var>],
    z: &[Vec<(usize, usize, Var)>],
    d: &Durations,
    platform: &Platform,
) {
    let (g_n, p_n) = (x.len(), platform.processors);
    for p in 0..p_n {
        let terms: Vec<(Var, f64)> = (0..g_n).map(|g| (x[g][p], d.f[g] + d.b[g])).collect();
        m.le(&terms, 1.0);
    }
    // Same-link indicators per unordered processor pair.
    let edge_terms = |c: usize, a: usize, b: usize| -> Vec<(Var, f64)> {
        z[c].iter()
            .filter(|&&(p, q, _)| (p == a && q == b) || (p == b && q == a))
            .map(|&(_, _, v)| (v, 1.0))
            .collect()
    };
    for a in 0..p_n {
        for b in a + 1..p_n {
            let mut terms = Vec::new();
            for c in 0..g_n.saturating_sub(1) {
                let load = if platform.full_duplex {
                    d.c[c]
                } else {
                    2.0 * d.c[c]
                };
                terms.extend(edge_terms(c, a, b).into_iter().map(|(v, k)| (v, load * k)));
            }
            if !terms.is_empty() {
                m.le(&terms, 1.0);
            }
        }
    }
}

/// Same-processor indicators `s[g][g']` (both orders, the same variable).
fn same_processor(m: &mut Model, x: &[Vec<Var>]) -> Vec<Vec<Option<Var>>> {
    let g_n = x.len();
    let mut s = vec![vec![None; g_n]; g_n];
    for g in 0..g_n {
        for h in g + 1..g_n {
            let v = m.continuous(0.0, 0.0, 1.0);
            for xp in x[g].iter().zip(&x[h]) {
                m.ge(&[(v, 1.0), (*xp.0, -1.0), (*xp.1, -1.0)], -1.0);
            }
            s[g][h] = Some(v);
            s[h][g] = Some(v);
        }
    }
    s
}

/// One batch's operations along the chain: starts `t` and shifts `h`, dependencies, and
/// at most two periods between consecutive operations.
fn times_and_shifts(
    m: &mut Model,
    ops: &Ops,
    d: &Durations,
    z: &[Vec<(usize, usize, Var)>],
) -> (Vec<Var>, Vec<Var>) {
    let n = ops.len();
    let t: Vec<Var> = (0..n).map(|_| m.continuous(0.0, 0.0, 1.0)).collect();
    let h: Vec<Var> = (0..n)
        .map(|i| m.integer(0.0, 0.0, 2.0 * i as f64))
        .collect();
    m.row(0.0, 0.0, &[(h[ops.f(0)], 1.0)]);
    let chain = Chain { ops, d, z, t: &t };
    for i in 0..n - 1 {
        let (d, dt) = chain.duration(i);
        let mut terms = vec![(h[i], 1.0), (t[i], 1.0), (h[i + 1], -1.0), (t[i + 1], -1.0)];
        terms.extend(dt);
        m.le(&terms, -d);
        m.le(&[(h[i + 1], 1.0), (h[i], -1.0)], 2.0);
    }
    (t, h)
}

/// One batch's operations with their durations: a transfer's lasts `u_c d_c`.
struct Chain<'a> {
    ops: &'a Ops,
    d: &'a Durations,
    z: &'a [Vec<(usize, usize, Var)>],
    t: &'a [Var],
}

impl Chain<'_> {
    fn kind(&self, i: usize) -> (OpKind, usize) {
        let g_n = self.ops.groups;
        if i < 2 * g_n - 1 {
            if i % 2 == 0 {
                (OpKind::F, i / 2)
            } else {
                (OpKind::CF, i / 2)
            }
        } else {
            let k = 4 * g_n - 3 - i; // B(g): k = 2g; CB(c): k = 2c + 1
            if k % 2 == 0 {
                (OpKind::B, k / 2)
            } else {
                (OpKind::CB, k / 2)
            }
        }
    }

    /// Duration of operation `i` as (constant, terms).
    fn duration(&self, i: usize) -> (f64, Vec<(Var, f64)>) {
        match self.kind(i) {
            (OpKind::F, g) => (self.d.f[g], vec![]),
            (OpKind::B, g) => (self.d.b[g], vec![]),
            (_, c) => (
                0.0,
                self.z[c]
                    .iter()
                    .map(|&(_, _, v)| (v, self.d.c[c]))
                    .collect(),
            ),
        }
    }

    /// The disjunction of operations `i` and `j` (one before the other modulo the period).
    /// Relaxation `rel`: terms whose value is 1 when the pair shares the resource (0
    /// otherwise); the disjunction is relaxed by `BIG * (1 - rel)`.
    fn disjunction(&self, m: &mut Model, i: usize, j: usize, rel: Option<Vec<(Var, f64)>>) {
        const BIG: f64 = 3.0;
        let t = self.t;
        let (di, dti) = self.duration(i);
        let (dj, dtj) = self.duration(j);
        let y = m.binary(0.0);
        let rel = rel.unwrap_or_default();
        let relaxed = !rel.is_empty();
        // Each row: base terms + d terms + 2 y-ish + BIG * rel <= rhs + BIG (when relaxed).
        let push = |m: &mut Model,
                    a: usize,
                    b: usize,
                    da: f64,
                    dta: &[(Var, f64)],
                    y_coef: f64,
                    rhs: f64| {
            let mut terms = vec![(t[a], 1.0), (t[b], -1.0), (y, y_coef)];
            terms.extend_from_slice(dta);
            let mut rhs = rhs - da;
            if relaxed {
                terms.extend(rel.iter().map(|&(v, k)| (v, BIG * k)));
                rhs += BIG;
            }
            m.le(&terms, rhs);
        };
        // y = 1: i then j: t_i + d_i <= t_j ; t_j + d_j <= t_i + 1.
        push(m, i, j, di, &dti, 2.0, 2.0);
        push(m, j, i, dj, &dtj, 2.0, 3.0);
        // y = 0: j then i: t_j + d_j <= t_i ; t_i + d_i <= t_j + 1.
        push(m, j, i, dj, &dtj, -2.0, 0.0);
        push(m, i, j, di, &dti, -2.0, 1.0);
    }
}

/// Exclusive resources: every pair of computations that may share a processor, and every
/// pair of transfers that may share a link.
fn exclusive_resources(m: &mut Model, chain: &Chain, s: &[Vec<Option<Var>>], platform: &Platform) {
    let (ops, g_n) = (chain.ops, chain.ops.groups);
    let compute: Vec<(usize, usize)> = (0..g_n)
        .flat_map(|g| [(ops.f(g), g), (ops.b(g), g)])
        .filter(|&(i, _)| chain.duration(i).0 > MARGIN)
        .collect();
    for (k, &(i, gi)) in compute.iter().enumerate() {
        for &(j, gj) in &compute[k + 1..] {
            let rel = if gi == gj {
                None
            } else {
                Some(vec![(s[gi][gj].expect("s"), 1.0)])
            };
            chain.disjunction(m, i, j, rel);
        }
    }
    let comms: Vec<(usize, usize, bool)> = (0..g_n.saturating_sub(1))
        .filter(|&c| chain.d.c[c] > MARGIN)
        .flat_map(|c| [(ops.cf(c), c, false), (ops.cb(c), c, true)])
        .collect();
    transfer_disjunctions(
        m,
        chain.z,
        &comms,
        platform.processors,
        platform.full_duplex,
        &|m, i, j, rel| chain.disjunction(m, i, j, rel),
    );
}

/// Memory, in units of `M` (module docs, "Variables"): every processor's static memory,
/// and at every forward start of a group with a stash, its processor's static memory and
/// live stashes.
fn memory_rows(
    m: &mut Model,
    grouped: &Instance,
    platform: &Platform,
    ops: &Ops,
    d: &Durations,
    v: &Vars,
) {
    let g_n = grouped.len();
    let (mem, sums) = (platform.memory, grouped.sums());
    let sigma: Vec<f64> = (1..=g_n).map(|g| sums.stash(g, g) / mem).collect();
    let weight: Vec<f64> = (1..=g_n).map(|g| 3.0 * sums.weights(g, g) / mem).collect();
    let buffer: Vec<f64> = (1..g_n).map(|c| 2.0 * sums.a(c) / mem).collect();
    // static_p as terms.
    let static_terms = |p: usize| -> Vec<(Var, f64)> {
        let mut terms: Vec<(Var, f64)> = (0..g_n).map(|g| (v.x[g][p], weight[g])).collect();
        for (c, zc) in v.z.iter().enumerate() {
            for &(a, b, var) in zc {
                if a == p || b == p {
                    terms.push((var, buffer[c]));
                }
            }
        }
        terms
    };
    for p in 0..platform.processors {
        m.le(&static_terms(p), 1.0);
    }
    let live_groups: Vec<usize> = (0..g_n).filter(|&g| sigma[g] > 0.0).collect();
    if live_groups.is_empty() {
        return;
    }
    // r_g + w_g = t(B_g) + d(B_g).
    let mut ends = vec![None; g_n];
    for &g in &live_groups {
        let rg = m.continuous(0.0, 0.0, 1.0);
        let wg = m.binary(0.0);
        m.row(
            d.b[g],
            d.b[g],
            &[(rg, 1.0), (wg, 1.0), (v.t[ops.b(g)], -1.0)],
        );
        ends[g] = Some((rg, wg));
    }
    let live = LiveCounts {
        ops,
        v,
        sigma: &sigma,
        ends: &ends,
        groups: &live_groups,
    };
    let big_mem: f64 = 1.0
        + weight.iter().sum::<f64>()
        + 2.0 * buffer.iter().sum::<f64>()
        + live_groups
            .iter()
            .map(|&g| sigma[g] * live.k_bound(g))
            .sum::<f64>();
    for &e in &live_groups {
        let (live_terms, constant) = live.at_forward_of(m, e);
        for p in 0..platform.processors {
            // static_p + live terms <= 1 + big (1 - x[e][p]).
            let mut terms = static_terms(p);
            terms.extend(live_terms.iter().copied());
            terms.push((v.x[e][p], big_mem));
            m.le(&terms, 1.0 + big_mem - constant);
        }
    }
}

/// The live stashes at a forward start, as linear terms (module docs, "Variables").
struct LiveCounts<'a> {
    ops: &'a Ops,
    v: &'a Vars<'a>,
    /// Each group's stash in units of `M`.
    sigma: &'a [f64],
    /// `(r_g, w_g)`: where group `g`'s backward ends in the period, and whether it wraps.
    ends: &'a [Option<(Var, Var)>],
    /// The groups with a stash.
    groups: &'a [usize],
}

impl LiveCounts<'_> {
    /// `K_g`: a bound on the modelled live count of a fitting group.
    fn k_bound(&self, g: usize) -> f64 {
        let by_shift = 2.0 + 2.0 * (self.ops.b(g) - self.ops.f(g)) as f64;
        let by_memory = (1.0 / self.sigma[g]).floor() + 2.0;
        by_shift.min(by_memory)
    }

    /// The stashes live at the start of `F_e` on `e`'s processor, as terms and a constant.
    fn at_forward_of(&self, m: &mut Model, e: usize) -> (Vec<(Var, f64)>, f64) {
        let (v, sigma) = (self.v, self.sigma);
        let tau = v.t[self.ops.f(e)];
        let mut live_terms: Vec<(Var, f64)> = Vec::new();
        let mut constant = 0.0;
        for &g in self.groups {
            let (fg, bg) = (self.ops.f(g), self.ops.b(g));
            let (r, w) = self.ends[g].expect("a group with a stash has its end");
            let c = m.binary(0.0);
            // c = 1 => r_g <= tau.
            m.le(&[(r, 1.0), (tau, -1.0), (c, 1.0)], 1.0);
            // live = [A] - c + w + h_B - h_F.
            let mut live: Vec<(Var, f64)> =
                vec![(c, -1.0), (w, 1.0), (v.h[bg], 1.0), (v.h[fg], -1.0)];
            if g == e {
                // Its own batch counts at its forward's start even when its backward ends
                // then (a window of zero length, docs/model.md section 6): y = 1 when the
                // count above is 0.
                let y = m.binary(0.0);
                m.ge(
                    &[
                        (y, 1.0),
                        (c, -1.0),
                        (w, 1.0),
                        (v.h[bg], 1.0),
                        (v.h[fg], -1.0),
                    ],
                    0.0,
                );
                live.push((y, 1.0));
                live_terms.extend(live.iter().map(|&(var, k)| (var, sigma[g] * k)));
                constant += sigma[g];
                continue;
            }
            let a = m.binary(0.0);
            // a = 0 => tau + margin <= t(F_g).
            m.le(&[(tau, 1.0), (v.t[fg], -1.0), (a, -2.0)], -MARGIN);
            live.push((a, 1.0));
            // lambda >= sigma (live - K (1 - s)), lambda >= 0.
            let lambda = m.continuous(0.0, 0.0, f64::INFINITY);
            let k = self.k_bound(g);
            let mut terms = vec![(lambda, 1.0)];
            terms.extend(live.iter().map(|&(var, kk)| (var, -sigma[g] * kk)));
            terms.push((v.s[e][g].expect("s"), -sigma[g] * k));
            m.ge(&terms, -sigma[g] * k);
            live_terms.push((lambda, 1.0));
        }
        (live_terms, constant)
    }
}

/// The allocation (on the grouped chain: one stage per group) and pattern of a solution.
fn read_solution(
    grouped: &Instance,
    platform: &Platform,
    layout: &Layout,
    values: &[f64],
    period: Seconds,
) -> (Allocation, Pattern) {
    let g_n = grouped.len();
    let ops = Ops { groups: g_n };
    let value = |v: Var| values[v.0];
    let stages: Vec<Stage> = (0..g_n)
        .map(|g| {
            let p = (0..platform.processors)
                .max_by(|&a, &b| value(layout.x[g][a]).total_cmp(&value(layout.x[g][b])))
                .unwrap_or(0);
            Stage {
                first: g + 1,
                last: g + 1,
                processor: p,
            }
        })
        .collect();
    let allocation = Allocation::new(stages);
    let mut pattern_ops = Vec::new();
    let mut push = |kind: OpKind, stage: usize, i: usize| {
        let mut start = value(layout.t[i]) * period;
        let mut shift = value(layout.h[i]).round() as i64;
        if start >= period {
            start = (start - period).max(0.0);
            shift += 1;
        }
        pattern_ops.push(PatternOp {
            kind,
            stage,
            start: start.max(0.0),
            shift,
        });
    };
    for g in 0..g_n {
        push(OpKind::F, g, ops.f(g));
        push(OpKind::B, g, ops.b(g));
        if allocation.crosses(g) {
            push(OpKind::CF, g, ops.cf(g));
            push(OpKind::CB, g, ops.cb(g));
        }
    }
    pattern_ops.sort_by_key(|o| (o.stage, o.kind));
    (
        allocation,
        Pattern {
            period,
            ops: pattern_ops,
        },
    )
}

/// The monolithic search (module docs, "The period is searched"): one feasibility MILP per
/// period tried, bisecting between a proven bound and the incumbent.
pub(super) struct Monolithic<'a> {
    pub(super) instance: &'a Instance,
    pub(super) platform: &'a Platform,
    pub(super) grouped: &'a Instance,
    pub(super) options: &'a MilpOptions,
    pub(super) deadline: Option<Instant>,
}

impl Monolithic<'_> {
    fn time_left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    fn solve_at(
        &self,
        period: Seconds,
        left: Option<Duration>,
        out: &mut GeneralOutcome,
    ) -> crate::error::Result<Probe> {
        let (grouped, platform) = (self.grouped, self.platform);
        let (model, layout) = feasibility(grouped, platform, period, left);
        let r = model.solve(self.options, left)?;
        out.solves += 1;
        out.nodes += r.nodes;
        Ok(match r.status {
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
                let (alloc, pattern) = read_solution(grouped, platform, &layout, &r.values, period);
                let original = ungroup(&alloc, &out.groups);
                ensure_judged_valid(
                    self.instance,
                    platform,
                    &original,
                    &pattern,
                    "the general MILP",
                )?;
                Probe::Fits(alloc, pattern)
            }
            SolveStatus::Infeasible => Probe::Infeasible,
            SolveStatus::NoSolutionWithinLimit => Probe::Undecided,
        })
    }

    /// The search from `best` (or, without one, from the sequential period) down to `lo`:
    /// leaves the grouped plan found in `out.best`, with the status, the proven group bound
    /// and the gap.
    pub(super) fn run(
        &self,
        best: Option<(Allocation, Pattern)>,
        mut lo: Seconds,
        out: &mut GeneralOutcome,
    ) -> crate::error::Result<()> {
        let mut best = match best {
            Some(b) => b,
            None => {
                // Sequential period: every operation and every possible transfer back to
                // back.
                let (grouped, platform) = (self.grouped, self.platform);
                let sums = grouped.sums();
                let per_link = if platform.full_duplex { 1.0 } else { 2.0 };
                let all: f64 = sums.u(1, grouped.len())
                    + (1..grouped.len())
                        .map(|c| per_link * sums.a(c) / platform.bandwidth)
                        .sum::<f64>();
                let t_max = (all * (1.0 + 1e-6)).max(lo);
                match self.solve_at(t_max, self.time_left(), out)? {
                    Probe::Fits(alloc, pattern) => (alloc, pattern),
                    Probe::Infeasible => {
                        out.group_lower_bound = f64::INFINITY;
                        return Ok(());
                    }
                    Probe::Undecided => {
                        out.status = SolveStatus::NoSolutionWithinLimit;
                        return Ok(());
                    }
                }
            }
        };
        // Under a time limit, each probe gets a third of the time left; a probe that ends
        // with no answer raises `floor` (where the search goes on), not the proven `lo`, so
        // the remaining time is spent on periods between it and the incumbent, where better
        // plans are found, instead of on one hard proof.
        let precision = self.options.period_precision;
        let mut floor = lo;
        let mut first = true;
        while best.1.period - floor > precision * best.1.period {
            let t = if first {
                lo
            } else {
                0.5 * (floor + best.1.period)
            };
            first = false;
            let left = self.time_left();
            if left.is_some_and(|d| d.is_zero()) {
                break;
            }
            match self.solve_at(t, left.map(|d| d / 3), out)? {
                Probe::Fits(alloc, pattern) => best = (alloc, pattern),
                Probe::Infeasible => {
                    lo = t;
                    floor = floor.max(t);
                }
                Probe::Undecided => floor = t,
            }
        }
        let period = best.1.period;
        out.status = if period - lo <= precision * period {
            SolveStatus::Optimal
        } else {
            SolveStatus::LimitWithIncumbent
        };
        out.group_lower_bound = lo.min(period);
        out.gap = (period - out.group_lower_bound) / period;
        out.best = Some(best);
        Ok(())
    }
}

/// What the monolithic MILP says at one period.
enum Probe {
    /// A plan of the groups fits at that period: its grouped allocation and pattern.
    Fits(Allocation, Pattern),
    /// Proven: no plan fits at that period.
    Infeasible,
    /// The limit stopped the solve before either.
    Undecided,
}
