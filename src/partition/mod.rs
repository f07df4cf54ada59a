//! Partitioners: algorithms that cut the chain into stages and map them to processors.

pub mod bapipe;
pub mod bapipe_intra;
pub mod bipartition;
pub mod madpipe;
pub mod pipedream;
