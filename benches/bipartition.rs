//! Bi-Partition's exact search on vgg16 and resnet50 (PipeDream profiles) with 8 workers:
//! The target is under 1 s each (the paper reports under 28 s for about 20 layers).
//! Run: `cargo bench --bench benches -- bipartition`.

use criterion::{black_box, Criterion};
use pipeopt::io::import_pipedream;
use pipeopt::model::Platform;
use pipeopt::partition::bipartition::{fast, plan};

use pipeopt::io::pipedream::shared_profile as profile;

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("bipartition");
    group.sample_size(10);
    for net in ["vgg16", "resnet50"] {
        let inst =
            import_pipedream(&profile(&format!("{net}.txt")), None).expect("profile imports");
        let fwd: Vec<f64> = inst.layers.iter().map(|l| l.fwd).collect();
        let bwd: Vec<f64> = inst.layers.iter().map(|l| l.bwd).collect();
        eprintln!("{net}: {} layers", inst.len());
        group.bench_function(
            format!("fast dp {net} ({} layers) 8 workers", inst.len()),
            |b| b.iter(|| fast(black_box(&fwd), black_box(&bwd), 8).expect("plan")),
        );
        let platform = Platform::new(8, 16.0 * (1u64 << 30) as f64, 12e9);
        group.bench_function(format!("plan+judge {net} 8 workers"), |b| {
            b.iter(|| plan(black_box(&inst), &platform).expect("plan"))
        });
    }
    group.finish();
}
