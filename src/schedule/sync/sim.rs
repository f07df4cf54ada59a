//! The simulator of docs/model.md section 7: replays one instruction stream per worker.
//! Each operation starts when its worker is free (in stream order) and its input is there:
//! the producing operation's end, plus the transfer time of the cut when it ran on another
//! worker (transfers overlap computation and each other; docs/model.md section 2's
//! one-resource link is not modelled here, the synchronous papers' closed forms assume
//! none).
//!
//! Reported: makespan (iteration time), bubble ratio (idle time over workers x makespan, idle
//! being the makespan minus the forward and backward work of the worker), and per worker
//! the memory of docs/model.md section 6 with section 7's weights: every stage replica the
//! worker holds counts 2 W (one weight version and its gradient accumulator; two replicas,
//! hence two copies, for bidirectional pipelines), buffers 2 a(in) / 2 a(out) for inputs
//! and outputs crossing workers, and activations `stash(s) x live_s(tau)` at the peak
//! instant, live meaning forward started and backward not finished.
//!
//! Streams that can never finish are rejected naming the worker and the operation it waits
//! at; streams that miss or repeat an operation are rejected naming it.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;

use super::{Instr, Pass, Pipeline, Schedule};
use crate::model::{ChainSums, Instance};
use crate::units::MAX_SECONDS;

/// How a worker runs its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Execution {
    /// GPUs (Zhao et al., arXiv 2020, section 3.2.2): one operation at a time; a transfer
    /// starts when the producing operation has finished, so the consumer waits its full
    /// time.
    Serial,
    /// Asynchronous execution (Zhao et al., arXiv 2020, section 3.2.1, FPGAs): outputs
    /// stream out while they are computed, so transfers are completely overlapped and cost
    /// no waiting.
    StreamedCommunication,
    /// FBP (FPDeep; Zhao et al., arXiv 2020, section 3.2.1): forwards and backwards run in
    /// parallel on two halves of the accelerator, each taking the stage's forward +
    /// backward time (the split that gives one forward and one backward per F + B in the
    /// steady state); communication streamed as in `StreamedCommunication`.
    ForwardBackwardParallel,
    /// DualPipe's overlapped chunks (DeepSeek-V3 technical report, 2024): as `Serial`, but
    /// a forward that its worker's stream follows directly with a whole backward (of any
    /// stage) forms a pair that starts only when both of their inputs are there, since the
    /// runtime receives both before computing either; the pair takes the two operations'
    /// time one after the other (the model has no communication for it to hide).
    OverlappedPairs,
}

/// What one stage costs: times in seconds, sizes in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StageCosts {
    pub forward_seconds: Vec<f64>,
    pub backward_seconds: Vec<f64>,
    /// Transfer time of the activation (or its gradient) across the cut after stage `s`;
    /// the last entry is unused.
    pub transfer_seconds: Vec<f64>,
    pub weight_bytes: Vec<f64>,
    pub stash_bytes: Vec<f64>,
    pub input_bytes: Vec<f64>,
    pub output_bytes: Vec<f64>,
    /// The weight-gradient part of each stage's backward, for schedules that split it
    /// ([`Instr::BackwardWeight`]); the input gradient takes the rest. Empty: none.
    #[serde(default)]
    pub weight_gradient_seconds: Vec<f64>,
    /// The bytes of each stage's stash that its weight gradient still reads once the input
    /// gradient has run (the inputs of its layers that hold weights); the input gradient
    /// frees the rest. Empty: none.
    #[serde(default)]
    pub weight_gradient_stash_bytes: Vec<f64>,
}

impl StageCosts {
    pub fn stages(&self) -> usize {
        self.forward_seconds.len()
    }

    /// Seconds of stage `s`'s weight gradient (0 where not given).
    pub fn weight_gradient(&self, s: usize) -> f64 {
        let w = self.weight_gradient_seconds.get(s).copied().unwrap_or(0.0);
        w.clamp(0.0, self.backward_seconds[s].max(0.0))
    }

    /// Bytes of stage `s`'s stash its weight gradient keeps after the input gradient.
    pub fn weight_gradient_stash(&self, s: usize) -> f64 {
        let w = self
            .weight_gradient_stash_bytes
            .get(s)
            .copied()
            .unwrap_or(0.0);
        w.clamp(0.0, self.stash_bytes[s].max(0.0))
    }

