//! MadPipe's first phase (Algorithm 1 with the paper's discretization, K = 10) on
//! densenet121 imported from PipeDream's profile, P = 8, and on the op-level analytic
//! DenseNet-121 (image 1000, batch 8: several hundred chain layers) at the memories of the
//! memory grid (target: under 2 s each).
//! Run: `cargo bench --bench benches -- madpipe`.

use criterion::{black_box, Criterion};
use pipeopt::io::import_pipedream;
use pipeopt::model::Platform;
use pipeopt::partition::madpipe::{algorithm1, MadPipeConfig};

use pipeopt::io::pipedream::shared_profile as profile;

pub fn bench(c: &mut Criterion) {
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
    let net = pipeopt::nets::network("densenet121", 1000).expect("densenet121");
    let instance = pipeopt::nets::op_instance(
        &net,
        8,
        pipeopt::nets::DType::F32,
        &pipeopt::nets::DeviceModel::h100(),
    )
    .expect("op-level densenet121");
    let n = instance.len();
    for gib in [4.0, 8.0, 16.0] {
        let platform = Platform::new(8, gib * 1024f64.powi(3), 12e9);
        let config = MadPipeConfig::default();
        let t = std::time::Instant::now();
        let r = algorithm1(&instance, &platform, &config);
        eprintln!(
            "densenet121-1000-b8-op L={n} P=8 M={gib}GiB: {:?} in {:.2} s",
            r.as_ref().map(|r| (r.planned_period, r.allocation.len())),
            t.elapsed().as_secs_f64()
        );
        group.bench_function(format!("densenet121-op P=8 M={gib}GiB"), |b| {
            b.iter(|| algorithm1(black_box(&instance), &platform, &config))
        });
    }
    group.finish();
}
