//! `pipeopt import`: another tool's profile as an instance (`io::pipedream`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use pipeopt::units::{ShowBytes, ShowSeconds};

#[derive(Subcommand)]
pub enum ImportCommand {
    /// PipeDream's graph.txt: the DAG linearized into a chain (a depth-first topological
    /// order; out = every tensor crossing the cut; zero-cost nodes grouped where a cut is
    /// useless).
    Pipedream {
        /// The graph.txt file.
        file: PathBuf,
        /// Where to write the instance (atomically).
        #[arg(long, short = 'o')]
        out: PathBuf,
        /// The instance's name (default: the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Print a JSON summary on stdout.
        #[arg(long)]
        json: bool,
        /// Import a DAG that does not look like a whole network (a source that is not an
        /// Input, a node with no path to the output, too few edges): by default an error
        /// naming the node, since a file cut short still parses.
        #[arg(long)]
        accept_incomplete: bool,
    },
}

pub fn run(command: ImportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImportCommand::Pipedream {
            file,
            out,
            name,
            json,
            accept_incomplete,
        } => {
            let instance = pipeopt::io::pipedream::import_pipedream_with(
                &file,
                name.as_deref(),
                accept_incomplete,
            )?;
            let text = serde_json::to_vec_pretty(&instance)?;
            pipeopt::error::write_atomic(&out, &text)?;
            let summary = pipeopt::io::pipedream::import_summary(&instance, &out);
            if json {
                println!("{summary}");
            } else {
                let sums = instance.sums();
                println!(
                    "{}: {} DAG nodes -> {} chain layers, U(1,L) = {}, weights {} -> {}",
                    instance.name,
                    summary["dag_nodes"],
                    instance.len(),
                    ShowSeconds(sums.u(1, instance.len())),
                    ShowBytes(sums.weights(1, instance.len())),
                    out.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
