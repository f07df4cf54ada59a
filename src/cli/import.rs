//! `pipeopt import`: another tool's profile (`io::pipedream`) or an ONNX model
//! (`nets::onnx`) as an instance.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use pipeopt::nets::Granularity;
use pipeopt::units::{ShowBytes, ShowSeconds};
use pipeopt::InputError;

/// Where the imported instance goes, and how it is reported.
#[derive(Args)]
pub struct ImportOutput {
    /// Where to write the instance (atomically).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// The instance's name (default: the file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum ImportCommand {
    /// PipeDream's graph.txt: the DAG linearized into a chain (a depth-first topological
    /// order; out = every tensor crossing the cut; zero-cost nodes grouped where a cut is
    /// useless).
    Pipedream {
        /// The graph.txt file.
        file: PathBuf,
        #[command(flatten)]
        output: ImportOutput,
        /// Import a DAG that does not look like a whole network (a source that is not an
        /// Input, a node with no path to the output, too few edges): by default an error
        /// naming the node, since a file cut short still parses.
        #[arg(long)]
        accept_incomplete: bool,
    },
    /// An ONNX model (e.g. from `torch.onnx.export`) as an instance: every node one op with
    /// its exact output and weight sizes and what it keeps for the backward, times from a
    /// device model (docs/onnx.md). Inputs: images, token ids or sequences of vectors.
    /// Ops: those of CNNs (Conv, BatchNormalization, Relu, pools...) and of transformers
    /// (MatMul, Gemm, Softmax, LayerNormalization, elementwise ops, views, Gather
    /// embeddings, masks; shape arithmetic is evaluated at import); any other is an
    /// error naming every such op and its first node.
    Onnx {
        /// The .onnx file.
        file: PathBuf,
        /// Samples per (micro-)batch.
        #[arg(long)]
        batch: usize,
        /// Per-sample input shape (C,H,W for images, S for token ids, S,D for
        /// sequences), where the file has none (a dynamic axis) or to check the file's.
        #[arg(long, value_delimiter = ',')]
        input_shape: Option<Vec<usize>>,
        /// Element type: float32 or float16.
        #[arg(long, default_value = "float32")]
        dtype: String,
        /// Device model for the analytic times: a built-in name (h100, h100-peak, a100,
        /// v100) or the path of a model file (devices/README.md).
        #[arg(long, default_value = "h100")]
        device_model: String,
        /// Chain layers: `op` (every node one op, the DAG linearized) or `block` (one
        /// layer per part of the graph between two single-tensor cuts).
        #[arg(long, value_parser = ["block", "op"], default_value = "op")]
        granularity: String,
        /// Plan a file in which the exporter fused batch normalizations into convolutions
        /// (PyTorch's default `dynamo=True` exporter does, even in training mode), or
        /// exported them in inference mode (an eval-mode export): by default an error,
        /// since the file is then not the network that trains.
        #[arg(long)]
        accept_fused: bool,
        #[command(flatten)]
        output: ImportOutput,
    },
}

pub fn run(command: ImportCommand) -> anyhow::Result<ExitCode> {
    match command {
        ImportCommand::Pipedream {
            file,
            output: ImportOutput { out, name, json },
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
        ImportCommand::Onnx {
            file,
            batch,
            input_shape,
            dtype,
            device_model,
            granularity,
            accept_fused,
            output: ImportOutput { out, name, json },
        } => {
            if batch == 0 {
                return Err(InputError::new("--batch", "", "must be at least 1").into());
            }
            let dtype = super::parse_dtype(&dtype)?;
            let device = super::parse_device_model(&device_model)?;
            let granularity = Granularity::parse(&granularity).unwrap_or(Granularity::Op);
            let bytes = map_file(&file)?;
            let name = name.unwrap_or_else(|| {
                file.file_stem()
                    .map_or("onnx".into(), |s| s.to_string_lossy().into_owned())
            });
            let instance = pipeopt::nets::onnx::onnx_instance(
                &bytes,
                &file.display().to_string(),
                &name,
                &pipeopt::nets::onnx::ReadOptions {
                    input_shape: input_shape.as_deref(),
                    accept_fused,
                },
                batch,
                dtype,
                &device,
                granularity,
            )
            .map_err(|e| InputError::file(&file, e))?;
            super::instance::write_and_report(&instance, &out, json)
        }
    }
}

/// The bytes of `file` through a memory map: a model of a few GB is read by the import
/// where it lies in the page cache, not copied first (GPT-2 medium: 1.5 GB).
fn map_file(file: &std::path::Path) -> Result<memmap2::Mmap, InputError> {
    let f = std::fs::File::open(file).map_err(|e| InputError::file(file, e))?;
    // SAFETY: the map is read only while the import runs; a file truncated or rewritten by
    // another process meanwhile is the one hazard, as for any tool that maps its input.
    unsafe { memmap2::Mmap::map(&f) }.map_err(|e| InputError::file(file, e))
}
