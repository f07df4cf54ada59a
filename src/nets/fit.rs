//! Fitting a device model to measured times (`pipeopt fit-device`).
//!
//! The analytic model (`analytic.rs`) predicts a chain layer's time in one direction as
//!
//! ```text
//! per_layer + sum over its ops of  max(flops / rate[class], bytes / mem_bw) + per_op
//! ```
//!
//! with `bytes / mem_bw + per_op` for ops of no roofline class ([`OpWork::seconds`]). A
//! direction has six values (`conv`, `conv1x1`, `matmul`, `mem_bw`, `per_op`, `per_layer`,
//! a [`Rates`]); forward and backward share none, so each is fitted on its own.
//!
//! # Objective
//! The worst factor between prediction and measurement over every measured layer,
//! `max_i |ln(predicted_i / measured_i)|` (minimax on the log ratio): a layer predicted
//! twice too slow and one twice too fast count the same, and the claim the model makes
//! ("within x of every layer") is exactly this number. It is continuous but not smooth (a
//! maximum of maxima), so a gradient method would stall at its kinks.
//!
//! # Solver
//! argmin's Nelder-Mead simplex: derivative-free, at home in six dimensions, indifferent
//! to kinks. It works on the logarithms of the six values (all positive, spanning twelve
//! orders of magnitude) inside a box (`--within`, default 10: each rate within a factor 10
//! of the base model's, each overhead between 1 ns and 10 times the base's), starting from
//! a base model (`--base`, default `h100`; overheads of zero start at 1 us). It is
//! warm-started through smoothed objectives (the power mean of the log ratios for p = 2, 8
//! and 32) before the minimax itself. Every stage restarts until a round gains nothing: a
//! round scans each value alone across its box (the roofline's maximum makes the objective
//! flat in a rate once its ops are all bandwidth-bound, a plateau a simplex cannot leave),
//! then runs fresh simplices of shrinking size (a simplex collapses at a kink). The
//! minimax optimum is rarely a single point, so a last stage breaks the tie: the smallest
//! root-mean-square log ratio, then the values nearest the base model, among the points
//! whose worst factor is within 0.1% of the minimax. A rate that no measured op of its
//! class reaches (no 1x1 convolution in the data, say) keeps its base value. The fit is
//! deterministic. Particle swarms and other global methods were not needed: on exact
//! synthetic data (tests/fit_device.rs) this recovers every value within 1%.
//!
//! # Data
//! Block-level `.report.json` files of `pipeopt profile` (float32): the network, image and
//! batch name the built-in network whose ops the analytic model reads; each report layer
//! must be that network's block of the same name, in order. An op-level report (per-op
//! times without the per-layer cost) is refused: its layers are not the model's chain
//! layers.

use std::path::{Path, PathBuf};

use argmin::core::{CostFunction, Executor, State};
use argmin::solver::neldermead::NelderMead;
use serde::{Deserialize, Serialize};

use super::analytic::{op_work, DType, OpWork, RateClass};
use super::device::{DeviceModel, Rates};
use super::network;
use crate::error::{read_json, Error, InputError};
use crate::units::Seconds;

/// One direction of one measured chain layer: its measured time and the work of its ops.
#[derive(Debug, Clone)]
struct Work {
    measured: Seconds,
    /// Bytes of its memory-class ops, summed.
    memory_bytes: f64,
    /// Ops that cost time (every op but the input and views).
    ops: usize,
    /// Its roofline ops (convolutions, matrix products).
    roofline: Vec<OpWork>,
}

impl Work {
    fn new(measured: Seconds, ops: impl IntoIterator<Item = OpWork>) -> Work {
        let mut w = Work {
            measured,
            memory_bytes: 0.0,
            ops: 0,
            roofline: Vec::new(),
        };
        for op in ops {
            w.ops += 1;
            if op.class == RateClass::Memory {
                w.memory_bytes += op.bytes;
            } else {
                w.roofline.push(op);
            }
        }
        w
    }

