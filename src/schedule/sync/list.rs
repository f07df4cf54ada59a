//! The list scheduler behind the bidirectional generators (GEMS, Chimera, MixPipe).
//!
//! The papers draw their schedules (MixPipe, Zhang et al., *MixPipe: Efficient
//! Bidirectional Pipeline Parallelism for Training Large-Scale Models*, DAC 2023, Figures
//! 1, 3, 6) rather than give an algorithm, so we build them the way such timelines are
//! drawn: time runs in ticks with nominal durations (forward 1, backward 2: "a backward
//! pass is about 2 times workload of a forward pass", MixPipe section II-B); at each tick
//! every free worker starts one ready operation chosen by `Rules`. The order each worker
//! ran its operations in is the stream; `sim` replays streams with real stage times, so
//! only the order comes from this nominal run. Everything here is deterministic (ties break
//! by micro-batch, pipeline, kind).

use super::{Instr, Pipeline, Schedule, SyncError};

/// Which ready operation a free worker starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Forwards first (as many as the caps allow: MixPipe's early forward, 2F1B), then
    /// backwards; within a kind the oldest micro-batch of its pipeline.
    ForwardFirst,
    /// Backwards first (1F1B), then forwards; oldest micro-batch first.
    BackwardFirst,
    /// The oldest micro-batch (index within its pipeline) first, a backward before a
    /// forward of the same age: Chimera's drawings.
    MicroBatchOrder,
}

/// Admission rules of one list-scheduling run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Stages D (workers) and micro-batches N (over both pipelines when bidirectional).
    pub stages: usize,
    pub micro_batches: usize,
    pub bidirectional: bool,
    /// Micro-batches each pipeline may inject into its first stage before that stage's
    /// worker has started its first backward (K/2 for MixPipe's K).
    pub initial_per_pipeline: usize,
    /// Most micro-batches live on one worker (forward started, backward not started), over
    /// all the stages it holds: K + Gamma for MixPipe.
    pub live_cap: usize,
    pub priority: Priority,
    /// GEMS: micro-batches enter alternately down, up, down, ...; each enters only when the
    /// previous one has finished its backward on the entering worker.
    pub alternate_entry: bool,
    /// Nominal backward time in forward ticks (2: the papers' backward = 2 x forward).
    pub backward_ticks: u64,
    /// Chimera's forward doubling: the first `doubled_per_pipeline` micro-batches of each
    /// pipeline (by index within it) run their forwards in pairs (0 and 1, 2 and 3, ...):
    /// a worker starts the forward of a pair's first micro-batch only with its partner's
    /// (both ready and admitted, two live slots), runs them back to back as one doubled
    /// forward of two forward times, and their outputs leave together at its end.
    /// Backwards stay single. 0: no doubling; rounded down to whole pairs of the pipeline's
    /// micro-batches.
    pub doubled_per_pipeline: usize,
}

/// The streams and the nominal makespan (in forward ticks) of one run.
#[derive(Debug, Clone)]
pub struct ListRun {
    pub schedule: Schedule,
    pub nominal_makespan: u64,
}

const FORWARD_TICKS: u64 = 1;

/// The papers' nominal ratio: backward = 2 x forward.
pub const BACKWARD_TICKS: u64 = 2;

fn pipelines(rules: &Rules) -> Vec<(Pipeline, std::ops::Range<usize>)> {
    let n = rules.micro_batches;
    if rules.bidirectional {
        vec![(Pipeline::Down, 0..n / 2), (Pipeline::Up, n / 2..n)]
    } else {
        vec![(Pipeline::Down, 0..n)]
    }
}

/// Index of micro-batch `i` within its pipeline.
fn age(rules: &Rules, op: Instr) -> usize {
    match op.pipeline() {
        Pipeline::Down => op.micro_batch(),
        Pipeline::Up => op.micro_batch() - rules.micro_batches / 2,
    }
}

fn key(rules: &Rules, op: Instr) -> (usize, usize, usize, usize) {
    let backward = usize::from(!op.is_forward());
    let forward = 1 - backward;
    let pipe = op.pipeline() as usize;
    match rules.priority {
        Priority::ForwardFirst => (backward, age(rules, op), pipe, 0),
        Priority::BackwardFirst => (forward, age(rules, op), pipe, 0),
        Priority::MicroBatchOrder => (age(rules, op), pipe, forward, 0),
    }
}

