//! Zero-bubble schedules (Qi, Wan, Huang and Lin, "Zero Bubble (Almost) Pipeline
//! Parallelism", ICLR 2024, section 2): the backward split into the input gradient (`I`,
//! which the stage before waits for) and the weight gradient (`W`, which nothing waits
//! for), so that the `W`s can be moved into the bubbles of 1F1B.
//!
//! Both handcrafted schedules are 1F1B with a longer or shorter warm-up and each `W`
//! delayed behind its `I` by a number of steps that grows along the pipeline. Worker `s`
//! (one stage per worker) runs:
//!
//! - a warm-up of `w(s)` forwards;
//! - then, while forwards are left, one step per micro-batch: a forward, the next input
//!   gradient, and, once `lag(s)` steps have passed, the oldest weight gradient waiting;
//! - then the same steps without the forward; then the weight gradients still waiting.
//!
//! - **ZB-H1** (`w(s) = D - 1 - s`, `lag(s) = s`): the first worker warms up as in 1F1B and
//!   every worker keeps `D` micro-batches between a forward and its weight gradient (1F1B's
//!   memory on the first worker, section 2.1). Its bubble is `(D - 1)(T_F + T_B - T_W)`
//!   (the paper's `T_B` is our input gradient), a third of 1F1B's `(D - 1)(T_F + T_B + T_W)`
//!   when the three are equal.
//! - **ZB-H2** (`w(s) = 2(D - 1 - s)`, `lag(s) = 2s`): `2D - 1` micro-batches in flight on
//!   every worker (section 2.2), bubble `(D - 1)(T_F + T_B - 2 T_W)`: none when the three
//!   are equal.
//!
//! These are the streams PyTorch's `ScheduleInterleavedZeroBubble` draws for one stage per
//! rank (ZB-H1), and the same rule with both parameters doubled (ZB-H2).
//!
//! - **ZB-V** (section 6): `D = 2P` stages on `P` workers in a V, worker `r` holding stage
//!   `r` and stage `D - 1 - r`, so that the first and the last stage share worker 0. Worker
//!   `r` warms up with `2(P - r) - 1` forwards of its first stage, then `r` pairs of
//!   forwards (second stage, first stage), then `P - r` forwards of its second stage each
//!   followed by its input and weight gradients; in the steady phase it runs, per
//!   micro-batch, its first stage's forward (while any is left), input and weight gradient,
//!   then the same three of its second stage; it cools down with `r` pairs of input
//!   gradients (first stage, second stage), `P - r` of the first stage each with its oldest
//!   waiting weight gradient, then the weight gradients still waiting. Those are the streams
//!   of PyTorch's `ScheduleZBVZeroBubble`, drawn for `max(N, 2P - 1)` micro-batches and the
//!   operations of micro-batches beyond `N` dropped. At equal forward, input-gradient and
//!   weight-gradient times the paper's bubble is zero and its peak memory 1F1B's: at most
//!   `2P` stage stashes on a worker, each of half a worker's share of the model.
//!
//! **What the bubbles count.** The paper's bubble is the idle time of the first worker from
//! the start to its last operation. Within one iteration every later worker starts `s`
//! forwards late, so the iteration's makespan is at least `N (T_F + T_B + T_W) + (D - 1)
//! T_F`; ZB-H2 has no gap on any worker between its first and its last operation, and the
//! paper removes the skew by overlapping consecutive iterations (its optimizer
//! post-validation), which a single iteration does not model. The streams do not depend on
//! the times; the paper's bubble sizes hold for them exactly (first worker, from `N = D`
//! for ZB-H1 and `N = 2D - 1` for ZB-H2) at equal times and at any others where the weight
//! gradient takes at most the input gradient's time (tests/sync_zero_bubble.rs); with a
//! longer weight gradient the delayed ones no longer fit the gaps and the forms undercount.

use super::registry::{KGamma, Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{f, input_gradient, shape_error, weight_gradient, Instr, Schedule, SyncError};

const PAPER: &str = "Qi et al., ICLR 2024";

pub static ZB_V: ScheduleDescriptor = ScheduleDescriptor {
    name: "zb-v",
    label: "ZB-V",
    help: "ZB-V: D stages on D/2 workers in a V (worker r holds stages r and D-1-r), split backwards, 1F1B's memory, no bubble at equal times",
    paper: PAPER,
    splits_backward: true,
    stages_per_worker: 2,
    generate: |d, n, _, _| zb_v(d, n),
    approach: Some(|_, _| vec![ZB_V.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::VShape],
        rank: 0,
        other_drawing: None,
    }),
    paper_bubble: |d, _, _| (d >= 2 && d % 2 == 0).then_some(0.0),
    ..DEFAULTS
};

