//! The importer's rules for the ops of transformer blocks: matrix products, softmax, norms,
//! elementwise functions with broadcasting, views (reshape, transpose, slice, split,
//! expand), embeddings and masks, and the constants they read ([`super::fold`]).
//!
//! Shapes stay per sample. A tensor whose leading axis merges the batch with another
//! (`x.view(-1, d)` before a `Gemm`, as GPT-2's `Conv1D` does) keeps the per-sample shape of
//! its elements (`[S, d]`) and is marked merged, so that its axes are read right. Whether
//! a reshape is a view or a copy follows torch's rule on the input's strides (a reshape of
//! a transposed tensor copies it: a [`OpKind::Contiguous`] op, then the view).

use onnx_rs::ast::{Node, OpType};

use super::eval::{self, norm_axis, reshape_dims, slice_range};
use super::fold::{self, Val};
use super::layout::{full_with, BatchAt};
use super::{first_input, input, node_name, shape_text, unsupported, Attrs, Importer, OnnxError};
use crate::nets::{BinOp, ConstValues, OpKind, Shape, UnaryFn};

/// The batch of a file whose batch axis is symbolic, as shape arithmetic sees it: a number
/// that real axes hardly have (the largest prime below 2^16), small enough that a constant
/// with a batch axis (position ids expanded to the batch) has index lists of a sane size
/// (its values are not evaluated: it is too large).
pub(super) const SYMBOLIC_BATCH: i64 = 65521;

/// Row-major strides of `dims`.
pub(super) fn contiguous(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1] as i64;
    }
    s
}

