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
//!   exponentially many; we run it on the chain the network was linearized into
//!   ([`crate::io::pipedream`]), so a cut is allowed only between consecutive chain layers.
//!   On a chain both are the same program; on a DAG ours sees fewer cuts and is much faster.
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

use serde::Serialize;
use serde_json::{json, Value};

use crate::algorithm::api::{Outcome, Planner, Problem, Solution};
use crate::error::InputError;
use crate::model::{Allocation, Instance, Stage};
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
}

/// The DP table of one level.
struct Table {
    n: usize,
    /// Components at this level (N).
    machines: usize,
    /// Rows (first layers) computed: 1 at the top level, `n` below.
    rows: usize,
    /// `A(i, j, m)` at `[(i * n + j) * N + m]`, `m` 0-based (m + 1 components); infinite
    /// where PipeDream has `None`.
    time: Vec<f64>,
    /// The last stage starts at layer `split` (0: no split, the whole range is one stage).
    split: Vec<u32>,
    /// The prefix's component index (m - m') when split.
    prev: Vec<u16>,
    /// Replicas of the last stage (m' when split, m + 1 otherwise).
    replicas: Vec<u16>,
}

impl Table {
    fn at(&self, i: usize, j: usize, m: usize) -> usize {
        (i * self.n + j) * self.machines + m
    }
}

