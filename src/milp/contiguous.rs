//! The contiguous optimum the contiguous allocation (at most one
//! stage per processor, stage `i` on processor `i`) whose best periodic pattern has the
//! smallest period, with that pattern.
//!
//! By Proposition 1 of MadPipe (Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware
//! Dynamic Programming Algorithm for Pipelined Model Parallelism*, ScaDL 2022, section
//! 4.1), 1F1B* is memory-optimal for a contiguous
//! allocation at a given period, so the best pattern of a contiguous partition is 1F1B* at
//! its smallest period fitting memory (our fixed-allocation MILP confirms it on small chains: see
//! tests/milp.rs). No MILP is needed; two exact searches find the optimum:
//!
//! 1. **A dynamic program over the period** ([`dp_feasible`]). At a fixed period `T`, 1F1B*
//!    groups the chain of elements (stages and links) greedily from its end, and a stage of
//!    group `g` holds `g` live batches (MadPipe's `M(k, l, g)`). Building partitions from the
//!    last layer backwards, the greedy state after a suffix is the pair (group, load of the
//!    current group), and a lexicographically smaller state gives every element further
//!    left a group no larger (the proof is two cases of next-fit; see [`State`]). So the
//!    smallest state per (first layer of the suffix, stages used) decides feasibility
//!    exactly in `O(L^2 P)`. Feasibility is monotone in `T` (next-fit with a larger
//!    capacity never uses a later group), so bisection down to adjacent floating-point
//!    numbers finds the smallest feasible period, which is then exactly the 1F1B* period
//!    of the partition found (`min_period_fitting`). Milliseconds on every committed
//!    instance, where the branch and bound below needed over 10 s for DenseNet-121 and
//!    ResNet-101 at 6-8 processors.
//! 2. **A depth-first branch and bound** over the partitions into at most `P` stages, the
//!    fallback when the judge (the reference) rejects the program's plan at its predicted
//!    period: a partial partition is pruned when the largest load of its elements (a
//!    stage's `U`, a cut's `2 a / beta`, both lower bounds on 1F1B*'s period), or the
//!    average load `U(rest) / (processors left)` of the rest of the chain, already reaches
//!    the incumbent, or when one of its stages cannot hold even its weights, buffers and
//!    one live batch. It starts from the program's optimum as its lower bound.
//!
//! Where ours departs: this is a dynamic program and an enumeration, not a MILP; the
//! bound is the optimum itself when the search completes, else (time limit in the fallback)
//! the program's period, which no contiguous plan can beat under the memory formula the
//! judge never undercuts (see [`ContiguousOutcome::lower_bound`]).
//!
//! **Full-duplex links.** Proposition 1 holds for half-duplex links, where a cut's forward
//! and backward transfers share one resource (`2 a / beta` per period, as 1F1B* charges
//! it). With `full_duplex` they run on two resources (`a / beta` each, as the judge and
//! `model::bounds` read the platform), and a pattern other than 1F1B* may overlap them and
//! beat it (ResNet-50 at 8 processors and 12 GB/s: 64.7 ms for the scheduling MILP's
//! pattern of a contiguous partition against 77.9 ms for the best 1F1B*). There the planner
//! still returns the best 1F1B* plan (valid either way) but claims no bound of its own:
//! only the instance's bounds, which read the duplex mode, are reported.

use std::time::{Duration, Instant};

use crate::judge::judge;
use crate::model::{Allocation, ChainSums, Instance, Pattern, Platform};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::schedule::one_f_one_b_star::{
    candidate_periods, elements, min_period_fitting, one_f_one_b_star,
};
use crate::units::Seconds;

