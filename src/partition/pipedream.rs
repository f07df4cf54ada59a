//! PipeDream's partitioner: the dynamic program of its paper's section 3.1.
//!
//! Narayanan et al., *PipeDream: Generalized Pipeline Parallelism for DNN Training* (SOSP
//! 2019), section 3.1 ("Partitioning Algorithm"), as implemented by its authors in
//! `optimizer/optimizer_graph_hierarchical.py` of msr-fiddle/pipedream. We reproduce that
//! program's terms exactly, so that our objective is the "Time per stage in pipeline" it
//! prints:
//!
//! - A level `k` has `m_k` components joined by bandwidth `B_k` (level 1 innermost: GPUs of a
//!   server; level 2: servers...). Level 1 works on the layers' compute times; level `k+1`
//!   works on the best time of each layer range on one whole level-`k` component.
//! - `A(i, j, m)`: the best slowest-stage time of layers `i..=j` on `m` components (indices
//!   below are 0-based layers, `m` counts components). Without a split the range is one
//!   stage replicated `m` times: `(T(i,j) + 4 (m-1) W(i,j) / (B m) / m_inner) / m`, where
//!   `m_inner` is the previous level's component count (1 at level 1).
//! - With a split after layer `k` and `m'` replicas for the last stage:
//!   `max(A(i, k, m - m'), (T(k+1,j) + 4 (m'-1) W(k+1,j) / (B m')) / m', 2 a(k) / (B m') / r,
//!   2 a(j) / (B m') / r)` (the last term only when `j` is not the last layer), where `r` is
//!   PipeDream's `--activation_compression_ratio`; without it (`None`) PipeDream ignores
//!   activation transfers and so do we.
//! - Straight pipelines (`--straight_pipeline`): only `m' = 1`, and a range on `m > 1`
//!   components must be split (no replication).
//! - Memory (`--use_memory_constraint --memory_size M`): a stage of `m'` replicas ending the
//!   prefix that uses `m` of the level's `N` components is allowed only if
//!   `ceil((N - m) / m') (S + W) <= M`, with `S` the stage's activations and `W` its weights
//!   (for an unsplit range on `m` components: `ceil((N - m) / m) (S + W)`).
//! - `--use_fewer_machines`: `A(i, j, m)` may also take `A(i, j, m - 1)`.
//! - The objective is `A(0, L-1, m_top)` at the top level; the partition follows the DP's
//!   choices down the levels, a stage's replica count being the product of its factors.
//!
//! Where we depart from PipeDream:
//! - PipeDream runs its DP over the *antichain DAG* of the network, whose states can be
//!   exponentially many. The program here runs over any [`Cuts`]: the prefixes of a chain
//!   ([`partition`], on an instance: a cut only between consecutive chain layers), or every
//!   ideal of a DAG ([`partition_graph`], on a PipeDream profile: also the cuts that pass
//!   "diagonally" through a residual block, between its main branch and its shortcut, which
//!   no single order's prefixes hold). Every antichain state of PipeDream is an ideal, and
//!   what crosses a cut is counted exactly (PipeDream's augmented antichains can count a
//!   tensor whose readers are all inside), so on the same profile [`partition_graph`]'s
//!   objective is never above PipeDream's (without the memory term, whose activation sums
//!   differ: see [`IdealCuts`]). The chosen ideals then become prefixes of a new order and
//!   the stages are layers of that chain. Branchy networks have too many ideals
//!   (Inception-v3: over 200,000; PipeDream itself runs out of memory there): past
//!   [`MAX_IDEALS`] the chain's prefixes are used, and the output says so.
//! - Splits are pruned by lower bounds that cannot remove the best split (`solve_level`),
//!   so the program returns the unpruned one's partition, ties included, in a fraction of
//!   its time on long chains.
//! - PipeDream's per-stage activation size `S` sums its nodes' *output* sizes; a chain layer
//!   stores what it keeps for the backward pass ([`Instance::stash`]), which we use instead.
//! - On a DAG, PipeDream splits only where its antichain DAG has an edge path (a state `k`
//!   that is an ancestor of `j`); our chain allows every cut of the linear order. With
//!   replication on gnmt this lets us find partitions PipeDream's program does not see
//!   (ours 23% lower objective, `results/pipedream-agreement.md`); on straight pipelines
//!   both agree exactly on all six shared profiles. (Like PipeDream, the importer zeroes
//!   the `Input` node's data-loading time.)
//! - Ties between equally good splits are broken by the smallest `k`, then the smallest `m'`
//!   (PipeDream iterates over a Python set, in no fixed order).

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::InputError;
use crate::io::pipedream::{
    ideal_has, linearize_graph_in, order_through, with_provenance, Graph, Ideal, Linearization,
};
use crate::model::{Allocation, ChainSums, Instance, Stage};
use crate::planner::{check_period, AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::schedule::one_f_one_b_star;
use crate::units::{Bytes, BytesPerSecond, Seconds};

/// One level of the hierarchy: `processors` components joined by links of `bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    pub processors: usize,
    pub bandwidth: BytesPerSecond,
}

