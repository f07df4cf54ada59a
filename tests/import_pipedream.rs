//! The PipeDream importer on every real profile, on bad inputs, and on random DAGs.

use crate::support::pipeopt;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use pipeopt::io::{
    import_pipedream, import_summary, linearize_detailed, read_graph, Graph, GraphNode,
};
use proptest::prelude::*;

fn shared() -> PathBuf {
    let here = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    if here.exists() {
        here.to_path_buf()
    } else {
        PathBuf::from("/work/shared")
    }
}

fn profiles() -> Vec<PathBuf> {
    let dir = shared().join("pipedream-profiles");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    v.sort();
    v
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
}

/// Raw node values and edges read straight from the text, independently of the importer.
struct Raw {
    ids: Vec<String>,
    fwd_ms: HashMap<String, f64>,
    bwd_ms: HashMap<String, f64>,
    act: HashMap<String, f64>,
    par: HashMap<String, f64>,
    edges: Vec<(String, String)>,
}

fn raw(path: &Path) -> Raw {
    let text = std::fs::read_to_string(path).unwrap();
    let mut r = Raw {
        ids: vec![],
        fwd_ms: HashMap::new(),
        bwd_ms: HashMap::new(),
        act: HashMap::new(),
        par: HashMap::new(),
        edges: vec![],
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with('\t') {
            let (a, b) = line.trim().split_once(" -- ").unwrap();
            r.edges.push((a.to_string(), b.to_string()));
            continue;
        }
        let id = line.split(" -- ").next().unwrap().to_string();
        let values = line.rsplit(" -- ").next().unwrap();
        for kv in values.split(", ") {
            let (k, v) = kv.split_once('=').unwrap();
            let x: f64 = v
                .trim_matches(|c| c == '[' || c == ']')
                .split("; ")
                .map(|s| s.parse::<f64>().unwrap())
                .sum();
            let map = match k {
                "forward_compute_time" => &mut r.fwd_ms,
                "backward_compute_time" => &mut r.bwd_ms,
                "activation_size" => &mut r.act,
                "parameter_size" => &mut r.par,
                _ => panic!("unknown key {k}"),
            };
            map.insert(id.clone(), x);
        }
        r.ids.push(id);
    }
    r
}

#[test]
fn every_profile_imports_with_the_dags_sums() {
    let files = profiles();
    assert!(
        files.len() >= 6,
        "expected the six profiles, found {files:?}"
    );
    for path in files {
        let inst = import_pipedream(&path, None).unwrap_or_else(|e| panic!("{e}"));
        let r = raw(&path);
        // PipeDream's rule, which the importer follows: data-loading `Input` sources do
        // no training work (their times and sizes are zeroed).
        let graph = read_graph(&path).unwrap();
        let inputs: HashSet<&str> = (0..graph.nodes().len())
            .filter(|&v| graph.is_data_input(v))
            .map(|v| graph.nodes()[v].id.as_str())
            .collect();
        assert!(!inputs.is_empty(), "{}: no Input node", path.display());
        let sum = |m: &HashMap<String, f64>| {
            m.iter()
                .filter(|(id, _)| !inputs.contains(id.as_str()))
                .map(|(_, v)| v)
                .sum::<f64>()
        };
        let f: f64 = inst.layers.iter().map(|l| l.fwd).sum();
        let b: f64 = inst.layers.iter().map(|l| l.bwd).sum();
        let w: f64 = inst.layers.iter().map(|l| l.weights).sum();
        let name = path.display();
        assert!(close(f, sum(&r.fwd_ms) / 1000.0), "{name}: fwd {f}");
        assert!(close(b, sum(&r.bwd_ms) / 1000.0), "{name}: bwd {b}");
        assert!(close(w, sum(&r.par)), "{name}: weights {w}");
        assert!(inst.check().is_ok());
        assert!(inst.len() > 1 && inst.len() <= r.ids.len(), "{name}");
        assert_eq!(inst.meta["format"], "pipedream graph.txt");
        // Batch and image as the profile's own sizes say (the classifier's output and the
        // input), nothing for GNMT.
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let want = match stem {
            "densenet121" | "resnet101" => Some((64, 224)),
            "inception_v3" => Some((128, 299)),
            "resnet50" | "vgg16" => Some((128, 224)),
            _ => None,
        };
        match want {
            Some((batch, image)) => {
                assert_eq!(inst.meta["batch"], batch, "{name}");
                assert_eq!(inst.meta["image"], image, "{name}");
            }
            None => {
                assert!(inst.meta.get("batch").is_none(), "{name}");
                assert!(inst.meta.get("image").is_none(), "{name}");
            }
        }
        let summary = import_summary(&inst, Path::new("out.json"));
        assert_eq!(summary["layers"], inst.len());
        assert!(close(summary["weights"].as_f64().unwrap(), sum(&r.par)));
        // Every node appears in exactly one layer name.
        let mut seen = HashSet::new();
        for l in &inst.layers {
            let ids = l.name.split(": ").next().unwrap();
            for id in ids.split('+') {
                assert!(seen.insert(id.to_string()), "{name}: {id} twice");
            }
        }
        assert_eq!(seen.len(), r.ids.len(), "{name}");
    }
}

