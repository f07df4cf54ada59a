//! docs/model.md section 1: an instance is a chain of layers `1..=L`.
//!
//! Layer numbers are 1-based everywhere in the public API, as in the papers and the plan
//! files; `a(0)` is the network input.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

use crate::error::{read_json, InputError};
use crate::units::{Bytes, Seconds};

/// One layer of the chain (a group of DAG nodes for a linearized network).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub name: String,
    /// u_F(l): seconds of the forward pass for one batch.
    pub fwd: Seconds,
    /// u_B(l): seconds of the backward pass for one batch.
    pub bwd: Seconds,
    /// W(l): bytes of parameters.
    pub weights: Bytes,
    /// a(l): bytes of the output activation (and of the gradient b(l)); for a linearized DAG,
    /// the total size of every tensor crossing the cut after this layer.
    pub out: Bytes,
    /// Bytes kept from the forward to the backward pass for one batch. Default: a(l-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash: Option<Bytes>,
    /// Bytes of `stash` that layer l+1's stash counts too: this layer's output when both
    /// keep it (a ResNet block's last ReLU keeps its output, which the next block's
    /// convolutions keep as their input: one tensor). A stage keeps them once, so a stage
    /// `k..=m` keeps `sum(stash) - sum(stash_overlap over k..m-1)` (see
    /// [`ChainSums::stash`]). Our extension of docs/model.md section 1; default 0 (additive
    /// stashes, docs/model.md's rule). The last layer's must be 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stash_overlap: Option<Bytes>,
}

impl Layer {
    /// A layer that keeps its input (the default stash) and shares nothing with the next.
    pub fn new(
        name: impl Into<String>,
        fwd: Seconds,
        bwd: Seconds,
        weights: Bytes,
        out: Bytes,
    ) -> Layer {
        Layer {
            name: name.into(),
            fwd,
            bwd,
            weights,
            out,
            stash: None,
            stash_overlap: None,
        }
    }

    /// The same layer keeping `stash` bytes for its backward pass.
    pub fn with_stash(mut self, stash: Bytes) -> Layer {
        self.stash = Some(stash);
        self
    }
}

/// Bytes that the stashes of two layers `first < last` both count, which a stage holding
/// both (hence every layer between) keeps once: the generalization of
/// [`Layer::stash_overlap`] to layers that are not consecutive (an op-level chain: a
/// residual block's input is kept by its first convolution and by the shortcut several
/// layers later). A stage `k..=m` keeps `sum(stash) - sum(stash_overlap over k..m-1) -
/// sum(bytes of every entry with k <= first and last <= m)`. `bytes` may be negative: an
/// inclusion-exclusion term (a stage that holds the producer of a tensor that none of its
/// layers saves but a later layer reads: that later layer's stash counts it as its input,
/// the stage does not; see `io::pipedream`, "Stash"). Every stage's stash must stay
/// non-negative ([`Instance::check`]). Our extension of docs/model.md section 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedStash {
    /// 1-based layer numbers, `first < last`.
    pub first: usize,
    pub last: usize,
    pub bytes: Bytes,
}

/// A profiled network, linearized into a chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub name: String,
    /// a(0): bytes of the network input.
    pub input: Bytes,
    pub layers: Vec<Layer>,
    /// What non-consecutive layers' stashes share (see [`SharedStash`]); empty by default
    /// and then left out of the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stash_shared: Vec<SharedStash>,
    /// Free-form provenance: source, device, image, batch, dtype, tool version.
    #[serde(default)]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

impl Instance {
    /// A chain of `layers` after an input of `input` bytes, with no stash shared between
    /// layers that are not consecutive and no provenance.
    pub fn chain(name: impl Into<String>, input: Bytes, layers: Vec<Layer>) -> Instance {
        Instance {
            name: name.into(),
            input,
            layers,
            stash_shared: Vec::new(),
            meta: Default::default(),
        }
    }

    /// Reads and checks an instance file; errors name the file and the field.
    pub fn load(path: &Path) -> Result<Instance, InputError> {
        let instance: Instance = read_json(path)?;
        instance.check().map_err(|e| e.in_file(path))?;
        Ok(instance)
    }