/// Result of [`contiguous_optimum`].
#[derive(Debug, Clone, PartialEq)]
pub struct ContiguousOutcome {
    /// Best allocation and its 1F1B* pattern, `None` when no contiguous allocation fits.
    pub best: Option<(Allocation, Pattern)>,
    /// A proven lower bound on the optimal contiguous period: the optimum itself when the
    /// search completed, otherwise the largest of the average load per processor and the
    /// heaviest layer.
    pub lower_bound: Seconds,
    /// False when the time limit stopped the search.
    pub complete: bool,
    /// Complete partitions evaluated with 1F1B*.
    pub leaves: u64,
}

/// Exact best contiguous allocation and pattern (module docs).
pub fn contiguous_optimum(
    instance: &Instance,
    platform: &Platform,
    time_limit: Option<Duration>,
) -> crate::error::Result<ContiguousOutcome> {
    instance.check()?;
    platform.check()?;
    let sums = instance.sums();
    let l = instance.len();
    let p = platform.processors;
    let u_max = (1..=l).map(|i| sums.u(i, i)).fold(0.0, f64::max);
    let simple_bound = (sums.u(1, l) / p as f64).max(u_max);

    // 1. The dynamic program's optimum under MadPipe's memory formula.
    let Some((dp_period, lasts)) = dp_optimum(instance, platform) else {
        return Ok(ContiguousOutcome {
            best: None,
            lower_bound: simple_bound,
            complete: true,
            leaves: 0,
        });
    };
    let allocation = Allocation::from_boundaries(&lasts);
    if let Ok(r) = min_period_fitting(instance, platform, &allocation) {
        if r.pattern.period <= dp_period && judge(instance, platform, &allocation, &r.pattern).valid
        {
            return Ok(ContiguousOutcome {
                lower_bound: r.pattern.period,
                best: Some((allocation, r.pattern)),
                complete: true,
                leaves: 1,
            });
        }
    }

    // 2. The judge rejected it: the branch and bound, above the program's bound.
    let mut search = Search {
        instance,
        platform,
        sums: &sums,
        deadline: time_limit.map(|d| Instant::now() + d),
        best: None,
        best_period: f64::INFINITY,
        stopped: false,
        leaves: 0,
        lasts: Vec::with_capacity(p),
    };
    search.dfs(1, 0.0);
    let floor = simple_bound.max(dp_period);
    let lower_bound = if search.stopped {
        floor.min(search.best_period)
    } else {
        search.best_period.max(floor)
    };
    Ok(ContiguousOutcome {
        best: search.best,
        lower_bound: if lower_bound.is_finite() {
            lower_bound
        } else {
            floor
        },
        complete: !search.stopped,
        leaves: search.leaves,
    })
}

/// The greedy grouping state of 1F1B* after a suffix of the chain (module docs, item 1):
/// the group of the leftmost element placed (1 = the group of the last element) and the
/// load already in that group. Smaller is better, lexicographically: adding an element of
/// load `x` to `(g, a)` and to `(g', a')` with `(g, a) <= (g', a')` keeps the order (if
/// `g < g'`, the first moves at most to `(g + 1, x) <= (g', a' + x)`; if `g = g'` and
/// `a <= a'`, it stays whenever the second stays, with `a + x <= a' + x`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct State {
    group: usize,
    load: f64,
}

impl State {
    fn better_than(&self, other: &State) -> bool {
        (self.group, self.load) < (other.group, other.load)
    }

    /// Next-fit with capacity `t`, as [`groups`](crate::schedule::one_f_one_b_star::groups)
    /// (same additions in the same order, so candidate periods reproduce exactly).
    fn add(self, load: f64, t: f64) -> Option<State> {
        if load > t {
            None
        } else if self.load + load <= t {
            Some(State {
                group: self.group,
                load: self.load + load,
            })
        } else {
            Some(State {
                group: self.group + 1,
                load,
            })
        }
    }
}

