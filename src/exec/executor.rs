//! The replay: every operation of the pattern for every batch, single-threaded, in the
//! order of its planned start time.
//!
//! Batch `b` (0-based, `b < N`) runs operation `o` in period `k = b + h_o`, planned at
//! `k T + t_o`. Operations are executed in increasing planned start (times within 1e-9 T are
//! equal), ties broken by the operation's rank in the batch's dependency order, then by
//! batch. Periods before the first and after the last batch are the pipeline's fill and
//! drain: operations of batches outside `0..N` are skipped. A pattern that breaks a
//! dependency (an F before its input arrived, a B before its F) stops the run with
//! [`ExecError::Schedule`].
//!
//! - F_s: input = the batch's data (s = 0) or the tensor received from stage s-1, made a leaf
//!   that requires gradients; runs the stage's layers with the batch's weight version (leaf
//!   aliases of the version's tensors), keeps the stash (input leaf, output, parameter leaves)
//!   until B_s. The last stage also computes the loss.
//! - CF_s / CB_s: a copy of the tensor into a fresh tensor stands for the transfer.
//! - B_s: `run_backward` of `sum(y * g_up)` (the last stage: the loss) for the input and
//!   weight gradients; weight gradients go to the stage's accumulator, the input gradient to
//!   stage s-1.
//!
//! Memory is tracked at each operation (after F allocates its stash, before B frees it):
//! the stash of every live batch, plus the bytes of the weight versions and accumulators held
//! (see the crate-level rule in [`super`]). A batch's stash on a stage is, on CUDA, what the
//! caching allocator says the stage's forward keeps for its backward (measured once before the
//! run, see `calibrate_stash`); on the CPU, which has no allocator statistics, the bytes of
//! the inputs of the stage's layers (the model's default stash). The device's own peak over
//! the run is reported beside (`device_peak`): one GPU stands in for every processor, so
//! per-processor allocator figures do not exist.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use tch::{Device, Tensor};

use super::{
    alloc, default_window, median, replayed_period, sync, tensor_bytes, Batch, ExecError,
    ExecOptions, ExecReport, Fault, GradientCheck, Network, OpTiming, ProcessorMemory,
};
use crate::judge::memory_peaks;
use crate::model::{Allocation, BatchGraph, OpId, OpKind, Pattern, Plan, Resource};
use crate::units::Bytes;

const GRAD_TOLERANCE: f64 = 1e-4;

type Params = Vec<Vec<Tensor>>;

struct Stash {
    x: Option<Tensor>,
    y: Tensor,
    leaves: Params,
    version: usize,
    bytes: Bytes,
}

struct StageState {
    first: usize,
    last: usize,
    processor: usize,
    versions: BTreeMap<usize, Params>,
    acc: Params,
    acc_window: Option<usize>,
    acc_count: usize,
    live: usize,
    max_live: usize,
}

impl StageState {
    fn weight_bytes(&self) -> Bytes {
        let p = |ps: &Params| -> Bytes { ps.iter().flatten().map(tensor_bytes).sum() };
        self.versions.values().map(p).sum::<Bytes>() + p(&self.acc)
    }
}

