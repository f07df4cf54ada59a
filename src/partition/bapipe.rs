//! BaPipe's balanced partition (Zhao et al., *BaPipe: Exploration of Balanced Pipeline
//! Parallelism for DNN Training*, arXiv 2020, section 3.3) for heterogeneous clusters, and
//! the exact optimum it is compared with.
//!
//! The heuristic (`balanced_heterogeneous`), as in the paper:
//! 1. inter-layer partition (3.3.1): processor n, whose whole-network time is T_n (its speed
//!    factor times the instance's U(1, L)), gets the share of the work that takes
//!    T = 1 / sum(1 / T_n) on it; cuts are placed greedily along the chain at the layer
//!    boundary closest to each share, then boundaries move one layer at a time while the
//!    slowest stage gets faster ("iterates to load balancing");
//! 2. coarse-grained partition on communication (3.3.3): when a cut's transfer 2 a(l)/beta
//!    exceeds T, only cuts whose activation is below the threshold a_th = T beta / 2 are
//!    allowed (layers between two such cuts become one coarse layer) and step 1 reruns;
//! 3. memory fine-tuning: while a stage exceeds its processor's memory (weights 2 W,
//!    stashes of `live` micro-batches), a boundary layer moves to the lighter neighbour.
//!
//! The intra-layer partition (3.3.2, part of a boundary layer moved to the neighbouring
//! accelerator) is `partition::bapipe_intra`, built on step 1's result. Where we depart:
//! the memory rule
//! is the 1F1B one (processor n keeps D - n stashes; `live` gives them). `optimal_heterogeneous`
//! is the exact contiguous min-max (a DP over (processor, layer)), so the heuristic's loss
//! is visible; it ignores communication and memory, like step 1. At equal speeds it is
//! `balanced_partition`, the split of the synchronous pipelines (`sync --stages`, the
//! synchronous sweep, MixPipe's hybrid).

use serde::Serialize;

use crate::model::{ChainSums, Instance};
use crate::schedule::sync::sim::PartitionError;

/// A contiguous partition over processors in chain order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeteroPartition {
    /// 0-based first layer of each stage (stage n on processor n).
    pub starts: Vec<usize>,
    /// Seconds of each stage (forward + backward, times the processor's factor).
    pub stage_seconds: Vec<f64>,
    /// The slowest stage: the pipeline's steady-state time per micro-batch.
    pub bottleneck_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BapipePartitionError {
    #[error("bapipe partition: {0}")]
    Invalid(String),
}

fn check(instance: &Instance, factors: &[f64]) -> Result<(), BapipePartitionError> {
    if factors.is_empty() || factors.len() > instance.len() {
        return Err(BapipePartitionError::Invalid(format!(
            "needs between 1 and L = {} processors, got {}",
            instance.len(),
            factors.len()
        )));
    }
    if let Some(x) = factors.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
        return Err(BapipePartitionError::Invalid(format!(
            "speed factors (time multipliers) must be positive and finite, got {x}"
        )));
    }
    Ok(())
}

fn finish(sums: &ChainSums, factors: &[f64], starts: Vec<usize>) -> HeteroPartition {
    let l = sums.len();
    let stage_seconds: Vec<f64> = starts
        .iter()
        .enumerate()
        .map(|(n, &s)| {
            let last = starts.get(n + 1).copied().unwrap_or(l);
            factors[n] * sums.u(s + 1, last)
        })
        .collect();
    let bottleneck_seconds = stage_seconds.iter().cloned().fold(0.0, f64::max);
    HeteroPartition {
        starts,
        stage_seconds,
        bottleneck_seconds,
    }
}

