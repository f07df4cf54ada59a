//! MILP benchmarks: the fixed-allocation scheduling search on a small non-contiguous
//! allocation and on a contiguous one, and the exact contiguous optimum.
//! Run: `cargo bench --bench benches -- milp`.

use criterion::Criterion;
use pipeopt::milp::{contiguous_optimum, schedule_allocation, MilpOptions};
use pipeopt::model::{Allocation, Instance, Layer, Platform, Stage};

fn chain(seed: u64, l: usize) -> Instance {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) % 1000) as f64 / 1000.0
    };
    let layers = (0..l)
        .map(|i| {
            Layer::new(
                format!("l{}", i + 1),
                0.5 + next(),
                1.0 + 2.0 * next(),
                1.0 + 4.0 * next(),
                1.0 + 9.0 * next(),
            )
        })
        .collect();
    Instance::chain(format!("chain{seed}"), 5.0, layers)
}

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("milp");
    group.sample_size(10);
    let opts = MilpOptions {
        node_limit: Some(2_000),
        ..MilpOptions::default()
    };
    let inst = chain(1, 6);
    let contiguous = Allocation::from_boundaries(&[2, 4, 6]);
    let p3 = Platform::new(3, 80.0, 6.0);
    group.bench_function("schedule_allocation contiguous L=6 P=3", |b| {
        b.iter(|| schedule_allocation(&inst, &p3, &contiguous, &opts).unwrap())
    });
    let general = Allocation::new(vec![
        Stage {
            first: 1,
            last: 2,
            processor: 0,
        },
        Stage {
            first: 3,
            last: 4,
            processor: 1,
        },
        Stage {
            first: 5,
            last: 5,
            processor: 0,
        },
        Stage {
            first: 6,
            last: 6,
            processor: 1,
        },
    ]);
    let p2 = Platform::new(2, 150.0, 6.0);
    group.bench_function("schedule_allocation 4 stages on 2 processors", |b| {
        b.iter(|| schedule_allocation(&inst, &p2, &general, &opts).unwrap())
    });
    let long = chain(2, 24);
    let p4 = Platform::new(4, 1e4, 6.0);
    let r = contiguous_optimum(&long, &p4, None).unwrap();
    assert!(r.best.is_some() && r.complete);
    eprintln!(
        "contiguous_optimum L=24 P=4: {} partitions evaluated",
        r.leaves
    );
    group.bench_function("contiguous_optimum L=24 P=4", |b| {
        b.iter(|| contiguous_optimum(&long, &p4, None).unwrap())
    });
    group.finish();
}
