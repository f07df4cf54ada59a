//! What every algorithm implements and returns: the [`Planner`] trait, the [`Problem`] it
//! is given, the [`Solution`] it proposes and the [`Outcome`] of an attempt; and
//! [`AlgorithmOptions`], the typed options that build a planner.
//!
//! A leaf below every planner: it knows the model and nothing else, so that every planner
//! (in `partition`, `schedule`, `milp`) implements the trait without knowing the registry
//! ([`crate::algorithm::registry`]) that builds them by name, nor the driver
//! ([`crate::algorithm::run`]) that judges what they return; both sit above the planners.

use crate::model::bipartition::BiStage;
use crate::model::{Allocation, Instance, Pattern, Placement, Platform};
use crate::units::Seconds;

pub use crate::model::SolverSummary;

/// A planning problem: an instance on a platform.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub instance: &'a Instance,
    pub platform: &'a Platform,
}

impl Problem<'_> {
    /// The allocation of a `--partition` (each stage's first layer, 0-based; stage `i` on
    /// processor `i`), checked against the instance and the platform.
    pub fn partition_allocation(&self, partition: &[usize]) -> crate::error::Result<Allocation> {
        let allocation = Allocation::from_starts(partition, self.instance.len())?;
        if allocation.len() > self.platform.processors {
            return Err(crate::InputError::new(
                "--partition",
                "",
                format!(
                    "{} stages but the platform has {} processors",
                    allocation.len(),
                    self.platform.processors
                ),
            )
            .into());
        }
        Ok(allocation)
    }

    /// The numbers the MILP algorithms support (docs/model.md section 1, "Checks"): every
    /// nonzero `fwd` and `bwd` within [`MILP_SECONDS`], every size at most
    /// [`MILP_SIZE_PER_MEMORY`] times the memory. The models divide durations by the period
    /// and sizes by the memory, and HiGHS refuses coefficients past about 1e15 ("HiGHS
    /// rejected the model"): a layer of 1e-300 s and 3e298 bytes made one. Refused here,
    /// naming the field, before any model is built.
    pub fn check_milp_range(&self) -> Result<(), crate::InputError> {
        let (lo, hi) = MILP_SECONDS;
        let memory = self.platform.memory;
        let time = |field: String, t: f64| {
            if t != 0.0 && !(lo..=hi).contains(&t) {
                return Err(crate::InputError::new(
                    "instance",
                    field,
                    format!(
                        "{t:e} s is outside the range the MILP algorithms support: 0 or {lo:e} s \
                         to {hi:e} s"
                    ),
                ));
            }
            Ok(())
        };
        let size = |field: String, b: f64| {
            if b > MILP_SIZE_PER_MEMORY * memory {
                return Err(crate::InputError::new(
                    "instance",
                    field,
                    format!(
                        "{b:e} bytes is outside the range the MILP algorithms support: at most \
                         {MILP_SIZE_PER_MEMORY:e} times the memory ({memory:e} bytes)"
                    ),
                ));
            }
            Ok(())
        };
        size("input".into(), self.instance.input)?;
        for (i, l) in self.instance.layers.iter().enumerate() {
            let at = |f: &str| format!("layers[{i}].{f}");
            time(at("fwd"), l.fwd)?;
            time(at("bwd"), l.bwd)?;
            size(at("weights"), l.weights)?;
            size(at("out"), l.out)?;
            size(at("stash"), l.stash.unwrap_or(0.0))?;
            size(at("stash_overlap"), l.stash_overlap.unwrap_or(0.0))?;
        }
        for (i, e) in self.instance.stash_shared.iter().enumerate() {
            size(format!("stash_shared[{i}].bytes"), e.bytes)?;
        }
        Ok(())
    }
}

/// The nonzero layer durations the MILP algorithms support, in seconds
/// ([`Problem::check_milp_range`]).
pub const MILP_SECONDS: (Seconds, Seconds) = (1e-12, crate::units::MAX_SECONDS);

/// The largest size, as a multiple of the memory, the MILP algorithms support
/// ([`Problem::check_milp_range`]).
pub const MILP_SIZE_PER_MEMORY: f64 = 1e9;

