//! The feasibility MILP of one allocation's periodic patterns at a fixed period: does a
//! pattern of period `T` exist that respects dependencies, exclusive resources modulo `T`
//! and memory (docs/model.md sections 4 to 6)? The scheduling search of
//! [`fixed_allocation`](crate::milp::fixed_allocation) bisects `T` over it; the global
//! bound asks it about one processor or a few at a time ([`Scope::focus`]); `best`'s exact checks ask
//! it about every stage structure of an assignment at once ([`Scope::mergeable`]).
//!
//! The formulation is MadPipe's second-phase problem (Beaumont, Eyraud-Dubois, Shilova,
//! *MadPipe: Memory Aware Dynamic Programming Algorithm for Pipelined Model Parallelism*,
//! ScaDL 2022, section 4.3) written with one integer per pair of operations instead of
//! per-operation shifts and order binaries:
//!
//! # Variables (times in units of `T`)
//! - `sigma_o >= 0`, the start of operation `o` for batch 0 (the pattern's start is
//!   `sigma_o mod 1`, its shift `floor(sigma_o)`); the first operation of the chain starts
//!   at 0;
//! - for every pair `i, j` of operations that must not overlap modulo `T` (one resource),
//!   `i` before `j` along the batch's chain: an integer `m_ij >= 0` with
//!   `m_ij + d_i <= sigma_j - sigma_i <= m_ij + 1 - d_j`. This says exactly that the two
//!   busy intervals are disjoint modulo 1, and that `m_ij = floor(sigma_j - sigma_i)`.
//!
//! # Memory is linear in the pairs
//! At the start of `F_e` (instant `sigma_Fe`), stage `k` of the same processor holds
//! `live = floor(sigma_Fe - sigma_Fk) - floor(sigma_Fe - sigma_Bk - d_Bk)` batches (the
//! batches whose forward has started and whose backward has not ended). Both floors are
//! those of pairs on the processor's circle: `floor(sigma_Fe - sigma_Fk)` is `m(Fk, Fe)`
//! when `F_k` comes first along the chain, `-m(Fe, Fk) - 1` when `F_e` does, 0 when
//! `k = e`; `floor(sigma_Fe - sigma_Bk - d_Bk) = -m(Fe, Bk) - 1` (every forward comes before
//! every backward). So a processor's memory at each forward start is a linear function of
//! integers, and memory only grows at forward starts: one row per forward start. No order
//! binaries, no indicator binaries for live batches.
//!
//! # Delays of at most a period
//! Along the chain, an operation starts at most one period after its predecessor ends: a
//! longer wait can be shortened by a whole period for the rest of the chain, which keeps
//! every resource's occupation modulo `T` and never adds a live batch. This bounds every
//! `sigma` and `m`.
//!
//! # Bounds from the chain
//! The chain is a path: the operation at position `k` along it starts at least the
//! durations before it after the first operation, and at most one period more per
//! dependency (the delays above). So each `sigma` lies in `[e_k, e_k + k]` with `e_k` those
//! durations, each pair's `m_ij` between `ceil(e_j - e_i + d_j - 1)` and
//! `floor(e_j - e_i + (k_j - k_i) - d_i)`, a stage holds at most
//! `floor(most window) + 1` batches at once, and the big constants of the merges below are
//! the most their left-hand sides can be, not the whole chain's length. All of this is
//! implied by the rows (no pattern is cut off); written as bounds, it tightens the LP
//! relaxation HiGHS branches on (without presolve, it would not derive the tighter
//! constants itself).
//!
//! # Average memory
//! On average over a period, stage `k` holds `W_k = sigma_Bk + d_Bk - sigma_Fk` batches (its
//! window in periods), and a processor's peak is at least its average: one more row per
//! processor, `sum_k bytes_k W_k <= M - static`. Implied by the rows at the forward starts
//! for integer `m`, but not for the LP relaxation, which can take each floor below its
//! average; with it, a memory-bound assignment with no pattern is proven with fewer nodes. A
//! stage that may merge with the one before is charged its bytes less the tensor the two
//! share: a merged stage keeps its stash less the shared tensors over its first stage's
//! window, which contains each of its stages' windows, so this is at most what it holds on
//! average.
//!
//! # Scopes
//! - [`Scope::focus`] keeps some processors' circles and memories, and of every other resource
//!   only the pairs that every allocation with the same layers there and the same cuts
//!   crossing has: each other stage's own forward and backward (they share a processor
//!   whatever it is), each cut's own two transfers (they share a link when half duplex),
//!   and the transfers of the cuts between two kept stages of focused processors, which
//!   cross between the same two processors in every such allocation (such cuts share a
//!   link when they join the same two).
//!   Every pattern of the allocation satisfies it: a relaxation, used by the global bound
//!   to prove that processors holding given layers with given cuts crossing cannot fit at
//!   `T` (docs/bounds.md, "Scheduled premises"). [`Scope::left_out`] drops some stages of
//!   the focused processors from their circles and memories (those stages keep only their
//!   own pair, as if on another processor with no transfer at their ends): a relaxation
//!   of every allocation in which the processors hold at least the other stages.
//!   [`Scope::tail`] makes the stages below the focused ones a pure delay (dependencies
//!   only): a relaxation of every allocation with at least as much transfer there.
//! - [`Scope::mergeable`] lets the MILP merge consecutive stages of one processor (which
//!   share no transfer) into one stage: when merged, their forwards and backwards run back
//!   to back, and the merged stage keeps its stash (the tensor the two share counted once)
//!   over the window of its first stage. Each stage `k` is charged `C_k >= live_k` batches
//!   at each instant, `C_k >= C_{k-1}` when merged with the stage before (windows of merged
//!   stages nest, so the least `C` is the merged stage's live count), and the shared tensor
//!   is deducted from merged stages. One MILP then decides every one of the `2^k` stage
//!   structures at once, exactly.
//! - [`Scope::stash_charges`] charges each stage per layer (its first layer what a stage
//!   starting there is charged, each other layer its charge inside a stage) instead of its
//!   stash, and a merge deducts the difference for the later stage's first layer. Where
//!   tensors are shared further apart than neighbours, a merged stash is no sum of pairwise
//!   terms; with charges that never exceed what any stage keeps, every pattern of every
//!   stage structure satisfies the memory rows: a relaxation (the global bound's scheduled
//!   checks on op-level chains), no longer exact.
//!
//! # Margins
//! Every duration is inflated by `MARGIN T` so that solutions within HiGHS's tolerances
//! pass the exact judge (every pattern is judged by the caller). An answer "no pattern" is
//! exact up to that relative margin per operation, like every period search here.

