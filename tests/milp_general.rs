//! The general MILP `ilp` against the heuristics, the contiguous optimum
//! and the instance bounds, on small random chains where it runs to proven optimality.
//!
//! What must hold: its optimum is at most every heuristic's validated period
//! and at least `lower_bound`; every plan passes the judge with the period the MILP claims;
//! a memory too small for any plan gives "infeasible" with a reason.

use pipeopt::algorithm::{planner, run, Problem};
use pipeopt::judge::judge;
use pipeopt::milp::general::{coarsen, general_optimum, general_optimum_by, IlpSearch};
use pipeopt::milp::{contiguous_optimum, MilpOptions, SolveStatus};
use pipeopt::model::bounds::period_lower_bound;
use pipeopt::model::{Instance, Plan, PlanReport, Platform, Status};
use pipeopt::nets::random::{one_processor_memory, random_chain};

fn chain(seed: u64, l: usize) -> Instance {
    random_chain(seed, l)
}

/// Runs algorithm `name` with `opts` through the registry and the judge.
fn plan_with(
    name: &str,
    opts: &serde_json::Value,
    inst: &Instance,
    platform: &Platform,
) -> (Option<Plan>, PlanReport) {
    let p = planner(name, opts).unwrap();
    run(
        p.as_ref(),
        &Problem {
            instance: inst,
            platform,
        },
    )
    .unwrap()
}

fn validated(name: &str, inst: &Instance, platform: &Platform) -> Option<f64> {
    let (_, report) = plan_with(name, &serde_json::Value::Null, inst, platform);
    (report.status == Status::Valid || report.status == Status::Timeout)
        .then_some(report.period)
        .flatten()
}

/// 4 to 8 layers on 2 and 3 processors (the target: "up to 8 layers, 2-3 processors"):
/// chains of 4 layers on every platform, of 5 and 6 at ample memory; the rest below.
#[test]
fn optimum_bounds_heuristics_and_is_bounded_below() {
    let compared = optimum_bounds_heuristics((0..8u64).map(|seed| {
        let l = 4 + seed as usize % 3;
        (seed, l, if l == 4 { SMALL } else { &SMALL[2..] })
    }));
    assert!(
        compared >= 10,
        "only {compared} heuristic plans to compare with"
    );
}

/// The chains of 5 and 6 layers at tight memory, and (below) 7 and 8 layers on 2
/// processors: minutes each for the monolithic MILP, seconds since `auto` enumerates first
/// (`milp::general`'s module docs), so in the default tier again.
#[test]
fn optimum_bounds_heuristics_and_is_bounded_below_at_tight_memory() {
    let tight = (0..8u64)
        .map(|seed| (seed, 4 + seed as usize % 3, &SMALL[..2]))
        .filter(|&(_, l, _)| l > 4);
    let compared = optimum_bounds_heuristics(tight);
    assert!(
        compared >= 8,
        "only {compared} heuristic plans to compare with"
    );
}

/// The platforms of the longer chains: 2 processors, tight and ample memory.
const LONGER: &[(usize, f64)] = &[(2, 0.7), (2, 1.5)];

/// The longer chain `seed` of `layers` layers on [`LONGER`], compared with at least
/// `at_least` heuristic plans.
fn optimum_bounds_heuristics_on_a_longer_chain(seed: u64, layers: usize, at_least: usize) {
    let compared = optimum_bounds_heuristics([(seed, layers, LONGER)].into_iter());
    assert!(
        compared >= at_least,
        "only {compared} heuristic plans to compare with"
    );
}

#[test]
fn optimum_bounds_heuristics_and_is_bounded_below_on_a_chain_of_7_layers() {
    optimum_bounds_heuristics_on_a_longer_chain(8, 7, 2);
}

#[test]
fn optimum_bounds_heuristics_and_is_bounded_below_on_a_chain_of_8_layers() {
    optimum_bounds_heuristics_on_a_longer_chain(9, 8, 3);
}

/// The platforms of the short chains: (processors, memory as a share of what one
/// processor needs), tight first.
const SMALL: &[(usize, f64)] = &[(2, 0.7), (3, 0.5), (3, 1.5)];

