//! Network descriptions as data.
//!
//! A [`Network`] is an ordered chain of [`Block`]s; each block is a small DAG of [`Op`]s with
//! its kind, hyper-parameters, input op ids and per-sample output shape (the batch dimension
//! is left out). Every block has exactly one input tensor (op 0, [`OpKind::Input`]) and one
//! output tensor (its last op), so a chain cut between blocks carries one tensor. The
//! architectures follow torchvision exactly (parameter counts are tested). With the feature
//! `torch`, `exec::torchnet` walks `blocks[i].ops` in order and builds each op from its
//! kind as a libtorch layer.

pub mod analytic;
mod densenet;
pub mod device;
pub mod fit;
mod inception;
pub mod onnx;
pub mod ops;
pub mod random;
mod resnet;
mod transformer;
mod vgg;

pub use analytic::{analytic_instance, instance, DType, DeviceModel};
pub use ops::{
    analytic_op_times, measured_op_instance, op_graph, op_instance, Granularity, OpTimes,
};

/// One built-in network: its name (`--model`, `execute --network`, an analytic
/// instance's `meta.model`), a line saying what it is, and its constructor at an image side
/// (the transformers ignore it: their sequence length is fixed).
pub struct NetworkEntry {
    pub name: &'static str,
    pub description: &'static str,
    build: fn(usize) -> R<Network>,
}

/// Every built-in network, in the order of the help texts: a new network is its file and
/// one entry here. [`network`] looks names up in it; the command line's `--model` values and
/// their help are made from it.
pub static NETWORKS: &[NetworkEntry] = &[
    NetworkEntry {
        name: "resnet50",
        description: "ResNet-50 (torchvision, 25.6 M parameters)",
        build: |image| resnet::resnet("resnet50", &[3, 4, 6, 3], image),
    },
    NetworkEntry {
        name: "resnet101",
        description: "ResNet-101 (torchvision, 44.5 M parameters)",
        build: |image| resnet::resnet("resnet101", &[3, 4, 23, 3], image),
    },
    NetworkEntry {
        name: "inception_v3",
        description: "Inception-v3 (torchvision, without the auxiliary classifier)",
        build: inception::inception_v3,
    },
    NetworkEntry {
        name: "densenet121",
        description: "DenseNet-121 (torchvision)",
        build: densenet::densenet121,
    },
    NetworkEntry {
        name: "vgg16",
        description: "VGG-16 (torchvision, 138 M parameters)",
        build: vgg::vgg16,
    },
    NetworkEntry {
        name: "bert48",
        description: "BERT-style encoder: 48 layers, hidden 1024, sequence 512 (--image ignored)",
        build: |_| Ok(transformer::bert48()),
    },
    NetworkEntry {
        name: "gpt24",
        description: "GPT-style decoder: 24 layers, hidden 2048, sequence 1024 (--image ignored)",
        build: |_| Ok(transformer::gpt24()),
    },
];

/// The names of the built-in networks, in order.
pub fn network_names() -> impl Iterator<Item = &'static str> {
    NETWORKS.iter().map(|n| n.name)
}

/// Per-sample tensor shape: `[C, H, W]` for images, `[S, D]` for token sequences, `[F]` flat.
pub type Shape = Vec<usize>;

