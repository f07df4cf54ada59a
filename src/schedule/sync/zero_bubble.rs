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

use super::registry::{KGamma, ScheduleDescriptor, DEFAULTS};
use super::{f, input_gradient, weight_gradient, Schedule};

const PAPER: &str = "Qi et al., ICLR 2024";

pub static ZB_H1: ScheduleDescriptor = ScheduleDescriptor {
    name: "zb-h1",
    label: "ZB-H1",
    help: "ZB-H1: 1F1B with the backward split into input and weight gradients, the weight gradients delayed into the bubbles (1F1B's memory)",
    paper: PAPER,
    splits_backward: true,
    generate: |d, n, _, _| Ok(zero_bubble(d, n, |s| d - 1 - s, |s| s)),
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
