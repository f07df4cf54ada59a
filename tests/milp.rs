//! MILP scheduling and planners: every pattern passes the judge with the period reported;
//! on contiguous allocations the MILP matches 1F1B*'s min period (Proposition 1 of
//! madpipe.txt makes 1F1B* optimal there); statuses under limits.

use pipeopt::judge::{judge, static_memory};
use pipeopt::milp::{schedule_allocation, MilpOptions, SolveStatus};
use pipeopt::model::{Allocation, Instance, Layer, Platform, Stage};
use pipeopt::schedule::one_f_one_b_star::min_period_fitting;

/// Deterministic pseudo-random chain of `l` layers.
fn chain(seed: u64, l: usize) -> Instance {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) % 1000) as f64 / 1000.0
    };
    let layers = (0..l)
        .map(|i| Layer {
            name: format!("l{}", i + 1),
            fwd: 0.5 + next(),
            bwd: 1.0 + 2.0 * next(),
            weights: 1.0 + 4.0 * next(),
            out: 1.0 + 9.0 * next(),
            stash: None,
        })
        .collect();
    Instance {
        name: format!("chain{seed}"),
        input: 5.0,
        layers,
        meta: Default::default(),
    }
}

fn quick() -> MilpOptions {
    MilpOptions {
        node_limit: Some(2_000),
        ..MilpOptions::default()
    }
}

#[test]
fn contiguous_allocations_match_one_f_one_b_star() {
    let mut checked = 0;
    for seed in 0..6u64 {
        let inst = chain(seed, 4);
        let alloc = Allocation::from_boundaries(&[1, 3, 4]);
        for &memory in &[60.0, 80.0, 120.0] {
            let platform = Platform::new(3, memory, 4.0);
            let star = min_period_fitting(&inst, &platform, &alloc);
            let out = schedule_allocation(&inst, &platform, &alloc, &quick()).unwrap();
            match star {
                Err(_) => assert_eq!(
                    out.status,
                    SolveStatus::Infeasible,
                    "seed {seed} M {memory}"
                ),
                Ok(star) => {
                    checked += 1;
                    let pattern = out.pattern.as_ref().expect("a pattern");
                    let j = judge(&inst, &platform, &alloc, pattern);
                    assert!(j.valid, "{:?}", j.violations);
                    assert_eq!(Some(j.period), out.period);
                    let t = out.period.unwrap();
                    assert!(t <= star.pattern.period * (1.0 + 1e-12));
                    assert_eq!(out.status, SolveStatus::Optimal);
                    // The search's bound is a certificate: 1F1B* cannot beat it, and by
                    // Proposition 1 the MILP cannot beat 1F1B* by more than the precision.
                    assert!(out.lower_bound <= t);
                    assert!(
                        out.lower_bound >= star.pattern.period * (1.0 - 2e-4),
                        "seed {seed} M {memory}: MILP bound {} vs 1F1B* {} (MILP period {t})",
                        out.lower_bound,
                        star.pattern.period
                    );
                }
            }
        }
    }
    assert!(checked >= 6, "too few feasible cases: {checked}");
}

#[test]
fn non_contiguous_allocation_is_judged_valid() {
    let inst = chain(11, 5);
    // Processor 0 holds stages 0 and 2 (layers 1-2 and 4), processor 1 stages 1 and 3.
    let alloc = Allocation::new(vec![
        Stage {
            first: 1,
            last: 2,
            processor: 0,
        },
        Stage {
            first: 3,
            last: 3,
            processor: 1,
        },
        Stage {
            first: 4,
            last: 4,
            processor: 0,
        },
        Stage {
            first: 5,
            last: 5,
            processor: 1,
        },
    ]);
    let statics = static_memory(&inst, &Platform::new(2, 1.0, 4.0), &alloc);
    let base = statics.iter().copied().fold(0.0, f64::max);
    let stash = inst.sums().stash(1, inst.len());
    let mut periods = vec![];
    for extra in [stash, 2.0 * stash, 10.0 * stash] {
        let platform = Platform::new(2, base + extra, 4.0);
        let out = schedule_allocation(&inst, &platform, &alloc, &quick()).unwrap();
        let pattern = out.pattern.as_ref().expect("a pattern");
        let j = judge(&inst, &platform, &alloc, pattern);
        assert!(j.valid, "{:?}", j.violations);
        assert_eq!(Some(j.period), out.period);
        assert!(out.lower_bound <= j.period);
        // Never worse than doing one batch at a time, never better than the busiest resource.
        let busiest = j.loads.iter().map(|l| l.busy).fold(0.0, f64::max);
        assert!(j.period >= busiest * (1.0 - 1e-9));
        periods.push((j.period, out.lower_bound, out.status));
    }
    // More memory never hurts the optimum: each bound is below the period found with less.
    for w in periods.windows(2) {
        assert!(w[1].1 <= w[0].0 * (1.0 + 1e-9), "{periods:?}");
        if w[0].2 == SolveStatus::Optimal && w[1].2 == SolveStatus::Optimal {
            assert!(w[1].0 <= w[0].0 * (1.0 + 2e-4), "{periods:?}");
        }
    }
}

#[test]
fn memory_below_static_is_infeasible() {
    let inst = chain(3, 4);
    let alloc = Allocation::from_boundaries(&[2, 4]);
    let platform = Platform::new(2, 1.0, 4.0);
    let out = schedule_allocation(&inst, &platform, &alloc, &quick()).unwrap();
    assert_eq!(out.status, SolveStatus::Infeasible);
    assert!(out.pattern.is_none() && out.period.is_none());
}

#[test]
fn tiny_node_limit_keeps_incumbent_and_bound() {
    let inst = chain(5, 6);
    let alloc = Allocation::new(vec![
        Stage {
            first: 1,
            last: 2,
            processor: 0,
        },
        Stage {
            first: 3,
            last: 4,
            processor: 1,
        },
        Stage {
            first: 5,
            last: 5,
            processor: 0,
        },
        Stage {
            first: 6,
            last: 6,
            processor: 1,
        },
    ]);
    let platform = Platform::new(2, 120.0, 4.0);
    let limited = MilpOptions {
        node_limit: Some(0),
        ..MilpOptions::default()
    };
    let out = schedule_allocation(&inst, &platform, &alloc, &limited).unwrap();
    assert!(out.status.has_solution());
    let p = out.pattern.as_ref().unwrap();
    assert!(judge(&inst, &platform, &alloc, p).valid);
    assert!(out.lower_bound <= out.period.unwrap());
    if out.status == SolveStatus::LimitWithIncumbent {
        assert!(out.gap > 0.0);
    }
    let full = schedule_allocation(&inst, &platform, &alloc, &quick()).unwrap();
    assert!(full.period.unwrap() <= out.period.unwrap() * (1.0 + 1e-9));
    assert!(full.lower_bound >= out.lower_bound * (1.0 - 1e-9));
}
