//! Analytic instances: weights, outputs and stashes exactly from the
//! shapes, times from FLOP counts and a roofline device model. No profiler involved.
//! `analytic_rebuild` makes such an instance again at another batch (the synchronous sweep
//! and MixPipe's hybrid scale costs that way), after checking that it is one.
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
//!   - AvgPool2d, AdaptiveAvgPool2d (other than to 1x1), GELU: their input;
//!   - Dropout: its mask (1 byte per element); stochastic depth its per-sample factor
//!     (one value per sample); Attention: q, k, v, the softmax output
//!     (`heads x S x S`), and with dropout its mask (1 byte) and the dropped probabilities;
//!   - Embedding: the int64 ids; Add, Cat, Flatten, PositionEmbedding, Input: nothing;
//!   - AdaptiveAvgPool2d to 1x1: nothing (a mean).
//!   - The general ops of imported transformers (`onnx.rs`): MatMul both factors; Softmax
//!     its output; a quotient both operands, a difference or sum nothing; a learned scale
//!     (`Param` Mul) its input, a learned shift nothing; a constant operand nothing (it
//!     is not an activation); `exp`, `tanh`, `sqrt`, `1/x` their result, `erf`, `log`,
//!     `sin`, `cos`, `x^c` their input, `-x` and affine maps nothing; ReduceMean, Concat
//!     and a contiguous copy nothing; MaskFill the mask when the forward computes it (1
//!     byte per entry, once for the batch); views (Reshape, Transpose, Slice, Expand, like
//!     Flatten) nothing, and a tensor they view is their input's storage, so what an op
//!     keeps through a view (attention's `q` as a slice of the q/k/v projection) counts
//!     the whole storage once.
//!
//! - The block's input always counts: a stage keeps its input until its backward (it reads
//!   its gradient there), whether or not an op saves it. A flatten's output is a view of its
//!   input (one storage). A global average pool (output 1x1) is a mean in PyTorch and saves
//!   nothing.
//! - `stash_overlap`: the block's output, which the next block's stash counts as its input,
//!   unless only the next block's ops keep it (this block's ops do not save it, the next's
//!   do): then a stage holding both blocks keeps it once (see `model::ChainSums::stash`).
//!   E.g. a ResNet block's last ReLU keeps its output, which the next block's convolution
//!   keeps as its input: one tensor.
//!
//! # Times
//! For each op, forward FLOPs `f` and bytes moved `m` (inputs read, output written,
//! parameters read). A [`DeviceModel`] gives per direction a rate for convolutions (kxk and
//! 1x1 apart), one for matrix products (linear, attention), a memory bandwidth, and fixed
//! costs per op and per chain layer. An op takes `max(f / rate, m / bandwidth) + per_op`
//! (convolutions, matrix products) or `m / bandwidth + per_op` (everything else: normalization,
//! activations, pooling, additions, concatenations); views (flatten) are free. A block takes
//! the sum plus `per_layer`. Backward: `2f` and `2m` with the backward rates (a conv or
//! linear computes the gradient of its input and of its weights, each costing about the
//! forward; elementwise ops read the gradient and the saved tensor and write one gradient),
//! except a convolution of the network's input, which computes only its weight gradient.
//! FLOPs: conv `2 Cin/groups k_h k_w Cout H_out W_out` per sample (+ `Cout H_out W_out` for a
//! bias); linear `2 fin fout` per row (+ `fout`); attention `4 S^2 D` (QK^T and AV) + `5 h S^2`
//! (softmax); BN and LayerNorm 8 per element, GELU 8, ReLU 1, dropout 2, stochastic depth
//! 1, add `n-1`, pools `k^2` per output element, cat/flatten/embedding 0; a matrix product
//! `2 K` per output element (matrix rate), softmax 5, transcendental functions 4, roots,
//! powers and reciprocals 2, other elementwise ops 1, a mean 1 per input element, copies 0
//! (memory traffic); a constant operand's bytes are read once per batch.
//! The device models are data (`devices/*.toml`, [`DeviceModel`]). The default `h100`
//! model's rates are fitted to measured profiles (`devices/h100.toml`): within a factor of
//! 1.72 (forward) and 2.04 (backward) of every measured layer of the five CNNs at image
//! 1000, batch 8; `h100-peak`, `a100` and `v100` are datasheet rooflines without overheads,
//! several times too optimistic for small layers. `pipeopt fit-device` (`fit.rs`) fits a
//! model to any GPU's measured profiles with the per-op work of [`op_work`]. Use analytic
//! times to compare
//! partitioners; measure (`pipeopt profile`) to predict wall-clock time.

