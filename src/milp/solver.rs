//! HiGHS plumbing shared by the MILPs: a small model builder, typed options, and the
//! solver's answer as values (status, incumbent, objective, dual bound, gap, node count).
//!
//! We talk to HiGHS through the `highs` crate directly (its `RowProblem`), not through
//! `good_lp`: good_lp's solution gives variable values only, while the bound, gap and node
//! count are needed here. good_lp could still build the
//! formulations (its `HighsProblem::into_inner()` hands the unsolved model to `highs`);
//! that port, which would make the formulations backend-agnostic, is not done yet. This
//! module is the only place that names HiGHS. HiGHS is kept silent (`output_flag` off):
//! nothing is written to stdout. One thread by default.
//!
//! # Infeasibility is confirmed
//! Every proof in pipeopt that no pattern exists at a period (the bound's relaxation, its
//! focused checks, `best`'s exact checks, the scheduling search's lower bounds) is a HiGHS
//! answer "infeasible". HiGHS does not always get it right:
//! - its MIP presolve is known to declare some feasible models infeasible (its tracker has
//!   a run of such reports, some still open for 1.15); it did so here on a focused check of
//!   ResNet-101 (3 processors, 12 GiB, 24 GB/s) at periods where the whole assignment has a
//!   judged pattern;
//! - without presolve, at the tight feasibility tolerances set here (1e-9), it declared the
//!   focused check of one processor of ResNet-50's block chain (layers 2-9 of 18, 4
//!   processors, 16 GiB, 12 GB/s) infeasible at one period, 0.0714981 s, and only there: a
//!   hundred-thousandth shorter or longer, at 1e-10 or at 1e-8, the same model has a
//!   solution, and the whole assignment has a judged plan at 0.0682 s.
//!
//! Either made the global bound wrong (above a judged plan). So an "infeasible" is asked
//! again, on the same model, within what is left of the time limit, with presolve off and
//! tighter feasibility tolerances (`CONFIRMING_TOLERANCE`, 1e-10), and only that answer
//! counts: infeasible again, a solution (then reported as found), or undecided at the
//! limit. Tighter, not looser: a model whose optimum lies exactly at the period (a search
//! that probes its lower bound) is infeasible at 1e-9 once the margins of `pattern_milp`
//! inflate its durations, and a looser solve would find a solution that the exact judge
//! rejects; a solution at 1e-10 passes wherever one at 1e-9 does. Feasible answers need no
//! second look: every solution is judged by its caller. A proof thus costs two solves. The
//! dual bound of an optimisation model is HiGHS's own and not confirmed (only the
//! synchronous-schedule MILP reports one).

use crate::Error;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use highs::{HighsModelStatus, HighsSolutionStatus, RowProblem, Sense};

/// HiGHS's feasibility tolerances (MIP and primal) for every solve: tight, since callers
/// scale their models to O(1) numbers and add margins larger than these, so that rounded
/// solutions pass the exact judge.
const FEASIBILITY_TOLERANCE: f64 = 1e-9;

/// The feasibility tolerances of the solve that confirms an "infeasible" (module docs,
/// "Infeasibility is confirmed"): tighter than [`FEASIBILITY_TOLERANCE`].
const CONFIRMING_TOLERANCE: f64 = 1e-10;

/// The HiGHS options those tolerances set.
const FEASIBILITY_TOLERANCES: [&str; 2] =
    ["mip_feasibility_tolerance", "primal_feasibility_tolerance"];

/// Options of one solve (or of a sequence of solves: see each caller).
#[derive(Debug, Clone, PartialEq)]
pub struct MilpOptions {
    /// Wall-clock limit; `None` for none.
    pub time_limit: Option<Duration>,
    /// HiGHS threads (1 by default: reproducible, and cheap on shared machines).
    pub threads: NonZeroU32,
    /// Relative MIP gap at which HiGHS stops (set explicitly; HiGHS's default is 1e-4).
    pub mip_rel_gap: f64,
    /// Branch-and-bound node limit per solve (reproducible cut-offs, unlike time limits).
    pub node_limit: Option<u64>,
    /// Relative precision of searches over the period (1e-4 by default).
    pub period_precision: f64,
    /// Whether HiGHS runs its sub-MIP primal heuristics (RENS and RINS; on by default).
    /// On small feasibility MILPs solved many times over they can take most of each solve.
    pub sub_mip_heuristics: bool,
    /// Whether HiGHS runs its feasibility-jump heuristic at the root (on by default, as in
    /// HiGHS). The bound's MILPs and `best`'s turn it off: on their feasibility models,
    /// most of which end in "infeasible", it took 13% of a profiled bound run
    /// (docs/bounds.md, "Solver settings").
    pub feasibility_jump: bool,
}

