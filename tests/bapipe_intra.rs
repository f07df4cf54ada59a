//! BaPipe's intra-layer partition (Zhao et al., arXiv 2020, section 3.3.2): on random
//! chains, the split chain keeps every layer's work, weights and stash, every stage gets
//! exactly its share of the work (so no worse than any whole-layer partition), and
//! communication keeps a cut between layers when a cut inside one would be slower than the
//! stage.

use pipeopt::model::{ChainSums, Instance, Layer, SharedStash};
use pipeopt::partition::bapipe::optimal_heterogeneous;
use pipeopt::partition::bapipe_intra::intra_layer_partition;
use proptest::prelude::*;

fn instance(layers: &[(f64, f64, f64, f64, f64)]) -> Instance {
    Instance::chain(
        "random",
        3.0,
        layers
            .iter()
            .enumerate()
            .map(|(i, &(fwd, bwd, weights, out, extra))| {
                Layer::new(format!("l{i}"), fwd, bwd, weights, out).with_stash_extra(extra)
            })
            .collect(),
    )
}

trait StashExtra {
    fn with_stash_extra(self, extra: f64) -> Layer;
}

impl StashExtra for Layer {
    /// An explicit stash above the input for every other layer (the input is filled in by
    /// `fix_stashes`).
    fn with_stash_extra(mut self, extra: f64) -> Layer {
        if extra > 0.5 {
            self.stash = Some(extra);
        }
        self
    }
}

/// Explicit stashes hold at least the layer input (as `Layer::stash` documents).
fn fix_stashes(mut inst: Instance) -> Instance {
    for l in 1..=inst.len() {
        let input = inst.a(l - 1);
        if let Some(s) = inst.layers[l - 1].stash.as_mut() {
            *s += input;
        }
    }
    inst
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn split_chain_keeps_layers_and_balances_exactly(
        layers in proptest::collection::vec(
            (0.1f64..5.0, 0.1f64..9.0, 0.0f64..10.0, 0.1f64..4.0, 0.0f64..2.0), 1..8),
        factors in proptest::collection::vec(0.5f64..2.0, 1..7),
    ) {
        let inst = fix_stashes(instance(&layers));
        let part = intra_layer_partition(&inst, &factors, f64::INFINITY).unwrap();
        let split = &part.instance;
        prop_assert_eq!(split.len(), part.pieces.len());
        prop_assert_eq!(part.starts.len(), factors.len());
        // Every original layer: fractions sum to 1, work and weights kept.
        for l in 1..=inst.len() {
            let of: Vec<usize> = (0..split.len()).filter(|&i| part.pieces[i].layer == l).collect();
            prop_assert!(!of.is_empty());
            // Pieces of a layer are consecutive.
            prop_assert_eq!(of.len(), of[of.len() - 1] - of[0] + 1);
            let sum = |f: &dyn Fn(&Layer) -> f64| of.iter().map(|&i| f(&split.layers[i])).sum::<f64>();
            let layer = &inst.layers[l - 1];
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()));
            prop_assert!(close(of.iter().map(|&i| part.pieces[i].fraction).sum::<f64>(), 1.0));
            prop_assert!(close(sum(&|x| x.fwd), layer.fwd));
            prop_assert!(close(sum(&|x| x.bwd), layer.bwd));
            prop_assert!(close(sum(&|x| x.weights), layer.weights));
            // A stage holding every piece keeps exactly the layer's stash.
            let sums = ChainSums::new(split);
            prop_assert!(close(sums.stash(of[0] + 1, of[of.len() - 1] + 1), inst.stash(l)),
                "layer {l}: {} vs {}", sums.stash(of[0] + 1, of[of.len() - 1] + 1), inst.stash(l));
            prop_assert!(close(split.layers[of[of.len() - 1]].out, layer.out));
        }
        // Every stage at its share T / factor (eq. (1)): the same time on every processor.
        let total: f64 = inst.layers.iter().map(|x| x.fwd + x.bwd).sum();
        let t = 1.0 / factors.iter().map(|f| 1.0 / (f * total)).sum::<f64>();
        for (n, s) in part.stage_seconds.iter().enumerate() {
            prop_assert!((s - t).abs() <= 1e-9 * t, "stage {n}: {s} vs T = {t}");
        }
        // Never worse than the best whole-layer partition.
        if factors.len() <= inst.len() {
            let whole = optimal_heterogeneous(&inst, &factors).unwrap();
            prop_assert!(part.bottleneck_seconds <= whole.bottleneck_seconds * (1.0 + 1e-9));
            prop_assert!(part.bottleneck_seconds <= part.inter_layer_bottleneck_seconds * (1.0 + 1e-9));
        }
    }
}

