//! docs/model.md sections 4 and 5: the operations of one batch and periodic patterns.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::model::{Allocation, Instance, Platform};
use crate::units::{Bytes, Seconds};

/// The kind of an operation of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OpKind {
    /// Forward pass of a stage.
    F,
    /// Backward pass of a stage.
    B,
    /// Forward transfer a(last layer) after a stage.
    CF,
    /// Backward transfer b(last layer) after a stage.
    CB,
    /// Bi-Partition: stash transfer of one layer from its forward worker to its backward
    /// worker; its `stage` is the layer number (1-based), not a stage index.
    CS,
    /// Bi-Partition: updated-weight transfer of one layer from its backward worker back to
    /// its forward worker; its `stage` is the layer number (1-based).
    CW,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::F => "F",
            OpKind::B => "B",
            OpKind::CF => "CF",
            OpKind::CB => "CB",
            OpKind::CS => "CS",
            OpKind::CW => "CW",
        })
    }
}

/// An operation: its kind and the stage it belongs to (index into the allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId {
    pub kind: OpKind,
    pub stage: usize,
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.kind, self.stage)
    }
}

/// Where an operation runs: a processor, or the link between two processors (`a < b`).
/// A half-duplex link is one resource (`toward_a` false for every transfer); a full-duplex
/// link has one resource per physical direction: `toward_a` false for the transfers from
/// `a` to `b`, true for those from `b` to `a` (docs/model.md section 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Processor(usize),
    Link { a: usize, b: usize, toward_a: bool },
}

impl Resource {
    /// The resource a transfer from processor `from` to processor `to` runs on.
    pub fn transfer(from: usize, to: usize, full_duplex: bool) -> Resource {
        Resource::Link {
            a: from.min(to),
            b: from.max(to),
            toward_a: full_duplex && from > to,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Processor(p) => write!(f, "processor {p}"),
            Resource::Link {
                a,
                b,
                toward_a: false,
            } => write!(f, "link {a}-{b}"),
            Resource::Link {
                a,
                b,
                toward_a: true,
            } => write!(f, "link {a}-{b} (from {b} to {a})"),
        }
    }
}

/// One operation of one batch, with its resource and duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Operation {
    pub id: OpId,
    pub resource: Resource,
    pub duration: Seconds,
}

/// Bytes a processor holds for each batch from the start of one operation of that batch
/// until the end of another (docs/model.md section 6: a stage's stash, from F_s to B_s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    pub processor: usize,
    pub bytes: Bytes,
    /// Index in `ops` of the operation whose start allocates it.
    pub from: usize,
    /// Index in `ops` of the operation whose end frees it.
    pub until: usize,
}

/// Everything the judge needs about one batch of a plan: the operations with their
/// resources and durations, the dependencies, and the memory rule (docs/model.md sections 4
/// and 6). Plans of other shapes (Bi-Partition's split forward and backward ranges) build
/// their own `BatchGraph` and go through the same judge.
#[derive(Debug, Clone)]
pub struct BatchGraph {
    pub ops: Vec<Operation>,
    /// `(before, after)` as indices into `ops`.
    pub deps: Vec<(usize, usize)>,
    /// Number of processors.
    pub processors: usize,
    /// Memory that does not depend on the schedule (weights, buffers), per processor.
    pub static_memory: Vec<Bytes>,
    /// Memory held per live batch.
    pub held: Vec<Held>,
}

