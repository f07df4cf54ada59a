//! The exact synchronous-schedule MILP (`milp::sync_schedule`) against what is known: the
//! critical path without memory limits, exhaustive search over every stream order on tiny
//! pipelines (optimum and infeasibility), DAPPLE's 1F1B under its own live caps, and
//! Chimera's Table I at D = 4 (Zhang et al., DAC 2023).

use itertools::Itertools;
use pipeopt::milp::sync_schedule::{
    optimal_schedule, sequential_streams, Formulation, Placement, SyncOptimum, SyncProblem,
};
use pipeopt::milp::{MilpOptions, SolveStatus};
use pipeopt::schedule::sync::chimera::chimera_for;
use pipeopt::schedule::sync::sim::{simulate, Execution, StageCosts};
use pipeopt::schedule::sync::{chimera, dapple, gpipe, Instr, Pass, Schedule};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn solve(
    costs: &StageCosts,
    placement: Placement,
    n: usize,
    memory: Option<f64>,
    live_cap: Option<Vec<usize>>,
    proposals: &[(String, Schedule)],
    formulation: Formulation,
) -> SyncOptimum {
    let problem = SyncProblem {
        costs,
        placement,
        micro_batches: n,
        memory,
        live_cap,
        formulation,
        split_backward: false,
    };
    optimal_schedule(&problem, proposals, &MilpOptions::default()).unwrap()
}

/// Checks an optimum: proven, its streams replay to its makespan, the bound meets it.
fn check_proven(o: &SyncOptimum, costs: &StageCosts) -> f64 {
    assert_eq!(o.status, SolveStatus::Optimal);
    let makespan = o.makespan.unwrap();
    let r = simulate(o.schedule.as_ref().unwrap(), costs, Execution::Serial).unwrap();
    assert!(close(r.makespan_seconds, makespan));
    assert!(close(o.lower_bound, makespan), "{o:?}");
    makespan
}

#[test]
fn one_direction_without_memory_limit_is_the_critical_path() {
    // D - 1 + N forward-backward units for equal stages (GPipe's and 1F1B's makespan, and
    // the chain of micro-batch 0's forwards, the N backwards of the last stage... ).
    // The disjunctive relaxation is weak (its proofs grow fast with D and N): small cases.
    for (d, n) in [(2, 2), (3, 3), (4, 4), (4, 6)] {
        for b in [1.0, 2.0] {
            let costs = StageCosts::uniform(d, 1.0, b, 0.0);
            let formulations: &[Formulation] = if d * n <= 9 {
                &[Formulation::Disjunctive, Formulation::TimeIndexed]
            } else {
                &[Formulation::TimeIndexed]
            };
            for &formulation in formulations {
                // GPipe as the starting incumbent: the bound has to meet it.
                let gpipe = gpipe::GPIPE.kind().generate(d, n).unwrap();
                let o = solve(
                    &costs,
                    Placement::OneDirection,
                    n,
                    None,
                    None,
                    &[("gpipe".to_string(), gpipe)],
                    formulation,
                );
                let m = check_proven(&o, &costs);
                assert!(
                    close(m, (d - 1 + n) as f64 * (1.0 + b)),
                    "D={d} N={n} B={b}: {m}"
                );
            }
        }
    }
}

/// Small deterministic stage costs with transfers, not equal; on a grid of 1/4 when `grid`.
fn uneven(d: usize, seed: u64, grid: bool) -> StageCosts {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = 0.5 + ((x >> 33) % 1000) as f64 / 1000.0;
        if grid {
            (v * 4.0).round() / 4.0
        } else {
            v
        }
    };
    let mut c = StageCosts::uniform(d, 1.0, 2.0, 0.0);
    for s in 0..d {
        c.forward_seconds[s] = next();
        c.backward_seconds[s] = 2.0 * next();
        c.transfer_seconds[s] = if grid { next() - 0.5 } else { 0.3 * next() };
        c.stash_bytes[s] = next();
        c.weight_bytes[s] = next();
        c.input_bytes[s] = 0.1 * next();
        c.output_bytes[s] = 0.1 * next();
    }
    c
}

