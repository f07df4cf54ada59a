//! Analytic instances (issue 5, item 2): weights, outputs and stashes exactly from the
//! shapes, times from FLOP counts and a roofline device model. No profiler involved.
//!
//! # Sizes
//! - `weights` of a chain layer: its parameters times the dtype size.
//! - `out`: the block's single output tensor, `batch x elements x dtype` bytes. `input`
//!   (a(0)): the network input (token ids are int64, 8 bytes).
//! - `stash`: what the block's ops save for their backward pass (PyTorch autograd), each
//!   tensor counted once even when several ops save it (it is keyed by the op producing it):
//!   - Conv2d, Linear: their input tensor (weights are not activations);
//!   - BatchNorm2d: its input, plus the per-channel saved mean and inverse std (2C values);
//!   - LayerNorm: its input, plus a mean and rstd per row;
//!   - ReLU: its output (an in-place ReLU after BN overwrites BN's output, which is then a
//!     tensor distinct from BN's saved input, so both count);
//!   - MaxPool2d: its input, plus int64 indices (8 bytes per output element);
//!   - AvgPool2d, AdaptiveAvgPool2d, GELU: their input;
//!   - Dropout: its mask (1 byte per element); Attention: q, k, v, the softmax output
//!     (`heads x S x S`), and with dropout its mask (1 byte) and the dropped probabilities;
//!   - Embedding: the int64 ids; Add, Cat, Flatten, PositionEmbedding, Input: nothing.
//!
//! # Times
//! For each op, forward FLOPs `f` and bytes moved `m` (inputs read, output written,
//! parameters read); forward time `max(f / peak, m / bandwidth)` (a roofline per op), summed
//! over the block. Backward: `2f` and `2m` (a conv or linear computes the gradient of its
//! input and of its weights, each costing about the forward; elementwise ops read the
//! gradient and the saved tensor and write one gradient, about twice the traffic).
//! FLOPs: conv `2 Cin/groups k_h k_w Cout H_out W_out` per sample (+ `Cout H_out W_out` for a
//! bias); linear `2 fin fout` per row (+ `fout`); attention `4 S^2 D` (QK^T and AV) + `5 h S^2`
//! (softmax); BN and LayerNorm 8 per element, GELU 8, ReLU 1, dropout 2, add `n-1`, pools
//! `k^2` per output element, cat/flatten/embedding 0. Views (flatten) move no bytes.
//! This is a model, not a measurement: it ignores kernel launch overheads, fusion, and
//! efficiency below peak; use it to compare partitioners, not to predict wall-clock time.

use serde_json::{json, Map, Value};

use super::{params, Block, NetError, Network, OpKind};
use crate::model::{Instance, Layer};

/// Element type of activations and weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
        }
    }
    /// Accepts `f32`, `float32`, `f16`, `float16`, `half`.
    pub fn parse(s: &str) -> Option<DType> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "float" => Some(DType::F32),
            "f16" | "float16" | "half" => Some(DType::F16),
            _ => None,
        }
    }
}

/// A roofline device: peak arithmetic rate per dtype and memory bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceModel {
    pub name: &'static str,
    /// FLOP/s in float32 (CUDA cores, no tensor cores / TF32).
    pub peak_f32: f64,
    /// FLOP/s in float16 (dense tensor cores).
    pub peak_f16: f64,
    /// Bytes/s of device memory.
    pub mem_bw: f64,
}

impl DeviceModel {
    /// NVIDIA H100 SXM5 datasheet: FP32 67 TFLOP/s, FP16 tensor dense 989.4 TFLOP/s,
    /// HBM3 3.35 TB/s.
    pub const H100: DeviceModel = DeviceModel {
        name: "h100",
        peak_f32: 67e12,
        peak_f16: 989.4e12,
        mem_bw: 3.35e12,
    };
    /// NVIDIA V100 SXM2 datasheet (MadPipe's era): FP32 15.7 TFLOP/s, FP16 tensor 125
    /// TFLOP/s, HBM2 900 GB/s.
    pub const V100: DeviceModel = DeviceModel {
        name: "v100",
        peak_f32: 15.7e12,
        peak_f16: 125e12,
        mem_bw: 900e9,
    };
    pub const PRESETS: &'static [DeviceModel] = &[DeviceModel::H100, DeviceModel::V100];

    pub fn preset(name: &str) -> Option<DeviceModel> {
        DeviceModel::PRESETS
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
            .cloned()
    }
    pub fn peak(&self, dtype: DType) -> f64 {
        match dtype {
            DType::F32 => self.peak_f32,
            DType::F16 => self.peak_f16,
        }
    }
}

