//! The scheduling MILP (`milp::pattern_milp`: one integer per pair of operations sharing a
//! resource, memory linear in those integers) against an independent formulation of the
//! same problem: per-operation starts in `[0, T)` and integer shifts, one order binary per
//! pair on a resource, and live batches counted by indicator binaries tied to the starts
//! (MadPipe's second-phase ILP as first written here, Beaumont et al., ScaDL 2022). On
//! random chains and allocations, at periods from tight to loose, the two must say the same
//! thing: a pattern exists or none does. Every pattern the pair formulation returns is judged
//! valid. At the least memory with a pattern (bisected with the order-binary formulation),
//! the two must agree just above and just below it: where the pair formulation's average
//! memory row, which only tightens its relaxation, would cut off a pattern, it is there that
//! it would (that row charged 1.5 times the average fails this test, checked by hand; the
//! comparison at fixed memory misses it). Its bounds from the chain are sums of its
//! dependency rows; a mutant that allows half a period of delay per dependency instead of
//! one passes every test here (on these small chains no pattern at a threshold needs longer
//! delays).
//!
//! The exhaustive searches behind the global bound's tests use the pair formulation as
//! their ground truth; this test is what keeps that ground truth honest.

use pipeopt::judge::{judge, static_memory};
use pipeopt::milp::pattern_milp::{PatternMilp, Scope};
use pipeopt::milp::solver::{MilpOptions, Model, SolveStatus, Var};
use pipeopt::model::{Allocation, BatchGraph, Instance, OpKind, Platform, Stage};
use pipeopt::nets::random::{one_processor_memory, random_chain};

/// The same margin as the pair formulation: both inflate every duration by it.
const MARGIN: f64 = pipeopt::milp::pattern_milp::MARGIN;

/// Column layout of the feasibility model.
struct Cols {
    t: Vec<Var>,
    h: Vec<Var>,
}

