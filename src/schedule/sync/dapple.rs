//! DAPPLE (Fan et al. 2021): 1F1B with a flush. Worker s warms up with min(D - s, N)
//! forwards, then alternates one backward and one forward, then drains the backwards.

use super::registry::{one_direction_bubble, Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{b, f, Schedule};

pub static DAPPLE: ScheduleDescriptor = ScheduleDescriptor {
    name: "dapple",
    aliases: &["1f1b"],
    label: "DAPPLE",
    help: "DAPPLE: 1F1B with a flush, D - s warm-up forwards on worker s",
    paper: "Fan et al., PPoPP 2021",
    generate: |d, n, _, _| Ok(dapple(d, n)),
    approach: Some(|_, _| vec![DAPPLE.kind()]),
    paper_bubble: |d, n, _| Some(one_direction_bubble(d, n)),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 0,
        other_drawing: None,
    }),
    ..DEFAULTS
};

/// DAPPLE's streams for `d` stages and `n` micro-batches.
pub fn dapple(d: usize, n: usize) -> Schedule {
    one_f_one_b(d, n, |s| d - s)
}

/// 1F1B with a flush, worker `s` warming up with `min(warm_up(s), n)` forwards (DAPPLE:
/// `d - s`; BaPipe's variants choose other warm-ups).
pub(crate) fn one_f_one_b(d: usize, n: usize, warm_up: impl Fn(usize) -> usize) -> Schedule {
    (0..d)
        .map(|s| {
            let warm = warm_up(s).min(n);
            let mut out = Vec::with_capacity(2 * n);
            out.extend((0..warm).map(|i| f(s, i)));
            for i in 0..n {
                out.push(b(s, i));
                if warm + i < n {
                    out.push(f(s, warm + i));
                }
            }
            out
        })
        .collect()
}
