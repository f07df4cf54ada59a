//! The periodic planners' grid as a [`JobKind`] of the sweep engine (`sweep::engine`): a job
//! per (instance, processors, memory, bandwidth, algorithm, repetition), its [`Row`]
//! appended to the journal (`<output>/<name>/journal[-shard-i-of-n].jsonl`) as it finishes,
//! then the Parquet and CSV tables written from the journal at the end of every run
//! (`sweep::table::write_tables`): `<output>/<name>.parquet` for the whole grid, the shard
//! table `<output>/<name>/shard-i-of-n.parquet` for a shard, which `merge` joins
//! (`sweep::shard`, the shard policy of both kinds).
//!
//! The engine gives the crash safety (resume without loss or duplicates), the lock on the
//! journal and the process isolation (each job in `pipeopt sweep-job`).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::algorithm::{self, Problem};
use crate::error::InputError;
use crate::model::{Instance, Platform, Status};
use crate::sweep::config::{AlgorithmSpec, Experiment};
use crate::sweep::engine::{self, JobKind};
pub use crate::sweep::engine::{Isolation, Journal, RunContext, Shard, SweepOptions};
use crate::sweep::row::Row;
use crate::sweep::shard::ShardIdentity;
use crate::sweep::table::{self, TableFiles};

/// One job of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub key: String,
    pub instance_path: PathBuf,
    pub processors: usize,
    pub memory: f64,
    pub bandwidth: f64,
    pub algorithm: AlgorithmSpec,
    pub repetition: usize,
}

