//! Tests of PipeDream's dynamic programs: straight, replicated, hierarchical, memory, against brute force.

use super::*;
use crate::model::Layer;

fn chain(times: &[f64], outs: &[f64]) -> Instance {
    Instance::chain(
        "t",
        1.0,
        times
            .iter()
            .zip(outs)
            .enumerate()
            .map(|(i, (&t, &o))| Layer::new(format!("l{i}"), t / 3.0, 2.0 * t / 3.0, 1.0, o))
            .collect(),
    )
}

#[test]
fn balanced_straight_split() {
    let i = chain(&[3.0, 3.0, 3.0, 3.0], &[0.0; 4]);
    let p = partition(&i, &PipeDreamConfig::straight(2, 1.0)).unwrap();
    assert_eq!(p.objective, 6.0);
    assert_eq!(p.stages.len(), 2);
    assert_eq!((p.stages[0].first, p.stages[0].last), (1, 2));
    assert_eq!(p.processors_used, 2);
}

#[test]
fn transfers_count_twice_the_activation() {
    // Cutting after layer 1 costs 2 * 5 / 1 = 10 > 6 + 6: the only 2-stage cuts are
    // after layer 1 (10), 2 (2 a(2) = 0 -> max(6,6) = 6) or 3.
    let i = chain(&[3.0, 3.0, 3.0, 3.0], &[5.0, 0.0, 5.0, 0.0]);
    let p = partition(&i, &PipeDreamConfig::straight(2, 1.0)).unwrap();
    assert_eq!(p.objective, 6.0);
    let mut c = PipeDreamConfig::straight(2, 1.0);
    let i = chain(&[3.0, 3.0, 3.0, 3.0], &[5.0, 5.0, 5.0, 0.0]);
    let p = partition(&i, &c).unwrap();
    assert_eq!(p.objective, 10.0);
    c.activation_compression = None;
    assert_eq!(partition(&i, &c).unwrap().objective, 6.0);
}

#[test]
fn too_few_layers_for_a_straight_pipeline() {
    let i = chain(&[1.0, 1.0], &[0.0; 2]);
    let c = PipeDreamConfig::straight(3, 1.0);
    assert!(matches!(
        partition(&i, &c),
        Err(PipeDreamError::NoPartition(_))
    ));
    let mut c = c;
    c.fewer_machines = true;
    let p = partition(&i, &c).unwrap();
    assert_eq!(p.objective, 1.0);
    assert_eq!(p.processors_used, 2);
}

use crate::io::pipedream::{linearize, GraphNode};

fn node(id: usize, time: f64, activation: f64, weights: f64) -> GraphNode {
    GraphNode {
        id: format!("node{id}"),
        desc: format!("Op{id}"),
        fwd: time / 3.0,
        bwd: 2.0 * time / 3.0,
        activation,
        weights,
        line: 0,
    }
}

/// PipeDream's recurrence on a chain, written plainly (no pruning, one level), as the
/// oracle of the pruned program.
#[allow(clippy::needless_range_loop)]
fn reference(instance: &Instance, c: &PipeDreamConfig) -> f64 {
    let s = instance.sums();
    let n = instance.len();
    let Level {
        processors: nm,
        bandwidth: b,
    } = c.levels[0];
    let fits = |k: usize, l: usize, copies: usize| {
        c.memory
            .is_none_or(|m| copies as f64 * (s.stash(k, l) + s.weights(k, l)) <= m)
    };
    // a[l][m]: layers 1..=l on m + 1 machines.
    let mut a = vec![vec![f64::INFINITY; nm]; n + 1];
    for l in 1..=n {
        for m in 0..nm {
            let mut best = f64::INFINITY;
            if (!c.straight || m == 0) && fits(1, l, (nm - (m + 1)).div_ceil(m + 1)) {
                let mf = (m + 1) as f64;
                best = (s.u(1, l) + 4.0 * m as f64 * s.weights(1, l) / (b * mf)) / mf;
            }
            // As PipeDream's code: a one-layer range neither splits nor leaves
            // machines unused.
            if c.fewer_machines && m > 0 && l >= 2 {
                best = best.min(a[l][m - 1]);
            }
            for k in 1..l {
                for mp in 1..=(if c.straight { 1.min(m) } else { m }) {
                    if !fits(k + 1, l, (nm - (m + 1)).div_ceil(mp)) {
                        continue;
                    }
                    let mpf = mp as f64;
                    let stage =
                        (s.u(k + 1, l) + 4.0 * (mpf - 1.0) * s.weights(k + 1, l) / (b * mpf)) / mpf;
                    let mut t = a[k][m - mp].max(stage);
                    if let Some(r) = c.activation_compression {
                        t = t.max(2.0 * s.a(k) / (b * mpf) / r);
                        if l < n {
                            t = t.max(2.0 * s.a(l) / (b * mpf) / r);
                        }
                    }
                    best = best.min(t);
                }
            }
            a[l][m] = best;
        }
    }
    a[n][nm - 1]
}

