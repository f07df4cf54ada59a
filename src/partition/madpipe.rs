//! MadPipe's first phase: the dynamic program that builds a non-contiguous allocation, and
//! Algorithm 1's search for the target period.
//!
//! Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware Dynamic Programming Algorithm
//! for Pipelined Model Parallelism* (ScaDL 2022), sections 4.2.1 (memory estimates),
//! 4.2.2 (the dynamic program T(l, p, t_P, m_P, V)), 4.2.3 (Algorithm 1) and 5.1 (the
//! discretization: 11 levels of m_P in [0, M], 51 of V in [0, U(1,L) + sum C], 101 of t_P
//! in [0, U(1,L)]).
//!
//! # The allocation space
//! `P - 1` *normal* processors hold one contiguous stage each; one *special* processor holds
//! any number of stages. In the allocations returned, normal stages sit on processors
//! `0, 1, ...` in chain order and every special stage on processor `P - 1`; consecutive
//! special stages are merged into one stage (they need no communication between them).
//!
//! # The recursion (section 4.2.2), as implemented
//! Layers are placed from the last one down. A state `(l, p, t_P, m_P, V)` says layers
//! `l+1..=L` are placed, `p` normal processors are left, the special processor has load
//! `t_P` and estimated memory `m_P`, and the delay between the end of `F_l` and the start of
//! `B_l` is at least `V`. The stage `k..=l` goes to a normal processor when
//! `M(k, l, g) <= M` with `g = ceil((V + U(k,l)) / T^)`, or to the special one when
//! `m_P + M(k, l, g - 1) <= M`; then `V' = (V (+) U(k,l)) (+) C(k-1)`. The value is the
//! largest of the normal stages' loads, the link loads `C(k-1)` of every stage boundary and
//! the special processor's total load. With no normal processor left, layers `1..=l` form one
//! last special stage.
//!
//! The value of a state depends on the path that reached it only through its maximum so
//! far, so we run the recursion *forward* from `T(L, P-1, 0, 0, 0)`: labels
//! `(p, t_P, m_P, V)` per layer `l` carry the best maximum so far and a back pointer; two
//! paths reaching the same state are merged (the smaller maximum survives). This visits
//! only reachable states, which is what makes the paper's grid affordable.
//!
//! # Speed
//! * A cutoff `c`: the search looks only for allocations of value `< c`; every path whose
//!   maximum reaches `c` is dropped, and so is a state whose layers `1..=l` cannot fit
//!   (`U(1, l) >= (p + 1) c - t_P`). Within Algorithm 1, a DP value at or above the current
//!   upper bound `ub` changes neither `lb`, nor `ub`, nor the answer (see [`algorithm1`]), so
//!   each target period is searched with `c = ub`: this is how work is shared across the
//!   target periods. Each search climbs a ladder of cutoffs from a lower bound on the DP
//!   value, so that the first (cheap, tightly pruned) rung that succeeds gives the optimum.
//! * Dominance: a label at least as good in `t_P`, `m_P`, `V` and maximum so far as another
//!   with the same `p` makes it useless (see `undominated`); it is not expanded.
//! * The labels of one layer are expanded in parallel (rayon), then merged in order, so the
//!   result is deterministic.
//!
//! # Rounding on the grid (where the paper is silent)
//! * `t_P` is rounded **up** to the next level: the planned period never understates the
//!   special processor's load (it overstates it by less than one step, `U(1,L)/100`).
//! * `m_P` is rounded **up**: the special processor's memory estimate stays an upper bound
//!   of the paper's estimate `sum M(k, l, g - 1)` (at most `levels_memory - 1` special
//!   stages with nonzero memory fit).
//! * `V` is rounded **down**: the paper defines `V` as a *lower bound* on the delay, and a
//!   smaller value is still a lower bound, so the state's claim stays true. The memory
//!   estimates computed from it are then lower estimates, like the paper's own `g - 1` for
//!   the special processor; the scheduling phase (MILP) checks the real memory.
//! * Values past the end of a range keep the same step. A level count of 0 means *exact*:
//!   no rounding (used by the tests against exhaustive search).
//!
//! # Departures from the paper
//! * Algorithm 1 line 7 reads `lb <- max(lb, min(T_i, T~_i))`, which is always `T_i`; the
//!   text of section 4.2.3 says `min(T, T^)` is the lower bound, and that is what we use.
//! * The communication term of a stage `k..=l` is `C(k-1) = 2 a(k-1) / beta` (the paper's
//!   `C(k)` with its 1-based activations), and `C(0) = 0`: the network input is not sent.
//! * `g` is at least 1 on a normal processor (a stage with zero load still keeps one batch).
//! * As in the paper, the link load of every stage boundary is counted once even when two
//!   boundaries share a link (a normal stage between two special ones) or when both sides
//!   are special (no transfer): this is the paper's estimate; the judge has the final word.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::{Allocation, ChainSums, Instance, Platform, Stage};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::units::{Bytes, Seconds};

