//! A lower bound on the period of **every** plan of a case (any allocation, contiguous or
//! not, any periodic pattern), memory included, and proofs that no plan fits at all.
//!
//! The bound is the smallest period at which a *relaxation* of the planning problem has a
//! solution. The relaxation keeps what every valid plan must satisfy and forgets the rest:
//! it decides only which processor holds each layer, and replaces the pattern by facts
//! about one batch's chain of operations that hold whatever the pattern. It is decided
//! exactly at fixed periods, with bisection on the period: first by a depth-first search
//! over assignments ([`search`]), then, where that runs out of time, by a MILP (HiGHS) in
//! a loop of lazily added rows (below); on a case where that loop has twice been left
//! undecided and never decided a probe, the search gets the whole of each later probe
//! ([`Learnt`]). Every plan the
//! judge accepts at period `T*` makes the relaxation feasible at `T*`, and a plan stretched
//! to a longer period stays valid, so every period proven relaxation-infeasible is strictly
//! below every valid plan's period.
//!
//! The model is the one of `docs/model.md` (operations of one batch, periodic patterns, the
//! memory rule with stash overlaps); the facts below follow from it alone.
//!
//! # What every valid plan at period `T` satisfies
//! Write `pi(l)` for the processor of layer `l`, `SF(i) = U_F(i..L)`, `SB(j) = U_B(j..L)`,
//! `S(j) = U(j..L)`, `e_j = stash(1..j) - stash(1..j-1) >= 0` the marginal stash of layer
//! `j` along the chain (a stage `k..m` keeps `stash(k..m) >= sum_{k..m} e_j`: checked for
//! every range, see [`layer_stashes`]), `cross_c` when layers `c`
//! and `c+1` are on different processors, `comm_c = a(c) / beta`.
//! 1. **Loads.** A processor computes `U` of its layers once per period; a link carries
//!    `2 comm_c` per crossing cut between its two processors (half duplex), `comm_c` per
//!    direction (full duplex).
//! 2. **Static memory.** `3 W` for every layer held, `2 a(c)` on both sides of every
//!    crossing cut.
//! 3. **Memory at a forward start.** Take layer `i` on `p`, its stage `s_i` (first layer
//!    `k_i <= i`), and the instant `tau` at which `F_{s_i}` starts for some batch `b`. Every
//!    layer `j <= i` of `p` belongs to `s_i` or to an earlier stage of `p`, whose forward has
//!    started for batch `b` and whose backward ends after `B_{s_i}`: along the batch's
//!    chain, that end is at least `D_ij = SF(i) + SB(j)` after `tau` (all forwards from
//!    `k_i <= i` on, all backwards down to `k_j <= j`). So `j`'s stash is held for batch
//!    `b` and for the `m` earlier batches with `D_ij - m T > 0`: `ceil(D_ij / T)` copies.
//!    Every layer `j > i` of `p` is in a stage whose window lasts at least `S(j)`, hence
//!    holds at least `floor(S(j) / T)` batches at every instant.
//!    **Transfers lengthen these stretches**: the chain from `F_{s_i}` to `B_{s_j}` also
//!    carries the forward and backward transfer of every crossing cut `c >= i` (such a cut
//!    lies after `s_i`'s last layer), `X_i = 2 sum_{c >= i} comm_c cross_c` in all, so `j`
//!    keeps at least `ceil((SF(i) + SB(j) + X_i) / T)` copies. (The backward transfers of
//!    the cuts between `j` and `i` lengthen it too: see "Exact windows" below.)
//! 4. **Average memory.** The stage of layer `j` keeps `j`'s stash over a window of at
//!    least `w_j = S(j) + 2 sum_{c >= j} comm_c cross_c` (the forward and backward transfers
//!    of every crossing cut downstream are on the batch's chain), so `w_j / T` batches on
//!    average over a period, and a processor's peak is at least its average.
//!
//! Facts 3 and 4 charge each layer `j` its marginal `e_j`, except the first layer of each
//! of a processor's runs (layer 1, or `j` with layer `j - 1` elsewhere): it starts a
//! stage, which keeps its whole stash `own_j >= e_j` (the crossing indicators say where
//! runs start). A stage keeps the whole stash of its first layer and at least the
//! marginals of the others, so both facts stay below what every stage structure of the
//! processor's runs keeps.
//!
//! With `T` fixed, `X_i / T` is modelled by levels: an indicator per layer and level
//! `theta = q / LEVELS_PER_PERIOD` (up to `MAX_TRANSFER_PERIODS` periods), forced to one
//! when `X_i > theta T`; fact 3's row at layer `i` and level `theta` (relaxed by big-M when
//! the level is off) counts `ceil((SF(i) + SB(j)) / T + theta)` copies of each `j <= i`.
//! Facts 1, 2 and 4 are linear in the
//! assignment binaries `x[l][p]` and the crossing indicators. Processors are identical and
//! the links uniform, so the assignment is taken up to relabelling (layer 1 on processor
//! 0, processor `p` first used after processor `p - 1`).
//!
//! # Exact windows, added lazily
//! Fact 3 with transfer levels still forgets the backward transfers between two layers of
//! one processor (a processor holding layers 1 and 7-18 keeps layer 1's stash while the
//! backward of layers 2-6 crosses the links) and rounds the rest to levels. For one
//! processor holding given layers, with given cuts crossing, the facts hold exactly:
//! with `down(l)` the one-way transfers of the crossing cuts `c >= l`, at the forward start
//! of the stage of each layer `i` the processor keeps
//! `ceil((SF(i) + down(i) + SB(j) + down(j)) / T)` copies of each of its layers `j <= i`
//! (the batch's chain from that forward to `j`'s backward carries the forward transfers
//! after `i` and the backward transfers after `j`), `floor((S(j) + 2 down(j)) / T)` of each
//! later one, and on average `(S(j) + 2 down(j)) / T` ([`Relaxation::holding_fits`]). These
//! hold whatever stages the processor's runs are cut into: the first layer of a run starts
//! a stage and is charged its whole stash; any other layer is charged the smaller of its
//! marginal over the window of the layer before it (same stage) and its whole stash over
//! its own window (a stage of its own, keeping the tensor it shares with the layer before
//! a second time).
//!
//! The MILP does not carry them for every assignment; instead each solve's assignment is
//! checked, and every processor that cannot fit yields a [`Premise`]: its runs of layers
//! (whole runs dropped while the check still fails), the cuts at their ends (which cross
//! whenever the runs are on one processor, the layers around them elsewhere), and either
//!   - a **transfer limit**: the largest one-way transfer on the other cuts from the first
//!     run on that still fits when it is placed where it weighs least (between the first
//!     and the second run: it lengthens only the first run's windows), or
//!   - when the assignment's transfers are within that limit yet it cannot fit, the exact
//!     set of crossing cuts that matters (cuts dropped while the check still fails).
//!
//! Each premise becomes one row per processor label (the premise's layers there, its cuts
//! crossing, imply the transfer limit, big-M otherwise), valid for every assignment since
//! the check only gets harder with more layers on the processor and more crossing cuts.
//! The MILP is solved again until its assignment passes every check (feasible at `T`) or
//! no assignment is left (infeasible at `T`): a logic-based Benders decomposition whose
//! subproblem is a closed form. A premise that cannot fit at `T` cannot fit below `T`, and
//! the pool of premises is kept across the bisection's probes.
//!
//! # Waits
//! Two operations on one resource do not overlap modulo `T`. On a half-duplex link, the
//! forward and backward transfers of one cut (`d = comm_c` each): from the forward's start,
//! the same batch's backward transfer starts at some `y` with `y mod T` in `[d, T - d]`. On
//! a processor, layer `l`'s forward and backward (parts of their stages' operations,
//! whatever the stages): `y mod T` in `[f_l, T - b_l]`. Up the chain from the last layer,
//! the least time to each such start (computation, transfers, the waits below it) is
//! rounded up to the next admissible value ([`clear_of`], monotone), and the waits lengthen
//! every window above ([`Relaxation::waits`]). They grow with the crossing cuts (a cut only
//! lengthens what is rounded), so exact premises stay valid; they do not grow with every
//! added transfer, so transfer limits are computed without them. The relaxation is then
//! not monotone in `T`, but a plan at `T' < T` stretched by `T / T'` is a plan at `T` with
//! the same allocation and live batches: a period where the relaxation (or a premise)
//! fails still has no plan at or below it. A probe runs the loop with plain windows first
//! (their premises are more general) and checks the waits on the assignment that passes.
//!
//! # Exact checks
//! [`decide_period`] turns the loop into an exact decision at one period: each assignment
//! that passes the relaxation is handed to an exact check (the caller's: `best` schedules
//! its stages with the scheduling MILP). One proven to have no plan at `T` (hence none below,
//! by stretching) becomes a no-good premise, [`Premise::Excluded`], valid at `T` and shorter
//! periods; when no assignment is left, no plan of the case has period `T` or less.
//!
//! # Infeasibility of a case
//! As `T` grows, fact 3 tends to one copy of every layer `j <= i` (a processor keeps one
//! batch of each of its layers at the forward start of its last one) and facts 1 and 4
//! vanish. If the relaxation is infeasible even then, no plan of any allocation fits at any
//! period: `case_infeasible`. Otherwise it is feasible at the sequential period
//! `U(1,L) + 2 sum_c comm_c`, the upper end of the bisection (or at a known plan's period).
//! At an infinite period the relaxation is a bin packing of runs of layers into the
//! processors, which a combinatorial search decides exactly and, on the real chains, in
//! milliseconds ([`infinite`]); where it runs out of time, the MILP decides.
//!
//! # Safety margins
//! The judge treats instants closer than `1e-9 T` as one, so an accepted plan may shorten
//! each dependency, and overlap each pair of operations on a resource, by that much. The
//! relaxation therefore loosens capacities (time and memory) by a relative slack of
//! `1e-6` (more on chains of over 100 layers: `1e-8` per layer) and rounds copy counts
//! down past that slack of the period: the judge's tolerances and HiGHS's can only make the
//! relaxation *more* feasible, i.e. the bound weaker, never wrong. A solve that ends undecided (time limit) counts as feasible.
//! [`relaxation_fits`] evaluates the same relaxation for a given assignment without a
//! solver; the tests check the MILP against it, and both against exhaustive search over
//! every allocation with the exact scheduling MILP on small chains.

// Index loops mirror the formulation (x[l][p], ...) and read better than iterators here.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::milp::solver::{MilpOptions, Model, SolveStatus, Var};
use crate::model::bounds::period_lower_bound;
use crate::model::{Instance, Platform};
use crate::units::Seconds;

pub mod anneal;
pub mod infinite;
pub mod search;

/// Fact 3's transfer term is modelled up to this many periods of transfers per layer (beyond, they are not counted: the bound is only weaker).
pub const MAX_TRANSFER_PERIODS: usize = 1;

/// A plan within this relative gap of the bound counts as closing its case; with a known
/// plan, the bisection probes the period that decides it early.
pub const CLOSING_GAP: f64 = 0.05;

/// Probes of the bisection (after the infinite period's) before the one at the closing
/// gap: the first ones are far from the threshold, cheap, and teach the loop its premises.
const CLOSING_PROBE_AFTER: usize = 3;

/// Relative precision of the first of two bisection phases (closed forms alone, before the
/// scheduled checks): the second phase goes on from where it stops.
const FIRST_PHASE_PRECISION: f64 = 0.01;

/// The share of a probe's time given to the search over assignments before the MILP.
const SEARCH_SHARE: f64 = 0.67;

/// After this many probes of a case whose search ended undecided and whose MILP's loop,
/// given the rest, ended undecided too, and none that the loop decided, the search gets the
/// whole of each later probe of the case ([`Learnt`]): on DenseNet-121 (63 layers) the
/// loop's first solve often does not get through its root node in the time left (up to
/// 10.7 s of a 48-s case spent so, on 8 processors at 6 GiB, 24 GB/s, and no probe
/// decided), while a search given that time goes on from where it stopped.
const FUTILE_MILP_LOOPS: usize = 2;

/// The search's time in a probe without a time limit (the MILP then decides).
const SEARCH_WITHOUT_LIMIT: Duration = Duration::from_secs(60);

/// Levels per period of fact 3's transfer term.
const LEVELS_PER_PERIOD: usize = 1;

/// What [`global_lower_bound`] proved.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GlobalBound {
    /// Holds for every plan of the case; `f64::INFINITY` when `infeasible`.
    pub lower_bound: Seconds,
    /// Proven: no allocation and no pattern fits the case at any period.
    pub infeasible: bool,
    /// The smallest period at which an assignment was found to pass the relaxation (its
    /// closed forms at least; `assignment`), `None` when infeasible or when no probe
    /// found one. Probes that ended undecided lower the bisection's upper end, not this.
    pub relaxed_period: Option<Seconds>,
    /// The relaxation's processor of each layer at `relaxed_period` (0-based, in chain
    /// order), a starting point for plans; `None` when no solve produced one.
    pub assignment: Option<Vec<usize>>,
    /// Every assignment the relaxation found feasible on the way, the lowest period's
    /// last: starting points for plans, each meeting the exact windows of its stages.
    pub candidates: Vec<Vec<usize>>,
    /// True when the bisection reached its precision and its upper end is decided: a period
    /// where an assignment passed with every check answered (not one where a probe ended
    /// undecided, or passed only because a scheduled check was cut short by the time).
    pub complete: bool,
    /// Probes of the relaxation, one period each (a search over assignments, then, where
    /// it ran out of time, a loop of MILPs).
    pub solves: usize,
    /// Branch-and-bound nodes of the MILPs.
    pub nodes: u64,
    pub solve_seconds: f64,
    /// How the bound was obtained, in words.
    pub method: String,
}

impl GlobalBound {
    /// Keeps `a`, which passed a probe, as the latest candidate and the assignment.
    fn passed(&mut self, a: Vec<usize>) {
        self.candidates.retain(|c| c != &a);
        self.candidates.push(a.clone());
        self.assignment = Some(a);
    }
}

/// Options of [`global_lower_bound`].
#[derive(Debug, Clone, PartialEq)]
pub struct BoundOptions {
    /// Wall-clock limit for the whole search.
    pub time_limit: Option<Duration>,
    /// Relative precision of the bisection on the period.
    pub precision: f64,
    /// A period known to be reached by a valid plan (the bisection's upper end), if any.
    pub known_period: Option<Seconds>,
    /// Stop once the bound proven reaches this period, from this instant on (a caller
    /// content with a plan within a gap of it: `best`'s `gap_tolerance`); the bound is
    /// then `complete: false`. Where the closing probe's period reaches it, that probe,
    /// left undecided in the last phase (or passed with a check cut short), is asked again
    /// with the time the phase has left.
    pub enough: Option<(Seconds, Instant)>,
    pub threads: std::num::NonZeroU32,
}

impl Default for BoundOptions {
    fn default() -> Self {
        BoundOptions {
            time_limit: None,
            precision: 2e-3,
            known_period: None,
            enough: None,
            threads: std::num::NonZeroU32::MIN,
        }
    }
}

/// The instance's quantities the relaxation uses (0-based layer index `l` is layer `l+1`).
#[derive(Debug, Clone)]
pub struct Relaxation {
    layers: usize,
    processors: usize,
    memory: f64,
    /// 2 (half duplex) or 1 (full duplex): a crossing cut's load on one link resource, in
    /// units of `comm`.
    link_factor: f64,
    u: Vec<f64>,
    fwd: Vec<f64>,
    bwd: Vec<f64>,
    weights: Vec<f64>,
    /// `e_j`: a layer's stash less what it shares with the next layer.
    stash: Vec<f64>,
    /// What a stage starting at the layer keeps of it: its whole stash (with stash overlaps
    /// only; `stash` where tensors are shared further, or where `stash` is zero).
    own: Vec<f64>,
    /// `SF(i)`, `SB(j)`, `S(j)` (suffix sums from layer `i` to `L`).
    suffix_f: Vec<f64>,
    suffix_b: Vec<f64>,
    /// `a(c)` of the cut after layer `c` (index `c` for `c < L - 1`).
    out: Vec<f64>,
    /// `a(c) / beta`.
    comm: Vec<f64>,
    /// Relative slack on capacities and copy counts (module docs, "Safety margins").
    slack: f64,
    /// The case, for the scheduled checks (module docs, "Scheduled premises"); `None` where
    /// they do not apply (tensors shared further apart than neighbours) or are switched
    /// off.
    scheduling: Option<Scheduling>,
    /// Whether a probe tries the search over assignments ([`search`]) before the MILP.
    search: bool,
}

