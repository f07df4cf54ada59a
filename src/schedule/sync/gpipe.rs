//! GPipe (Huang et al. 2019): every worker runs the forwards of all N micro-batches, then
//! all their backwards in reverse order, then the flush. Stage s on worker s.

use super::{b, f, Schedule};

/// GPipe's streams for `d` stages and `n` micro-batches.
pub fn gpipe(d: usize, n: usize) -> Schedule {
    (0..d)
        .map(|s| {
            (0..n)
                .map(|i| f(s, i))
                .chain((0..n).rev().map(|i| b(s, i)))
                .collect()
        })
        .collect()
}
