//! A libtorch executor that runs a plan's periodic pattern with real tensors on one
//! device standing in for the plan's P processors, and checks the model's predictions
//! (durations, period, memory) and the gradients (feature `torch`).
//!
//! - [`Network`]: a chain of layers, each a function of its parameters and its input, so that
//!   the executor can hold several weight versions of a layer (PipeDream-2BW) and run any of
//!   them. This departs from the usual tch design, an `nn::ModuleT` in a VarStore: a
//!   VarStore holds one version, and copying another version into it between a batch's F
//!   and B would corrupt the tensors autograd saved at F. Real networks build their layers
//!   as such functions (`Tensor::linear`, `Tensor::conv2d`, ...).
//! - [`execute`]: replays the pattern (see [`executor`]) and returns an [`ExecReport`].
//! - [`replayed_period`]: the smallest period at which the pattern's order and shifts stay
//!   valid with other durations (see its doc).
//! - [`mlp`]: the built-in small test network (`--network mlp`), with [`instance_for`] to
//!   describe a network as an [`Instance`] whose sizes are exact; [`torchnet`]: the networks
//!   of `nets/` (`--network resnet50 --image 1000 --batch 8`); [`profile`]: the profiler;
//!   [`alloc`]: the C++ shim for allocator statistics and backward from a tensor.
//!
//! Weight versions (docs/model.md section 6 says "two weight versions plus one gradient
//! accumulator", PipeDream-2BW, without fixing when versions change; this is our rule):
//! batches are grouped in windows of `m` consecutive batches (window `j` = batches
//! `j m .. (j+1) m - 1`); every batch of window `j` runs its F and its B with version `W_j`;
//! `W_0 = W_1 =` the initial weights and `W_{j+1} = W_j - lr G_{j-1}` for `j >= 1`, where
//! `G_{j-1}` is the sum of the weight gradients of window `j-1` (computed with `W_{j-1}`): the
//! one-step-delayed update of PipeDream-2BW (paper section 3.1). Every stage applies the rule to
//! its own layers: when the last B of window `j-1` finishes on a stage, it computes `W_{j+1}`
//! and drops `W_{j-1}` (no batch uses it any more) and the accumulator is reset, so a stage
//! holds two versions and one accumulator (3 W) at all times. If a pattern starts an F of
//! window `j+1` on a stage before window `j-1` has finished there, `W_{j+1}` does not exist
//! yet: the run stops with [`ExecError::Versions`] (choose a larger `m`). The default `m` is
//! `max_s (h_{B_s} - h_{F_s}) + 1`, which always suffices (see [`default_window`]).

pub mod alloc;
mod executor;
mod period;
pub mod profile;
#[cfg(test)]
mod tests;
pub mod torchnet;

pub use executor::execute;
pub use period::replayed_period;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tch::{Device, Kind, Tensor};

use crate::model::{Instance, Layer, OpKind, Pattern, Plan};
use crate::units::{Bytes, Seconds};

/// A layer's forward pass as a function of its parameters and its input.
pub type LayerFn = Box<dyn Fn(&[Tensor], &Tensor) -> Tensor>;
/// The loss of a batch from the last layer's output and the batch's target (a scalar).
pub type LossFn = Box<dyn Fn(&Tensor, &Tensor) -> Tensor>;

/// One layer of a chain: a name, its initial parameters and its forward function.
pub struct ChainLayer {
    pub name: String,
    pub params: Vec<Tensor>,
    pub forward: LayerFn,
}

/// A network as a chain of layers, with its loss.
pub struct Network {
    pub name: String,
    pub layers: Vec<ChainLayer>,
    pub loss: LossFn,
}

/// One batch of training data.
pub struct Batch {
    pub input: Tensor,
    pub target: Tensor,
}

impl Network {
    /// Runs the whole chain forward with the given parameters (one list per layer).
    pub fn forward(&self, params: &[Vec<Tensor>], x: &Tensor) -> Tensor {
        let mut y = x.shallow_clone();
        for (layer, p) in self.layers.iter().zip(params) {
            y = (layer.forward)(p, &y);
        }
        y
    }

    /// Copies of the initial parameters, one list per layer, moved to `device`.
    pub fn initial_params(&self, device: Device) -> Vec<Vec<Tensor>> {
        self.layers
            .iter()
            .map(|l| {
                l.params
                    .iter()
                    .map(|p| p.to_device(device).copy())
                    .collect()
            })
            .collect()
    }
}