/// What the scheduled checks need: the case itself, and what the checks answered so far.
#[derive(Debug, Clone)]
struct Scheduling {
    instance: Instance,
    platform: Platform,
    /// Checks that proved nothing, by the runs and crossing cuts of the processors checked
    /// (shared by the clones of one relaxation: the same case).
    answered: Arc<Mutex<HashMap<Vec<Holding>, Unproven>>>,
    /// Whether the last assignment that passed its checks passed with one of them
    /// unanswered (a processor's, or the group's): cut short by the time, neither a
    /// pattern nor a proof ([`Relaxation::passed_unanswered`]).
    unanswered: Arc<AtomicBool>,
    /// The most layers one check keeps on its processors ([`MAX_SCHEDULED_LAYERS`]; tests
    /// lower it to reach the left-out layers on small chains).
    max_layers: usize,
    /// The longest one check may take ([`SCHEDULED_CHECK_LIMIT`]; tests set none, so that
    /// every check is cut short).
    check_limit: Duration,
    /// The longest the check of a group may take, within `check_limit` (the same by
    /// default; tests set none, so that only the groups' checks are cut short).
    group_limit: Duration,
}

/// What the focused checks of some runs and cuts (one processor's, or a group's) proved
/// nothing at: a pattern found at `feasible_from` (hence at every longer period, by
/// stretching), and checks cut short by their time limit (period, limit). Neither is a
/// fact about the case; they only spare a check that would again prove nothing.
#[derive(Debug, Clone, Default)]
struct Unproven {
    feasible_from: Option<f64>,
    cut_short: Vec<(f64, Duration)>,
}

impl Unproven {
    /// Whether a pattern was found at or below `period` (hence at it, by stretching).
    fn has_pattern(&self, period: f64) -> bool {
        self.feasible_from.is_some_and(|t| t <= period)
    }

    /// Whether a check at `period` within `limit` would again prove nothing: a pattern was
    /// found at or below it, or a check at or below it with at least that long was cut short.
    fn spares(&self, period: f64, limit: Duration) -> bool {
        self.has_pattern(period)
            || self
                .cut_short
                .iter()
                .any(|&(t, l)| t <= period && l >= limit)
    }

    /// Records a check at `period` within `limit` cut short, unless a recorded one already
    /// spares it, and drops the recorded ones it spares (at a period at least as long, with
    /// no more time): what the list spares stays the same, and the list stays short.
    fn record_cut_short(&mut self, period: f64, limit: Duration) {
        if self.spares(period, limit) {
            return;
        }
        self.cut_short
            .retain(|&(t, l)| !(t >= period && l <= limit));
        self.cut_short.push((period, limit));
    }
}

/// The most layers a scheduled check keeps on the processors it focuses on (a MILP with an
/// integer per two of their operations): a processor holding more is checked on its first
/// ones, the others left out, and a group takes only processors that fit whole.
const MAX_SCHEDULED_LAYERS: usize = 24;

/// The longest one scheduled check may take; one that takes longer proves nothing.
const SCHEDULED_CHECK_LIMIT: Duration = Duration::from_secs(3);
/// The first pass over an assignment's processors gives each check at most this much
/// ([`Relaxation::scheduled_premises`]).
const QUICK_CHECK_LIMIT: Duration = Duration::from_millis(300);
/// A proof's generalisation (fewer cuts crossing) is a weaker problem, which HiGHS may take
/// long to find feasible: it gets this much, or four times what the proof took if more.
const GENERALISING_LIMIT: Duration = Duration::from_millis(250);

fn generalising(proof: Duration) -> Duration {
    (proof * 4).max(GENERALISING_LIMIT)
}

impl Relaxation {
    pub fn new(instance: &Instance, platform: &Platform) -> Self {
        let n = instance.len();
        let mut suffix_f = vec![0.0; n + 1];
        let mut suffix_b = vec![0.0; n + 1];
        for l in (0..n).rev() {
            suffix_f[l] = suffix_f[l + 1] + instance.layers[l].fwd;
            suffix_b[l] = suffix_b[l + 1] + instance.layers[l].bwd;
        }
        let out: Vec<f64> = (1..n).map(|c| instance.a(c)).collect();
        let stash = layer_stashes(instance);
        Relaxation {
            layers: n,
            processors: platform.processors,
            memory: platform.memory,
            link_factor: if platform.full_duplex { 1.0 } else { 2.0 },
            u: instance.layers.iter().map(|l| l.fwd + l.bwd).collect(),
            fwd: instance.layers.iter().map(|l| l.fwd).collect(),
            bwd: instance.layers.iter().map(|l| l.bwd).collect(),
            weights: instance.layers.iter().map(|l| l.weights).collect(),
            stash: stash.clone(),
            own: if instance.stash_shared.is_empty() && stash.iter().any(|&e| e > 0.0) {
                (1..=n)
                    .map(|l| instance.stash(l).max(stash[l - 1]))
                    .collect()
            } else {
                stash
            },
            suffix_f,
            suffix_b,
            comm: out.iter().map(|a| a / platform.bandwidth).collect(),
            out,
            slack: 1e-6 * (n as f64 / 100.0).max(1.0),
            scheduling: instance.stash_shared.is_empty().then(|| Scheduling {
                instance: instance.clone(),
                platform: platform.clone(),
                answered: Arc::default(),
                unanswered: Arc::default(),
                max_layers: MAX_SCHEDULED_LAYERS,
                check_limit: SCHEDULED_CHECK_LIMIT,
                group_limit: SCHEDULED_CHECK_LIMIT,
            }),
            search: true,
        }
    }

    /// The same relaxation without the scheduled checks: closed forms only (what
    /// [`relaxation_fits`] evaluates).
    pub fn closed_forms_only(mut self) -> Self {
        self.scheduling = None;
        self
    }

    /// The same relaxation decided by the MILP alone, without the search over assignments
    /// (for the tests of the MILP).
    pub fn milp_only(mut self) -> Self {
        self.search = false;
        self
    }

    /// The same relaxation with scheduled checks that keep at most `layers` layers on their
    /// processors (for tests: left-out layers on small chains).
    #[cfg(test)]
    fn checking_at_most(mut self, layers: usize) -> Self {
        if let Some(s) = &mut self.scheduling {
            s.max_layers = layers;
        }
        self
    }

    /// The same relaxation with scheduled checks that get at most `limit` each (for tests:
    /// none, every check cut short).
    #[cfg(test)]
    fn checking_within(mut self, limit: Duration) -> Self {
        if let Some(s) = &mut self.scheduling {
            s.check_limit = limit;
        }
        self
    }

    /// The same relaxation with the checks of groups given at most `limit` each (for tests:
    /// none, only the groups' checks cut short).
    #[cfg(test)]
    fn checking_groups_within(mut self, limit: Duration) -> Self {
        if let Some(s) = &mut self.scheduling {
            s.group_limit = limit;
        }
        self
    }

    fn suffix(&self, j: usize) -> f64 {
        self.suffix_f[j] + self.suffix_b[j]
    }

    /// Copies of layer `j`'s stash at the forward start of layer `i`'s stage (`j <= i`),
    /// with transfers of more than `level` levels downstream of `i` (module docs).
    fn copies_before(&self, i: usize, j: usize, period: f64, level: usize) -> f64 {
        let d = self.suffix_f[i] + self.suffix_b[j];
        if level == 0 || period.is_infinite() {
            return ceil_copies(d, period, self.slack);
        }
        (d / period + level_periods(level) - self.slack)
            .ceil()
            .max(1.0)
    }

    /// Copies of layer `j`'s stash held at every instant.
    fn copies_always(&self, j: usize, period: f64) -> f64 {
        floor_copies(self.suffix(j), period, self.slack)
    }

    /// The sequential period `U(1,L) + 2 sum_c comm_c`: at it and above, the relaxation is
    /// feasible whenever it is at an infinite period (module docs).
    pub fn sequential_period(&self) -> f64 {
        self.suffix(0) + 2.0 * self.comm.iter().sum::<f64>()
    }
}

/// The levels `q >= 1` with `x / T > q / LEVELS_PER_PERIOD + slack` (at most
/// `MAX_TRANSFER_PERIODS` periods' worth): fact 3's transfer term for transfers `x`
/// downstream (module docs).
fn transfer_levels(x: f64, period: f64, slack: f64) -> usize {
    if period.is_infinite() || x <= 0.0 {
        return 0;
    }
    let q = LEVELS_PER_PERIOD as f64;
    let levels = ((q * (x / period - slack)).ceil() - 1.0).max(0.0) as usize;
    levels.min(MAX_TRANSFER_PERIODS * LEVELS_PER_PERIOD)
}

/// The periods level `q` stands for.
fn level_periods(q: usize) -> f64 {
    q as f64 / LEVELS_PER_PERIOD as f64
}

/// What the relaxation charges each layer's stash: its marginal along the chain,
/// `stash(1..j) - stash(1..j-1)` (with `ChainSums::stash`, stash overlaps and shared tensors
/// included), clamped at zero. The argument needs `e_j >= 0` and `sum_{j in k..m} e_j <=
/// stash(k..m)` for every stage `k..m`; a stage keeping each tensor once makes the stash
/// subadditive and the marginals satisfy it, and it is checked here: an instance where it
/// fails gets zeros (a weaker bound, never a wrong one).
fn layer_stashes(instance: &Instance) -> Vec<f64> {
    let n = instance.len();
    let sums = instance.sums();
    let prefix = |j: usize| if j == 0 { 0.0 } else { sums.stash(1, j) };
    let e: Vec<f64> = (1..=n)
        .map(|j| (prefix(j) - prefix(j - 1)).max(0.0))
        .collect();
    let mut running = vec![0.0; n + 1];
    for j in 0..n {
        running[j + 1] = running[j] + e[j];
    }
    for k in 1..=n {
        for m in k..=n {
            let charged = running[m] - running[k - 1];
            let kept = sums.stash(k, m);
            if charged > kept + 1e-9 * kept.abs() + 1e-6 {
                return vec![0.0; n];
            }
        }
    }
    e
}

/// `ceil(d / T)` batches held over a stretch of at least `d`, rounded down past `slack`.
fn ceil_copies(d: f64, period: f64, slack: f64) -> f64 {
    if period.is_infinite() {
        return if d > 0.0 { 1.0 } else { 0.0 };
    }
    (d / period - slack).ceil().max(0.0)
}

/// `floor(w / T)` batches always held by a window of at least `w`, rounded down past
/// `slack`.
fn floor_copies(w: f64, period: f64, slack: f64) -> f64 {
    if period.is_infinite() {
        return 0.0;
    }
    (w / period - slack).floor().max(0.0)
}

/// Layers of one processor and the cuts assumed to cross: the premise of a row that the
/// bound adds lazily to the relaxation (module docs, "Exact windows"). Whenever a
/// processor holds every layer of `runs` and every cut of `cuts` crosses, the chain of one
/// batch carries at least the transfers of `cuts` in both directions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holding {
    /// Runs of consecutive layers (0-based, inclusive), in chain order.
    pub runs: Vec<(usize, usize)>,
    /// Cuts assumed crossing (cut `c` lies between layers `c` and `c + 1`), increasing.
    pub cuts: Vec<usize>,
}

impl Holding {
    /// Processor `p`'s runs in `assignment`, with every crossing cut from the one before
    /// its first layer on; `None` when `p` holds nothing.
    pub fn of(assignment: &[usize], p: usize) -> Option<Holding> {
        Holding::kept(assignment, p, &[])
    }

    /// [`Holding::of`] with only the layers of `p` that are not `left_out` (`left_out[l]`,
    /// missing entries false) as its runs; the cuts from the one before the first of them.
    fn kept(assignment: &[usize], p: usize, left_out: &[bool]) -> Option<Holding> {
        let n = assignment.len();
        let out = |l: usize| left_out.get(l).is_some_and(|&o| o);
        let runs = runs_where(n, |l| assignment[l] == p && !out(l));
        let first = runs.first()?.0;
        let cuts = (first.saturating_sub(1)..n.saturating_sub(1))
            .filter(|&c| assignment[c] != assignment[c + 1])
            .collect();
        Some(Holding { runs, cuts })
    }

    fn layers(&self) -> usize {
        self.runs.iter().map(|&(f, l)| l + 1 - f).sum()
    }

    /// A cut at the start or end of one of the runs.
    fn is_boundary(&self, c: usize) -> bool {
        self.runs.iter().any(|&(f, l)| c + 1 == f || c == l)
    }
}

/// How [`Relaxation::holding_fits_with`] counts a layer's windows.
#[derive(Debug, Clone, Copy)]
enum Windows {
    /// With the waits that the period forces between operations sharing a resource
    /// ([`Relaxation::waits`]). Monotone in the runs and the crossing cuts, not in where
    /// further transfers lie.
    Waited,
    /// Chain sums and transfers only, with `extra` seconds of one-way transfers more
    /// downstream of the first run only: where further crossing cuts would weigh least.
    Plain { extra: f64 },
}

/// The smallest `y >= x` at which an operation of length `after` may start, `y` after the
/// start of one of length `before` on the same resource, both repeating every `period`:
/// `y mod T` in `[before, T - after]` (module docs, "Waits"). The zone is widened by `tol`
/// on both sides; `x` itself when the two cannot share the resource at all (a load fact
/// excludes that case).
fn clear_of(x: f64, before: f64, after: f64, period: f64, tol: f64) -> f64 {
    let (lo, hi) = (before - tol, period - after + tol);
    if !period.is_finite() || hi < lo {
        return x;
    }
    let k = (x / period).floor();
    let r = x - k * period;
    if r < lo {
        k * period + lo
    } else if r <= hi {
        x
    } else {
        (k + 1.0) * period + lo
    }
}

impl Relaxation {
    /// `waits[l]`: a lower bound on the time that layer `l`'s window (from its forward's
    /// start to its backward's end) spends waiting at `period`, with the cuts `crossing`
    /// crossing and no other (`crossing[c]`: between layers `c` and `c + 1`, 0-based; one
    /// entry per layer, the last unused); zeros at an infinite period (module docs, "Waits").
    pub fn waits(&self, crossing: &[bool], period: f64) -> Vec<f64> {
        let n = self.layers;
        let mut waits = vec![0.0; n];
        if !period.is_finite() {
            return waits;
        }
        let tol = self.slack * period;
        let half_duplex = self.link_factor > 1.5;
        // span: the least time from F_l's start to B_l's end, from the last layer up.
        let mut span_next = 0.0;
        let mut down = 0.0;
        for l in (0..n).rev() {
            let (f, b) = (self.fwd[l], self.bwd[l]);
            let to_backward = if l + 1 == n {
                f
            } else if crossing[l] {
                let d = self.comm[l];
                down += d;
                // From the forward transfer's start to the backward transfer's start.
                let mut gap = d + span_next;
                if half_duplex {
                    gap = clear_of(gap, d, d, period, tol);
                }
                f + gap + d
            } else {
                f + span_next
            };
            // F_l and B_l are parts of their stage's forward and backward: they share the
            // processor.
            let span = clear_of(to_backward, f, b, period, tol) + b;
            waits[l] = (span - self.suffix(l) - 2.0 * down).max(0.0);
            span_next = span;
        }
        waits
    }

    /// Whether a processor holding `h` can meet the memory and load facts at `period`, its
    /// windows counted with the transfers of `h.cuts` in both directions: facts 1-4 of the
    /// module docs for one processor, with every cut outside `h.cuts` taken as not crossing
    /// (fewer transfers, shorter windows: a relaxation of every assignment that satisfies
    /// the premise, whatever stages its runs are cut into).
    pub fn holding_fits(&self, h: &Holding, period: f64) -> bool {
        self.holding_fits_with(h, period, Windows::Waited)
    }

    /// [`Relaxation::holding_fits`] with windows counted as `windows` says.
    fn holding_fits_with(&self, h: &Holding, period: f64, windows: Windows) -> bool {
        self.holding_need(h, period, windows).is_some()
    }