// Index loops mirror the formulation and read better than iterators here.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;

use crate::judge::static_memory;
use crate::milp::solver::{Model, Var};
use crate::model::{
    Allocation, BatchGraph, Instance, OpId, OpKind, Pattern, PatternOp, Platform, Resource, Stage,
};

/// Relative inflation of durations in the model (module docs).
pub const MARGIN: f64 = 1e-8;

/// Absolute widening (in periods) of every bound derived from the chain, so that rounding
/// in its sums never cuts off a pattern.
const SLACK: f64 = 1e-7;

/// Which part of the problem the model keeps (module docs, "Scopes").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    /// Only these processors' circles and memories, and the pairs every allocation with the
    /// same layers there and the same cuts crossing shares.
    pub focus: Option<Vec<usize>>,
    /// `mergeable[s]`: stages `s` and `s + 1` (consecutive, on one processor) may be merged
    /// by the MILP. Empty: none. With shared tensors further apart than neighbours
    /// (`stash_shared`), whose merged stash is not a sum of pairwise terms, only with
    /// [`Scope::stash_charges`].
    pub mergeable: Vec<bool>,
    /// `Some`: each stage charged what [`StashCharges`] says instead of its stash, at most
    /// what it keeps: a relaxation (module docs, "Scopes"). For chains whose tensors are
    /// shared further apart than neighbours, where it makes merges possible.
    pub stash_charges: Option<StashCharges>,
    /// `left_out[s]`: stage `s`, although on a focused processor, is left out of it: only
    /// its own forward and backward share a resource, and the processor's circle and memory
    /// (weights and buffers included) ignore it, as if it lay on another processor with no
    /// transfer at its ends. Empty: none. Only with [`Scope::focus`].
    pub left_out: Vec<bool>,
    /// `Some(t)`: stages `t..` (none of them on a focused processor, or all of them left
    /// out) keep only their dependencies: none of their operations (forwards, backwards,
    /// transfers at the cuts after them) shares a resource, and no processor's memory counts
    /// them. The chain below stage `t - 1` is then a pure delay of at least its operations'
    /// total, whatever cuts cross there: a relaxation of every allocation with the same
    /// stages up to `t - 1` and at least as much transfer below (docs/bounds.md,
    /// "Generalising a proof"). Only with [`Scope::focus`].
    pub tail: Option<usize>,
}

