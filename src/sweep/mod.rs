//! Experiments: a TOML grid run in parallel, resumable and sharded, written as polars tables
//! (Parquet and CSV) with figures beside them. Only this module knows polars.

pub mod config;
pub mod engine;
pub mod figures;
pub mod row;
pub mod run;
pub mod shard;
pub mod sync;
pub mod sync_figures;
pub mod table;