impl BatchGraph {
    pub fn new(instance: &Instance, platform: &Platform, allocation: &Allocation) -> Self {
        let sums = instance.sums();
        let n = allocation.len();
        let mut ops = Vec::with_capacity(4 * n);
        // Index of F_s, B_s, CF_s, CB_s in `ops`.
        let mut f = vec![0; n];
        let mut b = vec![0; n];
        let mut cf = vec![None; n];
        let mut cb = vec![None; n];
        for (s, st) in allocation.stages.iter().enumerate() {
            let p = Resource::Processor(st.processor);
            f[s] = ops.len();
            ops.push(Operation {
                id: OpId {
                    kind: OpKind::F,
                    stage: s,
                },
                resource: p,
                duration: sums.u_f(st.first, st.last),
            });
            b[s] = ops.len();
            ops.push(Operation {
                id: OpId {
                    kind: OpKind::B,
                    stage: s,
                },
                resource: p,
                duration: sums.u_b(st.first, st.last),
            });
            if allocation.crosses(s) {
                let q = allocation.stages[s + 1].processor;
                let d = sums.a(st.last) / platform.bandwidth;
                cf[s] = Some(ops.len());
                ops.push(Operation {
                    id: OpId {
                        kind: OpKind::CF,
                        stage: s,
                    },
                    resource: Resource::transfer(st.processor, q, platform.full_duplex),
                    duration: d,
                });
                cb[s] = Some(ops.len());
                ops.push(Operation {
                    id: OpId {
                        kind: OpKind::CB,
                        stage: s,
                    },
                    resource: Resource::transfer(q, st.processor, platform.full_duplex),
                    duration: d,
                });
            }
        }
        let mut deps = Vec::with_capacity(4 * n);
        for s in 0..n {
            if s + 1 < n {
                match (cf[s], cb[s]) {
                    (Some(cf), Some(cb)) => {
                        deps.push((f[s], cf));
                        deps.push((cf, f[s + 1]));
                        deps.push((b[s + 1], cb));
                        deps.push((cb, b[s]));
                    }
                    _ => {
                        deps.push((f[s], f[s + 1]));
                        deps.push((b[s + 1], b[s]));
                    }
                }
            } else {
                deps.push((f[s], b[s]));
            }
        }
        let mut static_memory = vec![0.0; platform.processors];
        let mut held = Vec::with_capacity(n);
        for (s, st) in allocation.stages.iter().enumerate() {
            let m = &mut static_memory[st.processor];
            // Two weight versions and one gradient accumulator (PipeDream-2BW, MadPipe).
            *m += 3.0 * sums.weights(st.first, st.last);
            if s > 0 && allocation.crosses(s - 1) {
                *m += 2.0 * sums.a(st.first - 1);
            }
            if allocation.crosses(s) {
                *m += 2.0 * sums.a(st.last);
            }
            held.push(Held {
                processor: st.processor,
                bytes: sums.stash(st.first, st.last),
                from: f[s],
                until: b[s],
            });
        }
        BatchGraph {
            ops,
            deps,
            processors: platform.processors,
            static_memory,
            held,
        }
    }

    /// The operations of one batch in dependency order, `None` when the dependencies do not
    /// form one path through every operation (every graph built by [`BatchGraph::new`]
    /// does).
    pub fn chain_order(&self) -> Option<Vec<usize>> {
        let n = self.ops.len();
        let mut next = vec![None; n];
        let mut has_pred = vec![false; n];
        for &(a, b) in &self.deps {
            if next[a].is_some() || has_pred[b] {
                return None;
            }
            next[a] = Some(b);
            has_pred[b] = true;
        }
        let mut cur = (0..n).find(|&i| !has_pred[i]);
        let mut order = Vec::with_capacity(n);
        while let Some(i) = cur {
            order.push(i);
            cur = next[i];
        }
        (order.len() == n).then_some(order)
    }

    /// Index in `ops` of an operation, if the allocation has it.
    pub fn find(&self, id: OpId) -> Option<usize> {
        self.ops.iter().position(|o| o.id == id)
    }
}

/// One operation's place in a periodic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PatternOp {
    pub kind: OpKind,
    /// Index into the plan's stages.
    pub stage: usize,
    /// t_o in [0, T).
    pub start: Seconds,
    /// h_o: in period k the operation processes batch k - h_o.
    pub shift: i64,
}

impl PatternOp {
    pub fn id(&self) -> OpId {
        OpId {
            kind: self.kind,
            stage: self.stage,
        }
    }
}

/// A periodic pattern (docs/model.md section 5): repeated every `period` seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    pub period: Seconds,
    pub ops: Vec<PatternOp>,
}

impl Pattern {
    pub fn get(&self, id: OpId) -> Option<&PatternOp> {
        self.ops.iter().find(|o| o.id() == id)
    }
}