#[test]
fn a_layer_larger_than_a_stage_is_split_over_stages() {
    // Layer 2 holds 30 of the 36 units of work: 4 stages of 9 each.
    let inst = instance(&[
        (1.0, 2.0, 1.0, 1.0, 0.0),
        (10.0, 20.0, 8.0, 2.0, 0.0),
        (1.0, 2.0, 1.0, 1.0, 0.0),
    ]);
    let part = intra_layer_partition(&inst, &[1.0; 4], f64::INFINITY).unwrap();
    assert_eq!(part.split_layers, vec![2]);
    assert_eq!(part.bottleneck_seconds, 9.0);
    // Fewer layers than processors: no whole-layer partition exists at all.
    assert_eq!(part.inter_layer_bottleneck_seconds, f64::INFINITY);
    // On 2 processors whole layers leave 33 on one stage (layer 2 and a neighbour); split, 18.
    let two = intra_layer_partition(&inst, &[1.0; 2], f64::INFINITY).unwrap();
    assert_eq!(two.inter_layer_bottleneck_seconds, 33.0);
    assert_eq!(two.bottleneck_seconds, 18.0);
    assert_eq!(two.split_layers, vec![2]);
    // Pieces of layer 2 pass on its input (a(1) = 1) and the output computed so far.
    let pieces: Vec<&Layer> = part
        .instance
        .layers
        .iter()
        .filter(|l| l.name.starts_with("l1["))
        .collect();
    assert_eq!(pieces.len(), 4);
    assert!((pieces[0].out - (1.0 + 0.2 * 2.0)).abs() < 1e-12);
    assert_eq!(pieces[3].out, 2.0);
    // More layers than processors is not needed: 3 layers on 6 processors.
    let six = intra_layer_partition(&inst, &[1.0; 6], f64::INFINITY).unwrap();
    assert!((six.bottleneck_seconds - 6.0).abs() < 1e-12);
}

#[test]
fn slow_links_keep_cuts_between_layers() {
    let inst = instance(&[
        (1.0, 2.0, 1.0, 100.0, 0.0),
        (2.0, 4.0, 1.0, 100.0, 0.0),
        (1.0, 2.0, 1.0, 1.0, 0.0),
    ]);
    // 12 units over 2 processors: the ideal cut (6) is inside layer 2, whose transfer at
    // 1 byte/s (2 x (100 + 50) s) is far beyond the stage time.
    let part = intra_layer_partition(&inst, &[1.0; 2], 1.0).unwrap();
    assert_eq!(part.cuts_kept_for_communication, vec![1]);
    assert!(part.split_layers.is_empty());
    assert_eq!(part.bottleneck_seconds, part.inter_layer_bottleneck_seconds);
    let fast = intra_layer_partition(&inst, &[1.0; 2], 1e12).unwrap();
    assert_eq!(fast.split_layers, vec![2]);
    assert_eq!(fast.bottleneck_seconds, 6.0);
}

#[test]
fn shared_stashes_of_a_split_layer_are_refused() {
    let mut inst = instance(&[
        (1.0, 2.0, 1.0, 1.0, 0.0),
        (10.0, 20.0, 8.0, 2.0, 0.0),
        (1.0, 2.0, 1.0, 1.0, 0.0),
    ]);
    inst.stash_shared = vec![SharedStash {
        first: 1,
        last: 2,
        bytes: 0.5,
    }];
    let e = intra_layer_partition(&inst, &[1.0; 4], f64::INFINITY).unwrap_err();
    assert!(e.to_string().contains("stash_shared"), "{e}");
    assert!(intra_layer_partition(&inst, &[1.0, -1.0], f64::INFINITY).is_err());
}
