//! The importer's rules for ops of today's vision networks that exporters write as several
//! nodes: stochastic depth (torchvision's `StochasticDepth`, in EfficientNet, ConvNeXt, Swin
//! and MaxViT), whose per-sample noise is a constant drawn at run time ([`Val::random`]),
//! a learned token concatenated to every sample (ViT's class token, `Expand`ed to the
//! batch), `Einsum` where it is a batched matrix product (MaxViT's attention), and `Pad`
//! where it pads nothing (Swin's padding of a map to a multiple of its window, at sizes that
//! are one already).

use onnx_rs::ast::Node;

use super::fold::Val;
use super::layout::BatchAt;
use super::{shape_text, unsupported, Importer, OnnxError};
use crate::nets::{BinOp, OpKind};

impl<'g, 'a> Importer<'g, 'a> {
    /// `x * noise` with `noise` drawn at run time: stochastic depth in training mode, as
    /// torchvision writes it (`noise = empty([N, 1, .., 1]).bernoulli_(1 - p).div_(1 - p)`,
    /// exported as `ConstantOfShape`, `RandomUniformLike`, `Less`, `Cast`, `Div`). The noise
    /// must be one value per sample (`mode = "row"`); any other random operand is refused.
    pub(super) fn random_operand(
        &mut self,
        node: &Node<'a>,
        op: BinOp,
        x: usize,
        c: &Val,
    ) -> Result<(), OnnxError> {
        let shape = self.b.shape(x).clone();
        let per_sample = c.dims.len() == shape.len() + 1
            && c.dims[0] as i64 == self.batch
            && c.dims[1..].iter().all(|&d| d == 1);
        if op != BinOp::Mul || !per_sample || self.merged.contains(&x) {
            return Err(unsupported(
                node,
                format!(
                    "a random operand of dims {} against {} (only a product by one random \
                     value per sample: stochastic depth)",
                    dims_text(&c.dims, self.batch),
                    shape_text(&shape)
                ),
            ));
        }
        self.push_node(node, OpKind::StochasticDepth, &[x], shape)?;
        Ok(())
    }
}

impl<'g, 'a> Importer<'g, 'a> {
    /// `Concat(c, x)` of a constant and an activation: a learned tensor (a view of a float
    /// initializer: `class_token.expand(n, -1, -1)`) as large as the initializer (the
    /// expansion only over the batch), concatenated before `x` on an axis but the batch.
    pub(super) fn concat_param(
        &mut self,
        node: &Node<'a>,
        c: &Val,
        x: usize,
    ) -> Result<(), OnnxError> {
        let at = super::Attrs { node };
        let ax = self.axis(node, x, at.int("axis", 1))?;
        let dims = self.per_sample(node, x, c)?;
        let shape = self.b.shape(x).clone();
        let learned_elems = c.table.map(|(rows, d)| rows * d);
        let fits = dims.len() == shape.len()
            && dims
                .iter()
                .zip(&shape)
                .enumerate()
                .all(|(i, (a, b))| i == ax || a == b);
        if !c.float
            || !c.stored
            || learned_elems != Some(dims.iter().product())
            || !fits
            || self.batch_of(x) != BatchAt::Axis(0)
        {
            return Err(unsupported(
                node,
                format!(
                    "a constant of dims {} concatenated to {} (only a learned tensor, \
                     expanded over the batch alone: a class token)",
                    dims_text(&c.dims, self.batch),
                    shape_text(&shape)
                ),
            ));
        }
        let mut out = shape;
        out[ax] += dims[ax];
        self.push_node(
            node,
            OpKind::ConcatParam {
                axis: ax,
                shape: dims,
            },
            &[x],
            out,
        )?;
        Ok(())
    }
}

/// The labels of a two-operand `Einsum` equation (`"bgid,bgjd->bgij"`, spaces allowed):
/// each operand's and the output's, one letter per axis; `None` for any other form
/// (one or three operands, an ellipsis, an implicit output).
fn einsum_labels(equation: &str) -> Option<[Vec<char>; 3]> {
    let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (ins, out) = compact.split_once("->")?;
    let (a, b) = ins.split_once(',')?;
    let labels = |s: &str| -> Option<Vec<char>> {
        s.chars()
            .all(|c| c.is_ascii_alphabetic())
            .then(|| s.chars().collect())
    };
    Some([labels(a)?, labels(b)?, labels(out)?])
}

/// How a two-operand `Einsum` is a batched matrix product `[.., i, k] x [.., k, j]`:
/// whether each operand's last two axes are to be swapped first. `None` where it is not
/// one: the output must be the shared leading labels followed by `i` (of the first operand
/// only) and `j` (of the second only), and `k`, of both operands but not the output, must be
/// one of each operand's last two axes.
fn einsum_as_matmul([a, b, out]: &[Vec<char>; 3]) -> Option<(bool, bool)> {
    let n = out.len();
    if n < 2 || a.len() != n || b.len() != n || a[..n - 2] != out[..n - 2] {
        return None;
    }
    if b[..n - 2] != out[..n - 2] {
        return None;
    }
    let (i, j) = (out[n - 2], out[n - 1]);
    let k = *a[n - 2..].iter().find(|&&c| c != i)?;
    let mut all = out.clone();
    all.push(k);
    let distinct = all.iter().collect::<std::collections::HashSet<_>>().len() == all.len();
    let swap_a = match a[n - 2..] {
        [x, y] if x == i && y == k => false,
        [x, y] if x == k && y == i => true,
        _ => return None,
    };
    let swap_b = match b[n - 2..] {
        [x, y] if x == k && y == j => false,
        [x, y] if x == j && y == k => true,
        _ => return None,
    };
    distinct.then_some((swap_a, swap_b))
}

