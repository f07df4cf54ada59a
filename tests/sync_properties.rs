//! Issue 8: every generated stream respects dependencies and never runs two operations at
//! once on a worker, on random shapes and random (unequal) stage times.

use std::collections::HashMap;

use pipeopt::schedule::sync::sim::{simulate, Execution, StageCosts};
use pipeopt::schedule::sync::{Instr, ScheduleKind};
use proptest::prelude::*;

fn kinds(d: usize, n: usize, k: usize, gamma: usize) -> Vec<ScheduleKind> {
    let mut out = vec![
        ScheduleKind::Gpipe,
        ScheduleKind::Dapple,
        ScheduleKind::Bapipe1f1bSno,
        ScheduleKind::Bapipe1f1bSo,
        ScheduleKind::Bapipe1f1bAs,
        ScheduleKind::BapipeFbpAs,
    ];
    if d % 2 == 0 && n % 2 == 0 && n >= d {
        out.extend([
            ScheduleKind::Gems,
            ScheduleKind::Chimera,
            ScheduleKind::MixpipeKMax,
            ScheduleKind::Mixpipe { k, gamma },
        ]);
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
            // Every operation of every micro-batch ran once, after its input (and transfer).
            prop_assert_eq!(span.len(), 2 * d * n);
            for (&op, &(start, _, w)) in &span {
                if let Some(dep) = op.input(d) {
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