/// What an algorithm found.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Where the operations run: an allocation, or Bi-Partition's workers; the pattern is
    /// judged against its batch graph ([`Placement::batch_graph`]).
    pub placement: Placement,
    /// The periodic pattern, or `None` for an allocation only (reported as "planned").
    pub pattern: Option<Pattern>,
    /// The algorithm's own period estimate before validation.
    pub planned_period: Option<Seconds>,
    /// A proven lower bound on the optimal period of the algorithm's search space.
    pub lower_bound: Option<Seconds>,
    /// True when a solver stopped at a limit with this incumbent (reported as "timeout").
    pub stopped_at_limit: bool,
    /// What the MILP solver said, when one was used.
    pub solver: Option<SolverSummary>,
    /// Notes for the report (where the plan came from, what was proven).
    pub messages: Vec<String>,
}

impl Solution {
    /// An allocation and maybe its pattern.
    pub fn new(allocation: Allocation, pattern: Option<Pattern>) -> Self {
        Solution::placed(Placement::Stages(allocation), pattern)
    }

    /// Bi-Partition's workers and their pattern.
    pub fn bipartition(workers: Vec<BiStage>, pattern: Option<Pattern>) -> Self {
        Solution::placed(Placement::BiPartition(workers), pattern)
    }

    /// Any placement and maybe its pattern.
    pub fn placed(placement: Placement, pattern: Option<Pattern>) -> Self {
        Solution {
            placement,
            pattern,
            planned_period: None,
            lower_bound: None,
            stopped_at_limit: false,
            solver: None,
            messages: Vec::new(),
        }
    }

    /// The allocation, when the placement is one (not Bi-Partition's workers).
    pub fn allocation(&self) -> Option<&Allocation> {
        self.placement.allocation()
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
    /// The name its reports and plan files carry (`1f1b*`, `pipedream`, `madpipe`...: the
    /// registry's name, [`crate::algorithm::Algorithm`], for the planners it builds).
    fn name(&self) -> String;
    /// Proposes a plan. Errors are for failures (bad options, solver crash), not for
    /// infeasibility, which is an [`Outcome`].
    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome>;
    /// True when the planner's `lower_bound` holds for every plan of the case (any
    /// allocation, any pattern) and its "infeasible" is a proof that no plan of any
    /// allocation fits: the report then carries them as `global_lower_bound` and
    /// `case_infeasible`.
    fn bound_is_global(&self) -> bool {
        false
    }
}

/// The options of one algorithm, as an experiment file's `options` table and the command
/// line's flags give them: a serde table that refuses unknown keys (`deny_unknown_fields`)
/// and builds the algorithm's planner, checking the values (so options built in code are
/// checked the same way). Each planner's file defines its own; the registry
/// ([`crate::algorithm::Configured`]) tags them with the algorithm's name.
///
/// Its serialized form is part of every sweep job's key: an optional field is left out
/// when unset (`skip_serializing_if`), so that adding an option keeps the keys of earlier
/// journals.
pub trait AlgorithmOptions:
    serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug + Clone + PartialEq
{
    /// The planner these options ask for, or an error naming the option whose value is
    /// wrong (its flag, e.g. `--coarsen`).
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError>;
}

/// A period given as an option (`--period`) must be positive and finite.
pub fn check_period(period: Option<Seconds>) -> Result<(), crate::InputError> {
    match period {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(crate::InputError::new(
            "--period",
            "",
            format!("must be a positive duration, got {t}"),
        )),
        _ => Ok(()),
    }
}

/// A time limit given as an option (`--time-limit`, an experiment file's `time_limit`): a
/// positive duration of at most [`crate::units::MAX_SECONDS`].
pub fn checked_time_limit(
    time_limit: Option<Seconds>,
) -> Result<Option<std::time::Duration>, crate::InputError> {
    let Some(t) = time_limit else {
        return Ok(None);
    };
    std::time::Duration::try_from_secs_f64(t)
        .ok()
        .filter(|d| !d.is_zero() && t <= crate::units::MAX_SECONDS)
        .map(Some)
        .ok_or_else(|| {
            crate::InputError::new(
                "--time-limit",
                "",
                format!(
                    "must be a positive duration of at most {:e} s, got {t}",
                    crate::units::MAX_SECONDS
                ),
            )
        })
}

/// A planner's deadline passed before its search ended: nothing was found or proven (a
/// limit is never reported as infeasibility).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the time limit passed before the search ended")]
pub struct OutOfTime;
