//! Partitioners: algorithms that cut the chain into stages and map them to processors.

pub mod bapipe;
pub mod bipartition;
pub mod madpipe;
pub mod pipedream;