/// Whether some partition into at most `P` stages has a 1F1B* pattern of period `t` that
/// fits memory by MadPipe's formula; if so, the last layer of each stage of one of them.
pub fn dp_feasible(instance: &Instance, platform: &Platform, t: Seconds) -> Option<Vec<usize>> {
    let sums = instance.sums();
    let l = instance.len();
    let p_n = platform.processors;
    let limit = platform.memory * (1.0 + 1e-12);
    // best[i][k]: smallest state after stages covering layers i..=L with k stages;
    // next[i][k]: the first layer after the stage starting at i.
    let mut best: Vec<Vec<Option<State>>> = vec![vec![None; p_n + 1]; l + 2];
    let mut next = vec![vec![0usize; p_n + 1]; l + 2];
    best[l + 1][0] = Some(State {
        group: 1,
        load: 0.0,
    });
    for i in (2..=l + 1).rev() {
        for k in 0..p_n {
            let Some(state) = best[i][k] else { continue };
            // The link after the stage ending at i - 1 (none after the last stage).
            let state = if i <= l {
                match state.add(2.0 * sums.a(i - 1) / platform.bandwidth, t) {
                    Some(s) => s,
                    None => continue,
                }
            } else {
                state
            };
            // Stages j..=i-1 (a state with P stages not reaching layer 1 is never extended).
            let last = i - 1;
            for j in (1..i).rev() {
                let Some(s) = state.add(sums.u(j, last), t) else {
                    // Longer stages only get heavier.
                    break;
                };
                if sums.stage_memory(j, last, s.group as f64) > limit {
                    continue;
                }
                if best[j][k + 1].is_none_or(|b| s.better_than(&b)) {
                    best[j][k + 1] = Some(s);
                    next[j][k + 1] = i;
                }
            }
        }
    }
    let k = (1..=p_n).find(|&k| best[1][k].is_some())?;
    let mut lasts = Vec::with_capacity(k);
    let (mut i, mut k) = (1, k);
    while i <= l {
        let after = next[i][k];
        lasts.push(after - 1);
        i = after;
        k -= 1;
    }
    Some(lasts)
}

/// The smallest period at which [`dp_feasible`] holds, with its partition: bisection down
/// to adjacent floating-point numbers from the sequential period (every layer and link
/// back to back: everything is in group 1, the least memory). `None` when even that
/// period does not fit.
pub fn dp_optimum(instance: &Instance, platform: &Platform) -> Option<(Seconds, Vec<usize>)> {
    let sums = instance.sums();
    let l = instance.len();
    let links: f64 = (1..l).map(|c| 2.0 * sums.a(c) / platform.bandwidth).sum();
    let mut hi = (sums.u(1, l) + links) * (1.0 + 1e-9);
    let mut found = dp_feasible(instance, platform, hi)?;
    let mut lo = 0.0;
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        match dp_feasible(instance, platform, mid) {
            Some(lasts) => {
                hi = mid;
                found = lasts;
            }
            None => lo = mid,
        }
    }
    Some((hi, found))
}

struct Search<'a> {
    instance: &'a Instance,
    platform: &'a Platform,
    sums: &'a ChainSums,
    deadline: Option<Instant>,
    best: Option<(Allocation, Pattern)>,
    best_period: f64,
    stopped: bool,
    leaves: u64,
    lasts: Vec<usize>,
}

