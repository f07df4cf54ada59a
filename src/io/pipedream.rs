//! PipeDream's `graph.txt` profiles, read and linearized into a chain (docs/model.md
//! section 1).
//!
//! Source: Narayanan et al., "PipeDream: Generalized Pipeline Parallelism for DNN Training"
//! (SOSP 2019), section 3.1, and the profile format of its repository (msr-fiddle/pipedream,
//! `profiler/*/profiles/*/graph.txt`, described in `shared/pipedream-profiles/README.md`).
//!
//! # Format
//! A node line `nodeN -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//! activation_size=<bytes>, parameter_size=<bytes>` and a (whitespace-indented) edge line
//! `nodeA -- nodeB`: the output of A feeds B. The description is what lies between the first
//! and the last ` -- ` of the line, so it may itself contain ` -- `. An `activation_size`
//! may be a list `[a; b; c]` (a node with several output tensors, GNMT's LSTMs): as PipeDream
//! does, its size is the sum. Times are converted from milliseconds to seconds; sizes stay in
//! bytes.
//!
//! # Linearization (where we depart from PipeDream)
//! PipeDream's optimizer partitions the DAG over its *antichains*, whose number explodes on
//! branching networks (its optimizer runs out of 24 GiB on inception_v3). We instead fix one
//! topological order and cut only between consecutive nodes of it, as MadPipe does (PipeDream's
//! own program can also run over every *ideal* of the DAG, its diagonal cuts included, and
//! then linearize along an order through the cuts it chose: [`Graph::ideals`],
//! [`order_through`], `crate::partition::pipedream::partition_graph`):
//! - **Order.** Two deterministic candidates are built with Kahn's algorithm, ties broken by
//!   node number (`nodeN` → N, then file order): (a) *by id*, a min-heap on the node number,
//!   PipeDream's own numbering (roughly the profiler's execution order); (b) *branch first*, a
//!   LIFO stack, so the newest ready node runs next and a branch is finished before its
//!   sibling starts (depth-first). The one with the smaller sum of crossing sizes over all
//!   cuts is kept (ties: by id): fewer bytes live at a cut means cheaper cuts and buffers.
//!   The chosen order is recorded in `meta.order`.
//! - **Crossing size.** The cut after position `i` is crossed by the output of every node at
//!   or before `i` that some node after `i` consumes, each tensor counted once however many
//!   consumers it has. A chain layer's `out` is the crossing size of the cut after it. For
//!   the last layer there is no cut: its `out` is the size of the outputs of the DAG's sinks
//!   inside it (what leaves the network). Outputs of sinks elsewhere (inception_v3's
//!   auxiliary head) cross no cut.
//! - **Grouping.** Two cuts are *equivalent* when only nodes with zero forward time, zero
//!   backward time and zero weights lie between them (`__getitem__`, free `Add`s, inplace
//!   ops profiled at 0): they split time and weights identically, so only the one with the
//!   smallest crossing size is kept (ties: the earliest). A run of such nodes at the start
//!   or end of the order joins its neighbour, since a stage made of them alone would do no
//!   work. Every other cut is kept, so a chain layer is one node or one node plus free
//!   neighbours. This changes which stage stashes a free node's inputs, never times or
//!   weights.
//! - **Stash.** A `graph.txt` does not say what a node keeps for its backward. Each chain
//!   layer's `stash` is then set explicitly to the size of the distinct tensors its nodes
//!   take as input (from inside or outside the layer), as docs/model.md asks, and stashes
//!   add up across layers. A graph that knows what each node saves ([`Graph::with_memory`]:
//!   the op DAGs of `crate::nets`) gets the exact rule instead: a stage keeps a tensor (a
//!   storage: views and in-place outputs are their input's) once when one of its nodes saves
//!   it or when it reads it from an earlier stage, plus the nodes' extra bytes (statistics,
//!   indices). Each layer's `stash` is what it keeps alone; what several layers keep is
//!   written as pairs, `stash_overlap` for consecutive layers and `stash_shared` for the
//!   others (a residual block's input, kept by its first convolution and by the shortcut),
//!   so that `ChainSums::stash` of every stage is exact (see `exact_stashes`).
//! - **Checks** ([`Graph::check_complete`], on by default in `import pipedream`): a file
//!   cut at a line boundary still parses, into a DAG with extra sources and dead ends; such
//!   a DAG is refused, naming the node, unless `--accept-incomplete`.
//! - **Batch and image** ([`input_shape`]): read from the sizes of the classifier's output
//!   and of the input when both agree; nothing otherwise (GNMT).
//! - **Input.** PipeDream's `Input` nodes (sources whose description starts with `Input`)
//!   carry a profiled forward time, which is data loading, not training work. PipeDream's
//!   optimizer zeroes their times and sizes before partitioning ("the optimizer shouldn't
//!   really get a choice with where to place the input"), and so do we: an `Input` source
//!   gets fwd = bwd = weights = 0, hence is free and joins the first chain layer. Every
//!   other sum (fwd, bwd, weights) stays the DAG's. (Before this rule our first stage
//!   carried e.g. 9.1 ms of densenet121's data loading and our objective was 2-4% above
//!   PipeDream's; see `results/pipedream-agreement.md`.) The node's output still counts as
//!   an input to stash for the layers that read it. The instance's `input`, a(0), is the
//!   total activation size of the DAG's sources (the network input as `Input` emits it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::error::InputError;
use crate::model::{Instance, Layer};
use crate::units::{Bytes, Seconds};

