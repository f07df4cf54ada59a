//! Where the batch is in an imported tensor, and the views that move it.
//!
//! pipeopt's shapes are per sample. Most tensors have the batch as their first axis; GPT-2's
//! `Conv1D` merges it with the next (`x.view(-1, d)`). `nn.MultiheadAttention` runs sequence
//! first: it transposes `[N, S, E]` to `[S, N, E]`, views the projection as `[S, N * h, dh]`
//! (the batch the outer factor of an axis), transposes that to `[N * h, S, dh]`, and merges
//! the heads' output back as `[S * N, E]` (the batch the inner factor) before its output
//! projection. A [`BatchAt`] says which axis of the file's tensor holds the batch and how;
//! the per-sample shape is the file's with the batch taken out (a merged axis keeps its
//! other factor), so elements, FLOPs and stashes per sample are those of the batch-first
//! network.
//! Views (transpose, reshape, squeeze, unsqueeze, select) and linear layers follow a moved
//! batch; any other op refuses it, naming the node, rather than reading its axes wrong. A
//! batch merged into the first axis as its outer factor (`[N * w, ..]`: GPT-2's rows, Swin's
//! windows) is every sample's rows in order, so ops that keep their input's shape keep it
//! there too, and a product of two such tensors (attention inside each window) as well.

use onnx_rs::ast::{Node, OpType};

use super::eval::norm_axis;
use super::seq::{contiguous, view_strides};
use super::{node_name, shape_text, unsupported, Attrs, Importer, OnnxError};
use crate::nets::{OpKind, Shape};

/// The axis of a file's tensor that holds the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BatchAt {
    /// An axis of its own (`Axis(0)`: batch first, the usual layout).
    Axis(usize),
    /// Merged with per-sample axis `p` as its outer factor (`[N * h, ..]`; `Outer(0)` is
    /// GPT-2's `x.view(-1, d)`).
    Outer(usize),
    /// Merged with per-sample axis `p` as its inner factor (`[S * N, E]`).
    Inner(usize),
}

impl BatchAt {
    /// The file's axis that holds the batch.
    fn file_axis(self) -> usize {
        match self {
            BatchAt::Axis(p) | BatchAt::Outer(p) | BatchAt::Inner(p) => p,
        }
    }

    /// Per-sample elements before the batch in row-major order: a reshape keeps the batch
    /// where this count is the same.
    fn before(self, ps: &[usize]) -> usize {
        match self {
            BatchAt::Axis(p) | BatchAt::Outer(p) => ps[..p].iter().product(),
            BatchAt::Inner(p) => ps[..=p].iter().product(),
        }
    }
}

/// The file's dims of a tensor of per-sample shape `ps` with a batch of `n` placed by `b`.
pub(super) fn full_with(ps: &[usize], b: BatchAt, n: i64) -> Vec<i64> {
    let mut d: Vec<i64> = ps.iter().map(|&v| v as i64).collect();
    match b {
        BatchAt::Axis(p) => d.insert(p.min(d.len()), n),
        BatchAt::Outer(p) | BatchAt::Inner(p) => d[p] = d[p].saturating_mul(n),
    }
    d
}

impl<'g, 'a> Importer<'g, 'a> {
    /// Where op `x`'s tensor holds the batch.
    pub(super) fn batch_of(&self, x: usize) -> BatchAt {
        if self.merged.contains(&x) {
            BatchAt::Outer(0)
        } else {
            self.moved.get(&x).copied().unwrap_or(BatchAt::Axis(0))
        }
    }

    /// Records where op `id`'s tensor holds the batch.
    pub(super) fn set_batch(&mut self, id: usize, b: BatchAt) {
        self.merged.remove(&id);
        self.moved.remove(&id);
        match b {
            BatchAt::Axis(0) => {}
            BatchAt::Outer(0) => {
                self.merged.insert(id);
            }
            b => {
                self.moved.insert(id, b);
            }
        }
    }

    /// Op `id`, of the shape of its first input, holds the batch as that input does when
    /// the input's is merged into its first axis (an elementwise op on Swin's windows,
    /// `[N * 64, 49, C]`): the file's dims of its output are its input's. Rules that move
    /// the batch set it after this.
    pub(super) fn inherit_merged_batch(&mut self, id: usize, inputs: &[usize]) {
        if let Some(&x) = inputs.first() {
            if self.merged.contains(&x) && self.b.shape(x) == self.b.shape(id) {
                self.merged.insert(id);
            }
        }
    }