/// Per-layer stash charges that never exceed what a stage keeps (0-based, layer `l + 1` at
/// index `l`): a stage `k..m` is charged `start[k] + sum_{j in k+1..m} within[j]`, which
/// must be at most `stash(k..m)` for every `k..m`. The global bound's marginals and
/// stage-start stashes are such charges (docs/bounds.md, "Tensors shared further apart").
#[derive(Debug, Clone, PartialEq)]
pub struct StashCharges {
    /// What a stage starting at the layer is charged for it.
    pub start: Vec<f64>,
    /// What the layer is charged inside a stage that started before it.
    pub within: Vec<f64>,
}

impl StashCharges {
    /// The charge of stage `first..=last` (1-based), its first layer starting it.
    pub fn of_stage(&self, first: usize, last: usize) -> f64 {
        self.start[first - 1] + self.within[first..last].iter().sum::<f64>()
    }
}

impl Scope {
    /// The whole problem of an allocation, every merge of `mergeable` open to the MILP
    /// (every stage structure of its runs, where a merge is `true`): no focus, nothing
    /// left out, the stashes themselves charged.
    pub fn every_stage_structure(mergeable: Vec<bool>) -> Scope {
        Scope {
            mergeable,
            ..Scope::default()
        }
    }

    fn merges(&self, s: usize) -> bool {
        self.mergeable.get(s).copied().unwrap_or(false)
    }

    fn in_tail(&self, s: usize) -> bool {
        self.focus.is_some() && self.tail.is_some_and(|t| s >= t)
    }

    fn leaves_out(&self, s: usize) -> bool {
        self.focus.is_some() && self.left_out.get(s).copied().unwrap_or(false) || self.in_tail(s)
    }
}

/// The feasibility model at one period, with what is needed to read a pattern back.
pub struct PatternMilp {
    pub model: Model,
    pub decoder: Decoder,
}

/// Reads a pattern back from a solution of a [`PatternMilp`].
pub struct Decoder {
    graph: BatchGraph,
    allocation: Allocation,
    sigma: Vec<Var>,
    /// `merged[s]`: the binary merging stages `s` and `s + 1`, when mergeable.
    merged: Vec<Option<Var>>,
    period: f64,
}

