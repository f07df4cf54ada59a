//! Stage costs at another micro-batch size: Zhang et al., *MixPipe: Efficient
//! Bidirectional Pipeline Parallelism for Training Large-Scale Models* (DAC 2023), eq. (3):
//! times and activation bytes grow linearly with the micro-batch size B. Given profiles at
//! several sizes, a cost per sample is interpolated piecewise-linearly between them and
//! held constant (linear scaling) outside them; weights do not depend on B.
//!
//! The one place the commands, MixPipe's search and the synchronous sweep scale costs.

use super::sim::StageCosts;
use crate::model::Instance;

/// The per-sample value at micro-batch size `to`, from `points` of (micro-batch size,
/// per-sample value): interpolated between the two sizes around `to`, the nearest point's
/// value outside them. `points` must not be empty.
pub fn per_sample_at(points: &[(f64, f64)], to: f64) -> f64 {
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    match pts.iter().position(|p| p.0 >= to) {
        Some(0) => pts[0].1,
        None => pts[pts.len() - 1].1,
        Some(i) => {
            let (lo, hi) = (pts[i - 1], pts[i]);
            lo.1 + (to - lo.0) / (hi.0 - lo.0) * (hi.1 - lo.1)
        }
    }
}

/// The stage costs at micro-batch size `to` from `points` of (micro-batch size, costs at
/// that size) of one partition: every time and activation byte count per sample by
/// [`per_sample_at`], times `to`; the weights of the first point. `points` must not be
/// empty.
pub fn interpolated(points: &[(f64, StageCosts)], to: f64) -> StageCosts {
    let first = &points[0].1;
    let map = |pick: &dyn Fn(&StageCosts) -> &Vec<f64>| -> Vec<f64> {
        // The optional columns (the split backward's) only where every point has them.
        let stages = if points.iter().all(|(_, c)| pick(c).len() == first.stages()) {
            first.stages()
        } else {
            0
        };
        (0..stages)
            .map(|s| {
                let per: Vec<(f64, f64)> =
                    points.iter().map(|(b, c)| (*b, pick(c)[s] / b)).collect();
                per_sample_at(&per, to) * to
            })
            .collect()
    };
    StageCosts {
        forward_seconds: map(&|c| &c.forward_seconds),
        backward_seconds: map(&|c| &c.backward_seconds),
        transfer_seconds: map(&|c| &c.transfer_seconds),
        weight_bytes: first.weight_bytes.clone(),
        stash_bytes: map(&|c| &c.stash_bytes),
        input_bytes: map(&|c| &c.input_bytes),
        output_bytes: map(&|c| &c.output_bytes),
        weight_gradient_seconds: map(&|c| &c.weight_gradient_seconds),
        weight_gradient_stash_bytes: map(&|c| &c.weight_gradient_stash_bytes),
    }
}

/// The costs of one profile scaled by `factor` (the new micro-batch size over the
/// profile's): eq. (3) with a single profile point.
pub fn scaled_by(c: &StageCosts, factor: f64) -> StageCosts {
    let m = |v: &Vec<f64>| v.iter().map(|x| x * factor).collect();
    StageCosts {
        forward_seconds: m(&c.forward_seconds),
        backward_seconds: m(&c.backward_seconds),
        transfer_seconds: m(&c.transfer_seconds),
        weight_bytes: c.weight_bytes.clone(),
        stash_bytes: m(&c.stash_bytes),
        input_bytes: m(&c.input_bytes),
        output_bytes: m(&c.output_bytes),
        weight_gradient_seconds: m(&c.weight_gradient_seconds),
        weight_gradient_stash_bytes: m(&c.weight_gradient_stash_bytes),
    }
}

/// The micro-batch size an instance was profiled at: its `meta.batch` when positive, else 1.
pub fn micro_batch_size(instance: &Instance) -> f64 {
    instance
        .meta
        .get("batch")
        .and_then(|v| v.as_f64())
        .filter(|b| *b > 0.0)
        .unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_sample_interpolates_inside_and_holds_outside() {
        let pts = [(4.0, 3.0), (2.0, 5.0)];
        assert_eq!(per_sample_at(&pts, 1.0), 5.0);
        assert_eq!(per_sample_at(&pts, 3.0), 4.0);
        assert_eq!(per_sample_at(&pts, 8.0), 3.0);
    }
}