    /// The analytic time of the layer under `r` (the sum of [`OpWork::seconds`] plus
    /// `per_layer`, regrouped: memory ops summed first).
    fn predict(&self, r: &Rates) -> Seconds {
        let roofline: f64 = self
            .roofline
            .iter()
            .map(|op| op.seconds(r) - r.per_op)
            .sum();
        r.per_layer + self.memory_bytes / r.mem_bw + roofline + self.ops as f64 * r.per_op
    }
}

/// One measured chain layer, both directions.
#[derive(Debug, Clone)]
pub struct MeasuredLayer {
    pub network: String,
    pub name: String,
    fwd: Work,
    bwd: Work,
}

impl MeasuredLayer {
    pub fn measured(&self) -> (Seconds, Seconds) {
        (self.fwd.measured, self.bwd.measured)
    }

    /// The analytic forward and backward times of this layer under `device` (float32):
    /// what `pipeopt instance --device-model` would write for it.
    pub fn predict(&self, device: &DeviceModel) -> (Seconds, Seconds) {
        (self.fwd.predict(&device.fwd), self.bwd.predict(&device.bwd))
    }
}

/// A block-level profile report, as much of it as the fit reads.
#[derive(Deserialize)]
struct ReportFile {
    model: String,
    image: Option<usize>,
    batch: usize,
    dtype: String,
    #[serde(default)]
    granularity: Option<String>,
    layers: Vec<ReportLayer>,
}

#[derive(Deserialize)]
struct ReportLayer {
    name: String,
    fwd: f64,
    bwd: f64,
}

/// The measured layers of built-in network `model` (image side `image`, `batch` samples,
/// float32), given as `(block name, forward, backward)` in chain order; `src` names the
/// data in errors.
pub fn measured_layers(
    src: &str,
    model: &str,
    image: usize,
    batch: usize,
    times: &[(String, Seconds, Seconds)],
) -> Result<Vec<MeasuredLayer>, InputError> {
    let net = network(model, image).map_err(|e| InputError::new(src, "model", e.to_string()))?;
    if batch == 0 {
        return Err(InputError::new(src, "batch", "must be at least 1"));
    }
    if times.len() != net.blocks.len() {
        return Err(InputError::new(
            src,
            "layers",
            format!(
                "has {} layers; {model} has {} blocks (fit-device reads block-level reports)",
                times.len(),
                net.blocks.len()
            ),
        ));
    }
    let mut layers = Vec::with_capacity(times.len());
    for (k, (block, (name, fwd, bwd))) in net.blocks.iter().zip(times).enumerate() {
        if *name != block.name {
            return Err(InputError::new(
                src,
                format!("layers[{k}].name"),
                format!(
                    "is {name:?}; block {} of {model} is {:?}",
                    k + 1,
                    block.name
                ),
            ));
        }
        for (key, t) in [("fwd", fwd), ("bwd", bwd)] {
            if !(t.is_finite() && *t > 0.0) {
                return Err(InputError::new(
                    src,
                    format!("layers[{k}].{key}"),
                    format!("is {t}; a measured time must be positive and finite"),
                ));
            }
        }
        let work: Vec<(OpWork, OpWork)> = (0..block.ops.len())
            .filter_map(|i| op_work(block, i, batch, DType::F32, k == 0))
            .collect();
        layers.push(MeasuredLayer {
            network: model.to_string(),
            name: name.clone(),
            fwd: Work::new(*fwd, work.iter().map(|w| w.0)),
            bwd: Work::new(*bwd, work.iter().map(|w| w.1)),
        });
    }
    Ok(layers)
}

/// Reads a block-level `.report.json` of `pipeopt profile`.
pub fn load_report(path: &Path) -> Result<Vec<MeasuredLayer>, InputError> {
    let report: ReportFile = read_json(path)?;
    let src = path.display().to_string();
    if let Some(g) = report.granularity.as_deref().filter(|g| *g != "block") {
        return Err(InputError::new(
            &src,
            "granularity",
            format!("is {g:?}; fit-device reads block-level reports (per-layer costs included)"),
        ));
    }
    if report.dtype != "float32" {
        return Err(InputError::new(
            &src,
            "dtype",
            format!(
                "is {:?}; the fitted rates are float32 rates (float16 uses peak_f16)",
                report.dtype
            ),
        ));
    }
    let times: Vec<(String, Seconds, Seconds)> = report
        .layers
        .into_iter()
        .map(|l| (l.name, l.fwd, l.bwd))
        .collect();
    measured_layers(
        &src,
        &report.model,
        report.image.unwrap_or(224),
        report.batch,
        &times,
    )
}

