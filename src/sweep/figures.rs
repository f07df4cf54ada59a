//! Figures of a results table, after madpipe.txt section 5.2 (SVG, through plotters):
//!
//! - `periods-<instance>-<bandwidth>.svg` (its Figure 6): period against memory, one panel
//!   per processor count, one colour per algorithm; solid = validated period, dashed =
//!   the algorithm's planned period.
//! - `ratio-to-<reference>.svg` (its Figure 7): per network, the geometric mean over P and
//!   beta of each algorithm's period divided by the reference's, against memory.
//! - `speedup-<instance>.svg` (its Figure 8): speedup U(1,L)/period against P, one panel per
//!   memory limit.
//! - `over-bound.svg` (not in the papers): per network, the geometric mean over P and beta of
//!   each algorithm's validated period divided by the best proven lower bound of the case,
//!   against memory. The bound of a case is the largest of U(1,L)/P (no plan beats perfect
//!   load balance), the case's `global_lower_bound` (the relaxation of `milp::global_bound`,
//!   memory included, reported by `best`; docs/bounds.md) and the `lower_bound` of every row
//!   whose algorithm proves bounds for *every* plan of the case: `best`, and the general MILP
//!   `ilp`, which reports a `lower_bound` only when it holds for the original chain (a
//!   coarsened chain, like the contiguous optimum, bounds only its own smaller space).
//!
//! Every figure is written as SVG and as PNG (the SVG rasterised with resvg at twice its
//! size, with the system's fonts: the set-up script installs DejaVu where fonts are missing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::error::InputError;
use crate::plot::svg_to_png;
use crate::sweep::run::Row;

const GIB: f64 = 1073741824.0;

fn key(x: f64) -> i64 {
    (x * 1e3).round() as i64
}

/// The line colours of every figure (also `sync_figures`), cycling.
pub(crate) fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(200, 30, 30),
        RGBColor(30, 90, 200),
        RGBColor(30, 150, 60),
        RGBColor(150, 60, 170),
        RGBColor(230, 130, 20),
        RGBColor(20, 160, 170),
        RGBColor(120, 120, 120),
        RGBColor(170, 120, 40),
    ];
    C[i % C.len()]
}

fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

type Series = Vec<(f64, f64)>;

/// Draws panels of line charts into one SVG: `panels` is a list of (title, x label, y label,
/// lines), each line (label, colour index, dashed, points).
#[allow(clippy::type_complexity)]
fn draw_panels(
    path: &Path,
    title: &str,
    panels: &[(String, String, String, Vec<(String, usize, bool, Series)>)],
) -> Result<(), InputError> {
    let cols = panels.len().clamp(1, 4);
    let rows = panels.len().div_ceil(cols).max(1);
    let (w, h) = (380 * cols as u32, 300 * rows as u32 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let fail = |e: String| {
            InputError::new(
                path.display().to_string(),
                "",
                format!("drawing failed: {e}"),
            )
        };
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let (top, body) = root.split_vertically(40);
        top.draw(&Text::new(
            title.to_string(),
            (10, 12),
            ("sans-serif", 18).into_font(),
        ))
        .map_err(|e| fail(e.to_string()))?;
        let areas = body.split_evenly((rows, cols));
        for (area, (ptitle, xl, yl, lines)) in areas.iter().zip(panels) {
            let pts: Vec<(f64, f64)> = lines.iter().flat_map(|l| l.3.iter().copied()).collect();
            if pts.is_empty() {
                continue;
            }
            let (mut x0, mut x1) = pts
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
            let (mut y0, mut y1) = pts
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
            if x1 <= x0 {
                x0 -= 0.5;
                x1 += 0.5;
            }
            y0 = (y0 * 0.9).min(0.0f64.max(y0 - 0.1 * (y1 - y0)));
            y1 = if y1 <= y0 { y0 + 1.0 } else { y1 * 1.05 };
            let mut chart = ChartBuilder::on(area)
                .caption(ptitle, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(32)
                .y_label_area_size(50)
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| fail(e.to_string()))?;
            chart
                .configure_mesh()
                .x_desc(xl.as_str())
                .y_desc(yl.as_str())
                .label_style(("sans-serif", 11))
                .draw()
                .map_err(|e| fail(e.to_string()))?;
            for (label, c, dashed, series) in lines {
                let style = colour(*c).stroke_width(if *dashed { 1 } else { 2 });
                if *dashed {
                    chart
                        .draw_series(DashedLineSeries::new(series.iter().copied(), 6, 4, style))
                        .map_err(|e| fail(e.to_string()))?;
                } else {
                    chart
                        .draw_series(LineSeries::new(series.iter().copied(), style))
                        .map_err(|e| fail(e.to_string()))?
                        .label(label.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], colour(*c).stroke_width(2))
                        });
                    chart
                        .draw_series(
                            series
                                .iter()
                                .map(|&p| Circle::new(p, 2, colour(*c).filled())),
                        )
                        .map_err(|e| fail(e.to_string()))?;
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 10))
                .draw()
                .map_err(|e| fail(e.to_string()))?;
        }
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    crate::error::write_atomic(path, svg.as_bytes())?;
    let png = svg_to_png(&svg).map_err(|e| {
        InputError::new(
            path.display().to_string(),
            "",
            format!("rasterising failed: {e}"),
        )
    })?;
    crate::error::write_atomic(&path.with_extension("png"), &png)
}