/// A small deterministic generator for the random cases.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn pruned_program_equals_the_plain_recurrence_on_random_chains() {
    let mut rng = Lcg(7);
    for case in 0..300 {
        let n = 2 + (rng.next() * 14.0) as usize;
        let times: Vec<f64> = (0..n).map(|_| 0.1 + rng.next()).collect();
        let outs: Vec<f64> = (0..n).map(|_| rng.next() * 3.0).collect();
        let mut inst = chain(&times, &outs);
        for l in &mut inst.layers {
            l.weights = rng.next() * 2.0;
            l.stash = Some(rng.next());
        }
        let nm = 1 + (rng.next() * 6.0) as usize;
        let config = PipeDreamConfig {
            levels: vec![Level {
                processors: nm,
                bandwidth: 1.0 + rng.next() * 4.0,
            }],
            straight: rng.next() < 0.5,
            activation_compression: if rng.next() < 0.7 { Some(1.0) } else { None },
            memory: if rng.next() < 0.3 {
                Some(2.0 + rng.next() * 4.0)
            } else {
                None
            },
            fewer_machines: rng.next() < 0.5,
        };
        let want = reference(&inst, &config);
        let got = partition(&inst, &config).map(|p| p.objective);
        match got {
            Ok(t) => assert!(
                (t - want).abs() <= 1e-12 * want,
                "case {case}: pruned {t}, plain {want}, {config:?}"
            ),
            Err(e) => assert!(
                want.is_infinite(),
                "case {case}: plain {want}, {e}, {config:?} {inst:?}"
            ),
        }
    }
}

/// A random DAG: node `v` reads one to three earlier nodes (node 0 is the source, the
/// last node the only sink), random times, outputs and weights.
fn random_dag(rng: &mut Lcg, nodes: usize) -> Graph {
    let mut ns = Vec::new();
    let mut edges = Vec::new();
    for v in 0..nodes {
        ns.push(node(v, 0.1 + rng.next(), rng.next() * 2.0, rng.next()));
        if v > 0 {
            let reads = 1 + (rng.next() * 3.0) as usize;
            for _ in 0..reads {
                let u = (rng.next() * v as f64) as usize;
                edges.push((u, v));
            }
        }
    }
    // Every node but the last feeds a later one.
    for v in 0..nodes - 1 {
        if !edges.iter().any(|&(u, _)| u == v) {
            edges.push((v, v + 1 + (rng.next() * (nodes - v - 1) as f64) as usize));
        }
    }
    Graph::new("random", ns, edges).unwrap()
}

/// Every straight partition into exactly `p` stages along nested ideals, by brute force.
fn brute_force_straight(cuts: &IdealCuts, p: usize, b: f64) -> f64 {
    fn go(cuts: &IdealCuts, from: usize, left: usize, b: f64) -> f64 {
        let n = cuts.last_state();
        let send = |s: usize| {
            if s == 0 || s == n {
                0.0
            } else {
                2.0 * cuts.out(s) / b
            }
        };
        if left == 1 {
            return cuts.compute(from, n).max(send(from));
        }
        let mut best = f64::INFINITY;
        for to in from + 1..n {
            if cuts.nested(from, to) {
                let stage = cuts.compute(from, to).max(send(from)).max(send(to));
                best = best.min(stage.max(go(cuts, to, left - 1, b)));
            }
        }
        best
    }
    go(cuts, 0, p, b)
}

#[test]
fn on_a_dag_every_ideal_is_a_cut_and_the_chain_through_them_keeps_the_optimum() {
    let mut rng = Lcg(11);
    for case in 0..120 {
        let nodes = 3 + (rng.next() * 8.0) as usize;
        let g = random_dag(&mut rng, nodes);
        let cuts = IdealCuts::new(&g, MAX_IDEALS).unwrap();
        let p = 2 + (rng.next() * 2.0) as usize;
        let b = 1.0 + rng.next() * 3.0;
        let config = PipeDreamConfig::straight(p, b);
        let want = brute_force_straight(&cuts, p, b);
        let dag = solve(&cuts, &config).map(|(t, _)| t);
        let through = partition_graph(&g, "random", &config);
        let on_chain = partition(&linearize(&g, "random"), &config);
        match (dag, through) {
            (Ok(t), Ok(gp)) => {
                assert!(
                    (t - want).abs() <= 1e-12 * want,
                    "case {case}: {t} vs {want}"
                );
                let chain_t = gp.partition.objective;
                assert!(
                    (chain_t - want).abs() <= 1e-12 * want,
                    "case {case}: chain through the ideals {chain_t}, optimum {want}"
                );
                if let Ok(c) = on_chain {
                    assert!(c.objective >= want * (1.0 - 1e-12), "case {case}");
                }
            }
            (Err(_), Err(_)) => assert!(want.is_infinite(), "case {case}: {want}"),
            (d, t) => panic!(
                "case {case}: {d:?} / {:?}, optimum {want}",
                t.map(|x| x.partition.objective)
            ),
        }
    }
}

