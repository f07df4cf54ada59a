//! The synchronous schedules' simulated iteration times, bubble ratios and memory
//! against the papers' closed forms (equal stages; backward = 2 x forward unless said).
//! Where a paper's form is an approximation, the exact count of our streams is checked and
//! the comment says how far the paper's form is.

use pipeopt::schedule::sync::chimera::chimera_drawn_for;
use pipeopt::schedule::sync::mixpipe::{k_maximizing_live_cap, paper_bubbles};
use pipeopt::schedule::sync::sim::{simulate, Execution, SimReport, StageCosts};
use pipeopt::schedule::sync::{bapipe, chimera, dapple, gems, gpipe, mixpipe, ScheduleKind};

const F: f64 = 1.0;
const B: f64 = 2.0;

fn run(kind: ScheduleKind, d: usize, n: usize, f: f64, b: f64, c: f64) -> SimReport {
    let s = kind.generate(d, n).unwrap();
    simulate(&s, &StageCosts::uniform(d, f, b, c), kind.execution()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn chimera_matches_table_one_for_equal_forward_and_backward() {
    // MixPipe's (Zhang et al., DAC 2023) Table I: (D-2)/(3D-2) is Chimera's own form with
    // forward = backward: exact there for streams drawn for equal times (makespan 3D - 2
    // forward times, N = D).
    for d in (2..=16).step_by(2) {
        let s = chimera_drawn_for(d, d, 1).unwrap();
        let r = simulate(
            &s,
            &StageCosts::uniform(d, 1.0, 1.0, 0.0),
            Execution::Serial,
        )
        .unwrap();
        assert!(close(r.makespan_seconds, (3 * d - 2) as f64), "D={d}");
        let want = (d as f64 - 2.0) / (3.0 * d as f64 - 2.0);
        assert!(
            close(r.bubble_ratio, want),
            "D={d}: {} vs {want}",
            r.bubble_ratio
        );
    }
}

#[test]
fn chimera_matches_mixpipe_bubbles_at_k_equal_d_with_backward_twice_forward() {
    // With B = 2F Table I's (D-2)/(3D-2) is only approximate (hence its ≈): Chimera's exact
    // count is MixPipe's N_bubbles = (5D - 3K - 4)/3 at K = D, Gamma = 0, i.e. a makespan of
    // (D + N_bubbles)(F + B) = 5D - 4 forward times, bubble ratio (2D - 4)/(5D - 4).
    for d in (2..=16).step_by(2) {
        let r = run(chimera::CHIMERA.kind(), d, d, F, B, 0.0);
        let want = (d as f64 + paper_bubbles(d, d, 0)) * (F + B);
        assert!(
            close(r.makespan_seconds, want),
            "D={d}: {}",
            r.makespan_seconds
        );
        assert!(close(
            r.bubble_ratio,
            (2.0 * d as f64 - 4.0) / (5.0 * d as f64 - 4.0)
        ));
        let table_one = (d as f64 - 2.0) / (3.0 * d as f64 - 2.0);
        assert!((r.bubble_ratio - table_one).abs() < 0.1, "D={d}");
        // Table I's activation range [(D/2 + 1) M_a, D M_a] and two weight copies.
        let live: Vec<usize> = r.memory.iter().map(|m| m.peak_live).collect();
        if d >= 4 {
            assert_eq!(*live.iter().max().unwrap(), d, "D={d}: {live:?}");
            assert_eq!(*live.iter().min().unwrap(), d / 2 + 1, "D={d}: {live:?}");
        }
        assert!(r
            .memory
            .iter()
            .all(|m| m.replicas == 2 && m.weight_bytes == 4.0));
    }
}

#[test]
fn gems_exact_count_and_table_one_approximation() {
    // Our GEMS takes exactly 2D^2 + 2D - 1 forward times for N = D (pairs of micro-batches
    // every 4D + 2, plus the drain of the last one). Table I's (D-1)/(D+1/2) corresponds to
    // 2D^2 + D (it omits those D - 1): exact ratio (2D^2 - D - 1)/(2D^2 + 2D - 1), within
    // 0.03 of Table I's for D >= 4 and closer as D grows.
    let mut last_gap = f64::INFINITY;
    for d in (2..=16).step_by(2) {
        let r = run(gems::GEMS.kind(), d, d, F, B, 0.0);
        let d2 = (d * d) as f64;
        let df = d as f64;
        assert!(
            close(r.makespan_seconds, 2.0 * d2 + 2.0 * df - 1.0),
            "D={d}"
        );
        let exact = (2.0 * d2 - df - 1.0) / (2.0 * d2 + 2.0 * df - 1.0);
        assert!(close(r.bubble_ratio, exact));
        let table_one = (df - 1.0) / (df + 0.5);
        let gap = r.bubble_ratio - table_one;
        assert!(gap > 0.0 && gap < last_gap);
        if d >= 4 {
            assert!(gap < 0.03, "D={d}: {gap}");
        }
        last_gap = gap;
        // One live micro-batch per worker (Table I: M_a), two weight copies.
        assert!(r.memory.iter().all(|m| m.peak_live == 1 && m.replicas == 2));
    }
}

/// (D, K, Gamma) where our MixPipe streams drain exactly in the paper's
/// (D + N_bubbles)(F + B) with N_bubbles = (5D - 3K - 4)/3 - Gamma.
const MIXPIPE_EXACT: &[(usize, usize, usize)] = &[
    (4, 2, 1),
    (4, 4, 0),
    (6, 4, 0),
    (6, 6, 0),
    (8, 4, 0),
    (8, 8, 0),
    (10, 6, 1),
    (10, 6, 2),
    (10, 8, 1),
    (10, 10, 0),
    (12, 6, 1),
    (12, 8, 1),
    (12, 12, 0),
];

/// (D, K, Gamma) where our streams drain one or two forward times sooner than the paper's
/// count (its drawings are not the only schedules within the same memory).
const MIXPIPE_BETTER: &[(usize, usize, usize)] = &[(4, 2, 0), (6, 4, 1), (8, 4, 1), (8, 6, 0)];

#[test]
fn mixpipe_bubbles_against_equation_one() {
    for &(d, k, gamma) in MIXPIPE_EXACT {
        let r = run(mixpipe::MIXPIPE.with_k_gamma(k, gamma), d, d, F, B, 0.0);
        let want = (d as f64 + paper_bubbles(d, k, gamma)) * (F + B);
        assert!(
            close(r.makespan_seconds, want),
            "D={d} K={k} Gamma={gamma}: {} vs {want}",
            r.makespan_seconds
        );
    }
    for &(d, k, gamma) in MIXPIPE_BETTER {
        let r = run(mixpipe::MIXPIPE.with_k_gamma(k, gamma), d, d, F, B, 0.0);
        let paper = (d as f64 + paper_bubbles(d, k, gamma)) * (F + B);
        let gain = paper - r.makespan_seconds;
        assert!(
            (1.0 - 1e-9..=2.0 + 1e-9).contains(&gain),
            "D={d} K={k} G={gamma}"
        );
    }
    // Everywhere: at most K + Gamma live micro-batches per worker (eq. (4)'s memory), and
    // K = D, Gamma = 0 is exactly the paper's count. Elsewhere the paper's count is not
    // reachable in general under that memory (see mixpipe.rs); the results README tabulates
    // ours against it.
    for d in (4..=12).step_by(2) {
        for k in (2..=d).step_by(2) {
            for gamma in 0..=(d - k) / 2 {
                let r = run(mixpipe::MIXPIPE.with_k_gamma(k, gamma), d, d, F, B, 0.0);
                let peak = r.memory.iter().map(|m| m.peak_live).max().unwrap();
                assert!(peak <= k + gamma, "D={d} K={k} G={gamma}: peak {peak}");
                assert!(r.memory.iter().all(|m| m.replicas == 2));
            }
            let r = run(mixpipe::MIXPIPE.with_k_gamma(d, 0), d, d, F, B, 0.0);
            let want = (d as f64 + paper_bubbles(d, d, 0)) * (F + B);
            assert!(close(r.makespan_seconds, want));
        }
    }
}

#[test]
fn mixpipe_k_maximizing_holds_its_memory_and_nearly_its_bubbles() {
    // Section III-C: K = 2(D-1), peak (3D/2 - 1) M_a, "total D/2 - 1 bubbles", i.e. a
    // makespan of (N + D/2 - 1)(F + B). Our streams hold the peak exactly and reach the
    // paper's time exactly for D = 4; for larger D they take at most one more forward time
    // per basic unit of D micro-batches (checked: never more than N/D forward times over).
    for d in [4usize, 6, 8] {
        for h in [2usize, 3, 4] {
            let n = h * d;
            let r = run(mixpipe::MIXPIPE_K_MAX.kind(), d, n, F, B, 0.0);
            let peak = r.memory.iter().map(|m| m.peak_live).max().unwrap();
            assert_eq!(peak, k_maximizing_live_cap(d), "D={d} N={n}");
            let paper = (n as f64 + d as f64 / 2.0 - 1.0) * (F + B);
            let over = r.makespan_seconds - paper;
            assert!(
                over >= -1e-9 && over <= h as f64 * F + 1e-9,
                "D={d} N={n}: {over}"
            );
            if d == 4 {
                assert!(close(r.makespan_seconds, paper), "D=4 N={n}");
            }
        }
    }
}

fn ceil_div(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

#[test]
fn bapipe_table_two_exact() {
    // Zhao et al., arXiv 2020, Table 2 (N accelerators = our D, M micro-batches = our N, SR
    // one transfer): 1F1B-SNO: (M+N-1)(F+B) + (N+M-2-ceil((M-1)/N)) 2 SR, features (N-i+1)
    // a; 1F1B-SO:  (M+N-1)(F+B) + (N-1) 2 SR,                 features 2 (N-i+1) a;
    // exact for SR up to F/2 (Figure 6's regime); weights 2 w on every worker.
    for d in 1..=6usize {
        for m in 1..=20usize {
            for sr in [0.0, 0.1, 0.25, 0.5] {
                let sno = run(bapipe::ONE_F_ONE_B_SNO.kind(), d, m, F, B, sr);
                let so = run(bapipe::ONE_F_ONE_B_SO.kind(), d, m, F, B, sr);
                let base = (m + d - 1) as f64 * (F + B);
                let extra = (d + m) as f64 - 2.0 - ceil_div(m.saturating_sub(1), d) as f64;
                let want_sno = base + extra.max(0.0) * 2.0 * sr;
                let want_so = base + (d - 1) as f64 * 2.0 * sr;
                assert!(
                    close(sno.makespan_seconds, want_sno),
                    "SNO D={d} M={m} SR={sr}"
                );
                assert!(
                    close(so.makespan_seconds, want_so),
                    "SO D={d} M={m} SR={sr}"
                );
                // Table 2's bubble: (N-1)(F+B+2SR) + (M-1-ceil((M-1)/N)) 2SR over the time.
                let idle_sno = (d - 1) as f64 * (F + B + 2.0 * sr)
                    + (m as f64 - 1.0 - ceil_div(m.saturating_sub(1), d) as f64) * 2.0 * sr;
                if d > 1 {
                    assert!(close(sno.bubble_ratio, idle_sno / want_sno), "D={d} M={m}");
                    let idle_so = (d - 1) as f64 * (F + B + 2.0 * sr);
                    assert!(close(so.bubble_ratio, idle_so / want_so), "D={d} M={m}");
                }
                for (i, mem) in sno.memory.iter().enumerate() {
                    assert_eq!(mem.peak_live, (d - i).min(m));
                    assert_eq!(mem.weight_bytes, 2.0);
                }
                for (i, mem) in so.memory.iter().enumerate() {
                    assert_eq!(mem.peak_live, (2 * (d - i)).min(m));
                }
            }
        }
    }
}

#[test]
fn bapipe_table_one() {
    // 1F1B-AS: (M+N-1)(F+B), bubble (N-1)/(M+N-1), features (N-i+1) a: exact, for any
    // transfer time (streamed). FBP-AS: features 2(N-i+1) a exact; its time with our fixed
    // split of the accelerator is exactly (M+2N-1)(F+B) (Table 1 writes (M+N-1)(F+B), see
    // bapipe.rs), bubble (2N-1)/(M+2N-1).
    for d in 1..=6usize {
        for m in 1..=20usize {
            let r = run(bapipe::ONE_F_ONE_B_AS.kind(), d, m, F, B, 5.0);
            assert!(close(r.makespan_seconds, (m + d - 1) as f64 * (F + B)));
            assert!(close(r.bubble_ratio, (d - 1) as f64 / (m + d - 1) as f64));
            for (i, mem) in r.memory.iter().enumerate() {
                assert_eq!(mem.peak_live, (d - i).min(m));
            }
            let r = run(bapipe::FBP_AS.kind(), d, m, F, B, 5.0);
            assert!(close(r.makespan_seconds, (m + 2 * d - 1) as f64 * (F + B)));
            assert!(close(
                r.bubble_ratio,
                (2 * d - 1) as f64 / (m + 2 * d - 1) as f64
            ));
            for (i, mem) in r.memory.iter().enumerate() {
                assert_eq!(mem.peak_live, (2 * (d - i)).min(m), "FBP D={d} M={m} i={i}");
            }
        }
    }
}

#[test]
fn gpipe_and_dapple_textbook() {
    for d in 1..=8usize {
        for n in 1..=16usize {
            for kind in [gpipe::GPIPE.kind(), dapple::DAPPLE.kind()] {
                let r = run(kind, d, n, F, B, 0.0);
                assert!(close(r.makespan_seconds, (n + d - 1) as f64 * (F + B)));
                assert!(close(r.bubble_ratio, (d - 1) as f64 / (n + d - 1) as f64));
                assert_eq!(r.memory[0].replicas, 1);
            }
        }
    }
}

/// The simulated bubble ratio of `kind` at (D, N) with forward `f` and backward `b`, the
/// streams drawn by the registry for those costs, and the descriptor's closed form there.
/// A zero-bubble schedule on `d` equal stages: forward `f`, input gradient `i`, weight
/// gradient `w` seconds.
pub fn zero_bubble_run(
    kind: ScheduleKind,
    d: usize,
    n: usize,
    f: f64,
    i: f64,
    w: f64,
) -> SimReport {
    let costs = StageCosts::uniform(d, f, i + w, 0.0).with_weight_gradient_share(w / (i + w));
    let s = kind.generate(d, n).unwrap();
    simulate(&s, &costs, kind.execution()).unwrap()
}

fn registry_bubbles(kind: ScheduleKind, d: usize, n: usize, f: f64, b: f64) -> (f64, Option<f64>) {
    let costs = StageCosts::uniform(d, f, b, 0.0);
    let s = kind.generate_for(d, n, &costs).unwrap();
    let r = simulate(&s, &costs, kind.execution()).unwrap();
    (r.bubble_ratio, kind.paper_bubble_ratio(d, n))
}

/// Every registered schedule's closed-form bubble (its descriptor's `paper_bubble`) against
/// the simulator, where the paper's form is exact for our streams, within the stated
/// distance where the paper writes an approximation, and absent where the paper gives none.
/// A schedule added to the registry without a case here fails.
#[test]
fn every_registered_closed_form_matches_the_simulator() {
    use pipeopt::schedule::sync::SCHEDULES;
    let exact = |kind: ScheduleKind, d: usize, n: usize, f: f64, b: f64| {
        let (sim, paper) = registry_bubbles(kind, d, n, f, b);
        let paper = paper.unwrap_or_else(|| panic!("{kind:?} D={d} N={n}: no closed form"));
        assert!(close(sim, paper), "{kind:?} D={d} N={n}: {sim} vs {paper}");
    };
    for s in SCHEDULES {
        match s.name {
            "gpipe" | "dapple" | "1f1b-sno" => {
                for d in 1..=8 {
                    for n in 1..=16 {
                        exact(s.kind(), d, n, F, B);
                    }
                }
            }
            // Table I's (D-2)/(3D-2), Chimera's form for forward = backward.
            "chimera" => {
                for d in (2..=16).step_by(2) {
                    exact(s.kind(), d, d, 1.0, 1.0);
                }
            }
            // Eq. (1) at N = D, exact where MIXPIPE_EXACT says.
            "mixpipe" => {
                for &(d, k, gamma) in MIXPIPE_EXACT {
                    exact(s.with_k_gamma(k, gamma), d, d, F, B);
                }
            }
            // "D/2 - 1 bubbles": exact at D = 4 (see the test above for deeper pipelines).
            "mixpipe-kmax" => {
                for n in [8, 12, 16] {
                    exact(s.kind(), 4, n, F, B);
                }
            }
            // Table I writes ≈ (D-1)/(D+1/2): within 0.03 from D = 4 on.
            "gems" => {
                for d in (4..=16).step_by(2) {
                    let (sim, paper) = registry_bubbles(s.kind(), d, d, F, B);
                    assert!((sim - paper.unwrap()).abs() < 0.03, "gems D={d}");
                }
            }
            "chimera-doubling" | "1f1b-so" | "1f1b-as" | "fbp-as" => {
                for d in [2, 4] {
                    for n in [d, 2 * d, 4 * d] {
                        let kind = s.default_kind(d);
                        assert_eq!(kind.paper_bubble_ratio(d, n), None, "{} D={d}", s.name);
                    }
                }
            }
            // The paper's equal times: forward 1, input and weight gradients 1 each.
            "zb-h1" => {
                // From N = D micro-batches on (fewer leave 1F1B's warm-up short).
                for d in 1..=8 {
                    for n in d..=16 {
                        let r = zero_bubble_run(s.kind(), d, n, 1.0, 1.0, 1.0);
                        let paper = s.kind().paper_bubble_ratio(d, n).unwrap();
                        assert!(close(r.bubble_ratio, paper), "zb-h1 D={d} N={n}");
                    }
                }
            }
            // Megatron-LM's (P - 1)(F + B): 1F1B's bubble on P workers divided by v; the
            // breadth-first schedule's is the same (Lamy-Poirier, MLSys 2023).
            "interleaved-2" | "interleaved-4" | "breadth-first-2" | "breadth-first-4" => {
                let v = s.stages_per_worker;
                for p in 1..=6 {
                    for n in (p..=4 * p).step_by(p) {
                        exact(s.kind(), p * v, n, F, B);
                    }
                }
            }
            // Zero, counted as the paper counts it: tests/sync_zero_bubble.rs and
            // tests/sync_v_shape.rs.
            "zb-h2" | "zb-v" => assert_eq!(s.kind().paper_bubble_ratio(4, 8), Some(0.0)),
            // The repository's (D/2 - 1)(F&B + B - 3W) at equal times.
            "dualpipe-v" => {
                for p in 1..=6 {
                    for n in 2 * p..=8 * p {
                        let r = zero_bubble_run(s.kind(), 2 * p, n, 1.0, 1.0, 1.0);
                        let paper = s.kind().paper_bubble_ratio(2 * p, n).unwrap();
                        assert!(close(r.bubble_ratio, paper), "dualpipe-v P={p} N={n}");
                    }
                }
            }
            other => panic!("no closed-form check for the registered schedule {other}"),
        }
    }
}
