//! pipeopt: partitioning, allocation and scheduling for pipeline-parallel DNN training.
//!
//! Every algorithm of the papers in `shared/papers/` under one model ([`model`]), judged by
//! one exact validator ([`judge`]). See ARCHITECTURE.md for the code map and the invariants.

pub mod error;
pub mod model;
pub mod schedule;
pub mod units;

pub use error::InputError;
