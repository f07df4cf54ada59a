//! The network descriptions of `nets/` as libtorch layers.
//!
//! Each block of a [`nets::Network`] becomes one [`ChainLayer`]: its parameters (in op order,
//! torchvision's layout: conv weight `[Cout, Cin/groups, kh, kw]` then bias, BN weight then
//! bias, linear weight `[fout, fin]` then bias...) and a forward function that walks the
//! block's DAG op by op, freeing every intermediate tensor after its last use, so that what
//! stays alive after the call is exactly what autograd saved. The same layers serve the
//! profiler ([`super::profile`]) and the executor ([`super::execute`]).
//!
//! Departures from torchvision, none of which changes a size or a FLOP:
//! - BatchNorm runs in training mode without running statistics (they are buffers that no
//!   gradient depends on, and keeping them would make a layer a stateful object; the executor
//!   needs layers that are pure functions of their parameters, see `exec/mod.rs`).
//! - ReLU is not in place (an in-place ReLU saves the same tensor; only the transient peak
//!   inside a block differs).
//! - Dropout follows [`BuildOptions::dropout`]: on for profiling (its mask is part of the
//!   stash), off for the executor (so that the pipelined and the sequential runs compute the
//!   same thing and gradients can be compared).
//! - Attention is written out (scores, softmax, dropout, weighted sum) as the analytic model
//!   counts it, not through a fused kernel that would save less.
//! - Initialization: He-normal convolutions, `N(0, 1/fin)` linear layers, `N(0, 0.02)`
//!   embeddings, unit/zero norms, zero biases; drawn on the CPU after `manual_seed(seed)`.

use tch::{Device, Kind, Tensor};

use super::{Batch, ChainLayer, Network};
use crate::nets::{self, BinOp, Block, ConstValues, DType, Init, Op, OpKind, UnaryFn};

/// How to build a network's layers.
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    pub dtype: DType,
    pub device: Device,
    pub seed: i64,
    /// Dropout in training mode (true) or as the identity (false).
    pub dropout: bool,
}

/// The tch element kind of a [`DType`].
pub fn kind(dtype: DType) -> Kind {
    match dtype {
        DType::F32 => Kind::Float,
        DType::F16 => Kind::Half,
    }
}

/// Where each op's parameters lie in its block's parameter list (an empty range for ops
/// without parameters).
pub(crate) fn param_ranges(block: &Block) -> Vec<std::ops::Range<usize>> {
    let mut next = 0;
    block
        .ops
        .iter()
        .map(|op| {
            let start = next;
            next += nets::op_params(&op.kind).len();
            start..next
        })
        .collect()
}

/// Builds the chain of layers of `desc`. Parameter counts equal [`nets::params`]'s.
pub fn build(desc: &nets::Network, options: BuildOptions) -> Network {
    tch::manual_seed(options.seed);
    let k = kind(options.dtype);
    let layers = desc
        .blocks
        .iter()
        .map(|block| {
            let mut params = Vec::new();
            let slots = param_ranges(block);
            for op in &block.ops {
                for p in nets::op_params(&op.kind) {
                    let shape: Vec<i64> = p.shape.iter().map(|&x| x as i64).collect();
                    let t = match p.init {
                        Init::Normal(std) => {
                            Tensor::randn(shape.as_slice(), (Kind::Float, Device::Cpu)) * std
                        }
                        Init::Ones => Tensor::ones(shape.as_slice(), (Kind::Float, Device::Cpu)),
                        Init::Zeros => Tensor::zeros(shape.as_slice(), (Kind::Float, Device::Cpu)),
                    };
                    params.push(t.to_kind(k).to_device(options.device));
                }
            }
            let b = block.clone();
            let dropout = options.dropout;
            ChainLayer {
                name: block.name.clone(),
                params,
                forward: Box::new(move |p: &[Tensor], x: &Tensor| {
                    forward_block(&b, &slots, dropout, p, x)
                }),
            }
        })
        .collect();
    let loss: super::LossFn = if desc.output_shape().len() == 1 {
        // Class logits [N, classes]: cross-entropy with integer labels.
        Box::new(|y: &Tensor, t: &Tensor| y.cross_entropy_for_logits(t))
    } else {
        // Token logits [N, S, vocab]: cross-entropy per token.
        Box::new(|y: &Tensor, t: &Tensor| {
            let v = *y.size().last().expect("logits have a last dimension");
            y.reshape([-1, v])
                .cross_entropy_for_logits(&t.reshape([-1]))
        })
    };
    Network {
        name: desc.name.clone(),
        layers,
        loss: Box::new(move |y: &Tensor, t: &Tensor| loss(&y.to_kind(Kind::Float), t)),
    }
}

