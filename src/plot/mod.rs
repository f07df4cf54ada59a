//! Pictures of plans (SVG through plotters).

pub mod gantt;
