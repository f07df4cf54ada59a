//! Figures of a `sync-sweep` (after Zhang et al., DAC 2023, section IV), SVG through
//! plotters and PNG through resvg, as `sweep::figures` draws its own:
//!
//! - `bubble-ratio.svg`: per instance, the simulated bubble ratio against D at N = D (study
//!   `weak`, no recomputation), one colour per schedule, solid; the papers' closed forms
//!   dashed in the same colour (Table I for Chimera and GEMS, eq. (1) for MixPipe,
//!   (D-1)/(N+D-1) for GPipe and DAPPLE).
//! - `bubble-ratio-optimum.svg` (when the experiment computes the optimum): the same
//!   simulated bubble ratios (study `weak`, N = D, no recomputation) with the exact optimum
//!   of each placement drawn in black and grey (`milp::sync_schedule`, no memory limit; the
//!   interleaved and V placements' dashed, in the colour of their schedule): the
//!   smallest bubble ratio any order of the operations reaches there, or the MILP's bound
//!   on it where the time limit left it unproven (the legend names those D).
//! - `optimum-under-budget.svg` (when the experiment computes the optimum under its memory
//!   budgets, `[optimum] under_budgets`): per instance and budget, the fastest schedule of
//!   each placement that fits the budget over the optimum under it, against N, one line per
//!   placement and D (an upper bound on the ratio where the optimum is only bounded).
//! - `memory.svg` (its Figure 7): per instance and micro-batch count of `memory_figure`,
//!   each worker's peak memory (GiB) against its index, one line per schedule; the memory
//!   budgets dashed.
//! - `throughput-weak.svg` (its Figures 8 and 9): per instance, each approach's best fitting
//!   throughput (samples per second per GPU) against D with S = samples_per_stage x D.
//! - `throughput-large.svg` (its Figure 10): the same against the mini-batch W x S.

use std::path::{Path, PathBuf};

use super::sync::{BestRow, OptimumRow, RawMemoryFigure, SyncExperiment, SyncRow};
use crate::plot::style::{FigureWriter, Layout, Legend, Line, Panel, BLACK};
use crate::schedule::sync::breadth_first::BREADTH_FIRST_2;
use crate::schedule::sync::dual_pipe_v::DUAL_PIPE_V;
use crate::schedule::sync::interleaved::{INTERLEAVED_2, INTERLEAVED_4};
use crate::schedule::sync::zero_bubble::ZB_V;
use crate::schedule::sync::{registry, OptimumTarget, Placement};

const GIB: f64 = 1073741824.0;

/// `Line::colour` for black (the optimum).
pub const BLACK_LINE: usize = BLACK;

/// The layout of every figure: two panels a row, each with its own legend right of it
/// (panels differ in their lines: the optimum's label names the D it could not prove).
const LAYOUT: Layout = Layout {
    columns: 2,
    panel: (450, 400),
    legend: Legend::PerPanel,
    y_from_zero: true,
    integer_x: true,
};

/// K = D/2 rounded down to an even number (at least 2).
fn half(d: usize) -> usize {
    ((d / 2) & !1).max(2)
}

/// The schedules the bubble and memory figures draw, each with its label, its line colour
/// and its name at D stages.
#[allow(clippy::type_complexity)]
fn series() -> Vec<(&'static str, usize, fn(usize) -> String)> {
    vec![
        ("GPipe", 0, |_| "gpipe".into()),
        ("DAPPLE", 1, |_| "dapple".into()),
        ("GEMS", 2, |_| "gems".into()),
        ("Chimera", 3, |_| "chimera".into()),
        ("MixPipe K=D/2, Γ=0", 4, |d| {
            format!("mixpipe(K={},Gamma=0)", half(d))
        }),
        (MIXPIPE_K2, 5, |_| "mixpipe(K=2,Gamma=0)".into()),
        // Colours 6 and 7 are the one-direction optima's.
        ("ZB-H1", 8, |_| "zb-h1".into()),
        ("ZB-H2", 9, |_| "zb-h2".into()),
        // Several stages per GPU; their placements' optima are drawn dashed in their colour.
        (INTERLEAVED_2.label, INTERLEAVED_2_COLOUR, |_| {
            INTERLEAVED_2.name.into()
        }),
        (INTERLEAVED_4.label, INTERLEAVED_4_COLOUR, |_| {
            INTERLEAVED_4.name.into()
        }),
        (ZB_V.label, ZB_V_COLOUR, |_| ZB_V.name.into()),
        (BREADTH_FIRST_2.label, 13, |_| BREADTH_FIRST_2.name.into()),
        (DUAL_PIPE_V.label, 14, |_| DUAL_PIPE_V.name.into()),
    ]
}