impl Default for MilpOptions {
    fn default() -> Self {
        MilpOptions {
            time_limit: None,
            threads: NonZeroU32::MIN,
            mip_rel_gap: 1e-6,
            node_limit: None,
            period_precision: 1e-4,
            sub_mip_heuristics: true,
            feasibility_jump: true,
        }
    }
}

impl MilpOptions {
    /// The options of `--time-limit` and `--threads` (experiment files: `time_limit`,
    /// `threads`), checked: a positive duration of at most [`crate::units::MAX_SECONDS`],
    /// 1 to [`MAX_THREADS`] threads.
    pub fn from_limits(
        time_limit: Option<crate::units::Seconds>,
        threads: Option<usize>,
    ) -> Result<MilpOptions, crate::InputError> {
        let mut m = MilpOptions {
            time_limit: crate::planner::checked_time_limit(time_limit)?,
            ..MilpOptions::default()
        };
        if let Some(n) = threads {
            m.threads = checked_threads(n)?;
        }
        Ok(m)
    }
}

/// The most HiGHS threads `--threads` accepts. HiGHS starts every thread it is given
/// whatever the machine: 1000 of them made a 0.1 s solve take 6 s, 100000 exhausted memory.
/// Within the range, HiGHS gets at most as many threads as the machine has cores
/// ([`Model::solve`]), so that one experiment file runs on machines of any size.
pub const MAX_THREADS: usize = 256;

/// `--threads` (an experiment file's `threads`) checked: 1 to [`MAX_THREADS`].
pub fn checked_threads(n: usize) -> Result<NonZeroU32, crate::InputError> {
    u32::try_from(n)
        .ok()
        .filter(|&t| t as usize <= MAX_THREADS)
        .and_then(NonZeroU32::new)
        .ok_or_else(|| {
            crate::InputError::new(
                "--threads",
                "",
                format!("must be 1 to {MAX_THREADS}, got {n}"),
            )
        })
}

/// The threads HiGHS is given for `asked`: at most the machine's cores (HiGHS gains nothing
/// from more and pays for each one it starts).
fn highs_threads(asked: NonZeroU32) -> i32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (asked.get() as usize).min(cores).min(MAX_THREADS) as i32
}

/// How a solve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SolveStatus {
    /// Optimal (within the gap or the period precision asked for).
    Optimal,
    /// A limit (time, nodes) was reached with a feasible incumbent.
    LimitWithIncumbent,
    /// Proven infeasible.
    Infeasible,
    /// A limit was reached before any feasible solution was found.
    NoSolutionWithinLimit,
}

impl SolveStatus {
    /// True when a solution is at hand.
    pub fn has_solution(self) -> bool {
        matches!(self, SolveStatus::Optimal | SolveStatus::LimitWithIncumbent)
    }

    /// The solver's status, gap (when finite) and nodes, as reports carry them.
    pub fn summary(self, gap: f64, nodes: u64) -> crate::model::SolverSummary {
        crate::model::SolverSummary {
            status: serde_json::to_value(self)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            gap: gap.is_finite().then_some(gap),
            nodes: Some(nodes),
        }
    }
}

/// A column of a [`Model`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var(pub usize);

/// A MILP under construction: minimise `sum cost * x` subject to row bounds.
#[derive(Debug, Default)]
pub struct Model {
    problem: RowProblem,
    cols: Vec<highs::Col>,
    integer: Vec<bool>,
    /// A feasible assignment handed to HiGHS as its first incumbent (MIP start).
    start: Option<Vec<f64>>,
    /// Nonzero coefficients of the rows so far.
    nonzeros: usize,
    /// Solve without HiGHS's presolve ([`Model::set_presolve`]).
    presolve_off: bool,
    /// The size and time the model may take to build ([`Model::set_budget`]).
    budget: Option<Budget>,
    /// True once a row was dropped for the budget: the model is not solved.
    over_budget: bool,
}