/// The worst factor (at least 1) between predicted and measured times, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Worst {
    pub fwd: f64,
    pub bwd: f64,
}

/// `max |ln(predicted / measured)|`, as a factor, over `layers` under `device`.
pub fn worst_ratio<'a>(
    layers: impl IntoIterator<Item = &'a MeasuredLayer>,
    device: &DeviceModel,
) -> Worst {
    let mut w = Worst { fwd: 1.0, bwd: 1.0 };
    for l in layers {
        let (pf, pb) = l.predict(device);
        w.fwd = w.fwd.max(factor(pf, l.fwd.measured));
        w.bwd = w.bwd.max(factor(pb, l.bwd.measured));
    }
    w
}

fn factor(a: f64, b: f64) -> f64 {
    (a / b).max(b / a)
}

/// One layer of the fit report.
#[derive(Debug, Clone, Serialize)]
pub struct LayerFit {
    pub network: String,
    pub layer: String,
    pub measured_fwd: Seconds,
    pub predicted_fwd: Seconds,
    pub measured_bwd: Seconds,
    pub predicted_bwd: Seconds,
}

/// The fit of every network but one, judged on that one.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    pub network: String,
    /// Worst factor on the held-out network's layers.
    pub worst: Worst,
    /// Worst factor on the layers it was fitted to.
    pub in_sample: Worst,
}

/// A fitted device model with its report.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    pub model: DeviceModel,
    /// Measured layers fitted to.
    pub layers_fitted: usize,
    /// Worst factor over every measured layer, fitted model.
    pub in_sample: Worst,
    /// The same for the base model the fit started from.
    pub base_in_sample: Worst,
    /// Name of the base model.
    pub base: String,
    /// The box: rates within this factor of the base's ([`FitOptions::within`]).
    pub within: f64,
    /// Leave one network out (with at least two networks): fitted to the others, judged on it.
    pub leave_one_network_out: Vec<HeldOut>,
    pub per_layer: Vec<LayerFit>,
}

/// What to fit and how to name the result.
#[derive(Debug, Clone)]
pub struct FitOptions {
    /// The starting point; its `peak_f16` and any rate the data cannot see are kept.
    pub base: DeviceModel,
    pub name: String,
    pub source: String,
    /// Also fit with each network left out.
    pub leave_one_out: bool,
    /// Each fitted rate stays within this factor of the base's (at least 1): measured
    /// times that a rate barely touches would otherwise send it to absurd values (a 1x1
    /// convolution rate of 1e23 FLOP/s fits as well as any once those ops are
    /// bandwidth-bound), and a device model is read beyond its data.
    pub within: f64,
}

/// Fits a device model to `layers` (module docs: objective and solver).
pub fn fit(layers: &[MeasuredLayer], options: &FitOptions) -> Result<Fit, Error> {
    if layers.is_empty() {
        return Err(InputError::new("fit-device", "", "no measured layers").into());
    }
    let model = fit_model(layers, options)?;
    let mut networks: Vec<&str> = layers.iter().map(|l| l.network.as_str()).collect();
    networks.sort_unstable();
    networks.dedup();
    let mut held_out = Vec::new();
    if options.leave_one_out && networks.len() >= 2 {
        for net in &networks {
            let train: Vec<MeasuredLayer> = layers
                .iter()
                .filter(|l| l.network != *net)
                .cloned()
                .collect();
            let m = fit_model(&train, options)?;
            held_out.push(HeldOut {
                network: net.to_string(),
                worst: worst_ratio(layers.iter().filter(|l| l.network == *net), &m),
                in_sample: worst_ratio(&train, &m),
            });
        }
    }
    let per_layer = layers
        .iter()
        .map(|l| {
            let (pf, pb) = l.predict(&model);
            LayerFit {
                network: l.network.clone(),
                layer: l.name.clone(),
                measured_fwd: l.fwd.measured,
                predicted_fwd: pf,
                measured_bwd: l.bwd.measured,
                predicted_bwd: pb,
            }
        })
        .collect();
    Ok(Fit {
        in_sample: worst_ratio(layers, &model),
        base_in_sample: worst_ratio(layers, &options.base),
        base: options.base.name.clone(),
        within: options.within,
        layers_fitted: layers.len(),
        leave_one_network_out: held_out,
        per_layer,
        model,
    })
}

