//! The algorithms by name: [`Algorithm`], one variant per planner, and [`Options`], the
//! options the command line and experiment files give them.
//!
//! Above the planners: this module knows every planner, no planner knows it. Each
//! algorithm has one arm in [`Algorithm::descriptor`]: its name (and aliases), its help,
//! the options it reads and the function that turns [`Options`] into its planner through
//! the planner's own constructor, which checks the values (so a planner built directly is
//! checked the same way). Adding an algorithm is its own file, a variant and that arm.
//!
//! [`Options`] stays one flat table, as it is written in experiment files and hashed into
//! sweep job keys (its serialized form must not change, or every key of every journal
//! changes). The options that name one algorithm's own choice (`partition`, `coarsen`,
//! `remap_stages`, `ilp_search`) are refused by an algorithm that does not read them; the
//! general ones (`period`, `time_limit`, `threads`, `madpipe`) are ignored by an algorithm
//! that has no use for them.

use std::fmt;

use super::api::Planner;
use crate::milp::best::BestPlanner;
use crate::milp::general::GeneralMilpPlanner;
use crate::milp::{ContiguousOptPlanner, MadPipePlanner, MilpSchedulePlanner};
use crate::partition::bipartition::BiPartitionPlanner;
use crate::partition::madpipe::MadPipeDpPlanner;
use crate::partition::pipedream::PipeDreamPlanner;
use crate::schedule::one_f_one_b_star::OneFOneBStarPlanner;
use crate::units::Seconds;
use crate::InputError;

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

/// An option of [`Options`], by its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionName {
    Partition,
    Period,
    MadPipe,
    TimeLimit,
    Coarsen,
    Threads,
    RemapStages,
    IlpSearch,
}

impl OptionName {
    /// The command-line flag (`--partition`); experiment files write it `partition`.
    pub fn flag(self) -> &'static str {
        match self {
            OptionName::Partition => "--partition",
            OptionName::Period => "--period",
            OptionName::MadPipe => "--madpipe",
            OptionName::TimeLimit => "--time-limit",
            OptionName::Coarsen => "--coarsen",
            OptionName::Threads => "--threads",
            OptionName::RemapStages => "--remap-stages",
            OptionName::IlpSearch => "--ilp-search",
        }
    }

    /// The options that name one algorithm's own choice: an algorithm that does not read
    /// them refuses them (module docs).
    pub const SPECIFIC: [OptionName; 4] = [
        OptionName::Partition,
        OptionName::Coarsen,
        OptionName::RemapStages,
        OptionName::IlpSearch,
    ];

    /// True when `options` sets it.
    fn is_set(self, o: &Options) -> bool {
        match self {
            OptionName::Partition => o.partition.is_some(),
            OptionName::Period => o.period.is_some(),
            OptionName::MadPipe => o.madpipe != Default::default(),
            OptionName::TimeLimit => o.time_limit.is_some(),
            OptionName::Coarsen => o.coarsen.is_some(),
            OptionName::Threads => o.threads.is_some(),
            OptionName::RemapStages => o.remap_stages,
            OptionName::IlpSearch => o.ilp_search.is_some(),
        }
    }
}

/// What the registry knows of one algorithm: [`Algorithm::descriptor`].
pub struct Descriptor {
    /// The name in reports, plan files and tables.
    pub name: &'static str,
    /// Other names `--algorithm` and experiment files accept.
    pub aliases: &'static [&'static str],
    /// One line for `--help`.
    pub help: &'static str,
    /// The options it reads.
    pub reads: &'static [OptionName],
    /// True when its `lower_bound` holds for every plan of a case (any allocation, any
    /// pattern), so that figures may compare it across algorithms.
    pub bound_covers_every_plan: bool,
    /// Builds its planner from the options (checked already against `reads`).
    build: fn(&Options) -> Result<Box<dyn Planner>, InputError>,
}

/// The algorithms of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    OneFOneBStar,
    PipeDream,
    MadPipeDp,
    BiPartition,
    MilpSchedule,
    ContiguousOpt,
    MadPipe,
    Ilp,
    Best,
}

/// `options.partition`, which `algorithm` needs.
fn partition(o: &Options, algorithm: &str) -> Result<Vec<usize>, InputError> {
    o.partition.clone().ok_or_else(|| {
        InputError::new(
            "--partition",
            "",
            format!("algorithm {algorithm} needs --partition"),
        )
    })
}

