//! `pipeopt validate`: the judge on a plan file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::judge::judge_plan;
use pipeopt::model::Plan;
use pipeopt::units::{ShowBytes, ShowSeconds};

#[derive(Args)]
pub struct ValidateArgs {
    /// The plan file (JSON, as written by `plan --out`).
    pub plan: PathBuf,
    /// Print one JSON object: {"valid", "period", "peak_memory", "violations", ...}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.plan)?;
    let j = judge_plan(&plan);
    if args.json {
        let violations: Vec<String> = j.violations.iter().map(|v| v.to_string()).collect();
        let out = serde_json::json!({
            "valid": j.valid,
            "period": if j.valid { Some(j.period) } else { None },
            "peak_memory": j.peak_memory,
            "violations": violations,
            "violation_details": j.violations,
            "loads": j.loads,
        });
        println!("{out}");
    } else {
        if j.valid {
            println!(
                "valid: period {} ({} batches/s)",
                ShowSeconds(j.period),
                1.0 / j.period
            );
        } else {
            println!("INVALID: {}", j.violations[0]);
            if j.violations.len() > 1 {
                println!("  ... and {} more violation(s)", j.violations.len() - 1);
            }
        }
        for (p, m) in j.peak_memory.iter().enumerate() {
            println!(
                "  processor {p:>2}: peak {:>12} of {}",
                ShowBytes(*m).to_string(),
                ShowBytes(plan.platform.memory)
            );
        }
        for l in &j.loads {
            println!(
                "  {:<24} busy {:>12} ({:.1}%)",
                l.resource,
                ShowSeconds(l.busy).to_string(),
                100.0 * l.utilization
            );
        }
    }
    Ok(if j.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
