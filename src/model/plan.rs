//! docs/model.md section 9: the plan file of the asynchronous problem and the JSON report.

use serde::{Deserialize, Serialize};
use std::path::Path;

use crate::error::{read_json, InputError};
use crate::model::bipartition::BiStage;
use crate::model::{
    Allocation, BatchGraph, Instance, Pattern, Placement, PlacementKind, Platform, Stage,
};
use crate::units::{Bytes, BytesPerSecond, Seconds};

/// A plan file: everything needed to judge, draw or execute a plan on its own.
///
/// Its placement is one value ([`Placement`]); the file keeps the written form of
/// docs/model.md section 9 (`stages`, and `bipartition` for Bi-Partition's workers), read
/// and written through a private mirror of that form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "PlanFile", into = "PlanFile")]
pub struct Plan {
    /// The instance, embedded.
    pub instance: Instance,
    /// SHA-256 of the embedded instance's canonical JSON ([`Instance::content_hash`]).
    pub instance_hash: String,
    pub platform: Platform,
    pub algorithm: String,
    /// The algorithm's own estimate of the period before validation (MadPipe's dashed line).
    pub planned_period: Option<Seconds>,
    /// Where the operations run: an allocation, or Bi-Partition's workers.
    pub placement: Placement,
    /// The periodic pattern; absent for a plan that has an allocation only (status "planned").
    pub pattern: Option<Pattern>,
    /// A proven lower bound on the period, when the algorithm has one.
    pub lower_bound: Option<Seconds>,
    /// Seconds the algorithm took.
    pub solve_seconds: Option<Seconds>,
}

/// The written form of a [`Plan`] (docs/model.md section 9), unchanged since before plans
/// carried a [`Placement`]: `stages` always (an allocation's, or the Bi-Partition
/// workers' forward ranges, for display) and `bipartition` when the placement is
/// Bi-Partition's workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PlanFile {
    instance: Instance,
    #[serde(default)]
    instance_hash: String,
    platform: Platform,
    algorithm: String,
    planned_period: Option<Seconds>,
    /// Stages in chain order, layers 1-based and inclusive.
    stages: Vec<Stage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pattern: Option<Pattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lower_bound: Option<Seconds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    solve_seconds: Option<Seconds>,
    /// A Bi-Partition plan's workers, each with its forward and backward range (an added
    /// field): when present, they are the placement and `stages` is not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bipartition: Option<Vec<BiStage>>,
}

impl From<PlanFile> for Plan {
    fn from(f: PlanFile) -> Self {
        let placement = match f.bipartition {
            Some(workers) => Placement::BiPartition(workers),
            None => Placement::Stages(Allocation::new(f.stages)),
        };
        Plan {
            instance: f.instance,
            instance_hash: f.instance_hash,
            platform: f.platform,
            algorithm: f.algorithm,
            planned_period: f.planned_period,
            placement,
            pattern: f.pattern,
            lower_bound: f.lower_bound,
            solve_seconds: f.solve_seconds,
        }
    }
}

impl From<Plan> for PlanFile {
    fn from(p: Plan) -> Self {
        let stages = p.placement.stages();
        let bipartition = match p.placement {
            Placement::Stages(_) => None,
            Placement::BiPartition(workers) => Some(workers),
        };
        PlanFile {
            instance: p.instance,
            instance_hash: p.instance_hash,
            platform: p.platform,
            algorithm: p.algorithm,
            planned_period: p.planned_period,
            stages,
            pattern: p.pattern,
            lower_bound: p.lower_bound,
            solve_seconds: p.solve_seconds,
            bipartition,
        }
    }
}

impl Plan {
    /// The allocation, when the plan's placement is one (not Bi-Partition's workers).
    pub fn allocation(&self) -> Option<&Allocation> {
        self.placement.allocation()
    }

