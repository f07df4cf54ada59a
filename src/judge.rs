//! The one judge (docs/model.md section 8) for periodic patterns: validity, period, exact
//! memory peaks and resource loads. Every algorithm's plan goes through [`judge`]; the
//! period and peaks an algorithm reports are the ones computed here.
//!
//! # Exactness
//! The checks are exact up to one relative tolerance, [`TOLERANCE`] times the period, used
//! only to absorb floating-point rounding of sums of profiled durations (a dependency that
//! is late by less than a nanosecond in a period of a second is accepted; profiled times
//! have microsecond resolution). Live-batch counts are computed by comparisons between the
//! event times of the pattern itself, so the memory peak is exact: no sampling of time.
//!
//! # Memory (docs/model.md section 6)
//! For stage `s` with forward start `t_F`, shift `h_F`, and backward end
//! `t_B + d_B = k T + r` (`0 <= r < T`), shift `h_B`, the number of live batches at time
//! `tau` in `[0, T)` of the steady state is
//! `live_s(tau) = [tau >= t_F] - [tau >= r] + k + h_B - h_F`
//! (batches whose F has started by `tau`, minus those whose B has finished by `tau`). It is
//! a step function changing only at `t_F` and `r`, so the peak is the largest value at
//! those points. Two instants closer than the tolerance are the same instant: a backward
//! that ends within it of a forward's start has finished when that forward starts.
//!
//! A batch holds its stash at the instant its forward starts, whatever its backward does:
//! at the start of `F_s`, stage `s` counts at least one batch (the peak is evaluated at each
//! forward start separately, as the scheduling MILP's rows are). This only matters for a
//! window of zero length (a stage whose forward and backward both take zero time, its
//! backward right after its forward), which the formula alone would count at no instant; its
//! stash is allocated all the same, as the scheduling MILP, the global bound and the
//! synchronous simulator count it (docs/model.md section 6).

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

use crate::model::{
    Allocation, BatchGraph, Instance, OpId, Pattern, PatternOp, Plan, Platform, Resource,
};
use crate::units::{Bytes, Seconds};

/// Relative tolerance (times the period) on time comparisons.
pub const TOLERANCE: f64 = 1e-9;

/// One reason a plan is not valid.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// The pattern does not describe the allocation's operations (missing, duplicated or
    /// unknown operation, start outside `[0, T)`, bad period).
    Structure { message: String },
    /// `before -> after` does not hold: for batch 0, `before` ends after `after` starts.
    Dependency {
        before: String,
        after: String,
        /// Period in which `before` runs batch 0.
        before_period: i64,
        /// Period in which `after` runs batch 0.
        after_period: i64,
        before_end: Seconds,
        after_start: Seconds,
    },
    /// Two operations overlap on a resource in the steady state.
    Overlap {
        resource: String,
        first: String,
        first_batch: i64,
        second: String,
        second_batch: i64,
        /// The period in which the overlap is observed (batches numbered from 0 at F of
        /// the first stage in period 0).
        period: i64,
        /// Time within that period where both run.
        at: Seconds,
    },
    /// A processor's memory peak exceeds M.
    Memory {
        processor: usize,
        peak: Bytes,
        limit: Bytes,
        at: Seconds,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Structure { message } => write!(f, "malformed pattern: {message}"),
            Violation::Dependency { before, after, before_period, after_period, before_end, after_start } => write!(
                f,
                "dependency {before} -> {after} broken: on batch 0, {before} runs in period {before_period} and ends at {before_end:.9} s, \
                 but {after} runs in period {after_period} and starts at {after_start:.9} s (late by {:.3e} s)",
                before_end - after_start
            ),
            Violation::Overlap { resource, first, first_batch, second, second_batch, period, at } => write!(
                f,
                "overlap on {resource}: {first} on batch {first_batch} and {second} on batch {second_batch} both run at {at:.9} s into period {period}"
            ),
            Violation::Memory { processor, peak, limit, at } => write!(
                f,
                "processor {processor} needs {} at {at:.9} s into the period, above the memory M = {} (by {:.0} bytes)",
                crate::units::ShowBytes(*peak),
                crate::units::ShowBytes(*limit),
                peak - limit
            ),
        }
    }
}