/// The feasibility MILP at period `t` (times scaled by `1/t`).
fn feasibility(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    graph: &BatchGraph,
    order: &[usize],
    statics: &[f64],
    period: f64,
) -> Model {
    let n = graph.ops.len();
    let d: Vec<f64> = graph
        .ops
        .iter()
        .map(|o| o.duration / period + MARGIN)
        .collect();
    let mut m = Model::new();
    let mut pos = vec![0; n];
    for (k, &i) in order.iter().enumerate() {
        pos[i] = k;
    }
    let cols = Cols {
        t: (0..n).map(|_| m.continuous(0.0, 0.0, 1.0)).collect(),
        h: (0..n)
            .map(|i| m.integer(0.0, 0.0, 2.0 * pos[i] as f64))
            .collect(),
    };
    // Dependencies: h_a + t_a + d_a <= h_b + t_b, and h_b - h_a <= 2.
    for &(a, b) in &graph.deps {
        m.le(
            &[
                (cols.h[a], 1.0),
                (cols.t[a], 1.0),
                (cols.h[b], -1.0),
                (cols.t[b], -1.0),
            ],
            -d[a],
        );
        m.le(&[(cols.h[b], 1.0), (cols.h[a], -1.0)], 2.0);
    }
    // Resources: arcs on the circle of length 1 pairwise disjoint.
    for i in 0..n {
        if graph.ops[i].duration <= 0.0 {
            continue;
        }
        for j in i + 1..n {
            if graph.ops[j].duration <= 0.0 || graph.ops[j].resource != graph.ops[i].resource {
                continue;
            }
            let y = m.binary(0.0);
            let (ti, tj) = (cols.t[i], cols.t[j]);
            // y = 1: i then j.  t_i + d_i <= t_j ;  t_j + d_j <= t_i + 1.
            m.le(&[(ti, 1.0), (tj, -1.0), (y, 2.0)], 2.0 - d[i]);
            m.le(&[(tj, 1.0), (ti, -1.0), (y, 2.0)], 3.0 - d[j]);
            // y = 0: j then i.  t_j + d_j <= t_i ;  t_i + d_i <= t_j + 1.
            m.le(&[(tj, 1.0), (ti, -1.0), (y, -2.0)], -d[j]);
            m.le(&[(ti, 1.0), (tj, -1.0), (y, -2.0)], 1.0 - d[i]);
        }
    }
    // Memory, in units of M.
    let sums = instance.sums();
    let mem = platform.memory;
    for (p, &static_p) in statics.iter().enumerate() {
        let stages: Vec<(usize, usize, usize, f64)> = allocation
            .stages
            .iter()
            .enumerate()
            .filter(|(_, st)| st.processor == p)
            .filter_map(|(s, st)| {
                let stash = sums.stash(st.first, st.last);
                let f = graph.find(pipeopt::model::OpId {
                    kind: OpKind::F,
                    stage: s,
                })?;
                let b = graph.find(pipeopt::model::OpId {
                    kind: OpKind::B,
                    stage: s,
                })?;
                (stash > 0.0).then_some((s, f, b, stash / mem))
            })
            .collect();
        if stages.is_empty() {
            continue;
        }
        // r_s = t_B + d_B - w_s in [0, 1].
        let mut r = Vec::new();
        let mut w = Vec::new();
        for &(_, _, b, _) in &stages {
            let rs = m.continuous(0.0, 0.0, 1.0);
            let ws = m.binary(0.0);
            m.row(d[b], d[b], &[(rs, 1.0), (cols.t[b], -1.0), (ws, 1.0)]);
            r.push(rs);
            w.push(ws);
        }
        let cap = (mem - static_p) / mem;
        for (e, &(_, fe, _, _)) in stages.iter().enumerate() {
            // Memory at tau = t_{F_e}.
            let tau = cols.t[fe];
            let mut terms: Vec<(Var, f64)> = Vec::new();
            let mut constant = 0.0;
            for (k, &(_, fk, bk, sigma)) in stages.iter().enumerate() {
                // [tau >= t_{F_k}] <= a.
                if k == e {
                    constant += sigma;
                } else {
                    let a = m.binary(0.0);
                    // a = 0  =>  tau + margin <= t_{F_k}.
                    m.le(&[(tau, 1.0), (cols.t[fk], -1.0), (a, -2.0)], -MARGIN);
                    terms.push((a, sigma));
                }
                // c <= [tau >= r_k].
                let c = m.binary(0.0);
                m.le(&[(r[k], 1.0), (tau, -1.0), (c, 1.0)], 1.0);
                terms.push((c, -sigma));
                terms.push((w[k], sigma));
                terms.push((cols.h[bk], sigma));
                terms.push((cols.h[fk], -sigma));
            }
            m.le(&terms, cap - constant);
        }
    }
    // The first operation of the chain has shift 0.
    m.row(0.0, 0.0, &[(cols.h[order[0]], 1.0)]);
    m
}

/// The order-binary formulation's answer at `period`: `Some(true)` a pattern exists.
fn order_binary_feasible(
    inst: &Instance,
    platform: &Platform,
    a: &Allocation,
    period: f64,
) -> Option<bool> {
    let graph = BatchGraph::new(inst, platform, a);
    let order = graph.chain_order().unwrap();
    let statics = static_memory(inst, platform, a);
    if statics.iter().any(|&s| s > platform.memory) {
        return Some(false);
    }
    let model = feasibility(inst, platform, a, &graph, &order, &statics, period);
    match model.solve(&MilpOptions::default(), None).unwrap().status {
        SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => Some(true),
        SolveStatus::Infeasible => Some(false),
        SolveStatus::NoSolutionWithinLimit => None,
    }
}

/// The pair formulation's answer at `period`, its pattern judged.
fn pair_feasible(
    inst: &Instance,
    platform: &Platform,
    a: &Allocation,
    period: f64,
) -> Option<bool> {
    let Some(milp) = PatternMilp::new(inst, platform, a, period, &Scope::default()) else {
        return Some(false);
    };
    let r = milp.model.solve(&MilpOptions::default(), None).unwrap();
    match r.status {
        SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => {
            let (alloc, pattern) = milp.decoder.decode(&r.values);
            let j = judge(inst, platform, &alloc, &pattern);
            assert!(j.valid, "{:?}", j.violations);
            Some(true)
        }
        SolveStatus::Infeasible => Some(false),
        SolveStatus::NoSolutionWithinLimit => None,
    }
}

