//! The importer's rules for ops of today's vision networks that exporters write as several
//! nodes: stochastic depth (torchvision's `StochasticDepth`, in EfficientNet, ConvNeXt, Swin
//! and MaxViT), whose per-sample noise is a constant drawn at run time ([`Val::random`]),
//! and a learned token concatenated to every sample (ViT's class token, `Expand`ed to the
//! batch).

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

/// A constant's dims as a user reads them: a leading batch axis as `N`.
fn dims_text(dims: &[usize], batch: i64) -> String {
    match dims.split_first() {
        Some((&n, rest)) if n as i64 == batch => shape_text(rest),
        _ => format!("{dims:?}"),
    }
}