impl<'g, 'a> Importer<'g, 'a> {
    /// `Einsum` of two activations that is a batched matrix product (the forms of
    /// [`einsum_as_matmul`]: attention's `q k^T` and `p v` as MaxViT writes them), imported as
    /// a `MatMul`, each operand whose last two axes come in the other order first viewed
    /// through a `Transpose` (torch's `einsum` does the same). Any other equation is refused
    /// naming it.
    pub(super) fn einsum(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let equation = super::Attrs { node }.string("equation").unwrap_or_default();
        let form = einsum_labels(&equation).and_then(|l| einsum_as_matmul(&l));
        let Some((swap_a, swap_b)) = form else {
            return Err(unsupported(
                node,
                format!(
                    "the equation {equation:?} (only a batched matrix product of two \
                     operands: `..ik,..kj->..ij`, either operand's last two axes swapped)"
                ),
            ));
        };
        if node.input.len() != 2 {
            return Err(unsupported(node, "only two inputs"));
        }
        let mut operands = [0; 2];
        for (slot, (name, swap)) in operands
            .iter_mut()
            .zip(node.input.iter().zip([swap_a, swap_b]))
        {
            let x = self.activation(node, name)?;
            if self.batch_of(x) != BatchAt::Axis(0) || self.b.shape(x).len() < 2 {
                return Err(unsupported(
                    node,
                    format!(
                        "an operand {} (the batch in the first axis, two more axes at least)",
                        shape_text(self.b.shape(x))
                    ),
                ));
            }
            *slot = if swap {
                self.swap_last_axes(node, x)?
            } else {
                x
            };
        }
        let [x, y] = operands;
        let (sa, sb) = (self.b.shape(x).clone(), self.b.shape(y).clone());
        let r = sa.len();
        if sb.len() != r || sa[..r - 2] != sb[..r - 2] || sa[r - 1] != sb[r - 2] {
            return Err(unsupported(
                node,
                format!("a product of {} and {}", shape_text(&sa), shape_text(&sb)),
            ));
        }
        let mut out = sa[..r - 2].to_vec();
        out.extend([sa[r - 2], sb[r - 1]]);
        self.push_node(node, OpKind::MatMul, &[x, y], out)?;
        Ok(())
    }

    /// `Pad` of an activation by pads known at import time that are all zero: the tensor
    /// itself (Swin pads each map to a multiple of its window, by nothing at 224 x 224).
    /// Any other padding is refused, naming the pads.
    pub(super) fn pad(&mut self, node: &Node<'a>) -> Result<(), OnnxError> {
        let x = self.activation(node, super::first_input(node)?)?;
        let pads = match node.input.get(1).filter(|s| !s.is_empty()) {
            Some(name) => self.value(name).and_then(|v| v.as_ints()),
            None => super::Attrs { node }.ints("pads"),
        };
        match pads {
            Some(p) if p.iter().all(|&v| v == 0) => {
                self.map_output(node, 0, x);
                Ok(())
            }
            Some(p) => Err(unsupported(
                node,
                format!("pads {p:?} (only a padding by nothing, which is the tensor itself)"),
            )),
            None => Err(unsupported(node, "pads not known at import time")),
        }
    }

    /// A view of `x` (batch in its first axis) with its last two axes swapped: an op of
    /// its own, named after `node`.
    fn swap_last_axes(&mut self, node: &Node<'a>, x: usize) -> Result<usize, OnnxError> {
        let shape = self.b.shape(x).clone();
        let r = shape.len();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        let swapped: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        // The file's axes (the batch's first) keep their strides, the last two swapped.
        let mut strides = self.strides_of(x);
        let f = strides.len();
        strides.swap(f - 2, f - 1);
        let name = format!("{}/transpose", super::node_name(node));
        let id = self.push_op(name, OpKind::Transpose { perm }, &[x], swapped)?;
        self.strides.insert(id, strides);
        Ok(id)
    }
}

/// A constant's dims as a user reads them: a leading batch axis as `N`.
fn dims_text(dims: &[usize], batch: i64) -> String {
    match dims.split_first() {
        Some((&n, rest)) if n as i64 == batch => shape_text(rest),
        _ => format!("{dims:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{einsum_as_matmul, einsum_labels};

    fn form(equation: &str) -> Option<(bool, bool)> {
        einsum_labels(equation).and_then(|l| einsum_as_matmul(&l))
    }

    #[test]
    fn einsums_that_are_matrix_products_and_their_transposes() {
        // MaxViT's two: `q k^T` (the second factor's last two axes swapped) and `p v`.
        assert_eq!(
            form("B G H I D, B G H J D -> B G H I J"),
            Some((false, true))
        );
        assert_eq!(form("bghij,bghjd->bghid"), Some((false, false)));
        assert_eq!(form("ki,kj->ij"), Some((true, false)));
        assert_eq!(form("bki,bjk->bij"), Some((true, true)));
        // Not a batched matrix product: one operand, three, an ellipsis, an implicit
        // output, an outer product, a sum over two labels, a reordered batch, a repeated
        // label, the output's free axes swapped.
        for refused in [
            "ij->ji",
            "ij,jk,kl->il",
            "...ij,...jk->...ik",
            "ij,jk",
            "i,j->ij",
            "bij,bij->b",
            "abij,bajk->abik",
            "iij,ijk->iik",
            "bij,bjk->bki",
        ] {
            assert_eq!(form(refused), None, "{refused}");
        }
    }
}
