//! The synchronous schedules' registry: one [`ScheduleDescriptor`] per schedule (name,
//! aliases, help, paper, generator, the paper's closed-form bubble, the placement and warm
//! start of the schedule-optimum MILP), defined in the schedule's own file and listed once in
//! [`super::SCHEDULES`]. Everything that used to dispatch on a schedule's name reads its
//! descriptor: `sync --schedule` (its values and help), the synchronous sweep's approaches,
//! MixPipe's hybrid, the optimum's warm starts and the figures' labels.
//!
//! A [`ScheduleKind`] is a schedule with its parameters (MixPipe's K and Gamma), the value
//! `sync --out` files, Gantt charts and sweep rows carry; it serializes as the schedule's
//! name, `{"name": "mixpipe", "k": 4, "gamma": 0}` with parameters.

use serde::{Deserialize, Serialize};

use super::sim::{Execution, StageCosts};
use super::{Pipeline, Schedule, SyncError, SCHEDULES};
use crate::InputError;

/// MixPipe's parameters (Zhang et al., DAC 2023): `k` micro-batches injected before the
/// first backward (even, 2..=D for N = D; up to 2(D-1) with N > D); `gamma` early forwards
/// (2F1B), raising the live cap to K + Gamma.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KGamma {
    pub k: usize,
    pub gamma: usize,
}

/// Where the stage replicas live: the placements the schedule-optimum MILP
/// (`milp::sync_schedule`) orders operations on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Stage s on worker s, all micro-batches down.
    OneDirection,
    /// Chimera's and MixPipe's two pipelines: down stage s and up stage D-1-s on worker s.
    Bidirectional,
    /// The bidirectional placement under GEMS's rule: one live micro-batch per worker.
    Gems,
    /// Megatron-LM's interleaved placement with two stages per worker: stage s on worker
    /// s mod (D/2).
    Interleaved2,
    /// The same with four stages per worker: stage s on worker s mod (D/4).
    Interleaved4,
    /// ZB-V's and DualPipeV's V: stages s and D-1-s on worker min(s, D-1-s), D/2 workers.
    VShape,
}

impl Placement {
    /// Every placement, in the order of `--placement`'s help.
    pub const ALL: [Placement; 6] = [
        Placement::OneDirection,
        Placement::Bidirectional,
        Placement::Gems,
        Placement::Interleaved2,
        Placement::Interleaved4,
        Placement::VShape,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Placement::OneDirection => "one-direction",
            Placement::Bidirectional => "bidirectional",
            Placement::Gems => "gems",
            Placement::Interleaved2 => "interleaved-2",
            Placement::Interleaved4 => "interleaved-4",
            Placement::VShape => "v-shape",
        }
    }

    /// Parses a placement's name (`one-direction`, `bidirectional`, ...).
    pub fn parse(text: &str) -> Option<Placement> {
        Placement::ALL.into_iter().find(|p| p.name() == text)
    }

    /// Every placement's name, comma-separated (for help and errors).
    pub fn names() -> String {
        Placement::ALL.map(Placement::name).join(", ")
    }

    /// How many stages each worker holds (of each pipeline).
    fn stages_per_worker(self) -> usize {
        match self {
            Placement::OneDirection | Placement::Bidirectional | Placement::Gems => 1,
            Placement::Interleaved2 | Placement::VShape => 2,
            Placement::Interleaved4 => 4,
        }
    }

    /// Checks that `d` stages fit the placement (whole stages on whole workers).
    pub fn check_stages(self, d: usize) -> Result<(), String> {
        let v = self.stages_per_worker();
        if d == 0 || d % v != 0 {
            return Err(format!(
                "the {} placement puts {v} stages on each worker: D = {d} is not a positive multiple of {v}",
                self.name()
            ));
        }
        Ok(())
    }

    /// The number of workers for `d` stages (after [`Placement::check_stages`]).
    pub fn workers(self, d: usize) -> usize {
        d / self.stages_per_worker()
    }

    /// The worker that runs `stage` of `pipeline` in a `d`-stage scheme.
    pub fn worker(self, pipeline: Pipeline, stage: usize, d: usize) -> usize {
        match self {
            Placement::OneDirection => stage,
            Placement::Bidirectional | Placement::Gems => pipeline.worker(stage, d),
            Placement::Interleaved2 | Placement::Interleaved4 => stage % self.workers(d),
            Placement::VShape => stage.min(d - 1 - stage),
        }
    }

    /// The registered schedules that warm-start this placement's optimum
    /// ([`WarmStart`]), drawn for D = `d` and N = `n` (those that exist at that shape),
    /// named: the schedule MILP starts from the best that fits.
    pub fn known_schedules(self, d: usize, n: usize) -> Vec<(String, Schedule)> {
        let mut starts: Vec<(u8, ScheduleKind)> = SCHEDULES
            .iter()
            .filter_map(|s| {
                let w = s.warm_start.as_ref()?;
                w.placements
                    .contains(&self)
                    .then(|| (w.rank, s.default_kind(d)))
            })
            .collect();
        // Stable: equal ranks keep the table's order.
        starts.sort_by_key(|(rank, _)| *rank);
        let mut out: Vec<(String, Schedule)> = starts
            .into_iter()
            .filter_map(|(_, kind)| kind.generate(d, n).ok().map(|s| (kind.name(), s)))
            .collect();
        // Then the other drawings, after every schedule's own streams.
        for s in SCHEDULES {
            let Some(w) = s
                .warm_start
                .as_ref()
                .filter(|w| w.placements.contains(&self))
            else {
                continue;
            };
            out.extend(w.other_drawing.and_then(|draw| draw(d, n)));
        }
        out
    }

    /// The pipelines with their micro-batches (numbered as `schedule::sync` does).
    pub fn pipelines(self, n: usize) -> Vec<(Pipeline, std::ops::Range<usize>)> {
        if self.two_pipelines() {
            vec![(Pipeline::Down, 0..n / 2), (Pipeline::Up, n / 2..n)]
        } else {
            vec![(Pipeline::Down, 0..n)]
        }
    }

    /// Whether the placement runs two pipelines (half of the micro-batches each).
    pub fn two_pipelines(self) -> bool {
        matches!(self, Placement::Bidirectional | Placement::Gems)
    }
}

