//! One row of a results table (`Row`), the same in the journal (a JSON line per job), in
//! the Parquet and CSV tables (a column per field, in this order: `sweep::table` converts
//! through serde) and in the figures; and the case columns every row gets from the rows of
//! its case and of the cases that dominate it.

use serde::{Deserialize, Serialize};

use crate::model::{PlanReport, Status};

/// One row of the results table: docs/model.md section 9's fields plus the context of the
/// run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub key: String,
    pub experiment: String,
    pub instance: String,
    pub processors: usize,
    pub memory: f64,
    pub bandwidth: f64,
    /// The algorithm's label in this experiment.
    pub algorithm: String,
    /// The registry name it ran under.
    pub algorithm_name: String,
    pub repetition: usize,
    pub status: Status,
    pub period: Option<f64>,
    pub planned_period: Option<f64>,
    pub lower_bound: Option<f64>,
    /// U(1, L) / period.
    pub speedup: Option<f64>,
    /// U(1, L): the sequential time of one batch.
    pub sequential: f64,
    pub peak_memory: Vec<f64>,
    pub peak_memory_max: Option<f64>,
    pub stages: usize,
    /// The kind of placement of the plan the algorithm returned (`stages` or
    /// `bipartition`; Bi-Partition returns PipeDream's straight pipeline, `stages`, when
    /// that one is faster than its own), or none without a plan (and in rows written
    /// before the column).
    #[serde(default)]
    pub placement: Option<String>,
    pub solve_seconds: Option<f64>,
    /// Wall-clock seconds of the whole job (loading, planning, judging).
    pub wall_seconds: f64,
    /// MILP solver status, gap and node count, when the algorithm used one.
    pub solver_status: Option<String>,
    pub solver_gap: Option<f64>,
    pub nodes: Option<f64>,
    /// A lower bound valid for every plan of the case (any allocation, any pattern): the
    /// largest that any row of the case, or of a case that dominates it, proved (`best`),
    /// filled in for every row when tables are written ([`fill_case_columns`]).
    #[serde(default)]
    pub global_lower_bound: Option<f64>,
    /// `period / global_lower_bound - 1` (filled in with the case's bound).
    #[serde(default)]
    pub gap: Option<f64>,
    /// Proven that no plan of any allocation fits the case (filled in for the case).
    #[serde(default)]
    pub case_infeasible: bool,
    /// Notes and errors, joined.
    pub message: String,
    pub instance_path: String,
    pub instance_hash: String,
    pub config_hash: String,
    pub git_revision: String,
}

impl Row {
    /// Records what the algorithm reported: status, periods, bounds, memory, stages,
    /// placement, solver figures and messages. `sequential` (U(1, L)) must be set first:
    /// the speedup is computed from it.
    pub fn record(&mut self, report: PlanReport) {
        self.status = report.status;
        self.period = report.period;
        self.planned_period = report.planned_period;
        self.lower_bound = report.lower_bound;
        self.speedup = report.period.map(|t| self.sequential / t);
        self.peak_memory_max = report.peak_memory.iter().cloned().reduce(f64::max);
        self.peak_memory = report.peak_memory;
        self.stages = report.stages.len();
        self.placement = report.placement.map(|k| k.name().to_string());
        self.solve_seconds = report.solve_seconds;
        if let Some(solver) = &report.solver {
            self.solver_status = Some(solver.status.clone());
            self.solver_gap = solver.gap;
            self.nodes = solver.nodes.map(|n| n as f64);
        }
        self.global_lower_bound = report.global_lower_bound;
        self.case_infeasible = report.case_infeasible;
        self.gap = report.gap;
        self.message = report.messages.join("; ");
        if report.status == Status::Error && self.message.is_empty() {
            self.message = "the algorithm failed".into();
        }
    }

    /// A row from one JSON object of a journal line or a table row. Journals and tables
    /// written before the global bound named the solver's gap `gap` (and, for a while, the
    /// gap to the global bound `gap_to_global_bound`); a record without `solver_gap` is
    /// read in those names.
    pub fn from_json(mut value: serde_json::Value) -> Result<Row, serde_json::Error> {
        if let Some(object) = value.as_object_mut() {
            if !object.contains_key("solver_gap") {
                let solver_gap = object.remove("gap").unwrap_or(serde_json::Value::Null);
                object.insert("solver_gap".into(), solver_gap);
                if let Some(gap) = object.remove("gap_to_global_bound") {
                    object.insert("gap".into(), gap);
                }
            }
        }
        serde_json::from_value(value)
    }
}

/// Gives every row the strongest global lower bound and infeasibility proof that any row of
/// its case holds, or of any case that dominates it, and its gap to that bound.
///
/// A case is (instance, processors, memory, bandwidth). A case with at least as many
/// processors, as much memory and as much bandwidth *dominates* it: every plan of the
/// smaller case is a plan of the larger one (the extra processors idle; the memory rule
/// does not depend on transfer times, and shorter transfers keep every dependency and
/// leave each link's busy intervals disjoint), so the larger case's optimum is at most the
/// smaller one's. A lower bound proven for the larger case therefore holds for the smaller
/// one, and a proof that nothing fits the larger case proves it of the smaller one.
pub fn fill_case_columns(rows: &mut [Row]) {
    use std::collections::HashMap;
    type Case = (String, usize, u64, u64);
    let case = |r: &Row| -> Case {
        (
            r.instance_hash.clone(),
            r.processors,
            r.memory.to_bits(),
            r.bandwidth.to_bits(),
        )
    };
    // What the rows of each case proved themselves.
    let mut own: HashMap<Case, (Option<f64>, bool)> = HashMap::new();
    for r in rows.iter() {
        let e = own.entry(case(r)).or_insert((None, false));
        if let Some(b) = r.global_lower_bound.filter(|b| b.is_finite()) {
            e.0 = Some(e.0.map_or(b, |x: f64| x.max(b)));
        }
        e.1 |= r.case_infeasible;
    }
    let dominates = |big: &Case, small: &Case| {
        big.0 == small.0
            && big.1 >= small.1
            && f64::from_bits(big.2) >= f64::from_bits(small.2)
            && f64::from_bits(big.3) >= f64::from_bits(small.3)
    };
    let filled: HashMap<Case, (Option<f64>, bool)> = own
        .keys()
        .map(|small| {
            let mut bound: Option<f64> = None;
            let mut infeasible = false;
            for &(b, inf) in own
                .iter()
                .filter(|(big, _)| dominates(big, small))
                .map(|(_, v)| v)
            {
                if let Some(b) = b {
                    bound = Some(bound.map_or(b, |x| x.max(b)));
                }
                infeasible |= inf;
            }
            (small.clone(), (bound, infeasible))
        })
        .collect();
    for r in rows.iter_mut() {
        let (bound, infeasible) = filled[&case(r)];
        r.global_lower_bound = bound;
        r.case_infeasible = infeasible;
        r.gap = match (r.period, bound) {
            (Some(t), Some(b)) if b > 0.0 => Some(t / b - 1.0),
            _ => None,
        };
    }
}
