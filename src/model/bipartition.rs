//! Bi-Partition plans (docs/model.md section 3, last sentence): a worker holds a forward
//! range and a backward range of layers, so a layer's F and B may run on different workers.
//!
//! # Operations of one batch (extends docs/model.md section 4)
//! Workers are listed in chain order; worker `s` (its index in the `&[BiStage]` list, the
//! "stage index" of its ops) runs `F_s` over its forward range and `B_s` over its backward
//! range. Forward ranges partition `1..=L` in worker order, and so do backward ranges; every
//! range is non-empty and every worker is on its own processor.
//! - `CF_s`: a(last forward layer of s) / beta, from worker s to s+1; `F_s -> CF_s -> F_{s+1}`.
//! - `CB_s`: a(last backward layer of s) / beta, from s+1 to s; `B_{s+1} -> CB_s -> B_s`.
//! - `F_last -> B_last` (layer L is in both last ranges).
//! - For a layer `l` whose F is on worker `p` and B on worker `q != p`: `CS_l` (stash(l) /
//!   beta) with `F_p -> CS_l -> B_q`, and `CW_l` (W(l) / beta, updated weights back to p) with
//!   `B_q -> CW_l`. **For CS and CW the `stage` field of [`OpId`] is the layer number `l`
//!   (1-based), not a worker index.** The weight transfer feeds the forward of a later
//!   batch (weight stashing makes forwards use a stale version anyway), so no same-batch
//!   dependency leaves it.
//!
//! # Memory (extends docs/model.md section 6)
//! - weights: `3 W(l)` on the worker of l's backward (it owns the weights, versions and the
//!   gradient accumulator); `W(l)` more on the worker of l's forward when that is another
//!   worker (the paper's "partial copy": a forward-only copy);
//! - buffers: `a(in)` / `a(out)` per direction: a forward range whose input (output) crosses
//!   a worker boundary adds `a(in)` (`a(out)`), a backward range likewise; when the forward
//!   and backward cuts coincide this is docs/model.md's `2 a` per side;
//! - activations: `stash(l)` on the worker of l's backward, for every batch from the start of
//!   the forward op that computes l until the end of the backward op (the stash counts on
//!   the B worker; its time on the F worker before `CS_l` is not counted), less
//!   `stash_overlap(l-1)` when layer l-1's backward is on the same worker: a backward range
//!   keeps `ChainSums::stash` of its layers, as a stage of an allocation does.

use serde::{Deserialize, Serialize};

use crate::model::{BatchGraph, Held, Instance, OpId, OpKind, Operation, Platform, Resource};

/// One worker of a Bi-Partition plan: layer ranges are 1-based and inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BiStage {
    pub processor: usize,
    pub forward: (usize, usize),
    pub backward: (usize, usize),
}

/// A Bi-Partition plan as stored in files: the workers in chain order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiPlan {
    pub stages: Vec<BiStage>,
}

/// What is wrong with a Bi-Partition plan's workers ([`check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BiPlanError {
    #[error("a Bi-Partition plan needs at least one worker")]
    NoWorker,
    #[error("stages[{worker}].{direction} = ({first}, {last}) does not continue the chain at layer {next}")]
    Gap {
        worker: usize,
        /// `forward` or `backward`.
        direction: &'static str,
        first: usize,
        last: usize,
        next: usize,
    },
    #[error("the {direction} ranges end at layer {end} but the instance has {layers} layers")]
    Short {
        direction: &'static str,
        end: usize,
        layers: usize,
    },
    #[error(
        "stages[{worker}].processor = {processor} but the platform has {processors} processors"
    )]
    NoSuchProcessor {
        worker: usize,
        processor: usize,
        processors: usize,
    },
    #[error("stages[{worker}].processor = {processor} is used twice")]
    SharedProcessor { worker: usize, processor: usize },
}

/// Checks that the forward ranges and the backward ranges each partition `1..=layers` in
/// worker order, with non-empty ranges and distinct processors below `processors`.
pub fn check(stages: &[BiStage], layers: usize, processors: usize) -> Result<(), BiPlanError> {
    if stages.is_empty() {
        return Err(BiPlanError::NoWorker);
    }
    for (direction, get) in [
        (
            "forward",
            (|s: &BiStage| s.forward) as fn(&BiStage) -> (usize, usize),
        ),
        ("backward", |s: &BiStage| s.backward),
    ] {
        let mut next = 1;
        for (worker, s) in stages.iter().enumerate() {
            let (first, last) = get(s);
            if first != next || last < first {
                return Err(BiPlanError::Gap {
                    worker,
                    direction,
                    first,
                    last,
                    next,
                });
            }
            next = last + 1;
        }
        if next != layers + 1 {
            return Err(BiPlanError::Short {
                direction,
                end: next - 1,
                layers,
            });
        }
    }
    for (worker, s) in stages.iter().enumerate() {
        if s.processor >= processors {
            return Err(BiPlanError::NoSuchProcessor {
                worker,
                processor: s.processor,
                processors,
            });
        }
        if stages[..worker].iter().any(|t| t.processor == s.processor) {
            return Err(BiPlanError::SharedProcessor {
                worker,
                processor: s.processor,
            });
        }
    }
    Ok(())
}

