//! MixPipe's hybrid of pipeline and data parallelism (Zhang et al., *MixPipe: Efficient
//! Bidirectional Pipeline Parallelism for Training Large-Scale Models*, DAC 2023, section
//! III-B): P GPUs as
//! W replicas of a D-stage (bidirectional) pipeline, P = W x D, chosen by the performance
//! model of its eq. (6), T = B^ / (t_comp + t_p2p + t_a2a), with B^ = B x N x W.
//!
//! Our reading of eq. (6) (the paper defers its terms to PipeDream-2BW's and Chimera's
//! models):
//! - t_comp + t_p2p is the simulated iteration time of one pipeline (`sim::simulate`, with
//!   activation transfers at the stage costs' link bandwidth);
//! - t_a2a is the gradient all-reduce after the flush: every copy of a stage's weights
//!   (W data-parallel copies, twice that for bidirectional schemes, whose two pipelines
//!   each hold a copy) is reduced by a ring, 2 (n - 1) / n x bytes / bandwidth for n copies;
//!   a worker holding two stages reduces both, one after the other; t_a2a is the slowest
//!   worker's. With MixPipe's device placement (all copies of a stage in one server, its
//!   Figure 5(b)) the ring runs at the intra-server bandwidth while the n copies fit in one
//!   server, at the inter-server bandwidth (the ring's slowest link) beyond. Eager gradient synchronization
//!   (overlapping the all-reduce with the last bubbles) is not modelled, so t_a2a is an
//!   upper bound and bidirectional schemes pay a reduction even at W = 1;
//! - a schedule with v stages per GPU (interleaved 1F1B, ZB-V, ...) cuts the chain into
//!   v D stages on the pipeline's D GPUs;
//! - for each D, every micro-batch size B dividing the per-pipeline mini-batch B^ / W and
//!   every schedule of the approach ("mixpipe": every even K <= D, Gamma <= (D - K)/2, and
//!   K maximizing when N > D), with and without recomputation, is simulated; the best run
//!   that fits the memory budget is that D's; the best D wins.
//!
//! Recomputation keeps each stage's input per live micro-batch and reruns the forward
//! before the backward (backward time + forward time); one micro-batch's full stash of the
//! largest stage a worker holds is added to its peak (an upper bound).

use serde::Serialize;

use super::sim::{simulate, SimError, StageCosts};
use super::{Schedule, ScheduleDescriptor};

/// The costs of the stages that start at `starts` (the caller's partition: the balanced one
/// for each D) at micro-batch size `b`: from `rebuilt`, the network rebuilt at `b`, when
/// there is one; else from `instance` scaled from its own micro-batch size by eq. (3)
/// ([`super::costs`]). `None` when the costs cannot be built.
pub fn stage_costs_at(
    instance: &crate::model::Instance,
    rebuilt: Option<&crate::model::Instance>,
    starts: &[usize],
    b: usize,
    bandwidth: f64,
) -> Option<StageCosts> {
    match rebuilt {
        Some(i) => StageCosts::from_instance(i, starts, bandwidth).ok(),
        None => {
            let c = StageCosts::from_instance(instance, starts, bandwidth).ok()?;
            let own = super::costs::micro_batch_size(instance);
            Some(super::costs::interpolated(&[(own, c)], b as f64))
        }
    }
}

/// Recomputation's costs: keep the input only, rerun the forward before the backward.
pub fn with_recompute(c: &StageCosts) -> StageCosts {
    let mut r = c.clone();
    for s in 0..c.stages() {
        r.backward_seconds[s] += c.forward_seconds[s];
        r.stash_bytes[s] = c.input_bytes[s];
    }
    r
}

/// Per-worker peaks of `schedule` simulated on `costs` (recomputation's rematerialised
/// stash added when `full_stash` is given: the plain costs' stash per stage).
pub fn peaks(
    schedule: &Schedule,
    report: &super::sim::SimReport,
    full_stash: Option<&[f64]>,
) -> Vec<f64> {
    (0..schedule.len())
        .map(|w| {
            let extra = full_stash.map_or(0.0, |st| {
                schedule[w]
                    .iter()
                    .map(|op| st[op.stage()])
                    .fold(0.0, f64::max)
            });
            report.memory[w].peak_bytes + extra
        })
        .collect()
}