/// The format name recorded in `meta.format`.
pub const FORMAT: &str = "pipedream graph.txt";

/// One node of a PipeDream profile.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphNode {
    /// `nodeN`.
    pub id: String,
    /// The layer description, e.g. `Conv2d(3, 64, ...)`.
    pub desc: String,
    /// Forward time in seconds.
    pub fwd: Seconds,
    /// Backward time in seconds.
    pub bwd: Seconds,
    /// Bytes of the node's output (sum over its output tensors).
    pub activation: Bytes,
    /// Bytes of parameters.
    pub weights: Bytes,
    /// The 1-based line of the file the node was defined on (0 when built in code).
    pub line: usize,
}

impl GraphNode {
    fn is_free(&self) -> bool {
        self.fwd == 0.0 && self.bwd == 0.0 && self.weights == 0.0
    }
}

/// A checked profile DAG: values finite and non-negative, edges between known nodes,
/// no duplicate edge, no cycle.
#[derive(Debug, Clone)]
pub struct Graph {
    source: String,
    nodes: Vec<GraphNode>,
    edges: Vec<(usize, usize)>,
    succ: Vec<Vec<usize>>,
    pred: Vec<Vec<usize>>,
    /// What each node keeps for its backward, when known ([`Graph::with_memory`]).
    memory: Option<Vec<NodeMemory>>,
}

/// What one node keeps from its forward to its backward pass, for graphs that know it (the
/// networks of `crate::nets`; a `graph.txt` does not say). Indices are node indices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeMemory {
    /// Nodes whose output this node saves (its predecessors, or itself: a ReLU keeps its
    /// output).
    pub saves: Vec<usize>,
    /// Bytes saved beyond those tensors (normalization statistics, pooling indices, masks).
    pub extra: Bytes,
    /// The predecessor whose output's storage this node's output is: a view (flatten) or an
    /// in-place op (ReLU) writes no new tensor.
    pub alias_of: Option<usize>,
}

impl Graph {
    /// Builds a graph from nodes and edges `(from, to)` (indices into `nodes`); duplicate
    /// edges are dropped. Errors name `source` and the field at fault.
    pub fn new(
        source: impl Into<String>,
        nodes: Vec<GraphNode>,
        edges: Vec<(usize, usize)>,
    ) -> Result<Graph, InputError> {
        let source = source.into();
        if nodes.is_empty() {
            return Err(InputError::new(source, "", "the graph has no node"));
        }
        for (i, n) in nodes.iter().enumerate() {
            let at = |f: &str| {
                if n.line > 0 {
                    format!("line {}: {f}", n.line)
                } else {
                    format!("nodes[{i}].{f}")
                }
            };
            for (f, v) in [
                ("forward_compute_time", n.fwd),
                ("backward_compute_time", n.bwd),
                ("activation_size", n.activation),
                ("parameter_size", n.weights),
            ] {
                check_value(v).map_err(|r| InputError::new(source.clone(), at(f), r))?;
            }
        }
        let mut succ = vec![Vec::new(); nodes.len()];
        let mut pred = vec![Vec::new(); nodes.len()];
        let mut kept = Vec::with_capacity(edges.len());
        for (k, &(a, b)) in edges.iter().enumerate() {
            if a >= nodes.len() || b >= nodes.len() {
                return Err(InputError::new(
                    source,
                    format!("edges[{k}]"),
                    format!("edge ({a}, {b}) names a node that does not exist"),
                ));
            }
            if !succ[a].contains(&b) {
                succ[a].push(b);
                pred[b].push(a);
                kept.push((a, b));
            }
        }
        let graph = Graph {
            source,
            nodes,
            edges: kept,
            succ,
            pred,
            memory: None,
        };
        if let Err(stuck) = graph.kahn(false) {
            let n = &graph.nodes[stuck];
            let field = if n.line > 0 {
                format!("line {}: {}", n.line, n.id)
            } else {
                format!("nodes[{stuck}]")
            };
            return Err(InputError::new(
                graph.source,
                field,
                format!("node {} is on a cycle of edges", n.id),
            ));
        }
        Ok(graph)
    }

    /// This graph with what each node keeps for its backward (one entry per node), which
    /// makes the linearization's stashes exact (module doc, "Stash"). A node may save only
    /// its predecessors' outputs or its own, and alias only a predecessor's.
    pub fn with_memory(mut self, memory: Vec<NodeMemory>) -> Result<Graph, InputError> {
        if memory.len() != self.nodes.len() {
            return Err(InputError::new(
                self.source,
                "memory",
                format!("{} entries for {} nodes", memory.len(), self.nodes.len()),
            ));
        }
        for (v, m) in memory.iter().enumerate() {
            let bad = m
                .saves
                .iter()
                .any(|&u| u != v && !self.pred[v].contains(&u))
                || m.alias_of.is_some_and(|u| !self.pred[v].contains(&u))
                || !(m.extra.is_finite() && m.extra >= 0.0);
            if bad {
                return Err(InputError::new(
                    self.source,
                    format!("memory[{v}]"),
                    format!(
                        "node {} saves or aliases a tensor that is not its input or output, \
                         or its extra bytes are not a size",
                        self.nodes[v].id
                    ),
                ));
            }
        }
        self.memory = Some(memory);
        Ok(self)
    }