impl Algorithm {
    /// Every algorithm, in the order of `--help` and of the tables.
    pub const ALL: &'static [Algorithm] = &[
        Algorithm::OneFOneBStar,
        Algorithm::PipeDream,
        Algorithm::MadPipeDp,
        Algorithm::BiPartition,
        Algorithm::MilpSchedule,
        Algorithm::ContiguousOpt,
        Algorithm::MadPipe,
        Algorithm::Ilp,
        Algorithm::Best,
    ];

    /// Everything the registry knows of the algorithm: one arm per algorithm.
    pub fn descriptor(self) -> Descriptor {
        use OptionName::*;
        match self {
            Algorithm::OneFOneBStar => Descriptor {
                name: "1f1b*",
                aliases: &["1f1bstar", "1f1b"],
                help: "a given --partition scheduled by 1F1B*",
                reads: &[Partition, Period],
                bound_covers_every_plan: false,
                build: |o| {
                    Ok(Box::new(OneFOneBStarPlanner::new(
                        partition(o, "1f1b*")?,
                        o.period,
                    )))
                },
            },
            Algorithm::PipeDream => Descriptor {
                name: "pipedream",
                aliases: &[],
                help: "PipeDream's straight DP, then 1F1B*",
                reads: &[Period],
                bound_covers_every_plan: false,
                build: |o| {
                    Ok(Box::new(PipeDreamPlanner {
                        period: o.period,
                        ignore_memory: false,
                    }))
                },
            },
            Algorithm::MadPipeDp => Descriptor {
                name: "madpipe-dp",
                aliases: &[],
                help: "MadPipe's first phase (an allocation and its planned period)",
                reads: &[MadPipe],
                bound_covers_every_plan: false,
                build: |o| Ok(Box::new(MadPipeDpPlanner::new(o.madpipe)?)),
            },
            Algorithm::BiPartition => Descriptor {
                name: "bipartition",
                aliases: &[],
                help: "Bi-Partition: separate forward and backward cuts",
                reads: &[],
                bound_covers_every_plan: false,
                build: |_| Ok(Box::new(BiPartitionPlanner)),
            },
            Algorithm::MilpSchedule => Descriptor {
                name: "milp-schedule",
                aliases: &[],
                help: "a given --partition, its pattern by the scheduling MILP",
                reads: &[Partition, TimeLimit, Threads],
                bound_covers_every_plan: false,
                build: |o| {
                    Ok(Box::new(MilpSchedulePlanner::new(
                        partition(o, "milp-schedule")?,
                        o.milp()?,
                    )))
                },
            },
            Algorithm::ContiguousOpt => Descriptor {
                name: "contiguous-opt",
                aliases: &[],
                help: "the best contiguous allocation (exact)",
                reads: &[TimeLimit, Threads],
                bound_covers_every_plan: false,
                build: |o| {
                    Ok(Box::new(ContiguousOptPlanner {
                        time_limit: o.milp()?.time_limit,
                    }))
                },
            },
            Algorithm::MadPipe => Descriptor {
                name: "madpipe",
                aliases: &[],
                help: "MadPipe's first phase, then its scheduling MILP",
                reads: &[MadPipe, TimeLimit, Threads, RemapStages],
                bound_covers_every_plan: false,
                build: |o| {
                    Ok(Box::new(MadPipePlanner::new(
                        o.madpipe,
                        o.milp()?,
                        o.remap_stages,
                    )?))
                },
            },
            Algorithm::Ilp => Descriptor {
                name: "ilp",
                aliases: &[],
                help: "the general MILP: any allocation, with its pattern (see --coarsen)",
                reads: &[TimeLimit, Threads, Coarsen, IlpSearch],
                bound_covers_every_plan: true,
                build: |o| {
                    // The general MILP can run for hours: without a limit, it stops at its
                    // default (the plan found by then is reported as "timeout").
                    let mut milp = o.milp()?;
                    milp.time_limit = milp
                        .time_limit
                        .or(Some(crate::milp::general::DEFAULT_TIME_LIMIT));
                    Ok(Box::new(GeneralMilpPlanner::new(
                        o.coarsen,
                        o.ilp_search.unwrap_or_default(),
                        milp,
                    )?))
                },
            },
            Algorithm::Best => Descriptor {
                name: "best",
                aliases: &[],
                help: "the best plan of any allocation found within --time-limit, with the \
                       global lower bound; with time left, exact checks prove it optimal",
                reads: &[TimeLimit, Threads],
                bound_covers_every_plan: true,
                build: |o| {
                    let milp = o.milp()?;
                    Ok(Box::new(BestPlanner {
                        time_limit: milp
                            .time_limit
                            .unwrap_or(crate::milp::best::DEFAULT_TIME_LIMIT),
                        milp: crate::milp::MilpOptions {
                            time_limit: None,
                            ..milp
                        },
                    }))
                },
            },
        }
    }

    /// The name in reports, plan files and tables.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// The algorithm named `name` (or one of its aliases), or an error listing the names.
    pub fn parse(name: &str) -> Result<Algorithm, InputError> {
        Algorithm::ALL
            .iter()
            .copied()
            .find(|a| {
                let d = a.descriptor();
                d.name == name || d.aliases.contains(&name)
            })
            .ok_or_else(|| {
                InputError::new(
                    "--algorithm",
                    "",
                    format!(
                        "unknown algorithm {name:?}; known: {}",
                        Algorithm::ALL
                            .iter()
                            .map(|a| a.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    /// True when the algorithm reads `option`.
    pub fn reads(self, option: OptionName) -> bool {
        self.descriptor().reads.contains(&option)
    }

    /// Builds the algorithm's planner from `options`: refuses an option that names another
    /// algorithm's choice (module docs) and a missing one it needs; its planner's
    /// constructor checks the values.
    pub fn planner(self, options: &Options) -> Result<Box<dyn Planner>, InputError> {
        let d = self.descriptor();
        if let Some(&option) = OptionName::SPECIFIC
            .iter()
            .find(|o| o.is_set(options) && !d.reads.contains(o))
        {
            let owners: Vec<&str> = Algorithm::ALL
                .iter()
                .filter(|a| a.reads(option))
                .map(|a| a.name())
                .collect();
            return Err(InputError::new(
                option.flag(),
                "",
                format!(
                    "{} is an option of {}; algorithm {} does not use it",
                    option.flag(),
                    owners.join(" and "),
                    d.name
                ),
            ));
        }
        (d.build)(options)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = InputError;
    fn from_str(s: &str) -> Result<Self, InputError> {
        Algorithm::parse(s)
    }
}

/// `--algorithm NAME`: the names, aliases and help of [`Algorithm::descriptor`].
impl clap::ValueEnum for Algorithm {
    fn value_variants<'a>() -> &'a [Self] {
        Algorithm::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let d = self.descriptor();
        Some(
            clap::builder::PossibleValue::new(d.name)
                .aliases(d.aliases.iter().copied())
                .help(d.help),
        )
    }
}

/// Builds the planner of the algorithm named `name` (or one of its aliases).
pub fn planner(name: &str, options: &Options) -> Result<Box<dyn Planner>, InputError> {
    Algorithm::parse(name)?.planner(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Instance, Layer, Platform};

    #[test]
    fn names_aliases_and_display_agree() {
        for &a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(a.name()).unwrap(), a);
            assert_eq!(a.to_string(), a.name());
            for alias in a.descriptor().aliases {
                assert_eq!(Algorithm::parse(alias).unwrap(), a);
            }
            let v = <Algorithm as clap::ValueEnum>::from_str(a.name(), false).unwrap();
            assert_eq!(v, a);
        }
        assert_eq!(Algorithm::parse("1f1b").unwrap(), Algorithm::OneFOneBStar);
        // Names the registry never accepted.
        for name in ["bi-partition", "milp", "magic", ""] {
            let e = Algorithm::parse(name).unwrap_err();
            assert!(e.reason.contains("unknown algorithm"), "{e}");
        }
    }

    #[test]
    fn every_planner_carries_its_registry_name() {
        let options = Options {
            partition: Some(vec![0]),
            ..Options::default()
        };
        for &a in Algorithm::ALL {
            let o = if a.reads(OptionName::Partition) {
                options.clone()
            } else {
                Options::default()
            };
            assert_eq!(a.planner(&o).unwrap().name(), a.name());
        }
    }

    #[test]
    fn specific_options_are_refused_by_the_others_and_values_checked() {
        let with = |f: fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            o
        };
        let coarsen = with(|o| o.coarsen = Some(4));
        let e = Algorithm::MadPipe.planner(&coarsen).err().unwrap();
        assert_eq!(e.source, "--coarsen");
        assert!(e.reason.contains("ilp"), "{e}");
        assert!(Algorithm::Ilp.planner(&coarsen).is_ok());
        let remap = with(|o| o.remap_stages = true);
        assert!(Algorithm::Ilp.planner(&remap).is_err());
        assert!(Algorithm::MadPipe.planner(&remap).is_ok());
        let partition = with(|o| o.partition = Some(vec![0]));
        let e = Algorithm::ContiguousOpt.planner(&partition).err().unwrap();
        assert_eq!(e.source, "--partition");
        let e = Algorithm::OneFOneBStar
            .planner(&Options::default())
            .err()
            .unwrap();
        assert!(e.reason.contains("needs --partition"), "{e}");
        // The values are the planners' own checks: built directly, they refuse the same.
        let zero = with(|o| o.coarsen = Some(0));
        assert!(Algorithm::Ilp.planner(&zero).is_err());
        let direct = GeneralMilpPlanner {
            coarsen: Some(0),
            ..GeneralMilpPlanner::default()
        };
        let inst = Instance {
            name: "one".into(),
            input: 1.0,
            layers: vec![Layer {
                name: "l".into(),
                fwd: 1.0,
                bwd: 1.0,
                weights: 1.0,
                out: 1.0,
                stash: None,
                stash_overlap: None,
            }],
            stash_shared: vec![],
            meta: Default::default(),
        };
        let platform = Platform::new(1, 1e9, 1e9);
        let problem = super::super::Problem {
            instance: &inst,
            platform: &platform,
        };
        let e = direct.plan(&problem).unwrap_err();
        assert!(e.to_string().contains("--coarsen"), "{e}");
        let levels = with(|o| o.madpipe.levels_time = 1);
        assert!(Algorithm::MadPipeDp.planner(&levels).is_err());
        assert!(Algorithm::MadPipe.planner(&levels).is_err());
    }
}