pub static ZB_H1: ScheduleDescriptor = ScheduleDescriptor {
    name: "zb-h1",
    label: "ZB-H1",
    help: "ZB-H1: 1F1B with the backward split into input and weight gradients, the weight gradients delayed into the bubbles (1F1B's memory)",
    paper: PAPER,
    splits_backward: true,
    generate: |d, n, _, _| Ok(zero_bubble(d, n, |s| d - 1 - s, |s| s)),
    approach: Some(|_, _| vec![ZB_H1.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 4,
        other_drawing: None,
    }),
    paper_bubble: |d, n, _| Some(zb_h1_bubble_ratio(d, n)),
    ..DEFAULTS
};

pub static ZB_H2: ScheduleDescriptor = ScheduleDescriptor {
    name: "zb-h2",
    label: "ZB-H2",
    help: "ZB-H2: ZB-H1 with twice the warm-up and the delays, 2D - 1 micro-batches in flight, no bubble",
    paper: PAPER,
    splits_backward: true,
    generate: |d, n, _, _| Ok(zero_bubble(d, n, |s| 2 * (d - 1 - s), |s| 2 * s)),
    approach: Some(|_, _| vec![ZB_H2.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 5,
        other_drawing: None,
    }),
    paper_bubble: zb_h2_bubble_ratio,
    ..DEFAULTS
};

/// ZB-H1's bubble ratio at equal forward, input-gradient and weight-gradient times (the
/// paper's setting): `(D - 1) T / (3 N T + (D - 1) T)`.
pub fn zb_h1_bubble_ratio(d: usize, n: usize) -> f64 {
    let (d, n) = (d as f64, n as f64);
    (d - 1.0) / (3.0 * n + d - 1.0)
}

/// ZB-H2's bubble ratio at equal times: none (the paper's section 2.2).
fn zb_h2_bubble_ratio(_: usize, _: usize, _: Option<KGamma>) -> Option<f64> {
    Some(0.0)
}

/// The paper's bubble size (seconds of idle time on the first worker) of ZB-H1 and ZB-H2 for
/// per-stage forward `t_f`, input-gradient `t_i` and weight-gradient `t_w` times; 1F1B's is
/// `(D - 1)(t_f + t_i + t_w)`.
pub fn paper_bubble_seconds(h2: bool, d: usize, t_f: f64, t_i: f64, t_w: f64) -> f64 {
    let delayed = if h2 { 2.0 * t_w } else { t_w };
    (d as f64 - 1.0) * (t_f + t_i - delayed)
}

/// The streams of a zero-bubble schedule: worker `s` warms up with `min(warm_up(s), n)`
/// forwards and delays each weight gradient by `lag(s)` steps (module docs).
pub fn zero_bubble(
    d: usize,
    n: usize,
    warm_up: impl Fn(usize) -> usize,
    lag: impl Fn(usize) -> usize,
) -> Schedule {
    (0..d)
        .map(|s| {
            let (warm, lag) = (warm_up(s).min(n), lag(s));
            let mut out: Vec<_> = (0..warm).map(|m| f(s, m)).collect();
            let (mut next_f, mut next_w) = (warm, 0);
            for step in 0..n {
                if next_f < n {
                    out.push(f(s, next_f));
                    next_f += 1;
                }
                out.push(input_gradient(s, step));
                if step >= lag {
                    out.push(weight_gradient(s, next_w));
                    next_w += 1;
                }
            }
            out.extend((next_w..n).map(|m| weight_gradient(s, m)));
            out
        })
        .collect()
}

/// Checks that `d` stages fold into a V on `d / 2` workers (`schedule` names the schedule).
pub(crate) fn v_workers(schedule: &'static str, d: usize) -> Result<usize, SyncError> {
    if d < 2 || d % 2 != 0 {
        return Err(shape_error(
            schedule,
            format!("D = {d} stages: a V needs an even number of stages, two per worker"),
        ));
    }
    Ok(d / 2)
}