/// Deterministic batches for `desc`: `count` batches of `batch` samples (images drawn from
/// `N(0, 1)`, token ids and labels uniform), batch `i` drawn after `manual_seed(seed + i)`.
pub fn batches(
    desc: &nets::Network,
    batch: usize,
    count: usize,
    seed: i64,
    dtype: DType,
    device: Device,
) -> Vec<Batch> {
    let n = batch as i64;
    let mut in_shape = vec![n];
    in_shape.extend(desc.input.iter().map(|&d| d as i64));
    let out = desc.output_shape();
    let classes = *out.last().expect("non-empty output shape") as i64;
    let mut target_shape = vec![n];
    target_shape.extend(out[..out.len() - 1].iter().map(|&d| d as i64));
    let vocab = desc.blocks[0].ops.iter().find_map(|o| match o.kind {
        OpKind::Embedding { vocab, .. } => Some(vocab as i64),
        _ => None,
    });
    (0..count)
        .map(|i| {
            tch::manual_seed(seed + i as i64);
            let input = match vocab {
                Some(v) => Tensor::randint(v, in_shape.as_slice(), (Kind::Int64, Device::Cpu)),
                None => Tensor::randn(in_shape.as_slice(), (Kind::Float, Device::Cpu))
                    .to_kind(kind(dtype)),
            };
            let target =
                Tensor::randint(classes, target_shape.as_slice(), (Kind::Int64, Device::Cpu));
            Batch {
                input: input.to_device(device),
                target: target.to_device(device),
            }
        })
        .collect()
}

fn pair(p: (usize, usize)) -> [i64; 2] {
    [p.0 as i64, p.1 as i64]
}

/// Runs one block: op 0 is `x`, the result is the last op's output.
fn forward_block(
    block: &Block,
    slots: &[std::ops::Range<usize>],
    dropout: bool,
    p: &[Tensor],
    x: &Tensor,
) -> Tensor {
    let n = block.ops.len();
    let last_use = nets::last_readers(&block.ops);
    let mut vals: Vec<Option<Tensor>> = (0..n).map(|_| None).collect();
    vals[0] = Some(x.shallow_clone());
    for op in block.ops.iter().skip(1) {
        let args: Vec<&Tensor> = op
            .inputs
            .iter()
            .map(|&i| {
                vals[i]
                    .as_ref()
                    .expect("an op's inputs are computed before it and freed after it")
            })
            .collect();
        let y = run_op(op, &p[slots[op.id].clone()], &args, dropout);
        for &i in &op.inputs {
            if last_use[i] == op.id {
                vals[i] = None;
            }
        }
        vals[op.id] = Some(y);
    }
    vals[n - 1].take().expect("the last op's output")
}

/// The batch axis followed by the per-sample `shape`, as torch's sizes.
fn with_batch(shape: &[usize]) -> Vec<i64> {
    std::iter::once(-1)
        .chain(shape.iter().map(|&d| d as i64))
        .collect()
}