impl PatternMilp {
    /// The model of `allocation`'s patterns at `period` within `scope`. `None` when the
    /// scope's static memory (weights, buffers) alone exceeds the memory: no pattern.
    pub fn new(
        instance: &Instance,
        platform: &Platform,
        allocation: &Allocation,
        period: f64,
        scope: &Scope,
    ) -> Option<Self> {
        let graph = BatchGraph::new(instance, platform, allocation);
        let order = graph.chain_order()?;
        let statics = scoped_static_memory(instance, platform, allocation, scope);
        let kept = |p: usize| scope.focus.as_ref().is_none_or(|f| f.contains(&p));
        if statics
            .iter()
            .enumerate()
            .any(|(p, &s)| kept(p) && s > platform.memory)
        {
            return None;
        }
        let mut b = Builder::new(instance, platform, allocation, scope, graph, order, period);
        b.add_schedule_rows();
        b.add_conflicts();
        b.add_merges();
        for (p, &static_p) in statics.iter().enumerate() {
            if b.kept_processor(p) {
                b.add_memory_rows(p, static_p);
            }
        }
        let Builder {
            m,
            graph,
            sigma,
            merged,
            ..
        } = b;
        Some(PatternMilp {
            model: m,
            decoder: Decoder {
                graph,
                allocation: allocation.clone(),
                sigma,
                merged,
                period,
            },
        })
    }
}

/// Each processor's static memory (weights, buffers) as `BatchGraph::new` counts it, less
/// that of the stages the scope leaves out: a left-out stage's are not the processor's.
fn scoped_static_memory(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    scope: &Scope,
) -> Vec<f64> {
    let mut statics = static_memory(instance, platform, allocation);
    let sums = instance.sums();
    for (s, st) in allocation.stages.iter().enumerate() {
        if scope.leaves_out(s) {
            let mut own = 3.0 * sums.weights(st.first, st.last);
            if s > 0 && allocation.crosses(s - 1) {
                own += 2.0 * sums.a(st.first - 1);
            }
            if allocation.crosses(s) {
                own += 2.0 * sums.a(st.last);
            }
            statics[st.processor] -= own;
        }
    }
    statics
}

/// The model under construction, with what its rows are written from: the batch graph,
/// the durations in periods, and the chain's bounds on every start.
struct Builder<'a> {
    instance: &'a Instance,
    platform: &'a Platform,
    allocation: &'a Allocation,
    scope: &'a Scope,
    graph: BatchGraph,
    /// The operations along the batch's chain.
    order: Vec<usize>,
    /// `pos[i]`: operation `i`'s position along the chain.
    pos: Vec<usize>,
    /// Durations in periods, with the margin.
    d: Vec<f64>,
    /// `earliest[k]`: the durations before position `k` along the chain.
    earliest: Vec<f64>,
    m: Model,
    sigma: Vec<Var>,
    /// `m_ij` of the pairs made so far, `i` before `j` along the chain.
    pair: HashMap<(usize, usize), Var>,
    /// `merged[s]`: the binary merging stages `s` and `s + 1`, when mergeable.
    merged: Vec<Option<Var>>,
}

impl<'a> Builder<'a> {
    fn new(
        instance: &'a Instance,
        platform: &'a Platform,
        allocation: &'a Allocation,
        scope: &'a Scope,
        graph: BatchGraph,
        order: Vec<usize>,
        period: f64,
    ) -> Self {
        let n = graph.ops.len();
        let d: Vec<f64> = graph
            .ops
            .iter()
            .map(|o| o.duration / period + MARGIN)
            .collect();
        let mut pos = vec![0; n];
        for (k, &i) in order.iter().enumerate() {
            pos[i] = k;
        }
        // Along the chain, the operation at position k starts at least the durations before
        // it after the first, and at most one period more per dependency: `earliest[k]`,
        // `earliest[k] + k` (module docs, "Bounds from the chain").
        let mut earliest = vec![0.0; n];
        for k in 1..n {
            earliest[k] = earliest[k - 1] + d[order[k - 1]];
        }
        let mut m = Model::new();
        // Without presolve: on these models it saves little, and an "infeasible" found with
        // it would have to be confirmed without it (`milp::solver`, "Infeasibility is
        // confirmed").
        m.set_presolve(false);
        let sigma: Vec<Var> = (0..n)
            .map(|i| {
                let lo = earliest[pos[i]];
                m.continuous(0.0, lo - SLACK, lo + pos[i] as f64 + SLACK)
            })
            .collect();
        let stages = allocation.stages.len();
        Builder {
            instance,
            platform,
            allocation,
            scope,
            graph,
            order,
            pos,
            d,
            earliest,
            m,
            sigma,
            pair: HashMap::new(),
            merged: vec![None; stages],
        }
    }

