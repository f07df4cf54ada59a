//! The profiler: measures a network of `nets/` with libtorch, one chain
//! layer (block) at a time, and writes an instance (docs/model.md section 1) with
//! provenance.
//!
//! Per chain layer `l`, on the real input (the previous layer's output of the same batch):
//! - `fwd`: the forward pass with autograd recording (what training runs), median over
//!   `reps` repetitions after `warmup`, each timed between two device synchronizations;
//! - `bwd`: the backward pass from a random upstream gradient of the output's shape to the
//!   layer's parameters and its input (not for layer 1, whose input is data), through
//!   `torch::autograd::grad` (no extra op in the graph), timed the same way;
//! - `out`, `weights`: bytes of the output tensor and of the parameters;
//! - `stash`: on CUDA, bytes the caching allocator still holds for client code after the
//!   forward, once the caller dropped its handles to the layer's input and output, that is
//!   what autograd keeps until the backward (the input, which the leaf's gradient
//!   accumulator holds when it needs a gradient, saved outputs, statistics, masks, indices).
//!   This is `requested` bytes (exact), read through the shim of [`super::alloc`]. The CPU
//!   has no allocator statistics: there the stash is the analytic model's (`meta.stash` says
//!   which);
//! - `stash_overlap`: what layer `l` and `l+1` both keep, `kept(l) + kept(l+1) - kept(l and
//!   l+1 run together)` (CUDA; analytic on the CPU).
//!
//! The whole network is measured with the same binary, the same way: a forward pass over all
//! layers and a training step (forward, loss, backward to every parameter; no optimizer
//! update, which the model does not count in `u_F`/`u_B` either). [`ProfileReport`] compares
//! the sums of the layers with these wholes and the analytic model
//! (`nets::analytic`) with the measurement, layer by layer.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map};
use tch::{Device, Tensor};

use super::torchnet::{self, BuildOptions};
use super::{alloc, median, sync, tensor_bytes, ExecError};
use crate::model::{Instance, Layer};
use crate::nets::{self, analytic, DType, DeviceModel};
use crate::units::{Bytes, Seconds};

/// How to profile.
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    pub batch: usize,
    pub dtype: DType,
    pub device: Device,
    /// Untimed repetitions before the timed ones (cuDNN algorithm choice, allocator warm-up).
    pub warmup: usize,
    /// Timed repetitions; the median is kept.
    pub reps: usize,
    /// Calls per timed repetition, back to back between the two synchronizations (the
    /// repetition's time is their mean). More than 1 hides the launch and synchronization
    /// latency that a lone small op pays and a whole network does not.
    pub back_to_back: usize,
    pub seed: i64,
    /// The device's name for `meta` (e.g. from nvidia-smi); libtorch does not give it.
    pub device_name: Option<String>,
    /// Roofline device model for the analytic comparison.
    pub device_model: DeviceModel,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            batch: 8,
            dtype: DType::F32,
            device: Device::Cpu,
            warmup: 3,
            reps: 10,
            back_to_back: 1,
            seed: 0,
            device_name: None,
            device_model: DeviceModel::h100(),
        }
    }
}

/// One chain layer: measured, and what the analytic model says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerMeasure {
    pub name: String,
    pub fwd: Seconds,
    pub bwd: Seconds,
    /// Smallest and largest timed forward (spread of the repetitions).
    pub fwd_range: (Seconds, Seconds),
    pub bwd_range: (Seconds, Seconds),
    pub weights: Bytes,
    pub out: Bytes,
    /// Measured stash (CUDA only).
    pub stash_measured: Option<Bytes>,
    /// Measured bytes shared with the next layer's stash (CUDA only; see
    /// `model::Layer::stash_overlap`).
    pub overlap_measured: Option<Bytes>,
    pub analytic_overlap: Bytes,
    pub analytic_fwd: Seconds,
    pub analytic_bwd: Seconds,
    pub analytic_stash: Bytes,
    pub analytic_out: Bytes,
    pub analytic_weights: Bytes,
}

