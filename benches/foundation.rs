//! Measurements of the foundation: the judge and 1F1B* on densenet121 with P = 8 (the
//! import of the profiles is timed by `benches/import.rs`). Run: `cargo bench --bench
//! benches -- foundation`.

use criterion::{black_box, Criterion};
use pipeopt::io::pipedream::import_pipedream;
use pipeopt::judge::judge;
use pipeopt::model::{Allocation, Platform};
use pipeopt::schedule::one_f_one_b_star::{min_period_fitting, one_f_one_b_star};

use pipeopt::io::pipedream::shared_profile as profile;

/// Stages of nearly equal compute: stage i ends at the first layer where the prefix of
/// U reaches i/P of the total.
fn even_partition(inst: &pipeopt::model::Instance, p: usize) -> Allocation {
    let s = inst.sums();
    let total = s.u(1, inst.len());
    let mut lasts = Vec::new();
    for l in 1..=inst.len() {
        let k = lasts.len() + 1;
        if k < p && s.u(1, l) >= total * k as f64 / p as f64 && inst.len() - l >= p - k {
            lasts.push(l);
        }
    }
    lasts.push(inst.len());
    Allocation::from_boundaries(&lasts)
}

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("foundation");
    let inst = import_pipedream(&profile("densenet121"), None).unwrap();
    let alloc = even_partition(&inst, 8);
    let plat = Platform::new(8, 64.0 * 1073741824.0, 12e9);
    let plan = min_period_fitting(&inst, &plat, &alloc).unwrap();
    assert!(judge(&inst, &plat, &alloc, &plan.pattern).valid);
    group.bench_function("judge densenet121 P=8 (1F1B*)", |b| {
        b.iter(|| judge(black_box(&inst), &plat, &alloc, black_box(&plan.pattern)))
    });
    group.bench_function("1F1B* min period densenet121 P=8", |b| {
        b.iter(|| min_period_fitting(black_box(&inst), &plat, &alloc).unwrap())
    });
    let t = plan.pattern.period;
    group.bench_function("1F1B* pattern densenet121 P=8", |b| {
        b.iter(|| one_f_one_b_star(black_box(&inst), &plat, &alloc, t).unwrap())
    });
    group.finish();
}