    /// Seconds `op` computes (serial execution).
    pub fn seconds(&self, op: Instr) -> f64 {
        let s = op.stage();
        match op.pass() {
            Pass::Forward => self.forward_seconds[s],
            Pass::Backward => self.backward_seconds[s],
            Pass::BackwardInput => self.backward_seconds[s] - self.weight_gradient(s),
            Pass::BackwardWeight => self.weight_gradient(s),
        }
    }

    /// The same costs with the weight gradient of each stage set to `share` of its backward
    /// (every stage, whether or not it holds weights).
    pub fn with_weight_gradient_share(mut self, share: f64) -> StageCosts {
        self.weight_gradient_seconds = self.backward_seconds.iter().map(|b| share * b).collect();
        self
    }

    /// `d` equal stages: forward `f`, backward `b`, transfer `c`, one byte of weights and of
    /// stash, no buffers (for closed-form checks).
    pub fn uniform(d: usize, f: f64, b: f64, c: f64) -> StageCosts {
        StageCosts {
            forward_seconds: vec![f; d],
            backward_seconds: vec![b; d],
            transfer_seconds: vec![c; d],
            weight_bytes: vec![1.0; d],
            stash_bytes: vec![1.0; d],
            input_bytes: vec![0.0; d],
            output_bytes: vec![0.0; d],
            weight_gradient_seconds: Vec::new(),
            weight_gradient_stash_bytes: Vec::new(),
        }
    }

    /// The stages of `instance` cut before the 0-based layers `starts` (`starts[0] == 0`,
    /// increasing, as `--partition`), transfers at `bandwidth` bytes per second (positive;
    /// infinite for free transfers). The split backward follows docs/model.md section 7:
    /// a layer that holds weights spends half of its backward on its weight gradient (the
    /// weight-gradient product has the forward's FLOPs, as does the input-gradient one) and
    /// keeps its stash until then; a layer without weights has no weight gradient.
    pub fn from_instance(
        instance: &Instance,
        starts: &[usize],
        bandwidth_bytes_per_second: f64,
    ) -> Result<StageCosts, PartitionError> {
        let l = instance.len();
        check_starts(starts, l)?;
        // A transfer at 0 bytes/s never ends (nor does the simulation that waits for it).
        if bandwidth_bytes_per_second.is_nan() || bandwidth_bytes_per_second <= 0.0 {
            return Err(PartitionError::Bandwidth(format!(
                "must be positive, got {bandwidth_bytes_per_second}"
            )));
        }
        let sums = ChainSums::new(instance);
        let mut c = StageCosts {
            forward_seconds: Vec::new(),
            backward_seconds: Vec::new(),
            transfer_seconds: Vec::new(),
            weight_bytes: Vec::new(),
            stash_bytes: Vec::new(),
            input_bytes: Vec::new(),
            output_bytes: Vec::new(),
            weight_gradient_seconds: Vec::new(),
            weight_gradient_stash_bytes: Vec::new(),
        };
        for (i, &start) in starts.iter().enumerate() {
            let (first, last) = (start + 1, starts.get(i + 1).copied().unwrap_or(l));
            c.forward_seconds.push(sums.u_f(first, last));
            c.backward_seconds.push(sums.u_b(first, last));
            c.weight_bytes.push(sums.weights(first, last));
            c.stash_bytes.push(sums.stash(first, last));
            c.input_bytes.push(instance.a(first - 1));
            c.output_bytes.push(instance.a(last));
            let transfer = instance.a(last) / bandwidth_bytes_per_second;
            // The last entry is unused: no transfer follows the last stage.
            if i + 1 < starts.len() && transfer > MAX_SECONDS {
                return Err(PartitionError::Bandwidth(format!(
                    "at {bandwidth_bytes_per_second} bytes/s the {} bytes after layer {last} \
                     take {transfer:e} s, more than the longest duration pipeopt counts \
                     ({MAX_SECONDS:e} s)",
                    instance.a(last)
                )));
            }
            c.transfer_seconds.push(transfer);
            let weighted = (first..=last).filter(|&l| instance.layer(l).weights > 0.0);
            let (w_seconds, w_stash) = weighted.fold((0.0, 0.0), |(t, m), l| {
                (t + instance.layer(l).bwd / 2.0, m + instance.stash(l))
            });
            c.weight_gradient_seconds.push(w_seconds);
            c.weight_gradient_stash_bytes
                .push(w_stash.min(sums.stash(first, last)));
        }
        Ok(c)
    }
}

