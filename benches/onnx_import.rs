//! How long `pipeopt import onnx` takes on the large models of the ONNX zoo: GPT-2 medium
//! (24 blocks, sequence 1024, a 1.5 GB file; target 5 s) and a 32-block Llama-style decoder
//! (target 10 s), at block and op granularity, each run five times as a user runs it (a
//! child process of the release binary). Prints a markdown table of the median and the
//! slowest run, each marked met or UNMET against its target.
//!
//! The files are those `experiments/onnx_zoo.py` exports (it needs torch; see
//! results/onnx-zoo.md): `ONNX_ZOO_DIR` (default `/tmp/zoo`) holds `gpt2-medium.onnx` and
//! `llama-32.onnx`; a model whose file is missing is reported as not run.
//!
//! Run: `cargo build --profile fastrel && cargo bench --profile fastrel --bench benches --
//! onnx_import` (`PIPEOPT_BIN` names another binary). Without `--bench` (`cargo test
//! --all-targets`) it does nothing.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The models, their files in the zoo's folder and the target of each import, in seconds.
const MODELS: [(&str, &str, f64); 2] = [
    ("GPT-2 medium (24 x 1024)", "gpt2-medium.onnx", 5.0),
    ("Llama-style (32 blocks)", "llama-32.onnx", 10.0),
];

const RUNS: usize = 5;

pub fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let bin = std::env::var_os("PIPEOPT_BIN").map_or_else(
        || {
            let fastrel = root.join("target/fastrel/pipeopt");
            if fastrel.exists() {
                fastrel
            } else {
                root.join("target/release/pipeopt")
            }
        },
        PathBuf::from,
    );
    assert!(
        bin.exists(),
        "no binary at {} (cargo build --profile fastrel, or PIPEOPT_BIN)",
        bin.display()
    );
    let zoo = std::env::var_os("ONNX_ZOO_DIR").map_or_else(|| "/tmp/zoo".into(), PathBuf::from);
    let out = tempfile::tempdir().expect("a temporary directory");
    println!("| model | file (MB) | granularity | median (s) | slowest (s) | target (s) | |");
    println!("|---|---|---|---|---|---|---|");
    for (model, file, target) in MODELS {
        let path = zoo.join(file);
        let Ok(meta) = std::fs::metadata(&path) else {
            println!(
                "| {model} | - | - | - | - | {target} | not run: no {} (experiments/onnx_zoo.py) |",
                path.display()
            );
            continue;
        };
        for granularity in ["block", "op"] {
            let mut walls: Vec<Duration> = (0..RUNS)
                .map(|_| {
                    let started = Instant::now();
                    let o = Command::new(&bin)
                        .args(["import", "onnx"])
                        .arg(&path)
                        .args(["--batch", "8", "--granularity", granularity, "--out"])
                        .arg(out.path().join("instance.json"))
                        .output()
                        .expect("the pipeopt binary runs");
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    started.elapsed()
                })
                .collect();
            walls.sort();
            let (median, slowest) = (walls[RUNS / 2].as_secs_f64(), walls[RUNS - 1].as_secs_f64());
            println!(
                "| {model} | {:.0} | {granularity} | {median:.2} | {slowest:.2} | {target} | {} |",
                meta.len() as f64 / 1e6,
                if slowest <= target { "met" } else { "UNMET" }
            );
        }
    }
}
