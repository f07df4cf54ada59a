//! The synchronous-schedule MILP's targets: D = 8, N = 8 proven optimal within 60 s, and
//! D = 16, N = 16 within a 5% gap in 60 s, on equal stages (backward = forward and backward
//! = 2 x forward), Chimera's placement (with Chimera's D live micro-batches per worker) and
//! one direction under DAPPLE's D - s.
//!
//! `cargo bench --bench benches -- sync_milp` runs every case with a 60 s limit; `--quick`
//! runs D = 4 only; `--only D` runs one depth; `--threads K` gives HiGHS K threads (default 1).
//! Prints one line per case: status, simulated makespan, dual bound, gap, seconds, binaries,
//! nodes, and the best known schedule's makespan for comparison.

use crate::support::optimum_row;

use std::time::Duration;

use pipeopt::milp::sync_schedule::{optimal_schedule, Formulation, Placement, SyncProblem};
use pipeopt::milp::MilpOptions;
use pipeopt::schedule::sync::chimera::chimera_drawn_for;
use pipeopt::schedule::sync::sim::{simulate, Execution, StageCosts};
use pipeopt::schedule::sync::{dapple, Schedule};

use optimum_row::solve_columns;

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let threads = value("--threads").unwrap_or(1);
    let depths: Vec<usize> = match (quick, value("--only")) {
        (true, _) => vec![4],
        (false, Some(d)) => vec![d],
        (false, None) => vec![8, 16],
    };
    let options = MilpOptions {
        time_limit: Some(Duration::from_secs(60)),
        threads: std::num::NonZeroU32::new(threads.max(1) as u32).unwrap(),
        ..MilpOptions::default()
    };
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>8}  known",
        "case", "status", "makespan", "bound", "gap", "seconds", "bins", "nodes"
    );
    for &d in &depths {
        for b in [1.0, 2.0] {
            let costs = StageCosts::uniform(d, 1.0, b, 0.0);
            let chimera: Vec<(String, Schedule)> = [1, 2]
                .iter()
                .map(|&t| {
                    (
                        format!("chimera(drawn B={t}F)"),
                        chimera_drawn_for(d, d, t).unwrap(),
                    )
                })
                .collect();
            let dapple = vec![(
                "dapple".to_string(),
                dapple::DAPPLE.kind().generate(d, d).unwrap(),
            )];
            for (name, placement, cap, proposals) in [
                (
                    "chimera placement, live <= D",
                    Placement::Bidirectional,
                    vec![d; d],
                    &chimera,
                ),
                (
                    "one direction, live <= D - s",
                    Placement::OneDirection,
                    (0..d).map(|s| d - s).collect(),
                    &dapple,
                ),
            ] {
                let known = proposals
                    .iter()
                    .map(|(_, s)| {
                        simulate(s, &costs, Execution::Serial)
                            .unwrap()
                            .makespan_seconds
                    })
                    .fold(f64::INFINITY, f64::min);
                let problem = SyncProblem {
                    costs: &costs,
                    placement,
                    micro_batches: d,
                    memory: None,
                    live_cap: Some(cap),
                    formulation: Formulation::Auto,
                    split_backward: false,
                };
                let o = optimal_schedule(&problem, proposals, &options).unwrap();
                println!(
                    "{:<34} {}  {known:.3}",
                    format!("D=N={d} B={b}F {name}"),
                    solve_columns(&o)
                );
            }
        }
    }
}