    /// What a processor holding `h` needs on average over a period (fact 4: its static
    /// memory and every stash over its window; the static memory alone at an infinite
    /// period), or `None` when it cannot meet facts 1-4 ([`Relaxation::holding_fits`]).
    fn holding_need(&self, h: &Holding, period: f64, windows: Windows) -> Option<f64> {
        let n = self.layers;
        let extra = match windows {
            Windows::Waited => 0.0,
            Windows::Plain { extra } => extra,
        };
        let cap_time = period * (1.0 + self.slack);
        let cap_mem = self.memory * (1.0 + self.slack);
        let mut crossing = vec![false; n];
        for &c in &h.cuts {
            crossing[c] = true;
        }
        // down[l]: one direction's transfers of the crossing cuts c >= l.
        let mut down = vec![0.0; n + 1];
        for c in (0..n).rev() {
            let t = if c + 1 < n && crossing[c] {
                self.comm[c]
            } else {
                0.0
            };
            down[c] = down[c + 1] + t;
        }
        let (first, last) = h.runs[0];
        for d in &mut down[first..=last] {
            *d += extra;
        }
        let mut fixed = 0.0;
        let mut load = 0.0;
        for &(f, l) in &h.runs {
            fixed += 3.0 * self.weights[f..=l].iter().sum::<f64>();
            load += self.u[f..=l].iter().sum::<f64>();
            if f > 0 && crossing[f - 1] {
                fixed += 2.0 * self.out[f - 1];
            }
            if l + 1 < n && crossing[l] {
                fixed += 2.0 * self.out[l];
            }
        }
        if fixed > cap_mem || (period.is_finite() && load > cap_time) {
            return None;
        }
        // Every layer is an item. The first layer of a run starts a stage, which keeps its
        // whole stash; any other layer either shares a stage with the layer before it (its
        // marginal, held at least over that layer's window) or starts one (its whole stash,
        // the tensor it shares with the layer before then kept twice, over its own window):
        // the smaller of the two. A stage keeps the whole stash of its first layer and the
        // marginals of the others over its own window, which contains theirs.
        let first: Vec<bool> = {
            let mut v = vec![false; n];
            h.runs.iter().for_each(|&(f, _)| v[f] = true);
            v
        };
        let layers: Vec<usize> = h
            .runs
            .iter()
            .flat_map(|&(f, l)| f..=l)
            .filter(|&j| self.own[j] > 0.0)
            .collect();
        // Layer j's least charge, with `held(x)` the batches held by a window from layer x.
        let charge = |j: usize, held: &dyn Fn(usize) -> f64| {
            let whole = self.own[j] * held(j);
            if first[j] {
                whole
            } else {
                whole.min(self.stash[j] * held(j - 1))
            }
        };
        let waits = match windows {
            Windows::Waited => self.waits(&crossing, period),
            Windows::Plain { .. } => vec![0.0; n],
        };
        let window = |j: usize| self.suffix(j) + 2.0 * down[j] + waits[j];
        let mut average = 0.0;
        if period.is_finite() {
            average = layers
                .iter()
                .map(|&j| charge(j, &|x| window(x) / period))
                .sum();
            if fixed + average > cap_mem {
                return None;
            }
        }
        for &i in &layers {
            let mut need = fixed;
            for &j in &layers {
                need += if j <= i {
                    charge(j, &|x| {
                        let d = self.suffix_f[i] + down[i] + waits[i] + self.suffix_b[x] + down[x];
                        ceil_copies(d, period, self.slack)
                    })
                } else {
                    charge(j, &|x| floor_copies(window(x), period, self.slack))
                };
            }
            if need > cap_mem {
                return None;
            }
        }
        Some(fixed + average)
    }

    /// Drops whole runs of `h` while it still cannot fit at `period` (`h` must not fit).
    fn fewer_runs(&self, mut h: Holding, period: f64, windows: Windows) -> Holding {
        let mut k = 0;
        while h.runs.len() > 1 && k < h.runs.len() {
            let mut t = h.clone();
            t.runs.remove(k);
            if self.holding_fits_with(&t, period, windows) {
                k += 1;
            } else {
                h = t;
            }
        }
        let first = h.runs[0].0;
        h.cuts.retain(|&c| c + 1 >= first);
        h
    }

    /// Drops the cuts of `h` that bound no run while it still cannot fit at `period`.
    fn fewer_cuts(&self, mut h: Holding, period: f64, windows: Windows) -> Holding {
        // Cheapest transfers first: dropping them is the likeliest to keep the proof.
        let mut order = h.cuts.clone();
        order.sort_by(|&a, &b| self.comm[a].total_cmp(&self.comm[b]));
        for c in order {
            if h.is_boundary(c) {
                continue;
            }
            let mut t = h.clone();
            t.cuts.retain(|&x| x != c);
            if !self.holding_fits_with(&t, period, windows) {
                h = t;
            }
        }
        h
    }

    /// The cuts that may cross without bounding a run of `h`: every cut from the first
    /// run's first layer on, except the runs' insides and boundaries.
    fn free_cuts(&self, h: &Holding) -> Vec<usize> {
        let first = h.runs[0].0;
        (first..self.layers.saturating_sub(1))
            .filter(|&c| !h.is_boundary(c) && !h.runs.iter().any(|&(f, l)| f <= c && c < l))
            .collect()
    }

    /// For a premise that keeps only its runs' boundary cuts: the transfers (one
    /// direction, seconds) of further crossing cuts beyond which it cannot fit at `period`
    /// wherever they lie. `None` when it fits with every free cut crossing;
    /// `Some(negative)` when it cannot fit even with none.
    fn transfer_limit(&self, h: &Holding, period: f64) -> Option<f64> {
        let most: f64 = self.free_cuts(h).iter().map(|&c| self.comm[c]).sum();
        if self.holding_fits_with(h, period, Windows::Plain { extra: most }) {
            return None;
        }
        if !self.holding_fits_with(h, period, Windows::Plain { extra: 0.0 }) {
            return Some(-1.0);
        }
        let (mut lo, mut hi) = (0.0, most);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if self.holding_fits_with(h, period, Windows::Plain { extra: mid }) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // `hi` does not fit: more than `hi` cannot fit either.
        Some(hi)
    }

    /// The premises that `assignment` violates at `period`, one per processor that cannot
    /// fit: a transfer limit on its runs when that alone excludes the assignment, else the
    /// runs with the crossing cuts that matter.
    fn violated(&self, assignment: &[usize], period: f64, windows: Windows) -> Vec<Premise> {
        let mut out = Vec::new();
        for p in 0..self.processors {
            let Some(h) = Holding::of(assignment, p) else {
                continue;
            };
            if self.holding_fits_with(&h, period, windows) {
                continue;
            }
            let h = self.fewer_runs(h, period, windows);
            let bounded = Holding {
                runs: h.runs.clone(),
                cuts: h
                    .cuts
                    .iter()
                    .copied()
                    .filter(|&c| h.is_boundary(c))
                    .collect(),
            };
            let crossing: f64 = self
                .free_cuts(&bounded)
                .iter()
                .filter(|&&c| assignment[c] != assignment[c + 1])
                .map(|&c| self.comm[c])
                .sum();
            match self.transfer_limit(&bounded, period) {
                Some(limit) if crossing > limit => out.push(Premise::Limited(bounded)),
                _ => out.push(Premise::Exact(self.fewer_cuts(h, period, windows))),
            }
        }
        out
    }
}

impl Relaxation {
    /// Whether the assignment that last passed [`Self::scheduled_premises`] passed with a
    /// check cut short by the time (a processor's, or the group's): it passed the
    /// relaxation, but a longer check might still exclude it.
    fn passed_unanswered(&self) -> bool {
        self.scheduling
            .as_ref()
            .is_some_and(|s| s.unanswered.load(Ordering::Relaxed))
    }

    /// The scheduled checks (module docs, "Scheduled premises"): for each processor of
    /// `assignment`, the scheduling MILP focused on it at `period` (its own operations and
    /// memory, every stage structure of its runs, each other layer's forward and backward
    /// and each cut's two transfers on resources of their own; a processor of more than
    /// `MAX_SCHEDULED_LAYERS` layers with its later ones left out). The first processor
    /// proven to have no pattern yields the premise, in the most general form that a
    /// weaker check still proves ([`generalisations`], then the layers below it as a pure
    /// delay, [`Relaxation::tail_generalisation`]), else its runs with every crossing
    /// cut from its first layer on. When no processor is proven alone, the tightest
    /// processors together (as many as `MAX_SCHEDULED_LAYERS` layers allow, not every
    /// used one unless there are two; the transfers of the cuts between two of them share
    /// their link) get one check focused on all of them, and a proof yields a premise on
    /// the group, with members dropped while it still holds. A check cut short by the time
    /// proves nothing, and an assignment that passes with one (a processor's or the
    /// group's) passes unanswered ([`Self::passed_unanswered`]). The processors closest to
    /// their limits by the closed forms (load, average memory) go first, so that the time
    /// goes where a proof is likeliest, each within `QUICK_CHECK_LIMIT` first and, when
    /// none is proven, those cut short again with the full limit, the fewest layers first
    /// (the smallest MILP is the likeliest to be decided before the probe's time runs out);
    /// a check that would repeat one that proved nothing ([`Unproven`]) is skipped. An
    /// assignment where a layer or a cut alone overloads its resource gets no check (see
    /// the body).
    fn scheduled_premises(
        &self,
        assignment: &[usize],
        period: f64,
        threads: std::num::NonZeroU32,
        deadline: Option<Instant>,
    ) -> crate::error::Result<Vec<Premise>> {
        let Some(s) = &self.scheduling else {
            return Ok(Vec::new());
        };
        s.unanswered.store(false, Ordering::Relaxed);
        if !period.is_finite() {
            return Ok(Vec::new());
        }
        // A premise records a processor's runs and the cuts from the one before its first
        // layer on, not the cuts above it: it rests on the operations above the processor
        // never deciding its check, which holds when each of them fits its resource alone
        // (waits of up to a period then put their pairs anywhere modulo `T`). An assignment
        // where a layer or a crossing cut alone overloads its resource has no plan, and the
        // closed forms exclude it: it gets no check.
        let cap = period * (1.0 + self.slack);
        let alone = self.u.iter().all(|&u| u <= cap)
            && (0..self.layers.saturating_sub(1)).all(|c| {
                assignment[c] == assignment[c + 1] || self.link_factor * self.comm[c] <= cap
            });
        if !alone {
            return Ok(Vec::new());
        }
        let limit = || {
            deadline
                .map_or(s.check_limit, |d| {
                    d.saturating_duration_since(Instant::now())
                })
                .min(s.check_limit)
        };
        // Each processor with its runs, tightest first.
        let mut order: Vec<(f64, usize, Holding)> = (0..self.processors)
            .filter_map(|p| Holding::of(assignment, p).map(|h| (p, h)))
            .map(|(p, h)| {
                let load: f64 = h
                    .runs
                    .iter()
                    .map(|&(f, l)| self.u[f..=l].iter().sum::<f64>())
                    .sum();
                let memory = self
                    .holding_need(&h, period, Windows::Waited)
                    .map_or(f64::INFINITY, |need| need / self.memory);
                ((load / period).max(memory), p, h)
            })
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        // One focused check on `group` (holding `holdings`), unless one like it proved
        // nothing before.
        let check = |a: &[usize],
                     group: &[usize],
                     left_out: &[bool],
                     holdings: &[Holding],
                     at_most: Duration|
         -> crate::error::Result<Option<bool>> {
            let limit = limit().min(at_most);
            if limit.is_zero() {
                return Ok(None);
            }
            // A pattern found at or below the period answers the check; a check cut short
            // there with as much time spares it unanswered.
            let (has_pattern, spared) = s.answered.lock().map_or((false, false), |m| {
                m.get(holdings).map_or((false, false), |u: &Unproven| {
                    (u.has_pattern(period), u.spares(period, limit))
                })
            });
            if has_pattern {
                return Ok(Some(true));
            }
            if spared {
                return Ok(None);
            }
            let answer = focused_check(s, a, group, left_out, period, None, threads, limit)?;
            if answer != Some(false) {
                if let Ok(mut m) = s.answered.lock() {
                    let u = m.entry(holdings.to_vec()).or_default();
                    match answer {
                        Some(true) => {
                            u.feasible_from =
                                Some(u.feasible_from.map_or(period, |t| t.min(period)))
                        }
                        _ => u.record_cut_short(period, limit),
                    }
                }
            }
            Ok(answer)
        };
        // Two passes: each processor first within `QUICK_CHECK_LIMIT`, then those cut short
        // within the full limit. One proof is enough, and most come in a fraction of a
        // second, while a large processor's check may run to the limit and prove nothing.
        let mut cut_short = vec![false; order.len()];
        // The second pass takes the checks of the fewest layers first: a large one runs to
        // its limit more often than not, and it would leave a smaller one, which often
        // proves in a second, without the time the probe has left.
        let tightest_first: Vec<usize> = (0..order.len()).collect();
        let mut fewest_layers_first = tightest_first.clone();
        fewest_layers_first.sort_by_key(|&k| order[k].2.layers().min(s.max_layers));
        for (pass, at_most, visit) in [
            (0, QUICK_CHECK_LIMIT, &tightest_first),
            (1, Duration::MAX, &fewest_layers_first),
        ] {
            for &k in visit {
                let (_, p, h) = &order[k];
                if pass == 1 && !cut_short[k] {
                    continue;
                }
                // A processor of more layers than a check can take is checked on its first
                // ones, the others left out (a relaxation: `Scope::left_out`).
                let p = *p;
                let left_out = after_first(assignment, p, s.max_layers);
                let h = Holding::kept(assignment, p, &left_out).unwrap_or_else(|| h.clone());
                let started = Instant::now();
                match check(
                    assignment,
                    &[p],
                    &left_out,
                    std::slice::from_ref(&h),
                    at_most,
                )? {
                    Some(false) => {}
                    Some(true) => {
                        cut_short[k] = false;
                        continue;
                    }
                    None => {
                        cut_short[k] = true;
                        continue;
                    }
                }
                let spent = started.elapsed();
                let mut proven = vec![h];
                let mut generalised = false;
                for (a, left_out, general) in generalisations(assignment, &[p], &left_out) {
                    if general != proven
                        && check(&a, &[p], &left_out, &general, generalising(spent))? == Some(false)
                    {
                        proven = general;
                        generalised = true;
                        break;
                    }
                }
                // None of those: the layers after the processor's last kept one as a pure
                // delay (`Scope::tail`), which holds wherever at least as much transfer
                // crosses there.
                if !generalised {
                    if let Some((tail, holding, transfer)) =
                        self.tail_generalisation(assignment, p, &left_out)
                    {
                        let limit = limit().min(generalising(spent));
                        if !limit.is_zero()
                            && focused_check(
                                s,
                                assignment,
                                &[p],
                                &left_out,
                                period,
                                Some(tail),
                                threads,
                                limit,
                            )? == Some(false)
                        {
                            return Ok(vec![Premise::Scheduled {
                                holdings: vec![holding],
                                period,
                                tail: Some(transfer),
                            }]);
                        }
                    }
                }
                // One proof excludes the assignment: the time of the other checks is better
                // spent on the assignments that come next.
                return Ok(vec![Premise::Scheduled {
                    holdings: proven,
                    period,
                    tail: None,
                }]);
            }
        }
        // No proof: the assignment passes (unless a group below is proven), answered or not.
        s.unanswered
            .store(cut_short.iter().any(|&c| c), Ordering::Relaxed);
        // None alone: the tightest together, without the one with the most layers first
        // (its operations make the largest part of the MILP), then with it.
        let greedy = |candidates: &[(f64, usize, Holding)]| {
            let mut group: Vec<(usize, Holding)> = Vec::new();
            let mut layers = 0;
            for (_, p, h) in candidates {
                if layers + h.layers() <= s.max_layers {
                    layers += h.layers();
                    group.push((*p, h.clone()));
                }
            }
            group
        };
        let largest = order
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, _, h))| h.layers())
            .map(|(i, _)| i);
        let without_largest: Vec<(f64, usize, Holding)> = order
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != largest)
            .map(|(_, c)| c.clone())
            .collect();
        // A group of every used processor is the whole assignment's own problem, which the
        // exact checks of `best` decide: checked here only on two processors, where it is
        // the only group (and the bound alone has no other way to exclude an assignment
        // whose processors each pass alone); on more, its MILP took the time of the probes
        // (16-layer chains on 4 processors: the bound's phase 2-5 times longer, no bound
        // higher).
        let used = assignment.iter().copied().max().map_or(0, |m| m + 1);
        // Whether a group's check was cut short: an assignment that passes then passes
        // unanswered, as when a processor's was.
        let group_cut_short = std::cell::Cell::new(false);
        let proves = |group: &[(usize, Holding)]| -> crate::error::Result<bool> {
            if group.len() < 2 || (group.len() >= used && used > 2) {
                return Ok(false);
            }
            let (members, holdings) = in_chain_order(group);
            let answer = check(assignment, &members, &[], &holdings, s.group_limit)?;
            if answer.is_none() {
                group_cut_short.set(true);
            }
            Ok(answer == Some(false))
        };
        let small = greedy(&without_largest);
        let full = greedy(&order);
        let mut group = if proves(&small)? {
            small
        } else if full != small && proves(&full)? {
            full
        } else {
            if group_cut_short.get() {
                s.unanswered.store(true, Ordering::Relaxed);
            }
            return Ok(Vec::new());
        };
        // Fewer members while the proof holds, the most layers first: a premise on fewer
        // layers excludes more assignments, and its check is a smaller MILP.
        let mut by_size: Vec<Holding> = group.iter().map(|(_, h)| h.clone()).collect();
        by_size.sort_by_key(|h| std::cmp::Reverse(h.layers()));
        for h in by_size {
            if group.len() <= 2 {
                break;
            }
            let fewer: Vec<(usize, Holding)> =
                group.iter().filter(|(_, g)| g != &h).cloned().collect();
            if proves(&fewer)? {
                group = fewer;
            }
        }
        let (members, mut holdings) = in_chain_order(&group);
        for (a, left_out, general) in generalisations(assignment, &members, &[]) {
            if general != holdings
                && check(&a, &members, &left_out, &general, GENERALISING_LIMIT)? == Some(false)
            {
                holdings = general;
                break;
            }
        }
        Ok(vec![Premise::Scheduled {
            holdings,
            period,
            tail: None,
        }])
    }
}

