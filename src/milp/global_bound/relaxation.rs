//! The relaxation: the case's quantities ([`Relaxation`]) and the closed forms of the facts
//! that every valid plan at a period satisfies, whatever its pattern (docs/bounds.md, "The
//! relaxation"): copies of each stash, windows with their transfers and waits, one
//! processor's facts ([`Relaxation::holding_fits`]) and a whole assignment's
//! ([`relaxation_fits`]).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{LEVELS_PER_PERIOD, MAX_SCHEDULED_LAYERS, MAX_TRANSFER_PERIODS, SCHEDULED_CHECK_LIMIT};
use crate::milp::pattern_milp::StashCharges;
use crate::model::{ChainSums, Instance, Platform};

#[path = "stages.rs"]
mod stages;

/// The instance's quantities the relaxation uses (0-based layer index `l` is layer `l+1`).
#[derive(Debug, Clone)]
pub struct Relaxation {
    pub(super) layers: usize,
    pub(super) processors: usize,
    pub(super) memory: f64,
    /// 2 (half duplex) or 1 (full duplex): a crossing cut's load on one link resource, in
    /// units of `comm`.
    pub(super) link_factor: f64,
    pub(super) u: Vec<f64>,
    pub(super) fwd: Vec<f64>,
    pub(super) bwd: Vec<f64>,
    pub(super) weights: Vec<f64>,
    /// `e_j`: a layer's stash less what it shares with the next layer.
    pub(super) stash: Vec<f64>,
    /// What a stage starting at the layer is charged for it ([`stage_start_stashes`]): its
    /// whole stash on chains whose tensors are shared by neighbours only.
    pub(super) own: Vec<f64>,
    /// `SF(i)`, `SB(j)`, `S(j)` (suffix sums from layer `i` to `L`).
    pub(super) suffix_f: Vec<f64>,
    pub(super) suffix_b: Vec<f64>,
    /// `a(c)` of the cut after layer `c` (index `c` for `c < L - 1`).
    pub(super) out: Vec<f64>,
    /// `a(c) / beta`.
    pub(super) comm: Vec<f64>,
    /// Relative slack on capacities and copy counts (docs/bounds.md, "Safety").
    pub(super) slack: f64,
    /// The chain's sums: the stash of every stage `k..m` (`stages.rs`).
    pub(super) sums: ChainSums,
    /// Whether a processor's facts take the stage structures of its runs too
    /// ([`Relaxation::stages_fit`]).
    pub(super) stage_facts: bool,
    /// The case, for the scheduled checks (docs/bounds.md, "Scheduled premises"); `None`
    /// where they are switched off.
    pub(super) scheduling: Option<Scheduling>,
    /// Whether a probe tries the search over assignments (`search.rs`) before the MILP.
    pub(super) search: bool,
}

/// What the scheduled checks (`scheduled.rs`) need: the case itself, and what the checks
/// answered so far.
#[derive(Debug, Clone)]
pub(super) struct Scheduling {
    pub(super) instance: Instance,
    pub(super) platform: Platform,
    /// Checks that proved nothing, by the runs and crossing cuts of the processors checked
    /// (shared by the clones of one relaxation: the same case).
    pub(super) answered: Arc<Mutex<HashMap<Vec<Holding>, Unproven>>>,
    /// Whether the last assignment that passed its checks passed with one of them
    /// unanswered (a processor's, or the group's): cut short by the time, neither a
    /// pattern nor a proof ([`Relaxation::passed_unanswered`]).
    pub(super) unanswered: Arc<AtomicBool>,
    /// Where tensors are shared further apart than neighbours (`stash_shared`): the
    /// relaxation's own per-layer charges, which the checks' scheduling MILP uses instead
    /// of the stashes (`Scope::stash_charges`); `None` on other chains, checked exactly.
    pub(super) stash_charges: Option<StashCharges>,
    /// The most layers one check keeps on its processors ([`MAX_SCHEDULED_LAYERS`]; tests
    /// lower it to reach the left-out layers on small chains).
    pub(super) max_layers: usize,
    /// The longest one check may take ([`SCHEDULED_CHECK_LIMIT`]; tests set none, so that
    /// every check is cut short).
    pub(super) check_limit: Duration,
    /// The longest the check of a group may take, within `check_limit` (the same by
    /// default; tests set none, so that only the groups' checks are cut short).
    pub(super) group_limit: Duration,
}

