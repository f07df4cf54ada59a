//! Figures of a results table, after MadPipe (Beaumont, Eyraud-Dubois, Shilova, *MadPipe:
//! Memory Aware Dynamic Programming Algorithm for Pipelined Model Parallelism*, ScaDL
//! 2022), section 5.2 (SVG, through plotters):
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
//! Every figure is drawn in the style of `plot::style` (one legend right of the panels, an
//! entry for every line, dashed ones included) and written as SVG and as PNG (the SVG
//! rasterised with resvg at twice its size, with the system's fonts: the set-up script
//! installs DejaVu where fonts are missing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::plot::style::{FigureWriter, Layout, Legend, Line, Panel};
use crate::sweep::row::Row;

const GIB: f64 = 1073741824.0;

fn key(x: f64) -> i64 {
    (x * 1e3).round() as i64
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

/// The layout of every figure of a memory sweep: up to four panels a row, which share their
/// lines (one per algorithm), so one legend right of them.
const LAYOUT: Layout = Layout {
    columns: 4,
    panel: (380, 300),
    legend: Legend::Shared,
    y_from_zero: false,
    integer_x: false,
};

fn line(label: String, colour: usize, dashed: bool, points: Series) -> Line {
    Line {
        label,
        colour,
        dashed,
        points,
    }
}

fn panel(title: String, x: &str, y: String, lines: Vec<Line>) -> Panel {
    Panel {
        title,
        x: x.into(),
        y,
        lines,
    }
}

/// True when the row's algorithm has a `lower_bound` that holds for every plan of a case
/// (see the module docs).
fn bound_covers_every_plan(r: &Row) -> bool {
    crate::algorithm::Algorithm::parse(&r.algorithm_name)
        .is_ok_and(|a| a.descriptor().bound_covers_every_plan)
}

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

/// A results table as the figures read it: its rows, its algorithms in order of first
/// appearance (each one's colour is its index) and its instances.
struct Table<'r> {
    rows: &'r [Row],
    algorithms: Vec<String>,
    instances: BTreeSet<&'r str>,
}

/// A case of the grid: processors, memory, bandwidth (as `key`s) and repetition.
type Case = (usize, i64, i64, usize);

fn case(r: &Row) -> Case {
    (r.processors, key(r.memory), key(r.bandwidth), r.repetition)
}

impl<'r> Table<'r> {
    fn new(rows: &'r [Row]) -> Self {
        let mut seen = BTreeSet::new();
        let algorithms = rows
            .iter()
            .filter(|r| seen.insert(r.algorithm.clone()))
            .map(|r| r.algorithm.clone())
            .collect();
        Table {
            rows,
            algorithms,
            instances: rows.iter().map(|r| r.instance.as_str()).collect(),
        }
    }

    fn colour_of(&self, a: &str) -> usize {
        self.algorithms.iter().position(|x| x == a).unwrap_or(0)
    }

