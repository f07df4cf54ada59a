//! BaPipe's intra-layer partition (Zhao et al., "BaPipe: Exploration of Balanced Pipeline
//! Parallelism for DNN Training", arXiv 2020, section 3.3.2, after FPDeep, its reference
//! [13]): when whole layers cannot be balanced over the accelerators (a layer is larger
//! than one stage's share, or the boundary layers leave a stage heavier than its share),
//! "part of the boundary layer" goes to the neighbouring accelerator, so that each stage
//! gets exactly its share T / factor_n of the work, with T = 1 / sum(1 / T_n) (eq. (1));
//! the paper employs it "only when the communication is not the bottleneck, because
//! intra-layer partition will increase the communication time", and starts from the
//! inter-layer partition (`bapipe::balanced_heterogeneous`).
//!
//! Our chain model (docs/model.md section 1) has no half layers, so a split layer becomes a
//! run of consecutive pieces in a new chain, one per stage it spans, each a slice of its
//! output neurons (channels), which is how FPDeep and tensor slicing split a layer:
//!
//! - a piece with fraction `x` of layer `l` takes `x` of its forward and backward time and
//!   of its weights;
//! - every piece reads the whole layer input a(l-1) and keeps it for its backward, plus `x`
//!   of the rest of the layer's stash; consecutive pieces share that input (`stash_overlap`
//!   = a(l-1)), so a stage holding every piece of a layer keeps exactly the layer's stash;
//! - a piece that is not the last sends on the layer input and the outputs computed so far
//!   (a(l-1) + (fractions so far) x a(l)): the next piece needs the input, the last one
//!   assembles the output. That is the communication the paper warns about: a cut inside a
//!   layer moves more bytes than a cut after it.
//!
//! A cut whose transfer (2 bytes / beta, forward and backward, docs/model.md's C) would
//! exceed the stage time T stays at the inter-layer cut (communication would be the
//! bottleneck). Instances whose `stash_shared` entries begin or end at a split layer are
//! refused (the entry would have to be divided between pieces); entries around split layers
//! are kept.

use serde::Serialize;

use super::bapipe::{
    balanced_heterogeneous, BapipePartitionError, HeteroPartition, HeteroPlatform,
};
use crate::model::{ChainSums, Instance, Layer, SharedStash};

/// One layer of the split chain: a whole layer (fraction 1) or a slice of one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerPiece {
    /// The original layer, 1-based.
    pub layer: usize,
    /// Its share of the layer's work, weights and output.
    pub fraction: f64,
}

/// The intra-layer partition: a new chain (whole layers and slices) cut into stages.
#[derive(Debug, Clone, Serialize)]
pub struct IntraLayerPartition {
    /// The chain of pieces; stage n holds pieces `starts[n]..starts[n+1]`.
    #[serde(skip)]
    pub instance: Instance,
    pub pieces: Vec<LayerPiece>,
    /// 0-based first piece of each stage (stage n on processor n).
    pub starts: Vec<usize>,
    /// Seconds of each stage (forward + backward, times its processor's factor).
    pub stage_seconds: Vec<f64>,
    pub bottleneck_seconds: f64,
    /// The inter-layer partition it started from (empty, with an infinite bottleneck, when
    /// there are fewer layers than processors), and its slowest stage.
    pub inter_layer_starts: Vec<usize>,
    pub inter_layer_bottleneck_seconds: f64,
    /// The original layers that were split (1-based).
    pub split_layers: Vec<usize>,
    /// Cuts kept at the inter-layer boundary because a cut inside the layer would make the
    /// transfer slower than the stage (index of the cut: 1 = between stages 0 and 1).
    pub cuts_kept_for_communication: Vec<usize>,
}

