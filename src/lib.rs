//! pipeopt: partitioning, allocation and scheduling for pipeline-parallel DNN training.
//!
//! Every algorithm of the papers (docs/model.md section 11) under one model ([`model`]),
//! judged by one exact validator ([`judge`]). See ARCHITECTURE.md for the code map and the
//! invariants.

pub mod algorithm;
pub mod error;
#[cfg(feature = "torch")]
pub mod exec;
pub mod io;
pub mod judge;
pub mod model;
pub mod nets;
pub mod partition;
pub mod planner;
pub mod plot;
pub mod schedule;
pub mod sweep;
pub mod units;

pub use error::{Error, InputError};
pub mod milp;
