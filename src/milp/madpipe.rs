//! MadPipe, both phases: Beaumont, Eyraud-Dubois, Shilova, *MadPipe: Memory Aware Dynamic
//! Programming Algorithm for Pipelined Model Parallelism* (ScaDL 2022), section 4.3.
//!
//! The first phase ([`crate::partition::madpipe::algorithm1`]) chooses the stages and their
//! processors (normal processors hold one contiguous stage, the special processor several)
//! with a planned period; the second phase finds the periodic pattern of that allocation of
//! minimum period that fits memory, with the scheduling MILP of
//! [`crate::milp::fixed_allocation`] (stage activations count for memory, a stage's output
//! for communication, as section 4.3 says). The report's `period` is the validated
//! pattern's, `planned_period` the DP's. When the MILP finds no pattern that fits, the plan
//! is reported infeasible with the DP's estimate in the reason: the first phase's memory
//! model is discretized and can be optimistic.
//!
//! With `remap_stages` (`--remap-stages`), the second phase may also move the first
//! phase's stages between processors: the general MILP ([`crate::milp::general`]) places
//! the stages (as its groups) together with the pattern, starting from the fixed
//! allocation's pattern. Its period is never worse than the fixed allocation's, and it may
//! fit where the first phase's allocation does not.

use crate::milp::fixed_allocation::{outcome_of, schedule_allocation};
use crate::milp::general::{optimum_over_groups, IlpSearch};
use crate::milp::MilpOptions;
use crate::model::{Allocation, Stage};
use crate::partition::madpipe::{algorithm1_within, MadPipeConfig, MadPipeError};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem};
use crate::units::Seconds;

/// The `madpipe` algorithm: first phase + scheduling MILP.
#[derive(Debug, Clone, Default)]
pub struct MadPipePlanner {
    pub config: MadPipeConfig,
    pub milp: MilpOptions,
    /// Let the MILP move the stages between processors (module docs).
    pub remap_stages: bool,
}

impl MadPipePlanner {
    /// The planner of `madpipe`, with `config` checked.
    pub fn new(
        config: MadPipeConfig,
        milp: MilpOptions,
        remap_stages: bool,
    ) -> Result<Self, crate::InputError> {
        config.check()?;
        Ok(MadPipePlanner {
            config,
            milp,
            remap_stages,
        })
    }
}

/// The options of `madpipe`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MadPipeOptions {
    /// The first phase's discretization and iteration count (section 5.1 defaults).
    #[serde(default)]
    pub madpipe: MadPipeConfig,
    /// Wall-clock limit of the scheduling MILP (`--time-limit`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// HiGHS threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Let the second phase also move the first phase's stages between processors (the
    /// general MILP over those stages, `--remap-stages`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remap_stages: bool,
}

impl AlgorithmOptions for MadPipeOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        Ok(Box::new(MadPipePlanner::new(
            self.madpipe,
            MilpOptions::from_limits(self.time_limit, self.threads)?,
            self.remap_stages,
        )?))
    }
}

impl Planner for MadPipePlanner {
    fn name(&self) -> String {
        "madpipe".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.check_milp_range()?;
        // One limit for both phases: the first phase stops at it, the second gets what is
        // left of it.
        let started = std::time::Instant::now();
        let limit = self.milp.time_limit;
        let first = match algorithm1_within(problem.instance, problem.platform, &self.config, limit)
        {
            Ok(r) => r,
            Err(e @ MadPipeError::NoAllocation { .. }) => {
                return Ok(Outcome::Infeasible {
                    reason: e.to_string(),
                    lower_bound: None,
                })
            }
            Err(e @ MadPipeError::OutOfTime) => {
                return Ok(Outcome::NoPlanWithinLimit {
                    reason: e.to_string(),
                    lower_bound: None,
                })
            }
            Err(MadPipeError::Input(e)) => return Err(e.into()),
        };
        let mut milp = self.milp.clone();
        milp.time_limit = limit.map(|t| {
            t.saturating_sub(started.elapsed())
                .max(std::time::Duration::from_millis(1))
        });
        let milp = &milp;
        let out = schedule_allocation(problem.instance, problem.platform, &first.allocation, milp)?;
        if self.remap_stages {
            return remap(problem, &first.allocation, out, first.planned_period, milp);
        }
        Ok(match outcome_of(first.allocation, out) {
            Outcome::Found(mut sol) => {
                sol.planned_period = Some(first.planned_period);
                Outcome::Found(sol)
            }
            Outcome::Infeasible {
                reason,
                lower_bound,
            } => Outcome::Infeasible {
                reason: format!(
                    "{reason} (the first phase planned {:.6} s for it)",
                    first.planned_period
                ),
                lower_bound,
            },
            // The fixed allocation always has its sequential pattern to start from.
            other @ Outcome::NoPlanWithinLimit { .. } => other,
        })
    }
}