impl Search<'_> {
    fn stage_fits(&self, first: usize, last: usize) -> bool {
        self.sums.stage_memory(first, last, 1.0) <= self.platform.memory * (1.0 + 1e-12)
    }

    /// Extends the partial partition whose next stage starts at layer `first`.
    fn dfs(&mut self, first: usize, max_load: f64) {
        if self.stopped {
            return;
        }
        let l = self.instance.len();
        let used = self.lasts.len();
        let left = self.platform.processors - used;
        if left == 0 {
            return;
        }
        let rest = self.sums.u(first, l);
        if max_load.max(rest / left as f64) >= self.best_period {
            return;
        }
        // Candidate ends, the most balanced first.
        let target = rest / left as f64;
        let mut ends: Vec<usize> = if left == 1 {
            vec![l]
        } else {
            (first..=l).collect()
        };
        ends.sort_by(|&a, &b| {
            (self.sums.u(first, a) - target)
                .abs()
                .total_cmp(&(self.sums.u(first, b) - target).abs())
        });
        for last in ends {
            if let Some(d) = self.deadline {
                if Instant::now() >= d {
                    self.stopped = true;
                    return;
                }
            }
            let mut load = max_load.max(self.sums.u(first, last));
            if last < l {
                load = load.max(2.0 * self.sums.a(last) / self.platform.bandwidth);
            }
            if load >= self.best_period || !self.stage_fits(first, last) {
                continue;
            }
            self.lasts.push(last);
            if last == l {
                self.leaf();
            } else {
                self.dfs(last + 1, load);
            }
            self.lasts.pop();
        }
    }

    fn leaf(&mut self) {
        self.leaves += 1;
        let allocation = Allocation::from_boundaries(&self.lasts);
        if let Some(pattern) = judged_one_f_one_b_star(self.instance, self.platform, &allocation) {
            if pattern.period < self.best_period {
                self.best_period = pattern.period;
                self.best = Some((allocation, pattern));
            }
        }
    }
}

/// The smallest-period 1F1B* pattern of a contiguous allocation that the judge accepts:
/// `min_period_fitting`'s when valid, otherwise the next candidate periods in increasing
/// order (a guard: `min_period_fitting` predicts memory with MadPipe's formula, and the
/// judge is the reference; see the report on the case where they disagreed).
pub fn judged_one_f_one_b_star(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
) -> Option<Pattern> {
    let r = min_period_fitting(instance, platform, allocation).ok()?;
    if judge(instance, platform, allocation, &r.pattern).valid {
        return Some(r.pattern);
    }
    let el = elements(instance, platform, allocation);
    candidate_periods(&el)
        .into_iter()
        .filter(|&t| t > r.pattern.period)
        .filter_map(|t| one_f_one_b_star(instance, platform, allocation, t).ok())
        .find(|x| judge(instance, platform, allocation, &x.pattern).valid)
        .map(|x| x.pattern)
}

/// The `contiguous-opt` algorithm: [`contiguous_optimum`] as a planner.
#[derive(Debug, Clone, Default)]
pub struct ContiguousOptPlanner {
    pub time_limit: Option<Duration>,
}

/// The options of `contiguous-opt`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContiguousOptOptions {
    /// Wall-clock limit of the solver (`--time-limit`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// HiGHS threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

impl AlgorithmOptions for ContiguousOptOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        let milp = crate::milp::MilpOptions::from_limits(self.time_limit, self.threads)?;
        Ok(Box::new(ContiguousOptPlanner {
            time_limit: milp.time_limit,
        }))
    }
}

impl Planner for ContiguousOptPlanner {
    fn name(&self) -> String {
        "contiguous-opt".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.check_milp_range()?;
        let r = contiguous_optimum(problem.instance, problem.platform, self.time_limit)?;
        match r.best {
            None if r.complete => Ok(Outcome::Infeasible {
                reason: "no contiguous allocation fits in memory".into(),
                lower_bound: None,
            }),
            None => Ok(Outcome::NoPlanWithinLimit {
                reason: "the time limit stopped the search before any contiguous allocation \
                         was found to fit"
                    .into(),
                lower_bound: (!problem.platform.full_duplex).then_some(r.lower_bound),
            }),
            Some((allocation, pattern)) => {
                let mut sol = Solution::new(allocation, Some(pattern));
                // Proposition 1 (1F1B* is optimal) needs half-duplex links: see the module
                // documentation.
                sol.lower_bound = (!problem.platform.full_duplex).then_some(r.lower_bound);
                sol.stopped_at_limit = !r.complete;
                Ok(Outcome::Found(sol))
            }
        }
    }
}