/// Makespan, peak memory and most live micro-batches of every combination of per-worker
/// permutations that runs (no deadlock).
fn every_order(costs: &StageCosts, ops: &[Vec<Instr>]) -> Vec<(f64, f64, usize)> {
    let perms: Vec<Vec<Vec<Instr>>> = ops
        .iter()
        .map(|w| w.iter().copied().permutations(w.len()).collect())
        .collect();
    let mut runs = Vec::new();
    for streams in perms.iter().multi_cartesian_product() {
        let s: Schedule = streams.into_iter().cloned().collect();
        if let Ok(r) = simulate(&s, costs, Execution::Serial) {
            let live = r.memory.iter().map(|w| w.peak_live).max().unwrap_or(0);
            runs.push((r.makespan_seconds, r.peak_bytes(), live));
        }
    }
    runs
}

/// The best makespan of `runs` within the budget (`None` when none fits).
fn exhaustive(runs: &[(f64, f64, usize)], memory: Option<f64>, cap: Option<usize>) -> Option<f64> {
    runs.iter()
        .filter(|r| memory.is_none_or(|m| r.1 <= m * (1.0 + 1e-12)))
        .filter(|r| cap.is_none_or(|c| r.2 <= c))
        .map(|r| r.0)
        .reduce(f64::min)
}

fn operations_of(placement: Placement, d: usize, n: usize) -> Vec<Vec<Instr>> {
    let s = sequential_streams(d, n, placement, false);
    s.into_iter()
        .map(|mut w| {
            w.sort_by_key(|i| format!("{i:?}"));
            w
        })
        .collect()
}

