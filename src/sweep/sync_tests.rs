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

/// A zero-bubble schedule is measured against the optimum with the backward split, the
/// others against the whole-backward one; the split optimum starts from both kinds of
/// schedules, so it is never above the whole one, and no schedule beats its optimum.
#[test]
fn zero_bubble_runs_are_measured_against_the_split_optimum() {
    let job = SyncJob {
        key: "k".into(),
        instance_path: concat!(env!("CARGO_MANIFEST_DIR"), "/instances/toy-chain.json").into(),
        stages: 3,
        micro_batch_size: 1,
        micro_batches: 3,
        recompute: false,
        bandwidth: None,
        approaches: vec!["dapple".into(), "zb-h1".into(), "zb-h2".into()],
        uses: vec![Use {
            study: "s".into(),
            samples: 3,
            mini_batch: None,
        }],
        optimum: Some(OptimumSettings {
            time_limit_seconds: 20.0,
            max_micro_batches: 16,
        }),
    };
    let record = run_configuration(&job).unwrap();
    let optimum = |name: &str| {
        let o = record
            .optimum
            .iter()
            .find(|o| o.placement == name)
            .unwrap_or_else(|| panic!("no {name} optimum in {:?}", record.optimum));
        assert_eq!(o.status, "optimal", "{o:?}");
        o.optimum_seconds.unwrap()
    };
    let (whole, split) = (optimum("one-direction"), optimum("one-direction+split"));
    assert!(
        split <= whole * (1.0 + 1e-9),
        "split {split} above whole {whole}"
    );
    for r in &record.rows {
        let expected = if r.schedule.starts_with("zb-") {
            "one-direction+split"
        } else {
            "one-direction"
        };
        assert_eq!(
            r.optimum_placement.as_deref(),
            Some(expected),
            "{}",
            r.schedule
        );
        assert!(r.ratio_to_optimum.unwrap() >= 1.0 - 1e-9, "{}", r.schedule);
    }
    assert_eq!(record.rows.len(), 3);
}
