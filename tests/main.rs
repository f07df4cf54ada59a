//! The integration tests, one module per subject, in one test binary: each module runs the
//! library or the `pipeopt` binary as a user would. One binary links polars and HiGHS once
//! (a binary per file linked them 27 times). The slow tier is the tests marked
//! `#[ignore = "slow tier ..."]` (`cargo test --tests -- --ignored`); the libtorch tests
//! (`exec`, `profile`, feature `torch`) are binaries of their own.
//!
//! Run one subject: `cargo test --test main global_bound::`.

mod support;

mod architecture;
mod bapipe_intra;
mod bipartition;
mod cli;
mod doc_examples;
mod fit_device;
mod global_bound;
mod import_pipedream;
mod input_ranges;
mod judge_properties;
mod limits;
mod madpipe_dp;
mod milp;
mod milp_general;
mod onnx_cnn_ops;
mod onnx_import;
mod onnx_transformers;
mod onnx_windows;
mod op_chains;
mod parsers_fuzz;
mod pipedream;
mod pipedream_agreement;
mod plan_files;
mod reliability;
mod scheduling_milp;
mod sweep;
mod sync_cli;
mod sync_closed_forms;
mod sync_milp;
mod sync_properties;
mod sync_v_shape;
mod sync_zero_bubble;
mod zero_windows;
