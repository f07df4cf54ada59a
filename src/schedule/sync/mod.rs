//! docs/model.md section 7: synchronous pipeline schedules as data, one ordered instruction
//! stream per worker, and their simulator (`sim`).
//!
//! Generators are pure functions of the pipeline shape: `gpipe`, `dapple` (1F1B with a
//! flush), `gems`, `chimera`, `mixpipe` (with its eq. (1)-(5) search) and `bapipe`
//! (1F1B-SNO, 1F1B-SO, 1F1B-AS, FBP-AS and its exploration). The bidirectional ones are
//! built by `list`, a list scheduler run on nominal durations (backward = 2 x forward, the
//! papers' assumption); the streams it records are then replayed by `sim` with any real
//! stage times.
//!
//! Micro-batches are numbered `0..N` over both pipelines of a bidirectional scheme: the down
//! pipeline carries `0..N/2`, the up pipeline `N/2..N`.

pub mod bapipe;
pub mod chimera;
pub mod costs;
pub mod dapple;
pub mod gems;
pub mod gpipe;
pub mod hybrid;
pub mod list;
pub mod mixpipe;
pub mod sim;

use serde::{Deserialize, Serialize};

/// Direction of a pipeline: `Down` runs stage 0 on worker 0; `Up` (bidirectional schemes)
/// runs stage 0 on worker D-1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Pipeline {
    Down,
    Up,
}

impl Pipeline {
    /// The worker that runs `stage` of this pipeline in a `d`-stage scheme.
    pub fn worker(self, stage: usize, d: usize) -> usize {
        match self {
            Pipeline::Down => stage,
            Pipeline::Up => d - 1 - stage,
        }
    }
}

