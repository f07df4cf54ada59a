//! The general MILP `ilp`: the allocation of layers to processors
//! (non-contiguous, any number of stages per processor) *together with* the periodic
//! pattern of smallest period that fits memory.
//!
//! Formulation after Beaumont, Eyraud-Dubois, Shilova, *Pipelined Model Parallelism:
//! Complexity Results and Memory Considerations* (Euro-Par 2021), the ILP that MadPipe
//! (ScaDL 2022) cites as its reference [1] and whose second phase (`fixed_allocation`)
//! fixes the allocation. Our own code, on docs/model.md's rules:
//!
//! # Groups and coarsening
//! The MILP places *groups* of consecutive layers; every group is its own stage
//! (docs/model.md section 3 lets consecutive stages share a processor, with no transfer
//! between them), so a processor holds any set of groups. Without `--coarsen` a group is
//! one layer and the MILP is exact for the chain. `--coarsen N` first cuts the chain into
//! `N` groups by a dynamic program minimising the largest group's `U` ([`coarsen`]); the
//! MILP is then exact for plans whose cuts fall between groups only. Splitting a stage into
//! groups never hurts: the groups' live windows nest inside the stage's, so a stage-level
//! pattern is a group-level pattern with the same period and no larger memory.
//!
//! # Two searches over the same space
//! Both are exact for the grouped chain (every group its own stage, any processor) and give
//! the same optimum within the period precision (tests/milp_general.rs compares them).
//!
//! **Enumerated** (`--ilp-search enumerate`; section "Small numbers of groups" below).
//! **Monolithic** (`--ilp-search monolithic`): one MILP places and schedules together,
//! sections "Variables" to "The period is searched". Neither is fast everywhere. Where
//! memory is tight, the enumeration settles most allocations by their bounds and the few
//! left by one short scheduling MILP each, while the monolithic MILP branches for minutes
//! (a random chain of 8 layers on 2 processors at 0.7x one processor's memory: 0.01 s
//! against 146 s; 7 layers: 1.3 s against 177 s). Where memory is loose, the allocations'
//! bounds leave many open and each allocation's MILP proves "not below the incumbent"
//! slowly, while the monolithic MILP's capacity cuts settle them together (8 layers at
//! 1.5x: the enumeration still running after 5 minutes, the monolithic MILP 8 s).
//! `--ilp-search auto` (the default) therefore enumerates first, when the grouped chain has
//! at most [`MAX_ENUMERATED`] allocations (8 groups have at most 4140 on any number of
//! processors), and hands over to the monolithic MILP, with its incumbent and proven bound,
//! after [`MAX_EXAMINED`] allocations needed a scheduling MILP, or, on an uncoarsened
//! chain, as soon as one of those MILPs has not decided within [`EXAMINATION_TIME`] (it is
//! then stopped; its own proven bound and the next allocation's hold for the rest). The
//! 8-layer chain at 1.5x then takes 14 s, 6 s more than the monolithic MILP alone; at 0.7x,
//! 0.01 s. At 2 s instead of 5, two tight chains of 10 layers on 4 processors
//! (`benches/ilp_scaling.rs`, seeds 2 and 3) handed over and ended open at 60 s, where the
//! enumeration alone proves them in 4-6 s. On coarsened chains (`--coarsen N < L`: groups
//! of layers with large stashes) the enumeration has no clock of its own: there memory
//! settles most allocations by their bounds.
//!
//! # Small numbers of groups: allocations enumerated
//! Processors are identical and every pair is joined by a link of the same bandwidth, so
//! an allocation of the groups matters only up to relabelling the processors: restricted
//! growth strings ([`for_each_allocation`]; their number is a sum of Stirling numbers of
//! the second kind, [`allocation_count`]). For each, [`allocation_lower_bound`] bounds the
//! period of every pattern that fits memory: resource loads, and memory through the live
//! windows of the stashes (at the start of a stage's forward, every stage of the processor
//! whose window holds it keeps `ceil(D/T)` batches; the others `floor(D/T)`; their average).
//! Allocations whose bound is infinite cannot hold one batch and are dropped; the others are
//! taken in increasing order of bound, and on each the scheduling MILP of
//! `fixed_allocation` answers one question first: is there a pattern below the incumbent's
//! period (times `1 - precision`)? Almost always no, in one solve; when yes, it finds that
//! allocation's optimum. The search stops as soon as the next bound reaches the incumbent:
//! then the incumbent is optimal. Under a time limit the proven bound is the smallest of the
//! bounds of the allocations not yet settled.
//!
//! Most allocations are settled by their bound alone, and most of the others by one solve,
//! which is why this search settles far more cases within a time limit than the monolithic
//! MILP over every allocation at once ([`monolithic`]). Its bounds are weak where memory is
//! loose and many allocations balance the loads: each of those needs a MILP of its own.
//!
//! # Variables (at a fixed period `T`, times scaled by `1/T`)
//! - `x[g][p]` binary: group `g` on processor `p` (exactly one `p`); symmetry broken by
//!   "group 0 on processor 0, and processor `p` is first used after processor `p-1`";
//! - `z[c][p][q]` in `[0,1]`, `= x[c][p] x[c+1][q]` (linearised exactly): cut `c` crosses
//!   from `p` to `q`; `u_c = sum z` says that it crosses at all;
//! - one batch's operations in chain order `F_0, CF_0, F_1, ..., F_{G-1}, B_{G-1}, CB_{G-2},
//!   ..., B_0`, each with a start `t` in `[0,1]` and an integer shift `h`; a transfer lasts
//!   `u_c a(c)/(beta T)` (zero when the cut does not cross, so the dependency chain then
//!   collapses to `F_c -> F_{c+1}`);
//! - dependencies `h_a + t_a + d_a <= h_b + t_b`, with `h_b - h_a <= 2` (as in
//!   `fixed_allocation`: larger gaps can be closed without loss) and `h(F_0) = 0`;
//! - exclusive resources: one order binary per pair of operations that may share a resource,
//!   the circular disjunction of `fixed_allocation`, relaxed by big-M when the two do *not*
//!   share it: `s[g][g']` (same processor, `>= x[g][p] + x[g'][p] - 1` for every `p`) for
//!   compute, `u_c` for the two transfers of one cut, and `v[c][c']` (same link) for
//!   transfers of two cuts;
//! - capacity cuts: a processor's work `sum_g x[g][p] U_g / T <= 1` and a link's transfers
//!   (`2 a(c)/(beta T)` per crossing cut, half duplex) `<= 1`. The disjunctions imply them,
//!   but their LP relaxation does not; with them the relaxation bounds the allocation
//!   itself, which is what makes the solves at loose memory short;
//! - memory (docs/model.md section 6), checked at every forward start `t(F_e)` on `e`'s
//!   processor: weights `3 W x`, buffers `2 a(c)` on both sides of each crossing cut, and
//!   every group's `stash * live`, where
//!   `live_g(tau) = [tau >= t_F] - [tau >= r] + w + h_B - h_F` as in `fixed_allocation`
//!   (indicator binaries in the conservative direction), multiplied by the
//!   same-processor indicator through `lambda >= stash (live - K (1 - s))`, `K` a bound on a
//!   live count of a fitting group.
//!
//! # The period is searched (monolithic)
//! As in `fixed_allocation` (same reasons: no products `h T`, numbers O(1)), `T` is found by
//! bisection to [`MilpOptions::period_precision`] between a lower bound (the largest of
//! [`period_bounds`](crate::model::bounds::period_bounds) on the grouped chain, then the
//! largest `T` proved infeasible) and an incumbent. Under a time limit each probe gets a
//! third of the time left, and a probe that ends undecided moves the search above it
//! (without raising the proven bound), so the time goes to finding better plans.
//!
//! # Warm start
//! The incumbent starts as the best heuristic plan of the grouped chain: the contiguous
//! optimum (1F1B* on the best contiguous partition of the groups, `milp::contiguous`), which
//! is at least as good as PipeDream's and 1F1B*'s plans on those groups. HiGHS gets no MIP
//! start: every MILP of the search asks for a period below the incumbent's, where the
//! incumbent is not a solution. Without a contiguous plan, the search starts at the
//! sequential period (all work and transfers back to back), where one batch at a time
//! reaches the smallest memory; infeasible there means infeasible at every period.
//!
//! # Bounds reported
//! `lower_bound` holds for every plan of the *original* chain: with no coarsening (or `N >=
//! L`) on a chain whose layers share no stashed tensor, the search's proven bound;
//! otherwise only the instance bounds of `model::bounds`. A grouped search bounds plans
//! with cuts between groups, not every plan; and every group here is its own stage, so
//! where two layers share a tensor (`stash_overlap`, `stash_shared`) a plan that keeps them
//! in one stage keeps that tensor once, and may beat every plan the search sees (ResNet-50
//! on 2 processors at 16 GiB, 12 GB/s: the search's optimum was 0.0853 s, while a plan
//! with layers 2-5 and 6-9 as two stages of one processor reaches 0.0674 s). The grouped
//! bound is kept in [`GeneralOutcome::group_lower_bound`].

