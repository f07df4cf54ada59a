//! Exact MILPs through HiGHS (pipeopt issue 4): the minimum-period pattern of a fixed
//! allocation ([`fixed_allocation`]), the contiguous optimum ([`contiguous`]) and the
//! planners built on them.

pub mod contiguous;
pub mod fixed_allocation;
pub mod madpipe;
pub mod solver;

pub use contiguous::{contiguous_optimum, ContiguousOptPlanner, ContiguousOutcome};
pub use fixed_allocation::{schedule_allocation, schedule_plan, MilpOutcome, MilpSchedulePlanner};
pub use madpipe::MadPipePlanner;
pub use solver::{MilpOptions, SolveStatus};
