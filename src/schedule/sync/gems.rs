//! GEMS (Jain et al., SC 2020), as MixPipe (Zhang et al., *MixPipe: Efficient Bidirectional
//! Pipeline Parallelism for Training Large-Scale Models*, DAC 2023), section II-B and Table
//! I describe it: two
//! model replicas in opposite directions, K = 1 (one micro-batch injected before the first
//! backward), at most one live micro-batch per worker ("activations memory M_a"), so at most
//! two micro-batches run at the same time.
//!
//! Our reading: micro-batches enter alternately down, up, down, ...; each enters its first
//! worker once the previous one has finished its backward there, and a worker never holds
//! two live micro-batches (`list::Rules` with cap 1). Backwards go first.
//!
//! Where we depart: Table I's bubble ratio (D-1)/(D+1/2) is an approximation (the paper
//! writes ≈). Our streams, with backward = 2 x forward and equal stages, take exactly
//! 2D^2 + 2D - 1 forward times for N = D (Table I's form corresponds to 2D^2 + D: it drops
//! the last micro-batch's D-1 forward times of drain), so the exact bubble ratio is
//! (2D^2 - D - 1)/(2D^2 + 2D - 1); `tests/sync_closed_forms.rs` checks both.

use super::list::{self, Priority, Rules};
use super::registry::{Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{shape_error, Schedule, SyncError};

pub static GEMS: ScheduleDescriptor = ScheduleDescriptor {
    name: "gems",
    label: "GEMS",
    help: "GEMS: two replicas in opposite directions, one live micro-batch per worker",
    paper: "Jain et al., SC 2020",
    bidirectional: true,
    generate: |d, n, _, _| gems(d, n),
    approach: Some(|_, _| vec![GEMS.kind()]),
    // Table I of Zhang et al., DAC 2023 (an approximation, see above).
    paper_bubble: |d, n, _| (n == d).then(|| (d as f64 - 1.0) / (d as f64 + 0.5)),
    warm_start: Some(WarmStart {
        placements: &[Placement::Bidirectional, Placement::Gems],
        rank: 4,
        other_drawing: None,
    }),
    ..DEFAULTS
};

/// GEMS's streams for `d` stages and `n` micro-batches (`n` even: half per replica).
pub fn gems(d: usize, n: usize) -> Result<Schedule, SyncError> {
    if n % 2 != 0 {
        return Err(shape_error(
            "gems",
            format!("needs an even number of micro-batches (two replicas), got N = {n}"),
        ));
    }
    let rules = Rules {
        stages: d,
        micro_batches: n,
        bidirectional: true,
        initial_per_pipeline: 1,
        live_cap: 1,
        priority: Priority::BackwardFirst,
        alternate_entry: true,
        backward_ticks: list::BACKWARD_TICKS,
        doubled_per_pipeline: 0,
    };
    Ok(list::run(&rules, "gems")?.schedule)
}