    /// Parses the text of a `graph.txt`; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Graph, InputError> {
        if text.trim().is_empty() {
            return Err(InputError::new(source, "", "the file is empty"));
        }
        let mut nodes: Vec<GraphNode> = Vec::new();
        let mut index: std::collections::HashMap<String, usize> = Default::default();
        let mut raw_edges: Vec<(usize, String, String)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim_end();
            if line.trim().is_empty() {
                continue;
            }
            let err = |field: &str, reason: String| {
                InputError::new(source, format!("line {line_no}: {field}"), reason)
            };
            if line.starts_with(char::is_whitespace) {
                let body = line.trim();
                let parts: Vec<&str> = body.split(" -- ").collect();
                if parts.len() != 2 || parts.iter().any(|p| p.trim().is_empty()) {
                    return Err(err(
                        "edge",
                        format!("{body:?} is not an edge `nodeA -- nodeB`"),
                    ));
                }
                raw_edges.push((
                    line_no,
                    parts[0].trim().to_string(),
                    parts[1].trim().to_string(),
                ));
                continue;
            }
            let Some((id, rest)) = line.split_once(" -- ") else {
                return Err(err(
                    "node",
                    format!("{line:?} is not a node line `nodeN -- <description> -- <values>`"),
                ));
            };
            let id = id.trim();
            if id.is_empty() || id.contains(char::is_whitespace) {
                return Err(err("node", format!("{id:?} is not a node name")));
            }
            let Some((desc, values)) = rest.rsplit_once(" -- ") else {
                return Err(err(
                    "node",
                    format!("node {id} has no ` -- ` before its values (truncated line?)"),
                ));
            };
            let mut fields: [Option<f64>; 4] = [None; 4];
            for item in values.split(',') {
                let item = item.trim();
                let Some((key, value)) = item.split_once('=') else {
                    return Err(err(
                        "values",
                        format!("{item:?} is not `key=value` (truncated line?)"),
                    ));
                };
                let key = key.trim();
                let slot = match key {
                    "forward_compute_time" => 0,
                    "backward_compute_time" => 1,
                    "activation_size" => 2,
                    "parameter_size" => 3,
                    _ => return Err(err(key, "is not a known field".to_string())),
                };
                if fields[slot].is_some() {
                    return Err(err(key, "is given twice".to_string()));
                }
                let v = parse_value(value.trim(), slot == 2).map_err(|r| err(key, r))?;
                fields[slot] = Some(v);
            }
            let names = [
                "forward_compute_time",
                "backward_compute_time",
                "activation_size",
                "parameter_size",
            ];
            let mut got = [0.0; 4];
            for k in 0..4 {
                got[k] = fields[k]
                    .ok_or_else(|| err(names[k], "is missing (truncated line?)".to_string()))?;
            }
            if let Some(&first) = index.get(id) {
                return Err(err(
                    "node",
                    format!(
                        "node {id} is defined twice (first on line {})",
                        nodes[first].line
                    ),
                ));
            }
            index.insert(id.to_string(), nodes.len());
            nodes.push(GraphNode {
                id: id.to_string(),
                desc: desc.trim().to_string(),
                fwd: got[0] / 1000.0,
                bwd: got[1] / 1000.0,
                activation: got[2],
                weights: got[3],
                line: line_no,
            });
        }
        if nodes.is_empty() {
            return Err(InputError::new(source, "", "the file has no node line"));
        }
        let mut edges = Vec::with_capacity(raw_edges.len());
        for (line_no, a, b) in raw_edges {
            let find = |name: &str| {
                index.get(name).copied().ok_or_else(|| {
                    InputError::new(
                        source,
                        format!("line {line_no}: edge"),
                        format!("node {name} is not defined in the file"),
                    )
                })
            };
            edges.push((find(&a)?, find(&b)?));
        }
        Graph::new(source, nodes, edges)
    }

    /// Checks that the DAG is a whole network rather than a file cut short or missing edges
    /// (a `graph.txt` cut at a line boundary still parses): at least `nodes - 1` edges,
    /// every source an `Input` (or an empty placeholder: no time, no weights, no bytes, as
    /// GNMT's `hidden`), every `Add` or `Concat` with two inputs or more, every sink the
    /// network's output or a classifier head (`Linear`, `Classifier`) or a node PipeDream's
    /// optimizer discards (`__getitem__`, `Size`), and one connected piece. The output is the
    /// last such sink by node number (PipeDream numbers nodes in execution order); other heads
    /// are auxiliary classifiers (inception_v3's). Errors name the node and its line.
    pub fn check_complete(&self) -> Result<(), InputError> {
        let n = self.nodes.len();
        let at = |v: usize| {
            let node = &self.nodes[v];
            if node.line > 0 {
                format!("line {}: {}", node.line, node.id)
            } else {
                format!("nodes[{v}]")
            }
        };
        let what = |v: usize| {
            let node = &self.nodes[v];
            let desc: String = node.desc.chars().take(60).collect();
            format!("node {} ({desc})", node.id)
        };
        let hint = "(a truncated file? --accept-incomplete imports it anyway)";
        // In file order, so that the first error is the first damaged line.
        let mut by_line: Vec<usize> = (0..n).collect();
        by_line.sort_by_key(|&v| (self.nodes[v].line, v));
        if n > 1 && self.edges.len() < n - 1 {
            let lonely = by_line
                .iter()
                .copied()
                .find(|&v| self.pred[v].is_empty() && self.succ[v].is_empty())
                .unwrap_or(by_line[0]);
            return Err(InputError::new(
                self.source.clone(),
                at(lonely),
                format!(
                    "{} edges cannot connect {n} nodes (at least {} are needed); {} has none {hint}",
                    self.edges.len(),
                    n - 1,
                    what(lonely)
                ),
            ));
        }
        let discarded = |v: usize| {
            let d = &self.nodes[v].desc;
            d.starts_with("__getitem__") || d.starts_with("Size")
        };
        let head = |v: usize| {
            let d = &self.nodes[v].desc;
            d.starts_with("Linear") || d.starts_with("Classifier")
        };
        let output = (0..n)
            .filter(|&v| self.succ[v].is_empty() && !discarded(v))
            .max_by_key(|&v| self.key(v));
        for &v in &by_line {
            let node = &self.nodes[v];
            let placeholder = node.is_free() && node.activation == 0.0;
            let reason = if self.pred[v].is_empty() && !self.is_data_input(v) && !placeholder {
                format!(
                    "{} has no incoming edge but is not an Input: a second source, an edge \
                     into it is missing {hint}",
                    what(v)
                )
            } else if ["Add", "Concat", "Cat"]
                .iter()
                .any(|k| node.desc.starts_with(k))
                && self.pred[v].len() < 2
            {
                format!(
                    "{} joins tensors but has {} incoming edge: an edge into it is missing {hint}",
                    what(v),
                    self.pred[v].len()
                )
            } else if self.succ[v].is_empty() && !discarded(v) && Some(v) != output && !head(v) {
                let out = output.map(|o| self.nodes[o].id.as_str()).unwrap_or("?");
                format!(
                    "{} has no path to the output {out}: an edge out of it is missing {hint}",
                    what(v)
                )
            } else {
                continue;
            };
            return Err(InputError::new(self.source.clone(), at(v), reason));
        }
        // One connected piece (edges taken both ways).
        let mut seen = vec![false; n];
        let mut stack = vec![by_line[0]];
        seen[by_line[0]] = true;
        while let Some(v) = stack.pop() {
            for &w in self.succ[v].iter().chain(&self.pred[v]) {
                if !seen[w] {
                    seen[w] = true;
                    stack.push(w);
                }
            }
        }
        if let Some(&v) = by_line.iter().find(|&&v| !seen[v]) {
            return Err(InputError::new(
                self.source.clone(),
                at(v),
                format!(
                    "{} is not connected to {} {hint}",
                    what(v),
                    self.nodes[by_line[0]].id
                ),
            ));
        }
        Ok(())
    }

    /// What errors name: the file.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn nodes(&self) -> &[GraphNode] {
        &self.nodes
    }

    /// Edges `(from, to)`, indices into [`Graph::nodes`], without duplicates.
    pub fn edges(&self) -> &[(usize, usize)] {
        &self.edges
    }

    /// What each node keeps for its backward, when the graph knows it.
    pub fn memory(&self) -> Option<&[NodeMemory]> {
        self.memory.as_deref()
    }

    pub fn successors(&self, v: usize) -> &[usize] {
        &self.succ[v]
    }

    pub fn predecessors(&self, v: usize) -> &[usize] {
        &self.pred[v]
    }

    /// True for PipeDream's data-loading nodes: sources whose description starts with
    /// `Input`. Their profiled time is not training work (module docs, "Input").
    pub fn is_data_input(&self, v: usize) -> bool {
        self.pred[v].is_empty() && self.nodes[v].desc.starts_with("Input")
    }

    /// The nodes as the partitioners count them, PipeDream's rule applied: a data `Input`
    /// does no training work (no time, no weights; its output is still the network's
    /// input, module doc "Input").
    pub fn training_nodes(&self) -> Vec<GraphNode> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(v, node)| {
                let mut node = node.clone();
                if self.is_data_input(v) {
                    node.fwd = 0.0;
                    node.bwd = 0.0;
                    node.weights = 0.0;
                }
                node
            })
            .collect()
    }

    /// Sort key: the number in `nodeN`, then the position in the file.
    pub(crate) fn key(&self, v: usize) -> (u64, usize) {
        let n = self.nodes[v]
            .id
            .strip_prefix("node")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        (n, v)
    }

    /// Kahn's algorithm; `lifo` picks the branch-first order, else by id. `Err(v)` names a
    /// node on a cycle.
    fn kahn(&self, lifo: bool) -> Result<Vec<usize>, usize> {
        let n = self.nodes.len();
        let mut indeg: Vec<usize> = self.pred.iter().map(Vec::len).collect();
        let mut order = Vec::with_capacity(n);
        if lifo {
            let mut stack: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
            stack.sort_by_key(|&v| Reverse(self.key(v)));
            let mut ready = Vec::new();
            while let Some(v) = stack.pop() {
                order.push(v);
                ready.clear();
                for &w in &self.succ[v] {
                    indeg[w] -= 1;
                    if indeg[w] == 0 {
                        ready.push(w);
                    }
                }
                ready.sort_by_key(|&w| Reverse(self.key(w)));
                stack.extend_from_slice(&ready);
            }
        } else {
            let mut heap: BinaryHeap<Reverse<((u64, usize), usize)>> = (0..n)
                .filter(|&v| indeg[v] == 0)
                .map(|v| Reverse((self.key(v), v)))
                .collect();
            while let Some(Reverse((_, v))) = heap.pop() {
                order.push(v);
                for &w in &self.succ[v] {
                    indeg[w] -= 1;
                    if indeg[w] == 0 {
                        heap.push(Reverse((self.key(w), w)));
                    }
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err((0..n).find(|&v| indeg[v] > 0).unwrap_or(0))
        }
    }

    /// `cross[c]` for `c` in `0..=n`: bytes crossing the cut before position `c` of `order`
    /// (so `cross[0] = cross[n] = 0`); each tensor counted once.
    pub fn crossing_sizes(&self, order: &[usize]) -> Vec<Bytes> {
        let n = order.len();
        let mut pos = vec![0usize; self.nodes.len()];
        for (p, &v) in order.iter().enumerate() {
            pos[v] = p;
        }
        // The output of v (at position p) crosses the cuts before positions p+1..=last use.
        let mut diff = vec![0.0; n + 2];
        for &v in order {
            if let Some(last) = self.succ[v].iter().map(|&w| pos[w]).max() {
                let p = pos[v];
                if last > p {
                    diff[p + 1] += self.nodes[v].activation;
                    diff[last + 1] -= self.nodes[v].activation;
                }
            }
        }
        let mut cross = Vec::with_capacity(n + 1);
        let mut acc = 0.0;
        for d in diff.iter().take(n + 1) {
            acc += d;
            cross.push(acc);
        }
        cross[0] = 0.0;
        cross[n] = 0.0;
        cross
    }

    /// The deterministic topological order the chain follows (see the module doc), and
    /// its name (`"by id"` or `"branch first"`).
    pub fn chain_order(&self) -> (Vec<usize>, &'static str) {
        // Both succeed: `Graph::new` rejected cycles.
        let by_id = self.kahn(false).unwrap_or_default();
        let branch = self.kahn(true).unwrap_or_default();
        let total = |o: &[usize]| self.crossing_sizes(o).iter().sum::<f64>();
        if total(&branch) < total(&by_id) {
            (branch, "branch first")
        } else {
            (by_id, "by id")
        }
    }
}

fn check_value(v: f64) -> Result<(), String> {
    if v.is_nan() {
        Err("is NaN".to_string())
    } else if !v.is_finite() {
        Err(format!("{v} is not a finite number"))
    } else if v < 0.0 {
        Err(format!("{v} is negative"))
    } else {
        Ok(())
    }
}

/// A set of nodes closed under predecessors (an *ideal*, or down-set): what lies before a
/// cut of the DAG, straight or "diagonal" through parallel branches. One bit per node.
pub type Ideal = Vec<u64>;

/// Whether node `v` is in `ideal`.
pub fn ideal_has(ideal: &[u64], v: usize) -> bool {
    ideal[v / 64] >> (v % 64) & 1 == 1
}

impl Graph {
    /// Every ideal of the DAG (every set of nodes closed under predecessors, the empty set
    /// and the whole graph included), ordered by size and then by bits: each is reached
    /// from the empty set by adding one node whose predecessors are all in. `None` when
    /// there are more than `max` (branchy networks have exponentially many: Inception-v3's
    /// profile has over 200,000).
    pub fn ideals(&self, max: usize) -> Option<Vec<Ideal>> {
        let n = self.nodes.len();
        let words = n.div_ceil(64);
        let mut pred_bits: Vec<Ideal> = vec![vec![0; words]; n];
        for (v, bits) in pred_bits.iter_mut().enumerate() {
            for &u in &self.pred[v] {
                bits[u / 64] |= 1 << (u % 64);
            }
        }
        let mut all: Vec<Ideal> = vec![vec![0; words]];
        let mut level: Vec<Ideal> = all.clone();
        for _ in 0..n {
            let mut next = std::collections::BTreeSet::new();
            for ideal in &level {
                for v in 0..n {
                    if ideal_has(ideal, v) {
                        continue;
                    }
                    let ready = pred_bits[v].iter().zip(ideal).all(|(p, i)| p & !i == 0);
                    if ready {
                        let mut bigger = ideal.clone();
                        bigger[v / 64] |= 1 << (v % 64);
                        next.insert(bigger);
                        if all.len() + next.len() > max {
                            return None;
                        }
                    }
                }
            }
            level = next.into_iter().collect();
            all.extend(level.iter().cloned());
        }
        Some(all)
    }
}

/// A topological order of `graph` in which each of the nested `ideals` (smallest first) is
/// a prefix: the nodes each adds, in the order of `within` (any topological order).
pub fn order_through(graph: &Graph, ideals: &[&Ideal], within: &[usize]) -> Vec<usize> {
    let n = graph.nodes().len();
    let mut placed = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for ideal in ideals {
        for &v in within {
            if !placed[v] && ideal_has(ideal, v) {
                placed[v] = true;
                order.push(v);
            }
        }
    }
    order.extend(within.iter().copied().filter(|&v| !placed[v]));
    order
}

/// One number, or for `list_ok` a list `[a; b; ...]` summed; checked finite, non-negative.
fn parse_value(text: &str, list_ok: bool) -> Result<f64, String> {
    let one = |t: &str| -> Result<f64, String> {
        let t = t.trim();
        let v: f64 = t.parse().map_err(|_| format!("{t:?} is not a number"))?;
        check_value(v).map_err(|r| format!("{t:?} {r}"))?;
        Ok(v)
    };
    if list_ok && text.starts_with('[') {
        let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
            return Err(format!("{text:?} is an unclosed list (truncated line?)"));
        };
        let mut sum = 0.0;
        for part in inner.split(';') {
            sum += one(part)?;
        }
        Ok(sum)
    } else {
        one(text)
    }
}