/// The whole network against the sum of its layers, and the analytic model against the
/// measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileReport {
    pub model: String,
    pub image: Option<usize>,
    pub batch: usize,
    pub dtype: String,
    pub device: String,
    /// `block` (layers are chain layers) or `op` (layers are ops, without stash fields:
    /// sizes are not measured per op).
    #[serde(default = "block_granularity")]
    pub granularity: String,
    /// Calls per timed repetition ([`ProfileOptions::back_to_back`]).
    #[serde(default = "one")]
    pub back_to_back: usize,
    pub layers: Vec<LayerMeasure>,
    /// Sum over layers of `fwd`.
    pub sum_fwd: Seconds,
    /// The whole network's forward pass (median).
    pub whole_forward: Seconds,
    /// `sum_fwd / whole_forward` (target: within 15% of 1).
    pub forward_ratio: f64,
    /// Sum over layers of `fwd + bwd`.
    pub sum_fwd_bwd: Seconds,
    /// A whole training step: forward, loss, backward (median).
    pub whole_step: Seconds,
    /// `sum_fwd_bwd / whole_step` (target: within 20% of 1).
    pub step_ratio: f64,
    /// Device memory the training step allocated at its peak (CUDA only).
    pub step_peak_allocated: Option<Bytes>,
    /// Analytic `fwd + bwd` over measured, per layer: smallest, geometric mean, largest.
    pub analytic_time_ratio: (f64, f64, f64),
    /// Analytic over measured `U(1, L)`.
    pub analytic_total_ratio: f64,
    /// Layers whose measured stash differs from the analytic one by more than 1%, with both.
    pub stash_differences: Vec<(String, Bytes, Bytes)>,
    /// Layers whose measured overlap with the next differs from the analytic one, with both.
    pub overlap_differences: Vec<(String, Bytes, Bytes)>,
    /// Sum of measured stashes over sum of analytic stashes.
    pub stash_total_ratio: Option<f64>,
    pub out_equal: bool,
    pub weights_equal: bool,
}

fn block_granularity() -> String {
    "block".into()
}

fn one() -> usize {
    1
}

/// Median, smallest and largest of timings.
fn summarize(mut v: Vec<f64>) -> (f64, f64, f64) {
    let med = median(&mut v);
    (med, v[0], v[v.len() - 1])
}

/// A fresh autograd leaf for layer (or stage) input `x`: it needs a gradient unless it is
/// the network's input (`first`) or not floating point (token ids).
pub(crate) fn leaf_input(x: &Tensor, first: bool) -> Tensor {
    if !first && x.is_floating_point() {
        x.detach().set_requires_grad(true)
    } else {
        x.shallow_clone()
    }
}

/// Times `f` `warmup + reps` times between synchronizations, `inner` calls back to back
/// per repetition (its time is their mean); `setup` runs untimed before each call and its
/// result is passed to `f`. Median, smallest and largest repetition.
fn time<S, T>(
    device: Device,
    (warmup, reps, inner): (usize, usize, usize),
    mut setup: impl FnMut() -> S,
    mut f: impl FnMut(S) -> T,
) -> (f64, f64, f64) {
    let inner = inner.max(1);
    let mut v = Vec::with_capacity(reps);
    for r in 0..warmup + reps {
        let inputs: Vec<S> = (0..inner).map(|_| setup()).collect();
        let mut outs = Vec::with_capacity(inner);
        sync(device);
        let t0 = Instant::now();
        for s in inputs {
            outs.push(f(s));
        }
        sync(device);
        let dt = t0.elapsed().as_secs_f64() / inner as f64;
        drop(outs);
        if r >= warmup {
            v.push(dt);
        }
    }
    summarize(v)
}

/// Bytes autograd keeps after `f(x)`: the allocator's growth across the call, counting `x`
/// (a fresh tensor that this function owns and drops) only if the graph still references
/// it, once the handle to the output is dropped too (a scalar of the output keeps the graph
/// alive). `None` without allocator statistics.
pub(crate) fn kept_by_autograd(
    device: Device,
    x: Tensor,
    f: impl FnOnce(&Tensor) -> Tensor,
) -> Option<Bytes> {
    sync(device);
    let base = alloc::requested(device)? - tensor_bytes(&x);
    let y = f(&x);
    drop(x);
    let keep = y.sum(tch::Kind::Float);
    drop(y);
    sync(device);
    let after = alloc::requested(device)?;
    Some(after - base - tensor_bytes(&keep))
}

