//! docs/model.md section 7: synchronous pipeline schedules as data, one ordered instruction
//! stream per worker, and their simulator (`sim`).
//!
//! Generators are pure functions of the pipeline shape: `gpipe`, `dapple` (1F1B with a
//! flush), `gems`, `chimera`, `mixpipe` (with its eq. (1)-(5) search), `bapipe`
//! (1F1B-SNO, 1F1B-SO, 1F1B-AS, FBP-AS and its exploration), `zero_bubble` (ZB-H1,
//! ZB-H2 and ZB-V, whose backwards are split into input and weight gradients),
//! `interleaved` (Megatron-LM's interleaved 1F1B, several stages per worker),
//! `breadth_first` (the same placement run breadth first) and `dual_pipe_v` (DeepSeek's
//! DualPipeV, two stages per worker in a V). The bidirectional ones are
//! built by `list`, a list scheduler run on nominal durations (backward = 2 x forward, the
//! papers' assumption); the streams it records are then replayed by `sim` with any real
//! stage times.
//!
//! Each schedule's file also defines its `registry::ScheduleDescriptor`; [`SCHEDULES`] lists
//! them, and everything that picks a schedule by name reads that table.
//!
//! Micro-batches are numbered `0..N` over both pipelines of a bidirectional scheme: the down
//! pipeline carries `0..N/2`, the up pipeline `N/2..N`.

pub mod bapipe;
pub mod breadth_first;
pub mod chimera;
pub mod costs;
pub mod dapple;
pub mod dual_pipe_v;
pub mod file;
pub mod gems;
pub mod gpipe;
pub mod hybrid;
pub mod interleaved;
pub mod list;
pub mod mixpipe;
pub mod registry;
pub mod sim;
pub mod torch_csv;
pub mod zero_bubble;

use serde::{Deserialize, Serialize};

pub use registry::{KGamma, OptimumTarget, Placement, ScheduleDescriptor, ScheduleKind};

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
    /// The first part of a split backward (zero-bubble schedules, docs/model.md section 7):
    /// the gradient of the stage's input, which the stage before waits for.
    BackwardInput {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
    /// The second part: the gradient of the stage's weights, after its own
    /// [`Instr::BackwardInput`] on the same worker; nothing waits for it but the iteration's
    /// end.
    BackwardWeight {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
}

/// What an operation computes, without its stage and micro-batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pass {
    Forward,
    /// The whole backward (input and weight gradients together).
    Backward,
    BackwardInput,
    BackwardWeight,
}

impl Instr {
    /// The operation of `pass` of `stage` for `micro_batch` on `pipeline`.
    pub fn new(pass: Pass, stage: usize, micro_batch: usize, pipeline: Pipeline) -> Instr {
        match pass {
            Pass::Forward => Instr::Forward {
                stage,
                micro_batch,
                pipeline,
            },
            Pass::Backward => Instr::Backward {
                stage,
                micro_batch,
                pipeline,
            },
            Pass::BackwardInput => Instr::BackwardInput {
                stage,
                micro_batch,
                pipeline,
            },
            Pass::BackwardWeight => Instr::BackwardWeight {
                stage,
                micro_batch,
                pipeline,
            },
        }
    }

    /// The pass, stage, micro-batch and pipeline.
    pub fn parts(self) -> (Pass, usize, usize, Pipeline) {
        match self {
            Instr::Forward {
                stage,
                micro_batch,
                pipeline,
            } => (Pass::Forward, stage, micro_batch, pipeline),
            Instr::Backward {
                stage,
                micro_batch,
                pipeline,
            } => (Pass::Backward, stage, micro_batch, pipeline),
            Instr::BackwardInput {
                stage,
                micro_batch,
                pipeline,
            } => (Pass::BackwardInput, stage, micro_batch, pipeline),
            Instr::BackwardWeight {
                stage,
                micro_batch,
                pipeline,
            } => (Pass::BackwardWeight, stage, micro_batch, pipeline),
        }
    }

    pub fn pass(self) -> Pass {
        self.parts().0
    }

    pub fn stage(self) -> usize {
        self.parts().1
    }

    pub fn micro_batch(self) -> usize {
        self.parts().2
    }

