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

use std::collections::VecDeque;

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

/// The operation that takes `op`'s output: the inverse of [`Instr::input`] on forwards and
/// whole backwards.
fn successor(op: Instr, d: usize) -> Option<Instr> {
    match op {
        Instr::Forward {
            stage,
            micro_batch,
            pipeline,
        } => Some(if stage + 1 < d {
            Instr::Forward {
                stage: stage + 1,
                micro_batch,
                pipeline,
            }
        } else {
            Instr::Backward {
                stage,
                micro_batch,
                pipeline,
            }
        }),
        Instr::Backward {
            stage,
            micro_batch,
            pipeline,
        } if stage > 0 => Some(Instr::Backward {
            stage: stage - 1,
            micro_batch,
            pipeline,
        }),
        _ => None,
    }
}

/// The micro-batch (pipeline, index) that enters just before `op`'s in GEMS's entry order
/// (down 0, up N/2, down 1, up N/2 + 1, ...): none for the first, nor for a micro-batch
/// past the pairs (the last up one when N is odd).
fn previous_entry(rules: &Rules, op: Instr) -> Option<(Pipeline, usize)> {
    let half = rules.micro_batches / 2;
    let a = age(rules, op);
    if a >= half {
        return None;
    }
    match op.pipeline() {
        Pipeline::Down => (a > 0).then(|| (Pipeline::Up, half + a - 1)),
        Pipeline::Up => Some((Pipeline::Down, a)),
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
    run_with(rules, name, Candidates::Heads)
}

/// Which pending operations of a free worker `start_one` considers. Both consider every
/// operation whose input has started (`ListState::released`; the others cannot be ready);
/// they differ on the first stage's forwards, which need no input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Candidates {
    /// Of each pipeline's first-stage forwards, the oldest, and where some run doubled the
    /// oldest single one: they are admitted in micro-batch order, except that a doubled
    /// pair needs two slots where a single forward needs one. One step then costs the
    /// operations in flight, not the micro-batches: linear in N instead of quadratic.
    Heads,
    /// Every first-stage forward (the reference the tests compare `Heads` with).
    #[cfg_attr(not(test), allow(dead_code))]
    All,
}

fn run_with(
    rules: &Rules,
    name: &'static str,
    candidates: Candidates,
) -> Result<ListRun, SyncError> {
    let mut state = ListState::new(rules, candidates);
    let mut tick: u64 = 0;
    while state.left > 0 {
        for w in 0..rules.stages {
            if state.free[w] <= tick {
                state.start_one(w, tick);
            }
        }
        // Next instant anything can change: the earliest end after this tick.
        let next = state.free.iter().copied().filter(|&t| t > tick).min();
        match next {
            Some(t) => tick = t,
            None if state.left > 0 => {
                return Err(SyncError::Stuck {
                    schedule: name,
                    tick,
                    left: state.left,
                    cap: rules.live_cap,
                })
            }
            None => {}
        }
    }
    let nominal_makespan = state.free.iter().copied().max().unwrap_or(0);
    Ok(ListRun {
        schedule: state.schedule,
        nominal_makespan,
    })
}

/// A list-scheduling run in progress: what each worker has left and has run, when each
/// operation ends, and the counts the admission rules read.
struct ListState<'r> {
    rules: &'r Rules,
    candidates: Candidates,
    /// Each worker's first-stage forwards not started yet, one queue per pipeline, each in
    /// micro-batch order.
    entries: Vec<Vec<VecDeque<Instr>>>,
    /// Each worker's other operations whose input has started, not started themselves.
    released: Vec<Vec<Instr>>,
    /// The tick each started operation ends at.
    end: std::collections::HashMap<Instr, u64>,
    /// The tick each worker is free from.
    free: Vec<u64>,
    /// Micro-batches live on each worker (forward started, backward not started).
    live: Vec<usize>,
    /// Micro-batches live on each pipeline's first stage.
    live_first_stage: [usize; 2],
    backwards_started: Vec<usize>,
    schedule: Schedule,
    /// Operations not started yet, over all workers.
    left: usize,
    /// Micro-batches of each pipeline whose forwards run in pairs (whole pairs).
    doubled: usize,
}