/// What a profile needs before it measures: the options checked, the network built with
/// dropout on, one batch, and the parameters as autograd leaves (per layer).
struct Bench {
    net: super::Network,
    data: super::Batch,
    params: Vec<Vec<Tensor>>,
}

impl Bench {
    fn new(desc: &nets::Network, options: &ProfileOptions) -> Result<Bench, ExecError> {
        let device = options.device;
        if options.batch == 0 || options.reps == 0 || options.back_to_back == 0 {
            return Err(ExecError::Network(
                "--batch, --reps and --back-to-back must be at least 1".into(),
            ));
        }
        if device.is_cuda() && !tch::Cuda::is_available() {
            return Err(ExecError::Network(
                "no CUDA device visible to libtorch (GPU builds need PIPEOPT_LINK_CUDA=1)".into(),
            ));
        }
        let net = torchnet::build(
            desc,
            BuildOptions {
                dtype: options.dtype,
                device,
                seed: options.seed,
                dropout: true,
            },
        );
        let data = torchnet::batches(
            desc,
            options.batch,
            1,
            options.seed + 1000,
            options.dtype,
            device,
        )
        .remove(0);
        let params = net
            .layers
            .iter()
            .map(|l| {
                l.params
                    .iter()
                    .map(|p| p.shallow_clone().set_requires_grad(true))
                    .collect()
            })
            .collect();
        Ok(Bench { net, data, params })
    }

    /// The whole network, measured the same way as its parts: a forward pass, and a
    /// training step (forward, loss, backward to every parameter), each one call per
    /// repetition. Also the step's allocation peak (CUDA).
    fn whole(&self, options: &ProfileOptions) -> Result<Whole, ExecError> {
        let (device, net, params, data) = (options.device, &self.net, &self.params, &self.data);
        let timing = (options.warmup, options.reps, 1);
        let all: Vec<&Tensor> = params.iter().flatten().collect();
        let (forward, _, _) = time(device, timing, || (), |()| net.forward(params, &data.input));
        alloc::reset_peak(device);
        let mut failed = None;
        let (step, _, _) = time(
            device,
            timing,
            || (),
            |()| {
                let y = net.forward(params, &data.input);
                let loss = (net.loss)(&y, &data.target);
                drop(y);
                let ones = loss.ones_like();
                if let Err(e) = alloc::backward_with(&loss, &ones, &all) {
                    failed = Some(e);
                }
            },
        );
        if let Some(e) = failed {
            return Err(ExecError::Network(format!("training step: {e}")));
        }
        Ok(Whole {
            forward,
            step,
            step_peak_allocated: alloc::stats(device).map(|s| s.allocated_peak),
        })
    }
}

/// The whole network's measurements.
struct Whole {
    forward: Seconds,
    step: Seconds,
    step_peak_allocated: Option<Bytes>,
}

