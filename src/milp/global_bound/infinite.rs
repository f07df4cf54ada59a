//! The relaxation at an infinite period, decided by a combinatorial search: the proof that
//! no plan of a case fits at any period, without a MILP.
//!
//! At an infinite period the relaxation of the parent module asks only whether some
//! assignment lets every processor hold one batch of each of its layers
//! ([`Relaxation::holding_fits`] at an infinite period; waits, loads and averages vanish).
//! A processor's need is then a sum over its *runs* (maximal ranges of consecutive layers
//! it holds): three copies of the run's weights, two buffers of the activation on each
//! side where the run meets another processor, the whole stash of the run's first layer,
//! and for every other layer the smaller of its whole stash and its marginal. So the
//! question is a bin packing: cut the chain into runs, each with the cost [`Packing::cost`],
//! and pack the runs into `P` processors of capacity `M`.
//!
//! Two adjacent runs packed on one processor cost more than the single run they form (a
//! whole stash instead of a marginal, and four buffers), so the search ignores adjacency:
//! any packing it finds becomes, by merging, an assignment whose runs cost no more; and
//! when it finds none, no assignment fits.
//!
//! The search places runs in chain order, each on a processor with room. It prunes with
//! - the least total cost of covering the rest of the chain by runs (a dynamic program over
//!   the chain) against the room left on the processors that can still take a run;
//! - processors with equal loads, tried once (processors are identical);
//! - states dominated by one that already failed: at the same layer, every load (sorted)
//!   at least as high as the failed state's.
//!
//! It is exact: "infeasible" only when every packing was excluded. A deadline makes it
//! undecided, and the caller falls back to the relaxation MILP.

use std::collections::HashMap;
use std::time::Instant;

use super::anneal::canonical;
use super::relaxation::Relaxation;

/// What the search proved at an infinite period.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// No assignment lets every processor hold one batch of each of its layers.
    Infeasible,
    /// An assignment that does (processor of each layer, labelled by first appearance).
    Feasible(Vec<usize>),
    /// The deadline came first.
    Undecided,
}

/// The run costs of one case, and the search's bounds.
pub struct Packing {
    layers: usize,
    processors: usize,
    /// `M (1 + slack)`: the capacity the relaxation allows.
    capacity: f64,
    /// `cost[k][m - k]`: what a run of layers `k..=m` (0-based) needs on its processor;
    /// infinite beyond the capacity.
    cost: Vec<Vec<f64>>,
    /// The least total cost of covering layers `k..` by runs, each within the capacity
    /// (a run starting at `k > 0` meets another processor before it); infinite when no
    /// cover exists.
    least_rest: Vec<f64>,
    /// The cost of the cheapest run that starts at `k` or later.
    least_run: Vec<f64>,
}

/// A run `k..=m` cut into stages in the way that keeps least at an infinite period, where
/// each stage holds one batch of its whole stash (docs/bounds.md, "Stage structures"), grown
/// one layer at a time: a dynamic program over where the last stage starts. A stage whose
/// first layer has no backward after it (a tail that takes no time) may hold none; it is
/// charged the per-layer charges instead, so that a run's charge is never below them and
/// never above them for such a tail.
struct StagedRun {
    first: usize,
    /// `charges[j + 1] - charges[i]`: the per-layer charges of layers `i..=j` after a
    /// stage's first layer (`min(own, marginal)` each).
    charges: Vec<f64>,
    /// `least[a - first]`: the least charge of layers `first..a` (stages ending at `a - 1`).
    least: Vec<f64>,
    /// What the run keeps besides stashes: three copies of its weights and the buffers of
    /// the cut before it.
    fixed: f64,
}

impl StagedRun {
    fn new(relax: &Relaxation, first: usize) -> StagedRun {
        let fixed = if first > 0 {
            2.0 * relax.out[first - 1]
        } else {
            0.0
        };
        let mut charges = vec![0.0; relax.layers + 1];
        for j in 0..relax.layers {
            charges[j + 1] = charges[j] + relax.own[j].min(relax.stash[j]).max(0.0);
        }
        StagedRun {
            first,
            charges,
            least: vec![0.0],
            fixed,
        }
    }