fn fit_model(layers: &[MeasuredLayer], options: &FitOptions) -> Result<DeviceModel, Error> {
    let fwd: Vec<&Work> = layers.iter().map(|l| &l.fwd).collect();
    let bwd: Vec<&Work> = layers.iter().map(|l| &l.bwd).collect();
    let model = DeviceModel {
        name: options.name.clone(),
        source: options.source.clone(),
        peak_f16: options.base.peak_f16,
        fwd: fit_direction(&fwd, &options.base.fwd, options.within)?,
        bwd: fit_direction(&bwd, &options.base.bwd, options.within)?,
    };
    Ok(model)
}

/// The six values of a [`Rates`], in order, and back.
fn to_array(r: &Rates) -> [f64; 6] {
    [r.conv, r.conv1x1, r.matmul, r.mem_bw, r.per_op, r.per_layer]
}

fn from_array(a: [f64; 6]) -> Rates {
    Rates {
        conv: a[0],
        conv1x1: a[1],
        matmul: a[2],
        mem_bw: a[3],
        per_op: a[4],
        per_layer: a[5],
    }
}

/// Overheads of zero start here (seconds), so that their logarithm is finite.
const OVERHEAD_START: f64 = 1e-6;

/// What [`LogRatio`] minimizes, over the layers' `|ln(predicted / measured)|`.
#[derive(Debug, Clone, Copy)]
enum Objective {
    /// Their power mean (`p` = 2: root mean square); smooth enough to walk on.
    PowerMean(f64),
    /// Their maximum: the worst factor, what the fit is judged by.
    Max,
    /// Among the points whose maximum is at most `worst`, the smallest root mean square,
    /// then the nearest to the base model (a term of 1e-4 times the mean squared log
    /// distance, which cannot pull a consistent fit off its zero): the minimax optimum is
    /// rarely one point (a rate whose ops are all bandwidth-bound can take any value on a
    /// plateau), and the tie-break picks one that fits the typical layer well and moves no
    /// value the data do not ask to move.
    TieBreak { worst: f64 },
}

/// The objective over the free values' logarithms.
struct LogRatio<'a> {
    layers: &'a [&'a Work],
    /// Logarithms of the six values; the free ones are overwritten by the parameter.
    fixed: [f64; 6],
    free: Vec<usize>,
    /// The box of the free values' logarithms (`FitOptions::within`).
    lo: Vec<f64>,
    hi: Vec<f64>,
    objective: Objective,
}

impl LogRatio<'_> {
    /// The six values at parameter `x`, each free one clamped into its box.
    fn rates(&self, x: &[f64]) -> Rates {
        let mut a = self.fixed;
        for (k, (&i, &v)) in self.free.iter().zip(x).enumerate() {
            a[i] = v.clamp(self.lo[k], self.hi[k]);
        }
        from_array(a.map(f64::exp))
    }

    /// How far `x` lies outside the box (sum over coordinates, in log units): added to
    /// the cost so that the simplex walks back into the box instead of along its wall.
    fn outside(&self, x: &[f64]) -> f64 {
        x.iter()
            .enumerate()
            .map(|(k, &v)| (self.lo[k] - v).max(0.0) + (v - self.hi[k]).max(0.0))
            .sum()
    }
}