/// A model's building budget: the nonzeros HiGHS could set up within the time limit
/// ([`SETUP_SECONDS_PER_NONZERO`]) and the deadline of the building itself.
#[derive(Debug, Clone, Copy)]
struct Budget {
    nonzeros: usize,
    deadline: Instant,
}

/// Seconds HiGHS spends per nonzero coefficient, at least, before it first checks its time
/// limit: presolve and the MIP solver's set-up do not look at the clock, so a model of 5
/// million nonzeros (the bound's relaxation on an op-level chain, 8 processors) takes
/// 8-14 s there whatever the limit. The rate is the lower end of what that set-up costs on
/// a 2-core machine (docs/bounds.md, "The bisection"), so that a model is refused only
/// when it surely cannot start in time. [`Model::solve`] does not start a solve whose
/// set-up alone would outlast the time left at this rate.
pub const SETUP_SECONDS_PER_NONZERO: f64 = 1e-6;

/// What HiGHS answered.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveResult {
    pub status: SolveStatus,
    /// Column values of the incumbent (empty without one), integers rounded.
    pub values: Vec<f64>,
    /// Objective of the incumbent (NaN without one).
    pub objective: f64,
    /// HiGHS's dual bound (for a minimisation, a lower bound on the optimum).
    pub dual_bound: f64,
    /// HiGHS's relative gap (infinite without an incumbent).
    pub gap: f64,
    pub nodes: u64,
}

impl SolveResult {
    /// No answer within the limit, after `nodes` nodes.
    fn undecided(nodes: u64) -> Self {
        SolveResult {
            status: SolveStatus::NoSolutionWithinLimit,
            values: vec![],
            objective: f64::NAN,
            dual_bound: f64::NEG_INFINITY,
            gap: f64::INFINITY,
            nodes,
        }
    }
}

impl Model {
    pub fn new() -> Self {
        Model::default()
    }

    /// A continuous variable in `[lo, hi]`.
    pub fn continuous(&mut self, cost: f64, lo: f64, hi: f64) -> Var {
        self.push(cost, lo, hi, false)
    }

    /// An integer variable in `[lo, hi]`.
    pub fn integer(&mut self, cost: f64, lo: f64, hi: f64) -> Var {
        self.push(cost, lo, hi, true)
    }

    /// A binary variable.
    pub fn binary(&mut self, cost: f64) -> Var {
        self.push(cost, 0.0, 1.0, true)
    }

    fn push(&mut self, cost: f64, lo: f64, hi: f64, integer: bool) -> Var {
        let c = self
            .problem
            .add_column_with_integrality(cost, lo..=hi, integer);
        self.cols.push(c);
        self.integer.push(integer);
        Var(self.cols.len() - 1)
    }

    /// Builds the model under `time_limit` (from now): past the nonzeros HiGHS could set up
    /// in that time, or past the time itself, rows are dropped and the model is not solved
    /// ([`Model::over_budget`]; [`Model::solve`] answers "no solution within the limit").
    /// Model building does not otherwise look at the clock, and a model of millions of
    /// nonzeros took gigabytes and tens of seconds to build before HiGHS was called.
    pub fn set_budget(&mut self, time_limit: Option<Duration>) {
        self.budget = time_limit.map(|t| Budget {
            nonzeros: (t.as_secs_f64() / SETUP_SECONDS_PER_NONZERO).min(usize::MAX as f64) as usize,
            deadline: Instant::now() + t,
        });
    }

    /// True when a row was dropped for the budget of [`Model::set_budget`].
    pub fn over_budget(&self) -> bool {
        self.over_budget
    }

    /// `lo <= sum coef * x <= hi` (use infinities for one-sided rows). A variable may appear
    /// in several terms: their coefficients are summed (HiGHS rejects repeated columns).
    pub fn row(&mut self, lo: f64, hi: f64, terms: &[(Var, f64)]) {
        if let Some(b) = self.budget {
            // The clock is read every 1024 rows: a row costs microseconds.
            let rows = self.problem.num_rows();
            if self.over_budget
                || self.nonzeros + terms.len() > b.nonzeros
                || (rows % 1024 == 0 && Instant::now() >= b.deadline)
            {
                self.over_budget = true;
                return;
            }
        }
        let mut merged: Vec<(Var, f64)> = terms.to_vec();
        merged.sort_by_key(|&(v, _)| v.0);
        merged.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        let factors: Vec<(highs::Col, f64)> = merged
            .iter()
            .filter(|&&(_, c)| c != 0.0)
            .map(|&(v, c)| (self.cols[v.0], c))
            .collect();
        self.nonzeros += factors.len();
        self.problem.add_row(lo..=hi, factors);
    }

