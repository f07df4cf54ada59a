//! DualPipeV (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, section 3.2.1, DualPipe;
//! its V-shaped half, "cut-in-half", from the deepseek-ai/DualPipe repository): `D = 2P`
//! stages on `P` workers in a V (worker `r` holds stage `r` and stage `D - 1 - r`, the
//! placement of ZB-V), a forward of one stage paired with a backward of the other so that
//! in DeepSeek's runtime the one's communication hides behind the other's computation, and
//! some backwards split into input and weight gradients to fill the ends.
//!
//! Worker `r`, with its first stage's operations written `F0`, `B0` and its second stage's
//! `F1`, `B1` (a backward whole, or its input gradient `I` with the weight gradient queued),
//! `W` the oldest queued weight gradient of either stage, runs eight phases:
//!
//! 1. `2(P - r - 1)` x `F0`;
//! 2. `r + 1` x (`F0`, `F1`);
//! 3. `P - r - 1` x (`I1`, `W`, `F1`);
//! 4. `N - 2P + r + 1` x (`F0` with `B1`, `F1` with `B0`), the main phase;
//! 5. `P - r - 1` x (`B1`, `F1` with `B0`);
//! 6. `r + 1` x (`B1`, `B0`), split from the middle pair on (on an odd worker from its
//!    `B1`, on an even one from its `B0`);
//! 7. `P - r - 1` x (`W`, `I0`);
//! 8. `r + 1` x `W`.
//!
//! The repository's `DualPipeV.step` and PyTorch's `ScheduleDualPipeV` draw these streams;
//! both need `N >= D`, and so do we.
//!
//! **Pairs.** An overlapped forward and backward start together once both of their inputs
//! have arrived (DualPipe receives both before computing either): the simulator's
//! [`Execution::OverlappedPairs`], under which a forward that a whole backward directly
//! follows in a worker's stream is such a pair.
//!
//! **Where ours departs.** A worker runs one operation at a time (docs/model.md section
//! 7), so a pair takes its forward's time plus its backward's: the overlap DualPipe is built
//! for hides expert-parallel all-to-all behind computation, which the model does not have.
//! The last worker's first forward and backward, which the repository runs unpaired to
//! shorten the bubble, form a pair here as everywhere else in the main phase: that is the
//! schedule the closed form below describes.
//!
//! **Closed form.** The repository gives DualPipeV's bubble as `(D/2 - 1)(F&B + B - 3W)`
//! per worker, with `F&B` the time of an overlapped pair, and its activation memory as
//! `D + 1` stage stashes per worker (1F1B's first worker holds `D`). With a pair taking `F +
//! B`, at the papers' equal times (`F = I = W = 1`, `B = I + W = 2`) the bubble is `2(P -
//! 1)`, as a ratio of the iteration `(P - 1) / (3N + P - 1)`; the simulator gives both
//! exactly (tests/sync_v_shape.rs). Without the pairs' wait it would be half of that.

use std::collections::VecDeque;

use super::registry::{ScheduleDescriptor, DEFAULTS};
use super::sim::Execution;
use super::zero_bubble::v_workers;
use super::{b, f, input_gradient, shape_error, weight_gradient, Instr, Schedule, SyncError};

pub static DUAL_PIPE_V: ScheduleDescriptor = ScheduleDescriptor {
    name: "dualpipe-v",
    label: "DualPipeV",
    help: "DeepSeek's DualPipeV: D stages on D / 2 workers in a V, forwards paired with backwards, the ends filled with split backwards (N >= D)",
    paper: "DeepSeek-AI, DeepSeek-V3 technical report, 2024",
    splits_backward: true,
    stages_per_worker: 2,
    execution: Execution::OverlappedPairs,
    generate: |d, n, _, _| dual_pipe_v(d, n),
    approach: Some(|_, _| vec![DUAL_PIPE_V.kind()]),
    // Its pairs wait for both inputs (`Execution::OverlappedPairs`), which the optimum's
    // serial workers do not, and it mixes whole and split backwards: no warm start.
    paper_bubble: |d, n, _| dual_pipe_v_bubble_ratio(d, n),
    ..DEFAULTS
};

/// The repository's bubble ratio at equal forward, input-gradient and weight-gradient times
/// with the overlapped pair taking its two operations' time (module docs); `None` where the
/// schedule does not exist.
pub fn dual_pipe_v_bubble_ratio(d: usize, n: usize) -> Option<f64> {
    let p = v_workers("DualPipeV", d).ok().filter(|_| n >= d)? as f64;
    Some((p - 1.0) / (3.0 * n as f64 + p - 1.0))
}

