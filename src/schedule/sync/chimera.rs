//! Chimera (Li and Hoefler, SC 2021), as MixPipe (Zhang et al., *MixPipe: Efficient
//! Bidirectional Pipeline Parallelism for Training Large-Scale Models*, DAC 2023), section
//! II-B, Figure 1 and Table I describe it: two pipelines in opposite directions, each
//! worker holding stage s of the down pipeline and stage D-1-s of the up pipeline; K = D
//! micro-batches injected at once (D/2 into each pipeline), backwards as early as possible.
//!
//! Our streams come from `list` with K = D (D/2 per pipeline before the first backward,
//! at most D live per worker) and the oldest-micro-batch-first priority of Chimera's
//! drawings. With backward = 2 x forward and equal stages they take exactly 5D - 4 forward
//! times for N = D: D/2 - 1 bubbles of F + B plus D/2 - 1 forward times, i.e. MixPipe's
//! N_bubbles = (5D - 3K - 4)/3 at K = D, Gamma = 0 (Zhang et al., DAC 2023, eq. (1)),
//! exactly. Table I's bubble ratio (D-2)/(3D-2) is Chimera's own closed form for forward =
//! backward: with equal forward and backward times our streams take exactly 3D - 2 and
//! match it exactly.
//!
//! Exactness (`milp::sync_schedule`, proven by the MILP on Chimera's placement with at most
//! D live micro-batches per worker, equal stages, N = D): the minimum iteration is exactly
//! 3D - 2 forward times for backward = forward (D = 4, 8, 16) and 5D - 4 for backward =
//! 2 x forward (D = 8, 16; at D = 8 also without any memory limit). The drawings reach both,
//! but each only for the ratio it was drawn for: replayed with B = F, the B = 2F drawing
//! takes 24 instead of 22 at D = 8. `chimera_for` therefore keeps the fastest drawing on
//! the costs at hand. Table I's (D-2)/(3D-2) is thus exact for B = F at every D we checked;
//! with B = 2F no order on Chimera's placement does better than (2D-4)/(5D-4).
//!
//! For N > D, `chimera` simply continues with the same rules (D/2 injected per pipeline, at
//! most D live per worker) over N/2 micro-batches per pipeline, which is close to the direct
//! concatenation of basic units of MixPipe's Figure 6(b). `forward_doubling` is Chimera's
//! own scaling method, "forward doubling" (Li and Hoefler, SC 2021, section 3.5), as
//! MixPipe's section III-C describes it when it compares K maximizing with it: the basic
//! unit holds 2D micro-batches instead of D, the forwards are doubled (two micro-batches'
//! forwards run together, so that a doubled forward costs about one backward and units
//! concatenate without the intermediate bubbles that direct concatenation leaves when
//! backward = 2 x forward), and the peak activation memory is 2D M_a ("forward doubling
//! with 2D M_a"). Our reading, since neither paper gives an algorithm: each pipeline injects
//! D micro-batches (D/2 doubled forwards) before its first backward, a worker holds at most
//! 2D live micro-batches, the pairs are (0, 1), (2, 3), ... of each pipeline, a doubled
//! forward runs the pair back to back as one operation of two forward times whose outputs
//! leave together, backwards are single, and the oldest micro-batch goes first (Chimera's
//! drawings). With H = N / D odd, the last D micro-batches form a plain unit (no doubling):
//! that is where MixPipe (DAC 2023) says K maximizing has "fewer bubbles than forward
//! doubling".