impl Relaxation {
    /// The tail generalisation of a proof on processor `p` of `assignment` (its layers
    /// `left_out` left out): the first layer after its last kept one (where
    /// `Scope::tail` starts), its holding with only the cuts up to that layer, and the
    /// one-way transfer of the cuts crossing below it. `None` when the kept layers end the
    /// chain.
    fn tail_generalisation(
        &self,
        assignment: &[usize],
        p: usize,
        left_out: &[bool],
    ) -> Option<(usize, Holding, f64)> {
        let mut h = Holding::kept(assignment, p, left_out)?;
        let last = h.runs.last()?.1;
        if last + 1 >= self.layers {
            return None;
        }
        h.cuts.retain(|&c| c <= last);
        let transfer = self.tail_transfer(&h, assignment);
        Some((last + 1, h, transfer))
    }

    /// The one-way transfer of the cuts of `assignment` (its first layers, possibly not
    /// all) that cross below the last layer of `h`'s runs.
    pub(crate) fn tail_transfer(&self, h: &Holding, assignment: &[usize]) -> f64 {
        let last = h.runs.last().map_or(0, |r| r.1);
        (last + 1..assignment.len().saturating_sub(1))
            .filter(|&c| assignment[c] != assignment[c + 1])
            .map(|c| self.comm[c])
            .sum()
    }

    /// Whether `transfer` (from [`Relaxation::tail_transfer`]) reaches what a tail premise
    /// was proven with: its own cut set's sum, added up in another order, counts.
    pub(crate) fn reaches(transfer: f64, proven: f64) -> bool {
        transfer >= proven * (1.0 - 1e-12)
    }
}

/// Which layers of processor `p` in `assignment` a check keeping its first `keep` ones
/// leaves out (`left_out[l]`: layer `l` is `p`'s and not among them).
fn after_first(assignment: &[usize], p: usize, keep: usize) -> Vec<bool> {
    let mut kept = 0;
    assignment
        .iter()
        .map(|&q| {
            let mine = q == p;
            kept += usize::from(mine);
            mine && kept > keep
        })
        .collect()
}

/// The processors of a group and their holdings, in the chain order of their first layers
/// (the form a premise on the group is kept in).
fn in_chain_order(group: &[(usize, Holding)]) -> (Vec<usize>, Vec<Holding>) {
    let mut group = group.to_vec();
    group.sort_by_key(|(_, h)| h.runs[0].0);
    group.into_iter().unzip()
}

/// The checks that would make a proof on the processors `members` of `assignment` (their
/// layers `left_out` left out) a more general premise, most general first, each with its
/// holdings ([`kept_holdings`]): every other layer on one processor outside them (only the
/// boundary cuts of the members' runs crossing), with every layer after the last kept one
/// left out on the processor that holds it (no cut crossing after it) or not, and the
/// assignment itself with those layers left out. Each is a
/// relaxation of the problem it generalises (fewer transfers on the chain), so a proof of
/// it is a premise on fewer cuts.
fn generalisations(
    assignment: &[usize],
    members: &[usize],
    left_out: &[bool],
) -> Vec<(Vec<usize>, Vec<bool>, Vec<Holding>)> {
    let n = assignment.len();
    let mut left_out = left_out.to_vec();
    left_out.resize(n, false);
    let other = (0..)
        .find(|q| !members.contains(q))
        .expect("a label outside finitely many members");
    let alone: Vec<usize> = assignment
        .iter()
        .map(|&q| if members.contains(&q) { q } else { other })
        .collect();
    let kept = |l: usize| members.contains(&assignment[l]) && !left_out[l];
    let last = (0..n).rev().find(|&l| kept(l));
    // `a` with every layer after the last kept one left out on the processor of that one.
    let free_after = |a: &[usize]| -> Option<(Vec<usize>, Vec<bool>)> {
        let last = last.filter(|&l| l + 1 < n)?;
        let mut free = a.to_vec();
        let mut free_out = left_out.clone();
        for l in last + 1..n {
            free[l] = a[last];
            free_out[l] = true;
        }
        Some((free, free_out))
    };
    let mut out = Vec::new();
    let mut push = |(a, left_out): (Vec<usize>, Vec<bool>)| {
        let holdings = kept_holdings(&a, members, &left_out);
        out.push((a, left_out, holdings));
    };
    if let Some(free) = free_after(&alone) {
        push(free);
    }
    push((alone, left_out.clone()));
    if let Some(free) = free_after(assignment) {
        push(free);
    }
    out
}

/// The holdings of the processors `members` in `assignment`, in chain order: each one's
/// layers not `left_out` ([`Holding::kept`]; the premise a proof of the focused check
/// gives, `Premise::Scheduled`).
fn kept_holdings(assignment: &[usize], members: &[usize], left_out: &[bool]) -> Vec<Holding> {
    let mut holdings: Vec<Holding> = members
        .iter()
        .filter_map(|&p| Holding::kept(assignment, p, left_out))
        .collect();
    holdings.sort_by_key(|h| h.runs[0].0);
    holdings
}

/// The maximal runs of consecutive layers among `0..n` where `holds` is true.
fn runs_where(n: usize, holds: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for l in (0..n).filter(|&l| holds(l)) {
        match runs.last_mut() {
            Some(r) if r.1 + 1 == l => r.1 = l,
            _ => runs.push((l, l)),
        }
    }
    runs
}

/// The scheduling MILP that [`focused_check`] solves; `None` when the group's static
/// memory alone does not fit.
fn focused_milp(
    s: &Scheduling,
    assignment: &[usize],
    group: &[usize],
    left_out: &[bool],
    period: f64,
    tail: Option<usize>,
) -> Option<crate::milp::pattern_milp::PatternMilp> {
    use crate::milp::fixed_allocation::assignment_structures;
    use crate::milp::pattern_milp::{PatternMilp, Scope};
    // Every stage structure of the assignment, merges only on the group (the scheduled
    // checks run only without `stash_shared`, where these are a stage per layer).
    let (allocation, mut mergeable) = assignment_structures(&s.instance, assignment);
    for (l, m) in mergeable.iter_mut().enumerate() {
        *m &= group.contains(&assignment[l]);
    }
    let scope = Scope {
        focus: Some(group.to_vec()),
        mergeable,
        left_out: left_out.to_vec(),
        tail,
    };
    PatternMilp::new(&s.instance, &s.platform, &allocation, period, &scope)
}

/// Whether the processors `group` of `assignment` can fit at `period` by the scheduling
/// MILP focused on them (a stage per layer, their own consecutive layers that share a
/// tensor free to merge; their layers `left_out` left out of them; layers from `tail` on
/// a pure delay, `Scope::tail`): `Some(false)` proven not, `None` undecided within `limit`.
#[allow(clippy::too_many_arguments)]
fn focused_check(
    s: &Scheduling,
    assignment: &[usize],
    group: &[usize],
    left_out: &[bool],
    period: f64,
    tail: Option<usize>,
    threads: std::num::NonZeroU32,
    limit: Duration,
) -> crate::error::Result<Option<bool>> {
    let Some(milp) = focused_milp(s, assignment, group, left_out, period, tail) else {
        return Ok(Some(false));
    };
    let options = MilpOptions {
        threads,
        time_limit: Some(limit),
        feasibility_jump: false,
        ..MilpOptions::default()
    };
    let r = milp.model.solve(&options, Some(limit))?;
    Ok(match r.status {
        SolveStatus::Infeasible => Some(false),
        SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => Some(true),
        SolveStatus::NoSolutionWithinLimit => None,
    })
}

/// What the relaxation learnt of one case, kept across probes and calls on that case: the
/// premises found so far, and how far the search over assignments got at each period
/// ([`search::Frontiers`]: a later search at that period or a shorter one goes on from
/// there instead of walking again through what was already excluded).
#[derive(Debug, Clone, Default)]
pub struct Learnt {
    pub premises: Vec<Premise>,
    frontiers: search::Frontiers,
    /// How the MILP's loops that followed an undecided search ended on this case: how
    /// many decided their probe, how many did not.
    loops_after_search: LoopsAfterSearch,
}

/// How the MILP's loops after an undecided search have ended on one case ([`Learnt`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LoopsAfterSearch {
    decided: usize,
    undecided: usize,
}

impl LoopsAfterSearch {
    /// Counts the end of one loop (its probe's answer).
    fn record(&mut self, answer: &Probe) {
        match answer {
            Probe::Infeasible | Probe::Feasible(_) => self.decided += 1,
            Probe::Undecided | Probe::TooLarge => self.undecided += 1,
        }
    }

    /// Whether the loop has shown it decides nothing on the case: `FUTILE_MILP_LOOPS`
    /// undecided and none decided. The search then takes the whole of each probe.
    fn futile(&self) -> bool {
        self.decided == 0 && self.undecided >= FUTILE_MILP_LOOPS
    }
}

/// What the bound has learnt cannot fit (module docs, "Exact windows").
#[derive(Debug, Clone, PartialEq)]
pub enum Premise {
    /// These runs on one processor with these cuts crossing.
    Exact(Holding),
    /// These runs on one processor, their boundary cuts crossing, and more transfers on
    /// their free cuts than [`Relaxation::transfer_limit`] allows at the period.
    Limited(Holding),
    /// This assignment (labels as the MILP chose them), which an exact check proved to have
    /// no plan at `period` or below ([`decide_period`]); it excludes nothing at longer
    /// periods.
    Excluded { assignment: Vec<usize>, period: f64 },
    /// Each holding's runs on a processor of its own (distinct processors) with all their
    /// cuts crossing, which the scheduling MILP focused on those processors proved to have
    /// no pattern at `period` (module docs, "Scheduled premises"); valid at `period` and
    /// below. Usually one processor; a group where each passes alone.
    /// With `tail: Some(x)` (one holding, its cuts only down to its last layer): and the
    /// cuts crossing below its last layer carry at least `x` seconds of one-way transfer;
    /// proven with those layers as a pure delay (`Scope::tail`, "Generalising a proof").
    Scheduled {
        holdings: Vec<Holding>,
        period: f64,
        tail: Option<f64>,
    },
}

/// Whether distinct processors of `assignment` hold the runs of each of `holdings` (one
/// processor each), with every cut of theirs crossing: where a [`Premise::Scheduled`]
/// applies. `assignment` must reach every layer and cut of `holdings`.
pub(crate) fn held_apart(holdings: &[Holding], assignment: &[usize]) -> bool {
    let mut used: Vec<usize> = Vec::with_capacity(holdings.len());
    holdings.iter().all(|h| {
        let q = assignment[h.runs[0].0];
        let fresh = !used.contains(&q);
        used.push(q);
        fresh
            && h.runs
                .iter()
                .all(|&(f, l)| assignment[f..=l].iter().all(|&p| p == q))
            && h.cuts.iter().all(|&c| assignment[c] != assignment[c + 1])
    })
}

/// True when the assignment (`assignment[l]` the processor of layer `l+1`) satisfies the
/// relaxation at `period` (module docs): the exact counterpart of the MILP, for tests and
/// for tightening a solution's period.
pub fn relaxation_fits(relax: &Relaxation, assignment: &[usize], period: f64) -> bool {
    let n = relax.layers;
    assert_eq!(assignment.len(), n);
    let cap_time = period * (1.0 + relax.slack);
    let cap_mem = relax.memory * (1.0 + relax.slack);
    let crosses = |c: usize| assignment[c] != assignment[c + 1];
    // Windows with the transfers downstream; `level[l]`: the level of `X_l`.
    let mut window = vec![0.0; n];
    let mut level = vec![0; n];
    let mut downstream = 0.0;
    for j in (0..n).rev() {
        if j + 1 < n && crosses(j) {
            downstream += 2.0 * relax.comm[j];
        }
        window[j] = relax.suffix(j) + downstream;
        level[j] = transfer_levels(downstream, period, relax.slack);
    }
    for p in 0..relax.processors {
        let mine: Vec<usize> = (0..n).filter(|&l| assignment[l] == p).collect();
        if mine.is_empty() {
            continue;
        }
        let load: f64 = mine.iter().map(|&l| relax.u[l]).sum();
        if period.is_finite() && load > cap_time {
            return false;
        }
        let mut fixed: f64 = mine.iter().map(|&l| 3.0 * relax.weights[l]).sum();
        for c in 0..n.saturating_sub(1) {
            if crosses(c) && (assignment[c] == p || assignment[c + 1] == p) {
                fixed += 2.0 * relax.out[c];
            }
        }
        // A run's first layer starts a stage, which keeps its whole stash.
        let starts = |j: usize| j == 0 || assignment[j - 1] != p;
        let extra = |j: usize| {
            if starts(j) {
                relax.own[j] - relax.stash[j]
            } else {
                0.0
            }
        };
        if period.is_finite() {
            let average: f64 = mine
                .iter()
                .map(|&j| relax.stash[j] * window[j] / period + extra(j) * relax.suffix(j) / period)
                .sum();
            if fixed + average > cap_mem {
                return false;
            }
        }
        for &i in &mine {
            let need: f64 = mine
                .iter()
                .map(|&j| {
                    let copies = if j <= i {
                        relax.copies_before(i, j, period, level[i])
                    } else {
                        relax.copies_always(j, period)
                    };
                    copies * (relax.stash[j] + extra(j))
                })
                .sum();
            if fixed + need > cap_mem {
                return false;
            }
        }
    }
    if period.is_finite() {
        let mut links = std::collections::HashMap::<(usize, usize), f64>::new();
        for c in 0..n.saturating_sub(1) {
            if crosses(c) {
                let (a, b) = (assignment[c], assignment[c + 1]);
                *links.entry((a.min(b), a.max(b))).or_default() +=
                    relax.link_factor * relax.comm[c];
            }
        }
        if links.values().any(|&load| load > cap_time) {
            return false;
        }
    }
    (0..relax.processors)
        .filter_map(|p| Holding::of(assignment, p))
        .all(|h| relax.holding_fits(&h, period))
}

/// The variables of the relaxation MILP.
struct Layout {
    /// `x[l][p]`: layer `l` on processor `p`.
    x: Vec<Vec<Var>>,
}

