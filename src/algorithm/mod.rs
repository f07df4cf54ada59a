//! The algorithms: the one small trait every partitioner, scheduler and MILP implements,
//! the driver that judges what they return, and the registry of algorithms by name.
//!
//! - [`api`]: the [`Planner`] trait, [`Problem`], [`Solution`], [`Outcome`], and
//!   [`AlgorithmOptions`], the typed options that build a planner (a leaf: it knows only
//!   the model; every planner implements it).
//! - [`run`] (the driver): times a planner, judges its plan, builds the report; the period
//!   and peaks reported are the judge's.
//! - [`registry`]: [`Algorithm`] (every planner by name) and [`Configured`], an algorithm
//!   with the options the command line and experiment files give it; above the planners,
//!   which never import it.

pub mod api;
mod driver;
pub mod registry;

pub use api::{AlgorithmOptions, Outcome, Planner, Problem, Solution, SolverSummary};
pub use driver::run;
pub use registry::{planner, Algorithm, Configured};
