//! The general MILP's reach: the longest random chain it solves to proven
//! optimality within 60 s with P = 4 processors, at a loose and a tight memory.
//! Run: `cargo bench --bench benches -- ilp_scaling` (a bench program, not criterion: each
//! point is one solve of up to a minute). `ILP_LIMIT=10s` and `ILP_MAX_LAYERS=12` shorten it.
//!
//! For each memory level, chains of 4, 6, 8, ... layers (seeds 1..=3 each) are solved
//! without coarsening, until a length where no seed is solved (proven optimal, or proven
//! infeasible) in the limit.

use std::time::Duration;

use pipeopt::milp::general::general_optimum;
use pipeopt::milp::{MilpOptions, SolveStatus};
use pipeopt::model::Platform;
use pipeopt::nets::random::{one_processor_memory, random_chain};
use pipeopt::units::parse_seconds;

pub fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
    // it, where a smoke run of the smallest point is enough.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let limit = std::env::var("ILP_LIMIT")
        .ok()
        .map(|s| parse_seconds(&s).expect("ILP_LIMIT: a duration such as 60s"))
        .map_or(
            Duration::from_secs(if smoke { 5 } else { 60 }),
            Duration::from_secs_f64,
        );
    let max_layers: usize = std::env::var("ILP_MAX_LAYERS")
        .ok()
        .map(|s| s.parse().expect("ILP_MAX_LAYERS: a whole number"))
        .unwrap_or(if smoke { 4 } else { 24 });
    let processors = 4;
    let options = MilpOptions {
        time_limit: Some(limit),
        ..MilpOptions::default()
    };
    println!("general MILP, P = {processors}, limit {limit:?} per solve");
    println!(
        "| memory | layers | seed | status | period | bound | gap | seconds | MILPs | nodes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (label, share) in [("loose (1.0x)", 1.0), ("tight (0.6x)", 0.6)] {
        let mut longest_proven = None;
        let mut layers = 4;
        while layers <= max_layers {
            let mut proven = 0;
            for seed in 1..=3u64 {
                let instance = random_chain(seed, layers);
                let platform =
                    Platform::new(processors, share * one_processor_memory(&instance), 6.0);
                let out = general_optimum(&instance, &platform, None, &options)
                    .expect("the general MILP runs");
                // Solved: optimal, or proven infeasible (no allocation fits).
                if matches!(out.status, SolveStatus::Optimal | SolveStatus::Infeasible) {
                    proven += 1;
                }
                let period = out.best.as_ref().map(|(_, p)| p.period);
                println!(
                    "| {label} | {layers} | {seed} | {:?} | {} | {:.4} | {} | {:.2} | {} | {} |",
                    out.status,
                    period.map_or("-".into(), |t| format!("{t:.4}")),
                    out.lower_bound,
                    if out.gap.is_finite() {
                        format!("{:.2e}", out.gap)
                    } else {
                        "-".into()
                    },
                    out.seconds,
                    out.solves,
                    out.nodes
                );
            }
            if proven == 0 {
                break;
            }
            if proven == 3 {
                longest_proven = Some(layers);
            }
            layers += 2;
        }
        println!(
            "{label}: longest chain with every seed solved (optimal or proven infeasible) within {limit:?}: {}",
            longest_proven.map_or("none".into(), |l| l.to_string())
        );
    }
}