/// A linearized graph: the order, the chain layers as position ranges, and the instance.
#[derive(Debug, Clone)]
pub struct Linearization {
    /// Node indices in chain order.
    pub order: Vec<usize>,
    /// `"by id"` or `"branch first"`.
    pub order_kind: &'static str,
    /// Chain layer `l` (1-based) holds `order[bounds[l-1]..bounds[l]]`; `bounds[0] = 0`,
    /// last = number of nodes.
    pub bounds: Vec<usize>,
    pub instance: Instance,
}

/// Reads and checks a PipeDream `graph.txt`; errors name the file, line and field.
pub fn read_graph(path: &Path) -> Result<Graph, InputError> {
    let bytes = std::fs::read(path).map_err(|e| InputError::file(path, e))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| InputError::file(path, format!("the file is not UTF-8: {e}")))?;
    Graph::parse(&text, &path.display().to_string())
}

/// Linearizes `graph` into a chain named `name` (see the module doc for the rules).
pub fn linearize(graph: &Graph, name: &str) -> Instance {
    linearize_detailed(graph, name).instance
}

/// [`linearize`], also returning the order and the layer bounds.
pub fn linearize_detailed(graph: &Graph, name: &str) -> Linearization {
    with_provenance(graph, linearize_graph(graph, name))
}

