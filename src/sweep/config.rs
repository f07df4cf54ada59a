//! The experiment format: a TOML grid of instances x processors x memory x bandwidth x
//! algorithms x repetitions.
//!
//! ```toml
//! name = "memory"                       # results go to results/memory.{parquet,csv}
//! instances = ["instances/resnet50-1000-b8.json", "instances/*-1000-b8.json"]  # paths or globs
//! processors = [2, 4, 8]               # 1 to 1024 each
//! memory = ["3GiB", "8GiB", "16GiB"]
//! bandwidth = ["12GB/s", "24GB/s"]
//! repetitions = 1                       # optional, default 1; at most 10000 (and the grid at
//!                                       # most 1000000 jobs)
//! output = "results"                    # optional, default "results": the tables go in
//!                                       # output/, the journal and shards in output/name/
//! workers = 0                           # optional, parallel jobs; 0 = one per core
//! job_timeout = "15min"                 # optional wall-clock limit of one job
//!
//! [[algorithm]]
//! name = "1f1b*"
//! label = "1f1b*-even"                  # optional: the name in the tables (default: name)
//! options = { partition = [0, 40, 80, 120] }   # optional: its own options (algorithm::Configured)
//! ```
//! Paths are relative to the current directory. Unknown keys are errors that name the key.
//!
//! Both kinds of experiment file (this grid and the synchronous one, `sweep::sync`) start
//! with the same header, read by [`read_experiment`] into an [`ExperimentHeader`]: `name`,
//! `workers`, `job_timeout` and `output`, with the same meaning, defaults and checks; the
//! rest of the file is the kind's own.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::algorithm::{Algorithm, Configured};
use crate::error::{parse_toml, InputError};
use crate::units::{parse_bandwidth, parse_bytes, parse_seconds};

/// One algorithm of the grid, with its options and the name the tables give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SpecForm", into = "SpecForm")]
pub struct AlgorithmSpec {
    pub algorithm: Configured,
    /// The name in the tables (default: the algorithm's name).
    pub label: Option<String>,
}

/// An `[[algorithm]]` table as the file writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecForm {
    name: Algorithm,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(default)]
    options: serde_json::Value,
}

impl TryFrom<SpecForm> for AlgorithmSpec {
    type Error = InputError;
    fn try_from(f: SpecForm) -> Result<Self, InputError> {
        Ok(AlgorithmSpec {
            algorithm: f.name.configure(f.options)?,
            label: f.label,
        })
    }
}

impl From<AlgorithmSpec> for SpecForm {
    fn from(a: AlgorithmSpec) -> SpecForm {
        SpecForm {
            name: a.algorithm.algorithm(),
            label: a.label,
            options: a.algorithm.options(),
        }
    }
}

impl AlgorithmSpec {
    /// An algorithm with its options, named in the tables by the algorithm's name.
    pub fn new(algorithm: Configured) -> Self {
        AlgorithmSpec {
            algorithm,
            label: None,
        }
    }

    /// The name in the tables: the label, or the algorithm's name.
    pub fn label(&self) -> &str {
        self.label
            .as_deref()
            .unwrap_or(self.algorithm.algorithm().name())
    }

    /// What a job's key hashes of its algorithm: the `[[algorithm]]` table, in the form
    /// journals were written with when one flat table held the options of every algorithm
    /// and always carried MadPipe's (`madpipe`, at its defaults for the others). Keeping
    /// that form keeps the keys of every earlier journal, so a sweep resumes from them.
    pub fn key_form(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(SpecForm::from(self.clone())).expect("JSON");
        if let Some(options) = v["options"].as_object_mut() {
            options.entry("madpipe").or_insert_with(|| {
                serde_json::to_value(crate::partition::madpipe::MadPipeConfig::default())
                    .expect("JSON")
            });
        }
        v
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    instances: Vec<String>,
    processors: Vec<usize>,
    memory: Vec<String>,
    bandwidth: Vec<String>,
    #[serde(default = "one")]
    repetitions: usize,
    #[serde(rename = "algorithm")]
    algorithms: Vec<SpecForm>,
}

fn one() -> usize {
    1
}

/// The most repetitions of a grid.
pub const MAX_REPETITIONS: usize = 10_000;

/// The most jobs in a grid (the jobs are listed before any runs).
pub const MAX_JOBS: usize = 1_000_000;

/// A checked experiment, with every quantity in SI units and every glob expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// Name, workers, job timeout, output folder and configuration hash.
    pub header: ExperimentHeader,
    /// Instance files, in the order given (globs sorted), without duplicates.
    pub instances: Vec<PathBuf>,
    pub processors: Vec<usize>,
    pub memory: Vec<f64>,
    pub bandwidth: Vec<f64>,
    pub repetitions: usize,
    pub algorithms: Vec<AlgorithmSpec>,
}

