//! `pipeopt fit-device`: a device model fitted to measured profiles (`nets::fit`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::nets::fit::{fit, load_report, model_toml, FitOptions};
use pipeopt::InputError;

use super::parse_device_model;

#[derive(Args)]
pub struct FitDeviceArgs {
    /// Block-level profile reports (`pipeopt profile --report`, float32), e.g.
    /// results/profiles/*-b8-h100.report.json. Each names its network, image and batch.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Where to write the fitted model (TOML, devices/README.md; atomically).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Where to write the fit report (JSON: per layer measured and predicted, worst
    /// factors in sample and with each network left out).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The model's name in instances' metadata.
    #[arg(long, default_value = "fitted")]
    pub name: String,
    /// Where the numbers come from (default: the report files).
    #[arg(long)]
    pub source: Option<String>,
    /// The model the fit starts from; it keeps this model's peak_f16 and any rate that no
    /// measured op exercises. A built-in name or a TOML path.
    #[arg(long, default_value = "h100")]
    pub base: String,
    /// Keep each fitted rate within this factor of the base model's, and each overhead
    /// below this factor of the base's: the data barely constrain some values (a rate whose
    /// ops are all bandwidth-bound), and the model is read beyond its data.
    #[arg(long, default_value_t = 10.0, value_name = "FACTOR")]
    pub within: f64,
    /// Skip the leave-one-network-out fits (one fit instead of one per network plus one).
    #[arg(long)]
    pub no_leave_one_out: bool,
    /// Print one JSON object (the model, worst factors) instead of a summary for people.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: FitDeviceArgs) -> anyhow::Result<ExitCode> {
    let base =
        parse_device_model(&args.base).map_err(|e| InputError::new("--base", "", e.to_string()))?;
    if args.name.trim().is_empty() {
        return Err(InputError::new("--name", "", "is empty").into());
    }
    if !(args.within.is_finite() && args.within >= 1.0) {
        return Err(InputError::new(
            "--within",
            "",
            format!("is {}; give a factor of at least 1", args.within),
        )
        .into());
    }
    let mut layers = Vec::new();
    for path in &args.reports {
        layers.extend(load_report(path)?);
    }
    let source = args.source.clone().unwrap_or_else(|| {
        let files: Vec<String> = args
            .reports
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!("fitted by pipeopt fit-device to {}", files.join(", "))
    });
    let options = FitOptions {
        base,
        name: args.name.clone(),
        source,
        leave_one_out: !args.no_leave_one_out,
        within: args.within,
    };
    let fit = fit(&layers, &options)?;
    let text = model_toml(&fit, &args.reports)?;
    // What is written must load back as a model (same checks as --device-model).
    pipeopt::nets::DeviceModel::parse(&text, &args.out.display().to_string())?;
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&fit)? + "\n";
        pipeopt::error::write_atomic(path, json.as_bytes())?;
    }
    pipeopt::error::write_atomic(&args.out, text.as_bytes())?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "out": args.out,
                "report": args.report,
                "model": fit.model,
                "layers_fitted": fit.layers_fitted,
                "in_sample": fit.in_sample,
                "base": fit.base,
                "base_in_sample": fit.base_in_sample,
                "leave_one_network_out": fit.leave_one_network_out,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} layers fitted; every layer within a factor {:.3} forward, {:.3} backward (base {}: {:.3}, {:.3})",
        fit.layers_fitted,
        fit.in_sample.fwd,
        fit.in_sample.bwd,
        fit.base,
        fit.base_in_sample.fwd,
        fit.base_in_sample.bwd
    );
    for h in &fit.leave_one_network_out {
        println!(
            "  without {:<14} on it: {:.3} forward, {:.3} backward (on the rest: {:.3}, {:.3})",
            h.network, h.worst.fwd, h.worst.bwd, h.in_sample.fwd, h.in_sample.bwd
        );
    }
    for (dir, r) in [("fwd", &fit.model.fwd), ("bwd", &fit.model.bwd)] {
        println!(
            "  {dir}: conv {:.3e} FLOP/s, conv1x1 {:.3e}, matmul {:.3e}, mem_bw {:.3e} B/s, per_op {:.3e} s, per_layer {:.3e} s",
            r.conv, r.conv1x1, r.matmul, r.mem_bw, r.per_op, r.per_layer
        );
    }
    println!("-> {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