/// Crossing size of the cut between `before` and the rest, straight from the edge list.
fn crossing(r: &Raw, before: &HashSet<&str>) -> f64 {
    let mut producers = HashSet::new();
    for (a, b) in &r.edges {
        if before.contains(a.as_str()) && !before.contains(b.as_str()) {
            producers.insert(a.as_str());
        }
    }
    producers.iter().map(|p| r.act[*p]).sum()
}

#[test]
fn outs_equal_independent_crossings_and_order_is_topological() {
    for path in profiles() {
        let graph = read_graph(&path).unwrap();
        let lin = linearize_detailed(&graph, "x");
        let r = raw(&path);
        let name = path.display();
        let ids: Vec<&str> = lin
            .order
            .iter()
            .map(|&v| graph.nodes()[v].id.as_str())
            .collect();
        // Topological: every edge goes forward in the order.
        let pos: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        assert_eq!(pos.len(), r.ids.len());
        for (a, b) in &r.edges {
            assert!(pos[a.as_str()] < pos[b.as_str()], "{name}: {a} -> {b}");
        }
        // Every cut between chain layers.
        let inst = &lin.instance;
        for l in 1..inst.len() {
            let before: HashSet<&str> = ids[..lin.bounds[l]].iter().copied().collect();
            let want = crossing(&r, &before);
            assert!(
                close(inst.layers[l - 1].out, want),
                "{name}: layer {l}: out {} vs {want}",
                inst.layers[l - 1].out
            );
        }
        // Stash of each layer: the distinct tensors its nodes consume.
        for l in 1..=inst.len() {
            let members: HashSet<&str> = ids[lin.bounds[l - 1]..lin.bounds[l]]
                .iter()
                .copied()
                .collect();
            let inputs: HashSet<&str> = r
                .edges
                .iter()
                .filter(|(_, b)| members.contains(b.as_str()))
                .map(|(a, _)| a.as_str())
                .collect();
            let want: f64 = inputs.iter().map(|a| r.act[*a]).sum();
            assert!(close(inst.stash(l), want), "{name}: stash of layer {l}");
        }
    }
}

#[test]
fn grouping_only_merges_free_nodes() {
    for path in profiles() {
        let graph = read_graph(&path).unwrap();
        let lin = linearize_detailed(&graph, "x");
        for w in lin.bounds.windows(2) {
            let costly = lin.order[w[0]..w[1]]
                .iter()
                .filter(|&&v| {
                    let n = &graph.nodes()[v];
                    !graph.is_data_input(v) && n.fwd + n.bwd + n.weights > 0.0
                })
                .count();
            assert!(
                costly <= 1,
                "{}: a layer holds {costly} costly nodes",
                path.display()
            );
        }
    }
}

const GOOD: &str = "node1 -- Input -- forward_compute_time=1.000, backward_compute_time=0.000, activation_size=8.0, parameter_size=0.000\n\
node2 -- Linear(a -- b) -- forward_compute_time=2.000, backward_compute_time=3.000, activation_size=4.0, parameter_size=16.000\n\
\tnode1 -- node2\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn description_may_contain_the_separator() {
    let dir = tempfile::tempdir().unwrap();
    let inst = import_pipedream(&write(dir.path(), "g.txt", GOOD), Some("g")).unwrap();
    // The Input node is free (PipeDream's rule) and joins the first layer.
    assert_eq!(inst.layers[0].name, "node1+node2: Input | Linear(a -- b)");
    assert_eq!(inst.layers[0].weights, 16.0);
}