use serde_json::{json, Map, Value};

pub use super::device::{DType, DeviceModel, Rates};
use super::{params, BinOp, Block, NetError, Network, OpKind, UnaryFn};
use crate::error::InputError;
use crate::model::{Instance, Layer};
use std::path::Path;

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
        OpKind::Input
        | OpKind::Flatten
        | OpKind::Reshape
        | OpKind::Transpose { .. }
        | OpKind::Slice { .. }
        | OpKind::Expand => (0.0, 0.0),
        OpKind::MatMul => {
            let a = &block.ops[op.inputs[0]].shape;
            let k = *a.last().expect("a matrix product's input has a last axis") as f64;
            (2.0 * k * out, io)
        }
        OpKind::Softmax { .. } => (5.0 * out, io),
        OpKind::Contiguous | OpKind::Concat { .. } | OpKind::ConcatParam { .. } => (0.0, io),
        OpKind::ReduceMean { .. } => (ins, io),
        OpKind::Unary { f } => (unary_flops(*f) * out, io),
        OpKind::Binary { .. } | OpKind::Param { .. } => (out, io),
        OpKind::Const { shape, .. }
        | OpKind::MaskFill { shape, .. }
        | OpKind::GatheredBias { shape, .. } => {
            // The constant is read once per batch, as a broadcast operand.
            (out, io + elems(shape) * e)
        }
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
        OpKind::Relu { .. } | OpKind::HardSigmoid | OpKind::Mul => (out, io),
        OpKind::Sigmoid | OpKind::HardSwish => (4.0 * out, io),
        OpKind::Dropout { .. } => (2.0 * out, io + out * n),
        // One product per element; the factor (one value per sample) is drawn and read.
        OpKind::StochasticDepth => (out, io + 2.0 * n * e),
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
pub(crate) fn saved_extra(block: &Block, i: usize, batch: usize, dtype: DType) -> f64 {
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
        // The gradient of `x * f` is `g * f`: autograd keeps the factor, one value of the
        // activation's dtype per sample (the input is not kept: the factor needs no gradient).
        OpKind::StochasticDepth => n * e,
        OpKind::MaskFill { mask_bytes, .. } => *mask_bytes as f64,
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
        | OpKind::Gelu
        | OpKind::Embedding { .. }
        | OpKind::Attention { .. }
        // Each factor's gradient is the other factor; the hard functions' gradients are
        // piecewise functions of their input.
        | OpKind::Mul
        | OpKind::HardSigmoid
        | OpKind::HardSwish => op.inputs.clone(),
        // The gradient of the sigmoid is `y (1 - y)`: autograd keeps its result.
        OpKind::Sigmoid => vec![i],
        // A matrix product's gradients are products with the other factor; a quotient's
        // need both operands.
        OpKind::MatMul | OpKind::Binary { op: BinOp::Mul | BinOp::Div } => op.inputs.clone(),
        // The softmax's gradient is `y (g - sum(g y))`: its result.
        OpKind::Softmax { .. } => vec![i],
        // A learned scale's gradient is the activation times the upstream gradient; a
        // learned shift's needs nothing.
        OpKind::Param { op: BinOp::Mul, .. } => op.inputs.clone(),
        OpKind::Unary { f } => match f {
            // Their gradients are functions of their result: `e^x`, `1 - tanh^2`,
            // `1 / (2 sqrt(x))`, `-1 / x^2`.
            UnaryFn::Exp | UnaryFn::Tanh | UnaryFn::Sqrt | UnaryFn::Reciprocal => vec![i],
            // Functions of their input.
            UnaryFn::Erf | UnaryFn::Log | UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Pow(_) => {
                op.inputs.clone()
            }
            // Constant gradients.
            UnaryFn::Neg | UnaryFn::Affine { .. } => vec![],
        },
        // PyTorch computes a global average pool as a mean, whose backward needs only the
        // input's shape; other output sizes run the pooling kernel, which saves its input.
        OpKind::AdaptiveAvgPool2d { out: (1, 1) } => vec![],
        OpKind::AdaptiveAvgPool2d { .. } => op.inputs.clone(),
        OpKind::Relu { .. } => vec![i],
        _ => vec![],
    }
}