/// The repository's bubble in seconds per worker for per-stage forward `t_f`, whole
/// backward `t_b` and weight-gradient `t_w` times, an overlapped pair taking `t_f + t_b`.
pub fn paper_bubble_seconds(d: usize, t_f: f64, t_b: f64, t_w: f64) -> f64 {
    let pair = t_f + t_b;
    (d as f64 / 2.0 - 1.0) * (pair + t_b - 3.0 * t_w)
}

/// One worker's stream as it is drawn: the next micro-batch of each operation of its two
/// stages and the weight gradients queued behind their input gradients.
struct Worker {
    stages: [usize; 2],
    next_forward: [usize; 2],
    next_backward: [usize; 2],
    queued: VecDeque<Instr>,
    ops: Vec<Instr>,
}

impl Worker {
    fn forward(&mut self, chunk: usize) {
        self.ops
            .push(f(self.stages[chunk], self.next_forward[chunk]));
        self.next_forward[chunk] += 1;
    }

    /// A backward of `chunk`'s stage: whole, or its input gradient with the weight
    /// gradient queued.
    fn backward(&mut self, chunk: usize, split: bool) {
        let (stage, m) = (self.stages[chunk], self.next_backward[chunk]);
        if split {
            self.ops.push(input_gradient(stage, m));
            self.queued.push_back(weight_gradient(stage, m));
        } else {
            self.ops.push(b(stage, m));
        }
        self.next_backward[chunk] += 1;
    }

    fn weight(&mut self) {
        self.ops.extend(self.queued.pop_front());
    }
}

/// DualPipeV's streams for `d` stages (even) on `d / 2` workers and `n >= d` micro-batches
/// (module docs).
pub fn dual_pipe_v(d: usize, n: usize) -> Result<Schedule, SyncError> {
    let p = v_workers("DualPipeV", d)?;
    if n < d {
        return Err(shape_error(
            "DualPipeV",
            format!("N = {n} micro-batches: DualPipeV needs at least D = {d}"),
        ));
    }
    Ok((0..p).map(|r| worker_stream(d, n, r)).collect())
}

fn worker_stream(d: usize, n: usize, r: usize) -> Vec<Instr> {
    let p = d / 2;
    let mut w = Worker {
        stages: [r, d - 1 - r],
        next_forward: [0; 2],
        next_backward: [0; 2],
        queued: VecDeque::new(),
        ops: Vec::with_capacity(6 * n),
    };
    for _ in 0..2 * (p - r - 1) {
        w.forward(0);
    }
    for _ in 0..=r {
        w.forward(0);
        w.forward(1);
    }
    for _ in 0..p - r - 1 {
        w.backward(1, true);
        w.weight();
        w.forward(1);
    }
    for _ in 0..n + r + 1 - d {
        w.forward(0);
        w.backward(1, false);
        w.forward(1);
        w.backward(0, false);
    }
    for _ in 0..p - r - 1 {
        w.backward(1, false);
        w.forward(1);
        w.backward(0, false);
    }
    // Phase 6's r + 1 pairs, split from the middle one on.
    let (pairs, mut split) = (r + 1, false);
    let half = pairs / 2;
    for i in 0..pairs {
        split |= i == half && r % 2 == 1;
        w.backward(1, split);
        split |= i == half && r % 2 == 0;
        w.backward(0, split);
    }
    for _ in 0..p - r - 1 {
        w.weight();
        w.backward(0, true);
    }
    for _ in 0..=r {
        w.weight();
    }
    w.ops
}

#[cfg(test)]
mod tests {
    use super::super::sim::{simulate, StageCosts};
    use super::super::Pass;
    use super::*;

    #[test]
    fn every_stage_runs_each_micro_batch_once_in_a_v() {
        for p in 1..6 {
            let d = 2 * p;
            for n in d..d + 7 {
                let s = dual_pipe_v(d, n).unwrap();
                assert_eq!(s.len(), p);
                for (r, stream) in s.iter().enumerate() {
                    for stage in [r, d - 1 - r] {
                        let forwards = stream
                            .iter()
                            .filter(|op| op.stage() == stage && op.pass() == Pass::Forward);
                        assert!(forwards.map(|op| op.micro_batch()).eq(0..n), "D={d} N={n}");
                    }
                    assert!(!w_left_behind(stream), "D={d} N={n} worker {r}");
                }
                let costs = StageCosts::uniform(d, 1.0, 2.0, 0.0).with_weight_gradient_share(0.5);
                simulate(&s, &costs, Execution::OverlappedPairs).unwrap();
            }
        }
        assert!(dual_pipe_v(4, 3).is_err());
        assert!(dual_pipe_v(5, 10).is_err());
    }

    /// Whether a weight gradient was queued and never run.
    fn w_left_behind(stream: &[Instr]) -> bool {
        let inputs = stream.iter().filter(|op| op.pass() == Pass::BackwardInput);
        let weights = stream.iter().filter(|op| op.pass() == Pass::BackwardWeight);
        inputs.count() != weights.count()
    }
}
