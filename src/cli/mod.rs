//! The commands of the `pipeopt` binary, one file each: the command's arguments, the
//! library request they make, and the report (one JSON object with `--json`, text for
//! people otherwise). Nothing here decides anything about the model or an algorithm: that
//! is the library's.

use std::fmt;

use clap::builder::{EnumValueParser, PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use pipeopt::model::{PlacementKind, PlanReport, Platform, MAX_PROCESSORS};
use pipeopt::sweep::engine::Isolation;
use pipeopt::units::{parse_positive_bandwidth, parse_positive_bytes, ShowBytes, ShowSeconds};
use pipeopt::InputError;

pub mod bound;
pub mod command;
pub mod execute;
pub mod figures;
pub mod fit_device;
pub mod gantt;
pub mod import;
pub mod instance;
pub mod merge;
pub mod partition;
pub mod plan;
pub mod profile;
pub mod schedule;
pub mod sweep;
pub mod sync;
pub mod sync_sweep;
pub mod table;
pub mod validate;

/// `--isolation` of `sweep` and `sync-sweep`: the library's [`Isolation`] by name, with
/// the help its values show (clap stays in the binary).
#[derive(Clone, Copy, clap::ValueEnum)]
enum IsolationFlag {
    /// Every job in a child process (`pipeopt sweep-job`): a crash or hang costs one row.
    Process,
    /// Every job on a thread of this process: faster to start, no protection from crashes.
    Thread,
}

/// The parser of `--isolation`.
pub fn isolation_parser() -> impl TypedValueParser<Value = Isolation> {
    EnumValueParser::<IsolationFlag>::new().map(|flag| match flag {
        IsolationFlag::Process => Isolation::Process,
        IsolationFlag::Thread => Isolation::Thread,
    })
}

/// The parser of a flag naming a built-in network: `extra` (name, help) first, then the
/// network table's names and descriptions ([`pipeopt::nets::NETWORKS`]).
pub fn network_parser(extra: &[(&'static str, &'static str)]) -> PossibleValuesParser {
    let extra = extra
        .iter()
        .map(|&(name, help)| PossibleValue::new(name).help(help));
    PossibleValuesParser::new(
        extra.chain(
            pipeopt::nets::NETWORKS
                .iter()
                .map(|n| PossibleValue::new(n.name).help(n.description)),
        ),
    )
}

/// A built-in network, its image size and its batch size (`instance`, `profile`).
#[derive(Args)]
pub struct NetworkArgs {
    /// The built-in network (its values below come from the network table).
    #[arg(long, value_parser = network_parser(&[]))]
    pub model: String,
    /// Image side in pixels (square images; ignored by the transformers).
    #[arg(long, default_value_t = 224)]
    pub image: usize,
    /// Batch size (samples per batch).
    #[arg(long)]
    pub batch: usize,
}

#[derive(Args)]
pub struct PlatformArgs {
    /// P: number of processors, 1 to 1024.
    #[arg(long, short = 'p', value_parser = parse_processors)]
    pub processors: usize,
    /// M: memory of each processor, e.g. 8GiB (positive).
    #[arg(long, short = 'm', value_parser = parse_positive_bytes)]
    pub memory: f64,
    /// beta: bandwidth of every link, e.g. 12GB/s (positive).
    #[arg(long, short = 'b', value_parser = parse_positive_bandwidth)]
    pub bandwidth: f64,
    /// Links carry forward and backward transfers at the same time.
    #[arg(long)]
    pub full_duplex: bool,
}

impl PlatformArgs {
    pub fn platform(&self) -> Result<Platform, InputError> {
        let platform = Platform {
            processors: self.processors,
            memory: self.memory,
            bandwidth: self.bandwidth,
            full_duplex: self.full_duplex,
        };
        platform.check()?;
        Ok(platform)
    }
}

/// `--processors`: a whole number from 1 to [`MAX_PROCESSORS`].
pub fn parse_processors(text: &str) -> Result<usize, String> {
    parse_count(text, 1, MAX_PROCESSORS)
}

/// A whole number from `min` to `max`, the range named when `text` is not one.
pub fn parse_count(text: &str, min: usize, max: usize) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("must be a whole number from {min} to {max}, got {text:?}"))
}

/// Writes a command's report to stdout and ends with `code`, the status of its result
/// whatever becomes of stdout: a reader that closed the pipe (`| head -c0`) does not turn
/// an invalid plan or a failed algorithm into success; a full disk is a failed write (exit
/// 1, an [`pipeopt::Error::Io`] on stdout).
pub fn emit(text: &str, code: std::process::ExitCode) -> anyhow::Result<std::process::ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(code),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(e) => Err(pipeopt::Error::io(std::path::Path::new("stdout"), e).into()),
    }
}

