//! Constant tensors of an ONNX graph, evaluated at import time.
//!
//! Exporters write the shape arithmetic of a transformer as nodes (`Shape`, `Gather`,
//! `Unsqueeze`, `Concat`, `Range`, `ConstantOfShape`, `Equal`, `Where`...): a reshape's
//! target, the positions of a learned position table, a causal mask sliced from a buffer.
//! Their inputs are initializers, `Constant`s or shapes of activations, all known statically,
//! so the importer evaluates them here instead of planning them as ops: a [`Val`] is such a
//! tensor, its dims always known and its values where the file has them (an initializer
//! written as dims only, as the tests write weights, has none) and they are small enough.
//! Values are `f64`: integers of shapes and indices are exact in it.

use std::rc::Rc;

use onnx_rs::ast::{DataType, TensorProto};

/// Largest constant whose values are evaluated (elements); beyond it only its dims are.
const MAX_VALUES: usize = 1 << 22;

/// A constant tensor (module doc).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Val {
    pub dims: Vec<usize>,
    /// Row-major values, when known (shared: a mask buffer is read by every block).
    pub data: Option<Rc<Vec<f64>>>,
    /// A floating-point tensor (else integers or booleans).
    pub float: bool,
    /// An initializer as the file has it, or a view of one (sliced, gathered, reshaped):
    /// no memory of its own at run time.
    pub stored: bool,
    /// Derived from a floating-point initializer of two or more dims (rows x last dim):
    /// a slice or gather of a learned table (a position embedding).
    pub table: Option<(usize, usize)>,
    /// Exactly an initializer (not derived): a learned tensor when an op reads it as a
    /// scale, a shift or a weight.
    pub init: bool,
    /// Drawn at run time (`RandomUniformLike` and what is computed from it): its values are
    /// not known, and each batch has its own (stochastic depth's per-sample factor).
    pub random: bool,
}

fn elems(dims: &[usize]) -> usize {
    dims.iter().product()
}

impl Val {
    /// A computed tensor of `dims` with `data`.
    pub fn new(dims: Vec<usize>, data: Option<Vec<f64>>, float: bool) -> Val {
        let data = data
            .filter(|d| d.len() == elems(&dims) && d.len() <= MAX_VALUES)
            .map(Rc::new);
        Val {
            dims,
            data,
            float,
            stored: false,
            table: None,
            init: false,
            random: false,
        }
    }

    /// Integers (a shape, indices, axes).
    pub fn ints(v: &[i64]) -> Val {
        Val::new(
            vec![v.len()],
            Some(v.iter().map(|&x| x as f64).collect()),
            false,
        )
    }

    /// The tensor of an initializer or a `Constant`; `None` for dims out of range.
    pub fn of_tensor(t: &TensorProto) -> Option<Val> {
        Val::read(t, true)
    }

    /// The dims and kind of an initializer or a `Constant`, its values not decoded (a weight
    /// read as a factor needs none, and decoding the weights of a large model into `f64`
    /// would take twice their bytes).
    pub fn of_tensor_dims(t: &TensorProto) -> Option<Val> {
        Val::read(t, false)
    }

