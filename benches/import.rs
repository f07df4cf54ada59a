//! Import (parse + linearize) of PipeDream's branching profiles.
//! Run: `cargo bench --bench import`.

use std::path::{Path, PathBuf};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pipeopt::io::import_pipedream;

fn profile(name: &str) -> PathBuf {
    let here = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    let shared = if here.exists() {
        here.to_path_buf()
    } else {
        PathBuf::from("/work/shared")
    };
    shared.join("pipedream-profiles").join(name)
}

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