impl<'r> ListState<'r> {
    fn new(rules: &'r Rules, candidates: Candidates) -> Self {
        let d = rules.stages;
        let mut entries: Vec<Vec<VecDeque<Instr>>> = vec![Vec::new(); d];
        let mut left = 0;
        for (pipeline, range) in pipelines(rules) {
            left += 2 * d * range.len();
            let queue = range
                .map(|micro_batch| Instr::Forward {
                    stage: 0,
                    micro_batch,
                    pipeline,
                })
                .collect();
            entries[pipeline.worker(0, d)].push(queue);
        }
        let per_pipeline = if rules.bidirectional {
            rules.micro_batches / 2
        } else {
            rules.micro_batches
        };
        ListState {
            rules,
            candidates,
            left,
            entries,
            released: vec![Vec::new(); d],
            end: std::collections::HashMap::new(),
            free: vec![0u64; d],
            live: vec![0usize; d],
            live_first_stage: [0usize; 2],
            backwards_started: vec![0usize; d],
            schedule: vec![Vec::new(); d],
            doubled: rules.doubled_per_pipeline.min(per_pipeline) & !1,
        }
    }

    /// Whether `op`'s input has arrived by `tick`.
    fn ready(&self, op: &Instr, tick: u64) -> bool {
        match op.input(self.rules.stages) {
            None => true,
            Some(dep) => self.end.get(&dep).is_some_and(|&t| t <= tick),
        }
    }

    /// Whether worker `w` may start `op` at `tick` by the caps: its live cap, the first
    /// stage's initial injections, GEMS's alternate entry.
    fn admitted(&self, w: usize, op: &Instr, tick: u64) -> bool {
        let (rules, d) = (self.rules, self.rules.stages);
        if !op.is_forward() {
            return true;
        }
        if self.live[w] >= rules.live_cap {
            return false;
        }
        if op.stage() != 0 {
            return true;
        }
        if self.backwards_started[w] == 0
            && self.live_first_stage[op.pipeline() as usize] >= rules.initial_per_pipeline
        {
            return false;
        }
        if rules.alternate_entry {
            if let Some((pp, pi)) = previous_entry(rules, *op) {
                let prev = Instr::Backward {
                    stage: if pp == Pipeline::Down { w } else { d - 1 - w },
                    micro_batch: pi,
                    pipeline: pp,
                };
                if self.end.get(&prev).is_none_or(|&t| t > tick) {
                    return false;
                }
            }
        }
        true
    }

    /// A doubled forward's partner: the pair's first micro-batch stands for both; its
    /// partner is never chosen alone.
    fn partner(&self, op: &Instr) -> Option<Instr> {
        if !op.is_forward() || age(self.rules, *op) >= self.doubled {
            return None;
        }
        let a = age(self.rules, *op);
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
    }

    /// Whether worker `w` may start `op` at `tick`: ready and admitted, and for a doubled
    /// forward, its partner ready too and two live slots free.
    fn startable(&self, w: usize, op: &Instr, tick: u64) -> bool {
        if !(self.ready(op, tick) && self.admitted(w, op, tick)) {
            return false;
        }
        match self.partner(op) {
            None => true,
            Some(_) if age(self.rules, *op) % 2 == 1 => false,
            Some(p) => {
                self.ready(&p, tick)
                    && self.live[w] + 2 <= self.rules.live_cap
                    && (op.stage() != 0
                        || self.backwards_started[w] > 0
                        || self.live_first_stage[op.pipeline() as usize] + 2
                            <= self.rules.initial_per_pipeline)
            }
        }
    }

    /// The positions in the first-stage queue `queue` that `start_one` considers
    /// ([`Candidates`]).
    fn considered(&self, queue: &VecDeque<Instr>) -> Vec<usize> {
        match self.candidates {
            Candidates::All => (0..queue.len()).collect(),
            Candidates::Heads => {
                let single = queue.partition_point(|op| age(self.rules, *op) < self.doubled);
                let mut at = vec![0];
                if single > 0 {
                    at.push(single);
                }
                at.retain(|&i| i < queue.len());
                at
            }
        }
    }

    /// Takes `op` out of worker `w`'s pending operations, wherever it waits.
    fn take(&mut self, w: usize, op: Instr) -> bool {
        if let Some(i) = self.released[w].iter().position(|x| *x == op) {
            self.released[w].swap_remove(i);
            return true;
        }
        for queue in &mut self.entries[w] {
            if let Some(i) = queue.iter().position(|x| *x == op) {
                queue.remove(i);
                return true;
            }
        }
        false
    }

