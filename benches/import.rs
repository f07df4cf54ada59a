//! Import (parse + linearize) of PipeDream's branching profiles.
//! Run: `cargo bench --bench benches -- import`.

use criterion::{black_box, Criterion};
use pipeopt::io::import_pipedream;

use pipeopt::io::pipedream::shared_profile as profile;

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("import");
    for net in ["densenet121", "inception_v3"] {
        let path = profile(&format!("{net}.txt"));
        group.bench_function(format!("import pipedream {net}"), |b| {
            b.iter(|| import_pipedream(black_box(&path), None).expect("profile imports"))
        });
    }
    group.finish();
}