/// What the focused checks of some runs and cuts (one processor's, or a group's) proved
/// nothing at: a pattern found at `feasible_from` (hence at every longer period, by
/// stretching), and checks cut short by their time limit (period, limit). Neither is a
/// fact about the case; they only spare a check that would again prove nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct Unproven {
    pub(super) feasible_from: Option<f64>,
    pub(super) cut_short: Vec<(f64, Duration)>,
}

impl Unproven {
    /// Whether a pattern was found at or below `period` (hence at it, by stretching).
    pub(super) fn has_pattern(&self, period: f64) -> bool {
        self.feasible_from.is_some_and(|t| t <= period)
    }

    /// Whether a check at `period` within `limit` would again prove nothing: a pattern was
    /// found at or below it, or a check at or below it with at least that long was cut short.
    pub(super) fn spares(&self, period: f64, limit: Duration) -> bool {
        self.has_pattern(period)
            || self
                .cut_short
                .iter()
                .any(|&(t, l)| t <= period && l >= limit)
    }

    /// Records a check at `period` within `limit` cut short, unless a recorded one already
    /// spares it, and drops the recorded ones it spares (at a period at least as long, with
    /// no more time): what the list spares stays the same, and the list stays short.
    pub(super) fn record_cut_short(&mut self, period: f64, limit: Duration) {
        if self.spares(period, limit) {
            return;
        }
        self.cut_short
            .retain(|&(t, l)| !(t >= period && l <= limit));
        self.cut_short.push((period, limit));
    }
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
        let own = stage_start_stashes(instance, &stash);
        let stash_charges = charges_of(instance, &stash, &own);
        Relaxation {
            layers: n,
            processors: platform.processors,
            memory: platform.memory,
            link_factor: if platform.full_duplex { 1.0 } else { 2.0 },
            u: instance.layers.iter().map(|l| l.fwd + l.bwd).collect(),
            fwd: instance.layers.iter().map(|l| l.fwd).collect(),
            bwd: instance.layers.iter().map(|l| l.bwd).collect(),
            weights: instance.layers.iter().map(|l| l.weights).collect(),
            own,
            stash,
            suffix_f,
            suffix_b,
            comm: out.iter().map(|a| a / platform.bandwidth).collect(),
            out,
            slack: 1e-6 * (n as f64 / 100.0).max(1.0),
            sums: instance.sums(),
            stage_facts: true,
            scheduling: Some(Scheduling {
                instance: instance.clone(),
                platform: platform.clone(),
                answered: Arc::default(),
                unanswered: Arc::default(),
                stash_charges,
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

    /// The relaxation that a search under a time limit probes: where the scheduled checks
    /// would charge a relaxation of the stashes (tensors shared further apart than
    /// neighbours), the closed forms alone, since those checks raise the bound only given
    /// minutes and within a limit take the probes' time (docs/bounds.md, "Tensors shared
    /// further apart"); the same relaxation otherwise.
    pub fn under_time_limit(self) -> Self {
        if self.charges_stashes() {
            self.closed_forms_only()
        } else {
            self
        }
    }

    /// Whether the scheduled checks charge per-layer charges instead of the stashes
    /// (`Scheduling::stash_charges`): a relaxation, where tensors are shared further apart
    /// than neighbours.
    pub(super) fn charges_stashes(&self) -> bool {
        self.scheduling
            .as_ref()
            .is_some_and(|s| s.stash_charges.is_some())
    }

    /// The same relaxation without the facts of the stage structures
    /// ([`Relaxation::stages_fit`]): each layer's own charges only (for the tests and the
    /// benches that measure what those facts add).
    pub fn without_stage_facts(mut self) -> Self {
        self.stage_facts = false;
        self
    }

    /// The same relaxation decided by the MILP alone, without the search over assignments
    /// (for the tests of the MILP).
    pub fn milp_only(mut self) -> Self {
        self.search = false;
        self
    }

    pub(super) fn suffix(&self, j: usize) -> f64 {
        self.suffix_f[j] + self.suffix_b[j]
    }

    /// Copies of layer `j`'s stash at the forward start of layer `i`'s stage (`j <= i`), with
    /// transfers of more than `level` levels downstream of `i` (docs/bounds.md, "The facts in
    /// symbols").
    pub(super) fn copies_before(&self, i: usize, j: usize, period: f64, level: usize) -> f64 {
        let d = self.suffix_f[i] + self.suffix_b[j];
        if level == 0 || period.is_infinite() {
            return ceil_copies(d, period, self.slack);
        }
        (d / period + level_periods(level) - self.slack)
            .ceil()
            .max(1.0)
    }

    /// Copies of layer `j`'s stash held at every instant.
    pub(super) fn copies_always(&self, j: usize, period: f64) -> f64 {
        floor_copies(self.suffix(j), period, self.slack)
    }

    /// The sequential period `U(1,L) + 2 sum_c comm_c`: at it and above, the relaxation is
    /// feasible whenever it is at an infinite period (docs/bounds.md, "The facts in symbols").
    pub fn sequential_period(&self) -> f64 {
        self.suffix(0) + 2.0 * self.comm.iter().sum::<f64>()
    }

    /// `waits[l]`: a lower bound on the time that layer `l`'s window (from its forward's start to
    /// its backward's end) spends waiting at `period`, with the cuts `crossing` crossing and no
    /// other (`crossing[c]`: between layers `c` and `c + 1`, 0-based; one entry per layer, the last
    /// unused); zeros at an infinite period (docs/bounds.md, "Waits forced by the period").
    pub fn waits(&self, crossing: &[bool], period: f64) -> Vec<f64> {
        ChainWindows::new(self, crossing, period, Windows::Waited).waits
    }

    /// Whether a processor holding `h` can meet the memory and load facts at `period`, its windows
    /// counted with the transfers of `h.cuts` in both directions: facts 1-4 (docs/bounds.md, "Exact
    /// windows, added lazily") for one processor, with every cut outside `h.cuts` taken as not
    /// crossing (fewer transfers, shorter windows: a relaxation of every assignment that satisfies
    /// the premise, whatever stages its runs are cut into).
    pub fn holding_fits(&self, h: &Holding, period: f64) -> bool {
        self.holding_fits_with(h, period, Windows::Waited)
    }

    /// [`Relaxation::holding_fits`] with windows counted as `windows` says.
    pub(super) fn holding_fits_with(&self, h: &Holding, period: f64, windows: Windows) -> bool {
        self.holding_need(h, period, windows).is_some()
    }

    /// What a processor holding `h` needs on average over a period (fact 4: its static
    /// memory and every stash over its window; the static memory alone at an infinite
    /// period), or `None` when it cannot meet facts 1-4 ([`Relaxation::holding_fits`]).
    pub(super) fn holding_need(&self, h: &Holding, period: f64, windows: Windows) -> Option<f64> {
        let n = self.layers;
        let mut crossing = vec![false; n];
        for &c in &h.cuts {
            crossing[c] = true;
        }
        let mut chain = ChainWindows::new(self, &crossing, period, windows);
        if let Windows::Plain { extra } = windows {
            let (first, last) = h.runs[0];
            for d in &mut chain.down[first..=last] {
                *d += extra;
            }
        }
        let need = self.holding_need_on(h, period, &chain)?;
        let waited = matches!(windows, Windows::Waited);
        if self.stage_facts && !self.stages_fit(h, period, &chain, self.fixed_memory(h), waited) {
            return None;
        }
        Some(need)
    }

    /// What a processor holding `h` keeps whatever its pattern: three copies of its layers'
    /// weights and two buffers at each crossing cut at the ends of its runs.
    pub(super) fn fixed_memory(&self, h: &Holding) -> f64 {
        let n = self.layers;
        let crossing = |c: usize| h.cuts.binary_search(&c).is_ok();
        let mut fixed = 0.0;
        for &(f, l) in &h.runs {
            fixed += 3.0 * self.weights[f..=l].iter().sum::<f64>();
            if f > 0 && crossing(f - 1) {
                fixed += 2.0 * self.out[f - 1];
            }
            if l + 1 < n && crossing(l) {
                fixed += 2.0 * self.out[l];
            }
        }
        fixed
    }

    /// [`Relaxation::holding_need`] with the chain's transfers and waits given: those of
    /// every cut of `h.cuts` crossing and no other from the cut before `h`'s first layer on
    /// (cuts above it change nothing of `h`'s windows), so that one [`ChainWindows`] serves
    /// every processor of an assignment.
    pub(super) fn holding_need_on(
        &self,
        h: &Holding,
        period: f64,
        chain: &ChainWindows,
    ) -> Option<f64> {
        let cap_time = period * (1.0 + self.slack);
        let cap_mem = self.memory * (1.0 + self.slack);
        let (down, waits) = (&chain.down, &chain.waits);
        let fixed = self.fixed_memory(h);
        let load: f64 = h
            .runs
            .iter()
            .map(|&(f, l)| self.u[f..=l].iter().sum::<f64>())
            .sum();
        if fixed > cap_mem || (period.is_finite() && load > cap_time) {
            return None;
        }
        // Every layer is an item. The first layer of a run starts a stage, which keeps its
        // whole stash; any other layer either shares a stage with the layer before it (its
        // marginal, held at least over that layer's window) or starts one (its whole stash,
        // the tensor it shares with the layer before then kept twice, over its own window):
        // the smaller of the two. A stage keeps the whole stash of its first layer and the
        // marginals of the others over its own window, which contains theirs.
        struct Item {
            j: usize,
            starts_run: bool,
            /// `SB(x) + down(x)` of the windows from the layer (`x = j`) and from the one
            /// before it (`x = j - 1`; unused where the layer starts a run), as two terms.
            from_self: (f64, f64),
            from_before: (f64, f64),
            /// Its charge at every instant (the copies always held).
            always: f64,
        }
        let window = |j: usize| self.suffix(j) + 2.0 * down[j] + waits[j];
        // Layer j's least charge, with `held` the batches held by a window from layer j and
        // `before` those held by one from layer j - 1 (asked only where j does not start a
        // run).
        let charge = |j: usize, starts_run: bool, held: f64, before: &dyn Fn() -> f64| {
            let whole = self.own[j] * held;
            if starts_run {
                whole
            } else {
                whole.min(self.stash[j] * before())
            }
        };
        let items: Vec<Item> = h
            .runs
            .iter()
            .flat_map(|&(f, l)| (f..=l).map(move |j| (j, j == f)))
            .filter(|&(j, _)| self.own[j] > 0.0)
            .map(|(j, starts_run)| Item {
                j,
                starts_run,
                from_self: (self.suffix_b[j], down[j]),
                from_before: if starts_run {
                    (0.0, 0.0)
                } else {
                    (self.suffix_b[j - 1], down[j - 1])
                },
                always: charge(
                    j,
                    starts_run,
                    floor_copies(window(j), period, self.slack),
                    &|| floor_copies(window(j - 1), period, self.slack),
                ),
            })
            .collect();
        let mut average = 0.0;
        if period.is_finite() {
            average = items
                .iter()
                .map(|it| {
                    let j = it.j;
                    charge(j, it.starts_run, window(j) / period, &|| {
                        window(j - 1) / period
                    })
                })
                .sum();
            if fixed + average > cap_mem {
                return None;
            }
        }
        for i in &items {
            let at = self.suffix_f[i.j] + down[i.j] + waits[i.j];
            let copies = |(b, d): (f64, f64)| ceil_copies(at + b + d, period, self.slack);
            let mut need = fixed;
            for it in &items {
                need += if it.j <= i.j {
                    charge(it.j, it.starts_run, copies(it.from_self), &|| {
                        copies(it.from_before)
                    })
                } else {
                    it.always
                };
                if need > cap_mem {
                    // Every charge is at least zero: the whole sum exceeds it too.
                    return None;
                }
            }
        }
        Some(fixed + average)
    }
}

/// The transfers and waits along the chain for one set of crossing cuts at one period:
/// `down[l]`, one direction's transfers of the crossing cuts `c >= l`, and `waits[l]`
/// ([`Relaxation::waits`], zeros for [`Windows::Plain`]). Layer `l`'s quantities depend on
/// the cuts from `l` on only, so a cut that starts crossing changes those above it alone
/// ([`ChainWindows::cross`]).
#[derive(Debug, Clone)]
pub(super) struct ChainWindows {
    pub(super) down: Vec<f64>,
    pub(super) waits: Vec<f64>,
    /// `span[l]`: the least time from layer `l`'s forward start to its backward's end, with
    /// the waits (0 past the last layer).
    span: Vec<f64>,
}

impl ChainWindows {
    pub(super) fn new(
        relax: &Relaxation,
        crossing: &[bool],
        period: f64,
        windows: Windows,
    ) -> ChainWindows {
        let n = relax.layers;
        let mut chain = ChainWindows {
            down: vec![0.0; n + 1],
            waits: vec![0.0; n],
            span: vec![0.0; n + 1],
        };
        match windows {
            Windows::Waited => chain.fill_above(relax, crossing, period, n),
            Windows::Plain { .. } => chain.fill_above(relax, crossing, f64::INFINITY, n),
        }
        chain
    }

    /// The same chain with cut `c` crossing too (`crossing[c]` now true): layers `0..=c`
    /// computed again, waited at `period`.
    pub(super) fn cross(&mut self, relax: &Relaxation, crossing: &[bool], period: f64, c: usize) {
        debug_assert!(crossing[c]);
        self.fill_above(relax, crossing, period, c + 1);
    }

    /// Layers `0..end`, from layer `end - 1` up, with those from `end` on as they are: the
    /// recurrence of [`Relaxation::waits`] (docs/bounds.md, "Waits forced by the period").
    fn fill_above(&mut self, relax: &Relaxation, crossing: &[bool], period: f64, end: usize) {
        let n = relax.layers;
        let tol = relax.slack * period;
        let half_duplex = relax.link_factor > 1.5;
        let waited = period.is_finite();
        for l in (0..end).rev() {
            let (f, b) = (relax.fwd[l], relax.bwd[l]);
            let span_next = self.span[l + 1];
            let mut down = self.down[l + 1];
            let to_backward = if l + 1 == n {
                f
            } else if crossing[l] {
                let d = relax.comm[l];
                down += d;
                // From the forward transfer's start to the backward transfer's start.
                let mut gap = d + span_next;
                if half_duplex && waited {
                    gap = clear_of(gap, d, d, period, tol);
                }
                f + gap + d
            } else {
                f + span_next
            };
            // F_l and B_l are parts of their stage's forward and backward: they share the
            // processor.
            let span = if waited {
                clear_of(to_backward, f, b, period, tol) + b
            } else {
                to_backward + b
            };
            self.down[l] = down;
            self.span[l] = span;
            self.waits[l] = if waited {
                (span - relax.suffix(l) - 2.0 * down).max(0.0)
            } else {
                0.0
            };
        }
    }
}

/// The levels `q >= 1` with `x / T > q / LEVELS_PER_PERIOD + slack` (at most
/// `MAX_TRANSFER_PERIODS` periods' worth): fact 3's transfer term for transfers `x`
/// downstream (docs/bounds.md, "The facts in symbols").
pub(super) fn transfer_levels(x: f64, period: f64, slack: f64) -> usize {
    if period.is_infinite() || x <= 0.0 {
        return 0;
    }
    let q = LEVELS_PER_PERIOD as f64;
    let levels = ((q * (x / period - slack)).ceil() - 1.0).max(0.0) as usize;
    levels.min(MAX_TRANSFER_PERIODS * LEVELS_PER_PERIOD)
}

/// The periods level `q` stands for.
pub(super) fn level_periods(q: usize) -> f64 {
    q as f64 / LEVELS_PER_PERIOD as f64
}

/// The per-layer stash charges of the scheduling MILP (`Scope::stash_charges`) where tensors
/// are shared further apart than neighbours: each layer's marginal inside a stage
/// ([`layer_stashes`]) and what a stage starting at it is charged for it
/// ([`stage_start_stashes`]), never more than any stage keeps. `None` on other chains, whose
/// stashes the MILP charges exactly.
pub fn stash_charges(instance: &Instance) -> Option<StashCharges> {
    if instance.stash_shared.is_empty() {
        return None;
    }
    let stash = layer_stashes(instance);
    let own = stage_start_stashes(instance, &stash);
    charges_of(instance, &stash, &own)
}

fn charges_of(instance: &Instance, stash: &[f64], own: &[f64]) -> Option<StashCharges> {
    (!instance.stash_shared.is_empty()).then(|| StashCharges {
        start: own.to_vec(),
        within: stash.to_vec(),
    })
}

/// What the relaxation charges each layer's stash: its marginal along the chain,
/// `stash(1..j) - stash(1..j-1)` (with `ChainSums::stash`, stash overlaps and shared tensors
/// included), clamped at zero. The argument needs `e_j >= 0` and `sum_{j in k..m} e_j <=
/// stash(k..m)` for every stage `k..m`; a stage keeping each tensor once makes the stash
/// subadditive and the marginals satisfy it, and it is checked here: an instance where it
/// fails gets zeros (a weaker bound, never a wrong one).
pub(super) fn layer_stashes(instance: &Instance) -> Vec<f64> {
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

/// What the relaxation charges a layer `k` that starts a stage, given the marginals `e`
/// ([`layer_stashes`]) charged to the stage's other layers: the most that keeps
/// `own_k + sum_{j in k+1..m} e_j <= stash(k..m)` for every stage `k..m`, that is
/// `min_m (stash(k..m) - sum_{j in k+1..m} e_j)` (docs/bounds.md, "Tensors shared further
/// apart"). On chains whose tensors are shared by neighbours only, every `m` gives the
/// layer's own stash, which is taken directly (no quadratic scan); at least `e_k` where the
/// marginals pass their check, and never below zero.
pub(super) fn stage_start_stashes(instance: &Instance, e: &[f64]) -> Vec<f64> {
    let n = instance.len();
    if instance.stash_shared.is_empty() {
        if e.iter().all(|&x| x <= 0.0) {
            return e.to_vec();
        }
        return (1..=n).map(|l| instance.stash(l).max(e[l - 1])).collect();
    }
    let sums = instance.sums();
    (1..=n)
        .map(|k| {
            let mut rest = 0.0;
            let mut least = f64::INFINITY;
            for m in k..=n {
                if m > k {
                    rest += e[m - 1];
                }
                least = least.min(sums.stash(k, m) - rest);
            }
            least.max(0.0)
        })
        .collect()
}

/// `ceil(d / T)` batches held over a stretch of at least `d`, rounded down past `slack`.
pub(super) fn ceil_copies(d: f64, period: f64, slack: f64) -> f64 {
    if period.is_infinite() {
        return if d > 0.0 { 1.0 } else { 0.0 };
    }
    ceil_of(d / period - slack).max(0.0)
}

/// `floor(w / T)` batches always held by a window of at least `w`, rounded down past
/// `slack`.
pub(super) fn floor_copies(w: f64, period: f64, slack: f64) -> f64 {
    if period.is_infinite() {
        return 0.0;
    }
    floor_of(w / period - slack).max(0.0)
}

/// Layers of one processor and the cuts assumed to cross: the premise of a row that the
/// bound adds lazily to the relaxation (docs/bounds.md, "Exact windows, added lazily"). Whenever a
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
    pub(super) fn kept(assignment: &[usize], p: usize, left_out: &[bool]) -> Option<Holding> {
        let n = assignment.len();
        let out = |l: usize| left_out.get(l).is_some_and(|&o| o);
        let runs = runs_where(n, |l| assignment[l] == p && !out(l));
        let first = runs.first()?.0;
        let cuts = (first.saturating_sub(1)..n.saturating_sub(1))
            .filter(|&c| assignment[c] != assignment[c + 1])
            .collect();
        Some(Holding { runs, cuts })
    }

    pub(super) fn layers(&self) -> usize {
        self.runs.iter().map(|&(f, l)| l + 1 - f).sum()
    }

    /// A cut at the start or end of one of the runs.
    pub(super) fn is_boundary(&self, c: usize) -> bool {
        self.runs.iter().any(|&(f, l)| c + 1 == f || c == l)
    }
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

/// How [`Relaxation::holding_fits_with`] counts a layer's windows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Windows {
    /// With the waits that the period forces between operations sharing a resource
    /// ([`Relaxation::waits`]). Monotone in the runs and the crossing cuts, not in where
    /// further transfers lie.
    Waited,
    /// Chain sums and transfers only, with `extra` seconds of one-way transfers more
    /// downstream of the first run only: where further crossing cuts would weigh least.
    Plain { extra: f64 },
}

/// The smallest `y >= x` at which an operation of length `after` may start, `y` after the start
/// of one of length `before` on the same resource, both repeating every `period`: `y mod T` in
/// `[before, T - after]` (docs/bounds.md, "Waits forced by the period"). The zone is widened by
/// `tol` on both sides; `x` itself when the two cannot share the resource at all (a load fact
/// excludes that case).
pub(super) fn clear_of(x: f64, before: f64, after: f64, period: f64, tol: f64) -> f64 {
    let (lo, hi) = (before - tol, period - after + tol);
    if !period.is_finite() || hi < lo {
        return x;
    }
    let k = floor_of(x / period);
    let r = x - k * period;
    if r < lo {
        k * period + lo
    } else if r <= hi {
        x
    } else {
        (k + 1.0) * period + lo
    }
}

/// `y.floor()`, without a call into libm for the non-negative values below 2^52 that the
/// waits meet at every node of the search (a truncation is the floor there).
pub(super) fn floor_of(y: f64) -> f64 {
    if y.is_sign_positive() && y < 4.5e15 {
        (y as u64) as f64
    } else {
        y.floor()
    }
}

/// `y.ceil()`, likewise ([`floor_of`]).
pub(super) fn ceil_of(y: f64) -> f64 {
    if y.is_sign_positive() && y < 4.5e15 {
        let t = (y as u64) as f64;
        if t < y {
            t + 1.0
        } else {
            t
        }
    } else {
        y.ceil()
    }
}

/// True when the assignment (`assignment[l]` the processor of layer `l+1`) satisfies the
/// relaxation at `period` (docs/bounds.md, "The facts in symbols"): the exact counterpart of
/// the MILP, for tests and for tightening a solution's period.
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

/// The smallest period (within `precision`) at which `assignment` satisfies the relaxation,
/// knowing it does at `hi`. With scheduled checks, `hi` itself: only a probe knows whether
/// an assignment passes them.
pub(super) fn tighten(
    relax: &Relaxation,
    assignment: &[usize],
    lo: f64,
    hi: f64,
    precision: f64,
) -> f64 {
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
