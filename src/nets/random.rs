//! Deterministic pseudo-random chains, for tests and benchmarks of the exact methods: the
//! same seed gives the same chain on every machine (a 64-bit LCG, no dependency).
//!
//! Times in seconds and sizes in bytes of order one, with backward heavier than forward
//! and every layer keeping its default stash (its input): small instances on which the
//! MILPs run to proven optimality.

use crate::io::{linearize_graph, Graph, GraphNode, NodeMemory};
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
        .map(|i| {
            Layer::new(
                format!("l{}", i + 1),
                0.2 + next(),
                0.4 + 2.0 * next(),
                1.0 + 6.0 * next(),
                1.0 + 9.0 * next(),
            )
        })
        .collect();
    Instance::chain(format!("chain{seed}"), 5.0, layers)
}

/// A chain of `layers` layers drawn from `seed` in which any of a layer's durations and
/// sizes may be zero, in every combination: each layer draws which of `fwd`, `bwd`,
/// `weights`, `out` and an explicit `stash` are zero (each with probability about one
/// third), the others as in [`random_chain`] (an explicit stash in [1, 10) where drawn).
/// Views, identities, losses whose time rounds to zero and layers without weights are
/// such layers. At least one layer takes time (`Instance::check` refuses a chain where
/// none does).
pub fn random_chain_with_zeros(seed: u64, layers: usize) -> Instance {
    let mut chain = random_chain(seed ^ 0x5eed_0000_0000_0000, layers);
    let step = |x: u64| x.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
    let mut x = step(seed.wrapping_add(1));
    let mut next = move || {
        x = step(x);
        (x >> 33) % 1000
    };
    for layer in &mut chain.layers {
        let zero = |draw: u64| draw < 333;
        if zero(next()) {
            layer.fwd = 0.0;
        }
        if zero(next()) {
            layer.bwd = 0.0;
        }
        if zero(next()) {
            layer.weights = 0.0;
        }
        if zero(next()) {
            layer.out = 0.0;
        }
        match next() {
            d if d < 333 => layer.stash = Some(0.0),
            d if d < 666 => layer.stash = Some(1.0 + 9.0 * (next() as f64 / 1000.0)),
            _ => {}
        }
    }
    if chain.layers.iter().all(|l| l.fwd + l.bwd == 0.0) {
        chain.layers[0].fwd = 0.5;
    }
    if next() < 333 {
        chain.input = 0.0;
    }
    chain.name = format!("zeros{seed}");
    chain
}

/// A small op-level chain drawn from `seed`: a DAG of six ops linearized like the
/// networks' op chains (docs/op-chains.md), so that its layers share tensors the way op
/// chains do: a residual block (`shape` 0: a tensor read by the next op and by a join three
/// ops later, its shortcut), or a concatenation (`shape` 1: one op's output read by the next
/// three, the last of them the join). The join multiplies its inputs (it keeps both). Times,
/// weights and sizes as in [`random_chain`]; which inputs each op saves for its backward
/// drawn too. The chain has five layers (the network input joins the first op); a residual
/// block's shortcut tensor is kept by two layers apart (a `stash_shared` entry), a
/// concatenation's input by the three layers that read it.
pub fn random_op_chain(seed: u64, shape: usize) -> Instance {
    let step = |x: u64| {
        x.wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
    };
    let mut x = step(seed ^ 0x0b0b);
    let mut next = move || {
        x = step(x);
        ((x >> 33) % 1000) as f64 / 1000.0
    };
    let edges: Vec<(usize, usize)> = match shape % 2 {
        0 => vec![(0, 1), (1, 2), (2, 3), (1, 4), (3, 4), (4, 5)],
        _ => vec![(0, 1), (1, 2), (1, 3), (2, 3), (3, 4), (1, 4), (4, 5)],
    };
    let names = ["Input", "conv1", "relu", "conv2", "join", "conv3"];
    let nodes: Vec<GraphNode> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let op = i > 0;
            let weighted = name.starts_with("conv");
            GraphNode {
                id: format!("node{}", i + 1),
                desc: name.to_string(),
                fwd: if op { 0.2 + next() } else { 0.0 },
                bwd: if op { 0.4 + 2.0 * next() } else { 0.0 },
                activation: 1.0 + 9.0 * next(),
                weights: if weighted { 1.0 + 6.0 * next() } else { 0.0 },
                line: 0,
            }
        })
        .collect();
    let memory: Vec<NodeMemory> = (0..nodes.len())
        .map(|v| {
            let mut saves: Vec<usize> = edges
                .iter()
                .filter(|e| e.1 == v)
                .map(|e| e.0)
                .filter(|_| next() < 0.67)
                .collect();
            if names[v] == "relu" {
                saves.push(v);
            }
            if names[v] == "join" {
                // A product of its inputs (squeeze-and-excitation's scaling) keeps both:
                // the shortcut's tensor is then kept by two layers apart, always.
                saves = edges.iter().filter(|e| e.1 == v).map(|e| e.0).collect();
            }
            NodeMemory {
                saves,
                extra: 0.0,
                alias_of: None,
            }
        })
        .collect();
    let graph = Graph::new(format!("op{seed}"), nodes, edges)
        .and_then(|g| g.with_memory(memory))
        .expect("a well-formed DAG");
    let mut inst = linearize_graph(&graph, &format!("op-chain{seed}")).instance;
    inst.meta.clear();
    inst
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

    #[test]
    fn op_chains_share_tensors_across_layers() {
        let mut shared = 0;
        for seed in 0..8 {
            let c = random_op_chain(seed, seed as usize);
            assert_eq!(c, random_op_chain(seed, seed as usize));
            assert!(c.check().is_ok(), "seed {seed}: {:?}", c.check());
            assert_eq!(c.len(), 5, "seed {seed}: {:?}", c.layers);
            // Every residual block's shortcut is kept two layers apart.
            if seed % 2 == 0 {
                assert!(!c.stash_shared.is_empty(), "seed {seed}");
            }
            shared += c.stash_shared.len();
        }
        assert!(shared > 0);
    }

    #[test]
    fn chains_with_zeros_draw_every_zero_and_stay_valid() {
        let mut seen = [false; 5];
        for seed in 0..40 {
            let c = random_chain_with_zeros(seed, 5);
            assert_eq!(c, random_chain_with_zeros(seed, 5));
            assert!(c.check().is_ok(), "seed {seed}: {:?}", c.check());
            for l in &c.layers {
                let zeros = [l.fwd, l.bwd, l.weights, l.out, l.stash.unwrap_or(1.0)];
                for (s, z) in seen.iter_mut().zip(zeros) {
                    *s |= z == 0.0;
                }
            }
        }
        assert_eq!(seen, [true; 5]);
    }
}
