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
            max_micro_batches: 16,
            under_budgets: false,
        })
    );
    let under = with_optimum("time_limit = \"2s\"\nunder_budgets = true").unwrap();
    assert!(under.optimum.unwrap().under_budgets);
    let e = with_optimum("time_limit = \"2s\"\nunder_budgets = 1").unwrap_err();
    assert_eq!(e.source, "x.toml");
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

/// A configuration of the toy chain (24 layers): `gpus` GPUs holding `per_gpu` stages
/// each, N = `n` micro-batches of one sample, free transfers, the optimum of each placement
/// within 20 s, also under each of `budgets`.
fn toy_job(
    gpus: usize,
    per_gpu: usize,
    n: usize,
    approaches: &[&str],
    budgets: Vec<f64>,
) -> SyncJob {
    SyncJob {
        key: "k".into(),
        instance_path: concat!(env!("CARGO_MANIFEST_DIR"), "/instances/toy-chain.json").into(),
        stages: gpus,
        stages_per_worker: per_gpu,
        micro_batch_size: 1,
        micro_batches: n,
        recompute: false,
        bandwidth: None,
        approaches: approaches.iter().map(|a| a.to_string()).collect(),
        uses: vec![Use {
            study: "s".into(),
            samples: n,
            mini_batch: None,
        }],
        optimum: Some(OptimumSettings {
            time_limit_seconds: 20.0,
            max_micro_batches: 16,
            under_budgets: !budgets.is_empty(),
        }),
        optimum_budgets: budgets,
    }
}