/// On each chain `(seed, layers, platforms)`: the general MILP's optimum is judged valid at
/// its period, lies between the bounds and every heuristic's validated period, and
/// "infeasible" only where the contiguous optimum finds nothing either. Returns how many
/// heuristic plans it was compared with.
fn optimum_bounds_heuristics<'a>(
    cases: impl Iterator<Item = (u64, usize, &'a [(usize, f64)])>,
) -> usize {
    let mut compared = 0;
    let mut strictly_better_than_contiguous = 0;
    for (seed, l, platforms) in cases {
        let inst = chain(seed, l);
        let full = one_processor_memory(&inst);
        for &(processors, share) in platforms {
            let platform = Platform::new(processors, share * full, 6.0);
            let out = general_optimum(&inst, &platform, None, &MilpOptions::default()).unwrap();
            let contiguous = contiguous_optimum(&inst, &platform, None).unwrap();
            let Some((alloc, pattern)) = &out.best else {
                // Nothing fits: then no contiguous plan fits either.
                assert_eq!(out.status, SolveStatus::Infeasible, "seed {seed}");
                assert!(
                    contiguous.best.is_none(),
                    "seed {seed}: contiguous fits, ilp does not"
                );
                continue;
            };
            assert_eq!(out.status, SolveStatus::Optimal, "seed {seed}");
            let j = judge(&inst, &platform, alloc, pattern);
            assert!(j.valid, "seed {seed}: {:?}", j.violations);
            assert_eq!(j.period, pattern.period);
            let t = pattern.period;
            // At least every bound, at most every heuristic (within the period precision).
            let lb = period_lower_bound(&inst, &platform);
            assert!(out.lower_bound >= lb * (1.0 - 1e-12));
            assert!(out.lower_bound <= t * (1.0 + 1e-12));
            assert!(
                t >= lb * (1.0 - 1e-9),
                "seed {seed}: {t} below the bound {lb}"
            );
            let slack = 1.0 + 2e-4;
            if let Some((_, cp)) = &contiguous.best {
                assert!(
                    t <= cp.period * slack,
                    "seed {seed} P {processors}: ilp {t} > contiguous {}",
                    cp.period
                );
                // The contiguous optimum is a plan of the same space: the ilp's proven
                // bound must not exceed it.
                assert!(out.lower_bound <= cp.period * (1.0 + 1e-9));
                if t < cp.period * (1.0 - 1e-3) {
                    strictly_better_than_contiguous += 1;
                }
            }
            // Not `bipartition`: its plans may run a layer's F and B on different workers,
            // which is outside the space of allocations (docs/bipartition.md), so it may
            // legitimately beat this optimum.
            for name in ["pipedream", "madpipe"] {
                if let Some(h) = validated(name, &inst, &platform) {
                    assert!(t <= h * slack, "seed {seed}: ilp {t} > {name} {h}");
                    compared += 1;
                }
            }
        }
    }
    eprintln!(
        "ilp strictly below the contiguous optimum in {strictly_better_than_contiguous} cases"
    );
    compared
}

#[test]
fn too_little_memory_is_infeasible_with_a_reason() {
    let inst = chain(3, 4);
    // Less than the largest layer's weights: nothing fits anywhere.
    let w_max = inst
        .layers
        .iter()
        .map(|l| 3.0 * l.weights)
        .fold(0.0, f64::max);
    let platform = Platform::new(3, 0.9 * w_max, 6.0);
    let (plan, report) = plan_with("ilp", &serde_json::Value::Null, &inst, &platform);
    assert!(plan.is_none());
    assert_eq!(report.status, Status::Infeasible);
    assert!(
        report.messages.iter().any(|m| m.contains("fits in memory")),
        "{:?}",
        report.messages
    );
}

#[test]
fn coarsened_plans_are_judged_on_the_original_chain() {
    let inst = chain(11, 12);
    let platform = Platform::new(3, one_processor_memory(&inst), 6.0);
    let opts = serde_json::json!({"coarsen": 5});
    let (plan, report) = plan_with("ilp", &opts, &inst, &platform);
    let plan = plan.expect("a plan");
    assert_eq!(report.status, Status::Valid, "{:?}", report.messages);
    // Stages are the groups, mapped back to the 12 layers.
    let groups = coarsen(&inst, 5);
    let starts: Vec<usize> = plan.placement.stages().iter().map(|s| s.first).collect();
    assert_eq!(starts, groups.iter().map(|g| g.0).collect::<Vec<_>>());
    assert_eq!(plan.placement.stages().last().unwrap().last, 12);
    // A coarsened search reports only the chain's instance bound.
    assert_eq!(
        report.lower_bound,
        Some(period_lower_bound(&inst, &platform).min(report.period.unwrap()))
    );
}