    fn kept_processor(&self, p: usize) -> bool {
        self.scope.focus.as_ref().is_none_or(|f| f.contains(&p))
    }

    fn kept_stage(&self, s: usize) -> bool {
        self.kept_processor(self.allocation.stages[s].processor) && !self.scope.leaves_out(s)
    }

    /// The least `sigma_j - sigma_i`, `i` before `j` along the chain.
    fn least_apart(&self, i: usize, j: usize) -> f64 {
        self.earliest[self.pos[j]] - self.earliest[self.pos[i]]
    }

    /// The greatest `sigma_j - sigma_i`, `i` before `j` along the chain.
    fn most_apart(&self, i: usize, j: usize) -> f64 {
        self.least_apart(i, j) + (self.pos[j] - self.pos[i]) as f64
    }

    fn op_of(&self, kind: OpKind, stage: usize) -> Option<usize> {
        self.graph.find(OpId { kind, stage })
    }

    /// The chain starts at 0, and each dependency waits at most a period.
    fn add_schedule_rows(&mut self) {
        let first = self.sigma[self.order[0]];
        self.m.row(0.0, 0.0, &[(first, 1.0)]);
        for &(a, b) in &self.graph.deps {
            // d_a <= sigma_b - sigma_a <= d_a + 1
            let (d, sa, sb) = (self.d[a], self.sigma[a], self.sigma[b]);
            self.m.row(d, d + 1.0, &[(sb, 1.0), (sa, -1.0)]);
        }
    }

    /// `m_ij = floor(sigma_j - sigma_i)` for a pair that must not overlap modulo the
    /// period, made on first use.
    fn pair_var(&mut self, i: usize, j: usize) -> Var {
        let (i, j) = if self.pos[i] < self.pos[j] {
            (i, j)
        } else {
            (j, i)
        };
        if let Some(&v) = self.pair.get(&(i, j)) {
            return v;
        }
        let (di, dj) = (self.d[i], self.d[j]);
        // floor(sigma_j - sigma_i), within what the chain allows.
        let lo = (self.least_apart(i, j) + dj - 1.0 - SLACK).ceil().max(0.0);
        let hi = (self.most_apart(i, j) - di + SLACK).floor().max(lo);
        let v = self.m.integer(0.0, lo, hi);
        // m + d_i <= sigma_j - sigma_i <= m + 1 - d_j
        let (si, sj) = (self.sigma[i], self.sigma[j]);
        self.m
            .row(di, 1.0 - dj, &[(sj, 1.0), (si, -1.0), (v, -1.0)]);
        self.pair.insert((i, j), v);
        v
    }

    /// Whether operations `i` and `j` must not overlap modulo the period. The transfers of
    /// a cut between two kept stages cross between the same two focused processors in
    /// every allocation with the same layers there: they share that link with the other
    /// such cuts (module docs, "Scopes").
    fn conflicting(&self, i: usize, j: usize) -> bool {
        let (oi, oj) = (&self.graph.ops[i], &self.graph.ops[j]);
        if oi.resource != oj.resource || oi.duration <= 0.0 || oj.duration <= 0.0 {
            return false;
        }
        if self.scope.in_tail(oi.id.stage) || self.scope.in_tail(oj.id.stage) {
            return false;
        }
        let stages = self.allocation.stages.len();
        let between_kept =
            |s: usize| s + 1 < stages && self.kept_stage(s) && self.kept_stage(s + 1);
        let same_stage = oi.id.stage == oj.id.stage;
        match (&self.scope.focus, oi.resource) {
            (None, _) => true,
            (Some(f), Resource::Processor(p)) => {
                (f.contains(&p) && self.kept_stage(oi.id.stage) && self.kept_stage(oj.id.stage))
                    || same_stage
            }
            (Some(_), Resource::Link { .. }) => {
                same_stage || (between_kept(oi.id.stage) && between_kept(oj.id.stage))
            }
        }
    }

