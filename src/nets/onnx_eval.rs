//! The ONNX nodes whose inputs are all constants, evaluated at import time
//! ([`super::fold`]): shape arithmetic, index ranges, masks.

use onnx_rs::ast::{DataType, Node, OpType};

use super::fold::{self, Val};
use super::{unsupported, Attrs, OnnxError};

/// Integers of an attribute or of an input, by opset (axes, starts, a split): the input
/// `i` when the node has it, else the attribute `name`.
pub(super) fn ints_arg(
    node: &Node,
    vals: &[Option<Val>],
    i: usize,
    name: &str,
) -> Result<Option<Vec<i64>>, OnnxError> {
    match vals.get(i).and_then(Option::as_ref) {
        Some(v) => v
            .as_ints()
            .map(Some)
            .ok_or_else(|| unsupported(node, format!("input {i} has no values in the file"))),
        None => Ok(Attrs { node }.ints(name)),
    }
}

/// An axis of a tensor of `rank` (negative from the end), checked.
pub(super) fn norm_axis(node: &Node, a: i64, rank: usize) -> Result<usize, OnnxError> {
    let r = rank as i64;
    let a2 = if a < 0 { a + r } else { a };
    if (0..r).contains(&a2) {
        Ok(a2 as usize)
    } else {
        Err(unsupported(
            node,
            format!("axis {a} of a tensor of rank {rank}"),
        ))
    }
}

/// The indices `start..end` by `step` of an axis of size `dim` (ONNX's clamping).
pub(super) fn slice_range(start: i64, end: i64, step: i64, dim: usize) -> Vec<usize> {
    let d = dim as i64;
    let clamp = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
    let wrap = |v: i64| if v < 0 { v + d } else { v };
    if step > 0 {
        let (s, e) = (clamp(wrap(start), 0, d), clamp(wrap(end), 0, d));
        (s..e.max(s))
            .step_by(step as usize)
            .map(|i| i as usize)
            .collect()
    } else {
        let (s, e) = (clamp(wrap(start), -1, d - 1), clamp(wrap(end), -1, d - 1));
        let mut v = Vec::new();
        let mut i = s;
        while i > e {
            v.push(i as usize);
            i += step;
        }
        v
    }
}

/// A tensor's dims under a reshape `target` (0 copies, -1 infers), or an error.
pub(super) fn reshape_dims(
    node: &Node,
    dims: &[usize],
    target: &[i64],
) -> Result<Vec<usize>, OnnxError> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            0 => out.push(*dims.get(i).ok_or_else(|| {
                unsupported(
                    node,
                    format!("target {target:?}: 0 beyond the input's rank"),
                )
            })?),
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            t if t > 0 && t as usize <= super::LIMIT => out.push(t as usize),
            _ => return Err(unsupported(node, format!("target shape {target:?}"))),
        }
    }
    let known: usize = out.iter().product();
    if let Some(i) = infer {
        if known == 0 || n % known != 0 {
            return Err(unsupported(
                node,
                format!("target {target:?} for {n} elements"),
            ));
        }
        out[i] = n / known;
    }
    if out.iter().product::<usize>() != n {
        return Err(unsupported(
            node,
            format!("target {target:?} for {n} elements"),
        ));
    }
    Ok(out)
}

/// Every index of every axis of a tensor of `dims` (to gather from), refused for an axis
/// too long to list (a damaged file).
fn axes_index(node: &Node, dims: &[usize]) -> Result<Vec<Vec<usize>>, OnnxError> {
    if dims.iter().any(|&d| d > 1 << 24) {
        return Err(unsupported(
            node,
            format!("a constant of dims {dims:?} is too large to evaluate"),
        ));
    }
    Ok(dims.iter().map(|&n| (0..n).collect()).collect())
}

fn float_type(to: i64) -> bool {
    // TensorProto.DataType: FLOAT 1, FLOAT16 10, DOUBLE 11, BFLOAT16 16.
    matches!(to, 1 | 10 | 11 | 16)
}