/// The levels of a hierarchical machine from one processor count and one bandwidth per
/// level, innermost first (`partition pipedream --processors 4 4 --bandwidth 24GB/s 3GB/s`).
pub fn levels(
    processors: &[usize],
    bandwidth: &[BytesPerSecond],
) -> Result<Vec<Level>, InputError> {
    if processors.len() != bandwidth.len() {
        return Err(InputError::new(
            "--bandwidth",
            "",
            format!(
                "{} levels of --processors but {} bandwidths; give one per level",
                processors.len(),
                bandwidth.len()
            ),
        ));
    }
    if let Some(i) = processors.iter().position(|&p| p == 0) {
        return Err(InputError::new(
            "--processors",
            "",
            format!("level {i} has 0 components; every level has at least 1"),
        ));
    }
    let total = processors
        .iter()
        .try_fold(1usize, |a, &p| a.checked_mul(p))
        .filter(|&t| t <= crate::model::MAX_PROCESSORS);
    if total.is_none() {
        return Err(InputError::new(
            "--processors",
            "",
            format!(
                "{processors:?} make more than {} processors in all",
                crate::model::MAX_PROCESSORS
            ),
        ));
    }
    if let Some(b) = bandwidth.iter().find(|&&b| !(b > 0.0 && b.is_finite())) {
        return Err(InputError::new(
            "--bandwidth",
            "",
            format!("must be positive and finite, got {b}"),
        ));
    }
    Ok(processors
        .iter()
        .zip(bandwidth)
        .map(|(&processors, &bandwidth)| Level {
            processors,
            bandwidth,
        })
        .collect())
}

/// PipeDream's activation compression ratio as its optimizer takes it
/// (`--activation_compression_ratio`): a number, or `none` to leave activation transfers
/// out (PipeDream's default when the flag is absent).
pub fn parse_compression_ratio(text: &str) -> Result<Option<f64>, InputError> {
    match text {
        "none" => Ok(None),
        r => r.parse::<f64>().map(Some).map_err(|_| {
            InputError::new(
                "--activation-compression-ratio",
                "",
                format!("{r:?} is neither a number nor `none`"),
            )
        }),
    }
}

/// The options of PipeDream's optimizer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipeDreamConfig {
    /// Levels, innermost first (PipeDream's `-n m_1 m_2 .. -b B_1 B_2 ..`).
    pub levels: Vec<Level>,
    /// One stage per component, no replication (`--straight_pipeline`).
    pub straight: bool,
    /// PipeDream's `--activation_compression_ratio`: activation transfers cost
    /// `2 a / B / ratio`; `None` ignores them (PipeDream's default).
    pub activation_compression: Option<f64>,
    /// PipeDream's memory term (`--use_memory_constraint --memory_size`).
    pub memory: Option<Bytes>,
    /// `--use_fewer_machines`: a range may leave components of its budget unused.
    pub fewer_machines: bool,
}

impl PipeDreamConfig {
    /// A straight pipeline on `processors` machines joined by `bandwidth`, activation
    /// transfers counted (compression ratio 1), no memory term, every machine used.
    pub fn straight(processors: usize, bandwidth: BytesPerSecond) -> Self {
        PipeDreamConfig {
            levels: vec![Level {
                processors,
                bandwidth,
            }],
            straight: true,
            activation_compression: Some(1.0),
            memory: None,
            fewer_machines: false,
        }
    }

    /// Checks the configuration; errors name the command-line flag at fault.
    pub fn check(&self) -> Result<(), InputError> {
        if self.levels.is_empty() {
            return Err(InputError::new(
                "--processors",
                "",
                "at least one level is needed",
            ));
        }
        for (i, l) in self.levels.iter().enumerate() {
            if l.processors == 0 {
                return Err(InputError::new(
                    "--processors",
                    format!("[{i}]"),
                    "must be at least 1",
                ));
            }
            if l.processors > u16::MAX as usize {
                return Err(InputError::new(
                    "--processors",
                    format!("[{i}]"),
                    format!("{} is more than {} processors", l.processors, u16::MAX),
                ));
            }
            if !(l.bandwidth.is_finite() && l.bandwidth > 0.0) {
                return Err(InputError::new(
                    "--bandwidth",
                    format!("[{i}]"),
                    format!("{} is not a positive bandwidth", l.bandwidth),
                ));
            }
        }
        if let Some(r) = self.activation_compression {
            if !(r.is_finite() && r > 0.0) {
                return Err(InputError::new(
                    "--activation-compression",
                    "",
                    format!("{r} is not a positive ratio"),
                ));
            }
        }
        if let Some(m) = self.memory {
            if !(m.is_finite() && m >= 0.0) {
                return Err(InputError::new(
                    "--memory",
                    "",
                    format!("{m} is not a size"),
                ));
            }
        }
        Ok(())
    }

    /// Total number of processors: the product of the levels' counts.
    pub fn total_processors(&self) -> usize {
        self.levels.iter().map(|l| l.processors).product()
    }
}

