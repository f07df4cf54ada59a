//! The V-shaped schedules (two stages per worker, worker r holding stages r and D - 1 - r)
//! against their closed forms: ZB-V (Qi et al., ICLR 2024, section 6: no bubble and 1F1B's
//! memory at equal forward, input-gradient and weight-gradient times) and DualPipeV
//! (DeepSeek-V3 technical report, 2024; the deepseek-ai/DualPipe repository's bubble
//! `(D/2 - 1)(F&B + B - 3W)` and `D + 1` stashes per worker).

use pipeopt::schedule::sync::dapple::DAPPLE;
use pipeopt::schedule::sync::dual_pipe_v::{paper_bubble_seconds, DUAL_PIPE_V};
use pipeopt::schedule::sync::sim::{simulate, Execution, StageCosts};
use pipeopt::schedule::sync::zero_bubble::ZB_V;

use crate::sync_closed_forms::zero_bubble_run;
use crate::sync_zero_bubble::{close, idle_within_span};

#[test]
fn zb_v_leaves_no_gap_with_one_f_one_b_memory() {
    for p in 1..=8 {
        let d = 2 * p;
        for n in (2 * p - 1).max(1)..=4 * d {
            let r = zero_bubble_run(ZB_V.kind(), d, n, 1.0, 1.0, 1.0);
            for (w, idle) in idle_within_span(&r).into_iter().enumerate() {
                assert!(close(idle, 0.0), "D={d} N={n} worker {w}: idle {idle}");
            }
            // One iteration spans the later workers' first forwards: P - 1 forwards.
            assert!(close(r.makespan_seconds, 6.0 * n as f64 + (p - 1) as f64));
            // 1F1B on P workers keeps P micro-batches of a worker's share (two of our
            // stages) on its first worker: 2P = D stage stashes; ZB-V keeps at most that.
            for (w, m) in r.memory.iter().enumerate() {
                assert!(m.peak_live <= d, "D={d} N={n} worker {w}: {}", m.peak_live);
            }
            if n >= d {
                assert_eq!(r.memory[0].peak_live, d, "D={d} N={n}");
            }
        }
    }
}

#[test]
fn zb_v_bubble_against_one_f_one_b_on_the_same_workers() {
    // 1F1B on P workers, each holding two stages' work: its bubble (P - 1)(F + B) of a
    // worker's share; ZB-V's idle is only the skew of the first forwards, (P - 1) F_stage.
    for p in 2..=6 {
        let (d, n) = (2 * p, 4 * p);
        let zb = zero_bubble_run(ZB_V.kind(), d, n, 1.0, 1.0, 1.0);
        let merged = StageCosts::uniform(p, 2.0, 4.0, 0.0);
        let one = simulate(
            &DAPPLE.kind().generate(p, n).unwrap(),
            &merged,
            Execution::Serial,
        )
        .unwrap();
        assert!(close(
            one.makespan_seconds - zb.makespan_seconds,
            5.0 * (p - 1) as f64
        ));
    }
}

#[test]
fn dual_pipe_v_has_the_repositorys_bubble_and_memory() {
    for p in 1..=8 {
        let d = 2 * p;
        for n in d..=4 * d {
            let r = zero_bubble_run(DUAL_PIPE_V.kind(), d, n, 1.0, 1.0, 1.0);
            let bubble = paper_bubble_seconds(d, 1.0, 2.0, 1.0);
            assert!(close(bubble, 2.0 * (p - 1) as f64));
            for (w, work) in r.work_seconds.iter().enumerate() {
                assert!(close(*work, 6.0 * n as f64), "D={d} N={n} worker {w}");
                let idle = r.makespan_seconds - work;
                assert!(
                    close(idle, bubble),
                    "D={d} N={n} worker {w}: idle {idle} against {bubble}"
                );
            }
            let ratio = DUAL_PIPE_V.kind().paper_bubble_ratio(d, n).unwrap();
            assert!(close(r.bubble_ratio, ratio), "D={d} N={n}");
            for (w, m) in r.memory.iter().enumerate() {
                assert_eq!(m.peak_live, d + 1, "D={d} N={n} worker {w}");
            }
        }
    }
}

#[test]
fn dual_pipe_v_pairs_wait_for_both_inputs() {
    // The same streams run serially, each operation as soon as its own input is there,
    // leave half of the bubble: the pairs' wait is what the closed form counts.
    for p in 2..=6 {
        let (d, n) = (2 * p, 3 * p);
        let costs = StageCosts::uniform(d, 1.0, 2.0, 0.0).with_weight_gradient_share(0.5);
        let s = DUAL_PIPE_V.kind().generate(d, n).unwrap();
        let paired = simulate(&s, &costs, Execution::OverlappedPairs).unwrap();
        let serial = simulate(&s, &costs, Execution::Serial).unwrap();
        let work = 6.0 * n as f64;
        assert!(close(paired.makespan_seconds - work, 2.0 * (p - 1) as f64));
        assert!(close(serial.makespan_seconds - work, (p - 1) as f64));
    }
}