#[test]
fn bad_inputs_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty.txt", String::new(), ""),
        ("blank.txt", "\n \n".into(), ""),
        (
            "nan.txt",
            GOOD.replace("activation_size=4.0", "activation_size=NaN"),
            "line 2: activation_size",
        ),
        (
            "neg.txt",
            GOOD.replace("backward_compute_time=3.000", "backward_compute_time=-3"),
            "line 2: backward_compute_time",
        ),
        (
            "word.txt",
            GOOD.replace("forward_compute_time=2.000", "forward_compute_time=abc"),
            "line 2: forward_compute_time",
        ),
        (
            "truncated.txt",
            GOOD.replace(", parameter_size=16.000", ""),
            "line 2: parameter_size",
        ),
        (
            "cut.txt",
            GOOD.replace(
                " -- forward_compute_time=2.000, backward_compute_time=3.000, activation_size=4.0, parameter_size=16.000",
                " -- forward_compute_ti",
            ),
            "line 2:",
        ),
        (
            "unknown.txt",
            format!("{GOOD}\tnode2 -- node9\n"),
            "line 4: edge",
        ),
        (
            "cycle.txt",
            format!("{GOOD}\tnode2 -- node1\n"),
            "line 1: node1",
        ),
        (
            "dup.txt",
            format!("{GOOD}{}\n", GOOD.lines().next().unwrap()),
            "line 4: node",
        ),
        ("edges_only.txt", "\tnode1 -- node2\n".into(), ""),
    ];
    for (file, text, field) in cases {
        let path = write(dir.path(), file, &text);
        let e = import_pipedream(&path, None).expect_err(file);
        assert!(e.source.ends_with(file), "{file}: {e}");
        assert!(
            e.field.starts_with(field),
            "{file}: field {:?}: {e}",
            e.field
        );
        assert!(!e.reason.is_empty());
    }
    // A DAG whose nodes all take zero time is not a usable instance.
    let zero = GOOD
        .replace("forward_compute_time=1.000", "forward_compute_time=0")
        .replace("forward_compute_time=2.000", "forward_compute_time=0")
        .replace("backward_compute_time=3.000", "backward_compute_time=0");
    let e = import_pipedream(&write(dir.path(), "zero.txt", &zero), None).unwrap_err();
    assert!(e.source.ends_with("zero.txt"), "{e}");
    let e = import_pipedream(&dir.path().join("missing.txt"), None).unwrap_err();
    assert!(e.source.ends_with("missing.txt"));
}

/// A random DAG: edges only from lower to higher index (shuffled ids make the file order
/// differ from a topological one); some nodes free.
fn random_dag() -> impl Strategy<Value = Graph> {
    (2usize..40).prop_flat_map(|n| {
        (
            proptest::collection::vec(
                (0u8..4, 0.0f64..5.0, 0.0f64..5.0, 0.0f64..1e6, 0.0f64..1e3),
                n,
            ),
            proptest::collection::vec((0..n, 0..n), 0..3 * n),
            Just(n).prop_perm(),
        )
            .prop_map(move |(vals, pairs, perm)| {
                let nodes: Vec<GraphNode> = vals
                    .iter()
                    .enumerate()
                    .map(|(i, &(kind, f, b, a, w))| {
                        let free = kind == 0;
                        GraphNode {
                            id: format!("node{}", perm[i] + 1),
                            desc: format!("n{i}"),
                            fwd: if free { 0.0 } else { f },
                            bwd: if free { 0.0 } else { b },
                            activation: a.floor(),
                            weights: if free { 0.0 } else { w.floor() },
                            line: 0,
                        }
                    })
                    .collect();
                let edges: Vec<(usize, usize)> = pairs.into_iter().filter(|(a, b)| a < b).collect();
                Graph::new("random", nodes, edges).expect("acyclic by construction")
            })
    })
}

trait Perm {
    fn prop_perm(self) -> BoxedStrategy<Vec<usize>>;
}
impl Perm for Just<usize> {
    fn prop_perm(self) -> BoxedStrategy<Vec<usize>> {
        let n = self.0;
        Just((0..n).collect::<Vec<usize>>()).prop_shuffle().boxed()
    }
}

