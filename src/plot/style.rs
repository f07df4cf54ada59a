//! The one figure style of pipeopt: fonts, colours, and panels of line charts whose legends
//! sit outside the data area. `sweep::figures` (the memory sweeps) and `sweep::sync_figures`
//! (the synchronous sweeps) draw every chart through [`draw_panels`]; the Gantt drawings of
//! `plot::gantt` and `plot::sync_gantt` use the same fonts.
//!
//! Every line drawn has a legend entry drawn the way the line is (solid with its points, or
//! dashed), so no line style goes unexplained. A figure is written as SVG and as PNG (the
//! SVG rasterised by [`super::svg_to_png`]).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// The font family of every figure ("sans-serif": the rasteriser maps it to a family that
/// exists on the system, DejaVu Sans first).
pub const FAMILY: &str = "sans-serif";
/// Font size of a figure's title.
pub const TITLE: u32 = 17;
/// Font size of a panel's caption.
pub const CAPTION: u32 = 14;
/// Font size of tick labels, axis names and legend entries.
pub const LABEL: u32 = 12;
/// Font size of small text inside drawings (Gantt boxes, notes).
pub const SMALL: u32 = 11;

/// A font of the figure style at `size`.
pub fn font(size: u32) -> FontDesc<'static> {
    (FAMILY, size).into_font()
}

/// One row of a Gantt drawing before its boxes: its label at the left and a light frame
/// from `left` over `width` pixels, `row_h` high from `y` (`plot::gantt`, `plot::sync_gantt`).
pub fn draw_gantt_row<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    label: String,
    y: i32,
    (left, width, row_h): (i32, i32, i32),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    root.draw(&Text::new(
        label,
        (8, y + row_h / 2),
        TextStyle::from(font(LABEL)).pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    root.draw(&Rectangle::new(
        [(left, y), (left + width, y + row_h)],
        RGBColor(235, 235, 235).stroke_width(1),
    ))
}

/// `Line::colour` for black (an optimum, a reference).
pub const BLACK: usize = usize::MAX;

/// The line colours of every figure, cycling (index [`BLACK`] is black).
pub fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 15] = [
        RGBColor(200, 30, 30),
        RGBColor(30, 90, 200),
        RGBColor(30, 150, 60),
        RGBColor(150, 60, 170),
        RGBColor(230, 130, 20),
        RGBColor(20, 160, 170),
        RGBColor(120, 120, 120),
        RGBColor(170, 120, 40),
        RGBColor(210, 60, 140),
        RGBColor(100, 130, 20),
        RGBColor(0, 40, 120),
        RGBColor(120, 60, 0),
        RGBColor(0, 100, 90),
        RGBColor(190, 170, 0),
        RGBColor(80, 30, 100),
    ];
    if i == BLACK {
        RGBColor(0, 0, 0)
    } else {
        C[i % C.len()]
    }
}

/// A line of a panel.
#[derive(Clone, Debug)]
pub struct Line {
    /// Its legend entry.
    pub label: String,
    /// An index into [`colour`], or [`BLACK`].
    pub colour: usize,
    /// Dashed and thin (an estimate, a closed form, a limit), else solid with its points.
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// A panel: caption, x axis name, y axis name, lines.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x: String,
    pub y: String,
    pub lines: Vec<Line>,
}

/// Where the legend goes: always outside the data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    /// One legend for the whole figure, right of the panels: the entries of every panel,
    /// each label once (for panels that share their lines, e.g. one per processor count).
    Shared,
    /// A legend right of each panel, with that panel's entries.
    PerPanel,
}

/// How a figure is laid out.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// At most this many panels per row.
    pub columns: usize,
    /// Size of one panel's chart (pixels), its legend excluded.
    pub panel: (u32, u32),
    pub legend: Legend,
    /// The y axis starts at 0 (else a little below the smallest value).
    pub y_from_zero: bool,
    /// Tick labels on the x axis only at whole numbers (D, P).
    pub integer_x: bool,
}

/// A rough width (pixels) of `text` at `size`: legends are sized by it.
fn text_width(text: &str, size: u32) -> u32 {
    (text.chars().count() as f64 * size as f64 * 0.58).ceil() as u32
}

/// Height of one legend entry.
const ENTRY: i32 = 18;

/// Draws the legend `lines` into `area`, from its top: one entry per line, each drawn the
/// way its line is.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    lines: &[&Line],
    top: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (j, l) in lines.iter().enumerate() {
        let y = top + ENTRY * j as i32;
        let c = colour(l.colour);
        if l.dashed {
            for k in 0..3 {
                let x = 6 + 9 * k;
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 5, y)],
                    c.stroke_width(1),
                ))?;
            }
        } else {
            area.draw(&PathElement::new(vec![(6, y), (30, y)], c.stroke_width(2)))?;
            area.draw(&Circle::new((18, y), 3, c.filled()))?;
        }
        area.draw(&Text::new(
            l.label.clone(),
            (38, y - LABEL as i32 / 2),
            font(LABEL),
        ))?;
    }
    Ok(())
}

/// The entries of a legend: every line of `panels`, each (label, colour, style) once, in
/// colour order (solid before dashed), so a shared legend lists the series in the order
/// their colours were given.
fn entries<'a>(panels: impl Iterator<Item = &'a Panel>) -> Vec<&'a Line> {
    let mut seen = Vec::<&Line>::new();
    for l in panels.flat_map(|p| p.lines.iter()) {
        if !seen
            .iter()
            .any(|s| s.label == l.label && s.colour == l.colour && s.dashed == l.dashed)
        {
            seen.push(l);
        }
    }
    seen.sort_by_key(|l| (l.colour, l.dashed));
    seen
}