    pub fn pipeline(self) -> Pipeline {
        self.parts().3
    }

    pub fn is_forward(self) -> bool {
        matches!(self, Instr::Forward { .. })
    }

    /// The same operation with another pass.
    pub fn with_pass(self, pass: Pass) -> Instr {
        let (_, stage, micro_batch, pipeline) = self.parts();
        Instr::new(pass, stage, micro_batch, pipeline)
    }

    /// The operation whose output this one consumes (docs/model.md section 4), if any. A
    /// backward's (or input gradient's) is written as the next stage's whole backward: where
    /// that stage splits its backward, the simulator takes its [`Instr::BackwardInput`]. A
    /// weight gradient consumes its own stage's input gradient.
    pub fn input(self, d: usize) -> Option<Instr> {
        let (pass, stage, micro_batch, pipeline) = self.parts();
        let at = |pass, stage| Some(Instr::new(pass, stage, micro_batch, pipeline));
        match pass {
            Pass::Forward if stage == 0 => None,
            Pass::Forward => at(Pass::Forward, stage - 1),
            Pass::BackwardWeight => at(Pass::BackwardInput, stage),
            Pass::Backward | Pass::BackwardInput if stage + 1 == d => at(Pass::Forward, stage),
            Pass::Backward | Pass::BackwardInput => at(Pass::Backward, stage + 1),
        }
    }