    /// `sum coef * x <= hi`.
    pub fn le(&mut self, terms: &[(Var, f64)], hi: f64) {
        self.row(f64::NEG_INFINITY, hi, terms)
    }

    /// `sum coef * x >= lo`.
    pub fn ge(&mut self, terms: &[(Var, f64)], lo: f64) {
        self.row(lo, f64::INFINITY, terms)
    }

    pub fn num_vars(&self) -> usize {
        self.cols.len()
    }

    /// Nonzero coefficients of the rows.
    pub fn num_nonzeros(&self) -> usize {
        self.nonzeros
    }

    /// The least time HiGHS takes on this model before it can stop at a time limit
    /// ([`SETUP_SECONDS_PER_NONZERO`]).
    pub fn setup_estimate(&self) -> Duration {
        Duration::from_secs_f64(self.nonzeros as f64 * SETUP_SECONDS_PER_NONZERO)
    }

    /// True when [`Model::solve`] with this time limit would not start HiGHS: the set-up
    /// alone would outlast it, and there is no MIP start to answer with at the limit (it
    /// would end the same way, only later).
    pub fn setup_outlasts(&self, limit: Option<Duration>) -> bool {
        self.start.is_none() && limit.is_some_and(|t| self.setup_estimate() > t)
    }

    /// Whether HiGHS presolves the model (the default); off for models that presolve does
    /// not speed up. Either way an "infeasible" is confirmed by a second solve without it
    /// (module docs, "Infeasibility is confirmed").
    pub fn set_presolve(&mut self, on: bool) {
        self.presolve_off = !on;
    }

    /// A value for every variable (in creation order), given to HiGHS as a MIP start: a
    /// feasible one becomes the first incumbent. Call after the last variable is added.
    pub fn set_start(&mut self, values: Vec<f64>) {
        self.start = Some(values);
    }

    /// Solves (minimisation) with the options; `time_left` overrides the time limit of the
    /// options when given (for sequences of solves under one budget).
    pub fn solve(
        self,
        options: &MilpOptions,
        time_left: Option<Duration>,
    ) -> crate::error::Result<SolveResult> {
        let n = self.cols.len();
        let limit = time_left.or(options.time_limit);
        if self.over_budget || self.setup_outlasts(limit) {
            return Ok(SolveResult::undecided(0));
        }
        let mut model = self
            .problem
            .try_optimise(Sense::Minimise)
            .map_err(|e| Error::Solver(format!("HiGHS rejected the model: {e:?}")))?;
        model.make_quiet();
        if let Some(start) = &self.start {
            if start.len() != n {
                return Err(Error::internal(format!(
                    "a MIP start of {} values for {n} variables",
                    start.len()
                )));
            }
            model
                .try_set_solution(Some(start), None, None, None)
                .map_err(|e| Error::Solver(format!("HiGHS rejected the MIP start: {e:?}")))?;
        }
        Self::configure(&mut model, options, limit, self.presolve_off)?;
        let started = Instant::now();
        let mut solved = model
            .try_solve()
            .map_err(|e| Error::Solver(format!("HiGHS failed: {e:?}")))?;
        let mut earlier_nodes = 0;
        if solved.status() == HighsModelStatus::Infeasible {
            // HiGHS's "infeasible" is asked again without presolve and at tighter
            // tolerances, within what is left of the limit, and only that answer counts
            // (module docs, "Infeasibility is confirmed").
            earlier_nodes = node_count(&solved);
            let left = limit.map(|t| t.saturating_sub(started.elapsed()));
            if left.is_some_and(|t| t.is_zero()) {
                return Ok(SolveResult::undecided(earlier_nodes));
            }
            let mut again = highs::Model::from(solved);
            opt(&mut again, "presolve", OptionValue::S("off"))?;
            for tolerance in FEASIBILITY_TOLERANCES {
                opt(&mut again, tolerance, OptionValue::F(CONFIRMING_TOLERANCE))?;
            }
            if let Some(t) = left {
                time_limit(&mut again, t)?;
            }
            solved = again
                .try_solve()
                .map_err(|e| Error::Solver(format!("HiGHS failed: {e:?}")))?;
        }
        Self::result(&solved, &self.integer, earlier_nodes)
    }