/// Waits for `device` to finish its queued work (a no-op on the CPU).
pub(crate) fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// Median of timings (sorts them); NaN when there are none.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Bytes of a tensor's elements.
pub fn tensor_bytes(t: &Tensor) -> Bytes {
    (t.numel() * t.kind().elt_size_in_bytes()) as Bytes
}

/// The built-in test network `mlp`: `layers` layers of `Linear(width, width)` followed by
/// `tanh` (a smooth non-linearity, so a wrong weight version or batch changes every
/// gradient), mean-squared-error loss. Deterministic: parameters drawn after
/// `tch::manual_seed(seed)`.
pub fn mlp(layers: usize, width: i64, seed: i64) -> Network {
    tch::manual_seed(seed);
    let scale = 1.0 / (width as f64).sqrt();
    let layers = (1..=layers)
        .map(|i| {
            let w = Tensor::randn([width, width], (Kind::Float, Device::Cpu)) * scale;
            let b = Tensor::randn([width], (Kind::Float, Device::Cpu)) * 0.1;
            ChainLayer {
                name: format!("linear{i}"),
                params: vec![w, b],
                forward: Box::new(|p: &[Tensor], x: &Tensor| x.linear(&p[0], Some(&p[1])).tanh()),
            }
        })
        .collect();
    Network {
        name: "mlp".into(),
        layers,
        loss: Box::new(|y: &Tensor, t: &Tensor| y.mse_loss(t, tch::Reduction::Mean)),
    }
}

/// Deterministic batches for [`mlp`]: `count` batches of `rows x width`, batch `b` drawn
/// after `tch::manual_seed(seed + b)`.
pub fn mlp_batches(count: usize, rows: i64, width: i64, seed: i64, device: Device) -> Vec<Batch> {
    (0..count)
        .map(|b| {
            tch::manual_seed(seed + b as i64);
            Batch {
                input: Tensor::randn([rows, width], (Kind::Float, Device::Cpu)).to_device(device),
                target: Tensor::randn([rows, width], (Kind::Float, Device::Cpu)).to_device(device),
            }
        })
        .collect()
}

/// A network the CLI's `execute --network` names: the test network `mlp` (8 layers of width
/// 64, batches of 32 rows; `image`, `batch` and `dtype` are ignored) or one of
/// [`crate::nets::NETWORKS`] at an image size and batch (built by [`torchnet`], dropout off so
/// that the pipelined and the sequential runs compute the same thing).
#[derive(Debug, Clone)]
pub struct NetworkSpec {
    pub name: String,
    pub image: usize,
    pub batch: usize,
    pub dtype: crate::nets::DType,
}

impl NetworkSpec {
    /// `mlp`, the small test network.
    pub fn mlp() -> Self {
        NetworkSpec {
            name: "mlp".into(),
            image: 0,
            batch: 32,
            dtype: crate::nets::DType::F32,
        }
    }
}

/// The network of `spec` with `batches` batches of data on `device`, and the sizes its
/// instance must have (weights and outputs exact).
pub fn builtin(
    spec: &NetworkSpec,
    batches: usize,
    device: Device,
) -> Result<(Network, Vec<Batch>, Instance), ExecError> {
    if spec.name == "mlp" {
        let net = mlp(8, 64, 7);
        let data = mlp_batches(batches.max(1), 32, 64, 1000, device);
        let sizes = instance_for(&net, &data[0].input.to_device(Device::Cpu), 1e-9);
        return Ok((net, data, sizes));
    }
    let desc = crate::nets::network(&spec.name, spec.image)
        .map_err(|e| ExecError::Network(format!("{e} (or mlp, the small test network)")))?;
    let sizes = crate::nets::analytic_instance(
        &desc,
        spec.batch,
        spec.dtype,
        &crate::nets::DeviceModel::h100(),
    )
    .map_err(|e| ExecError::Network(e.to_string()))?;
    let net = torchnet::build(
        &desc,
        torchnet::BuildOptions {
            dtype: spec.dtype,
            device: Device::Cpu,
            seed: 7,
            dropout: false,
        },
    );
    let data = torchnet::batches(&desc, spec.batch, batches.max(1), 1000, spec.dtype, device);
    Ok((net, data, sizes))
}

/// The instance of the built-in network `mlp` (what to plan for before `execute --network
/// mlp`): exact sizes for its batches, rough times (see [`instance_for`]). For the networks
/// of `nets`, plan for `pipeopt profile` or `pipeopt instance` output.
pub fn builtin_instance(name: &str) -> Option<Instance> {
    if name != "mlp" {
        return None;
    }
    let (net, data, _) = builtin(&NetworkSpec::mlp(), 1, Device::Cpu).ok()?;
    let mut i = instance_for(&net, &data[0].input, 1e-9);
    i.meta.insert(
        "source".into(),
        format!("pipeopt built-in network {name} (sizes exact, times rough)").into(),
    );
    Some(i)
}

