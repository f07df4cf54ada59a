//! MixPipe (Zhang et al., "MixPipe: Efficient Bidirectional Pipeline Parallelism for
//! Training Large-Scale Models", DAC 2023, section III): bidirectional pipelines with a
//! tunable K (micro-batches injected into the first stages before the first backward),
//! Gamma early forwards (the 2F1B schedule), "K maximizing" for N > D (III-C), and the
//! search of eq. (1)-(5) for K, Gamma and the largest micro-batch size.
//!
//! Our reading of the schedule (Figure 3 is a drawing; the text gives its rules):
//! - each pipeline injects K/2 micro-batches into its first stage before that worker's
//!   first backward (K total, "symmetric bidirectional pipelines");
//! - a worker holds at most K + Gamma live micro-batches: K from 1F1B, one more for each of
//!   the Gamma early forwards; eq. (4) sizes memory with exactly (K + Gamma) M_a. The paper
//!   applies 2F1B Gamma times on the two middle workers and "as much as possible until
//!   achieving balanced activations memory usage" on the others: we cap every worker at the
//!   same K + Gamma, which is that balance;
//! - within those caps, streams come from `list` with forwards first (early forward
//!   scheduling), or oldest micro-batch first, whichever drains sooner on the nominal
//!   durations (backward = 2 x forward). At K = D, Gamma = 0 this is Chimera.
//! - K maximizing (N > D): K = 2(D-1) injected, peak held to 3D/2 - 1 live micro-batches as
//!   the paper states, the first backward as soon as possible.
//!
//! Where we depart: the paper's N_bubbles = (5D - 3K - 4)/3 - Gamma (eq. (1)) is its count
//! for its own drawings. Our streams match it exactly at K = D, Gamma = 0 (Chimera) and in
//! 8 of the 51 other cases with D = 4..12 (e.g. D = 6, K = 4; D = 8, K = 4; D = 10, K = 8,
//! Gamma = 1), are one or two forward times better in 4 (e.g. D = 8, K = 6) and worse
//! elsewhere, most for small K on deep pipelines (K = 2, D >= 6): with at most K + Gamma
//! live micro-batches on worker 0 while each down micro-batch stays live there for a whole
//! round trip (>= 3D forward times), N = D micro-batches cannot drain in the formula's
//! linear-in-D time once D is large, so no schedule obeying eq. (4)'s memory can reach it.
//! `tests/sync_closed_forms.rs` pins the exact cases and the results README tabulates the
//! rest. The search below uses the paper's closed form, as the paper does, and the CLI
//! reports the simulated makespan of the chosen schedule beside it (never instead of it).
//! Recomputation and the W x D hybrid (eq. (6), with the device placement of Figure 5(b)
//! as a choice of all-reduce bandwidth) are in `hybrid`.

use serde::Serialize;

use super::list::{self, Priority, Rules};
use super::registry::{KGamma, Placement, ScheduleDescriptor, WarmStart, DEFAULTS};
use super::{shape_error, Schedule, SyncError};

pub static MIXPIPE: ScheduleDescriptor = ScheduleDescriptor {
    name: "mixpipe",
    label: "MixPipe",
    help: "MixPipe: bidirectional pipelines with K injected (--k, even, default D) and Gamma \
           early forwards (--gamma)",
    paper: "Zhang et al., DAC 2023",
    bidirectional: true,
    takes_k_gamma: true,
    // K is D unless given.
    params: |d, n, k, gamma| {
        let k = k.unwrap_or(d);
        check_k_gamma(d, n, k, gamma)?;
        Ok(Some(KGamma { k, gamma }))
    },
    generate: |d, n, p, _| {
        let p = p.unwrap_or(KGamma { k: d, gamma: 0 });
        mixpipe(d, n, p.k, p.gamma)
    },
    // Eq. (5)'s space: every even K <= D, Gamma <= (D - K) / 2; and K maximizing when N > D.
    approach: Some(|d, n| {
        let mut v = Vec::new();
        for k in (2..=d).step_by(2) {
            for gamma in 0..=(d - k) / 2 {
                v.push(MIXPIPE.with_k_gamma(k, gamma));
            }
        }
        if n > d {
            v.push(MIXPIPE_K_MAX.kind());
        }
        v
    }),
    paper_bubble: |d, n, p| {
        let p = p.filter(|_| n == d)?;
        let b = paper_bubbles(d, p.k, p.gamma);
        Some(b / (d as f64 + b))
    },
    k_gamma_columns: |_, p| (p.map(|p| p.k), p.map(|p| p.gamma)),
    warm_start: Some(WarmStart {
        placements: &[Placement::Bidirectional],
        rank: 2,
        other_drawing: None,
    }),
    ..DEFAULTS
};