    /// HiGHS's options for one solve: quiet, threads, gaps, tight tolerances, heuristics,
    /// presolve, and the limits.
    fn configure(
        model: &mut highs::Model,
        options: &MilpOptions,
        limit: Option<Duration>,
        presolve_off: bool,
    ) -> crate::error::Result<()> {
        opt(model, "output_flag", OptionValue::B(false))?;
        opt(model, "log_to_console", OptionValue::B(false))?;
        opt(
            model,
            "threads",
            OptionValue::I(highs_threads(options.threads)),
        )?;
        if highs_threads(options.threads) > 1 {
            opt(model, "parallel", OptionValue::S("on"))?;
        }
        opt(model, "mip_rel_gap", OptionValue::F(options.mip_rel_gap))?;
        for tolerance in FEASIBILITY_TOLERANCES {
            opt(model, tolerance, OptionValue::F(FEASIBILITY_TOLERANCE))?;
        }
        if !options.sub_mip_heuristics {
            opt(model, "mip_heuristic_run_rens", OptionValue::B(false))?;
            opt(model, "mip_heuristic_run_rins", OptionValue::B(false))?;
        }
        if presolve_off {
            opt(model, "presolve", OptionValue::S("off"))?;
        }
        if !options.feasibility_jump {
            opt(
                model,
                "mip_heuristic_run_feasibility_jump",
                OptionValue::B(false),
            )?;
        }
        if let Some(t) = limit {
            time_limit(model, t)?;
        }
        if let Some(nodes) = options.node_limit {
            opt(
                model,
                "mip_max_nodes",
                OptionValue::I(nodes.min(i32::MAX as u64) as i32),
            )?;
        }
        Ok(())
    }

    /// The status, the solution (integers rounded), the objective, the dual bound, the gap
    /// and the nodes of a finished solve.
    fn result(
        solved: &highs::SolvedModel,
        integer: &[bool],
        earlier_nodes: u64,
    ) -> crate::error::Result<SolveResult> {
        let n = integer.len();
        let model_status = solved.status();
        let has_primal = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
        let status = match model_status {
            HighsModelStatus::Optimal => SolveStatus::Optimal,
            HighsModelStatus::Infeasible => SolveStatus::Infeasible,
            HighsModelStatus::ModelEmpty => SolveStatus::Optimal,
            HighsModelStatus::ReachedTimeLimit
            | HighsModelStatus::ReachedIterationLimit
            | HighsModelStatus::ReachedSolutionLimit
            | HighsModelStatus::ReachedInterrupt
            | HighsModelStatus::ReachedMemoryLimit
            | HighsModelStatus::ObjectiveBound
            | HighsModelStatus::ObjectiveTarget
            | HighsModelStatus::Unknown => {
                if has_primal {
                    SolveStatus::LimitWithIncumbent
                } else {
                    SolveStatus::NoSolutionWithinLimit
                }
            }
            other => return Err(Error::Solver(format!("HiGHS ended with status {other:?}"))),
        };
        let values: Vec<f64> = if status.has_solution() && n > 0 {
            let sol = solved.get_solution();
            sol.columns()
                .iter()
                .zip(integer)
                .map(|(&v, &int)| if int { v.round() } else { v })
                .collect()
        } else {
            vec![]
        };
        let objective = if status.has_solution() {
            solved.objective_value()
        } else {
            f64::NAN
        };
        let dual_bound = solved
            .double_info_value(c"mip_dual_bound")
            .unwrap_or(f64::NEG_INFINITY);
        let gap = if status.has_solution() {
            solved.mip_gap()
        } else {
            f64::INFINITY
        };
        Ok(SolveResult {
            status,
            values,
            objective,
            dual_bound,
            gap,
            nodes: earlier_nodes + node_count(solved),
        })
    }
}

