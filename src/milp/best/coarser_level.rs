//! The coarser level of `best` on a chain that has one (an op-level chain: docs/op-chains.md,
//! "Coarser levels"): `best` on the chain coarsened at its module boundaries
//! ([`at_module_boundaries`]: its block-level chain) or, for names without module paths, at
//! its single-tensor cuts ([`at_single_tensor_cuts`]), its plan lifted to the fine chain. A
//! lifted plan has the same batch graph as the coarse one, so the same pattern is valid with
//! the same period; the fine level's search then starts from it and can only improve on it
//! (moving layers across the coarse boundaries, cutting inside a group). This is the multilevel
//! scheme of graph partitioning (coarsen, solve, lift, refine) on a chain.
//!
//! The coarse chain's bound is not a bound of the fine chain (the fine chain's plans may
//! cut inside a group), so only the plan comes back.

use std::time::Duration;

use super::BestPlanner;
use crate::model::coarsen::{at_module_boundaries, at_single_tensor_cuts, Coarsening};
use crate::model::{Allocation, Pattern, Placement};
use crate::planner::{Outcome, Planner, Problem};

/// The share of `best`'s time limit that the coarser level may take: most of it, since the
/// coarse chain's search finds the plans (the block-level grid closes most of its cases) and
/// the fine chain's phases refine them. Where the coarse search closes early (proven
/// optimal on the coarse chain), the rest goes to the fine chain.
pub const COARSE_LEVEL_SHARE: f64 = 0.7;

/// The share of the time the coarser level left that the fine chain's bound may take: nearly
/// all of it, since the fine chain's other phases end within fractions of a second on the op
/// chains (too long for the exact checks: `exact::EXACT_CHECK_LAYERS`), and the time not
/// given to the bound would go unused.
pub const BOUND_SHARE_AFTER: f64 = 0.9;

/// A plan of the coarse chain, lifted to the fine one.
#[derive(Debug, Clone)]
pub struct LiftedPlan {
    pub allocation: Allocation,
    pub pattern: Pattern,
    /// Layers of the coarse chain.
    pub coarse_layers: usize,
    /// Where the coarse chain's `best` found it.
    pub source: String,
}

/// The coarser level of a chain, when it has one that `best` should search first: shorter
/// than the chain, and of at least two layers; its module boundaries where the names give
/// them, its single-tensor cuts otherwise.
pub fn coarser_level(problem: &Problem) -> Option<Coarsening> {
    at_module_boundaries(problem.instance)
        .or_else(|| at_single_tensor_cuts(problem.instance))
        .filter(|c| c.groups.len() >= 2)
}

/// `planner`'s search on the coarse chain within `limit` (no extension), its plan lifted;
/// `None` when it found none (the fine chain may still have plans that cut inside groups).
pub fn lifted_plan(
    planner: &BestPlanner,
    problem: &Problem,
    level: &Coarsening,
    limit: Duration,
) -> crate::error::Result<Option<LiftedPlan>> {
    let coarse = BestPlanner {
        time_limit: limit,
        extension: None,
        gap_tolerance_after: Duration::ZERO,
        ..planner.clone()
    };
    let outcome = coarse.plan(&Problem {
        instance: &level.coarse,
        platform: problem.platform,
    })?;
    let Outcome::Found(sol) = outcome else {
        return Ok(None);
    };
    let (Placement::Stages(allocation), Some(pattern)) = (sol.placement, sol.pattern) else {
        return Ok(None);
    };
    let source = super::plan_source(&sol.messages)
        .unwrap_or("best")
        .to_string();
    Ok(Some(LiftedPlan {
        allocation: level.lift(&allocation),
        pattern,
        coarse_layers: level.groups.len(),
        source,
    }))
}