/// The discretization of section 5.1 and Algorithm 1's iteration count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MadPipeConfig {
    /// Levels of m_P, equally spaced in `[0, M]` (paper: 11). 0: exact.
    pub levels_memory: usize,
    /// Levels of V, equally spaced in `[0, U(1,L) + sum C]` (paper: 51). 0: exact.
    pub levels_delay: usize,
    /// Levels of t_P, equally spaced in `[0, U(1,L)]` (paper: 101). 0: exact.
    pub levels_time: usize,
    /// K, the iterations of Algorithm 1 (paper: 10).
    pub iterations: usize,
    /// Count `g` live batches for a stage on the special processor instead of the paper's
    /// `g - 1` (section 4.2.1). Off by default (the paper); on, the first phase is
    /// pessimistic where the paper's estimate is optimistic (see results/README.md).
    pub special_full_batches: bool,
}

impl Default for MadPipeConfig {
    fn default() -> Self {
        MadPipeConfig {
            levels_memory: 11,
            levels_delay: 51,
            levels_time: 101,
            iterations: 10,
            special_full_batches: false,
        }
    }
}

impl MadPipeConfig {
    /// No discretization at all (exponential in the worst case: for small chains and tests).
    pub fn exact(iterations: usize) -> Self {
        MadPipeConfig {
            levels_memory: 0,
            levels_delay: 0,
            levels_time: 0,
            iterations,
            special_full_batches: false,
        }
    }

