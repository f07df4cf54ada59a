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
pub mod file;
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

/// A synchronous schedule by name, as `sync --schedule`, the synchronous sweep's
/// `schedules` and the hybrid's approach name it: one arm of [`ScheduleName::info`] per
/// schedule (name, aliases, label in figures, whether it is an approach of the sweep and the
/// hybrid). [`ScheduleName::kind`] gives the schedule with its parameters, and
/// [`ScheduleName::kinds`] every schedule an approach stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScheduleName {
    Gpipe,
    Dapple,
    Gems,
    Chimera,
    ChimeraDoubling,
    Mixpipe,
    MixpipeKMax,
    Bapipe1f1bSno,
    Bapipe1f1bSo,
    Bapipe1f1bAs,
    BapipeFbpAs,
}

/// What [`ScheduleName::info`] says of one schedule.
pub struct ScheduleInfo {
    /// The name on the command line, in experiment files and tables.
    pub name: &'static str,
    /// Other names `sync --schedule` accepts.
    pub aliases: &'static [&'static str],
    /// The name in figures.
    pub label: &'static str,
    /// True for the approaches of the synchronous sweep and of `sync --hybrid`.
    pub approach: bool,
}

impl ScheduleName {
    /// Every schedule, in the order of the tables.
    pub const ALL: &'static [ScheduleName] = &[
        ScheduleName::Gpipe,
        ScheduleName::Dapple,
        ScheduleName::Gems,
        ScheduleName::Chimera,
        ScheduleName::ChimeraDoubling,
        ScheduleName::Mixpipe,
        ScheduleName::MixpipeKMax,
        ScheduleName::Bapipe1f1bSno,
        ScheduleName::Bapipe1f1bSo,
        ScheduleName::Bapipe1f1bAs,
        ScheduleName::BapipeFbpAs,
    ];

    /// Everything known of the schedule's name: one arm per schedule.
    pub fn info(self) -> ScheduleInfo {
        let (name, aliases, label, approach): (_, &'static [&'static str], _, _) = match self {
            ScheduleName::Gpipe => ("gpipe", &[], "GPipe", true),
            ScheduleName::Dapple => ("dapple", &["1f1b"], "DAPPLE", true),
            ScheduleName::Gems => ("gems", &[], "GEMS", true),
            ScheduleName::Chimera => ("chimera", &[], "Chimera", true),
            ScheduleName::ChimeraDoubling => {
                ("chimera-doubling", &[], "Chimera (forward doubling)", false)
            }
            ScheduleName::Mixpipe => ("mixpipe", &[], "MixPipe", true),
            ScheduleName::MixpipeKMax => ("mixpipe-kmax", &[], "MixPipe K maximizing", false),
            ScheduleName::Bapipe1f1bSno => ("1f1b-sno", &[], "BaPipe 1F1B-SNO", true),
            ScheduleName::Bapipe1f1bSo => ("1f1b-so", &[], "BaPipe 1F1B-SO", true),
            ScheduleName::Bapipe1f1bAs => ("1f1b-as", &[], "BaPipe 1F1B-AS", false),
            ScheduleName::BapipeFbpAs => ("fbp-as", &[], "BaPipe FBP-AS", false),
        };
        ScheduleInfo {
            name,
            aliases,
            label,
            approach,
        }
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The schedule `name` (or one of its aliases) names.
    pub fn parse(name: &str) -> Result<ScheduleName, crate::InputError> {
        ScheduleName::ALL
            .iter()
            .copied()
            .find(|s| {
                let i = s.info();
                i.name == name || i.aliases.contains(&name)
            })
            .ok_or_else(|| {
                crate::InputError::new("--schedule", "", format!("unknown schedule {name:?}"))
            })
    }

    /// The approach of the synchronous sweep and the hybrid named `name` (its own name, no
    /// alias), if it is one.
    pub fn approach(name: &str) -> Option<ScheduleName> {
        ScheduleName::ALL
            .iter()
            .copied()
            .find(|s| s.info().approach && s.name() == name)
    }

    /// The names of the approaches, in order.
    pub fn approach_names() -> Vec<&'static str> {
        ScheduleName::ALL
            .iter()
            .filter(|s| s.info().approach)
            .map(|s| s.name())
            .collect()
    }

    /// The schedule for D = `d` stages and N = `n` micro-batches: MixPipe's K (D by
    /// default) and Gamma are checked by [`mixpipe::check_k_gamma`] and ignored by the
    /// others.
    pub fn kind(
        self,
        d: usize,
        n: usize,
        k: Option<usize>,
        gamma: usize,
    ) -> Result<ScheduleKind, crate::InputError> {
        Ok(match self {
            ScheduleName::Gpipe => ScheduleKind::Gpipe,
            ScheduleName::Dapple => ScheduleKind::Dapple,
            ScheduleName::Gems => ScheduleKind::Gems,
            ScheduleName::Chimera => ScheduleKind::Chimera,
            ScheduleName::ChimeraDoubling => ScheduleKind::ChimeraDoubling,
            ScheduleName::Mixpipe => {
                let k = k.unwrap_or(d);
                mixpipe::check_k_gamma(d, n, k, gamma)?;
                ScheduleKind::Mixpipe { k, gamma }
            }
            ScheduleName::MixpipeKMax => ScheduleKind::MixpipeKMax,
            ScheduleName::Bapipe1f1bSno => ScheduleKind::Bapipe1f1bSno,
            ScheduleName::Bapipe1f1bSo => ScheduleKind::Bapipe1f1bSo,
            ScheduleName::Bapipe1f1bAs => ScheduleKind::Bapipe1f1bAs,
            ScheduleName::BapipeFbpAs => ScheduleKind::BapipeFbpAs,
        })
    }

    /// The schedules an approach stands for at (D, N): itself for gpipe, dapple, gems,
    /// 1f1b-sno and 1f1b-so; chimera with its forward doubling when N is a multiple of D
    /// and N >= 2D; MixPipe's eq. (5) space (every even K <= D, Gamma <= (D - K) / 2) and K
    /// maximizing when N > D. Empty for a schedule that is not an approach.
    pub fn kinds(self, d: usize, n: usize) -> Vec<ScheduleKind> {
        match self {
            ScheduleName::Gpipe => vec![ScheduleKind::Gpipe],
            ScheduleName::Dapple => vec![ScheduleKind::Dapple],
            ScheduleName::Gems => vec![ScheduleKind::Gems],
            // Chimera's own scaling for N > D (forward doubling) when N is a multiple of D.
            ScheduleName::Chimera if n >= 2 * d && d > 0 && n % d == 0 => {
                vec![ScheduleKind::Chimera, ScheduleKind::ChimeraDoubling]
            }
            ScheduleName::Chimera => vec![ScheduleKind::Chimera],
            ScheduleName::Bapipe1f1bSno => vec![ScheduleKind::Bapipe1f1bSno],
            ScheduleName::Bapipe1f1bSo => vec![ScheduleKind::Bapipe1f1bSo],
            ScheduleName::Mixpipe => {
                let mut v = Vec::new();
                for k in (2..=d).step_by(2) {
                    for gamma in 0..=(d - k) / 2 {
                        v.push(ScheduleKind::Mixpipe { k, gamma });
                    }
                }
                if n > d {
                    v.push(ScheduleKind::MixpipeKMax);
                }
                v
            }
            ScheduleName::ChimeraDoubling
            | ScheduleName::MixpipeKMax
            | ScheduleName::Bapipe1f1bAs
            | ScheduleName::BapipeFbpAs => Vec::new(),
        }
    }
}