/// How a schedule warm-starts the schedule-optimum MILP: the placements it is a schedule of,
/// and its rank among their starts (lower first; among streams of equal iteration time the
/// MILP starts from the first).
#[derive(Debug, Clone, Copy)]
pub struct WarmStart {
    pub placements: &'static [Placement],
    pub rank: u8,
    /// Another drawing of the schedule to start from (named), where it has one at (D, N):
    /// Chimera's drawn for backward = forward.
    pub other_drawing: Option<OtherDrawing>,
}

/// The streams of a schedule for D stages, N micro-batches, its parameters (`None` for a
/// schedule without) and, where the schedule draws its streams for the costs at hand, the
/// stage costs.
pub type Generator =
    fn(usize, usize, Option<KGamma>, Option<&StageCosts>) -> Result<Schedule, SyncError>;

/// Another drawing of a schedule at (D, N), named, where it has one.
pub type OtherDrawing = fn(usize, usize) -> Option<(String, Schedule)>;

/// A schedule's parameters at (D, N) from `--k` (`None`: the default) and `--gamma`,
/// checked; `None` for a schedule without.
pub type ParamsFromFlags =
    fn(usize, usize, Option<usize>, usize) -> Result<Option<KGamma>, InputError>;

/// The K and Gamma a sweep row reports for a schedule at D stages with its parameters.
pub type KGammaColumns = fn(usize, Option<KGamma>) -> (Option<usize>, Option<usize>);

/// Everything the crate knows of one synchronous schedule. Each schedule's file defines its
/// descriptor; [`super::SCHEDULES`] lists them.
#[derive(Debug)]
pub struct ScheduleDescriptor {
    /// The name on the command line, in experiment files and tables.
    pub name: &'static str,
    /// Other names `sync --schedule` accepts.
    pub aliases: &'static [&'static str],
    /// The name in figures.
    pub label: &'static str,
    /// One line for `sync --schedule`'s help.
    pub help: &'static str,
    /// The paper the schedule is from.
    pub paper: &'static str,
    /// Whether each worker holds two stage replicas (two weight copies).
    pub bidirectional: bool,
    /// Whether its streams split the backward into input and weight gradients (zero-bubble
    /// schedules); the schedule-optimum MILP models the split on request (`sync --schedule
    /// optimal --split-backward`), which the synchronous sweep does not make.
    pub splits_backward: bool,
    /// How many stages each worker holds (interleaved and V-shaped schedules: `D /
    /// stages_per_worker` workers); 1 elsewhere.
    pub stages_per_worker: usize,
    /// How the simulator runs the streams.
    pub execution: Execution,
    /// Whether the schedule takes MixPipe's K and Gamma (`--k`, `--gamma`).
    pub takes_k_gamma: bool,
    /// Its parameters from `--k` (`None`: the default) and `--gamma` at (D, N), checked;
    /// `None` for a schedule without.
    pub params: ParamsFromFlags,
    pub generate: Generator,
    /// The schedules this one stands for as an approach of the synchronous sweep and of
    /// `sync --hybrid` at D stages and N micro-batches (on `D / stages_per_worker` GPUs);
    /// `None` for a schedule that is not an approach.
    pub approach: Option<fn(usize, usize) -> Vec<ScheduleKind>>,
    /// The paper's closed-form bubble ratio at (D, N), where it gives one.
    pub paper_bubble: fn(usize, usize, Option<KGamma>) -> Option<f64>,
    /// The K and Gamma a sweep row reports for the schedule at D stages.
    pub k_gamma_columns: KGammaColumns,
    /// Its warm start of the schedule-optimum MILP, if it is one.
    pub warm_start: Option<WarmStart>,
}

