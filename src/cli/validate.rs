//! `pipeopt validate`: the judge on a plan file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::judge::judge_plan;
use pipeopt::model::Plan;
use pipeopt::units::{ShowBytes, ShowSeconds};

#[derive(Args)]
pub struct ValidateArgs {
    /// The plan file (JSON, as written by `plan --out`), or a `sync --out` file (its
    /// streams replayed on its costs and compared with its report).
    pub plan: PathBuf,
    /// Print one JSON object: {"valid", "status", "period", "peak_memory", "violations",
    /// ...}; a plan without a pattern (status planned) gives "valid": null and "status":
    /// "planned".
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    if pipeopt::plot::sync_gantt::is_sync_file(&args.plan) {
        let (text, code) = sync_verdict(&args.plan, args.json)?;
        return super::emit(&text, code);
    }
    let plan = Plan::load(&args.plan)?;
    let (text, code) = match &plan.pattern {
        Some(_) => verdict(&plan, args.json),
        None => planned(&plan, args.json),
    };
    // The verdict is the exit status whatever becomes of stdout.
    super::emit(&text, code)
}

/// A plan with an allocation and no pattern (an algorithm's first phase, status
/// "planned"): nothing to judge yet, which is its verdict (exit 0). Its allocation was
/// checked when the file was read.
fn planned(plan: &Plan, json: bool) -> (String, ExitCode) {
    let stages = plan.placement.stages();
    let text = if json {
        let out = serde_json::json!({
            "valid": null,
            "status": "planned",
            "verdict": "planned: allocation without a schedule",
            "planned_period": plan.planned_period,
            "stages": stages,
            "period": null,
            "peak_memory": [],
            "violations": [],
            "violation_details": [],
            "loads": [],
        });
        format!("{out}\n")
    } else {
        let mut t = String::from(
            "planned: allocation without a schedule (no pattern to judge; \
             `pipeopt schedule` finds one)\n",
        );
        if let Some(p) = plan.planned_period {
            t += &format!("  planned period {}\n", ShowSeconds(p));
        }
        for (i, s) in stages.iter().enumerate() {
            t += &format!(
                "  stage {i:>3}: layers {:>4}..={:<4} on processor {}\n",
                s.first, s.last, s.processor
            );
        }
        t
    };
    (text, ExitCode::SUCCESS)
}

/// The judge's verdict on a plan with a pattern: exit 0 when valid, 1 when not.
fn verdict(plan: &Plan, json: bool) -> (String, ExitCode) {
    use std::fmt::Write;
    let j = judge_plan(plan);
    let mut t = String::new();
    if json {
        let violations: Vec<String> = j.violations.iter().map(|v| v.to_string()).collect();
        let out = serde_json::json!({
            "valid": j.valid,
            "status": if j.valid { "valid" } else { "invalid" },
            "period": if j.valid { Some(j.period) } else { None },
            "peak_memory": j.peak_memory,
            "violations": violations,
            "violation_details": j.violations,
            "loads": j.loads,
        });
        let _ = writeln!(t, "{out}");
    } else {
        if j.valid {
            let _ = writeln!(
                t,
                "valid: period {} ({} batches/s)",
                ShowSeconds(j.period),
                1.0 / j.period
            );
        } else {
            let _ = writeln!(t, "INVALID: {}", j.violations[0]);
            if j.violations.len() > 1 {
                let _ = writeln!(t, "  ... and {} more violation(s)", j.violations.len() - 1);
            }
        }
        for (p, m) in j.peak_memory.iter().enumerate() {
            let _ = writeln!(
                t,
                "  processor {p:>2}: peak {:>12} of {}",
                ShowBytes(*m).to_string(),
                ShowBytes(plan.platform.memory)
            );
        }
        for l in &j.loads {
            let _ = writeln!(
                t,
                "  {:<24} busy {:>12} ({:.1}%)",
                l.resource,
                ShowSeconds(l.busy).to_string(),
                100.0 * l.utilization
            );
        }
    }
    let code = if j.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    (t, code)
}

/// The verdict on a `sync --out` file: its streams replayed on its own costs give the
/// iteration time and peaks its report gives (exit 0), or not (exit 1).
fn sync_verdict(path: &std::path::Path, json: bool) -> anyhow::Result<(String, ExitCode)> {
    let v = pipeopt::schedule::sync::file::judge_file(path)?;
    let text = if json {
        let out = serde_json::json!({
            "valid": v.valid,
            "status": if v.valid { "valid" } else { "invalid" },
            "kind": "sync",
            "makespan": v.makespan_seconds,
            "peak_memory": v.peak_memory,
            "violations": v.violations,
        });
        format!("{out}\n")
    } else if v.valid {
        let mut t = format!(
            "valid: synchronous iteration {} (the streams replayed on the file's costs)\n",
            ShowSeconds(v.makespan_seconds.unwrap_or(f64::NAN))
        );
        for (w, m) in v.peak_memory.iter().enumerate() {
            t += &format!("  worker {w:>2}: peak {:>12}\n", ShowBytes(*m).to_string());
        }
        t
    } else {
        format!("INVALID: {}\n", v.violations.join("; "))
    };
    let code = if v.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    Ok((text, code))
}
