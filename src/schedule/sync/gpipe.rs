//! GPipe (Huang et al. 2019): every worker runs the forwards of all N micro-batches, then
//! all their backwards in reverse order, then the flush. Stage s on worker s.

use super::registry::{one_direction_bubble, Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{b, f, Schedule};

pub static GPIPE: ScheduleDescriptor = ScheduleDescriptor {
    name: "gpipe",
    label: "GPipe",
    help: "GPipe: all forwards, then all backwards, then the flush",
    paper: "Huang et al., NeurIPS 2019",
    generate: |d, n, _, _| Ok(gpipe(d, n)),
    approach: Some(|_, _| vec![GPIPE.kind()]),
    paper_bubble: |d, n, _| Some(one_direction_bubble(d, n)),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 1,
        other_drawing: None,
    }),
    ..DEFAULTS
};

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