proptest! {
    #[test]
    fn random_dags_keep_sums_and_topological_order(graph in random_dag()) {
        let lin = linearize_detailed(&graph, "r");
        let nodes = graph.nodes();
        let inst = &lin.instance;
        let sum = |f: &dyn Fn(&GraphNode) -> f64| nodes.iter().map(f).sum::<f64>();
        let lay = |f: &dyn Fn(&pipeopt::model::Layer) -> f64| inst.layers.iter().map(f).sum::<f64>();
        let tol = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) + 1e-300;
        prop_assert!(tol(sum(&|n| n.fwd), lay(&|l| l.fwd)));
        prop_assert!(tol(sum(&|n| n.bwd), lay(&|l| l.bwd)));
        prop_assert!(tol(sum(&|n| n.weights), lay(&|l| l.weights)));
        // A permutation of the nodes, topological.
        let mut pos = vec![usize::MAX; nodes.len()];
        for (p, &v) in lin.order.iter().enumerate() {
            prop_assert_eq!(pos[v], usize::MAX);
            pos[v] = p;
        }
        prop_assert!(pos.iter().all(|&p| p < nodes.len()));
        for &(a, b) in graph.edges() {
            prop_assert!(pos[a] < pos[b]);
        }
        // Layers tile the order; each out equals the crossing computed from the edges.
        prop_assert_eq!(lin.bounds[0], 0);
        prop_assert_eq!(*lin.bounds.last().unwrap(), nodes.len());
        prop_assert_eq!(lin.bounds.len(), inst.len() + 1);
        for l in 1..inst.len() {
            let cut = lin.bounds[l];
            let producers: HashSet<usize> = graph
                .edges()
                .iter()
                .filter(|&&(a, b)| pos[a] < cut && pos[b] >= cut)
                .map(|&(a, _)| a)
                .collect();
            let want: f64 = producers.iter().map(|&a| nodes[a].activation).sum();
            prop_assert!(tol(inst.layers[l - 1].out, want), "layer {}: {} vs {}", l, inst.layers[l - 1].out, want);
        }
    }
}

/// A profile cut short or missing edges still parses; the import must refuse it, naming
/// the node, unless `--accept-incomplete` says the user means it.
#[test]
fn damaged_profiles_are_refused_naming_the_node() {
    let text = std::fs::read_to_string(shared().join("pipedream-profiles/resnet50.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let edges: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with('\t'))
        .collect();
    let keep = |skip: &dyn Fn(usize) -> bool| {
        let mut t = String::new();
        for (i, l) in lines.iter().enumerate() {
            if !skip(i) {
                t.push_str(l);
                t.push('\n');
            }
        }
        t
    };
    // The chain's first edge (Input -> conv1) and an edge out of a block's last BatchNorm
    // into its Add.
    let first = edges
        .iter()
        .copied()
        .find(|&i| lines[i].trim() == "node1 -- node2")
        .unwrap();
    let into_add = edges
        .iter()
        .copied()
        .find(|&i| lines[i].trim() == "node77 -- node78")
        .expect("resnet50's node77 (BatchNorm2d) feeds node78 (Add)");
    let cases: Vec<(&str, String, &str)> = vec![
        ("cut.txt", keep(&|i| i >= 300), "node"),
        (
            "no-edges.txt",
            keep(&|i| lines[i].starts_with('\t')),
            "edges cannot connect",
        ),
        ("first-edge.txt", keep(&|i| i == first), "node1"),
        ("add-edge.txt", keep(&|i| i == into_add), "node77"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (file, text, says) in cases {
        let path = write(dir.path(), file, &text);
        let out = dir.path().join(format!("{file}.json"));
        pipeopt()
            .args(["import", "pipedream"])
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(file))
            .stderr(predicates::str::contains(says));
        assert!(!out.exists(), "{file}: an instance was written");
        pipeopt()
            .args(["import", "pipedream", "--accept-incomplete"])
            .arg(&path)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        assert!(out.exists(), "{file}");
    }
    // The whole file imports without the flag.
    let whole = write(dir.path(), "whole.txt", &text);
    pipeopt()
        .args(["import", "pipedream"])
        .arg(&whole)
        .arg("--out")
        .arg(dir.path().join("whole.json"))
        .assert()
        .success();
}