/// A partition given by its stage starts that does not fit the chain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PartitionError {
    #[error("partition: {0}")]
    Invalid(String),
    /// A bandwidth at which a transfer never ends, or takes longer than any duration
    /// pipeopt counts ([`MAX_SECONDS`]): sums of such times overflow to infinity.
    #[error("bandwidth: {0}")]
    Bandwidth(String),
}

fn check_starts(starts: &[usize], layers: usize) -> Result<(), PartitionError> {
    if starts.first() != Some(&0) {
        return Err(PartitionError::Invalid(format!(
            "the first stage must start at layer 0 (got {starts:?})"
        )));
    }
    if starts.windows(2).any(|w| w[0] >= w[1]) || starts.last().is_some_and(|&s| s >= layers) {
        return Err(PartitionError::Invalid(format!(
            "stage starts must increase and stay below L = {layers} (got {starts:?})"
        )));
    }
    Ok(())
}

/// Streams that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("deadlock: worker {worker} waits forever at {instr:?}")]
    Deadlock { worker: usize, instr: Instr },
    #[error("{instr:?} appears twice (workers {first} and {second})")]
    Duplicate {
        instr: Instr,
        first: usize,
        second: usize,
    },
    #[error(
        "{instr:?} is missing: its micro-batch runs elsewhere but this operation is in no stream"
    )]
    Missing { instr: Instr },
    #[error("{instr:?} names stage {} but there are {stages} stages", instr.stage())]
    StageOutOfRange { instr: Instr, stages: usize },
    #[error("the schedule has {streams} streams for {stages} stages: one stream per worker, at least one worker and at most one per stage")]
    Shape { streams: usize, stages: usize },
    #[error("{instr:?} runs on worker {second} but its stage runs on worker {first}: each stage lives on one worker")]
    StageOnTwoWorkers {
        instr: Instr,
        first: usize,
        second: usize,
    },
    #[error("{instr:?} runs on worker {weight_worker} but its input gradient on worker {input_worker}: the two parts of a backward share their stage's worker")]
    SplitApart {
        instr: Instr,
        input_worker: usize,
        weight_worker: usize,
    },
    #[error("{instr:?} is there and so is a part of it (BackwardInput or BackwardWeight): a stage runs each micro-batch's backward whole or split, not both")]
    BothBackwards { instr: Instr },
}

/// Kept for backward compatibility: a stream order that can never progress.
pub type Deadlock = SimError;

/// Makespan and per-worker (start, end, instr) intervals.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub makespan: f64,
    pub intervals: Vec<Vec<(f64, f64, Instr)>>,
}

/// Memory of one worker (bytes) and its live micro-batches at the peak.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WorkerMemory {
    pub weight_bytes: f64,
    pub buffer_bytes: f64,
    pub activation_peak_bytes: f64,
    pub peak_bytes: f64,
    /// Most micro-batches live at once on the worker, over all its stages.
    pub peak_live: usize,
    /// Stage replicas held: (pipeline, stage).
    pub replicas: usize,
}

/// What the simulator reports.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub makespan_seconds: f64,
    pub bubble_ratio: f64,
    /// Forward + backward work of each worker.
    pub work_seconds: Vec<f64>,
    pub memory: Vec<WorkerMemory>,
    pub timeline: Timeline,
}

impl SimReport {
    pub fn peak_bytes(&self) -> f64 {
        self.memory.iter().map(|m| m.peak_bytes).fold(0.0, f64::max)
    }
}

