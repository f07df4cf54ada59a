//! Pictures of plans (SVG through plotters).

pub mod gantt;
pub mod sync_gantt;
