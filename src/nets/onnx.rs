//! ONNX models as [`Network`]s: a user's own network, exported once from PyTorch
//! (`torch.onnx.export`), planned like the built-in ones.
//!
//! # What is read
//! The file is decoded by the `onnx-rs` crate (the ONNX protobuf as typed structs). Of the
//! model, pipeopt keeps the data input (its per-sample shape, from the file or from the
//! caller), every node in the file's order (ONNX requires a topological order), the shapes of
//! the initializers (weights), and the attributes of each node. Every node becomes one op of
//! [`OpKind`] and its output shape is computed by the same per-op rules that build the
//! built-in networks ([`super::B`]): one shape rule in the code base, which is why no shape
//! inference crate is used. Weights come from the initializers' shapes and are checked
//! against the op's parameter count, so a model whose weights do not match its attributes
//! is refused rather than planned.
//!
//! # Ops
//! Of CNNs: `Conv` (any groups; symmetric padding, no dilation), `BatchNormalization`,
//! `Relu` and `Clip` from 0 (ReLU6, costed as a ReLU: it keeps its output and moves the
//! same bytes), `Sigmoid` (keeps its result), `HardSwish` and torch's `HardSigmoid` (keep
//! their input), `MaxPool` and `AveragePool` (square windows, symmetric padding),
//! `GlobalAveragePool`, `ReduceMean` over the spatial axes (a global average pool),
//! `Flatten`, `Gemm` (a linear layer: `transA = 0`), `Dropout`, `Add` and `Concat`,
//! `Identity`, `Constant`; stochastic depth (a product by random noise, one value per
//! sample) and a class token concatenated to every sample (`ops`). Of transformers (`seq`): `MatMul` of two activations or of an
//! activation and a weight (a linear layer, a bias `Add` after it folded in), `Softmax`,
//! `LayerNormalization`, `Gelu` and the elementwise functions a block writes out (`Erf`,
//! `Tanh`, `Pow`, `Sqrt`...), `Add`/`Sub`/`Mul`/`Div` broadcast, with constants (a scalar:
//! an affine map; a learned vector: a scale or a shift; a slice of a learned table: a
//! position embedding; anything else a constant operand), `Where` with a constant mask,
//! `ReduceMean` over one axis, views (`Transpose`, `Reshape`, `Unsqueeze`, `Squeeze`,
//! `Split`, `Slice`, `Expand`), `Gather` (an embedding, or a select), `Cast`. Nodes whose
//! inputs are all constants are evaluated at import time (`fold`, `eval`): the shape
//! arithmetic of exporters (`Shape`, `Range`, `ConstantOfShape`, `Equal`...), so masks and
//! reshape targets are known numbers. A batch moved from the first axis
//! (`nn.MultiheadAttention`'s sequence-first views) is followed through views and linear
//! layers (`layout`).
//! Training rules are those of [`super::analytic`]: what each op keeps for its backward
//! (a ReLU runs in place when nothing else reads its input, as torchvision's
//! `ReLU(inplace=True)`), its FLOPs and bytes. Any other op is an error, never a silent
//! guess: one error lists every op type of the file without a rule, each with its count
//! and first node, so that a model is fixed in one round.
//!
//! # Exporters that rewrite the network
//! PyTorch's default exporter since 2.9 (`dynamo=True`) runs onnxscript's optimizer, which
//! folds every batch normalization into the convolution before it, even for a model in
//! training mode: the file then has no batch norms, and planning it would leave out their
//! time and half the stash. The optimizer marks the nodes it rewrote
//! (`pkg.onnxscript.rewriter.rule_name`); a node marked `FuseBatchNorm...` is refused
//! unless the caller accepts it (`--accept-fused`). Export with `dynamo=False` and
//! `training=TrainingMode.TRAINING` instead. torch's default eval-mode export folds batch
//! norms too, or, unfolded, writes them in inference mode (one output, `training_mode =
//! 0`): such a batch norm is refused the same way, and so is an `Identity` that passes a
//! weight on as a tensor (constant folding sharing equal weights).
//!
//! # Blocks
//! The op DAG is cut into blocks wherever exactly one tensor is alive (a cut of the DAG
//! that carries one tensor: in a transformer, the residual stream between attention and
//! MLP), but never just before a ReLU or a view (ops that write into their input's storage
//! or view it: a block of one of them alone would hold only an alias of the tensor it
//! receives): `--granularity block` makes each such block a chain layer,
//! `--granularity op` linearizes the whole DAG like any op-level chain ([`super::ops`]).
//! These blocks are finer than the built-in networks' (ResNet's stem is four blocks here,
//! one there), so the per-layer overhead of a device model (`per_layer_seconds`, charged
//! once per block) adds up differently; per-op times, sizes and stashes are the same rules.

use std::collections::{HashMap, HashSet};

#[path = "onnx_cuts.rs"]
mod cuts;
#[path = "onnx_eval.rs"]
mod eval;
#[path = "onnx_fold.rs"]
mod fold;
#[path = "onnx_layout.rs"]
mod layout;
#[path = "onnx_ops.rs"]
mod ops;
#[path = "onnx_seq.rs"]
mod seq;
use cuts::split_blocks;

use onnx_rs::ast::{Attribute, DataType, Dimension, Graph, Node, OpType, TensorProto};

use serde_json::json;

use super::{DType, DeviceModel, Granularity, Network, OpKind, Shape, B};
use crate::model::Instance;