/// The kind and hyper-parameters of one operation.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// The block's input tensor (the previous block's output, or the network input).
    Input,
    Conv2d {
        cin: usize,
        cout: usize,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        groups: usize,
        bias: bool,
    },
    BatchNorm2d {
        channels: usize,
        eps: f64,
    },
    Relu {
        inplace: bool,
    },
    MaxPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
        ceil_mode: bool,
    },
    /// `count_include_pad` is torchvision's default (true).
    AvgPool2d {
        kernel: usize,
        stride: usize,
        padding: usize,
        ceil_mode: bool,
    },
    AdaptiveAvgPool2d {
        out: (usize, usize),
    },
    Flatten,
    /// Applied to the last dimension of its input.
    Linear {
        fin: usize,
        fout: usize,
        bias: bool,
    },
    Dropout {
        p: f64,
    },
    /// Stochastic depth (Huang et al., "Deep Networks with Stochastic Depth", 2016; torchvision's
    /// `StochasticDepth(mode="row")`): the input times a factor drawn per sample (0, or
    /// `1 / (1 - p)` for the samples that keep the branch), broadcast over the sample.
    StochasticDepth,
    /// A learned tensor of per-sample `shape`, the same for every sample, concatenated before
    /// the activation along `axis` (ViT's class token, Dosovitskiy et al., "An Image is Worth
    /// 16x16 Words", 2021).
    ConcatParam {
        axis: usize,
        shape: Shape,
    },
    /// Elementwise sum of its inputs.
    Add,
    /// Elementwise product of two inputs, the second broadcast over the first's spatial
    /// dimensions when it is `[C, 1, 1]` (squeeze-and-excitation's scaling).
    Mul,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `clamp(x / 6 + 1 / 2, 0, 1)` (torch's `Hardsigmoid`).
    HardSigmoid,
    /// `x * clamp(x / 6 + 1 / 2, 0, 1)` (torch's `Hardswish`).
    HardSwish,
    /// Concatenation of its inputs along dimension 0 of the per-sample shape (channels).
    Cat,
    /// Token ids to vectors; the input holds ids of shape `[S]`.
    Embedding {
        vocab: usize,
        dim: usize,
    },
    /// Learned position embedding added to the input `[S, D]` (`max_len` x `D` parameters).
    PositionEmbedding {
        max_len: usize,
        dim: usize,
    },
    /// A learned bias of `shape` (broadcast over the input) gathered from a table of
    /// `rows` x `dim` parameters and added: Swin's and MaxViT's relative position bias, a
    /// table of `(2w - 1)^2` x heads read at each pair of positions of a `w` x `w` window.
    GatheredBias {
        shape: Shape,
        rows: usize,
        dim: usize,
    },
    LayerNorm {
        dim: usize,
        eps: f64,
    },
    Gelu,
    /// Scaled dot-product attention with its softmax and dropout: inputs q, k, v of shape
    /// `[S, D]`, output `[S, D]`; no parameters (the projections are Linear ops).
    Attention {
        heads: usize,
        causal: bool,
        dropout: f64,
    },
    /// Matrix product of two activations (`torch.matmul`): `[.., M, K] x [.., K, N]`, the
    /// leading dimensions broadcast (attention's scores and weighted sum).
    MatMul,
    /// Softmax over `axis` of the per-sample shape.
    Softmax {
        axis: usize,
    },
    /// A permutation of the per-sample axes: a view (`perm[i]` is the input axis of output
    /// axis `i`).
    Transpose {
        perm: Vec<usize>,
    },
    /// The same elements under the op's shape: a view (reshape, squeeze, unsqueeze, a
    /// flatten of more than one axis).
    Reshape,
    /// A copy of a non-contiguous view into a new tensor (`contiguous()`, which a reshape
    /// that cannot be a view makes).
    Contiguous,
    /// `len` entries from `start` on `axis` of the per-sample shape, every `step`-th: a view
    /// (slice, split, select; Swin's patch merging takes every second row and column).
    Slice {
        axis: usize,
        start: usize,
        len: usize,
        step: usize,
    },
    /// The input broadcast to the op's shape: a view.
    Expand,
    /// Concatenation of its inputs along `axis` of the per-sample shape.
    Concat {
        axis: usize,
    },
    /// Mean over `axis` of the per-sample shape (`keepdim` keeps it as size 1).
    ReduceMean {
        axis: usize,
        keepdim: bool,
    },
    /// An elementwise function of one activation.
    Unary {
        f: UnaryFn,
    },
    /// An elementwise function of two activations, broadcast (their product is [`Mul`]).
    ///
    /// [`Mul`]: OpKind::Mul
    Binary {
        op: BinOp,
    },
    /// The activation with a learned tensor of `shape` (a norm's scale or shift, a bias)
    /// broadcast over its trailing dimensions; `op` is `Add` or `Mul`.
    Param {
        op: BinOp,
        shape: Shape,
    },
    /// The activation with a constant tensor of `shape` broadcast over it (a mask added to
    /// attention scores, a rotary table): not a parameter, and nothing to keep for it.
    Const {
        op: BinOp,
        shape: Shape,
        values: ConstValues,
    },
    /// `where(mask, fill, x)`: the entries of the activation where a constant boolean mask
    /// of `shape` is true replaced by `fill` (`masked_fill`); `mask_bytes`, the mask's
    /// bytes when the forward computes it (a comparison), which autograd keeps.
    MaskFill {
        shape: Shape,
        values: ConstValues,
        fill: f64,
        mask_bytes: usize,
    },
}