fn owner(stages: &[BiStage], l: usize, get: fn(&BiStage) -> (usize, usize)) -> usize {
    stages
        .iter()
        .position(|s| get(s).0 <= l && l <= get(s).1)
        .expect("checked plan")
}

/// The operations, dependencies and memory items of one batch of a Bi-Partition plan (see
/// the module documentation), for [`crate::judge::judge_graph`].
pub fn batch_graph(
    instance: &Instance,
    platform: &Platform,
    stages: &[BiStage],
) -> Result<BatchGraph, BiPlanError> {
    check(stages, instance.len(), platform.processors)?;
    let sums = instance.sums();
    let n = stages.len();
    let beta = platform.bandwidth;
    let mut ops = Vec::new();
    let push = |ops: &mut Vec<Operation>, kind, stage, resource, duration| {
        ops.push(Operation {
            id: OpId { kind, stage },
            resource,
            duration,
        });
        ops.len() - 1
    };
    let mut f = vec![0; n];
    let mut b = vec![0; n];
    for (s, st) in stages.iter().enumerate() {
        let r = Resource::Processor(st.processor);
        f[s] = push(
            &mut ops,
            OpKind::F,
            s,
            r,
            sums.u_f(st.forward.0, st.forward.1),
        );
        b[s] = push(
            &mut ops,
            OpKind::B,
            s,
            r,
            sums.u_b(st.backward.0, st.backward.1),
        );
    }
    let mut deps = Vec::new();
    for s in 0..n - 1 {
        let (p, q) = (stages[s].processor, stages[s + 1].processor);
        let cf = push(
            &mut ops,
            OpKind::CF,
            s,
            Resource::transfer(p, q, platform.full_duplex),
            sums.a(stages[s].forward.1) / beta,
        );
        let cb = push(
            &mut ops,
            OpKind::CB,
            s,
            Resource::transfer(q, p, platform.full_duplex),
            sums.a(stages[s].backward.1) / beta,
        );
        deps.extend([(f[s], cf), (cf, f[s + 1]), (b[s + 1], cb), (cb, b[s])]);
    }
    deps.push((f[n - 1], b[n - 1]));
    let mut static_memory = vec![0.0; platform.processors];
    let mut held = Vec::new();
    for l in 1..=instance.len() {
        let pf = owner(stages, l, |s| s.forward);
        let pb = owner(stages, l, |s| s.backward);
        let (procf, procb) = (stages[pf].processor, stages[pb].processor);
        let w = instance.layer(l).weights;
        static_memory[procb] += 3.0 * w;
        // One rule for a stage's stash (`ChainSums::stash`): bytes layer l-1 keeps too
        // (`stash_overlap`) count once on the worker that holds both stashes. Layer l-1's
        // window starts no later than l's and ends at the same backward, so the shared
        // bytes are live whenever l's are.
        let shared = if l > 1 && owner(stages, l - 1, |s| s.backward) == pb {
            instance.stash_overlap(l - 1)
        } else {
            0.0
        };
        held.push(Held {
            processor: procb,
            bytes: (instance.stash(l) - shared).max(0.0),
            from: f[pf],
            until: b[pb],
        });
        if pf != pb {
            static_memory[procf] += w;
            let cs = push(
                &mut ops,
                OpKind::CS,
                l,
                Resource::transfer(procf, procb, platform.full_duplex),
                instance.stash(l) / beta,
            );
            let cw = push(
                &mut ops,
                OpKind::CW,
                l,
                Resource::transfer(procb, procf, platform.full_duplex),
                w / beta,
            );
            deps.extend([(f[pf], cs), (cs, b[pb]), (b[pb], cw)]);
        }
    }
    for (s, st) in stages.iter().enumerate() {
        let m = &mut static_memory[st.processor];
        if s > 0 {
            *m += sums.a(st.forward.0 - 1) + sums.a(st.backward.0 - 1);
        }
        if s + 1 < n {
            *m += sums.a(st.forward.1) + sums.a(st.backward.1);
        }
    }
    Ok(BatchGraph {
        ops,
        deps,
        processors: platform.processors,
        static_memory,
        held,
    })
}
