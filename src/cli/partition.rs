//! `pipeopt partition pipedream`: PipeDream's optimizer on its own, with its own objective
//! (`partition::pipedream`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use pipeopt::io::pipedream::{default_name, read_whole_graph};
use pipeopt::model::Instance;
use pipeopt::partition::pipedream::{
    levels, parse_compression_ratio, partition, partition_graph, partition_json, CutsSearched,
    PipeDreamConfig,
};
use pipeopt::units::{parse_positive_bandwidth, parse_positive_bytes, ShowSeconds};

#[derive(Subcommand)]
pub enum PartitionCommand {
    /// PipeDream's optimizer (Narayanan et al., SOSP 2019, section 3.1): a DP over the
    /// chain and the levels of a hierarchical machine (`--processors 4 4 --bandwidth 24GB/s
    /// 3GB/s`: 4 servers of 4 GPUs, innermost level first). Prints PipeDream's own
    /// objective under `objective` (the slowest stage's time, its "Time per stage in
    /// pipeline") and the stages.
    #[command(group(clap::ArgGroup::new("input").required(true).args(["instance", "graph"])))]
    Pipedream {
        /// The instance file (a chain: cuts only between its consecutive layers).
        #[arg(long, short = 'i')]
        instance: Option<PathBuf>,
        /// A PipeDream profile (`graph.txt`) instead of an instance: the program then runs
        /// over the DAG's ideals, so it also sees the cuts PipeDream's antichain states take
        /// diagonally through parallel branches (up to a few thousand ideals; past that, the
        /// chain of `import pipedream`). The stages are layers of the chain linearized
        /// through the chosen cuts: save it with --out-instance.
        #[arg(long)]
        graph: Option<PathBuf>,
        /// With --graph: write the chain the stages refer to (atomically).
        #[arg(long)]
        out_instance: Option<PathBuf>,
        /// Components per level, innermost first (at least 1 each, at most 1024 in all).
        #[arg(long, num_args = 1.., required = true, value_parser = super::parse_processors)]
        processors: Vec<usize>,
        /// Bandwidth of each level, innermost first (positive).
        #[arg(long, num_args = 1.., required = true, value_parser = parse_positive_bandwidth)]
        bandwidth: Vec<f64>,
        /// Allow replicated (data-parallel) stages; default: a straight pipeline.
        #[arg(long)]
        replicate: bool,
        /// PipeDream's memory constraint (`--use_memory_constraint --memory_size`),
        /// positive.
        #[arg(long, value_parser = parse_positive_bytes)]
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
        graph,
        out_instance,
        processors,
        bandwidth,
        replicate,
        memory,
        activation_compression_ratio,
        fewer_machines,
        json,
    } = command;
    if out_instance.is_some() && graph.is_none() {
        return Err(pipeopt::error::InputError::new(
            "--out-instance",
            "",
            "writes the chain linearized through the cuts of --graph; with --instance the \
             stages are layers of that instance already",
        )
        .into());
    }
    let levels = levels(&processors, &bandwidth)?;
    let activation_compression = parse_compression_ratio(&activation_compression_ratio)?;
    let config = PipeDreamConfig {
        levels,
        straight: !replicate,
        activation_compression,
        memory,
        fewer_machines,
    };
    let started = std::time::Instant::now();
    // The instance the stages refer to and which cuts were searched, or why there is no
    // partition (named after the instance).
    let (name, outcome) = match (&instance, &graph) {
        (Some(path), _) => {
            let inst = Instance::load(path)?;
            (
                inst.name.clone(),
                partition(&inst, &config).map(|r| (inst, r, None)),
            )
        }
        (None, Some(path)) => {
            let g = read_whole_graph(path, false)?;
            let name = default_name(path);
            let outcome = partition_graph(&g, &name, &config)
                .map(|p| (p.linearization.instance, p.partition, Some(p.searched)));
            if let (Ok((inst, _, _)), Some(out)) = (&outcome, &out_instance) {
                pipeopt::error::write_atomic(out, &serde_json::to_vec_pretty(inst)?)?;
            }
            (name, outcome)
        }
        (None, None) => unreachable!("clap requires --instance or --graph"),
    };
    let (inst, result, searched) = match outcome {
        Ok(r) => r,
        Err(pipeopt::partition::pipedream::PipeDreamError::Config(e)) => return Err(e.into()),
        // No partition is a result ("infeasible"), like `plan`'s: exit 0, and with
        // --json still one object.
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "instance": name,
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
    let mut j = partition_json(&inst, &config, &result, seconds);
    if let Some(searched) = &searched {
        j["cuts"] = serde_json::to_value(searched)?;
        j["order"] = inst.meta.get("order").cloned().unwrap_or_default();
    }
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
        match &searched {
            Some(CutsSearched::Ideals { states }) => println!(
                "cuts: every ideal of the DAG ({states}); stages are layers of the chain \
                 linearized through them{}",
                out_instance
                    .as_ref()
                    .map(|p| format!(" ({})", p.display()))
                    .unwrap_or_default()
            ),
            Some(CutsSearched::ChainPrefixes { more_ideals_than }) => println!(
                "cuts: the chain's prefixes (the DAG has more than {more_ideals_than} ideals)"
            ),
            None => {}
        }
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
