//! PipeDream's dynamic program (a speed target) on the configurations whose running
//! time results/pipedream-agreement.md records for PipeDream's own optimizer on this
//! machine: straight on 8 machines (activation transfers counted), replicated on 16
//! machines and hierarchical 4x4 (24 and 3 GB/s), each as PipeDream runs it by default
//! (activation transfers ignored). Profiles from `../shared/pipedream-profiles/`, imported
//! once outside the timing (importing takes about half a millisecond: `benches/import.rs`).
//! Run: `cargo bench --bench pipedream`. The side-by-side run against PipeDream itself is
//! `experiments/pipedream-agreement.sh` (`results/pipedream-agreement.md`).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pipeopt::io::import_pipedream;
use pipeopt::io::pipedream::shared_profile;
use pipeopt::partition::pipedream::{partition, Level, PipeDreamConfig};

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

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipedream dp");
    group.sample_size(10);
    for net in ["resnet50", "densenet121", "inception_v3"] {
        let instance =
            import_pipedream(&shared_profile(&format!("{net}.txt")), None).expect("imports");
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
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