/// BaPipe's intra-layer partition of `instance` over processors with time `factors`
/// (1 = the profiled speed) joined by links of `bandwidth_bytes_per_second` (infinite:
/// communication is never the bottleneck).
pub fn intra_layer_partition(
    instance: &Instance,
    factors: &[f64],
    bandwidth_bytes_per_second: f64,
) -> Result<IntraLayerPartition, BapipePartitionError> {
    let p = factors.len();
    if p == 0 {
        return Err(BapipePartitionError::Invalid(
            "needs at least one processor".into(),
        ));
    }
    if let Some(x) = factors.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
        return Err(BapipePartitionError::Invalid(format!(
            "speed factors (time multipliers) must be positive and finite, got {x}"
        )));
    }
    // Step 1, the inter-layer partition (at least one layer per processor), when there are
    // enough layers; with fewer layers than processors every cut must split a layer.
    let inter = if p <= instance.len() {
        Some(balanced_heterogeneous(
            instance,
            factors,
            HeteroPlatform {
                bandwidth_bytes_per_second,
                memory_bytes: f64::INFINITY,
            },
        )?)
    } else {
        None
    };
    let sums = ChainSums::new(instance);
    let l = instance.len();
    let total = sums.u(1, l);
    if total.is_nan() || total <= 0.0 {
        return Err(BapipePartitionError::Invalid(
            "the chain has no work to balance (every forward and backward time is 0)".into(),
        ));
    }
    // Cumulative work (profiled seconds) before layer j+1, j = 0..=L.
    let mut prefix = vec![0.0; l + 1];
    for j in 1..=l {
        prefix[j] = prefix[j - 1] + instance.layers[j - 1].fwd + instance.layers[j - 1].bwd;
    }
    let work = Work {
        instance,
        prefix,
        total,
        t: 1.0 / factors.iter().map(|f| 1.0 / (f * total)).sum::<f64>(),
    };
    let (cuts, kept) = work.cuts(factors, bandwidth_bytes_per_second, inter.as_ref())?;
    let chain = work.pieces(&cuts);
    // Cuts at the very end of the last layers (none: checked above) would leave stages empty.
    if chain.starts.len() != p {
        return Err(BapipePartitionError::Invalid(format!(
            "built {} stages for {p} processors (a cut fell on a zero-time layer boundary twice)",
            chain.starts.len()
        )));
    }
    let mut split = instance.clone();
    split.name = format!("{}-intra{p}", instance.name);
    split.stash_shared = chain.shared_stashes(instance)?;
    split.layers = chain.layers;
    split
        .check()
        .map_err(|e| BapipePartitionError::Invalid(format!("the split chain is invalid: {e}")))?;
    let starts = chain.starts;
    let split_sums = ChainSums::new(&split);
    let stage_seconds: Vec<f64> = (0..p)
        .map(|n| {
            let end = starts.get(n + 1).copied().unwrap_or(split.len());
            factors[n] * split_sums.u(starts[n] + 1, end)
        })
        .collect();
    let bottleneck_seconds = stage_seconds.iter().cloned().fold(0.0, f64::max);
    Ok(IntraLayerPartition {
        instance: split,
        pieces: chain.pieces,
        starts,
        stage_seconds,
        bottleneck_seconds,
        inter_layer_bottleneck_seconds: inter
            .as_ref()
            .map_or(f64::INFINITY, |i| i.bottleneck_seconds),
        inter_layer_starts: inter.map(|i| i.starts).unwrap_or_default(),
        split_layers: chain.split_layers,
        cuts_kept_for_communication: kept,
    })
}

/// The chain's work as a line of profiled seconds, on which the cuts are placed.
struct Work<'a> {
    instance: &'a Instance,
    /// Cumulative work before layer j+1, j = 0..=L.
    prefix: Vec<f64>,
    total: f64,
    /// The balanced stage time T = 1 / sum(1 / T_n) (eq. (1)).
    t: f64,
}

/// The chain of pieces and where its stages start.
struct Pieces {
    layers: Vec<Layer>,
    pieces: Vec<LayerPiece>,
    starts: Vec<usize>,
    split_layers: Vec<usize>,
    /// The first and last piece (0-based) of each original layer (1-based).
    first_piece: Vec<usize>,
    last_piece: Vec<usize>,
}