/// The relaxation at `period` (possibly infinite) as a feasibility MILP, rows scaled so
/// that times are in units of the period and bytes in units of the memory.
fn relaxation_model(relax: &Relaxation, period: f64, premises: &[Premise]) -> (Model, Layout) {
    let n = relax.layers;
    let procs = relax.processors.min(n).max(1);
    let finite = period.is_finite();
    let mem = relax.memory;
    let cap_mem = 1.0 + relax.slack;
    let cap_time = 1.0 + relax.slack;
    let mut m = Model::new();
    // Assignment with restricted-growth symmetry breaking.
    let x: Vec<Vec<Var>> = (0..n)
        .map(|_| (0..procs).map(|_| m.binary(0.0)).collect())
        .collect();
    for l in 0..n {
        let terms: Vec<(Var, f64)> = x[l].iter().map(|&v| (v, 1.0)).collect();
        m.row(1.0, 1.0, &terms);
        for p in 1..procs {
            if p > l {
                m.le(&[(x[l][p], 1.0)], 0.0);
            } else {
                // Processor p holds layer l only if processor p-1 holds an earlier layer.
                let mut terms = vec![(x[l][p], 1.0)];
                terms.extend((0..l).map(|k| (x[k][p - 1], -1.0)));
                m.le(&terms, 0.0);
            }
        }
    }
    // Crossing indicators: out[c][p] = layer c on p and c+1 elsewhere; into[c][p] the
    // converse; cross[c] = the cut crosses at all. Pushed down by every row they enter.
    let cuts = n.saturating_sub(1);
    let mut out_of = vec![Vec::new(); cuts];
    let mut into = vec![Vec::new(); cuts];
    let mut cross = Vec::with_capacity(cuts);
    for c in 0..cuts {
        let u = m.continuous(0.0, 0.0, 1.0);
        for p in 0..procs {
            let o = m.continuous(0.0, 0.0, 1.0);
            let i = m.continuous(0.0, 0.0, 1.0);
            m.ge(&[(o, 1.0), (x[c][p], -1.0), (x[c + 1][p], 1.0)], 0.0);
            m.ge(&[(i, 1.0), (x[c + 1][p], -1.0), (x[c][p], 1.0)], 0.0);
            m.ge(&[(u, 1.0), (x[c][p], -1.0), (x[c + 1][p], 1.0)], 0.0);
            out_of[c].push(o);
            into[c].push(i);
        }
        cross.push(u);
    }
    // Layer l starts a run of processor p (layer 0 on p, or l on p and l - 1 elsewhere).
    let starts = |l: usize, p: usize| if l == 0 { x[0][p] } else { into[l - 1][p] };
    // Static memory of processor p, scaled by 1/M: terms to add to a row.
    let static_terms = |p: usize| -> Vec<(Var, f64)> {
        let mut t: Vec<(Var, f64)> = (0..n)
            .map(|l| (x[l][p], 3.0 * relax.weights[l] / mem))
            .collect();
        for c in 0..cuts {
            let b = 2.0 * relax.out[c] / mem;
            t.push((out_of[c][p], b));
            t.push((into[c][p], b));
        }
        t
    };
    let static_max: f64 =
        (3.0 * relax.weights.iter().sum::<f64>() + 4.0 * relax.out.iter().sum::<f64>()) / mem;
    // Fact 3's transfer levels: level[l][q-1] is forced to one when the transfers X_l
    // downstream of layer l exceed (q / LEVELS_PER_PERIOD + slack) periods.
    let mut level: Vec<Vec<Var>> = vec![Vec::new(); n];
    if finite {
        for l in 0..n {
            let most: f64 = (l..cuts).map(|c| 2.0 * relax.comm[c] / period).sum();
            for q in 1..=transfer_levels(most * period, period, relax.slack) {
                let b = m.binary(0.0);
                let mut row: Vec<(Var, f64)> = (l..cuts)
                    .map(|c| (cross[c], 2.0 * relax.comm[c] / period))
                    .collect();
                row.push((b, -most));
                m.le(&row, level_periods(q) + relax.slack);
                level[l].push(b);
            }
        }
    }
    for p in 0..procs {
        // Fact 3 at the forward start of each layer i of p (big-M when i is elsewhere),
        // once for each level of X_i (big-M when the level is off).
        for i in 0..n {
            for k in 0..=level[i].len() {
                let mut terms = static_terms(p);
                let mut worst = static_max;
                for j in 0..n {
                    let copies = if j <= i {
                        relax.copies_before(i, j, period, k)
                    } else {
                        relax.copies_always(j, period)
                    };
                    let coef = copies * relax.stash[j] / mem;
                    if coef > 0.0 {
                        terms.push((x[j][p], coef));
                        worst += coef;
                    }
                    // A run's first layer starts a stage, which keeps its whole stash.
                    let extra = copies * (relax.own[j] - relax.stash[j]) / mem;
                    if extra > 0.0 {
                        terms.push((starts(j, p), extra));
                        worst += extra;
                    }
                }
                let big = (worst - cap_mem).max(0.0);
                if big <= 0.0 {
                    continue;
                }
                terms.push((x[i][p], big));
                let mut hi = cap_mem + big;
                if k > 0 {
                    terms.push((level[i][k - 1], big));
                    hi += big;
                }
                m.le(&terms, hi);
            }
        }
        if finite {
            // Fact 1: the processor's load.
            let terms: Vec<(Var, f64)> = (0..n).map(|l| (x[l][p], relax.u[l] / period)).collect();
            m.le(&terms, cap_time);
            // Fact 4: the average memory, windows with the transfers downstream.
            let mut terms = static_terms(p);
            for j in 0..n {
                if relax.stash[j] <= 0.0 {
                    continue;
                }
                let comm_max: f64 = (j..cuts).map(|c| 2.0 * relax.comm[c] / period).sum();
                // omega >= x S(j)/T + sum_{c >= j} 2 comm_c cross_c / T - comm_max (1 - x)
                let omega = m.continuous(0.0, 0.0, f64::INFINITY);
                let mut def = vec![
                    (omega, 1.0),
                    (x[j][p], -(relax.suffix(j) / period) - comm_max),
                ];
                for c in j..cuts {
                    def.push((cross[c], -2.0 * relax.comm[c] / period));
                }
                m.ge(&def, -comm_max);
                terms.push((omega, relax.stash[j] / mem));
                let extra = (relax.own[j] - relax.stash[j]) / mem * relax.suffix(j) / period;
                if extra > 0.0 {
                    terms.push((starts(j, p), extra));
                }
            }
            m.le(&terms, cap_mem);
        }
    }
    // Fact 1 on links: pair indicators, only where a link could be overloaded.
    let total_comm: f64 = relax.comm.iter().map(|c| relax.link_factor * c).sum();
    if finite && total_comm > period * cap_time && procs >= 2 {
        for p in 0..procs {
            for q in p + 1..procs {
                let mut load = Vec::with_capacity(cuts);
                for c in 0..cuts {
                    let y = m.continuous(0.0, 0.0, 1.0);
                    m.ge(&[(y, 1.0), (x[c][p], -1.0), (x[c + 1][q], -1.0)], -1.0);
                    m.ge(&[(y, 1.0), (x[c][q], -1.0), (x[c + 1][p], -1.0)], -1.0);
                    load.push((y, relax.link_factor * relax.comm[c] / period));
                }
                m.le(&load, cap_time);
            }
        }
    }
    // The lazily found premises that cannot fit (module docs, "Exact windows"), on every
    // processor: not all of their layers there with all of their cuts crossing (and, for
    // a transfer limit, not more transfers on their free cuts than the limit).
    for premise in premises {
        let (h, free, limit) = match premise {
            Premise::Excluded { assignment, .. } => {
                // No good: not every layer where the excluded assignment has it.
                let terms: Vec<(Var, f64)> = assignment
                    .iter()
                    .enumerate()
                    .filter(|&(_, &p)| p < procs)
                    .map(|(l, &p)| (x[l][p], 1.0))
                    .collect();
                m.le(&terms, n as f64 - 1.0);
                continue;
            }
            Premise::Exact(h) => (h, Vec::new(), None),
            Premise::Scheduled {
                holdings,
                tail: Some(x),
                ..
            } => match holdings.as_slice() {
                // Excluded when the cuts below its last layer carry at least `x`: a row like
                // a transfer limit's, a little weaker than the premise (the slack), which is
                // safe.
                [h] => {
                    let last = h.runs.last().map_or(0, |r| r.1);
                    let below: Vec<usize> = (last + 1..n.saturating_sub(1)).collect();
                    (h, below, Some(*x))
                }
                _ => continue,
            },
            Premise::Scheduled { holdings, .. } => match holdings.as_slice() {
                [h] => (h, Vec::new(), None),
                // A group: rows for every assignment of distinct labels would be too many;
                // the search prunes by it, and the loop stops undecided (safe) when a
                // solution comes back that it excludes.
                _ => continue,
            },
            Premise::Limited(h) => match relax.transfer_limit(h, period) {
                None => continue,
                Some(r) if r < 0.0 || !finite => (h, Vec::new(), None),
                Some(r) => (h, relax.free_cuts(h), Some(r)),
            },
        };
        // A limit that no assignment can pass is no row.
        if limit.is_some_and(|r| free.iter().map(|&c| relax.comm[c]).sum::<f64>() <= r) {
            continue;
        }
        let size = (h.layers() + h.cuts.len()) as f64;
        for p in 0..procs {
            let mut terms: Vec<(Var, f64)> = h
                .runs
                .iter()
                .flat_map(|&(f, l)| (f..=l).map(|k| (x[k][p], 1.0)))
                .chain(h.cuts.iter().map(|&c| (cross[c], 1.0)))
                .collect();
            match limit {
                None => m.le(&terms, size - 1.0),
                Some(r) => {
                    // sum_free comm cross / T <= r / T + big * (size - premise terms)
                    let most: f64 = free.iter().map(|&c| relax.comm[c]).sum();
                    let big = (most - r) / period;
                    terms.iter_mut().for_each(|t| t.1 = big);
                    terms.extend(free.iter().map(|&c| (cross[c], relax.comm[c] / period)));
                    m.le(&terms, r / period + big * size + relax.slack);
                }
            }
        }
    }
    (m, Layout { x })
}

/// Answer of one relaxation solve.
enum Probe {
    Infeasible,
    Feasible(Vec<usize>),
    Undecided,
    /// Not decided, and not even started: the MILP is too large to be set up within the
    /// time left ([`Model::setup_outlasts`]); a probe with less time cannot do better.
    TooLarge,
}

/// Solves the relaxation at `period`, adding the premises its solutions violate until one
/// satisfies every exact check ([`relaxation_fits`]) or none is left. `learnt` keeps the
/// premises found so far (those that cannot fit at `period` either enter the first solve)
/// and where the searches stopped (this one starts from the furthest point reached at
/// `period` or above).
fn probe(
    relax: &Relaxation,
    period: f64,
    milp: &MilpOptions,
    time_left: Option<Duration>,
    nodes: &mut u64,
    learnt: &mut Learnt,
) -> crate::error::Result<Probe> {
    let started = Instant::now();
    let mut cuts: Vec<Premise> = learnt
        .premises
        .iter()
        .filter(|h| match h {
            Premise::Exact(h) => !relax.holding_fits(h, period),
            Premise::Limited(_) => true,
            Premise::Excluded { period: t, .. } | Premise::Scheduled { period: t, .. } => {
                period <= *t
            }
        })
        .cloned()
        .collect();
    // The search first (module `search`): exact, and on the block chains usually decided
    // in milliseconds; the MILP's loop gets what it leaves of the time.
    let searched = period.is_finite() && relax.search;
    // Where the loop after the search has shown it decides nothing on this case, the
    // search gets the whole probe.
    let search_only = searched && learnt.loops_after_search.futile();
    if searched {
        let share = time_left.map_or(SEARCH_WITHOUT_LIMIT, |t| {
            if search_only {
                t
            } else {
                t.mul_f64(SEARCH_SHARE)
            }
        });
        let deadline = Instant::now() + share;
        let probe_deadline = time_left.map(|t| started + t);
        let mut premises: Vec<Premise> = cuts
            .iter()
            .filter(|h| matches!(h, Premise::Scheduled { .. } | Premise::Excluded { .. }))
            .cloned()
            .collect();
        let known = premises.len();
        let mut leaf =
            |a: &[usize]| relax.scheduled_premises(a, period, milp.threads, probe_deadline);
        let from = learnt.frontiers.start(period);
        let (answer, reached) = search::decide_from(
            relax,
            period,
            &mut premises,
            Some(deadline),
            &mut leaf,
            &from,
            u64::MAX,
        )?;
        learnt.frontiers.record(period, reached);
        for h in premises.drain(known..) {
            if !learnt.premises.contains(&h) {
                learnt.premises.push(h.clone());
            }
            if !cuts.contains(&h) {
                cuts.push(h);
            }
        }
        match answer {
            infinite::Answer::Infeasible => return Ok(Probe::Infeasible),
            infinite::Answer::Feasible(a) => return Ok(Probe::Feasible(a)),
            infinite::Answer::Undecided if search_only => return Ok(Probe::Undecided),
            infinite::Answer::Undecided => {}
        }
    }
    // Plain windows first: their premises are general and the loop converges fast; the
    // waits only once an assignment passes them.
    let mut waited = !period.is_finite();
    let mut windows = if waited {
        Windows::Waited
    } else {
        Windows::Plain { extra: 0.0 }
    };
    let mut first = true;
    let answer = 'solves: loop {
        let left = time_left.map(|t| t.saturating_sub(started.elapsed()));
        if left.is_some_and(|t| t.is_zero()) {
            break 'solves Probe::Undecided;
        }
        let (model, layout) = relaxation_model(relax, period, &cuts);
        if model.setup_outlasts(left) {
            // Before the first solve, the model is too large for the probe; after, the
            // probe has used its time. Where the search ran, a shorter period may still be
            // decided by it: undecided, not too large.
            break 'solves if first && !searched {
                Probe::TooLarge
            } else {
                Probe::Undecided
            };
        }
        first = false;
        let r = model.solve(milp, left)?;
        *nodes += r.nodes;
        let assignment: Vec<usize> = match r.status {
            SolveStatus::Infeasible => break 'solves Probe::Infeasible,
            SolveStatus::NoSolutionWithinLimit => break 'solves Probe::Undecided,
            SolveStatus::Optimal | SolveStatus::LimitWithIncumbent => layout
                .x
                .iter()
                .map(|row| {
                    row.iter()
                        .enumerate()
                        .max_by(|a, b| r.values[a.1 .0].total_cmp(&r.values[b.1 .0]))
                        .map(|(p, _)| p)
                        .unwrap_or(0)
                })
                .collect(),
        };
        let mut violated = relax.violated(&assignment, period, windows);
        if violated.is_empty() && !waited {
            // The plain windows hold: now the waits (module docs, "Waits"), with every
            // premise learnt so far.
            waited = true;
            windows = Windows::Waited;
            violated = relax.violated(&assignment, period, windows);
        }
        if violated.is_empty() {
            // The closed forms hold: now each processor's own scheduling problem.
            let deadline = time_left.map(|t| started + t);
            violated = relax.scheduled_premises(&assignment, period, milp.threads, deadline)?;
        }
        if violated.is_empty() {
            break 'solves Probe::Feasible(assignment);
        }
        for h in violated {
            if !cuts.contains(&h) {
                if !learnt.premises.contains(&h) {
                    learnt.premises.push(h.clone());
                }
                cuts.push(h);
            } else {
                // A solution that violates a premise already cut off: the solver's
                // tolerances let it through; stop rather than loop (undecided is safe).
                break 'solves Probe::Undecided;
            }
        }
    };
    if searched {
        learnt.loops_after_search.record(&answer);
    }
    Ok(answer)
}

/// Whether the relaxation has a solution at `period` (possibly infinite): `None` when the
/// solve ended undecided at the options' limit.
pub fn relaxation_feasible(
    relax: &Relaxation,
    period: f64,
    options: &MilpOptions,
) -> crate::error::Result<Option<bool>> {
    let mut nodes = 0;
    Ok(
        match probe(
            relax,
            period,
            options,
            None,
            &mut nodes,
            &mut Learnt::default(),
        )? {
            Probe::Infeasible => Some(false),
            Probe::Feasible(_) => Some(true),
            Probe::Undecided | Probe::TooLarge => None,
        },
    )
}

