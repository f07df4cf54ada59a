//! Op-level chains: a network's DAG of leaf operations, linearized like a PipeDream profile.
//!
//! Beaumont, Eyraud-Dubois and Shilova, *MadPipe: Memory Aware Dynamic Programming
//! Algorithm for Pipelined Model Parallelism* (ScaDL 2022, section 5.1), evaluate on
//! chains obtained from the networks' computational graphs "by greedily grouping layers as
//! necessary", as PipeDream does (Narayanan et al., SOSP 2019). The block-level chains of
//! [`super::analytic`] cut only between blocks; here every convolution, normalization,
//! activation, pooling, addition, concatenation and linear op is a node, and the DAG is
//! linearized by the one linearization of the code base, [`crate::io::pipedream`] (its
//! order, crossing sizes and grouping of free nodes).
//!
//! # Nodes
//! One node per op of every block, but the blocks' `Input` ops: a block's input is the
//! previous block's output node, and the network input is one data `Input` source (free,
//! so it joins the first chain layer). Per node: `activation` is the op's output tensor
//! (batch x elements x dtype), `weights` its parameters, `fwd`/`bwd` its roofline times
//! ([`super::analytic::op_time`]) plus an equal share of its block's per-layer cost
//! (`Rates::per_layer`, fitted per block): so the op-level chain's U(1,L) is the
//! block-level one, up to rounding. Views (flatten) take no time and join a neighbour.
//!
//! # Stashes
//! Each node says what it saves ([`super::analytic::saved_tensors`] and the extras: BN
//! statistics, pooling indices, masks) and whose storage its output is (a flatten's is a
//! view of its input; an in-place ReLU writes into its input when that input has no other
//! reader). The linearizer turns this into exact chain-layer stashes plus the pairs that
//! make every stage's stash exact (`stash_overlap`, `stash_shared`): a stage keeps a tensor
//! once when one of its ops saves it or when it reads it from an earlier stage. A block
//! range of the op-level chain keeps exactly what the same blocks keep at block level (the
//! block rule is the same rule applied at block cuts), so both chains agree on the whole
//! network's weights and stash to the byte.

use serde_json::{json, Map, Value};

use super::analytic::{analytic_meta, op_time, saved_tensors, DType, DeviceModel};
use super::{params, NetError, Network, OpKind};
use crate::io::pipedream::{linearize_graph, Graph, GraphNode, NodeMemory};
use crate::model::Instance;

/// Granularity of an analytic chain: one layer per block, or one per op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Block,
    Op,
}

impl Granularity {
    /// `block` or `op`.
    pub fn parse(s: &str) -> Option<Granularity> {
        match s {
            "block" => Some(Granularity::Block),
            "op" => Some(Granularity::Op),
            _ => None,
        }
    }
}

/// A short description of an op for the chain layer's name.
fn describe(kind: &OpKind) -> String {
    match kind {
        OpKind::Conv2d {
            cin, cout, kernel, ..
        } => format!("Conv2d({cin}, {cout}, {}x{})", kernel.0, kernel.1),
        OpKind::Linear { fin, fout, .. } => format!("Linear({fin}, {fout})"),
        OpKind::BatchNorm2d { channels, .. } => format!("BatchNorm2d({channels})"),
        other => {
            let d = format!("{other:?}");
            d.split([' ', '{', '(']).next().unwrap_or("op").to_string()
        }
    }
}

