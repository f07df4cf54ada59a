//! MadPipe's first phase (Algorithm 1 with the paper's discretization, K = 10) on
//! densenet121 imported from PipeDream's profile, P = 8.
//! Run: `cargo bench --bench madpipe`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pipeopt::io::import_pipedream;
use pipeopt::model::Platform;
use pipeopt::partition::madpipe::{algorithm1, MadPipeConfig};

use pipeopt::io::pipedream::shared_profile as profile;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("madpipe algorithm1");
    group.sample_size(10);
    for net in ["densenet121", "resnet50"] {
        let instance =
            import_pipedream(&profile(&format!("{net}.txt")), None).expect("profile imports");
        let s = instance.sums();
        let n = instance.len();
        // Memory: from tight to roomy, relative to what the whole network needs with one
        // stored batch per layer, spread over 8 processors.
        let need = (3.0 * s.weights(1, n) + s.stash(1, n)) / 8.0;
        for factor in [1.0, 2.0, 8.0] {
            let platform = Platform::new(8, need * factor, 12e9);
            let config = MadPipeConfig::default();
            let r = algorithm1(&instance, &platform, &config);
            eprintln!(
                "{net} L={n} P=8 M={:.3e} B: {:?}",
                platform.memory,
                r.as_ref().map(|r| (r.planned_period, r.allocation.len()))
            );
            group.bench_function(format!("{net} P=8 M={factor}x"), |b| {
                b.iter(|| algorithm1(black_box(&instance), &platform, &config))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