/// How busy one resource is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceLoad {
    pub resource: String,
    /// Seconds of work per period.
    pub busy: Seconds,
    /// `busy / T`.
    pub utilization: f64,
}

/// The judge's verdict on a pattern.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    pub valid: bool,
    /// The pattern's period (the validated period when `valid`).
    pub period: Seconds,
    /// Exact memory peak of every processor, in bytes (all processors, used or not).
    pub peak_memory: Vec<Bytes>,
    /// Time within the period where each processor's peak is reached.
    pub peak_at: Vec<Seconds>,
    pub loads: Vec<ResourceLoad>,
    pub violations: Vec<Violation>,
}

impl Judgement {
    /// The first violation, for messages.
    pub fn first_violation(&self) -> Option<&Violation> {
        self.violations.first()
    }
}

/// Judges a plan file on its placement's batch graph ([`Plan::batch_graph`]). A plan
/// without a pattern is judged invalid (structure).
pub fn judge_plan(plan: &Plan) -> Judgement {
    match &plan.pattern {
        Some(p) => judge_pattern(plan.batch_graph(), plan.platform.memory, p),
        None => Judgement {
            valid: false,
            period: f64::NAN,
            peak_memory: vec![],
            peak_at: vec![],
            loads: vec![],
            violations: vec![Violation::Structure {
                message: "the plan has no pattern (status planned)".into(),
            }],
        },
    }
}

/// Judges a pattern against a placement's batch graph, or reports the placement's error
/// as a malformed structure (what [`judge`] does for a malformed allocation).
pub fn judge_pattern(
    graph: Result<BatchGraph, crate::InputError>,
    memory: Bytes,
    pattern: &Pattern,
) -> Judgement {
    match graph {
        Ok(g) => judge_graph(&g, memory, pattern),
        Err(e) => malformed(pattern, e),
    }
}

/// The verdict on a plan whose structure (allocation or placement) is malformed.
fn malformed(pattern: &Pattern, error: impl std::fmt::Display) -> Judgement {
    Judgement {
        valid: false,
        period: pattern.period,
        peak_memory: vec![],
        peak_at: vec![],
        loads: vec![],
        violations: vec![Violation::Structure {
            message: error.to_string(),
        }],
    }
}

/// Fixed memory of every processor: weights (3 W per layer held) and communication buffers.
pub fn static_memory(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
) -> Vec<Bytes> {
    BatchGraph::new(instance, platform, allocation).static_memory
}

/// Judges a periodic pattern for an allocation (docs/model.md sections 4 to 6).
pub fn judge(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    pattern: &Pattern,
) -> Judgement {
    if let Err(e) = allocation.check(instance.len(), platform.processors) {
        return malformed(pattern, e);
    }
    let graph = BatchGraph::new(instance, platform, allocation);
    judge_graph(&graph, platform.memory, pattern)
}

