//! A synchronous experiment file (`pipeopt sync-sweep FILE`): its TOML read and checked,
//! every error naming the file and the field. Its header (`name`, `workers`, `job_timeout`,
//! `output`) is the periodic grid's, read by `sweep::config::read_experiment`; the rest is
//! its own.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::model::Instance;
use crate::schedule::sync::registry;
use crate::sweep::config::{read_experiment, ExperimentHeader};
use crate::units::{parse_positive_bandwidth, parse_positive_bytes};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    /// Memory budgets per device, e.g. "32GiB".
    memory: Vec<String>,
    micro_batch_sizes: Vec<usize>,
    #[serde(default = "both")]
    recompute: Vec<bool>,
    schedules: Vec<String>,
    /// Link bandwidth for activation transfers (absent: transfers are free).
    bandwidth: Option<String>,
    #[serde(rename = "case")]
    cases: Vec<RawCase>,
    /// Figure 7's panels: D and the micro-batch counts drawn (from the `weak` study).
    #[serde(default)]
    memory_figure: Option<RawMemoryFigure>,
    /// The exact optimum per configuration (`milp::sync_schedule`); absent: not computed.
    #[serde(default)]
    optimum: Option<RawOptimum>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOptimum {
    /// HiGHS's limit per configuration and placement, e.g. "20s".
    time_limit: String,
    /// Only configurations with at most this many micro-batches (the MILP grows as N^2 D).
    #[serde(default = "default_optimum_micro_batches")]
    max_micro_batches: usize,
    /// Also the optimum under each memory budget of the experiment (`memory`), against
    /// which `best` measures the fastest run that fits the budget.
    #[serde(default)]
    under_budgets: bool,
}

fn default_optimum_micro_batches() -> usize {
    16
}

/// How the sweep computes the optimum of its configurations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OptimumSettings {
    /// HiGHS's wall-clock limit per configuration and placement.
    pub time_limit_seconds: f64,
    /// Configurations with more micro-batches get no optimum.
    pub max_micro_batches: usize,
    /// Also the optimum under each memory budget (the simulator's peak per worker at most
    /// the budget), besides the one without a limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub under_budgets: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    instance: PathBuf,
    /// A label that groups cases in the tables and figures ("weak", "large").
    study: String,
    stages: Vec<usize>,
    /// Samples per pipeline per iteration, or ...
    #[serde(default)]
    samples: Vec<usize>,
    /// ... samples per stage: S = samples_per_stage x D (weak scaling).
    samples_per_stage: Option<usize>,
    /// GPUs of the whole cluster (P = W x D): only to report the mini-batch W x S.
    gpus: Option<usize>,
    /// Only the micro-batch size that gives N = D (MixPipe's weak scaling, "N = D").
    #[serde(default)]
    n_equals_d: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemoryFigure {
    pub stages: usize,
    pub micro_batches: Vec<usize>,
}

fn both() -> Vec<bool> {
    vec![false, true]
}

/// One case of the grid, resolved.
#[derive(Debug, Clone)]
pub struct Case {
    pub instance: PathBuf,
    pub study: String,
    pub stages: Vec<usize>,
    pub samples: Vec<usize>,
    pub samples_per_stage: Option<usize>,
    pub gpus: Option<usize>,
    pub n_equals_d: bool,
}

impl Case {
    /// (D, S) pairs of this case.
    pub fn points(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for &d in &self.stages {
            if let Some(k) = self.samples_per_stage {
                out.push((d, k * d));
            }
            for &s in &self.samples {
                out.push((d, s));
            }
        }
        out
    }
}

/// A parsed experiment file.
#[derive(Debug, Clone)]
pub struct SyncExperiment {
    /// Name, workers, job timeout (of one configuration), output folder and configuration
    /// hash, as in every experiment file.
    pub header: ExperimentHeader,
    pub memory: Vec<f64>,
    pub micro_batch_sizes: Vec<usize>,
    pub recompute: Vec<bool>,
    pub schedules: Vec<String>,
    pub bandwidth: f64,
    pub cases: Vec<Case>,
    pub memory_figure: Option<RawMemoryFigure>,
    pub optimum: Option<OptimumSettings>,
}