/// Costs of one op for a whole batch.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OpCost {
    pub flops: f64,
    pub bytes: f64,
}

/// Sizes and times of one block for a batch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockCost {
    pub fwd: f64,
    pub bwd: f64,
    pub weights: f64,
    pub out: f64,
    pub stash: f64,
    pub flops: f64,
}

fn elems(s: &[usize]) -> f64 {
    s.iter().product::<usize>() as f64
}

/// Forward FLOPs and bytes moved of op `i` of `block`, for a batch.
pub fn op_cost(block: &Block, i: usize, batch: usize, dtype: DType) -> OpCost {
    let op = &block.ops[i];
    let n = batch as f64;
    let e = dtype.bytes() as f64;
    let out = elems(&op.shape);
    let ins: f64 = op.inputs.iter().map(|&x| elems(&block.ops[x].shape)).sum();
    let w = params(&op.kind) as f64;
    let io = (ins + out) * n * e + w * e;
    let (flops, bytes) = match &op.kind {
        OpKind::Input | OpKind::Flatten => (0.0, 0.0),
        OpKind::Conv2d {
            cin,
            cout,
            kernel,
            groups,
            bias,
            ..
        } => {
            let hw = out / *cout as f64;
            let f = 2.0 * (cin / groups) as f64 * (kernel.0 * kernel.1) as f64 * *cout as f64 * hw;
            (f + if *bias { out } else { 0.0 }, io)
        }
        OpKind::Linear { fin, fout, bias } => {
            let rows = out / *fout as f64;
            (
                rows * (2.0 * (*fin * *fout) as f64 + if *bias { *fout as f64 } else { 0.0 }),
                io,
            )
        }
        OpKind::BatchNorm2d { .. } | OpKind::LayerNorm { .. } | OpKind::Gelu => (8.0 * out, io),
        OpKind::Relu { .. } => (out, io),
        OpKind::Dropout { .. } => (2.0 * out, io + out * n),
        OpKind::Add => ((op.inputs.len() as f64 - 1.0) * out, io),
        OpKind::Cat | OpKind::PositionEmbedding { .. } => (
            if matches!(op.kind, OpKind::Cat) {
                0.0
            } else {
                out
            },
            io,
        ),
        OpKind::MaxPool2d { kernel, .. } | OpKind::AvgPool2d { kernel, .. } => {
            ((kernel * kernel) as f64 * out, io)
        }
        OpKind::AdaptiveAvgPool2d { .. } => (ins, io),
        OpKind::Embedding { .. } => (0.0, out * n * e + ins * n * 8.0),
        OpKind::Attention { heads, dropout, .. } => {
            let s = op.shape[0] as f64;
            let d = op.shape[1] as f64;
            let probs = *heads as f64 * s * s;
            let extra = if *dropout > 0.0 { 2.0 } else { 1.0 };
            (
                4.0 * s * s * d + 5.0 * probs,
                io + 2.0 * extra * probs * n * e,
            )
        }
    };
    OpCost {
        flops: flops
            * if matches!(op.kind, OpKind::Embedding { .. }) {
                0.0
            } else {
                n
            },
        bytes,
    }
}

/// Bytes op `i` saves for its backward pass beyond the tensors listed by [`saved_tensors`]
/// (statistics, indices, masks, attention probabilities), for a batch.
fn saved_extra(block: &Block, i: usize, batch: usize, dtype: DType) -> f64 {
    let op = &block.ops[i];
    let n = batch as f64;
    let e = dtype.bytes() as f64;
    match &op.kind {
        OpKind::BatchNorm2d { channels, .. } => 2.0 * *channels as f64 * e,
        OpKind::LayerNorm { .. } => {
            let rows = elems(&op.shape) / *op.shape.last().expect("non-empty") as f64;
            2.0 * rows * n * e
        }
        OpKind::MaxPool2d { .. } => elems(&op.shape) * n * 8.0,
        OpKind::Dropout { .. } => elems(&op.shape) * n,
        OpKind::Attention { heads, dropout, .. } => {
            let probs = (*heads * op.shape[0] * op.shape[0]) as f64 * n;
            probs * e
                + if *dropout > 0.0 {
                    probs * (1.0 + e)
                } else {
                    0.0
                }
        }
        _ => 0.0,
    }
}