/// `lin` with the provenance of an imported profile in its instance's `meta`: the file, the
/// format, batch and image when the profile shows them, the tool.
pub fn with_provenance(graph: &Graph, mut lin: Linearization) -> Linearization {
    let meta = &mut lin.instance.meta;
    meta.insert("source".into(), Value::from(graph.source()));
    meta.insert("format".into(), Value::from(FORMAT));
    if let Some(shape) = input_shape(graph) {
        meta.insert("batch".into(), json!(shape.batch));
        meta.insert("image".into(), json!(shape.image));
        meta.insert("batch_from".into(), Value::from(shape.evidence));
    }
    meta.insert(
        "tool".into(),
        Value::from(format!("pipeopt {}", env!("CARGO_PKG_VERSION"))),
    );
    lin
}

/// The linearization of any DAG (a PipeDream profile, or a network's ops from
/// `crate::nets`): order, chain layers and the instance, whose `meta` holds only
/// `dag_nodes`, `dag_edges` and `order`. With [`Graph::with_memory`], stashes follow the
/// exact rule (module doc, "Stash").
pub fn linearize_graph(graph: &Graph, name: &str) -> Linearization {
    let (order, order_kind) = graph.chain_order();
    linearize_graph_in(graph, name, order, order_kind)
}

/// [`linearize_graph`] along a given topological `order` of the graph's nodes (named
/// `order_kind` in `meta.order`), e.g. one in which chosen ideals are prefixes
/// ([`order_through`]). Panics if `order` is not a permutation of the nodes.
pub fn linearize_graph_in(
    graph: &Graph,
    name: &str,
    order: Vec<usize>,
    order_kind: &'static str,
) -> Linearization {
    let n = order.len();
    assert_eq!(
        n,
        graph.nodes().len(),
        "the order must list every node once"
    );
    let cross = graph.crossing_sizes(&order);
    let nodes = graph.training_nodes();
    let nodes = &nodes[..];

    // Cuts c in 0..=n (before position c). Cuts c and c+1 are equivalent when the node at
    // position c is free. Keep one cut per class: the chain ends if the class holds one,
    // else the smallest crossing, earliest on ties.
    let mut bounds = Vec::new();
    let mut c = 0;
    while c <= n {
        let start = c;
        while c < n && nodes[order[c]].is_free() {
            c += 1;
        }
        // class = start..=c
        let keep = if start == 0 {
            0
        } else if c == n {
            n
        } else {
            let mut best = start;
            for k in start + 1..=c {
                if cross[k] < cross[best] {
                    best = k;
                }
            }
            best
        };
        bounds.push(keep);
        c += 1;
    }
    // A graph with one class (every node free) gives [0] or [0, n]; both ends must be there.
    if bounds.last() != Some(&n) {
        bounds.push(n);
    }
    bounds.dedup();
    if bounds.len() == 1 {
        bounds.push(n);
    }

    let mut stamp = vec![usize::MAX; nodes.len()];
    let mut is_sink_in = vec![false; nodes.len()];
    for (v, flag) in is_sink_in.iter_mut().enumerate() {
        *flag = graph.successors(v).is_empty();
    }
    let mut layers = Vec::with_capacity(bounds.len() - 1);
    for (l, w) in bounds.windows(2).enumerate() {
        let members = &order[w[0]..w[1]];
        let (mut fwd, mut bwd, mut weights, mut stash) = (0.0, 0.0, 0.0, 0.0);
        for &v in members {
            fwd += nodes[v].fwd;
            bwd += nodes[v].bwd;
            weights += nodes[v].weights;
            for &u in graph.predecessors(v) {
                if stamp[u] != l {
                    stamp[u] = l;
                    stash += nodes[u].activation;
                }
            }
        }
        let out = if w[1] < n {
            cross[w[1]]
        } else {
            members
                .iter()
                .filter(|&&v| is_sink_in[v])
                .map(|&v| nodes[v].activation)
                .sum()
        };
        let ids: Vec<&str> = members.iter().map(|&v| nodes[v].id.as_str()).collect();
        let descs: Vec<&str> = members.iter().map(|&v| nodes[v].desc.as_str()).collect();
        layers.push(Layer {
            name: format!("{}: {}", ids.join("+"), descs.join(" | ")),
            fwd,
            bwd,
            weights,
            out,
            stash: Some(stash),
            stash_overlap: None,
        });
    }
    let mut pairs = Vec::new();
    if let Some(memory) = &graph.memory {
        let (lone, p) = exact_stashes(graph, memory, &order, &bounds);
        for (layer, s) in layers.iter_mut().zip(lone) {
            layer.stash = Some(s);
        }
        pairs = p;
    }
    let input: Bytes = (0..nodes.len())
        .filter(|&v| graph.predecessors(v).is_empty())
        .map(|v| nodes[v].activation)
        .sum();
    let mut meta = Map::new();
    meta.insert("dag_nodes".into(), json!(nodes.len()));
    meta.insert("dag_edges".into(), json!(graph.edges().len()));
    meta.insert("order".into(), Value::from(order_kind));
    let mut instance = Instance {
        name: name.to_string(),
        input,
        layers,
        stash_shared: Vec::new(),
        meta,
    };
    if graph.memory.is_some() {
        instance.set_stash_pairs(pairs);
    }
    Linearization {
        order,
        order_kind,
        bounds,
        instance,
    }
}