/// Sends a planner's pattern through the judge; a rejection is an internal error of the
/// planner named by `what` (never a reason to loosen the judge).
pub(crate) fn ensure_judged_valid(
    instance: &Instance,
    platform: &Platform,
    allocation: &Allocation,
    pattern: &Pattern,
    what: &str,
) -> crate::error::Result<()> {
    let j = judge(instance, platform, allocation, pattern);
    if !j.valid {
        return Err(crate::Error::internal(format!(
            "{what}'s pattern at T = {} fails the judge: {}",
            pattern.period,
            j.violations
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(())
}

/// Judges a pattern against any batch graph: the one judge behind [`judge`], also used by
/// plans whose operations are not the standard stages (Bi-Partition).
pub fn judge_graph(graph: &BatchGraph, memory: Bytes, pattern: &Pattern) -> Judgement {
    let t = pattern.period;
    let mut out = Judgement {
        valid: false,
        period: t,
        peak_memory: vec![],
        peak_at: vec![],
        loads: vec![],
        violations: vec![],
    };
    if !(t.is_finite() && t > 0.0) {
        out.violations.push(Violation::Structure {
            message: format!("the period {t} is not a positive number"),
        });
        return out;
    }
    let placed = match placed_operations(graph, pattern) {
        Ok(placed) => placed,
        Err(violations) => {
            out.violations = violations;
            return out;
        }
    };
    let eps = TOLERANCE * t;

    // 1. Dependencies, for every batch: h_o T + t_o + d_o <= h_o' T + t_o'.
    for &(a, b) in &graph.deps {
        let (pa, pb) = (placed[a], placed[b]);
        let end = pa.shift as f64 * t + pa.start + graph.ops[a].duration;
        let start = pb.shift as f64 * t + pb.start;
        if end > start + eps {
            out.violations.push(Violation::Dependency {
                before: graph.ops[a].id.to_string(),
                after: graph.ops[b].id.to_string(),
                before_period: pa.shift,
                after_period: pb.shift,
                before_end: end,
                after_start: start,
            });
        }
    }

    // 2. No overlap modulo T on any resource.
    resource_overlaps(graph, pattern, &placed, &mut out);

    // 3. Memory peaks.
    let (peaks, peak_at) = memory_peaks(graph, t, |i| {
        let p = placed[i];
        (p.start, p.shift)
    });
    for (p, (&peak, &when)) in peaks.iter().zip(&peak_at).enumerate() {
        if peak > memory * (1.0 + 1e-12) {
            out.violations.push(Violation::Memory {
                processor: p,
                peak,
                limit: memory,
                at: when,
            });
        }
    }
    out.peak_memory = peaks;
    out.peak_at = peak_at;
    out.valid = out.violations.is_empty();
    out
}

/// The structure of a pattern at a positive period: exactly one entry per operation of
/// `graph`, starts in [0, T). Each operation's entry, or every structure violation.
fn placed_operations<'p>(
    graph: &BatchGraph,
    pattern: &'p Pattern,
) -> Result<Vec<&'p PatternOp>, Vec<Violation>> {
    let t = pattern.period;
    let mut violations = Vec::new();
    let mut structure = |message: String| {
        violations.push(Violation::Structure { message });
    };
    let mut entry: Vec<Option<usize>> = vec![None; graph.ops.len()];
    let index: BTreeMap<OpId, usize> = graph
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id, i))
        .collect();
    for (j, po) in pattern.ops.iter().enumerate() {
        match index.get(&po.id()) {
            None => structure(format!(
                "ops[{j}] is {} but the allocation has no such operation",
                po.id()
            )),
            Some(&i) if entry[i].is_some() => {
                structure(format!("ops[{j}]: {} appears twice", po.id()))
            }
            Some(&i) => entry[i] = Some(j),
        }
        if !(po.start.is_finite() && po.start >= 0.0 && po.start < t) {
            structure(format!(
                "ops[{j}] ({}) starts at {} outside [0, T = {t})",
                po.id(),
                po.start
            ));
        }
    }
    for (i, e) in entry.iter().enumerate() {
        if e.is_none() {
            structure(format!("{} is missing from the pattern", graph.ops[i].id));
        }
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    Ok(entry
        .iter()
        .map(|e| &pattern.ops[e.expect("checked above")])
        .collect())
}

/// Each resource's load into `out`, and every overlap modulo T on it (an operation longer
/// than the period overlaps itself).
fn resource_overlaps(
    graph: &BatchGraph,
    pattern: &Pattern,
    placed: &[&PatternOp],
    out: &mut Judgement,
) {
    let t = pattern.period;
    let eps = TOLERANCE * t;
    let max_shift = pattern
        .ops
        .iter()
        .map(|o| o.shift)
        .max()
        .unwrap_or(0)
        .max(0)
        + 1;
    let mut by_resource: BTreeMap<Resource, Vec<usize>> = BTreeMap::new();
    for (i, op) in graph.ops.iter().enumerate() {
        by_resource.entry(op.resource).or_default().push(i);
    }
    for (resource, ops) in &by_resource {
        let busy: Seconds = ops.iter().map(|&i| graph.ops[i].duration).sum();
        out.loads.push(ResourceLoad {
            resource: resource.to_string(),
            busy,
            utilization: busy / t,
        });
        // Pieces [s, e) within [0, T], with the operation and how many periods ago it started.
        let mut pieces: Vec<(f64, f64, usize, i64)> = Vec::new();
        for &i in ops {
            let d = graph.ops[i].duration;
            let s = placed[i].start;
            if d <= 0.0 {
                continue;
            }
            if d > t + eps {
                let id = graph.ops[i].id.to_string();
                out.violations.push(Violation::Overlap {
                    resource: resource.to_string(),
                    first: id.clone(),
                    first_batch: max_shift - 1 - placed[i].shift,
                    second: id,
                    second_batch: max_shift - placed[i].shift,
                    period: max_shift,
                    at: s,
                });
                continue;
            }
            if s + d <= t + eps {
                pieces.push((s, (s + d).min(t), i, 0));
            } else {
                pieces.push((s, t, i, 0));
                pieces.push((0.0, s + d - t, i, 1));
            }
        }
        pieces.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
        let mut reach: Option<(f64, usize, i64)> = None; // furthest end so far
        for &(s, e, i, ago) in &pieces {
            if let Some((end, j, jago)) = reach {
                if s + eps < end {
                    let k = max_shift;
                    out.violations.push(Violation::Overlap {
                        resource: resource.to_string(),
                        first: graph.ops[j].id.to_string(),
                        first_batch: k - jago - placed[j].shift,
                        second: graph.ops[i].id.to_string(),
                        second_batch: k - ago - placed[i].shift,
                        period: k,
                        at: s,
                    });
                }
            }
            if reach.is_none_or(|(end, _, _)| e > end) {
                reach = Some((e, i, ago));
            }
        }
    }
}

/// Exact memory peak of every processor for a pattern, and the time in the period where it
/// is reached, for period `t`. `place(i)` gives `(start, shift)` of operation `i` of `graph`.
pub fn memory_peaks(
    graph: &BatchGraph,
    t: Seconds,
    place: impl Fn(usize) -> (Seconds, i64),
) -> (Vec<Bytes>, Vec<Seconds>) {
    let eps = TOLERANCE * t;
    let mut peaks = graph.static_memory.clone();
    let mut peak_at = vec![0.0; graph.processors];
    for p in 0..graph.processors {
        // (bytes, t_F, r, base, allocating operation) for every item held on p, residues
        // snapped as described above.
        let mut items = Vec::new();
        for h in graph.held.iter().filter(|h| h.processor == p) {
            let (tf, hf) = place(h.from);
            let (tb, hb) = place(h.until);
            let (tf, kf) = residue(tf, t, eps);
            let (r, kb) = residue(tb + graph.ops[h.until].duration, t, eps);
            items.push((h.bytes, tf, r, kb - kf + hb - hf, h.from));
        }
        if items.is_empty() {
            continue;
        }
        let mut best = f64::NEG_INFINITY;
        let mut best_at = 0.0;
        // Every forward start (with the operation starting there) and every backward end.
        let events: Vec<(f64, Option<usize>)> = items
            .iter()
            .flat_map(|&(_, tf, r, _, from)| [(tf.max(0.0), Some(from)), (r.max(0.0), None)])
            .collect();
        for &(tau, starting) in &events {
            let act: f64 = items
                .iter()
                .map(|&(bytes, tf, r, base, from)| {
                    let mut live = (tau + eps >= tf) as i64 - (tau + eps >= r) as i64 + base;
                    // The batch whose forward starts at `tau` holds its stash then, even when
                    // its backward ends at that same instant (a window of zero length).
                    if starting == Some(from) {
                        live = live.max(1);
                    }
                    // A backward placed before its forward (an invalid pattern, reported
                    // as such) would count a negative number of batches: none are held.
                    bytes * live.max(0) as f64
                })
                .sum();
            if act > best || (act == best && tau < best_at) {
                best = act;
                best_at = tau;
            }
        }
        peaks[p] += best;
        peak_at[p] = best_at;
    }
    (peaks, peak_at)
}

/// `x = k T + r` with `r` in `[-eps, T - eps)`: a time within `eps` before a period boundary
/// counts as on it, the same tolerance the dependency checks use.
fn residue(x: Seconds, t: Seconds, eps: Seconds) -> (Seconds, i64) {
    let mut k = (x / t).floor();
    let mut r = x - k * t;
    if r >= t - eps {
        r -= t;
        k += 1.0;
    }
    (r, k as i64)
}