/// One stage of PipeDream's partition: layers `first..=last` (1-based) on `replicas`
/// processors (data parallel when more than one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PipeDreamStage {
    pub first: usize,
    pub last: usize,
    pub replicas: usize,
    /// U(first, last): forward plus backward time of one batch on one processor.
    pub compute: Seconds,
}

/// The partition PipeDream's optimizer chooses and its objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipeDreamPartition {
    /// PipeDream's objective: the slowest stage's time per batch, in seconds (its "Time per
    /// stage in pipeline").
    pub objective: Seconds,
    /// Stages in chain order.
    pub stages: Vec<PipeDreamStage>,
    /// Processors the stages use (the sum of the replicas; less than the budget only with
    /// `fewer_machines`).
    pub processors_used: usize,
}

impl PipeDreamPartition {
    /// The straight allocation (stage `i` on processor `i`), or `None` when a stage is
    /// replicated.
    pub fn allocation(&self) -> Option<Allocation> {
        if self.stages.iter().any(|s| s.replicas != 1) {
            return None;
        }
        Some(Allocation::new(
            self.stages
                .iter()
                .enumerate()
                .map(|(p, s)| Stage {
                    first: s.first,
                    last: s.last,
                    processor: p,
                })
                .collect(),
        ))
    }
}

/// Why PipeDream's optimizer gives no partition.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipeDreamError {
    #[error("{0}")]
    Config(#[from] InputError),
    #[error("PipeDream's optimizer finds no partition: {0}")]
    NoPartition(String),
    /// The deadline passed before the program ended: nothing was proven.
    #[error("PipeDream's optimizer stopped at its time limit before it ended")]
    OutOfTime,
}

/// The cuts PipeDream's program may use, as *states*: `0..=last_state()`, state 0 before
/// every layer, the last after all of them; a stage runs from a state to a later one that
/// contains it. On a chain the states are its prefixes ([`ChainCuts`]); on a DAG they are
/// its ideals ([`IdealCuts`]), the diagonal cuts included. The program only asks for sums
/// between two nested states and for what crosses a state's cut.
pub trait Cuts {
    /// The last state (the number of chain layers on a chain).
    fn last_state(&self) -> usize;
    /// Whether state `a` lies inside state `b` (`a < b`), so that `b` minus `a` is a stage.
    fn nested(&self, a: usize, b: usize) -> bool;
    /// Forward plus backward time of the stage from state `a` to state `b`.
    fn compute(&self, a: usize, b: usize) -> Seconds;
    /// Weights of that stage.
    fn weights(&self, a: usize, b: usize) -> Bytes;
    /// Activations it keeps plus its weights (PipeDream's memory term `S + W`).
    fn memory(&self, a: usize, b: usize) -> Bytes;
    /// Bytes crossing the cut after state `s` (`0 < s < last_state()`).
    fn out(&self, s: usize) -> Bytes;
    /// True when `compute(a, b)` grows with `b` and shrinks with `a` over consecutive
    /// states (a chain's prefixes), which lets the program search its splits by bisection.
    const PREFIXES: bool;
}

/// A chain's cuts: state `s` holds layers `1..=s`.
pub struct ChainCuts<'a>(pub &'a ChainSums);

impl Cuts for ChainCuts<'_> {
    fn last_state(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn nested(&self, a: usize, b: usize) -> bool {
        a < b
    }
    #[inline]
    fn compute(&self, a: usize, b: usize) -> Seconds {
        self.0.u(a + 1, b)
    }
    #[inline]
    fn weights(&self, a: usize, b: usize) -> Bytes {
        self.0.weights(a + 1, b)
    }
    #[inline]
    fn memory(&self, a: usize, b: usize) -> Bytes {
        self.0.stash(a + 1, b) + self.0.weights(a + 1, b)
    }
    #[inline]
    fn out(&self, s: usize) -> Bytes {
        self.0.a(s)
    }
    const PREFIXES: bool = true;
}

/// The DP table of one level.
struct Table {
    n: usize,
    /// Components at this level (N).
    machines: usize,
    /// Rows (first states) computed: 1 at the top level, `n` below.
    rows: usize,
    /// `A(i, j, m)` at `[(i * n + j) * N + m]`: the stages from state `i` to state `j + 1`
    /// (layers `i + 1..=j + 1` on a chain), `m` 0-based (m + 1 components); infinite where
    /// PipeDream has `None`.
    time: Vec<f64>,
    /// The last stage starts at state `split` (0: no split, the whole range is one stage).
    split: Vec<u32>,
    /// The prefix's component index (m - m') when split.
    prev: Vec<u16>,
    /// Replicas of the last stage (m' when split, m + 1 otherwise).
    replicas: Vec<u16>,
}

impl Table {
    /// `rows` x `n` x `machines` entries, every time infinite.
    fn new(n: usize, machines: usize, rows: usize) -> Table {
        let size = rows * n * machines;
        Table {
            n,
            machines,
            rows,
            time: vec![f64::INFINITY; size],
            split: vec![0; size],
            prev: vec![0; size],
            replicas: vec![0; size],
        }
    }

