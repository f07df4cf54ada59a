//! Pattern generators: pure functions from an allocation to a schedule.

pub mod one_f_one_b_star;
