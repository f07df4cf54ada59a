//! PipeDream's dynamic program (a speed target) on the configurations whose running
//! time results/pipedream-agreement.md records for PipeDream's own optimizer on this
//! machine: straight on 8 machines (activation transfers counted), replicated on 16
//! machines and hierarchical 4x4 (24 and 3 GB/s), each as PipeDream runs it by default
//! (activation transfers ignored). Profiles from `../shared/pipedream-profiles/`, imported
//! once outside the timing (importing takes about half a millisecond: `benches/import.rs`).
//! The same configurations run over the DAG's ideals (`partition_graph`, the diagonal
//! cuts included; the time includes enumerating the ideals and linearizing the result).
//! With `PIPEDREAM_PROFILES=DIR` (a PipeDream checkout's
//! `profiler/image_classification/profiles`, one `NET/graph.txt` per network), also the
//! profiles named by `EXTRA_PROFILES` (default `nasnetalarge resnext101`) from there: the
//! target for nasnetalarge (1103 chain layers) hierarchical 4x4 is under 1 s.
//! Run: `cargo bench --bench benches -- pipedream`. The side-by-side run against PipeDream
//! itself is `experiments/pipedream-agreement.sh` (`results/pipedream-agreement.md`).

use criterion::{black_box, Criterion};
use pipeopt::io::import_pipedream;
use pipeopt::io::pipedream::{read_whole_graph, shared_profile};
use pipeopt::partition::pipedream::{partition, partition_graph, Level, PipeDreamConfig};

fn replicated(levels: &[(usize, f64)]) -> PipeDreamConfig {
    PipeDreamConfig {
        levels: levels
            .iter()
            .map(|&(processors, bandwidth)| Level {
                processors,
                bandwidth,
            })
            .collect(),
        straight: false,
        activation_compression: None,
        memory: None,
        fewer_machines: false,
    }
}

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipedream dp");
    group.sample_size(10);
    let mut profiles: Vec<(String, std::path::PathBuf)> =
        ["resnet50", "densenet121", "inception_v3"]
            .iter()
            .map(|n| (n.to_string(), shared_profile(&format!("{n}.txt"))))
            .collect();
    if let Ok(dir) = std::env::var("PIPEDREAM_PROFILES") {
        let extra = std::env::var("EXTRA_PROFILES")
            .unwrap_or_else(|_| "nasnetalarge resnext101".to_string());
        for n in extra.split_whitespace() {
            profiles.push((
                n.to_string(),
                std::path::Path::new(&dir).join(n).join("graph.txt"),
            ));
        }
    }
    for (net, path) in &profiles {
        let instance = import_pipedream(path, None).expect("imports");
        let graph = read_whole_graph(path, false).expect("reads");
        let configs = [
            ("straight 8", PipeDreamConfig::straight(8, 12e9)),
            ("replicated 16", replicated(&[(16, 12e9)])),
            ("hierarchical 4x4", replicated(&[(4, 24e9), (4, 3e9)])),
        ];
        for (name, config) in configs {
            let r = partition(&instance, &config).expect("partitions");
            eprintln!("{net} {name}: objective {} s", r.objective);
            group.bench_function(format!("{net} {name}"), |b| {
                b.iter(|| partition(black_box(&instance), &config).unwrap())
            });
            let g = partition_graph(&graph, net, &config).expect("partitions");
            eprintln!(
                "{net} {name}, over the DAG's cuts ({:?}): objective {} s",
                g.searched, g.partition.objective
            );
            group.bench_function(format!("{net} {name} (DAG)"), |b| {
                b.iter(|| partition_graph(black_box(&graph), net, &config).unwrap())
            });
        }
    }
    group.finish();
}