// Index loops mirror the formulation (x[g][p], z[c]...) and read better than iterators here.
#![allow(clippy::needless_range_loop)]

use std::time::{Duration, Instant};

use crate::judge::ensure_judged_valid;
use crate::judge::judge;
use crate::milp::contiguous::{contiguous_optimum, judged_one_f_one_b_star};
use crate::milp::fixed_allocation::schedule_allocation_below;
use crate::milp::solver::{MilpOptions, SolveStatus};
use crate::model::bounds::{allocation_lower_bound, period_lower_bound};
use crate::model::{
    Allocation, BatchGraph, Instance, Layer, Pattern, Platform, SolverSummary, Stage,
};
use crate::planner::{AlgorithmOptions, Outcome, Planner, Problem, Solution};
use crate::units::Seconds;

mod monolithic;
use monolithic::Monolithic;

/// Relative inflation of durations in the model (as in `fixed_allocation`).
const MARGIN: f64 = 1e-8;

/// Cuts `instance` into `min(groups, L)` groups of consecutive layers minimising the largest
/// group's `U` (ties: the earliest cuts). Returns each group's 1-based layer range
/// ([`group_instance`] makes the grouped chain).
pub fn coarsen(instance: &Instance, groups: usize) -> Vec<(usize, usize)> {
    let l = instance.len();
    let n = groups.clamp(1, l.max(1));
    let ranges: Vec<(usize, usize)> = if n >= l {
        (1..=l).map(|i| (i, i)).collect()
    } else {
        let sums = instance.sums();
        // best[k][j]: smallest largest-group U of layers 1..=j in k groups; cut[k][j]: the
        // last group's first layer.
        let mut best = vec![vec![f64::INFINITY; l + 1]; n + 1];
        let mut cut = vec![vec![0usize; l + 1]; n + 1];
        best[0][0] = 0.0;
        for k in 1..=n {
            for j in k..=l {
                for i in k..=j {
                    let v = best[k - 1][i - 1].max(sums.u(i, j));
                    if v < best[k][j] {
                        best[k][j] = v;
                        cut[k][j] = i;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(n);
        let mut j = l;
        for k in (1..=n).rev() {
            let i = cut[k][j];
            out.push((i, j));
            j = i - 1;
        }
        out.reverse();
        out
    };
    ranges
}

/// The chain whose layers are `groups` (1-based inclusive layer ranges covering the chain
/// in order): sums of fwd, bwd, weights and stash, the last layer's `out`.
pub fn group_instance(instance: &Instance, groups: &[(usize, usize)]) -> Instance {
    let sums = instance.sums();
    let layers = groups
        .iter()
        .map(|&(a, b)| Layer {
            name: if a == b {
                instance.layer(a).name.clone()
            } else {
                format!("layers {a}-{b}")
            },
            fwd: sums.u_f(a, b),
            bwd: sums.u_b(a, b),
            weights: sums.weights(a, b),
            out: instance.a(b),
            stash: Some(sums.stash(a, b)),
            stash_overlap: None,
        })
        .collect();
    let mut grouped = Instance {
        name: instance.name.clone(),
        input: instance.input,
        layers,
        stash_shared: Vec::new(),
        meta: instance.meta.clone(),
    };
    // What layers of two different groups share, the groups share: a stage of groups
    // keeps exactly what the stage of their layers keeps.
    let mut group_of = vec![0; instance.len() + 1];
    for (g, &(a, b)) in groups.iter().enumerate() {
        for slot in &mut group_of[a..=b] {
            *slot = g + 1;
        }
    }
    let pairs: Vec<(usize, usize, f64)> = instance
        .stash_pairs()
        .into_iter()
        .filter(|&(a, b, _)| group_of[a] != group_of[b])
        .map(|(a, b, v)| (group_of[a], group_of[b], v))
        .collect();
    grouped.set_stash_pairs(pairs);
    grouped
}

/// What the general MILP found.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneralOutcome {
    /// The best allocation (on the original chain: one stage per group) and its judged
    /// pattern, `None` when nothing fits.
    pub best: Option<(Allocation, Pattern)>,
    /// A lower bound for every plan of the original chain (module docs).
    pub lower_bound: Seconds,
    /// The search's proven bound for plans whose cuts fall between groups.
    pub group_lower_bound: Seconds,
    pub status: SolveStatus,
    /// `(period - group_lower_bound) / period` (the search's own gap).
    pub gap: f64,
    pub nodes: u64,
    /// MILPs solved.
    pub solves: usize,
    /// The groups (1-based layer ranges).
    pub groups: Vec<(usize, usize)>,
    /// The warm start's period (contiguous optimum of the groups), when there was one.
    pub warm_start_period: Option<Seconds>,
    pub seconds: f64,
    /// Why a phase did not run, for the report.
    pub note: Option<String>,
}

/// The grouped allocation mapped back to the original chain.
fn ungroup(allocation: &Allocation, groups: &[(usize, usize)]) -> Allocation {
    Allocation::new(
        allocation
            .stages
            .iter()
            .map(|s| Stage {
                first: groups[s.first - 1].0,
                last: groups[s.last - 1].1,
                processor: s.processor,
            })
            .collect(),
    )
}

/// The general MILP on `instance` coarsened to `coarsen` groups (all layers when `None`).
pub fn general_optimum(
    instance: &Instance,
    platform: &Platform,
    coarsen_to: Option<usize>,
    options: &MilpOptions,
) -> crate::error::Result<GeneralOutcome> {
    general_optimum_by(instance, platform, coarsen_to, IlpSearch::Auto, options)
}

/// [`general_optimum`] with the search chosen.
pub fn general_optimum_by(
    instance: &Instance,
    platform: &Platform,
    coarsen_to: Option<usize>,
    search: IlpSearch,
    options: &MilpOptions,
) -> crate::error::Result<GeneralOutcome> {
    instance.check()?;
    platform.check()?;
    let groups = coarsen(instance, coarsen_to.unwrap_or(instance.len()));
    optimum_over_groups(instance, platform, groups, None, search, options)
}

/// The general MILP placing the given `groups` (1-based inclusive layer ranges covering the
/// chain in order), starting from `incumbent` (an allocation of the groups, one stage per
/// group, with its pattern) when given, else from the contiguous optimum of the groups.
/// MadPipe's `remap` option runs it on the first phase's stages.
pub fn optimum_over_groups(
    instance: &Instance,
    platform: &Platform,
    groups: Vec<(usize, usize)>,
    incumbent: Option<(Allocation, Pattern)>,
    search: IlpSearch,
    options: &MilpOptions,
) -> crate::error::Result<GeneralOutcome> {
    let started = Instant::now();
    let grouped = group_instance(instance, &groups);
    // The search's bound holds for every plan only when its groups are every possible
    // stage: no coarsening, and no tensor shared across a layer boundary (module docs).
    let shares_tensors = !instance.stash_shared.is_empty()
        || (1..instance.len()).any(|l| instance.stash_overlap(l) > 0.0);
    let exact_for_chain = groups.len() == instance.len() && !shares_tensors;
    let chain_bound = period_lower_bound(instance, platform);
    let deadline = options.time_limit.map(|d| started + d);
    let time_left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));

    let mut out = GeneralOutcome {
        best: None,
        lower_bound: chain_bound,
        group_lower_bound: 0.0,
        status: SolveStatus::Infeasible,
        gap: f64::INFINITY,
        nodes: 0,
        solves: 0,
        groups: groups.clone(),
        warm_start_period: None,
        seconds: 0.0,
        note: None,
    };

    let mut best = warm_start(
        instance,
        platform,
        &grouped,
        incumbent,
        time_left(),
        &mut out,
    )?;

    let countable = allocation_count(grouped.len(), platform.processors) <= MAX_ENUMERATED;
    // `enumerate` asked for more allocations than it takes: its warm start only, below.
    let too_many_to_enumerate = search == IlpSearch::Enumerate && !countable;
    // `auto` enumerates while the allocations' bounds and their scheduling MILPs settle them
    // quickly, and hands over to the monolithic MILP after MAX_EXAMINED scheduling MILPs
    // (loose memory, where bounds leave many allocations open and one MILP over all of them
    // proves faster), and on uncoarsened chains also when one of them takes longer than
    // EXAMINATION_TIME (module docs).
    let handover = match search {
        IlpSearch::Enumerate if countable => Some(None),
        IlpSearch::Auto if countable => Some(Some(Handover {
            after_examined: MAX_EXAMINED,
            each_within: exact_for_chain.then_some(EXAMINATION_TIME),
        })),
        _ => None,
    };
    let mut floor_from_enumeration = 0.0;
    if let Some(handover) = handover {
        let candidates = bounded_allocations(&grouped, platform);
        match decomposed(
            instance, platform, &grouped, candidates, best, options, handover, deadline, &mut out,
        )? {
            None => {
                out.lower_bound = if exact_for_chain {
                    chain_bound.max(out.group_lower_bound)
                } else {
                    chain_bound
                };
                if let Some((alloc, pattern)) = out.best.take() {
                    out.lower_bound = out.lower_bound.min(pattern.period);
                    out.best = Some((ungroup(&alloc, &groups), pattern));
                }
                out.seconds = started.elapsed().as_secs_f64();
                return Ok(out);
            }
            Some((handed, bound)) => {
                best = handed;
                floor_from_enumeration = bound;
            }
        }
    }

    let lo = period_lower_bound(&grouped, platform).max(floor_from_enumeration);
    let not_searched = if too_many_to_enumerate {
        Some(format!(
            "the allocations were not enumerated: {} groups on {} processors have more than \
             {MAX_ENUMERATED} (--coarsen to fewer groups, or --ilp-search auto)",
            grouped.len(),
            platform.processors
        ))
    } else if grouped.len() > MAX_MONOLITHIC_GROUPS {
        Some(format!(
            "the monolithic MILP was not built: {} groups, at most {MAX_MONOLITHIC_GROUPS} \
             (its construction alone outlasts any time limit; --coarsen to fewer groups)",
            grouped.len()
        ))
    } else {
        None
    };
    if let Some(note) = not_searched {
        out.note = Some(note);
        if let Some((alloc, pattern)) = best {
            let period = pattern.period;
            out.status = SolveStatus::LimitWithIncumbent;
            out.group_lower_bound = lo.min(period);
            out.gap = (period - out.group_lower_bound) / period;
            out.lower_bound = chain_bound.min(period);
            out.best = Some((ungroup(&alloc, &groups), pattern));
        } else {
            out.status = SolveStatus::NoSolutionWithinLimit;
        }
        out.seconds = started.elapsed().as_secs_f64();
        return Ok(out);
    }
    let search = Monolithic {
        instance,
        platform,
        grouped: &grouped,
        options,
        deadline,
    };
    search.run(best, lo, &mut out)?;
    if let Some((alloc, pattern)) = out.best.take() {
        let period = pattern.period;
        out.lower_bound = if exact_for_chain {
            chain_bound.max(out.group_lower_bound).min(period)
        } else {
            chain_bound.min(period)
        };
        out.best = Some((ungroup(&alloc, &groups), pattern));
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

/// Warm start: the caller's incumbent, else the contiguous optimum of the groups, re-planned
/// on the original chain. (Allocation on the grouped chain, pattern judged on the original
/// chain.) Sets the outcome's `warm_start_period`.
fn warm_start(
    instance: &Instance,
    platform: &Platform,
    grouped: &Instance,
    incumbent: Option<(Allocation, Pattern)>,
    time_left: Option<Duration>,
    out: &mut GeneralOutcome,
) -> crate::error::Result<Option<(Allocation, Pattern)>> {
    let groups = &out.groups;
    if let Some((alloc, pattern)) = incumbent {
        let j = judge(instance, platform, &ungroup(&alloc, groups), &pattern);
        if !j.valid {
            return Ok(None);
        }
        out.warm_start_period = Some(pattern.period);
        return Ok(Some((alloc, pattern)));
    }
    let warm = contiguous_optimum(grouped, platform, time_left.map(|d| d / 5))?;
    if let Some((alloc, _)) = &warm.best {
        let original = ungroup(alloc, groups);
        if let Some(p) = judged_one_f_one_b_star(instance, platform, &original) {
            out.warm_start_period = Some(p.period);
            return Ok(Some((alloc.clone(), p)));
        }
    }
    Ok(None)
}

/// How the general MILP searches the allocations of the groups (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IlpSearch {
    /// `enumerate` on chains with at most 200000 allocations (`MAX_ENUMERATED`), handing
    /// over to `monolithic` after 48 scheduling MILPs (`MAX_EXAMINED`) or, uncoarsened,
    /// when one of them takes 5 s (`EXAMINATION_TIME`); `monolithic` otherwise.
    #[default]
    Auto,
    /// Every allocation with its lower bound, the scheduling MILP on each in increasing order
    /// of bound; beyond 200000 allocations (`MAX_ENUMERATED`), the warm start only, with a
    /// note.
    Enumerate,
    /// One MILP placing the groups and scheduling them together, the period by bisection.
    Monolithic,
}

/// Largest number of allocations (of the groups, up to relabelling the processors) that
/// the search enumerates; beyond it the monolithic MILP runs (module docs).
pub const MAX_ENUMERATED: u128 = 200_000;

/// The most groups the monolithic MILP is built for. Its model has an order binary per
/// pair of operations that may share a resource and a same-processor variable per pair of
/// groups (O(G^2 P) columns and rows), and building it does not look at the clock between
/// rows: on a 426-layer op chain on 8 processors the construction alone ran past every
/// limit, while at 128 groups a 2-s limit is kept. Beyond it the search keeps its warm
/// start (the contiguous optimum) and says so; `--coarsen` brings a chain under it.
pub const MAX_MONOLITHIC_GROUPS: usize = 128;

/// With `--ilp-search auto`, the enumeration hands over to the monolithic MILP after this
/// many allocations needed the scheduling MILP (module docs).
pub const MAX_EXAMINED: usize = 48;

/// With `--ilp-search auto` on an uncoarsened chain, the enumeration also hands over to the
/// monolithic MILP when one allocation's scheduling MILP has not decided within this time
/// (module docs): at loose memory one of them may take a minute to prove that its
/// allocation has no pattern below the incumbent, where the monolithic MILP settles every
/// allocation in seconds; at tight memory each decides in a fraction of a second.
pub const EXAMINATION_TIME: Duration = Duration::from_secs(5);

/// When the enumeration of `--ilp-search auto` stops and hands its incumbent and proven
/// bound to the monolithic MILP.
#[derive(Debug, Clone, Copy)]
struct Handover {
    /// After this many allocations needed a scheduling MILP.
    after_examined: usize,
    /// When one allocation's scheduling MILP has not decided within this time (it is then
    /// stopped), if any.
    each_within: Option<Duration>,
}

/// Number of allocations of `groups` groups to at most `processors` identical processors
/// up to relabelling: the Stirling numbers of the second kind `S(G, k)`, summed over
/// `k <= P` (saturating).
pub fn allocation_count(groups: usize, processors: usize) -> u128 {
    // s[k] = S(n, k) for the current n.
    let mut s = vec![0u128; processors + 1];
    s[0] = 1;
    for _ in 0..groups {
        for k in (1..=processors).rev() {
            s[k] = (k as u128).saturating_mul(s[k]).saturating_add(s[k - 1]);
        }
        s[0] = 0;
    }
    s.iter().fold(0u128, |a, &b| a.saturating_add(b))
}

/// Calls `visit` with every allocation of `groups` groups to at most `processors`
/// processors, up to relabelling: `a[g]` is group `g`'s processor, group 0 on processor 0,
/// and a group opens processor `k` only when processors `0..k` are in use (restricted
/// growth strings).
pub fn for_each_allocation(groups: usize, processors: usize, mut visit: impl FnMut(&[usize])) {
    fn extend(
        a: &mut Vec<usize>,
        used: usize,
        n: usize,
        p: usize,
        visit: &mut dyn FnMut(&[usize]),
    ) {
        if a.len() == n {
            visit(a);
            return;
        }
        for q in 0..(used + 1).min(p) {
            a.push(q);
            extend(a, used.max(q + 1), n, p, visit);
            a.pop();
        }
    }
    if groups == 0 || processors == 0 {
        return;
    }
    let mut a = Vec::with_capacity(groups);
    extend(&mut a, 0, groups, processors, &mut visit);
}

/// One stage per group, group `g` on processor `assignment[g]` (an allocation of
/// [`for_each_allocation`]).
pub fn group_allocation(assignment: &[usize]) -> Allocation {
    Allocation::new(
        assignment
            .iter()
            .enumerate()
            .map(|(g, &p)| Stage {
                first: g + 1,
                last: g + 1,
                processor: p,
            })
            .collect(),
    )
}

/// Every allocation of the groups that can hold one batch, with its lower bound
/// ([`allocation_lower_bound`]), in increasing order of bound.
fn bounded_allocations(grouped: &Instance, platform: &Platform) -> Vec<(Seconds, Vec<usize>)> {
    let mut candidates: Vec<(Seconds, Vec<usize>)> = Vec::new();
    for_each_allocation(grouped.len(), platform.processors, |a| {
        let graph = BatchGraph::new(grouped, platform, &group_allocation(a));
        let bound = allocation_lower_bound(&graph, platform.memory);
        if bound.is_finite() {
            candidates.push((bound, a.to_vec()));
        }
    });
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    candidates
}

/// The decomposed search (module docs, "Small numbers of groups"): every allocation of the
/// groups with its lower bound, then the scheduling MILP on each in increasing order of
/// bound until the bound reaches the incumbent. Fills `out` (on the grouped chain: `best`
/// keeps the grouped allocation) with the status, the grouped bound and the gap.
#[allow(clippy::too_many_arguments)]
fn decomposed(
    instance: &Instance,
    platform: &Platform,
    grouped: &Instance,
    candidates: Vec<(Seconds, Vec<usize>)>,
    mut best: Option<(Allocation, Pattern)>,
    options: &MilpOptions,
    handover: Option<Handover>,
    deadline: Option<Instant>,
    out: &mut GeneralOutcome,
) -> crate::error::Result<Option<HandedOver>> {
    let precision = options.period_precision;
    let mut proven = None;
    let mut examined = 0;
    for (i, (bound, assignment)) in candidates.iter().enumerate() {
        let incumbent = incumbent_period(&best);
        if *bound >= incumbent * (1.0 - precision) {
            proven = Some(incumbent);
            break;
        }
        if handover.is_some_and(|h| examined >= h.after_examined) {
            // Every allocation before this one is settled: its bound holds for the rest.
            return Ok(Some((best, bound.min(incumbent))));
        }
        // This allocation's MILP stops at the handover's time or at the deadline, whichever
        // comes first; stopped at the handover's, the search hands over rather than ends.
        let now = Instant::now();
        let handover_at = handover.and_then(|h| h.each_within).map(|d| now + d);
        let hands_over_first = handover_at.is_some_and(|h| deadline.is_none_or(|d| h < d));
        let stop_at = if hands_over_first {
            handover_at
        } else {
            deadline
        };
        let left = stop_at.map(|d| d.saturating_duration_since(now));
        if left.is_some_and(|d| d.is_zero()) {
            proven = Some(*bound);
            break;
        }
        let allocation = group_allocation(assignment);
        let sub = MilpOptions {
            time_limit: left,
            ..options.clone()
        };
        let cutoff = incumbent.is_finite().then_some(incumbent);
        let r = schedule_allocation_below(grouped, platform, &allocation, &sub, cutoff)?;
        if r.solves > 0 {
            examined += 1;
        }
        out.solves += r.solves;
        out.nodes += r.nodes;
        if let Some(pattern) = r.pattern {
            if pattern.period < incumbent {
                let original = ungroup(&allocation, &out.groups);
                ensure_judged_valid(instance, platform, &original, &pattern, "the general MILP")?;
                best = Some((allocation, pattern));
            }
        }
        if r.status != SolveStatus::Optimal && r.status != SolveStatus::Infeasible {
            // A limit stopped this allocation: the bound is its own, or the next one's.
            let next = candidates.get(i + 1).map_or(f64::INFINITY, |c| c.0);
            let floor = r.lower_bound.min(next);
            if hands_over_first {
                let incumbent = incumbent_period(&best);
                return Ok(Some((best, floor.min(incumbent))));
            }
            proven = Some(floor);
            break;
        }
    }
    let incumbent = incumbent_period(&best);
    // Every allocation examined (or ruled out by its bound): the incumbent is optimal.
    let proven = proven.unwrap_or(incumbent).min(incumbent);
    out.group_lower_bound = proven;
    match best {
        None if proven.is_infinite() => {
            out.status = SolveStatus::Infeasible;
        }
        None => {
            out.status = SolveStatus::NoSolutionWithinLimit;
        }
        Some(b) => {
            let period = b.1.period;
            out.status = if period - proven <= precision * period {
                SolveStatus::Optimal
            } else {
                SolveStatus::LimitWithIncumbent
            };
            out.gap = (period - proven) / period;
            out.best = Some(b);
        }
    }
    Ok(None)
}

/// The period of the enumeration's incumbent, infinite without one.
fn incumbent_period(best: &Option<(Allocation, Pattern)>) -> Seconds {
    best.as_ref().map_or(f64::INFINITY, |b| b.1.period)
}

/// What the enumeration hands to the monolithic MILP: its incumbent (grouped allocation and
/// pattern) and the bound it proved.
type HandedOver = (Option<(Allocation, Pattern)>, Seconds);

/// The `ilp` algorithm: [`general_optimum`] as a planner.
#[derive(Debug, Clone, Default)]
pub struct GeneralMilpPlanner {
    /// `--coarsen N`: the number of groups (all layers when `None`).
    pub coarsen: Option<usize>,
    /// `--ilp-search`.
    pub search: IlpSearch,
    pub options: MilpOptions,
}

/// The general MILP's time limit when the registry builds `ilp` without one: it can run for
/// hours, and the plan found by then is reported with status "timeout".
pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

impl GeneralMilpPlanner {
    /// The planner of `ilp`; `coarsen`, when given, must be at least one group.
    pub fn new(
        coarsen: Option<usize>,
        search: IlpSearch,
        options: MilpOptions,
    ) -> Result<Self, crate::InputError> {
        let planner = GeneralMilpPlanner {
            coarsen,
            search,
            options,
        };
        planner.check()?;
        Ok(planner)
    }

    fn check(&self) -> Result<(), crate::InputError> {
        if self.coarsen == Some(0) {
            return Err(crate::InputError::new(
                "--coarsen",
                "",
                "must be 1 or more groups",
            ));
        }
        Ok(())
    }
}

/// The options of `ilp`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IlpOptions {
    /// Wall-clock limit (`--time-limit`; [`DEFAULT_TIME_LIMIT`] when not given).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::units::serde_units::seconds"
    )]
    pub time_limit: Option<Seconds>,
    /// HiGHS threads (`--threads`; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Coarsen the chain to this many groups first (`--coarsen 16`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarsen: Option<usize>,
    /// How it searches the allocations (`--ilp-search`; `auto` when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ilp_search: Option<IlpSearch>,
}