#[test]
fn optimum_and_infeasibility_match_exhaustive_search() {
    // Every per-worker order of tiny pipelines (D = 3, N = 2, both placements; D = 2, N = 2
    // with three micro-batch budgets), uneven stages with transfers, memory budgets from
    // tight (only the sequential order fits, or nothing) to loose.
    let mut checked_infeasible = 0;
    for (d, n, placement) in [
        (3, 2, Placement::OneDirection),
        (3, 2, Placement::Bidirectional),
        (2, 2, Placement::OneDirection),
        (2, 2, Placement::Bidirectional),
    ] {
        for (seed, grid) in [(0u64, true), (1, false)] {
            let costs = uneven(d, seed + 7 * d as u64, grid);
            let formulations: &[Formulation] = if grid {
                &[Formulation::Disjunctive, Formulation::TimeIndexed]
            } else {
                &[Formulation::Auto]
            };
            let seq = simulate(
                &sequential_streams(d, n, placement, false),
                &costs,
                Execution::Serial,
            )
            .unwrap();
            let least = seq.peak_bytes();
            let runs = every_order(&costs, &operations_of(placement, d, n));
            for memory in [None, Some(least * 0.999), Some(least), Some(least * 1.2)] {
                let want = exhaustive(&runs, memory, None);
                for &formulation in formulations {
                    let o = solve(&costs, placement, n, memory, None, &[], formulation);
                    match want {
                        None => {
                            assert_eq!(o.status, SolveStatus::Infeasible, "{o:?}");
                            checked_infeasible += 1;
                        }
                        Some(w) => {
                            let m = check_proven(&o, &costs);
                            assert!(
                                close(m, w),
                                "D={d} N={n} {placement:?} M={memory:?} {formulation:?}: {m} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(checked_infeasible > 0);
}

#[test]
fn live_caps_match_exhaustive_search() {
    let d = 3;
    let costs = uneven(d, 11, true);
    let one = every_order(&costs, &operations_of(Placement::OneDirection, d, 2));
    let two = every_order(&costs, &operations_of(Placement::Bidirectional, d, 2));
    for formulation in [Formulation::Disjunctive, Formulation::TimeIndexed] {
        for (placement, runs) in [
            (Placement::OneDirection, &one),
            (Placement::Bidirectional, &two),
        ] {
            let want = exhaustive(runs, None, Some(1)).unwrap();
            let o = solve(
                &costs,
                placement,
                2,
                None,
                Some(vec![1; d]),
                &[],
                formulation,
            );
            assert!(close(check_proven(&o, &costs), want));
        }
        // GEMS's placement is the bidirectional one with one live micro-batch per worker.
        let want = exhaustive(&two, None, Some(1)).unwrap();
        let o = solve(&costs, Placement::Gems, 2, None, None, &[], formulation);
        assert!(close(check_proven(&o, &costs), want));
    }
}

#[test]
fn dapple_one_f_one_b_is_optimal_under_its_own_live_caps() {
    // DAPPLE keeps at most D - s micro-batches on worker s; with equal stages no order under
    // those caps beats 1F1B (the MILP proves its makespan is the minimum).
    for (d, n, b) in [(4, 8, 2.0), (4, 6, 1.0), (3, 6, 2.0)] {
        let costs = StageCosts::uniform(d, 1.0, b, 0.0);
        let dapple = dapple::DAPPLE.kind().generate(d, n).unwrap();
        let r = simulate(&dapple, &costs, Execution::Serial).unwrap();
        let caps: Vec<usize> = (0..d).map(|s| d - s).collect();
        let o = solve(
            &costs,
            Placement::OneDirection,
            n,
            None,
            Some(caps),
            &[("dapple".into(), dapple)],
            Formulation::Auto,
        );
        let m = check_proven(&o, &costs);
        assert!(
            close(m, r.makespan_seconds),
            "D={d} N={n}: {m} vs {}",
            r.makespan_seconds
        );
    }
}

#[test]
fn chimera_reaches_table_one_at_d_4() {
    // Zhang et al., DAC 2023, Table I: Chimera's bubble ratio (D-2)/(3D-2) = 0.2 at D = 4
    // (forward = backward), with Chimera's D live micro-batches per worker at most. The
    // optimum on Chimera's placement is exactly that: 3D - 2 = 10 forward times.
    let d = 4;
    let costs = StageCosts::uniform(d, 1.0, 1.0, 0.0);
    let chimera = chimera::CHIMERA.kind().generate(d, d).unwrap();
    let o = solve(
        &costs,
        Placement::Bidirectional,
        d,
        None,
        Some(vec![d; d]),
        &[("chimera".into(), chimera)],
        Formulation::Disjunctive,
    );
    let m = check_proven(&o, &costs);
    assert!(close(m, (3 * d - 2) as f64), "{m}");
    assert!(close(o.report.as_ref().unwrap().bubble_ratio, 0.2));
}

#[test]
fn chimera_is_optimal_on_its_placement_at_d_8() {
    // A doubt once raised: at D = 8 with B = F our Chimera took 24 forward times, Table I
    // says 3D - 2 = 22. The MILP proves 22 the minimum on Chimera's placement (D live at
    // most), and 5D - 4 = 36 with B = 2F; `chimera_for` reaches both.
    let d = 8;
    for (b, want) in [(1.0, 22.0), (2.0, 36.0)] {
        let costs = StageCosts::uniform(d, 1.0, b, 0.0);
        let chimera = chimera_for(d, d, &costs).unwrap();
        let r = simulate(&chimera, &costs, Execution::Serial).unwrap();
        assert!(
            close(r.makespan_seconds, want),
            "B={b}: {}",
            r.makespan_seconds
        );
        let o = solve(
            &costs,
            Placement::Bidirectional,
            d,
            None,
            Some(vec![d; d]),
            &[("chimera".into(), chimera)],
            Formulation::Auto,
        );
        assert!(close(check_proven(&o, &costs), want), "B={b}");
    }
}

/// Every per-worker order of `ops` that keeps each operation after those of its own worker
/// that it depends on (directly or through other workers), simulated: makespan, peak
/// memory, most live micro-batches, of those that run. Orders that break such a dependency
/// deadlock, so this is `every_order` without enumerating them.
fn every_consistent_order(costs: &StageCosts, ops: &[Vec<Instr>]) -> Vec<(f64, f64, usize)> {
    let d = costs.stages();
    let all: Vec<Instr> = ops.iter().flatten().copied().collect();
    let present = |i: &Instr| all.contains(i);
    let inputs = |i: Instr| -> Option<Instr> {
        let dep = i.input(d)?;
        Some(if present(&dep) {
            dep
        } else {
            dep.with_pass(Pass::BackwardInput)
        })
    };
    // `reaches(a, b)`: b depends on a, directly or not.
    let reaches = |a: Instr, b: Instr| {
        let mut at = Some(b);
        while let Some(x) = at {
            at = inputs(x);
            if at == Some(a) {
                return true;
            }
        }
        false
    };
    let orders: Vec<Vec<Vec<Instr>>> = ops
        .iter()
        .map(|w| {
            w.iter()
                .copied()
                .permutations(w.len())
                .filter(|p| (0..p.len()).all(|i| (i + 1..p.len()).all(|j| !reaches(p[j], p[i]))))
                .collect()
        })
        .collect();
    let mut runs = Vec::new();
    for streams in orders.iter().multi_cartesian_product() {
        let s: Schedule = streams.into_iter().cloned().collect();
        // Orders consistent on each worker may still wait on each other across workers.
        if let Ok(r) = simulate(&s, costs, Execution::Serial) {
            let live = r.memory.iter().map(|w| w.peak_live).max().unwrap_or(0);
            runs.push((r.makespan_seconds, r.peak_bytes(), live));
        }
    }
    runs
}

#[test]
fn split_backwards_and_several_stages_per_worker_match_exhaustive_search() {
    // Tiny pipelines on every placement the optimum knows beyond one stage per worker,
    // with and without the split backward: the optimum and infeasibility against every
    // order, at memory budgets from below the least peak to loose. The weight gradient
    // keeps part of the stash (a third), so the split changes memory as well as time.
    let mut checked = 0;
    for (d, n, placement, split) in [
        (2, 2, Placement::OneDirection, true),
        (3, 1, Placement::OneDirection, true),
        (2, 2, Placement::VShape, false),
        (4, 1, Placement::VShape, true),
        (4, 2, Placement::VShape, false),
        (4, 2, Placement::Interleaved2, false),
        (4, 1, Placement::Interleaved2, true),
    ] {
        let mut costs = uneven(d, 3 + d as u64, true).with_weight_gradient_share(0.5);
        costs.weight_gradient_stash_bytes = costs.stash_bytes.iter().map(|s| s / 3.0).collect();
        let ops = operations_of_split(placement, d, n, split);
        let runs = every_consistent_order(&costs, &ops);
        let seq = simulate(
            &sequential_streams(d, n, placement, split),
            &costs,
            Execution::Serial,
        )
        .unwrap();
        let least = seq.peak_bytes();
        for memory in [None, Some(least * 0.999), Some(least), Some(least * 1.15)] {
            let want = exhaustive(&runs, memory, None);
            for formulation in [Formulation::Disjunctive, Formulation::TimeIndexed] {
                let problem = SyncProblem {
                    costs: &costs,
                    placement,
                    micro_batches: n,
                    memory,
                    live_cap: None,
                    formulation,
                    split_backward: split,
                };
                let o = optimal_schedule(&problem, &[], &MilpOptions::default()).unwrap();
                let case =
                    format!("D={d} N={n} {placement:?} split={split} M={memory:?} {formulation:?}");
                match want {
                    None => assert_eq!(o.status, SolveStatus::Infeasible, "{case}: {o:?}"),
                    Some(w) => {
                        let m = check_proven(&o, &costs);
                        assert!(close(m, w), "{case}: {m} vs {w}");
                        let streams = o.schedule.as_ref().unwrap();
                        assert_eq!(streams.len(), placement.workers(d), "{case}");
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 7 * 4 * 2);
}

#[test]
fn split_live_caps_match_exhaustive_search() {
    // A live cap counts a micro-batch until its input gradient, not its weight gradient.
    let (d, n) = (2, 2);
    let costs = uneven(d, 5, true).with_weight_gradient_share(0.5);
    let runs = every_consistent_order(
        &costs,
        &operations_of_split(Placement::OneDirection, d, n, true),
    );
    let want = exhaustive(&runs, None, Some(1)).unwrap();
    let problem = SyncProblem {
        costs: &costs,
        placement: Placement::OneDirection,
        micro_batches: n,
        memory: None,
        live_cap: Some(vec![1; d]),
        formulation: Formulation::Disjunctive,
        split_backward: true,
    };
    let o = optimal_schedule(&problem, &[], &MilpOptions::default()).unwrap();
    assert!(close(check_proven(&o, &costs), want));
}

fn operations_of_split(placement: Placement, d: usize, n: usize, split: bool) -> Vec<Vec<Instr>> {
    sequential_streams(d, n, placement, split)
}