/// Reads each `[[algorithm]]` as its algorithm's own options and checks, when the file
/// loads, what would make an algorithm fail on every job of the grid: options it does not
/// read or its planner rejects (a missing `partition`, a zero `time_limit`), and a
/// `partition` that fits no instance or needs more processors than the grid has.
fn check_algorithms(
    forms: Vec<SpecForm>,
    instances: &[PathBuf],
    processors: &[usize],
    src: &str,
) -> Result<Vec<AlgorithmSpec>, InputError> {
    let field = |i: usize, e: &InputError| {
        let option = e.source.trim_start_matches("--").replace('-', "_");
        if e.source.starts_with("--") && e.source != "--algorithm" {
            format!("algorithm[{i}].options.{option}")
        } else {
            format!("algorithm[{i}]")
        }
    };
    let mut lengths: Option<Vec<(PathBuf, usize)>> = None;
    let mut algorithms = Vec::with_capacity(forms.len());
    for (i, form) in forms.into_iter().enumerate() {
        let a = AlgorithmSpec::try_from(form)
            .map_err(|e| InputError::new(src, field(i, &e), e.reason.clone()))?;
        a.algorithm
            .planner()
            .map_err(|e| InputError::new(src, field(i, &e), e.reason.clone()))?;
        let partition =
            serde_json::from_value::<Vec<usize>>(a.algorithm.options()["partition"].clone());
        algorithms.push(a);
        let Ok(partition) = partition else {
            continue;
        };
        let at = format!("algorithm[{i}].options.partition");
        let max_p = processors.iter().copied().max().unwrap_or(0);
        if partition.len() > max_p {
            return Err(InputError::new(
                src,
                at,
                format!(
                    "{} stages, but the grid has at most {max_p} processors",
                    partition.len()
                ),
            ));
        }
        let lengths = match &mut lengths {
            Some(l) => l,
            None => lengths.insert(
                instances
                    .iter()
                    .map(|p| Ok((p.clone(), crate::model::Instance::load(p)?.len())))
                    .collect::<Result<Vec<_>, InputError>>()?,
            ),
        };
        for (path, layers) in lengths.iter() {
            crate::model::Allocation::from_starts(&partition, *layers).map_err(|e| {
                InputError::new(src, &at, format!("for {}: {}", path.display(), e.reason))
            })?;
        }
    }
    Ok(algorithms)
}

