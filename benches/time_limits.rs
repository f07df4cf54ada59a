//! Whether `--time-limit` holds: every algorithm of the registry, run as `pipeopt plan` (a
//! child process of the release binary, as a user runs it), on the op-level chains of
//! `instances/*-op.json` (about 430 layers each) and on chains of 1,500 and 5,000 layers
//! made by concatenating them, with P = 8, M = 8 GiB, beta = 12 GB/s, at `--time-limit 1s`
//! and `3s`. Each run's wall time and peak resident memory (`wait4`'s `ru_maxrss` of that
//! child) go into a markdown table, each marked met when it returned within
//! max(1 s, 10%) of its limit, UNMET otherwise. results/time-limits.md is its output.
//!
//! Run: `cargo build --profile fastrel && cargo bench --profile fastrel --bench benches --
//! time_limits` (`PIPEOPT_BIN` names another binary; `TIME_LIMITS_CHAINS=5000` runs only the chains
//! whose name contains it; `TIME_LIMITS_ALGORITHMS=ilp,best` only those algorithms). Without
//! `--bench` (`cargo test --all-targets`), a smoke run: the toy chain, two algorithms.
//! `TIME_LIMITS_DIR=/tmp/chains` keeps the long chains there (to rerun one case by hand).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pipeopt::algorithm::Algorithm;
use pipeopt::model::{Instance, SharedStash};

/// One run's measurements.
struct Run {
    chain: String,
    layers: usize,
    algorithm: String,
    limit: f64,
    wall: Duration,
    peak_rss_mib: f64,
    status: String,
}

