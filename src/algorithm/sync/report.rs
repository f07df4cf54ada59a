//! The synchronous side's answers as serde values: a [`SyncReport`] per mode (what
//! `pipeopt sync --json` prints; the command's tables read the same values) and the
//! [`SyncFile`] `sync --out` writes for `validate`. Their keys are the command's JSON
//! contract (`tests/sync_cli.rs` pins them).

use serde::Serialize;

use crate::milp::sync_schedule::Formulation;
use crate::milp::SolveStatus;
use crate::partition::bapipe_intra::IntraLayerPartition;
use crate::schedule::sync::bapipe::{Accelerator, Exploration};
use crate::schedule::sync::hybrid::HybridRow;
use crate::schedule::sync::mixpipe::Candidate;
use crate::schedule::sync::sim::{SimReport, StageCosts, Timeline, WorkerMemory};
use crate::schedule::sync::{Schedule, ScheduleKind};

/// The answer: the report, and the file `--out` writes (where the mode has one).
#[derive(Debug, Clone)]
pub struct SyncOutcome {
    pub report: SyncReport,
    pub file: Option<SyncFile>,
}

/// `pipeopt sync --json`'s object, by mode.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum SyncReport {
    Simulated(SimulatedReport),
    Explored(ExploreReport),
    Searched(SearchReport),
    Optimal(OptimalReport),
    Hybrid(HybridReport),
}

/// A simulation's summary: iteration time, bubble ratio, memory per worker.
#[derive(Debug, Clone, Serialize)]
pub struct SimSummary {
    /// Iteration time (seconds).
    pub makespan: f64,
    pub bubble_ratio: f64,
    /// Peak bytes per worker.
    pub peak_memory: Vec<f64>,
    pub memory: Vec<WorkerMemory>,
    /// Whether every worker's peak fits `--memory` (null without it).
    pub fits: Option<bool>,
}

impl SimSummary {
    pub fn new(r: &SimReport, memory: Option<f64>) -> SimSummary {
        SimSummary {
            makespan: r.makespan_seconds,
            bubble_ratio: r.bubble_ratio,
            peak_memory: r.memory.iter().map(|m| m.peak_bytes).collect(),
            memory: r.memory.clone(),
            fits: memory.map(|m| r.peak_bytes() <= m),
        }
    }
}

/// One registered schedule simulated.
#[derive(Debug, Clone, Serialize)]
pub struct SimulatedReport {
    pub command: &'static str,
    pub instance: String,
    /// The schedule's name with its parameters (`mixpipe(K=4,Gamma=0)`).
    pub schedule: String,
    pub stages: usize,
    pub micro_batches: usize,
    pub partition: Vec<usize>,
    pub samples_per_second: f64,
    /// BaPipe's intra-layer partition, when asked.
    pub intra_layer: Option<IntraLayerPartition>,
    #[serde(flatten)]
    pub simulated: SimSummary,
    /// `--memory`, for the tables.
    #[serde(skip)]
    pub memory_budget: Option<f64>,
}

/// BaPipe's exploration.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreReport {
    pub command: &'static str,
    pub mode: &'static str,
    pub instance: String,
    pub stages: usize,
    pub partition: Vec<usize>,
    pub mini_batch: usize,
    pub accelerator: Accelerator,
    pub exploration: Exploration,
}

/// MixPipe's search, its best candidate simulated.
#[derive(Debug, Clone, Serialize)]
pub struct SearchReport {
    pub command: &'static str,
    pub mode: &'static str,
    pub instance: String,
    pub stages: usize,
    pub micro_batches: usize,
    pub partition: Vec<usize>,
    pub best: Candidate,
    /// Eq. (1)'s throughput of the best candidate.
    pub planned_samples_per_second: f64,
    /// Its simulated throughput.
    pub samples_per_second: f64,
    pub simulated: SimSummary,
    pub candidates: Vec<Candidate>,
    /// The best candidate's schedule name, for the tables.
    #[serde(skip)]
    pub schedule: String,
}

/// The schedule-optimum MILP's summary.
#[derive(Debug, Clone, Serialize)]
pub struct SolverReport {
    pub status: SolveStatus,
    pub lower_bound: f64,
    pub gap: Option<f64>,
    pub nodes: u64,
    pub binaries: usize,
    /// The known schedule it started from.
    pub started_from: Option<String>,
    pub formulation: Option<Formulation>,
    pub seconds: f64,
}

/// The schedule-optimum MILP's answer.
#[derive(Debug, Clone, Serialize)]
pub struct OptimalReport {
    pub command: &'static str,
    pub instance: String,
    pub schedule: &'static str,
    pub placement: &'static str,
    /// Whether each backward was split into its input and weight gradients.
    pub split_backward: bool,
    pub stages: usize,
    pub micro_batches: usize,
    pub partition: Vec<usize>,
    pub solver: SolverReport,
    #[serde(flatten)]
    pub found: OptimalFound,
    #[serde(skip)]
    pub memory_budget: Option<f64>,
}

/// The optimum's streams simulated, or nothing when no order fits the memory.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum OptimalFound {
    Streams {
        status: SolveStatus,
        #[serde(flatten)]
        simulated: SimSummary,
        samples_per_second: f64,
        streams: Schedule,
    },
    /// `status` is `infeasible`, `makespan` null.
    Infeasible {
        status: &'static str,
        makespan: Option<f64>,
    },
}

/// MixPipe's hybrid search.
#[derive(Debug, Clone, Serialize)]
pub struct HybridReport {
    pub command: &'static str,
    pub mode: &'static str,
    pub instance: String,
    pub approach: String,
    pub gpus: usize,
    pub mini_batch: usize,
    /// `analytic` (the network rebuilt at each micro-batch size) or `linear`.
    pub costs_from: &'static str,
    pub best: Option<HybridRow>,
    pub candidates: Vec<HybridRow>,
}

/// What `sync --out` writes: the streams with their costs and report
/// (`schedule::sync::file` judges it).
#[derive(Debug, Clone, Serialize)]
pub struct SyncFile {
    pub instance: String,
    pub schedule: FileSchedule,
    pub stages: usize,
    pub micro_batches: usize,
    pub partition: Vec<usize>,
    pub costs: StageCosts,
    pub streams: Schedule,
    pub report: SimSummary,
    pub timeline: Timeline,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solver: Option<SolverReport>,
}

/// The schedule a file holds: a registered one, or the optimum on a placement.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum FileSchedule {
    Kind(ScheduleKind),
    Optimal {
        name: &'static str,
        placement: &'static str,
    },
    /// Streams read from a file in PyTorch's format (`--import-torch`).
    Imported {
        name: &'static str,
        file: String,
    },
}