    /// Checks the configuration: a level count is 0 (exact) or at least 2.
    pub fn check(&self) -> Result<(), crate::InputError> {
        for (field, v) in [
            ("levels_memory", self.levels_memory),
            ("levels_delay", self.levels_delay),
            ("levels_time", self.levels_time),
        ] {
            if v == 1 {
                return Err(crate::InputError::new(
                    "madpipe",
                    field,
                    "needs 0 (exact) or at least 2 levels",
                ));
            }
        }
        if self.iterations == 0 {
            return Err(crate::InputError::new(
                "madpipe",
                "iterations",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// The result of MadPipe-DP for one target period.
#[derive(Debug, Clone, PartialEq)]
pub struct DpResult {
    /// T(L, P-1, 0, 0, 0): the DP's period of the allocation (memory ignored, loads only).
    pub period: Seconds,
    pub allocation: Allocation,
}

/// The result of Algorithm 1.
#[derive(Debug, Clone, PartialEq)]
pub struct MadPipeAllocation {
    pub allocation: Allocation,
    /// `max(T, T^)` of the chosen iteration: the period MadPipe expects (its dashed line).
    pub planned_period: Seconds,
    /// The target period T^ of the chosen iteration (the memory estimates assume it).
    pub t_hat: Seconds,
    /// The DP value T at that target period.
    pub dp_period: Seconds,
    /// The special processor's index (`P - 1`).
    pub special: usize,
    /// Every iteration's `(T^_i, T_i)`, `T_i` infinite when no allocation was found below
    /// the upper bound of that moment.
    pub iterations: Vec<(Seconds, Seconds)>,
}

/// Why Algorithm 1 found nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MadPipeError {
    #[error("MadPipe-DP found no allocation fitting memory M = {memory} bytes for any of the {iterations} target periods tried (up to {largest_t_hat} s)")]
    NoAllocation {
        memory: Bytes,
        iterations: usize,
        largest_t_hat: Seconds,
    },
    /// The deadline passed before Algorithm 1 ended: nothing was proven about the case.
    #[error("MadPipe-DP stopped at its time limit before it ended")]
    OutOfTime,
    #[error(transparent)]
    Input(#[from] crate::InputError),
}

/// Rounding of one continuous quantity onto its grid.
#[derive(Debug, Clone, Copy)]
struct Grid {
    step: f64,
}

impl Grid {
    fn new(levels: usize, range: f64) -> Grid {
        let step = if levels < 2 || range.is_nan() || range <= 0.0 {
            0.0
        } else {
            range / (levels - 1) as f64
        };
        Grid { step }
    }
    fn up(self, x: f64) -> f64 {
        if self.step == 0.0 {
            x
        } else {
            (x / self.step - 1e-9).ceil().max(0.0) * self.step
        }
    }
    fn down(self, x: f64) -> f64 {
        if self.step == 0.0 {
            x
        } else {
            (x / self.step + 1e-9).floor().max(0.0) * self.step
        }
    }
}

/// Everything the recursion needs about the instance, platform and target period.
struct Ctx<'a> {
    sums: &'a ChainSums,
    layers: usize,
    memory: Bytes,
    bandwidth: f64,
    t_hat: Seconds,
    grid_t: Grid,
    grid_m: Grid,
    grid_v: Grid,
    /// Live batches a special stage counts fewer than a normal one at the same delay.
    special_less: f64,
    /// When the DP must stop (the caller's time limit); a DP stopped there found nothing
    /// and proved nothing, which [`Ctx::expired`] tells its callers.
    deadline: Option<Instant>,
}

impl Ctx<'_> {
    /// True once the deadline has passed.
    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// C(l) = 2 a(l) / beta for a cut after layer `l` (0 for `l = 0`).
    fn c(&self, l: usize) -> Seconds {
        if l == 0 || l >= self.layers {
            0.0
        } else {
            2.0 * self.sums.a(l) / self.bandwidth
        }
    }
    /// M(k, l, g) of section 4.2.1.
    fn mem(&self, k: usize, l: usize, g: f64) -> Bytes {
        self.sums.stage_memory(k, l, g)
    }
    fn ceil(&self, x: f64) -> f64 {
        (x / self.t_hat).ceil()
    }
    /// x (+) y of section 4.2.2.
    fn oplus(&self, x: f64, y: f64) -> f64 {
        let cx = self.ceil(x);
        if cx == self.ceil(x + y) {
            x + y
        } else {
            self.t_hat * cx + y
        }
    }
    fn fits(&self, m: Bytes) -> bool {
        m <= self.memory * (1.0 + 1e-12)
    }
}

#[derive(Debug, Clone, Copy)]
struct Label {
    p: usize,
    t: f64,
    m: f64,
    v: f64,
    /// The largest load met on the path so far.
    val: f64,
    /// Where it came from: layer of the parent label (`usize::MAX` for the root), its index
    /// there, and whether the stage `l+1..=from` went to the special processor.
    from: usize,
    parent: usize,
    special: bool,
}

type Key = (usize, u64, u64, u64);

/// A stage of the DP's allocation: `(first, last, on the special processor)`.
type DpStage = (usize, usize, bool);

fn key(l: &Label) -> Key {
    (l.p, l.t.to_bits(), l.m.to_bits(), l.v.to_bits())
}

/// Labels proposed from one label: (target layer, label).
fn expand(ctx: &Ctx, l: usize, idx: usize, lab: &Label, cut: f64, out: &mut Vec<(usize, Label)>) {
    let s = ctx.sums;
    if lab.val >= cut || s.u(1, l) >= (lab.p as f64 + 1.0) * cut - lab.t {
        return;
    }
    let child = |p, t, m, v, val, special| Label {
        p,
        t,
        m,
        v,
        val,
        from: l,
        parent: idx,
        special,
    };
    if lab.p == 0 {
        // No normal processor left: layers 1..=l are one special stage.
        let u = s.u(1, l);
        let g = ctx.ceil(lab.v + u);
        let m = ctx
            .grid_m
            .up(lab.m + ctx.mem(1, l, (g - ctx.special_less).max(0.0)));
        let t = ctx.grid_t.up(lab.t + u);
        if ctx.fits(m) && t < cut {
            out.push((0, child(0, t, m, 0.0, lab.val.max(t), true)));
        }
        return;
    }
    for k in (1..=l).rev() {
        let u = s.u(k, l);
        if u >= cut {
            break;
        }
        let c = ctx.c(k - 1);
        if c >= cut {
            continue;
        }
        let g = ctx.ceil(lab.v + u);
        let v = if k > 1 {
            ctx.grid_v.down(ctx.oplus(ctx.oplus(lab.v, u), c))
        } else {
            0.0
        };
        // Normal processor.
        if ctx.fits(ctx.mem(k, l, g.max(1.0))) {
            let val = lab.val.max(u).max(c);
            out.push((k - 1, child(lab.p - 1, lab.t, lab.m, v, val, false)));
        }
        // Special processor.
        let t = ctx.grid_t.up(lab.t + u);
        if t < cut {
            let m = ctx
                .grid_m
                .up(lab.m + ctx.mem(k, l, (g - ctx.special_less).max(0.0)));
            if ctx.fits(m) {
                let val = lab.val.max(t).max(c);
                out.push((k - 1, child(lab.p, t, m, v, val, true)));
            }
        }
    }
}

/// Marks the labels of one layer that no other label dominates. Among labels with the same
/// `p`, one with `t_P' <= t_P`, `m_P' <= m_P`, `V' <= V` and a maximum so far `<=` is at
/// least as good in every future (every later quantity is monotone in `t_P`, `m_P` and `V`,
/// roundings included), so the dominated label need not be expanded.
fn undominated(labels: &[Label]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&labels[a], &labels[b]);
        x.p.cmp(&y.p)
            .then(x.t.total_cmp(&y.t))
            .then(x.m.total_cmp(&y.m))
            .then(x.v.total_cmp(&y.v))
            .then(x.val.total_cmp(&y.val))
    });
    let mut alive = vec![true; labels.len()];
    // For each m_P seen in the current p group, the Pareto staircase of (V, val) over the
    // labels seen so far (all have t_P' <= t_P): V increasing, val strictly decreasing.
    let mut stairs: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
    let mut group = None;
    for &i in &order {
        let lab = &labels[i];
        if group != Some(lab.p) {
            group = Some(lab.p);
            stairs.clear();
        }
        // The last entry with V' <= V of a staircase has the smallest val among them.
        let dominated = stairs
            .iter()
            .take_while(|(m, _)| *m <= lab.m)
            .any(|(_, st)| {
                let pos = st.partition_point(|&(v, _)| v <= lab.v);
                pos > 0 && st[pos - 1].1 <= lab.val
            });
        if dominated {
            alive[i] = false;
            continue;
        }
        let at = stairs.partition_point(|(m, _)| *m < lab.m);
        if at == stairs.len() || stairs[at].0 != lab.m {
            stairs.insert(at, (lab.m, Vec::new()));
        }
        let st = &mut stairs[at].1;
        // Insert, dropping the entries it dominates (V'' >= V and val'' >= val).
        let pos = st.partition_point(|&(v, _)| v <= lab.v);
        let mut end = pos;
        while end < st.len() && st[end].1 >= lab.val {
            end += 1;
        }
        st.splice(pos..end, [(lab.v, lab.val)]);
    }
    alive
}

