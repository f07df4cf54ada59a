//! The columns the schedule-optimum benches print for one solve.

use pipeopt::milp::sync_schedule::SyncOptimum;

/// Status (`limit` for a time limit with an incumbent), simulated makespan, dual bound,
/// gap, seconds, binaries and nodes, aligned under the benches' headers.
pub fn solve_columns(o: &SyncOptimum) -> String {
    format!(
        "{:>9} {:>9.3} {:>9.3} {:>6.2}% {:>7.1} {:>6} {:>8}",
        format!("{:?}", o.status)
            .replace("LimitWithIncumbent", "limit")
            .to_lowercase(),
        o.makespan.unwrap_or(f64::NAN),
        o.lower_bound,
        100.0 * o.gap,
        o.seconds,
        o.binaries,
        o.nodes,
    )
}