impl AlgorithmOptions for IlpOptions {
    fn planner(&self) -> Result<Box<dyn Planner>, crate::InputError> {
        // The general MILP can run for hours: without a limit, it stops at its default
        // (the plan found by then is reported as "timeout").
        let mut milp = crate::milp::MilpOptions::from_limits(self.time_limit, self.threads)?;
        milp.time_limit = milp.time_limit.or(Some(DEFAULT_TIME_LIMIT));
        Ok(Box::new(GeneralMilpPlanner::new(
            self.coarsen,
            self.ilp_search.unwrap_or_default(),
            milp,
        )?))
    }
}

impl Planner for GeneralMilpPlanner {
    fn name(&self) -> String {
        "ilp".into()
    }

    fn plan(&self, problem: &Problem) -> crate::error::Result<Outcome> {
        problem.check_milp_range()?;
        self.check()?;
        general_optimum_by(
            problem.instance,
            problem.platform,
            self.coarsen,
            self.search,
            &self.options,
        )?
        .into_outcome(problem.instance.len())
    }
}

impl GeneralOutcome {
    /// The solver's status, gap and nodes for reports.
    pub fn summary(&self) -> SolverSummary {
        self.status.summary(self.gap, self.nodes)
    }

    /// The planner's outcome for a chain of `layers` layers: the best plan with its bound
    /// and solver summary, "infeasible" with a reason, or an error when a limit stopped
    /// the search before any plan was found.
    pub fn into_outcome(self, layers: usize) -> crate::error::Result<Outcome> {
        let summary = self.summary();
        match self.best {
            None if self.status == SolveStatus::Infeasible => Ok(Outcome::Infeasible {
                reason: if self.groups.len() == layers {
                    "no allocation fits in memory, even one batch at a time".into()
                } else {
                    format!(
                        "no allocation of these {} groups of layers fits in memory, even one batch at \
                         a time (finer groups may still fit)",
                        self.groups.len()
                    )
                },
                lower_bound: None,
            }),
            None => Ok(Outcome::NoPlanWithinLimit {
                reason: self.note.clone().unwrap_or_else(|| {
                    "the time limit stopped the general MILP before any plan was found".into()
                }),
                lower_bound: Some(self.lower_bound),
            }),
            Some((allocation, pattern)) => {
                let mut sol = Solution::new(allocation, Some(pattern));
                sol.messages.extend(self.note.clone());
                sol.lower_bound = Some(self.lower_bound);
                sol.stopped_at_limit = self.status != SolveStatus::Optimal;
                sol.solver = Some(summary);
                Ok(Outcome::Found(sol))
            }
        }
    }
}

#[cfg(test)]
mod tests;
