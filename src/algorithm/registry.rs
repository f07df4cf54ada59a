//! The algorithms by name: [`Algorithm`], one variant per planner, and [`Configured`], an
//! algorithm with its own typed options, as the command line and experiment files give it.
//!
//! Above the planners: this module knows every planner, no planner knows it. Each
//! algorithm is one entry of the table in [`algorithms!`](self): its variant, its options
//! type (defined beside its planner, implementing [`AlgorithmOptions`]), its name and
//! aliases, its help, and whether its bound holds for every plan of a case. From that one
//! entry come the [`Algorithm`] variant, its [`Descriptor`], the [`Configured`] variant and
//! the code that parses, serializes and builds it. Adding an algorithm is its own file
//! (planner and options) and one entry.
//!
//! [`Configured`] is a serde enum tagged by the algorithm's name, its options beside it:
//! `{"name": "ilp", "options": {"coarsen": 8, "time_limit": 10.0}}`, as an experiment
//! file's `[[algorithm]]` writes it (`options` may be left out when every option has a
//! default). An option the algorithm does not read is refused, with the algorithms that do
//! read it named; the planner's constructor checks the values.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::planner::{AlgorithmOptions, Planner};
use crate::InputError;

/// What the registry knows of one algorithm: [`Algorithm::descriptor`].
pub struct Descriptor {
    /// The name in reports, plan files and tables.
    pub name: &'static str,
    /// Other names `--algorithm` and experiment files accept.
    pub aliases: &'static [&'static str],
    /// One line for `--help`.
    pub help: &'static str,
    /// True when its `lower_bound` holds for every plan of a case (any allocation, any
    /// pattern), so that figures may compare it across algorithms.
    pub bound_covers_every_plan: bool,
    /// The keys of its options table (its options type's serde fields).
    pub options: fn() -> &'static [&'static str],
}