    fn add_conflicts(&mut self) {
        let n = self.graph.ops.len();
        for i in 0..n {
            for j in i + 1..n {
                if self.conflicting(i, j) {
                    self.pair_var(i, j);
                }
            }
        }
    }

    /// Merges of consecutive stages on one processor.
    fn add_merges(&mut self) {
        let stages = self.allocation.stages.len();
        for s in 0..stages.saturating_sub(1) {
            let (a, b) = (&self.allocation.stages[s], &self.allocation.stages[s + 1]);
            if !self.scope.merges(s)
                || a.processor != b.processor
                || !self.kept_stage(s)
                || !self.kept_stage(s + 1)
                || (!self.instance.stash_shared.is_empty() && self.scope.stash_charges.is_none())
            {
                continue;
            }
            let z = self.m.binary(0.0);
            let (Some(fa), Some(fb), Some(ba), Some(bb)) = (
                self.op_of(OpKind::F, s),
                self.op_of(OpKind::F, s + 1),
                self.op_of(OpKind::B, s),
                self.op_of(OpKind::B, s + 1),
            ) else {
                continue;
            };
            // Back to back when merged: sigma_Fb - sigma_Fa - d_Fa <= H (1 - z), and
            // sigma_Ba - sigma_Bb - d_Bb <= H (1 - z), with H the most that the chain
            // allows on the left.
            let hf = (self.most_apart(fa, fb) - self.d[fa]).max(0.0) + SLACK;
            let hb = (self.most_apart(bb, ba) - self.d[bb]).max(0.0) + SLACK;
            let sg = &self.sigma;
            let (f_row, b_row) = (
                [(sg[fb], 1.0), (sg[fa], -1.0), (z, hf)],
                [(sg[ba], 1.0), (sg[bb], -1.0), (z, hb)],
            );
            self.m.le(&f_row, self.d[fa] + hf);
            self.m.le(&b_row, self.d[bb] + hb);
            self.merged[s] = Some(z);
        }
    }
}

/// One processor's stages in the memory rows: their stash in units of `M`, and what each
/// saves when merged with the stage before (the tensor they share).
struct ProcessorStages {
    stages: Vec<usize>,
    bytes: Vec<f64>,
    shared: Vec<f64>,
}