/// Runs `plan`'s pattern with `network` on `data` (at least `options.batches` batches) and
/// reports measured against predicted durations, period and memory, and the gradient check.
pub fn execute(
    plan: &Plan,
    network: &Network,
    data: &[Batch],
    options: &ExecOptions,
) -> Result<ExecReport, ExecError> {
    let (pattern, allocation) = executable(plan, network, data, options)?;
    let instance = &plan.instance;
    let n_batches = options.batches;
    let t = pattern.period;
    let graph = BatchGraph::new(instance, &plan.platform, allocation);
    let mut place = Vec::with_capacity(graph.ops.len());
    for op in &graph.ops {
        let p = pattern
            .get(op.id)
            .ok_or_else(|| ExecError::Plan(format!("pattern.ops has no {}", op.id)))?;
        place.push((p.start, p.shift));
    }
    let window = options
        .window
        .unwrap_or_else(|| default_window(pattern))
        .max(1);
    let device = options.device;
    let events = replay_order(&graph, &place, n_batches, t)?;
    let periods_run = match (events.first(), events.last()) {
        (Some(a), Some(z)) => (z.4 - a.4 + 1) as usize,
        _ => 0,
    };
    let mut replay = Replay::new(plan, allocation, network, data, options, window);
    replay.calibrated = calibrate_stash(network, allocation, &data[0], device)?;
    alloc::reset_peak(device);
    let device_base = alloc::requested(device);

    let mut measured: Vec<Vec<f64>> = vec![Vec::new(); graph.ops.len()];
    let wall = Instant::now();
    for &(_, _, b, i, _) in &events {
        sync(device);
        let t0 = Instant::now();
        // Where the operation's own work ends, when it is before bookkeeping for the
        // gradient check.
        let stop = replay.run(graph.ops[i].id, b, t0)?;
        let dt = stop.unwrap_or_else(|| {
            sync(device);
            t0.elapsed().as_secs_f64()
        });
        measured[i].push(dt);
    }
    let wall = wall.elapsed().as_secs_f64();
    let device_peak = alloc::stats(device)
        .zip(device_base)
        .map(|(st, base)| st.requested_peak - base);
    if !replay.stash.is_empty() {
        return Err(ExecError::Schedule(format!(
            "{} stashes left after the run",
            replay.stash.len()
        )));
    }

    let (ops, replay_d) = op_timings(&graph, &mut measured);
    let model_d: Vec<f64> = graph.ops.iter().map(|o| o.duration).collect();
    let replayed = replayed_period(&graph, pattern, &replay_d).unwrap_or(f64::NAN);
    let replayed_model = replayed_period(&graph, pattern, &model_d).unwrap_or(f64::NAN);
    let (pred_peaks, _) = memory_peaks(&graph, t, |i| place[i]);
    let processors = replay.processor_memory(&graph, &pred_peaks);
    let gradients = if options.check_gradients {
        Some(check(
            network,
            data,
            options,
            window,
            &replay.losses,
            &replay.grads,
        )?)
    } else {
        None
    };
    Ok(ExecReport {
        network: network.name.clone(),
        device: format!("{device:?}"),
        batches: n_batches,
        periods_run,
        window,
        predicted_period: t,
        replayed_period: replayed,
        replayed_period_model: replayed_model,
        wall_per_period: wall / periods_run.max(1) as f64,
        ops,
        processors,
        stash_per_batch: replay.calibrated,
        device_peak,
        gradients,
        losses: replay.losses,
    })
}

/// The plan's pattern and allocation, checked against the network, the data and the
/// options: what the replay runs.
fn executable<'p>(
    plan: &'p Plan,
    network: &Network,
    data: &[Batch],
    options: &ExecOptions,
) -> Result<(&'p Pattern, &'p Allocation), ExecError> {
    let pattern = plan
        .pattern
        .as_ref()
        .ok_or_else(|| ExecError::Plan("the plan has no pattern (status planned)".into()))?;
    let Some(allocation) = plan.allocation() else {
        return Err(ExecError::Plan(
            "a Bi-Partition plan (a layer's forward and backward on different workers, with \
             stash and weight transfers) cannot be executed; the executor runs allocations"
                .into(),
        ));
    };
    let instance = &plan.instance;
    allocation
        .check(instance.len(), plan.platform.processors)
        .map_err(|e| ExecError::Plan(e.to_string()))?;
    if network.layers.len() != instance.len() {
        return Err(ExecError::Network(format!(
            "network {} has {} layers but the plan's instance {} has {}",
            network.name,
            network.layers.len(),
            instance.name,
            instance.len()
        )));
    }
    let n_batches = options.batches;
    if n_batches == 0 || data.len() < n_batches {
        return Err(ExecError::Network(format!(
            "{} batches of data for {} batches",
            data.len(),
            n_batches
        )));
    }
    let t = pattern.period;
    if !(t.is_finite() && t > 0.0) {
        return Err(ExecError::Plan(format!("pattern.period is {t}")));
    }
    Ok((pattern, allocation))
}

