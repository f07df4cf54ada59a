//! Tests of the PipeDream profile reader and linearizer.

use super::*;

fn g(text: &str) -> Result<Graph, InputError> {
    Graph::parse(text, "t.txt")
}

const DIAMOND: &str = "node1 -- Input -- forward_compute_time=1.0, backward_compute_time=0.000, activation_size=100.0, parameter_size=0.000
node2 -- Conv -- forward_compute_time=2.0, backward_compute_time=3.0, activation_size=10.0, parameter_size=5.0
node3 -- Relu -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=20.0, parameter_size=0.0
node4 -- Add -- forward_compute_time=1.0, backward_compute_time=1.0, activation_size=7.0, parameter_size=0.0
\tnode1 -- node2
\tnode1 -- node3
\tnode2 -- node4
\tnode3 -- node4
";

#[test]
fn diamond_crossings_and_grouping() {
    let graph = g(DIAMOND).unwrap();
    let lin = linearize_detailed(&graph, "d");
    let inst = &lin.instance;
    // The Input source is zeroed (PipeDream's rule), hence free, and joins the first
    // layer. node3 is free: the cuts before and after it are equivalent; before it
    // 100+10 crosses (node1 feeds node3, node2 feeds node4), after it 10+20: the latter
    // is kept.
    let names: Vec<&str> = inst.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["node1+node2+node3: Input | Conv | Relu", "node4: Add"]
    );
    assert_eq!(inst.layers[0].out, 30.0);
    assert_eq!(inst.layers[1].out, 7.0);
    assert_eq!(inst.layers[0].stash, Some(100.0));
    assert_eq!(inst.layers[1].stash, Some(30.0));
    assert_eq!(inst.input, 100.0);
    // Input's 1 ms of data loading is not counted: 2 ms forward, 3 ms backward.
    assert!((inst.layers[0].fwd - 0.002).abs() < 1e-15);
    assert!((inst.layers[0].bwd - 0.003).abs() < 1e-15);
}

#[test]
fn only_input_sources_are_zeroed() {
    // A source not called Input keeps its time; so does an `Input...` node with a
    // predecessor (not a source).
    let text = DIAMOND
        .replace("node1 -- Input --", "node1 -- Embedding --")
        .replace("node4 -- Add --", "node4 -- InputLike --");
    let inst = linearize(&g(&text).unwrap(), "d");
    let fwd: f64 = inst.layers.iter().map(|l| l.fwd).sum();
    assert!((fwd - 0.004).abs() < 1e-15, "{fwd}");
}

#[test]
fn errors_name_line_and_field() {
    let e = g("node1 -- X -- forward_compute_time=abc, backward_compute_time=0, activation_size=1, parameter_size=0\n").unwrap_err();
    assert_eq!(e.field, "line 1: forward_compute_time");
    assert!(e.reason.contains("not a number"), "{e}");
    let e = g(
        "node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=[1; 2\n",
    )
    .unwrap_err();
    assert!(e.field.starts_with("line 1:"), "{e}");
    assert!(g("   \n").unwrap_err().reason.contains("empty"));
}
