//! Assignments of layers to processors, as `best`'s seeds, local search and exact checks
//! handle them: an allocation's assignment, its neighbours, its lower bound over every stage
//! structure, and the stage structure it is scheduled with on long chains.

use std::collections::HashSet;

use crate::milp::fixed_allocation::{assignment_structures, runs_of, structures_lower_bound};
use crate::milp::global_bound::anneal::canonical;
use crate::model::{Allocation, Instance, Platform, Stage};
use crate::units::Seconds;

/// Processor of each layer (0-based) of an allocation.
pub(super) fn assignment_of(allocation: &Allocation, layers: usize) -> Vec<usize> {
    let mut a = vec![0; layers];
    for s in &allocation.stages {
        for l in s.first..=s.last {
            a[l - 1] = s.processor;
        }
    }
    a
}

/// Which stage structures of an assignment the scheduling MILP decides among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Structures {
    /// Every structure
    /// ([`schedule_assignment_below`](crate::milp::fixed_allocation::schedule_assignment_below))
    /// on chains of at most
    /// `FINEST_SEARCH_LAYERS` layers, the runs cut by [`refined_runs`] on longer ones.
    Every,
    /// One stage per run of layers (a much smaller MILP).
    Runs,
}

/// Chains of at most this many layers are searched over every stage structure of an
/// assignment (a stage per layer, merges of layers that share a tensor decided by the
/// MILP); longer ones with their runs of layers cut into a few stages ([`refined_runs`]),
/// whose MILP is much smaller (a plan search then, not exact for the assignment).
pub(super) const FINEST_SEARCH_LAYERS: usize = 40;

/// The most stages [`refined_runs`] cuts an assignment into.
const REFINED_STAGES: usize = 24;

/// [`refined_runs`] cuts runs only on chains of at most this many layers (a bound per
/// possible cut per step: op-level chains of 174-426 layers keep one stage per run).
const REFINED_MAX_LAYERS: usize = 100;

/// On chains longer than `FINEST_SEARCH_LAYERS`, the stage structure the seeds and the
/// local search schedule an assignment with, below the incumbent's period `cutoff`: its
/// runs of layers, each cut further where the allocation bound (loads and memory windows,
/// microseconds) says a finer stage helps most (it frees its stash at its own backward),
/// one cut at a time, while that bound is at or above `cutoff`, and then while a cut
/// lowers it by at least 1%; at most `REFINED_STAGES` stages. One stage per run holds its
/// stash over the window of its first layer, which bounds most neighbours of a plan above
/// it and ends the local search at once (docs/bounds.md, "Plans on long chains").
pub(super) fn refined_runs(
    instance: &Instance,
    platform: &Platform,
    assignment: &[usize],
    cutoff: Option<Seconds>,
) -> Allocation {
    let mut allocation = runs_of(assignment);
    let Some(cutoff) = cutoff else {
        return allocation;
    };
    if assignment.len() > REFINED_MAX_LAYERS {
        return allocation;
    }
    // The allocation bound of exactly these stages (none merged).
    let bound_of = |a: &Allocation| structures_lower_bound(instance, platform, a, &[]);
    let mut bound = bound_of(&allocation);
    while allocation.stages.len() < REFINED_STAGES {
        let mut better: Option<(Seconds, Allocation)> = None;
        for (s, stage) in allocation.stages.iter().enumerate() {
            for last in stage.first..stage.last {
                let mut stages = allocation.stages.clone();
                stages[s].last = last;
                stages.insert(
                    s + 1,
                    Stage {
                        first: last + 1,
                        last: stage.last,
                        processor: stage.processor,
                    },
                );
                let candidate = Allocation::new(stages);
                let b = bound_of(&candidate);
                if b < better.as_ref().map_or(bound, |(t, _)| *t) {
                    better = Some((b, candidate));
                }
            }
        }
        let Some((b, finer)) = better else {
            break;
        };
        if bound < cutoff && b > bound * 0.99 {
            break;
        }
        allocation = finer;
        bound = b;
    }
    allocation
}

/// A lower bound on the period of every stage structure of an assignment
/// ([`assignment_structures`]).
pub(super) fn assignment_lower_bound(
    instance: &Instance,
    platform: &Platform,
    assignment: &[usize],
) -> f64 {
    let (finest, mergeable) = assignment_structures(instance, assignment);
    structures_lower_bound(instance, platform, &finest, &mergeable)
}

