//! `pipeopt partition pipedream`: PipeDream's optimizer on its own, with its own objective
//! (`partition::pipedream`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use pipeopt::model::Instance;
use pipeopt::partition::pipedream::{
    levels, parse_compression_ratio, partition, partition_json, PipeDreamConfig,
};
use pipeopt::units::{parse_bandwidth, parse_bytes, ShowSeconds};

#[derive(Subcommand)]
pub enum PartitionCommand {
    /// PipeDream's optimizer (Narayanan et al., SOSP 2019, section 3.1): a DP over the
    /// chain and the levels of a hierarchical machine (`--processors 4 4 --bandwidth 24GB/s
    /// 3GB/s`: 4 servers of 4 GPUs, innermost level first). Prints PipeDream's own
    /// objective under `objective` (the slowest stage's time, its "Time per stage in
    /// pipeline") and the stages.
    Pipedream {
        /// The instance file.
        #[arg(long, short = 'i')]
        instance: PathBuf,
        /// Components per level, innermost first.
        #[arg(long, num_args = 1.., required = true)]
        processors: Vec<usize>,
        /// Bandwidth of each level, innermost first.
        #[arg(long, num_args = 1.., required = true, value_parser = parse_bandwidth)]
        bandwidth: Vec<f64>,
        /// Allow replicated (data-parallel) stages; default: a straight pipeline.
        #[arg(long)]
        replicate: bool,
        /// PipeDream's memory constraint (`--use_memory_constraint --memory_size`).
        #[arg(long, value_parser = parse_bytes)]
        memory: Option<f64>,
        /// Activation compression ratio; `none` ignores activation transfers (PipeDream's
        /// default when the flag is absent there). Default here: 1.
        #[arg(long, default_value = "1")]
        activation_compression_ratio: String,
        /// Let a range leave some of its components unused (`--use_fewer_machines`).
        #[arg(long)]
        fewer_machines: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: PartitionCommand) -> anyhow::Result<ExitCode> {
    let PartitionCommand::Pipedream {
        instance,
        processors,
        bandwidth,
        replicate,
        memory,
        activation_compression_ratio,
        fewer_machines,
        json,
    } = command;
    let levels = levels(&processors, &bandwidth)?;
    let activation_compression = parse_compression_ratio(&activation_compression_ratio)?;
    let inst = Instance::load(&instance)?;
    let config = PipeDreamConfig {
        levels,
        straight: !replicate,
        activation_compression,
        memory,
        fewer_machines,
    };
    let started = std::time::Instant::now();
    let result = match partition(&inst, &config) {
        Ok(r) => r,
        Err(pipeopt::partition::pipedream::PipeDreamError::Config(e)) => return Err(e.into()),
        // No partition is a result ("infeasible"), like `plan`'s: exit 0, and with
        // --json still one object.
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "instance": inst.name,
                        "status": "infeasible",
                        "objective": null,
                        "stages": [],
                        "messages": [e.to_string()],
                    })
                );
            } else {
                println!("{e}");
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let j = partition_json(&inst, &config, &result, seconds);
    if json {
        println!("{j}");
    } else {
        println!(
            "{}: PipeDream objective (slowest stage) {} on {} of {} processors, {} stages, solved in {}",
            inst.name,
            ShowSeconds(result.objective),
            result.processors_used,
            config.total_processors(),
            result.stages.len(),
            ShowSeconds(seconds)
        );
        let rows = result.stages.iter().map(|st| {
            vec![
                st.first.to_string(),
                st.last.to_string(),
                st.replicas.to_string(),
            ]
        });
        println!(
            "{}",
            super::table(&["first", "last", "replicas"], &[0, 1, 2], rows)
        );
    }
    Ok(ExitCode::SUCCESS)
}