/// Elementwise functions of one tensor ([`OpKind::Unary`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryFn {
    Exp,
    Log,
    Tanh,
    Erf,
    Sqrt,
    Reciprocal,
    Neg,
    Sin,
    Cos,
    /// `x^e` for a constant `e`.
    Pow(f64),
    /// `mul * x + add` for constants (a scale by `1/sqrt(d)`, an `x + 1`).
    Affine {
        mul: f64,
        add: f64,
    },
}

/// Elementwise binary operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// What is known of a constant tensor's values (enough for the executor to rebuild it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConstValues {
    /// Every entry is this value.
    Fill(f64),
    /// A causal mask over the last two axes: `above` where the column is after the row,
    /// `on_or_below` elsewhere.
    Causal { above: f64, on_or_below: f64 },
    /// Values the importer does not model.
    Other,
}

/// One operation of a block's DAG.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Index of this op within its block.
    pub id: usize,
    /// Name (torchvision module path where there is one).
    pub name: String,
    pub kind: OpKind,
    /// Ids of the ops (of the same block) whose outputs this op reads.
    pub inputs: Vec<usize>,
    /// Per-sample output shape.
    pub shape: Shape,
}

/// One chain layer: a small DAG whose op 0 is the input and whose last op is the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub name: String,
    pub ops: Vec<Op>,
}

/// For each op of a DAG listed in topological order (`ops[i].id == i`), the id of the last
/// op that reads its output, or its own id when none does: where its tensor can be freed.
pub fn last_readers(ops: &[Op]) -> Vec<usize> {
    let mut last: Vec<usize> = (0..ops.len()).collect();
    for op in ops {
        for &x in &op.inputs {
            last[x] = last[x].max(op.id);
        }
    }
    last
}

impl Block {
    pub fn input_shape(&self) -> &Shape {
        &self.ops[0].shape
    }
    pub fn output_shape(&self) -> &Shape {
        &self.ops[self.ops.len() - 1].shape
    }
    pub fn parameter_count(&self) -> u64 {
        self.ops.iter().map(|o| params(&o.kind)).sum()
    }
}

/// How a weight tensor starts (the libtorch builder's initialization, as torchvision and
/// the transformers' reference code do it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Normal with mean 0 and this standard deviation.
    Normal(f64),
    Ones,
    Zeros,
}

/// One weight tensor of an op: its shape and how it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamShape {
    pub shape: Vec<usize>,
    pub init: Init,
}

fn param(shape: Vec<usize>, init: Init) -> ParamShape {
    ParamShape { shape, init }
}

/// The weight tensors of one op, in torchvision's layout (empty for parameter-free ops): the
/// one rule the parameter count ([`params`], hence the analytic model's weights) and the
/// libtorch builder (`exec::torchnet`) read. A new op with weights adds its arm here.
pub fn op_params(kind: &OpKind) -> Vec<ParamShape> {
    let bias = |present: bool, n: usize| present.then(|| param(vec![n], Init::Zeros));
    match kind {
        OpKind::Conv2d {
            cin,
            cout,
            kernel,
            groups,
            bias: b,
            ..
        } => {
            let fan_in = (cin / groups) * kernel.0 * kernel.1;
            let weight = param(
                vec![*cout, cin / groups, kernel.0, kernel.1],
                Init::Normal((2.0 / fan_in as f64).sqrt()),
            );
            std::iter::once(weight).chain(bias(*b, *cout)).collect()
        }
        OpKind::BatchNorm2d { channels: n, .. } | OpKind::LayerNorm { dim: n, .. } => {
            vec![param(vec![*n], Init::Ones), param(vec![*n], Init::Zeros)]
        }
        OpKind::Linear { fin, fout, bias: b } => {
            let weight = param(vec![*fout, *fin], Init::Normal(1.0 / (*fin as f64).sqrt()));
            std::iter::once(weight).chain(bias(*b, *fout)).collect()
        }
        OpKind::Embedding { vocab: rows, dim }
        | OpKind::PositionEmbedding { max_len: rows, dim }
        | OpKind::GatheredBias { rows, dim, .. } => {
            vec![param(vec![*rows, *dim], Init::Normal(0.02))]
        }
        OpKind::ConcatParam { shape, .. } => vec![param(shape.clone(), Init::Normal(0.02))],
        OpKind::Param { op, shape } => {
            let init = if *op == BinOp::Mul {
                Init::Ones
            } else {
                Init::Zeros
            };
            vec![param(shape.clone(), init)]
        }
        _ => vec![],
    }
}

