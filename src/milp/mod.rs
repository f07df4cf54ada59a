//! Exact MILPs through HiGHS: the minimum-period pattern of a fixed
//! allocation ([`fixed_allocation`]), the contiguous optimum ([`contiguous`]), the general
//! MILP over non-contiguous allocations ([`general`]) and the planners built on them.

pub mod best;
pub mod contiguous;
pub mod fixed_allocation;
pub mod general;
pub mod global_bound;
pub mod madpipe;
pub mod pattern_milp;
pub mod solver;
pub mod sync_schedule;

pub use contiguous::{contiguous_optimum, ContiguousOptPlanner, ContiguousOutcome};
pub use fixed_allocation::{schedule_allocation, schedule_plan, MilpOutcome, MilpSchedulePlanner};
pub use general::{general_optimum, GeneralMilpPlanner, GeneralOutcome};
pub use madpipe::MadPipePlanner;
pub use solver::{MilpOptions, SolveStatus};

/// Sends a MILP's pattern through the judge; a rejection is an internal error of the
/// formulation named by `what` (never a reason to loosen the judge).
pub(crate) fn ensure_judged_valid(
    instance: &crate::model::Instance,
    platform: &crate::model::Platform,
    allocation: &crate::model::Allocation,
    pattern: &crate::model::Pattern,
    what: &str,
) -> crate::error::Result<()> {
    let j = crate::judge::judge(instance, platform, allocation, pattern);
    if !j.valid {
        return Err(crate::Error::internal(format!(
            "{what}'s pattern at T = {} fails the judge: {}",
            pattern.period,
            j.violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(())
}
