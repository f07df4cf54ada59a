//! `pipeopt bound`: the global lower bound of a case (`milp::global_bound`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::model::Instance;
use pipeopt::units::{parse_seconds, ShowBytes, ShowSeconds};
use pipeopt::InputError;

use super::PlatformArgs;

#[derive(Args)]
pub struct BoundArgs {
    /// The instance file (JSON, docs/model.md section 9).
    #[arg(long, short = 'i')]
    pub instance: PathBuf,
    #[command(flatten)]
    pub platform: PlatformArgs,
    /// Wall-clock limit of the search, e.g. 30s; at the limit the bound proven so far is
    /// reported ("complete": false). Without one the search runs until its bisection ends
    /// (minutes on the larger real chains: ResNet-101 on 7 processors at 8 GiB, 24 GB/s
    /// took about 4). "complete": true says the bisection reached its precision with an
    /// assignment passing the relaxation just above the bound, every one of its checks
    /// answered; false, that the limit came first, or that a probe near the bound was left
    /// undecided or passed only because a check ran out of time (more time may raise the
    /// bound).
    #[arg(long, value_parser = parse_seconds)]
    pub time_limit: Option<f64>,
    /// Relative precision of the bisection on the period (default 0.001).
    #[arg(long, default_value_t = 1e-3)]
    pub precision: f64,
    /// Print one JSON object: {"lower_bound", "infeasible", "method", "solve_seconds", ...}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BoundArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::milp::global_bound::{global_lower_bound, BoundOptions};
    let instance = Instance::load(&args.instance)?;
    let platform = args.platform.platform()?;
    if !(args.precision.is_finite() && args.precision > 0.0 && args.precision < 1.0) {
        return Err(InputError::new(
            "--precision",
            "",
            format!("must be in (0, 1), got {}", args.precision),
        )
        .into());
    }
    let options = BoundOptions {
        time_limit: pipeopt::milp::MilpOptions::from_limits(args.time_limit, None)?.time_limit,
        precision: args.precision,
        ..BoundOptions::default()
    };
    let b = global_lower_bound(&instance, &platform, &options)?;
    if args.json {
        let mut v = serde_json::to_value(&b)?;
        if b.infeasible {
            v["lower_bound"] = serde_json::Value::Null;
        }
        v["instance"] = instance.name.clone().into();
        v["processors"] = platform.processors.into();
        v["memory"] = platform.memory.into();
        v["bandwidth"] = platform.bandwidth.into();
        println!("{v}");
    } else {
        println!(
            "{} | P = {}, M = {}, beta = {:.3} GB/s",
            instance.name,
            platform.processors,
            ShowBytes(platform.memory),
            platform.bandwidth / 1e9
        );
        if b.infeasible {
            println!(
                "infeasible      no allocation fits, at any period (proof: {})",
                b.method
            );
        } else {
            println!("lower bound     {}", ShowSeconds(b.lower_bound));
            if let Some(t) = b.relaxed_period {
                println!(
                    "relaxed period  {} (an assignment passes the relaxation there)",
                    ShowSeconds(t)
                );
            }
            println!("method          {}", b.method);
            println!(
                "complete        {}",
                if b.complete {
                    "yes (the relaxation passes just above the bound, every check answered)"
                } else {
                    "no (the limit came first, or a probe near the bound was left undecided \
                     or passed only because a check ran out of time: more time may raise it)"
                }
            );
        }
        println!(
            "solve time      {} ({} probes, {} MILP nodes)",
            ShowSeconds(b.solve_seconds),
            b.solves,
            b.nodes
        );
    }
    Ok(ExitCode::SUCCESS)
}