impl std::fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ScheduleName {
    type Err = crate::InputError;
    fn from_str(s: &str) -> Result<Self, crate::InputError> {
        ScheduleName::parse(s)
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
    /// The schedule's name without its parameters.
    pub fn schedule_name(self) -> ScheduleName {
        match self {
            ScheduleKind::Gpipe => ScheduleName::Gpipe,
            ScheduleKind::Dapple => ScheduleName::Dapple,
            ScheduleKind::Gems => ScheduleName::Gems,
            ScheduleKind::Chimera => ScheduleName::Chimera,
            ScheduleKind::ChimeraDoubling => ScheduleName::ChimeraDoubling,
            ScheduleKind::Mixpipe { .. } => ScheduleName::Mixpipe,
            ScheduleKind::MixpipeKMax => ScheduleName::MixpipeKMax,
            ScheduleKind::Bapipe1f1bSno => ScheduleName::Bapipe1f1bSno,
            ScheduleKind::Bapipe1f1bSo => ScheduleName::Bapipe1f1bSo,
            ScheduleKind::Bapipe1f1bAs => ScheduleName::Bapipe1f1bAs,
            ScheduleKind::BapipeFbpAs => ScheduleName::BapipeFbpAs,
        }
    }

    /// The name in reports and tables: the schedule's name, with MixPipe's K and Gamma.
    pub fn name(self) -> String {
        match self {
            ScheduleKind::Mixpipe { k, gamma } => format!("mixpipe(K={k},Gamma={gamma})"),
            other => other.schedule_name().name().into(),
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

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn names_kinds_and_approaches_agree() {
        let expected = [
            (ScheduleKind::Gpipe, "gpipe"),
            (ScheduleKind::Dapple, "dapple"),
            (ScheduleKind::Gems, "gems"),
            (ScheduleKind::Chimera, "chimera"),
            (ScheduleKind::ChimeraDoubling, "chimera-doubling"),
            (
                ScheduleKind::Mixpipe { k: 4, gamma: 1 },
                "mixpipe(K=4,Gamma=1)",
            ),
            (ScheduleKind::MixpipeKMax, "mixpipe-kmax"),
            (ScheduleKind::Bapipe1f1bSno, "1f1b-sno"),
            (ScheduleKind::Bapipe1f1bSo, "1f1b-so"),
            (ScheduleKind::Bapipe1f1bAs, "1f1b-as"),
            (ScheduleKind::BapipeFbpAs, "fbp-as"),
        ];
        for (kind, name) in expected {
            assert_eq!(kind.name(), name);
        }
        for &s in ScheduleName::ALL {
            assert_eq!(ScheduleName::parse(s.name()).unwrap(), s);
            assert_eq!(s.to_string(), s.name());
            if s != ScheduleName::Mixpipe {
                assert_eq!(s.kind(4, 8, None, 0).unwrap().name(), s.name());
            }
            assert_eq!(s.info().approach, !s.kinds(4, 8).is_empty());
        }
        assert_eq!(ScheduleName::parse("1f1b").unwrap(), ScheduleName::Dapple);
        assert_eq!(ScheduleName::approach("1f1b"), None);
        assert_eq!(
            ScheduleName::approach_names(),
            ["gpipe", "dapple", "gems", "chimera", "mixpipe", "1f1b-sno", "1f1b-so"]
        );
        assert!(ScheduleName::Mixpipe.kind(4, 4, Some(3), 0).is_err());
    }
}
