//! One processor's memory facts over the stage structures of its runs (docs/bounds.md,
//! "Stage structures"): each run cut into stages in the way that needs least, a stage
//! holding its whole stash (`ChainSums::stash`, each shared tensor once) over its own
//! window, which the period may lengthen by the waits of the stage's forward and backward.
//! The per-layer facts of `relaxation` hold whatever the stages; these take the stages'
//! whole stashes and their waits, which a layer alone does not see on op-level chains.

use super::{ceil_copies, clear_of, floor_copies, ChainWindows, Holding, Relaxation};

/// The instants at which a check counts a processor's stashes, at most: the forward start
/// of the stage of each run's first layer, and of layers spread evenly over the rest. Any
/// subset of the instants gives a valid fact; each costs a dynamic program per run.
const MAX_INSTANTS: usize = 24;

/// A run's candidate stages `k..=m` (0-based, inclusive): the stash each keeps for one
/// batch and its least window at the period.
struct RunStages {
    first: usize,
    len: usize,
    /// `stash[a * len + b]`, `window[a * len + b]`: the stage of the run's layers
    /// `first + a ..= first + b` (`a <= b`).
    stash: Vec<f64>,
    window: Vec<f64>,
}

impl RunStages {
    fn new(
        relax: &Relaxation,
        (first, last): (usize, usize),
        period: f64,
        chain: &ChainWindows,
        waited: bool,
    ) -> RunStages {
        let len = last - first + 1;
        let tol = relax.slack * period;
        let mut stash = vec![0.0; len * len];
        let mut window = vec![0.0; len * len];
        for a in 0..len {
            let k = first + a;
            let from_k = relax.suffix(k) + 2.0 * chain.down[k] + chain.waits[k];
            for b in a..len {
                let m = first + b;
                stash[a * len + b] = relax.sums.stash(k + 1, m + 1).max(0.0);
                // The stage's backward ends with layer k's; it starts no sooner than its
                // forward's end plus the least time from layer m's forward to its backward,
                // and where the period leaves room after its forward and before its next one.
                let mut w = from_k;
                if waited && b > a && period.is_finite() {
                    let fwd = relax.suffix_f[k] - relax.suffix_f[m + 1];
                    let bwd = relax.suffix_b[k] - relax.suffix_b[m + 1];
                    let from_m = relax.suffix(m) + 2.0 * chain.down[m] + chain.waits[m];
                    let start = (from_k - bwd).max(fwd - relax.fwd[m] + from_m - relax.bwd[m]);
                    w = w.max(clear_of(start, fwd, bwd, period, tol) + bwd);
                }
                window[a * len + b] = w;
            }
        }
        RunStages {
            first,
            len,
            stash,
            window,
        }
    }

    /// The least over the run's stage structures of the sum of `cost(a, b, stash, window)`
    /// over its stages: a dynamic program over where each stage ends.
    fn least(&self, cost: impl Fn(usize, usize, f64, f64) -> f64) -> f64 {
        let len = self.len;
        let mut best = vec![f64::INFINITY; len + 1];
        best[0] = 0.0;
        for end in 1..=len {
            let b = end - 1;
            for a in 0..end {
                let i = a * len + b;
                let (k, m) = (self.first + a, self.first + b);
                let c = best[a] + cost(k, m, self.stash[i], self.window[i]);
                if c < best[end] {
                    best[end] = c;
                }
            }
        }
        best[len]
    }
}

impl Relaxation {
    /// Whether the runs of `h`, each cut into stages in the way that needs least, can meet
    /// the average-memory fact (at a finite `period`) and the memory fact at each of up to
    /// [`MAX_INSTANTS`] forward starts (at an infinite one, each stage that started holds
    /// one batch), on top of `fixed` (weights and buffers). With `waited`, a stage's window
    /// includes the waits its own forward and backward force.
    pub(in crate::milp::global_bound) fn stages_fit(
        &self,
        h: &Holding,
        period: f64,
        chain: &ChainWindows,
        fixed: f64,
        waited: bool,
    ) -> bool {
        let cap_mem = self.memory * (1.0 + self.slack);
        let runs: Vec<RunStages> = h
            .runs
            .iter()
            .map(|&r| RunStages::new(self, r, period, chain, waited))
            .collect();
        if period.is_finite() {
            let average: f64 = runs
                .iter()
                .map(|r| r.least(|_, _, stash, window| stash * window / period))
                .sum();
            if fixed + average > cap_mem {
                return false;
            }
        }
        instants(h).into_iter().all(|i| {
            let at = self.suffix_f[i] + chain.down[i] + chain.waits[i];
            let need: f64 = runs
                .iter()
                .map(|r| {
                    r.least(|k, m, stash, window| {
                        let always = floor_copies(window, period, self.slack);
                        let copies = if k <= i {
                            let to_backward = at + self.suffix_b[k] + chain.down[k];
                            let held = always.max(ceil_copies(to_backward, period, self.slack));
                            if i <= m {
                                // The instant is this stage's own forward start.
                                held.max(ceil_copies(window, period, self.slack))
                            } else {
                                held
                            }
                        } else {
                            always
                        };
                        stash * copies
                    })
                })
                .sum();
            fixed + need <= cap_mem
        })
    }
}

/// The layers of `h` at whose stage's forward start [`Relaxation::stages_fit`] counts: each
/// run's first layer, its last layer, and layers spread evenly over the others, at most
/// [`MAX_INSTANTS`] but for the runs' first layers.
fn instants(h: &Holding) -> Vec<usize> {
    // The last layer: every stage has started its batch there (at an infinite period, or
    // one as long as the chain, the instant that holds most).
    let mut chosen: Vec<usize> = h.runs.iter().map(|r| r.0).collect();
    chosen.extend(h.runs.last().map(|r| r.1));
    let layers: Vec<usize> = h.runs.iter().flat_map(|&(f, l)| f + 1..=l).collect();
    let room = MAX_INSTANTS.saturating_sub(chosen.len());
    if room > 0 && !layers.is_empty() {
        let step = layers.len().div_ceil(room);
        chosen.extend(layers.iter().step_by(step.max(1)).copied());
    }
    chosen.sort_unstable();
    chosen.dedup();
    chosen
}
