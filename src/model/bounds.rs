//! Lower bounds on the period of every plan of an instance on a platform.
//!
//! These hold for every valid periodic pattern of every allocation (docs/model.md sections
//! 3 to 6), contiguous or not:
//! - **load**: the `P` processors together do `U(1,L)` of work per period: `T >= U(1,L)/P`;
//! - **layer**: a layer's F and B run on one processor, back to back or not, within each
//!   period: `T >= U(l,l)` for the heaviest layer;
//! - **link**: a period shorter than `U(1,L)` needs two processors, hence a cut whose two
//!   transfers (CF, CB: `a(c)/beta` each) share one link (half duplex; one transfer each way
//!   in full duplex): `T >= min(U(1,L), min_c C(c))` with `C(c) = 2 a(c)/beta`
//!   (`a(c)/beta` in full duplex), `c` over the cuts `1..L-1`.
//!
//! The MILPs add their own proven bounds on top (see `milp::general`).
//!
//! [`allocation_lower_bound`] bounds the patterns of one allocation (one [`BatchGraph`]),
//! memory included; the general MILP sorts allocations by it and the scheduling MILP starts
//! its search there.

use crate::model::{BatchGraph, Instance, Platform};
use crate::units::{Bytes, Seconds};

/// The three bounds of the module docs, by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodBounds {
    pub load: Seconds,
    pub layer: Seconds,
    pub link: Seconds,
}

impl PeriodBounds {
    /// The largest of the three.
    pub fn max(&self) -> Seconds {
        self.load.max(self.layer).max(self.link)
    }
}

/// The bounds of the module docs for `instance` on `platform`.
pub fn period_bounds(instance: &Instance, platform: &Platform) -> PeriodBounds {
    let sums = instance.sums();
    let l = instance.len();
    let total = sums.u(1, l);
    let load = total / platform.processors.max(1) as f64;
    let layer = (1..=l).map(|i| sums.u(i, i)).fold(0.0, f64::max);
    let per_cut = if platform.full_duplex { 1.0 } else { 2.0 };
    let cheapest_cut = (1..l)
        .map(|c| per_cut * sums.a(c) / platform.bandwidth)
        .fold(f64::INFINITY, f64::min);
    let link = if platform.processors >= 2 && l >= 2 {
        total.min(cheapest_cut)
    } else {
        // One processor (or one layer): no cut can help, the period is at least U(1,L).
        total
    };
    PeriodBounds { load, layer, link }
}

/// The largest bound of [`period_bounds`].
pub fn period_lower_bound(instance: &Instance, platform: &Platform) -> Seconds {
    period_bounds(instance, platform).max()
}