/// Profiles `desc` (see the module doc). Returns the measured instance and the report.
pub fn profile(
    desc: &nets::Network,
    options: &ProfileOptions,
) -> Result<(Instance, ProfileReport), ExecError> {
    let device = options.device;
    let bench = Bench::new(desc, options)?;
    let analytic =
        analytic::analytic_instance(desc, options.batch, options.dtype, &options.device_model)
            .map_err(|e| ExecError::Network(e.to_string()))?;
    let (net, params, data) = (&bench.net, &bench.params, &bench.data);
    let timing = (options.warmup, options.reps, options.back_to_back);

    let mut measures: Vec<LayerMeasure> = Vec::with_capacity(net.layers.len());
    let mut x = data.input.shallow_clone();
    // The previous layer's input, for what it shares with this layer.
    let mut prev: Option<Tensor> = None;
    for (l, layer) in net.layers.iter().enumerate() {
        let ps = &params[l];
        let xin = leaf_input(&x, l == 0);
        let grad_input = xin.requires_grad();
        let (fwd, fmin, fmax) = time(device, timing, || (), |()| (layer.forward)(ps, &xin));
        let y = tch::no_grad(|| (layer.forward)(ps, &xin));
        let out = tensor_bytes(&y);
        let g = y.randn_like();
        let mut inputs: Vec<&Tensor> = ps.iter().collect();
        if grad_input {
            inputs.push(&xin);
        }
        let mut failed = None;
        let (bwd, bmin, bmax) = time(
            device,
            timing,
            || (layer.forward)(ps, &xin),
            |y| {
                if let Err(e) = alloc::backward_with(&y, &g, &inputs) {
                    failed = Some(e);
                }
            },
        );
        if let Some(e) = failed {
            return Err(ExecError::Network(format!("layer {}: {e}", layer.name)));
        }
        let stash_measured = kept_by_autograd(device, leaf_input(&x.copy(), l == 0), |x2| {
            (layer.forward)(ps, x2)
        });
        let a = analytic.layer(l + 1);
        measures.push(LayerMeasure {
            name: layer.name.clone(),
            fwd,
            bwd,
            fwd_range: (fmin, fmax),
            bwd_range: (bmin, bmax),
            weights: ps.iter().map(tensor_bytes).sum(),
            out,
            stash_measured,
            overlap_measured: None,
            analytic_overlap: a.stash_overlap.unwrap_or(0.0),
            analytic_fwd: a.fwd,
            analytic_bwd: a.bwd,
            analytic_stash: a.stash.unwrap_or(0.0),
            analytic_out: a.out,
            analytic_weights: a.weights,
        });
        drop(inputs);
        // What layers l-1 and l share: kept(l-1) + kept(l) - kept(both run together).
        if let (Some(p), Some(kb)) = (&prev, stash_measured) {
            let a = &net.layers[l - 1];
            let joint = kept_by_autograd(device, leaf_input(&p.copy(), l == 1), |x2| {
                (layer.forward)(ps, &(a.forward)(&params[l - 1], x2))
            });
            let before = &mut measures[l - 1];
            if let (Some(joint), Some(ka)) = (joint, before.stash_measured) {
                before.overlap_measured = Some((ka + kb - joint).clamp(0.0, ka.min(kb)));
            }
        }
        let input = std::mem::replace(&mut x, y);
        // Without allocator statistics there is nothing to measure: keep no extra activation.
        prev = stash_measured.is_some().then_some(input);
    }
    drop((x, prev));

    let whole = bench.whole(options)?;
    let report = ProfileReport::new(desc, options, "block", measures, &whole);
    let layers = report
        .layers
        .iter()
        .map(|m| Layer {
            name: m.name.clone(),
            fwd: m.fwd,
            bwd: m.bwd,
            weights: m.weights,
            out: m.out,
            stash: Some(m.stash_measured.unwrap_or(m.analytic_stash)),
            stash_overlap: match (m.stash_measured, m.overlap_measured) {
                (Some(_), o) => o,
                (None, _) => Some(m.analytic_overlap),
            }
            .filter(|&o| o > 0.0),
        })
        .collect();
    let stash = if report.layers.iter().all(|m| m.stash_measured.is_some()) {
        "measured (CUDA caching allocator, bytes autograd keeps)"
    } else {
        "analytic (no allocator statistics on this device)"
    };
    let meta = provenance(desc, options, &report, stash);
    let instance = Instance {
        name: format!("{}-measured", analytic.name),
        input: analytic.input,
        layers,
        stash_shared: Vec::new(),
        meta,
    };
    Ok((instance, report))
}