use super::list::{self, Priority, Rules};
use super::registry::{Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::sim::{simulate, Execution, StageCosts};
use super::{shape_error, Schedule, SyncError};

pub static CHIMERA: ScheduleDescriptor = ScheduleDescriptor {
    name: "chimera",
    label: "Chimera",
    help: "Chimera: two pipelines in opposite directions, D micro-batches injected at once \
           (the fastest of its drawings on the costs at hand)",
    paper: "Li and Hoefler, SC 2021",
    bidirectional: true,
    generate: |d, n, _, costs| match costs {
        Some(costs) => chimera_for(d, n, costs),
        None => chimera(d, n),
    },
    approach: Some(|d, n| {
        // Chimera's own scaling for N > D (forward doubling) when N is a multiple of D.
        if n >= 2 * d && d > 0 && n % d == 0 {
            vec![CHIMERA.kind(), CHIMERA_DOUBLING.kind()]
        } else {
            vec![CHIMERA.kind()]
        }
    }),
    // Table I of Zhang et al., DAC 2023 (Chimera's closed form for forward = backward).
    paper_bubble: |d, n, _| (n == d).then(|| (d as f64 - 2.0) / (3.0 * d as f64 - 2.0)),
    warm_start: Some(WarmStart {
        placements: &[Placement::Bidirectional],
        rank: 0,
        // Drawn for backward = forward: the optimum on costs near that ratio.
        other_drawing: Some(|d, n| {
            let drawn = (n >= d && d % 2 == 0).then(|| chimera_drawn_for(d, n, 1).ok())??;
            Some(("chimera (drawn for B = F)".into(), drawn))
        }),
    }),
    ..DEFAULTS
};

pub static CHIMERA_DOUBLING: ScheduleDescriptor = ScheduleDescriptor {
    name: "chimera-doubling",
    label: "Chimera (forward doubling)",
    help: "Chimera's forward doubling for N a multiple of D, N >= 2D: basic units of 2D \
           micro-batches, forwards run in pairs",
    paper: "Li and Hoefler, SC 2021, section 3.5",
    bidirectional: true,
    generate: |d, n, _, _| forward_doubling(d, n),
    warm_start: Some(WarmStart {
        placements: &[Placement::Bidirectional],
        rank: 1,
        other_drawing: None,
    }),
    ..DEFAULTS
};

/// Chimera's streams for `d` stages (even) and `n` micro-batches (even, at least `d`),
/// drawn for backward = 2 x forward.
pub fn chimera(d: usize, n: usize) -> Result<Schedule, SyncError> {
    chimera_drawn_for(d, n, list::BACKWARD_TICKS)
}

/// Chimera's streams drawn for a backward of `backward_ticks` forward times (1 gives
/// Chimera's own forward = backward drawings).
pub fn chimera_drawn_for(d: usize, n: usize, backward_ticks: u64) -> Result<Schedule, SyncError> {
    if d % 2 != 0 || n % 2 != 0 || n < d {
        return Err(shape_error(
            "chimera",
            format!("needs an even D, an even N and N >= D (got D = {d}, N = {n})"),
        ));
    }
    let rules = Rules {
        stages: d,
        micro_batches: n,
        bidirectional: true,
        initial_per_pipeline: d / 2,
        live_cap: d,
        priority: Priority::MicroBatchOrder,
        alternate_entry: false,
        backward_ticks,
        doubled_per_pipeline: 0,
    };
    Ok(list::run(&rules, "chimera")?.schedule)
}

/// Chimera's forward doubling (module docs) for `d` stages (even) and `n` micro-batches, a
/// multiple of `d` with at least two basic units (N >= 2D), drawn for backward = 2 x forward
/// (the ratio at which a doubled forward costs one backward).
pub fn forward_doubling(d: usize, n: usize) -> Result<Schedule, SyncError> {
    if d % 2 != 0 || d == 0 || n % d != 0 || n < 2 * d {
        return Err(shape_error(
            "chimera-doubling",
            format!(
                "needs an even D and N a multiple of D with N >= 2D (two basic units of D \
                 micro-batches at least; got D = {d}, N = {n}); for N = D use chimera"
            ),
        ));
    }
    let units = n / d;
    let rules = Rules {
        stages: d,
        micro_batches: n,
        bidirectional: true,
        initial_per_pipeline: d,
        live_cap: 2 * d,
        priority: Priority::MicroBatchOrder,
        alternate_entry: false,
        backward_ticks: list::BACKWARD_TICKS,
        doubled_per_pipeline: (units - units % 2) * d / 2,
    };
    Ok(list::run(&rules, "chimera-doubling")?.schedule)
}

/// Chimera's streams for the stage costs at hand: the drawings for backward = 1, 2 and 3
/// forward times, replayed on `costs`, the fastest kept (ties: the first). The streams drawn
/// for B = 2F replayed with B = F lose one bubble of F + B at D = 8 (24 forward times
/// against 3D - 2 = 22, which the exact MILP on Chimera's placement proves optimal).
pub fn chimera_for(d: usize, n: usize, costs: &StageCosts) -> Result<Schedule, SyncError> {
    let mut best: Option<(f64, Schedule)> = None;
    for ticks in [list::BACKWARD_TICKS, 1, 3] {
        let s = chimera_drawn_for(d, n, ticks)?;
        let Ok(r) = simulate(&s, costs, Execution::Serial) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(m, _)| r.makespan_seconds < m * (1.0 - 1e-12))
        {
            best = Some((r.makespan_seconds, s));
        }
    }
    match best {
        Some((_, s)) => Ok(s),
        None => chimera(d, n),
    }
}