/// Why an ONNX model cannot be imported. `node` is the node's name (or its first output's
/// when the node has no name).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OnnxError {
    #[error("not a readable ONNX model: {0}")]
    Decode(String),
    #[error("the model has no graph")]
    NoGraph,
    #[error("{}", unsupported_ops_message(.0))]
    UnsupportedOps(Vec<UnsupportedOp>),
    #[error("node {node:?} ({op}): {reason}")]
    Unsupported {
        op: String,
        node: String,
        reason: String,
    },
    #[error("the graph's input: {0}")]
    Input(String),
    #[error("the graph: {0}")]
    Graph(String),
    #[error("node {node:?}: the output would be empty (the input is too small for the network)")]
    Empty { node: String },
    #[error("node {node:?}: the exporter fused a batch normalization into it (onnxscript's FuseBatchNormIntoConv), so the file is not the network that trains; export with torch.onnx.export(..., dynamo=False, training=torch.onnx.TrainingMode.TRAINING), or plan the file as it is with --accept-fused")]
    Fused { node: String },
    #[error("node {node:?}: a batch normalization in inference mode (training_mode = 0, or one output): the file was exported in eval mode, where torch also folds batch norms into the convolutions before them and drops dropouts, so it is not the network that trains; export with {EXPORT_FOR_TRAINING}, or plan the file as it is with --accept-fused")]
    InferenceMode { node: String },
    #[error("node {node:?} (Identity) passes on the weight {weight:?} as a tensor: the exporter folded constants, which torch does in eval mode (batch norms folded into convolutions, equal weights shared through Identity nodes), so the file is not the network that trains; export with {EXPORT_FOR_TRAINING}")]
    FoldedConstant { node: String, weight: String },
}

/// The export line that writes the network that trains (docs/onnx.md).
const EXPORT_FOR_TRAINING: &str = "torch.onnx.export(model, x, f, dynamo=False, \
    training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)";

fn node_name(node: &Node) -> String {
    if node.name.is_empty() {
        node.output.first().copied().unwrap_or("").to_string()
    } else {
        node.name.to_string()
    }
}

/// The attributes of one node, read with defaults.
struct Attrs<'n, 'a> {
    node: &'n Node<'a>,
}

impl<'n, 'a> Attrs<'n, 'a> {
    fn get(&self, name: &str) -> Option<&'n Attribute<'a>> {
        self.node.attribute.iter().find(|a| a.name == name)
    }
    fn int(&self, name: &str, default: i64) -> i64 {
        self.get(name).map_or(default, |a| a.i)
    }
    fn float(&self, name: &str, default: f64) -> f64 {
        self.get(name).map_or(default, |a| a.f as f64)
    }
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    fn string(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(|a| String::from_utf8_lossy(a.s).into_owned())
    }
}

/// A window op's output size (height, width), strides and paddings.
struct Window {
    out: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
}

/// The importer's state: the network as one builder, and what each tensor name is.
struct Importer<'g, 'a> {
    graph: &'g Graph<'a>,
    /// Initializer (and `Constant`) tensors by name.
    constants: HashMap<&'a str, TensorProto<'a>>,
    /// The op producing each activation tensor.
    producer: HashMap<&'a str, usize>,
    b: B,
    /// Whether a file that is not the network that trains (batch norms fused or in
    /// inference mode) is planned as it is.
    accept_fused: bool,
    /// Constants evaluated from the file (shape arithmetic, masks: `fold`).
    values: HashMap<&'a str, fold::Val>,
    /// The file's tensors (initializers, `Constant`s) as values, decoded once.
    decoded: std::cell::RefCell<HashMap<&'a str, fold::Val>>,
    /// How many nodes read each tensor.
    readers: HashMap<&'a str, usize>,
    /// The file's opset (of the default domain).
    opset: i64,
    /// The batch as the file's shape arithmetic sees it ([`seq::SYMBOLIC_BATCH`] when
    /// the file's batch axis is symbolic).
    batch: i64,
    /// Ops whose first per-sample axis is merged with the batch in the file (`seq`).
    merged: HashSet<usize>,
    /// Ops whose batch is elsewhere than first or merged with the first axis (`layout`).
    moved: HashMap<usize, layout::BatchAt>,
    /// The strides of the ops whose tensors are views with other than row-major strides
    /// (the batch of 2 first: `seq`).
    strides: HashMap<usize, Vec<i64>>,
}

/// Largest size or count accepted in a file (per dimension, and per weight tensor's
/// elements): beyond it a number is damage, not a network.
const LIMIT: usize = 1 << 31;

fn usize_of(v: i64, node: &Node, what: &str) -> Result<usize, OnnxError> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v <= LIMIT)
        .ok_or_else(|| unsupported(node, format!("{what} = {v} is out of range")))
}

/// Elements of a weight tensor, refused beyond [`LIMIT`] squared (a damaged file).
fn checked_elems(node: &Node, dims: &[usize]) -> Result<usize, OnnxError> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= LIMIT * LIMIT)
        .ok_or_else(|| unsupported(node, format!("weight of dims {dims:?} is out of range")))
}

/// A node's `i`-th input, when it names one (an empty name is an absent optional input).
fn input<'a>(node: &Node<'a>, i: usize) -> Option<&'a str> {
    node.input.get(i).copied().filter(|s| !s.is_empty())
}