/// Whether an op of `kind` is a view of its first input: no tensor of its own, no time.
pub fn is_view(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Flatten
            | OpKind::Reshape
            | OpKind::Transpose { .. }
            | OpKind::Slice { .. }
            | OpKind::Expand
    )
}

/// FLOPs per element of an elementwise function (transcendental ones a few).
fn unary_flops(f: UnaryFn) -> f64 {
    match f {
        UnaryFn::Neg | UnaryFn::Affine { .. } => 1.0,
        UnaryFn::Sqrt | UnaryFn::Reciprocal | UnaryFn::Pow(_) => 2.0,
        _ => 4.0,
    }
}

/// The tensor whose storage op `t`'s output is: a view's output (flatten, reshape,
/// transpose, slice, expand) is its input's storage.
fn storage(block: &Block, mut t: usize) -> usize {
    while is_view(&block.ops[t].kind) {
        t = block.ops[t].inputs[0];
    }
    t
}

/// Whether an op of `block` saves the block's output tensor (a ReLU ending a ResNet block).
pub fn keeps_output(block: &Block) -> bool {
    let last = block.ops.len() - 1;
    (0..block.ops.len()).any(|i| saved_tensors(block, i).contains(&last))
}

/// Whether an op of `block` saves the block's input tensor (or a view of it: a flatten).
pub fn saves_input(block: &Block) -> bool {
    (0..block.ops.len()).any(|i| {
        saved_tensors(block, i)
            .iter()
            .any(|&t| storage(block, t) == 0)
    })
}

/// Stash of a block for a batch: every saved tensor once, plus the extras.
pub fn block_stash(block: &Block, batch: usize, dtype: DType, input_elem_bytes: usize) -> f64 {
    let n = batch as f64;
    let e = dtype.bytes() as f64;
    let mut saved = vec![false; block.ops.len()];
    // The input is kept whether or not an op saves it: a stage keeps its input (autograd's
    // leaf) until its backward, and inside a stage it is the previous block's output, kept
    // by whichever of the two blocks saves it (see `stash_overlap`).
    saved[0] = true;
    let mut extra = 0.0;
    for i in 0..block.ops.len() {
        for t in saved_tensors(block, i) {
            saved[storage(block, t)] = true;
        }
        extra += saved_extra(block, i, batch, dtype);
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

/// The rate of a [`Rates`] that bounds an op's arithmetic: convolutions (kxk, 1x1) and
/// matrix products are rooflines; every other op is memory traffic alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateClass {
    Conv,
    Conv1x1,
    Matmul,
    Memory,
}

/// The work of one op in one direction: FLOPs at one rate class and bytes moved. Its time
/// on a device is [`OpWork::seconds`]; the analytic times and the device fit
/// (`nets::fit`) both read it, so they compute one formula.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpWork {
    pub class: RateClass,
    pub flops: f64,
    pub bytes: f64,
}

