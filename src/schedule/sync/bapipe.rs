//! BaPipe (Zhao et al., "BaPipe: Exploration of Balanced Pipeline Parallelism for DNN
//! Training", arXiv 2020, section 3.2): four schedules of one pipeline and their automatic
//! choice. In the paper N is the number of accelerators and M of micro-batches; here
//! D = N stages and N = M micro-batches as everywhere else in this crate.
//!
//! - 1F1B-SNO (3.2.2, Figure 6(a)): DAPPLE's 1F1B, warm-up D - s forwards on worker s, on
//!   GPUs: a transfer starts after the producing computation (`Execution::Serial`), so with
//!   too few warm-up micro-batches the receiver waits ("non-overlapping").
//! - 1F1B-SO (Figure 6(b)): the same with doubled warm-up, 2(D - s), which hides transfers.
//! - 1F1B-AS (3.2.1, Figure 5(a)): 1F1B with asynchronous execution, transfers streamed
//!   during computation (`Execution::StreamedCommunication`).
//! - FBP-AS (Figure 5(b)): forwards and backwards in parallel on each accelerator
//!   (`Execution::ForwardBackwardParallel`), streamed transfers.
//!
//! Table 2's mini-batch times and bubbles of 1F1B-SNO and 1F1B-SO are matched exactly by
//! our simulation when SR (one transfer) is at most the forward time, as in Figure 6; its
//! memory column is matched exactly: (N - i + 1) a and 2 (N - i + 1) a. Table 1's 1F1B-AS
//! row is matched exactly. Where we depart: send and receive are not separate stream
//! operations; a transfer is the latency between the producer's end and the consumer's
//! earliest start, which is what Table 2's formulas count (the waiting is the
//! non-overlap). For FBP-AS our fixed split of the accelerator makes each operation take
//! F + B, so filling and draining the pipeline take D (F + B) each and the mini-batch time
//! is exactly (M + 2N - 1)(F + B) with bubble (2N - 1)/(M + 2N - 1); Table 1 writes
//! (M + N - 1)(F + B), which needs the accelerator to give all its resources to whichever
//! kind runs alone during fill and drain. Its memory column (2 (N - i + 1) a) is matched
//! exactly. Intra-layer partition and the FPGA resource model are not modelled.

use serde::Serialize;

use super::dapple::one_f_one_b;
use super::registry::{one_direction_bubble, Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::sim::Execution;
use super::sim::{simulate, SimError, StageCosts};
use super::{b, f, Schedule};

const PAPER: &str = "Zhao et al., arXiv 2020";

pub static ONE_F_ONE_B_SNO: ScheduleDescriptor = ScheduleDescriptor {
    name: "1f1b-sno",
    label: "BaPipe 1F1B-SNO",
    help: "BaPipe's 1F1B-SNO: DAPPLE's order on GPUs, transfers not overlapped",
    paper: PAPER,
    generate: |d, n, _, _| Ok(one_f_one_b_sno(d, n)),
    approach: Some(|_, _| vec![ONE_F_ONE_B_SNO.kind()]),
    paper_bubble: |d, n, _| Some(one_direction_bubble(d, n)),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 2,
        other_drawing: None,
    }),
    ..DEFAULTS
};

pub static ONE_F_ONE_B_SO: ScheduleDescriptor = ScheduleDescriptor {
    name: "1f1b-so",
    label: "BaPipe 1F1B-SO",
    help: "BaPipe's 1F1B-SO: doubled warm-up, 2(D - s) forwards on worker s, hiding transfers",
    paper: PAPER,
    generate: |d, n, _, _| Ok(one_f_one_b_so(d, n)),
    approach: Some(|_, _| vec![ONE_F_ONE_B_SO.kind()]),
    warm_start: Some(WarmStart {
        placements: &[Placement::OneDirection],
        rank: 3,
        other_drawing: None,
    }),
    ..DEFAULTS
};

pub static ONE_F_ONE_B_AS: ScheduleDescriptor = ScheduleDescriptor {
    name: "1f1b-as",
    label: "BaPipe 1F1B-AS",
    help: "BaPipe's 1F1B-AS: 1F1B with transfers streamed during computation (FPGAs)",
    paper: PAPER,
    execution: Execution::StreamedCommunication,
    generate: |d, n, _, _| Ok(one_f_one_b_as(d, n)),
    ..DEFAULTS
};

pub static FBP_AS: ScheduleDescriptor = ScheduleDescriptor {
    name: "fbp-as",
    label: "BaPipe FBP-AS",
    help: "BaPipe's FBP-AS: forwards and backwards in parallel on two halves of each \
           accelerator, transfers streamed (FPGAs)",
    paper: PAPER,
    execution: Execution::ForwardBackwardParallel,
    generate: |d, n, _, _| Ok(fbp_as(d, n)),
    ..DEFAULTS
};