/// Sets one HiGHS option.
fn opt(m: &mut highs::Model, k: &str, v: OptionValue) -> crate::error::Result<()> {
    let r = match v {
        OptionValue::F(x) => m.try_set_option(k, x),
        OptionValue::I(x) => m.try_set_option(k, x),
        OptionValue::S(x) => m.try_set_option(k, x),
        OptionValue::B(x) => m.try_set_option(k, x),
    };
    r.map_err(|e| Error::Solver(format!("HiGHS option {k}: {e:?}")))
}

/// HiGHS's time limit (at least a millisecond: 0 would mean none).
fn time_limit(m: &mut highs::Model, t: Duration) -> crate::error::Result<()> {
    opt(m, "time_limit", OptionValue::F(t.as_secs_f64().max(1e-3)))
}

/// Branch-and-bound nodes of a solve (0 when HiGHS does not say).
fn node_count(solved: &highs::SolvedModel) -> u64 {
    let mut nodes: i64 = 0;
    // SAFETY: the pointer is the live HiGHS instance owned by `solved`; the name is a
    // valid NUL-terminated string and `nodes` a valid out-parameter.
    let rc = unsafe {
        highs_sys::Highs_getInt64InfoValue(solved.as_ptr(), c"mip_node_count".as_ptr(), &mut nodes)
    };
    if rc != 0 {
        0
    } else {
        nodes.max(0) as u64
    }
}

enum OptionValue {
    F(f64),
    I(i32),
    S(&'static str),
    B(bool),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knapsack-like model: `n` binaries, `rows` dense rows.
    fn dense(n: usize, rows: usize) -> (Model, Vec<Var>) {
        let mut m = Model::new();
        let x: Vec<Var> = (0..n).map(|i| m.binary(-(1.0 + i as f64 % 7.0))).collect();
        for r in 0..rows {
            let terms: Vec<(Var, f64)> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| (v, 1.0 + ((i * 31 + r * 17) % 11) as f64))
                .collect();
            m.le(&terms, 3.0 * n as f64);
        }
        (m, x)
    }

    #[test]
    fn a_solve_whose_set_up_outlasts_the_limit_is_not_started() {
        let (m, _) = dense(100, 50);
        assert_eq!(m.num_nonzeros(), 5000);
        assert_eq!(m.setup_estimate(), Duration::from_secs_f64(5000.0 * 1e-6));
        let r = m
            .solve(&MilpOptions::default(), Some(Duration::from_micros(100)))
            .unwrap();
        assert_eq!(r.status, SolveStatus::NoSolutionWithinLimit);
        assert!(r.values.is_empty());
        // With the time it needs, the same model is solved.
        let (m, _) = dense(100, 50);
        let r = m
            .solve(&MilpOptions::default(), Some(Duration::from_secs(60)))
            .unwrap();
        assert_eq!(r.status, SolveStatus::Optimal);
    }

    #[test]
    fn a_solve_with_a_start_is_started_whatever_the_limit() {
        // The start is then the answer at the limit: never dropped unseen.
        let (mut m, x) = dense(100, 50);
        m.set_start(vec![0.0; x.len()]);
        let r = m
            .solve(&MilpOptions::default(), Some(Duration::from_micros(100)))
            .unwrap();
        assert!(r.status.has_solution(), "{:?}", r.status);
    }

    /// Without the feasibility jump, HiGHS still finds the same optimum and still proves
    /// an infeasible model infeasible (the option name is one HiGHS accepts: a rejected
    /// option is an error here).
    #[test]
    fn without_the_feasibility_jump_answers_are_the_same() {
        let off = MilpOptions {
            feasibility_jump: false,
            ..MilpOptions::default()
        };
        let on = dense(30, 10)
            .0
            .solve(&MilpOptions::default(), None)
            .unwrap();
        let r = dense(30, 10).0.solve(&off, None).unwrap();
        assert_eq!(r.status, SolveStatus::Optimal);
        assert!((r.objective - on.objective).abs() <= 1e-6 * on.objective.abs().max(1.0));
        let (mut m, x) = dense(30, 10);
        // Two binaries whose sum must be 3: infeasible.
        m.ge(&[(x[0], 1.0), (x[1], 1.0)], 3.0);
        let r = m.solve(&off, None).unwrap();
        assert_eq!(r.status, SolveStatus::Infeasible);
    }
}