impl CostFunction for LogRatio<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        let r = self.rates(x);
        let logs = self
            .layers
            .iter()
            .map(|w| (w.predict(&r) / w.measured).ln().abs());
        let n = self.layers.len() as f64;
        let power_mean = |p: f64| (logs.clone().map(|v| v.powf(p)).sum::<f64>() / n).powf(1.0 / p);
        let cost = match self.objective {
            Objective::Max => logs.clone().fold(0.0, f64::max),
            Objective::PowerMean(p) => power_mean(p),
            Objective::TieBreak { worst } => {
                let excess = (logs.clone().fold(0.0, f64::max) - worst).max(0.0);
                let distance = self
                    .free
                    .iter()
                    .zip(x)
                    .map(|(&i, &v)| (v - self.fixed[i]).powi(2))
                    .sum::<f64>()
                    / x.len() as f64;
                power_mean(2.0) + 1e3 * excess + 1e-4 * distance
            }
        };
        let cost = cost + self.outside(x);
        // A point where the model overflows is as bad as can be.
        Ok(if cost.is_finite() { cost } else { f64::MAX })
    }
}

/// Minimizes `problem` by Nelder-Mead from `x0` with a simplex of side `step`; the best
/// point and its cost.
fn nelder_mead(problem: &LogRatio, x0: &[f64], step: f64) -> Result<(Vec<f64>, f64), Error> {
    let mut simplex = vec![x0.to_vec()];
    for i in 0..x0.len() {
        let mut v = x0.to_vec();
        v[i] += step;
        simplex.push(v);
    }
    let solver = NelderMead::new(simplex)
        .with_sd_tolerance(1e-12)
        .map_err(Error::internal)?;
    let problem = LogRatio {
        layers: problem.layers,
        fixed: problem.fixed,
        free: problem.free.clone(),
        lo: problem.lo.clone(),
        hi: problem.hi.clone(),
        objective: problem.objective,
    };
    let result = Executor::new(problem, solver)
        .configure(|s| s.max_iters(4000))
        .run()
        .map_err(Error::internal)?;
    let state = result.state();
    let best = state
        .get_best_param()
        .cloned()
        .ok_or_else(|| Error::internal("Nelder-Mead returned no point"))?;
    Ok((best, state.get_best_cost()))
}

/// Nelder-Mead from `x`, restarted from its best point until a whole round improves the
/// cost by less than 1e-12. Each round first scans every coordinate alone across its box
/// (64 points, [`scan`]), then runs fresh simplices of sides e^1 down to e^0.01. The
/// roofline's `max(flops / rate, bytes / mem_bw)` makes the objective flat in a rate once
/// its ops are all bandwidth-bound: a simplex that wanders onto such a plateau cannot feel
/// its way back, and a simplex collapses at a kink before the minimum; the scan crosses
/// plateaus and the fresh simplex steps over kinks.
fn restarted(problem: &LogRatio, mut x: Vec<f64>) -> Result<Vec<f64>, Error> {
    let mut cost = problem.cost(&x).map_err(Error::internal)?;
    for _round in 0..50 {
        let before = cost;
        (x, cost) = scan(problem, x, cost)?;
        for step in [1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01] {
            let (x_new, c) = nelder_mead(problem, &x, step)?;
            if c < cost {
                x = x_new;
                cost = c;
            }
        }
        if before - cost < 1e-12 {
            break;
        }
    }
    Ok(x)
}

/// Coordinate by coordinate, the best of 64 evenly spaced values (in log) across the box,
/// the others held; the point and its cost.
fn scan(problem: &LogRatio, mut x: Vec<f64>, mut cost: f64) -> Result<(Vec<f64>, f64), Error> {
    const POINTS: usize = 64;
    for k in 0..x.len() {
        let (lo, hi) = (problem.lo[k], problem.hi[k]);
        for j in 0..POINTS {
            let mut y = x.clone();
            y[k] = lo + (hi - lo) * j as f64 / (POINTS - 1) as f64;
            let c = problem.cost(&y).map_err(Error::internal)?;
            if c < cost {
                x = y;
                cost = c;
            }
        }
    }
    Ok((x, cost))
}

/// How much worse than the minimax (in `|ln ratio|`, so a factor e^0.001, 0.1%) the
/// tie-break may make the worst layer.
const TIE_SLACK: f64 = 1e-3;

/// The smallest overhead the fit gives (seconds): a nanosecond, zero for every purpose.
const OVERHEAD_FLOOR: f64 = 1e-9;