/// Algorithms whose `lower_bound` holds for every plan of a case (see the module docs).
pub const GLOBAL_BOUND_ALGORITHMS: &[&str] = &["ilp", "best"];

/// Per memory limit (GiB), the geometric mean of `period / denominator(row)` over the rows
/// that have both.
fn geomean_by_memory<'a>(
    rows: impl Iterator<Item = &'a Row>,
    denominator: impl Fn(&Row) -> Option<f64>,
) -> Series {
    let mut acc: BTreeMap<i64, (f64, usize)> = BTreeMap::new();
    for r in rows {
        if let (Some(t), Some(d)) = (r.period, denominator(r)) {
            let e = acc.entry(key(r.memory)).or_insert((0.0, 0));
            e.0 += (t / d).ln();
            e.1 += 1;
        }
    }
    acc.into_iter()
        .map(|(m, (s, n))| (m as f64 / 1e3 / GIB, (s / n as f64).exp()))
        .collect()
}

/// Writes every figure of a results table into `dir`; returns the files written.
pub fn write_figures(
    rows: &[Row],
    dir: &Path,
    reference: Option<&str>,
) -> Result<Vec<PathBuf>, InputError> {
    std::fs::create_dir_all(dir).map_err(|e| InputError::file(dir, e))?;
    let algorithms: Vec<String> = {
        let mut seen = BTreeSet::new();
        rows.iter()
            .filter(|r| seen.insert(r.algorithm.clone()))
            .map(|r| r.algorithm.clone())
            .collect()
    };
    let colour_of = |a: &str| algorithms.iter().position(|x| x == a).unwrap_or(0);
    let instances: BTreeSet<&str> = rows.iter().map(|r| r.instance.as_str()).collect();
    let mut written = Vec::new();

    // Figure 6: period against memory, per (instance, bandwidth), one panel per P.
    for inst in &instances {
        let bws: BTreeSet<i64> = rows
            .iter()
            .filter(|r| r.instance == *inst)
            .map(|r| key(r.bandwidth / 1e9))
            .collect();
        for bw in bws {
            let sel: Vec<&Row> = rows
                .iter()
                .filter(|r| r.instance == *inst && key(r.bandwidth / 1e9) == bw)
                .collect();
            let ps: BTreeSet<usize> = sel.iter().map(|r| r.processors).collect();
            let mut panels = Vec::new();
            for p in ps {
                let mut lines = Vec::new();
                for a in &algorithms {
                    let mut solid: Series = Vec::new();
                    let mut dashed: Series = Vec::new();
                    for r in sel
                        .iter()
                        .filter(|r| r.processors == p && &r.algorithm == a)
                    {
                        if let Some(t) = r.period {
                            solid.push((r.memory / GIB, t));
                        }
                        if let Some(t) = r.planned_period {
                            dashed.push((r.memory / GIB, t));
                        }
                    }
                    solid.sort_by(|x, y| x.0.total_cmp(&y.0));
                    dashed.sort_by(|x, y| x.0.total_cmp(&y.0));
                    if !solid.is_empty() {
                        lines.push((a.clone(), colour_of(a), false, solid));
                    }
                    if !dashed.is_empty() {
                        lines.push((format!("{a} (planned)"), colour_of(a), true, dashed));
                    }
                }
                panels.push((
                    format!("P = {p}"),
                    "memory M (GiB)".into(),
                    "period (s)".into(),
                    lines,
                ));
            }
            let path = dir.join(format!(
                "periods-{}-{}GBps.svg",
                safe(inst),
                bw as f64 / 1e3
            ));
            draw_panels(
                &path,
                &format!(
                    "{inst}, beta = {} GB/s: period (solid: validated, dashed: planned)",
                    bw as f64 / 1e3
                ),
                &panels,
            )?;
            written.push(path);
        }
    }

    // Figure 7: geometric mean ratio to the reference, per instance, against memory.
    if let Some(reference) = reference.filter(|r| algorithms.iter().any(|a| a == r)) {
        let mut panels = Vec::new();
        for inst in &instances {
            let mut by_case: BTreeMap<(usize, i64, i64, usize), f64> = BTreeMap::new();
            for r in rows
                .iter()
                .filter(|r| r.instance == *inst && r.algorithm == reference)
            {
                if let Some(t) = r.period {
                    by_case.insert(
                        (r.processors, key(r.memory), key(r.bandwidth), r.repetition),
                        t,
                    );
                }
            }
            let mut lines = Vec::new();
            for a in algorithms.iter().filter(|a| a.as_str() != reference) {
                let series = geomean_by_memory(
                    rows.iter()
                        .filter(|r| r.instance == *inst && &r.algorithm == a),
                    |r| {
                        by_case
                            .get(&(r.processors, key(r.memory), key(r.bandwidth), r.repetition))
                            .copied()
                    },
                );
                if !series.is_empty() {
                    lines.push((a.clone(), colour_of(a), false, series));
                }
            }
            panels.push((
                inst.to_string(),
                "memory M (GiB)".into(),
                format!("period / {reference}"),
                lines,
            ));
        }
        let path = dir.join(format!("ratio-to-{}.svg", safe(reference)));
        draw_panels(
            &path,
            &format!("Geometric mean over P and beta of period / period of {reference}"),
            &panels,
        )?;
        written.push(path);
    }

    // Not in the papers: validated period over the best proven lower bound, against memory.
    {
        type Case = (usize, i64, i64, usize);
        let case =
            |r: &Row| -> Case { (r.processors, key(r.memory), key(r.bandwidth), r.repetition) };
        let mut panels = Vec::new();
        for inst in &instances {
            let sel: Vec<&Row> = rows.iter().filter(|r| r.instance == *inst).collect();
            let mut bound: BTreeMap<Case, f64> = BTreeMap::new();
            for r in &sel {
                let mut b = r.sequential / r.processors as f64; // U(1,L) / P
                let global = GLOBAL_BOUND_ALGORITHMS.contains(&r.algorithm_name.as_str());
                if let (true, Some(lb)) = (global, r.lower_bound) {
                    b = b.max(lb);
                }
                if let Some(g) = r.global_lower_bound.filter(|g| g.is_finite()) {
                    b = b.max(g);
                }
                let e = bound.entry(case(r)).or_insert(0.0);
                *e = e.max(b);
            }
            let mut lines = Vec::new();
            for a in &algorithms {
                let series =
                    geomean_by_memory(sel.iter().copied().filter(|r| &r.algorithm == a), |r| {
                        bound.get(&case(r)).copied().filter(|&b| b > 0.0)
                    });
                if !series.is_empty() {
                    lines.push((a.clone(), colour_of(a), false, series));
                }
            }
            panels.push((
                inst.to_string(),
                "memory M (GiB)".into(),
                "period / lower bound".into(),
                lines,
            ));
        }
        let path = dir.join("over-bound.svg");
        draw_panels(
            &path,
            "Geometric mean over P and beta of validated period / global lower bound of the case",
            &panels,
        )?;
        written.push(path);
    }

    // Figure 8: speedup against P, per instance, one panel per memory.
    for inst in &instances {
        let sel: Vec<&Row> = rows.iter().filter(|r| r.instance == *inst).collect();
        let mems: BTreeSet<i64> = sel.iter().map(|r| key(r.memory)).collect();
        let mut panels = Vec::new();
        for m in mems {
            let mut lines = Vec::new();
            for a in &algorithms {
                // Best over bandwidths would hide the effect; average over them instead.
                let mut acc: BTreeMap<usize, (f64, usize)> = BTreeMap::new();
                for r in sel
                    .iter()
                    .filter(|r| key(r.memory) == m && &r.algorithm == a)
                {
                    if let Some(s) = r.speedup {
                        let e = acc.entry(r.processors).or_insert((0.0, 0));
                        e.0 += s;
                        e.1 += 1;
                    }
                }
                let series: Series = acc
                    .into_iter()
                    .map(|(p, (s, n))| (p as f64, s / n as f64))
                    .collect();
                if !series.is_empty() {
                    lines.push((a.clone(), colour_of(a), false, series));
                }
            }
            panels.push((
                format!("M = {:.1} GiB", m as f64 / 1e3 / GIB),
                "processors P".into(),
                "speedup".into(),
                lines,
            ));
        }
        let path = dir.join(format!("speedup-{}.svg", safe(inst)));
        draw_panels(
            &path,
            &format!("{inst}: speedup U(1,L)/period (mean over bandwidths)"),
            &panels,
        )?;
        written.push(path);
    }
    Ok(written)
}
