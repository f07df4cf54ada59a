//! The Gantt drawing of a synchronous schedule as `pipeopt sync --out` writes it: one
//! iteration, one row per worker, each operation a box at the time the simulator ran it
//! (`timeline`), coloured by micro-batch, light for forwards and dark for backwards, solid
//! outline for the down pipeline and dashed-looking grey outline for the up pipeline.
//! `pipeopt gantt FILE` draws this when FILE is a sync file, a plan's pattern otherwise.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

use super::style::{draw_gantt_row, font, LABEL, SMALL, TITLE};
use crate::error::InputError;
use crate::schedule::sync::{Instr, Pass, Pipeline, ScheduleKind};

#[derive(Debug, Deserialize)]
struct FileTimeline {
    makespan: f64,
    intervals: Vec<Vec<(f64, f64, Instr)>>,
}

#[derive(Debug, Deserialize)]
struct FileReport {
    bubble_ratio: f64,
}

/// The parts of a `sync --out` file the drawing needs.
#[derive(Debug, Deserialize)]
struct SyncFile {
    instance: String,
    /// A `ScheduleKind`, or `{"name": "optimal", "placement": ...}` for the MILP's streams.
    schedule: serde_json::Value,
    stages: usize,
    micro_batches: usize,
    report: FileReport,
    timeline: FileTimeline,
}

/// The schedule's name as the title shows it.
fn schedule_name(v: &serde_json::Value) -> String {
    if let Ok(kind) = serde_json::from_value::<ScheduleKind>(v.clone()) {
        return kind.name();
    }
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    match field("placement") {
        "" => field("name").to_string(),
        p => format!("{} ({p})", field("name")),
    }
}

/// Whether the JSON file at `path` is a `sync --out` file (it has `streams` and
/// `timeline`); unreadable or non-JSON files are not (the plan reader reports them).
pub fn is_sync_file(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.contains_key("streams") && o.contains_key("timeline"))
        })
        .unwrap_or(false)
}

/// Draws the sync file at `file` into `path`: SVG, or PNG when `path` ends in `.png`.
pub fn write_svg(file: &Path, path: &Path) -> Result<(), crate::Error> {
    let s: SyncFile = crate::error::read_json(file)?;
    let d = s.stages;
    if s.timeline.intervals.len() != d {
        return Err(crate::Error::Input(InputError::new(
            file.display().to_string(),
            "timeline.intervals",
            format!(
                "has {} workers but the file says {d} stages",
                s.timeline.intervals.len()
            ),
        )));
    }
    let span = s.timeline.makespan;
    if span.is_nan() || span <= 0.0 {
        return Err(crate::Error::Input(InputError::new(
            file.display().to_string(),
            "timeline.makespan",
            "must be positive",
        )));
    }
    let (left, top, row_h, width) = (170i32, 44i32, 34i32, 1200i32);
    let height = top + row_h * d as i32 + 64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, ((left + width + 20) as u32, height as u32))
            .into_drawing_area();
        let draw = |e: DrawingAreaErrorKind<_>| {
            InputError::new(
                path.display().to_string(),
                "",
                format!("drawing failed: {e}"),
            )
        };
        root.fill(&WHITE).map_err(draw)?;
        let x = |t: f64| left + ((t / span) * width as f64).round() as i32;
        let title = format!(
            "{} on {}: D = {d}, N = {}, iteration {:.3} ms, bubble ratio {:.3}",
            schedule_name(&s.schedule),
            s.instance,
            s.micro_batches,
            span * 1e3,
            s.report.bubble_ratio
        );
        root.draw(&Text::new(title, (left, 12), font(TITLE)))
            .map_err(draw)?;
        for (w, ops) in s.timeline.intervals.iter().enumerate() {
            let y = top + row_h * w as i32;
            let mut stages: Vec<usize> = ops.iter().map(|(_, _, op)| op.stage()).collect();
            stages.sort();
            stages.dedup();
            let stages = stages
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let label = format!("worker {w} (stage {stages})");
            draw_gantt_row(&root, label, y, (left, width, row_h)).map_err(draw)?;
            for &(start, end, op) in ops {
                let colour = Palette99::pick(op.micro_batch() % 99);
                // Forwards light, backwards dark, weight gradients in between.
                let fill = match op.pass() {
                    Pass::Forward => colour.mix(0.5).filled(),
                    Pass::BackwardWeight => colour.mix(0.75).filled(),
                    Pass::Backward | Pass::BackwardInput => colour.mix(0.95).filled(),
                };
                let (x0, x1) = (x(start), x(end).max(x(start) + 1));
                root.draw(&Rectangle::new([(x0, y + 3), (x1, y + row_h - 3)], fill))
                    .map_err(draw)?;
                let outline = match op.pipeline() {
                    Pipeline::Down => BLACK.stroke_width(1),
                    Pipeline::Up => RGBColor(110, 110, 110).stroke_width(2),
                };
                root.draw(&Rectangle::new([(x0, y + 3), (x1, y + row_h - 3)], outline))
                    .map_err(draw)?;
                let label = op.label();
                if x1 - x0 > 7 * label.len() as i32 {
                    root.draw(&Text::new(
                        label,
                        ((x0 + x1) / 2, y + row_h / 2),
                        TextStyle::from(font(SMALL)).pos(Pos::new(HPos::Center, VPos::Center)),
                    ))
                    .map_err(draw)?;
                }
            }
        }
        // Time axis in milliseconds.
        let axis_y = top + row_h * d as i32;
        let ticks = 10;
        for k in 0..=ticks {
            let t = span * k as f64 / ticks as f64;
            let xx = x(t);
            root.draw(&PathElement::new(
                vec![(xx, axis_y), (xx, axis_y + 5)],
                BLACK.stroke_width(1),
            ))
            .map_err(draw)?;
            root.draw(&Text::new(
                format!("{:.1}", t * 1e3),
                (xx, axis_y + 14),
                TextStyle::from(font(SMALL)).pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(draw)?;
        }
        root.draw(&Text::new(
            "time (ms) - light: forward, dark: backward; colour = micro-batch; black outline: \
             down pipeline (d), grey: up pipeline (u)",
            (left, height - 18),
            font(LABEL),
        ))
        .map_err(draw)?;
        root.present().map_err(draw)?;
    }
    super::write_drawing(path, &svg)
}