/// One operation of one batch: (quantized planned start, rank in the batch's dependency
/// order, batch, operation, period).
type Event = (i128, usize, usize, usize, i64);

/// Every operation of every batch in the order the replay runs them (module docs).
fn replay_order(
    graph: &BatchGraph,
    place: &[(f64, i64)],
    n_batches: usize,
    t: f64,
) -> Result<Vec<Event>, ExecError> {
    // Rank of every operation in the batch's dependency order (Kahn).
    let n_ops = graph.ops.len();
    let mut indeg = vec![0usize; n_ops];
    for &(_, v) in &graph.deps {
        indeg[v] += 1;
    }
    let mut rank = vec![usize::MAX; n_ops];
    let mut ready: Vec<usize> = (0..n_ops).filter(|&i| indeg[i] == 0).collect();
    let mut next = 0;
    while let Some(u) = ready.pop() {
        rank[u] = next;
        next += 1;
        for &(a, v) in &graph.deps {
            if a == u {
                indeg[v] -= 1;
                if indeg[v] == 0 {
                    ready.push(v);
                }
            }
        }
    }
    if next != n_ops {
        return Err(ExecError::Plan("the batch graph has a cycle".into()));
    }
    let mut events = Vec::new();
    for (i, &(start, shift)) in place.iter().enumerate() {
        for b in 0..n_batches as i64 {
            let k = b + shift;
            let time = k as f64 * t + start;
            let q = (time / (t * 1e-9)).round() as i128;
            events.push((q, rank[i], b as usize, i, k));
        }
    }
    events.sort();
    Ok(events)
}

/// The measured median of each operation (its processor's, or the model's duration for a
/// transfer, which the replay only copies) beside its prediction, and the durations the
/// replayed period is computed with.
fn op_timings(graph: &BatchGraph, measured: &mut [Vec<f64>]) -> (Vec<OpTiming>, Vec<f64>) {
    let mut ops = Vec::new();
    let mut replay_d = Vec::with_capacity(graph.ops.len());
    for (i, op) in graph.ops.iter().enumerate() {
        let samples = measured[i].len();
        let med = median(&mut measured[i]);
        let processor = match op.resource {
            Resource::Processor(p) => Some(p),
            Resource::Link { .. } => None,
        };
        replay_d.push(if processor.is_some() {
            med
        } else {
            op.duration
        });
        ops.push(OpTiming {
            kind: op.id.kind,
            stage: op.id.stage,
            processor,
            predicted: op.duration,
            measured_median: med,
            samples,
        });
    }
    (ops, replay_d)
}

/// `F0 of batch 3: what`, the operation a replay error names.
fn op_name(id: OpId, b: usize, what: &str) -> String {
    format!("{}{} of batch {b}: {what}", id.kind, id.stage)
}

/// The replay in progress: each stage's weights and accumulators, the stashes of live
/// batches, tensors in flight between stages, memory as tracked, and what the report and
/// the gradient check read (losses, per-layer gradients).
struct Replay<'a> {
    network: &'a Network,
    data: &'a [Batch],
    options: &'a ExecOptions,
    allocation: &'a Allocation,
    instance: &'a crate::model::Instance,
    window: usize,
    stages: Vec<StageState>,
    stash: HashMap<(usize, usize), Stash>,
    fwd_out: HashMap<(usize, usize), Tensor>,
    fwd_ready: HashMap<(usize, usize), Tensor>,
    bwd_out: HashMap<(usize, usize), Tensor>,
    bwd_ready: HashMap<(usize, usize), Tensor>,
    stash_bytes: Vec<f64>,
    /// Per processor: (total, stash, weights) at its largest total.
    peak: Vec<(f64, f64, f64)>,
    losses: Vec<f64>,
    /// Per batch, per layer (0-based) weight gradients, on the CPU, for the check.
    grads: HashMap<(usize, usize), Vec<Tensor>>,
    /// Each stage's stash per batch as the allocator measured it (CUDA only).
    calibrated: Option<Vec<Bytes>>,
}