impl Experiment {
    /// Reads and checks an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, InputError> {
        let text = std::fs::read_to_string(path).map_err(|e| InputError::file(path, e))?;
        Experiment::parse(&text, path)
    }

    /// Parses an experiment's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, InputError> {
        let src = path.display().to_string();
        let (header, raw): (_, RawExperiment) = read_experiment(text, &src)?;
        let bad = |field: &str, reason: String| InputError::new(&src, field, reason);
        let nonempty = |field: &str, n: usize| {
            if n == 0 {
                Err(bad(field, "the list is empty".into()))
            } else {
                Ok(())
            }
        };
        nonempty("instances", raw.instances.len())?;
        nonempty("processors", raw.processors.len())?;
        nonempty("memory", raw.memory.len())?;
        nonempty("bandwidth", raw.bandwidth.len())?;
        nonempty("algorithm", raw.algorithms.len())?;
        if let Some(i) = raw.processors.iter().position(|&p| p == 0) {
            return Err(bad(
                &format!("processors[{i}]"),
                "must be at least 1".into(),
            ));
        }
        if let Some(i) = raw
            .processors
            .iter()
            .position(|&p| p > crate::model::MAX_PROCESSORS)
        {
            return Err(bad(
                &format!("processors[{i}]"),
                format!("must be at most {}", crate::model::MAX_PROCESSORS),
            ));
        }
        if !(1..=MAX_REPETITIONS).contains(&raw.repetitions) {
            return Err(bad(
                "repetitions",
                format!(
                    "must be from 1 to {MAX_REPETITIONS}, got {}",
                    raw.repetitions
                ),
            ));
        }
        let parse_list =
            |field: &str, list: &[String], f: fn(&str) -> Result<f64, crate::units::UnitError>| {
                list.iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let v = f(t).map_err(|e| bad(&format!("{field}[{i}]"), e.to_string()))?;
                        if v > 0.0 {
                            Ok(v)
                        } else {
                            Err(bad(&format!("{field}[{i}]"), "must be positive".into()))
                        }
                    })
                    .collect::<Result<Vec<f64>, InputError>>()
            };
        let memory = parse_list("memory", &raw.memory, parse_bytes)?;
        let bandwidth = parse_list("bandwidth", &raw.bandwidth, parse_bandwidth)?;
        let mut labels = std::collections::HashSet::new();
        for (i, a) in raw.algorithms.iter().enumerate() {
            let label = a.label.as_deref().unwrap_or(a.name.name());
            if !labels.insert(label.to_string()) {
                return Err(bad(
                    &format!("algorithm[{i}]"),
                    format!("the label {label:?} is used twice; give one a `label`"),
                ));
            }
        }
        let mut instances = Vec::new();
        for (i, pattern) in raw.instances.iter().enumerate() {
            let field = format!("instances[{i}]");
            let found: Vec<PathBuf> = if pattern.contains(['*', '?', '[']) {
                let mut found: Vec<PathBuf> = glob::glob(pattern)
                    .map_err(|e| bad(&field, e.to_string()))?
                    .filter_map(Result::ok)
                    .collect();
                found.sort();
                if found.is_empty() {
                    return Err(bad(&field, format!("{pattern:?} matches no file")));
                }
                found
            } else {
                let p = PathBuf::from(pattern);
                if !p.is_file() {
                    return Err(bad(&field, format!("{pattern:?} is not a file")));
                }
                vec![p]
            };
            // Each instance is read now, so that a bad one stops the sweep naming this
            // file and field as well as the instance's own.
            for p in &found {
                crate::model::Instance::load(p).map_err(|e| bad(&field, e.to_string()))?;
            }
            instances.extend(found);
        }
        let mut seen = std::collections::HashSet::new();
        instances.retain(|p| seen.insert(p.clone()));
        let jobs = [
            instances.len(),
            raw.processors.len(),
            memory.len(),
            bandwidth.len(),
            raw.algorithms.len(),
            raw.repetitions,
        ]
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n))
        .filter(|&n| n <= MAX_JOBS);
        if jobs.is_none() {
            return Err(bad(
                "",
                format!(
                    "the grid (instances x processors x memory x bandwidth x algorithms x \
                     repetitions) has more than {MAX_JOBS} jobs"
                ),
            ));
        }
        let algorithms = check_algorithms(raw.algorithms, &instances, &raw.processors, &src)?;
        Ok(Experiment {
            header,
            instances,
            processors: raw.processors,
            memory,
            bandwidth,
            repetitions: raw.repetitions,
            algorithms,
        })
    }

    /// Number of jobs in the grid.
    pub fn len(&self) -> usize {
        self.instances.len()
            * self.processors.len()
            * self.memory.len()
            * self.bandwidth.len()
            * self.algorithms.len()
            * self.repetitions
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What every experiment file says first, whatever its kind (periodic grid or synchronous
/// schedules), checked: the same keys with the same meaning in both.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentHeader {
    /// `name`: a file name (non-empty, no slashes); the tables and journals are named by it.
    pub name: String,
    /// `workers`: parallel jobs; 0 (the default) = one per core.
    pub workers: usize,
    /// `job_timeout`: the wall-clock limit of one job, seconds (one hour by default).
    pub job_timeout: f64,
    /// `output`: the results folder (default `results`); the experiment's journal and shard
    /// files go in `output/name/` ([`ExperimentHeader::dir`]).
    pub output: PathBuf,
    /// The SHA-256 of the file's text ([`config_hash`]): rows and shards carry it, so that
    /// results trace back to their file and shards of two versions of it never mix.
    pub config_hash: String,
    /// The file, as errors name it.
    pub source: String,
}

/// The header's keys as a file writes them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: String,
    #[serde(default)]
    workers: usize,
    #[serde(default)]
    job_timeout: Option<String>,
    #[serde(default)]
    output: Option<PathBuf>,
}

/// The keys of [`ExperimentHeader`] in a file.
pub const HEADER_KEYS: [&str; 4] = ["name", "workers", "job_timeout", "output"];

impl ExperimentHeader {
    /// The experiment's own folder, `output/name/`: its journal and shard files (and the
    /// synchronous kind's tables and figures).
    pub fn dir(&self) -> PathBuf {
        self.output.join(&self.name)
    }

    /// The job timeout as a duration (a huge one saturates).
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.job_timeout).unwrap_or(std::time::Duration::MAX)
    }
}