/// The end of `plan` and `schedule`: the plan written to `out` (or an older file there
/// removed when there is no plan), the report printed (JSON, or for people with where the
/// plan went), and the exit code of its status: 1 for a failed algorithm, whatever becomes
/// of stdout.
pub fn finish_plan_command(
    report: &PlanReport,
    plan: Option<&pipeopt::model::Plan>,
    out: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<std::process::ExitCode> {
    match (out, plan) {
        (Some(path), Some(plan)) => plan.save(path)?,
        (Some(path), None) => remove_stale(path)?,
        _ => {}
    }
    let text = if json {
        format!("{}\n", serde_json::to_string(report)?)
    } else {
        let mut text = Human(report).to_string();
        if let (Some(path), Some(_)) = (out, plan) {
            text += &format!("plan written to {}\n", path.display());
        }
        text
    };
    let code = if report.status == pipeopt::model::Status::Error {
        std::process::ExitCode::from(1)
    } else {
        std::process::ExitCode::SUCCESS
    };
    emit(&text, code)
}

/// With no plan to write (infeasible, error), an older file at `--out` would pass for this
/// run's result: remove it.
pub fn remove_stale(path: &std::path::Path) -> Result<(), InputError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            eprintln!("no plan: removed the older {}", path.display());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InputError::file(path, e)),
    }
}

/// A table for people (no borders, like the rest of the text output): `header`, then the
/// rows; the columns listed in `right` (numbers) aligned right.
pub fn table<R: Into<comfy_table::Row>>(
    header: &[&str],
    right: &[usize],
    rows: impl IntoIterator<Item = R>,
) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    for &c in right {
        if let Some(column) = t.column_mut(c) {
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t
}

/// `yes`, `no` or nothing, for an optional flag in a table.
pub fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "",
    }
}

/// A plan report for people (`plan` and `schedule` without `--json`).
pub struct Human<'a>(pub &'a PlanReport);

impl fmt::Display for Human<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        writeln!(
            f,
            "{} on {} | P = {}, M = {}, beta = {:.3} GB/s",
            r.algorithm,
            r.instance,
            r.processors,
            ShowBytes(r.memory),
            r.bandwidth / 1e9
        )?;
        writeln!(f, "status          {:?}", r.status)?;
        let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| ShowSeconds(v).to_string());
        writeln!(f, "period          {}", opt(r.period))?;
        writeln!(f, "planned period  {}", opt(r.planned_period))?;
        writeln!(f, "lower bound     {}", opt(r.lower_bound))?;
        writeln!(f, "solve time      {}", opt(r.solve_seconds))?;
        if !r.stages.is_empty() {
            match r.placement {
                Some(PlacementKind::Bipartition) => {
                    writeln!(f, "stages (Bi-Partition workers, forward ranges):")?
                }
                _ => writeln!(f, "stages:")?,
            }
            for (i, s) in r.stages.iter().enumerate() {
                writeln!(
                    f,
                    "  {i:>3}: layers {:>4}..={:<4} on processor {}",
                    s.first, s.last, s.processor
                )?;
            }
        }
        if !r.peak_memory.is_empty() {
            writeln!(f, "memory peaks:")?;
            for (p, m) in r.peak_memory.iter().enumerate() {
                writeln!(
                    f,
                    "  processor {p:>2}: {:>12}  ({:.1}% of M)",
                    ShowBytes(*m).to_string(),
                    100.0 * m / r.memory
                )?;
            }
        }
        for m in &r.messages {
            writeln!(f, "note: {m}")?;
        }
        Ok(())
    }
}

/// `--dtype`: float32 or float16.
pub fn parse_dtype(s: &str) -> Result<pipeopt::nets::DType, InputError> {
    pipeopt::nets::DType::parse(s)
        .ok_or_else(|| InputError::new("--dtype", "", format!("is {s:?}; use float32 or float16")))
}

/// `--device-model`: a built-in model of `devices/` by name, or a model file by path.
pub fn parse_device_model(s: &str) -> Result<pipeopt::nets::DeviceModel, InputError> {
    pipeopt::nets::DeviceModel::resolve(s, "--device-model")
}

/// What the libtorch commands do in a build without the `torch` feature.
#[cfg(not(feature = "torch"))]
pub fn without_torch(command: &str) -> anyhow::Result<std::process::ExitCode> {
    Err(InputError::new(
        command,
        "",
        "this pipeopt was built without libtorch; rebuild with `--features torch` \
         (run `source .ci/setup-torch.sh` first, see README)",
    )
    .into())
}