/// An instance describing `network` on `sample`: sizes exact (W = parameter bytes,
/// a(l) = output bytes, stash = a(l-1), the model's default), times rough and deterministic
/// (`seconds_per_param_row` x parameters x batch rows for F, twice that for B), so that
/// plans for it are reproducible.
pub fn instance_for(network: &Network, sample: &Tensor, seconds_per_param_row: f64) -> Instance {
    let rows = sample.size().first().copied().unwrap_or(1).max(1) as f64;
    let mut x = sample.shallow_clone();
    let input = tensor_bytes(&x);
    let layers = tch::no_grad(|| {
        network
            .layers
            .iter()
            .map(|l| {
                x = (l.forward)(&l.params, &x);
                let params: f64 = l.params.iter().map(|p| p.numel() as f64).sum();
                let fwd = (seconds_per_param_row * params * rows).max(1e-9);
                Layer::new(
                    l.name.clone(),
                    fwd,
                    2.0 * fwd,
                    l.params.iter().map(tensor_bytes).sum(),
                    tensor_bytes(&x),
                )
            })
            .collect()
    });
    Instance {
        name: network.name.clone(),
        input,
        layers,
        stash_shared: Vec::new(),
        meta: Default::default(),
    }
}

/// Deliberate errors, to show that the gradient check catches a schedule that computes the
/// wrong thing. Never set outside tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// B of this stage uses the newest weight version instead of the one its F used.
    NewestVersionInBackward { stage: usize },
    /// F of the first stage feeds every odd batch the previous batch's input (a swapped
    /// batch): its loss and gradients are those of the wrong data.
    WrongBatchInput,
}

/// How to run a plan.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Batches to train (N); the run executes every period until all their operations ran.
    pub batches: usize,
    /// Learning rate of the SGD update.
    pub lr: f64,
    /// Window `m` of the weight-version rule; `None`: [`default_window`].
    pub window: Option<usize>,
    pub device: Device,
    /// Run the sequential reference and compare gradients.
    pub check_gradients: bool,
    pub fault: Option<Fault>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            batches: 30,
            lr: 0.05,
            window: None,
            device: Device::Cpu,
            check_gradients: true,
            fault: None,
        }
    }
}

/// The smallest window that the pattern never outruns: `max_s (h_{B_s} - h_{F_s}) + 1`.
/// Why it suffices: the last batch of window `j-1`, `j m - 1`, finishes B_s in period
/// `j m - 1 + h_B`, and the first batch of window `j+1` starts F_s in period
/// `(j+1) m + h_F`, which is later when `m >= h_B - h_F`.
pub fn default_window(pattern: &Pattern) -> usize {
    let mut m = 1i64;
    for f in pattern.ops.iter().filter(|o| o.kind == OpKind::F) {
        if let Some(b) = pattern
            .ops
            .iter()
            .find(|o| o.kind == OpKind::B && o.stage == f.stage)
        {
            m = m.max(b.shift - f.shift + 1);
        }
    }
    m as usize
}

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("plan: {0}")]
    Plan(String),
    #[error("network: {0}")]
    Network(String),
    #[error("schedule: {0}")]
    Schedule(String),
    #[error("weight versions: {0}")]
    Versions(String),
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

/// Predicted against measured duration of one operation (kind and stage).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpTiming {
    pub kind: OpKind,
    pub stage: usize,
    /// Processor (F, B) or `None` for a transfer.
    pub processor: Option<usize>,
    pub predicted: Seconds,
    /// Median of the measured wall times over all batches.
    pub measured_median: Seconds,
    pub samples: usize,
}

/// Predicted against measured memory of one processor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessorMemory {
    pub processor: usize,
    /// The judge's peak (weights, buffers, activations).
    pub predicted_peak: Bytes,
    /// Measured peak: max over operation boundaries of (stashed activations + weight
    /// versions and accumulators held), plus the model's communication buffers (copies stand
    /// for transfers, so buffers are not measured). Stashed activations: the live batches of
    /// each stage (counted during the replay) times its stash per batch (on CUDA measured
    /// with the allocator before the run, on the CPU the inputs of its layers).
    pub measured_peak: Bytes,
    /// Measured stashed activation bytes at that peak.
    pub measured_stash_peak: Bytes,
    /// Measured weight bytes (versions + accumulator) at that peak.
    pub measured_weights: Bytes,
    /// The model's buffer bytes added to `measured_peak`.
    pub model_buffers: Bytes,
    /// Largest number of live batches (F started, B not finished) per stage on it.
    pub max_live: BTreeMap<usize, usize>,
    /// Always `None`: one GPU stands in for every processor, so the allocator has no
    /// per-processor figures. On CUDA the stash per batch of each stage is the allocator's
    /// ([`ExecReport::stash_per_batch`]) and the whole device's peak is
    /// [`ExecReport::device_peak`].
    pub cuda_allocated_peak: Option<Bytes>,
}

