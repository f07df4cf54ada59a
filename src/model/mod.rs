//! The model every part shares (docs/model.md sections 1 to 6 and 9).

mod allocation;
pub mod bipartition;
pub mod bounds;
pub mod coarsen;
mod instance;
mod pattern;
mod placement;
mod plan;
mod platform;

pub use allocation::{Allocation, Stage};
pub use instance::{ChainSums, Instance, Layer, SharedStash};
pub use pattern::{BatchGraph, Held, OpId, OpKind, Operation, Pattern, PatternOp, Resource};
pub use placement::{Placement, PlacementKind};
pub use plan::{Plan, PlanReport, SolverSummary, Status};
pub use platform::{Platform, MAX_PROCESSORS};

#[cfg(test)]
pub(crate) use instance::tests::chain;