impl OpWork {
    /// `max(flops / rate, bytes / mem_bw) + per_op` for a roofline class, `bytes / mem_bw
    /// + per_op` for memory traffic.
    pub fn seconds(&self, r: &Rates) -> f64 {
        let rate = match self.class {
            RateClass::Conv => r.conv,
            RateClass::Conv1x1 => r.conv1x1,
            RateClass::Matmul => r.matmul,
            RateClass::Memory => return self.bytes / r.mem_bw + r.per_op,
        };
        (self.flops / rate).max(self.bytes / r.mem_bw) + r.per_op
    }
}

/// Forward and backward work of op `i` of `block` for a batch; `None` for the block's
/// input and for views (flatten), which cost nothing. `first_block`: the block is the
/// network's first (a convolution of the network's input computes no input gradient).
pub fn op_work(
    block: &Block,
    i: usize,
    batch: usize,
    dtype: DType,
    first_block: bool,
) -> Option<(OpWork, OpWork)> {
    let op = &block.ops[i];
    if matches!(op.kind, OpKind::Input) || is_view(&op.kind) {
        return None;
    }
    let class = match &op.kind {
        OpKind::Conv2d { kernel, .. } if kernel.0 * kernel.1 > 1 => RateClass::Conv,
        OpKind::Conv2d { .. } => RateClass::Conv1x1,
        OpKind::Linear { .. } | OpKind::Attention { .. } | OpKind::MatMul => RateClass::Matmul,
        _ => RateClass::Memory,
    };
    let oc = op_cost(block, i, batch, dtype);
    // A convolution of the network's input computes no input gradient: its backward is
    // the weight gradient alone.
    let k = if first_block && op.inputs == [0] && matches!(op.kind, OpKind::Conv2d { .. }) {
        1.0
    } else {
        2.0
    };
    Some((
        OpWork {
            class,
            flops: oc.flops,
            bytes: oc.bytes,
        },
        OpWork {
            class,
            flops: k * oc.flops,
            bytes: k * oc.bytes,
        },
    ))
}

/// Roofline forward and backward seconds and forward FLOPs of op `i` of `block` (no share
/// of the per-layer cost); `None` for the block's input and for views (flatten), which
/// cost nothing.
pub fn op_time(
    block: &Block,
    i: usize,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
    first_block: bool,
) -> Option<(f64, f64, f64)> {
    let (fwd, bwd) = op_work(block, i, batch, dtype, first_block)?;
    Some((
        fwd.seconds(&device.rates(false, dtype)),
        bwd.seconds(&device.rates(true, dtype)),
        fwd.flops,
    ))
}

/// Sizes and roofline times of one block.
pub fn block_cost(
    block: &Block,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
    input_elem_bytes: usize,
    first_block: bool,
) -> BlockCost {
    let e = dtype.bytes() as f64;
    let mut c = BlockCost {
        weights: block.parameter_count() as f64 * e,
        out: elems(block.output_shape()) * batch as f64 * e,
        stash: block_stash(block, batch, dtype, input_elem_bytes),
        ..BlockCost::default()
    };
    c.fwd = device.rates(false, dtype).per_layer;
    c.bwd = device.rates(true, dtype).per_layer;
    for i in 0..block.ops.len() {
        if let Some((f, b, flops)) = op_time(block, i, batch, dtype, device, first_block) {
            c.flops += flops;
            c.fwd += f;
            c.bwd += b;
        }
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
        let c = block_cost(b, batch, dtype, device, first, k == 0);
        // Both stashes count the boundary tensor unless only the next block's ops keep it.
        let shared = net
            .blocks
            .get(k + 1)
            .is_some_and(|next| keeps_output(b) || !saves_input(next));
        layers.push(Layer {
            name: b.name.clone(),
            fwd: c.fwd,
            bwd: c.bwd,
            weights: c.weights,
            out: c.out,
            stash: Some(c.stash),
            stash_overlap: shared.then_some(c.out),
        });
    }
    let meta = analytic_meta(net, batch, dtype, device);
    let name = match &meta["image"] {
        Value::Null => format!("{}-b{}", net.name, batch),
        v => format!("{}-{}-b{}", net.name, v, batch),
    };
    Ok(Instance {
        name,
        input: (elems(&net.input) * batch as f64 * in_bytes as f64),
        layers,
        stash_shared: Vec::new(),
        meta,
    })
}