/// The exact stash rule (module doc, "Stash", for graphs that know what each node keeps):
/// each layer's own stash and the pairs `(first, last, bytes)` that make any stage's stash
/// exact ([`Instance::set_stash_pairs`]).
///
/// A stage `k..=m` keeps a tensor (a storage: views and in-place outputs are their input's)
/// when one of its nodes saves it, or when it reads it from an earlier stage (a stage keeps
/// its inputs until its backward); a data `Input` counts as produced before layer 1. For
/// one tensor of `s` bytes produced in layer `p`, saved in the layers `S` and read in the
/// layers `C`, let `H` be the layers that keep it alone (`S` and `C` after `p`, and `p` if
/// it saves it). A stage starting after `p` keeps it iff it holds a layer of `H`: each layer
/// of `H` counts `s` and every two consecutive layers of `H` share `s`. A stage holding `p`
/// keeps it iff it holds a layer of `S`: when `p` does not save it, the pair `(p, min H)`
/// shares `s` and the pair `(p, min S)` shares `-s`, which makes the count exact.
fn exact_stashes(
    graph: &Graph,
    memory: &[NodeMemory],
    order: &[usize],
    bounds: &[usize],
) -> (Vec<Bytes>, Vec<(usize, usize, Bytes)>) {
    let n = graph.nodes.len();
    let layers = bounds.len() - 1;
    let mut layer_of = vec![0usize; n];
    for l in 1..=layers {
        for &v in &order[bounds[l - 1]..bounds[l]] {
            layer_of[v] = l;
        }
    }
    let root = |mut v: usize| {
        while let Some(u) = memory[v].alias_of {
            v = u;
        }
        v
    };
    // Per storage: the layers that save it and the layers that read it.
    let mut saved_in: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut read_in: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut lone = vec![0.0; layers];
    for v in 0..n {
        for &u in &memory[v].saves {
            saved_in[root(u)].push(layer_of[v]);
        }
        for &u in &graph.pred[v] {
            read_in[root(u)].push(layer_of[v]);
        }
        lone[layer_of[v] - 1] += memory[v].extra;
    }
    let mut pairs = Vec::new();
    for t in 0..n {
        if root(t) != t || (saved_in[t].is_empty() && read_in[t].is_empty()) {
            continue;
        }
        let size = graph.nodes[t].activation;
        let p = if graph.is_data_input(t) {
            0
        } else {
            layer_of[t]
        };
        let saves = &mut saved_in[t];
        saves.sort_unstable();
        saves.dedup();
        let mut keep: Vec<usize> = saves
            .iter()
            .chain(read_in[t].iter())
            .copied()
            .filter(|&l| l != p || saves.contains(&p))
            .collect();
        keep.sort_unstable();
        keep.dedup();
        for &h in &keep {
            lone[h - 1] += size;
        }
        for w in keep.windows(2) {
            pairs.push((w[0], w[1], size));
        }
        if p >= 1 && !saves.contains(&p) {
            if let Some(&first) = keep.first() {
                pairs.push((p, first, size));
            }
            if let Some(&first_saver) = saves.first() {
                pairs.push((p, first_saver, -size));
            }
        }
    }
    (lone, pairs)
}