/// A pseudo-random allocation of `l` layers on `p` processors, a stage per layer (several
/// stages per processor).
fn random_allocation(seed: u64, l: usize, p: usize) -> Allocation {
    let mut x = seed.wrapping_mul(2654435761) ^ 0x9e37;
    let stages: Vec<Stage> = (1..=l)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            Stage {
                first: i,
                last: i,
                processor: if i == 1 {
                    0
                } else {
                    ((x >> 33) % p as u64) as usize
                },
            }
        })
        .collect();
    Allocation::new(stages)
}

fn compare(seeds: std::ops::Range<u64>) {
    let mut verdicts = [0usize; 2];
    for seed in seeds {
        let l = 3 + (seed as usize % 4);
        let inst = random_chain(seed, l);
        let full = one_processor_memory(&inst);
        let p = 2 + (seed as usize % 2);
        let share = [0.5, 0.7, 1.0][seed as usize % 3];
        let platform = Platform::new(p, share * full, 1.0 + (seed % 3) as f64);
        let a = random_allocation(seed, l, p);
        let sequential: f64 = inst.layers.iter().map(|l| l.fwd + l.bwd).sum();
        for factor in [0.3, 0.45, 0.6, 0.8, 1.0, 1.3] {
            let period = sequential * factor;
            let ours = pair_feasible(&inst, &platform, &a, period).expect("no limit");
            let theirs = order_binary_feasible(&inst, &platform, &a, period).expect("no limit");
            assert_eq!(ours, theirs, "seed {seed}, period {period}: {a:?}");
            verdicts[usize::from(ours)] += 1;
        }
    }
    // Both verdicts must occur, or the comparison says little.
    assert!(verdicts[0] > 0 && verdicts[1] > 0, "{verdicts:?}");
}

/// At a fixed period, the least memory with a pattern, found by bisection with the
/// order-binary formulation: just above it the pair formulation must find a pattern, just
/// below it none. This is where a row that holds for every pattern only on average (the
/// pair formulation's average memory) or a bound derived from the chain would show if it
/// cut off a pattern, or if a memory row were missing.
#[test]
fn the_pair_formulation_agrees_at_the_memory_threshold() {
    let mut checked = 0;
    for seed in 0..10u64 {
        let l = 3 + (seed as usize % 4);
        let inst = random_chain(seed, l);
        let full = one_processor_memory(&inst);
        let p = 2 + (seed as usize % 2);
        let bandwidth = 1.0 + (seed % 3) as f64;
        let a = random_allocation(seed, l, p);
        let sequential: f64 = inst.layers.iter().map(|l| l.fwd + l.bwd).sum();
        for factor in [0.8, 1.3] {
            let period = sequential * factor;
            let at = |memory: f64| Platform::new(p, memory, bandwidth);
            let (mut lo, mut hi) = (0.0, 4.0 * full);
            if order_binary_feasible(&inst, &at(hi), &a, period) != Some(true) {
                continue; // no pattern at this period whatever the memory
            }
            while hi - lo > 2e-3 * full {
                let mid = 0.5 * (lo + hi);
                if order_binary_feasible(&inst, &at(mid), &a, period).expect("no limit") {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            let above = pair_feasible(&inst, &at(hi), &a, period).expect("no limit");
            let below = pair_feasible(&inst, &at(lo), &a, period).expect("no limit");
            assert!(
                above && !below,
                "seed {seed}, period {period}: memory threshold in [{lo}, {hi}], the pair \
                 formulation says {below} below it and {above} above it: {a:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} thresholds checked");
}

#[test]
fn the_pair_formulation_agrees_with_the_order_binary_one() {
    compare(0..12);
}

/// The same on more chains. Slow tier: `test.sh` runs it once (`cargo test -- --ignored`).
#[test]
#[ignore = "slow tier: test.sh runs it with --ignored"]
fn the_pair_formulation_agrees_with_the_order_binary_one_on_more_chains() {
    compare(12..60);
}