#[test]
fn coarsen_is_refused_for_other_algorithms() {
    let opts = serde_json::json!({"coarsen": 4});
    let e = planner("pipedream", &opts).err().expect("refused");
    assert!(e.to_string().contains("ilp"), "{e}");
}

#[test]
fn madpipe_with_remapped_stages_is_never_worse_than_madpipe() {
    let mut remapped_better = 0;
    let mut compared = 0;
    for seed in 20..26u64 {
        let inst = chain(seed, 7);
        for &(processors, share) in &[(3usize, 0.45), (3, 1.0)] {
            let platform = Platform::new(processors, share * one_processor_memory(&inst), 6.0);
            let (_, fixed) = plan_with("madpipe", &serde_json::Value::Null, &inst, &platform);
            let opts = serde_json::json!({"remap_stages": true});
            let (plan, remapped) = plan_with("madpipe", &opts, &inst, &platform);
            // Whatever the fixed allocation achieves, remapping keeps (it starts there).
            if fixed.status == Status::Valid {
                assert_eq!(
                    remapped.status,
                    Status::Valid,
                    "seed {seed}: {:?}",
                    remapped.messages
                );
                let (t, t_fixed) = (remapped.period.unwrap(), fixed.period.unwrap());
                assert!(t <= t_fixed * (1.0 + 1e-9), "seed {seed}: {t} > {t_fixed}");
                assert_eq!(remapped.planned_period, fixed.planned_period);
                compared += 1;
                if t < t_fixed * (1.0 - 1e-3) {
                    remapped_better += 1;
                }
            }
            if remapped.status == Status::Valid {
                // Same stages as the first phase: only processors may differ.
                let plan = plan.unwrap();
                let ranges = |s: &[pipeopt::model::Stage]| {
                    let mut r: Vec<(usize, usize)> = s.iter().map(|s| (s.first, s.last)).collect();
                    r.sort();
                    r
                };
                let (_, first_phase) =
                    plan_with("madpipe-dp", &serde_json::Value::Null, &inst, &platform);
                assert_eq!(
                    ranges(&plan.placement.stages()),
                    ranges(&first_phase.stages),
                    "seed {seed}"
                );
            }
        }
    }
    assert!(
        compared >= 4,
        "only {compared} cases where madpipe is valid"
    );
    eprintln!("remapping improved madpipe in {remapped_better} of {compared} cases");
}

#[test]
fn remap_stages_is_refused_for_other_algorithms() {
    let opts = serde_json::json!({"remap_stages": true});
    let e = planner("ilp", &opts).err().expect("refused");
    assert!(e.to_string().contains("madpipe"), "{e}");
}

#[test]
fn a_time_limit_is_never_an_error() {
    // Cases where no contiguous plan fits, so the search has no warm start: with a 1 ms
    // limit it may stop before any plan; that is a "timeout" (period null), not an error.
    let mut cases = 0;
    for seed in 0..40u64 {
        let inst = chain(seed, 6);
        let platform = Platform::new(3, 0.4 * one_processor_memory(&inst), 6.0);
        let contiguous = contiguous_optimum(&inst, &platform, None).unwrap();
        if contiguous.best.is_some() {
            continue;
        }
        cases += 1;
        let opts = serde_json::json!({"time_limit": 1e-3});
        let (_, report) = plan_with("ilp", &opts, &inst, &platform);
        assert!(
            matches!(
                report.status,
                Status::Timeout | Status::Valid | Status::Infeasible
            ),
            "seed {seed}: {:?} {:?}",
            report.status,
            report.messages
        );
        if report.status == Status::Timeout && report.period.is_none() {
            assert!(report.messages.iter().any(|m| m.contains("time limit")));
            assert!(report.lower_bound.is_some());
        }
        if cases == 3 {
            break;
        }
    }
    assert!(cases > 0, "no case without a contiguous plan");
}

