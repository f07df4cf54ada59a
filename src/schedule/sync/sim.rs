//! A minimal stream simulator (MODEL.md section 7, timing only): each op starts when its
//! worker is free (in stream order) and its input is done, plus a transfer time when the
//! input was produced on another worker; transfers overlap compute. Memory is not modelled
//! yet.

use std::collections::HashMap;

use super::{Instr, Pipeline, Schedule};

/// A stream order that can never progress.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("deadlock: worker {worker} waits forever at {instr:?}")]
pub struct Deadlock {
    pub worker: usize,
    pub instr: Instr,
}

/// Makespan and per-worker (start, end, instr) intervals.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub makespan: f64,
    pub intervals: Vec<Vec<(f64, f64, Instr)>>,
}

fn input_of(op: Instr, d: usize) -> Option<Instr> {
    match op {
        Instr::Forward { stage: 0, .. } => None,
        Instr::Forward {
            stage,
            micro_batch,
            pipeline,
        } => Some(Instr::Forward {
            stage: stage - 1,
            micro_batch,
            pipeline,
        }),
        Instr::Backward {
            stage,
            micro_batch,
            pipeline,
        } if stage + 1 == d => Some(Instr::Forward {
            stage,
            micro_batch,
            pipeline,
        }),
        Instr::Backward {
            stage,
            micro_batch,
            pipeline,
        } => Some(Instr::Backward {
            stage: stage + 1,
            micro_batch,
            pipeline,
        }),
    }
}

/// Simulates `schedule` for `d` stages with per-stage forward/backward times and the
/// transfer time `comm[s]` after stage `s` (both directions).
pub fn simulate_times(
    schedule: &Schedule,
    d: usize,
    tf: &[f64],
    tb: &[f64],
    comm: &[f64],
) -> Result<Timeline, Deadlock> {
    let mut worker_of: HashMap<Instr, usize> = HashMap::new();
    for (w, s) in schedule.iter().enumerate() {
        for op in s {
            worker_of.insert(*op, w);
        }
    }
    let mut end: HashMap<Instr, f64> = HashMap::new();
    let mut next = vec![0usize; schedule.len()];
    let mut free = vec![0.0f64; schedule.len()];
    let mut intervals = vec![Vec::new(); schedule.len()];
    loop {
        let mut progress = false;
        for w in 0..schedule.len() {
            while let Some(&op) = schedule[w].get(next[w]) {
                let (stage, dur, _p): (usize, f64, Pipeline) = match op {
                    Instr::Forward {
                        stage, pipeline, ..
                    } => (stage, tf[stage], pipeline),
                    Instr::Backward {
                        stage, pipeline, ..
                    } => (stage, tb[stage], pipeline),
                };
                let ready = match input_of(op, d) {
                    None => 0.0,
                    Some(dep) => match end.get(&dep) {
                        None => break,
                        Some(&t) => {
                            let cut = match dep {
                                Instr::Forward { stage: s, .. } if s != stage => s,
                                Instr::Backward { .. } => stage,
                                _ => usize::MAX,
                            };
                            let remote = worker_of.get(&dep) != Some(&w);
                            t + if remote && cut != usize::MAX {
                                comm[cut]
                            } else {
                                0.0
                            }
                        }
                    },
                };
                let start = ready.max(free[w]);
                free[w] = start + dur;
                end.insert(op, start + dur);
                intervals[w].push((start, start + dur, op));
                next[w] += 1;
                progress = true;
            }
        }
        if next.iter().zip(schedule).all(|(&i, s)| i == s.len()) {
            break;
        }
        if !progress {
            let worker = (0..schedule.len())
                .find(|&w| next[w] < schedule[w].len())
                .unwrap_or(0);
            return Err(Deadlock {
                worker,
                instr: schedule[worker][next[worker]],
            });
        }
    }
    let makespan = free.iter().cloned().fold(0.0, f64::max);
    Ok(Timeline {
        makespan,
        intervals,
    })
}

/// Peak number of micro-batches live on `worker` (section 6: F started, B not finished),
/// counted over all stages and pipelines the worker holds.
pub fn peak_live(t: &Timeline, worker: usize) -> usize {
    let mut events: Vec<(f64, i32)> = Vec::new();
    for &(start, end, op) in &t.intervals[worker] {
        match op {
            Instr::Forward { .. } => events.push((start, 1)),
            Instr::Backward { .. } => events.push((end, -1)),
        }
    }
    // At equal times a release (B finished) counts before an acquisition.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut live, mut peak) = (0i32, 0i32);
    for (_, delta) in events {
        live += delta;
        peak = peak.max(live);
    }
    peak as usize
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
    fn deadlock_is_reported() {
        let s = vec![vec![b(0, 0), f(0, 0)], vec![f(1, 0), b(1, 0)]];
        let e = simulate_times(&s, 2, &[1.0; 2], &[1.0; 2], &[0.0; 2]).unwrap_err();
        assert_eq!(e.worker, 0);
        assert_eq!(e.instr, b(0, 0));
    }
}
