//! The schedule-optimum MILP with the backward split into input and weight gradients, on
//! every placement: D = 8, N = 16 proven within 60 s per placement (the target), D = 16,
//! N = 32 reported. Equal stages at the zero-bubble paper's equal times (forward, input
//! gradient and weight gradient 1 each), the weight gradient keeping the whole stash; each
//! placement without a memory limit and under its registered schedule's peak (ZB-H1 on one
//! direction, interleaved 1F1B on its placements, ZB-V on the V, Chimera on the
//! bidirectional one), which is also where the search starts.
//!
//! `cargo bench --bench benches -- sync_milp_split` runs D = 8; `--only 16` runs D = 16,
//! N = 32; `--quick` D = 4, N = 8; `--limit S` sets the time limit (default 60 s);
//! `--formulation disjunctive` (or `time-indexed`) forces one. One line per case: status,
//! simulated makespan, dual bound, gap, seconds, binaries, nodes, the registered
//! schedule's makespan and the formulation solved.

use crate::support::optimum_row;

use std::time::Duration;

use pipeopt::milp::sync_schedule::{optimal_schedule, Formulation, Placement, SyncProblem};
use pipeopt::milp::MilpOptions;
use pipeopt::schedule::sync::sim::{simulate, StageCosts};
use pipeopt::schedule::sync::{chimera, interleaved, zero_bubble, ScheduleDescriptor};

use optimum_row::solve_columns;

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let formulation = match args.iter().position(|a| a == "--formulation") {
        Some(i) => Formulation::parse(&args[i + 1]).expect("auto, disjunctive or time-indexed"),
        None => Formulation::Auto,
    };
    // Under `cargo test` (no `--bench`): a smoke run of the quick cases with 2 s each.
    let smoke = !args.iter().any(|a| a == "--bench");
    let d = if smoke || args.iter().any(|a| a == "--quick") {
        4
    } else {
        value("--only").unwrap_or(8)
    };
    let n = 2 * d;
    let limit = if smoke {
        2
    } else {
        value("--limit").unwrap_or(60)
    };
    let options = MilpOptions {
        time_limit: Some(Duration::from_secs(limit as u64)),
        ..MilpOptions::default()
    };
    let mut costs = StageCosts::uniform(d, 1.0, 2.0, 0.0).with_weight_gradient_share(0.5);
    costs.weight_gradient_stash_bytes = costs.stash_bytes.clone();
    let placements: [(Placement, &ScheduleDescriptor); 5] = [
        (Placement::OneDirection, &zero_bubble::ZB_H1),
        (Placement::Interleaved2, &interleaved::INTERLEAVED_2),
        (Placement::Interleaved4, &interleaved::INTERLEAVED_4),
        (Placement::VShape, &zero_bubble::ZB_V),
        (Placement::Bidirectional, &chimera::CHIMERA),
    ];
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>7} {:>7} {:>6} {:>8}  registered",
        "case", "status", "makespan", "bound", "gap", "seconds", "bins", "nodes"
    );
    // (the last column: the formulation solved, `-` where the windows' bound decided)
    for (placement, schedule) in placements {
        let streams = schedule.kind().generate(d, n).unwrap();
        let registered = simulate(&streams, &costs, schedule.kind().execution()).unwrap();
        let proposals = vec![(schedule.name.to_string(), streams)];
        for memory in [None, Some(registered.peak_bytes())] {
            let problem = SyncProblem {
                costs: &costs,
                placement,
                micro_batches: n,
                memory,
                live_cap: None,
                formulation,
                split_backward: true,
            };
            let o = optimal_schedule(&problem, &proposals, &options).unwrap();
            let limit = if memory.is_some() {
                format!("M = {}'s peak", schedule.name)
            } else {
                "no memory limit".into()
            };
            println!(
                "{:<44} {}  {:.3}  {}",
                format!("D={d} N={n} {} {limit}", placement.name()),
                solve_columns(&o),
                registered.makespan_seconds,
                o.formulation
                    .map_or("-".into(), |f| format!("{f:?}").to_lowercase()),
            );
        }
    }
}