/// The outputs of `node` evaluated from its constant inputs `vals` (`None` for an absent
/// optional input); `Ok(None)` for an op not evaluated here.
pub(super) fn eval(
    node: &Node,
    vals: &[Option<Val>],
    opset: i64,
) -> Result<Option<Vec<Val>>, OnnxError> {
    let out = match eval_elementwise(node, vals)? {
        Some(v) => Some(v),
        None => match eval_view(node, vals)? {
            Some(v) => Some(v),
            None => eval_index(node, vals, opset)?,
        },
    };
    Ok(out.map(|v| vec![v]))
}

/// Elementwise nodes (arithmetic, comparisons, `Where`, `Cast`) on constants.
fn eval_elementwise(node: &Node, vals: &[Option<Val>]) -> Result<Option<Val>, OnnxError> {
    let at = Attrs { node };
    let v = |i: usize| const_input(node, vals, i);
    let bin = |f: fn(f64, f64) -> f64, float: Option<bool>| -> Result<Val, OnnxError> {
        let (a, b) = (v(0)?, v(1)?);
        let float = float.unwrap_or(a.float || b.float);
        fold::map(&[a, b], float, |x| f(x[0], x[1])).ok_or_else(|| {
            unsupported(
                node,
                format!("dims {:?} and {:?} do not broadcast", a.dims, b.dims),
            )
        })
    };
    let un = |f: fn(f64) -> f64| -> Result<Val, OnnxError> {
        let a = v(0)?;
        Ok(fold::map(&[a], a.float, |x| f(x[0])).expect("one tensor broadcasts"))
    };
    let b2f = |b: bool| if b { 1.0 } else { 0.0 };
    let out = match &node.op_type {
        OpType::Identity => {
            let a = v(0)?;
            Val {
                init: false,
                ..a.clone()
            }
        }
        OpType::Add => bin(|a, b| a + b, None)?,
        OpType::Sub => bin(|a, b| a - b, None)?,
        OpType::Mul => bin(|a, b| a * b, None)?,
        OpType::Div => {
            let float = v(0)?.float || v(1)?.float;
            if float {
                bin(|a, b| a / b, None)?
            } else {
                bin(|a, b| if b == 0.0 { 0.0 } else { (a / b).trunc() }, None)?
            }
        }
        OpType::Pow => bin(f64::powf, None)?,
        OpType::Min => bin(f64::min, None)?,
        // Integer `Mod` takes the divisor's sign (Python's `%`); `fmod = 1`, the dividend's.
        OpType::Mod if at.int("fmod", 0) != 0 => bin(|a, b| a % b, None)?,
        OpType::Mod => bin(
            |a, b| {
                if b == 0.0 {
                    0.0
                } else {
                    a - b * (a / b).floor()
                }
            },
            None,
        )?,
        OpType::Max => bin(f64::max, None)?,
        OpType::Equal => bin(|a, b| if a == b { 1.0 } else { 0.0 }, Some(false))?,
        OpType::Less => bin(|a, b| if a < b { 1.0 } else { 0.0 }, Some(false))?,
        OpType::Greater => bin(|a, b| if a > b { 1.0 } else { 0.0 }, Some(false))?,
        OpType::LessOrEqual => bin(|a, b| if a <= b { 1.0 } else { 0.0 }, Some(false))?,
        OpType::GreaterOrEqual => bin(|a, b| if a >= b { 1.0 } else { 0.0 }, Some(false))?,
        OpType::And => bin(
            |a, b| if a != 0.0 && b != 0.0 { 1.0 } else { 0.0 },
            Some(false),
        )?,
        OpType::Or => bin(
            |a, b| if a != 0.0 || b != 0.0 { 1.0 } else { 0.0 },
            Some(false),
        )?,
        OpType::Not => un(|a| if a == 0.0 { 1.0 } else { 0.0 })?,
        OpType::Neg => un(|a| -a)?,
        OpType::Sqrt => un(f64::sqrt)?,
        OpType::Reciprocal => un(|a| 1.0 / a)?,
        OpType::Exp => un(f64::exp)?,
        OpType::Log => un(f64::ln)?,
        OpType::Sin => un(f64::sin)?,
        OpType::Cos => un(f64::cos)?,
        OpType::Floor => un(f64::floor)?,
        OpType::Ceil => un(f64::ceil)?,
        OpType::Abs => un(f64::abs)?,
        OpType::Where => {
            let (c, a, b) = (v(0)?, v(1)?, v(2)?);
            fold::map(&[c, a, b], a.float || b.float, |x| {
                if x[0] != 0.0 {
                    x[1]
                } else {
                    x[2]
                }
            })
            .ok_or_else(|| unsupported(node, "inputs that do not broadcast"))?
        }
        OpType::Cast => {
            let a = v(0)?;
            let float = float_type(at.int("to", 1));
            let to_bool = at.int("to", 1) == 9;
            let data = a.data.as_deref().map(|d| {
                d.iter()
                    .map(|&x| {
                        if to_bool {
                            b2f(x != 0.0)
                        } else if float {
                            x
                        } else {
                            x.trunc()
                        }
                    })
                    .collect()
            });
            let same = a.float == float;
            Val {
                data: data.map(std::rc::Rc::new),
                float,
                stored: a.stored && same,
                init: false,
                ..a.clone()
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// Nodes that view a constant under other dims (`Reshape`, `Unsqueeze`, `Transpose`...).
fn eval_view(node: &Node, vals: &[Option<Val>]) -> Result<Option<Val>, OnnxError> {
    let at = Attrs { node };
    let v = |i: usize| const_input(node, vals, i);
    let out = match &node.op_type {
        OpType::Unsqueeze | OpType::Squeeze => {
            let a = v(0)?;
            let axes = ints_arg(node, vals, 1, "axes")?;
            let dims = if node.op_type == OpType::Unsqueeze {
                let axes = axes.ok_or_else(|| unsupported(node, "no axes"))?;
                let rank = a.dims.len() + axes.len();
                let mut axes = axes
                    .iter()
                    .map(|&x| norm_axis(node, x, rank))
                    .collect::<Result<Vec<_>, _>>()?;
                axes.sort_unstable();
                let mut dims = a.dims.clone();
                for x in axes {
                    dims.insert(x.min(dims.len()), 1);
                }
                dims
            } else {
                match axes {
                    None => a.dims.iter().copied().filter(|&d| d != 1).collect(),
                    Some(axes) => {
                        let axes = axes
                            .iter()
                            .map(|&x| norm_axis(node, x, a.dims.len()))
                            .collect::<Result<Vec<_>, _>>()?;
                        a.dims
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| !axes.contains(i))
                            .map(|(_, &d)| d)
                            .collect()
                    }
                }
            };
            a.reshaped(dims)
        }
        OpType::Reshape => {
            let a = v(0)?;
            let target = v(1)?
                .as_ints()
                .ok_or_else(|| unsupported(node, "the target shape has no values"))?;
            a.reshaped(reshape_dims(node, &a.dims, &target)?)
        }
        OpType::Flatten => {
            let a = v(0)?;
            let k = norm_axis(node, at.int("axis", 1), a.dims.len() + 1)?;
            let dims = vec![a.dims[..k].iter().product(), a.dims[k..].iter().product()];
            a.reshaped(dims)
        }
        OpType::Transpose => {
            let a = v(0)?;
            let perm: Vec<usize> = match at.ints("perm") {
                Some(p) => p
                    .iter()
                    .map(|&x| norm_axis(node, x, a.dims.len()))
                    .collect::<Result<_, _>>()?,
                None => (0..a.dims.len()).rev().collect(),
            };
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..a.dims.len()).collect::<Vec<_>>() {
                return Err(unsupported(node, format!("perm {perm:?}")));
            }
            fold::transpose(a, &perm)
        }
        OpType::Expand => {
            let a = v(0)?;
            let shape = v(1)?
                .as_ints()
                .ok_or_else(|| unsupported(node, "the shape has no values"))?;
            let shape: Vec<usize> = shape.iter().map(|&d| d.max(1) as usize).collect();
            let dims = fold::broadcast(&a.dims, &shape)
                .ok_or_else(|| unsupported(node, format!("{:?} to {shape:?}", a.dims)))?;
            axes_index(node, &dims)?;
            let off = dims.len() - a.dims.len();
            let padded: Vec<usize> = std::iter::repeat_n(1, off)
                .chain(a.dims.iter().copied())
                .collect();
            let index: Vec<Vec<usize>> = dims
                .iter()
                .zip(&padded)
                .map(|(&n, &p)| if p == 1 { vec![0; n] } else { (0..n).collect() })
                .collect();
            fold::take(&a.reshaped(padded.clone()), &index)
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// Nodes that index or make constants (`Gather`, `Slice`, `Concat`, `Range`...).
fn eval_index(node: &Node, vals: &[Option<Val>], opset: i64) -> Result<Option<Val>, OnnxError> {
    let at = Attrs { node };
    let v = |i: usize| const_input(node, vals, i);
    let out = match &node.op_type {
        OpType::Concat => {
            let all: Vec<Val> = (0..node.input.len())
                .map(|i| v(i).cloned())
                .collect::<Result<_, _>>()?;
            let rank = all.first().map_or(0, |x| x.dims.len());
            let axis = norm_axis(node, at.int("axis", 0), rank)?;
            fold::concat(&all, axis).ok_or_else(|| unsupported(node, "inputs of different dims"))?
        }
        OpType::Gather => {
            let (a, idx) = (v(0)?, v(1)?);
            let axis = norm_axis(node, at.int("axis", 0), a.dims.len())?;
            let d = a.dims[axis] as i64;
            let ids = idx
                .as_ints()
                .ok_or_else(|| unsupported(node, "the indices have no values"))?;
            let ids = ids
                .iter()
                .map(|&i| {
                    let j = if i < 0 { i + d } else { i };
                    usize::try_from(j).ok().filter(|&j| (j as i64) < d)
                })
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| unsupported(node, format!("indices out of range of {d}")))?;
            let mut index = axes_index(node, &a.dims)?;
            index[axis] = ids;
            let mut dims = a.dims[..axis].to_vec();
            dims.extend(&idx.dims);
            dims.extend(&a.dims[axis + 1..]);
            fold::take(a, &index).reshaped(dims)
        }
        OpType::Slice => {
            let a = v(0)?;
            let (starts, ends, axes, steps) = if opset >= 10 {
                (
                    ints_arg(node, vals, 1, "")?,
                    ints_arg(node, vals, 2, "")?,
                    ints_arg(node, vals, 3, "")?,
                    ints_arg(node, vals, 4, "")?,
                )
            } else {
                (at.ints("starts"), at.ints("ends"), at.ints("axes"), None)
            };
            let (starts, ends) = starts
                .zip(ends)
                .ok_or_else(|| unsupported(node, "no starts or ends"))?;
            let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
            let mut index = axes_index(node, &a.dims)?;
            for k in 0..starts
                .len()
                .min(ends.len())
                .min(axes.len())
                .min(steps.len())
            {
                let ax = norm_axis(node, axes[k], a.dims.len())?;
                if steps[k] == 0 {
                    return Err(unsupported(node, "a step of 0"));
                }
                index[ax] = slice_range(starts[k], ends[k], steps[k], a.dims[ax]);
            }
            fold::take(a, &index)
        }
        _ => return eval_make(node, vals),
    };
    Ok(Some(out))
}

/// Nodes that make constants (`ConstantOfShape`, `Range`, `Trilu`, a product of constants).
fn eval_make(node: &Node, vals: &[Option<Val>]) -> Result<Option<Val>, OnnxError> {
    let at = Attrs { node };
    let v = |i: usize| const_input(node, vals, i);
    let out = match &node.op_type {
        OpType::ConstantOfShape => {
            let dims: Vec<usize> = v(0)?
                .as_ints()
                .ok_or_else(|| unsupported(node, "the shape has no values"))?
                .iter()
                .map(|&d| usize::try_from(d).ok().filter(|&d| d <= super::LIMIT))
                .collect::<Option<_>>()
                .ok_or_else(|| unsupported(node, "a dim out of range"))?;
            let (value, float) = match at.get("value").and_then(|a| a.t.as_ref()) {
                Some(t) => {
                    let val = Val::of_tensor(t).and_then(|v| v.scalar()).unwrap_or(0.0);
                    (
                        val,
                        t.data_type() != DataType::Int64 && t.data_type() != DataType::Bool,
                    )
                }
                None => (0.0, true),
            };
            let n: usize = dims.iter().product();
            Val::new(dims, (n <= 1 << 22).then(|| vec![value; n]), float)
        }
        // Random draws of a constant's dims (stochastic depth's per-sample noise): the
        // dims are known, the values are drawn at run time.
        OpType::RandomUniformLike | OpType::RandomNormalLike | OpType::Bernoulli => {
            let mut out = Val::new(v(0)?.dims.clone(), None, true);
            out.random = true;
            out
        }
        OpType::Range => {
            let s = |i: usize| v(i).ok().and_then(Val::scalar);
            let (Some(start), Some(limit), Some(delta)) = (s(0), s(1), s(2)) else {
                return Err(unsupported(node, "start, limit and delta must be known"));
            };
            if delta == 0.0 {
                return Err(unsupported(node, "a delta of 0"));
            }
            let n = ((limit - start) / delta).ceil().max(0.0) as usize;
            if n > 1 << 22 {
                return Err(unsupported(node, format!("a range of {n} elements")));
            }
            let float = v(0)?.float;
            Val::new(
                vec![n],
                Some((0..n).map(|i| start + i as f64 * delta).collect()),
                float,
            )
        }
        OpType::Trilu => {
            let a = v(0)?;
            let k = vals
                .get(1)
                .and_then(Option::as_ref)
                .and_then(Val::scalar)
                .unwrap_or(0.0) as i64;
            let upper = at.int("upper", 1) != 0;
            let n = a.dims.len();
            if n < 2 {
                return Err(unsupported(node, "a tensor of rank below 2"));
            }
            let (r, c) = (a.dims[n - 2], a.dims[n - 1]);
            let data = a.data.as_deref().map(|d| {
                d.iter()
                    .enumerate()
                    .map(|(i, &x)| {
                        let (row, col) = (((i / c) % r) as i64, (i % c) as i64);
                        let keep = if upper {
                            col - row >= k
                        } else {
                            col - row <= k
                        };
                        if keep {
                            x
                        } else {
                            0.0
                        }
                    })
                    .collect()
            });
            Val::new(a.dims.clone(), data, a.float)
        }
        OpType::ScatterND => scatter_nd(node, v(0)?, v(1)?, v(2)?)?,
        OpType::MatMul => {
            // A product of constants (a rotary table's angles): its dims.
            let (a, b) = (v(0)?, v(1)?);
            let (ra, rb) = (a.dims.len(), b.dims.len());
            if ra < 2 || rb < 2 || a.dims[ra - 1] != b.dims[rb - 2] {
                return Err(unsupported(
                    node,
                    format!("dims {:?} and {:?}", a.dims, b.dims),
                ));
            }
            let mut dims = fold::broadcast(&a.dims[..ra - 2], &b.dims[..rb - 2])
                .ok_or_else(|| unsupported(node, "batch dims that do not broadcast"))?;
            dims.extend([a.dims[ra - 2], b.dims[rb - 1]]);
            Val::new(dims, None, true)
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// `ScatterND` (reduction `none`) of constants: `data` with the slices that `indices`
/// (`[.., q]`, each row the index of a slice of the first `q` axes) name replaced by
/// `updates`, in order (Swin's attention mask, built by assigning to slices of a zero
/// tensor). Without the values, its dims.
fn scatter_nd(node: &Node, data: &Val, indices: &Val, updates: &Val) -> Result<Val, OnnxError> {
    let reduction = Attrs { node }.string("reduction");
    if reduction.as_deref().is_some_and(|r| r != "none") {
        return Err(unsupported(node, format!("reduction {reduction:?}")));
    }
    let q = *indices.dims.last().unwrap_or(&0);
    let rows = indices.dims[..indices.dims.len().saturating_sub(1)].to_vec();
    let slice: Vec<usize> = data.dims.get(q..).unwrap_or_default().to_vec();
    let mut expected = rows.clone();
    expected.extend(&slice);
    if q == 0 || q > data.dims.len() || updates.dims != expected {
        return Err(unsupported(
            node,
            format!(
                "data {:?}, indices {:?} and updates {:?} (updates must be the indices' rows \
                 by the slice of data they name)",
                data.dims, indices.dims, updates.dims
            ),
        ));
    }
    let (Some(d), Some(ix), Some(up)) = (&data.data, indices.as_ints(), &updates.data) else {
        return Ok(Val::new(data.dims.clone(), None, data.float));
    };
    let len: usize = slice.iter().product();
    let mut out = d.as_ref().clone();
    for (r, index) in ix.chunks(q).enumerate() {
        let mut at = 0usize;
        for (axis, &i) in index.iter().enumerate() {
            let dim = data.dims[axis] as i64;
            let i = if i < 0 { i + dim } else { i };
            if !(0..dim).contains(&i) {
                return Err(unsupported(
                    node,
                    format!("index {index:?} out of {:?}", data.dims),
                ));
            }
            at = at * data.dims[axis] + i as usize;
        }
        out[at * len..(at + 1) * len].copy_from_slice(&up[r * len..(r + 1) * len]);
    }
    Ok(Val::new(data.dims.clone(), Some(out), data.float))
}

/// Constant input `i` of `node`, or an error naming it when it is missing.
fn const_input<'v>(node: &Node, vals: &'v [Option<Val>], i: usize) -> Result<&'v Val, OnnxError> {
    vals.get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| unsupported(node, format!("input {i} is missing")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scatter(data: Val, indices: Val, updates: Val) -> Result<Val, OnnxError> {
        let node = Node {
            name: "s",
            op_type: OpType::ScatterND,
            ..Default::default()
        };
        scatter_nd(&node, &data, &indices, &updates)
    }

    #[test]
    fn scatter_nd_writes_slices_in_order() {
        let zeros = Val::new(vec![2, 3], Some(vec![0.0; 6]), true);
        // Two elements, the second index negative; then a whole row, written twice (the
        // later write wins, as in ONNX's order).
        let at = Val::new(vec![2, 2], Some(vec![0.0, 1.0, 1.0, -1.0]), false);
        let up = Val::new(vec![2], Some(vec![5.0, 7.0]), true);
        let out = scatter(zeros.clone(), at, up).unwrap();
        assert_eq!(*out.data.unwrap(), vec![0.0, 5.0, 0.0, 0.0, 0.0, 7.0]);
        let rows = Val::new(vec![2, 1], Some(vec![1.0, 1.0]), false);
        let up = Val::new(vec![2, 3], Some(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), true);
        let out = scatter(zeros.clone(), rows, up).unwrap();
        assert_eq!(*out.data.unwrap(), vec![0.0, 0.0, 0.0, 4.0, 5.0, 6.0]);
        // Updates of the wrong dims, an index out of range: refused, not a panic.
        let at = Val::new(vec![1, 2], Some(vec![0.0, 3.0]), false);
        let up = Val::new(vec![1], Some(vec![1.0]), true);
        assert!(scatter(zeros.clone(), at, up).is_err());
        let at = Val::new(vec![1, 2], Some(vec![0.0, 1.0]), false);
        let up = Val::new(vec![2], Some(vec![1.0, 2.0]), true);
        assert!(scatter(zeros, at, up).is_err());
    }
}