/// The provenance `meta` of an analytic instance of `net` (either granularity).
pub(crate) fn analytic_meta(
    net: &Network,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> Map<String, Value> {
    let image = if net.input.len() == 3 {
        Value::from(net.input[1])
    } else {
        Value::Null
    };
    let mut meta = Map::new();
    meta.insert("source".into(), json!(SOURCE));
    meta.insert("model".into(), json!(net.name));
    meta.insert("image".into(), image);
    meta.insert("input_shape".into(), json!(net.input));
    meta.insert("batch".into(), json!(batch));
    meta.insert("dtype".into(), json!(dtype.name()));
    meta.insert("times".into(), json!("analytic"));
    meta.insert(
        "device_model".into(),
        json!({"name": device.name, "source": device.source,
               "fwd": rates_json(&device.rates(false, dtype)),
               "bwd": rates_json(&device.rates(true, dtype))}),
    );
    meta.insert("parameters".into(), json!(net.parameter_count()));
    meta.insert(
        "tool_version".into(),
        json!(concat!("pipeopt ", env!("CARGO_PKG_VERSION"))),
    );
    meta
}

fn rates_json(r: &Rates) -> Value {
    json!({"conv_flops": r.conv, "conv1x1_flops": r.conv1x1, "matmul_flops": r.matmul,
           "mem_bw": r.mem_bw, "per_op_seconds": r.per_op, "per_layer_seconds": r.per_layer})
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

/// `meta.source` of the instances built here: what [`analytic_rebuild`] can build again.
pub const SOURCE: &str = "pipeopt nets (torchvision architectures)";

fn meta_str<'a>(inst: &'a Instance, key: &str) -> Option<&'a str> {
    inst.meta.get(key).and_then(|v| v.as_str())
}

/// The instance `base` rebuilt at micro-batch size `b` when it is an analytic instance of
/// a built-in network (checked against the file at its own batch), else `None`: an ONNX
/// import has analytic times too, but no network here to build again.
pub fn analytic_rebuild(
    base: &Instance,
    path: &Path,
    b: usize,
) -> Result<Option<Instance>, InputError> {
    let (Some(SOURCE), Some(model), Some("analytic"), Some(batch)) = (
        meta_str(base, "source"),
        meta_str(base, "model"),
        meta_str(base, "times"),
        base.meta.get("batch").and_then(|v| v.as_u64()),
    ) else {
        return Ok(None);
    };
    let dtype = meta_str(base, "dtype")
        .and_then(DType::parse)
        .unwrap_or(DType::F32);
    let Some(device) = base
        .meta
        .get("device_model")
        .and_then(|d| d.get("name"))
        .and_then(|n| n.as_str())
        .and_then(DeviceModel::preset)
    else {
        return Ok(None);
    };
    let image = base.meta.get("image").and_then(|v| v.as_u64()).unwrap_or(1) as usize;
    let build = |batch: usize| {
        instance(model, image, batch, dtype, &device).map_err(|e| {
            InputError::file(path, format!("rebuilding {model} at batch {batch}: {e}"))
        })
    };
    let own = build(batch as usize)?;
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-30);
    let same = own.layers.len() == base.layers.len()
        && close(own.input, base.input)
        && own.layers.iter().zip(&base.layers).all(|(a, c)| {
            close(a.fwd, c.fwd)
                && close(a.bwd, c.bwd)
                && close(a.weights, c.weights)
                && close(a.out, c.out)
                && close(a.stash.unwrap_or(0.0), c.stash.unwrap_or(0.0))
        });
    if !same {
        return Err(InputError::file(
            path,
            format!(
                "the {model} network rebuilt at its own batch {batch} differs from this file \
                 (made by another version of pipeopt?): regenerate it (instances/README.md)"
            ),
        ));
    }
    Ok(Some(if b as u64 == batch { own } else { build(b)? }))
}
