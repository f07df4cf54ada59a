//! The algorithms by name, above every planner: the registry that builds them and the
//! driver that judges what they return. The trait they implement is below them, in
//! [`crate::planner`], which imports no planner.
//!
//! - [`run`] (the driver): times a planner, judges its plan, builds the report; the period
//!   and peaks reported are the judge's.
//! - [`registry`]: [`Algorithm`] (every planner by name) and [`Configured`], an algorithm
//!   with the options the command line and experiment files give it; above the planners,
//!   which never import it.
//! - [`sync`]: the synchronous side by request (`pipeopt sync`): stages resolved, a
//!   registered schedule simulated or searched, the schedule optimum, MixPipe's hybrid, as a
//!   typed report.

mod driver;
pub mod registry;
pub mod sync;

pub use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution, SolverSummary};
pub use driver::{empty_report, run};
pub use registry::{planner, Algorithm, Configured};