    /// Short label for tables and drawings: `F3d`, `B0u`, `I2d`, `W2d` (micro-batch,
    /// pipeline).
    pub fn label(self) -> String {
        let kind = match self.pass() {
            Pass::Forward => 'F',
            Pass::Backward => 'B',
            Pass::BackwardInput => 'I',
            Pass::BackwardWeight => 'W',
        };
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

pub(crate) fn input_gradient(stage: usize, micro_batch: usize) -> Instr {
    Instr::BackwardInput {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

pub(crate) fn weight_gradient(stage: usize, micro_batch: usize) -> Instr {
    Instr::BackwardWeight {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

/// Every synchronous schedule, in the order of the tables, `sync --schedule`'s help and the
/// sweep's approaches: a new schedule is its file (with its [`ScheduleDescriptor`]) and one
/// entry here.
pub static SCHEDULES: &[&ScheduleDescriptor] = &[
    &gpipe::GPIPE,
    &dapple::DAPPLE,
    &gems::GEMS,
    &chimera::CHIMERA,
    &chimera::CHIMERA_DOUBLING,
    &mixpipe::MIXPIPE,
    &mixpipe::MIXPIPE_K_MAX,
    &bapipe::ONE_F_ONE_B_SNO,
    &bapipe::ONE_F_ONE_B_SO,
    &bapipe::ONE_F_ONE_B_AS,
    &bapipe::FBP_AS,
    &zero_bubble::ZB_H1,
    &zero_bubble::ZB_H2,
    &zero_bubble::ZB_V,
    &interleaved::INTERLEAVED_2,
    &interleaved::INTERLEAVED_4,
    &breadth_first::BREADTH_FIRST_2,
    &breadth_first::BREADTH_FIRST_4,
    &dual_pipe_v::DUAL_PIPE_V,
];

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

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn names_kinds_and_approaches_agree() {
        let expected = [
            (gpipe::GPIPE.kind(), "gpipe"),
            (dapple::DAPPLE.kind(), "dapple"),
            (gems::GEMS.kind(), "gems"),
            (chimera::CHIMERA.kind(), "chimera"),
            (chimera::CHIMERA_DOUBLING.kind(), "chimera-doubling"),
            (mixpipe::MIXPIPE.with_k_gamma(4, 1), "mixpipe(K=4,Gamma=1)"),
            (mixpipe::MIXPIPE_K_MAX.kind(), "mixpipe-kmax"),
            (bapipe::ONE_F_ONE_B_SNO.kind(), "1f1b-sno"),
            (bapipe::ONE_F_ONE_B_SO.kind(), "1f1b-so"),
            (bapipe::ONE_F_ONE_B_AS.kind(), "1f1b-as"),
            (bapipe::FBP_AS.kind(), "fbp-as"),
            (zero_bubble::ZB_H1.kind(), "zb-h1"),
            (zero_bubble::ZB_H2.kind(), "zb-h2"),
            (zero_bubble::ZB_V.kind(), "zb-v"),
            (interleaved::INTERLEAVED_2.kind(), "interleaved-2"),
            (interleaved::INTERLEAVED_4.kind(), "interleaved-4"),
            (breadth_first::BREADTH_FIRST_2.kind(), "breadth-first-2"),
            (breadth_first::BREADTH_FIRST_4.kind(), "breadth-first-4"),
            (dual_pipe_v::DUAL_PIPE_V.kind(), "dualpipe-v"),
        ];
        assert_eq!(expected.len(), SCHEDULES.len());
        for ((kind, name), s) in expected.into_iter().zip(SCHEDULES) {
            assert_eq!(kind.name(), name);
            assert_eq!(kind.schedule.name, s.name);
        }
        for &s in SCHEDULES {
            // What `registry::DEFAULTS` leaves empty, every descriptor gives.
            for text in [s.name, s.label, s.help, s.paper] {
                assert!(!text.is_empty(), "{}: an empty text", s.name);
            }
            assert_eq!(registry::parse(s.name).unwrap().name, s.name);
            if !s.takes_k_gamma {
                assert_eq!(s.configure(4, 8, None, 0).unwrap().name(), s.name);
            }
            assert_eq!(s.is_approach(), !s.kinds(4, 8).is_empty());
            // A kind survives its file form.
            let kind = s.default_kind(4);
            let back: ScheduleKind =
                serde_json::from_value(serde_json::to_value(kind).unwrap()).unwrap();
            assert_eq!(back, kind);
        }
        assert_eq!(registry::parse("1f1b").unwrap().name, "dapple");
        assert!(registry::approach("1f1b").is_none());
        assert_eq!(
            registry::approach_names(),
            [
                "gpipe",
                "dapple",
                "gems",
                "chimera",
                "mixpipe",
                "1f1b-sno",
                "1f1b-so",
                "zb-h1",
                "zb-h2",
                "zb-v",
                "interleaved-2",
                "interleaved-4",
                "breadth-first-2",
                "breadth-first-4",
                "dualpipe-v"
            ]
        );
        assert!(mixpipe::MIXPIPE.configure(4, 4, Some(3), 0).is_err());
        let names: std::collections::HashSet<_> = SCHEDULES
            .iter()
            .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
            .collect();
        let count: usize = SCHEDULES.iter().map(|s| 1 + s.aliases.len()).sum();
        assert_eq!(names.len(), count, "a name or alias used twice");
    }

    #[test]
    fn mixpipe_files_keep_k_and_gamma() {
        let v = serde_json::to_value(mixpipe::MIXPIPE.with_k_gamma(4, 1)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "mixpipe", "k": 4, "gamma": 1})
        );
        assert_eq!(
            serde_json::to_value(gpipe::GPIPE.kind()).unwrap(),
            serde_json::json!({"name": "gpipe"})
        );
        assert!(
            serde_json::from_value::<ScheduleKind>(serde_json::json!({"name": "mixpipe"})).is_err()
        );
        assert!(
            serde_json::from_value::<ScheduleKind>(serde_json::json!({"name": "optimal"})).is_err()
        );
    }

    #[test]
    fn warm_starts_keep_their_order() {
        let names = |p: Placement, d, n| -> Vec<String> {
            p.known_schedules(d, n)
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(
            names(Placement::OneDirection, 4, 8),
            ["dapple", "gpipe", "1f1b-sno", "1f1b-so", "zb-h1", "zb-h2"]
        );
        assert_eq!(names(Placement::VShape, 4, 8), ["zb-v"]);
        assert_eq!(
            names(Placement::Interleaved2, 4, 8),
            ["interleaved-2", "breadth-first-2"]
        );
        assert_eq!(
            names(Placement::Bidirectional, 4, 8),
            [
                "chimera",
                "chimera-doubling",
                "mixpipe(K=4,Gamma=0)",
                "mixpipe-kmax",
                "gems",
                "chimera (drawn for B = F)"
            ]
        );
        assert_eq!(names(Placement::Gems, 4, 8), ["gems"]);
    }
}
