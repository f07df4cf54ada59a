//! Breadth-first pipeline parallelism (Lamy-Poirier, "Breadth-First Pipeline Parallelism",
//! MLSys 2023): the looped placement of interleaved 1F1B (`v` stages per worker, stage `s`
//! on worker `s mod P`, `P = D / v`), run breadth first: each worker runs every
//! micro-batch's forward of its first stage, then of its next one, and so on, then the
//! backwards stage by stage in reverse, the micro-batches in reverse order (as PyTorch's
//! `ScheduleLoopedBFS` draws them).
//!
//! **Closed form.** With equal stages (forward `F`, backward `B`), free transfers and
//! `N >= P` micro-batches, a micro-batch is back on worker 0 for its next stage after `P`
//! forwards, when worker 0 has just finished the others: the pipeline fills once, and the
//! bubble is interleaved 1F1B's, `(P - 1)(F + B)`, as a ratio `(P - 1) / (N v + P - 1)`; its
//! price is GPipe's memory, every micro-batch of every stage live at the turn (the paper
//! pairs it with sharded data parallelism, which the model does not have).

use super::registry::{Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{b, f, shape_error, Instr, Schedule, SyncError};

const PAPER: &str = "Lamy-Poirier, MLSys 2023";

pub static BREADTH_FIRST_2: ScheduleDescriptor = ScheduleDescriptor {
    name: "breadth-first-2",
    label: "Breadth-first (v = 2)",
    help: "breadth-first pipeline with 2 stages per worker (looped: stage s on worker s mod (D / 2)): every forward of a stage before the next stage's, GPipe's memory",
    paper: PAPER,
    stages_per_worker: 2,
    generate: |d, n, _, _| breadth_first(d, n, 2),
    approach: Some(|_, _| vec![BREADTH_FIRST_2.kind()]),
    paper_bubble: |d, n, _| breadth_first_bubble_ratio(d, n, 2),
    warm_start: Some(WarmStart {
        placements: &[Placement::Interleaved2],
        rank: 1,
        other_drawing: None,
    }),
    ..DEFAULTS
};

pub static BREADTH_FIRST_4: ScheduleDescriptor = ScheduleDescriptor {
    name: "breadth-first-4",
    label: "Breadth-first (v = 4)",
    help:
        "breadth-first pipeline with 4 stages per worker (looped: stage s on worker s mod (D / 4))",
    paper: PAPER,
    stages_per_worker: 4,
    generate: |d, n, _, _| breadth_first(d, n, 4),
    approach: Some(|_, _| vec![BREADTH_FIRST_4.kind()]),
    paper_bubble: |d, n, _| breadth_first_bubble_ratio(d, n, 4),
    warm_start: Some(WarmStart {
        placements: &[Placement::Interleaved4],
        rank: 1,
        other_drawing: None,
    }),
    ..DEFAULTS
};

/// The bubble ratio at equal stages and free transfers (module docs), from `N >= P` on;
/// `None` where the schedule does not exist or the form does not hold.
pub fn breadth_first_bubble_ratio(d: usize, n: usize, v: usize) -> Option<f64> {
    let p = d
        .checked_div(v)
        .filter(|&p| p > 0 && p * v == d && n >= p)?;
    let (p, n, v) = (p as f64, n as f64, v as f64);
    Some((p - 1.0) / (n * v + p - 1.0))
}

/// The breadth-first streams for `d` stages in `v` chunks per worker (`d / v` workers) and
/// `n` micro-batches.
pub fn breadth_first(d: usize, n: usize, v: usize) -> Result<Schedule, SyncError> {
    if v == 0 || d % v != 0 || d < v {
        return Err(shape_error(
            "breadth-first",
            format!("D = {d} stages do not split into {v} stages per worker"),
        ));
    }
    let p = d / v;
    Ok((0..p)
        .map(|r| {
            let stages: Vec<usize> = (r..d).step_by(p).collect();
            let forwards = stages.iter().flat_map(|&s| (0..n).map(move |m| f(s, m)));
            let backwards = stages
                .iter()
                .rev()
                .flat_map(|&s| (0..n).rev().map(move |m| b(s, m)));
            forwards.chain(backwards).collect::<Vec<Instr>>()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::sim::{simulate, Execution, StageCosts};
    use super::*;

    #[test]
    fn the_pipeline_fills_once() {
        for v in [2, 4] {
            for p in 1..=5 {
                let d = p * v;
                for n in p..=3 * p {
                    let s = breadth_first(d, n, v).unwrap();
                    let r = simulate(
                        &s,
                        &StageCosts::uniform(d, 1.0, 2.0, 0.0),
                        Execution::Serial,
                    )
                    .unwrap();
                    let want = (n * v + p - 1) as f64 * 3.0;
                    assert!(
                        (r.makespan_seconds - want).abs() < 1e-9,
                        "v={v} P={p} N={n}"
                    );
                    let ratio = breadth_first_bubble_ratio(d, n, v).unwrap();
                    assert!((r.bubble_ratio - ratio).abs() < 1e-9);
                    // Every micro-batch of every stage live at the turn on the last worker.
                    assert_eq!(r.memory[p - 1].peak_live, n * v);
                }
            }
        }
        assert!(breadth_first(6, 4, 4).is_err());
    }
}
