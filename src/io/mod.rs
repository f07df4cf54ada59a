//! Importers of third-party profiles into pipeopt instances (docs/model.md section 1).
//!
//! [`pipedream`] reads PipeDream's `graph.txt` profiles and linearizes their DAG into a chain.

pub mod pipedream;

pub use pipedream::{
    import_pipedream, import_pipedream_with, import_summary, linearize, linearize_detailed,
    linearize_graph, read_graph, Graph, GraphNode, Linearization, NodeMemory,
};