/// The jobs of an experiment, in a stable order, with keys that identify them across runs.
pub fn jobs(exp: &Experiment) -> Result<Vec<Job>, InputError> {
    let mut out = Vec::with_capacity(exp.len());
    for path in &exp.instances {
        let instance = Instance::load(path)?;
        let hash = instance.content_hash();
        for &p in &exp.processors {
            for &m in &exp.memory {
                for &b in &exp.bandwidth {
                    for a in &exp.algorithms {
                        for r in 0..exp.repetitions {
                            let key = engine::key_of(&serde_json::json!([
                                hash,
                                p,
                                m,
                                b,
                                a.key_form(),
                                r
                            ]));
                            out.push(Job {
                                key,
                                instance_path: path.clone(),
                                processors: p,
                                memory: m,
                                bandwidth: b,
                                algorithm: a.clone(),
                                repetition: r,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A row with the job's coordinates and status "error", before anything ran.
pub fn skeleton(job: &Job, ctx: &RunContext) -> Row {
    Row {
        key: job.key.clone(),
        experiment: ctx.experiment.clone(),
        config_hash: ctx.config_hash.clone(),
        git_revision: ctx.git_revision.clone(),
        instance: String::new(),
        instance_path: job.instance_path.display().to_string(),
        instance_hash: String::new(),
        processors: job.processors,
        memory: job.memory,
        bandwidth: job.bandwidth,
        algorithm: job.algorithm.label().to_string(),
        algorithm_name: job.algorithm.algorithm.algorithm().name().to_string(),
        repetition: job.repetition,
        status: Status::Error,
        period: None,
        planned_period: None,
        lower_bound: None,
        speedup: None,
        sequential: 0.0,
        peak_memory: vec![],
        peak_memory_max: None,
        stages: 0,
        placement: None,
        solve_seconds: None,
        wall_seconds: 0.0,
        solver_status: None,
        solver_gap: None,
        nodes: None,
        global_lower_bound: None,
        gap: None,
        case_infeasible: false,
        message: String::new(),
    }
}

/// Runs one job in this process and returns its row. Never panics on bad input: errors
/// become rows with status "error".
pub fn run_job(job: &Job, ctx: &RunContext) -> Row {
    let started = Instant::now();
    let mut row = skeleton(job, ctx);
    let result = (|| -> Result<(), InputError> {
        let instance = Instance::load(&job.instance_path)?;
        row.instance = instance.name.clone();
        row.instance_hash = instance.content_hash();
        row.sequential = instance.sums().u(1, instance.len());
        let platform = Platform::new(job.processors, job.memory, job.bandwidth);
        let planner = job.algorithm.algorithm.planner()?;
        let (_, report) = algorithm::run(
            planner.as_ref(),
            &Problem {
                instance: &instance,
                platform: &platform,
            },
        )?;
        row.record(report);
        Ok(())
    })();
    if let Err(e) = result {
        row.status = Status::Error;
        row.message = e.to_string();
    }
    row.wall_seconds = started.elapsed().as_secs_f64();
    row
}

/// Where a sweep (or one shard of it) keeps its journal and tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Paths {
    pub journal: PathBuf,
    pub parquet: PathBuf,
    pub csv: PathBuf,
}

impl Paths {
    pub fn new(exp: &Experiment, shard: Option<Shard>) -> Paths {
        let (output, name) = (&exp.header.output, &exp.header.name);
        let dir = exp.header.dir();
        match shard {
            None => Paths {
                journal: dir.join("journal.jsonl"),
                parquet: output.join(format!("{name}.parquet")),
                csv: output.join(format!("{name}.csv")),
            },
            Some(s) => Paths {
                journal: dir.join(s.journal_name()),
                parquet: dir.join(format!("{}.parquet", s.stem())),
                csv: dir.join(format!("{}.csv", s.stem())),
            },
        }
    }
}

/// What a periodic sweep did: the common summary with its tables' paths.
pub type SweepSummary = engine::SweepSummary<PeriodicTables>;

/// The periodic part of a [`SweepSummary`]: the table written (the whole grid's, or the
/// shard's that `merge` joins).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodicTables {
    pub parquet: PathBuf,
    pub csv: PathBuf,
}

/// The git revision of the working directory, or "unknown"; with `-modified` when the
/// sources the binary is built from (`src/`, `Cargo.toml`, `Cargo.lock`, `build.rs`) differ
/// from it, so that a row never names a revision whose code did not produce it. (Results
/// and journals, which a sweep itself changes, do not count.)
pub fn git_revision() -> String {
    git_revision_in(std::path::Path::new("."))
}

/// [`git_revision`] of the repository at `dir`.
pub fn git_revision_in(dir: &std::path::Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
    else {
        return "unknown".into();
    };
    let sources = ["src", "Cargo.toml", "Cargo.lock", "build.rs"];
    let modified = git(&[&["diff", "--quiet", "HEAD", "--"][..], &sources[..]].concat())
        .is_some_and(|o| o.status.code() == Some(1));
    if modified {
        format!("{head}-modified")
    } else {
        head
    }
}

/// The periodic planners' jobs.
pub struct Periodic;

impl JobKind for Periodic {
    type Job = Job;
    type Record = Row;
    const TAG: &'static str = "periodic";
    fn job_key(job: &Job) -> &str {
        &job.key
    }
    fn record_key(row: &Row) -> &str {
        &row.key
    }
    fn is_error(row: &Row) -> bool {
        row.status == Status::Error
    }
    fn read_record(value: serde_json::Value) -> Result<Row, serde_json::Error> {
        Row::from_json(value)
    }
    fn run(job: &Job, ctx: &RunContext) -> Row {
        run_job(job, ctx)
    }
    fn failed(job: &Job, ctx: &RunContext, message: String, wall: f64) -> Row {
        failed_row(job, ctx, message, wall)
    }
    fn set_wall(row: &mut Row, wall: f64) {
        row.wall_seconds = wall;
    }
    fn describe(row: &Row) -> String {
        format!(
            "{} {} P={} {}",
            row.algorithm, row.instance, row.processors, row.status
        )
    }
    fn error_message(row: &Row) -> Option<String> {
        (row.status == Status::Error).then(|| {
            format!(
                "{} on {} P={}: {}",
                row.algorithm, row.instance_path, row.processors, row.message
            )
        })
    }
}

/// Reads a periodic sweep's journal (see [`engine::read_journal`]).
pub fn read_journal(path: &Path) -> Result<Vec<Row>, InputError> {
    engine::read_journal::<Periodic>(path)
}

/// Runs (the rest of) an experiment and writes its tables.
pub fn sweep(exp: &Experiment, opts: &SweepOptions) -> Result<SweepSummary, crate::Error> {
    let started = Instant::now();
    let header = &exp.header;
    let paths = Paths::new(exp, opts.shard);
    let mut all = jobs(exp)?;
    if let Some(s) = opts.shard {
        all = s.of(all);
    }
    let ctx = RunContext {
        experiment: header.name.clone(),
        config_hash: header.config_hash.clone(),
        git_revision: git_revision(),
    };
    let done = engine::execute::<Periodic>(
        &all,
        &paths.journal,
        &ctx,
        &opts.engine(header.workers, header.timeout(), &header.name),
    )?;
    let files = TableFiles {
        parquet: paths.parquet.clone(),
        csv: paths.csv.clone(),
        json: None,
        compact_json: false,
        identity: Some(ShardIdentity::of(header, opts.shard)),
    };
    let written = table::write_tables(&table::filled(&done.records), &files)?;
    let summary = SweepSummary::new::<Periodic>(
        &header.name,
        opts.shard,
        all.len(),
        &done,
        paths.journal,
        written,
        PeriodicTables {
            parquet: paths.parquet,
            csv: paths.csv,
        },
        started,
    );
    drop(done.journal); // the lock, once the tables are written
    Ok(summary)
}

/// The row of a job that did not finish (crash, timeout, panic).
fn failed_row(job: &Job, ctx: &RunContext, message: String, wall: f64) -> Row {
    let mut row = skeleton(job, ctx);
    if let Ok(i) = Instance::load(&job.instance_path) {
        row.instance = i.name.clone();
        row.instance_hash = i.content_hash();
        row.sequential = i.sums().u(1, i.len());
    }
    row.message = message;
    row.wall_seconds = wall;
    row
}
