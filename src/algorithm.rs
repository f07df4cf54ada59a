//! The one small trait every partitioner, scheduler and MILP implements, the driver that
//! judges what they return, and the registry of algorithms by name.
//!
//! An algorithm ([`Planner`]) only proposes: an allocation, maybe a pattern, its own period
//! estimate and, for exact methods, a bound. [`run`] times it, sends the pattern through the
//! judge and builds the [`PlanReport`]; the period and peaks reported are the judge's.

use std::time::Instant;

use crate::judge::{judge, judge_graph, Judgement};
use crate::model::bipartition::{batch_graph, BiStage};
use crate::model::bounds::period_lower_bound;
use crate::model::{Allocation, Instance, Pattern, Plan, PlanReport, Platform, Status};
use crate::schedule::one_f_one_b_star;
use crate::units::Seconds;

/// A planning problem: an instance on a platform.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub instance: &'a Instance,
    pub platform: &'a Platform,
}

/// What an algorithm found.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub allocation: Allocation,
    /// The periodic pattern, or `None` for an allocation only (reported as "planned").
    pub pattern: Option<Pattern>,
    /// The algorithm's own period estimate before validation.
    pub planned_period: Option<Seconds>,
    /// A proven lower bound on the optimal period of the algorithm's search space.
    pub lower_bound: Option<Seconds>,
    /// True when a solver stopped at a limit with this incumbent (reported as "timeout").
    pub stopped_at_limit: bool,
    /// A Bi-Partition plan (forward and backward ranges per worker): when set, the pattern
    /// is judged against its batch graph ([`crate::model::bipartition::batch_graph`]) and
    /// `allocation` holds the forward ranges only, for display.
    pub bipartition: Option<Vec<BiStage>>,
    /// What the MILP solver said, when one was used.
    pub solver: Option<SolverSummary>,
    /// Notes for the report (where the plan came from, what was proven).
    pub messages: Vec<String>,
}

pub use crate::model::SolverSummary;

impl Solution {
    pub fn new(allocation: Allocation, pattern: Option<Pattern>) -> Self {
        Solution {
            allocation,
            pattern,
            planned_period: None,
            lower_bound: None,
            stopped_at_limit: false,
            bipartition: None,
            solver: None,
            messages: Vec::new(),
        }
    }
}

/// The result of a planning attempt that did not fail.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Found(Solution),
    /// No plan of this algorithm fits; the reason in words, and a bound when known.
    Infeasible {
        reason: String,
        lower_bound: Option<Seconds>,
    },
    /// A solver's limit stopped the search before any plan was found: reported as
    /// "timeout" with no period (docs/model.md section 9: a limit is never an error), the
    /// reason in words and the bound proven so far.
    NoPlanWithinLimit {
        reason: String,
        lower_bound: Option<Seconds>,
    },
}

/// The trait every algorithm implements.
pub trait Planner {
    /// The name under which the registry knows it (`1f1b*`, `pipedream`, `madpipe`...).
    fn name(&self) -> String;
    /// Proposes a plan. Errors are for failures (bad options, solver crash), not for
    /// infeasibility, which is an [`Outcome`].
    fn plan(&self, problem: &Problem) -> anyhow::Result<Outcome>;
    /// True when the planner's `lower_bound` holds for every plan of the case (any
    /// allocation, any pattern) and its "infeasible" is a proof that no plan of any
    /// allocation fits: the report then carries them as `global_lower_bound` and
    /// `case_infeasible`.
    fn bound_is_global(&self) -> bool {
        false
    }
}