pub static MIXPIPE_K_MAX: ScheduleDescriptor = ScheduleDescriptor {
    name: "mixpipe-kmax",
    label: "MixPipe K maximizing",
    help: "MixPipe's K maximizing for N > D: K = 2(D-1), at most 3D/2 - 1 live micro-batches",
    paper: "Zhang et al., DAC 2023, section III-C",
    bidirectional: true,
    generate: |d, n, _, _| k_maximizing(d, n),
    paper_bubble: |d, n, _| {
        let b = d as f64 / 2.0 - 1.0;
        (n > d).then(|| b / (n as f64 + b))
    },
    k_gamma_columns: |d, _| (Some(2 * (d - 1)), None),
    warm_start: Some(WarmStart {
        placements: &[Placement::Bidirectional],
        rank: 3,
        other_drawing: None,
    }),
    ..DEFAULTS
};

/// MixPipe's streams for `d` stages, `n` micro-batches, `k` injected and `gamma` early
/// forwards.
pub fn mixpipe(d: usize, n: usize, k: usize, gamma: usize) -> Result<Schedule, SyncError> {
    if d % 2 != 0 || n % 2 != 0 || n < d {
        return Err(shape_error(
            "mixpipe",
            format!("needs an even D, an even N and N >= D (got D = {d}, N = {n})"),
        ));
    }
    if k < 2 || k % 2 != 0 || k > n {
        return Err(shape_error(
            "mixpipe",
            format!("K must be even, at least 2 and at most N = {n} (got K = {k})"),
        ));
    }
    let rules = Rules {
        stages: d,
        micro_batches: n,
        bidirectional: true,
        initial_per_pipeline: k / 2,
        live_cap: k + gamma,
        priority: Priority::ForwardFirst,
        alternate_entry: false,
        backward_ticks: list::BACKWARD_TICKS,
        doubled_per_pipeline: 0,
    };
    Ok(list::best_of(
        &rules,
        &[Priority::ForwardFirst, Priority::MicroBatchOrder],
        "mixpipe",
    )?
    .schedule)
}

/// MixPipe's "K maximizing" (section III-C) for N >= D micro-batches: K = 2(D-1), at most
/// 3D/2 - 1 live micro-batches per worker.
pub fn k_maximizing(d: usize, n: usize) -> Result<Schedule, SyncError> {
    if d % 2 != 0 || n % 2 != 0 || n < d {
        return Err(shape_error(
            "mixpipe-kmax",
            format!("needs an even D, an even N and N >= D (got D = {d}, N = {n})"),
        ));
    }
    let rules = Rules {
        stages: d,
        micro_batches: n,
        bidirectional: true,
        initial_per_pipeline: (d - 1).max(1),
        live_cap: k_maximizing_live_cap(d),
        priority: Priority::ForwardFirst,
        alternate_entry: false,
        backward_ticks: list::BACKWARD_TICKS,
        doubled_per_pipeline: 0,
    };
    Ok(list::best_of(
        &rules,
        &[
            Priority::ForwardFirst,
            Priority::MicroBatchOrder,
            Priority::BackwardFirst,
        ],
        "mixpipe-kmax",
    )?
    .schedule)
}

/// The peak of K maximizing: (3D/2 - 1) M_a (section III-C), at least 2.
pub fn k_maximizing_live_cap(d: usize) -> usize {
    (3 * d / 2).saturating_sub(1).max(2)
}

/// Zhang et al., DAC 2023, eq. (1): N_bubbles = (5D - 3K - 4)/3 - Gamma, in units of one
/// stage's forward + backward.
pub fn paper_bubbles(d: usize, k: usize, gamma: usize) -> f64 {
    (5.0 * d as f64 - 3.0 * k as f64 - 4.0) / 3.0 - gamma as f64
}

/// One profile point of a stage: a micro-batch size and what one stage costs at it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BatchPoint {
    /// Micro-batch size B (samples).
    pub batch: f64,
    /// t_stage(B): forward + backward seconds of one stage for one micro-batch.
    pub stage_seconds: f64,
    /// M_a(B): activation bytes one stage keeps for one micro-batch.
    pub activation_bytes: f64,
}

/// The inputs of eq. (1)-(5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchInput {
    pub stages: usize,
    /// Profile points, at least one (eq. (3) scales linearly from the nearest one).
    pub profile: Vec<BatchPoint>,
    /// M_theta: bytes of one stage replica's parameters as held for training (weights and
    /// gradient), counted twice (two replicas) as in eq. (4).
    pub replica_bytes: f64,
    /// M_budget: bytes of one device.
    pub memory_budget_bytes: f64,
}