/// Number of parameters of one op ([`op_params`]): trainable ones (BN running statistics
/// are buffers and not counted, as in torchvision's `sum(p.numel() for p in
/// model.parameters())`).
pub fn params(kind: &OpKind) -> u64 {
    op_params(kind)
        .iter()
        .map(|p| p.shape.iter().product::<usize>() as u64)
        .sum()
}

/// A network: its chain of blocks for one input size.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub name: String,
    /// Per-sample input shape (`[3, H, W]` or `[S]` token ids).
    pub input: Shape,
    /// Bytes per element of the network input when it is not the compute dtype (token ids
    /// are int64: 8); `None` means the compute dtype.
    pub input_elem_bytes: Option<usize>,
    pub blocks: Vec<Block>,
}

impl Network {
    pub fn parameter_count(&self) -> u64 {
        self.blocks.iter().map(Block::parameter_count).sum()
    }
    pub fn output_shape(&self) -> &Shape {
        self.blocks
            .last()
            .expect("a network has blocks")
            .output_shape()
    }
}

/// Errors of [`network`].
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NetError {
    #[error("unknown network {0:?}; known: {known}", known = network_names().collect::<Vec<_>>().join(", "))]
    Unknown(String),
    #[error("network {net}: input size {size} is too small (a feature map becomes empty at {at})")]
    TooSmall {
        net: String,
        size: usize,
        at: String,
    },
    #[error("network {net}: {what} must be positive")]
    Zero { net: String, what: &'static str },
    #[error("network {net}: its op graph is not a DAG the linearizer accepts: {reason}")]
    Graph { net: String, reason: String },
}

/// The network `name` for images of `image` x `image` pixels (for the transformers `image`
/// is ignored: their sequence length is fixed, see `transformer.rs`).
pub fn network(name: &str, image: usize) -> Result<Network, NetError> {
    if image == 0 {
        return Err(NetError::Zero {
            net: name.into(),
            what: "image",
        });
    }
    let Some(entry) = NETWORKS.iter().find(|n| n.name == name) else {
        return Err(NetError::Unknown(name.into()));
    };
    let net = (entry.build)(image);
    net.map_err(|EmptyAt(at)| NetError::TooSmall {
        net: name.into(),
        size: image,
        at,
    })
}

/// Builds one block, computing each op's output shape. Errors name the op whose output
/// would be empty.
pub(crate) struct B {
    name: String,
    ops: Vec<Op>,
}

/// The op (`block.op`) whose output would be empty: the input is too small for the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EmptyAt(pub String);

pub(crate) type R<T> = Result<T, EmptyAt>;

fn conv_out(h: usize, k: usize, s: usize, p: usize, ceil: bool) -> Option<usize> {
    if s == 0 || k == 0 {
        return None;
    }
    let n = (h + 2 * p).checked_sub(k)?;
    let mut o = if ceil { n.div_ceil(s) } else { n / s } + 1;
    // PyTorch: with ceil_mode the last window must start inside the input or left padding.
    if ceil && (o - 1) * s >= h + p {
        o -= 1;
    }
    Some(o)
}

impl B {
    pub fn new(name: impl Into<String>, input: Shape) -> Self {
        let name = name.into();
        B {
            ops: vec![Op {
                id: 0,
                name: "input".into(),
                kind: OpKind::Input,
                inputs: vec![],
                shape: input,
            }],
            name,
        }
    }
    pub fn shape(&self, x: usize) -> &Shape {
        &self.ops[x].shape
    }
    pub fn last(&self) -> usize {
        self.ops.len() - 1
    }
    fn push(&mut self, name: &str, kind: OpKind, inputs: Vec<usize>, shape: Shape) -> R<usize> {
        let id = self.ops.len();
        if shape.contains(&0) {
            return Err(EmptyAt(format!("{}.{}", self.name, name)));
        }
        self.ops.push(Op {
            id,
            name: name.into(),
            kind,
            inputs,
            shape,
        });
        Ok(id)
    }
    fn spatial(
        &self,
        x: usize,
        name: &str,
        k: (usize, usize),
        s: (usize, usize),
        p: (usize, usize),
        ceil: bool,
    ) -> R<(usize, usize)> {
        let sh = &self.ops[x].shape;
        let err = || EmptyAt(format!("{}.{}", self.name, name));
        let h = conv_out(sh[1], k.0, s.0, p.0, ceil).ok_or_else(err)?;
        let w = conv_out(sh[2], k.1, s.1, p.1, ceil).ok_or_else(err)?;
        Ok((h, w))
    }
    #[allow(clippy::too_many_arguments)]
    pub fn conv_full(
        &mut self,
        name: &str,
        x: usize,
        cout: usize,
        k: (usize, usize),
        s: (usize, usize),
        p: (usize, usize),
        bias: bool,
    ) -> R<usize> {
        let cin = self.ops[x].shape[0];
        let (h, w) = self.spatial(x, name, k, s, p, false)?;
        let kind = OpKind::Conv2d {
            cin,
            cout,
            kernel: k,
            stride: s,
            padding: p,
            groups: 1,
            bias,
        };
        self.push(name, kind, vec![x], vec![cout, h, w])
    }
    /// Square conv without bias.
    pub fn conv(
        &mut self,
        name: &str,
        x: usize,
        cout: usize,
        k: usize,
        s: usize,
        p: usize,
    ) -> R<usize> {
        self.conv_full(name, x, cout, (k, k), (s, s), (p, p), false)
    }
    pub fn bn(&mut self, name: &str, x: usize, eps: f64) -> R<usize> {
        let channels = self.ops[x].shape[0];
        let sh = self.ops[x].shape.clone();
        self.push(name, OpKind::BatchNorm2d { channels, eps }, vec![x], sh)
    }
    pub fn relu(&mut self, name: &str, x: usize) -> R<usize> {
        let sh = self.ops[x].shape.clone();
        self.push(name, OpKind::Relu { inplace: true }, vec![x], sh)
    }
    pub fn maxpool(
        &mut self,
        name: &str,
        x: usize,
        k: usize,
        s: usize,
        p: usize,
        ceil_mode: bool,
    ) -> R<usize> {
        let c = self.ops[x].shape[0];
        let (h, w) = self.spatial(x, name, (k, k), (s, s), (p, p), ceil_mode)?;
        self.push(
            name,
            OpKind::MaxPool2d {
                kernel: k,
                stride: s,
                padding: p,
                ceil_mode,
            },
            vec![x],
            vec![c, h, w],
        )
    }
    pub fn avgpool(&mut self, name: &str, x: usize, k: usize, s: usize, p: usize) -> R<usize> {
        let c = self.ops[x].shape[0];
        let (h, w) = self.spatial(x, name, (k, k), (s, s), (p, p), false)?;
        self.push(
            name,
            OpKind::AvgPool2d {
                kernel: k,
                stride: s,
                padding: p,
                ceil_mode: false,
            },
            vec![x],
            vec![c, h, w],
        )
    }
    pub fn adaptive_avgpool(&mut self, name: &str, x: usize, out: (usize, usize)) -> R<usize> {
        let c = self.ops[x].shape[0];
        self.push(
            name,
            OpKind::AdaptiveAvgPool2d { out },
            vec![x],
            vec![c, out.0, out.1],
        )
    }
    pub fn flatten(&mut self, name: &str, x: usize) -> R<usize> {
        let n = self.ops[x].shape.iter().product();
        self.push(name, OpKind::Flatten, vec![x], vec![n])
    }
    pub fn linear(&mut self, name: &str, x: usize, fout: usize, bias: bool) -> R<usize> {
        let mut sh = self.ops[x].shape.clone();
        let fin = *sh.last().expect("non-empty shape");
        *sh.last_mut().expect("non-empty shape") = fout;
        self.push(name, OpKind::Linear { fin, fout, bias }, vec![x], sh)
    }
    pub fn dropout(&mut self, name: &str, x: usize, p: f64) -> R<usize> {
        let sh = self.ops[x].shape.clone();
        self.push(name, OpKind::Dropout { p }, vec![x], sh)
    }
    pub fn add(&mut self, name: &str, xs: &[usize]) -> R<usize> {
        let sh = self.ops[xs[0]].shape.clone();
        debug_assert!(xs.iter().all(|&x| self.ops[x].shape == sh));
        self.push(name, OpKind::Add, xs.to_vec(), sh)
    }
    pub fn cat(&mut self, name: &str, xs: &[usize]) -> R<usize> {
        let mut sh = self.ops[xs[0]].shape.clone();
        sh[0] = xs.iter().map(|&x| self.ops[x].shape[0]).sum();
        self.push(name, OpKind::Cat, xs.to_vec(), sh)
    }
    pub fn op(&mut self, name: &str, kind: OpKind, xs: &[usize], shape: Shape) -> R<usize> {
        self.push(name, kind, xs.to_vec(), shape)
    }
    pub fn finish(self) -> Block {
        Block {
            name: self.name,
            ops: self.ops,
        }
    }
}

#[cfg(test)]
mod tests;
