//! How long a random chain `best` proves optimal within a time limit on P = 4 processors,
//! at a loose and a tight memory: the global bound, the portfolio and local search, then
//! the exact checks (docs/bounds.md, "Exact checks").
//! Run: `cargo bench --bench benches -- best_scaling` (a bench program, not criterion: each
//! point is one run of up to the limit). `BEST_LIMIT=30s` and `BEST_MAX_LAYERS=12` shorten it.
//!
//! For each memory level, chains of 8, 10, 12, ... layers (seeds 1..=6 each) until a length
//! where no seed is proven (optimal to 0.1%, or infeasible) within the limit;
//! `BEST_MIN_LAYERS=16` starts there, `BEST_MEMORY=tight` (or `loose`) runs one level,
//! `BEST_SEED=6` one seed (a length with it proven counts as every seed proven). The same runs
//! from the command line: write the chain with `nets::random::random_chain` and run
//! `pipeopt plan --algorithm best --processors 4 --bandwidth 6 --time-limit 60s`.

use std::time::{Duration, Instant};

use pipeopt::algorithm::{Outcome, Planner, Problem};
use pipeopt::milp::best::BestPlanner;
use pipeopt::milp::MilpOptions;
use pipeopt::model::Platform;
use pipeopt::nets::random::{one_processor_memory, random_chain};
use pipeopt::units::parse_seconds;

pub fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
    // it, where a smoke run of the smallest point is enough.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let limit = std::env::var("BEST_LIMIT")
        .ok()
        .map(|s| parse_seconds(&s).expect("BEST_LIMIT: a duration such as 60s"))
        .map_or(
            Duration::from_secs(if smoke { 5 } else { 60 }),
            Duration::from_secs_f64,
        );
    let max_layers: usize = std::env::var("BEST_MAX_LAYERS")
        .ok()
        .map(|s| s.parse().expect("BEST_MAX_LAYERS: a whole number"))
        .unwrap_or(if smoke { 4 } else { 24 });
    let min_layers: usize = std::env::var("BEST_MIN_LAYERS")
        .ok()
        .map(|s| s.parse().expect("BEST_MIN_LAYERS: a whole number"))
        .unwrap_or(if smoke { 4 } else { 8 });
    let only = std::env::var("BEST_MEMORY").ok();
    let only_seed: Option<u64> = std::env::var("BEST_SEED")
        .ok()
        .map(|s| s.parse().expect("BEST_SEED: a whole number"));
    let seeds: Vec<u64> = match only_seed {
        Some(seed) => vec![seed],
        None => (1..=if smoke { 1 } else { 6u64 }).collect(),
    };
    let processors = 4;
    println!("best, P = {processors}, limit {limit:?} per run");
    println!("| memory | layers | seed | outcome | period | bound | gap | seconds | message |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (label, share) in [("loose (1.0x)", 1.0), ("tight (0.6x)", 0.6)] {
        if only.as_deref().is_some_and(|o| !label.starts_with(o)) {
            continue;
        }
        let mut longest_proven = None;
        let mut layers = min_layers;
        while layers <= max_layers {
            let mut proven = 0;
            for &seed in &seeds {
                let instance = random_chain(seed, layers);
                let platform =
                    Platform::new(processors, share * one_processor_memory(&instance), 6.0);
                let planner = BestPlanner {
                    time_limit: limit,
                    milp: MilpOptions::default(),
                    ..BestPlanner::default()
                };
                let started = Instant::now();
                let out = planner
                    .plan(&Problem {
                        instance: &instance,
                        platform: &platform,
                    })
                    .expect("best runs");
                let seconds = started.elapsed().as_secs_f64();
                let (outcome, period, bound, message) = match &out {
                    Outcome::Found(sol) => {
                        let period = sol.pattern.as_ref().map_or(f64::NAN, |p| p.period);
                        let bound = sol.lower_bound.unwrap_or(0.0);
                        let closed = !sol.stopped_at_limit && period <= bound * (1.0 + 1e-3);
                        proven += usize::from(closed);
                        let outcome = if closed { "optimal" } else { "open" };
                        (outcome, period, bound, sol.messages.join("; "))
                    }
                    Outcome::Infeasible { reason, .. } => {
                        proven += 1;
                        ("infeasible", f64::NAN, f64::INFINITY, reason.clone())
                    }
                    Outcome::NoPlanWithinLimit { reason, .. } => {
                        ("no plan", f64::NAN, 0.0, reason.clone())
                    }
                };
                println!(
                    "| {label} | {layers} | {seed} | {outcome} | {period:.4} | {bound:.4} | {:.2}% | {seconds:.1} | {message} |",
                    100.0 * (period / bound - 1.0)
                );
            }
            if proven == 0 {
                break;
            }
            if proven == seeds.len() {
                longest_proven = Some(layers);
            }
            layers += 2;
        }
        println!(
            "{label}: longest chain with every seed proven (optimal or infeasible) within {limit:?}: {}",
            longest_proven.map_or("none".into(), |l| l.to_string())
        );
    }
}