    /// Refuses op `x` as an input of `node` when its batch is moved and `node` is not an op
    /// that follows it (module doc).
    pub(super) fn check_moved(&self, node: &Node<'a>, x: usize) -> Result<(), OnnxError> {
        let follows = matches!(
            node.op_type,
            OpType::Transpose
                | OpType::Reshape
                | OpType::Unsqueeze
                | OpType::Squeeze
                | OpType::Gather
                | OpType::Shape
                | OpType::MatMul
                | OpType::Gemm
                | OpType::Add
                | OpType::Cast
                | OpType::Identity
        );
        match self.moved.get(&x) {
            Some(b) if !follows => Err(unsupported(
                node,
                format!(
                    "its input {} holds the batch in axis {} of the file's tensor (pipeopt \
                     follows a batch moved from the first axis through views and linear \
                     layers only)",
                    shape_text(self.b.shape(x)),
                    b.file_axis()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The dims of op `x`'s tensor as torch holds it, with a batch of 2.
    pub(super) fn full_dims(&self, x: usize) -> Vec<usize> {
        full_with(self.b.shape(x), self.batch_of(x), 2)
            .into_iter()
            .map(|d| d as usize)
            .collect()
    }

    /// The per-sample axis of the file's axis `a` of op `x`'s tensor.
    pub(super) fn axis(&self, node: &Node<'a>, x: usize, a: i64) -> Result<usize, OnnxError> {
        let ps = self.b.shape(x).len();
        let b = self.batch_of(x);
        let rank = if matches!(b, BatchAt::Axis(_)) {
            ps + 1
        } else {
            ps
        };
        let full = norm_axis(node, a, rank)?;
        match b {
            BatchAt::Axis(p) if full == p => Err(unsupported(node, "an op along the batch axis")),
            BatchAt::Axis(p) if full > p => Ok(full - 1),
            BatchAt::Outer(p) | BatchAt::Inner(p) if full == p => Err(unsupported(
                node,
                "an op along an axis merged with the batch",
            )),
            _ => Ok(full),
        }
    }

    /// `Transpose`: a view, the batch following its axis.
    pub(super) fn transpose(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, super::first_input(node)?)?;
        let ps = self.b.shape(x).clone();
        let b = self.batch_of(x);
        let rank = full_with(&ps, b, 2).len();
        let perm: Vec<i64> = Attrs { node }
            .ints("perm")
            .unwrap_or_else(|| (0..rank as i64).rev().collect());
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..rank as i64).collect::<Vec<_>>() {
            return Err(unsupported(
                node,
                format!("perm {perm:?} of a tensor of rank {rank}"),
            ));
        }
        let q = b.file_axis();
        let at = perm
            .iter()
            .position(|&p| p as usize == q)
            .expect("a permutation");
        let out_b = match b {
            BatchAt::Axis(_) => BatchAt::Axis(at),
            BatchAt::Outer(_) => BatchAt::Outer(at),
            BatchAt::Inner(_) => BatchAt::Inner(at),
        };
        // The per-sample axis of each file axis (the batch's own axis has none).
        let sample_axis = |f: usize| match b {
            BatchAt::Axis(p) if f > p => Some(f - 1),
            BatchAt::Axis(p) if f == p => None,
            _ => Some(f),
        };
        let pp: Vec<usize> = perm
            .iter()
            .filter_map(|&f| sample_axis(f as usize))
            .collect();
        if out_b == b && pp.iter().enumerate().all(|(i, &p)| i == p) {
            self.map_output(node, 0, x);
            return Ok(());
        }
        let shape: Shape = pp.iter().map(|&p| ps[p]).collect();
        let old = self.strides_of(x);
        let strides: Vec<i64> = perm.iter().map(|&f| old[f as usize]).collect();
        let id = self.push_node(node, OpKind::Transpose { perm: pp }, &[x], shape)?;
        self.set_batch(id, out_b);
        self.strides.insert(id, strides);
        Ok(())
    }

    /// The per-sample shape and batch of a reshape of `x` to the file's dims `target`
    /// (zeros copy the input's dims, one -1 is inferred) when exactly one of its dims holds
    /// the batch and the elements before it are those before the input's batch: `None`
    /// otherwise.
    pub(super) fn reshape_moving(&self, x: usize, target: &[i64]) -> Option<(Shape, BatchAt)> {
        let ps = self.b.shape(x);
        let b_in = self.batch_of(x);
        let full = full_with(ps, b_in, self.batch);
        let total = full.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?;
        let mut t: Vec<i64> = target
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if v == 0 {
                    full.get(i).copied().unwrap_or(-2)
                } else {
                    v
                }
            })
            .collect();
        if t.iter().any(|&v| v == 0 || v < -1) || t.iter().filter(|&&v| v == -1).count() > 1 {
            return None;
        }
        if let Some(i) = t.iter().position(|&v| v == -1) {
            let rest = t
                .iter()
                .filter(|&&v| v != -1)
                .try_fold(1i64, |a, &d| a.checked_mul(d))?;
            if rest == 0 || total % rest != 0 {
                return None;
            }
            t[i] = total / rest;
        }
        let with_batch: Vec<usize> = (0..t.len()).filter(|&i| t[i] % self.batch == 0).collect();
        let [pos] = with_batch.as_slice() else {
            return None;
        };
        let k = (t[*pos] / self.batch) as usize;
        let mut shape: Shape = t.iter().map(|&v| v as usize).collect();
        let prefix: usize = shape[..*pos].iter().product();
        let before = b_in.before(ps);
        let b = if k == 1 && prefix == before {
            shape.remove(*pos);
            BatchAt::Axis(*pos)
        } else if prefix == before {
            shape[*pos] = k;
            BatchAt::Outer(*pos)
        } else if prefix * k == before {
            shape[*pos] = k;
            BatchAt::Inner(*pos)
        } else {
            return None;
        };
        let same = shape.iter().product::<usize>() == ps.iter().product::<usize>();
        (same && !shape.is_empty()).then_some((shape, b))
    }

    /// A `Reshape`, `Unsqueeze` or `Squeeze` of a tensor whose batch is moved: the file's
    /// target dims from the input's, then [`Importer::reshape_moving`].
    pub(super) fn reshape_moved(
        &mut self,
        node: &Node<'a>,
        x: usize,
        axes_or_target: Option<Vec<i64>>,
    ) -> Result<(), OnnxError> {
        let ps = self.b.shape(x).clone();
        let full = full_with(&ps, self.batch_of(x), self.batch);
        let given = axes_or_target
            .ok_or_else(|| unsupported(node, "the target shape or the axes are not constants"))?;
        let target = match node.op_type {
            OpType::Unsqueeze => {
                let rank = full.len() + given.len();
                let mut axes = given
                    .iter()
                    .map(|&a| norm_axis(node, a, rank))
                    .collect::<Result<Vec<_>, _>>()?;
                axes.sort_unstable();
                let mut t = full.clone();
                for a in axes {
                    t.insert(a.min(t.len()), 1);
                }
                t
            }
            OpType::Squeeze => {
                let axes = given
                    .iter()
                    .map(|&a| norm_axis(node, a, full.len()))
                    .collect::<Result<Vec<_>, _>>()?;
                if axes.iter().any(|&a| full[a] != 1) {
                    return Err(unsupported(
                        node,
                        format!("axes {given:?} are not of size 1"),
                    ));
                }
                (0..full.len())
                    .filter(|i| !axes.contains(i))
                    .map(|i| full[i])
                    .collect()
            }
            _ => given,
        };
        let (shape, b) = self.reshape_moving(x, &target).ok_or_else(|| {
            unsupported(
                node,
                format!(
                    "target shape {target:?} of a tensor of {} whose batch is in axis {} \
                     (the batch must stay one axis or the factor of one)",
                    shape_text(&ps),
                    self.batch_of(x).file_axis()
                ),
            )
        })?;
        self.view(node, x, shape, b)
    }

    /// `x` under the per-sample `shape` with the batch at `b`: nothing when it is `x`'s,
    /// else a view, after a copy when torch's reshape would copy.
    pub(super) fn view(
        &mut self,
        node: &Node<'a>,
        x: usize,
        shape: Shape,
        b: BatchAt,
    ) -> Result<(), OnnxError> {
        if *self.b.shape(x) == shape && self.batch_of(x) == b {
            self.map_output(node, 0, x);
            return Ok(());
        }
        let new: Vec<usize> = full_with(&shape, b, 2)
            .into_iter()
            .map(|d| d as usize)
            .collect();
        let mut src = x;
        let strides = match view_strides(&self.full_dims(x), &self.strides_of(x), &new) {
            Some(s) => s,
            None => {
                let sh = self.b.shape(x).clone();
                src = self.push_op(
                    format!("{}/contiguous", node_name(node)),
                    OpKind::Contiguous,
                    &[x],
                    sh,
                )?;
                self.set_batch(src, self.batch_of(x));
                contiguous(&new)
            }
        };
        // A view to one axis is the CNNs' flatten.
        let kind = if shape.len() == 1 && b == BatchAt::Axis(0) {
            OpKind::Flatten
        } else {
            OpKind::Reshape
        };
        let id = self.push_node(node, kind, &[src], shape)?;
        if strides != contiguous(&new) {
            self.strides.insert(id, strides);
        }
        self.set_batch(id, b);
        Ok(())
    }
}