    /// Adds layer `m` (the next one) and returns what the run `first..=m` keeps at least,
    /// the buffers of the cut after it aside.
    fn extend(&mut self, relax: &Relaxation, m: usize) -> f64 {
        self.fixed += 3.0 * relax.weights[m];
        // The per-layer charges of `a..=m`: the whole stash of the run's first layer, the
        // lesser of the whole and the marginal of any other.
        let first = self.first;
        let per_layer = |a: usize| {
            let start = if a == first {
                relax.own[a].max(0.0)
            } else {
                self.charges[a + 1] - self.charges[a]
            };
            start + self.charges[m + 1] - self.charges[a + 1]
        };
        let best = (self.first..=m)
            .map(|a| {
                let stage = if relax.suffix_b[a] > 0.0 {
                    relax.sums.stash(a + 1, m + 1).max(per_layer(a))
                } else {
                    per_layer(a)
                };
                self.least[a - self.first] + stage
            })
            .fold(f64::INFINITY, f64::min);
        self.least.push(best);
        self.fixed + best
    }
}

impl Packing {
    pub fn new(relax: &Relaxation) -> Self {
        let n = relax.layers;
        let capacity = relax.memory * (1.0 + relax.slack);
        let mut cost = Vec::with_capacity(n);
        for k in 0..n {
            let mut row = Vec::new();
            // What the run keeps whatever its end: weights and stashes so far, and the
            // buffers of the cut before it.
            let mut kept = if k > 0 { 2.0 * relax.out[k - 1] } else { 0.0 };
            let mut stages = relax.stage_facts.then(|| StagedRun::new(relax, k));
            for m in k..n {
                kept += 3.0 * relax.weights[m];
                if relax.own[m] > 0.0 {
                    kept += if m == k {
                        relax.own[m]
                    } else {
                        relax.own[m].min(relax.stash[m])
                    };
                }
                if kept > capacity {
                    // Every longer run keeps at least as much.
                    break;
                }
                let after = if m + 1 < n { 2.0 * relax.out[m] } else { 0.0 };
                let staged = match stages.as_mut() {
                    Some(s) => s.extend(relax, m) + after,
                    None => 0.0,
                };
                let c = (kept + after).max(staged);
                row.push(if c > capacity { f64::INFINITY } else { c });
            }
            cost.push(row);
        }
        let mut least_rest = vec![f64::INFINITY; n + 1];
        least_rest[n] = 0.0;
        let mut least_run = vec![f64::INFINITY; n + 1];
        for k in (0..n).rev() {
            let mut best = f64::INFINITY;
            let mut cheapest = least_run[k + 1];
            for (d, &c) in cost[k].iter().enumerate() {
                best = best.min(c + least_rest[k + d + 1]);
                cheapest = cheapest.min(c);
            }
            least_rest[k] = best;
            least_run[k] = cheapest;
        }
        Packing {
            layers: n,
            processors: relax.processors.min(n).max(1),
            capacity,
            cost,
            least_rest,
            least_run,
        }
    }

    /// What a run of layers `k..=m` needs on its processor (infinite beyond the capacity).
    pub fn cost(&self, k: usize, m: usize) -> f64 {
        self.cost[k].get(m - k).copied().unwrap_or(f64::INFINITY)
    }

    /// Searches for a packing until `deadline`.
    pub fn decide(&self, deadline: Option<Instant>) -> Answer {
        if !self.least_rest[0].is_finite() {
            return Answer::Infeasible;
        }
        let mut search = Search {
            packing: self,
            deadline,
            loads: vec![0.0; self.processors],
            runs: Vec::new(),
            failed: HashMap::new(),
            nodes: 0,
            out_of_time: false,
        };
        if search.place(0) {
            let mut assignment = vec![0; self.layers];
            for &(k, m, p) in &search.runs {
                assignment[k..=m].iter_mut().for_each(|a| *a = p);
            }
            Answer::Feasible(canonical(&assignment))
        } else if search.out_of_time {
            Answer::Undecided
        } else {
            Answer::Infeasible
        }
    }
}

struct Search<'a> {
    packing: &'a Packing,
    deadline: Option<Instant>,
    loads: Vec<f64>,
    /// The runs placed so far: first layer, last layer, processor.
    runs: Vec<(usize, usize, usize)>,
    /// Sorted loads of the states that failed, per first layer still to place.
    failed: HashMap<usize, Vec<Vec<f64>>>,
    nodes: u64,
    out_of_time: bool,
}