/// A zero-bubble schedule is measured against the optimum with the backward split, the
/// others against the whole-backward one; the split optimum starts from both kinds of
/// schedules, so it is never above the whole one, and no schedule beats its optimum.
#[test]
fn zero_bubble_runs_are_measured_against_the_split_optimum() {
    let job = toy_job(3, 1, 3, &["dapple", "zb-h1", "zb-h2"], Vec::new());
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

/// Under a memory budget, the optimum is never below the one without a limit, never above
/// a schedule of its placement that fits the budget, and its streams fit; below the least
/// peak of any order it is proven infeasible. `best` measures its chosen run against it.
#[test]
fn the_optimum_under_a_budget_lies_between_the_free_optimum_and_every_fitting_run() {
    let job = |budgets: Vec<f64>| toy_job(3, 1, 6, &["gpipe", "dapple"], budgets);
    let free_record = run_configuration(&job(Vec::new())).unwrap();
    assert_eq!(free_record.optimum.len(), 1);
    let free = &free_record.optimum[0];
    assert_eq!(free.status, "optimal", "{free:?}");
    let (free_time, free_peak) = (free.optimum_seconds.unwrap(), free.peak_memory_max.unwrap());
    let least = free_record
        .rows
        .iter()
        .map(|r| r.peak_memory_max)
        .fold(f64::INFINITY, f64::min);
    // The free optimum's own peak; DAPPLE's (below it here); 0.9 of DAPPLE's, where no
    // schedule of the registry fits and the optimum is longer; one byte.
    let binding = 0.9 * least;
    let budgets = vec![free_peak, least, binding, 1.0];
    let record = run_configuration(&job(budgets.clone())).unwrap();
    assert_eq!(record.optimum.len(), 1 + budgets.len());
    let under = |budget: f64| {
        record
            .optimum
            .iter()
            .find(|o| o.memory_budget == Some(budget))
            .unwrap()
    };
    assert_eq!(under(1.0).status, "infeasible", "{:?}", under(1.0));
    assert!(under(1.0).optimum_seconds.is_none());
    for &budget in &budgets[..3] {
        let o = under(budget);
        assert_eq!(o.status, "optimal", "{o:?}");
        let t = o.optimum_seconds.unwrap();
        assert!(t >= free_time * (1.0 - 1e-9), "{t} below {free_time}");
        assert!(o.peak_memory_max.unwrap() <= budget * (1.0 + 1e-9), "{o:?}");
        for r in record.rows.iter().filter(|r| r.peak_memory_max <= budget) {
            assert!(
                r.makespan_seconds >= t * (1.0 - 1e-9),
                "{} beats {t}",
                r.schedule
            );
        }
        let best = best_rows(&record.rows, &record.optimum, &[budget], &["dapple".into()]);
        match best[0].ratio_to_optimum_under_budget {
            Some(ratio) => assert!(ratio >= 1.0 - 1e-9, "{:?}", best[0]),
            None => assert!(best[0].schedule.is_none(), "{:?}", best[0]),
        }
    }
    // Each optimum names the fastest run of its placement within its budget, never faster.
    for o in &record.optimum {
        let fitting = |r: &&SyncRow| o.memory_budget.is_none_or(|m| r.peak_memory_max <= m);
        let fastest = record
            .rows
            .iter()
            .filter(fitting)
            .map(|r| r.makespan_seconds);
        assert_eq!(
            o.fastest_schedule_seconds,
            fastest.reduce(f64::min),
            "{o:?}"
        );
        if let Some(ratio) = o.fastest_ratio_to_optimum {
            assert!(ratio >= 1.0 - 1e-9, "{o:?}");
        }
    }
    // The free optimum fits its own peak: taken as it is, without a solve.
    assert_eq!(under(free_peak).optimum_seconds, Some(free_time));
    assert_eq!(under(free_peak).solve_seconds, 0.0);
    // At 0.9 of DAPPLE's peak the limit binds: no registered schedule fits, and the
    // optimum is longer than without a limit.
    assert!(record.rows.iter().all(|r| r.peak_memory_max > binding));
    assert!(under(binding).optimum_seconds.unwrap() > free_time * 1.01);
}

/// A schedule with v stages per GPU runs on the sweep's D GPUs with the chain cut into v D
/// stages: its rows have D workers' peaks, its throughput per GPU is over D, and it is
/// measured against the optimum of its own placement (interleaved, V-shaped with the
/// backward split), never beating it. A chain shorter than v D stages gives no run, counted
/// as refused shapes.
#[test]
fn schedules_with_several_stages_per_gpu_run_on_the_same_gpus() {
    let job = |gpus: usize| toy_job(gpus, 2, 4, &["interleaved-2", "zb-v"], Vec::new());
    let record = run_configuration(&job(2)).unwrap();
    assert_eq!(record.rows.len(), 2, "{:?}", record.rows);
    for r in &record.rows {
        assert_eq!((r.stages, r.model_stages), (2, 4));
        assert_eq!(r.peak_memory.len(), 2, "{}: one peak per GPU", r.schedule);
        assert!((r.samples_per_second_per_gpu * 2.0 - r.samples_per_second).abs() < 1e-9);
        let expected = match r.schedule.as_str() {
            "interleaved-2" => "interleaved-2",
            "zb-v" => "v-shape+split",
            other => panic!("unexpected schedule {other}"),
        };
        assert_eq!(r.optimum_placement.as_deref(), Some(expected));
        assert!(r.ratio_to_optimum.unwrap() >= 1.0 - 1e-9, "{r:?}");
    }
    for o in &record.optimum {
        assert_eq!((o.stages, o.model_stages), (2, 4));
        assert_eq!(o.status, "optimal", "{o:?}");
    }
    // 2 x 13 stages of a 24-layer chain: nothing runs, both approaches refused.
    let short = run_configuration(&job(13)).unwrap();
    assert!(short.rows.is_empty() && short.optimum.is_empty());
    assert_eq!(short.skipped, 2);
}

/// The grid has a configuration per stages per worker of its approaches, each with only
/// those approaches and a key of its own.
#[test]
fn jobs_group_the_approaches_by_stages_per_gpu() {
    let text = |schedules: &str| {
        format!(
            "name = \"t\"\nmicro_batch_sizes = [1]\nmemory = [\"16GiB\"]\nrecompute = [false]\n\
             schedules = [{schedules}]\n[[case]]\ninstance = \"{}\"\nstudy = \"s\"\n\
             stages = [2]\nsamples = [4]\n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/instances/toy-chain.json")
        )
    };
    let parse = |schedules: &str| {
        let exp = SyncExperiment::parse(&text(schedules), Path::new("t.toml")).unwrap();
        jobs(&exp).unwrap()
    };
    let mixed = parse("\"dapple\", \"interleaved-2\", \"zb-v\", \"interleaved-4\"");
    let grouped: Vec<(usize, Vec<String>)> = mixed
        .iter()
        .map(|j| (j.stages_per_worker, j.approaches.clone()))
        .collect();
    assert_eq!(
        grouped,
        vec![
            (1, vec!["dapple".to_string()]),
            (2, vec!["interleaved-2".to_string(), "zb-v".to_string()]),
            (4, vec!["interleaved-4".to_string()]),
        ]
    );
    assert_eq!(mixed[1].model_stages(), 4);
    assert_eq!(mixed[2].model_stages(), 8);
    let keys: std::collections::HashSet<&String> = mixed.iter().map(|j| &j.key).collect();
    assert_eq!(keys.len(), 3);
}
