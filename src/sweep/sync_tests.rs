//! Tests of the synchronous sweep: its experiment files, its closed forms.

use super::*;

#[test]
fn errors_name_the_field() {
    let p = Path::new("x.toml");
    let e = SyncExperiment::parse(
        "name = \"x\"\nmemory = [\"32GiB\"]\nmicro_batch_sizes = [1]\nschedules = [\"nope\"]\n[[case]]\ninstance = \"a.json\"\nstudy = \"s\"\nstages = [4]\nsamples = [8]\n",
        p,
    )
    .unwrap_err();
    assert_eq!(e.field, "schedules[0]");
    let e = SyncExperiment::parse(
        "name = \"x\"\nmemory = [\"32GiB\"]\nmicro_batch_sizes = [1]\nschedules = [\"gpipe\"]\n[[case]]\ninstance = \"a.json\"\nstudy = \"s\"\nstages = [4]\n",
        p,
    )
    .unwrap_err();
    assert_eq!(e.field, "case[0]");
    // The instance is read when the file loads: a missing one names the case.
    let e = SyncExperiment::parse(
        "name = \"x\"\nmemory = [\"32GiB\"]\nmicro_batch_sizes = [1]\nschedules = [\"gpipe\"]\n[[case]]\ninstance = \"a.json\"\nstudy = \"s\"\nstages = [4]\nsamples = [8]\n",
        p,
    )
    .unwrap_err();
    assert_eq!(
        (e.source.as_str(), e.field.as_str()),
        ("x.toml", "case[0].instance")
    );
    let toy = concat!(env!("CARGO_MANIFEST_DIR"), "/instances/toy-chain.json");
    let with_optimum = |table: &str| {
        SyncExperiment::parse(
            &format!("name = \"x\"\nmemory = [\"32GiB\"]\nmicro_batch_sizes = [1]\nschedules = [\"gpipe\"]\n[optimum]\n{table}\n[[case]]\ninstance = \"{toy}\"\nstudy = \"s\"\nstages = [4]\nsamples = [8]\n"),
            p,
        )
    };
    let ok = with_optimum("time_limit = \"2s\"").unwrap();
    assert_eq!(
        ok.optimum,
        Some(OptimumSettings {
            time_limit_seconds: 2.0,
            max_micro_batches: 16
        })
    );
    let e = with_optimum("time_limit = \"2s\"\nmax_micro_batches = 0").unwrap_err();
    assert_eq!(e.field, "optimum.max_micro_batches");
    let e = with_optimum("time_limit = \"soon\"").unwrap_err();
    assert_eq!(e.field, "optimum.time_limit");
    assert!(with_optimum("limit = \"2s\"").is_err());
}

#[test]
fn closed_forms_at_n_equals_d() {
    // Chimera's Table I, GEMS's, MixPipe eq. (1) at K = D equal Chimera's 5D - 4 count.
    use crate::schedule::sync::{chimera::CHIMERA, mixpipe::MIXPIPE};
    assert_eq!(CHIMERA.kind().paper_bubble_ratio(4, 4), Some(0.2));
    let m = MIXPIPE.with_k_gamma(4, 0).paper_bubble_ratio(4, 4).unwrap();
    assert!((m - 4.0 / 16.0).abs() < 1e-12);
    assert_eq!(CHIMERA.kind().paper_bubble_ratio(4, 8), None);
}
