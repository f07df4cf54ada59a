//! Import (parse + linearize) of PipeDream's branching profiles.
//! Run: `cargo bench --bench import`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pipeopt::io::import_pipedream;

use pipeopt::io::pipedream::shared_profile as profile;

fn bench(c: &mut Criterion) {
    for net in ["densenet121", "inception_v3"] {
        let path = profile(&format!("{net}.txt"));
        c.bench_function(&format!("import pipedream {net}"), |b| {
            b.iter(|| import_pipedream(black_box(&path), None).expect("profile imports"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
