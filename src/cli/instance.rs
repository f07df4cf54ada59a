//! `pipeopt instance`: a built-in network's instance from its exact shapes (`nets`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use pipeopt::model::Instance;
use pipeopt::units::{ShowBytes, ShowSeconds};
use pipeopt::InputError;

use super::{parse_device_model, parse_dtype, NetworkArgs};

#[derive(Args)]
pub struct InstanceArgs {
    #[command(flatten)]
    pub network: NetworkArgs,
    /// Where times come from: `analytic` (FLOPs on a roofline device model). Measured
    /// times come from `pipeopt profile` (feature `torch`, on a GPU).
    #[arg(long, value_parser = ["analytic"], default_value = "analytic")]
    pub times: String,
    /// Element type: float32 or float16.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// Device model for analytic times: h100 (rates fitted to measured H100 profiles),
    /// h100-peak, a100 or v100 (datasheet rooflines), or the path of a model file
    /// (devices/README.md).
    #[arg(long, default_value = "h100")]
    pub device_model: String,
    /// Chain layers: `block` (one per block: bottleneck, Inception module, dense layer) or
    /// `op` (the DAG of leaf ops linearized like a PipeDream profile; exact stashes with
    /// `stash_overlap` and `stash_shared`).
    #[arg(long, value_parser = ["block", "op"], default_value = "block")]
    pub granularity: String,
    /// Where to write the instance (atomically).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: InstanceArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::nets::instance;
    let dtype = parse_dtype(&args.dtype)?;
    let device = parse_device_model(&args.device_model)?;
    if args.network.batch == 0 {
        return Err(InputError::new("--batch", "", "must be at least 1").into());
    }
    let inst = match pipeopt::nets::Granularity::parse(&args.granularity) {
        Some(pipeopt::nets::Granularity::Op) => {
            pipeopt::nets::network(&args.network.model, args.network.image).and_then(|net| {
                pipeopt::nets::op_instance(&net, args.network.batch, dtype, &device)
            })
        }
        _ => instance(
            &args.network.model,
            args.network.image,
            args.network.batch,
            dtype,
            &device,
        ),
    }
    .map_err(|e| InputError::new("--model", "", e.to_string()))?;
    write_and_report(&inst, &args.out, args.json)
}

/// Checks `inst`, writes it to `out` (atomically) and prints its summary: one JSON object
/// with `--json`, else one line.
pub fn write_and_report(inst: &Instance, out: &Path, json: bool) -> anyhow::Result<ExitCode> {
    inst.check()?;
    let text = serde_json::to_string_pretty(inst)? + "\n";
    pipeopt::error::write_atomic(out, text.as_bytes())?;
    let sums = inst.sums();
    let l = inst.len();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "instance": out,
                "name": inst.name,
                "layers": l,
                "sequential_seconds": sums.u(1, l),
                "weights_bytes": sums.weights(1, l),
                "stash_bytes": sums.stash(1, l),
                "meta": inst.meta,
            })
        );
    } else {
        println!(
            "{}: {} chain layers, U(1,L) = {}, weights {}, stash {} -> {}",
            inst.name,
            l,
            ShowSeconds(sums.u(1, l)),
            ShowBytes(sums.weights(1, l)),
            ShowBytes(sums.stash(1, l)),
            out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