/// Draws one panel's chart into `area`.
fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Panel,
    layout: &Layout,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let pts: Vec<(f64, f64)> = p.lines.iter().flat_map(|l| l.points.clone()).collect();
    if pts.is_empty() {
        // Say so rather than leave a blank hole in the grid.
        let (w, h) = area.dim_in_pixel();
        let centre = plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        );
        area.draw(&Text::new(
            p.title.clone(),
            (w as i32 / 2, 18),
            font(CAPTION).into_text_style(area).pos(centre),
        ))?;
        area.draw(&Text::new(
            "no data (nothing valid to draw)".to_string(),
            (w as i32 / 2, h as i32 / 2),
            font(LABEL).color(&RGBColor(120, 120, 120)).pos(centre),
        ))?;
        return Ok(());
    }
    let (mut x0, mut x1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), q| (a.min(q.0), b.max(q.0)));
    let (y0, y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), q| (a.min(q.1), b.max(q.1)));
    if x1 <= x0 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    let pad = 0.04 * (x1 - x0);
    let (y0, y1) = if layout.y_from_zero {
        (0.0, if y1 <= 0.0 { 1.0 } else { y1 * 1.08 })
    } else {
        let y0 = (y0 * 0.9).min(0.0f64.max(y0 - 0.1 * (y1 - y0)));
        (y0, if y1 <= y0 { y0 + 1.0 } else { y1 * 1.05 })
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, font(CAPTION))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(62)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), y0..y1)?;
    let integer = |x: &f64| {
        if (x - x.round()).abs() < 1e-9 {
            format!("{x:.0}")
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(p.x.as_str())
        .y_desc(p.y.as_str())
        .label_style(font(LABEL))
        .axis_desc_style(font(LABEL))
        .light_line_style(RGBColor(242, 242, 242));
    if layout.integer_x {
        mesh.x_labels(12).x_label_formatter(&integer);
    }
    mesh.draw()?;
    for l in &p.lines {
        let c = colour(l.colour);
        if l.dashed {
            chart.draw_series(DashedLineSeries::new(
                l.points.iter().copied(),
                6,
                4,
                c.stroke_width(1),
            ))?;
        } else {
            chart.draw_series(LineSeries::new(l.points.iter().copied(), c.stroke_width(2)))?;
            chart.draw_series(l.points.iter().map(|&q| Circle::new(q, 3, c.filled())))?;
        }
    }
    Ok(())
}

/// Draws `panels` under `title` with `layout` into `path` (SVG) and beside it as PNG.
pub fn draw_panels(
    path: &Path,
    title: &str,
    panels: &[Panel],
    layout: &Layout,
) -> Result<(), crate::Error> {
    let fail =
        |e: String| crate::Error::internal(format!("{}: drawing failed: {e}", path.display()));
    let cols = panels.len().clamp(1, layout.columns.max(1));
    let rows = panels.len().div_ceil(cols).max(1);
    let (pw, ph) = layout.panel;
    let legend_width = |lines: &[&Line]| {
        lines
            .iter()
            .map(|l| 48 + text_width(&l.label, LABEL))
            .max()
            .unwrap_or(0)
    };
    let shared = entries(panels.iter());
    let lw = legend_width(&shared);
    let head = 44;
    let (w, h) = match layout.legend {
        Legend::Shared => (
            pw * cols as u32 + lw,
            (ph * rows as u32).max(ENTRY as u32 * (shared.len() as u32 + 2)) + head,
        ),
        Legend::PerPanel => ((pw + lw) * cols as u32, ph * rows as u32 + head),
    };
    let w = w.max(text_width(title, TITLE) + 20);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let (top, body) = root.split_vertically(head);
        top.draw(&Text::new(title.to_string(), (10, 14), font(TITLE)))
            .map_err(|e| fail(e.to_string()))?;
        match layout.legend {
            Legend::Shared => {
                let (grid, legend) = body.split_horizontally(pw * cols as u32);
                let (grid, _) = grid.split_vertically(ph * rows as u32);
                draw_legend(&legend, &shared, 30).map_err(|e| fail(e.to_string()))?;
                for (area, p) in grid.split_evenly((rows, cols)).iter().zip(panels) {
                    draw_chart(area, p, layout).map_err(|e| fail(e.to_string()))?;
                }
            }
            Legend::PerPanel => {
                for (cell, p) in body.split_evenly((rows, cols)).iter().zip(panels) {
                    let (area, legend) = cell.split_horizontally(pw);
                    let own: Vec<&Line> = p.lines.iter().collect();
                    draw_legend(&legend, &own, 44).map_err(|e| fail(e.to_string()))?;
                    draw_chart(&area, p, layout).map_err(|e| fail(e.to_string()))?;
                }
            }
        }
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    crate::error::write_atomic(path, svg.as_bytes())?;
    super::write_png(&path.with_extension("png"), &svg)
}

/// The figures of one directory, drawn in turn: each written as SVG and PNG by
/// [`draw_panels`], the SVGs' paths kept in order for the caller's report.
pub struct FigureWriter<'a> {
    dir: &'a Path,
    written: Vec<PathBuf>,
}

impl<'a> FigureWriter<'a> {
    pub fn new(dir: &'a Path) -> Self {
        FigureWriter {
            dir,
            written: Vec::new(),
        }
    }

    /// Draws `panels` under `title` with `layout` as `file` in the directory.
    pub fn write(
        &mut self,
        file: &str,
        title: &str,
        panels: &[Panel],
        layout: &Layout,
    ) -> Result<(), crate::Error> {
        let path = self.dir.join(file);
        draw_panels(&path, title, panels, layout)?;
        self.written.push(path);
        Ok(())
    }

    /// The SVG files written, in order.
    pub fn written(self) -> Vec<PathBuf> {
        self.written
    }
}