impl SyncExperiment {
    pub fn load(path: &Path) -> Result<SyncExperiment, InputError> {
        let text = std::fs::read_to_string(path).map_err(|e| InputError::file(path, e))?;
        SyncExperiment::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<SyncExperiment, InputError> {
        let src = path.display().to_string();
        let (header, raw): (_, RawExperiment) = read_experiment(text, &src)?;
        let bad = |field: &str, reason: String| InputError::new(&src, field, reason);
        for (field, n) in [
            ("memory", raw.memory.len()),
            ("micro_batch_sizes", raw.micro_batch_sizes.len()),
            ("recompute", raw.recompute.len()),
            ("schedules", raw.schedules.len()),
            ("case", raw.cases.len()),
        ] {
            if n == 0 {
                return Err(bad(field, "the list is empty".into()));
            }
        }
        let memory = raw
            .memory
            .iter()
            .enumerate()
            .map(|(i, m)| {
                parse_positive_bytes(m).map_err(|e| bad(&format!("memory[{i}]"), e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(i) = raw.micro_batch_sizes.iter().position(|&b| b == 0) {
            return Err(bad(
                &format!("micro_batch_sizes[{i}]"),
                "must be at least 1".into(),
            ));
        }
        for (i, s) in raw.schedules.iter().enumerate() {
            if registry::approach(s).is_none() {
                return Err(bad(
                    &format!("schedules[{i}]"),
                    format!(
                        "unknown schedule {s:?} (one of {})",
                        registry::approach_names().join(", ")
                    ),
                ));
            }
        }
        let bandwidth = match &raw.bandwidth {
            None => f64::INFINITY,
            Some(b) => parse_positive_bandwidth(b).map_err(|e| bad("bandwidth", e.to_string()))?,
        };
        let optimum = match &raw.optimum {
            None => None,
            Some(o) => {
                let t = crate::units::parse_seconds(&o.time_limit)
                    .map_err(|e| bad("optimum.time_limit", e.to_string()))?;
                if t.is_nan() || t <= 0.0 {
                    return Err(bad(
                        "optimum.time_limit",
                        format!("must be positive, got {:?}", o.time_limit),
                    ));
                }
                let most = crate::milp::sync_schedule::MAX_MICRO_BATCHES;
                if !(1..=most).contains(&o.max_micro_batches) {
                    return Err(bad(
                        "optimum.max_micro_batches",
                        format!("must be from 1 to {most}, got {}", o.max_micro_batches),
                    ));
                }
                Some(OptimumSettings {
                    time_limit_seconds: t,
                    max_micro_batches: o.max_micro_batches,
                    under_budgets: o.under_budgets,
                })
            }
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let mut cases = Vec::new();
        for (i, c) in raw.cases.into_iter().enumerate() {
            cases.push(parse_case(c, i, base, &src)?);
        }
        if let Some(f) = &raw.memory_figure {
            if f.stages == 0 {
                return Err(bad("memory_figure.stages", "must be at least 1".into()));
            }
            if let Some(j) = f.micro_batches.iter().position(|&n| n == 0) {
                return Err(bad(
                    &format!("memory_figure.micro_batches[{j}]"),
                    "must be at least 1".into(),
                ));
            }
        }
        Ok(SyncExperiment {
            header,
            memory,
            micro_batch_sizes: raw.micro_batch_sizes,
            recompute: raw.recompute,
            schedules: raw.schedules,
            bandwidth,
            cases,
            memory_figure: raw.memory_figure,
            optimum,
        })
    }
}

/// One `[[case]]` of a synchronous experiment, checked (`src`, the experiment file, and
/// `i`, the case's index, name the field at fault); its instance is read now, so that a
/// bad one, or one with fewer layers than stages, stops the sweep naming both files.
fn parse_case(c: RawCase, i: usize, base: &Path, src: &str) -> Result<Case, InputError> {
    let bad = |field: &str, reason: String| InputError::new(src, field, reason);
    if c.stages.is_empty() || c.stages.contains(&0) {
        return Err(bad(
            &format!("case[{i}].stages"),
            "must list stage counts of at least 1".into(),
        ));
    }
    if c.samples.is_empty() && c.samples_per_stage.is_none() {
        return Err(bad(
            &format!("case[{i}]"),
            "give samples or samples_per_stage".into(),
        ));
    }
    if let Some(j) = c.samples.iter().position(|&s| s == 0) {
        return Err(bad(
            &format!("case[{i}].samples[{j}]"),
            "must be at least 1".into(),
        ));
    }
    for (field, value) in [("samples_per_stage", c.samples_per_stage), ("gpus", c.gpus)] {
        if value == Some(0) {
            return Err(bad(
                &format!("case[{i}].{field}"),
                "must be at least 1".into(),
            ));
        }
    }
    // Instance paths are relative to the working directory, as in `sweep`; a path
    // that does not exist there is tried beside the experiment file's directory.
    let instance = if c.instance.exists() || c.instance.is_absolute() {
        c.instance
    } else {
        let alt = base.join("..").join(&c.instance);
        if alt.exists() {
            alt
        } else {
            c.instance
        }
    };
    let layers = Instance::load(&instance)
        .map_err(|e| bad(&format!("case[{i}].instance"), e.to_string()))?
        .len();
    if let Some(&d) = c.stages.iter().find(|&&d| d > layers) {
        return Err(bad(
            &format!("case[{i}].stages"),
            format!(
                "D = {d} stages but {} has only {layers} layers",
                instance.display()
            ),
        ));
    }
    Ok(Case {
        instance,
        study: c.study,
        stages: c.stages,
        samples: c.samples,
        samples_per_stage: c.samples_per_stage,
        gpus: c.gpus,
        n_equals_d: c.n_equals_d,
    })
}