/// Batch and image size of an image classifier's profile, when the profile shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct InputShape {
    pub batch: u64,
    pub image: u64,
    /// How they were read, for `meta.batch_from`.
    pub evidence: String,
}

/// What a `graph.txt` says of its batch and image size. It records neither, but an image
/// classifier's does through two sizes: the output node (the last sink by number that
/// PipeDream keeps) is `Linear(.., out_features=O, ..)` or `View(O)` with `batch x O`
/// float32 values, and the `Input` sources hold `batch x 3 x image x image` float32
/// values. Both must agree (a whole batch, a square image), or nothing is claimed: GNMT's
/// output is a `Classifier` over sequences, so it gets neither.
pub fn input_shape(graph: &Graph) -> Option<InputShape> {
    let nodes = graph.nodes();
    let output = (0..nodes.len())
        .filter(|&v| {
            let d = &nodes[v].desc;
            graph.successors(v).is_empty()
                && !d.starts_with("__getitem__")
                && !d.starts_with("Size")
        })
        .max_by_key(|&v| graph.key(v))?;
    let desc = &nodes[output].desc;
    let features: u64 = if let Some(rest) = desc.strip_prefix("Linear(") {
        let (_, tail) = rest.split_once("out_features=")?;
        tail.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?
    } else if let Some(rest) = desc.strip_prefix("View(") {
        rest.strip_suffix(')')?.trim().parse().ok()?
    } else {
        return None;
    };
    let whole = |x: f64| (x.fract() == 0.0 && x >= 1.0 && x < 2f64.powi(53)).then_some(x as u64);
    let batch = whole(nodes[output].activation / (4.0 * features as f64))?;
    let input: f64 = (0..nodes.len())
        .filter(|&v| graph.is_data_input(v))
        .map(|v| nodes[v].activation)
        .sum();
    let pixels = whole(input / (batch as f64 * 3.0 * 4.0))?;
    let image = pixels.isqrt();
    (image * image == pixels).then(|| InputShape {
        batch,
        image,
        evidence: format!(
            "the output {} ({} values of float32 per sample) and the Input ({}: 3 x {image} x \
             {image} float32 per sample)",
            nodes[output].id, features, input
        ),
    })
}