/// A node's first input: the activation most ops read.
fn first_input<'a>(node: &Node<'a>) -> Result<&'a str, OnnxError> {
    input(node, 0).ok_or_else(|| unsupported(node, "no input"))
}

/// How the importer reads one node of a type.
type Rule<'g, 'a> = fn(&mut Importer<'g, 'a>, &Node<'a>) -> Result<(), OnnxError>;

/// An op type of a model without a training rule in pipeopt: how many nodes have it, and
/// the first of them.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsupportedOp {
    pub op: String,
    pub count: usize,
    pub first_node: String,
}

/// The ops the importer has rules for, as a user reads them.
const SUPPORTED_OPS: &str = "Conv, BatchNormalization, Relu, Clip from 0 (ReLU6), Sigmoid, \
    HardSigmoid, HardSwish, MaxPool, AveragePool, GlobalAveragePool, Flatten, Gemm, MatMul, \
    Einsum (a batched matrix product), Pad (by nothing), Softmax, LayerNormalization, Gelu, \
    Erf, Tanh, Exp, Log, Sqrt, Reciprocal, Neg, Sin, Cos, Pow, Add, Sub, Mul, Div, Where, \
    ReduceMean, Transpose, Reshape, Unsqueeze, Squeeze, Split, Slice, Concat, Expand, Cast, \
    Gather, Dropout, Identity, Constant, and on constants only Shape, ConstantOfShape, Range, \
    Equal, Less, Greater, Not, And, Or, Trilu, Floor, Ceil, Min, Max, Mod, Abs, ScatterND, \
    RandomUniformLike, RandomNormalLike, Bernoulli (a product by one random value per \
    sample: stochastic depth)";

/// Every unsupported op of a model in one message (each with its count and first node).
fn unsupported_ops_message(ops: &[UnsupportedOp]) -> String {
    let list: Vec<String> = ops
        .iter()
        .map(|u| {
            let times = if u.count == 1 {
                "1 node".to_string()
            } else {
                format!("{} nodes", u.count)
            };
            format!("{} ({times}, the first {:?})", u.op, u.first_node)
        })
        .collect();
    format!(
        "{} op type{} of the model {} no training rule in pipeopt: {} (supported: {SUPPORTED_OPS})",
        ops.len(),
        if ops.len() == 1 { "" } else { "s" },
        if ops.len() == 1 { "has" } else { "have" },
        list.join("; ")
    )
}

/// The op types of `graph` that the importer has no rule for (or outside the default
/// domain), in the order of their first node.
fn unsupported_ops(graph: &Graph) -> Vec<UnsupportedOp> {
    let mut found: Vec<UnsupportedOp> = Vec::new();
    for node in &graph.node {
        let op = if !node.domain.is_empty() && node.domain != "ai.onnx" {
            format!("{}::{}", node.domain, node.op_type.as_str())
        } else if Importer::rule(&node.op_type).is_none() {
            node.op_type.as_str().to_string()
        } else {
            continue;
        };
        match found.iter_mut().find(|u| u.op == op) {
            Some(u) => u.count += 1,
            None => found.push(UnsupportedOp {
                op,
                count: 1,
                first_node: node_name(node),
            }),
        }
    }
    found
}

/// A per-sample shape as a user writes the tensor's: `[N, 64, 56, 56]`.
fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[N, {}]", dims.join(", "))
}

fn unsupported(node: &Node, reason: impl Into<String>) -> OnnxError {
    OnnxError::Unsupported {
        op: node.op_type.as_str().to_string(),
        node: node_name(node),
        reason: reason.into(),
    }
}

impl<'g, 'a> Importer<'g, 'a> {
    /// The op producing the activation `name` read by `node`.
    fn activation(&self, node: &Node<'a>, name: &str) -> Result<usize, OnnxError> {
        let id = self.producer.get(name).copied().ok_or_else(|| {
            if self.constants.contains_key(name) || self.values.contains_key(name) {
                unsupported(
                    node,
                    format!("input {name:?} is a constant where pipeopt needs an activation"),
                )
            } else {
                OnnxError::Graph(format!(
                    "node {:?} reads {name:?}, which no earlier node produces (the nodes must \
                     be in topological order)",
                    node_name(node)
                ))
            }
        })?;
        self.check_moved(node, id)?;
        Ok(id)
    }

    /// The dims of the weight `name` read by `node`.
    fn weight_dims(&self, node: &Node<'a>, name: &str) -> Result<Vec<i64>, OnnxError> {
        self.constants
            .get(name)
            .map(|t| t.dims().to_vec())
            .ok_or_else(|| {
                unsupported(
                    node,
                    format!("weight {name:?} is not an initializer (a computed weight)"),
                )
            })
    }