/// A lower bound on the period of every pattern of `graph` (one allocation) that fits
/// `memory`, `f64::INFINITY` when none can:
/// - **resources**: every processor and link does its operations' durations once per period;
/// - **windows**: an item is held from the start of its allocating operation to the end of
///   the freeing one, at least the durations of the operations between them along the chain
///   (`D_i`); over a period it is live `D_i / T` batches on average, so at least
///   `floor(D_i / T)` at every instant;
/// - **memory at an allocation**: at the start of item `i`'s allocating operation for batch
///   `b`, every item `j` of the processor whose window holds that operation keeps `b` and
///   the earlier batches still inside their window, at least `ceil(D(i -> j) / T)` with
///   `D(i -> j)` the durations from that start to the end of `j`'s freeing operation; the
///   others keep at least `floor(D_j / T)`; with the static memory this must fit `M`. The
///   need only decreases with `T`, and the smallest fitting `T` is found by bisection (the
///   bound is its infeasible side). With one item per processor this is 1F1B*'s `g` live
///   batches (Beaumont et al., ScaDL 2022, section 4.1) up to grouping;
/// - **average memory**: a processor's memory averages `static + sum_i bytes_i D_i / T` over
///   a period and peaks above its average: `T >= sum_i bytes_i D_i / (M - static)`.
///
/// Memory comparisons allow the judge's relative tolerance (`1e-12`), and the windows use the
/// exact durations, so the bound holds for every pattern the judge accepts.
pub fn allocation_lower_bound(graph: &BatchGraph, memory: Bytes) -> Seconds {
    let Some(order) = graph.chain_order() else {
        // Not a single chain (no such graph is built today): the resource bound only.
        return resource_load_bound(graph);
    };
    // Position of every operation along the batch's chain, and prefix sums of durations.
    let mut position = vec![0; graph.ops.len()];
    let mut prefix = Vec::with_capacity(order.len() + 1);
    prefix.push(0.0);
    for (k, &i) in order.iter().enumerate() {
        position[i] = k;
        prefix.push(prefix[k] + graph.ops[i].duration);
    }
    // Durations along the chain from the start of the operation at position `from` to the
    // end of the one at position `until`.
    let span = |from: usize, until: usize| prefix[until + 1] - prefix[from];
    let limit = memory * (1.0 + 1e-12);
    let mut bound = resource_load_bound(graph);
    // Per processor, its items with positive bytes, their operations as chain positions.
    let mut per_processor: Vec<Vec<Window>> = Vec::with_capacity(graph.processors);
    for (p, &fixed) in graph.static_memory.iter().enumerate() {
        let free = limit - fixed;
        if free < 0.0 {
            return f64::INFINITY;
        }
        let items: Vec<Window> = graph
            .held
            .iter()
            .filter(|h| h.processor == p && h.bytes > 0.0)
            .map(|h| Window {
                bytes: h.bytes,
                from: position[h.from],
                until: position[h.until],
            })
            .collect();
        let average: f64 = items.iter().map(|w| w.bytes * span(w.from, w.until)).sum();
        if free > 0.0 {
            bound = bound.max(average / free);
        }
        per_processor.push(items);
    }
    // At the start of item i's allocating operation (instant tau, batch b), every item j of
    // the processor whose window holds that operation keeps batch b and the earlier
    // batches whose freeing operation ends after tau: at least
    // ceil(span(from_i, until_j) / T); every other item j keeps at least floor(D_j / T) at
    // any instant. The memory this needs only decreases with T.
    let fits = |t: Seconds| -> bool {
        for (items, &fixed) in per_processor.iter().zip(&graph.static_memory) {
            let free = limit - fixed;
            for i in items {
                let mut need = 0.0;
                for j in items {
                    let copies = if j.from <= i.from && i.from <= j.until {
                        (span(i.from, j.until) / t).ceil()
                    } else {
                        (span(j.from, j.until) / t).floor()
                    };
                    need += j.bytes * copies;
                }
                if need > free {
                    return false;
                }
            }
        }
        true
    };
    if !fits(f64::INFINITY) {
        return f64::INFINITY;
    }
    if bound <= 0.0 || fits(bound) {
        return bound;
    }
    // Smallest fitting period: doubling, then bisection; `lo` never fits (a lower bound).
    let mut lo = bound;
    let mut hi = 2.0 * bound;
    while !fits(hi) {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi || hi - lo <= 1e-12 * hi {
            break;
        }
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    lo
}

/// An item of memory held per batch, its allocating and freeing operations as positions
/// along the batch's chain.
struct Window {
    bytes: Bytes,
    from: usize,
    until: usize,
}

/// The largest total duration of one resource's operations (every pattern's period is at
/// least that).
pub fn resource_load_bound(graph: &BatchGraph) -> Seconds {
    let mut loads: std::collections::BTreeMap<crate::model::Resource, f64> = Default::default();
    for op in &graph.ops {
        *loads.entry(op.resource).or_default() += op.duration;
    }
    loads.values().copied().fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::chain;

    #[test]
    fn bounds_on_a_small_chain() {
        // U = 3, 5, 2 (total 10); a = 1, 4 bytes at the cuts; beta = 1 B/s.
        let inst = chain(
            &[1.0, 2.0, 1.0],
            &[2.0, 3.0, 1.0],
            &[0.0; 3],
            &[1.0, 4.0, 1.0],
            1.0,
        );
        let mut plat = Platform::new(4, 1e12, 1.0);
        let b = period_bounds(&inst, &plat);
        assert_eq!(b.load, 2.5);
        assert_eq!(b.layer, 5.0);
        assert_eq!(b.link, 2.0); // min(10, 2 * 1 / 1)
        assert_eq!(period_lower_bound(&inst, &plat), 5.0);
        plat.full_duplex = true;
        assert_eq!(period_bounds(&inst, &plat).link, 1.0);
        let one = Platform::new(1, 1e12, 1.0);
        assert_eq!(period_lower_bound(&inst, &one), 10.0);
    }
}
