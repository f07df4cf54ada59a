//! PipeDream's DP (Narayanan et al., SOSP 2019, section 3.1) against an independent
//! exhaustive search over small chains, and the `pipedream` planner through the registry
//! and the judge.

use crate::support::pipeopt;
use pipeopt::algorithm::{planner, run, Problem};
use pipeopt::model::{Instance, Layer, Platform, Status};
use pipeopt::partition::pipedream::{partition, PipeDreamConfig};
use proptest::prelude::*;

fn instance(layers: &[(f64, f64, f64)]) -> Instance {
    Instance::chain(
        "chain",
        3.0,
        layers
            .iter()
            .enumerate()
            .map(|(i, &(fwd, bwd, out))| Layer::new(format!("l{}", i + 1), fwd, bwd, 1.0, out))
            .collect(),
    )
}

/// The best straight pipeline by brute force over every set of cuts: a stage costs its
/// forward plus backward time, a cut after layer k costs 2 a(k) / B (activation forward,
/// gradient backward, compression ratio 1); the objective is the largest of these. With
/// `exactly`, the chain is cut into exactly `p` stages (every machine used).
fn brute_force(inst: &Instance, p: usize, bandwidth: f64, exactly: bool) -> f64 {
    let l = inst.layers.len();
    let mut best = f64::INFINITY;
    for mask in 0u32..(1 << (l - 1)) {
        let stages = mask.count_ones() as usize + 1;
        if stages > p || (exactly && stages != p) {
            continue;
        }
        let (mut worst, mut acc) = (0.0f64, 0.0);
        for (k, layer) in inst.layers.iter().enumerate() {
            acc += layer.fwd + layer.bwd;
            let cut = k + 1 < l && mask & (1 << k) != 0;
            if cut || k + 1 == l {
                worst = worst.max(acc);
                acc = 0.0;
            }
            if cut {
                worst = worst.max(2.0 * layer.out / bandwidth);
            }
        }
        best = best.min(worst);
    }
    best
}

fn chain() -> impl Strategy<Value = Vec<(f64, f64, f64)>> {
    proptest::collection::vec((0.1..5.0f64, 0.1..10.0f64, 0.0..40.0f64), 2..=10)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn straight_dp_equals_brute_force(layers in chain(), p in 1usize..6, bandwidth in 1.0..20.0f64) {
        let inst = instance(&layers);
        let l = layers.len();
        let mut config = PipeDreamConfig::straight(p, bandwidth);
        let want = brute_force(&inst, p, bandwidth, true);
        match partition(&inst, &config) {
            Ok(r) => prop_assert!((r.objective - want).abs() <= 1e-9 * want, "{} vs {want}", r.objective),
            Err(_) => prop_assert!(p > l && want.is_infinite()),
        }
        config.fewer_machines = true;
        let want = brute_force(&inst, p, bandwidth, false);
        let r = partition(&inst, &config).unwrap();
        prop_assert!((r.objective - want).abs() <= 1e-9 * want, "{} vs {want}", r.objective);
        prop_assert!(r.processors_used <= p);
    }

    /// Replication may only help: its space contains every straight pipeline.
    #[test]
    fn replication_never_hurts(layers in chain(), p in 1usize..6, bandwidth in 1.0..20.0f64) {
        let inst = instance(&layers);
        let mut config = PipeDreamConfig::straight(p, bandwidth);
        config.fewer_machines = true;
        let straight = partition(&inst, &config).unwrap().objective;
        config.straight = false;
        let replicated = partition(&inst, &config).unwrap();
        prop_assert!(replicated.objective <= straight * (1.0 + 1e-9));
        let used: usize = replicated.stages.iter().map(|s| s.replicas).sum();
        prop_assert!(used <= p);
    }
}

/// Through the registry: the plan is judged valid and its planned period is the DP's
/// objective on the platform (memory term and fewer machines allowed, as the planner says).
#[test]
fn pipedream_planner_plans_are_valid_and_report_the_dp_objective() {
    let inst = instance(&[
        (1.0, 2.0, 4.0),
        (2.0, 3.0, 2.0),
        (1.5, 2.5, 6.0),
        (3.0, 1.0, 1.0),
    ]);
    let platform = Platform::new(3, 1e6, 8.0);
    let mut config = PipeDreamConfig::straight(3, 8.0);
    config.memory = Some(1e6);
    config.fewer_machines = true;
    let dp = partition(&inst, &config).unwrap().objective;
    let p = planner("pipedream", &serde_json::Value::Null).unwrap();
    let (plan, report) = run(
        p.as_ref(),
        &Problem {
            instance: &inst,
            platform: &platform,
        },
    )
    .unwrap();
    assert!(plan.is_some());
    assert_eq!(report.status, Status::Valid, "{:?}", report.messages);
    assert_eq!(report.planned_period, Some(dp));
    // 1F1B* needs at least the bottleneck stage's load.
    assert!(report.period.unwrap() + 1e-9 >= dp);
}

/// The `pipedream` planner's report for `instance` on `p` processors.
fn plan_pipedream(instance: &std::path::Path, p: usize, memory: &str) -> serde_json::Value {
    let out = pipeopt()
        .args(["plan", "--instance"])
        .arg(instance)
        .args(["--processors", &p.to_string(), "--memory", memory])
        .args([
            "--bandwidth",
            "12GB/s",
            "--algorithm",
            "pipedream",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A one-layer chain has a plan on any number of processors: it uses one of them.
#[test]
fn pipedream_plans_a_one_layer_chain_on_several_processors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.json");
    std::fs::write(
        &path,
        serde_json::to_string(&instance(&[(1.0, 2.0, 4.0)])).unwrap(),
    )
    .unwrap();
    for p in [1, 2, 5] {
        let r = plan_pipedream(&path, p, "1GiB");
        assert_eq!(r["status"], "valid", "P = {p}: {r}");
        assert_eq!(r["period"], 3.0, "P = {p}: {r}");
    }
}

/// PipeDream's memory term counts in-flight batches over the processors the partition
/// uses, not the whole budget: a plan found on 3 processors stays available on 4 to 64.
#[test]
fn pipedream_memory_term_counts_the_processors_used() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("instances/resnet50-1000-b8-h100.json");
    let three = plan_pipedream(&path, 3, "8GiB");
    assert_eq!(three["status"], "valid", "{three}");
    let planned = |r: &serde_json::Value| r["planned_period"].as_f64().unwrap();
    for p in [4, 8, 64] {
        let r = plan_pipedream(&path, p, "8GiB");
        assert_eq!(r["status"], "valid", "P = {p}: {r}");
        // The budgets 1..=3 are among those searched.
        assert!(planned(&r) <= planned(&three), "P = {p}: {r}");
    }
}
