//! Every generated stream respects dependencies and never runs two operations at
//! once on a worker, on random shapes and random (unequal) stage times.

use std::collections::HashMap;

use pipeopt::schedule::sync::sim::{simulate, Execution, StageCosts};
use pipeopt::schedule::sync::{
    bapipe, chimera, dapple, gems, gpipe, interleaved, mixpipe, zero_bubble, Instr, Pass,
    ScheduleKind,
};
use proptest::prelude::*;

fn kinds(d: usize, n: usize, k: usize, gamma: usize) -> Vec<ScheduleKind> {
    let mut out = vec![
        gpipe::GPIPE.kind(),
        dapple::DAPPLE.kind(),
        bapipe::ONE_F_ONE_B_SNO.kind(),
        bapipe::ONE_F_ONE_B_SO.kind(),
        bapipe::ONE_F_ONE_B_AS.kind(),
        bapipe::FBP_AS.kind(),
        zero_bubble::ZB_H1.kind(),
        zero_bubble::ZB_H2.kind(),
    ];
    for v in [2, 4] {
        if d % v == 0 && n % (d / v) == 0 {
            let desc = if v == 2 {
                &interleaved::INTERLEAVED_2
            } else {
                &interleaved::INTERLEAVED_4
            };
            out.push(desc.kind());
        }
    }
    if d % 2 == 0 && n % 2 == 0 && n >= d {
        out.extend([
            gems::GEMS.kind(),
            chimera::CHIMERA.kind(),
            mixpipe::MIXPIPE_K_MAX.kind(),
            mixpipe::MIXPIPE.with_k_gamma(k, gamma),
        ]);
    }
    if d % 2 == 0 && n % d == 0 && n >= 2 * d {
        out.push(chimera::CHIMERA_DOUBLING.kind());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn streams_respect_dependencies_and_workers(
        half_d in 1usize..6,
        extra in 0usize..3,
        k_half in 1usize..6,
        gamma in 0usize..3,
        times in proptest::collection::vec((0.1f64..3.0, 0.1f64..5.0, 0.0f64..1.0), 10),
    ) {
        let d = 2 * half_d;
        let n = d + 2 * extra;
        let k = (2 * k_half).min(n);
        let costs = StageCosts {
            forward_seconds: times.iter().take(d).map(|t| t.0).collect(),
            backward_seconds: times.iter().take(d).map(|t| t.1).collect(),
            transfer_seconds: times.iter().take(d).map(|t| t.2).collect(),
            weight_bytes: vec![1.0; d],
            stash_bytes: vec![1.0; d],
            input_bytes: vec![0.0; d],
            output_bytes: vec![0.0; d],
            // The split backward's weight gradients (zero-bubble schedules).
            weight_gradient_seconds: times.iter().take(d).map(|t| 0.4 * t.1).collect(),
            ..StageCosts::uniform(d, 0.0, 0.0, 0.0)
        };
        for kind in kinds(d, n, k, gamma) {
            let schedule = kind.generate(d, n).unwrap();
            let r = simulate(&schedule, &costs, kind.execution()).unwrap();
            let mut span: HashMap<Instr, (f64, f64, usize)> = HashMap::new();
            for (w, iv) in r.timeline.intervals.iter().enumerate() {
                for &(s, e, op) in iv {
                    span.insert(op, (s, e, w));
                }
                // One operation at a time (per lane for FBP: forwards among themselves,
                // backwards among themselves).
                for fwd in [true, false] {
                    let mut lane: Vec<_> = iv.iter().filter(|x| {
                        kind.execution() != Execution::ForwardBackwardParallel || x.2.is_forward() == fwd
                    }).collect();
                    lane.sort_by(|a, b| a.0.total_cmp(&b.0));
                    for pair in lane.windows(2) {
                        prop_assert!(pair[0].1 <= pair[1].0 + 1e-9, "{kind:?} worker {w} overlap {pair:?}");
                    }
                }
            }
            // Every operation of every micro-batch ran once (its backward whole or as input
            // and weight gradients), after its input (and transfer).
            let per_micro_batch = if kind.schedule.splits_backward { 3 } else { 2 };
            prop_assert_eq!(span.len(), per_micro_batch * d * n);
            for (&op, &(start, _, w)) in &span {
                // The gradient comes from the next stage's input gradient where it is split.
                let producer = |dep: Instr| {
                    if span.contains_key(&dep) { dep } else { dep.with_pass(Pass::BackwardInput) }
                };
                if let Some(dep) = op.input(d).map(producer) {
                    let (_, dep_end, dw) = span[&dep];
                    let cut = if op.is_forward() { dep.stage() } else { op.stage() };
                    let transfer = if dw != w && kind.execution() == Execution::Serial {
                        costs.transfer_seconds[cut]
                    } else { 0.0 };
                    prop_assert!(start + 1e-9 >= dep_end + transfer, "{kind:?} {op:?} before {dep:?}");
                }
            }
            prop_assert!(r.bubble_ratio >= -1e-12 && r.bubble_ratio < 1.0);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Chimera's forward doubling (Chimera's scaling method as MixPipe, Zhang et al., DAC
    /// 2023, section III-C describes it): every operation once and dependencies kept on
    /// random costs, the pairs (0, 1), (2, 3), ... of each pipeline's doubled units run
    /// back to back on every stage, the last unit of an odd H is not doubled, and no worker
    /// holds more than 2D live micro-batches (its 2D M_a).
    #[test]
    fn forward_doubling_pairs_forwards_and_keeps_two_d_live(
        half_d in 1usize..5,
        h in 2usize..6,
        times in proptest::collection::vec((0.1f64..3.0, 0.1f64..5.0), 8),
    ) {
        let d = 2 * half_d;
        let n = d * h;
        let schedule = chimera::CHIMERA_DOUBLING.kind().generate(d, n).unwrap();
        let costs = StageCosts {
            forward_seconds: times.iter().take(d).map(|t| t.0).collect(),
            backward_seconds: times.iter().take(d).map(|t| t.1).collect(),
            transfer_seconds: vec![0.0; d],
            weight_bytes: vec![1.0; d],
            stash_bytes: vec![1.0; d],
            input_bytes: vec![0.0; d],
            output_bytes: vec![0.0; d],
            ..StageCosts::uniform(d, 0.0, 0.0, 0.0)
        };
        let r = simulate(&schedule, &costs, Execution::Serial).unwrap();
        for m in &r.memory {
            prop_assert!(m.peak_live <= 2 * d, "peak live {} > 2D = {}", m.peak_live, 2 * d);
        }
        let half = n / 2;
        let doubled = (h - h % 2) * d / 2;
        for stream in &schedule {
            for (i, op) in stream.iter().enumerate() {
                let Instr::Forward { stage, micro_batch, pipeline } = *op else { continue };
                let age = if micro_batch >= half { micro_batch - half } else { micro_batch };
                if age < doubled && age % 2 == 0 {
                    let partner = Instr::Forward { stage, micro_batch: micro_batch + 1, pipeline };
                    prop_assert_eq!(stream.get(i + 1), Some(&partner), "pair of {:?} split", op);
                }
            }
        }
        // Not a plain Chimera: the first unit injects D micro-batches per pipeline.
        let first_backward = schedule[0].iter().position(|op| !op.is_forward()).unwrap();
        prop_assert!(first_backward >= d, "worker 0 starts a backward after {first_backward} forwards");
    }
}

#[test]
fn forward_doubling_refuses_shapes_it_cannot_draw() {
    for (d, n) in [(4, 4), (4, 10), (3, 6), (4, 6)] {
        let e = chimera::CHIMERA_DOUBLING.kind().generate(d, n).unwrap_err();
        assert!(e.to_string().contains("N >= 2D"), "{e}");
    }
}

/// On equal stages with backward = 2 x forward, forward doubling has fewer bubbles than
/// Chimera's plain continuation, as many as K maximizing when H = N / D is even at D = 4
/// and more when H is odd (Zhang et al., DAC 2023, section III-C: K maximizing "has fewer
/// bubbles than forward doubling in Chimera if H is odd").
#[test]
fn forward_doubling_against_continuation_and_k_maximizing() {
    let costs = StageCosts::uniform(4, 1.0, 2.0, 0.0);
    let bubble = |kind: ScheduleKind, n: usize| {
        simulate(&kind.generate(4, n).unwrap(), &costs, Execution::Serial)
            .unwrap()
            .bubble_ratio
    };
    for n in [8, 16] {
        let fd = bubble(chimera::CHIMERA_DOUBLING.kind(), n);
        assert!(fd < bubble(chimera::CHIMERA.kind(), n) - 1e-9, "N = {n}");
        assert!(
            (fd - bubble(mixpipe::MIXPIPE_K_MAX.kind(), n)).abs() < 1e-9,
            "N = {n}"
        );
    }
    let odd = bubble(chimera::CHIMERA_DOUBLING.kind(), 12);
    assert!(odd > bubble(mixpipe::MIXPIPE_K_MAX.kind(), 12) + 1e-9);
    assert!(odd < bubble(chimera::CHIMERA.kind(), 12) - 1e-9);
}