/// The bounded DP: the best allocation of value `< cut`, if any.
fn dp_bounded(ctx: &Ctx, processors: usize, cut: f64) -> Option<(f64, Vec<DpStage>)> {
    let n = ctx.layers;
    let mut levels: Vec<Vec<Label>> = vec![Vec::new(); n + 1];
    let mut maps: Vec<HashMap<Key, usize>> = vec![HashMap::new(); n + 1];
    levels[n].push(Label {
        p: processors - 1,
        t: 0.0,
        m: 0.0,
        v: 0.0,
        val: 0.0,
        from: usize::MAX,
        parent: 0,
        special: false,
    });
    for l in (1..=n).rev() {
        // One level costs at most a few milliseconds on the longest chains: the clock is
        // read once per level.
        if ctx.expired() {
            return None;
        }
        let labels = std::mem::take(&mut levels[l]);
        let alive = undominated(&labels);
        let proposals: Vec<Vec<(usize, Label)>> = labels
            .par_iter()
            .enumerate()
            .with_min_len(16)
            .map(|(i, lab)| {
                let mut out = Vec::new();
                if alive[i] {
                    expand(ctx, l, i, lab, cut, &mut out);
                }
                out
            })
            .collect();
        levels[l] = labels;
        maps[l] = HashMap::new();
        for (target, lab) in proposals.into_iter().flatten() {
            let k = key(&lab);
            match maps[target].get(&k) {
                Some(&j) => {
                    if lab.val < levels[target][j].val {
                        levels[target][j] = lab;
                    }
                }
                None => {
                    maps[target].insert(k, levels[target].len());
                    levels[target].push(lab);
                }
            }
        }
    }
    let (best, _) = levels[0]
        .iter()
        .enumerate()
        .map(|(i, lab)| (i, lab.val.max(lab.t)))
        .filter(|&(_, v)| v < cut)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, v)| (Some(i), v))
        .unwrap_or((None, f64::INFINITY));
    let best = best?;
    let value = levels[0][best].val.max(levels[0][best].t);
    // Walk back: stages (first, last, special) in chain order.
    let mut stages = Vec::new();
    let (mut l, mut i) = (0, best);
    while l < n {
        let lab = levels[l][i];
        stages.push((l + 1, lab.from, lab.special));
        l = lab.from;
        i = lab.parent;
    }
    Some((value, stages))
}

