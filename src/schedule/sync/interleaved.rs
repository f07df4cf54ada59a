//! Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
//! Clusters Using Megatron-LM", SC 2021, section 2.2.2): each of the `P = D / v` workers
//! holds `v` model chunks, stage `s` on worker `s mod P` (round-robin), so that a
//! micro-batch visits every worker `v` times and the pipeline fills in `1 / v` of the time.
//!
//! Worker `r` runs its operations in Megatron-LM's order: forwards go through its chunks in
//! turn, `P` micro-batches per chunk (the `k`-th forward is of chunk `(k / P) mod v` and
//! micro-batch `(k / (P v)) P + k mod P`), backwards through the chunks in reverse; it warms
//! up with `(v - 1) P + 2 (P - 1 - r)` forwards, then alternates one forward and one
//! backward, then drains the backwards. Megatron-LM needs `N` to be a multiple of `P`; so do
//! we.
//!
//! **Closed form.** With equal stages (forward `F`, backward `B` per stage, a worker's share
//! of the model `v` stages) and free transfers, the bubble is `(P - 1)(F + B)`: 1F1B's on
//! the same workers, `(P - 1) v (F + B)`, divided by `v` (the paper's eq. (3)); as a ratio of
//! the iteration, `(P - 1) / (N v + P - 1)`. The price is `v` times as many transfers.
//!
//! The schedule-optimum MILP proves the best order on the same placement (`sync --schedule
//! optimal --placement interleaved-2`, `interleaved-4`), from these streams; PyTorch's
//! runtime runs them
//! (`ScheduleInterleaved1F1B`), and the compute-only file of `sync --export-torch` gives it
//! these streams.

use super::registry::{Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{b, f, shape_error, Instr, Schedule, SyncError};

const PAPER: &str = "Narayanan et al., SC 2021";

pub static INTERLEAVED_2: ScheduleDescriptor = ScheduleDescriptor {
    name: "interleaved-2",
    label: "Interleaved 1F1B (v = 2)",
    help: "Megatron-LM's interleaved 1F1B with 2 chunks per worker: D stages on D / 2 workers, stage s on worker s mod (D / 2)",
    paper: PAPER,
    stages_per_worker: 2,
    generate: |d, n, _, _| interleaved(d, n, 2),
    approach: Some(|_, _| vec![INTERLEAVED_2.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::Interleaved2],
        rank: 0,
        other_drawing: None,
    }),
    paper_bubble: |d, n, _| interleaved_bubble_ratio(d, n, 2),
    ..DEFAULTS
};

pub static INTERLEAVED_4: ScheduleDescriptor = ScheduleDescriptor {
    name: "interleaved-4",
    label: "Interleaved 1F1B (v = 4)",
    help: "Megatron-LM's interleaved 1F1B with 4 chunks per worker: D stages on D / 4 workers, stage s on worker s mod (D / 4)",
    paper: PAPER,
    stages_per_worker: 4,
    generate: |d, n, _, _| interleaved(d, n, 4),
    approach: Some(|_, _| vec![INTERLEAVED_4.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::Interleaved4],
        rank: 0,
        other_drawing: None,
    }),
    paper_bubble: |d, n, _| interleaved_bubble_ratio(d, n, 4),
    ..DEFAULTS
};

/// The paper's bubble ratio for `d` equal stages in `v` chunks per worker and `n`
/// micro-batches (module docs); `None` where the schedule does not exist.
pub fn interleaved_bubble_ratio(d: usize, n: usize, v: usize) -> Option<f64> {
    let p = d
        .checked_div(v)
        .filter(|&p| p > 0 && p * v == d && n % p == 0)?;
    let (p, n, v) = (p as f64, n as f64, v as f64);
    Some((p - 1.0) / (n * v + p - 1.0))
}

/// Interleaved 1F1B's streams for `d` stages in `v` chunks per worker (`d / v` workers) and
/// `n` micro-batches, `n` a multiple of the workers.
pub fn interleaved(d: usize, n: usize, v: usize) -> Result<Schedule, SyncError> {
    const NAME: &str = "interleaved 1F1B";
    if v == 0 || d % v != 0 || d < v {
        return Err(shape_error(
            NAME,
            format!("D = {d} stages do not split into {v} chunks per worker"),
        ));
    }
    let p = d / v;
    if n % p != 0 {
        return Err(shape_error(
            NAME,
            format!("N = {n} micro-batches must be a multiple of the D / v = {p} workers"),
        ));
    }
    let total = n * v;
    let micro_batch = |k: usize| (k / (p * v)) * p + k % p;
    let streams = (0..p).map(|r| {
        let forward = |k: usize| f(((k / p) % v) * p + r, micro_batch(k));
        let backward = |k: usize| b((v - 1 - (k / p) % v) * p + r, micro_batch(k));
        let warm = ((v - 1) * p + 2 * (p - 1 - r)).min(total);
        let mut out: Vec<Instr> = (0..warm).map(forward).collect();
        for k in warm..total {
            out.push(forward(k));
            out.push(backward(k - warm));
        }
        out.extend((total - warm..total).map(backward));
        out
    });
    Ok(streams.collect())
}

#[cfg(test)]
mod tests {
    use super::super::sim::{simulate, Execution, StageCosts};
    use super::*;

    #[test]
    fn every_worker_holds_its_round_robin_stages_once() {
        for v in [2, 4] {
            for p in 1..5 {
                for n in (p..=4 * p).step_by(p) {
                    let d = p * v;
                    let s = interleaved(d, n, v).unwrap();
                    assert_eq!(s.len(), p);
                    for (r, stream) in s.iter().enumerate() {
                        assert_eq!(stream.len(), 2 * n * v);
                        assert!(stream.iter().all(|op| op.stage() % p == r));
                    }
                    simulate(
                        &s,
                        &StageCosts::uniform(d, 1.0, 2.0, 0.1),
                        Execution::Serial,
                    )
                    .unwrap();
                }
            }
        }
        assert!(interleaved(6, 4, 4).is_err());
        assert!(interleaved(8, 6, 2).is_err());
        assert_eq!(interleaved_bubble_ratio(8, 6, 2), None);
    }

    #[test]
    fn the_bubble_is_one_f_one_b_s_divided_by_v() {
        // The same model on P workers: 1F1B with one stage of v chunks per worker, against v
        // stages per worker (the paper's eq. (3)).
        for v in [2, 4] {
            for p in 2..7 {
                for n in [p, 2 * p, 4 * p] {
                    let chunks = StageCosts::uniform(p * v, 1.0, 2.0, 0.0);
                    let s = interleaved(p * v, n, v).unwrap();
                    let inter = simulate(&s, &chunks, Execution::Serial).unwrap();
                    let whole = StageCosts::uniform(p, v as f64, 2.0 * v as f64, 0.0);
                    let one = simulate(
                        &super::super::dapple::dapple(p, n),
                        &whole,
                        Execution::Serial,
                    )
                    .unwrap();
                    let work = 3.0 * (n * v) as f64;
                    let (a, b) = (inter.makespan_seconds - work, one.makespan_seconds - work);
                    assert!(
                        (a * v as f64 - b).abs() < 1e-9,
                        "v={v} P={p} N={n}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
