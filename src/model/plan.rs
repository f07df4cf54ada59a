//! docs/model.md section 9: the plan file of the asynchronous problem and the JSON report.

use serde::{Deserialize, Serialize};
use std::path::Path;

use crate::error::{read_json, InputError};
use crate::model::bipartition::BiStage;
use crate::model::{Allocation, BatchGraph, Instance, Pattern, Platform, Stage};
use crate::units::{Bytes, BytesPerSecond, Seconds};

/// A plan file: everything needed to judge, draw or execute a plan on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The instance, embedded.
    pub instance: Instance,
    /// SHA-256 of the embedded instance's canonical JSON ([`Instance::content_hash`]).
    #[serde(default)]
    pub instance_hash: String,
    pub platform: Platform,
    pub algorithm: String,
    /// The algorithm's own estimate of the period before validation (MadPipe's dashed line).
    pub planned_period: Option<Seconds>,
    /// Stages in chain order, layers 1-based and inclusive.
    pub stages: Vec<Stage>,
    /// The periodic pattern; absent for a plan that has an allocation only (status "planned").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    /// A proven lower bound on the period, when the algorithm has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<Seconds>,
    /// Seconds the algorithm took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_seconds: Option<Seconds>,
    /// A Bi-Partition plan's workers, each with its forward and backward range (an added
    /// field, docs/model.md section 9): when present, the plan is judged, drawn and
    /// executed on their batch graph ([`crate::model::bipartition::batch_graph`]) and
    /// `stages` holds the forward ranges only, for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bipartition: Option<Vec<BiStage>>,
}

impl Plan {
    pub fn allocation(&self) -> Allocation {
        Allocation::new(self.stages.clone())
    }

    /// The operations, dependencies and memory items of one batch of this plan: of its
    /// allocation, or of its Bi-Partition workers when it has them; an error names the
    /// field of the plan at fault.
    pub fn batch_graph(&self) -> Result<BatchGraph, InputError> {
        match &self.bipartition {
            Some(workers) => {
                crate::model::bipartition::batch_graph(&self.instance, &self.platform, workers)
                    .map_err(|e| InputError::new("plan", "bipartition", e.to_string()))
            }
            None => {
                self.allocation()
                    .check(self.instance.len(), self.platform.processors)?;
                Ok(BatchGraph::new(
                    &self.instance,
                    &self.platform,
                    &self.allocation(),
                ))
            }
        }
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
        // Allocation errors already name the field (`stages[2].last`).
        plan.allocation()
            .check(plan.instance.len(), plan.platform.processors)
            .map_err(|e| e.in_file(path))?;
        if let Some(workers) = &plan.bipartition {
            crate::model::bipartition::check(
                workers,
                plan.instance.len(),
                plan.platform.processors,
            )
            .map_err(|e| {
                InputError::new(path.display().to_string(), "bipartition", e.to_string())
            })?;
        }
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
    /// The stages of the plan, when there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
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