    fn read(t: &TensorProto, decode: bool) -> Option<Val> {
        let dims: Vec<usize> = t
            .dims()
            .iter()
            .map(|&d| usize::try_from(d).ok().filter(|&d| d <= 1 << 31))
            .collect::<Option<_>>()?;
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= 1 << 40)?;
        let float = matches!(
            t.data_type(),
            DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
        );
        let data: Option<Vec<f64>> = if n > MAX_VALUES || !decode {
            None
        } else {
            match t.data_type() {
                DataType::Float => t.as_f32().map(|v| v.iter().map(|&x| x as f64).collect()),
                DataType::Double => t.as_f64().map(|v| v.into_owned()),
                DataType::Int64 => t.as_i64().map(|v| v.iter().map(|&x| x as f64).collect()),
                DataType::Int32 => t.as_i32().map(|v| v.iter().map(|&x| x as f64).collect()),
                DataType::Bool | DataType::Uint8 | DataType::Int8 => t
                    .as_i32()
                    .map(|v| v.iter().map(|&x| x as f64).collect())
                    .or_else(|| {
                        t.as_raw().map(|r| {
                            r.iter()
                                .map(|&b| {
                                    if t.data_type() == DataType::Int8 {
                                        b as i8 as f64
                                    } else {
                                        b as f64
                                    }
                                })
                                .collect()
                        })
                    }),
                _ => None,
            }
        };
        let table = (float && dims.len() >= 2 && n > 0).then(|| {
            let d = dims[dims.len() - 1];
            (n / d, d)
        });
        Some(Val {
            data: data.filter(|d| d.len() == n).map(Rc::new),
            dims,
            float,
            stored: true,
            table,
            init: true,
            random: false,
        })
    }

    pub fn len(&self) -> usize {
        elems(&self.dims)
    }

    /// Its values as integers (a shape, axes), when known.
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        self.data
            .as_ref()
            .map(|d| d.iter().map(|&x| x as i64).collect())
    }

    /// Its one value, when it holds one (a scalar or a tensor of one element).
    pub fn scalar(&self) -> Option<f64> {
        self.data.as_deref().filter(|d| d.len() == 1).map(|d| d[0])
    }

    /// The same tensor under other dims (reshape, squeeze, unsqueeze): a view.
    pub fn reshaped(&self, dims: Vec<usize>) -> Val {
        Val {
            dims,
            init: false,
            ..self.clone()
        }
    }

    /// A tensor derived from this one by an operation that gathers part of it (a view of
    /// the same storage: slice, gather, transpose, expand).
    fn derived(&self, dims: Vec<usize>, data: Option<Vec<f64>>) -> Val {
        Val {
            data: data
                .filter(|d| d.len() == elems(&dims) && d.len() <= MAX_VALUES)
                .map(Rc::new),
            dims,
            init: false,
            ..self.clone()
        }
    }
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The broadcast of dims (numpy's rule, right-aligned), or `None`.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let at = |d: &[usize], i: usize| {
        if i + d.len() >= n {
            d[i + d.len() - n]
        } else {
            1
        }
    };
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Elementwise `f` of tensors broadcast together.
pub(crate) fn map(vals: &[&Val], float: bool, f: impl Fn(&[f64]) -> f64) -> Option<Val> {
    let dims = vals
        .iter()
        .try_fold(Vec::new(), |d, v| broadcast(&d, &v.dims))?;
    let n = elems(&dims);
    let datas: Option<Vec<&Vec<f64>>> = vals.iter().map(|v| v.data.as_deref()).collect();
    let data = datas.filter(|_| n <= MAX_VALUES).map(|datas| {
        let out_strides = strides(&dims);
        let src: Vec<Vec<usize>> = vals
            .iter()
            .map(|v| {
                let s = strides(&v.dims);
                let off = dims.len() - v.dims.len();
                (0..dims.len())
                    .map(|i| {
                        if i < off || v.dims[i - off] == 1 {
                            0
                        } else {
                            s[i - off]
                        }
                    })
                    .collect()
            })
            .collect();
        let mut args = vec![0.0; vals.len()];
        (0..n)
            .map(|k| {
                for (j, d) in datas.iter().enumerate() {
                    let mut at = 0;
                    for (i, os) in out_strides.iter().enumerate() {
                        at += (k / os) % dims[i] * src[j][i];
                    }
                    args[j] = d[at];
                }
                f(&args)
            })
            .collect()
    });
    let mut out = Val::new(dims, data, float);
    out.random = vals.iter().any(|v| v.random);
    Some(out)
}

/// The entries of `v` at the given indices along each axis (a slice, a gather).
pub(crate) fn take(v: &Val, index: &[Vec<usize>]) -> Val {
    let dims: Vec<usize> = index.iter().map(Vec::len).collect();
    let data = v
        .data
        .as_ref()
        .filter(|_| elems(&dims) <= MAX_VALUES)
        .map(|d| {
            let s = strides(&v.dims);
            let os = strides(&dims);
            (0..elems(&dims))
                .map(|k| {
                    let at: usize = (0..dims.len())
                        .map(|i| index[i][(k / os[i]) % dims[i]] * s[i])
                        .sum();
                    d[at]
                })
                .collect()
        });
    v.derived(dims, data)
}