impl<'a> Replay<'a> {
    fn new(
        plan: &'a Plan,
        allocation: &'a Allocation,
        network: &'a Network,
        data: &'a [Batch],
        options: &'a ExecOptions,
        window: usize,
    ) -> Self {
        let device = options.device;
        let stages: Vec<StageState> = allocation
            .stages
            .iter()
            .map(|st| {
                let init: Params = network.layers[st.first - 1..st.last]
                    .iter()
                    .map(|l| {
                        l.params
                            .iter()
                            .map(|p| p.to_device(device).copy())
                            .collect()
                    })
                    .collect();
                let w1: Params = init
                    .iter()
                    .map(|ps| ps.iter().map(Tensor::copy).collect())
                    .collect();
                let acc: Params = init
                    .iter()
                    .map(|ps| ps.iter().map(Tensor::zeros_like).collect())
                    .collect();
                StageState {
                    first: st.first,
                    last: st.last,
                    processor: st.processor,
                    versions: BTreeMap::from([(0, init), (1, w1)]),
                    acc,
                    acc_window: None,
                    acc_count: 0,
                    live: 0,
                    max_live: 0,
                }
            })
            .collect();
        let procs = plan.platform.processors;
        Replay {
            network,
            data,
            options,
            allocation,
            instance: &plan.instance,
            window,
            stages,
            stash: HashMap::new(),
            fwd_out: HashMap::new(),
            fwd_ready: HashMap::new(),
            bwd_out: HashMap::new(),
            bwd_ready: HashMap::new(),
            stash_bytes: vec![0.0; procs],
            peak: vec![(0.0, 0.0, 0.0); procs],
            losses: vec![f64::NAN; options.batches],
            grads: HashMap::new(),
            calibrated: None,
        }
    }

    /// Batches of window `j`: `window`, fewer for the last.
    fn window_size(&self, j: usize) -> usize {
        self.window.min(self.options.batches - j * self.window)
    }

    /// Processor `p`'s memory now (stashes and weights held), kept when it is its peak.
    fn record(&mut self, p: usize) {
        let w: Bytes = self
            .stages
            .iter()
            .filter(|s| s.processor == p)
            .map(StageState::weight_bytes)
            .sum();
        let total = self.stash_bytes[p] + w;
        if total > self.peak[p].0 {
            self.peak[p] = (total, self.stash_bytes[p], w);
        }
    }

    /// Runs operation `id` of batch `b`, started at `t0`; for a backward, the time its own
    /// work took (the bookkeeping for the gradient check left out).
    fn run(&mut self, id: OpId, b: usize, t0: Instant) -> Result<Option<f64>, ExecError> {
        let s = id.stage;
        match id.kind {
            // Only Bi-Partition's batch graphs have these; an allocation's graph never does.
            OpKind::CS | OpKind::CW => Err(ExecError::Plan(format!(
                "{}: Bi-Partition transfers are not executed (run contiguous or MILP plans)",
                op_name(id, b, "unsupported")
            ))),
            OpKind::F => {
                self.forward(id, b)?;
                Ok(None)
            }
            OpKind::CF => {
                let y = self
                    .fwd_out
                    .remove(&(s, b))
                    .ok_or_else(|| ExecError::Schedule(op_name(id, b, "F has not run")))?;
                self.fwd_ready.insert((s, b), y.copy());
                Ok(None)
            }
            OpKind::CB => {
                let g = self.bwd_out.remove(&(s, b)).ok_or_else(|| {
                    ExecError::Schedule(op_name(id, b, "B of the next stage has not run"))
                })?;
                self.bwd_ready.insert((s, b), g.copy());
                Ok(None)
            }
            OpKind::B => self.backward(id, b, t0).map(Some),
        }
    }

