//! `pipeopt profile`: a built-in network measured with libtorch (`exec::profile`, feature
//! `torch`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::NetworkArgs;
#[cfg(feature = "torch")]
use pipeopt::units::{ShowBytes, ShowSeconds};
#[cfg(feature = "torch")]
use pipeopt::InputError;

#[cfg(feature = "torch")]
use super::{parse_device_model, parse_dtype};

#[derive(Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub network: NetworkArgs,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cuda")]
    pub device: String,
    /// Element type: float32 or float16.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// Untimed repetitions before the timed ones.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Timed repetitions (the median is kept).
    #[arg(long, default_value_t = 10)]
    pub reps: usize,
    /// Calls per timed repetition, back to back between two device synchronizations (the
    /// repetition's time is their mean). 1 times each call alone; more hides the launch and
    /// synchronization latency that a lone small op pays and a whole network does not
    /// (worth it at --granularity op).
    #[arg(long, default_value_t = 1)]
    pub back_to_back: usize,
    /// One chain layer per block (block: sizes and stashes measured too), or the op-level
    /// chain of `pipeopt instance --granularity op` with every op timed (op: sizes from the
    /// exact per-op rules).
    #[arg(long, default_value = "block", value_parser = ["block", "op"])]
    pub granularity: String,
    /// Seed of the weights and the batch.
    #[arg(long, default_value_t = 0)]
    pub seed: i64,
    /// The device's name, recorded in meta (e.g. "$(nvidia-smi --query-gpu=name
    /// --format=csv,noheader)").
    #[arg(long)]
    pub device_name: Option<String>,
    /// Device model of the analytic comparison: h100, h100-peak, a100, v100, or the path of
    /// a model file (devices/README.md).
    #[arg(long, default_value = "h100")]
    pub device_model: String,
    /// Where to write the measured instance (atomically).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Where to write the whole profile report (JSON: per layer measured and analytic,
    /// whole network against the sums).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(not(feature = "torch"))]
pub fn run(_args: ProfileArgs) -> anyhow::Result<ExitCode> {
    super::without_torch("profile")
}

#[cfg(feature = "torch")]
pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::exec::profile::{profile, profile_ops, ProfileOptions};
    let dtype = parse_dtype(&args.dtype)?;
    let device_model = parse_device_model(&args.device_model)?;
    if args.network.batch == 0 || args.reps == 0 {
        return Err(InputError::new("--batch/--reps", "", "must be at least 1").into());
    }
    let desc = pipeopt::nets::network(&args.network.model, args.network.image)
        .map_err(|e| InputError::new("--model", "", e.to_string()))?;
    let options = ProfileOptions {
        batch: args.network.batch,
        dtype,
        device: pipeopt::exec::parse_device(&args.device)?,
        warmup: args.warmup,
        reps: args.reps,
        back_to_back: args.back_to_back,
        seed: args.seed,
        device_name: args.device_name.clone(),
        device_model,
    };
    let (inst, report) = match pipeopt::nets::Granularity::parse(&args.granularity) {
        Some(pipeopt::nets::Granularity::Op) => profile_ops(&desc, &options)?,
        _ => profile(&desc, &options)?,
    };
    inst.check()?;
    let text = serde_json::to_string_pretty(&inst)? + "\n";
    pipeopt::error::write_atomic(&args.out, text.as_bytes())?;
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        pipeopt::error::write_atomic(path, text.as_bytes())?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:>11} {:>11} {:>11} {:>11} {:>7} {:>11} {:>11}",
        report.granularity, "fwd", "bwd", "an. fwd", "an. bwd", "an/meas", "stash", "an. stash"
    );
    for m in &report.layers {
        println!(
            "{:<24} {:>11} {:>11} {:>11} {:>11} {:>7.2} {:>11} {:>11}",
            m.name,
            ShowSeconds(m.fwd).to_string(),
            ShowSeconds(m.bwd).to_string(),
            ShowSeconds(m.analytic_fwd).to_string(),
            ShowSeconds(m.analytic_bwd).to_string(),
            (m.analytic_fwd + m.analytic_bwd) / (m.fwd + m.bwd),
            m.stash_measured
                .map(|b| ShowBytes(b).to_string())
                .unwrap_or_else(|| "-".into()),
            ShowBytes(m.analytic_stash).to_string(),
        );
    }
    println!(
        "{} on {}: sum of {} forwards {} vs whole forward {} (ratio {:.3}); \
         sum of fwd+bwd {} vs training step {} (ratio {:.3}); analytic/measured per layer \
         {:.2}..{:.2} (geometric mean {:.2}), total {:.2}; sizes equal to the analytic ones: \
         out {}, weights {}, stash {} layers differ -> {}",
        report.model,
        report.device,
        report.granularity,
        ShowSeconds(report.sum_fwd),
        ShowSeconds(report.whole_forward),
        report.forward_ratio,
        ShowSeconds(report.sum_fwd_bwd),
        ShowSeconds(report.whole_step),
        report.step_ratio,
        report.analytic_time_ratio.0,
        report.analytic_time_ratio.2,
        report.analytic_time_ratio.1,
        report.analytic_total_ratio,
        report.out_equal,
        report.weights_equal,
        report.stash_differences.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