/// Reads an experiment file's text (`src` names it in errors) into its header and the rest,
/// `B`, the kind's own keys (a struct that refuses unknown keys). The one reader of the
/// header for every kind: an error names the file and the key, and a key neither the
/// header nor `B` knows is refused naming both lists.
pub fn read_experiment<B: DeserializeOwned>(
    text: &str,
    src: &str,
) -> Result<(ExperimentHeader, B), InputError> {
    let mut body: toml::Table = parse_toml(text, src)?;
    let mut head = toml::Table::new();
    for key in HEADER_KEYS {
        if let Some(v) = body.remove(key) {
            head.insert(key.to_string(), v);
        }
    }
    let raw: RawHeader = from_table(head, src)?;
    let rest: B = from_table(body, src).map_err(|mut e| {
        if e.reason.starts_with("unknown field") {
            e.reason = format!(
                "{} (or a key of the header: {})",
                e.reason,
                HEADER_KEYS.map(|k| format!("`{k}`")).join(", ")
            );
        }
        e
    })?;
    if raw.name.is_empty() || raw.name.contains(['/', '\\']) {
        return Err(InputError::new(
            src,
            "name",
            "must be a non-empty file name (no slashes)",
        ));
    }
    let header = ExperimentHeader {
        job_timeout: job_timeout(raw.job_timeout.as_deref(), src)?,
        name: raw.name,
        workers: raw.workers,
        output: raw.output.unwrap_or_else(|| PathBuf::from("results")),
        config_hash: config_hash(text),
        source: src.to_string(),
    };
    Ok((header, rest))
}

/// A TOML table read as `T`, an error naming the key at fault.
fn from_table<T: DeserializeOwned>(table: toml::Table, src: &str) -> Result<T, InputError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let field = e.path().to_string();
        InputError::new(
            src,
            if field == "." { String::new() } else { field },
            e.into_inner().message().trim().to_string(),
        )
    })
}

/// The identity of an experiment's text, the same for both kinds of sweep: the SHA-256 of
/// the file, in hexadecimal. Rows and shards carry it; `merge` refuses to mix two.
pub fn config_hash(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `job_timeout` key of an experiment file, in seconds: one hour when absent; positive.
fn job_timeout(raw: Option<&str>, src: &str) -> Result<f64, InputError> {
    let bad = |reason: String| InputError::new(src, "job_timeout", reason);
    let seconds = match raw {
        None => 3600.0,
        Some(t) => parse_seconds(t).map_err(|e| bad(e.to_string()))?,
    };
    if seconds <= 0.0 {
        return Err(bad(
            "must be positive (every job would be killed at once)".into()
        ));
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Experiment, InputError> {
        Experiment::parse(text, Path::new("exp.toml"))
    }

    const GOOD: &str = r#"
        name = "t"
        instances = ["instances/toy-chain.json"]
        processors = [2, 4]
        memory = ["3GiB", "16GiB"]
        bandwidth = ["12GB/s"]
        [[algorithm]]
        name = "1f1b*"
        options = { partition = [0, 12], period = "200ms" }
    "#;

    #[test]
    fn good_file() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.len(), 4);
        assert_eq!(e.memory, vec![3.0 * 1073741824.0, 16.0 * 1073741824.0]);
        assert_eq!(e.bandwidth, vec![12e9]);
        assert_eq!(e.algorithms[0].algorithm.options()["period"], 0.2);
        assert_eq!(e.header.config_hash.len(), 64);
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse(&GOOD.replace("\"3GiB\"", "\"3 parsecs\"")).unwrap_err();
        assert_eq!(e.field, "memory[0]");
        let e = parse(&GOOD.replace("processors = [2, 4]", "processors = [2, 4]\nprocesors = 3"))
            .unwrap_err();
        assert!(e.reason.contains("procesors"), "{e}");
        let e = parse(&GOOD.replace("period = \"200ms\"", "perod = 1")).unwrap_err();
        assert!(
            e.field.starts_with("algorithm[0].options") || e.reason.contains("perod"),
            "{e}"
        );
        let e = parse(&GOOD.replace("name = \"1f1b*\"", "name = \"magic\"")).unwrap_err();
        assert_eq!(e.field, "algorithm[0].name");
        let e = parse(&GOOD.replace("toy-chain.json", "nope.json")).unwrap_err();
        assert_eq!(e.field, "instances[0]");
        let e = parse(&GOOD.replace("processors = [2, 4]", "processors = []")).unwrap_err();
        assert_eq!(e.field, "processors");
        let e = parse("name = ").unwrap_err();
        assert_eq!(e.source, "exp.toml");
    }
}
