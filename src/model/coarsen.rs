//! Coarser chains of a chain, and allocations lifted back: the levels of a multilevel
//! search (docs/op-chains.md, "Coarser levels").
//!
//! A **coarsening** groups consecutive layers: each group becomes one layer of a shorter
//! chain whose every stage costs exactly what the same layers cost on the fine chain (its
//! forward and backward time, weights, the tensors crossing its ends, and its stash, shared
//! tensors counted once). So every allocation of the coarse chain, lifted (each coarse
//! stage replaced by the fine layers of its groups), is an allocation of the fine chain with
//! the same batch graph: the same pattern is valid for both, with the same period and the
//! same peaks. The coarse chain's plans are the fine chain's plans whose cuts fall between
//! groups.
//!
//! The natural levels of an op-level chain: its **single-tensor cuts**, the cuts that no
//! tensor kept further down crosses besides the one the layer before produces (no
//! `stash_shared` entry spans them; a residual block's inner cuts carry its input too, the
//! cuts between blocks one tensor), and among them its **module boundaries**, where the
//! layers' module paths part (`layer1.0.conv1` and `layer1.1.conv1`): on the committed op
//! chains, exactly their block-level chains.

use crate::model::{Allocation, Instance, Layer, Stage};

/// A coarser chain of an instance: `groups[g]` is the 1-based range of fine layers that
/// coarse layer `g + 1` stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Coarsening {
    pub groups: Vec<(usize, usize)>,
    pub coarse: Instance,
}

/// For every cut `c` in `1..L` (at index `c`; index 0 unused), whether no `stash_shared`
/// entry spans it (`first <= c < last`): then the only tensor crossing it that a later layer
/// keeps is the one layer `c` produces.
pub fn single_tensor_cuts(instance: &Instance) -> Vec<bool> {
    let n = instance.len();
    let mut spanned = vec![0i64; n + 1];
    for e in &instance.stash_shared {
        if e.bytes != 0.0 {
            spanned[e.first] += 1;
            spanned[e.last] -= 1;
        }
    }
    let mut open = 0;
    let mut out = vec![false; n];
    for c in 1..n {
        open += spanned[c];
        out[c] = open == 0;
    }
    out
}

/// The ids of a layer named `id: description`, several ids joined by `+` (a layer that is a
/// group of ops), the network input's `input` left out.
fn layer_ids(name: &str) -> impl Iterator<Item = &str> {
    let ids = name.split(": ").next().unwrap_or(name);
    ids.split('+').filter(|id| *id != "input")
}

/// The module path a layer belongs to: its first id less the last component
/// (`layer1.0.conv1` belongs to `layer1.0`, `stem.bn1` to `stem`), or the id itself when it
/// has one component.
fn module_of(name: &str) -> &str {
    // A layer that is the network input alone is its own module, `input`.
    let id = layer_ids(name).next().unwrap_or("input");
    id.rsplit_once('.').map_or(id, |(module, _)| module)
}