/// Checks that every operation appears once, that every micro-batch has all its
/// operations, that stages are in range and that each stage (of each pipeline) runs on one
/// worker.
fn check_streams(schedule: &Schedule, d: usize) -> Result<(), SimError> {
    if schedule.is_empty() || schedule.len() > d {
        return Err(SimError::Shape {
            streams: schedule.len(),
            stages: d,
        });
    }
    let mut seen: HashMap<Instr, usize> = HashMap::new();
    let mut batches: BTreeSet<(Pipeline, usize)> = BTreeSet::new();
    let mut home: HashMap<(Pipeline, usize), usize> = HashMap::new();
    for (w, stream) in schedule.iter().enumerate() {
        for &op in stream {
            if op.stage() >= d {
                return Err(SimError::StageOutOfRange {
                    instr: op,
                    stages: d,
                });
            }
            let worker = *home.entry((op.pipeline(), op.stage())).or_insert(w);
            if worker != w {
                return Err(SimError::StageOnTwoWorkers {
                    instr: op,
                    first: worker,
                    second: w,
                });
            }
            if let Some(&first) = seen.get(&op) {
                return Err(SimError::Duplicate {
                    instr: op,
                    first,
                    second: w,
                });
            }
            seen.insert(op, w);
            batches.insert((op.pipeline(), op.micro_batch()));
        }
    }
    for &(pipeline, micro_batch) in &batches {
        for stage in 0..d {
            let op = |pass| Instr::new(pass, stage, micro_batch, pipeline);
            let worker = |pass| seen.get(&op(pass)).copied();
            let (input, weight) = (worker(Pass::BackwardInput), worker(Pass::BackwardWeight));
            let split = input.is_some() || weight.is_some();
            if split && worker(Pass::Backward).is_some() {
                return Err(SimError::BothBackwards {
                    instr: op(Pass::Backward),
                });
            }
            if let (Some(input_worker), Some(weight_worker)) = (input, weight) {
                if input_worker != weight_worker {
                    return Err(SimError::SplitApart {
                        instr: op(Pass::BackwardWeight),
                        input_worker,
                        weight_worker,
                    });
                }
            }
            let needed: &[Pass] = if split {
                &[Pass::Forward, Pass::BackwardInput, Pass::BackwardWeight]
            } else {
                &[Pass::Forward, Pass::Backward]
            };
            if let Some(&missing) = needed.iter().find(|&&p| !seen.contains_key(&op(p))) {
                return Err(SimError::Missing { instr: op(missing) });
            }
        }
    }
    Ok(())
}