/// Runs a planner, judges its plan, and returns the plan (when there is one) and the report.
///
/// An algorithm's failure is a report with status "error"; only bad input (an
/// [`InputError`](crate::InputError) from the planner, such as a malformed `--partition`) is
/// returned as an error.
pub fn run(
    planner: &dyn Planner,
    problem: &Problem,
) -> Result<(Option<Plan>, PlanReport), crate::InputError> {
    let started = Instant::now();
    let outcome = planner.plan(problem);
    let seconds = started.elapsed().as_secs_f64();
    let mut report = PlanReport {
        algorithm: planner.name(),
        instance: problem.instance.name.clone(),
        processors: problem.platform.processors,
        memory: problem.platform.memory,
        bandwidth: problem.platform.bandwidth,
        status: Status::Error,
        period: None,
        planned_period: None,
        peak_memory: vec![],
        solve_seconds: Some(seconds),
        lower_bound: None,
        global_lower_bound: None,
        gap: None,
        case_infeasible: false,
        stages: vec![],
        messages: vec![],
        solver: None,
    };
    let global = planner.bound_is_global();
    Ok(match outcome {
        Err(e) => match e.downcast::<crate::InputError>() {
            Ok(input) => return Err(input),
            Err(e) => {
                report.messages.push(format!("{e:#}"));
                (None, report)
            }
        },
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
            if sol.bipartition.is_none() {
                let instance_bound = period_lower_bound(problem.instance, problem.platform);
                sol.lower_bound = Some(sol.lower_bound.unwrap_or(0.0).max(instance_bound));
            }
            report.planned_period = sol.planned_period;
            report.lower_bound = sol.lower_bound;
            if global {
                report.global_lower_bound = sol.lower_bound;
            }
            report.messages.extend(sol.messages.iter().cloned());
            report.stages = sol.allocation.stages.clone();
            report.solver = sol.solver.clone();
            let plan = Plan {
                instance: problem.instance.clone(),
                instance_hash: problem.instance.content_hash(),
                platform: problem.platform.clone(),
                algorithm: planner.name(),
                planned_period: sol.planned_period,
                stages: sol.allocation.stages.clone(),
                pattern: sol.pattern.clone(),
                lower_bound: sol.lower_bound,
                solve_seconds: Some(seconds),
                bipartition: sol.bipartition.clone(),
            };
            match &sol.pattern {
                None => {
                    report.status = Status::Planned;
                    if let Err(e) = sol
                        .allocation
                        .check(problem.instance.len(), problem.platform.processors)
                    {
                        report.status = Status::Error;
                        report
                            .messages
                            .push(format!("the algorithm's allocation is malformed: {e}"));
                    }
                }
                Some(pattern) => {
                    let j: Judgement = match &sol.bipartition {
                        None => judge(problem.instance, problem.platform, &sol.allocation, pattern),
                        Some(stages) => {
                            match batch_graph(problem.instance, problem.platform, stages) {
                                Ok(g) => judge_graph(&g, problem.platform.memory, pattern),
                                Err(e) => Judgement {
                                    valid: false,
                                    period: pattern.period,
                                    peak_memory: vec![],
                                    peak_at: vec![],
                                    loads: vec![],
                                    violations: vec![crate::judge::Violation::Structure {
                                        message: e,
                                    }],
                                },
                            }
                        }
                    };
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

/// Options shared by the command line and experiment files; each algorithm reads the ones
/// it understands and rejects a missing one it needs. In an experiment file they are the
/// `options` table of an `[[algorithm]]` (durations as `"60s"` or seconds).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// 0-based index of each stage's first layer (`--partition 0,60,120,180`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<Vec<usize>>,
    /// A target period instead of the smallest one that fits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub period: Option<Seconds>,
    /// MadPipe's discretization and iteration count (Beaumont et al., ScaDL 2022, section
    /// 5.1 defaults).
    #[serde(default)]
    pub madpipe: crate::partition::madpipe::MadPipeConfig,
    /// Wall-clock limit for exact solvers (`--time-limit 60s`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// Coarsen the chain to this many groups before a general MILP (`--coarsen 16`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarsen: Option<usize>,
    /// Solver threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// For `madpipe`: let the second phase also move the first phase's stages between
    /// processors (the general MILP over those stages, `--remap-stages`). Left out of the
    /// serialized options when false, so the job keys of earlier sweeps stay valid.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remap_stages: bool,
    /// For `ilp`: how it searches the allocations (`--ilp-search`; `auto` by default, left
    /// out of the serialized options then, so the job keys of earlier sweeps stay valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ilp_search: Option<crate::milp::general::IlpSearch>,
}

impl Options {
    /// The MILP options these command-line options ask for.
    pub fn milp(&self) -> Result<crate::milp::MilpOptions, crate::InputError> {
        let mut m = crate::milp::MilpOptions::default();
        if let Some(t) = self.time_limit {
            m.time_limit = Some(
                std::time::Duration::try_from_secs_f64(t)
                    .ok()
                    .filter(|d| !d.is_zero() && t <= crate::units::MAX_SECONDS)
                    .ok_or_else(|| {
                        crate::InputError::new(
                            "--time-limit",
                            "",
                            format!(
                                "must be a positive duration of at most {:e} s, got {t}",
                                crate::units::MAX_SECONDS
                            ),
                        )
                    })?,
            );
        }
        if let Some(n) = self.threads {
            m.threads = u32::try_from(n)
                .ok()
                .and_then(std::num::NonZeroU32::new)
                .ok_or_else(|| {
                    crate::InputError::new("--threads", "", format!("must be 1 or more, got {n}"))
                })?;
        }
        Ok(m)
    }
}

/// 1F1B* on a given contiguous partitioning (Beaumont et al., ScaDL 2022, section 4.1):
/// stage `i` on processor `i`, at the given period or at the smallest period that fits
/// memory.
#[derive(Debug, Clone)]
pub struct OneFOneBStarPlanner {
    pub partition: Vec<usize>,
    pub period: Option<Seconds>,
}

impl Planner for OneFOneBStarPlanner {
    fn name(&self) -> String {
        "1f1b*".into()
    }

    fn plan(&self, problem: &Problem) -> anyhow::Result<Outcome> {
        let allocation = Allocation::from_starts(&self.partition, problem.instance.len())?;
        if allocation.len() > problem.platform.processors {
            return Err(crate::InputError::new(
                "--partition",
                "",
                format!(
                    "{} stages but the platform has {} processors",
                    allocation.len(),
                    problem.platform.processors
                ),
            )
            .into());
        }
        let r = one_f_one_b_star::schedule(
            problem.instance,
            problem.platform,
            &allocation,
            self.period,
        );
        match r {
            Ok(r) => {
                let mut sol = Solution::new(allocation, Some(r.pattern));
                sol.planned_period = None;
                Ok(Outcome::Found(sol))
            }
            Err(e @ one_f_one_b_star::OneFOneBStarError::NotContiguous(_)) => Err(e.into()),
            Err(e) => Ok(Outcome::Infeasible {
                reason: e.to_string(),
                lower_bound: None,
            }),
        }
    }
}

/// The general MILP's time limit when none is given.
pub const ILP_DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Names the registry knows, for `--help` and error messages.
pub const ALGORITHMS: &[&str] = &[
    "1f1b*",
    "pipedream",
    "madpipe-dp",
    "bipartition",
    "milp-schedule",
    "contiguous-opt",
    "madpipe",
    "ilp",
    "best",
];

/// The registry's own name for `name` (accepting aliases), or an error listing the names.
pub fn canonical(name: &str) -> Result<&'static str, crate::InputError> {
    let c = match name {
        "1f1b*" | "1f1bstar" | "1f1b" => "1f1b*",
        other => ALGORITHMS
            .iter()
            .copied()
            .find(|&a| a == other)
            .unwrap_or(""),
    };
    if c.is_empty() {
        Err(crate::InputError::new(
            "--algorithm",
            "",
            format!(
                "unknown algorithm {name:?}; known: {}",
                ALGORITHMS.join(", ")
            ),
        ))
    } else {
        Ok(c)
    }
}

/// Checks that the registry knows `name`.
pub fn check_name(name: &str) -> Result<(), crate::InputError> {
    canonical(name).map(|_| ())
}

/// Builds the planner registered under `name`.
pub fn planner(name: &str, options: &Options) -> Result<Box<dyn Planner>, crate::InputError> {
    let missing = |flag: &str| {
        crate::InputError::new(
            format!("--{flag}"),
            "",
            format!("algorithm {name} needs --{flag}"),
        )
    };
    if let (Some(_), false) = (options.coarsen, canonical(name)? == "ilp") {
        return Err(crate::InputError::new(
            "--coarsen",
            "",
            format!("coarsening is for the general MILP `ilp`; algorithm {name} does not use it"),
        ));
    }
    if options.remap_stages && canonical(name)? != "madpipe" {
        return Err(crate::InputError::new(
            "--remap-stages",
            "",
            format!("remapping stages is an option of `madpipe`; algorithm {name} does not use it"),
        ));
    }
    if options.ilp_search.is_some() && canonical(name)? != "ilp" {
        return Err(crate::InputError::new(
            "--ilp-search",
            "",
            format!("the search is an option of the general MILP `ilp`; algorithm {name} does not use it"),
        ));
    }
    if options.partition.is_some() && !matches!(canonical(name)?, "1f1b*" | "milp-schedule") {
        return Err(crate::InputError::new(
            "--partition",
            "",
            format!(
                "a given partition is for 1f1b* and milp-schedule; algorithm {name} finds its own"
            ),
        ));
    }
    if options.coarsen == Some(0) {
        return Err(crate::InputError::new(
            "--coarsen",
            "",
            "must be 1 or more groups",
        ));
    }
    match canonical(name)? {
        "1f1b*" => Ok(Box::new(OneFOneBStarPlanner {
            partition: options
                .partition
                .clone()
                .ok_or_else(|| missing("partition"))?,
            period: options.period,
        })),
        "pipedream" => Ok(Box::new(crate::partition::pipedream::PipeDreamPlanner {
            period: options.period,
            ignore_memory: false,
        })),
        "madpipe-dp" => {
            options.madpipe.check()?;
            Ok(Box::new(crate::partition::madpipe::MadPipeDpPlanner {
                config: options.madpipe,
            }))
        }
        "bipartition" | "bi-partition" => {
            Ok(Box::new(crate::partition::bipartition::BiPartitionPlanner))
        }
        "milp-schedule" | "milp" => Ok(Box::new(crate::milp::MilpSchedulePlanner {
            partition: options
                .partition
                .clone()
                .ok_or_else(|| missing("partition"))?,
            options: options.milp()?,
        })),
        "contiguous-opt" => Ok(Box::new(crate::milp::ContiguousOptPlanner {
            time_limit: options.milp()?.time_limit,
        })),
        "madpipe" => {
            options.madpipe.check()?;
            Ok(Box::new(crate::milp::MadPipePlanner {
                config: options.madpipe,
                milp: options.milp()?,
                remap_stages: options.remap_stages,
            }))
        }
        "best" => Ok(Box::new(crate::milp::best::BestPlanner {
            time_limit: options
                .milp()?
                .time_limit
                .unwrap_or(crate::milp::best::DEFAULT_TIME_LIMIT),
            milp: crate::milp::MilpOptions {
                time_limit: None,
                ..options.milp()?
            },
        })),
        "ilp" => {
            // The general MILP can run for hours: without a limit, stop at
            // ILP_DEFAULT_TIME_LIMIT (the plan found by then is reported as "timeout").
            let mut milp = options.milp()?;
            milp.time_limit = milp.time_limit.or(Some(ILP_DEFAULT_TIME_LIMIT));
            Ok(Box::new(crate::milp::GeneralMilpPlanner {
                coarsen: options.coarsen,
                search: options.ilp_search.unwrap_or_default(),
                options: milp,
            }))
        }
        other => unreachable!("algorithm {other} is listed but not built"),
    }
}