/// Whether the path `inner` is `outer` or lies within it (`outer` a dotted prefix of it).
fn within(outer: &str, inner: &str) -> bool {
    inner
        .strip_prefix(outer)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Whether two module paths are one or nested.
fn nested(a: &str, b: &str) -> bool {
    within(a, b) || within(b, a)
}

/// The chain coarsened where its layers' module paths part, at single-tensor cuts only: a
/// group keeps the layers of one module (a residual block, a dense layer, an Inception
/// module), and every cut inside a module that carries more than one tensor stays inside a
/// group. On pipeopt's op chains (names `block.op`, the module paths of the networks and of
/// ONNX imports) this is the block-level chain of the same network. `None` on a chain that
/// shares no tensor beyond neighbours (every cut single-tensor: a block-level chain, whose
/// layers are modules already), and when it is not shorter than [`at_single_tensor_cuts`]'s
/// chain (names without module paths).
pub fn at_module_boundaries(instance: &Instance) -> Option<Coarsening> {
    let cuts = single_tensor_cuts(instance);
    if cuts[1..].iter().all(|&c| c) {
        return None;
    }
    let modules: Vec<&str> = instance.layers.iter().map(|l| module_of(&l.name)).collect();
    let mut lasts = Vec::new();
    // The outermost module path of the group so far.
    let mut group = modules[0];
    for c in 1..instance.len() {
        let next = modules[c];
        if cuts[c] && !nested(group, next) {
            lasts.push(c);
            group = next;
        } else if next.len() < group.len() && nested(group, next) {
            group = next;
        }
    }
    lasts.push(instance.len());
    let single = cuts.iter().filter(|&&c| c).count() + 1;
    (lasts.len() < single).then(|| coarsen(instance, &lasts))
}

/// The chain coarsened at its single-tensor cuts, when that makes it shorter.
pub fn at_single_tensor_cuts(instance: &Instance) -> Option<Coarsening> {
    let cuts = single_tensor_cuts(instance);
    let mut lasts: Vec<usize> = (1..instance.len()).filter(|&c| cuts[c]).collect();
    lasts.push(instance.len());
    (lasts.len() < instance.len()).then(|| coarsen(instance, &lasts))
}

/// The chain whose layer `g + 1` is the fine layers `lasts[g - 1] + 1 ..= lasts[g]`
/// (`lasts` increasing, ending at the chain's last layer).
pub fn coarsen(instance: &Instance, lasts: &[usize]) -> Coarsening {
    debug_assert!(lasts.windows(2).all(|w| w[0] < w[1]));
    debug_assert_eq!(lasts.last(), Some(&instance.len()));
    let sums = instance.sums();
    let groups: Vec<(usize, usize)> = lasts
        .iter()
        .enumerate()
        .map(|(g, &last)| (if g == 0 { 1 } else { lasts[g - 1] + 1 }, last))
        .collect();
    // The stash of coarse layers a..=b (0-based), empty ranges keeping nothing.
    let kept = |a: usize, b: usize| -> f64 {
        if a > b {
            0.0
        } else {
            sums.stash(groups[a].0, groups[b].1)
        }
    };
    let layers = groups
        .iter()
        .enumerate()
        .map(|(g, &(first, last))| Layer {
            name: if first == last {
                instance.layer(first).name.clone()
            } else {
                format!(
                    "{}..{}",
                    instance.layer(first).name,
                    instance.layer(last).name
                )
            },
            fwd: sums.u_f(first, last),
            bwd: sums.u_b(first, last),
            weights: sums.weights(first, last),
            out: sums.a(last),
            stash: Some(kept(g, g)),
            stash_overlap: None,
        })
        .collect();
    let mut coarse = Instance {
        name: format!("{} ({} groups)", instance.name, groups.len()),
        input: instance.input,
        layers,
        stash_shared: Vec::new(),
        meta: instance.meta.clone(),
    };
    // What coarse layers a < b share, by inclusion and exclusion: with these pairs every
    // range's stash is the fine range's (`stash(a..b) = sum of the layers' stashes - the
    // pairs inside it`, the pairs of the range being the second differences of `kept`).
    let n = groups.len();
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let shared = kept(a, b - 1) + kept(a + 1, b) - kept(a, b) - kept(a + 1, b - 1);
            if shared.abs() > 1e-9 * (1.0 + kept(a, b).abs()) {
                pairs.push((a + 1, b + 1, shared));
            }
        }
    }
    coarse.set_stash_pairs(pairs);
    Coarsening { groups, coarse }
}

/// The groups of `fine` that the layers of a coarser chain of the same network stand for,
/// matched by name: fine layer `l` (named `id: description`, `id` possibly several ids
/// joined by `+`, a leading `input+` ignored) belongs to the coarse layer whose name is the
/// longest one equal to an id of it or a prefix of one followed by `.` (`layer1.0` holds
/// `layer1.0.conv1`). Returns the last fine layer of each group (what [`coarsen`] takes), or
/// `None` when some fine layer matches no name or the groups are not contiguous and in the
/// coarse chain's order (the block-level chain of an op-level one, made by the same tool).
pub fn lasts_by_names(fine: &Instance, coarse_names: &[&str]) -> Option<Vec<usize>> {
    let owner = |name: &str| -> Option<usize> {
        layer_ids(name).find_map(|id| {
            coarse_names
                .iter()
                .enumerate()
                .filter(|(_, c)| within(c, id))
                .max_by_key(|(_, c)| c.len())
                .map(|(g, _)| g)
        })
    };
    let mut lasts = Vec::with_capacity(coarse_names.len());
    let mut current = None;
    for (i, layer) in fine.layers.iter().enumerate() {
        let g = owner(&layer.name)?;
        match current {
            Some(c) if c == g => {}
            Some(c) if g == c + 1 => lasts.push(i),
            None if g == 0 => {}
            _ => return None,
        }
        current = Some(g);
    }
    lasts.push(fine.len());
    (lasts.len() == coarse_names.len()).then_some(lasts)
}