/// One entry per algorithm; generates [`Algorithm`], [`Configured`] and their dispatch.
macro_rules! algorithms {
    ($(
        $(#[$doc:meta])*
        $variant:ident($options:ty) {
            name: $name:literal,
            aliases: [$($alias:literal),* $(,)?],
            help: $help:literal,
            bound_covers_every_plan: $global:literal $(,)?
        }
    ),* $(,)?) => {
        /// The algorithms of the registry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Algorithm {
            $($(#[$doc])* $variant,)*
        }

        /// An algorithm with its options (module docs): what `--algorithm` and its flags,
        /// or an experiment file's `[[algorithm]]`, ask for.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "name", content = "options")]
        pub enum Configured {
            $($(#[$doc])* #[serde(rename = $name)] $variant($options),)*
        }

        impl Algorithm {
            /// Every algorithm, in the order of `--help` and of the tables.
            pub const ALL: &'static [Algorithm] = &[$(Algorithm::$variant),*];

            /// Everything the registry knows of the algorithm.
            pub fn descriptor(self) -> Descriptor {
                match self {
                    $(Algorithm::$variant => Descriptor {
                        name: $name,
                        aliases: &[$($alias),*],
                        help: $help,
                        bound_covers_every_plan: $global,
                        options: serde_aux::serde_introspection::serde_introspect::<$options>,
                    },)*
                }
            }

            /// The options table `options` read as this algorithm's own type.
            fn typed(
                self,
                options: serde_json::Value,
            ) -> Result<Configured, serde_path_to_error::Error<serde_json::Error>> {
                Ok(match self {
                    $(Algorithm::$variant => {
                        Configured::$variant(serde_path_to_error::deserialize(options)?)
                    })*
                })
            }
        }

        impl Configured {
            /// Which algorithm.
            pub fn algorithm(&self) -> Algorithm {
                match self {
                    $(Configured::$variant(_) => Algorithm::$variant,)*
                }
            }

            /// Builds the algorithm's planner; its constructor checks the values.
            pub fn planner(&self) -> Result<Box<dyn Planner>, InputError> {
                match self {
                    $(Configured::$variant(o) => AlgorithmOptions::planner(o),)*
                }
            }

            /// The options table, as experiment files write it.
            pub fn options(&self) -> serde_json::Value {
                match self {
                    $(Configured::$variant(o) => {
                        serde_json::to_value(o).expect("options serialize to JSON")
                    })*
                }
            }
        }
    };
}

algorithms! {
    OneFOneBStar(crate::schedule::one_f_one_b_star::OneFOneBStarOptions) {
        name: "1f1b*",
        aliases: ["1f1bstar", "1f1b"],
        help: "a given --partition scheduled by 1F1B*",
        bound_covers_every_plan: false,
    },
    PipeDream(crate::partition::pipedream::PipeDreamOptions) {
        name: "pipedream",
        aliases: [],
        help: "PipeDream's straight DP, then 1F1B*",
        bound_covers_every_plan: false,
    },
    MadPipeDp(crate::partition::madpipe::MadPipeDpOptions) {
        name: "madpipe-dp",
        aliases: [],
        help: "MadPipe's first phase (an allocation and its planned period)",
        bound_covers_every_plan: false,
    },
    BiPartition(crate::partition::bipartition::BiPartitionOptions) {
        name: "bipartition",
        aliases: [],
        help: "Bi-Partition: separate forward and backward cuts",
        bound_covers_every_plan: false,
    },
    MilpSchedule(crate::milp::fixed_allocation::MilpScheduleOptions) {
        name: "milp-schedule",
        aliases: [],
        help: "a given --partition, its pattern by the scheduling MILP",
        bound_covers_every_plan: false,
    },
    ContiguousOpt(crate::milp::contiguous::ContiguousOptOptions) {
        name: "contiguous-opt",
        aliases: [],
        help: "the best contiguous allocation (exact)",
        bound_covers_every_plan: false,
    },
    MadPipe(crate::milp::madpipe::MadPipeOptions) {
        name: "madpipe",
        aliases: [],
        help: "MadPipe's first phase, then its scheduling MILP",
        bound_covers_every_plan: false,
    },
    Ilp(crate::milp::general::IlpOptions) {
        name: "ilp",
        aliases: [],
        help: "the general MILP: any allocation, with its pattern (see --coarsen)",
        bound_covers_every_plan: true,
    },
    Best(crate::milp::best::BestOptions) {
        name: "best",
        aliases: [],
        help: "the best plan of any allocation found within --time-limit, with the global \
               lower bound; with time left, exact checks prove it optimal",
        bound_covers_every_plan: true,
    },
}

/// The command-line flag of an options key: `time_limit` is `--time-limit`.
pub fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

impl Algorithm {
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

    /// True when the algorithm's options table has the key `option` (`time_limit`).
    pub fn reads(self, option: &str) -> bool {
        (self.descriptor().options)().contains(&option)
    }

    /// The algorithm with `options` (a table, or null for none), read as its own options
    /// type. An error names the option by its flag (`--coarsen`): one the algorithm does
    /// not read (and the algorithms that do), a missing one it needs, a wrong value.
    pub fn configure(self, options: serde_json::Value) -> Result<Configured, InputError> {
        let options = match options {
            serde_json::Value::Null => serde_json::Value::Object(Default::default()),
            o => o,
        };
        let name = self.name();
        if let Some(table) = options.as_object() {
            if let Some(key) = table.keys().find(|k| !self.reads(k)) {
                let owners: Vec<&str> = Algorithm::ALL
                    .iter()
                    .filter(|a| a.reads(key))
                    .map(|a| a.name())
                    .collect();
                let reason = if owners.is_empty() {
                    let known = (self.descriptor().options)().join(", ");
                    format!(
                        "algorithm {name} has no option {key:?} (its options: {})",
                        if known.is_empty() { "none" } else { &known }
                    )
                } else {
                    format!(
                        "{} is an option of {}; algorithm {name} does not use it",
                        flag(key),
                        owners.join(", ")
                    )
                };
                return Err(InputError::new(flag(key), "", reason));
            }
        }
        self.typed(options).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner().to_string();
            // A missing option is reported by serde at the table itself.
            let missing = inner
                .strip_prefix("missing field `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string);
            match missing {
                Some(m) => {
                    InputError::new(flag(&m), "", format!("algorithm {name} needs {}", flag(&m)))
                }
                None if key != "." => InputError::new(flag(&key), "", inner),
                None => InputError::new("--algorithm", "", format!("{name}: {inner}")),
            }
        })
    }

    /// The algorithm with all its options at their defaults (an error for one that needs
    /// an option, such as `1f1b*`'s `--partition`).
    pub fn with_defaults(self) -> Result<Configured, InputError> {
        self.configure(serde_json::Value::Null)
    }

    /// Builds the planner of the algorithm with `options` (a JSON table): [`Self::configure`],
    /// then the planner's constructor.
    pub fn planner(self, options: &serde_json::Value) -> Result<Box<dyn Planner>, InputError> {
        self.configure(options.clone())?.planner()
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

/// An algorithm is written by its name (an alias is read too).
impl Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Algorithm::parse(&name).map_err(|e| serde::de::Error::custom(e.reason))
    }
}

/// `{"name": ..., "options": {...}}`, `options` optional; errors as [`Algorithm::configure`].
impl<'de> Deserialize<'de> for Configured {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Form {
            name: Algorithm,
            #[serde(default)]
            options: serde_json::Value,
        }
        let form = Form::deserialize(d)?;
        form.name
            .configure(form.options)
            .map_err(|e| serde::de::Error::custom(format!("options: {}: {}", e.source, e.reason)))
    }
}

/// Builds the planner of the algorithm named `name` (or one of its aliases) with `options`
/// (a JSON table; null for none).
pub fn planner(name: &str, options: &serde_json::Value) -> Result<Box<dyn Planner>, InputError> {
    Algorithm::parse(name)?.planner(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Instance, Layer, Platform};
    use serde_json::json;

    #[test]
    fn names_aliases_and_display_agree() {
        for &a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(a.name()).unwrap(), a);
            assert_eq!(a.to_string(), a.name());
            for alias in a.descriptor().aliases {
                assert_eq!(Algorithm::parse(alias).unwrap(), a);
            }
            let back: Algorithm = serde_json::from_value(json!(a.name())).unwrap();
            assert_eq!(back, a);
        }
        assert_eq!(Algorithm::parse("1f1b").unwrap(), Algorithm::OneFOneBStar);
        // Names the registry never accepted.
        for name in ["bi-partition", "milp", "magic", ""] {
            let e = Algorithm::parse(name).unwrap_err();
            assert!(e.reason.contains("unknown algorithm"), "{e}");
        }
    }

    /// Options for every algorithm: a partition where one is needed.
    fn configured(a: Algorithm) -> Configured {
        if a.reads("partition") {
            a.configure(json!({"partition": [0]})).unwrap()
        } else {
            a.with_defaults().unwrap()
        }
    }

    #[test]
    fn every_planner_carries_its_registry_name_and_its_options_round_trip() {
        for &a in Algorithm::ALL {
            let c = configured(a);
            assert_eq!(c.algorithm(), a);
            assert_eq!(c.planner().unwrap().name(), a.name());
            // The tagged form: {"name", "options"}, read back the same (an alias too).
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(v["name"], a.name(), "{v}");
            assert_eq!(v["options"], c.options(), "{v}");
            assert_eq!(serde_json::from_value::<Configured>(v).unwrap(), c);
            for alias in a.descriptor().aliases {
                let v = json!({"name": alias, "options": c.options()});
                assert_eq!(serde_json::from_value::<Configured>(v).unwrap(), c);
            }
            // Every key its options serialize is one it reads.
            for key in c.options().as_object().unwrap().keys() {
                assert!(a.reads(key), "{a}: {key}");
            }
        }
        // `options` may be left out when nothing is needed, not otherwise.
        let c: Configured = serde_json::from_value(json!({"name": "pipedream"})).unwrap();
        assert_eq!(c.algorithm(), Algorithm::PipeDream);
        let e = serde_json::from_value::<Configured>(json!({"name": "1f1b*"})).unwrap_err();
        assert!(e.to_string().contains("needs --partition"), "{e}");
    }

    #[test]
    fn options_of_other_algorithms_are_refused_and_values_checked() {
        let e = Algorithm::MadPipe
            .configure(json!({"coarsen": 4}))
            .unwrap_err();
        assert_eq!(e.source, "--coarsen");
        assert!(e.reason.contains("ilp"), "{e}");
        assert!(Algorithm::Ilp.planner(&json!({"coarsen": 4})).is_ok());
        assert!(Algorithm::Ilp
            .configure(json!({"remap_stages": true}))
            .is_err());
        assert!(Algorithm::MadPipe
            .planner(&json!({"remap_stages": true}))
            .is_ok());
        // General options too: pipedream has no solver, hence no threads; every algorithm
        // takes a time limit.
        let e = Algorithm::PipeDream
            .configure(json!({"threads": 2}))
            .unwrap_err();
        assert_eq!(e.source, "--threads");
        assert!(e.reason.contains("best"), "{e}");
        for a in Algorithm::ALL {
            assert!(a.reads("time_limit"), "{}", a.descriptor().name);
        }
        let e = Algorithm::ContiguousOpt
            .configure(json!({"partition": [0]}))
            .unwrap_err();
        assert_eq!(e.source, "--partition");
        let e = Algorithm::Best.configure(json!({"perod": 1})).unwrap_err();
        assert!(e.reason.contains("no option \"perod\""), "{e}");
        let e = Algorithm::OneFOneBStar.with_defaults().unwrap_err();
        assert!(e.reason.contains("needs --partition"), "{e}");
        // Values of the wrong type name their option; durations read units.
        let e = Algorithm::Ilp
            .configure(json!({"coarsen": "many"}))
            .unwrap_err();
        assert_eq!(e.source, "--coarsen");
        let c = Algorithm::Best
            .configure(json!({"time_limit": "20s"}))
            .unwrap();
        assert_eq!(c.options(), json!({"time_limit": 20.0}));
        let c = Algorithm::Best
            .configure(json!({"time_limit": "36s", "extend_to": "48s"}))
            .unwrap();
        assert!(c.planner().is_ok());
        // The values are the planners' own checks: built directly, they refuse the same.
        for (a, options) in [
            (Algorithm::Ilp, json!({"coarsen": 0})),
            (Algorithm::Best, json!({"time_limit": 0})),
            (Algorithm::Best, json!({"gap_tolerance": -0.05})),
            // An extension must reach past the time limit (60 s when not given) and comes
            // with its own duration.
            (
                Algorithm::Best,
                json!({"time_limit": 30.0, "extend_to": 30.0}),
            ),
            (Algorithm::Best, json!({"extend_to": 40.0})),
            (Algorithm::Best, json!({"extend_below_gap": 0.1})),
            (
                Algorithm::Best,
                json!({"extend_to": 90.0, "extend_below_gap": -0.1}),
            ),
            (
                Algorithm::MilpSchedule,
                json!({"partition": [0], "threads": 0}),
            ),
            (Algorithm::PipeDream, json!({"period": 0.0})),
            (Algorithm::MadPipeDp, json!({"madpipe": {"levels_time": 1}})),
            (Algorithm::MadPipe, json!({"madpipe": {"levels_time": 1}})),
        ] {
            let c = a.configure(options.clone()).unwrap();
            assert!(c.planner().is_err(), "{a} {options}");
        }
        let direct = crate::milp::general::GeneralMilpPlanner {
            coarsen: Some(0),
            ..Default::default()
        };
        let inst = Instance::chain("one", 1.0, vec![Layer::new("l", 1.0, 1.0, 1.0, 1.0)]);
        let platform = Platform::new(1, 1e9, 1e9);
        let problem = super::super::Problem {
            instance: &inst,
            platform: &platform,
        };
        let e = direct.plan(&problem).unwrap_err();
        assert!(e.to_string().contains("--coarsen"), "{e}");
    }
}