#[test]
fn on_a_path_the_ideals_give_the_chains_program_at_every_level() {
    // A path DAG has exactly the chain's prefixes as ideals: the program over them
    // (each split tested) and over the chain (splits found by bisection) must agree,
    // hierarchical machines and memory included.
    let mut rng = Lcg(5);
    for case in 0..150 {
        let n = 2 + (rng.next() * 12.0) as usize;
        let ns: Vec<GraphNode> = (0..n)
            .map(|v| node(v, 0.1 + rng.next(), rng.next() * 2.0, rng.next()))
            .collect();
        let g = Graph::new("path", ns, (1..n).map(|v| (v - 1, v)).collect()).unwrap();
        let cuts = IdealCuts::new(&g, MAX_IDEALS).unwrap();
        assert_eq!(cuts.last_state(), n, "case {case}");
        let inst = linearize(&g, "path");
        let sums = inst.sums();
        let levels = (0..1 + (rng.next() * 2.5) as usize)
            .map(|_| Level {
                processors: 1 + (rng.next() * 4.0) as usize,
                bandwidth: 0.5 + rng.next() * 4.0,
            })
            .collect();
        let config = PipeDreamConfig {
            levels,
            straight: rng.next() < 0.3,
            activation_compression: if rng.next() < 0.6 { Some(1.0) } else { None },
            memory: None,
            fewer_machines: rng.next() < 0.5,
        };
        let on_ideals = solve(&cuts, &config);
        let on_chain = solve(&ChainCuts(&sums), &config);
        let unpruned = solve_pruned(&ChainCuts(&sums), &config, false, None);
        match (on_ideals, on_chain, unpruned) {
            (Ok(a), Ok(b), Ok(c)) => {
                assert!(
                    (a.0 - b.0).abs() <= 1e-12 * b.0,
                    "case {case}: {a:?} vs {b:?}"
                );
                // Pruning changes nothing, not even which of equal splits is taken.
                assert_eq!(b, c, "case {case}: pruned vs unpruned, {config:?}");
            }
            (Err(_), Err(_), Err(_)) => {}
            (a, b, c) => panic!("case {case}: {a:?} / {b:?} / {c:?}"),
        }
    }
}

#[test]
fn a_diagonal_cut_through_a_residual_block_beats_every_prefix() {
    // a -> m1 -> m2 -> m3 -> add, a -> s1 -> add (the shortcut): the halves of the
    // 8 units of work are {a, m1, s1} and {m2, m3, add}, a cut no order's prefix
    // holds when the main branch comes first.
    let ns = vec![
        node(1, 1.0, 0.0, 0.0),
        node(2, 2.0, 0.0, 0.0),
        node(3, 2.0, 0.0, 0.0),
        node(4, 2.0, 0.0, 0.0),
        node(5, 1.0, 0.0, 0.0),
        node(6, 0.0, 0.0, 0.0),
    ];
    let g = Graph::new(
        "block",
        ns,
        vec![(0, 1), (1, 2), (2, 3), (3, 5), (0, 4), (4, 5)],
    )
    .unwrap();
    let config = PipeDreamConfig::straight(2, 1.0);
    let on_chain = partition(&linearize(&g, "block"), &config).unwrap();
    assert_eq!(on_chain.objective, 5.0);
    let through = partition_graph(&g, "block", &config).unwrap();
    assert_eq!(through.partition.objective, 4.0);
    assert_eq!(through.searched, CutsSearched::Ideals { states: 10 });
    assert_eq!(
        through.linearization.instance.meta["order"],
        "through the chosen ideals"
    );
    // A cap below the ideals' count falls back to the chain.
    assert!(IdealCuts::new(&g, 9).is_none());
}

#[test]
fn bad_config_names_the_flag() {
    let i = chain(&[1.0], &[0.0]);
    let mut c = PipeDreamConfig::straight(0, 1.0);
    match partition(&i, &c) {
        Err(PipeDreamError::Config(e)) => assert_eq!(e.source, "--processors"),
        other => panic!("{other:?}"),
    }
    c = PipeDreamConfig::straight(1, -1.0);
    match partition(&i, &c) {
        Err(PipeDreamError::Config(e)) => assert_eq!(e.source, "--bandwidth"),
        other => panic!("{other:?}"),
    }
}