impl Coarsening {
    /// The fine allocation of a coarse one: each stage's groups replaced by their layers.
    pub fn lift(&self, allocation: &Allocation) -> Allocation {
        Allocation::new(
            allocation
                .stages
                .iter()
                .map(|s| Stage {
                    first: self.groups[s.first - 1].0,
                    last: self.groups[s.last - 1].1,
                    processor: s.processor,
                })
                .collect(),
        )
    }

    /// Fine layers of the fine chain.
    pub fn fine_layers(&self) -> usize {
        self.groups.last().map_or(0, |g| g.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Platform, SharedStash};

    /// A chain of `n` layers with varied times and sizes, default stashes.
    fn chain(n: usize) -> Instance {
        Instance {
            name: "chain".into(),
            input: 5.0,
            layers: (0..n)
                .map(|i| {
                    let x = ((i * 7 + 3) % 11) as f64;
                    Layer {
                        name: format!("l{}", i + 1),
                        fwd: 0.2 + 0.1 * x,
                        bwd: 0.5 + 0.2 * x,
                        weights: 1.0 + x,
                        out: 2.0 + (x * 3.0) % 7.0,
                        stash: None,
                        stash_overlap: None,
                    }
                })
                .collect(),
            stash_shared: Vec::new(),
            meta: Default::default(),
        }
    }

    /// A chain with shared tensors the way op chains have them: a block's input kept by
    /// its first layer and by a later one (a shortcut), and a negative term.
    fn op_like() -> Instance {
        let mut inst = chain(9);
        inst.layers[1].stash = Some(inst.layers[1].stash.unwrap_or(inst.layers[0].out) + 4.0);
        inst.layers[3].stash = Some(inst.layers[0].out + 4.0);
        inst.stash_shared = vec![
            SharedStash {
                first: 2,
                last: 4,
                bytes: 4.0,
            },
            SharedStash {
                first: 6,
                last: 8,
                bytes: 0.5,
            },
        ];
        inst.check().unwrap();
        inst
    }

    #[test]
    fn single_tensor_cuts_are_those_no_entry_spans() {
        let inst = op_like();
        let cuts = single_tensor_cuts(&inst);
        let spanned: Vec<usize> = (1..inst.len()).filter(|&c| !cuts[c]).collect();
        assert_eq!(spanned, vec![2, 3, 6, 7]);
    }

    #[test]
    fn every_range_of_groups_keeps_what_its_layers_keep() {
        let inst = op_like();
        for lasts in [
            vec![1, 4, 5, 8, 9],
            vec![2, 3, 9],
            vec![9],
            (1..=9).collect(),
        ] {
            let c = coarsen(&inst, &lasts);
            c.coarse.check().unwrap();
            let (fine, coarse) = (inst.sums(), c.coarse.sums());
            let n = c.groups.len();
            for a in 1..=n {
                for b in a..=n {
                    let (f, l) = (c.groups[a - 1].0, c.groups[b - 1].1);
                    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * (1.0 + y.abs());
                    assert!(
                        close(coarse.stash(a, b), fine.stash(f, l)),
                        "{lasts:?} {a}..{b}"
                    );
                    assert!(close(coarse.u_f(a, b), fine.u_f(f, l)));
                    assert!(close(coarse.u_b(a, b), fine.u_b(f, l)));
                    assert!(close(coarse.weights(a, b), fine.weights(f, l)));
                    assert_eq!(coarse.a(b), fine.a(l));
                }
            }
            assert_eq!(coarse.a(0), fine.a(0));
        }
    }

    #[test]
    fn a_lifted_allocation_has_the_same_batch_graph() {
        let inst = op_like();
        let c = at_single_tensor_cuts(&inst).expect("shorter");
        assert_eq!(c.groups.len(), 5);
        let coarse_alloc = Allocation::new(vec![
            Stage {
                first: 1,
                last: 2,
                processor: 0,
            },
            Stage {
                first: 3,
                last: 3,
                processor: 1,
            },
            Stage {
                first: 4,
                last: 5,
                processor: 0,
            },
        ]);
        let fine_alloc = c.lift(&coarse_alloc);
        assert_eq!(fine_alloc.stages.last().unwrap().last, inst.len());
        let platform = Platform::new(2, 1e9, 3.0);
        let g1 = crate::model::BatchGraph::new(&c.coarse, &platform, &coarse_alloc);
        let g2 = crate::model::BatchGraph::new(&inst, &platform, &fine_alloc);
        assert_eq!(g1.deps, g2.deps);
        for (x, y) in g1.ops.iter().zip(&g2.ops) {
            assert_eq!((x.id, x.resource), (y.id, y.resource));
            assert!((x.duration - y.duration).abs() <= 1e-12 * (1.0 + y.duration));
        }
        for (x, y) in g1.static_memory.iter().zip(&g2.static_memory) {
            assert!((x - y).abs() <= 1e-9 * (1.0 + y));
        }
        for (x, y) in g1.held.iter().zip(&g2.held) {
            assert!((x.bytes - y.bytes).abs() <= 1e-9 * (1.0 + y.bytes));
        }
    }

    #[test]
    fn groups_by_the_names_of_a_coarser_chain() {
        let mut inst = chain(5);
        for (l, name) in [
            "input+stem.conv: Conv",
            "stem.relu: Relu",
            "block1.conv1: Conv",
            "block1.conv2+block1.add: Conv",
            "head: Linear",
        ]
        .iter()
        .enumerate()
        {
            inst.layers[l].name = name.to_string();
        }
        assert_eq!(
            lasts_by_names(&inst, &["stem", "block1", "head"]),
            Some(vec![2, 4, 5])
        );
        // Out of order or unmatched: none.
        assert_eq!(lasts_by_names(&inst, &["block1", "stem", "head"]), None);
        assert_eq!(lasts_by_names(&inst, &["stem", "block1"]), None);
        // `block1` is not a prefix of `block10.x`.
        inst.layers[4].name = "block10.fc: Linear".into();
        assert_eq!(lasts_by_names(&inst, &["stem", "block1", "head"]), None);
    }

    #[test]
    fn module_boundaries_group_a_module_and_cut_only_where_one_tensor_crosses() {
        let mut inst = op_like();
        let names = [
            "input+stem.conv: Conv",
            "b1.conv1: Conv",
            "b1.conv2: Conv",
            "b1.add: Add",
            "b1.relu: Relu",
            "b2.x.conv: Conv",
            "b2.x.bn: BatchNorm",
            "b2.pool: MaxPool",
            "head.fc: Linear",
        ];
        for (l, name) in names.iter().enumerate() {
            inst.layers[l].name = name.to_string();
        }
        // Single-tensor cuts: every one but 2, 3, 6, 7; modules part at 1, 5, 8.
        let c = at_module_boundaries(&inst).expect("shorter than the single-tensor level");
        assert_eq!(c.groups, vec![(1, 1), (2, 5), (6, 8), (9, 9)]);
        assert_eq!(module_of("input+stem.conv: Conv"), "stem");
        assert_eq!(module_of("head.flatten+head.fc: Linear"), "head");
        assert_eq!(module_of("node3: relu"), "node3");
        assert!(nested("b2", "b2.x") && !nested("b2", "b20.x"));
    }

    #[test]
    fn a_chain_without_shared_tensors_has_no_coarser_level() {
        assert_eq!(at_single_tensor_cuts(&chain(6)), None);
        // Not even where its names are module paths (a block-level chain).
        let mut blocks = chain(4);
        for (l, name) in ["stem", "layer1.0", "layer1.1", "head"].iter().enumerate() {
            blocks.layers[l].name = name.to_string();
        }
        assert_eq!(at_module_boundaries(&blocks), None);
    }
}