fn build_allocation(stages: &[(usize, usize, bool)], processors: usize) -> Allocation {
    let special = processors - 1;
    let mut next = 0;
    let mut out: Vec<Stage> = Vec::new();
    for &(first, last, is_special) in stages {
        if is_special {
            if let Some(prev) = out.last_mut() {
                if prev.processor == special && prev.last + 1 == first {
                    prev.last = last;
                    continue;
                }
            }
            out.push(Stage {
                first,
                last,
                processor: special,
            });
        } else {
            out.push(Stage {
                first,
                last,
                processor: next,
            });
            next += 1;
        }
    }
    Allocation::new(out)
}

fn check_inputs(instance: &Instance, platform: &Platform) -> Result<(), crate::InputError> {
    instance.check()?;
    platform.check()
}

fn context<'a>(
    sums: &'a ChainSums,
    platform: &Platform,
    t_hat: Seconds,
    config: &MadPipeConfig,
    deadline: Option<Instant>,
) -> Ctx<'a> {
    let n = sums.len();
    let total = sums.u(1, n);
    let comm: f64 = (1..n).map(|l| 2.0 * sums.a(l) / platform.bandwidth).sum();
    Ctx {
        sums,
        layers: n,
        memory: platform.memory,
        bandwidth: platform.bandwidth,
        t_hat,
        grid_t: Grid::new(config.levels_time, total),
        grid_m: Grid::new(config.levels_memory, platform.memory),
        grid_v: Grid::new(config.levels_delay, total + comm),
        special_less: if config.special_full_batches {
            0.0
        } else {
            1.0
        },
        deadline,
    }
}

/// A lower bound on any DP value: the average processor load and the heaviest layer.
fn dp_lower_bound(sums: &ChainSums, processors: usize) -> f64 {
    let n = sums.len();
    let heaviest = (1..=n).map(|l| sums.u(l, l)).fold(0.0, f64::max);
    (sums.u(1, n) / processors as f64).max(heaviest)
}

