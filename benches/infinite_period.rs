//! The proof that no plan of a case fits at any period (docs/bounds.md, "Infeasible
//! cases"): the packing search of `milp::global_bound::infinite` against the relaxation MILP
//! at an infinite period, on every (network, P, M) of `experiments/memory.toml` and of
//! `experiments/memory-op.toml` (the bandwidth plays no part at an infinite period).
//! Run: `cargo bench --bench benches -- infinite_period` (a bench program: one run per case).
//! `INFINITE_MILP_LIMIT=10s` sets the MILP's limit per case (default 10 s; `0s` skips it);
//! `INFINITE_LEVEL=block|op|both` picks the chains (default both).

use std::time::{Duration, Instant};

use pipeopt::milp::global_bound::infinite::{Answer, Packing};
use pipeopt::milp::global_bound::{relaxation_feasible, Relaxation};
use pipeopt::milp::MilpOptions;
use pipeopt::model::{Instance, Platform};
use pipeopt::units::parse_seconds;

pub fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let milp_limit = std::env::var("INFINITE_MILP_LIMIT")
        .ok()
        .map(|s| parse_seconds(&s).expect("INFINITE_MILP_LIMIT: a duration such as 10s"))
        .unwrap_or(if smoke { 0.0 } else { 10.0 });
    let level = std::env::var("INFINITE_LEVEL").unwrap_or_else(|_| "both".into());
    let mut files = Vec::new();
    for net in ["resnet50", "resnet101", "inception_v3", "densenet121"] {
        if level != "op" {
            files.push(format!("instances/{net}-1000-b8-h100.json"));
        }
        if level != "block" {
            files.push(format!("instances/{net}-1000-b8-op.json"));
        }
    }
    if smoke {
        files.truncate(1);
    }
    let gib = 1024.0f64.powi(3);
    println!("| instance | layers | P | M (GiB) | packing | packing ms | MILP | MILP s |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut slowest: f64 = 0.0;
    let (mut cases, mut undecided, mut disagree) = (0, 0, 0);
    for file in &files {
        let instance =
            Instance::load(std::path::Path::new(file)).expect("committed instance loads");
        for processors in 2..=8 {
            for memory in [3.0, 4.0, 6.0, 8.0, 12.0, 16.0] {
                let platform = Platform::new(processors, memory * gib, 12e9);
                let relax = Relaxation::new(&instance, &platform);
                let started = Instant::now();
                let answer = Packing::new(&relax).decide(Some(started + Duration::from_secs(10)));
                let packing_ms = started.elapsed().as_secs_f64() * 1e3;
                slowest = slowest.max(packing_ms);
                cases += 1;
                let word = match &answer {
                    Answer::Infeasible => "infeasible",
                    Answer::Feasible(_) => "feasible",
                    Answer::Undecided => {
                        undecided += 1;
                        "undecided"
                    }
                };
                let (milp_word, milp_s) = if milp_limit > 0.0 {
                    let options = MilpOptions {
                        time_limit: Some(Duration::from_secs_f64(milp_limit)),
                        ..MilpOptions::default()
                    };
                    let started = Instant::now();
                    let r = relaxation_feasible(&relax, f64::INFINITY, &options)
                        .expect("the MILP runs");
                    let s = started.elapsed().as_secs_f64();
                    let w = match r {
                        Some(true) => "feasible",
                        Some(false) => "infeasible",
                        None => "undecided",
                    };
                    if w != "undecided" && word != "undecided" && w != word {
                        disagree += 1;
                    }
                    (w, format!("{s:.2}"))
                } else {
                    ("-", "-".into())
                };
                println!(
                    "| {} | {} | {processors} | {memory} | {word} | {packing_ms:.1} | {milp_word} | {milp_s} |",
                    instance.name,
                    instance.len()
                );
            }
        }
    }
    println!(
        "{cases} cases: packing undecided in {undecided}, slowest {slowest:.1} ms; \
         decided answers that differ from the MILP's: {disagree}"
    );
    assert_eq!(disagree, 0, "the packing search and the MILP must agree");
}