/// What a descriptor states only where it departs from it (`..registry::DEFAULTS`): one
/// direction, serial execution, no K and Gamma, not an approach, no closed form, no warm
/// start. Every descriptor gives its own name, label, help, paper and generator (a test
/// checks the texts are there).
pub const DEFAULTS: ScheduleDescriptor = ScheduleDescriptor {
    name: "",
    aliases: &[],
    label: "",
    help: "",
    paper: "",
    bidirectional: false,
    splits_backward: false,
    stages_per_worker: 1,
    execution: Execution::Serial,
    takes_k_gamma: false,
    params: |_, _, _, _| Ok(None),
    generate: |_, _, _, _| Err(super::shape_error("schedule", "no generator")),
    approach: None,
    paper_bubble: no_paper_bubble,
    k_gamma_columns: no_k_gamma,
    warm_start: None,
};

impl ScheduleDescriptor {
    /// The schedule at its default parameters for D = `d` stages: MixPipe's K = D, Gamma = 0.
    pub fn default_kind(&'static self, d: usize) -> ScheduleKind {
        ScheduleKind {
            schedule: self,
            params: self.takes_k_gamma.then_some(KGamma { k: d, gamma: 0 }),
        }
    }

    /// The schedule without parameters (every schedule but those taking K and Gamma).
    pub fn kind(&'static self) -> ScheduleKind {
        debug_assert!(!self.takes_k_gamma, "{} takes K and Gamma", self.name);
        ScheduleKind {
            schedule: self,
            params: None,
        }
    }

    /// The schedule with MixPipe's K and Gamma.
    pub fn with_k_gamma(&'static self, k: usize, gamma: usize) -> ScheduleKind {
        ScheduleKind {
            schedule: self,
            params: Some(KGamma { k, gamma }),
        }
    }

    /// Whether the synchronous sweep and the hybrid take it as an approach.
    pub fn is_approach(&self) -> bool {
        self.approach.is_some()
    }

    /// The schedules an approach stands for at (D, N); empty for a schedule that is not an
    /// approach.
    pub fn kinds(&self, d: usize, n: usize) -> Vec<ScheduleKind> {
        self.approach.map_or_else(Vec::new, |a| a(d, n))
    }

    /// The schedule for D = `d` stages and N = `n` micro-batches with `--k` and `--gamma`
    /// (checked by the descriptor's `params`; ignored by a schedule without parameters).
    pub fn configure(
        &'static self,
        d: usize,
        n: usize,
        k: Option<usize>,
        gamma: usize,
    ) -> Result<ScheduleKind, InputError> {
        Ok(ScheduleKind {
            schedule: self,
            params: (self.params)(d, n, k, gamma)?,
        })
    }
}

/// The schedule `name` (or one of its aliases) names.
pub fn parse(name: &str) -> Result<&'static ScheduleDescriptor, InputError> {
    SCHEDULES
        .iter()
        .copied()
        .find(|s| s.name == name || s.aliases.contains(&name))
        .ok_or_else(|| InputError::new("--schedule", "", format!("unknown schedule {name:?}")))
}

/// The approach of the synchronous sweep and the hybrid named `name` (its own name, no
/// alias), if it is one.
pub fn approach(name: &str) -> Option<&'static ScheduleDescriptor> {
    SCHEDULES
        .iter()
        .copied()
        .find(|s| s.is_approach() && s.name == name)
}

/// The names of the approaches, in order.
pub fn approach_names() -> Vec<&'static str> {
    SCHEDULES
        .iter()
        .filter(|s| s.is_approach())
        .map(|s| s.name)
        .collect()
}

/// A schedule with its parameters.
#[derive(Clone, Copy)]
pub struct ScheduleKind {
    pub schedule: &'static ScheduleDescriptor,
    /// MixPipe's K and Gamma; `None` for every schedule that takes no parameters.
    pub params: Option<KGamma>,
}

impl PartialEq for ScheduleKind {
    fn eq(&self, other: &Self) -> bool {
        self.schedule.name == other.schedule.name && self.params == other.params
    }
}

impl Eq for ScheduleKind {}

impl std::fmt::Debug for ScheduleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl ScheduleKind {
    /// The name in reports and tables: the schedule's name, with MixPipe's K and Gamma.
    pub fn name(self) -> String {
        match self.params {
            Some(KGamma { k, gamma }) => format!("{}(K={k},Gamma={gamma})", self.schedule.name),
            None => self.schedule.name.into(),
        }
    }