    fn at(&self, i: usize, j: usize, m: usize) -> usize {
        (i * self.n + j) * self.machines + m
    }
}

/// Runs PipeDream's dynamic program on `instance` (see the module documentation).
pub fn partition(
    instance: &Instance,
    config: &PipeDreamConfig,
) -> Result<PipeDreamPartition, PipeDreamError> {
    partition_within(instance, config, None)
}

/// [`partition`], stopped at `deadline` with [`PipeDreamError::OutOfTime`] (the program
/// reads the clock once per row of its table).
pub fn partition_within(
    instance: &Instance,
    config: &PipeDreamConfig,
    deadline: Option<Instant>,
) -> Result<PipeDreamPartition, PipeDreamError> {
    config.check()?;
    instance.check()?;
    let sums = instance.sums();
    let (objective, stages) = solve_pruned(&ChainCuts(&sums), config, true, deadline)?;
    let stages: Vec<PipeDreamStage> = stages
        .iter()
        .map(|&(a, b, r)| PipeDreamStage {
            first: a + 1,
            last: b,
            replicas: r,
            compute: sums.u(a + 1, b),
        })
        .collect();
    let processors_used = stages.iter().map(|s| s.replicas).sum();
    Ok(PipeDreamPartition {
        objective,
        stages,
        processors_used,
    })
}

/// The program's result: the objective and the stages as `(first state, last state,
/// replicas)`.
type Solved = (Seconds, Vec<(usize, usize, usize)>);

/// The program on any cuts.
fn solve<C: Cuts>(cuts: &C, config: &PipeDreamConfig) -> Result<Solved, PipeDreamError> {
    solve_pruned(cuts, config, true, None)
}

/// [`solve`], with the pruning of [`solve_level`] on or off (off: the oracle of the tests).
fn solve_pruned<C: Cuts>(
    cuts: &C,
    config: &PipeDreamConfig,
    prune: bool,
    deadline: Option<Instant>,
) -> Result<Solved, PipeDreamError> {
    let n = cuts.last_state();
    // Level-1 times: the stages' compute times, dense, for the levels above the first to
    // overwrite; infinite between states not nested. One level reads them from the cuts
    // instead: the n x n table held 200 MB on a 5,000-layer chain.
    let mut compute = Vec::new();
    if config.levels.len() > 1 {
        compute = vec![f64::INFINITY; n * n];
        for i in 0..n {
            if expired(deadline) {
                return Err(PipeDreamError::OutOfTime);
            }
            for j in i..n {
                if cuts.nested(i, j + 1) {
                    compute[i * n + j] = cuts.compute(i, j + 1);
                }
            }
        }
    }
    let mut tables: Vec<Table> = Vec::with_capacity(config.levels.len());
    let mut inner = 1usize;
    let mut inside = 1usize;
    for (li, level) in config.levels.iter().enumerate() {
        let last_level = li + 1 == config.levels.len();
        let t = solve_level(
            cuts, &compute, level, inner, inside, config, last_level, prune, deadline,
        )
        .ok_or(PipeDreamError::OutOfTime)?;
        if !last_level {
            let top = level.processors - 1;
            for i in 0..n {
                for j in i..n {
                    compute[i * n + j] = t.time[t.at(i, j, top)];
                }
            }
        }
        inner = level.processors;
        inside *= level.processors;
        tables.push(t);
    }
    let top = tables.last().expect("at least one level");
    let objective = top.time[top.at(0, n - 1, top.machines - 1)];
    if !objective.is_finite() {
        let p = config.total_processors();
        let mut why = format!("no partition of the {n} layers on {p} processors");
        if config.memory.is_some() {
            why.push_str(" fits PipeDream's memory estimate");
        }
        if config.straight && !config.fewer_machines && n < p {
            why.push_str(" (a straight pipeline using every processor needs one layer each)");
        }
        return Err(PipeDreamError::NoPartition(why));
    }

    // Follow the choices down the levels: ranges with their replica factor so far.
    let mut ranges: Vec<(usize, usize, usize)> = vec![(0, n - 1, 1)];
    for t in tables.iter().rev() {
        let mut next = Vec::with_capacity(ranges.len() * t.machines);
        for &(start, end, factor) in &ranges {
            let mut parts = Vec::new();
            let mut j = end;
            let mut m = t.machines - 1;
            loop {
                let e = t.at(start, j, m);
                let r = t.replicas[e] as usize;
                let s = t.split[e] as usize;
                if s == 0 {
                    parts.push((start, j, factor * r));
                    break;
                }
                parts.push((s, j, factor * r));
                m = t.prev[e] as usize;
                j = s - 1;
            }
            parts.reverse();
            next.extend(parts);
        }
        ranges = next;
    }
    Ok((
        objective,
        ranges.iter().map(|&(i, j, r)| (i, j + 1, r)).collect(),
    ))
}

/// Relative slack of the pruning bounds against rounding: a split is skipped only when its
/// lower bound exceeds the best time by more than this, so ties are still compared.
const PRUNE_SLACK: f64 = 1e-9;