impl ProfileReport {
    /// The report of measured layers (chain layers, or ops) against the whole network and
    /// the analytic model.
    fn new(
        desc: &nets::Network,
        options: &ProfileOptions,
        granularity: &str,
        measures: Vec<LayerMeasure>,
        whole: &Whole,
    ) -> ProfileReport {
        let sum_fwd: f64 = measures.iter().map(|m| m.fwd).sum();
        let sum_fwd_bwd: f64 = measures.iter().map(|m| m.fwd + m.bwd).sum();
        let ratios: Vec<f64> = measures
            .iter()
            .map(|m| (m.analytic_fwd + m.analytic_bwd) / (m.fwd + m.bwd))
            .collect();
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ratios.iter().copied().fold(0.0, f64::max);
        let analytic_total: f64 = measures
            .iter()
            .map(|m| m.analytic_fwd + m.analytic_bwd)
            .sum();
        let stash_differences = measures
            .iter()
            .filter_map(|m| {
                let s = m.stash_measured?;
                ((s - m.analytic_stash).abs() > 0.01 * m.analytic_stash.max(1.0))
                    .then(|| (m.name.clone(), s, m.analytic_stash))
            })
            .collect();
        let overlap_differences = measures
            .iter()
            .filter_map(|m| {
                let o = m.overlap_measured?;
                ((o - m.analytic_overlap).abs() > 0.01 * m.out.max(1.0))
                    .then(|| (m.name.clone(), o, m.analytic_overlap))
            })
            .collect();
        let stash_total_ratio = measures
            .iter()
            .map(|m| m.stash_measured)
            .sum::<Option<f64>>()
            .map(|s| s / measures.iter().map(|m| m.analytic_stash).sum::<f64>());
        ProfileReport {
            model: desc.name.clone(),
            image: (desc.input.len() == 3).then(|| desc.input[1]),
            batch: options.batch,
            dtype: options.dtype.name().into(),
            device: format!("{:?}", options.device),
            granularity: granularity.into(),
            back_to_back: options.back_to_back,
            sum_fwd,
            whole_forward: whole.forward,
            forward_ratio: sum_fwd / whole.forward,
            sum_fwd_bwd,
            whole_step: whole.step,
            step_ratio: sum_fwd_bwd / whole.step,
            step_peak_allocated: whole.step_peak_allocated,
            analytic_time_ratio: (lo, geo, hi),
            analytic_total_ratio: analytic_total / sum_fwd_bwd,
            stash_differences,
            overlap_differences,
            stash_total_ratio,
            out_equal: measures.iter().all(|m| m.out == m.analytic_out),
            weights_equal: measures.iter().all(|m| m.weights == m.analytic_weights),
            layers: measures,
        }
    }
}

/// The provenance of a measured instance (`meta`): what was measured, on what, how, when.
fn provenance(
    desc: &nets::Network,
    options: &ProfileOptions,
    report: &ProfileReport,
    stash: &str,
) -> Map<String, serde_json::Value> {
    let device = options.device;
    let mut meta = Map::new();
    meta.insert(
        "source".into(),
        json!("pipeopt profile (libtorch, torchvision architectures)"),
    );
    meta.insert("model".into(), json!(desc.name));
    meta.insert("image".into(), json!(report.image));
    meta.insert("input_shape".into(), json!(desc.input));
    meta.insert("batch".into(), json!(options.batch));
    meta.insert("dtype".into(), json!(options.dtype.name()));
    meta.insert("times".into(), json!("measured"));
    meta.insert("stash".into(), json!(stash));
    meta.insert("device".into(), json!(report.device));
    if let Some(n) = &options.device_name {
        meta.insert("device_name".into(), json!(n));
    }
    meta.insert("torch_version".into(), json!(alloc::torch_version()));
    if device.is_cuda() {
        meta.insert("cudnn_version".into(), json!(tch::utils::version_cudnn()));
    }
    meta.insert(
        "timing".into(),
        json!({"warmup": options.warmup, "repetitions": options.reps,
               "back_to_back": options.back_to_back, "statistic": "median",
               "clock": "host, between device synchronizations"}),
    );
    meta.insert(
        "whole_network".into(),
        json!({"forward": report.whole_forward, "training_step": report.whole_step,
               "forward_ratio": report.forward_ratio, "step_ratio": report.step_ratio}),
    );
    meta.insert("parameters".into(), json!(desc.parameter_count()));
    meta.insert(
        "date".into(),
        json!(humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()),
    );
    meta.insert(
        "tool_version".into(),
        json!(concat!("pipeopt ", env!("CARGO_PKG_VERSION"))),
    );
    meta
}