/// Reads `path` and linearizes it, naming the instance after the file's stem (its parent
/// folder when the file is called `graph.txt`). Errors name the file. The DAG must be a
/// whole network ([`Graph::check_complete`]); [`import_pipedream_with`] can accept one that
/// is not.
pub fn import_pipedream(path: &Path, name: Option<&str>) -> Result<Instance, InputError> {
    import_pipedream_with(path, name, false)
}

/// [`import_pipedream`]; with `accept_incomplete`, a DAG that fails
/// [`Graph::check_complete`] (extra sources, dead-end nodes, missing edges) is linearized
/// as it is (`import pipedream --accept-incomplete`).
pub fn import_pipedream_with(
    path: &Path,
    name: Option<&str>,
    accept_incomplete: bool,
) -> Result<Instance, InputError> {
    let graph = read_whole_graph(path, accept_incomplete)?;
    let default_name = default_name(path);
    let instance = linearize(&graph, name.unwrap_or(&default_name));
    instance.check().map_err(|e| e.in_file(path))?;
    Ok(instance)
}

/// [`read_graph`], then [`Graph::check_complete`] unless `accept_incomplete`.
pub fn read_whole_graph(path: &Path, accept_incomplete: bool) -> Result<Graph, InputError> {
    let graph = read_graph(path)?;
    if !accept_incomplete {
        graph.check_complete()?;
    }
    Ok(graph)
}

/// The PipeDream profile `name` (`densenet121` or `densenet121.txt`) of the shared data
/// beside the repository, `../shared/pipedream-profiles/`, for tests, benchmarks and
/// experiments (never copied into the repository).
pub fn shared_profile(name: &str) -> std::path::PathBuf {
    let file = if name.ends_with(".txt") {
        name.to_string()
    } else {
        format!("{name}.txt")
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/pipedream-profiles")
        .join(file)
}

/// The `--json` object of `pipeopt import pipedream`: where the instance went and its
/// totals (sums of fwd and bwd in seconds, weights, input and the largest `out` in bytes).
pub fn import_summary(instance: &Instance, out: &Path) -> Value {
    let sum = |f: fn(&Layer) -> f64| instance.layers.iter().map(f).sum::<f64>();
    let max_out = instance.layers[..instance.len().saturating_sub(1)]
        .iter()
        .map(|l| l.out)
        .fold(0.0, f64::max);
    json!({
        "instance": out.display().to_string(),
        "name": instance.name,
        "layers": instance.len(),
        "dag_nodes": instance.meta.get("dag_nodes").cloned().unwrap_or(Value::Null),
        "order": instance.meta.get("order").cloned().unwrap_or(Value::Null),
        "fwd": sum(|l| l.fwd),
        "bwd": sum(|l| l.bwd),
        "weights": sum(|l| l.weights),
        "input": instance.input,
        "max_out": max_out,
    })
}

/// The instance name of a profile file: its stem, or its folder's name for `graph.txt`.
pub fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem == "graph" {
        if let Some(dir) = path.parent().and_then(|p| p.file_name()) {
            return dir.to_string_lossy().into_owned();
        }
    }
    if stem.is_empty() {
        "pipedream".to_string()
    } else {
        stem
    }
}

#[cfg(test)]
#[path = "pipedream_tests.rs"]
mod tests;
