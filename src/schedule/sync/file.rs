//! A `sync --out` file read back and judged (`pipeopt validate` on it): its streams
//! replayed by the simulator on the costs the file records, and the replay's iteration
//! time and per-worker peaks compared with the report the file gives.

use std::path::Path;

use serde::Deserialize;

use super::sim::{simulate, Execution, StageCosts};
use super::{Schedule, ScheduleKind};
use crate::error::{read_json, InputError};

/// The parts of a `sync --out` file the judge reads.
#[derive(Debug, Deserialize)]
struct SyncFile {
    /// A `ScheduleKind`, or `{"name": "optimal", ...}` for the exact schedule's streams.
    schedule: serde_json::Value,
    stages: usize,
    micro_batches: usize,
    costs: StageCosts,
    streams: Schedule,
    report: FileReport,
}

#[derive(Debug, Deserialize)]
struct FileReport {
    makespan: f64,
    peak_memory: Vec<f64>,
}

/// The verdict on a sync file.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncVerdict {
    /// The streams replay without deadlock to the iteration time and peaks reported.
    pub valid: bool,
    /// The replay's iteration time (seconds) and per-worker peaks (bytes), when it ran.
    pub makespan_seconds: Option<f64>,
    pub peak_memory: Vec<f64>,
    /// What disagrees, in words (empty when valid).
    pub violations: Vec<String>,
}

/// The most stages and micro-batches a sync file may name (`sync`'s own limits).
const MAX_STAGES: usize = 1 << 16;
const MAX_MICRO_BATCHES: usize = 100_000;

/// Reads the sync file at `path` and replays its streams. A file that is not one (or
/// whose numbers are out of range) is an [`InputError`] naming the field; streams that
/// deadlock or replay to other numbers than reported are an invalid verdict.
pub fn judge_file(path: &Path) -> Result<SyncVerdict, InputError> {
    let f: SyncFile = read_json(path)?;
    let bad =
        |field: &str, reason: String| InputError::new(path.display().to_string(), field, reason);
    let d = f.costs.stages();
    if d == 0 || d > MAX_STAGES || f.stages != d {
        return Err(bad(
            "costs",
            format!("{d} stages of costs for `stages` = {}", f.stages),
        ));
    }
    if f.micro_batches == 0 || f.micro_batches > MAX_MICRO_BATCHES {
        return Err(bad(
            "micro_batches",
            format!("must be from 1 to {MAX_MICRO_BATCHES}"),
        ));
    }
    let c = &f.costs;
    for (field, v) in [
        ("forward_seconds", &c.forward_seconds),
        ("backward_seconds", &c.backward_seconds),
        ("transfer_seconds", &c.transfer_seconds),
        ("weight_bytes", &c.weight_bytes),
        ("stash_bytes", &c.stash_bytes),
        ("input_bytes", &c.input_bytes),
        ("output_bytes", &c.output_bytes),
        ("weight_gradient_seconds", &c.weight_gradient_seconds),
        (
            "weight_gradient_stash_bytes",
            &c.weight_gradient_stash_bytes,
        ),
    ] {
        // The split backward's columns may be left out (no split).
        let optional = field.starts_with("weight_gradient");
        if v.len() != d && !(optional && v.is_empty()) {
            return Err(bad(
                &format!("costs.{field}"),
                format!("has {} entries, not {d}", v.len()),
            ));
        }
        if let Some(i) = v.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(bad(
                &format!("costs.{field}[{i}]"),
                format!("{} is not a finite non-negative number", v[i]),
            ));
        }
    }
    for (w, stream) in f.streams.iter().enumerate() {
        if let Some(j) = stream
            .iter()
            .position(|i| i.micro_batch() >= f.micro_batches)
        {
            return Err(bad(
                &format!("streams[{w}][{j}]"),
                format!(
                    "names a micro-batch beyond the {} of the file",
                    f.micro_batches
                ),
            ));
        }
    }
    let execution = serde_json::from_value::<ScheduleKind>(f.schedule.clone())
        .map(ScheduleKind::execution)
        .unwrap_or(Execution::Serial);
    let r = match simulate(&f.streams, c, execution) {
        Ok(r) => r,
        Err(e) => {
            return Ok(SyncVerdict {
                valid: false,
                makespan_seconds: None,
                peak_memory: vec![],
                violations: vec![format!("the streams do not run: {e}")],
            })
        }
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12);
    let peaks: Vec<f64> = r.memory.iter().map(|m| m.peak_bytes).collect();
    let mut violations = Vec::new();
    if !close(r.makespan_seconds, f.report.makespan) {
        violations.push(format!(
            "the streams replay to an iteration of {} s, the report says {} s",
            r.makespan_seconds, f.report.makespan
        ));
    }
    if peaks.len() != f.report.peak_memory.len()
        || peaks
            .iter()
            .zip(&f.report.peak_memory)
            .any(|(a, b)| !close(*a, *b))
    {
        violations.push(format!(
            "the streams replay to peaks {peaks:?} bytes, the report says {:?}",
            f.report.peak_memory
        ));
    }
    Ok(SyncVerdict {
        valid: violations.is_empty(),
        makespan_seconds: Some(r.makespan_seconds),
        peak_memory: peaks,
        violations,
    })
}