const INTERLEAVED_2_COLOUR: usize = 10;
const INTERLEAVED_4_COLOUR: usize = 11;
const ZB_V_COLOUR: usize = 12;

/// MixPipe at K = 2, drawn only where it is not K = D/2.
const MIXPIPE_K2: &str = "MixPipe K=2, Γ=0";

fn instances(rows: &[SyncRow]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| r.instance.clone()).collect();
    v.sort();
    v.dedup();
    v
}

/// An approach's name in figures (its descriptor's label).
fn label(approach: &str) -> &str {
    registry::approach(approach).map_or(approach, |s| s.label)
}

/// The panels of `bubble-ratio-optimum.svg`: per instance, the schedules of `series` at
/// N = D (study `weak`, no recomputation) and the optimum of each placement at the same B.
fn optimum_panels(rows: &[SyncRow], optimum: &[OptimumRow], insts: &[String]) -> Vec<Panel> {
    let mut panels = Vec::new();
    for inst in insts {
        let chosen: Vec<&SyncRow> = rows
            .iter()
            .filter(|r| {
                &r.instance == inst
                    && r.study == "weak"
                    && !r.recompute
                    && r.micro_batches == r.stages
            })
            .collect();
        let mut lines = Vec::new();
        for (lab, i, name_of) in series() {
            let mut pts: Vec<(f64, f64)> = chosen
                .iter()
                .filter(|r| r.schedule == name_of(r.stages))
                .map(|r| (r.stages as f64, r.bubble_ratio))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts.dedup_by(|a, b| a.0 == b.0);
            if !pts.is_empty() {
                lines.push(Line {
                    label: format!("{lab} (simulated)"),
                    colour: i,
                    dashed: false,
                    points: pts,
                });
            }
        }
        let target = |placement, split_backward| {
            OptimumTarget {
                placement,
                split_backward,
            }
            .name()
        };
        // The optima of the placements with several stages per worker are dashed, in the
        // colour of their schedule.
        for (placement, colour, dashed, label) in [
            (
                target(Placement::Bidirectional, false),
                BLACK_LINE,
                false,
                "Optimum, bidirectional",
            ),
            (
                target(Placement::OneDirection, false),
                6,
                false,
                "Optimum, one direction",
            ),
            (
                target(Placement::OneDirection, true),
                7,
                false,
                "Optimum, one direction, split backward",
            ),
            (
                target(Placement::Interleaved2, false),
                INTERLEAVED_2_COLOUR,
                true,
                "Optimum, interleaved (v = 2)",
            ),
            (
                target(Placement::Interleaved4, false),
                INTERLEAVED_4_COLOUR,
                true,
                "Optimum, interleaved (v = 4)",
            ),
            (
                target(Placement::VShape, true),
                ZB_V_COLOUR,
                true,
                "Optimum, V, split backward",
            ),
        ] {
            let mut pts: Vec<(f64, f64, bool)> = optimum
                .iter()
                .filter(|o| {
                    &o.instance == inst
                        && o.placement == placement
                        && o.memory_budget.is_none()
                        && !o.recompute
                        && o.micro_batches == o.stages
                        && chosen.iter().any(|r| {
                            r.stages == o.stages && r.micro_batch_size == o.micro_batch_size
                        })
                })
                .filter_map(|o| {
                    o.optimum_bubble_ratio
                        .map(|y| (o.stages as f64, y, o.status == "optimal"))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts.dedup_by(|a, b| a.0 == b.0);
            if pts.is_empty() {
                continue;
            }
            let unproven = unproven_at(&pts);
            let label = if unproven.is_empty() {
                format!("{label} (MILP)")
            } else {
                format!("{label} (bound at D = {unproven})")
            };
            lines.push(Line {
                label,
                colour,
                dashed,
                points: pts.iter().map(|p| (p.0, p.1)).collect(),
            });
        }
        panels.push(Panel {
            title: format!("{inst}: N = D, no recomputation, no memory limit on the optimum"),
            x: "pipeline depth D (stages = GPUs per pipeline)".into(),
            y: "bubble ratio (idle / (D x iteration time))".into(),
            lines,
        });
    }
    panels
}

/// The x of the points `(x, y, proven)` whose optimum is only bounded, comma-separated
/// (empty when every one is proven), for a line's label.
fn unproven_at(pts: &[(f64, f64, bool)]) -> String {
    let xs: Vec<String> = pts
        .iter()
        .filter(|p| !p.2)
        .map(|p| format!("{}", p.0))
        .collect();
    xs.join(", ")
}

/// The panels of `optimum-under-budget.svg`: per instance and memory budget, each
/// placement's fastest fitting schedule over its optimum under the budget, against N (no
/// recomputation), one line per placement and D.
fn under_budget_panels(optimum: &[OptimumRow], insts: &[String]) -> Vec<Panel> {
    let mut budgets: Vec<f64> = optimum.iter().filter_map(|o| o.memory_budget).collect();
    budgets.sort_by(f64::total_cmp);
    budgets.dedup();
    let mut panels = Vec::new();
    for inst in insts {
        for &budget in &budgets {
            let here: Vec<&OptimumRow> = optimum
                .iter()
                .filter(|o| &o.instance == inst && o.memory_budget == Some(budget) && !o.recompute)
                .collect();
            let mut keys: Vec<(String, usize)> = here
                .iter()
                .map(|o| (o.placement.clone(), o.stages))
                .collect();
            keys.sort();
            keys.dedup();
            let mut lines = Vec::new();
            for (i, (placement, d)) in keys.iter().enumerate() {
                let mut pts: Vec<(f64, f64, bool)> = here
                    .iter()
                    .filter(|o| &o.placement == placement && o.stages == *d)
                    .filter_map(|o| {
                        let ratio = o.fastest_ratio_to_optimum?;
                        Some((o.micro_batches as f64, ratio, o.status == "optimal"))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let unproven = unproven_at(&pts);
                let bound = if unproven.is_empty() {
                    String::new()
                } else {
                    format!(", bound at N = {unproven}")
                };
                lines.push(Line {
                    label: format!("{placement}, D = {d}{bound}"),
                    colour: i,
                    dashed: false,
                    points: pts.iter().map(|p| (p.0, p.1)).collect(),
                });
            }
            if lines.is_empty() {
                continue;
            }
            panels.push(Panel {
                title: format!("{inst}: {:.0} GiB per GPU", budget / GIB),
                x: "micro-batches N".into(),
                y: "fastest fitting schedule / optimum under the budget".into(),
                lines,
            });
        }
    }
    panels
}

/// Writes the figures into `dir`; returns the files written.
pub fn write_figures(
    exp: &SyncExperiment,
    rows: &[SyncRow],
    best: &[BestRow],
    optimum: &[OptimumRow],
    dir: &Path,
) -> Result<Vec<PathBuf>, crate::Error> {
    let mut out = FigureWriter::new(dir);
    let insts = instances(rows);
    if !optimum.is_empty() {
        out.write(
            "bubble-ratio-optimum.svg",
            "Bubble ratio at N = D: each schedule (simulated) against the exact optimum of its placement (MILP)",
            &optimum_panels(rows, optimum, &insts),
            &LAYOUT,
        )?;
    }
    let budget_panels = under_budget_panels(optimum, &insts);
    if !budget_panels.is_empty() {
        out.write(
            "optimum-under-budget.svg",
            "The fastest schedule that fits each memory budget, over the optimum under that budget (MILP)",
            &budget_panels,
            &Layout {
                y_from_zero: false,
                ..LAYOUT
            },
        )?;
    }
    out.write(
        "bubble-ratio.svg",
        "Bubble ratio: simulated on the instances vs the papers' closed forms (dashed)",
        &bubble_panels(rows, &insts),
        &LAYOUT,
    )?;
    if let Some(mf) = &exp.memory_figure {
        out.write(
            "memory.svg",
            "Per-worker peak memory, no recomputation (MixPipe, DAC 2023, Figure 7)",
            &memory_panels(exp, mf, rows, &insts),
            &LAYOUT,
        )?;
    }

    // Throughput: best fitting run per approach.
    let budget = exp.memory.first().copied().unwrap_or(f64::INFINITY);
    let mut studies: Vec<String> = best.iter().map(|r| r.study.clone()).collect();
    studies.sort();
    studies.dedup();
    for study in &studies {
        let study = study.as_str();
        let what = match study {
            "weak" => "Weak scaling, any N (MixPipe, DAC 2023, Figures 8, 9)".to_string(),
            "weak-nd" => "Weak scaling with N = D (MixPipe, DAC 2023, Figures 8, 9)".to_string(),
            "large" => "Large mini-batches (MixPipe, DAC 2023, Figure 10)".to_string(),
            other => format!("Study {other}"),
        };
        let panels = throughput_panels(exp, best, &insts, study, budget);
        if panels.is_empty() {
            continue;
        }
        out.write(
            &format!("throughput-{study}.svg"),
            &format!(
                "{what}: best throughput under {:.0} GiB per GPU",
                budget / GIB
            ),
            &panels,
            &LAYOUT,
        )?;
    }
    Ok(out.written())
}

/// The panels of `bubble-ratio.svg`: per instance, the bubble ratio against D at N = D
/// (no recomputation) of each schedule of `series`, simulated (solid) and by the papers'
/// closed forms (dashed).
fn bubble_panels(rows: &[SyncRow], insts: &[String]) -> Vec<Panel> {
    let mut panels = Vec::new();
    for inst in insts {
        let at = |name_of: &dyn Fn(usize) -> Option<String>| {
            let mut pts: Vec<(f64, f64, Option<f64>)> = rows
                .iter()
                .filter(|r| {
                    &r.instance == inst
                        && !r.recompute
                        && r.micro_batches == r.stages
                        && name_of(r.stages).as_deref() == Some(r.schedule.as_str())
                })
                .map(|r| (r.stages as f64, r.bubble_ratio, r.paper_bubble_ratio))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            // Several studies may hold the same (D, N = D) run: one point per D.
            pts.dedup_by(|a, b| a.0 == b.0);
            pts
        };
        let mut lines = Vec::new();
        for (lab, i, name_of) in series() {
            let pts = at(&|d| Some(name_of(d)));
            if pts.is_empty() {
                continue;
            }
            lines.push(Line {
                label: format!("{lab} (simulated)"),
                colour: i,
                dashed: false,
                points: pts.iter().map(|p| (p.0, p.1)).collect(),
            });
            let paper: Vec<(f64, f64)> = pts.iter().filter_map(|p| p.2.map(|y| (p.0, y))).collect();
            // GPipe's and DAPPLE's closed forms are the same line: drawn once.
            if !paper.is_empty() && lab != "DAPPLE" {
                lines.push(Line {
                    label: format!("{lab} (paper's closed form)"),
                    colour: i,
                    dashed: true,
                    points: paper,
                });
            }
        }
        panels.push(Panel {
            title: format!("{inst}: N = D, no recomputation"),
            x: "pipeline depth D (stages = GPUs per pipeline)".into(),
            y: "bubble ratio (idle / (D x iteration time))".into(),
            lines,
        });
    }
    panels
}

/// The panels of `memory.svg` (MixPipe's Figure 7): per instance and micro-batch count of
/// `mf`, each worker's peak memory under each schedule of `series`, the budgets dashed.
fn memory_panels(
    exp: &SyncExperiment,
    mf: &RawMemoryFigure,
    rows: &[SyncRow],
    insts: &[String],
) -> Vec<Panel> {
    let d = mf.stages;
    let mut panels = Vec::new();
    for inst in insts {
        for &n in &mf.micro_batches {
            let mut lines = Vec::new();
            let mut b = None;
            for (lab, i, name_of) in series() {
                let name = name_of(d);
                if lab == MIXPIPE_K2 && half(d) == 2 {
                    continue;
                }
                let Some(r) = rows.iter().find(|r| {
                    &r.instance == inst
                        && r.study == "weak"
                        && !r.recompute
                        && r.stages == d
                        && r.micro_batches == n
                        && r.schedule == name
                }) else {
                    continue;
                };
                b = Some(r.micro_batch_size);
                lines.push(Line {
                    label: lab.to_string(),
                    colour: i,
                    dashed: false,
                    points: r
                        .peak_memory
                        .iter()
                        .enumerate()
                        .map(|(w, m)| (w as f64, m / GIB))
                        .collect(),
                });
            }
            if lines.is_empty() {
                continue;
            }
            for (j, &m) in exp.memory.iter().enumerate() {
                lines.push(Line {
                    label: format!("budget {:.0} GiB", m / GIB),
                    colour: 6 + j,
                    dashed: true,
                    points: vec![(0.0, m / GIB), ((d - 1) as f64, m / GIB)],
                });
            }
            panels.push(Panel {
                title: format!(
                    "{inst}: D = {d}, N = {n}, B = {}",
                    b.map(|b| b.to_string()).unwrap_or_default()
                ),
                x: "worker (GPU index in the pipeline)".into(),
                y: "peak memory (GiB)".into(),
                lines,
            });
        }
    }
    panels
}

/// The panels of `throughput-<study>.svg`: per instance, each approach's best fitting
/// throughput under `budget` against D when the study varies D, else against the
/// mini-batch.
fn throughput_panels(
    exp: &SyncExperiment,
    best: &[BestRow],
    insts: &[String],
    study: &str,
    budget: f64,
) -> Vec<Panel> {
    let mut panels = Vec::new();
    for inst in insts {
        let mut lines = Vec::new();
        let mut ds: Vec<usize> = best
            .iter()
            .filter(|r| &r.instance == inst && r.study == study)
            .map(|r| r.stages)
            .collect();
        ds.sort();
        ds.dedup();
        // Against D when the study varies D (weak scaling), else against the mini-batch.
        let by_depth = ds.len() > 1;
        let xlab = if by_depth {
            "pipeline depth D (GPUs per pipeline)"
        } else {
            "mini-batch W x S (samples per iteration over the cluster)"
        };
        for (i, approach) in exp.schedules.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> = best
                .iter()
                .filter(|r| {
                    &r.instance == inst
                        && r.study == study
                        && &r.approach == approach
                        && r.memory_budget == budget
                })
                .filter_map(|r| {
                    let x = if by_depth {
                        r.stages as f64
                    } else {
                        r.mini_batch.unwrap_or(r.samples) as f64
                    };
                    r.samples_per_second_per_gpu.map(|y| (x, y))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if pts.is_empty() {
                continue;
            }
            lines.push(Line {
                label: label(approach).to_string(),
                colour: i,
                dashed: false,
                points: pts,
            });
        }
        if lines.is_empty() {
            continue;
        }
        let title = if !by_depth {
            format!(
                "{inst}: D = {}, best fitting config per point",
                ds.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        } else {
            format!("{inst}: best fitting config per point")
        };
        panels.push(Panel {
            title,
            x: xlab.into(),
            y: "throughput (samples/s per GPU)".into(),
            lines,
        });
    }
    panels
}
