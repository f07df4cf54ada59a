//! Tests of the general MILP: both searches, coarsening, the enumeration of allocations.

use super::monolithic::*;
use super::*;
use crate::model::chain;

#[test]
fn coarsen_minimises_the_largest_group() {
    // U = 2, 2, 2, 6, 2, 2 into 3 groups: {2,2,2} {6} {2,2} -> largest 6.
    let inst = chain(
        &[1.0, 1.0, 1.0, 3.0, 1.0, 1.0],
        &[1.0, 1.0, 1.0, 3.0, 1.0, 1.0],
        &[1.0; 6],
        &[5.0; 6],
        1.0,
    );
    let ranges = coarsen(&inst, 3);
    let g = group_instance(&inst, &ranges);
    assert_eq!(ranges, vec![(1, 3), (4, 4), (5, 6)]);
    assert_eq!(g.len(), 3);
    assert_eq!(g.layers[0].fwd, 3.0);
    assert_eq!(g.layers[0].weights, 3.0);
    assert_eq!(g.layers[2].out, 5.0);
    let same = coarsen(&inst, 10);
    assert_eq!(same.len(), 6);
}

#[test]
fn allocations_are_counted_and_listed_up_to_relabelling() {
    // Bell numbers when P >= G; S(8,1..=4) = 1 + 127 + 966 + 1701.
    assert_eq!(allocation_count(8, 8), 4140);
    assert_eq!(allocation_count(8, 12), 4140);
    assert_eq!(allocation_count(8, 4), 2795);
    assert_eq!(allocation_count(1, 3), 1);
    assert!(allocation_count(16, 4) > MAX_ENUMERATED);
    for (g, p) in [(5, 2), (5, 3), (6, 6), (4, 1)] {
        let mut seen = std::collections::HashSet::new();
        for_each_allocation(g, p, |a| {
            assert_eq!(a[0], 0);
            // Restricted growth: each processor opens after the previous one.
            let mut open = 0;
            for &q in a {
                assert!(q <= open && q < p, "{a:?}");
                open = open.max(q + 1);
            }
            assert!(seen.insert(a.to_vec()));
        });
        assert_eq!(seen.len() as u128, allocation_count(g, p), "G {g} P {p}");
    }
}

#[test]
fn ops_indices_form_the_chain() {
    for g_n in 1..5 {
        let ops = Ops { groups: g_n };
        let mut seen = vec![false; ops.len()];
        for g in 0..g_n {
            seen[ops.f(g)] = true;
            seen[ops.b(g)] = true;
        }
        for c in 0..g_n - 1 {
            seen[ops.cf(c)] = true;
            seen[ops.cb(c)] = true;
            assert_eq!(ops.cf(c), ops.f(c) + 1);
            assert_eq!(ops.cb(c), ops.b(c + 1) + 1);
            assert_eq!(ops.b(c), ops.cb(c) + 1);
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(ops.b(g_n - 1), ops.f(g_n - 1) + 1);
    }
}