    /// Whether `node` has a bias (its input `name`), checked to hold `outputs` values.
    fn bias(&self, node: &Node<'a>, name: Option<&str>, outputs: usize) -> Result<bool, OnnxError> {
        let Some(name) = name else {
            return Ok(false);
        };
        let dims = self.weight_dims(node, name)?;
        if dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d)) != Some(outputs as i64) {
            return Err(unsupported(
                node,
                format!("bias dims {dims:?} for {outputs} outputs"),
            ));
        }
        Ok(true)
    }

    fn push(
        &mut self,
        node: &Node<'a>,
        kind: OpKind,
        inputs: &[usize],
        shape: Shape,
    ) -> Result<(), OnnxError> {
        let name = node_name(node);
        let id = self
            .b
            .op(&name, kind, inputs, shape)
            .map_err(|_| OnnxError::Empty { node: name.clone() })?;
        self.inherit_merged_batch(id, inputs);
        let out = node
            .output
            .first()
            .ok_or_else(|| OnnxError::Graph(format!("node {name:?} has no output")))?;
        self.producer.insert(out, id);
        Ok(())
    }

    /// Spatial output size of a window op, after checking padding and dilation.
    fn window(
        &self,
        node: &Node<'a>,
        x: usize,
        kernel: (usize, usize),
        ceil: bool,
    ) -> Result<Window, OnnxError> {
        let at = Attrs { node };
        if let Some(pad) = at.string("auto_pad") {
            if !(pad.is_empty() || pad == "NOTSET") {
                return Err(unsupported(
                    node,
                    format!("auto_pad = {pad} (only explicit pads)"),
                ));
            }
        }
        if let Some(d) = at.ints("dilations") {
            if d.iter().any(|&v| v != 1) {
                return Err(unsupported(node, format!("dilations {d:?} (only 1)")));
            }
        }
        let strides = at.ints("strides").unwrap_or_else(|| vec![1, 1]);
        let pads = at.ints("pads").unwrap_or_else(|| vec![0; 4]);
        if strides.len() != 2 || pads.len() != 4 {
            return Err(unsupported(node, "only 2-d windows (NCHW)"));
        }
        if pads[0] != pads[2] || pads[1] != pads[3] {
            return Err(unsupported(
                node,
                format!("asymmetric pads {pads:?} (begin and end must be equal)"),
            ));
        }
        let s = (
            usize_of(strides[0], node, "stride")?,
            usize_of(strides[1], node, "stride")?,
        );
        let p = (
            usize_of(pads[0], node, "pad")?,
            usize_of(pads[1], node, "pad")?,
        );
        if s.0 == 0 || s.1 == 0 {
            return Err(unsupported(
                node,
                format!("strides {strides:?}: every stride is at least 1"),
            ));
        }
        if kernel.0 == 0 || kernel.1 == 0 {
            return Err(unsupported(
                node,
                format!("kernel {kernel:?}: every side is at least 1"),
            ));
        }
        if self.b.shape(x).len() != 3 {
            return Err(unsupported(node, "the input is not an NCHW feature map"));
        }
        let name = node_name(node);
        let out = self
            .b
            .spatial(x, &name, kernel, s, p, ceil)
            .map_err(|_| OnnxError::Empty { node: name })?;
        Ok(Window {
            out,
            stride: s,
            padding: p,
        })
    }

    fn square_kernel(&self, node: &Node<'a>) -> Result<usize, OnnxError> {
        let k = Attrs { node }
            .ints("kernel_shape")
            .ok_or_else(|| unsupported(node, "no kernel_shape"))?;
        if k.len() != 2 || k[0] != k[1] {
            return Err(unsupported(
                node,
                format!("kernel {k:?} (only square 2-d windows)"),
            ));
        }
        usize_of(k[0], node, "kernel")
    }

    /// A Dropout's ratio: its second input (a constant) or its `ratio` attribute (default
    /// 0.5), in [0, 1).
    fn dropout_ratio(&self, node: &Node<'a>, ratio: Option<&str>) -> Result<f64, OnnxError> {
        let p = match ratio {
            Some(r) => self
                .constants
                .get(r)
                .and_then(|t| {
                    t.as_f32()
                        .and_then(|v| v.first().map(|&f| f as f64))
                        .or_else(|| t.as_f64().and_then(|v| v.first().copied()))
                })
                .ok_or_else(|| unsupported(node, "the ratio is not a constant"))?,
            None => Attrs { node }.float("ratio", 0.5),
        };
        if !(0.0..1.0).contains(&p) {
            return Err(unsupported(
                node,
                format!("ratio {p}: a dropout ratio is in [0, 1)"),
            ));
        }
        Ok(p)
    }

    /// One node of the graph, in the file's order: its op added to the network (or its
    /// constant kept), its output's shape by the builders' rules.
    fn node(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        if self.try_fold(node)? {
            return Ok(());
        }
        match Self::rule(&node.op_type) {
            Some(rule) => rule(self, node),
            None => Err(OnnxError::UnsupportedOps(vec![UnsupportedOp {
                op: node.op_type.as_str().to_string(),
                count: 1,
                first_node: node_name(node),
            }])),
        }
    }

    /// The rule that imports nodes of type `op` (the one list of the ops pipeopt reads:
    /// [`SUPPORTED_OPS`] says it to users), or `None`.
    fn rule(op: &OpType) -> Option<Rule<'g, 'a>> {
        Some(match op {
            OpType::Constant => Self::constant,
            OpType::Identity => Self::identity,
            OpType::Conv => Self::conv,
            OpType::BatchNormalization => Self::batch_norm,
            OpType::Relu => Self::relu,
            OpType::Clip => Self::clip,
            OpType::Sigmoid => Self::sigmoid,
            OpType::HardSigmoid => Self::hard_sigmoid,
            OpType::HardSwish => Self::hard_swish,
            OpType::Mul | OpType::Sub | OpType::Div => Self::binary,
            OpType::MaxPool | OpType::AveragePool => Self::pool,
            OpType::GlobalAveragePool => Self::global_pool,
            OpType::ReduceMean => Self::reduce_mean,
            OpType::Flatten => Self::flatten,
            OpType::Reshape | OpType::Unsqueeze | OpType::Squeeze => Self::reshape,
            OpType::Gemm => Self::gemm,
            OpType::Dropout => Self::dropout,
            OpType::Add => Self::add,
            OpType::Concat => Self::concat,
            OpType::MatMul => Self::matmul,
            OpType::Einsum => Self::einsum,
            OpType::Pad => Self::pad,
            OpType::Softmax => Self::softmax,
            OpType::LayerNormalization => Self::layer_norm,
            OpType::Gelu => Self::gelu,
            OpType::Exp
            | OpType::Log
            | OpType::Tanh
            | OpType::Erf
            | OpType::Sqrt
            | OpType::Reciprocal
            | OpType::Neg
            | OpType::Sin
            | OpType::Cos
            | OpType::Pow => Self::unary,
            OpType::Transpose => Self::transpose,
            OpType::Split => Self::split,
            OpType::Slice => Self::slice,
            OpType::Expand => Self::expand,
            OpType::Cast => Self::cast,
            OpType::Where => Self::where_,
            OpType::Gather => Self::gather,
            OpType::Shape => Self::shape,
            OpType::ConstantOfShape
            | OpType::Range
            | OpType::Equal
            | OpType::Less
            | OpType::Greater
            | OpType::LessOrEqual
            | OpType::GreaterOrEqual
            | OpType::Not
            | OpType::And
            | OpType::Or
            | OpType::Trilu
            | OpType::Floor
            | OpType::Ceil
            | OpType::Min
            | OpType::Max
            | OpType::Mod
            | OpType::Abs
            | OpType::RandomUniformLike
            | OpType::RandomNormalLike
            | OpType::Bernoulli
            | OpType::ScatterND => Self::constant_only,
            _ => return None,
        })
    }

    /// An elementwise activation of one input (`Sigmoid`, `HardSwish`).
    fn elementwise(&mut self, node: &Node<'a>, kind: OpKind) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        self.push(node, kind, &[x], shape)
    }

    /// A `Sigmoid`.
    fn sigmoid(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        self.elementwise(node, OpKind::Sigmoid)
    }

    /// A `HardSwish`.
    fn hard_swish(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        self.elementwise(node, OpKind::HardSwish)
    }

    /// A `HardSigmoid` with torch's slope and offset (`alpha = 1/6`, `beta = 1/2`; ONNX's
    /// defaults, 0.2 and 0.5, are another function).
    fn hard_sigmoid(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let (alpha, beta) = (at.float("alpha", 0.2), at.float("beta", 0.5));
        if (alpha - 1.0 / 6.0).abs() > 1e-6 || (beta - 0.5).abs() > 1e-6 {
            return Err(unsupported(
                node,
                format!("alpha = {alpha}, beta = {beta} (only torch's Hardsigmoid: 1/6 and 0.5)"),
            ));
        }
        self.elementwise(node, OpKind::HardSigmoid)
    }

    /// A `Constant`: its tensor, kept for the nodes that read it as a value (a reshape
    /// target, a dropout ratio, a clip bound, reduction axes).
    fn constant(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let t = at
            .get("value")
            .and_then(|a| a.t.clone())
            .ok_or_else(|| unsupported(node, "only tensor constants (`value`)"))?;
        if let Some(out) = node.output.first() {
            self.constants.insert(out, t);
        }
        Ok(())
    }

    /// An `Identity`: its output names its input's producer.
    fn identity(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let name = first_input(node)?;
        if self.constants.contains_key(name) && !self.producer.contains_key(name) {
            return Err(OnnxError::FoldedConstant {
                node: node_name(node),
                weight: name.to_string(),
            });
        }
        let x = self.activation(node, name)?;
        if let Some(out) = node.output.first() {
            self.producer.insert(out, x);
        }
        Ok(())
    }

    /// A `Conv`: a 2-d convolution, its weight's dims checked against the input channels,
    /// the groups and the kernel.
    fn conv(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let x = self.activation(node, first_input(node)?)?;
        let w = self.weight_dims(node, input(node, 1).unwrap_or(""))?;
        if w.len() != 4 {
            return Err(unsupported(
                node,
                format!("weight dims {w:?} (only 2-d convolutions)"),
            ));
        }
        let groups = usize_of(at.int("group", 1), node, "group")?;
        let cin = self.b.shape(x)[0];
        let cout = usize_of(w[0], node, "weight dim 0")?;
        let kernel = (
            usize_of(w[2], node, "kernel")?,
            usize_of(w[3], node, "kernel")?,
        );
        let per_group = usize_of(w[1], node, "weight dim 1")?;
        if groups == 0 || per_group.checked_mul(groups) != Some(cin) {
            return Err(unsupported(
                node,
                format!("weight dims {w:?} with group {groups} do not match {cin} input channels"),
            ));
        }
        if let Some(k) = at.ints("kernel_shape") {
            if k != [w[2], w[3]] {
                return Err(unsupported(
                    node,
                    format!("kernel_shape {k:?} differs from the weight's {w:?}"),
                ));
            }
        }
        let bias = self.bias(node, input(node, 2), cout)?;
        let Window {
            out: (h, wd),
            stride,
            padding,
        } = self.window(node, x, kernel, false)?;
        let kind = OpKind::Conv2d {
            cin,
            cout,
            kernel,
            stride,
            padding,
            groups,
            bias,
        };
        self.push(node, kind, &[x], vec![cout, h, wd])?;
        Ok(())
    }

    /// A `BatchNormalization` of an NCHW map, its scale and bias one per channel.
    fn batch_norm(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        // Exported for training, a batch norm updates its running statistics: it has more
        // than one output (and `training_mode = 1` from opset 14 on).
        let training = at.int("training_mode", i64::from(node.output.len() > 1)) != 0;
        if !training && !self.accept_fused {
            return Err(OnnxError::InferenceMode {
                node: node_name(node),
            });
        }
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        if shape.len() != 3 {
            return Err(unsupported(node, "only 2-d batch normalization (NCHW)"));
        }
        for i in 1..=2 {
            let d = self.weight_dims(node, input(node, i).unwrap_or(""))?;
            if d != [shape[0] as i64] {
                return Err(unsupported(
                    node,
                    format!("scale or bias dims {d:?} for {} channels", shape[0]),
                ));
            }
        }
        let kind = OpKind::BatchNorm2d {
            channels: shape[0],
            eps: at.float("epsilon", 1e-5),
        };
        self.push(node, kind, &[x], shape)?;
        Ok(())
    }

    /// A `Relu`.
    fn relu(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        self.push(node, OpKind::Relu { inplace: true }, &[x], shape)?;
        Ok(())
    }

    /// A `Clip` from 0 (ReLU6).
    fn clip(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        // A clip from 0 (ReLU6, torchvision's `ReLU6(inplace=True)`) keeps its
        // output for the backward and moves the bytes of a ReLU: it is costed as
        // one. Bounds are inputs from opset 11, attributes before.
        let x = self.activation(node, first_input(node)?)?;
        let bound = |i: usize, attr: &str| -> Option<f64> {
            match input(node, i) {
                Some(c) => self.constants.get(c).and_then(|t| {
                    t.as_f32()
                        .and_then(|v| v.first().map(|&f| f as f64))
                        .or_else(|| t.as_f64().and_then(|v| v.first().copied()))
                }),
                None => at.get(attr).map(|a| a.f as f64),
            }
        };
        let min = bound(1, "min");
        if min != Some(0.0) {
            return Err(unsupported(
                node,
                format!("minimum {min:?} (only a clip from 0: ReLU6)"),
            ));
        }
        let shape = self.b.shape(x).clone();
        self.push(node, OpKind::Relu { inplace: true }, &[x], shape)?;
        Ok(())
    }

    /// A `MaxPool` or an `AveragePool`: a square window, equal strides and pads.
    fn pool(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let x = self.activation(node, first_input(node)?)?;
        if node.output.len() > 1 && !node.output[1].is_empty() {
            return Err(unsupported(node, "the Indices output"));
        }
        let k = self.square_kernel(node)?;
        let ceil_mode = at.int("ceil_mode", 0) != 0;
        let Window {
            out: (h, w),
            stride: s,
            padding: p,
        } = self.window(node, x, (k, k), ceil_mode)?;
        if s.0 != s.1 || p.0 != p.1 {
            return Err(unsupported(
                node,
                "only equal strides and pads in both dimensions",
            ));
        }
        let (stride, padding) = (s.0, p.0);
        let kind = if node.op_type == OpType::MaxPool {
            OpKind::MaxPool2d {
                kernel: k,
                stride,
                padding,
                ceil_mode,
            }
        } else {
            OpKind::AvgPool2d {
                kernel: k,
                stride,
                padding,
                ceil_mode,
            }
        };
        let c = self.b.shape(x)[0];
        self.push(node, kind, &[x], vec![c, h, w])?;
        Ok(())
    }

    /// A `GlobalAveragePool`, or a `ReduceMean` over the spatial axes (the same pool,
    /// flattened when it drops the axes).
    fn global_pool(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let x = self.activation(node, first_input(node)?)?;
        if self.b.shape(x).len() != 3 {
            return Err(unsupported(node, "the input is not an NCHW feature map"));
        }
        // A mean over the spatial axes is a global average pool; `keepdims = 0`
        // adds a flatten (a view).
        let mut flat = false;
        if node.op_type == OpType::ReduceMean {
            let axes = match input(node, 1) {
                Some(a) => self
                    .constants
                    .get(a)
                    .and_then(|t| t.as_i64().map(|v| v.into_owned())),
                None => at.ints("axes"),
            };
            let mut axes = axes.unwrap_or_default();
            axes.sort_unstable();
            if axes != [2, 3] && axes != [-2, -1] {
                return Err(unsupported(
                    node,
                    format!("axes {axes:?} (only the spatial mean, [2, 3])"),
                ));
            }
            flat = at.int("keepdims", 1) == 0;
        }
        let c = self.b.shape(x)[0];
        let kind = OpKind::AdaptiveAvgPool2d { out: (1, 1) };
        if flat {
            let name = node_name(node);
            let pool = self
                .b
                .op(&format!("{name}/pool"), kind, &[x], vec![c, 1, 1])
                .map_err(|_| OnnxError::Empty { node: name })?;
            self.push(node, OpKind::Flatten, &[pool], vec![c])?;
        } else {
            self.push(node, kind, &[x], vec![c, 1, 1])?;
        }
        Ok(())
    }

    /// A `Flatten` after the batch axis (any other axis: [`Importer::reshape`]).
    fn flatten(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        if (Attrs { node }).int("axis", 1) != 1 {
            return self.reshape(node);
        }
        let x = self.activation(node, first_input(node)?)?;
        let n = self
            .b
            .shape(x)
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= LIMIT * LIMIT)
            .ok_or_else(|| unsupported(node, "the flattened size is out of range"))?;
        if self.merged.contains(&x) {
            return Err(unsupported(
                node,
                "a flatten of an axis merged with the batch",
            ));
        }
        self.push(node, OpKind::Flatten, &[x], vec![n])?;
        Ok(())
    }

    /// A `Gemm` whose `A` is the activation: a linear layer.
    fn gemm(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let x = self.activation(node, first_input(node)?)?;
        if at.int("transA", 0) != 0 {
            return Err(unsupported(node, "transA = 1 (the activation must be A)"));
        }
        let w = self.weight_dims(node, input(node, 1).unwrap_or(""))?;
        if w.len() != 2 {
            return Err(unsupported(node, format!("weight dims {w:?}")));
        }
        let (fout, fin) = if at.int("transB", 0) != 0 {
            (w[0], w[1])
        } else {
            (w[1], w[0])
        };
        let (fin, fout) = (usize_of(fin, node, "fin")?, usize_of(fout, node, "fout")?);
        checked_elems(node, &[fin, fout])?;
        // Any rank: a tensor whose batch the exporter merged with the next axes
        // (`x.view(-1, d)`) keeps its per-sample shape.
        let mut shape = self.b.shape(x).clone();
        if shape.last() != Some(&fin) {
            return Err(unsupported(
                node,
                format!(
                    "input shape {} for a weight of {fin} inputs",
                    shape_text(&shape)
                ),
            ));
        }
        let bias = self.bias(node, input(node, 2), fout)?;
        *shape.last_mut().expect("checked") = fout;
        let id = self.b.ops.len();
        self.push(node, OpKind::Linear { fin, fout, bias }, &[x], shape)?;
        self.set_batch(id, self.batch_of(x));
        Ok(())
    }

    /// A `Dropout`.
    fn dropout(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let p = self.dropout_ratio(node, input(node, 1))?;
        let shape = self.b.shape(x).clone();
        self.push(node, OpKind::Dropout { p }, &[x], shape)?;
        Ok(())
    }
}