impl Run {
    /// Returned within max(1 s, 10%) of the limit.
    fn met(&self) -> bool {
        self.wall.as_secs_f64() <= self.limit + (0.1 * self.limit).max(1.0)
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chains `a, b, c, ...` one after the other, cut after `layers` layers: each layer
/// keeps its own stash explicitly (the first layer of a chain would otherwise keep the
/// previous chain's output), shared stashes move with their layers, and what the cut
/// leaves dangling (an entry past it, the last layer's overlap) is dropped.
fn concatenated(name: &str, parts: &[Instance], layers: usize) -> Instance {
    let mut layers_out = Vec::new();
    let mut shared = Vec::new();
    'fill: loop {
        for part in parts {
            let offset = layers_out.len();
            for l in 1..=part.len() {
                let mut layer = part.layer(l).clone();
                layer.stash = Some(part.stash(l));
                layers_out.push(layer);
                if layers_out.len() == layers {
                    break;
                }
            }
            shared.extend(part.stash_shared.iter().map(|e| SharedStash {
                first: e.first + offset,
                last: e.last + offset,
                bytes: e.bytes,
            }));
            if layers_out.len() == layers {
                break 'fill;
            }
        }
    }
    shared.retain(|e| e.last <= layers);
    layers_out.last_mut().expect("layers > 0").stash_overlap = None;
    let mut chain = Instance::chain(name, parts[0].input, layers_out);
    chain.stash_shared = shared;
    chain
        .check()
        .expect("a concatenation of checked chains is a chain");
    chain
}

/// Runs `pipeopt plan` on `instance` and measures it.
fn run(
    bin: &Path,
    instance: &Path,
    algorithm: &str,
    limit: f64,
    layers: usize,
) -> (Duration, f64, String) {
    let mut cmd = Command::new(bin);
    cmd.args(["plan", "-i"])
        .arg(instance)
        .args(["-p", "8", "-m", "8GiB", "-b", "12GB/s", "-a", algorithm])
        .args(["--time-limit", &format!("{limit}s"), "--json"]);
    if matches!(algorithm, "1f1b*" | "milp-schedule") {
        // Eight equal stages.
        let starts: Vec<String> = (0..8).map(|i| (i * layers / 8).to_string()).collect();
        cmd.args(["--partition", &starts.join(",")]);
    }
    let started = Instant::now();
    // Reaped by `wait4` below, which `Child::wait` cannot replace (it gives no rusage).
    #[allow(clippy::zombie_processes)]
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the pipeopt binary runs");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // wait4, not `Child::wait`: it gives this child's own peak memory.
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our child's, not yet waited for; both pointers are valid.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let status = serde_json::from_str::<serde_json::Value>(&out)
        .ok()
        .and_then(|v| v["status"].as_str().map(str::to_string))
        .unwrap_or_else(|| {
            format!(
                "exit {}: {}",
                libc::WEXITSTATUS(status),
                err.lines().next().unwrap_or("")
            )
        });
    // ru_maxrss is in KiB on Linux.
    (wall, usage.ru_maxrss as f64 / 1024.0, status)
}

pub fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let bin = std::env::var_os("PIPEOPT_BIN").map_or_else(
        || {
            let fastrel = root().join("target/fastrel/pipeopt");
            if fastrel.exists() {
                fastrel
            } else {
                root().join("target/release/pipeopt")
            }
        },
        PathBuf::from,
    );
    if !bin.exists() {
        eprintln!(
            "no binary at {} (cargo build --profile fastrel, or PIPEOPT_BIN)",
            bin.display()
        );
        if smoke {
            return;
        }
        std::process::exit(1);
    }
    let temporary = tempfile::tempdir().expect("a temporary directory");
    let dir = std::env::var_os("TIME_LIMITS_DIR").map_or_else(
        || temporary.path().to_path_buf(),
        |d| {
            let d = PathBuf::from(d);
            std::fs::create_dir_all(&d).expect("TIME_LIMITS_DIR: a folder");
            d
        },
    );
    let mut chains: Vec<(String, PathBuf, usize)> = Vec::new();
    if smoke {
        let toy = root().join("instances/toy-chain.json");
        let n = Instance::load(&toy).expect("the toy chain").len();
        chains.push(("toy-chain".into(), toy, n));
    } else {
        let mut ops: Vec<PathBuf> = std::fs::read_dir(root().join("instances"))
            .expect("instances/")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with("-op.json"))
            .collect();
        ops.sort();
        let parts: Vec<Instance> = ops
            .iter()
            .map(|p| Instance::load(p).expect("a committed instance"))
            .collect();
        for (p, inst) in ops.iter().zip(&parts) {
            chains.push((inst.name.clone(), p.clone(), inst.len()));
        }
        for layers in [1500, 5000] {
            let name = format!("op-chains-{layers}");
            let chain = concatenated(&name, &parts, layers);
            let path = dir.join(format!("{name}.json"));
            std::fs::write(&path, serde_json::to_string(&chain).expect("serializes"))
                .expect("writes");
            chains.push((name, path, layers));
        }
    }
    if let Ok(only) = std::env::var("TIME_LIMITS_CHAINS") {
        chains.retain(|c| c.0.contains(&only));
    }
    let mut algorithms: Vec<&str> = Algorithm::ALL.iter().map(|a| a.descriptor().name).collect();
    if let Ok(only) = std::env::var("TIME_LIMITS_ALGORITHMS") {
        let only: Vec<String> = only.split(',').map(str::to_string).collect();
        algorithms.retain(|a| only.iter().any(|o| o == a));
    }
    if smoke {
        algorithms.truncate(2);
    }
    let limits: &[f64] = if smoke { &[1.0] } else { &[1.0, 3.0] };
    let mut runs = Vec::new();
    for (name, path, layers) in &chains {
        for algorithm in &algorithms {
            for &limit in limits {
                let (wall, rss, status) = run(&bin, path, algorithm, limit, *layers);
                let r = Run {
                    chain: name.clone(),
                    layers: *layers,
                    algorithm: algorithm.to_string(),
                    limit,
                    wall,
                    peak_rss_mib: rss,
                    status,
                };
                eprintln!(
                    "{} ({} layers) {} {} s: {:.2} s, {:.0} MiB, {}{}",
                    r.chain,
                    r.layers,
                    r.algorithm,
                    r.limit,
                    r.wall.as_secs_f64(),
                    r.peak_rss_mib,
                    r.status,
                    if r.met() { "" } else { " UNMET" }
                );
                runs.push(r);
            }
        }
    }
    println!("| chain | layers | algorithm | limit (s) | wall (s) | peak RSS (MiB) | status | limit kept |");
    println!("|---|---:|---|---:|---:|---:|---|---|");
    for r in &runs {
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.0} | {} | {} |",
            r.chain,
            r.layers,
            r.algorithm,
            r.limit,
            r.wall.as_secs_f64(),
            r.peak_rss_mib,
            r.status,
            if r.met() { "met" } else { "**UNMET**" }
        );
    }
    let unmet = runs.iter().filter(|r| !r.met()).count();
    println!();
    println!(
        "{} runs, {unmet} unmet (wall time above the limit plus max(1 s, 10%)); the largest \
         peak RSS {:.0} MiB.",
        runs.len(),
        runs.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max)
    );
}