/// Fits one direction's six values to `layers`, starting from `base`, each rate within a
/// factor `within` of its base value and each overhead between [`OVERHEAD_FLOOR`] and
/// `within` times its base value (or start).
fn fit_direction(layers: &[&Work], base: &Rates, within: f64) -> Result<Rates, Error> {
    let start = to_array(base);
    let mut fixed = [0.0; 6];
    for (i, v) in start.iter().enumerate() {
        fixed[i] = if i >= 4 { v.max(OVERHEAD_START) } else { *v }.ln();
    }
    // A rate is free when some op of its class does arithmetic; the bandwidth and the
    // overheads always are.
    let seen = |class: RateClass| {
        layers.iter().any(|w| {
            w.roofline
                .iter()
                .any(|op| op.class == class && op.flops > 0.0)
        })
    };
    let free: Vec<usize> = [
        seen(RateClass::Conv),
        seen(RateClass::Conv1x1),
        seen(RateClass::Matmul),
        true,
        true,
        true,
    ]
    .iter()
    .enumerate()
    .filter(|(_, &f)| f)
    .map(|(i, _)| i)
    .collect();
    let mut x: Vec<f64> = free.iter().map(|&i| fixed[i]).collect();
    let w = within.ln();
    let lo = free
        .iter()
        .map(|&i| {
            if i >= 4 {
                OVERHEAD_FLOOR.ln()
            } else {
                fixed[i] - w
            }
        })
        .collect();
    let hi = free.iter().map(|&i| fixed[i] + w).collect();
    let mut problem = LogRatio {
        layers,
        fixed,
        free,
        lo,
        hi,
        objective: Objective::PowerMean(2.0),
    };
    for objective in [
        Objective::PowerMean(2.0),
        Objective::PowerMean(8.0),
        Objective::PowerMean(32.0),
        Objective::Max,
    ] {
        problem.objective = objective;
        x = restarted(&problem, x)?;
    }
    let worst = problem.cost(&x).map_err(Error::internal)?;
    problem.objective = Objective::TieBreak {
        worst: worst + TIE_SLACK,
    };
    x = restarted(&problem, x)?;
    Ok(problem.rates(&x))
}

/// The TOML text of a fitted model, with a header saying what it was fitted to and how well.
pub fn model_toml(fit: &Fit, reports: &[PathBuf]) -> Result<String, Error> {
    let body = toml::to_string(&fit.model).map_err(Error::internal)?;
    let mut head = String::from(
        "# Fitted by `pipeopt fit-device` (minimax on the log ratio, argmin's Nelder-Mead) to:\n",
    );
    for r in reports {
        head.push_str(&format!("#   {}\n", r.display()));
    }
    head.push_str(&format!(
        "# Base {}; every rate kept within a factor {} of its value there.\n",
        fit.base, fit.within
    ));
    head.push_str(&format!(
        "# In sample: every layer within a factor {:.3} (forward) and {:.3} (backward).\n",
        fit.in_sample.fwd, fit.in_sample.bwd
    ));
    for h in &fit.leave_one_network_out {
        head.push_str(&format!(
            "# Fitted without {}: within {:.3} / {:.3} on it.\n",
            h.network, h.worst.fwd, h.worst.bwd
        ));
    }
    head.push_str("# Format: devices/README.md.\n");
    Ok(head + &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::analytic::block_cost;

    #[test]
    fn the_fit_predicts_what_the_analytic_model_computes() {
        let device = DeviceModel::h100();
        for model in ["resnet50", "inception_v3", "densenet121", "vgg16"] {
            let net = network(model, 224).unwrap();
            let times: Vec<(String, f64, f64)> = net
                .blocks
                .iter()
                .map(|b| (b.name.clone(), 1.0, 1.0))
                .collect();
            let layers = measured_layers("test", model, 224, 4, &times).unwrap();
            for (k, (b, l)) in net.blocks.iter().zip(&layers).enumerate() {
                let c = block_cost(b, 4, DType::F32, &device, 4, k == 0);
                let (f, bw) = l.predict(&device);
                assert!((f - c.fwd).abs() <= 1e-12 * c.fwd, "{model} {}", b.name);
                assert!((bw - c.bwd).abs() <= 1e-12 * c.bwd, "{model} {}", b.name);
            }
        }
    }
}
