//! The picture people draw in these papers: a plan's pattern unrolled over a few periods,
//! one row per processor and per link, each operation a box coloured by its batch.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{draw_gantt_row, font, LABEL, SMALL, TITLE};
use crate::error::InputError;
use crate::model::{OpKind, Plan, Resource};

/// One box of the drawing: an operation instance on a row.
#[derive(Debug, Clone, PartialEq)]
pub struct GanttBox {
    pub row: usize,
    pub start: f64,
    pub end: f64,
    pub batch: i64,
    pub label: String,
    pub kind: OpKind,
}

/// The most periods `gantt` draws.
pub const MAX_PERIODS: usize = 1000;

/// The most boxes one drawing holds.
pub const MAX_BOXES: usize = 1_000_000;

/// Rows (resource names) and boxes of `periods` consecutive periods of the steady state,
/// starting in the first period where every operation processes a batch numbered >= 0.
pub fn layout(
    plan: &Plan,
    periods: usize,
) -> Result<(Vec<String>, Vec<GanttBox>, f64), InputError> {
    let pattern = plan.pattern.as_ref().ok_or_else(|| {
        InputError::new(
            "plan",
            "pattern",
            "the plan has no pattern to draw (status planned)",
        )
    })?;
    let t = pattern.period;
    if !(t > 0.0 && t.is_finite()) {
        return Err(InputError::new(
            "plan",
            "pattern.period",
            format!("must be positive and finite, got {t}"),
        ));
    }
    if let Some(i) = pattern
        .ops
        .iter()
        .position(|o| o.shift.unsigned_abs() > i32::MAX as u64)
    {
        return Err(InputError::new(
            "plan",
            format!("pattern.ops[{i}].shift"),
            format!("{} is out of range", pattern.ops[i].shift),
        ));
    }
    let graph = plan.batch_graph()?;
    let mut rows: BTreeMap<Resource, usize> = BTreeMap::new();
    for op in &graph.ops {
        let n = rows.len();
        rows.entry(op.resource).or_insert(n);
    }
    // Processors first, then links, in resource order.
    let mut names: Vec<(Resource, String)> = rows.keys().map(|r| (*r, r.to_string())).collect();
    names.sort_by_key(|(r, _)| *r);
    let index: BTreeMap<Resource, usize> = names
        .iter()
        .enumerate()
        .map(|(i, (r, _))| (*r, i))
        .collect();
    let first = pattern
        .ops
        .iter()
        .map(|o| o.shift)
        .max()
        .unwrap_or(0)
        .max(0);
    // Each operation is drawn once per period of the window and once per period it runs
    // into it: bounded before anything is drawn (a period far below the durations, say
    // 1e-300 s, would otherwise ask for more boxes than memory holds).
    let drawn: f64 = graph
        .ops
        .iter()
        .map(|op| periods as f64 + 2.0 + (op.duration / t).ceil())
        .sum();
    if drawn.is_nan() || drawn > MAX_BOXES as f64 {
        return Err(InputError::new(
            "plan",
            "pattern.period",
            format!(
                "{t:e} s is so short beside the operations' durations that drawing {periods} \
                 periods would take {drawn:e} boxes (at most {MAX_BOXES})"
            ),
        ));
    }
    let t0 = first as f64 * t;
    let t1 = t0 + periods as f64 * t;
    let mut boxes = Vec::new();
    for op in &graph.ops {
        let Some(p) = pattern.get(op.id) else {
            continue;
        };
        // Instances started in the window or running into it.
        for k in (first - 1 - (op.duration / t).ceil() as i64)..(first + periods as i64) {
            let s = k as f64 * t + p.start;
            let e = s + op.duration;
            if e <= t0 || s >= t1 || op.duration <= 0.0 {
                continue;
            }
            boxes.push(GanttBox {
                row: index[&op.resource],
                start: s.max(t0) - t0,
                end: e.min(t1) - t0,
                batch: k - p.shift,
                label: format!("{}{} b{}", op.id.kind, op.id.stage, k - p.shift),
                kind: op.id.kind,
            });
        }
    }
    Ok((names.into_iter().map(|(_, n)| n).collect(), boxes, t1 - t0))
}

/// Writes the SVG drawing of `periods` periods of the plan to `path`.
pub fn write_svg(plan: &Plan, periods: usize, path: &Path) -> Result<(), crate::Error> {
    let (rows, boxes, span) = layout(plan, periods.max(1))?;
    let period = plan.pattern.as_ref().map(|p| p.period).unwrap_or(1.0);
    let (left, top, row_h, width) = (150i32, 40i32, 34i32, 1200i32);
    let height = top + row_h * rows.len() as i32 + 40;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, ((left + width + 20) as u32, height as u32))
            .into_drawing_area();
        let draw = |e: DrawingAreaErrorKind<_>| {
            crate::Error::internal(format!("{}: drawing failed: {e}", path.display()))
        };
        root.fill(&WHITE).map_err(draw)?;
        let x = |s: f64| left + ((s / span) * width as f64).round() as i32;
        let title = format!(
            "{} on {}: period {:.3} ms, P = {}",
            plan.algorithm,
            plan.instance.name,
            period * 1e3,
            plan.platform.processors
        );
        root.draw(&Text::new(title, (left, 12), font(TITLE)))
            .map_err(draw)?;
        for (i, name) in rows.iter().enumerate() {
            let y = top + row_h * i as i32;
            draw_gantt_row(&root, name.clone(), y, (left, width, row_h)).map_err(draw)?;
        }
        for k in 0..=((span / period).round() as i32) {
            let xx = x(k as f64 * period);
            root.draw(&PathElement::new(
                vec![(xx, top - 4), (xx, top + row_h * rows.len() as i32)],
                BLACK.mix(0.4),
            ))
            .map_err(draw)?;
        }
        for b in &boxes {
            let y = top + row_h * b.row as i32;
            let colour = Palette99::pick(b.batch.rem_euclid(99) as usize);
            let fill = match b.kind {
                OpKind::F | OpKind::CF | OpKind::CS => colour.mix(0.55).filled(),
                OpKind::B | OpKind::CB | OpKind::CW => colour.mix(0.95).filled(),
            };
            let (x0, x1) = (x(b.start), x(b.end).max(x(b.start) + 1));
            root.draw(&Rectangle::new([(x0, y + 3), (x1, y + row_h - 3)], fill))
                .map_err(draw)?;
            root.draw(&Rectangle::new(
                [(x0, y + 3), (x1, y + row_h - 3)],
                BLACK.stroke_width(1),
            ))
            .map_err(draw)?;
            if x1 - x0 > 7 * b.label.len() as i32 {
                root.draw(&Text::new(
                    b.label.clone(),
                    ((x0 + x1) / 2, y + row_h / 2),
                    TextStyle::from(font(SMALL)).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(draw)?;
            }
        }
        root.draw(&Text::new(
            "light: forward (F, CF), dark: backward (B, CB); colour = batch; vertical lines = period boundaries",
            (left, height - 18),
            font(LABEL),
        ))
        .map_err(draw)?;
        root.present().map_err(draw)?;
    }
    super::write_drawing(path, &svg)
}
