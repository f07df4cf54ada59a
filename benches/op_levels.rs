//! `best` on an op-level chain against the lifted plan of its block-level chain: the op chain
//! coarsened at its networks' block boundaries (the op instance's own times and sizes,
//! docs/op-chains.md, "Coarser levels"), `best` on that block chain, its plan lifted to the
//! ops and judged there, beside `best` on the op chain itself with the same time limit. Every
//! block plan is an op plan, so the op-level search should never be longer.
//!
//! Run: `cargo bench --bench benches -- op_levels` (a bench program, not criterion: each case
//! is two runs of up to the limit). `LEVELS_LIMIT=12s` (default, the op grid's `best` limit),
//! `LEVELS_NETS=resnet50,densenet121`, `LEVELS_PROCESSORS=2,4,8`, `LEVELS_MEMORY=6GiB,16GiB`,
//! `LEVELS_BANDWIDTH=12GB/s` choose the cases (defaults: the four networks of the memory grid,
//! P = 2, 4, 8, M = 6 and 16 GiB, 12 GB/s).

use crate::support::cases;

use std::time::Duration;

use pipeopt::algorithm::{Outcome, Planner, Problem};
use pipeopt::judge::judge;
use pipeopt::milp::best::{plan_source, BestPlanner};
use pipeopt::model::coarsen::{coarsen, lasts_by_names};
use pipeopt::model::{Instance, Placement, Platform};
use pipeopt::units::{parse_bandwidth, parse_bytes, parse_seconds};

/// `best`'s plan on `problem` within `limit`: period and where it came from.
use cases::{list, repository_root};

fn best(
    problem: &Problem,
    limit: Duration,
) -> Option<(Placement, pipeopt::model::Pattern, String)> {
    let planner = BestPlanner {
        time_limit: limit,
        ..BestPlanner::default()
    };
    match planner.plan(problem).expect("best runs") {
        Outcome::Found(sol) => {
            let source = plan_source(&sol.messages).unwrap_or("?").to_string();
            Some((sol.placement, sol.pattern?, source))
        }
        _ => None,
    }
}

pub fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let limit = Duration::from_secs_f64(
        parse_seconds(
            &std::env::var("LEVELS_LIMIT")
                .unwrap_or_else(|_| if smoke { "2s" } else { "12s" }.into()),
        )
        .expect("LEVELS_LIMIT: a duration such as 12s"),
    );
    let nets = if smoke {
        vec!["resnet50".to_string()]
    } else {
        list("LEVELS_NETS", "resnet50,resnet101,inception_v3,densenet121")
    };
    let processors: Vec<usize> = if smoke {
        vec![4]
    } else {
        list("LEVELS_PROCESSORS", "2,4,8")
            .iter()
            .map(|p| p.parse().expect("LEVELS_PROCESSORS: whole numbers"))
            .collect()
    };
    let memories = if smoke {
        vec!["16GiB".into()]
    } else {
        list("LEVELS_MEMORY", "6GiB,16GiB")
    };
    let bandwidths = list("LEVELS_BANDWIDTH", "12GB/s");
    let root = repository_root();
    println!("best on op chains against the lifted block plan, limit {limit:?} each");
    println!("| network | P | M | beta | block plan lifted | op-level best | op / block | op plan from |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut worse = 0;
    for net in &nets {
        let op = Instance::load(&root.join(format!("instances/{net}-1000-b8-op-h100.json")))
            .expect("op instance");
        let block = Instance::load(&root.join(format!("instances/{net}-1000-b8-h100.json")))
            .expect("block instance");
        let names: Vec<&str> = block.layers.iter().map(|l| l.name.as_str()).collect();
        let lasts = lasts_by_names(&op, &names).expect("the block chain groups the op chain");
        let level = coarsen(&op, &lasts);
        for &p in &processors {
            for m in &memories {
                for b in &bandwidths {
                    let platform = Platform::new(
                        p,
                        parse_bytes(m).expect("LEVELS_MEMORY"),
                        parse_bandwidth(b).expect("LEVELS_BANDWIDTH"),
                    );
                    let lifted = best(
                        &Problem {
                            instance: &level.coarse,
                            platform: &platform,
                        },
                        limit,
                    )
                    .map(|(placement, pattern, _)| {
                        let Placement::Stages(a) = placement else {
                            panic!("best returns allocations")
                        };
                        let fine = level.lift(&a);
                        let j = judge(&op, &platform, &fine, &pattern);
                        assert!(j.valid, "{net}: the lifted plan {:?}", j.violations);
                        j.period
                    });
                    let ours = best(
                        &Problem {
                            instance: &op,
                            platform: &platform,
                        },
                        limit,
                    );
                    let show =
                        |t: Option<f64>| t.map_or("-".into(), |t| format!("{:.2} ms", t * 1e3));
                    let ratio = match (lifted, ours.as_ref()) {
                        (Some(l), Some((_, pat, _))) => {
                            if pat.period > l * 1.001 {
                                worse += 1;
                            }
                            format!("{:.4}", pat.period / l)
                        }
                        (Some(_), None) => {
                            worse += 1;
                            "none".into()
                        }
                        _ => "-".into(),
                    };
                    println!(
                        "| {net} | {p} | {m} | {b} | {} | {} | {ratio} | {} |",
                        show(lifted),
                        show(ours.as_ref().map(|o| o.1.period)),
                        ours.as_ref().map_or("-", |o| o.2.as_str())
                    );
                }
            }
        }
    }
    println!(
        "cases where op-level best is more than 0.1% longer than the lifted block plan: {worse}"
    );
}
