//! The driver: runs a planner, judges what it returns, builds the report.
//!
//! An algorithm ([`Planner`]) only proposes: an allocation, maybe a pattern, its own period
//! estimate and, for exact methods, a bound. [`run`] times it, sends the pattern through the
//! judge and builds the [`PlanReport`]; the period and peaks reported are the judge's.

use std::time::Instant;

use crate::judge::judge_pattern;
use crate::model::bounds::period_lower_bound;
use crate::model::{Placement, Plan, PlanReport, Platform, Status};
use crate::planner::{Outcome, Planner, Problem};

/// Runs a planner, judges its plan, and returns the plan (when there is one) and the report.
///
/// An algorithm's failure ([`Error::Solver`](crate::Error::Solver),
/// [`Error::Internal`](crate::Error::Internal)) is a report with status "error"; only bad
/// input ([`Error::Input`](crate::Error::Input) from the planner, such as a malformed
/// `--partition`) is returned as an error.
pub fn run(
    planner: &dyn Planner,
    problem: &Problem,
) -> Result<(Option<Plan>, PlanReport), crate::InputError> {
    let started = Instant::now();
    let outcome = planner.plan(problem);
    let seconds = started.elapsed().as_secs_f64();
    let mut report = empty_report(&planner.name(), &problem.instance.name, problem.platform);
    report.solve_seconds = Some(seconds);
    let global = planner.bound_is_global();
    Ok(match outcome {
        Err(crate::Error::Input(input)) => return Err(input),
        Err(e) => {
            report.messages.push(e.to_string());
            (None, report)
        }
        Ok(Outcome::Infeasible {
            reason,
            lower_bound,
        }) => {
            report.status = Status::Infeasible;
            report.lower_bound = lower_bound;
            report.case_infeasible = global;
            report.messages.push(reason);
            (None, report)
        }
        Ok(Outcome::NoPlanWithinLimit {
            reason,
            lower_bound,
        }) => {
            report.status = Status::Timeout;
            report.lower_bound = lower_bound;
            if global {
                report.global_lower_bound = lower_bound;
            }
            report.messages.push(reason);
            (None, report)
        }
        Ok(Outcome::Found(mut sol)) => {
            // Every plan of the allocation space is bounded below by the instance's bounds
            // (`model::bounds`); Bi-Partition plans are outside it (a layer's F and B may
            // run on different workers), so they keep their own bound only.
            if let Placement::Stages(_) = sol.placement {
                let instance_bound = period_lower_bound(problem.instance, problem.platform);
                sol.lower_bound = Some(sol.lower_bound.unwrap_or(0.0).max(instance_bound));
            }
            report.planned_period = sol.planned_period;
            report.lower_bound = sol.lower_bound;
            if global {
                report.global_lower_bound = sol.lower_bound;
            }
            report.messages.extend(sol.messages.iter().cloned());
            report.stages = sol.placement.stages();
            report.placement = Some(sol.placement.kind());
            report.solver = sol.solver.clone();
            let plan = Plan {
                instance: problem.instance.clone(),
                instance_hash: problem.instance.content_hash(),
                platform: problem.platform.clone(),
                algorithm: planner.name(),
                planned_period: sol.planned_period,
                placement: sol.placement.clone(),
                pattern: sol.pattern.clone(),
                lower_bound: sol.lower_bound,
                solve_seconds: Some(seconds),
            };
            match &sol.pattern {
                None => {
                    report.status = Status::Planned;
                    if let Err(e) = sol
                        .placement
                        .check(problem.instance.len(), problem.platform.processors)
                    {
                        report.status = Status::Error;
                        report
                            .messages
                            .push(format!("the algorithm's allocation is malformed: {e}"));
                    }
                }
                Some(pattern) => {
                    let j = judge_pattern(plan.batch_graph(), problem.platform.memory, pattern);
                    report.peak_memory = j.peak_memory.clone();
                    if j.valid {
                        report.period = Some(j.period);
                        report.gap = report
                            .global_lower_bound
                            .filter(|&b| b > 0.0)
                            .map(|b| j.period / b - 1.0);
                        report.status = if sol.stopped_at_limit {
                            Status::Timeout
                        } else {
                            Status::Valid
                        };
                    } else {
                        report.status = Status::Error;
                        report
                            .messages
                            .push("the validator rejected the algorithm's plan".into());
                        report
                            .messages
                            .extend(j.violations.iter().map(|v| v.to_string()));
                    }
                }
            }
            (Some(plan), report)
        }
    })
}

/// The report of `algorithm` on the instance named `instance` and `platform` before
/// anything is known: status "error", no plan. [`run`] fills it in; the command line's
/// watchdog reports a run that outlasts its time limit with it (status "timeout").
pub fn empty_report(algorithm: &str, instance: &str, platform: &Platform) -> PlanReport {
    PlanReport {
        algorithm: algorithm.to_string(),
        instance: instance.to_string(),
        processors: platform.processors,
        memory: platform.memory,
        bandwidth: platform.bandwidth,
        status: Status::Error,
        period: None,
        planned_period: None,
        peak_memory: vec![],
        solve_seconds: None,
        lower_bound: None,
        global_lower_bound: None,
        gap: None,
        case_infeasible: false,
        stages: vec![],
        placement: None,
        messages: vec![],
        solver: None,
    }
}
