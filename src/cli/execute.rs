//! `pipeopt execute`: a plan replayed with libtorch (`exec`, feature `torch`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
#[cfg(feature = "torch")]
use pipeopt::model::Plan;
#[cfg(feature = "torch")]
use pipeopt::units::{ShowBytes, ShowSeconds};

#[cfg(feature = "torch")]
use super::parse_dtype;

/// `--network`'s test network (`exec::mlp`), beside the built-in ones.
const MLP: (&str, &str) = (
    "mlp",
    "the small test network of the executor's tests (8 layers of width 64)",
);

#[derive(Args)]
pub struct ExecuteArgs {
    /// The plan file (it must carry a pattern).
    pub plan: PathBuf,
    /// The network to run (its layers and sizes must match the plan's instance): `mlp` or a
    /// built-in network at --image and --batch (plan for the instance `pipeopt profile` or
    /// `pipeopt instance` wrote for the same sizes).
    #[arg(long, default_value = "mlp", value_parser = super::network_parser(&[MLP]))]
    pub network: String,
    /// Image side in pixels of the network's input (not for mlp).
    #[arg(long, default_value_t = 224)]
    pub image: usize,
    /// Samples per batch (not for mlp).
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Element type: float32 or float16 (not for mlp).
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Periods to run (one new batch enters per period).
    #[arg(long, default_value_t = 30)]
    pub periods: usize,
    /// Print the whole report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[cfg(not(feature = "torch"))]
pub fn run(_args: ExecuteArgs) -> anyhow::Result<ExitCode> {
    super::without_torch("execute")
}

#[cfg(feature = "torch")]
pub fn run(args: ExecuteArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.plan)?;
    let device = pipeopt::exec::parse_device(&args.device)?;
    let dtype = parse_dtype(&args.dtype)?;
    let spec = pipeopt::exec::NetworkSpec {
        name: args.network.clone(),
        image: args.image,
        batch: args.batch,
        dtype,
    };
    let report = pipeopt::exec::execute_builtin(&plan, &spec, device, args.periods)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} on {}: {} batches, period predicted {} replayed {} (wall {} per period)",
            report.network,
            report.device,
            report.batches,
            ShowSeconds(report.predicted_period),
            ShowSeconds(report.replayed_period),
            ShowSeconds(report.wall_per_period)
        );
        for p in &report.processors {
            println!(
                "  processor {}: peak predicted {} measured {}",
                p.processor,
                ShowBytes(p.predicted_peak),
                ShowBytes(p.measured_peak)
            );
        }
        if let Some(g) = &report.gradients {
            println!(
                "  gradients: max relative error {:.2e} (tolerance {:.0e}) {}",
                g.max_relative_error,
                g.tolerance,
                if g.passed { "ok" } else { "FAILED" }
            );
        }
    }
    let ok = report.gradients.as_ref().is_none_or(|g| g.passed);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