/// One operation of a worker's stream. Stages and micro-batches are numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Instr {
    Forward {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
    Backward {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
}

impl Instr {
    pub fn stage(self) -> usize {
        match self {
            Instr::Forward { stage, .. } | Instr::Backward { stage, .. } => stage,
        }
    }

    pub fn micro_batch(self) -> usize {
        match self {
            Instr::Forward { micro_batch, .. } | Instr::Backward { micro_batch, .. } => micro_batch,
        }
    }

    pub fn pipeline(self) -> Pipeline {
        match self {
            Instr::Forward { pipeline, .. } | Instr::Backward { pipeline, .. } => pipeline,
        }
    }

    pub fn is_forward(self) -> bool {
        matches!(self, Instr::Forward { .. })
    }

    /// The operation whose output this one consumes (docs/model.md section 4), if any.
    pub fn input(self, d: usize) -> Option<Instr> {
        match self {
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

    /// Short label for tables and drawings: `F3d`, `B0u` (micro-batch, pipeline).
    pub fn label(self) -> String {
        let kind = if self.is_forward() { 'F' } else { 'B' };
        let dir = match self.pipeline() {
            Pipeline::Down => 'd',
            Pipeline::Up => 'u',
        };
        format!("{kind}{}{dir}", self.micro_batch())
    }
}

/// One ordered stream per worker: `schedule[w]` is worker `w`'s program.
pub type Schedule = Vec<Vec<Instr>>;

/// Bad pipeline shapes and schedules that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SyncError {
    #[error("{schedule}: {reason}")]
    Shape {
        schedule: &'static str,
        reason: String,
    },
    #[error("{schedule}: the list scheduler is stuck at tick {tick} with {left} operations left (the live-micro-batch cap {cap} leaves no worker an operation it may start)")]
    Stuck {
        schedule: &'static str,
        tick: u64,
        left: usize,
        cap: usize,
    },
}

pub(crate) fn shape_error(schedule: &'static str, reason: impl Into<String>) -> SyncError {
    SyncError::Shape {
        schedule,
        reason: reason.into(),
    }
}

pub(crate) fn f(stage: usize, micro_batch: usize) -> Instr {
    Instr::Forward {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

pub(crate) fn b(stage: usize, micro_batch: usize) -> Instr {
    Instr::Backward {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

/// Every schedule the `sync` command knows, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum ScheduleKind {
    Gpipe,
    Dapple,
    Gems,
    Chimera,
    /// Chimera's forward doubling for N > D (`chimera::forward_doubling`).
    ChimeraDoubling,
    /// `k`: micro-batches injected before the first backward (even, 2..=D for N = D; up to
    /// 2(D-1) with N > D); `gamma`: early forwards (2F1B), raising the live cap to K + Gamma.
    Mixpipe {
        k: usize,
        gamma: usize,
    },
    /// MixPipe's "K maximizing" for N > D (Zhang et al., DAC 2023, section III-C).
    MixpipeKMax,
    Bapipe1f1bSno,
    Bapipe1f1bSo,
    Bapipe1f1bAs,
    BapipeFbpAs,
}

impl ScheduleKind {
    /// The schedule named `name` for D = `d` stages and N = `n` micro-batches: gpipe,
    /// dapple (or 1f1b), gems, chimera, chimera-doubling, mixpipe (with K, D by default, and
    /// Gamma checked by [`mixpipe::check_k_gamma`]), mixpipe-kmax, 1f1b-sno, 1f1b-so,
    /// 1f1b-as, fbp-as.
    pub fn named(
        name: &str,
        d: usize,
        n: usize,
        k: Option<usize>,
        gamma: usize,
    ) -> Result<ScheduleKind, crate::InputError> {
        Ok(match name {
            "gpipe" => ScheduleKind::Gpipe,
            "dapple" | "1f1b" => ScheduleKind::Dapple,
            "gems" => ScheduleKind::Gems,
            "chimera" => ScheduleKind::Chimera,
            "chimera-doubling" => ScheduleKind::ChimeraDoubling,
            "mixpipe" => {
                let k = k.unwrap_or(d);
                mixpipe::check_k_gamma(d, n, k, gamma)?;
                ScheduleKind::Mixpipe { k, gamma }
            }
            "mixpipe-kmax" => ScheduleKind::MixpipeKMax,
            "1f1b-sno" => ScheduleKind::Bapipe1f1bSno,
            "1f1b-so" => ScheduleKind::Bapipe1f1bSo,
            "1f1b-as" => ScheduleKind::Bapipe1f1bAs,
            "fbp-as" => ScheduleKind::BapipeFbpAs,
            other => {
                return Err(crate::InputError::new(
                    "--schedule",
                    "",
                    format!("unknown schedule {other:?}"),
                ))
            }
        })
    }

    pub fn name(self) -> String {
        match self {
            ScheduleKind::Gpipe => "gpipe".into(),
            ScheduleKind::Dapple => "dapple".into(),
            ScheduleKind::Gems => "gems".into(),
            ScheduleKind::Chimera => "chimera".into(),
            ScheduleKind::ChimeraDoubling => "chimera-doubling".into(),
            ScheduleKind::Mixpipe { k, gamma } => format!("mixpipe(K={k},Gamma={gamma})"),
            ScheduleKind::MixpipeKMax => "mixpipe-kmax".into(),
            ScheduleKind::Bapipe1f1bSno => "1f1b-sno".into(),
            ScheduleKind::Bapipe1f1bSo => "1f1b-so".into(),
            ScheduleKind::Bapipe1f1bAs => "1f1b-as".into(),
            ScheduleKind::BapipeFbpAs => "fbp-as".into(),
        }
    }

    /// Whether each worker holds two stage replicas (two weight copies).
    pub fn bidirectional(self) -> bool {
        matches!(
            self,
            ScheduleKind::Gems
                | ScheduleKind::Chimera
                | ScheduleKind::ChimeraDoubling
                | ScheduleKind::Mixpipe { .. }
                | ScheduleKind::MixpipeKMax
        )
    }

    /// How the simulator runs the streams (see `sim::Execution`).
    pub fn execution(self) -> sim::Execution {
        match self {
            ScheduleKind::Bapipe1f1bAs => sim::Execution::StreamedCommunication,
            ScheduleKind::BapipeFbpAs => sim::Execution::ForwardBackwardParallel,
            _ => sim::Execution::Serial,
        }
    }

    /// The streams for `d` stages and `n` micro-batches.
    pub fn generate(self, d: usize, n: usize) -> Result<Schedule, SyncError> {
        if d == 0 || n == 0 {
            return Err(shape_error(
                "schedule",
                format!("needs at least one stage and one micro-batch (D = {d}, N = {n})"),
            ));
        }
        match self {
            ScheduleKind::Gpipe => Ok(gpipe::gpipe(d, n)),
            ScheduleKind::Dapple => Ok(dapple::dapple(d, n)),
            ScheduleKind::Gems => gems::gems(d, n),
            ScheduleKind::Chimera => chimera::chimera(d, n),
            ScheduleKind::ChimeraDoubling => chimera::forward_doubling(d, n),
            ScheduleKind::Mixpipe { k, gamma } => mixpipe::mixpipe(d, n, k, gamma),
            ScheduleKind::MixpipeKMax => mixpipe::k_maximizing(d, n),
            ScheduleKind::Bapipe1f1bSno => Ok(bapipe::one_f_one_b_sno(d, n)),
            ScheduleKind::Bapipe1f1bSo => Ok(bapipe::one_f_one_b_so(d, n)),
            ScheduleKind::Bapipe1f1bAs => Ok(bapipe::one_f_one_b_as(d, n)),
            ScheduleKind::BapipeFbpAs => Ok(bapipe::fbp_as(d, n)),
        }
    }
}

impl ScheduleKind {
    /// [`ScheduleKind::generate`] for stage costs at hand: Chimera keeps the fastest of its
    /// drawings on `costs` (`chimera::chimera_for`); every other schedule is independent of
    /// the costs.
    pub fn generate_for(
        self,
        d: usize,
        n: usize,
        costs: &sim::StageCosts,
    ) -> Result<Schedule, SyncError> {
        match self {
            ScheduleKind::Chimera if d > 0 && n > 0 => chimera::chimera_for(d, n, costs),
            _ => self.generate(d, n),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every (stage, micro-batch, F/B) appears exactly once, on worker == stage.
    pub(crate) fn check_single_pipeline(s: &Schedule, d: usize, n: usize) {
        assert_eq!(s.len(), d);
        let mut seen = HashSet::new();
        for (w, stream) in s.iter().enumerate() {
            assert_eq!(stream.len(), 2 * n);
            for op in stream {
                assert_eq!(op.stage(), w);
                assert!(seen.insert(*op), "{op:?} twice");
            }
        }
        assert_eq!(seen.len(), 2 * n * d);
    }

    #[test]
    fn gpipe_and_dapple_hold_every_op_once() {
        for d in 1..6 {
            for n in 1..12 {
                check_single_pipeline(&gpipe::gpipe(d, n), d, n);
                check_single_pipeline(&dapple::dapple(d, n), d, n);
            }
        }
    }

    #[test]
    fn dapple_worker0_warms_up_d_forwards() {
        let s = dapple::dapple(4, 8);
        assert_eq!(&s[0][..5], &[f(0, 0), f(0, 1), f(0, 2), f(0, 3), b(0, 0)]);
        assert_eq!(&s[3][..3], &[f(3, 0), b(3, 0), f(3, 1)]);
    }

    #[test]
    fn up_pipeline_maps_stage_zero_to_the_last_worker() {
        assert_eq!(Pipeline::Up.worker(0, 4), 3);
        assert_eq!(Pipeline::Down.worker(0, 4), 0);
    }
}
