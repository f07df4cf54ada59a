//! Where a plan's operations run: an allocation (docs/model.md section 3) or Bi-Partition's
//! workers ([`super::bipartition`]). A plan and an algorithm's solution carry one
//! [`Placement`], and its [`Placement::batch_graph`] is what the judge, `validate`,
//! `gantt`, `schedule` and the executor read.

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::model::bipartition::{self, BiStage};
use crate::model::{Allocation, BatchGraph, Instance, Platform, Stage};

/// The placement of a plan's operations on the processors.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// Contiguous stages, each on a processor (a processor may hold several): every layer's
    /// forward and backward on its stage's processor.
    Stages(Allocation),
    /// Bi-Partition's workers in chain order, each with a forward and a backward range: a
    /// layer's forward and backward may run on different workers (stash and weight
    /// transfers between them).
    BiPartition(Vec<BiStage>),
}

/// Which kind of placement a plan has: the `placement` of a report and of a sweep row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementKind {
    /// An allocation ([`Placement::Stages`]).
    Stages,
    /// Bi-Partition's workers ([`Placement::BiPartition`]).
    Bipartition,
}

impl PlacementKind {
    /// The name reports and tables use: `stages` or `bipartition`.
    pub fn name(self) -> &'static str {
        match self {
            PlacementKind::Stages => "stages",
            PlacementKind::Bipartition => "bipartition",
        }
    }
}

impl std::fmt::Display for PlacementKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Placement {
    pub fn kind(&self) -> PlacementKind {
        match self {
            Placement::Stages(_) => PlacementKind::Stages,
            Placement::BiPartition(_) => PlacementKind::Bipartition,
        }
    }

    /// The allocation, when the placement is one.
    pub fn allocation(&self) -> Option<&Allocation> {
        match self {
            Placement::Stages(a) => Some(a),
            Placement::BiPartition(_) => None,
        }
    }

    /// The stages shown in reports and files: an allocation's own, or each Bi-Partition
    /// worker's forward range on its processor.
    pub fn stages(&self) -> Vec<Stage> {
        match self {
            Placement::Stages(a) => a.stages.clone(),
            Placement::BiPartition(workers) => workers
                .iter()
                .map(|w| Stage {
                    first: w.forward.0,
                    last: w.forward.1,
                    processor: w.processor,
                })
                .collect(),
        }
    }

    /// Checks the placement against `layers` layers and `processors` processors; an
    /// error names the plan field at fault (`stages[2].last`, `bipartition`).
    pub fn check(&self, layers: usize, processors: usize) -> Result<(), InputError> {
        match self {
            Placement::Stages(a) => a.check(layers, processors),
            Placement::BiPartition(workers) => bipartition::check(workers, layers, processors)
                .map_err(|e| InputError::new("plan", "bipartition", e.to_string())),
        }
    }

    /// The operations, dependencies and memory items of one batch under this placement
    /// (for [`crate::judge::judge_graph`]), after [`Placement::check`].
    pub fn batch_graph(
        &self,
        instance: &Instance,
        platform: &Platform,
    ) -> Result<BatchGraph, InputError> {
        self.check(instance.len(), platform.processors)?;
        Ok(match self {
            Placement::Stages(a) => BatchGraph::new(instance, platform, a),
            Placement::BiPartition(workers) => {
                bipartition::batch_graph(instance, platform, workers)
                    .map_err(|e| InputError::new("plan", "bipartition", e.to_string()))?
            }
        })
    }
}

impl From<Allocation> for Placement {
    fn from(a: Allocation) -> Self {
        Placement::Stages(a)
    }
}
