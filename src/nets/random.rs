//! Deterministic pseudo-random chains, for tests and benchmarks of the exact methods: the
//! same seed gives the same chain on every machine (a 64-bit LCG, no dependency).
//!
//! Times in seconds and sizes in bytes of order one, with backward heavier than forward
//! and every layer keeping its default stash (its input): small instances on which the
//! MILPs run to proven optimality.

use crate::model::{Instance, Layer};

/// A chain of `layers` layers drawn from `seed`: fwd in [0.2, 1.2), bwd in [0.4, 2.4),
/// weights in [1, 7), outputs in [1, 10), network input 5.
pub fn random_chain(seed: u64, layers: usize) -> Instance {
    let step = |x: u64| {
        x.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut x = step(seed);
    let mut next = move || {
        x = step(x);
        ((x >> 33) % 1000) as f64 / 1000.0
    };
    let layers = (0..layers)
        .map(|i| Layer {
            name: format!("l{}", i + 1),
            fwd: 0.2 + next(),
            bwd: 0.4 + 2.0 * next(),
            weights: 1.0 + 6.0 * next(),
            out: 1.0 + 9.0 * next(),
            stash: None,
            stash_overlap: None,
        })
        .collect();
    Instance {
        name: format!("chain{seed}"),
        input: 5.0,
        layers,
        stash_shared: Vec::new(),
        meta: Default::default(),
    }
}

/// The memory in which the whole chain runs one batch at a time on one processor: three
/// copies of the weights (docs/model.md section 6) plus every layer's stash. A scale for
/// tight and loose memories.
pub fn one_processor_memory(instance: &Instance) -> f64 {
    let s = instance.sums();
    let l = instance.len();
    3.0 * s.weights(1, l) + s.stash(1, l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_chain_and_valid() {
        let a = random_chain(7, 9);
        assert_eq!(a, random_chain(7, 9));
        assert_ne!(a, random_chain(8, 9));
        assert!(a.check().is_ok());
        assert_eq!(a.len(), 9);
        assert!(one_processor_memory(&a) > 0.0);
    }
}