/// The exact optimum: the contiguous partition over processors in order (processor n runs
/// at `factors[n]` times the profiled time) minimising the slowest stage. O(P L^2).
pub fn optimal_heterogeneous(
    instance: &Instance,
    factors: &[f64],
) -> Result<HeteroPartition, BapipePartitionError> {
    check(instance, factors)?;
    let sums = ChainSums::new(instance);
    let (l, p) = (instance.len(), factors.len());
    // best[n][j]: the best bottleneck of layers 1..=j on processors 0..=n (each non-empty).
    let mut best = vec![vec![f64::INFINITY; l + 1]; p];
    let mut cut = vec![vec![0usize; l + 1]; p];
    for (j, cell) in best[0].iter_mut().enumerate().skip(1) {
        *cell = factors[0] * sums.u(1, j);
    }
    for n in 1..p {
        for j in (n + 1)..=l {
            for i in n..j {
                let v = best[n - 1][i].max(factors[n] * sums.u(i + 1, j));
                if v < best[n][j] {
                    best[n][j] = v;
                    cut[n][j] = i;
                }
            }
        }
    }
    let mut starts = vec![0usize; p];
    let mut j = l;
    for n in (1..p).rev() {
        starts[n] = cut[n][j];
        j = cut[n][j];
    }
    Ok(finish(&sums, factors, starts))
}

/// The contiguous split of the chain into `d` stages on equal processors that minimises the
/// largest stage's forward + backward time ([`optimal_heterogeneous`] at unit factors), as
/// stage starts: the split the synchronous pipelines run on when no partition is given.
pub fn balanced_partition(instance: &Instance, d: usize) -> Result<Vec<usize>, PartitionError> {
    optimal_heterogeneous(instance, &vec![1.0; d])
        .map(|p| p.starts)
        .map_err(|e| PartitionError::Invalid(e.to_string()))
}

/// Platform inputs of the heuristic's later steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HeteroPlatform {
    pub bandwidth_bytes_per_second: f64,
    /// Memory of every processor; `f64::INFINITY` skips the memory step.
    pub memory_bytes: f64,
}