/// One (K, Gamma) of the search with its eq. (4) micro-batch size and eq. (1) throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Candidate {
    pub k: usize,
    pub gamma: usize,
    /// B_largest (eq. (4)), rounded down to a whole number of samples; 0 when nothing fits.
    pub micro_batch: usize,
    pub bubbles: f64,
    /// t_stage at B_largest (eq. (2)-(3)).
    pub stage_seconds: f64,
    /// Eq. (1): samples per second, B N / ((D + N_bubbles) t_stage), with N = D.
    pub samples_per_second: f64,
}

impl SearchInput {
    /// t_stage(B): piecewise-linear in B between profile points per sample, eq. (3)'s linear
    /// scaling from the nearest point outside them.
    pub fn stage_seconds(&self, batch: f64) -> f64 {
        per_sample(&self.profile, batch, |p| p.stage_seconds) * batch
    }

    /// M_a(B), modelled like t_stage.
    pub fn activation_bytes(&self, batch: f64) -> f64 {
        per_sample(&self.profile, batch, |p| p.activation_bytes) * batch
    }
}

/// Eq. (3): the per-sample `value` at `batch` over the profile points
/// ([`super::costs::per_sample_at`]).
fn per_sample(points: &[BatchPoint], batch: f64, value: impl Fn(&BatchPoint) -> f64) -> f64 {
    let per: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.batch, value(p) / p.batch))
        .collect();
    super::costs::per_sample_at(&per, batch)
}

/// Checks MixPipe's K and Gamma for D stages and N micro-batches: K even, at least 2 and at
/// most D when N = D (eq. (5)), up to 2(D - 1) (K maximizing) when N > D; Gamma at most
/// (D - K) / 2, the range the paper searches (eq. (1)-(5)): beyond it eq. (1)'s bubble count
/// would be negative and the extra early forwards have no bubble to fill.
pub fn check_k_gamma(d: usize, n: usize, k: usize, gamma: usize) -> Result<(), crate::InputError> {
    let most = if n > d { 2 * d.saturating_sub(1) } else { d };
    if k < 2 || k % 2 != 0 || k > most {
        return Err(crate::InputError::new(
            "--k",
            "",
            format!(
                "K must be even, at least 2 and at most {most} ({}; D = {d}, N = {n}), got {k}",
                if n > d {
                    "2(D-1) when N > D"
                } else {
                    "D when N = D"
                }
            ),
        ));
    }
    let max_gamma = d.saturating_sub(k) / 2;
    if gamma > max_gamma {
        return Err(crate::InputError::new(
            "--gamma",
            "",
            format!(
                "Gamma must be at most (D - K) / 2 = {max_gamma} (D = {d}, K = {k}), got {gamma}"
            ),
        ));
    }
    Ok(())
}

/// Eq. (5): every K = 2, 4, ..., D and Gamma = 0..=(D-K)/2 (the paper writes Gamma >= 1 in
/// eq. (5) but draws Gamma = 0 in Figure 3; we include it), best first (most samples per
/// second; ties to the smaller K + Gamma).
pub fn search(input: &SearchInput) -> Result<Vec<Candidate>, SyncError> {
    let d = input.stages;
    if d < 2 || d % 2 != 0 {
        return Err(shape_error(
            "mixpipe search",
            format!("needs an even D >= 2 (got {d})"),
        ));
    }
    let base = input
        .profile
        .iter()
        .find(|p| p.batch > 0.0 && p.stage_seconds > 0.0 && p.activation_bytes > 0.0)
        .ok_or_else(|| {
            shape_error(
                "mixpipe search",
                "needs a profile point with positive batch, time and activation bytes",
            )
        })?;
    let mut out = Vec::new();
    for k in (2..=d).step_by(2) {
        for gamma in 0..=(d - k) / 2 {
            let free = input.memory_budget_bytes - 2.0 * input.replica_bytes;
            // Eq. (4) with M_a(B)/B taken at the base point, refined once at the result.
            let mut b = (free * base.batch / ((k + gamma) as f64 * base.activation_bytes))
                .floor()
                .max(0.0);
            while b >= 1.0 && (k + gamma) as f64 * input.activation_bytes(b) > free {
                b -= 1.0;
            }
            let bubbles = paper_bubbles(d, k, gamma);
            let (stage_seconds, samples_per_second) = if b >= 1.0 {
                let t = input.stage_seconds(b);
                (t, b * d as f64 / ((d as f64 + bubbles) * t))
            } else {
                (0.0, 0.0)
            };
            out.push(Candidate {
                k,
                gamma,
                micro_batch: b as usize,
                bubbles,
                stage_seconds,
                samples_per_second,
            });
        }
    }
    out.sort_by(|a, b| {
        b.samples_per_second
            .total_cmp(&a.samples_per_second)
            .then((a.k + a.gamma).cmp(&(b.k + b.gamma)))
    });
    Ok(out)
}