/// The two searches (allocations enumerated, one monolithic MILP) solve the same problem:
/// same optimum within the period precision, same infeasibility, both proven.
#[test]
fn enumerated_and_monolithic_searches_agree() {
    let mut compared = 0;
    for seed in 0..6u64 {
        let inst = chain(seed, 4 + seed as usize % 2);
        let full = one_processor_memory(&inst);
        // The last in full duplex: one resource per direction of a link, in the monolithic
        // MILP's disjunctions as in the scheduling MILP's batch graph.
        for &(processors, share, duplex) in &[
            (2usize, 0.7, false),
            (3, 0.5, false),
            (3, 1.5, false),
            (3, 0.5, true),
        ] {
            let mut platform = Platform::new(processors, share * full, 6.0);
            platform.full_duplex = duplex;
            let opts = MilpOptions::default();
            let e =
                general_optimum_by(&inst, &platform, None, IlpSearch::Enumerate, &opts).unwrap();
            let m =
                general_optimum_by(&inst, &platform, None, IlpSearch::Monolithic, &opts).unwrap();
            assert_eq!(e.status, m.status, "seed {seed} P {processors} x{share}");
            match (&e.best, &m.best) {
                (None, None) => {}
                (Some((ea, ep)), Some((ma, mp))) => {
                    assert!(
                        (ep.period - mp.period).abs() <= 2e-4 * mp.period,
                        "seed {seed} P {processors} x{share}: enumerate {} monolithic {}",
                        ep.period,
                        mp.period
                    );
                    for (a, p) in [(ea, ep), (ma, mp)] {
                        let j = judge(&inst, &platform, a, p);
                        assert!(j.valid, "{:?}", j.violations);
                    }
                    compared += 1;
                }
                _ => panic!("seed {seed}: one search found a plan, the other not"),
            }
        }
    }
    assert!(compared >= 8, "only {compared} optima compared");
}

/// Where consecutive layers share a stashed tensor, a plan may keep both in one stage (the
/// tensor once), which the general MILP, a stage per group, does not see: its bound must then
/// fall back to the instance bounds. Checked against the best plan of every assignment over
/// every stage structure, on a chain (every layer sharing a tensor with the next) where that
/// best plan is not contiguous and merges stages: the search's own bound is above it.
#[test]
fn the_bound_holds_where_layers_share_tensors() {
    use pipeopt::milp::fixed_allocation::schedule_assignment_below;
    use pipeopt::milp::general::for_each_allocation;
    let mut inst = random_chain(37, 5);
    for l in 0..inst.len() - 1 {
        let own = inst.stash(l + 1);
        inst.layers[l].stash = Some(own + inst.layers[l].out);
        inst.layers[l].stash_overlap = Some(inst.layers[l].out);
    }
    inst.check().unwrap();
    let platform = Platform::new(2, 1.1 * one_processor_memory(&inst), 1.0);
    let options = MilpOptions::default();
    let mut optimum = f64::INFINITY;
    for_each_allocation(inst.len(), 2, |a| {
        let (_, out) = schedule_assignment_below(&inst, &platform, a, &options, None).unwrap();
        optimum = optimum.min(out.period.unwrap_or(f64::INFINITY));
    });
    for search in [IlpSearch::Enumerate, IlpSearch::Monolithic] {
        let out = general_optimum_by(&inst, &platform, None, search, &options).unwrap();
        assert!(
            out.lower_bound <= optimum * (1.0 + 2e-4),
            "{search:?}: bound {} above a plan at {optimum}",
            out.lower_bound
        );
        // The case the fallback exists for: the search's own bound is above that plan.
        assert!(
            out.group_lower_bound > optimum * 1.05,
            "{search:?}: {out:?}"
        );
    }
}

/// `--ilp-search enumerate` on a chain with more allocations than the enumeration takes
/// (14 layers on 4 processors: over ten million) does not start listing them, which would
/// outlast any time limit: it keeps its warm start and says why.
#[test]
fn enumerate_refuses_more_allocations_than_it_takes() {
    let inst = chain(1, 14);
    let platform = Platform::new(4, one_processor_memory(&inst), 6.0);
    let started = std::time::Instant::now();
    let out = general_optimum_by(
        &inst,
        &platform,
        None,
        IlpSearch::Enumerate,
        &MilpOptions::default(),
    )
    .unwrap();
    assert!(started.elapsed().as_secs_f64() < 30.0);
    let note = out.note.expect("a note");
    assert!(note.contains("not enumerated"), "{note}");
    let (alloc, pattern) = out.best.expect("the warm start");
    assert!(judge(&inst, &platform, &alloc, &pattern).valid);
    assert_eq!(out.status, SolveStatus::LimitWithIncumbent);
    assert!(out.lower_bound <= pattern.period);
}