/// The greedy split at shares of T = 1 / sum(1/T_n) over the allowed cuts, then boundary
/// moves while the bottleneck improves.
fn inter_layer(sums: &ChainSums, factors: &[f64], allowed: &[bool]) -> Option<Vec<usize>> {
    let (l, p) = (sums.len(), factors.len());
    let total = sums.u(1, l);
    let t = 1.0 / factors.iter().map(|x| 1.0 / (x * total)).sum::<f64>();
    let mut starts = vec![0usize];
    let mut begin = 0usize;
    for factor in factors.iter().take(p - 1) {
        let n = starts.len();
        // Candidate cuts after layer j (cut at start j), leaving room for the others.
        let target = t / factor;
        let candidates: Vec<usize> = ((begin + 1)..=(l - (p - n)))
            .filter(|&j| allowed[j])
            .collect();
        let j = candidates.into_iter().min_by(|&a, &b| {
            let da = (sums.u(begin + 1, a) - target).abs();
            let db = (sums.u(begin + 1, b) - target).abs();
            da.total_cmp(&db)
        })?;
        starts.push(j);
        begin = j;
    }
    let mut current = finish(sums, factors, starts.clone()).bottleneck_seconds;
    loop {
        let mut improved = false;
        for n in 1..p {
            for delta in [-1i64, 1] {
                let mut s = starts.clone();
                let moved = s[n] as i64 + delta;
                let lo = s[n - 1] as i64;
                let hi = s.get(n + 1).map(|&x| x as i64).unwrap_or(l as i64);
                if moved <= lo || moved >= hi || !allowed[moved as usize] {
                    continue;
                }
                s[n] = moved as usize;
                let v = finish(sums, factors, s.clone()).bottleneck_seconds;
                if v < current - 1e-15 * current.abs() {
                    current = v;
                    starts = s;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    Some(starts)
}

/// Memory of stage n under 1F1B: 2 W + (P - n) stashes.
fn stage_memory(sums: &ChainSums, starts: &[usize], n: usize) -> f64 {
    let l = sums.len();
    let last = starts.get(n + 1).copied().unwrap_or(l);
    let live = (starts.len() - n) as f64;
    2.0 * sums.weights(starts[n] + 1, last) + live * sums.stash(starts[n] + 1, last)
}

/// BaPipe's heuristic partition (steps 1, 2 and 3 above).
pub fn balanced_heterogeneous(
    instance: &Instance,
    factors: &[f64],
    platform: HeteroPlatform,
) -> Result<HeteroPartition, BapipePartitionError> {
    check(instance, factors)?;
    let sums = ChainSums::new(instance);
    let l = instance.len();
    let all = vec![true; l + 1];
    let mut starts = inter_layer(&sums, factors, &all)
        .ok_or_else(|| BapipePartitionError::Invalid("no cut fits".into()))?;
    // Step 2: communication bottleneck.
    let t = 1.0
        / factors
            .iter()
            .map(|x| 1.0 / (x * sums.u(1, l)))
            .sum::<f64>();
    let transfer = |j: usize| 2.0 * instance.a(j) / platform.bandwidth_bytes_per_second;
    if starts.iter().skip(1).any(|&j| transfer(j) > t) {
        let threshold_bytes = t * platform.bandwidth_bytes_per_second / 2.0;
        let allowed: Vec<bool> = (0..=l)
            .map(|j| j == 0 || j == l || instance.a(j) <= threshold_bytes)
            .collect();
        if let Some(s) = inter_layer(&sums, factors, &allowed) {
            starts = s;
        }
    }
    // Step 3: memory fine-tuning, a bounded number of one-layer moves.
    if platform.memory_bytes.is_finite() {
        for _ in 0..(l * factors.len()) {
            let Some(n) = (0..starts.len())
                .find(|&n| stage_memory(&sums, &starts, n) > platform.memory_bytes)
            else {
                break;
            };
            let p = starts.len();
            let mem = |s: &[usize], m: usize| stage_memory(&sums, s, m);
            let mut options: Vec<Vec<usize>> = Vec::new();
            let last = starts.get(n + 1).copied().unwrap_or(l);
            if n + 1 < p && last - 1 > starts[n] {
                let mut s = starts.clone();
                s[n + 1] -= 1; // give the last layer to the next stage
                options.push(s);
            }
            if n > 0 && starts[n] + 1 < last {
                let mut s = starts.clone();
                s[n] += 1; // give the first layer to the previous stage
                options.push(s);
            }
            let Some(best) = options.into_iter().min_by(|a, b| {
                let wa = (0..p).map(|m| mem(a, m)).fold(0.0, f64::max);
                let wb = (0..p).map(|m| mem(b, m)).fold(0.0, f64::max);
                wa.total_cmp(&wb)
            }) else {
                break;
            };
            starts = best;
        }
    }
    Ok(finish(&sums, factors, starts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::chain;

    #[test]
    fn optimum_matches_brute_force_and_heuristic_is_never_better() {
        let fwd: Vec<f64> = (0..9).map(|i| 1.0 + ((i * 7) % 5) as f64).collect();
        let bwd: Vec<f64> = fwd.iter().map(|x| 2.0 * x).collect();
        let inst = chain(&fwd, &bwd, &[1.0; 9], &[1.0; 9], 1.0);
        let factors = [1.0, 2.0, 0.5];
        let opt = optimal_heterogeneous(&inst, &factors).unwrap();
        let sums = ChainSums::new(&inst);
        let mut brute = f64::INFINITY;
        for a in 1..9 {
            for b in (a + 1)..9 {
                brute = brute.min(finish(&sums, &factors, vec![0, a, b]).bottleneck_seconds);
            }
        }
        assert_eq!(opt.bottleneck_seconds, brute);
        let platform = HeteroPlatform {
            bandwidth_bytes_per_second: 1e12,
            memory_bytes: f64::INFINITY,
        };
        let h = balanced_heterogeneous(&inst, &factors, platform).unwrap();
        assert!(h.bottleneck_seconds >= opt.bottleneck_seconds);
        assert_eq!(h.starts.len(), 3);
    }

    #[test]
    fn bad_factors_are_errors() {
        let inst = chain(&[1.0; 3], &[2.0; 3], &[1.0; 3], &[1.0; 3], 1.0);
        assert!(optimal_heterogeneous(&inst, &[1.0, -1.0]).is_err());
        assert!(optimal_heterogeneous(&inst, &[1.0; 4]).is_err());
    }
}