/// Runs PipeDream's dynamic program on `instance` (see the module documentation).
pub fn partition(
    instance: &Instance,
    config: &PipeDreamConfig,
) -> Result<PipeDreamPartition, PipeDreamError> {
    config.check()?;
    instance.check()?;
    let n = instance.len();
    let sums = instance.sums();
    // Memory sums (activations + weights) of any range, from prefix sums.
    let mem = |i: usize, j: usize| sums.stash(i + 1, j + 1) + sums.weights(i + 1, j + 1);
    let ratio = config.activation_compression;

    // Level-1 times: the chain's compute times, dense.
    let mut compute = vec![f64::INFINITY; n * n];
    for i in 0..n {
        for j in i..n {
            compute[i * n + j] = sums.u(i + 1, j + 1);
        }
    }
    let mut tables: Vec<Table> = Vec::with_capacity(config.levels.len());
    let mut inner = 1usize;
    for (li, level) in config.levels.iter().enumerate() {
        let last_level = li + 1 == config.levels.len();
        let t = solve_level(
            n, &compute, &sums, &mem, level, inner, config, ratio, last_level,
        );
        if !last_level {
            let top = level.processors - 1;
            for i in 0..n {
                for j in i..n {
                    compute[i * n + j] = t.time[t.at(i, j, top)];
                }
            }
        }
        inner = level.processors;
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
    let stages: Vec<PipeDreamStage> = ranges
        .iter()
        .map(|&(i, j, r)| PipeDreamStage {
            first: i + 1,
            last: j + 1,
            replicas: r,
            compute: sums.u(i + 1, j + 1),
        })
        .collect();
    let processors_used = stages.iter().map(|s| s.replicas).sum();
    Ok(PipeDreamPartition {
        objective,
        stages,
        processors_used,
    })
}

#[allow(clippy::too_many_arguments)]
fn solve_level(
    n: usize,
    compute: &[f64],
    sums: &crate::model::ChainSums,
    mem: &dyn Fn(usize, usize) -> Bytes,
    level: &Level,
    inner: usize,
    config: &PipeDreamConfig,
    ratio: Option<f64>,
    last_level: bool,
) -> Table {
    let nm = level.processors;
    let b = level.bandwidth;
    let rows = if last_level { 1 } else { n };
    let size = rows * n * nm;
    let mut t = Table {
        n,
        machines: nm,
        rows,
        time: vec![f64::INFINITY; size],
        split: vec![0; size],
        prev: vec![0; size],
        replicas: vec![0; size],
    };
    let memory_ok = |stash_weights: Bytes, in_flight: usize| match config.memory {
        Some(limit) => in_flight as f64 * stash_weights <= limit,
        None => true,
    };
    // Unsplit ranges: one stage on m + 1 replicas.
    let max_m = if config.straight { 1 } else { nm };
    for i in 0..t.rows {
        for j in i..n {
            let c = compute[i * n + j];
            let w = sums.weights(i + 1, j + 1);
            let sw = mem(i, j);
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
    // Splits.
    for i in 0..t.rows {
        for m in 1..nm {
            for j in i + 1..n {
                let e = t.at(i, j, m);
                let mut best = t.time[e];
                let mut best_split = 0u32;
                let mut best_prev = 0u16;
                let mut best_rep = t.replicas[e];
                if config.fewer_machines {
                    let f = t.at(i, j, m - 1);
                    if t.time[f] < best || !best.is_finite() {
                        best = t.time[f];
                        best_split = t.split[f];
                        best_prev = t.prev[f];
                        best_rep = t.replicas[f];
                    }
                }
                let max_mp = if config.straight { 1 } else { m };
                for k in i..j {
                    let last = compute[(k + 1) * n + j];
                    if !last.is_finite() {
                        continue;
                    }
                    let w = sums.weights(k + 2, j + 1);
                    let sw = mem(k + 1, j);
                    let a_in = sums.a(k + 1);
                    let a_out = if j + 1 < n { Some(sums.a(j + 1)) } else { None };
                    for mp in 1..=max_mp {
                        let prefix = t.time[t.at(i, k, m - mp)];
                        if !prefix.is_finite() {
                            continue;
                        }
                        if !memory_ok(sw, (nm - (m + 1)).div_ceil(mp)) {
                            continue;
                        }
                        let mpf = mp as f64;
                        let stage = (last + (4.0 * (mpf - 1.0) * w) / (b * mpf)) / mpf;
                        let mut pt = prefix.max(stage);
                        if let Some(r) = ratio {
                            pt = pt.max((2.0 * a_in) / (b * mpf) / r);
                            if let Some(a) = a_out {
                                pt = pt.max((2.0 * a) / (b * mpf) / r);
                            }
                        }
                        if pt < best {
                            best = pt;
                            best_split = (k + 1) as u32;
                            best_prev = (m - mp) as u16;
                            best_rep = mp as u16;
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
    t
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
}

impl Planner for PipeDreamPlanner {
    fn name(&self) -> String {
        "pipedream".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.platform.check()?;
        let budget = problem.platform.processors;
        let mut best: Option<PipeDreamPartition> = None;
        let mut config_error = None;
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
            match partition(problem.instance, &config) {
                Ok(p) => {
                    if best.as_ref().is_none_or(|b| p.objective < b.objective) {
                        best = Some(p);
                    }
                }
                Err(PipeDreamError::NoPartition(_)) => {}
                Err(e) => {
                    config_error = Some(e);
                    break;
                }
            }
        }
        match config_error {
            Some(PipeDreamError::Config(e)) => return Err(e.into()),
            Some(e @ PipeDreamError::NoPartition(_)) => return Err(crate::Error::internal(e)),
            None => {}
        }
        let Some(part) = best else {
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
mod tests {
    use super::*;
    use crate::model::Layer;

    fn chain(times: &[f64], outs: &[f64]) -> Instance {
        Instance {
            name: "t".into(),
            input: 1.0,
            layers: times
                .iter()
                .zip(outs)
                .enumerate()
                .map(|(i, (&t, &o))| Layer {
                    name: format!("l{i}"),
                    fwd: t / 3.0,
                    bwd: 2.0 * t / 3.0,
                    weights: 1.0,
                    out: o,
                    stash: None,
                    stash_overlap: None,
                })
                .collect(),
            stash_shared: Vec::new(),
            meta: Default::default(),
        }
    }

    #[test]
    fn balanced_straight_split() {
        let i = chain(&[3.0, 3.0, 3.0, 3.0], &[0.0; 4]);
        let p = partition(&i, &PipeDreamConfig::straight(2, 1.0)).unwrap();
        assert_eq!(p.objective, 6.0);
        assert_eq!(p.stages.len(), 2);
        assert_eq!((p.stages[0].first, p.stages[0].last), (1, 2));
        assert_eq!(p.processors_used, 2);
    }

    #[test]
    fn transfers_count_twice_the_activation() {
        // Cutting after layer 1 costs 2 * 5 / 1 = 10 > 6 + 6: the only 2-stage cuts are
        // after layer 1 (10), 2 (2 a(2) = 0 -> max(6,6) = 6) or 3.
        let i = chain(&[3.0, 3.0, 3.0, 3.0], &[5.0, 0.0, 5.0, 0.0]);
        let p = partition(&i, &PipeDreamConfig::straight(2, 1.0)).unwrap();
        assert_eq!(p.objective, 6.0);
        let mut c = PipeDreamConfig::straight(2, 1.0);
        let i = chain(&[3.0, 3.0, 3.0, 3.0], &[5.0, 5.0, 5.0, 0.0]);
        let p = partition(&i, &c).unwrap();
        assert_eq!(p.objective, 10.0);
        c.activation_compression = None;
        assert_eq!(partition(&i, &c).unwrap().objective, 6.0);
    }

    #[test]
    fn too_few_layers_for_a_straight_pipeline() {
        let i = chain(&[1.0, 1.0], &[0.0; 2]);
        let c = PipeDreamConfig::straight(3, 1.0);
        assert!(matches!(
            partition(&i, &c),
            Err(PipeDreamError::NoPartition(_))
        ));
        let mut c = c;
        c.fewer_machines = true;
        let p = partition(&i, &c).unwrap();
        assert_eq!(p.objective, 1.0);
        assert_eq!(p.processors_used, 2);
    }

    #[test]
    fn bad_config_names_the_flag() {
        let i = chain(&[1.0], &[0.0]);
        let mut c = PipeDreamConfig::straight(0, 1.0);
        match partition(&i, &c) {
            Err(PipeDreamError::Config(e)) => assert_eq!(e.source, "--processors"),
            other => panic!("{other:?}"),
        }
        c = PipeDreamConfig::straight(1, -1.0);
        match partition(&i, &c) {
            Err(PipeDreamError::Config(e)) => assert_eq!(e.source, "--bandwidth"),
            other => panic!("{other:?}"),
        }
    }
}