/// Profiles `desc` op by op (`--granularity op`): every op of every block is timed on its
/// real inputs (the previous ops' outputs of the same batch), forward with autograd
/// recording and backward from a random upstream gradient to its parameters and to those
/// inputs that need a gradient, each timed like a chain layer of [`profile`] (views such
/// as flatten are not timed: they launch no kernel). The instance is the op-level chain
/// of [`nets::op_instance`] (same linearization, same layers) with the measured times; its
/// sizes are the analytic ones, which are exact (the block-level profile measures them
/// equal to the byte). The report's `layers` are the ops, with no stash fields.
pub fn profile_ops(
    desc: &nets::Network,
    options: &ProfileOptions,
) -> Result<(Instance, ProfileReport), ExecError> {
    let device = options.device;
    let (batch, dtype, model) = (options.batch, options.dtype, &options.device_model);
    let bench = Bench::new(desc, options)?;
    let analytic_times = nets::analytic_op_times(desc, batch, dtype, model);
    let timing = (options.warmup, options.reps, options.back_to_back);
    let mut times: nets::OpTimes = Vec::with_capacity(desc.blocks.len());
    let mut measures = Vec::new();
    let mut x = bench.data.input.shallow_clone();
    for (k, block) in desc.blocks.iter().enumerate() {
        let ranges = torchnet::param_ranges(block);
        let n = block.ops.len();
        let last_use = nets::last_readers(&block.ops);
        let mut vals: Vec<Option<Tensor>> = (0..n).map(|_| None).collect();
        vals[0] = Some(x);
        let mut block_times = vec![(0.0, 0.0); n];
        for op in block.ops.iter().skip(1) {
            let w = &bench.params[k][ranges[op.id].clone()];
            // Fresh leaves: an input needs a gradient unless it is the network's input.
            let args: Vec<Tensor> = op
                .inputs
                .iter()
                .map(|&i| {
                    let v = vals[i]
                        .as_ref()
                        .expect("inputs are computed before their readers");
                    leaf_input(v, k == 0 && i == 0)
                })
                .collect();
            let args: Vec<&Tensor> = args.iter().collect();
            let y = tch::no_grad(|| torchnet::run_op(op, w, &args, true));
            let timed = analytic::op_time(block, op.id, batch, dtype, model, k == 0).is_some();
            if timed {
                let (fwd, fmin, fmax) = time(
                    device,
                    timing,
                    || (),
                    |()| torchnet::run_op(op, w, &args, true),
                );
                let mut inputs: Vec<&Tensor> = w.iter().collect();
                inputs.extend(args.iter().copied().filter(|a| a.requires_grad()));
                let (bwd, bmin, bmax) = if inputs.is_empty() || !y.is_floating_point() {
                    (0.0, 0.0, 0.0)
                } else {
                    let g = y.randn_like();
                    let mut failed = None;
                    let t = time(
                        device,
                        timing,
                        || torchnet::run_op(op, w, &args, true),
                        |out| {
                            if let Err(e) = alloc::backward_with(&out, &g, &inputs) {
                                failed = Some(e);
                            }
                        },
                    );
                    if let Some(e) = failed {
                        return Err(ExecError::Network(format!(
                            "{}.{}: {e}",
                            block.name, op.name
                        )));
                    }
                    t
                };
                block_times[op.id] = (fwd, bwd);
                let (afwd, abwd) = analytic_times[k][op.id];
                let weights: Bytes = w.iter().map(tensor_bytes).sum();
                measures.push(LayerMeasure {
                    name: format!("{}.{}", block.name, op.name),
                    fwd,
                    bwd,
                    fwd_range: (fmin, fmax),
                    bwd_range: (bmin, bmax),
                    weights,
                    out: tensor_bytes(&y),
                    stash_measured: None,
                    overlap_measured: None,
                    analytic_overlap: 0.0,
                    analytic_fwd: afwd,
                    analytic_bwd: abwd,
                    analytic_stash: 0.0,
                    analytic_out: op.shape.iter().product::<usize>() as f64
                        * batch as f64
                        * dtype.bytes() as f64,
                    analytic_weights: nets::params(&op.kind) as f64 * dtype.bytes() as f64,
                });
            }
            drop(args);
            for &i in &op.inputs {
                if last_use[i] == op.id {
                    vals[i] = None;
                }
            }
            vals[op.id] = Some(y);
        }
        x = vals[n - 1].take().expect("a block's last op is computed");
        times.push(block_times);
    }
    drop(x);
    let whole = bench.whole(options)?;
    let report = ProfileReport::new(desc, options, "op", measures, &whole);
    let meta = provenance(
        desc,
        options,
        &report,
        "analytic (exact per-op rules, measured equal to the byte at block level)",
    );
    let instance = nets::measured_op_instance(desc, batch, dtype, &times, meta)
        .map_err(|e| ExecError::Network(e.to_string()))?;
    Ok((instance, report))
}