    /// Whether each worker holds two stage replicas (two weight copies).
    pub fn bidirectional(self) -> bool {
        self.schedule.bidirectional
    }

    /// How the simulator runs the streams (see `sim::Execution`).
    pub fn execution(self) -> Execution {
        self.schedule.execution
    }

    /// The streams for `d` stages and `n` micro-batches.
    pub fn generate(self, d: usize, n: usize) -> Result<Schedule, SyncError> {
        check_shape(d, n)?;
        (self.schedule.generate)(d, n, self.params, None)
    }

    /// [`ScheduleKind::generate`] for stage costs at hand: Chimera keeps the fastest of its
    /// drawings on `costs` (`chimera::chimera_for`); every other schedule is independent of
    /// the costs.
    pub fn generate_for(
        self,
        d: usize,
        n: usize,
        costs: &StageCosts,
    ) -> Result<Schedule, SyncError> {
        check_shape(d, n)?;
        (self.schedule.generate)(d, n, self.params, Some(costs))
    }

    /// The paper's closed-form bubble ratio at (D, N), where it gives one.
    pub fn paper_bubble_ratio(self, d: usize, n: usize) -> Option<f64> {
        (self.schedule.paper_bubble)(d, n, self.params)
    }

    /// The optimum the synchronous sweep compares the schedule with: its placement's, with
    /// the backward split where the schedule splits it (zero-bubble schedules); `None`
    /// where the sweep makes none: BaPipe's streamed and forward-backward-parallel
    /// executions and DualPipeV's overlapped pairs, which the MILP does not model. A
    /// schedule with several stages per worker is measured against the placement it warm
    /// starts (interleaved, V-shaped).
    pub fn optimum_target(self) -> Option<OptimumTarget> {
        if self.execution() != Execution::Serial {
            return None;
        }
        let placement = if self.schedule.stages_per_worker > 1 {
            *self.schedule.warm_start.as_ref()?.placements.first()?
        } else if self.bidirectional() {
            Placement::Bidirectional
        } else {
            Placement::OneDirection
        };
        Some(OptimumTarget {
            placement,
            split_backward: self.schedule.splits_backward,
        })
    }
}

/// The exact optimum a schedule is measured against ([`ScheduleKind::optimum_target`]):
/// every operation order on a placement, with each backward whole or split into its input
/// and weight gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptimumTarget {
    pub placement: Placement,
    pub split_backward: bool,
}

impl OptimumTarget {
    /// The name in tables: the placement's, with `+split` for the split backward.
    pub fn name(self) -> String {
        if self.split_backward {
            format!("{}+split", self.placement.name())
        } else {
            self.placement.name().to_string()
        }
    }

    /// The same placement with whole backwards: its schedules are starts for this one too
    /// (split, they are orders of the split problem).
    pub fn whole(self) -> OptimumTarget {
        OptimumTarget {
            split_backward: false,
            ..self
        }
    }
}

fn check_shape(d: usize, n: usize) -> Result<(), SyncError> {
    if d == 0 || n == 0 {
        return Err(super::shape_error(
            "schedule",
            format!("needs at least one stage and one micro-batch (D = {d}, N = {n})"),
        ));
    }
    Ok(())
}

/// The form files carry: the name, with K and Gamma for the schedules that take them.
#[derive(Serialize, Deserialize)]
struct KindForm {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gamma: Option<usize>,
}

impl Serialize for ScheduleKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        KindForm {
            name: self.schedule.name.into(),
            k: self.params.map(|p| p.k),
            gamma: self.params.map(|p| p.gamma),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ScheduleKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let form = KindForm::deserialize(d)?;
        let schedule = SCHEDULES
            .iter()
            .copied()
            .find(|s| s.name == form.name)
            .ok_or_else(|| D::Error::custom(format!("unknown schedule {:?}", form.name)))?;
        let params = match (schedule.takes_k_gamma, form.k, form.gamma) {
            (true, Some(k), Some(gamma)) => Some(KGamma { k, gamma }),
            (true, _, _) => {
                return Err(D::Error::custom(format!("{} needs k and gamma", form.name)))
            }
            (false, _, _) => None,
        };
        Ok(ScheduleKind { schedule, params })
    }
}

/// The one-direction schedules' bubble ratio (D - 1) / (N + D - 1) (GPipe, DAPPLE,
/// BaPipe's 1F1B-SNO).
pub fn one_direction_bubble(d: usize, n: usize) -> f64 {
    let (df, nf) = (d as f64, n as f64);
    (df - 1.0) / (nf + df - 1.0)
}

/// No closed form.
pub fn no_paper_bubble(_: usize, _: usize, _: Option<KGamma>) -> Option<f64> {
    None
}

/// No K or Gamma in sweep rows.
pub fn no_k_gamma(_: usize, _: Option<KGamma>) -> (Option<usize>, Option<usize>) {
    (None, None)
}