    /// F_s of batch `b`: the stage's layers on its input with the batch's weight version,
    /// the stash kept until B_s, the output sent on (or the loss, on the last stage).
    fn forward(&mut self, id: OpId, b: usize) -> Result<(), ExecError> {
        let (s, window, network, data) = (id.stage, self.window, self.network, self.data);
        let st = &mut self.stages[s];
        let version = b / window;
        let params = st.versions.get(&version).ok_or_else(|| {
            ExecError::Versions(format!(
                "F{s} of batch {b} needs version W_{version} but stage {s} holds {:?}; \
                 window {window} is too small for this pattern",
                st.versions.keys().collect::<Vec<_>>()
            ))
        })?;
        let leaves = as_leaves(params);
        let (input, x) = if s == 0 {
            let src = if self.options.fault == Some(Fault::WrongBatchInput) && b % 2 == 1 {
                b - 1
            } else {
                b
            };
            (data[src].input.shallow_clone(), None)
        } else {
            let r = self
                .fwd_ready
                .remove(&(s - 1, b))
                .ok_or_else(|| ExecError::Schedule(op_name(id, b, "its input has not arrived")))?;
            let leaf = r.detach().set_requires_grad(true);
            (leaf.shallow_clone(), Some(leaf))
        };
        let mut y = input;
        let mut bytes = 0.0;
        for (l, ps) in (st.first..=st.last).zip(&leaves) {
            bytes += tensor_bytes(&y);
            y = (network.layers[l - 1].forward)(ps, &y);
        }
        if let Some(c) = &self.calibrated {
            bytes = c[s];
        }
        if s + 1 == self.allocation.stages.len() {
            y = (network.loss)(&y, &data[b].target);
            self.losses[b] = y.double_value(&[]);
        } else if self.allocation.crosses(s) {
            self.fwd_out.insert((s, b), y.detach());
        } else {
            self.fwd_ready.insert((s, b), y.detach());
        }
        self.stash.insert(
            (s, b),
            Stash {
                x,
                y,
                leaves,
                version,
                bytes,
            },
        );
        st.live += 1;
        st.max_live = st.max_live.max(st.live);
        let p = st.processor;
        self.stash_bytes[p] += bytes;
        self.record(p);
        Ok(())
    }

    /// B_s of batch `b` (started at `t0`): the input and weight gradients, the input's sent
    /// back, the weights' accumulated over the batch's window (and kept for the gradient
    /// check); the window's last batch makes the next weight version. Returns the time the
    /// gradients and their accumulation took.
    fn backward(&mut self, id: OpId, b: usize, t0: Instant) -> Result<f64, ExecError> {
        let s = id.stage;
        let sp = self.stages[s].processor;
        self.record(sp);
        let mut k = self
            .stash
            .remove(&(s, b))
            .ok_or_else(|| ExecError::Schedule(op_name(id, b, "F has not run")))?;
        if self.options.fault == Some(Fault::NewestVersionInBackward { stage: s }) {
            self.recompute_with_newest(&mut k, s, b);
        }
        let (out, n_w) = self.gradients(&k, id, b)?;
        if s > 0 {
            // CB_{s-1} moves it to `bwd_ready`; on the same processor B_{s-1}
            // reads it from `bwd_out` directly.
            self.bwd_out.insert((s - 1, b), out[n_w].shallow_clone());
        }
        let device = self.options.device;
        let st = &mut self.stages[s];
        // The batch's window is the version its F used.
        let j = k.version;
        match st.acc_window {
            Some(w) if w != j => {
                return Err(ExecError::Versions(format!(
                    "B{s} of batch {b} (window {j}) before window {w} finished"
                )))
            }
            _ => st.acc_window = Some(j),
        }
        tch::no_grad(|| {
            for (a, g) in st.acc.iter_mut().flatten().zip(&out[..n_w]) {
                let _ = a.g_add_(g);
            }
        });
        sync(device);
        let stop = t0.elapsed().as_secs_f64();
        if self.options.check_gradients {
            let mut g_it = out[..n_w].iter();
            for (l, acc_l) in (st.first..=st.last).zip(&st.acc) {
                let kept = acc_l
                    .iter()
                    .map(|_| g_it.next().expect("one gradient per parameter"))
                    .map(|g| g.to_device(Device::Cpu))
                    .collect();
                self.grads.insert((b, l - 1), kept);
            }
        }
        st.acc_count += 1;
        st.live -= 1;
        self.stash_bytes[st.processor] -= k.bytes;
        drop(k);
        if self.stages[s].acc_count == self.window_size(j) {
            self.next_version(s, j)?;
        }
        Ok(stop)
    }