/// Replays `schedule` on `costs`.
pub fn simulate(
    schedule: &Schedule,
    costs: &StageCosts,
    execution: Execution,
) -> Result<SimReport, SimError> {
    let d = costs.stages();
    check_streams(schedule, d)?;
    // Lanes: one per worker, or a forward and a backward lane per worker (FBP).
    let lanes: Vec<(usize, Vec<Instr>)> = match execution {
        Execution::ForwardBackwardParallel => schedule
            .iter()
            .enumerate()
            .flat_map(|(w, s)| {
                let (fw, bw): (Vec<Instr>, Vec<Instr>) = s.iter().partition(|op| op.is_forward());
                [(w, fw), (w, bw)]
            })
            .collect(),
        _ => schedule.iter().cloned().enumerate().collect(),
    };
    let duration = |op: Instr| match (execution, op.pass()) {
        (Execution::ForwardBackwardParallel, Pass::Forward | Pass::Backward) => {
            costs.forward_seconds[op.stage()] + costs.backward_seconds[op.stage()]
        }
        _ => costs.seconds(op),
    };
    let mut worker_of: HashMap<Instr, usize> = HashMap::new();
    for (w, s) in schedule.iter().enumerate() {
        for op in s {
            worker_of.insert(*op, w);
        }
    }
    // The gradient a stage receives comes from the next stage's input gradient where that
    // stage splits its backward.
    let producer = |dep: Instr| match dep.pass() {
        Pass::Backward if !worker_of.contains_key(&dep) => dep.with_pass(Pass::BackwardInput),
        _ => dep,
    };
    let mut end: HashMap<Instr, f64> = HashMap::new();
    let mut next = vec![0usize; lanes.len()];
    let mut free = vec![0.0f64; lanes.len()];
    let workers = schedule.len();
    let mut intervals = vec![Vec::new(); workers];
    loop {
        let mut progress = false;
        for (lane, (w, stream)) in lanes.iter().enumerate() {
            // When `op`'s input is there on worker `w` (None: not yet produced).
            let input_ready = |op: Instr, end: &HashMap<Instr, f64>| -> Option<f64> {
                let Some(dep) = op.input(d).map(producer) else {
                    return Some(0.0);
                };
                let t = *end.get(&dep)?;
                let remote = worker_of.get(&dep) != Some(w);
                let cut = if op.is_forward() {
                    dep.stage()
                } else {
                    op.stage()
                };
                let transfer = match execution {
                    Execution::Serial | Execution::OverlappedPairs if remote => {
                        costs.transfer_seconds[cut]
                    }
                    _ => 0.0,
                };
                Some(t + transfer)
            };
            while let Some(&op) = stream.get(next[lane]) {
                let Some(mut ready) = input_ready(op, &end) else {
                    break;
                };
                let partner = stream.get(next[lane] + 1).filter(|then| {
                    execution == Execution::OverlappedPairs
                        && op.pass() == Pass::Forward
                        && then.pass() == Pass::Backward
                });
                if let Some(&then) = partner {
                    let Some(t) = input_ready(then, &end) else {
                        break;
                    };
                    ready = ready.max(t);
                }
                let start = ready.max(free[lane]);
                free[lane] = start + duration(op);
                end.insert(op, free[lane]);
                intervals[*w].push((start, free[lane], op));
                next[lane] += 1;
                progress = true;
            }
        }
        if next.iter().zip(&lanes).all(|(&i, (_, s))| i == s.len()) {
            break;
        }
        if !progress {
            let (lane, (worker, stream)) = lanes
                .iter()
                .enumerate()
                .find(|(l, (_, s))| next[*l] < s.len())
                .expect("some lane has operations left");
            return Err(SimError::Deadlock {
                worker: *worker,
                instr: stream[next[lane]],
            });
        }
    }
    for iv in &mut intervals {
        iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let makespan = free.iter().cloned().fold(0.0, f64::max);
    let timeline = Timeline {
        makespan,
        intervals,
    };
    let work_seconds: Vec<f64> = schedule
        .iter()
        .map(|s| s.iter().map(|&op| costs.seconds(op)).sum())
        .collect();
    let bubble_ratio = if makespan > 0.0 {
        1.0 - work_seconds.iter().sum::<f64>() / (workers as f64 * makespan)
    } else {
        0.0
    };
    let memory = (0..workers)
        .map(|w| worker_memory(schedule, costs, &timeline, &worker_of, w))
        .collect();
    Ok(SimReport {
        makespan_seconds: makespan,
        bubble_ratio,
        work_seconds,
        memory,
        timeline,
    })
}

fn worker_memory(
    schedule: &Schedule,
    costs: &StageCosts,
    timeline: &Timeline,
    worker_of: &HashMap<Instr, usize>,
    w: usize,
) -> WorkerMemory {
    let d = costs.stages();
    let held: BTreeSet<(Pipeline, usize)> = schedule[w]
        .iter()
        .map(|op| (op.pipeline(), op.stage()))
        .collect();
    let mut weight_bytes = 0.0;
    let mut buffer_bytes = 0.0;
    for &(pipeline, stage) in &held {
        weight_bytes += 2.0 * costs.weight_bytes[stage];
        // A representative micro-batch of this replica tells where its neighbours run.
        let any = schedule[w]
            .iter()
            .find(|op| op.pipeline() == pipeline && op.stage() == stage)
            .map(|op| op.micro_batch())
            .unwrap_or(0);
        let elsewhere = |s: usize| {
            let op = Instr::Forward {
                stage: s,
                micro_batch: any,
                pipeline,
            };
            worker_of.get(&op).is_some_and(|&x| x != w)
        };
        if stage > 0 && elsewhere(stage - 1) {
            buffer_bytes += 2.0 * costs.input_bytes[stage];
        }
        if stage + 1 < d && elsewhere(stage + 1) {
            buffer_bytes += 2.0 * costs.output_bytes[stage];
        }
    }
    let (activation_peak_bytes, peak_live) = activation_peak(timeline, costs, w);
    WorkerMemory {
        weight_bytes,
        buffer_bytes,
        activation_peak_bytes,
        peak_bytes: weight_bytes + buffer_bytes + activation_peak_bytes,
        peak_live,
        replicas: held.len(),
    }
}

/// Section 6's activations: a forward adds its stage's stash when it starts, a backward
/// removes it when it ends. A split backward removes it in two parts (section 7): the input
/// gradient all but what the weight gradient reads, the weight gradient the rest. A
/// micro-batch is live from its forward's start to the end of its (input) gradient. Events
/// at one instant count in the order the worker runs them: a backward that ends as a
/// forward starts has finished by then, and a stage of zero duration still holds its stash
/// at the instant its forward starts (its backward runs after it).
fn activation_peak(t: &Timeline, costs: &StageCosts, worker: usize) -> (f64, usize) {
    // (instant, position in the worker's run order, live micro-batches added, bytes added)
    let mut events: Vec<(f64, usize, i8, f64)> = Vec::new();
    for (position, &(start, end, op)) in t.intervals[worker].iter().enumerate() {
        let s = op.stage();
        let (stash, kept) = (costs.stash_bytes[s], costs.weight_gradient_stash(s));
        events.push(match op.pass() {
            Pass::Forward => (start, position, 1, stash),
            Pass::Backward => (end, position, -1, -stash),
            Pass::BackwardInput => (end, position, -1, kept - stash),
            Pass::BackwardWeight => (end, position, 0, -kept),
        });
    }
    let eps = 1e-9 * t.makespan.max(1e-300);
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    // Merge instants closer than eps, then take them in run order.
    let mut i = 0;
    let (mut bytes, mut live) = (0.0f64, 0i64);
    let (mut peak_bytes, mut peak_live) = (0.0f64, 0i64);
    while i < events.len() {
        let t0 = events[i].0;
        // At least event i, whatever its instant (an infinite one compares as NaN).
        let mut j = i + 1;
        while j < events.len() && events[j].0 - t0 <= eps {
            j += 1;
        }
        let mut group: Vec<_> = events[i..j].to_vec();
        group.sort_by_key(|e| e.1);
        for (_, _, delta, b) in group {
            bytes += b;
            live += i64::from(delta);
            peak_bytes = peak_bytes.max(bytes);
            peak_live = peak_live.max(live);
        }
        i = j;
    }
    (peak_bytes, peak_live.max(0) as usize)
}

/// Simulates `schedule` for `d` stages with per-stage forward/backward times and the
/// transfer time `comm[s]` after stage `s` (both directions), serial execution.
pub fn simulate_times(
    schedule: &Schedule,
    d: usize,
    tf: &[f64],
    tb: &[f64],
    comm: &[f64],
) -> Result<Timeline, SimError> {
    let costs = StageCosts {
        forward_seconds: tf.to_vec(),
        backward_seconds: tb.to_vec(),
        transfer_seconds: comm.to_vec(),
        ..StageCosts::uniform(d, 0.0, 0.0, 0.0)
    };
    simulate(schedule, &costs, Execution::Serial).map(|r| r.timeline)
}

/// Peak number of micro-batches live on `worker` (section 6: F started, B not finished),
/// counted over all stages and pipelines the worker holds.
pub fn peak_live(t: &Timeline, worker: usize) -> usize {
    let d = t.intervals.len();
    let ones = StageCosts::uniform(d.max(1), 0.0, 0.0, 0.0);
    let max_stage = t.intervals[worker]
        .iter()
        .map(|x| x.2.stage())
        .max()
        .unwrap_or(0);
    let costs = if max_stage < ones.stages() {
        ones
    } else {
        StageCosts::uniform(max_stage + 1, 0.0, 0.0, 0.0)
    };
    activation_peak(t, &costs, worker).1
}

/// The set of distinct operations, for tests.
pub fn operations(schedule: &Schedule) -> HashSet<Instr> {
    schedule.iter().flatten().copied().collect()
}

#[cfg(test)]
mod tests {
    use super::super::{b, dapple::dapple, f, gpipe::gpipe};
    use super::*;

    #[test]
    fn textbook_makespan() {
        // GPipe/DAPPLE with equal stage times and no communication: (N + D - 1)(tf + tb).
        for d in 1..6 {
            for n in d..3 * d {
                let (tf, tb) = (vec![1.0; d], vec![2.0; d]);
                let want = (n + d - 1) as f64 * 3.0;
                for s in [gpipe(d, n), dapple(d, n)] {
                    let t = simulate_times(&s, d, &tf, &tb, &vec![0.0; d]).unwrap();
                    assert!((t.makespan - want).abs() < 1e-9, "d={d} n={n}");
                }
            }
        }
    }

    #[test]
    fn dapple_holds_d_live_gpipe_n() {
        for d in 2..6 {
            for n in d..3 * d {
                let z = vec![0.0; d];
                let t = simulate_times(&dapple(d, n), d, &vec![1.0; d], &vec![2.0; d], &z);
                assert_eq!(peak_live(&t.unwrap(), 0), d);
                let t = simulate_times(&gpipe(d, n), d, &vec![1.0; d], &vec![2.0; d], &z);
                assert_eq!(peak_live(&t.unwrap(), 0), n);
            }
        }
    }

    #[test]
    fn peaks_are_counted_when_an_instant_is_infinite() {
        // A transfer that never ends puts later instants at infinity, where two instants
        // differ by NaN: the peak count must still end, with every event counted once.
        let d = 2;
        let t = simulate_times(&gpipe(d, 3), d, &[1.0; 2], &[1.0; 2], &[f64::INFINITY, 0.0]);
        let t = t.unwrap();
        assert!(t.makespan.is_infinite());
        assert_eq!(peak_live(&t, 1), 3);
    }

    #[test]
    fn a_bandwidth_whose_transfers_outlast_every_duration_is_refused() {
        let inst = crate::nets::random::random_chain(1, 4);
        let e = StageCosts::from_instance(&inst, &[0, 2], 1e-310).unwrap_err();
        assert!(matches!(e, PartitionError::Bandwidth(_)), "{e}");
        assert!(e.to_string().contains("longest duration"), "{e}");
        // The same bandwidth is fine where no transfer follows (one stage).
        assert!(StageCosts::from_instance(&inst, &[0], 1e-310).is_ok());
        assert!(StageCosts::from_instance(&inst, &[0, 2], 1e6).is_ok());
    }

    #[test]
    fn deadlock_is_reported() {
        let s = vec![vec![b(0, 0), f(0, 0)], vec![f(1, 0), b(1, 0)]];
        let e = simulate_times(&s, 2, &[1.0; 2], &[1.0; 2], &[0.0; 2]).unwrap_err();
        assert_eq!(
            e,
            SimError::Deadlock {
                worker: 0,
                instr: b(0, 0)
            }
        );
        assert!(e.to_string().contains("Backward"));
    }

    #[test]
    fn missing_and_duplicate_operations_are_named() {
        let s = vec![vec![f(0, 0), b(0, 0)], vec![f(1, 0)]];
        let e = simulate(
            &s,
            &StageCosts::uniform(2, 1.0, 2.0, 0.0),
            Execution::Serial,
        );
        assert_eq!(e.unwrap_err(), SimError::Missing { instr: b(1, 0) });
        let s = vec![vec![f(0, 0), b(0, 0)], vec![f(1, 0), b(1, 0), f(1, 0)]];
        let e = simulate(
            &s,
            &StageCosts::uniform(2, 1.0, 2.0, 0.0),
            Execution::Serial,
        );
        assert!(matches!(e.unwrap_err(), SimError::Duplicate { .. }));
    }

    #[test]
    fn a_zero_duration_stage_holds_its_stash_at_its_forward() {
        // The last stage takes no time: under 1F1B each micro-batch's forward and backward
        // run at one instant there, one micro-batch after the other. Its stash is allocated
        // all the same, one micro-batch's at a time.
        let mut costs = StageCosts::uniform(2, 1.0, 2.0, 0.0);
        costs.forward_seconds[1] = 0.0;
        costs.backward_seconds[1] = 0.0;
        costs.stash_bytes = vec![1.0, 10.0];
        let r = simulate(&dapple(2, 3), &costs, Execution::Serial).unwrap();
        assert_eq!(r.memory[1].activation_peak_bytes, 10.0);
        assert_eq!(r.memory[1].peak_live, 1);
        // GPipe runs every forward first: the three micro-batches are live together.
        let r = simulate(&gpipe(2, 3), &costs, Execution::Serial).unwrap();
        assert_eq!(r.memory[1].peak_live, 3);
    }

    #[test]
    fn dapple_memory_follows_section_six() {
        // 1F1B: worker s holds D - s stashes at its peak, weights 2 W, buffers where a
        // neighbour is remote.
        let d = 4;
        let mut costs = StageCosts::uniform(d, 1.0, 2.0, 0.0);
        costs.input_bytes = vec![10.0; d];
        costs.output_bytes = vec![100.0; d];
        let r = simulate(&dapple(d, 8), &costs, Execution::Serial).unwrap();
        for (s, m) in r.memory.iter().enumerate() {
            assert_eq!(m.peak_live, d - s);
            assert_eq!(m.weight_bytes, 2.0);
            let buffers = if s > 0 { 20.0 } else { 0.0 } + if s + 1 < d { 200.0 } else { 0.0 };
            assert_eq!(m.buffer_bytes, buffers);
        }
    }
}