/// The network's DAG of leaf ops with times, sizes and what each op keeps (module doc).
pub fn op_graph(
    net: &Network,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> Result<Graph, NetError> {
    let times = analytic_op_times(net, batch, dtype, device);
    op_graph_timed(net, batch, dtype, &times)
}

/// Forward and backward seconds of every op: `times[k][i]` for op `i` of block `k` (op 0,
/// the block's input, is not read; views take none).
pub type OpTimes = Vec<Vec<(f64, f64)>>;

/// The device model's time of every op: its roofline time plus an equal share of its
/// block's per-layer cost (module doc).
pub fn analytic_op_times(
    net: &Network,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> OpTimes {
    let (per_f, per_b) = (
        device.rates(false, dtype).per_layer,
        device.rates(true, dtype).per_layer,
    );
    net.blocks
        .iter()
        .enumerate()
        .map(|(k, block)| {
            let times: Vec<Option<(f64, f64, f64)>> = (0..block.ops.len())
                .map(|i| op_time(block, i, batch, dtype, device, k == 0))
                .collect();
            let costly = times.iter().filter(|t| t.is_some()).count().max(1) as f64;
            times
                .iter()
                .map(|t| {
                    t.map_or((0.0, 0.0), |(f, b, _)| {
                        (f + per_f / costly, b + per_b / costly)
                    })
                })
                .collect()
        })
        .collect()
}

/// [`op_graph`] with the given op times (sizes and what each op keeps are the analytic,
/// exact ones).
fn op_graph_timed(
    net: &Network,
    batch: usize,
    dtype: DType,
    times: &OpTimes,
) -> Result<Graph, NetError> {
    if batch == 0 {
        return Err(NetError::Zero {
            net: net.name.clone(),
            what: "batch",
        });
    }
    if times.len() != net.blocks.len()
        || times
            .iter()
            .zip(&net.blocks)
            .any(|(t, b)| t.len() != b.ops.len())
    {
        return Err(NetError::Graph {
            net: net.name.clone(),
            reason: "op times do not match the network's blocks and ops".into(),
        });
    }
    let n = batch as f64;
    let e = dtype.bytes() as f64;
    let in_bytes = net.input_elem_bytes.unwrap_or(dtype.bytes()) as f64;
    let elems = |s: &[usize]| s.iter().product::<usize>() as f64;
    let mut nodes = vec![GraphNode {
        id: "input".into(),
        desc: "Input".into(),
        fwd: 0.0,
        bwd: 0.0,
        activation: elems(&net.input) * n * in_bytes,
        weights: 0.0,
        line: 0,
    }];
    let mut memory = vec![NodeMemory::default()];
    let mut edges = Vec::new();
    let mut prev_out = 0usize;
    for (k, block) in net.blocks.iter().enumerate() {
        // Global node of each op: op 0 is the previous block's output.
        let mut gid = vec![prev_out; block.ops.len()];
        for (i, op) in block.ops.iter().enumerate().skip(1) {
            gid[i] = nodes.len();
            let (fwd, bwd) = times[k][i];
            nodes.push(GraphNode {
                id: format!("{}.{}", block.name, op.name),
                desc: describe(&op.kind),
                fwd,
                bwd,
                activation: elems(&op.shape) * n * e,
                weights: params(&op.kind) as f64 * e,
                line: 0,
            });
            for &x in &op.inputs {
                edges.push((gid[x], gid[i]));
            }
            memory.push(NodeMemory {
                saves: saved_tensors(block, i).iter().map(|&t| gid[t]).collect(),
                extra: super::analytic::saved_extra(block, i, batch, dtype),
                alias_of: None,
            });
        }
        // Views and in-place ReLUs (whose input nothing else reads) write no new tensor.
        for (i, op) in block.ops.iter().enumerate().skip(1) {
            let inplace = matches!(op.kind, OpKind::Relu { inplace: true })
                && block
                    .ops
                    .iter()
                    .filter(|o| o.inputs.contains(&op.inputs[0]))
                    .count()
                    == 1;
            if super::analytic::is_view(&op.kind) || inplace {
                memory[gid[i]].alias_of = Some(gid[op.inputs[0]]);
            }
        }
        prev_out = gid[block.ops.len() - 1];
    }
    let source = format!("{} ops", net.name);
    Graph::new(source.clone(), nodes, edges)
        .and_then(|g| g.with_memory(memory))
        .map_err(|err| NetError::Graph {
            net: net.name.clone(),
            reason: err.to_string(),
        })
}

/// The analytic op-level instance of `net` for `batch` samples (module doc), named
/// `NET-IMAGE-bBATCH-op`.
pub fn op_instance(
    net: &Network,
    batch: usize,
    dtype: DType,
    device: &DeviceModel,
) -> Result<Instance, NetError> {
    let graph = op_graph(net, batch, dtype, device)?;
    let meta = analytic_meta(net, batch, dtype, device);
    Ok(op_chain(net, batch, &graph, meta, ""))
}

/// The op-level instance of `net` with measured op times (`pipeopt profile --granularity
/// op`): the chain of [`op_instance`], each chain layer's times the sums of its ops'
/// measured times, its sizes the exact analytic ones; `meta` is the caller's (provenance),
/// the name is `NET-IMAGE-bBATCH-op-measured`.
pub fn measured_op_instance(
    net: &Network,
    batch: usize,
    dtype: DType,
    times: &OpTimes,
    meta: Map<String, Value>,
) -> Result<Instance, NetError> {
    let graph = op_graph_timed(net, batch, dtype, times)?;
    Ok(op_chain(net, batch, &graph, meta, "-measured"))
}

/// Linearizes an op graph of `net` into its chain, with `meta` and the linearization's
/// facts (order, DAG size, blocks) in `meta`.
fn op_chain(
    net: &Network,
    batch: usize,
    graph: &Graph,
    meta: Map<String, Value>,
    suffix: &str,
) -> Instance {
    let name = match &meta.get("image").cloned().unwrap_or(Value::Null) {
        Value::Null => format!("{}-b{batch}-op{suffix}", net.name),
        v => format!("{}-{v}-b{batch}-op{suffix}", net.name),
    };
    let lin = linearize_graph(graph, &name);
    let mut instance = lin.instance;
    let dag = std::mem::replace(&mut instance.meta, meta);
    instance.meta.insert("granularity".into(), json!("op"));
    for key in ["dag_nodes", "dag_edges", "order"] {
        if let Some(v) = dag.get(key) {
            instance.meta.insert(key.into(), v.clone());
        }
    }
    instance
        .meta
        .insert("blocks".into(), json!(net.blocks.len()));
    instance
}
