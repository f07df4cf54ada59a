//! Schedule generators: pure functions from an allocation to a schedule (a periodic
//! pattern, or an instruction stream per worker for synchronous pipelines).

pub mod one_f_one_b_star;
pub mod sync;
