//! The global lower bound on op-level chains within a time limit (docs/bounds.md), case by
//! case: the bound proven, whether the bisection completed, the probes it made. The op
//! chains are where the bound is weakest (174-426 layers: each probe's search walks many
//! more assignments than on the block chains), so this is where a change to the search's
//! pruning shows.
//!
//! Run: `cargo bench --bench benches -- op_bound` (a bench program, not criterion: each case
//! is one run of up to the limit). `OP_BOUND_LIMIT=6s` (default: about the share of the op grid's
//! 12-s `best` that its bound gets), `OP_BOUND_NETS=resnet50,densenet121`,
//! `OP_BOUND_PROCESSORS=3,6`, `OP_BOUND_MEMORY=6GiB,16GiB`, `OP_BOUND_BANDWIDTH=12GB/s`
//! choose the cases (defaults: the four networks of the memory grid, P = 3, 6, M = 6 and
//! 16 GiB, 12 GB/s). Without `--bench` (as `cargo test` runs it): one case at 1 s.

use crate::support::cases;

use std::time::{Duration, Instant};

use pipeopt::milp::global_bound::{global_lower_bound, BoundOptions};
use pipeopt::model::{Instance, Platform};
use pipeopt::units::{parse_bandwidth, parse_bytes, parse_seconds};

use cases::{list, repository_root};

pub fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let pick = |var: &str, full: &str, quick: &str| list(var, if smoke { quick } else { full });
    let limit = Duration::from_secs_f64(
        parse_seconds(&pick("OP_BOUND_LIMIT", "6s", "1s")[0])
            .expect("OP_BOUND_LIMIT: a duration such as 6s"),
    );
    let nets = pick(
        "OP_BOUND_NETS",
        "resnet50,resnet101,inception_v3,densenet121",
        "resnet50",
    );
    let processors: Vec<usize> = pick("OP_BOUND_PROCESSORS", "3,6", "6")
        .iter()
        .map(|p| p.parse().expect("OP_BOUND_PROCESSORS: whole numbers"))
        .collect();
    let memories = pick("OP_BOUND_MEMORY", "6GiB,16GiB", "6GiB");
    let bandwidths = pick("OP_BOUND_BANDWIDTH", "12GB/s", "12GB/s");
    let root = repository_root();
    println!("global lower bound on op chains, limit {limit:?} each");
    println!("| network | P | M | beta | bound | complete | probes | seconds |");
    println!("|---|---|---|---|---|---|---|---|");
    for net in &nets {
        let op = Instance::load(&root.join(format!("instances/{net}-1000-b8-op-h100.json")))
            .expect("op instance");
        for &p in &processors {
            for m in &memories {
                for b in &bandwidths {
                    let platform = Platform::new(
                        p,
                        parse_bytes(m).expect("OP_BOUND_MEMORY"),
                        parse_bandwidth(b).expect("OP_BOUND_BANDWIDTH"),
                    );
                    let options = BoundOptions {
                        time_limit: Some(limit),
                        ..BoundOptions::default()
                    };
                    let start = Instant::now();
                    let bound = global_lower_bound(&op, &platform, &options).expect("bound runs");
                    let shown = if bound.infeasible {
                        "infeasible".to_string()
                    } else {
                        format!("{:.2} ms", bound.lower_bound * 1e3)
                    };
                    println!(
                        "| {net} | {p} | {m} | {b} | {shown} | {} | {} | {:.1} |",
                        bound.complete,
                        bound.solves,
                        start.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
}
