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
    let mut state = ListState::new(rules);
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
    /// Each worker's operations not started yet.
    pending: Vec<Vec<Instr>>,
    /// GEMS's entry order: down 0, up N/2, down 1, up N/2+1, ... (empty otherwise).
    entry_order: Vec<(Pipeline, usize)>,
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
    fn new(rules: &'r Rules) -> Self {
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
        let entry_order: Vec<(Pipeline, usize)> = if rules.alternate_entry {
            let half = rules.micro_batches / 2;
            (0..half)
                .flat_map(|i| [(Pipeline::Down, i), (Pipeline::Up, half + i)])
                .collect()
        } else {
            Vec::new()
        };
        let per_pipeline = if rules.bidirectional {
            rules.micro_batches / 2
        } else {
            rules.micro_batches
        };
        ListState {
            rules,
            left: pending.iter().map(Vec::len).sum(),
            pending,
            entry_order,
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
            let me = (op.pipeline(), op.micro_batch());
            let j = self.entry_order.iter().position(|&e| e == me).unwrap_or(0);
            if j > 0 {
                let (pp, pi) = self.entry_order[j - 1];
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

    /// Starts on free worker `w` at `tick` the startable operation first by the priority,
    /// if any.
    fn start_one(&mut self, w: usize, tick: u64) {
        let chosen = self.pending[w]
            .iter()
            .enumerate()
            .filter(|(_, op)| self.startable(w, op, tick))
            .min_by_key(|(_, op)| key(self.rules, **op))
            .map(|(i, _)| i);
        let Some(i) = chosen else { return };
        let op = self.pending[w].swap_remove(i);
        if let Some(j) = self
            .partner(&op)
            .and_then(|p| self.pending[w].iter().position(|x| *x == p))
        {
            // The doubled forward: both micro-batches, two forward times, one end.
            let p = self.pending[w].swap_remove(j);
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