/// A constant operand of per-sample `shape` (the batch axis of 1 in front) with `values`,
/// on the device and of the kind of `like`. Values the importer does not model cannot be
/// rebuilt: the executor refuses them by name.
fn constant(shape: &[usize], values: ConstValues, like: &Tensor) -> Tensor {
    let mut dims = vec![1i64];
    dims.extend(shape.iter().map(|&d| d as i64));
    let opts = (like.kind(), like.device());
    match values {
        ConstValues::Fill(v) => Tensor::full(dims.as_slice(), v, opts),
        ConstValues::Causal { above, on_or_below } => {
            let n = dims.len();
            let (r, c) = (dims[n - 2], dims[n - 1]);
            let upper = Tensor::ones([r, c], (Kind::Bool, like.device())).triu(c - r + 1);
            Tensor::full(dims.as_slice(), on_or_below, opts).masked_fill(&upper, above)
        }
        ConstValues::Other => panic!(
            "not supported by the executor: a constant operand of shape {shape:?} whose \
             values pipeopt does not model (only fills and causal masks)"
        ),
    }
}

/// Runs one op (not `Input`) on its inputs `args` with its parameters `w`.
pub(crate) fn run_op(op: &Op, weights: &[Tensor], args: &[&Tensor], dropout: bool) -> Tensor {
    let arg = move |j: usize| args[j];
    let w = move |j: usize| &weights[j];
    match &op.kind {
        OpKind::Input => unreachable!("only op 0 is the input"),
        OpKind::Conv2d {
            stride,
            padding,
            groups,
            bias,
            ..
        } => arg(0).conv2d(
            w(0),
            bias.then(|| w(1)),
            pair(*stride),
            pair(*padding),
            [1, 1],
            *groups as i64,
        ),
        OpKind::BatchNorm2d { eps, .. } => arg(0).batch_norm(
            Some(w(0)),
            Some(w(1)),
            None::<&Tensor>,
            None::<&Tensor>,
            true,
            0.1,
            *eps,
            true,
        ),
        OpKind::Relu { .. } => arg(0).relu(),
        OpKind::Sigmoid => arg(0).sigmoid(),
        OpKind::HardSigmoid => arg(0).hardsigmoid(),
        OpKind::HardSwish => arg(0).hardswish(),
        OpKind::Mul => arg(0) * arg(1),
        OpKind::MaxPool2d {
            kernel,
            stride,
            padding,
            ceil_mode,
        } => arg(0).max_pool2d(
            [*kernel as i64; 2],
            [*stride as i64; 2],
            [*padding as i64; 2],
            [1, 1],
            *ceil_mode,
        ),
        OpKind::AvgPool2d {
            kernel,
            stride,
            padding,
            ceil_mode,
        } => arg(0).avg_pool2d(
            [*kernel as i64; 2],
            [*stride as i64; 2],
            [*padding as i64; 2],
            *ceil_mode,
            true,
            None::<i64>,
        ),
        OpKind::AdaptiveAvgPool2d { out } => arg(0).adaptive_avg_pool2d(pair(*out)),
        OpKind::Flatten => arg(0).flatten(1, -1),
        OpKind::Linear { bias, .. } => arg(0).linear(w(0), bias.then(|| w(1))),
        OpKind::Dropout { p: rate } => arg(0).dropout(*rate, dropout),
        // A factor per sample, kept by autograd as torchvision's does; every sample keeps its
        // branch (the rate is not in the description: it changes no size or time).
        OpKind::StochasticDepth if dropout => {
            let mut dims = vec![1i64; arg(0).dim()];
            dims[0] = arg(0).size()[0];
            arg(0) * Tensor::ones(dims.as_slice(), (arg(0).kind(), arg(0).device()))
        }
        OpKind::StochasticDepth => arg(0).shallow_clone(),
        OpKind::Add => {
            let mut s = arg(0) + arg(1);
            for j in 2..args.len() {
                s += arg(j);
            }
            s
        }
        OpKind::Cat => {
            let ins: Vec<&Tensor> = args.to_vec();
            Tensor::cat(&ins, 1)
        }
        OpKind::Embedding { .. } => Tensor::embedding(w(0), arg(0), -1, false, false),
        OpKind::PositionEmbedding { max_len, .. } => {
            let s = arg(0).size()[1];
            if *max_len as i64 >= s {
                arg(0) + w(0).narrow(0, 0, s).unsqueeze(0)
            } else {
                // BERT's token-type embedding: every token of type 0.
                arg(0) + w(0).get(0)
            }
        }
        OpKind::LayerNorm { dim, eps } => {
            arg(0).layer_norm([*dim as i64], Some(w(0)), Some(w(1)), *eps, true)
        }
        OpKind::Gelu => arg(0).gelu("none"),
        OpKind::Attention {
            heads,
            causal,
            dropout: rate,
        } => attention(
            arg(0),
            arg(1),
            arg(2),
            *heads as i64,
            *causal,
            *rate,
            dropout,
        ),
        _ => run_general_op(op, weights, args),
    }
}