    /// Marks `op` started: the operation that takes its output is released.
    fn started(&mut self, op: Instr) {
        let d = self.rules.stages;
        if let Some(next) = successor(op, d) {
            self.released[next.pipeline().worker(next.stage(), d)].push(next);
        }
    }

    /// Starts on free worker `w` at `tick` the startable operation first by the priority,
    /// if any.
    fn start_one(&mut self, w: usize, tick: u64) {
        let first_stage = self.entries[w]
            .iter()
            .flat_map(|queue| self.considered(queue).into_iter().map(move |i| queue[i]));
        let chosen = self.released[w]
            .iter()
            .copied()
            .chain(first_stage)
            .filter(|op| self.startable(w, op, tick))
            .min_by_key(|op| key(self.rules, *op));
        let Some(op) = chosen else { return };
        if !self.take(w, op) {
            return;
        }
        self.started(op);
        if let Some(p) = self.partner(&op).filter(|&p| self.take(w, p)) {
            self.started(p);
            // The doubled forward: both micro-batches, two forward times, one end.
            self.live[w] += 2;
            if op.stage() == 0 {
                self.live_first_stage[op.pipeline() as usize] += 2;
            }
            let ticks = 2 * FORWARD_TICKS;
            self.end.insert(op, tick + ticks);
            self.end.insert(p, tick + ticks);
            self.free[w] = tick + ticks;
            self.schedule[w].push(op);
            self.schedule[w].push(p);
            self.left -= 2;
            return;
        }
        let ticks = if op.is_forward() {
            self.live[w] += 1;
            if op.stage() == 0 {
                self.live_first_stage[op.pipeline() as usize] += 1;
            }
            FORWARD_TICKS
        } else {
            self.live[w] -= 1;
            self.backwards_started[w] += 1;
            if op.stage() == 0 {
                self.live_first_stage[op.pipeline() as usize] -= 1;
            }
            self.rules.backward_ticks.max(1)
        };
        self.end.insert(op, tick + ticks);
        self.free[w] = tick + ticks;
        self.schedule[w].push(op);
        self.left -= 1;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Considering only the oldest (and the oldest single) first-stage forward of each
    /// pipeline gives exactly the streams of considering every one of them, for every rule
    /// the generators use: every priority, bidirectional or not, GEMS's alternate entry,
    /// forward doubling, caps from tight to loose, nominal backwards of 1 to 3 forward
    /// times.
    #[test]
    fn the_oldest_first_stage_forwards_give_the_streams_of_a_scan_of_all_of_them() {
        let mut compared = 0;
        for d in [2usize, 4, 6, 8] {
            for n in [d, 2 * d, 3 * d + 2, 4 * d] {
                for bidirectional in [false, true] {
                    for priority in [
                        Priority::ForwardFirst,
                        Priority::BackwardFirst,
                        Priority::MicroBatchOrder,
                    ] {
                        for (initial, cap, alternate, doubled, ticks) in [
                            (d / 2, d, false, 0, 2),
                            (d, 2 * d, false, 0, 1),
                            (1, d / 2 + 1, false, 0, 3),
                            (d / 2, d, true, 0, 2),
                            (d / 2, d + 2, false, d, 2),
                        ] {
                            let rules = Rules {
                                stages: d,
                                micro_batches: n,
                                bidirectional,
                                initial_per_pipeline: initial.max(1),
                                live_cap: cap.max(1),
                                priority,
                                alternate_entry: alternate && bidirectional,
                                backward_ticks: ticks,
                                doubled_per_pipeline: doubled,
                            };
                            let heads = run_with(&rules, "test", Candidates::Heads);
                            let all = run_with(&rules, "test", Candidates::All);
                            match (heads, all) {
                                (Ok(h), Ok(a)) => {
                                    assert_eq!(h.schedule, a.schedule, "{rules:?}");
                                    assert_eq!(h.nominal_makespan, a.nominal_makespan);
                                    compared += 1;
                                }
                                (Err(_), Err(_)) => {}
                                (h, a) => panic!("{rules:?}: {:?} against {:?}", h.err(), a.err()),
                            }
                        }
                    }
                }
            }
        }
        assert!(compared > 300, "{compared} runs compared");
    }
}