    /// The fault `NewestVersionInBackward`, a classic bug: the stage recomputed with the
    /// newest weights at B.
    fn recompute_with_newest(&self, k: &mut Stash, s: usize, b: usize) {
        let (network, data) = (self.network, self.data);
        let newest = self.stages[s]
            .versions
            .values()
            .next_back()
            .expect("two versions");
        k.leaves = newest
            .iter()
            .map(|ps| {
                ps.iter()
                    .map(|p| p.detach().set_requires_grad(true))
                    .collect()
            })
            .collect();
        let mut y = match &k.x {
            Some(x) => x.shallow_clone(),
            None => data[b].input.shallow_clone(),
        };
        let st = &self.stages[s];
        for (l, ps) in (st.first..=st.last).zip(&k.leaves) {
            y = (network.layers[l - 1].forward)(ps, &y);
        }
        if s + 1 == self.allocation.stages.len() {
            y = (network.loss)(&y, &data[b].target);
        }
        k.y = y;
    }

    /// The gradients of a stash's weights (the first `n_w` of the result), then of its
    /// input when it has one: from the loss on the last stage, else from the output with
    /// its upstream gradient.
    fn gradients(
        &mut self,
        k: &Stash,
        id: OpId,
        b: usize,
    ) -> Result<(Vec<Tensor>, usize), ExecError> {
        let s = id.stage;
        let mut inputs: Vec<&Tensor> = k.leaves.iter().flatten().collect();
        if let Some(x) = &k.x {
            inputs.push(x);
        }
        let out = if s + 1 == self.allocation.stages.len() {
            Tensor::f_run_backward(&[&k.y], &inputs, false, false)?
        } else {
            let g = if self.allocation.crosses(s) {
                self.bwd_ready.remove(&(s, b))
            } else {
                self.bwd_out.remove(&(s, b))
            }
            .ok_or_else(|| {
                ExecError::Schedule(op_name(id, b, "its upstream gradient has not arrived"))
            })?;
            // The stage's output with its upstream gradient, as a real pipeline does
            // (no extra op in the graph, unlike backward from `(y * g).sum()`).
            alloc::grad(&k.y, &g, &inputs)
                .map_err(|e| ExecError::Schedule(op_name(id, b, &e.to_string())))?
        };
        let n_w = inputs.len() - k.x.is_some() as usize;
        Ok((out, n_w))
    }