/// `v` with its axes permuted (`perm[i]` is the input axis of output axis `i`).
pub(crate) fn transpose(v: &Val, perm: &[usize]) -> Val {
    let dims: Vec<usize> = perm.iter().map(|&p| v.dims[p]).collect();
    // The large constants exporters transpose are weights (a linear's `W^T`), whose values
    // nothing reads: only small ones are evaluated.
    let data = v.data.as_deref().filter(|d| d.len() <= 1 << 16).map(|d| {
        let s = strides(&v.dims);
        let os = strides(&dims);
        (0..elems(&dims))
            .map(|k| {
                let at: usize = (0..dims.len())
                    .map(|i| (k / os[i]) % dims[i] * s[perm[i]])
                    .sum();
                d[at]
            })
            .collect()
    });
    v.derived(dims, data)
}

/// Concatenation along `axis`.
pub(crate) fn concat(vals: &[Val], axis: usize) -> Option<Val> {
    let first = vals.first()?;
    let mut dims = first.dims.clone();
    if axis >= dims.len()
        || vals.iter().any(|v| {
            v.dims.len() != dims.len()
                || v.dims
                    .iter()
                    .enumerate()
                    .any(|(i, &d)| i != axis && d != dims[i])
        })
    {
        return None;
    }
    dims[axis] = vals.iter().map(|v| v.dims[axis]).sum();
    let outer: usize = dims[..axis].iter().product();
    let data = vals
        .iter()
        .map(|v| v.data.as_deref())
        .collect::<Option<Vec<_>>>()
        .map(|datas| {
            let mut out = Vec::with_capacity(elems(&dims));
            for o in 0..outer {
                for (v, d) in vals.iter().zip(&datas) {
                    let inner: usize = v.dims[axis..].iter().product();
                    out.extend_from_slice(&d[o * inner..(o + 1) * inner]);
                }
            }
            out
        });
    let float = first.float;
    let mut out = Val::new(dims, data, float);
    out.random = vals.iter().any(|v| v.random);
    Some(out)
}

/// Whether `v` (dims `[.., R, C]`) is a causal pattern: `above` where the column is after
/// the row, `on_or_below` elsewhere, the same in every leading index; the two values.
pub(crate) fn causal(v: &Val) -> Option<(f64, f64)> {
    let d = v.data.as_deref()?;
    let n = v.dims.len();
    if n < 2 || v.dims[n - 1] < 2 {
        return None;
    }
    let (r, c) = (v.dims[n - 2], v.dims[n - 1]);
    // A mask sliced from a larger buffer keeps the diagonal where the rows end
    // (`bias[.., k - q : k, :k]`): the last row sees every column.
    let shift = c.checked_sub(r)?;
    if shift + 1 >= c {
        return None; // no entry above the diagonal
    }
    let (above, below) = (d[c - 1], d[0]);
    for (k, &x) in d.iter().enumerate() {
        let (row, col) = ((k / c) % r, k % c);
        let want = if col > row + shift { above } else { below };
        if x != want && !(x.is_nan() && want.is_nan()) {
            return None;
        }
    }
    (above != below).then_some((above, below))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_maps_gathers_and_causal_patterns() {
        let a = Val::new(vec![2, 1], Some(vec![1.0, 2.0]), false);
        let b = Val::new(vec![3], Some(vec![10.0, 20.0, 30.0]), false);
        let s = map(&[&a, &b], false, |x| x[0] + x[1]).unwrap();
        assert_eq!(s.dims, vec![2, 3]);
        assert_eq!(*s.data.unwrap(), vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        let t = transpose(
            &Val::new(vec![2, 3], Some((0..6).map(f64::from).collect()), false),
            &[1, 0],
        );
        assert_eq!(*t.data.unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let tril: Vec<f64> = (0..16)
            .map(|k| if k % 4 <= k / 4 { 1.0 } else { 0.0 })
            .collect();
        let m = Val::new(vec![1, 1, 4, 4], Some(tril), true);
        assert_eq!(causal(&m), Some((0.0, 1.0)));
        let sliced = take(&m, &[vec![0], vec![0], vec![0, 1, 2], vec![0, 1, 2]]);
        assert_eq!(causal(&sliced), Some((0.0, 1.0)));
        let c = concat(&[Val::ints(&[1, 2]), Val::ints(&[3])], 0).unwrap();
        assert_eq!(c.as_ints().unwrap(), vec![1, 2, 3]);
        assert_eq!(
            causal(&Val::new(vec![2, 2], Some(vec![1.0; 4]), true)),
            None
        );
    }
}
