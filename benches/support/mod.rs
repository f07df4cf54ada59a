//! What several benchmarks share.

pub mod cases;
pub mod optimum_row;