/// One level of the program. `inner` is the previous level's component count (PipeDream's
/// `num_machines_within_machine`), `inside` the product of all previous levels' counts.
///
/// Splits are pruned by two lower bounds that hold at every level: a range of compute `U`
/// (level-1 time) on `c` components of this level takes at least `U / (c * inside)`
/// (the slowest stage is at least the average), and the last stage on `m'` replicas at
/// least `U / (m' * inside)`. On a chain both bounds are monotone in the split, so the
/// splits worth trying form an interval found by bisection; elsewhere each split is tested.
/// A split is skipped only when a bound exceeds the best time found (by [`PRUNE_SLACK`]),
/// so the result, ties included, is the unpruned program's.
#[allow(clippy::too_many_arguments)]
fn solve_level<C: Cuts>(
    cuts: &C,
    compute: &[f64],
    level: &Level,
    inner: usize,
    inside: usize,
    config: &PipeDreamConfig,
    last_level: bool,
    prune: bool,
    deadline: Option<Instant>,
) -> Option<Table> {
    let n = cuts.last_state();
    let stage_compute = |a: usize, j: usize| level_one(cuts, compute, a, j);
    let nm = level.processors;
    let b = level.bandwidth;
    let ratio = config.activation_compression;
    let mut t = Table::new(n, nm, if last_level { 1 } else { n });
    let memory_ok = |stash_weights: Bytes, in_flight: usize| match config.memory {
        Some(limit) => in_flight as f64 * stash_weights <= limit,
        None => true,
    };
    let inside = inside as f64;
    // Unsplit ranges: one stage on m + 1 replicas.
    let max_m = if config.straight { 1 } else { nm };
    for i in 0..t.rows {
        if expired(deadline) {
            return None;
        }
        for j in i..n {
            let c = stage_compute(i, j);
            if !c.is_finite() {
                continue;
            }
            let w = cuts.weights(i, j + 1);
            let sw = cuts.memory(i, j + 1);
            for m in 0..max_m {
                if !memory_ok(sw, (nm - (m + 1)).div_ceil(m + 1)) {
                    continue;
                }
                let dp = (4.0 * m as f64 * w) / (b * (m + 1) as f64) / inner as f64;
                let e = t.at(i, j, m);
                t.time[e] = (c + dp) / (m + 1) as f64;
                t.replicas[e] = (m + 1) as u16;
            }
        }
    }
    // Splits: the last stage runs from state k + 1 to state j + 1, for k in i..j.
    for i in 0..t.rows {
        for m in 1..nm {
            for j in i + 1..n {
                // One row of the top level is the whole chain: the clock is read per range.
                if j % 64 == 0 && expired(deadline) {
                    return None;
                }
                if !cuts.nested(i, j + 1) {
                    continue;
                }
                let e = t.at(i, j, m);
                let mut best = t.time[e];
                let mut best_split = 0u32;
                let mut best_prev = 0u16;
                let mut best_rep = t.replicas[e];
                // Ties keep the unsplit range (or the one on fewer machines), then the
                // split with the smallest k, then the smallest m'.
                let mut from_split = false;
                if config.fewer_machines {
                    let f = t.at(i, j, m - 1);
                    if t.time[f] < best || !best.is_finite() {
                        best = t.time[f];
                        best_split = t.split[f];
                        best_prev = t.prev[f];
                        best_rep = t.replicas[f];
                    }
                }
                let a_out = if j + 1 < n {
                    Some(cuts.out(j + 1))
                } else {
                    None
                };
                let max_mp = if config.straight { 1 } else { m };
                for mp in 1..=max_mp {
                    let mpf = mp as f64;
                    let prefix_share = (m - mp + 1) as f64 * inside;
                    let stage_share = mpf * inside;
                    let pruned = |lb: f64, best: f64| prune && lb > best * (1.0 + PRUNE_SLACK);
                    let (mut lo, mut hi) = (i, j);
                    if C::PREFIXES && best.is_finite() {
                        // Splits k whose prefix is light enough, then whose last stage is.
                        hi = partition_point(i, j, |k| {
                            pruned(cuts.compute(i, k + 1) / prefix_share, best)
                        });
                        lo = partition_point(i, hi, |k| {
                            !pruned(cuts.compute(k + 1, j + 1) / stage_share, best)
                        });
                    }
                    for k in lo..hi {
                        let last = stage_compute(k + 1, j);
                        if !last.is_finite() || !cuts.nested(i, k + 1) {
                            continue;
                        }
                        if pruned(cuts.compute(k + 1, j + 1) / stage_share, best)
                            || pruned(cuts.compute(i, k + 1) / prefix_share, best)
                        {
                            continue;
                        }
                        let prefix = t.time[t.at(i, k, m - mp)];
                        if !prefix.is_finite() {
                            continue;
                        }
                        let sw = cuts.memory(k + 1, j + 1);
                        if !memory_ok(sw, (nm - (m + 1)).div_ceil(mp)) {
                            continue;
                        }
                        let w = cuts.weights(k + 1, j + 1);
                        let stage = (last + (4.0 * (mpf - 1.0) * w) / (b * mpf)) / mpf;
                        let mut pt = prefix.max(stage);
                        if let Some(r) = ratio {
                            pt = pt.max((2.0 * cuts.out(k + 1)) / (b * mpf) / r);
                            if let Some(a) = a_out {
                                pt = pt.max((2.0 * a) / (b * mpf) / r);
                            }
                        }
                        let split = (k + 1) as u32;
                        let better = pt < best
                            || (pt == best
                                && from_split
                                && (split, mp as u16) < (best_split, best_rep));
                        if better {
                            best = pt;
                            best_split = split;
                            best_prev = (m - mp) as u16;
                            best_rep = mp as u16;
                            from_split = true;
                        }
                    }
                }
                t.time[e] = best;
                t.split[e] = best_split;
                t.prev[e] = best_prev;
                t.replicas[e] = best_rep;
            }
        }
    }
    Some(t)
}