/// ZB-V's streams for `d` stages (even) on `d / 2` workers and `n` micro-batches (module
/// docs).
pub fn zb_v(d: usize, n: usize) -> Result<Schedule, SyncError> {
    let p = v_workers("ZB-V", d)?;
    let drawn = n.max(2 * p - 1);
    Ok((0..p)
        .map(|r| {
            let (first, second) = (r, d - 1 - r);
            let mut ops = Vec::with_capacity(6 * drawn);
            let (mut f0, mut f1, mut b0, mut b1) = (0, 0, 0, 0);
            let forward = |ops: &mut Vec<Instr>, stage: usize, next: &mut usize| {
                ops.push(f(stage, *next));
                *next += 1;
            };
            for _ in 0..2 * (p - r) - 1 {
                forward(&mut ops, first, &mut f0);
            }
            for _ in 0..r {
                forward(&mut ops, second, &mut f1);
                forward(&mut ops, first, &mut f0);
            }
            let whole = |ops: &mut Vec<Instr>, stage: usize, next: &mut usize| {
                ops.extend([input_gradient(stage, *next), weight_gradient(stage, *next)]);
                *next += 1;
            };
            for _ in 0..p - r {
                forward(&mut ops, second, &mut f1);
                whole(&mut ops, second, &mut b1);
            }
            while f1 < f0 || f0 < drawn {
                if f0 < drawn {
                    forward(&mut ops, first, &mut f0);
                }
                whole(&mut ops, first, &mut b0);
                forward(&mut ops, second, &mut f1);
                whole(&mut ops, second, &mut b1);
            }
            let (mut w0, w1) = (b0, b1);
            for _ in 0..r {
                ops.extend([input_gradient(first, b0), input_gradient(second, b1)]);
                (b0, b1) = (b0 + 1, b1 + 1);
            }
            for _ in 0..p - r {
                ops.extend([input_gradient(first, b0), weight_gradient(first, w0)]);
                (b0, w0) = (b0 + 1, w0 + 1);
            }
            ops.extend((w1..b1).map(|m| weight_gradient(second, m)));
            ops.extend((w0..b0).map(|m| weight_gradient(first, m)));
            ops.retain(|op| op.micro_batch() < n);
            ops
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::sim::{simulate, Execution, StageCosts};
    use super::super::{dapple::dapple, Instr, Pass};
    use super::*;

    /// Equal forward, input and weight gradients: forward 1, backward 2, half of it the
    /// weight gradient.
    fn equal_costs(d: usize) -> StageCosts {
        StageCosts::uniform(d, 1.0, 2.0, 0.0).with_weight_gradient_share(0.5)
    }

    #[test]
    fn every_stage_runs_each_part_once_in_order() {
        for d in 1..7 {
            for n in 1..14 {
                for kind in [&ZB_H1, &ZB_H2] {
                    let s = (kind.generate)(d, n, None, None).unwrap();
                    for (w, stream) in s.iter().enumerate() {
                        assert_eq!(stream.len(), 3 * n, "{} D={d} N={n}", kind.name);
                        for m in 0..n {
                            let at = |p| {
                                stream
                                    .iter()
                                    .position(|&op| op == Instr::new(p, w, m, stream[0].pipeline()))
                                    .unwrap()
                            };
                            assert!(at(Pass::Forward) < at(Pass::BackwardInput));
                            assert!(at(Pass::BackwardInput) < at(Pass::BackwardWeight));
                        }
                    }
                    simulate(&s, &equal_costs(d), Execution::Serial).unwrap();
                }
            }
        }
    }

    #[test]
    fn split_backwards_back_to_back_are_one_f_one_b_or_faster() {
        // ZB-H1 with no delay runs 1F1B's order, each backward as its input and weight
        // gradients back to back. Without weight-gradient time it is 1F1B, timeline and
        // memory; with it, the stage before gets its gradient when the input gradient ends,
        // so the iteration is never longer.
        for d in 1..6 {
            for n in 1..10 {
                let s = zero_bubble(d, n, |s| d - 1 - s, |_| 0);
                for share in [0.0, 0.3, 0.5] {
                    let costs =
                        StageCosts::uniform(d, 1.0, 2.5, 0.3).with_weight_gradient_share(share);
                    let split = simulate(&s, &costs, Execution::Serial).unwrap();
                    let whole = simulate(&dapple(d, n), &costs, Execution::Serial).unwrap();
                    let (a, b) = (split.makespan_seconds, whole.makespan_seconds);
                    if share == 0.0 {
                        assert!((a - b).abs() < 1e-9, "D={d} N={n}");
                        assert_eq!(split.memory, whole.memory);
                    } else {
                        assert!(a <= b + 1e-9, "D={d} N={n} share {share}: {a} > {b}");
                    }
                }
            }
        }
    }
}