/// The neighbours of an assignment (the local search's moves, module docs of `best`),
/// canonical, without repeats.
pub(super) fn neighbours(assignment: &[usize], processors: usize) -> Vec<Vec<usize>> {
    let n = assignment.len();
    let used = assignment.iter().copied().max().map_or(0, |m| m + 1);
    let targets = used.min(processors - 1) + 1; // the used processors and one fresh one
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |a: Vec<usize>| {
        let c = canonical(&a);
        if seen.insert(c.clone()) {
            out.push(c);
        }
    };
    // Runs of consecutive layers on one processor (0-based, inclusive).
    let runs: Vec<(usize, usize)> = runs_of(assignment)
        .stages
        .iter()
        .map(|s| (s.first - 1, s.last - 1))
        .collect();
    // Move one layer to another processor (a cut shifted by one layer, or a layer split
    // off onto a processor of its own).
    for l in 0..n {
        for q in 0..targets {
            if q != assignment[l] {
                let mut a = assignment.to_vec();
                a[l] = q;
                push(a);
            }
        }
    }
    // Move a run to another processor.
    for &(first, last) in &runs {
        for q in 0..targets {
            if q != assignment[first] {
                let mut a = assignment.to_vec();
                a[first..=last].iter_mut().for_each(|p| *p = q);
                push(a);
            }
        }
    }
    // Exchange the processors of two runs.
    for (i, &(f1, l1)) in runs.iter().enumerate() {
        for &(f2, l2) in &runs[i + 1..] {
            let (p1, p2) = (assignment[f1], assignment[f2]);
            if p1 != p2 {
                let mut a = assignment.to_vec();
                a[f1..=l1].iter_mut().for_each(|p| *p = p2);
                a[f2..=l2].iter_mut().for_each(|p| *p = p1);
                push(a);
            }
        }
    }
    out.retain(|a| a != &canonical(assignment));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_and_runs() {
        assert_eq!(canonical(&[2, 2, 0, 1, 0]), vec![0, 0, 1, 2, 1]);
        let a = runs_of(&[0, 0, 1, 0]);
        assert_eq!(a.stages.len(), 3);
        assert_eq!(assignment_of(&a, 4), vec![0, 0, 1, 0]);
        let n = neighbours(&[0, 0, 1, 1], 3);
        assert!(n.contains(&vec![0, 0, 0, 1]));
        assert!(n.contains(&vec![0, 1, 1, 1]));
        assert!(n.contains(&vec![0, 0, 0, 0]));
        assert!(n.contains(&vec![0, 0, 1, 2]));
        assert!(!n.contains(&vec![0, 0, 1, 1]));
        assert!(n.iter().all(|a| a == &canonical(a)));
    }

    /// The refined structure keeps the assignment, stops at its cap, never raises the
    /// bound of one stage per run, and lowers it where memory binds.
    #[test]
    fn refined_runs_cut_runs_where_the_bound_falls() {
        let instance = crate::nets::random::random_chain(3, 30);
        let full = crate::nets::random::one_processor_memory(&instance);
        let assignment: Vec<usize> = (0..30).map(|l| usize::from(l >= 12)).collect();
        let runs = runs_of(&assignment);
        let mut lowered = 0;
        for share in [0.4, 0.5, 0.6, 0.7, 0.8, 1.0] {
            let platform = Platform::new(2, share * full, 6.0);
            let bound_of = |a: &Allocation| structures_lower_bound(&instance, &platform, a, &[]);
            // Without an incumbent, nothing to beat: one stage per run.
            assert_eq!(refined_runs(&instance, &platform, &assignment, None), runs);
            let runs_bound = bound_of(&runs);
            let cutoff = if runs_bound.is_finite() {
                0.5 * runs_bound
            } else {
                1.0
            };
            let refined = refined_runs(&instance, &platform, &assignment, Some(cutoff));
            refined.check(30, 2).unwrap();
            assert_eq!(assignment_of(&refined, 30), assignment);
            assert!(refined.stages.len() >= 2 && refined.stages.len() <= REFINED_STAGES);
            let refined_bound = bound_of(&refined);
            assert!(
                refined_bound <= runs_bound,
                "{refined_bound} above {runs_bound}"
            );
            if refined_bound < runs_bound * 0.99 {
                lowered += 1;
            }
        }
        assert!(
            lowered > 0,
            "no memory level where cutting runs lowers the bound"
        );
    }
}