impl Builder<'_> {
    fn processor_stages(&self, p: usize) -> ProcessorStages {
        let (allocation, memory) = (self.allocation, self.platform.memory);
        let sums = self.instance.sums();
        let stages: Vec<usize> = (0..allocation.stages.len())
            .filter(|&s| allocation.stages[s].processor == p && self.kept_stage(s))
            .collect();
        let bytes = stages
            .iter()
            .map(|&s| {
                let st = &allocation.stages[s];
                match &self.scope.stash_charges {
                    Some(c) => c.of_stage(st.first, st.last) / memory,
                    None => sums.stash(st.first, st.last) / memory,
                }
            })
            .collect();
        let shared = stages
            .iter()
            .map(|&s| {
                if s == 0 || self.merged[s - 1].is_none() {
                    return 0.0;
                }
                let (a, b) = (&allocation.stages[s - 1], &allocation.stages[s]);
                if let Some(c) = &self.scope.stash_charges {
                    let l = b.first - 1;
                    return ((c.start[l] - c.within[l]) / memory).max(0.0);
                }
                let apart = sums.stash(a.first, a.last) + sums.stash(b.first, b.last);
                ((apart - sums.stash(a.first, b.last)) / memory).max(0.0)
            })
            .collect();
        ProcessorStages {
            stages,
            bytes,
            shared,
        }
    }

    /// The most batches stage `s` can hold at once: its window (forward start to backward
    /// end) is at most `most_apart(F, B) + d_B` periods long.
    fn most_live(&self, s: usize) -> f64 {
        let f = self.op_of(OpKind::F, s).unwrap();
        let b = self.op_of(OpKind::B, s).unwrap();
        (self.most_apart(f, b) + self.d[b] + SLACK).floor() + 1.0
    }

    /// `live_k(F_e)`, the batches stage `k` holds at the start of `F_e`, as terms of its
    /// own (coefficient 1) plus a constant (module docs, "Memory is linear in the pairs").
    fn live_terms(&mut self, fe: usize, k: usize) -> (Vec<(Var, f64)>, f64) {
        let fk = self.op_of(OpKind::F, k).unwrap();
        let bk = self.op_of(OpKind::B, k).unwrap();
        let mut t = Vec::new();
        let mut c = 1.0;
        if self.pos[fk] < self.pos[fe] {
            t.push((self.pair_var(fk, fe), 1.0));
        } else if self.pos[fe] < self.pos[fk] {
            t.push((self.pair_var(fe, fk), -1.0));
            c -= 1.0;
        }
        t.push((self.pair_var(fe, bk), 1.0));
        (t, c)
    }

    /// Memory at each forward start of processor `p` (units of `M`), and its average.
    fn add_memory_rows(&mut self, p: usize, static_p: f64) {
        let mine = self.processor_stages(p);
        if mine.bytes.iter().all(|&b| b <= 0.0) {
            return;
        }
        let cap = (self.platform.memory - static_p) / self.platform.memory;
        for &e in &mine.stages {
            if let Some(fe) = self.op_of(OpKind::F, e) {
                self.add_peak_row(fe, &mine, cap);
            }
        }
        self.add_average_row(&mine, cap);
    }

    /// Memory at the start of `F_e`. Stages that may merge are charged through `C_k`:
    /// `C_k >= live_k`, and `C_k >= C_{k-1} - K (1 - z)` when it may merge back, with `K`
    /// the most `C_{k-1}` can be (merged windows nest: at most the most live of any stage of
    /// the chain of merges); the shared tensor is deducted once per merge.
    fn add_peak_row(&mut self, fe: usize, mine: &ProcessorStages, cap: f64) {
        let mut terms: Vec<(Var, f64)> = Vec::new();
        let mut constant = 0.0;
        let mut charged: Option<(Var, f64)> = None;
        for (idx, &k) in mine.stages.iter().enumerate() {
            let (lt, lc) = self.live_terms(fe, k);
            let chained = k > 0 && self.merged[k - 1].is_some();
            let starts_chain = self.merged.get(k).is_some_and(|z| z.is_some());
            if !chained && !starts_chain {
                charged = None;
                for (v, c) in lt {
                    terms.push((v, c * mine.bytes[idx]));
                }
                constant += lc * mine.bytes[idx];
                continue;
            }
            let before = if chained { charged } else { None };
            let own = self.most_live(k);
            let most = before.map_or(own, |(_, b)| b.max(own));
            let ck = self.m.integer(0.0, 0.0, most);
            let mut row = vec![(ck, 1.0)];
            row.extend(lt.iter().map(|&(v, c)| (v, -c)));
            self.m.ge(&row, lc);
            if chained {
                let z = self.merged[k - 1].unwrap();
                let (prev, most_prev) = before.expect("the stage before is charged");
                self.m
                    .ge(&[(ck, 1.0), (prev, -1.0), (z, -most_prev)], -most_prev);
                // v = z C_k, bounded above (it is deducted).
                let v = self.m.continuous(0.0, 0.0, most);
                self.m.le(&[(v, 1.0), (ck, -1.0)], 0.0);
                self.m.le(&[(v, 1.0), (z, -most)], 0.0);
                terms.push((v, -mine.shared[idx]));
            }
            terms.push((ck, mine.bytes[idx]));
            charged = Some((ck, most));
        }
        self.m.le(&terms, cap - constant);
    }

    /// On average over a period, stage k holds W_k = sigma_Bk + d_Bk - sigma_Fk batches (its
    /// window, in periods), and a peak is at least the average. A merged stage holds its
    /// stash less the shared tensors over its first stage's window, which contains each of
    /// its stages' windows: charging each stage its bytes less what it shares with the stage
    /// before (where the two may merge) over its own window is at most that (module docs,
    /// "Average memory").
    fn add_average_row(&mut self, mine: &ProcessorStages, cap: f64) {
        let mut avg: Vec<(Var, f64)> = Vec::new();
        let mut constant = 0.0;
        for (idx, &k) in mine.stages.iter().enumerate() {
            let (Some(fk), Some(bk)) = (self.op_of(OpKind::F, k), self.op_of(OpKind::B, k)) else {
                continue;
            };
            let w = (mine.bytes[idx] - mine.shared[idx]).max(0.0);
            if w > 0.0 {
                avg.push((self.sigma[bk], w));
                avg.push((self.sigma[fk], -w));
                constant += w * self.d[bk];
            }
        }
        if !avg.is_empty() {
            self.m.le(&avg, cap - constant);
        }
    }
}