impl Work<'_> {
    /// Step 2: each cut (in seconds of work) at its processor's exact share, inside a layer
    /// when it falls there, unless the transfer of a cut inside that layer would exceed T
    /// (then at `inter`'s cut: the cuts so kept are returned too, 1 = between stages 0 and
    /// 1); the cuts checked to leave every stage some work, in chain order.
    fn cuts(
        &self,
        factors: &[f64],
        bandwidth_bytes_per_second: f64,
        inter: Option<&HeteroPartition>,
    ) -> Result<(Vec<f64>, Vec<usize>), BapipePartitionError> {
        let (instance, prefix, total, t) = (self.instance, &self.prefix, self.total, self.t);
        let (l, p) = (instance.len(), factors.len());
        let mut cuts: Vec<f64> = Vec::with_capacity(p.saturating_sub(1));
        let mut kept = Vec::new();
        let mut share = 0.0;
        for n in 0..p.saturating_sub(1) {
            share += t / factors[n];
            let target = share.min(total);
            // The layer containing `target` strictly inside, if any.
            let inside = (1..=l).find(|&j| prefix[j - 1] < target && target < prefix[j]);
            let position = match inside {
                None => target,
                Some(j) => {
                    let x = (target - prefix[j - 1]) / (prefix[j] - prefix[j - 1]);
                    let bytes = instance.a(j - 1) + x * instance.a(j);
                    if 2.0 * bytes / bandwidth_bytes_per_second > t {
                        let Some(inter) = inter else {
                            return Err(BapipePartitionError::Invalid(format!(
                                "cut {} must split layer {j} (fewer layers than processors) but \
                                 its transfer, {:.3e} s, exceeds the stage time {t:.3e} s",
                                n + 1,
                                2.0 * bytes / bandwidth_bytes_per_second
                            )));
                        };
                        kept.push(n + 1);
                        prefix[inter.starts[n + 1]]
                    } else {
                        target
                    }
                }
            };
            cuts.push(position);
        }
        let mut last = 0.0;
        for (n, c) in cuts.iter().enumerate() {
            if *c <= last || *c >= total {
                return Err(BapipePartitionError::Invalid(format!(
                    "cut {} falls at {c} s of work, not after the previous cut ({last} s) and \
                     before the end ({total} s): mixed inter- and intra-layer cuts do not fit in \
                     order",
                    n + 1
                )));
            }
            last = *c;
        }
        Ok((cuts, kept))
    }

    /// Step 3: the chain of pieces, a layer whole where no cut falls inside it, else a
    /// slice per stage it spans ([`slices`]); a stage starts at each cut.
    fn pieces(&self, cuts: &[f64]) -> Pieces {
        let (instance, prefix) = (self.instance, &self.prefix);
        let l = instance.len();
        let tol = 1e-12 * self.total;
        let mut out = Pieces {
            layers: Vec::new(),
            pieces: Vec::new(),
            starts: vec![0usize],
            split_layers: Vec::new(),
            first_piece: vec![0usize; l + 1],
            last_piece: vec![0usize; l + 1],
        };
        let mut next_cut = 0usize;
        for j in 1..=l {
            let layer = &instance.layers[j - 1];
            let (lo, hi) = (prefix[j - 1], prefix[j]);
            // A cut at the layer's start (a boundary cut) begins a stage here.
            while next_cut < cuts.len() && (cuts[next_cut] - lo).abs() <= tol {
                out.starts.push(out.layers.len());
                next_cut += 1;
            }
            let mut bounds = vec![lo];
            let mut inner = 0;
            while next_cut + inner < cuts.len() && cuts[next_cut + inner] < hi - tol {
                bounds.push(cuts[next_cut + inner]);
                inner += 1;
            }
            bounds.push(hi);
            out.first_piece[j] = out.layers.len();
            if inner == 0 {
                out.layers.push(layer.clone());
                out.pieces.push(LayerPiece {
                    layer: j,
                    fraction: 1.0,
                });
            } else {
                out.split_layers.push(j);
                for (k, (slice, x)) in slices(layer, instance.a(j - 1), &bounds)
                    .into_iter()
                    .enumerate()
                {
                    if k > 0 {
                        out.starts.push(out.layers.len());
                        next_cut += 1;
                    }
                    out.layers.push(slice);
                    out.pieces.push(LayerPiece {
                        layer: j,
                        fraction: x,
                    });
                }
            }
            out.last_piece[j] = out.layers.len() - 1;
        }
        out
    }
}

/// The slices of `layer` (whose input is `input` bytes) between consecutive `bounds` (in
/// seconds of work), each with its fraction of the layer (module docs).
fn slices(layer: &Layer, input: f64, bounds: &[f64]) -> Vec<(Layer, f64)> {
    let (lo, hi) = (bounds[0], bounds[bounds.len() - 1]);
    let stash = layer.stash.unwrap_or(input);
    let kept_input = input.min(stash);
    let mut done = 0.0;
    let m = bounds.len() - 1;
    (0..m)
        .map(|k| {
            let x = (bounds[k + 1] - bounds[k]) / (hi - lo);
            done += x;
            let is_last = k + 1 == m;
            let slice = Layer {
                name: format!("{}[{}/{}]", layer.name, k + 1, m),
                fwd: x * layer.fwd,
                bwd: x * layer.bwd,
                weights: x * layer.weights,
                out: if is_last {
                    layer.out
                } else {
                    input + done * layer.out
                },
                stash: Some(kept_input + x * (stash - kept_input)),
                stash_overlap: if is_last {
                    layer.stash_overlap
                } else {
                    Some(kept_input)
                },
            };
            (slice, x)
        })
        .collect()
}

impl Pieces {
    /// `instance`'s `stash_shared` entries on the pieces; an entry that begins or ends at a
    /// split layer is refused (it would have to be divided between pieces).
    fn shared_stashes(
        &self,
        instance: &Instance,
    ) -> Result<Vec<SharedStash>, BapipePartitionError> {
        let mut shared = Vec::new();
        for e in &instance.stash_shared {
            if self.split_layers.contains(&e.first) || self.split_layers.contains(&e.last) {
                return Err(BapipePartitionError::Invalid(format!(
                    "layer {} or {} shares a stashed tensor (stash_shared) and would be split: the \
                     intra-layer partition cannot divide that entry",
                    e.first, e.last
                )));
            }
            shared.push(SharedStash {
                first: self.first_piece[e.first] + 1,
                last: self.last_piece[e.last] + 1,
                bytes: e.bytes,
            });
        }
        Ok(shared)
    }
}