/// Runs the list scheduler. Fails when no worker can ever start an operation again (a cap
/// too small for the shape, e.g. two opposite micro-batches each waiting for the other's
/// slot).
pub fn run(rules: &Rules, name: &'static str) -> Result<ListRun, SyncError> {
    let d = rules.stages;
    let mut pending: Vec<Vec<Instr>> = vec![Vec::new(); d];
    for (pipeline, range) in pipelines(rules) {
        for micro_batch in range {
            for stage in 0..d {
                let w = pipeline.worker(stage, d);
                pending[w].push(Instr::Forward {
                    stage,
                    micro_batch,
                    pipeline,
                });
                pending[w].push(Instr::Backward {
                    stage,
                    micro_batch,
                    pipeline,
                });
            }
        }
    }
    // Entry order for GEMS: down 0, up N/2, down 1, up N/2+1, ...
    let entry_order: Vec<(Pipeline, usize)> = if rules.alternate_entry {
        let half = rules.micro_batches / 2;
        (0..half)
            .flat_map(|i| [(Pipeline::Down, i), (Pipeline::Up, half + i)])
            .collect()
    } else {
        Vec::new()
    };
    let mut end: std::collections::HashMap<Instr, u64> = std::collections::HashMap::new();
    let mut free = vec![0u64; d];
    let mut live = vec![0usize; d];
    let mut live_first_stage = [0usize; 2];
    let mut backwards_started = vec![0usize; d];
    let mut schedule: Schedule = vec![Vec::new(); d];
    let mut left: usize = pending.iter().map(Vec::len).sum();
    let mut tick: u64 = 0;
    // Doubled forwards: whole pairs within each pipeline's micro-batches.
    let per_pipeline = if rules.bidirectional {
        rules.micro_batches / 2
    } else {
        rules.micro_batches
    };
    let doubled = rules.doubled_per_pipeline.min(per_pipeline) & !1;
    while left > 0 {
        for w in 0..d {
            if free[w] > tick {
                continue;
            }
            let ready = |op: &Instr| match op.input(d) {
                None => true,
                Some(dep) => end.get(&dep).is_some_and(|&t| t <= tick),
            };
            let admitted = |op: &Instr| {
                if !op.is_forward() {
                    return true;
                }
                if live[w] >= rules.live_cap {
                    return false;
                }
                if op.stage() != 0 {
                    return true;
                }
                if backwards_started[w] == 0
                    && live_first_stage[op.pipeline() as usize] >= rules.initial_per_pipeline
                {
                    return false;
                }
                if rules.alternate_entry {
                    let me = (op.pipeline(), op.micro_batch());
                    let j = entry_order.iter().position(|&e| e == me).unwrap_or(0);
                    if j > 0 {
                        let (pp, pi) = entry_order[j - 1];
                        let prev = Instr::Backward {
                            stage: if pp == Pipeline::Down { w } else { d - 1 - w },
                            micro_batch: pi,
                            pipeline: pp,
                        };
                        if end.get(&prev).is_none_or(|&t| t > tick) {
                            return false;
                        }
                    }
                }
                true
            };
            // A doubled forward: the pair's first micro-batch stands for both; its
            // partner is never chosen alone.
            let partner = |op: &Instr| -> Option<Instr> {
                if !op.is_forward() || age(rules, *op) >= doubled {
                    return None;
                }
                let a = age(rules, *op);
                let other = if a % 2 == 0 {
                    op.micro_batch() + 1
                } else {
                    op.micro_batch() - 1
                };
                Some(Instr::Forward {
                    stage: op.stage(),
                    micro_batch: other,
                    pipeline: op.pipeline(),
                })
            };
            let startable = |op: &Instr| {
                if !(ready(op) && admitted(op)) {
                    return false;
                }
                match partner(op) {
                    None => true,
                    Some(_) if age(rules, *op) % 2 == 1 => false,
                    Some(p) => {
                        ready(&p)
                            && live[w] + 2 <= rules.live_cap
                            && (op.stage() != 0
                                || backwards_started[w] > 0
                                || live_first_stage[op.pipeline() as usize] + 2
                                    <= rules.initial_per_pipeline)
                    }
                }
            };
            let chosen = pending[w]
                .iter()
                .enumerate()
                .filter(|(_, op)| startable(op))
                .min_by_key(|(_, op)| key(rules, **op))
                .map(|(i, _)| i);
            let Some(i) = chosen else { continue };
            let op = pending[w].swap_remove(i);
            if let Some(j) = partner(&op).and_then(|p| pending[w].iter().position(|x| *x == p)) {
                // The doubled forward: both micro-batches, two forward times, one end.
                let p = pending[w].swap_remove(j);
                live[w] += 2;
                if op.stage() == 0 {
                    live_first_stage[op.pipeline() as usize] += 2;
                }
                let ticks = 2 * FORWARD_TICKS;
                end.insert(op, tick + ticks);
                end.insert(p, tick + ticks);
                free[w] = tick + ticks;
                schedule[w].push(op);
                schedule[w].push(p);
                left -= 2;
                continue;
            }
            let ticks = if op.is_forward() {
                live[w] += 1;
                if op.stage() == 0 {
                    live_first_stage[op.pipeline() as usize] += 1;
                }
                FORWARD_TICKS
            } else {
                live[w] -= 1;
                backwards_started[w] += 1;
                if op.stage() == 0 {
                    live_first_stage[op.pipeline() as usize] -= 1;
                }
                rules.backward_ticks.max(1)
            };
            end.insert(op, tick + ticks);
            free[w] = tick + ticks;
            schedule[w].push(op);
            left -= 1;
        }
        // Next instant anything can change: the earliest end after this tick.
        let next = free.iter().copied().filter(|&t| t > tick).min();
        match next {
            Some(t) => tick = t,
            None if left > 0 => {
                return Err(SyncError::Stuck {
                    schedule: name,
                    tick,
                    left,
                    cap: rules.live_cap,
                })
            }
            None => {}
        }
    }
    let nominal_makespan = free.iter().copied().max().unwrap_or(0);
    Ok(ListRun {
        schedule,
        nominal_makespan,
    })
}

/// The run of several priorities with the shortest nominal makespan (first on ties).
pub fn best_of(
    rules: &Rules,
    priorities: &[Priority],
    name: &'static str,
) -> Result<ListRun, SyncError> {
    let mut best: Option<ListRun> = None;
    let mut last_err = None;
    for &priority in priorities {
        match run(&Rules { priority, ..*rules }, name) {
            Ok(r) => {
                if best
                    .as_ref()
                    .is_none_or(|b| r.nominal_makespan < b.nominal_makespan)
                {
                    best = Some(r);
                }
            }
            Err(e) => last_err = Some(e),
        }
    }
    match (best, last_err) {
        (Some(b), _) => Ok(b),
        (None, Some(e)) => Err(e),
        (None, None) => Err(super::shape_error(name, "no priority rule given")),
    }
}