/// torch's rule for a view: the strides of `new` over a tensor of `old` dims and `strides`,
/// or `None` when the reshape must copy (`at::detail::computeStride`).
pub(super) fn view_strides(old: &[usize], strides: &[i64], new: &[usize]) -> Option<Vec<i64>> {
    let mut out = vec![0i64; new.len()];
    let mut view_d = new.len() as isize - 1;
    let mut chunk_base = *strides.last()?;
    let (mut tensor_numel, mut view_numel) = (1i64, 1i64);
    for d in (0..old.len()).rev() {
        tensor_numel *= old[d] as i64;
        if d == 0 || (old[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base) {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize] as i64;
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if d > 0 {
                chunk_base = strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}

/// What is known of a constant's values, for the executor.
fn const_values(v: &Val) -> ConstValues {
    if let Some(d) = &v.data {
        if let Some(&x) = d.first() {
            if d.iter().all(|&y| y == x) {
                return ConstValues::Fill(x);
            }
        }
        if let Some((above, on_or_below)) = fold::causal(v) {
            return ConstValues::Causal { above, on_or_below };
        }
    }
    ConstValues::Other
}

impl<'g, 'a> Importer<'g, 'a> {
    /// The constant `name` (folded, an initializer or a `Constant`), if it is one.
    pub(super) fn value(&self, name: &str) -> Option<Val> {
        if self.producer.contains_key(name) {
            return None;
        }
        if let Some(v) = self.values.get(name) {
            return Some(v.clone());
        }
        let (key, t) = self.constants.get_key_value(name)?;
        if let Some(v) = self.decoded.borrow().get(name) {
            return Some(v.clone());
        }
        let v = Val::of_tensor(t)?;
        self.decoded.borrow_mut().insert(key, v.clone());
        Some(v)
    }

    /// Whether `name` is a constant (folded, an initializer or a `Constant`), without
    /// decoding it.
    fn is_const(&self, name: &str) -> bool {
        !self.producer.contains_key(name)
            && (self.values.contains_key(name) || self.constants.contains_key(name))
    }

    /// The constant `name` as [`Importer::value`] has it, but a file's tensor not decoded
    /// yet has no values (its dims, kind and origin only).
    fn value_dims(&self, name: &str) -> Option<Val> {
        if self.producer.contains_key(name) {
            return None;
        }
        if let Some(v) = self.values.get(name) {
            return Some(v.clone());
        }
        if let Some(v) = self.decoded.borrow().get(name) {
            return Some(v.clone());
        }
        Val::of_tensor_dims(self.constants.get(name)?)
    }

    /// Evaluates `node` when every input is a constant (module doc of `fold`); whether it
    /// did. `Shape`, `Identity` of a file's tensor and ops it does not evaluate are left to
    /// their rules.
    pub(super) fn try_fold(&mut self, node: &Node<'a>) -> Result<bool, OnnxError> {
        let names: Vec<&str> = node
            .input
            .iter()
            .copied()
            .filter(|s| !s.is_empty())
            .collect();
        if names.is_empty() || node.op_type == OpType::Shape {
            return Ok(false);
        }
        if node.op_type == OpType::Identity && !self.values.contains_key(names[0]) {
            return Ok(false);
        }
        // Checked before any value is decoded: most nodes read an activation.
        if names
            .iter()
            .any(|n| !self.is_const(n) || self.value_dims(n).is_none())
        {
            return Ok(false);
        }
        // A view of a weight (`W.t()` before a product, as `nn.Linear` on a sequence
        // exports) keeps the weight's dims, not its values: decoding every weight into `f64`
        // would take most of a large model's import.
        let view = matches!(
            node.op_type,
            OpType::Transpose | OpType::Reshape | OpType::Unsqueeze | OpType::Squeeze
        );
        let vals: Vec<Option<Val>> = node
            .input
            .iter()
            .enumerate()
            .map(|(i, s)| match self.value_dims(s) {
                _ if s.is_empty() => None,
                Some(w) if view && i == 0 && w.init && w.float && w.dims.len() >= 2 => Some(w),
                _ => self.value(s),
            })
            .collect();
        let Some(outs) = eval::eval(node, &vals, self.opset)? else {
            return Ok(false);
        };
        for (name, v) in node.output.iter().zip(outs) {
            if !name.is_empty() {
                self.values.insert(name, v);
            }
        }
        Ok(true)
    }

    /// An op no activation may reach (it is evaluated on constants only).
    pub(super) fn constant_only(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        Err(unsupported(
            node,
            "pipeopt evaluates it on constants only (shape arithmetic, masks), and an input is an activation",
        ))
    }

    pub(super) fn strides_of(&self, x: usize) -> Vec<i64> {
        self.strides
            .get(&x)
            .cloned()
            .unwrap_or_else(|| contiguous(&self.full_dims(x)))
    }

    /// Pushes an op named `name` (not a node's output) and returns its id.
    pub(super) fn push_op(
        &mut self,
        name: String,
        kind: OpKind,
        inputs: &[usize],
        shape: Shape,
    ) -> Result<usize, OnnxError> {
        self.b
            .op(&name, kind, inputs, shape)
            .map_err(|_| OnnxError::Empty { node: name })
    }

    /// Names `node`'s `i`-th output as op `id`'s tensor.
    pub(super) fn map_output(&mut self, node: &Node<'a>, i: usize, id: usize) {
        if let Some(out) = node.output.get(i).filter(|s| !s.is_empty()) {
            self.producer.insert(out, id);
        }
    }

    /// Pushes `node`'s op and returns its id (its first output named).
    pub(super) fn push_node(
        &mut self,
        node: &Node<'a>,
        kind: OpKind,
        inputs: &[usize],
        shape: Shape,
    ) -> Result<usize, OnnxError> {
        let id = self.push_op(node_name(node), kind, inputs, shape)?;
        self.inherit_merged_batch(id, inputs);
        self.map_output(node, 0, id);
        Ok(id)
    }

    /// The operands of a binary node: each an activation (op id) or a constant.
    fn operands(&self, node: &Node<'a>) -> Result<[Result<usize, Val>; 2], OnnxError> {
        if node.input.len() != 2 {
            return Err(unsupported(node, "only two inputs"));
        }
        // A product's weight and an embedding's table are read for their dims only.
        let dims_only = match node.op_type {
            OpType::MatMul => Some(1),
            OpType::Gather => Some(0),
            _ => None,
        };
        let one = |i: usize| -> Result<Result<usize, Val>, OnnxError> {
            let name = node.input[i];
            let v = if dims_only == Some(i) {
                self.value_dims(name)
            } else {
                self.value(name)
            };
            match v {
                Some(v) => Ok(Err(v)),
                None => self.activation(node, name).map(Ok),
            }
        };
        Ok([one(0)?, one(1)?])
    }

    /// A constant's dims as a per-sample operand of op `x`'s tensor: a leading axis of 1 or
    /// of the batch beyond the activation's rank dropped.
    pub(super) fn per_sample(
        &self,
        node: &Node<'a>,
        x: usize,
        c: &Val,
    ) -> Result<Shape, OnnxError> {
        let rank = self.b.shape(x).len();
        let mut dims = c.dims.clone();
        if dims.len() == rank + 1 && (dims[0] == 1 || dims[0] as i64 == self.batch) {
            dims.remove(0);
        }
        if dims.len() > rank {
            return Err(unsupported(
                node,
                format!(
                    "a constant of dims {:?} against {}",
                    c.dims,
                    shape_text(self.b.shape(x))
                ),
            ));
        }
        Ok(dims)
    }

    /// The broadcast per-sample shape of two operands, or an error naming both.
    fn broadcast(&self, node: &Node<'a>, a: &[usize], b: &[usize]) -> Result<Shape, OnnxError> {
        fold::broadcast(a, b).ok_or_else(|| {
            unsupported(
                node,
                format!(
                    "inputs of shapes {} and {} do not broadcast",
                    shape_text(a),
                    shape_text(b)
                ),
            )
        })
    }

    /// An elementwise op of an activation and a constant: a scalar is an affine map, an
    /// initializer over the trailing axes a learned tensor (scale or shift), a slice of a
    /// learned table as large as the activation a position embedding, other entries of a
    /// learned table gathered and added a learned bias (a relative position bias), anything
    /// else a constant operand (a mask, a rotary table).
    fn with_constant(
        &mut self,
        node: &Node<'a>,
        op: BinOp,
        x: usize,
        c: &Val,
        const_first: bool,
    ) -> Result<(), OnnxError> {
        let ps = self.b.shape(x).clone();
        if let Some(s) = c.scalar() {
            let f = match (op, const_first) {
                (BinOp::Add, _) => UnaryFn::Affine { mul: 1.0, add: s },
                (BinOp::Sub, false) => UnaryFn::Affine { mul: 1.0, add: -s },
                (BinOp::Sub, true) => UnaryFn::Affine { mul: -1.0, add: s },
                (BinOp::Mul, _) => UnaryFn::Affine { mul: s, add: 0.0 },
                (BinOp::Div, false) if s != 0.0 => UnaryFn::Affine {
                    mul: 1.0 / s,
                    add: 0.0,
                },
                (BinOp::Div, true) if s == 1.0 => UnaryFn::Reciprocal,
                (BinOp::Div, true) => {
                    let r = self.push_op(
                        format!("{}/reciprocal", node_name(node)),
                        OpKind::Unary {
                            f: UnaryFn::Reciprocal,
                        },
                        &[x],
                        ps.clone(),
                    )?;
                    self.push_node(
                        node,
                        OpKind::Unary {
                            f: UnaryFn::Affine { mul: s, add: 0.0 },
                        },
                        &[r],
                        ps,
                    )?;
                    return Ok(());
                }
                _ => return Err(unsupported(node, "a division by 0")),
            };
            self.push_node(node, OpKind::Unary { f }, &[x], ps)?;
            return Ok(());
        }
        if c.random {
            return self.random_operand(node, op, x, c);
        }
        if const_first && matches!(op, BinOp::Sub | BinOp::Div) {
            return Err(unsupported(node, "a constant minus or over an activation"));
        }
        let dims = self.per_sample(node, x, c)?;
        let out = self.broadcast(node, &ps, &dims)?;
        let mut trimmed: &[usize] = &dims;
        while trimmed.first() == Some(&1) && trimmed.len() > 1 {
            trimmed = &trimmed[1..];
        }
        // A learned tensor: a vector over the last axes (a norm's scale, a bias) or a tensor
        // of the activation's shape; an initializer of more axes broadcast over the
        // activation is a buffer (a mask).
        // A tensor of the activation's rank broadcast over some of its axes is learned too
        // (ConvNeXt's layer scale, `[C, 1, 1]` on a `[C, H, W]` map).
        let per_axis =
            trimmed.len() == ps.len() && trimmed.iter().zip(&ps).all(|(&a, &b)| a == b || a == 1);
        let learned = c.init
            && c.float
            && ((c.dims.len() == 1 && ps.ends_with(trimmed))
                || trimmed == ps.as_slice()
                || per_axis);
        let kind = match op {
            BinOp::Add | BinOp::Mul if learned => OpKind::Param {
                op,
                shape: trimmed.to_vec(),
            },
            BinOp::Add
                if c.float
                    && !c.init
                    && dims == ps
                    && c.table.is_some_and(|(_, d)| Some(&d) == ps.last()) =>
            {
                let (max_len, dim) = c.table.expect("checked");
                OpKind::PositionEmbedding { max_len, dim }
            }
            // Entries of a learned table gathered into a bias (a relative position bias: a
            // `[(2w - 1)^2, heads]` table read at every pair of a window's positions).
            BinOp::Add if c.float && !c.init && c.stored && c.table.is_some() => {
                let (rows, dim) = c.table.expect("checked");
                OpKind::GatheredBias {
                    shape: dims,
                    rows,
                    dim,
                }
            }
            _ => OpKind::Const {
                op,
                shape: dims,
                values: const_values(c),
            },
        };
        self.push_node(node, kind, &[x], out)?;
        Ok(())
    }

    /// `Add`: of two activations (a residual: one shape; else broadcast), a bias folded
    /// into the matrix product before it, or an activation and a constant.
    pub(super) fn add(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let [a, b] = self.operands(node)?;
        let (x, c) = match (a, b) {
            (Ok(x), Ok(y)) => {
                let (sx, sy) = (self.b.shape(x).clone(), self.b.shape(y).clone());
                let bx = self.batch_of(x);
                if self.moved.contains_key(&x) || self.moved.contains_key(&y) {
                    if sx != sy || bx != self.batch_of(y) {
                        return Err(unsupported(
                            node,
                            "a sum of tensors whose batches are in different axes",
                        ));
                    }
                    let id = self.push_node(node, OpKind::Add, &[x, y], sx)?;
                    self.set_batch(id, bx);
                } else if sx == sy {
                    self.push_node(node, OpKind::Add, &[x, y], sx)?;
                } else {
                    let out = self.broadcast(node, &sx, &sy)?;
                    self.push_node(node, OpKind::Binary { op: BinOp::Add }, &[x, y], out)?;
                }
                return Ok(());
            }
            (Ok(x), Err(c)) | (Err(c), Ok(x)) => (x, c),
            (Err(_), Err(_)) => return Err(unsupported(node, "no activation")),
        };
        // A bias after a matrix product that nothing else reads: torch's `Linear` on a
        // tensor of more than two axes exports as `MatMul` + `Add`.
        let name = node
            .input
            .iter()
            .copied()
            .find(|n| self.producer.get(n) == Some(&x));
        let sole = name.is_some_and(|n| self.readers.get(n) == Some(&1));
        if let OpKind::Linear {
            fout, bias: false, ..
        } = self.b.ops[x].kind
        {
            if sole && c.init && c.float && c.dims == [fout] {
                if let OpKind::Linear { bias, .. } = &mut self.b.ops[x].kind {
                    *bias = true;
                }
                self.map_output(node, 0, x);
                return Ok(());
            }
        }
        if let Some(b) = self.moved.get(&x) {
            return Err(unsupported(
                node,
                format!(
                    "a constant added to a tensor whose batch is in axis {} (only a linear \
                     layer's bias)",
                    match b {
                        BatchAt::Axis(p) | BatchAt::Outer(p) | BatchAt::Inner(p) => p,
                    }
                ),
            ));
        }
        let first = self.value(node.input[0]).is_some();
        self.with_constant(node, BinOp::Add, x, &c, first)
    }

    /// `Sub`, `Div` (and `Mul`, [`Importer::mul`]): of two activations, broadcast, or of
    /// an activation and a constant.
    pub(super) fn binary(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let op = match node.op_type {
            OpType::Sub => BinOp::Sub,
            OpType::Div => BinOp::Div,
            _ => BinOp::Mul,
        };
        let [a, b] = self.operands(node)?;
        match (a, b) {
            (Ok(x), Ok(y)) => {
                let (sx, sy) = (self.b.shape(x).clone(), self.b.shape(y).clone());
                let out = self.broadcast(node, &sx, &sy)?;
                let kind = if op == BinOp::Mul {
                    OpKind::Mul
                } else {
                    OpKind::Binary { op }
                };
                self.push_node(node, kind, &[x, y], out)?;
                Ok(())
            }
            (Ok(x), Err(c)) => self.with_constant(node, op, x, &c, false),
            (Err(c), Ok(x)) => self.with_constant(node, op, x, &c, true),
            (Err(_), Err(_)) => Err(unsupported(node, "no activation")),
        }
    }

    /// Elementwise functions of one activation.
    pub(super) fn unary(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let f = match &node.op_type {
            OpType::Exp => UnaryFn::Exp,
            OpType::Log => UnaryFn::Log,
            OpType::Tanh => UnaryFn::Tanh,
            OpType::Erf => UnaryFn::Erf,
            OpType::Sqrt => UnaryFn::Sqrt,
            OpType::Reciprocal => UnaryFn::Reciprocal,
            OpType::Neg => UnaryFn::Neg,
            OpType::Sin => UnaryFn::Sin,
            OpType::Cos => UnaryFn::Cos,
            _ => {
                // `Pow` by a constant exponent.
                let e = input(node, 1)
                    .and_then(|n| self.value(n))
                    .and_then(|v| v.scalar())
                    .ok_or_else(|| unsupported(node, "the exponent is not a constant scalar"))?;
                UnaryFn::Pow(e)
            }
        };
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        self.push_node(node, OpKind::Unary { f }, &[x], shape)?;
        Ok(())
    }

    /// `Gelu` (opset 20; both of its forms cost the same).
    pub(super) fn gelu(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        self.push_node(node, OpKind::Gelu, &[x], shape)?;
        Ok(())
    }

    /// `MatMul`: of two activations (attention), or of an activation and a 2-d constant
    /// (a linear layer without bias; a bias `Add` after it is folded in).
    pub(super) fn matmul(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let [a, b] = self.operands(node)?;
        match (a, b) {
            (Ok(x), Ok(y)) => {
                let (sa, sb) = (self.b.shape(x).clone(), self.b.shape(y).clone());
                let (ra, rb) = (sa.len(), sb.len());
                // The batch in the first axis of both, or merged into it in both as the
                // outer factor (Swin's windows: `[N * 64, 3, 49, 32]`), the axis the same.
                let batch = self.batch_of(x);
                let batch_fits = match batch {
                    BatchAt::Axis(0) => self.batch_of(y) == batch,
                    BatchAt::Outer(0) => self.batch_of(y) == batch && ra == rb && sa[0] == sb[0],
                    _ => false,
                };
                if ra < 2 || rb < 2 || sa[ra - 1] != sb[rb - 2] || !batch_fits {
                    return Err(unsupported(
                        node,
                        format!("a product of {} and {}", shape_text(&sa), shape_text(&sb)),
                    ));
                }
                let mut out = self.broadcast(node, &sa[..ra - 2], &sb[..rb - 2])?;
                out.extend([sa[ra - 2], sb[rb - 1]]);
                let id = self.push_node(node, OpKind::MatMul, &[x, y], out)?;
                self.set_batch(id, batch);
            }
            (Ok(x), Err(w)) => {
                let shape = self.b.shape(x).clone();
                if w.dims.len() != 2
                    || !w.float
                    || shape.last() != Some(&w.dims[0])
                    || self.batch_of(x) == BatchAt::Axis(shape.len())
                {
                    return Err(unsupported(
                        node,
                        format!(
                            "a product of {} and a weight of dims {:?}",
                            shape_text(&shape),
                            w.dims
                        ),
                    ));
                }
                let (fin, fout) = (w.dims[0], w.dims[1]);
                super::checked_elems(node, &[fin, fout])?;
                let mut out = shape;
                *out.last_mut().expect("checked") = fout;
                let id = self.push_node(
                    node,
                    OpKind::Linear {
                        fin,
                        fout,
                        bias: false,
                    },
                    &[x],
                    out,
                )?;
                self.set_batch(id, self.batch_of(x));
            }
            _ => return Err(unsupported(node, "the first factor is not an activation")),
        }
        Ok(())
    }

    /// `Gather`: token ids into a learned table (an embedding), or one entry of an axis of
    /// an activation (a select: a view).
    pub(super) fn gather(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let axis = Attrs { node }.int("axis", 0);
        let [a, b] = self.operands(node)?;
        match (a, b) {
            (Err(table), Ok(ids)) => {
                if table.dims.len() != 2 || !table.float || axis != 0 {
                    return Err(unsupported(
                        node,
                        format!(
                            "a gather from dims {:?} on axis {axis} (only an embedding table)",
                            table.dims
                        ),
                    ));
                }
                let (vocab, dim) = (table.dims[0], table.dims[1]);
                let mut shape = self.b.shape(ids).clone();
                shape.push(dim);
                let id = self.push_node(node, OpKind::Embedding { vocab, dim }, &[ids], shape)?;
                if self.merged.contains(&ids) {
                    self.merged.insert(id);
                }
                Ok(())
            }
            (Ok(x), Err(idx)) => {
                let ax = self.axis(node, x, axis)?;
                let dim = self.b.shape(x)[ax] as i64;
                let i = idx
                    .scalar()
                    .filter(|_| idx.dims.is_empty())
                    .ok_or_else(|| {
                        unsupported(
                            node,
                            "a gather of several entries of an activation (only one index)",
                        )
                    })? as i64;
                let i = if i < 0 { i + dim } else { i };
                if !(0..dim).contains(&i) {
                    return Err(unsupported(node, format!("index {i} out of {dim}")));
                }
                let mut one = self.b.shape(x).clone();
                one[ax] = 1;
                let strides = self.strides_of(x);
                let s = self.push_op(
                    format!("{}/slice", node_name(node)),
                    OpKind::Slice {
                        axis: ax,
                        start: i as usize,
                        len: 1,
                        step: 1,
                    },
                    &[x],
                    one.clone(),
                )?;
                self.strides.insert(s, strides);
                let b = self.batch_of(x);
                self.set_batch(s, b);
                one.remove(ax);
                // The batch's axis moves down when the selected axis was before it.
                let b = match b {
                    BatchAt::Axis(p) if ax < p => BatchAt::Axis(p - 1),
                    BatchAt::Outer(p) if ax < p => BatchAt::Outer(p - 1),
                    BatchAt::Inner(p) if ax < p => BatchAt::Inner(p - 1),
                    b => b,
                };
                self.view(node, s, one, b)
            }
            _ => Err(unsupported(node, "neither an embedding nor a select")),
        }
    }

    /// `Softmax` over one axis.
    pub(super) fn softmax(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let rank = self.b.shape(x).len();
        let default = if self.opset < 13 { 1 } else { -1 };
        let axis = self.axis(node, x, Attrs { node }.int("axis", default))?;
        if self.opset < 13 && axis + 1 != rank {
            // Before opset 13 a softmax normalizes over all axes from `axis` on.
            return Err(unsupported(
                node,
                "before opset 13, only a softmax over the last axis",
            ));
        }
        let shape = self.b.shape(x).clone();
        self.push_node(node, OpKind::Softmax { axis }, &[x], shape)?;
        Ok(())
    }

    /// `LayerNormalization` over the last axis, its scale and bias learned.
    pub(super) fn layer_norm(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let at = Attrs { node };
        let x = self.activation(node, first_input(node)?)?;
        let shape = self.b.shape(x).clone();
        let axis = self.axis(node, x, at.int("axis", -1))?;
        if axis + 1 != shape.len() {
            return Err(unsupported(node, "only a norm over the last axis"));
        }
        let dim = shape[axis];
        for i in 1..=2 {
            let d = input(node, i)
                .map(|n| self.weight_dims(node, n))
                .transpose()?;
            if d.as_deref() != Some(&[dim as i64][..]) {
                return Err(unsupported(
                    node,
                    format!("scale or bias dims {d:?} for {dim} features (both learned)"),
                ));
            }
        }
        let kind = OpKind::LayerNorm {
            dim,
            eps: at.float("epsilon", 1e-5),
        };
        self.push_node(node, kind, &[x], shape)?;
        Ok(())
    }

    /// `Reshape`, `Unsqueeze`, `Squeeze` and a `Flatten` beyond the first axis of an
    /// activation: a view (module doc).
    pub(super) fn reshape(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let ps = self.b.shape(x).clone();
        let merged_in = self.merged.contains(&x);
        let elems: usize = ps.iter().product();
        let arg = |i: usize| {
            input(node, i)
                .and_then(|n| self.value(n))
                .and_then(|v| v.as_ints())
        };
        if self.moved.contains_key(&x) {
            let given = match node.op_type {
                OpType::Reshape => arg(1),
                _ if self.opset >= 13 => arg(1),
                _ => Attrs { node }.ints("axes"),
            };
            return self.reshape_moved(node, x, given);
        }
        let (shape, merged) = match &node.op_type {
            OpType::Unsqueeze | OpType::Squeeze => {
                let axes = if self.opset >= 13 {
                    arg(1)
                } else {
                    Attrs { node }.ints("axes")
                };
                let squeeze = node.op_type == OpType::Squeeze;
                // The file's dims, the first (the batch, or merged with it) unknown.
                let mut full: Vec<Option<usize>> = vec![None];
                full.extend(ps[usize::from(merged_in)..].iter().map(|&d| Some(d)));
                let rank = full.len();
                let out_rank = if squeeze {
                    rank
                } else {
                    rank + axes.as_ref().map_or(0, Vec::len)
                };
                let mut axes: Vec<usize> = match axes {
                    Some(a) => a
                        .iter()
                        .map(|&v| norm_axis(node, v, out_rank))
                        .collect::<Result<_, _>>()?,
                    None if squeeze => (1..rank).filter(|&i| full[i] == Some(1)).collect(),
                    None => return Err(unsupported(node, "no axes")),
                };
                axes.sort_unstable();
                if axes.contains(&0) {
                    return Err(unsupported(node, "the batch axis"));
                }
                if squeeze {
                    if axes
                        .iter()
                        .any(|&a| full.get(a).copied().flatten() != Some(1))
                    {
                        return Err(unsupported(
                            node,
                            format!("axes {axes:?} are not of size 1"),
                        ));
                    }
                    full = full
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !axes.contains(i))
                        .map(|(_, d)| d)
                        .collect();
                } else {
                    for a in axes {
                        full.insert(a.min(full.len()), Some(1));
                    }
                }
                let mut shape: Shape = full[1..]
                    .iter()
                    .map(|d| d.expect("past the batch"))
                    .collect();
                if merged_in {
                    shape.insert(0, ps[0]);
                }
                (shape, merged_in)
            }
            OpType::Flatten => {
                let k = norm_axis(node, Attrs { node }.int("axis", 1), ps.len() + 2)?;
                if k == 0 || merged_in {
                    return Err(unsupported(node, "a flatten of the batch axis"));
                }
                let rest: usize = ps[k - 1..].iter().product();
                let lead = elems / rest.max(1);
                if lead == 1 {
                    (vec![rest], false)
                } else {
                    (vec![lead, rest], true)
                }
            }
            _ => {
                let target = arg(1)
                    .ok_or_else(|| unsupported(node, "the target shape is not a constant"))?;
                match self.reshape_target(node, x, &target) {
                    Ok(r) => r,
                    // A reshape that moves the batch from the first axis.
                    Err(e) => match self.reshape_moving(x, &target) {
                        Some((shape, b)) => return self.view(node, x, shape, b),
                        None => return Err(e),
                    },
                }
            }
        };
        if shape.is_empty() {
            return Err(unsupported(node, "a scalar per sample"));
        }
        let b = if merged {
            BatchAt::Outer(0)
        } else {
            BatchAt::Axis(0)
        };
        self.view(node, x, shape, b)
    }

    /// The per-sample shape (and whether merged) of a `Reshape` of `x` to `target`.
    fn reshape_target(
        &self,
        node: &Node<'a>,
        x: usize,
        target: &[i64],
    ) -> Result<(Shape, bool), OnnxError> {
        let ps = self.b.shape(x).clone();
        let elems: usize = ps.iter().product();
        let Some((&first, rest)) = target.split_first() else {
            return Err(unsupported(node, "an empty target shape"));
        };
        let merged_in = self.merged.contains(&x);
        // The input's axes that the target's zeros copy (after the batch).
        let copied: &[usize] = if merged_in { &ps[1..] } else { &ps };
        let rest: Vec<i64> = rest
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if v == 0 {
                    copied.get(i).map_or(-2, |&d| d as i64)
                } else {
                    v
                }
            })
            .collect();
        if first == self.batch || (first == 0 && !merged_in) {
            return Ok((reshape_dims(node, &[elems], &rest)?, false));
        }
        if first == -1 && rest.iter().all(|&v| v > 0) {
            let rest_elems: usize = rest.iter().map(|&v| v as usize).product();
            if rest_elems > 0 && elems % rest_elems == 0 {
                let k = elems / rest_elems;
                let dims: Shape = rest.iter().map(|&v| v as usize).collect();
                return Ok(if k == 1 && !dims.is_empty() {
                    (dims, false)
                } else {
                    (std::iter::once(k).chain(dims).collect(), true)
                });
            }
        }
        Err(unsupported(
            node,
            format!("target shape {target:?} of a tensor of {} (the batch must stay the first axis, or be merged with the next by -1)", shape_text(&ps)),
        ))
    }

    /// `Split` of an activation: one slice (a view) per output.
    pub(super) fn split(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let ax = self.axis(node, x, Attrs { node }.int("axis", 0))?;
        let dim = self.b.shape(x)[ax];
        let n = node.output.len();
        let sizes = match input(node, 1)
            .and_then(|s| self.value(s))
            .and_then(|v| v.as_ints())
        {
            Some(s) => s,
            None => match (Attrs { node }).ints("split") {
                Some(s) => s,
                None => {
                    let part = dim.div_ceil(n.max(1)) as i64;
                    (0..n)
                        .map(|i| part.min(dim as i64 - part * i as i64))
                        .collect()
                }
            },
        };
        if sizes.len() != n
            || sizes.iter().any(|&s| s < 0)
            || sizes.iter().sum::<i64>() != dim as i64
        {
            return Err(unsupported(
                node,
                format!("sizes {sizes:?} of an axis of {dim}"),
            ));
        }
        let strides = self.strides_of(x);
        let mut start = 0;
        for (i, &len) in sizes.iter().enumerate() {
            let mut shape = self.b.shape(x).clone();
            shape[ax] = len as usize;
            let name = node.output[i].to_string();
            let id = self.push_op(
                name,
                OpKind::Slice {
                    axis: ax,
                    start,
                    len: len as usize,
                    step: 1,
                },
                &[x],
                shape,
            )?;
            self.strides.insert(id, strides.clone());
            self.map_output(node, i, id);
            start += len as usize;
        }
        Ok(())
    }

    /// `Slice` of an activation with positive steps: a view (every `step`-th entry; Swin's
    /// patch merging takes every second row and column).
    pub(super) fn slice(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let mut x = self.activation(node, first_input(node)?)?;
        let arg = |i: usize, name: &str| -> Option<Vec<i64>> {
            if self.opset >= 10 {
                input(node, i)
                    .and_then(|n| self.value(n))
                    .and_then(|v| v.as_ints())
            } else {
                Attrs { node }.ints(name)
            }
        };
        let (Some(starts), Some(ends)) = (arg(1, "starts"), arg(2, "ends")) else {
            return Err(unsupported(node, "starts and ends are not constants"));
        };
        let axes = arg(3, "axes").unwrap_or_else(|| (0..starts.len() as i64).collect());
        let steps = arg(4, "").unwrap_or_else(|| vec![1; starts.len()]);
        for k in 0..starts.len().min(ends.len()).min(axes.len()) {
            let step = steps.get(k).copied().unwrap_or(1);
            if step < 1 {
                return Err(unsupported(node, format!("a step of {step}")));
            }
            let ax = self.axis(node, x, axes[k])?;
            let dim = self.b.shape(x)[ax];
            let range = slice_range(starts[k], ends[k], step, dim);
            if range.len() == dim {
                continue;
            }
            let start = range.first().copied().unwrap_or(0);
            let mut shape = self.b.shape(x).clone();
            shape[ax] = range.len();
            // The file's axis of per-sample axis `ax`: its stride grows by the step.
            let b = self.batch_of(x);
            let file_axis = match b {
                BatchAt::Axis(p) if ax >= p => ax + 1,
                _ => ax,
            };
            let mut strides = self.strides_of(x);
            strides[file_axis] *= step;
            x = self.push_op(
                node_name(node),
                OpKind::Slice {
                    axis: ax,
                    start,
                    len: range.len(),
                    step: step as usize,
                },
                &[x],
                shape,
            )?;
            self.strides.insert(x, strides);
            self.set_batch(x, b);
        }
        self.map_output(node, 0, x);
        Ok(())
    }

    /// `Expand` of an activation (a view) over new sizes of its axes of size 1.
    pub(super) fn expand(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let target = input(node, 1)
            .and_then(|n| self.value(n))
            .and_then(|v| v.as_ints())
            .ok_or_else(|| unsupported(node, "the shape is not a constant"))?;
        let ps = self.b.shape(x).clone();
        if target.len() > ps.len() + 1 || self.merged.contains(&x) {
            return Err(unsupported(
                node,
                format!("to {target:?}: new axes before the batch"),
            ));
        }
        let t: Vec<usize> = target
            .iter()
            .skip(target.len().saturating_sub(ps.len()))
            .map(|&d| d.max(1) as usize)
            .collect();
        let shape = self.broadcast(node, &ps, &t)?;
        if shape == ps {
            self.map_output(node, 0, x);
            return Ok(());
        }
        let mut strides = self.strides_of(x);
        for (i, (&a, &b)) in ps.iter().zip(&shape).enumerate() {
            if a != b {
                strides[i + 1] = 0;
            }
        }
        let id = self.push_node(node, OpKind::Expand, &[x], shape)?;
        self.strides.insert(id, strides);
        Ok(())
    }

    /// `Concat` of activations on any axis but the batch (channels of NCHW maps: the CNNs'
    /// concatenation).
    pub(super) fn concat(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        if let [first, second] = node.input.as_slice() {
            if let (Some(c), None) = (self.value(first), self.value(second)) {
                let x = self.activation(node, second)?;
                return self.concat_param(node, &c, x);
            }
        }
        let xs = (0..node.input.len())
            .map(|i| self.activation(node, node.input[i]))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(&x0) = xs.first() else {
            return Err(unsupported(node, "no inputs"));
        };
        let ax = self.axis(node, x0, Attrs { node }.int("axis", 1))?;
        let mut shape = self.b.shape(x0).clone();
        let same_elsewhere = |s: &Shape| {
            s.len() == shape.len()
                && s.iter()
                    .zip(&shape)
                    .enumerate()
                    .all(|(i, (a, b))| i == ax || a == b)
        };
        if xs.iter().any(|&x| !same_elsewhere(self.b.shape(x))) {
            return Err(unsupported(
                node,
                "inputs of different sizes off the concatenation axis",
            ));
        }
        shape[ax] = xs.iter().map(|&x| self.b.shape(x)[ax]).sum();
        let kind = if ax == 0 && shape.len() == 3 {
            OpKind::Cat
        } else {
            OpKind::Concat { axis: ax }
        };
        self.push_node(node, kind, &xs, shape)?;
        Ok(())
    }

    /// `Cast` of an activation: the same tensor (one dtype per instance; token ids stay ids).
    pub(super) fn cast(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        self.map_output(node, 0, x);
        Ok(())
    }

    /// `Where` with a constant condition, an activation and a constant: `masked_fill`.
    pub(super) fn where_(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        if node.input.len() != 3 {
            return Err(unsupported(node, "three inputs"));
        }
        let cond = self.value(node.input[0]).ok_or_else(|| {
            unsupported(node, "the condition is an activation (only constant masks)")
        })?;
        let (x, fill, keep_where_true) =
            match (self.value(node.input[1]), self.value(node.input[2])) {
                (None, Some(f)) => (self.activation(node, node.input[1])?, f, true),
                (Some(f), None) => (self.activation(node, node.input[2])?, f, false),
                _ => return Err(unsupported(node, "one activation and one constant")),
            };
        let fill = fill
            .scalar()
            .ok_or_else(|| unsupported(node, "the fill is not a scalar"))?;
        // The mask says where the fill goes.
        let mask = if keep_where_true {
            fold::map(&[&cond], false, |v| if v[0] == 0.0 { 1.0 } else { 0.0 }).expect("one tensor")
        } else {
            cond.clone()
        };
        let dims = self.per_sample(node, x, &cond)?;
        let shape = self.broadcast(node, self.b.shape(x), &dims)?;
        // torch keeps the condition for the backward; a condition the forward computes (a
        // comparison) is a tensor of its own (1 byte per entry), a buffer's view is not.
        let mask_bytes = if cond.stored { 0 } else { cond.len() };
        let kind = OpKind::MaskFill {
            shape: dims,
            values: const_values(&mask),
            fill,
            mask_bytes,
        };
        self.push_node(node, kind, &[x], shape)?;
        Ok(())
    }

    /// `ReduceMean` over one axis (a norm written out), or over H and W of an NCHW map (a
    /// global average pool).
    pub(super) fn reduce_mean(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, first_input(node)?)?;
        let at = Attrs { node };
        let axes = match input(node, 1) {
            Some(a) => self.value(a).and_then(|v| v.as_ints()),
            None => at.ints("axes"),
        }
        .unwrap_or_default();
        let mut sorted = axes.clone();
        sorted.sort_unstable();
        if self.b.shape(x).len() == 3 && (sorted == [2, 3] || sorted == [-2, -1]) {
            return self.global_pool(node);
        }
        let [a] = axes.as_slice() else {
            return Err(unsupported(
                node,
                format!("axes {axes:?} (one axis, or H and W of a map)"),
            ));
        };
        let axis = self.axis(node, x, *a)?;
        let keepdim = at.int("keepdims", 1) != 0;
        let mut shape = self.b.shape(x).clone();
        if keepdim {
            shape[axis] = 1;
        } else {
            shape.remove(axis);
        }
        if shape.is_empty() {
            shape.push(1);
        }
        self.push_node(node, OpKind::ReduceMean { axis, keepdim }, &[x], shape)?;
        Ok(())
    }

    /// `Shape` of an activation (the batch as the file has it, or symbolic) or a constant.
    pub(super) fn shape(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let name = first_input(node)?;
        let dims: Vec<i64> = match self.value(name) {
            Some(v) => v.dims.iter().map(|&d| d as i64).collect(),
            None => {
                let x = self.activation(node, name)?;
                full_with(self.b.shape(x), self.batch_of(x), self.batch)
            }
        };
        let at = Attrs { node };
        let r = dims.len() as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (s, e) = (clamp(at.int("start", 0)), clamp(at.int("end", r)));
        let v = Val::ints(&dims[s..e.max(s)]);
        if let Some(out) = node.output.first() {
            self.values.insert(out, v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// torch's view rule: splitting the last axis of a slice is a view, merging the heads
    /// of a transposed tensor back is not.
    #[test]
    fn reshape_is_a_view_where_torch_makes_one() {
        // q, a slice [2, 8, 16] of a [2, 8, 48] projection, to heads [2, 8, 2, 8].
        let sliced = [384, 48, 1];
        assert_eq!(
            view_strides(&[2, 8, 16], &sliced, &[2, 8, 2, 8]),
            Some(vec![384, 48, 8, 1])
        );
        // [2, 2, 8, 8] heads transposed to [2, 8, 2, 8], merged to [2, 8, 16]: a copy.
        let transposed = [128, 8, 64, 1];
        assert_eq!(view_strides(&[2, 8, 2, 8], &transposed, &[2, 8, 16]), None);
        // A contiguous tensor views anything of its size.
        assert_eq!(
            view_strides(&[2, 8, 16], &contiguous(&[2, 8, 16]), &[16, 16]),
            Some(vec![16, 1])
        );
    }
}
