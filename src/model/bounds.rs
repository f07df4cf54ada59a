//! Lower bounds on the period of every plan of an instance on a platform (issue 4, item 6).
//!
//! These hold for every valid periodic pattern of every allocation (MODEL.md sections 3 to
//! 6), contiguous or not:
//! - **load**: the `P` processors together do `U(1,L)` of work per period: `T >= U(1,L)/P`;
//! - **layer**: a layer's F and B run on one processor, back to back or not, within each
//!   period: `T >= U(l,l)` for the heaviest layer;
//! - **link**: a period shorter than `U(1,L)` needs two processors, hence a cut whose two
//!   transfers (CF, CB: `a(c)/beta` each) share one link (half duplex; one transfer each way
//!   in full duplex): `T >= min(U(1,L), min_c C(c))` with `C(c) = 2 a(c)/beta`
//!   (`a(c)/beta` in full duplex), `c` over the cuts `1..L-1`.
//!
//! The MILPs add their own proven bounds on top (see `milp::general`).

use crate::model::{Instance, Platform};
use crate::units::Seconds;

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