/// Searches `[lower, cut)` by a ladder of cutoffs.
fn dp_search(ctx: &Ctx, processors: usize, lower: f64, cut: f64) -> Option<DpResult> {
    // Every DP value is at most the whole chain's load (rounded) or the largest link load.
    let n = ctx.layers;
    let largest_c = (1..n).map(|l| ctx.c(l)).fold(0.0, f64::max);
    let cap = (ctx.grid_t.up(ctx.sums.u(1, n)) + ctx.grid_t.step).max(largest_c) * (1.0 + 1e-9);
    // With a finite cutoff (Algorithm 1 knows an allocation), one search below it.
    let mut rung = if cut.is_finite() {
        cut
    } else {
        (lower * 1.05).max(f64::MIN_POSITIVE)
    };
    loop {
        let c = if rung >= cut || rung > cap { cut } else { rung };
        if let Some((period, stages)) = dp_bounded(ctx, processors, c) {
            return Some(DpResult {
                period,
                allocation: build_allocation(&stages, processors),
            });
        }
        if c >= cut || ctx.expired() {
            return None;
        }
        rung *= 1.25;
    }
}

/// MadPipe-DP for the target period `t_hat` (section 4.2.2): the allocation minimising the
/// DP's period under its memory estimates, or `None` when none fits. Invalid inputs (an
/// empty chain, a non-positive `t_hat`) give `None` as well.
pub fn madpipe_dp(
    instance: &Instance,
    platform: &Platform,
    t_hat: Seconds,
    config: &MadPipeConfig,
) -> Option<DpResult> {
    if check_inputs(instance, platform).is_err()
        || config.check().is_err()
        || !(t_hat.is_finite() && t_hat > 0.0)
    {
        return None;
    }
    let sums = instance.sums();
    let ctx = context(&sums, platform, t_hat, config, None);
    let lower = dp_lower_bound(&sums, platform.processors);
    dp_search(&ctx, platform.processors, lower, f64::INFINITY)
}

/// Algorithm 1 (section 4.2.3): `K` steps of the modified binary search over `T^`, returning
/// the allocation of the smallest `max(T_i, T^_i)`.
///
/// Each step searches only for DP values below the current upper bound `ub`: a value
/// `T >= ub` (with `T^ < ub`) would leave `ub` unchanged, set `lb` to `max(lb, T^)` (the same
/// as an infeasible step) and could not be the answer, so it need not be computed exactly.
pub fn algorithm1(
    instance: &Instance,
    platform: &Platform,
    config: &MadPipeConfig,
) -> Result<MadPipeAllocation, MadPipeError> {
    algorithm1_within(instance, platform, config, None)
}

/// [`algorithm1`] stopped after `time_limit` (from now) with [`MadPipeError::OutOfTime`]:
/// the DP reads the clock once per layer, so it stops within one level's work of the limit
/// on any chain.
pub fn algorithm1_within(
    instance: &Instance,
    platform: &Platform,
    config: &MadPipeConfig,
    time_limit: Option<Duration>,
) -> Result<MadPipeAllocation, MadPipeError> {
    let deadline = time_limit.map(|t| Instant::now() + t);
    check_inputs(instance, platform)?;
    config.check()?;
    let sums = instance.sums();
    let n = sums.len();
    let p = platform.processors;
    let total = sums.u(1, n);
    let comm: f64 = (1..n).map(|l| 2.0 * sums.a(l) / platform.bandwidth).sum();
    let dp_lower = dp_lower_bound(&sums, p);
    let mut lb = total / p as f64;
    let mut ub = total + comm;
    let mut t_hat = lb;
    let mut best: Option<MadPipeAllocation> = None;
    let mut history = Vec::new();
    let mut largest = t_hat;
    for _ in 0..config.iterations {
        largest = largest.max(t_hat);
        let ctx = context(&sums, platform, t_hat, config, deadline);
        // Until an allocation is known, search without a cutoff.
        let cut = if best.is_some() { ub } else { f64::INFINITY };
        let found = dp_search(&ctx, p, dp_lower, cut);
        if ctx.expired() {
            // A search cut short found nothing to trust; the best of the steps before it
            // is still an allocation of the DP's space.
            if best.is_some() {
                break;
            }
            return Err(MadPipeError::OutOfTime);
        }
        let t = found.as_ref().map_or(f64::INFINITY, |r| r.period);
        history.push((t_hat, t));
        let tilde = t.max(t_hat);
        lb = lb.max(t.min(t_hat));
        if let Some(r) = found {
            if best.as_ref().is_none_or(|b| tilde < b.planned_period) {
                best = Some(MadPipeAllocation {
                    allocation: r.allocation,
                    planned_period: tilde,
                    t_hat,
                    dp_period: r.period,
                    special: p - 1,
                    iterations: vec![],
                });
            }
        }
        ub = ub.min(tilde);
        t_hat = (lb + ub) / 2.0;
    }
    match best {
        Some(mut b) => {
            b.iterations = history;
            Ok(b)
        }
        None => Err(MadPipeError::NoAllocation {
            memory: platform.memory,
            iterations: config.iterations,
            largest_t_hat: largest,
        }),
    }
}