/// Seconds of the gradient all-reduce after an iteration (see the module docs).
pub fn allreduce_seconds(
    schedule: &Schedule,
    costs: &StageCosts,
    replicas: usize,
    bidirectional: bool,
    bytes_per_second: f64,
) -> f64 {
    let n = replicas * if bidirectional { 2 } else { 1 };
    if n <= 1 {
        return 0.0;
    }
    let ring = 2.0 * (n - 1) as f64 / n as f64;
    schedule
        .iter()
        .map(|stream| {
            let mut held: Vec<usize> = stream.iter().map(|op| op.stage()).collect();
            held.sort();
            held.dedup();
            held.iter()
                .map(|&s| ring * costs.weight_bytes[s] / bytes_per_second)
                .sum::<f64>()
        })
        .fold(0.0, f64::max)
}

/// One (W, D) of the hybrid search with its best fitting run.
#[derive(Debug, Clone, Serialize)]
pub struct HybridRow {
    /// D, GPUs per pipeline.
    pub stages: usize,
    /// The stages the chain is cut into: D times the approach's stages per worker.
    pub model_stages: usize,
    pub replicas: usize,
    /// Samples per pipeline per iteration, B^ / W.
    pub samples_per_pipeline: usize,
    /// Null when nothing of the approach fits at this D.
    pub schedule: Option<String>,
    pub micro_batch_size: Option<usize>,
    pub micro_batches: Option<usize>,
    pub recompute: Option<bool>,
    /// t_comp + t_p2p: the simulated iteration of one pipeline.
    pub iteration_seconds: Option<f64>,
    /// t_a2a.
    pub allreduce_seconds: Option<f64>,
    /// Eq. (6): B^ / (t_comp + t_p2p + t_a2a), samples per second of the whole cluster.
    pub samples_per_second: Option<f64>,
    pub peak_bytes: Option<f64>,
}

/// What the hybrid search needs.
pub struct HybridInput<'a> {
    pub gpus: usize,
    pub mini_batch: usize,
    pub micro_batch_sizes: &'a [usize],
    pub memory_budget_bytes: f64,
    pub allreduce_bytes_per_second: f64,
    /// GPUs per server: a stage's copies beyond this many reduce over the inter-server link.
    pub server_gpus: usize,
    pub inter_server_bytes_per_second: f64,
    /// An approach of the registry (gpipe, dapple, mixpipe, interleaved-2, ...).
    pub approach: &'static ScheduleDescriptor,
    /// The most stages to cut the chain into (its length).
    pub max_stages: usize,
}

impl HybridInput<'_> {
    /// The pipeline depths D (GPUs per pipeline) to try: those dividing P and the
    /// mini-batch into whole pipelines, whose `D x stages_per_worker` stages the chain has.
    pub fn depths(&self) -> impl Iterator<Item = usize> + '_ {
        let v = self.approach.stages_per_worker;
        (1..=self.gpus).filter(move |&d| {
            self.gpus % d == 0 && self.mini_batch % (self.gpus / d) == 0 && d * v <= self.max_stages
        })
    }
}