/// The level-1 time of the stage from state `a` to state `j + 1`: `compute`, the table,
/// when there is one ([`solve_pruned`]), the cuts otherwise.
fn level_one<C: Cuts>(cuts: &C, compute: &[f64], a: usize, j: usize) -> Seconds {
    if !compute.is_empty() {
        compute[a * cuts.last_state() + j]
    } else if cuts.nested(a, j + 1) {
        cuts.compute(a, j + 1)
    } else {
        f64::INFINITY
    }
}

/// True once `deadline` has passed.
fn expired(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// The first `k` in `lo..hi` where `pred` turns true, for `pred` false then true (`hi` if
/// never).
fn partition_point(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// A DAG's cuts: its ideals ([`Graph::ideals`]), smallest first, every diagonal cut through
/// parallel branches included. Node values follow the linearization's rules
/// ([`crate::io::pipedream`]): a data `Input` does no work. What a stage keeps is what its
/// nodes take as input, each node's distinct inputs counted (as chain layers' stashes add
/// up); what crosses a cut is the output of every node inside it that a node outside
/// reads, each tensor once.
pub struct IdealCuts {
    ideals: Vec<Ideal>,
    /// Per ideal: sums of compute, weights, kept activations; crossing bytes.
    compute: Vec<Seconds>,
    weights: Vec<Bytes>,
    kept: Vec<Bytes>,
    out: Vec<Bytes>,
    /// `nested[a * states + b]`, `states` the number of ideals.
    nested: Vec<bool>,
}

impl IdealCuts {
    /// The ideals of `graph`, or `None` when it has more than `max`.
    pub fn new(graph: &Graph, max: usize) -> Option<IdealCuts> {
        let ideals = graph.ideals(max)?;
        let nodes = graph.training_nodes();
        let work: Vec<Seconds> = nodes.iter().map(|n| n.fwd + n.bwd).collect();
        let weight: Vec<Bytes> = nodes.iter().map(|n| n.weights).collect();
        // A graph's edges are distinct, so a node's predecessors are its distinct inputs.
        let keeps: Vec<Bytes> = (0..nodes.len())
            .map(|v| {
                graph
                    .predecessors(v)
                    .iter()
                    .map(|&u| nodes[u].activation)
                    .sum()
            })
            .collect();
        let sum = |ideal: &Ideal, per: &[f64]| -> f64 {
            (0..nodes.len())
                .filter(|&v| ideal_has(ideal, v))
                .map(|v| per[v])
                .sum()
        };
        let crossing = |ideal: &Ideal| -> Bytes {
            (0..nodes.len())
                .filter(|&v| {
                    ideal_has(ideal, v) && graph.successors(v).iter().any(|&w| !ideal_has(ideal, w))
                })
                .map(|v| nodes[v].activation)
                .sum()
        };
        let s = ideals.len();
        let mut nested = vec![false; s * s];
        for a in 0..s {
            for b in a + 1..s {
                nested[a * s + b] = ideals[a].iter().zip(&ideals[b]).all(|(x, y)| x & !y == 0);
            }
        }
        Some(IdealCuts {
            compute: ideals.iter().map(|i| sum(i, &work)).collect(),
            weights: ideals.iter().map(|i| sum(i, &weight)).collect(),
            kept: ideals.iter().map(|i| sum(i, &keeps)).collect(),
            out: ideals.iter().map(crossing).collect(),
            nested,
            ideals,
        })
    }

    /// The ideal of state `s`.
    pub fn ideal(&self, s: usize) -> &Ideal {
        &self.ideals[s]
    }
}

impl Cuts for IdealCuts {
    fn last_state(&self) -> usize {
        self.ideals.len() - 1
    }
    fn nested(&self, a: usize, b: usize) -> bool {
        self.nested[a * self.ideals.len() + b]
    }
    fn compute(&self, a: usize, b: usize) -> Seconds {
        self.compute[b] - self.compute[a]
    }
    fn weights(&self, a: usize, b: usize) -> Bytes {
        self.weights[b] - self.weights[a]
    }
    fn memory(&self, a: usize, b: usize) -> Bytes {
        self.kept[b] - self.kept[a] + self.weights[b] - self.weights[a]
    }
    fn out(&self, s: usize) -> Bytes {
        self.out[s]
    }
    const PREFIXES: bool = false;
}

/// Ideals the program takes on a DAG with one level (the splits cost about states² x
/// machines²); past this, and past [`MAX_IDEALS_HIERARCHICAL`] with several levels (states³),
/// [`partition_graph`] keeps the chain's prefixes.
pub const MAX_IDEALS: usize = 4096;
/// See [`MAX_IDEALS`].
pub const MAX_IDEALS_HIERARCHICAL: usize = 600;

/// Which cuts [`partition_graph`] searched.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CutsSearched {
    /// Every ideal of the DAG: every cut PipeDream's antichain states can express.
    Ideals { states: usize },
    /// Only the prefixes of the chain's order: the DAG has more ideals than the program
    /// takes.
    ChainPrefixes { more_ideals_than: usize },
}

/// [`partition_graph`]'s result: the partition of a chain linearized so that its cuts are
/// prefixes of the chain's order.
#[derive(Debug, Clone)]
pub struct GraphPartition {
    /// The chain the stages refer to.
    pub linearization: Linearization,
    pub partition: PipeDreamPartition,
    pub searched: CutsSearched,
}

/// PipeDream's program over the DAG's ideals instead of one order's prefixes, so that the
/// cuts PipeDream's antichain states take "diagonally" through a residual block are seen
/// too (section "Where we depart" of the module doc). The chosen ideals are then made
/// prefixes of a new order of the DAG ([`order_through`]), linearized like any graph, and
/// the program run again on that chain: its prefixes include the chosen cuts, so its
/// objective is at most the DAG program's, and the stages are chain layers of a chain that
/// the rest of pipeopt reads. With more ideals than [`MAX_IDEALS`] (or
/// [`MAX_IDEALS_HIERARCHICAL`]), or when no ideals give a partition, the chain of the
/// default order is used, as [`partition`] on the imported instance does (so that "no
/// partition" is said in that chain's layers).
///
/// With PipeDream's memory term the final word is the chain's: its stash rule
/// ([`crate::io::pipedream`], "Stash") counts a layer's distinct inputs where
/// [`IdealCuts`] counts each node's, and the linearization groups zero-cost nodes with a
/// neighbour, which may move one across a chosen cut; so the chain may (rarely) refuse a
/// stage the ideals accepted. Without the memory term both agree.
pub fn partition_graph(
    graph: &Graph,
    name: &str,
    config: &PipeDreamConfig,
) -> Result<GraphPartition, PipeDreamError> {
    config.check()?;
    let max = if config.levels.len() > 1 {
        MAX_IDEALS_HIERARCHICAL
    } else {
        MAX_IDEALS
    };
    let (default_order, default_kind) = graph.chain_order();
    // The order to linearize along: through the chosen ideals; the default one past the
    // cap, or when no ideal gives a partition (then the chain says why, in its layers).
    let (order, kind, searched) = match IdealCuts::new(graph, max) {
        Some(cuts) => {
            let searched = CutsSearched::Ideals {
                states: cuts.last_state() + 1,
            };
            match solve(&cuts, config) {
                Ok((_, stages)) => {
                    let chosen: Vec<&Ideal> =
                        stages.iter().map(|&(_, b, _)| cuts.ideal(b)).collect();
                    let order = order_through(graph, &chosen, &default_order);
                    (order, "through the chosen ideals", searched)
                }
                Err(PipeDreamError::NoPartition(_)) => (default_order, default_kind, searched),
                Err(e) => return Err(e),
            }
        }
        None => (
            default_order,
            default_kind,
            CutsSearched::ChainPrefixes {
                more_ideals_than: max,
            },
        ),
    };
    let linearization = with_provenance(graph, linearize_graph_in(graph, name, order, kind));
    let partition = partition(&linearization.instance, config)?;
    Ok(GraphPartition {
        linearization,
        partition,
        searched,
    })
}

/// The `--json` object of `pipeopt partition pipedream`.
pub fn partition_json(
    instance: &Instance,
    config: &PipeDreamConfig,
    result: &PipeDreamPartition,
    solve_seconds: f64,
) -> Value {
    json!({
        "algorithm": "pipedream",
        "instance": instance.name,
        "levels": config.levels,
        "processors": config.total_processors(),
        "straight": config.straight,
        "activation_compression": config.activation_compression,
        "memory": config.memory,
        "fewer_machines": config.fewer_machines,
        "objective": result.objective,
        "processors_used": result.processors_used,
        "stages": result.stages,
        "solve_seconds": solve_seconds,
    })
}

/// Algorithm `pipedream` of `pipeopt plan`: PipeDream's straight partition on at most the
/// platform's `P` processors (bandwidth beta, activation transfers counted, PipeDream's
/// memory term with the platform's `M`), scheduled by 1F1B* at the smallest period that
/// fits memory (Beaumont et al., ScaDL 2022, section 5, Figure 6, solid red line). Its
/// `planned_period` is the DP's bottleneck (the dashed red line).
///
/// **In-flight batches of the memory term.** PipeDream's code charges a stage ending the
/// prefix that uses `m` of the level's `N` machines `ceil((N - m) / m')` in-flight copies of
/// its activations and weights, with `N` the whole budget even under
/// `--use_fewer_machines`: a partition on 3 of 8 processors is charged as if 5 unused
/// processors followed it. The paper counts in-flight minibatches over the workers of the
/// pipeline (Narayanan et al., SOSP 2019, section 3.2: NOAM = workers / input-stage
/// replicas), so the planner runs the DP with every budget `U = 1..=P` using all `U`
/// processors and keeps the best objective (ties: fewer processors): each partition is
/// charged over the processors it uses. This also plans a chain shorter than `P` (a
/// one-layer chain uses one processor). [`partition`] itself keeps PipeDream's code's
/// count, for the agreement with PipeDream's optimizer.
#[derive(Debug, Clone, Default)]
pub struct PipeDreamPlanner {
    /// Schedule at this period instead of the smallest one that fits.
    pub period: Option<Seconds>,
    /// Leave PipeDream's memory term out of the DP.
    pub ignore_memory: bool,
    /// Wall-clock limit (`--time-limit`): at it, the best partition of the budgets done so
    /// far, or no plan ("timeout").
    pub time_limit: Option<Duration>,
}

/// The options of `pipedream`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipeDreamOptions {
    /// A target period instead of the smallest one that fits (`--period`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub period: Option<Seconds>,
    /// Wall-clock limit (`--time-limit`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
}