    /// Number of layers L.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Layer `l`, 1-based.
    pub fn layer(&self, l: usize) -> &Layer {
        &self.layers[l - 1]
    }

    /// a(l) for `l` in `0..=L`: a(0) is the input.
    pub fn a(&self, l: usize) -> Bytes {
        if l == 0 {
            self.input
        } else {
            self.layers[l - 1].out
        }
    }

    /// The stash of layer `l` (1-based): its explicit value, or a(l-1).
    pub fn stash(&self, l: usize) -> Bytes {
        self.layers[l - 1].stash.unwrap_or_else(|| self.a(l - 1))
    }

    /// Bytes of layer `l`'s stash that layer `l+1`'s stash counts too (0 by default).
    pub fn stash_overlap(&self, l: usize) -> Bytes {
        self.layers[l - 1].stash_overlap.unwrap_or(0.0)
    }

    /// Checks every number is finite and non-negative and the chain is not empty.
    pub fn check(&self) -> Result<(), InputError> {
        let bad = |field: String, reason: &str| Err(InputError::new("instance", field, reason));
        if self.layers.is_empty() {
            return bad("layers".into(), "the chain has no layer");
        }
        check_quantity("input", self.input)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let at = |f: &str| format!("layers[{i}].{f}");
            check_quantity(&at("fwd"), layer.fwd)?;
            check_quantity(&at("bwd"), layer.bwd)?;
            check_quantity(&at("weights"), layer.weights)?;
            check_quantity(&at("out"), layer.out)?;
            if let Some(s) = layer.stash {
                check_quantity(&at("stash"), s)?;
            }
            if let Some(o) = layer.stash_overlap {
                check_quantity(&at("stash_overlap"), o)?;
                let l = i + 1;
                if l == self.len() && o > 0.0 {
                    return bad(
                        at("stash_overlap"),
                        "the last layer shares nothing with a next one",
                    );
                }
                if l < self.len() && (o > self.stash(l) || o > self.stash(l + 1)) {
                    return bad(
                        at("stash_overlap"),
                        "exceeds the stash of this layer or of the next one",
                    );
                }
            }
        }
        if self.layers.iter().all(|l| l.fwd + l.bwd == 0.0) {
            return bad("layers".into(), "every layer takes zero time");
        }
        // Every algorithm works on sums over ranges of layers (and small multiples of
        // them: 3 W, 2 a, periods times live batches); a chain whose totals overflow to
        // infinity has no meaningful plan. Keep a factor of 2^10 of headroom.
        let total = |f: fn(&Layer) -> f64| self.layers.iter().map(f).sum::<f64>();
        for (field, sum) in [
            ("fwd", total(|l| l.fwd)),
            ("bwd", total(|l| l.bwd)),
            ("weights", total(|l| l.weights)),
            ("out", total(|l| l.out) + self.input),
            ("stash", total(|l| l.stash.unwrap_or(l.out))),
        ] {
            if !(sum * 1024.0).is_finite() {
                return bad(
                    format!("layers[].{field}"),
                    "the sum over the chain is too large for a double (overflows to infinity)",
                );
            }
        }
        if !self.stash_shared.is_empty() {
            for (i, e) in self.stash_shared.iter().enumerate() {
                let at = |f: &str| format!("stash_shared[{i}].{f}");
                if !e.bytes.is_finite() {
                    return bad(at("bytes"), "is not a finite number");
                }
                if e.first < 1 || e.first >= e.last || e.last > self.len() {
                    return Err(InputError::new(
                        "instance",
                        at("last"),
                        format!(
                            "layers {} and {} are not two layers 1 <= first < last <= {}",
                            e.first,
                            e.last,
                            self.len()
                        ),
                    ));
                }
            }
            if let Some((k, l)) = self.negative_stage() {
                return Err(InputError::new(
                    "instance",
                    "stash_shared",
                    format!("makes the stash of a stage {k}..{l} negative"),
                ));
            }
        }
        Ok(())
    }

    /// A stage `k..=l` whose stash (`ChainSums::stash`) is negative beyond rounding, if any:
    /// the one of least `k`. O(L x span), `span` the longest `stash_shared` entry's
    /// `last - first`: a stage at least `span` layers longer than `k..=k+span-1` grows by
    /// increments that no longer depend on `k` (every entry ending at such an `l` starts at
    /// `k` or later), so the least of its stashes is a suffix minimum of their prefix sums.
    /// (Checking every pair was 12.5 million stashes on a 5,000-layer chain.)
    fn negative_stage(&self) -> Option<(usize, usize)> {
        let n = self.len();
        let sums = self.sums();
        let span = self
            .stash_shared
            .iter()
            .map(|e| e.last - e.first)
            .max()
            .unwrap_or(1)
            .max(1);
        // Byte sizes are whole numbers: no rounding to forgive beyond the sums' own.
        let negative =
            |k: usize, l: usize, stash: f64| stash < -1e-6 * (1.0 + sums.stash_sum(k, l));
        // increment[l] (l > span): what layer l adds to every stage k..=l with k <= l - span.
        let mut prefix = vec![0.0; n + 1];
        for l in 1..=n {
            let increment = if l > span {
                sums.stash(l - span, l) - sums.stash(l - span, l - 1)
            } else {
                0.0
            };
            prefix[l] = prefix[l - 1] + increment;
        }
        // least[m]: the least prefix[l] over l >= m, and that l.
        let mut least = vec![(f64::INFINITY, n); n + 2];
        for l in (1..=n).rev() {
            least[l] = if prefix[l] < least[l + 1].0 {
                (prefix[l], l)
            } else {
                least[l + 1]
            };
        }
        for k in 1..=n {
            let near_end = (k + span - 1).min(n);
            for l in k..=near_end {
                if negative(k, l, sums.stash(k, l)) {
                    return Some((k, l));
                }
            }
            let m = k + span;
            if m <= n {
                let (low, l) = least[m];
                if negative(k, l, sums.stash(k, near_end) + low - prefix[m - 1]) {
                    return Some((k, l));
                }
            }
        }
        None
    }

    /// Sets `stash_overlap` and `stash_shared` from pairs `(first, last, bytes)` (1-based,
    /// `first < last`; several entries for one pair add up): a consecutive pair becomes the
    /// first layer's `stash_overlap` when it is a valid one (between 0 and both stashes),
    /// anything else a [`SharedStash`]. Zero pairs are dropped.
    pub fn set_stash_pairs(&mut self, pairs: impl IntoIterator<Item = (usize, usize, Bytes)>) {
        let mut merged: std::collections::BTreeMap<(usize, usize), Bytes> = Default::default();
        for (a, b, v) in pairs {
            debug_assert!(a >= 1 && a < b && b <= self.len());
            *merged.entry((a, b)).or_insert(0.0) += v;
        }
        for layer in &mut self.layers {
            layer.stash_overlap = None;
        }
        self.stash_shared.clear();
        for ((a, b), v) in merged {
            if v == 0.0 {
                continue;
            }
            if b == a + 1 && v > 0.0 && v <= self.stash(a) && v <= self.stash(b) {
                self.layers[a - 1].stash_overlap = Some(v);
            } else {
                self.stash_shared.push(SharedStash {
                    first: a,
                    last: b,
                    bytes: v,
                });
            }
        }
    }

    /// Every pair of layers whose stashes share bytes: `stash_overlap` as `(l, l + 1, bytes)`
    /// and the `stash_shared` entries.
    pub fn stash_pairs(&self) -> Vec<(usize, usize, Bytes)> {
        let mut v: Vec<(usize, usize, Bytes)> = (1..self.len())
            .map(|l| (l, l + 1, self.stash_overlap(l)))
            .filter(|p| p.2 != 0.0)
            .collect();
        v.extend(self.stash_shared.iter().map(|e| (e.first, e.last, e.bytes)));
        v
    }

    /// SHA-256 of the instance's canonical JSON, in hex: plans carry it so a plan can be
    /// matched to the exact instance it was made for.
    pub fn content_hash(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("an instance always serializes");
        let digest = Sha256::digest(&bytes);
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Prefix sums for O(1) range queries.
    pub fn sums(&self) -> ChainSums {
        ChainSums::new(self)
    }
}