    /// The operations, dependencies and memory items of one batch of this plan
    /// ([`Placement::batch_graph`]); an error names the field of the plan at fault.
    pub fn batch_graph(&self) -> Result<BatchGraph, InputError> {
        self.placement.batch_graph(&self.instance, &self.platform)
    }

    /// Reads a plan file and checks its instance, platform and stages.
    pub fn load(path: &Path) -> Result<Plan, InputError> {
        let plan: Plan = read_json(path)?;
        let prefix = |mut e: InputError, what: &str| {
            e.source = path.display().to_string();
            e.field = if e.field.is_empty() {
                what.to_string()
            } else {
                format!("{what}.{}", e.field)
            };
            e
        };
        plan.instance.check().map_err(|e| prefix(e, "instance"))?;
        plan.platform.check().map_err(|e| prefix(e, "platform"))?;
        if !plan.instance_hash.is_empty() && plan.instance_hash != plan.instance.content_hash() {
            return Err(InputError::new(
                path.display().to_string(),
                "instance_hash",
                "does not match the embedded instance (was the instance edited after planning?)",
            ));
        }
        // Errors already name the field (`stages[2].last`, `bipartition`).
        plan.placement
            .check(plan.instance.len(), plan.platform.processors)
            .map_err(|e| e.in_file(path))?;
        Ok(plan)
    }

    /// Writes the plan as pretty JSON, atomically.
    pub fn save(&self, path: &Path) -> Result<(), crate::Error> {
        let text = serde_json::to_vec_pretty(self).expect("a plan always serializes");
        crate::error::write_atomic(path, &text)
    }
}

/// The status of a plan in the JSON output (docs/model.md section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The validator accepted the plan and its period.
    Valid,
    /// No plan of this algorithm fits.
    Infeasible,
    /// A solver stopped at its limit; the best valid plan found is reported.
    Timeout,
    /// An allocation with the algorithm's estimate only, not yet scheduled.
    Planned,
    /// The algorithm failed, or produced a plan the validator rejected.
    Error,
}

impl Status {
    /// The name in files and tables (`valid`, `infeasible`, `timeout`, `planned`, `error`).
    pub fn name(self) -> &'static str {
        match self {
            Status::Valid => "valid",
            Status::Infeasible => "infeasible",
            Status::Timeout => "timeout",
            Status::Planned => "planned",
            Status::Error => "error",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The JSON object every planning command prints with `--json` (docs/model.md section 9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub algorithm: String,
    pub instance: String,
    pub processors: usize,
    pub memory: Bytes,
    pub bandwidth: BytesPerSecond,
    pub status: Status,
    /// The validated period, or null.
    pub period: Option<Seconds>,
    pub planned_period: Option<Seconds>,
    /// The validated memory peak of every processor, in bytes.
    pub peak_memory: Vec<Bytes>,
    pub solve_seconds: Option<Seconds>,
    pub lower_bound: Option<Seconds>,
    /// A lower bound valid for every plan of the case (any allocation, any pattern), when
    /// the algorithm proved one (`best`; see `milp::global_bound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_lower_bound: Option<Seconds>,
    /// `period / global_lower_bound - 1`, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// True when it is proven that no plan of any allocation fits the case.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub case_infeasible: bool,
    /// The stages of the plan, when there is one (a Bi-Partition plan's forward ranges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// The kind of placement of the plan returned, when there is one: `stages` (an
    /// allocation) or `bipartition` (Bi-Partition's workers; Bi-Partition returns
    /// PipeDream's straight pipeline, `stages`, when that one is faster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementKind>,
    /// Why the plan is infeasible or in error, or what the validator objected to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    /// The MILP solver's status, gap and node count, when the algorithm used one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<SolverSummary>,
}

/// A MILP solver's last word on a plan: status, relative gap, branch-and-bound nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolverSummary {
    /// `optimal`, `limit_with_incumbent`, `infeasible`, `no_solution_within_limit`.
    pub status: String,
    /// (period - lower bound) / period.
    pub gap: Option<f64>,
    pub nodes: Option<u64>,
}