/// Runs one of the general ops of imported networks (matrix products, softmax, views,
/// elementwise ops with broadcasting, constants, masks).
fn run_general_op(op: &Op, w: &[Tensor], args: &[&Tensor]) -> Tensor {
    let arg = move |j: usize| args[j];
    let w = move |j: usize| &w[j];
    match &op.kind {
        OpKind::MatMul => arg(0).matmul(arg(1)),
        OpKind::Softmax { axis } => arg(0).softmax(*axis as i64 + 1, arg(0).kind()),
        OpKind::Transpose { perm } => {
            let p: Vec<i64> = std::iter::once(0)
                .chain(perm.iter().map(|&a| a as i64 + 1))
                .collect();
            arg(0).permute(p.as_slice())
        }
        OpKind::Reshape => arg(0).reshape(with_batch(&op.shape).as_slice()),
        OpKind::Contiguous => arg(0).contiguous(),
        OpKind::Slice {
            axis,
            start,
            len,
            step,
        } => {
            let end = start + (len.saturating_sub(1)) * step + 1;
            arg(0).slice(*axis as i64 + 1, *start as i64, end as i64, *step as i64)
        }
        OpKind::Expand => arg(0).expand(with_batch(&op.shape).as_slice(), false),
        OpKind::Concat { axis } => Tensor::cat(args, *axis as i64 + 1),
        OpKind::ConcatParam { axis, .. } => {
            let mut dims = w(0).size();
            dims.insert(0, arg(0).size()[0]);
            let token = w(0).unsqueeze(0).expand(dims.as_slice(), false);
            Tensor::cat(&[&token, arg(0)], *axis as i64 + 1)
        }
        OpKind::ReduceMean { axis, keepdim } => {
            arg(0).mean_dim([*axis as i64 + 1].as_slice(), *keepdim, arg(0).kind())
        }
        OpKind::Unary { f } => {
            let x = arg(0);
            match f {
                UnaryFn::Exp => x.exp(),
                UnaryFn::Log => x.log(),
                UnaryFn::Tanh => x.tanh(),
                UnaryFn::Erf => x.erf(),
                UnaryFn::Sqrt => x.sqrt(),
                UnaryFn::Reciprocal => x.reciprocal(),
                UnaryFn::Neg => x.neg(),
                UnaryFn::Sin => x.sin(),
                UnaryFn::Cos => x.cos(),
                UnaryFn::Pow(e) => x.pow_tensor_scalar(*e),
                UnaryFn::Affine { mul, add } => x * *mul + *add,
            }
        }
        OpKind::Binary { op } => binary(*op, arg(0), arg(1)),
        OpKind::Param { op, .. } => binary(*op, arg(0), w(0)),
        OpKind::GatheredBias { shape, .. } => {
            // The table's entries in a fixed order: what matters to time and memory is a
            // gather of `shape` entries from the table, as a relative position index reads it.
            let table = w(0).flatten(0, -1);
            let n = shape.iter().product::<usize>() as i64;
            let index = Tensor::arange(n, (Kind::Int64, table.device())).remainder(table.size()[0]);
            let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            arg(0) + table.index_select(0, &index).reshape(dims.as_slice())
        }
        OpKind::Const { op, shape, values } => {
            let c = constant(shape, *values, arg(0));
            binary(*op, arg(0), &c)
        }
        OpKind::MaskFill {
            shape,
            values,
            fill,
            ..
        } => {
            let mask = constant(shape, *values, arg(0)).to_kind(Kind::Bool);
            arg(0).masked_fill(&mask, *fill)
        }
        other => unreachable!("run_op runs {other:?}"),
    }
}

