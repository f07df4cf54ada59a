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