/// The smallest period (within `precision`) at which `assignment` satisfies the relaxation,
/// knowing it does at `hi`. With scheduled checks, `hi` itself: only a probe knows whether
/// an assignment passes them.
fn tighten(relax: &Relaxation, assignment: &[usize], lo: f64, hi: f64, precision: f64) -> f64 {
    if relax.scheduling.is_some() {
        return hi;
    }
    let (mut lo, mut hi) = (lo, hi);
    while hi > lo * (1.0 + precision * 0.5) {
        let mid = 0.5 * (lo + hi);
        if relaxation_fits(relax, assignment, mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// What an exact check says of one assignment at the period [`decide_period`] asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The check found a valid plan with this assignment that the caller keeps (better
    /// than the caller's own; at that period or below when the check is exact).
    Plan,
    /// Proven: no plan with this assignment at that period or below.
    NoPlan,
    /// Not decided (a time limit, or no exact check for this assignment).
    Unknown,
}

/// What [`decide_period`] proved.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// No plan of the case has that period or a shorter one: the period is a lower bound.
    NoPlan,
    /// The exact check found a plan with this assignment.
    Plan(Vec<usize>),
    /// Neither: why, in words.
    Undecided(String),
}

/// Decides whether any plan of the case has period `period` or shorter, exactly when
/// `exact` is: the relaxation's loop, with every assignment that passes it handed to
/// `exact` (e.g. the scheduling MILP on its stages). An assignment proven to have no plan
/// at `period` is excluded (a no-good premise, kept in `learnt` for this period and shorter
/// ones) and the loop goes on; so does an assignment `exact` leaves unanswered, set aside
/// for the rest of this call only (nothing was proven of it: the search's positions in
/// `learnt` are moved back to it before returning, so that a later call asks it again).
/// It ends when the relaxation has no assignment left (every assignment either fails the
/// relaxation or was excluded: no plan, unless one was set aside: undecided), when `exact`
/// finds a plan, or undecided. A
/// combinatorial (logic-based) Benders decomposition whose subproblem is the exact
/// scheduling problem of one allocation.
pub fn decide_period(
    relax: &Relaxation,
    period: f64,
    threads: std::num::NonZeroU32,
    time_limit: Option<Duration>,
    learnt: &mut Learnt,
    exact: &mut dyn FnMut(&[usize]) -> crate::error::Result<Verdict>,
) -> crate::error::Result<Decision> {
    let started = Instant::now();
    let milp = relaxation_milp(threads);
    let mut nodes = 0;
    // Assignments whose exact check gave no answer: excluded for the rest of this search,
    // so that the others still get theirs (one of them may have a plan), and taken out of
    // `learnt` again before returning, since nothing was proven of them; while there is any,
    // "no plan" cannot be said.
    let mut skipped: Vec<Premise> = Vec::new();
    let mut decide = || -> crate::error::Result<Decision> {
        let undecided = |why: &str, skipped: &[Premise]| {
            Decision::Undecided(match skipped.first() {
                Some(Premise::Excluded { assignment, .. }) => format!(
                    "{why}; no exact answer for {} assignment(s), the first {assignment:?}",
                    skipped.len()
                ),
                _ => why.to_string(),
            })
        };
        loop {
            let left = time_limit.map(|t| t.saturating_sub(started.elapsed()));
            if left.is_some_and(|t| t.is_zero()) {
                return Ok(undecided("time limit", &skipped));
            }
            let assignment = match probe(relax, period, &milp, left, &mut nodes, learnt)? {
                Probe::Infeasible if skipped.is_empty() => return Ok(Decision::NoPlan),
                Probe::Infeasible => return Ok(undecided("no other assignment passes", &skipped)),
                Probe::Undecided => {
                    return Ok(undecided("the relaxation's loop ended undecided", &skipped))
                }
                Probe::TooLarge => {
                    return Ok(undecided(
                        "the relaxation MILP is too large for the time left",
                        &skipped,
                    ))
                }
                Probe::Feasible(a) => a,
            };
            match exact(&assignment)? {
                Verdict::Plan => return Ok(Decision::Plan(assignment)),
                verdict => {
                    let excluded = Premise::Excluded { assignment, period };
                    if learnt.premises.contains(&excluded) {
                        // Solver tolerances let an excluded assignment through: stop (safe).
                        return Ok(undecided("an excluded assignment came back", &skipped));
                    }
                    if verdict == Verdict::Unknown {
                        skipped.push(excluded.clone());
                    }
                    learnt.premises.push(excluded);
                }
            }
        }
    };
    let decision = decide();
    learnt.premises.retain(|h| !skipped.contains(h));
    for h in &skipped {
        if let Premise::Excluded { assignment, .. } = h {
            learnt
                .frontiers
                .back_to(period, &search::Position::of(relax, assignment));
        }
    }
    decision
}

/// The solver options of the relaxation MILP: a feasibility problem solved over and over,
/// where HiGHS's sub-MIP heuristics (RENS, RINS) took about half of each solve (the 20
/// models of one bound run on ResNet-101, 2 processors, 12 GiB, 24 GB/s: 11 s instead of
/// 20 s, every answer the same).
fn relaxation_milp(threads: std::num::NonZeroU32) -> MilpOptions {
    MilpOptions {
        threads,
        mip_rel_gap: 1e-4,
        sub_mip_heuristics: false,
        feasibility_jump: false,
        ..MilpOptions::default()
    }
}

/// The bound of the module docs for `instance` on `platform`.
pub fn global_lower_bound(
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
) -> crate::error::Result<GlobalBound> {
    global_lower_bound_learning(instance, platform, options, &mut Learnt::default())
}

/// [`global_lower_bound`], starting from what `learnt` holds (learnt on the same case) and
/// leaving there everything it learns, for a later [`decide_period`].
pub fn global_lower_bound_learning(
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
    learnt: &mut Learnt,
) -> crate::error::Result<GlobalBound> {
    instance.check()?;
    platform.check()?;
    bound_of(
        Relaxation::new(instance, platform),
        instance,
        platform,
        options,
        learnt,
    )
}

/// [`global_lower_bound_learning`] with the relaxation `relax` of `instance` on `platform`.
fn bound_of(
    relax: Relaxation,
    instance: &Instance,
    platform: &Platform,
    options: &BoundOptions,
    learnt: &mut Learnt,
) -> crate::error::Result<GlobalBound> {
    let started = Instant::now();
    let milp = relaxation_milp(options.threads);
    let time_left = || {
        options
            .time_limit
            .map(|t| t.saturating_sub(started.elapsed()))
    };
    let mut out = GlobalBound {
        lower_bound: period_lower_bound(instance, platform),
        infeasible: false,
        relaxed_period: None,
        assignment: None,
        candidates: Vec::new(),
        complete: false,
        solves: 0,
        nodes: 0,
        solve_seconds: 0.0,
        method: "instance bounds (loads, heaviest layer, cheapest cut)".into(),
    };
    let finish = |mut out: GlobalBound| {
        out.solve_seconds = started.elapsed().as_secs_f64();
        Ok(out)
    };
    // Infinite period: does any assignment hold one batch of each of its layers? With a
    // known plan, at most half of the time (undecided, the bisection below still proves
    // what it can); without one, nine tenths: a proof that no plan exists is then what
    // closes the case.
    let mut undecided = false;
    let share = if options.known_period.is_some() {
        0.5
    } else {
        0.9
    };
    // The packing search first ("Infeasibility of a case"): exact and usually fast. It
    // gets half of that share, but at least a second even when the limit has passed (it
    // needs milliseconds on the real chains) and at most a minute.
    let packing_time = time_left()
        .map_or(Duration::from_secs(60), |t| t.mul_f64(share * 0.5))
        .clamp(Duration::from_secs(1), Duration::from_secs(60));
    let packing = match infinite::Packing::new(&relax).decide(Some(Instant::now() + packing_time)) {
        infinite::Answer::Infeasible => Probe::Infeasible,
        // Checked like a MILP solution; one that failed would go to the MILP instead.
        infinite::Answer::Feasible(a)
            if relaxation_fits(&relax, &a, f64::INFINITY)
                && relax
                    .violated(&a, f64::INFINITY, Windows::Waited)
                    .is_empty() =>
        {
            Probe::Feasible(a)
        }
        _ => Probe::Undecided,
    };
    let proven_by_search = matches!(packing, Probe::Infeasible);
    // Where the packing search decided, its answer stands; the MILP's loop decides only
    // where the search ran out of time.
    let answer = match packing {
        Probe::Undecided => {
            out.solves += 1;
            probe(
                &relax,
                f64::INFINITY,
                &milp,
                time_left().map(|t| t.mul_f64(share)),
                &mut out.nodes,
                learnt,
            )?
        }
        decided => decided,
    };
    match answer {
        Probe::Infeasible => {
            out.infeasible = true;
            out.lower_bound = f64::INFINITY;
            out.complete = true;
            out.method = format!(
                "relaxation infeasible at every period: no allocation holds one batch of its \
                 layers (proven by {})",
                if proven_by_search {
                    "the packing search"
                } else {
                    "the MILP"
                }
            );
            return finish(out);
        }
        Probe::Undecided | Probe::TooLarge => undecided = true,
        Probe::Feasible(a) => out.passed(a),
    }
    let mut lo = out.lower_bound;
    let mut hi = relax.sequential_period().max(lo);
    if let Some(known) = options.known_period {
        hi = hi.min(known.max(lo));
    }
    // The smallest period at which an assignment was found to pass (`relaxed_period`; set
    // with `out.assignment`, never without it).
    let mut feasible_at = None;
    if let Some(a) = &out.assignment {
        if relaxation_fits(&relax, a, hi) {
            hi = tighten(&relax, a, lo, hi, options.precision);
            feasible_at = Some(hi);
        }
    }
    out.method = "relaxation (assignment, cuts, loads, stash windows) decided by a search over \
                  assignments or a MILP, bisected on the period"
        .into();
    // Two phases when the scheduled checks apply: the closed forms alone first (cheap
    // probes, at most half of the time), then, from the bound they prove, the scheduled
    // checks too (module docs, "Scheduled premises"). Premises carry over.
    let closed_forms = relax.clone().closed_forms_only();
    let phases: Vec<(&Relaxation, f64)> = if relax.scheduling.is_some() {
        vec![(&closed_forms, 0.5), (&relax, 1.0)]
    } else {
        vec![(&relax, 1.0)]
    };
    let upper = hi;
    let infinite_undecided = undecided;
    let two_phases = phases.len() > 1;
    // Whether the bound proven so far is all the caller asked for.
    let enough = |lo: f64| {
        options
            .enough
            .is_some_and(|(e, from)| lo >= e && Instant::now() >= from)
    };
    let mut stopped_early = false;
    let phase_count = phases.len();
    for (phase, (phase_relax, share)) in phases.into_iter().enumerate() {
        let last_phase = phase + 1 == phase_count;
        if enough(lo) {
            stopped_early = upper > lo * (1.0 + options.precision);
            break;
        }
        let phase_started = Instant::now();
        let phase_limit = time_left().map(|t| t.mul_f64(share));
        let phase_left = || phase_limit.map(|t| t.saturating_sub(phase_started.elapsed()));
        let mut hi = upper.max(lo);
        let mut phase_solves = 0;
        let mut too_large = false;
        // Before a second phase, the first needs no fine precision: the second goes on from
        // where it stops.
        let precision = if two_phases && phase == 0 {
            options.precision.max(FIRST_PHASE_PRECISION)
        } else {
            options.precision
        };
        // The second phase's threshold is at or above the first's: it gallops up from
        // there (steps of 1%, 2%, 4%...) until a probe passes, then bisects.
        let mut step = (phase > 0).then_some(0.01);
        // With a known plan, once the first probes have taught the loop its premises (in the
        // first phase; at once in the second), the next one decides whether that plan is
        // within `CLOSING_GAP` of optimal; the bisection then goes on from what it proved.
        let mut closing: Option<f64> = options
            .known_period
            .map(|known| known / (1.0 + CLOSING_GAP * 0.99))
            .filter(|&t| t > lo * (1.0 + precision) && t < hi);
        let closing_after = if phase == 0 { CLOSING_PROBE_AFTER } else { 0 };
        // Periods where a probe ended undecided or passed by an assignment whose check was
        // cut short (decreasing), and the shortest where one passed with every check
        // answered (or the upper end). The phase is complete when its upper end is the
        // latter.
        let mut undecided_at: Vec<f64> = Vec::new();
        let mut passed_at = hi;
        // The closing probe's period, when its answer left the case open: undecided, or passed
        // by an assignment whose check was cut short.
        let mut closing_open: Option<f64> = None;
        loop {
            while hi > lo * (1.0 + precision) {
                if enough(lo) {
                    stopped_early = true;
                    break;
                }
                if phase_left().is_some_and(|t| t.is_zero()) {
                    break;
                }
                let due = if phase_solves >= closing_after {
                    closing.take()
                } else {
                    None
                };
                let next = match step {
                    Some(s) if lo * (1.0 + s) < hi => lo * (1.0 + s),
                    _ => 0.5 * (lo + hi),
                };
                let closing_probe = due.filter(|&t| t > lo && t < hi);
                let mid = closing_probe.unwrap_or(next);
                out.solves += 1;
                phase_solves += 1;
                // A probe gets at most a third of what is left (but a second at least), so that
                // one hard period near the threshold leaves time for easier ones below it.
                let budget = phase_left().map(|t| (t / 3).max(Duration::from_secs(1)).min(t));
                match probe(phase_relax, mid, &milp, budget, &mut out.nodes, learnt)? {
                    Probe::Infeasible => {
                        lo = mid;
                        step = step.map(|s| 2.0 * s);
                    }
                    Probe::Feasible(a) => {
                        hi = tighten(phase_relax, &a, lo, mid, precision).min(mid);
                        feasible_at = Some(hi);
                        // A pass by an assignment whose check was cut short is left open like
                        // an undecided probe (a longer check might exclude it), and retried
                        // below where undecided ones are.
                        if phase_relax.passed_unanswered() {
                            undecided_at.push(hi);
                            if closing_probe.is_some() {
                                closing_open = Some(mid);
                            }
                        } else {
                            passed_at = hi;
                        }
                        out.passed(a);
                        step = None;
                    }
                    Probe::Undecided => {
                        hi = mid;
                        undecided_at.push(mid);
                        step = None;
                        if closing_probe.is_some() {
                            closing_open = Some(mid);
                        }
                    }
                    Probe::TooLarge => {
                        // Every later probe of the phase builds a model as large, with less
                        // time: the phase ends here.
                        too_large = true;
                        break;
                    }
                }
            }
            // Without a known plan (the bound alone, which has nothing else to spend its time
            // on), a bisection that closed in on a period left undecided asks it again with all
            // the time the phase has left: the premises learnt since often decide it.
            let retry = undecided_at.last().copied().filter(|&t| {
                t == hi && t > lo && !too_large && options.known_period.is_none() && !enough(lo)
            });
            // With a known plan and a caller for whom the closing answer is enough (a gap
            // tolerance of `CLOSING_GAP` or more), the last phase asks its closing question
            // again with the time the bisection below it left: the premises learnt below
            // often decide it, and "no assignment" there is all the caller needs.
            let retry = retry.or_else(|| {
                closing_open.take().filter(|&t| {
                    last_phase
                        && t > lo
                        && !too_large
                        && !enough(lo)
                        && options.enough.is_some_and(|(e, _)| t >= e)
                })
            });
            let Some(t) = retry else { break };
            let Some(budget) = phase_left().filter(|&b| b >= Duration::from_secs(1)) else {
                break;
            };
            out.solves += 1;
            match probe(phase_relax, t, &milp, Some(budget), &mut out.nodes, learnt)? {
                Probe::Infeasible => {
                    lo = t;
                    // Every period left undecided at or below `t` is decided with it.
                    undecided_at.retain(|&u| u > t);
                    hi = undecided_at.last().map_or(passed_at, |&u| u.min(passed_at));
                    step = None;
                }
                Probe::Feasible(a) => {
                    feasible_at = Some(t);
                    // Answered, the period is decided.
                    if !phase_relax.passed_unanswered() {
                        undecided_at.retain(|&u| u != t);
                    }
                    out.passed(a);
                    break;
                }
                Probe::Undecided | Probe::TooLarge => break,
            }
        }
        // Complete: the precision reached, the upper end a period where an assignment passed
        // with every check answered (or the first upper end), nothing left too large.
        let phase_complete = hi <= lo * (1.0 + precision)
            && undecided_at.last().is_none_or(|&u| u != hi)
            && !too_large;
        undecided = infinite_undecided || !phase_complete;
    }
    out.lower_bound = lo;
    // A period where only the closed forms passed may lie below what the scheduled checks
    // then proved.
    out.relaxed_period = feasible_at.filter(|&t| t >= lo);
    out.complete = !undecided && !stopped_early;
    finish(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::chain;

    #[test]
    fn copies_round_down_past_the_slack() {
        let s = 1e-6;
        assert_eq!(ceil_copies(2.0, 1.0, s), 2.0);
        assert_eq!(ceil_copies(2.0 + 1e-9, 1.0, s), 2.0);
        assert_eq!(ceil_copies(2.1, 1.0, s), 3.0);
        assert_eq!(ceil_copies(0.0, 1.0, s), 0.0);
        assert_eq!(ceil_copies(5.0, f64::INFINITY, s), 1.0);
        assert_eq!(floor_copies(2.0, 1.0, s), 1.0);
        assert_eq!(floor_copies(2.5, 1.0, s), 2.0);
        assert_eq!(floor_copies(2.5, f64::INFINITY, s), 0.0);
    }

    /// A focused check relaxes the whole problem of its assignment, so it is never
    /// infeasible where the whole assignment has a judged pattern. HiGHS's MIP presolve once
    /// declared this one infeasible there (ResNet-101 on 3 processors of 12 GiB, 24 GB/s:
    /// the processor holding layers 1-2 and 24-35, at 0.113 s), which made the bound wrong;
    /// infeasibility is now confirmed without presolve (`milp::solver`), and the scheduling
    /// MILP is solved without it.
    #[test]
    fn a_focused_check_is_never_infeasible_where_the_whole_assignment_has_a_pattern() {
        use crate::milp::fixed_allocation::assignment_structures;
        use crate::milp::pattern_milp::{PatternMilp, Scope};
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("instances/resnet101-1000-b8-h100.json");
        let inst = Instance::load(&path).unwrap();
        let platform = Platform::new(3, 12.0 * (1u64 << 30) as f64, 24e9);
        let mut assignment = vec![0, 0, 1, 1, 1];
        assignment.extend([2; 18]);
        assignment.extend([0; 12]);
        assert_eq!(assignment.len(), inst.len());
        let period = 0.113;
        let (finest, mergeable) = assignment_structures(&inst, &assignment);
        let whole = PatternMilp::new(
            &inst,
            &platform,
            &finest,
            period,
            &Scope {
                focus: None,
                mergeable,
                left_out: Vec::new(),
                tail: None,
            },
        )
        .unwrap();
        let options = MilpOptions {
            time_limit: Some(Duration::from_secs(120)),
            ..MilpOptions::default()
        };
        let r = whole.model.solve(&options, None).unwrap();
        assert!(r.status.has_solution(), "{:?}", r.status);
        let (allocation, pattern) = whole.decoder.decode(&r.values);
        let verdict = crate::judge::judge(&inst, &platform, &allocation, &pattern);
        assert!(verdict.valid, "{:?}", verdict.first_violation());
        let relax = Relaxation::new(&inst, &platform);
        let s = relax.scheduling.as_ref().unwrap();
        let threads = std::num::NonZeroU32::MIN;
        for p in 0..3 {
            // Alone, and with the layers below it as a pure delay (`Scope::tail`).
            let tails = [None].into_iter().chain(
                relax
                    .tail_generalisation(&assignment, p, &[])
                    .map(|(t, _, _)| Some(t)),
            );
            for tail in tails {
                let answer = focused_check(
                    s,
                    &assignment,
                    &[p],
                    &[],
                    period,
                    tail,
                    threads,
                    Duration::from_secs(60),
                )
                .unwrap();
                assert_ne!(answer, Some(false), "processor {p}, tail {tail:?}");
            }
        }
        // The same check of processor 0 with presolve on: HiGHS's presolve answered
        // "infeasible", which the second solve without it overturns.
        let mut focused = focused_milp(s, &assignment, &[0], &[], period, None).unwrap();
        focused.model.set_presolve(true);
        let r = focused.model.solve(&options, None).unwrap();
        assert!(r.status.has_solution(), "{:?}", r.status);
    }

    #[test]
    fn checks_cut_short_keep_only_what_spares_more() {
        let ms = Duration::from_millis;
        let mut u = Unproven::default();
        u.record_cut_short(1.0, ms(100));
        // Neither spares the other: a longer period, more time.
        u.record_cut_short(2.0, ms(300));
        assert_eq!(u.cut_short.len(), 2);
        // Spared by (1.0, 100 ms): not recorded.
        u.record_cut_short(1.5, ms(50));
        assert_eq!(u.cut_short.len(), 2);
        // Spares (2.0, 300 ms), not (1.0, 100 ms).
        u.record_cut_short(1.5, ms(300));
        assert_eq!(u.cut_short, vec![(1.0, ms(100)), (1.5, ms(300))]);
        // Spares all that both spared, and more.
        u.record_cut_short(0.5, ms(400));
        assert_eq!(u.cut_short, vec![(0.5, ms(400))]);
        assert!(u.spares(0.5, ms(400)) && u.spares(3.0, ms(10)));
        assert!(!u.spares(0.4, ms(10)) && !u.spares(3.0, ms(500)));
    }

    #[test]
    fn a_start_is_rounded_up_to_where_the_resource_is_free() {
        // After an operation of 0.3 (started at 0), one of 0.2 fits from 0.3 to 0.8 mod 1.
        assert_eq!(clear_of(0.5, 0.3, 0.2, 1.0, 0.0), 0.5);
        assert_eq!(clear_of(0.9, 0.3, 0.2, 1.0, 0.0), 1.3);
        assert_eq!(clear_of(1.1, 0.3, 0.2, 1.0, 0.0), 1.3);
        assert_eq!(clear_of(0.8, 0.3, 0.2, 1.0, 0.0), 0.8);
        assert_eq!(clear_of(0.9, 0.3, 0.2, f64::INFINITY, 0.0), 0.9);
        // The tolerance widens the zone.
        assert_eq!(clear_of(0.81, 0.3, 0.2, 1.0, 0.02), 0.81);
    }

    #[test]
    fn a_half_duplex_link_makes_the_upstream_window_wait() {
        // Layer 1 on one processor, layer 2 on another, a transfer of 0.3 s each way. From
        // the forward transfer's start, the backward one can start 0.3 + 0.25 + 0.25 = 0.8 s
        // later, when the link is busy (modulo T = 1) with the next forward transfer (it
        // starts at 1.0 and lasts 0.3): it waits until 1.3, and layer 1's window with it.
        let inst = chain(&[0.1, 0.25], &[0.1, 0.25], &[0.0; 2], &[0.3, 0.1], 0.0);
        let half = Relaxation::new(&inst, &Platform::new(2, 1e9, 1.0));
        let w = half.waits(&[true, false], 1.0);
        assert!((w[0] - 0.5).abs() < 1e-5, "{w:?}");
        assert!(w[1].abs() < 1e-12);
        // No wait without the cut, at a period where the chain fits, or in full duplex.
        assert!(half.waits(&[false, false], 1.0)[0].abs() < 1e-12);
        assert!(half.waits(&[true, false], 1.6)[0].abs() < 1e-12);
        assert!(half.waits(&[true, false], f64::INFINITY)[0].abs() < 1e-12);
        let mut duplex = Platform::new(2, 1e9, 1.0);
        duplex.full_duplex = true;
        let full = Relaxation::new(&inst, &duplex);
        assert!(full.waits(&[true, false], 1.0)[0].abs() < 1e-12);
    }

    /// Every stage keeps at least what the relaxation charges its layers.
    fn check_charges(instance: &Instance) -> Vec<f64> {
        let e = layer_stashes(instance);
        let sums = instance.sums();
        for k in 1..=instance.len() {
            for m in k..=instance.len() {
                let charged: f64 = e[k - 1..m].iter().sum();
                assert!(
                    charged <= sums.stash(k, m) * (1.0 + 1e-9) + 1e-6,
                    "{k}..{m}"
                );
            }
        }
        assert!(e.iter().all(|&x| x >= 0.0));
        e
    }

    #[test]
    fn shared_tensors_are_charged_at_most_once_per_stage() {
        // A skip connection: layers 1 and 3 keep the same 3 bytes (layer 1's input).
        let mut inst = chain(&[1., 1., 1.], &[2., 2., 2.], &[0.; 3], &[7., 8., 9.], 4.);
        inst.layers[2].stash = Some(8.0 + 3.0);
        inst.set_stash_pairs([(1, 3, 3.0)]);
        inst.check().unwrap();
        let e = check_charges(&inst);
        // Marginals along the chain: layer 3 adds only its own 8 bytes after layers 1-2.
        assert_eq!(e, vec![4.0, 7.0, 8.0]);
        // The committed op-level chain (tensors shared across many layers) is charged its
        // whole stash, never more than any stage keeps.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/instances/resnet50-1000-b8-op.json"
        );
        let op = Instance::load(std::path::Path::new(path)).unwrap();
        let e = check_charges(&op);
        let total: f64 = e.iter().sum();
        let whole = op.sums().stash(1, op.len());
        assert!((total - whole).abs() <= 1e-6 * whole, "{total} vs {whole}");
    }

    /// Whether `assignment` obeys the rows of `premise` at `period` (every processor label);
    /// also the search's tests' reading of a premise, independent of its pruning.
    pub(super) fn obeys(
        relax: &Relaxation,
        premise: &Premise,
        assignment: &[usize],
        period: f64,
    ) -> bool {
        let crosses = |c: usize| assignment[c] != assignment[c + 1];
        let h = match premise {
            Premise::Exact(h) | Premise::Limited(h) => h,
            Premise::Excluded {
                assignment: a,
                period: t,
            } => return period > *t || a.as_slice() != assignment,
            Premise::Scheduled {
                holdings,
                period: t,
                tail,
            } => {
                return period > *t
                    || !held_apart(holdings, assignment)
                    || tail.is_some_and(|x| {
                        !Relaxation::reaches(relax.tail_transfer(&holdings[0], assignment), x)
                    })
            }
        };
        let holds_on = |q: usize| {
            h.runs
                .iter()
                .all(|&(f, l)| (f..=l).all(|k| assignment[k] == q))
                && h.cuts.iter().all(|&c| crosses(c))
        };
        (0..relax.processors)
            .filter(|&q| holds_on(q))
            .all(|_| match premise {
                Premise::Exact(_) | Premise::Excluded { .. } | Premise::Scheduled { .. } => false,
                Premise::Limited(h) => match relax.transfer_limit(h, period) {
                    None => true,
                    Some(r) if r < 0.0 => false,
                    Some(r) => {
                        let x: f64 = relax
                            .free_cuts(h)
                            .iter()
                            .filter(|&&c| crosses(c))
                            .map(|&c| relax.comm[c])
                            .sum();
                        x <= r + relax.slack * period
                    }
                },
            })
    }

    #[test]
    fn premises_never_exclude_an_assignment_that_fits() {
        // Every premise learnt from an assignment that cannot fit, at several periods, is
        // obeyed by every assignment that fits, and excludes the one it was learnt from.
        use crate::milp::general::for_each_allocation;
        use crate::nets::random::{one_processor_memory, random_chain};
        let mut learnt = 0;
        for seed in 40..46u64 {
            let l = 5 + (seed as usize % 2);
            let inst = random_chain(seed, l);
            let full = one_processor_memory(&inst);
            for (processors, share, bandwidth) in [(2, 0.6, 2.0), (3, 0.4, 4.0), (3, 0.8, 1.0)] {
                let relax =
                    Relaxation::new(&inst, &Platform::new(processors, share * full, bandwidth));
                let base = crate::model::bounds::period_lower_bound(
                    &inst,
                    &Platform::new(processors, share * full, bandwidth),
                );
                for factor in [f64::INFINITY, 1.2, 1.6, 2.2, 3.0] {
                    let period = base * factor;
                    let mut fits = Vec::new();
                    let mut premises = Vec::new();
                    for_each_allocation(l, processors, |a| {
                        if relaxation_fits(&relax, a, period) {
                            fits.push(a.to_vec());
                        }
                        for windows in [Windows::Plain { extra: 0.0 }, Windows::Waited] {
                            for p in relax.violated(a, period, windows) {
                                assert!(!obeys(&relax, &p, a, period), "{p:?} lets {a:?} through");
                                premises.push(p);
                            }
                        }
                    });
                    learnt += premises.len();
                    for a in &fits {
                        for p in &premises {
                            assert!(
                                obeys(&relax, p, a, period),
                                "seed {seed}, P = {processors}, T = {period}: {p:?} excludes {a:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(learnt > 0);
    }

    /// Whether `assignment` has a plan at `period`: the scheduling MILP over every stage
    /// structure of it (what `best`'s exact checks ask).
    fn has_plan(inst: &Instance, platform: &Platform, assignment: &[usize], period: f64) -> bool {
        use crate::milp::fixed_allocation::assignment_structures;
        use crate::milp::pattern_milp::{PatternMilp, Scope};
        let (finest, mergeable) = assignment_structures(inst, assignment);
        let scope = Scope {
            focus: None,
            mergeable,
            left_out: Vec::new(),
            tail: None,
        };
        let Some(milp) = PatternMilp::new(inst, platform, &finest, period, &scope) else {
            return false;
        };
        let r = milp.model.solve(&MilpOptions::default(), None).unwrap();
        r.status != SolveStatus::Infeasible
    }

    /// On every assignment of random chains (seeds) on each platform `(P, share of one
    /// processor's memory, bandwidth)` at each factor of the instance's bound, `learn`
    /// gives premises (told whether the assignment has a plan at that period); each is then
    /// obeyed by every assignment with a plan at that period. Returns the premises learnt.
    fn learnt_premises_spare_every_plan(
        seeds: std::ops::Range<u64>,
        platforms: &[(usize, f64, f64)],
        factors: &[f64],
        max_layers: usize,
        mut learn: impl FnMut(&Relaxation, &[usize], f64, bool) -> Vec<Premise>,
    ) -> Vec<Premise> {
        use crate::milp::general::for_each_allocation;
        use crate::nets::random::{one_processor_memory, random_chain};
        let mut learnt = Vec::new();
        for seed in seeds {
            let l = 5 + (seed as usize % 2);
            let inst = random_chain(seed, l);
            let full = one_processor_memory(&inst);
            for &(processors, share, bandwidth) in platforms {
                let platform = Platform::new(processors, share * full, bandwidth);
                let relax = Relaxation::new(&inst, &platform).checking_at_most(max_layers);
                let base = crate::model::bounds::period_lower_bound(&inst, &platform);
                for &factor in factors {
                    let period = base * factor;
                    let mut planned = Vec::new();
                    let mut premises = Vec::new();
                    for_each_allocation(l, processors, |a| {
                        let plan = has_plan(&inst, &platform, a, period);
                        if plan {
                            planned.push(a.to_vec());
                        }
                        premises.extend(learn(&relax, a, period, plan));
                    });
                    for a in &planned {
                        for p in &premises {
                            assert!(
                                obeys(&relax, p, a, period),
                                "seed {seed}, P = {processors}, T = {period}: {p:?} excludes \
                                 {a:?}, which has a plan"
                            );
                        }
                    }
                    learnt.extend(premises);
                }
            }
        }
        learnt
    }

    /// The premises of the scheduled checks (one processor, or a group of processors each
    /// passing alone), learnt from every assignment of random chains (seeds) at several
    /// periods, are obeyed by every assignment that has a plan at that period, and exclude
    /// the assignment they were learnt from. Returns how many premises were learnt on one
    /// processor, on groups, and with tails.
    fn scheduled_premises_are_valid(
        seeds: std::ops::Range<u64>,
        platforms: &[(usize, f64, f64)],
        factors: &[f64],
        max_layers: usize,
    ) -> (usize, usize, usize) {
        let threads = std::num::NonZeroU32::new(1).unwrap();
        let learnt = learnt_premises_spare_every_plan(
            seeds,
            platforms,
            factors,
            max_layers,
            |relax, a, period, _| {
                let premises = relax.scheduled_premises(a, period, threads, None).unwrap();
                for p in &premises {
                    assert!(!obeys(relax, p, a, period), "{p:?} lets {a:?} through");
                }
                premises
            },
        );
        let (mut singles, mut groups, mut tails) = (0, 0, 0);
        for p in &learnt {
            match p {
                Premise::Scheduled { holdings, .. } if holdings.len() > 1 => groups += 1,
                Premise::Scheduled { tail: Some(_), .. } => {
                    singles += 1;
                    tails += 1
                }
                _ => singles += 1,
            }
        }
        (singles, groups, tails)
    }

    /// Every check focused on a group of two or more processors (every group of every
    /// assignment of small chains, on slow links where the transfers of the cuts inside a
    /// group share their link) that proves no pattern yields a premise obeyed by every
    /// assignment with a plan at that period; on the group of every processor, the check
    /// answers as the assignment's own problem does. Returns how many proofs were made.
    fn group_premises_are_valid(
        seeds: std::ops::Range<u64>,
        platforms: &[(usize, f64, f64)],
    ) -> usize {
        let threads = std::num::NonZeroU32::new(1).unwrap();
        let factors = [1.3, 1.8, 2.5];
        let learnt = learnt_premises_spare_every_plan(
            seeds,
            platforms,
            &factors,
            MAX_SCHEDULED_LAYERS,
            |relax, a, period, plan| {
                let s = relax.scheduling.as_ref().unwrap();
                let used = a.iter().copied().max().unwrap() + 1;
                let mut premises = Vec::new();
                for mask in 0u32..(1 << used) {
                    if mask.count_ones() < 2 {
                        continue;
                    }
                    let group: Vec<(usize, Holding)> = (0..used)
                        .filter(|p| mask & (1 << p) != 0)
                        .map(|p| (p, Holding::of(a, p).unwrap()))
                        .collect();
                    let (members, holdings) = in_chain_order(&group);
                    let answer = focused_check(
                        s,
                        a,
                        &members,
                        &[],
                        period,
                        None,
                        threads,
                        Duration::from_secs(60),
                    )
                    .unwrap();
                    // The group of every processor is the assignment's own problem.
                    if mask.count_ones() as usize == used {
                        assert_eq!(answer, Some(plan), "{a:?} at {period}");
                    }
                    if answer == Some(false) {
                        premises.push(Premise::Scheduled {
                            holdings,
                            period,
                            tail: None,
                        });
                    }
                }
                premises
            },
        );
        learnt.len()
    }

    #[test]
    fn group_premises_never_exclude_an_assignment_with_a_plan() {
        let proofs = group_premises_are_valid(60..62, &[(2, 0.6, 0.5), (3, 0.6, 0.5)]);
        eprintln!("{proofs} proofs on groups");
        assert!(proofs > 0);
    }

    #[test]
    fn scheduled_premises_never_exclude_an_assignment_with_a_plan() {
        // A chain and platforms where groups are learnt (every processor passes alone).
        let (singles, groups, _) = scheduled_premises_are_valid(
            61..62,
            &[(3, 0.6, 1.0), (4, 0.6, 1.0)],
            &[2.5],
            MAX_SCHEDULED_LAYERS,
        );
        assert!(
            singles > 0 && groups > 0,
            "{singles} singles, {groups} groups"
        );
    }

    #[test]
    fn scheduled_premises_with_left_out_layers_never_exclude_an_assignment_with_a_plan() {
        // Checks that keep at most 2 layers: a processor of 3 or more is checked with its
        // later layers left out.
        let (singles, _, _) = scheduled_premises_are_valid(
            60..62,
            &[(2, 0.45, 2.0), (3, 0.6, 1.0)],
            &[1.3, 1.8, 2.5],
            2,
        );
        assert!(singles > 0, "{singles} singles");
    }

    #[test]
    #[ignore = "slow tier: test.sh runs it with --ignored"]
    fn scheduled_premises_never_exclude_an_assignment_with_a_plan_on_many_chains() {
        // Slow links (0.5) make the transfers of the cuts inside a group share their link.
        let platforms = [
            (2, 0.6, 0.5),
            (3, 0.45, 2.0),
            (3, 0.6, 1.0),
            (4, 0.6, 1.0),
            (4, 0.8, 0.5),
        ];
        let factors = [1.3, 1.8, 2.5, 3.5];
        let (singles, groups, tails) =
            scheduled_premises_are_valid(60..66, &platforms, &factors, MAX_SCHEDULED_LAYERS);
        let (left_out, _, left_out_tails) =
            scheduled_premises_are_valid(60..66, &platforms, &factors, 2);
        let counts = format!(
            "{singles} singles ({tails} with tails), {groups} groups, {left_out} with left-out \
             layers ({left_out_tails} with tails)"
        );
        eprintln!("{counts}");
        assert!(
            singles > 0 && groups > 0 && left_out > 0 && tails + left_out_tails > 0,
            "{counts}"
        );
    }

    /// A chain of three layers of 3 s each (forward 1 s, backward 2 s), unit sizes.
    fn three_layers_of_3_s() -> Instance {
        chain(
            &[1., 1., 1.],
            &[2., 2., 2.],
            &[1., 1., 1.],
            &[1., 1., 1.],
            1.,
        )
    }

    /// An assignment that passes its scheduled checks because they ran out of time is told
    /// apart from one whose checks found a pattern: only the first leaves the bound's
    /// closing probe open for its retry.
    #[test]
    fn a_pass_with_a_check_cut_short_is_unanswered() {
        // Three layers of 3 s each on 2 processors at 12 s: every check has a pattern.
        let inst = three_layers_of_3_s();
        let relax = Relaxation::new(&inst, &Platform::new(2, 1e3, 10.0));
        assert!(relax.scheduling.is_some());
        let threads = std::num::NonZeroU32::MIN;
        let (a, period) = ([0, 0, 1], 12.0);
        let no_time = || Some(Instant::now());
        // No time: every check cut short, nothing proven, the pass unanswered.
        let premises = relax.scheduled_premises(&a, period, threads, no_time());
        assert!(premises.unwrap().is_empty());
        assert!(relax.passed_unanswered());
        // With time: each processor's pattern found, the pass answered.
        let premises = relax.scheduled_premises(&a, period, threads, None);
        assert!(premises.unwrap().is_empty());
        assert!(!relax.passed_unanswered());
        // The patterns found answer the checks again, at the period and above it.
        for t in [period, 2.0 * period] {
            let premises = relax.scheduled_premises(&a, t, threads, None);
            assert!(premises.unwrap().is_empty());
            assert!(!relax.passed_unanswered(), "at {t} s");
        }
        // Without time again: unanswered, the patterns found notwithstanding (a check
        // with no time left is not looked up).
        let premises = relax.scheduled_premises(&a, period, threads, no_time());
        assert!(premises.unwrap().is_empty());
        assert!(relax.passed_unanswered());
        // Each processor's pattern found, the group of both (the whole assignment) given
        // no time: unanswered too.
        let groups_cut_short = Relaxation::new(&inst, &Platform::new(2, 1e3, 10.0))
            .checking_groups_within(Duration::ZERO);
        let premises = groups_cut_short.scheduled_premises(&a, period, threads, None);
        assert!(premises.unwrap().is_empty());
        assert!(groups_cut_short.passed_unanswered());
    }

    /// A bound whose last pass came from an assignment with a check cut short is not
    /// complete: a longer check might have excluded it, and the threshold might lie above.
    #[test]
    fn a_bound_that_ends_on_an_unanswered_pass_is_not_complete() {
        let inst = three_layers_of_3_s();
        let platform = Platform::new(2, 1e3, 10.0);
        let bound = |relax: Relaxation| {
            bound_of(
                relax,
                &inst,
                &platform,
                &BoundOptions::default(),
                &mut Learnt::default(),
            )
            .unwrap()
        };
        // Every check answered (each processor's pattern found): complete.
        let answered = bound(Relaxation::new(&inst, &platform));
        assert!(answered.complete, "{answered:?}");
        // Every check cut short: the same closed forms pass, never answered.
        let cut_short = bound(Relaxation::new(&inst, &platform).checking_within(Duration::ZERO));
        assert!(!cut_short.complete, "{cut_short:?}");
        assert!(cut_short.relaxed_period.is_some(), "{cut_short:?}");
        // No check proves anything then: the bound is the closed forms' alone.
        assert!(cut_short.lower_bound <= answered.lower_bound * (1.0 + 1e-9));
        // Only the groups' checks cut short: not complete either.
        let groups_cut_short =
            bound(Relaxation::new(&inst, &platform).checking_groups_within(Duration::ZERO));
        assert!(!groups_cut_short.complete, "{groups_cut_short:?}");
        assert!(groups_cut_short.lower_bound <= answered.lower_bound * (1.0 + 1e-9));
    }

    /// The MILP's loop after an undecided search is dropped for the rest of a case only
    /// where it has never decided a probe there.
    #[test]
    fn the_loop_after_the_search_is_dropped_only_where_it_never_decided() {
        let mut loops = LoopsAfterSearch::default();
        for _ in 0..FUTILE_MILP_LOOPS {
            assert!(!loops.futile(), "{loops:?}");
            loops.record(&Probe::Undecided);
        }
        assert!(loops.futile(), "{loops:?}");
        for decided in [Probe::Infeasible, Probe::Feasible(vec![0])] {
            let mut loops = LoopsAfterSearch::default();
            loops.record(&decided);
            for _ in 0..3 * FUTILE_MILP_LOOPS {
                loops.record(&Probe::Undecided);
                assert!(!loops.futile(), "{loops:?}");
            }
        }
    }

    /// With the loop dropped (the search alone deciding each probe), the bound of small
    /// chains is the one the search and the loop give together: the search decides the
    /// same relaxation, and here within each probe's time. Hurried on longer chains
    /// (searches left undecided), no loop runs and the bound stays below a valid plan.
    #[test]
    fn the_search_alone_gives_the_same_bound() {
        use crate::nets::random::{one_processor_memory, random_chain};
        let marked_futile = || LoopsAfterSearch {
            decided: 0,
            undecided: FUTILE_MILP_LOOPS,
        };
        let mut compared = 0;
        for seed in 60..66u64 {
            let inst = random_chain(seed, 6);
            let full = one_processor_memory(&inst);
            for (processors, share) in [(2, 0.6), (3, 0.4), (3, 1.0)] {
                let platform = Platform::new(processors, share * full, 2.0);
                let options = BoundOptions {
                    time_limit: Some(Duration::from_secs(60)),
                    ..BoundOptions::default()
                };
                let bound = |learnt: &mut Learnt| {
                    let relax = Relaxation::new(&inst, &platform);
                    bound_of(relax, &inst, &platform, &options, learnt).unwrap()
                };
                let both = bound(&mut Learnt::default());
                let mut futile = Learnt {
                    loops_after_search: marked_futile(),
                    ..Learnt::default()
                };
                let alone = bound(&mut futile);
                assert_eq!(
                    alone.infeasible, both.infeasible,
                    "seed {seed}, P = {processors}"
                );
                assert!(
                    (alone.lower_bound - both.lower_bound).abs()
                        <= 1e-9 * both.lower_bound.abs().max(1.0)
                        || alone.lower_bound == both.lower_bound,
                    "seed {seed}, P = {processors}, share {share}: {} alone, {} with the loop",
                    alone.lower_bound,
                    both.lower_bound
                );
                assert_eq!(
                    alone.complete, both.complete,
                    "seed {seed}, P = {processors}"
                );
                // No loop ran after the search: the record is as it was.
                assert_eq!(futile.loops_after_search, marked_futile());
                compared += 1;
            }
        }
        assert_eq!(compared, 18);
        // Longer chains with too little time for the search to decide: no loop runs, and
        // the bound stays below a valid plan (the contiguous optimum's).
        let mut hurried_cases = 0;
        for seed in 70..73u64 {
            let inst = random_chain(seed, 40);
            let platform = Platform::new(4, 0.6 * one_processor_memory(&inst), 2.0);
            let Some((allocation, pattern)) =
                crate::milp::contiguous::contiguous_optimum(&inst, &platform, None)
                    .unwrap()
                    .best
            else {
                continue;
            };
            let plan = crate::judge::judge(&inst, &platform, &allocation, &pattern);
            assert!(plan.valid);
            let mut hurried = Learnt {
                loops_after_search: marked_futile(),
                ..Learnt::default()
            };
            let short = BoundOptions {
                time_limit: Some(Duration::from_millis(30)),
                ..BoundOptions::default()
            };
            let relax = Relaxation::new(&inst, &platform);
            let quick = bound_of(relax, &inst, &platform, &short, &mut hurried).unwrap();
            assert!(!quick.infeasible, "seed {seed}: {quick:?}");
            assert!(
                quick.lower_bound <= plan.period * (1.0 + 1e-9),
                "seed {seed}: bound {} above the plan's {}",
                quick.lower_bound,
                plan.period
            );
            assert_eq!(hurried.loops_after_search, marked_futile());
            hurried_cases += 1;
        }
        assert!(hurried_cases > 0);
    }

    /// An assignment whose exact check gives no answer does not end the decision: the
    /// others still get theirs (one may have a plan), "no plan" is then never said, and the
    /// pool keeps nothing about the unanswered assignment.
    #[test]
    fn an_unanswered_assignment_is_skipped_and_never_proves_no_plan() {
        // Three layers of 3 s each on 2 processors at 6 s: every split of the chain into
        // two nonempty parts passes the closed forms, one processor alone does not.
        let inst = three_layers_of_3_s();
        let relax = Relaxation::new(&inst, &Platform::new(2, 1e3, 10.0)).closed_forms_only();
        let period = 6.0;
        let threads = std::num::NonZeroU32::MIN;
        let decide = |answer: &dyn Fn(usize) -> Verdict| {
            let mut seen: Vec<Vec<usize>> = Vec::new();
            let mut learnt = Learnt::default();
            let d = decide_period(&relax, period, threads, None, &mut learnt, &mut |a| {
                seen.push(a.to_vec());
                Ok(answer(seen.len()))
            })
            .unwrap();
            (d, seen, learnt.premises)
        };
        let excluded = |a: &Vec<usize>| Premise::Excluded {
            assignment: a.clone(),
            period,
        };
        // Every assignment proven to have no plan: no plan at the period.
        let (d, all, _) = decide(&|_| Verdict::NoPlan);
        assert_eq!(d, Decision::NoPlan);
        assert_eq!(all.len(), 3, "{all:?}");
        // The first unanswered: the same assignments checked, undecided at the end, and only
        // the proven ones left excluded in the pool.
        let (d, seen, pool) = decide(&|n| {
            if n == 1 {
                Verdict::Unknown
            } else {
                Verdict::NoPlan
            }
        });
        assert!(matches!(d, Decision::Undecided(_)), "{d:?}");
        assert_eq!(seen, all);
        assert!(!pool.contains(&excluded(&all[0])));
        assert!(all[1..].iter().all(|a| pool.contains(&excluded(a))));
        // A plan after an unanswered assignment is found and reported.
        let (d, _, pool) = decide(&|n| {
            if n == 1 {
                Verdict::Unknown
            } else {
                Verdict::Plan
            }
        });
        assert_eq!(d, Decision::Plan(all[1].clone()));
        assert!(pool.is_empty(), "{pool:?}");
        // Asked again with what the first call learnt: the search goes on from where it
        // stopped, but no further than the assignment left unanswered, which is asked again
        // (and, proven now, the period has no plan).
        let mut learnt = Learnt::default();
        let mut seen = Vec::new();
        let first = decide_period(&relax, period, threads, None, &mut learnt, &mut |a| {
            seen.push(a.to_vec());
            Ok(if seen.len() == 1 {
                Verdict::Unknown
            } else {
                Verdict::NoPlan
            })
        })
        .unwrap();
        assert!(matches!(first, Decision::Undecided(_)), "{first:?}");
        let mut again = Vec::new();
        let second = decide_period(&relax, period, threads, None, &mut learnt, &mut |a| {
            again.push(a.to_vec());
            Ok(Verdict::NoPlan)
        })
        .unwrap();
        assert_eq!(second, Decision::NoPlan);
        assert_eq!(again, vec![all[0].clone()]);
    }

    #[test]
    fn one_processor_holds_one_batch_of_everything() {
        // Stashes default to the inputs: 4 + 7 + 8 = 19 bytes, weights 3 * 15 = 45.
        let inst = chain(
            &[1., 2., 3.],
            &[2., 4., 6.],
            &[10., 0., 5.],
            &[7., 8., 9.],
            4.,
        );
        let relax = Relaxation::new(&inst, &Platform::new(1, 64.0, 1.0));
        assert!(relaxation_fits(&relax, &[0, 0, 0], f64::INFINITY));
        assert!(relaxation_fits(&relax, &[0, 0, 0], 18.0));
        let tight = Relaxation::new(&inst, &Platform::new(1, 63.0, 1.0));
        assert!(!relaxation_fits(&tight, &[0, 0, 0], f64::INFINITY));
    }
}