/// Ids of the ops whose output tensors op `i` saves for backward.
pub fn saved_tensors(block: &Block, i: usize) -> Vec<usize> {
    let op = &block.ops[i];
    match &op.kind {
        OpKind::Conv2d { .. }
        | OpKind::Linear { .. }
        | OpKind::BatchNorm2d { .. }
        | OpKind::LayerNorm { .. }
        | OpKind::MaxPool2d { .. }
        | OpKind::AvgPool2d { .. }
        | OpKind::AdaptiveAvgPool2d { .. }
        | OpKind::Gelu
        | OpKind::Attention { .. } => op.inputs.clone(),
        OpKind::Relu { .. } => vec![i],
        _ => vec![],
    }
}

/// Stash of a block for a batch: every saved tensor once, plus the extras.
pub fn block_stash(block: &Block, batch: usize, dtype: DType, input_elem_bytes: usize) -> f64 {
    let n = batch as f64;
    let e = dtype.bytes() as f64;
    let mut saved = vec![false; block.ops.len()];
    let mut extra = 0.0;
    for i in 0..block.ops.len() {
        for t in saved_tensors(block, i) {
            saved[t] = true;
        }
        extra += saved_extra(block, i, batch, dtype);
        if matches!(block.ops[i].kind, OpKind::Embedding { .. }) {
            extra += elems(&block.ops[block.ops[i].inputs[0]].shape) * n * 8.0;
        }
    }
    let tensors: f64 = saved
        .iter()
        .enumerate()
        .filter(|(_, &s)| s)
        .map(|(t, _)| {
            elems(&block.ops[t].shape) * n * if t == 0 { input_elem_bytes as f64 } else { e }
        })
        .sum();
    tensors + extra
}

/// Sizes and roofline times of one block.
pub fn block_cost(
    block: &Block,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
    input_elem_bytes: usize,
) -> BlockCost {
    let e = dtype.bytes() as f64;
    let peak = device.peak(dtype);
    let mut c = BlockCost {
        weights: block.parameter_count() as f64 * e,
        out: elems(block.output_shape()) * batch as f64 * e,
        stash: block_stash(block, batch, dtype, input_elem_bytes),
        ..BlockCost::default()
    };
    for i in 0..block.ops.len() {
        let oc = op_cost(block, i, batch, dtype);
        c.flops += oc.flops;
        c.fwd += (oc.flops / peak).max(oc.bytes / device.mem_bw);
        c.bwd += (2.0 * oc.flops / peak).max(2.0 * oc.bytes / device.mem_bw);
    }
    c
}

/// The analytic instance of `net` for `batch` samples: one chain layer per block.
pub fn analytic_instance(
    net: &Network,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> Result<Instance, NetError> {
    if batch == 0 {
        return Err(NetError::Zero {
            net: net.name.clone(),
            what: "batch",
        });
    }
    let e = dtype.bytes();
    let in_bytes = net.input_elem_bytes.unwrap_or(e);
    let mut layers = Vec::with_capacity(net.blocks.len());
    for (k, b) in net.blocks.iter().enumerate() {
        let first = if k == 0 { in_bytes } else { e };
        let c = block_cost(b, batch, dtype, device, first);
        layers.push(Layer {
            name: b.name.clone(),
            fwd: c.fwd,
            bwd: c.bwd,
            weights: c.weights,
            out: c.out,
            stash: Some(c.stash),
        });
    }
    let image = if net.input.len() == 3 {
        Value::from(net.input[1])
    } else {
        Value::Null
    };
    let mut meta = Map::new();
    meta.insert(
        "source".into(),
        json!("pipeopt nets (torchvision architectures)"),
    );
    meta.insert("model".into(), json!(net.name));
    meta.insert("image".into(), image);
    meta.insert("input_shape".into(), json!(net.input));
    meta.insert("batch".into(), json!(batch));
    meta.insert("dtype".into(), json!(dtype.name()));
    meta.insert("times".into(), json!("analytic"));
    meta.insert(
        "device_model".into(),
        json!({"name": device.name, "peak_flops": device.peak(dtype), "mem_bw": device.mem_bw}),
    );
    meta.insert("parameters".into(), json!(net.parameter_count()));
    meta.insert(
        "tool_version".into(),
        json!(concat!("pipeopt ", env!("CARGO_PKG_VERSION"))),
    );
    let name = match &meta["image"] {
        Value::Null => format!("{}-b{}", net.name, batch),
        v => format!("{}-{}-b{}", net.name, v, batch),
    };
    Ok(Instance {
        name,
        input: (elems(&net.input) * batch as f64 * in_bytes as f64),
        layers,
        meta,
    })
}

/// What `pipeopt instance --model NAME --image N --batch N --times analytic` computes.
pub fn instance(
    model: &str,
    image: usize,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> Result<Instance, NetError> {
    let net = super::network(model, image)?;
    analytic_instance(&net, batch, dtype, device)
}