/// The graph's data input as read.
struct DataInput<'a> {
    name: &'a str,
    /// Per sample: `[C, H, W]` images, `[S]` token ids, `[S, D]` sequences of vectors.
    shape: Shape,
    /// Bytes per element of token ids (int64: 8, int32: 4); `None` for floats.
    id_bytes: Option<usize>,
    /// The batch axis's size in the file, when it has one.
    batch: Option<i64>,
}

/// The per-sample shape of the graph's data input: from the file, or `given` (which must
/// agree with the file where the file has numbers).
fn input_shape<'a>(graph: &Graph<'a>, given: Option<&[usize]>) -> Result<DataInput<'a>, OnnxError> {
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name()).collect();
    let data: Vec<_> = graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name))
        .collect();
    let [input] = data.as_slice() else {
        return Err(OnnxError::Input(format!(
            "{} data inputs ({}); pipeopt plans networks with one",
            data.len(),
            data.iter().map(|v| v.name).collect::<Vec<_>>().join(", ")
        )));
    };
    let id_bytes = match input.tensor_elem_type() {
        Some(DataType::Float) | Some(DataType::Float16) | Some(DataType::Bfloat16) | None => None,
        Some(DataType::Int64) => Some(8),
        Some(DataType::Int32) => Some(4),
        Some(t) => {
            return Err(OnnxError::Input(format!(
                "{:?} has element type {t:?}; pipeopt reads floating-point images or \
                 sequences, or integer token ids",
                input.name
            )))
        }
    };
    let dims: Vec<Option<usize>> = input
        .tensor_shape()
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Dimension::Value(v) if v > 0 && v as usize <= LIMIT => Some(v as usize),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let per_sample: Vec<Option<usize>> = dims.iter().skip(1).copied().collect();
    let shape = match given {
        Some(g) => {
            if !per_sample.is_empty()
                && (per_sample.len() != g.len()
                    || per_sample
                        .iter()
                        .zip(g)
                        .any(|(d, &v)| d.is_some_and(|d| d != v)))
            {
                return Err(OnnxError::Input(format!(
                    "--input-shape {g:?} disagrees with {:?}'s shape {dims:?} in the file \
                     (per sample, without the batch dimension)",
                    input.name
                )));
            }
            g.to_vec()
        }
        None => per_sample
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                OnnxError::Input(format!(
                    "{:?} has no fixed per-sample shape in the file ({dims:?}); give \
                     --input-shape C,H,W",
                    input.name
                ))
            })?,
    };
    let rank_ok = match id_bytes {
        Some(_) => shape.len() == 1,
        None => shape.len() == 2 || shape.len() == 3,
    };
    if !rank_ok || shape.contains(&0) || shape.iter().any(|&d| d > LIMIT) {
        return Err(OnnxError::Input(format!(
            "per-sample shape {shape:?} of {:?}: pipeopt imports images (C,H,W), sequences \
             of vectors (S,D) and token ids (S, integers), all positive",
            input.name
        )));
    }
    let batch = dims.first().copied().flatten().map(|b| b as i64);
    Ok(DataInput {
        name: input.name,
        shape,
        id_bytes,
        batch,
    })
}