    /// Window `j` complete on stage `s`: W_{j+2} = W_{j+1} - lr G_j, W_j dropped, the
    /// accumulator cleared.
    fn next_version(&mut self, s: usize, j: usize) -> Result<(), ExecError> {
        let lr = self.options.lr;
        let st = &mut self.stages[s];
        let base = st.versions.get(&(j + 1)).ok_or_else(|| {
            ExecError::Versions(format!(
                "stage {s} lacks W_{} at the end of window {j}",
                j + 1
            ))
        })?;
        let new: Params = tch::no_grad(|| {
            base.iter()
                .zip(&st.acc)
                .map(|(ps, gs)| ps.iter().zip(gs).map(|(p, g)| p - g * lr).collect())
                .collect()
        });
        st.versions.remove(&j);
        st.versions.insert(j + 2, new);
        tch::no_grad(|| {
            for a in st.acc.iter_mut().flatten() {
                let _ = a.zero_();
            }
        });
        st.acc_window = None;
        st.acc_count = 0;
        Ok(())
    }

    /// Each processor's tracked peak against the model's (`predicted`), with the model's
    /// buffers added to the measured stashes and weights.
    fn processor_memory(&self, graph: &BatchGraph, predicted: &[Bytes]) -> Vec<ProcessorMemory> {
        let sums = self.instance.sums();
        (0..self.peak.len())
            .map(|p| {
                let w3: Bytes = self
                    .allocation
                    .stages
                    .iter()
                    .filter(|st| st.processor == p)
                    .map(|st| 3.0 * sums.weights(st.first, st.last))
                    .sum();
                let buffers = graph.static_memory[p] - w3;
                let (total, sb, wb) = self.peak[p];
                ProcessorMemory {
                    processor: p,
                    predicted_peak: predicted[p],
                    measured_peak: total + buffers,
                    measured_stash_peak: sb,
                    measured_weights: wb,
                    model_buffers: buffers,
                    max_live: self
                        .stages
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.processor == p)
                        .map(|(i, s)| (i, s.max_live))
                        .collect(),
                    cuda_allocated_peak: None,
                }
            })
            .collect()
    }
}

/// On CUDA: the bytes each stage keeps from its F to its B for one batch, measured like the
/// profiler measures a layer's stash (allocator growth across a forward on a fresh copy of
/// the input, once the handles to that copy and to the output are dropped), with the initial
/// weights on the first batch. `None` on the CPU (no allocator statistics): the executor then
/// counts the inputs of the stage's layers, the model's default stash.
fn calibrate_stash(
    network: &Network,
    allocation: &Allocation,
    batch: &Batch,
    device: Device,
) -> Result<Option<Vec<Bytes>>, ExecError> {
    if alloc::requested(device).is_none() {
        return Ok(None);
    }
    let params: Params = network
        .initial_params(device)
        .into_iter()
        .map(|ps| ps.into_iter().map(|p| p.set_requires_grad(true)).collect())
        .collect();
    // One throwaway training step first: libraries allocate their workspaces (cuBLAS keeps
    // about 33 MiB per handle) through the caching allocator on first use, which the first
    // stage to call them would otherwise be charged with.
    let all: Vec<&Tensor> = params.iter().flatten().collect();
    let loss = (network.loss)(&network.forward(&params, &batch.input), &batch.target);
    Tensor::f_run_backward(&[&loss], &all, false, false)?;
    drop(loss);
    let n = allocation.stages.len();
    let forward = |layers: std::ops::RangeInclusive<usize>, x: &Tensor| {
        layers.fold(x.shallow_clone(), |y, l| {
            (network.layers[l - 1].forward)(&params[l - 1], &y)
        })
    };
    let mut out = Vec::with_capacity(n);
    let mut x = batch.input.shallow_clone();
    for (s, st) in allocation.stages.iter().enumerate() {
        let kept = super::profile::kept_by_autograd(
            device,
            super::profile::leaf_input(&x.copy(), s == 0),
            |x2| {
                let y = forward(st.first..=st.last, x2);
                if s + 1 == n {
                    (network.loss)(&y, &batch.target)
                } else {
                    y
                }
            },
        );
        out.push(kept.unwrap_or(0.0));
        x = tch::no_grad(|| forward(st.first..=st.last, &x));
    }
    Ok(Some(out))
}