/// The CLI's `madpipe-dp`: Algorithm 1's allocation and planned period, without a pattern
/// (status "planned"; the scheduling MILP of section 4.3 gives the pattern).
#[derive(Debug, Clone, Default)]
pub struct MadPipeDpPlanner {
    pub config: MadPipeConfig,
    /// Wall-clock limit of Algorithm 1 (`--time-limit`).
    pub time_limit: Option<Duration>,
}

impl MadPipeDpPlanner {
    /// The planner of `madpipe-dp`, with `config` checked.
    pub fn new(config: MadPipeConfig) -> Result<Self, crate::InputError> {
        config.check()?;
        Ok(MadPipeDpPlanner {
            config,
            time_limit: None,
        })
    }
}

/// The options of `madpipe-dp`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MadPipeDpOptions {
    /// The discretization and iteration count (section 5.1 defaults).
    #[serde(default)]
    pub madpipe: MadPipeConfig,
    /// Wall-clock limit (`--time-limit`): at it, no allocation ("timeout").
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
}

impl AlgorithmOptions for MadPipeDpOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        let mut planner = MadPipeDpPlanner::new(self.madpipe)?;
        planner.time_limit = crate::planner::checked_time_limit(self.time_limit)?;
        Ok(Box::new(planner))
    }
}

impl Planner for MadPipeDpPlanner {
    fn name(&self) -> String {
        "madpipe-dp".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        match algorithm1_within(
            problem.instance,
            problem.platform,
            &self.config,
            self.time_limit,
        ) {
            Ok(r) => {
                let mut sol = Solution::new(r.allocation, None);
                sol.planned_period = Some(r.planned_period);
                Ok(Outcome::Found(sol))
            }
            Err(e @ MadPipeError::NoAllocation { .. }) => Ok(Outcome::Infeasible {
                reason: e.to_string(),
                lower_bound: None,
            }),
            Err(e @ MadPipeError::OutOfTime) => Ok(Outcome::NoPlanWithinLimit {
                reason: e.to_string(),
                lower_bound: None,
            }),
            Err(MadPipeError::Input(e)) => Err(e.into()),
        }
    }
}

/// The DP's own objective for an allocation of its space, by the formulas of section 4.2
/// (for tests and for checking a plan against the estimate): the allocation is given as
/// stages `(first, last, special)` in chain order. Returns `None` when a memory estimate
/// exceeds M. Applies the same rounding as the DP with `config`.
pub fn dp_objective(
    instance: &Instance,
    platform: &Platform,
    t_hat: Seconds,
    config: &MadPipeConfig,
    stages: &[(usize, usize, bool)],
) -> Option<Seconds> {
    let sums = instance.sums();
    let ctx = context(&sums, platform, t_hat, config, None);
    let (mut t, mut m, mut v, mut val) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for (i, &(k, l, special)) in stages.iter().enumerate().rev() {
        let u = sums.u(k, l);
        let c = ctx.c(k - 1);
        let g = ctx.ceil(v + u);
        if special {
            t = ctx.grid_t.up(t + u);
            m = ctx
                .grid_m
                .up(m + ctx.mem(k, l, (g - ctx.special_less).max(0.0)));
            if !ctx.fits(m) {
                return None;
            }
            val = val.max(t).max(c);
        } else {
            if !ctx.fits(ctx.mem(k, l, g.max(1.0))) {
                return None;
            }
            val = val.max(u).max(c);
        }
        if i > 0 {
            v = ctx.grid_v.down(ctx.oplus(ctx.oplus(v, u), c));
        }
    }
    Some(val.max(t))
}