fn binary(op: BinOp, a: &Tensor, b: &Tensor) -> Tensor {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
    }
}

/// Multi-head scaled dot-product attention over `[N, S, D]` projections.
fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    heads: i64,
    causal: bool,
    rate: f64,
    dropout: bool,
) -> Tensor {
    let size = q.size();
    let (n, s, d) = (size[0], size[1], size[2]);
    let dh = d / heads;
    let split = |t: &Tensor| t.view([n, s, heads, dh]).transpose(1, 2);
    let mut scores = split(q).matmul(&split(k).transpose(-2, -1)) * (1.0 / (dh as f64).sqrt());
    if causal {
        let mask = Tensor::ones([s, s], (Kind::Bool, q.device())).triu(1);
        scores = scores.masked_fill(&mask, f64::NEG_INFINITY);
    }
    let probs = scores.softmax(-1, q.kind()).dropout(rate, dropout);
    probs
        .matmul(&split(v))
        .transpose(1, 2)
        .contiguous()
        .view([n, s, d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::{ConstValues, UnaryFn, B};

    /// The network of one block `b` on inputs of per-sample shape `input`, built on the
    /// CPU in f32 (dropout on or off).
    fn one_block_net(b: B, input: Vec<usize>, dropout: bool) -> Network {
        let desc = nets::Network {
            name: "block".into(),
            input,
            input_elem_bytes: None,
            blocks: vec![b.finish()],
        };
        let options = BuildOptions {
            dtype: DType::F32,
            device: Device::Cpu,
            seed: 1,
            dropout,
        };
        build(&desc, options)
    }

    /// The general ops of imported transformers run in libtorch with the shapes the
    /// importer gives them: causal attention written out, a learned scale, a rotary-style
    /// constant product, a slice and a concatenation.
    #[test]
    fn transformer_ops_run_with_their_shapes() {
        let (s, d, h) = (4usize, 8usize, 2usize);
        let dh = d / h;
        let mut b = B::new("attn", vec![s, d]);
        let qkv = b.linear("qkv", 0, 3 * d, true).unwrap();
        let mut heads = Vec::new();
        for (i, perm) in [vec![1, 0, 2], vec![1, 2, 0], vec![1, 0, 2]]
            .into_iter()
            .enumerate()
        {
            let sl = OpKind::Slice {
                axis: 1,
                start: i * d,
                len: d,
                step: 1,
            };
            let x = b.op("slice", sl, &[qkv], vec![s, d]).unwrap();
            let x = b.op("view", OpKind::Reshape, &[x], vec![s, h, dh]).unwrap();
            let shape: Vec<usize> = perm.iter().map(|&p| [s, h, dh][p]).collect();
            heads.push(b.op("t", OpKind::Transpose { perm }, &[x], shape).unwrap());
        }
        let scores = b
            .op("qk", OpKind::MatMul, &heads[..2], vec![h, s, s])
            .unwrap();
        let scale = OpKind::Unary {
            f: UnaryFn::Affine { mul: 0.5, add: 0.0 },
        };
        let scores = b.op("scale", scale, &[scores], vec![h, s, s]).unwrap();
        let mask = OpKind::MaskFill {
            shape: vec![1, s, s],
            values: ConstValues::Causal {
                above: 1.0,
                on_or_below: 0.0,
            },
            fill: f64::NEG_INFINITY,
            mask_bytes: s * s,
        };
        let scores = b.op("mask", mask, &[scores], vec![h, s, s]).unwrap();
        let p = b
            .op(
                "softmax",
                OpKind::Softmax { axis: 2 },
                &[scores],
                vec![h, s, s],
            )
            .unwrap();
        let y = b
            .op("pv", OpKind::MatMul, &[p, heads[2]], vec![h, s, dh])
            .unwrap();
        let perm = vec![1, 0, 2];
        let y = b
            .op("t", OpKind::Transpose { perm }, &[y], vec![s, h, dh])
            .unwrap();
        let y = b
            .op("copy", OpKind::Contiguous, &[y], vec![s, h, dh])
            .unwrap();
        let y = b.op("merge", OpKind::Reshape, &[y], vec![s, d]).unwrap();
        let rot = OpKind::Const {
            op: BinOp::Mul,
            shape: vec![s, d],
            values: ConstValues::Fill(0.5),
        };
        let y = b.op("rot", rot, &[y], vec![s, d]).unwrap();
        let half = OpKind::Slice {
            axis: 1,
            start: 0,
            len: d / 2,
            step: 1,
        };
        let a = b.op("half", half, &[y], vec![s, d / 2]).unwrap();
        let neg = OpKind::Unary { f: UnaryFn::Neg };
        let a = b.op("neg", neg, &[a], vec![s, d / 2]).unwrap();
        let other = OpKind::Slice {
            axis: 1,
            start: d / 2,
            len: d / 2,
            step: 1,
        };
        let c = b.op("other", other, &[y], vec![s, d / 2]).unwrap();
        let y = b
            .op("cat", OpKind::Concat { axis: 1 }, &[a, c], vec![s, d])
            .unwrap();
        let scale = OpKind::Param {
            op: BinOp::Mul,
            shape: vec![d],
        };
        let y = b.op("norm.weight", scale, &[y], vec![s, d]).unwrap();
        b.op("residual", OpKind::Add, &[0, y], vec![s, d]).unwrap();
        let net = one_block_net(b, vec![s, d], true);
        assert_eq!(net.layers[0].params.len(), 3, "qkv weight, bias, the scale");
        let x = Tensor::randn([3, s as i64, d as i64], (Kind::Float, Device::Cpu));
        let y = (net.layers[0].forward)(&net.layers[0].params, &x);
        assert_eq!(y.size(), vec![3, s as i64, d as i64]);
        assert!(y.isfinite().all().int64_value(&[]) == 1);
    }

    /// Swin's ops: a slice of every second column (patch merging) and a relative position
    /// bias gathered from a learned table, run with the shapes the importer gives them.
    #[test]
    fn strided_slices_and_gathered_biases_run_with_their_shapes() {
        let (s, d) = (4usize, 6usize);
        let mut b = B::new("window", vec![s, d]);
        let every_second = OpKind::Slice {
            axis: 1,
            start: 1,
            len: 3,
            step: 2,
        };
        let x = b.op("merge", every_second, &[0], vec![s, 3]).unwrap();
        let bias = OpKind::GatheredBias {
            shape: vec![s, 3],
            rows: 5,
            dim: 2,
        };
        b.op("bias", bias, &[x], vec![s, 3]).unwrap();
        let net = one_block_net(b, vec![s, d], false);
        let params = &net.layers[0].params;
        assert_eq!(params.len(), 1, "the bias table");
        assert_eq!(params[0].size(), vec![5, 2]);
        let x = Tensor::randn([3, s as i64, d as i64], (Kind::Float, Device::Cpu));
        let y = (net.layers[0].forward)(params, &x);
        assert_eq!(y.size(), vec![3, s as i64, 3]);
        // Columns 1, 3, 5 plus a bias read from the table, the same for every sample.
        let bias = &y - x.slice(2, 1, 6, 2);
        assert!(bias.isfinite().all().int64_value(&[]) == 1);
        let first = bias.get(0);
        assert!((first - bias.get(2)).abs().max().double_value(&[]) < 1e-6);
    }
}