impl Search<'_> {
    /// Whether layers `k..` can be packed on top of the current loads.
    fn place(&mut self, k: usize) -> bool {
        let p = self.packing;
        if k == p.layers {
            return true;
        }
        self.nodes += 1;
        if self.nodes & 1023 == 0 && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.out_of_time = true;
        }
        if self.out_of_time {
            return false;
        }
        // Room on the processors that can still take a run, against the least cost of the
        // rest of the chain.
        let room: f64 = self
            .loads
            .iter()
            .map(|&l| p.capacity - l)
            .filter(|&r| r >= p.least_run[k])
            .sum();
        if p.least_rest[k] > room {
            return false;
        }
        let mut sorted = self.loads.clone();
        sorted.sort_by(f64::total_cmp);
        if self.failed.get(&k).is_some_and(|list| {
            list.iter()
                .any(|f| f.iter().zip(&sorted).all(|(f, s)| s >= f))
        }) {
            return false;
        }
        // Longest runs first (fewest buffers), each on the fullest processor it fits.
        let mut order: Vec<usize> = (0..self.loads.len()).collect();
        order.sort_by(|&a, &b| self.loads[b].total_cmp(&self.loads[a]));
        let longest = p.cost[k].len();
        for d in (0..longest).rev() {
            let m = k + d;
            let c = p.cost[k][d];
            if !c.is_finite() {
                continue;
            }
            let mut tried: Vec<f64> = Vec::new();
            for &q in &order {
                let load = self.loads[q];
                if load + c > p.capacity || tried.contains(&load) {
                    continue;
                }
                tried.push(load);
                self.loads[q] += c;
                self.runs.push((k, m, q));
                if self.place(m + 1) {
                    return true;
                }
                self.runs.pop();
                self.loads[q] = load;
                if self.out_of_time {
                    return false;
                }
            }
        }
        self.failed.entry(k).or_default().push(sorted);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::relaxation::{relaxation_fits, Holding};
    use super::*;
    use crate::milp::general::for_each_allocation;
    use crate::model::Platform;
    use crate::nets::random::{one_processor_memory, random_chain};

    fn fits_everywhere(relax: &Relaxation, a: &[usize]) -> bool {
        relaxation_fits(relax, a, f64::INFINITY)
            && (0..relax.processors)
                .filter_map(|p| Holding::of(a, p))
                .all(|h| relax.holding_fits(&h, f64::INFINITY))
    }

    /// The search's answer against every assignment of small random chains, memory from
    /// loose to impossible: "infeasible" exactly when no assignment fits, and every
    /// assignment it returns fits.
    #[test]
    fn agrees_with_exhaustive_search() {
        let mut decided = [0usize; 2];
        for seed in 1..=40u64 {
            let n = 3 + (seed as usize % 5);
            let instance = random_chain(seed, n);
            for procs in [2, 3, 4] {
                for share in [0.15, 0.25, 0.35, 0.5, 0.7] {
                    let platform =
                        Platform::new(procs, share * one_processor_memory(&instance), 6.0);
                    let relax = Relaxation::new(&instance, &platform);
                    let mut any = false;
                    for_each_allocation(n, procs, |a| any |= fits_everywhere(&relax, a));
                    match Packing::new(&relax).decide(None) {
                        Answer::Feasible(a) => {
                            assert!(any);
                            assert!(fits_everywhere(&relax, &a), "seed {seed}: {a:?}");
                            decided[1] += 1;
                        }
                        Answer::Infeasible => {
                            assert!(!any, "seed {seed}, {procs} processors, {share}");
                            decided[0] += 1;
                        }
                        Answer::Undecided => unreachable!("no deadline"),
                    }
                }
            }
        }
        // Both answers occur, so neither direction is checked vacuously.
        assert!(decided[0] > 50 && decided[1] > 50, "{decided:?}");
    }

    #[test]
    fn a_run_costs_what_holding_fits_charges() {
        let instance = random_chain(7, 6);
        let platform = Platform::new(3, one_processor_memory(&instance), 6.0);
        let relax = Relaxation::new(&instance, &platform);
        let packing = Packing::new(&relax);
        // One processor holding layers 1..=3 of six, the rest elsewhere: it fits exactly
        // when the run's cost is within the capacity, at every capacity.
        let c = packing.cost(1, 3);
        assert!(c.is_finite());
        for factor in [0.999, 1.001] {
            let tight = Platform::new(3, c * factor / (1.0 + relax.slack), 6.0);
            let relax = Relaxation::new(&instance, &tight);
            let h = Holding::of(&[0, 1, 1, 1, 2, 2], 1).unwrap();
            assert_eq!(relax.holding_fits(&h, f64::INFINITY), factor > 1.0);
        }
    }
}