fn check_quantity(field: &str, value: f64) -> Result<(), InputError> {
    if !value.is_finite() {
        Err(InputError::new(
            "instance",
            field,
            format!("{value} is not a finite number"),
        ))
    } else if value < 0.0 {
        Err(InputError::new(
            "instance",
            field,
            format!("{value} is negative"),
        ))
    } else {
        Ok(())
    }
}

/// Prefix sums over the chain, giving U(k,l) and friends in O(1). Ranges are 1-based and
/// inclusive, like stages: `u(k, l)` is the paper's U(k,l).
#[derive(Debug, Clone)]
pub struct ChainSums {
    fwd: Vec<f64>,
    bwd: Vec<f64>,
    weights: Vec<f64>,
    /// Prefix sums of `stash - stash_overlap`.
    stash: Vec<f64>,
    overlap: Vec<f64>,
    out: Vec<f64>,
    /// Prefix sums of the plain stashes (for tolerances).
    raw_stash: Vec<f64>,
    /// With `stash_shared` entries, what [`ChainSums::stash`] subtracts for them.
    shared: Option<SharedSums>,
}

/// The bytes of the `stash_shared` entries inside a range `k..=l` (`k <= first`,
/// `last <= l`) in O(1), from O(L x span) numbers, `span` the longest entry's `last - first`:
/// an L x L table (as before) held 200 MB and took seconds to fill on a 5,000-layer op
/// chain, once per `sums()`. Inside `k..=l` are the entries ending in `k..=l` less those of
/// them that start before `k`; those end at most `span - 1` layers after `k`.
#[derive(Debug, Clone)]
struct SharedSums {
    /// `ending[l]`: the bytes of the entries with `last <= l`.
    ending: Vec<f64>,
    /// The longest entry's `last - first` (at least 1).
    span: usize,
    /// `straddling[(k - 1) * span + d]`: the bytes of the entries with `first < k <= last`
    /// and `last - k <= d`.
    straddling: Vec<f64>,
}