/// How a file is read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions<'s> {
    /// The per-sample input shape where the file has none (or to check the file's).
    pub input_shape: Option<&'s [usize]>,
    /// Plan a file whose exporter fused batch normalizations into convolutions, or wrote
    /// them in inference mode (refused by default: module doc).
    pub accept_fused: bool,
}

/// Where the exporter says which rewrites it applied to a node (onnxscript's optimizer,
/// used by `torch.onnx.export(dynamo=True)`).
const REWRITE_KEY: &str = "pkg.onnxscript.rewriter.rule_name";

/// The network of an ONNX model (module doc), named `name`.
pub fn network_from_onnx(
    bytes: &[u8],
    name: &str,
    read: &ReadOptions,
) -> Result<Network, OnnxError> {
    let given_shape = read.input_shape;
    let model = onnx_rs::parse(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    if graph.node.is_empty() {
        return Err(OnnxError::Graph("no nodes".into()));
    }
    let data = input_shape(graph, given_shape)?;
    let (input_name, shape) = (data.name, data.shape.clone());
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for node in &graph.node {
        for i in node.input.iter().filter(|s| !s.is_empty()) {
            *readers.entry(i).or_default() += 1;
        }
    }
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map_or(1, |o| o.version);
    let mut importer = Importer {
        graph,
        constants: graph
            .initializer
            .iter()
            .map(|t| (t.name(), t.clone()))
            .collect(),
        producer: HashMap::from([(input_name, 0)]),
        b: B::new(name, shape.clone()),
        accept_fused: read.accept_fused,
        values: HashMap::new(),
        decoded: Default::default(),
        readers,
        opset,
        batch: data.batch.unwrap_or(seq::SYMBOLIC_BATCH),
        merged: HashSet::new(),
        moved: HashMap::new(),
        strides: HashMap::new(),
    };
    let missing = unsupported_ops(graph);
    if !missing.is_empty() {
        return Err(OnnxError::UnsupportedOps(missing));
    }
    for node in &graph.node {
        let fused = node
            .metadata_props
            .iter()
            .any(|e| e.key == REWRITE_KEY && e.value.contains("FuseBatchNorm"));
        if fused && !read.accept_fused {
            return Err(OnnxError::Fused {
                node: node_name(node),
            });
        }
        importer.node(node)?;
    }
    let outputs = &importer.graph.output;
    let [output] = outputs.as_slice() else {
        return Err(OnnxError::Graph(format!(
            "{} outputs ({}); pipeopt plans chains with one (export without auxiliary outputs)",
            outputs.len(),
            outputs
                .iter()
                .map(|v| v.name)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let out = *importer.producer.get(output.name).ok_or_else(|| {
        OnnxError::Graph(format!("the output {:?} is not an activation", output.name))
    })?;
    let ops = importer.b.finish().ops;
    if out != ops.len() - 1 || out == 0 {
        return Err(OnnxError::Graph(format!(
            "the output {:?} is not computed by the last node",
            output.name
        )));
    }
    // Every op must lead to the output: a dead branch would be planned for nothing.
    let mut used = vec![false; ops.len()];
    used[out] = true;
    for op in ops.iter().rev() {
        if used[op.id] {
            for &x in &op.inputs {
                used[x] = true;
            }
        }
    }
    if let Some(dead) = ops.iter().find(|o| !used[o.id]) {
        return Err(OnnxError::Graph(format!(
            "node {:?}'s output never reaches the graph's output",
            dead.name
        )));
    }
    Ok(Network {
        name: name.into(),
        input: shape,
        input_elem_bytes: data.id_bytes,
        blocks: split_blocks(ops),
    })
}

/// The instance of an ONNX model (module doc): its network for `batch` samples at
/// `granularity`, analytic times from `device`, the file read with `read`. `file` names the model in `meta` (with its
/// SHA-256), `name` is the network's name.
#[allow(clippy::too_many_arguments)]
pub fn onnx_instance(
    bytes: &[u8],
    file: &str,
    name: &str,
    read: &ReadOptions,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
    granularity: Granularity,
) -> Result<Instance, OnnxError> {
    use sha2::Digest;
    // The file's digest (its provenance in `meta`) is computed beside the import: on a
    // model of a few GB it takes as long as the rest.
    let (net, digest) = std::thread::scope(|s| {
        let digest = s.spawn(|| sha2::Sha256::digest(bytes));
        let net = network_from_onnx(bytes, name, read);
        (net, digest.join().expect("SHA-256 does not panic"))
    });
    let net = net?;
    let mut inst = match granularity {
        Granularity::Op => super::op_instance(&net, batch, dtype, device),
        Granularity::Block => super::analytic_instance(&net, batch, dtype, device),
    }
    .map_err(|e| OnnxError::Graph(e.to_string()))?;
    // The file's stem names the network (an image size in it is the user's to give).
    inst.name = match granularity {
        Granularity::Op => format!("{name}-b{batch}-op"),
        Granularity::Block => format!("{name}-b{batch}"),
    };
    let meta = &mut inst.meta;
    meta.insert("source".into(), json!("onnx (pipeopt import onnx)"));
    meta.insert("onnx_file".into(), json!(file));
    meta.insert("onnx_sha256".into(), json!(format!("{digest:x}")));
    meta.insert("blocks".into(), json!(net.blocks.len()));
    if granularity == Granularity::Block {
        meta.insert("granularity".into(), json!("block"));
    }
    Ok(inst)
}

#[cfg(test)]
#[path = "onnx_tests.rs"]
mod tests;