/// 1F1B-SNO: warm-up D - s on worker s (DAPPLE's order).
pub fn one_f_one_b_sno(d: usize, n: usize) -> Schedule {
    one_f_one_b(d, n, |s| d - s)
}

/// 1F1B-SO: doubled warm-up, 2 (D - s) on worker s.
pub fn one_f_one_b_so(d: usize, n: usize) -> Schedule {
    one_f_one_b(d, n, |s| 2 * (d - s))
}

/// 1F1B-AS: 1F1B's order, run with `Execution::StreamedCommunication`.
pub fn one_f_one_b_as(d: usize, n: usize) -> Schedule {
    one_f_one_b(d, n, |s| d - s)
}

/// FBP-AS: all forwards in order and all backwards in order; with
/// `Execution::ForwardBackwardParallel` they run on separate halves of the worker.
pub fn fbp_as(d: usize, n: usize) -> Schedule {
    (0..d)
        .map(|s| {
            (0..n)
                .map(|i| f(s, i))
                .chain((0..n).map(|i| b(s, i)))
                .collect()
        })
        .collect()
}

/// Which kind of accelerator the exploration plans for (Zhao et al., arXiv 2020, section
/// 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accelerator {
    /// GPUs: synchronous execution, candidates 1F1B-SNO and 1F1B-SO.
    Gpu,
    /// FPGAs: asynchronous execution, candidates 1F1B-AS and FBP-AS.
    Fpga,
}

/// One candidate of the exploration, judged by the simulator.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreRow {
    pub schedule: String,
    pub micro_batches: usize,
    pub makespan_seconds: f64,
    pub samples_per_second: f64,
    pub bubble_ratio: f64,
    pub peak_bytes: f64,
    pub fits: bool,
}

/// The exploration's answer: every candidate and the fastest one that fits.
#[derive(Debug, Clone, Serialize)]
pub struct Exploration {
    pub rows: Vec<ExploreRow>,
    pub best: Option<ExploreRow>,
}

/// The micro-batch counts BaPipe's exploration tries for D = `d` stages and a mini-batch
/// of `mini_batch` samples: D, 2D, 4D, ... up to 128 D, those not above the mini-batch.
pub fn micro_batch_counts(d: usize, mini_batch: usize) -> Vec<usize> {
    (0..8)
        .map(|i| d << i)
        .filter(|&m| m <= mini_batch)
        .collect()
}

/// BaPipe's automatic choice of schedule and micro-batch count: for a mini-batch of
/// `mini_batch` samples, each count M in `micro_batch_counts` (dividing the mini-batch)
/// gives micro-batches of mini_batch / M samples; `costs_at(size)` gives the stage costs at
/// that micro-batch size (BaPipe profiles each size; a linear scaling of one profile is the
/// simplest such function). Every candidate is simulated; the fastest that fits
/// `memory_bytes` on every worker wins.
pub fn explore(
    accelerator: Accelerator,
    mini_batch: usize,
    micro_batch_counts: &[usize],
    costs_at: &dyn Fn(f64) -> StageCosts,
    memory_bytes: f64,
) -> Result<Exploration, SimError> {
    let kinds = match accelerator {
        Accelerator::Gpu => [ONE_F_ONE_B_SNO.kind(), ONE_F_ONE_B_SO.kind()],
        Accelerator::Fpga => [ONE_F_ONE_B_AS.kind(), FBP_AS.kind()],
    };
    let mut rows = Vec::new();
    for &m in micro_batch_counts {
        if m == 0 || mini_batch % m != 0 {
            continue;
        }
        let size = (mini_batch / m) as f64;
        let costs = costs_at(size);
        let d = costs.stages();
        for kind in kinds {
            let schedule = kind
                .generate(d, m)
                .expect("BaPipe's generators accept every D, M >= 1");
            let r = simulate(&schedule, &costs, kind.execution())?;
            rows.push(ExploreRow {
                schedule: kind.name(),
                micro_batches: m,
                makespan_seconds: r.makespan_seconds,
                samples_per_second: mini_batch as f64 / r.makespan_seconds,
                bubble_ratio: r.bubble_ratio,
                peak_bytes: r.peak_bytes(),
                fits: r.peak_bytes() <= memory_bytes,
            });
        }
    }
    let best = rows
        .iter()
        .filter(|r| r.fits)
        .max_by(|a, b| a.samples_per_second.total_cmp(&b.samples_per_second))
        .cloned();
    Ok(Exploration { rows, best })
}