/// Result of the gradient check.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradientCheck {
    /// max over batches and layers of max|g_pipe - g_seq| / max|g_seq|.
    pub max_relative_error: f64,
    /// max over batches of |loss_pipe - loss_seq| / |loss_seq|.
    pub max_loss_relative_error: f64,
    pub tolerance: f64,
    pub passed: bool,
    /// Where the largest error is (batch, layer 1-based).
    pub worst: Option<(usize, usize)>,
}

/// What `pipeopt execute` prints with `--json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecReport {
    pub network: String,
    pub device: String,
    pub batches: usize,
    pub periods_run: usize,
    pub window: usize,
    pub predicted_period: Seconds,
    /// [`replayed_period`] with measured F/B durations and the model's transfer durations.
    pub replayed_period: Seconds,
    /// [`replayed_period`] with the model's own durations (at most `predicted_period`).
    pub replayed_period_model: Seconds,
    /// Wall time of the whole replay divided by the periods run.
    pub wall_per_period: Seconds,
    pub ops: Vec<OpTiming>,
    pub processors: Vec<ProcessorMemory>,
    /// Per stage, the bytes it keeps from F to B for one batch, measured with the CUDA
    /// allocator before the run (`None` on the CPU, where the inputs of the stage's layers
    /// are counted, the model's default).
    pub stash_per_batch: Option<Vec<Bytes>>,
    /// Device memory (allocator `requested` bytes) held at the run's peak beyond what was
    /// held before it: all virtual processors together, plus the executor's own holdings
    /// (a batch's output until its B, gradients, copies). CUDA only.
    pub device_peak: Option<Bytes>,
    pub gradients: Option<GradientCheck>,
    /// Loss of every batch in the pipelined run.
    pub losses: Vec<f64>,
}

/// Parses `cpu`, `cuda`, `cuda:N`.
pub fn parse_device(s: &str) -> Result<Device, crate::InputError> {
    match s {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(Device::Cuda)
            .ok_or_else(|| {
                crate::InputError::new("--device", "", format!("is {s:?}; use cpu, cuda, cuda:N"))
            }),
    }
}

/// What the CLI's `execute` does: loads nothing itself; runs `plan` with the network of
/// `spec` for `batches` batches on `device`.
pub fn execute_builtin(
    plan: &Plan,
    spec: &NetworkSpec,
    device: Device,
    batches: usize,
) -> Result<ExecReport, ExecError> {
    if batches == 0 {
        return Err(ExecError::Network("--periods must be at least 1".into()));
    }
    if device.is_cuda() && !tch::Cuda::is_available() {
        return Err(ExecError::Network(
            "no CUDA device visible to libtorch (GPU builds need PIPEOPT_LINK_CUDA=1)".into(),
        ));
    }
    let (net, data, sizes) = builtin(spec, batches, device)?;
    net_instance_check(plan, &net.name, &sizes)?;
    let options = ExecOptions {
        batches,
        device,
        ..Default::default()
    };
    execute(plan, &net, &data, &options)
}

/// Checks that the plan's instance has the network's layer count and exact sizes (weights
/// and outputs), so that the memory comparison means something.
fn net_instance_check(plan: &Plan, net: &str, mine: &Instance) -> Result<(), ExecError> {
    if mine.len() != plan.instance.len() {
        return Err(ExecError::Network(format!(
            "network {} has {} layers, the plan's instance {} has {}",
            net,
            mine.len(),
            plan.instance.name,
            plan.instance.len()
        )));
    }
    for (l, (a, b)) in mine.layers.iter().zip(&plan.instance.layers).enumerate() {
        if a.weights != b.weights || a.out != b.out {
            return Err(ExecError::Network(format!(
                "instance.layers[{l}]: the plan says weights {} out {}, network {} has {} and {}",
                b.weights, b.out, net, a.weights, a.out
            )));
        }
    }
    Ok(())
}