impl AlgorithmOptions for PipeDreamOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, InputError> {
        check_period(self.period)?;
        Ok(Box::new(PipeDreamPlanner {
            period: self.period,
            ignore_memory: false,
            time_limit: crate::planner::checked_time_limit(self.time_limit)?,
        }))
    }
}

impl Planner for PipeDreamPlanner {
    fn name(&self) -> String {
        "pipedream".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.platform.check()?;
        let budget = problem.platform.processors;
        let deadline = self.time_limit.map(|t| Instant::now() + t);
        let mut best: Option<PipeDreamPartition> = None;
        let mut config_error = None;
        let mut stopped = false;
        for used in 1..=budget.min(problem.instance.len()) {
            let config = PipeDreamConfig {
                levels: vec![Level {
                    processors: used,
                    bandwidth: problem.platform.bandwidth,
                }],
                straight: true,
                activation_compression: Some(1.0),
                memory: if self.ignore_memory {
                    None
                } else {
                    Some(problem.platform.memory)
                },
                fewer_machines: false,
            };
            match partition_within(problem.instance, &config, deadline) {
                Ok(p) => {
                    if best.as_ref().is_none_or(|b| p.objective < b.objective) {
                        best = Some(p);
                    }
                }
                Err(PipeDreamError::NoPartition(_)) => {}
                Err(PipeDreamError::OutOfTime) => {
                    stopped = true;
                    break;
                }
                Err(e) => {
                    config_error = Some(e);
                    break;
                }
            }
        }
        match config_error {
            Some(PipeDreamError::Config(e)) => return Err(e.into()),
            Some(e) => return Err(crate::Error::internal(e)),
            None => {}
        }
        let Some(part) = best else {
            if stopped {
                return Ok(Outcome::NoPlanWithinLimit {
                    reason: PipeDreamError::OutOfTime.to_string(),
                    lower_bound: None,
                });
            }
            return Ok(Outcome::Infeasible {
                reason: format!(
                    "no straight partition of the {} layers on 1 to {budget} processors fits \
                     PipeDream's memory estimate (each stage's activations and weights times \
                     its in-flight batches, counted over the processors the partition uses)",
                    problem.instance.len()
                ),
                lower_bound: None,
            });
        };
        let allocation = part.allocation().ok_or_else(|| {
            crate::Error::internal("a straight PipeDream partition has a replica")
        })?;
        let scheduled = one_f_one_b_star::schedule(
            problem.instance,
            problem.platform,
            &allocation,
            self.period,
        );
        match scheduled {
            Ok(r) => {
                let mut sol = Solution::new(allocation, Some(r.pattern));
                sol.planned_period = Some(part.objective);
                if stopped {
                    sol.stopped_at_limit = true;
                    sol.messages.push(
                        "the time limit stopped the DP before it tried every number of \
                         processors: the best partition of those it tried"
                            .into(),
                    );
                }
                Ok(Outcome::Found(sol))
            }
            Err(e) => Ok(Outcome::Infeasible {
                reason: format!(
                    "PipeDream's partition ({} stages, bottleneck {} s) cannot be scheduled: {e}",
                    part.stages.len(),
                    part.objective
                ),
                lower_bound: None,
            }),
        }
    }
}

#[cfg(test)]
#[path = "pipedream_tests.rs"]
mod tests;