impl SharedSums {
    fn new(n: usize, entries: &[SharedStash]) -> SharedSums {
        let entries: Vec<&SharedStash> = entries
            .iter()
            .filter(|e| e.first >= 1 && e.first < e.last && e.last <= n)
            .collect();
        let span = entries.iter().map(|e| e.last - e.first).max().unwrap_or(1);
        let mut ending = vec![0.0; n + 1];
        let mut straddling = vec![0.0; n * span];
        for e in &entries {
            ending[e.last] += e.bytes;
            for k in e.first + 1..=e.last {
                straddling[(k - 1) * span + (e.last - k)] += e.bytes;
            }
        }
        for l in 1..=n {
            ending[l] += ending[l - 1];
        }
        for row in straddling.chunks_mut(span) {
            for d in 1..row.len() {
                row[d] += row[d - 1];
            }
        }
        SharedSums {
            ending,
            span,
            straddling,
        }
    }

    /// The bytes of the entries inside `k..=l` (1-based, `k <= l`).
    fn inside(&self, k: usize, l: usize) -> f64 {
        if l < k {
            return 0.0;
        }
        let d = (l - k).min(self.span - 1);
        self.ending[l] - self.ending[k - 1] - self.straddling[(k - 1) * self.span + d]
    }
}

impl ChainSums {
    pub fn new(instance: &Instance) -> Self {
        let n = instance.len();
        let mut s = ChainSums {
            fwd: vec![0.0; n + 1],
            bwd: vec![0.0; n + 1],
            weights: vec![0.0; n + 1],
            stash: vec![0.0; n + 1],
            overlap: vec![0.0; n + 1],
            out: Vec::with_capacity(n + 1),
            raw_stash: vec![0.0; n + 1],
            shared: None,
        };
        s.out.push(instance.input);
        for l in 1..=n {
            let layer = instance.layer(l);
            s.fwd[l] = s.fwd[l - 1] + layer.fwd;
            s.bwd[l] = s.bwd[l - 1] + layer.bwd;
            s.weights[l] = s.weights[l - 1] + layer.weights;
            s.overlap[l] = instance.stash_overlap(l);
            s.stash[l] = s.stash[l - 1] + instance.stash(l) - s.overlap[l];
            s.raw_stash[l] = s.raw_stash[l - 1] + instance.stash(l);
            s.out.push(layer.out);
        }
        if !instance.stash_shared.is_empty() {
            s.shared = Some(SharedSums::new(n, &instance.stash_shared));
        }
        s
    }