impl Decoder {
    /// The allocation (stages merged where the solution says so) and its pattern, from a
    /// solution's values. Not meaningful for a focused scope.
    pub fn decode(&self, values: &[f64]) -> (Allocation, Pattern) {
        let period = self.period;
        let stages = self.allocation.stages.len();
        // Finest stage s joins the merged stage of s - 1 when merged[s - 1] is set.
        let joins = |s: usize| {
            s > 0 && self.merged[s - 1].is_some_and(|z| values.get(z.0).is_some_and(|&v| v > 0.5))
        };
        let mut groups: Vec<(usize, usize)> = Vec::new(); // finest stages first..=last
        for s in 0..stages {
            if joins(s) {
                groups.last_mut().expect("stage 0 never joins").1 = s;
            } else {
                groups.push((s, s));
            }
        }
        let allocation = Allocation::new(
            groups
                .iter()
                .map(|&(a, b)| Stage {
                    first: self.allocation.stages[a].first,
                    last: self.allocation.stages[b].last,
                    processor: self.allocation.stages[a].processor,
                })
                .collect(),
        );
        let start_of = |kind: OpKind, stage: usize| -> (f64, i64) {
            let i = self
                .graph
                .find(OpId { kind, stage })
                .expect("every finest operation exists");
            let s = values[self.sigma[i].0].max(0.0);
            let shift = s.floor();
            (((s - shift) * period).clamp(0.0, period), shift as i64)
        };
        let mut ops = Vec::new();
        for (g, &(a, b)) in groups.iter().enumerate() {
            // A merged stage's forward starts with its first finest stage's, its backward
            // with its last's; its transfers are its last finest stage's.
            for (kind, finest) in [(OpKind::F, a), (OpKind::B, b)] {
                let (start, shift) = start_of(kind, finest);
                ops.push(PatternOp {
                    kind,
                    stage: g,
                    start,
                    shift,
                });
            }
            if self.allocation.crosses(b) {
                for kind in [OpKind::CF, OpKind::CB] {
                    let (start, shift) = start_of(kind, b);
                    ops.push(PatternOp {
                        kind,
                        stage: g,
                        start,
                        shift,
                    });
                }
            }
        }
        // A start rounded up to the period belongs to the next one.
        for o in &mut ops {
            if o.start >= period {
                o.start = 0.0;
                o.shift += 1;
            }
        }
        ops.sort_by_key(|o| (o.stage, o.kind));
        (allocation, Pattern { period, ops })
    }
}