/// The sequential reference: batches in order through the whole chain, with the same
/// version rule, gradients compared batch by batch and layer by layer.
fn check(
    network: &Network,
    data: &[Batch],
    options: &ExecOptions,
    window: usize,
    losses: &[f64],
    grads: &HashMap<(usize, usize), Vec<Tensor>>,
) -> Result<GradientCheck, ExecError> {
    let n = options.batches;
    let device = options.device;
    let init = network.initial_params(device);
    let mut versions: BTreeMap<usize, Params> = BTreeMap::new();
    versions.insert(
        1,
        init.iter()
            .map(|ps| ps.iter().map(Tensor::copy).collect())
            .collect(),
    );
    versions.insert(0, init);
    let mut worst = 0.0f64;
    let mut worst_at = None;
    let mut worst_loss = 0.0f64;
    let mut j = 0;
    while j * window < n {
        let w = versions.get(&j).expect("W_j exists").shallow_clone_params();
        let mut acc: Params = w
            .iter()
            .map(|ps| ps.iter().map(Tensor::zeros_like).collect())
            .collect();
        for (b, batch) in data
            .iter()
            .enumerate()
            .take(n.min((j + 1) * window))
            .skip(j * window)
        {
            let leaves = as_leaves(&w);
            let y = network.forward(&leaves, &batch.input);
            let loss = (network.loss)(&y, &batch.target);
            let lv = loss.double_value(&[]);
            worst_loss = worst_loss.max((losses[b] - lv).abs() / lv.abs().max(1e-30));
            let inputs: Vec<&Tensor> = leaves.iter().flatten().collect();
            let g = Tensor::f_run_backward(&[loss], &inputs, false, false)?;
            let mut it = g.iter();
            for (l, acc_l) in acc.iter_mut().enumerate() {
                let piped = grads.get(&(b, l));
                for (pi, a) in acc_l.iter_mut().enumerate() {
                    let g = it.next().expect("one gradient per parameter");
                    tch::no_grad(|| {
                        let _ = a.g_add_(g);
                    });
                    let rel = match piped.and_then(|v| v.get(pi)) {
                        Some(pg) => {
                            let r = g.to_device(Device::Cpu);
                            let diff = (pg - &r).abs().max().double_value(&[]);
                            let scale = r.abs().max().double_value(&[]).max(1e-30);
                            diff / scale
                        }
                        None => f64::INFINITY,
                    };
                    if rel > worst || rel.is_nan() {
                        worst = if rel.is_nan() { f64::INFINITY } else { rel };
                        worst_at = Some((b, l + 1));
                    }
                }
            }
        }
        let base = versions.get(&(j + 1)).expect("W_{j+1} exists");
        let lr = options.lr;
        let new: Params = tch::no_grad(|| {
            base.iter()
                .zip(&acc)
                .map(|(ps, gs)| ps.iter().zip(gs).map(|(p, g)| p - g * lr).collect())
                .collect()
        });
        versions.remove(&j);
        versions.insert(j + 2, new);
        j += 1;
    }
    Ok(GradientCheck {
        max_relative_error: worst,
        max_loss_relative_error: worst_loss,
        tolerance: GRAD_TOLERANCE,
        passed: worst <= GRAD_TOLERANCE && worst_loss <= GRAD_TOLERANCE,
        worst: worst_at,
    })
}

trait ShallowParams {
    fn shallow_clone_params(&self) -> Params;
}

impl ShallowParams for Params {
    fn shallow_clone_params(&self) -> Params {
        self.iter()
            .map(|ps| ps.iter().map(Tensor::shallow_clone).collect())
            .collect()
    }
}

/// Detached copies of a weight version that require gradients: the leaves one forward and
/// backward accumulate into.
fn as_leaves(params: &Params) -> Params {
    params
        .iter()
        .map(|ps| {
            ps.iter()
                .map(|p| p.detach().set_requires_grad(true))
                .collect()
        })
        .collect()
}