    /// Number of layers L.
    pub fn len(&self) -> usize {
        self.fwd.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// U_F(k..=l).
    pub fn u_f(&self, k: usize, l: usize) -> Seconds {
        self.fwd[l] - self.fwd[k - 1]
    }
    /// U_B(k..=l).
    pub fn u_b(&self, k: usize, l: usize) -> Seconds {
        self.bwd[l] - self.bwd[k - 1]
    }
    /// U(k, l) = U_F + U_B over layers k..=l.
    pub fn u(&self, k: usize, l: usize) -> Seconds {
        self.u_f(k, l) + self.u_b(k, l)
    }
    /// Sum of W over k..=l.
    pub fn weights(&self, k: usize, l: usize) -> Bytes {
        self.weights[l] - self.weights[k - 1]
    }
    /// What a stage of layers k..=l keeps for one batch (MadPipe's a-bar of a stage): the sum
    /// of their stashes, less what consecutive layers share (`stash_overlap` of k..l-1), so
    /// that a shared tensor counts once. Without overlaps, the plain sum (docs/model.md).
    /// With `stash_shared` entries, those inside `k..=l` count once too.
    pub fn stash(&self, k: usize, l: usize) -> Bytes {
        let s = self.stash[l] - self.stash[k - 1] + self.overlap[l];
        match &self.shared {
            Some(t) => s - t.inside(k, l),
            None => s,
        }
    }
    /// The plain sum of the stashes of layers k..=l, nothing shared subtracted.
    pub fn stash_sum(&self, k: usize, l: usize) -> Bytes {
        self.raw_stash[l] - self.raw_stash[k - 1]
    }
    /// a(l) for l in 0..=L.
    pub fn a(&self, l: usize) -> Bytes {
        self.out[l]
    }
    /// MadPipe's M(k, l, g) (Beaumont et al., ScaDL 2022, section 4.2.1): the memory of
    /// stage `k..=l` of a contiguous allocation holding `live` batches: `3 W`, `live`
    /// stashes, and two buffers for each cut at its ends.
    pub fn stage_memory(&self, k: usize, l: usize, live: f64) -> Bytes {
        let mut m = 3.0 * self.weights(k, l) + live * self.stash(k, l);
        if k > 1 {
            m += 2.0 * self.a(k - 1);
        }
        if l < self.len() {
            m += 2.0 * self.a(l);
        }
        m
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small chain used across unit tests.
    pub fn chain(fwd: &[f64], bwd: &[f64], weights: &[f64], out: &[f64], input: f64) -> Instance {
        Instance {
            name: "test".into(),
            input,
            layers: (0..fwd.len())
                .map(|i| Layer::new(format!("l{}", i + 1), fwd[i], bwd[i], weights[i], out[i]))
                .collect(),
            stash_shared: Vec::new(),
            meta: Default::default(),
        }
    }

    #[test]
    fn sums_and_defaults() {
        let i = chain(
            &[1., 2., 3.],
            &[2., 4., 6.],
            &[10., 0., 5.],
            &[7., 8., 9.],
            4.,
        );
        let s = i.sums();
        assert_eq!(s.u(1, 3), 18.0);
        assert_eq!(s.u(2, 2), 6.0);
        assert_eq!(s.weights(1, 3), 15.0);
        assert_eq!(i.stash(1), 4.0);
        assert_eq!(s.stash(1, 3), 4.0 + 7.0 + 8.0);
        // Layers 1 and 2 share 3 bytes, 2 and 3 share 5: a stage keeps them once.
        let mut o = i.clone();
        o.layers[0].stash = Some(6.0);
        o.layers[0].stash_overlap = Some(3.0);
        o.layers[1].stash_overlap = Some(5.0);
        o.check().unwrap();
        let so = o.sums();
        assert_eq!(so.stash(1, 1), 6.0);
        assert_eq!(so.stash(2, 2), 7.0);
        assert_eq!(so.stash(1, 2), 6.0 + 7.0 - 3.0);
        assert_eq!(so.stash(2, 3), 7.0 + 8.0 - 5.0);
        assert_eq!(so.stash(1, 3), 6.0 + 7.0 + 8.0 - 3.0 - 5.0);
        // An overlap larger than a stash, or on the last layer, is refused.
        let mut bad = o.clone();
        bad.layers[2].stash_overlap = Some(1.0);
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("layers[2].stash_overlap"));
        let mut bad = o.clone();
        bad.layers[0].stash_overlap = Some(6.5);
        assert!(bad.check().is_err());
        assert_eq!(s.a(0), 4.0);
        assert_eq!(s.a(3), 9.0);
    }

    #[test]
    fn bad_numbers_are_named() {
        let mut i = chain(&[1.], &[1.], &[1.], &[1.], 1.);
        i.layers[0].bwd = f64::NAN;
        let e = i.check().unwrap_err();
        assert_eq!(e.field, "layers[0].bwd");
        i.layers[0].bwd = -1.0;
        assert!(i.check().unwrap_err().reason.contains("negative"));
        i.layers.clear();
        assert_eq!(i.check().unwrap_err().field, "layers");
    }

    /// The check of every stage's stash against every pair `k..=l` summed directly, on
    /// random chains with shared tensors, some of them making a stage negative.
    #[test]
    fn negative_stages_are_found_as_by_checking_every_pair() {
        use rand_xoshiro::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        // A number in lo..hi (hi > lo).
        let mut pick = |lo: usize, hi: usize| lo + (rng.next_u64() % (hi - lo) as u64) as usize;
        let mut found = 0;
        for _ in 0..400 {
            let n = pick(2, 14);
            let mut inst = chain(
                &vec![1.0; n],
                &vec![1.0; n],
                &vec![0.0; n],
                &vec![1.0; n],
                1.0,
            );
            for layer in &mut inst.layers {
                layer.stash = Some(pick(0, 6) as f64);
            }
            let pairs: Vec<(usize, usize, f64)> = (0..pick(1, 5))
                .map(|_| {
                    let a = pick(1, n);
                    let b = pick(a + 1, n + 1);
                    (a, b, pick(1, 5) as f64)
                })
                .collect();
            inst.set_stash_pairs(pairs);
            let sums = inst.sums();
            let direct = (1..=n)
                .flat_map(|k| (k..=n).map(move |l| (k, l)))
                .find(|&(k, l)| sums.stash(k, l) < -1e-6 * (1.0 + sums.stash_sum(k, l)));
            let fast = inst.negative_stage();
            assert_eq!(fast.is_some(), direct.is_some(), "{inst:?}");
            if let (Some(f), Some(d)) = (fast, direct) {
                assert_eq!(f.0, d.0, "the least first layer");
                assert!(sums.stash(f.0, f.1) < 0.0);
                found += 1;
            }
        }
        assert!(found > 20 && found < 380, "{found} negative of 400");
    }

    #[test]
    fn hash_changes_with_content() {
        let a = chain(&[1.], &[1.], &[1.], &[1.], 1.);
        let mut b = a.clone();
        assert_eq!(a.content_hash(), b.content_hash());
        b.layers[0].fwd = 2.0;
        assert_ne!(a.content_hash(), b.content_hash());
        assert_eq!(a.content_hash().len(), 64);
    }
}