    /// The rows of instance `inst`.
    fn of(&self, inst: &str) -> Vec<&'r Row> {
        self.rows.iter().filter(|r| r.instance == inst).collect()
    }

    /// Figure 6's panels for `inst` at bandwidth `bw` (a `key` of GB/s): period against
    /// memory, a panel per processor count, solid validated and dashed planned periods.
    fn period_panels(&self, inst: &str, bw: i64) -> Vec<Panel> {
        let sel: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.instance == inst && key(r.bandwidth / 1e9) == bw)
            .collect();
        let ps: BTreeSet<usize> = sel.iter().map(|r| r.processors).collect();
        let mut panels = Vec::new();
        for p in ps {
            let mut lines = Vec::new();
            for a in &self.algorithms {
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
                    lines.push(line(a.clone(), self.colour_of(a), false, solid));
                }
                if !dashed.is_empty() {
                    lines.push(line(
                        format!("{a} (planned)"),
                        self.colour_of(a),
                        true,
                        dashed,
                    ));
                }
            }
            panels.push(panel(
                format!("P = {p}"),
                "memory M (GiB)",
                "period (s)".into(),
                lines,
            ));
        }
        panels
    }

    /// Figure 7's panels: per instance, each algorithm's geometric mean ratio to
    /// `reference`'s period on the same case, against memory.
    fn ratio_panels(&self, reference: &str) -> Vec<Panel> {
        let mut panels = Vec::new();
        for inst in &self.instances {
            let mut by_case: BTreeMap<Case, f64> = BTreeMap::new();
            for r in self
                .rows
                .iter()
                .filter(|r| r.instance == *inst && r.algorithm == reference)
            {
                if let Some(t) = r.period {
                    by_case.insert(case(r), t);
                }
            }
            let mut lines = Vec::new();
            for a in self.algorithms.iter().filter(|a| a.as_str() != reference) {
                let series = geomean_by_memory(
                    self.rows
                        .iter()
                        .filter(|r| r.instance == *inst && &r.algorithm == a),
                    |r| by_case.get(&case(r)).copied(),
                );
                if !series.is_empty() {
                    lines.push(line(a.clone(), self.colour_of(a), false, series));
                }
            }
            panels.push(panel(
                inst.to_string(),
                "memory M (GiB)",
                format!("period / {reference}"),
                lines,
            ));
        }
        panels
    }

    /// The panels of `over-bound.svg` (not in the papers): per instance, each algorithm's
    /// geometric mean of validated period over the best proven lower bound of the case.
    fn over_bound_panels(&self) -> Vec<Panel> {
        let mut panels = Vec::new();
        for inst in &self.instances {
            let sel = self.of(inst);
            let mut bound: BTreeMap<Case, f64> = BTreeMap::new();
            for r in &sel {
                let mut b = r.sequential / r.processors as f64; // U(1,L) / P
                let global = bound_covers_every_plan(r);
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
            for a in &self.algorithms {
                let series =
                    geomean_by_memory(sel.iter().copied().filter(|r| &r.algorithm == a), |r| {
                        bound.get(&case(r)).copied().filter(|&b| b > 0.0)
                    });
                if !series.is_empty() {
                    lines.push(line(a.clone(), self.colour_of(a), false, series));
                }
            }
            panels.push(panel(
                inst.to_string(),
                "memory M (GiB)",
                "period / lower bound".into(),
                lines,
            ));
        }
        panels
    }

    /// Figure 8's panels for `inst`: speedup against P, a panel per memory limit.
    fn speedup_panels(&self, inst: &str) -> Vec<Panel> {
        let sel = self.of(inst);
        let mems: BTreeSet<i64> = sel.iter().map(|r| key(r.memory)).collect();
        let mut panels = Vec::new();
        for m in mems {
            let mut lines = Vec::new();
            for a in &self.algorithms {
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
                    lines.push(line(a.clone(), self.colour_of(a), false, series));
                }
            }
            panels.push(panel(
                format!("M = {:.1} GiB", m as f64 / 1e3 / GIB),
                "processors P",
                "speedup".into(),
                lines,
            ));
        }
        panels
    }
}

/// Writes every figure of a results table into `dir`; returns the files written.
pub fn write_figures(
    rows: &[Row],
    dir: &Path,
    reference: Option<&str>,
) -> Result<Vec<PathBuf>, crate::Error> {
    std::fs::create_dir_all(dir).map_err(|e| crate::Error::io(dir, e))?;
    let table = Table::new(rows);
    let mut out = FigureWriter::new(dir);

    // Figure 6: period against memory, per (instance, bandwidth), one panel per P.
    for inst in &table.instances {
        let bws: BTreeSet<i64> = table
            .of(inst)
            .iter()
            .map(|r| key(r.bandwidth / 1e9))
            .collect();
        for bw in bws {
            let gbps = bw as f64 / 1e3;
            out.write(
                &format!("periods-{}-{gbps}GBps.svg", safe(inst)),
                &format!("{inst}, beta = {gbps} GB/s: period (solid: validated, dashed: planned)"),
                &table.period_panels(inst, bw),
                &LAYOUT,
            )?;
        }
    }

    // Figure 7: geometric mean ratio to the reference, per instance, against memory.
    if let Some(reference) = reference.filter(|r| table.algorithms.iter().any(|a| a == r)) {
        out.write(
            &format!("ratio-to-{}.svg", safe(reference)),
            &format!("Geometric mean over P and beta of period / period of {reference}"),
            &table.ratio_panels(reference),
            &LAYOUT,
        )?;
    }

    // Not in the papers: validated period over the best proven lower bound, against memory.
    out.write(
        "over-bound.svg",
        "Geometric mean over P and beta of validated period / global lower bound of the case",
        &table.over_bound_panels(),
        &LAYOUT,
    )?;

    // Figure 8: speedup against P, per instance, one panel per memory.
    for inst in &table.instances {
        out.write(
            &format!("speedup-{}.svg", safe(inst)),
            &format!("{inst}: speedup U(1,L)/period (mean over bandwidths)"),
            &table.speedup_panels(inst),
            &Layout {
                integer_x: true,
                ..LAYOUT
            },
        )?;
    }
    Ok(out.written())
}
