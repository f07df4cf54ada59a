//! The sweep's speed targets as a bench binary: the whole `experiments/memory.toml` grid,
//! `best` and its global bound included (12 s a case), in under 30 minutes on the 2-core
//! machine, and resuming the finished sweep in under 2 seconds.
//!
//! ```sh
//! cargo bench --bench benches -- sweep                        # memory.toml, ~25 min
//! PIPEOPT_BENCH_EXPERIMENT=experiments/quick.toml cargo bench --bench benches -- sweep   # seconds
//! ```
//! (`cargo test --all-targets` runs it on quick.toml.)
//! The grid runs as `pipeopt sweep` runs it (one child process per job, as many workers as
//! cores) into a temporary directory, so the committed results are not touched; the
//! experiment's own `output` is replaced.

use std::path::PathBuf;
use std::time::Instant;

use pipeopt::sweep::config::Experiment;
use pipeopt::sweep::run::{sweep, Isolation, SweepOptions};

pub fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without
    // it, where the quick grid is enough.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let default = if smoke { "quick" } else { "memory" };
    let path = std::env::var_os("PIPEOPT_BENCH_EXPERIMENT")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(format!("experiments/{default}.toml")));
    let path = if path.is_absolute() {
        path
    } else {
        root.join(path)
    };
    let mut exp = Experiment::load(&path).expect("the experiment file");
    let out = tempfile::tempdir().expect("a temporary directory");
    exp.header.output = out.path().to_path_buf();
    let opts = SweepOptions {
        shard: None,
        isolation: Isolation::Process,
        workers: None,
        progress: false,
        executable: Some(PathBuf::from(env!("CARGO_BIN_EXE_pipeopt"))),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    let first = sweep(&exp, &opts).expect("the sweep");
    let run = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let again = sweep(&exp, &opts).expect("the resumed sweep");
    let resume = started.elapsed().as_secs_f64();
    assert_eq!(again.ran, 0, "a finished sweep ran jobs again");
    println!(
        "sweep {}: {} jobs ({} errors) in {:.1} s on {cores} cores (target for memory.toml: 1800 s)",
        exp.header.name, first.jobs, first.errors, run
    );
    println!("resume: {resume:.3} s (target: 2 s)");
}
