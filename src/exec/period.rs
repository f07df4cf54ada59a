//! The period a pattern achieves with other durations (measured ones).
//!
//! Definition: the pattern fixes, for every operation `o`, its resource, its shift `h_o` and
//! the cyclic order of the operations on each resource (by `t_o`, ties by index). With new
//! durations `d_o`, the replayed period is the smallest `T'` for which start times `s_o`
//! (of batch 0) exist with
//! - every dependency `u -> v` of a batch: `s_v >= s_u + d_u`;
//! - consecutive operations `a, b` on a resource: `s_b - h_b T' >= s_a - h_a T' + d_a`, and
//!   around the period for the last `z` and the first `f`: `s_f - h_f T' + T' >= s_z - h_z T'
//!   + d_z`.
//!
//! This is the cyclic-scheduling fixed-order problem: feasible iff the constraint graph
//! with weights `d_u + c T'` has no positive cycle; every resource cycle has `c = -1`, so
//! feasibility is monotone in `T'` and a bisection on `T'` (Bellman-Ford at each step)
//! finds it to relative 1e-9. It equals the largest ratio over cycles of duration sum to
//! period count: at least every resource's busy time.

use crate::model::{BatchGraph, Pattern, Resource};
use crate::units::Seconds;

/// The replayed period of `pattern` over `graph` with durations `d` (indexed like
/// `graph.ops`). `None` when the pattern lacks an operation of the graph or no period works
/// (a dependency cycle within one period).
pub fn replayed_period(graph: &BatchGraph, pattern: &Pattern, d: &[Seconds]) -> Option<Seconds> {
    let n = graph.ops.len();
    if d.len() != n {
        return None;
    }
    let mut place = Vec::with_capacity(n);
    for op in &graph.ops {
        let p = pattern.get(op.id)?;
        place.push((p.start, p.shift));
    }
    // Edges (u, v, const, coefficient of T): s_v >= s_u + const + coef T.
    let mut edges: Vec<(usize, usize, f64, f64)> =
        graph.deps.iter().map(|&(u, v)| (u, v, d[u], 0.0)).collect();
    let mut resources: Vec<Resource> = graph.ops.iter().map(|o| o.resource).collect();
    resources.sort();
    resources.dedup();
    for r in resources {
        let mut on: Vec<usize> = (0..n).filter(|&i| graph.ops[i].resource == r).collect();
        on.sort_by(|&a, &b| place[a].0.total_cmp(&place[b].0).then(a.cmp(&b)));
        for w in 0..on.len() {
            let a = on[w];
            let (b, wrap) = if w + 1 < on.len() {
                (on[w + 1], 0.0)
            } else {
                (on[0], 1.0)
            };
            // s_b >= s_a + d_a + (h_b - h_a - wrap) T
            edges.push((a, b, d[a], (place[b].1 - place[a].1) as f64 - wrap));
        }
    }
    let total: f64 = d.iter().sum();
    let feasible = |t: f64| -> bool {
        let mut s = vec![0.0f64; n];
        let tol = 1e-12 * (total + t).max(1e-300);
        for _ in 0..=n {
            let mut changed = false;
            for &(u, v, c, k) in &edges {
                let cand = s[u] + c + k * t;
                if cand > s[v] + tol {
                    s[v] = cand;
                    changed = true;
                }
            }
            if !changed {
                return true;
            }
        }
        false
    };
    let mut hi = total.max(1e-300);
    if !feasible(hi) {
        return None;
    }
    let mut lo = 0.0;
    if feasible(lo) {
        return Some(0.0);
    }
    while hi - lo > 1e-9 * hi {
        let mid = 0.5 * (lo + hi);
        if feasible(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}
