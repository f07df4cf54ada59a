//! Pictures of plans (SVG through plotters), the figure style every chart shares (`style`),
//! and the rasteriser every figure and drawing shares.

pub mod gantt;
pub mod style;
pub mod sync_gantt;

/// The system's fonts, loaded once, with "sans-serif" mapped to a family that exists.
fn fonts() -> std::sync::Arc<resvg::usvg::fontdb::Database> {
    static DB: std::sync::OnceLock<std::sync::Arc<resvg::usvg::fontdb::Database>> =
        std::sync::OnceLock::new();
    DB.get_or_init(|| {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        let families: Vec<String> = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
            .collect();
        let pick = ["DejaVu Sans", "Liberation Sans", "Arial", "Noto Sans"]
            .iter()
            .find(|want| families.iter().any(|f| f == *want))
            .map(|s| s.to_string())
            .or_else(|| families.first().cloned());
        if let Some(family) = pick {
            db.set_sans_serif_family(family);
        }
        std::sync::Arc::new(db)
    })
    .clone()
}

/// Writes a drawing at `path`, atomically: rasterised to PNG when the path ends in `.png`,
/// the SVG itself otherwise.
pub fn write_drawing(path: &std::path::Path, svg: &str) -> Result<(), crate::Error> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        return write_png(path, svg);
    }
    crate::error::write_atomic(path, svg.as_bytes())
}

/// Writes `svg` rasterised to PNG at `path` (atomically); a failure names the file.
pub fn write_png(path: &std::path::Path, svg: &str) -> Result<(), crate::Error> {
    let png = svg_to_png(svg).map_err(|e| {
        crate::Error::internal(format!("{}: rasterising failed: {e}", path.display()))
    })?;
    crate::error::write_atomic(path, &png)
}

/// Rasterises an SVG document to PNG at twice its nominal size.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let options = usvg::Options {
        fontdb: fonts(),
        ..Default::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width() * 2, size.height() * 2).ok_or("empty picture")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(2.0, 2.0),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| e.to_string())
}