/// The second phase with stages free to move: the general MILP over the first phase's
/// stages, from the fixed allocation's pattern when it has one.
fn remap(
    problem: &Problem,
    allocation: &Allocation,
    fixed: crate::milp::MilpOutcome,
    planned_period: f64,
    options: &MilpOptions,
) -> crate::error::Result<Outcome> {
    let mut order: Vec<usize> = (0..allocation.len()).collect();
    order.sort_by_key(|&s| allocation.stages[s].first);
    let groups: Vec<(usize, usize)> = order
        .iter()
        .map(|&s| (allocation.stages[s].first, allocation.stages[s].last))
        .collect();
    // The fixed allocation's pattern, its stages renumbered as groups in chain order.
    let incumbent = fixed.pattern.map(|mut pattern| {
        let mut group_of = vec![0; order.len()];
        for (g, &s) in order.iter().enumerate() {
            group_of[s] = g;
        }
        for op in &mut pattern.ops {
            op.stage = group_of[op.stage];
        }
        let stages = order
            .iter()
            .enumerate()
            .map(|(g, &s)| Stage {
                first: g + 1,
                last: g + 1,
                processor: allocation.stages[s].processor,
            })
            .collect();
        (Allocation::new(stages), pattern)
    });
    // One time budget for both MILPs: the remapping gets what the fixed one left.
    let mut options = options.clone();
    options.time_limit = options.time_limit.map(|limit| {
        limit
            .saturating_sub(std::time::Duration::from_secs_f64(fixed.seconds))
            .max(std::time::Duration::from_millis(1))
    });
    let r = optimum_over_groups(
        problem.instance,
        problem.platform,
        groups,
        incumbent,
        IlpSearch::Auto,
        &options,
    )?;
    let mut outcome = r.into_outcome(problem.instance.len())?;
    if let Outcome::Found(sol) = &mut outcome {
        sol.planned_period = Some(planned_period);
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::run;
    use crate::model::{Instance, Layer, Platform, Status};

    fn chain(l: usize) -> Instance {
        Instance::chain(
            "t",
            4.0,
            (0..l)
                .map(|i| {
                    Layer::new(
                        format!("l{i}"),
                        1.0 + (i % 3) as f64,
                        2.0 + (i % 2) as f64,
                        1.0,
                        2.0 + (i % 4) as f64,
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn madpipe_plans_are_judged_valid_and_never_beat_the_bound() {
        let inst = chain(8);
        for (p, m) in [(2usize, 60.0), (3, 60.0), (3, 30.0)] {
            let platform = Platform::new(p, m, 4.0);
            let (_, report) = run(
                &MadPipePlanner::default(),
                &Problem {
                    instance: &inst,
                    platform: &platform,
                },
            )
            .unwrap();
            match report.status {
                Status::Valid | Status::Timeout => {
                    let t = report.period.unwrap();
                    assert!(report.planned_period.is_some());
                    assert!(t + 1e-9 >= report.lower_bound.unwrap());
                    // No plan beats perfect balance of the work.
                    assert!(t + 1e-9 >= inst.sums().u(1, 8) / p as f64);
                    assert!(report.solver.is_some());
                }
                Status::Infeasible => {}
                other => panic!("P={p} M={m}: {other:?} {:?}", report.messages),
            }
        }
    }
}
