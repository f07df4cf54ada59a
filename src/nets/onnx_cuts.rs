//! The blocks of an imported network: its op list cut wherever exactly one tensor is alive
//! (the parent module's docs), each block named by the module path its ops share.

use crate::nets::analytic::{is_view, keeps_output, saves_input};
use crate::nets::{last_readers, Block, Op, OpKind};

/// Cuts the op list of one builder (op 0 the input, ops in topological order) into blocks
/// at every point where exactly one tensor is alive (module doc).
pub(super) fn split_blocks(ops: Vec<Op>) -> Vec<Block> {
    let n = ops.len();
    // Last reader of each op's output; the last op's output is the network's.
    let mut last_use = last_readers(&ops);
    last_use[n - 1] = n;
    let mut cuts = vec![0usize];
    let mut alive = 1usize; // the input
    for i in 1..n - 1 {
        alive += usize::from(last_use[i] > i);
        alive -= ops[..i].iter().filter(|o| last_use[o.id] == i).count();
        // No cut before an op that writes no tensor of its own (an in-place ReLU, a view):
        // its block would hold nothing but an alias of the boundary tensor.
        let aliasing = matches!(ops[i + 1].kind, OpKind::Relu { .. }) || is_view(&ops[i + 1].kind);
        if alive == 1 && last_use[i] > i && !aliasing && !part_of_storage(&ops, i) {
            cuts.push(i);
        }
    }
    cuts.push(n - 1);
    // A cut where neither side keeps the boundary tensor (the block before does not save
    // its output, the block after does not save its input) would make the pair's overlap
    // larger than the first block's stash: such a cut is dropped, its blocks merged.
    let mut kept = vec![0usize];
    for k in 1..cuts.len() - 1 {
        let before = make_block(&ops, *kept.last().expect("kept starts with 0"), cuts[k]);
        let after = make_block(&ops, cuts[k], cuts[k + 1]);
        if keeps_output(&before) || saves_input(&after) {
            kept.push(cuts[k]);
        }
    }
    kept.push(n - 1);
    kept.windows(2)
        .map(|w| make_block(&ops, w[0], w[1]))
        .collect()
}

/// Whether op `i`'s output views part of a larger tensor (a slice or a select, as ViT's
/// head reads its class token): a block starting there would hold that part as a tensor of
/// its own, where the ops reading it keep the whole storage; no cut falls there.
fn part_of_storage(ops: &[Op], mut i: usize) -> bool {
    while is_view(&ops[i].kind) {
        if matches!(ops[i].kind, OpKind::Slice { .. }) {
            return true;
        }
        i = ops[i].inputs[0];
    }
    false
}

/// The block of ops `from + 1 ..= to`, whose input is op `from`'s output.
fn make_block(ops: &[Op], from: usize, to: usize) -> Block {
    let map = |x: usize| if x == from { 0 } else { x - from };
    let mut block_ops = vec![Op {
        id: 0,
        name: "input".into(),
        kind: OpKind::Input,
        inputs: vec![],
        shape: ops[from].shape.clone(),
    }];
    for op in &ops[from + 1..=to] {
        block_ops.push(Op {
            id: map(op.id),
            name: op.name.clone(),
            kind: op.kind.clone(),
            inputs: op.inputs.iter().map(|&x| map(x)).collect(),
            shape: op.shape.clone(),
        });
    }
    Block {
        name: block_name(&ops[from + 1..=to]),
        ops: block_ops,
    }
}

/// A block's name: the longest `/`-separated prefix its ops' names share (PyTorch's
/// exporter names nodes by module path, `/layer1/layer1.0/conv1/Conv`), else its first op's.
fn block_name(ops: &[Op]) -> String {
    let parts: Vec<Vec<&str>> = ops
        .iter()
        .map(|o| o.name.split('/').filter(|s| !s.is_empty()).collect())
        .collect();
    let mut common = parts[0].len().saturating_sub(usize::from(ops.len() == 1));
    for p in &parts[1..] {
        common = common.min(p.iter().zip(&parts[0]).take_while(|(a, b)| a == b).count());
    }
    if common == 0 || (ops.len() == 1 && parts[0].len() <= 1) {
        ops[0].name.clone()
    } else {
        parts[0][..common].join(".")
    }
}