/// Every depth of [`HybridInput::depths`], best run of each; the rows are in D order.
/// `costs_at(m, b)` gives the stage costs of m balanced stages at micro-batch size b (an
/// approach with v stages per worker cuts the chain into m = v D stages on its D GPUs).
pub fn search(
    input: &HybridInput,
    costs_at: &dyn Fn(usize, usize) -> Option<StageCosts>,
) -> Result<Vec<HybridRow>, SimError> {
    let mut rows = Vec::new();
    for d in input.depths() {
        let m = d * input.approach.stages_per_worker;
        let w = input.gpus / d;
        let s = input.mini_batch / w;
        let mut best: Option<HybridRow> = None;
        for &b in input.micro_batch_sizes {
            if b == 0 || s % b != 0 {
                continue;
            }
            let n = s / b;
            let Some(plain) = costs_at(m, b) else {
                continue;
            };
            for kind in input.approach.kinds(m, n) {
                let Ok(schedule) = kind.generate(m, n) else {
                    continue;
                };
                for recompute in [false, true] {
                    let costs = if recompute {
                        with_recompute(&plain)
                    } else {
                        plain.clone()
                    };
                    let r = simulate(&schedule, &costs, kind.execution())?;
                    let full = recompute.then_some(plain.stash_bytes.as_slice());
                    let peak = peaks(&schedule, &r, full).into_iter().fold(0.0, f64::max);
                    if peak > input.memory_budget_bytes {
                        continue;
                    }
                    let copies = w * if kind.bidirectional() { 2 } else { 1 };
                    let link = if copies <= input.server_gpus {
                        input.allreduce_bytes_per_second
                    } else {
                        input.inter_server_bytes_per_second
                    };
                    let a2a = allreduce_seconds(&schedule, &plain, w, kind.bidirectional(), link);
                    let t = input.mini_batch as f64 / (r.makespan_seconds + a2a);
                    if best
                        .as_ref()
                        .and_then(|x| x.samples_per_second)
                        .is_none_or(|x| t > x)
                    {
                        best = Some(HybridRow {
                            stages: d,
                            model_stages: m,
                            replicas: w,
                            samples_per_pipeline: s,
                            schedule: Some(kind.name()),
                            micro_batch_size: Some(b),
                            micro_batches: Some(n),
                            recompute: Some(recompute),
                            iteration_seconds: Some(r.makespan_seconds),
                            allreduce_seconds: Some(a2a),
                            samples_per_second: Some(t),
                            peak_bytes: Some(peak),
                        });
                    }
                }
            }
        }
        rows.push(best.unwrap_or(HybridRow {
            stages: d,
            model_stages: m,
            replicas: w,
            samples_per_pipeline: s,
            schedule: None,
            micro_batch_size: None,
            micro_batches: None,
            recompute: None,
            iteration_seconds: None,
            allreduce_seconds: None,
            samples_per_second: None,
            peak_bytes: None,
        }));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::sync::{chimera::chimera, dapple::dapple};

    #[test]
    fn ring_allreduce_counts_both_pipelines_of_a_bidirectional_scheme() {
        let c = StageCosts::uniform(4, 1.0, 2.0, 0.0);
        // One byte per stage, 1 B/s: a 1F1B worker holds one stage, W = 2 copies:
        // 2 (2 - 1) / 2 = 1 s; a Chimera worker holds two stages of 2 W = 4 copies each:
        // 2 x 2 x 3 / 4 = 3 s. A single 1F1B pipeline reduces nothing.
        assert_eq!(allreduce_seconds(&dapple(4, 4), &c, 2, false, 1.0), 1.0);
        let ch = chimera(4, 4).unwrap();
        assert_eq!(allreduce_seconds(&ch, &c, 2, true, 1.0), 3.0);
        assert_eq!(allreduce_seconds(&dapple(4, 4), &c, 1, false, 1.0), 0.0);
    }

    #[test]
    fn search_picks_a_fitting_depth() {
        let costs_at = |d: usize, b: usize| {
            let mut c = StageCosts::uniform(
                d,
                0.01 * b as f64 / d as f64,
                0.02 * b as f64 / d as f64,
                0.0,
            );
            c.stash_bytes = vec![b as f64 / d as f64; d];
            c.weight_bytes = vec![1.0 / d as f64; d];
            Some(c)
        };
        let input = HybridInput {
            gpus: 8,
            mini_batch: 64,
            micro_batch_sizes: &[1, 2, 4, 8],
            memory_budget_bytes: 1e9,
            allreduce_bytes_per_second: 1e9,
            server_gpus: 8,
            inter_server_bytes_per_second: 1e8,
            approach: &crate::schedule::sync::mixpipe::MIXPIPE,
            max_stages: 8,
        };
        let rows = search(&input, &costs_at).unwrap();
        // D = 2, 4, 8 (D = 1 has no even MixPipe pipeline).
        assert_eq!(
            rows.iter().map(|r| r.stages).collect::<Vec<_>>(),
            vec![1, 2, 4, 8]
        );
        assert!(rows[0].schedule.is_none());
        assert!(rows[1..].iter().all(|r| r.samples_per_second.is_some()));
        // Interleaved 1F1B with 2 stages per GPU: D GPUs hold 2 D stages, so D = 8 would
        // need 16 stages of a chain of 8.
        let interleaved = HybridInput {
            approach: &crate::schedule::sync::interleaved::INTERLEAVED_2,
            ..input
        };
        let rows = search(&interleaved, &costs_at).unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| (r.stages, r.model_stages))
                .collect::<Vec<_>>(),
            vec![(1, 2), (2, 4), (4, 8)]
        );
        assert!(rows.iter().all(|r| r.samples_per_second.is_some()));
    }
}
