//! One verdict per plan: every plan file pipeopt writes passes its own `validate` with the
//! period and peaks its report gave (every registered algorithm, with and without full
//! duplex); Bi-Partition keeps its backward ranges in the file and charges a stage's stash
//! by the same rule as the judge; a reported lower bound never exceeds a plan of its space
//! the judge accepts; peaks are never negative.

use pipeopt::algorithm::{self, Algorithm, Problem};
use pipeopt::judge::{judge, judge_graph, judge_plan};
use pipeopt::model::bipartition::{batch_graph, BiStage};
use pipeopt::model::{
    Allocation, Instance, Layer, OpKind, Placement, PlacementKind, Plan, Platform, Status,
};
use pipeopt::schedule::one_f_one_b_star;

fn chain(fwd: &[f64], weights: &[f64], out: &[f64], stash: &[f64], overlap: &[f64]) -> Instance {
    Instance::chain(
        "chain",
        out[0],
        (0..fwd.len())
            .map(|i| Layer {
                stash_overlap: (overlap[i] > 0.0).then_some(overlap[i]),
                ..Layer::new(
                    format!("l{}", i + 1),
                    fwd[i],
                    2.0 * fwd[i],
                    weights[i],
                    out[i],
                )
                .with_stash(stash[i])
            })
            .collect(),
    )
}

/// Small chains: Bi-Partition's paper example (fwd 1, 3, 2, 3 ms; backward 2, 6, 4, 6 ms
/// after scaling the backward below), a chain with shared stashes, a chain whose
/// activations are heavy for the links.
fn instances() -> Vec<Instance> {
    let mut paper = chain(
        &[1e-3, 3e-3, 2e-3, 3e-3],
        &[1e3; 4],
        &[1e3; 4],
        &[1e3; 4],
        &[0.0; 4],
    );
    paper.name = "paper".into();
    let mut shared = chain(
        &[2e-3, 1e-3, 3e-3, 2e-3, 1e-3],
        &[2e6, 1e6, 3e6, 1e6, 2e6],
        &[4e6, 2e6, 3e6, 1e6, 1e6],
        &[8e6, 6e6, 9e6, 4e6, 3e6],
        &[3e6, 2e6, 4e6, 1e6, 0.0],
    );
    shared.name = "shared".into();
    let mut heavy = chain(
        &[2e-3, 2e-3, 2e-3, 2e-3, 2e-3],
        &[1e6; 5],
        &[3e7, 2e7, 3e7, 2e7, 1e6],
        &[3e7, 3e7, 2e7, 3e7, 2e7],
        &[0.0; 5],
    );
    heavy.name = "heavy".into();
    vec![paper, shared, heavy]
}

/// The options each algorithm reads: an even partition, a 20-s limit.
fn options(name: &str, layers: usize, p: usize) -> serde_json::Value {
    let a = Algorithm::parse(name).unwrap();
    let mut o = serde_json::Map::new();
    if a.reads("partition") {
        let starts: Vec<usize> = (0..p).map(|i| i * layers / p).collect();
        o.insert("partition".into(), starts.into());
    }
    if a.reads("time_limit") {
        o.insert("time_limit".into(), 20.0.into());
    }
    o.into()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// `pipeopt validate --json` (the binary) on a plan file: its verdict and period.
fn validate_with_the_binary(path: &std::path::Path) -> (bool, Option<f64>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pipeopt"))
        .arg("validate")
        .arg(path)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("validate printed {text:?}: {e}"));
    assert_eq!(out.status.success(), v["valid"] == true, "{text}");
    (v["valid"] == true, v["period"].as_f64(), text)
}

/// `pipeopt validate` (the binary, text and `--json`) on a plan file of status planned:
/// exit 0, "planned: allocation without a schedule".
fn validate_planned_with_the_binary(path: &std::path::Path, case: &str) {
    let run = |json: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_pipeopt"));
        c.arg("validate").arg(path);
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{case}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let text = run(false);
    assert!(
        text.starts_with("planned: allocation without a schedule"),
        "{case}: {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["status"], "planned", "{case}: {v}");
    assert_eq!(v["valid"], serde_json::Value::Null, "{case}: {v}");
}

/// Every registered algorithm (`Algorithm::ALL`: none needs a GPU; the general MILPs,
/// `ilp` and `madpipe`, on the 4-layer chain only, being seconds per case in a debug build)
/// on the small chains below, 2 and 3 processors, tight and loose memory, with and without
/// full duplex: its plan saved as `plan --out` saves it ([`Plan::save`]), read back as
/// `validate` reads it ([`Plan::load`]), judged ([`judge_plan`], what `validate` prints),
/// with the period and peaks the report gave; once per algorithm and chain the file also
/// goes through the binary's `validate --json`. The report names the placement of the
/// plan returned: an allocation for every algorithm but Bi-Partition, which returns its
/// own workers or PipeDream's straight pipeline.
#[test]
fn every_algorithms_plan_file_passes_validate_with_the_reported_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let mut split_plans = 0;
    let mut checked = 0;
    let mut by_binary = 0;
    let mut bipartition_kinds = std::collections::BTreeSet::new();
    for inst in instances() {
        let mut seen_by_binary = std::collections::BTreeSet::new();
        for p in [2, 3] {
            for memory in [64e6, 1e9] {
                for full_duplex in [false, true] {
                    let platform = Platform {
                        processors: p,
                        memory,
                        bandwidth: 1e10,
                        full_duplex,
                    };
                    for &algorithm in Algorithm::ALL {
                        let name = algorithm.name();
                        // The general MILPs take seconds per case in a debug build: the
                        // 4-layer chain only (their own tests cover more).
                        if matches!(name, "ilp" | "madpipe") && inst.name != "paper" {
                            continue;
                        }
                        let planner = algorithm.planner(&options(name, inst.len(), p)).unwrap();
                        let problem = Problem {
                            instance: &inst,
                            platform: &platform,
                        };
                        let case =
                            format!("{name} on {} P={p} M={memory} fd={full_duplex}", inst.name);
                        let (plan, report) = algorithm::run(planner.as_ref(), &problem).unwrap();
                        assert_ne!(
                            report.status,
                            Status::Error,
                            "{case}: {:?}",
                            report.messages
                        );
                        let Some(plan) = plan else {
                            assert_eq!(report.placement, None, "{case}");
                            continue;
                        };
                        let kind = plan.placement.kind();
                        assert_eq!(report.placement, Some(kind), "{case}");
                        assert_eq!(report.stages, plan.placement.stages(), "{case}");
                        if algorithm == Algorithm::BiPartition {
                            bipartition_kinds.insert(kind);
                        } else {
                            assert_eq!(kind, PlacementKind::Stages, "{case}");
                        }
                        let path = dir.path().join("plan.json");
                        plan.save(&path).unwrap();
                        let loaded = Plan::load(&path).unwrap();
                        assert_eq!(loaded, plan, "{case}: the file lost something");
                        if report.status == Status::Planned {
                            // An allocation without a pattern: `validate` says so, exit 0.
                            if seen_by_binary.insert((name, kind)) {
                                validate_planned_with_the_binary(&path, &case);
                                by_binary += 1;
                            }
                            continue;
                        }
                        let j = judge_plan(&loaded);
                        assert!(j.valid, "{case}: validate says {:?}", j.violations);
                        let period = report.period.unwrap();
                        assert!(close(j.period, period), "{case}: {} vs {period}", j.period);
                        assert_eq!(j.peak_memory.len(), report.peak_memory.len(), "{case}");
                        for (a, b) in j.peak_memory.iter().zip(&report.peak_memory) {
                            assert!(
                                close(*a, *b),
                                "{case}: peaks {:?} vs {:?}",
                                j.peak_memory,
                                report.peak_memory
                            );
                        }
                        if let Some(lb) = report.lower_bound {
                            assert!(
                                lb <= period * (1.0 + 1e-9),
                                "{case}: bound {lb} > period {period}"
                            );
                        }
                        if let Placement::BiPartition(w) = &plan.placement {
                            if w.iter().any(|s| s.forward != s.backward) {
                                split_plans += 1;
                            }
                        }
                        if seen_by_binary.insert((name, kind)) {
                            let (valid, t, text) = validate_with_the_binary(&path);
                            assert!(valid, "{case}: `pipeopt validate` says {text}");
                            assert!(close(t.unwrap(), period), "{case}: {text}");
                            by_binary += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 50, "{checked}");
    assert!(by_binary >= Algorithm::ALL.len(), "{by_binary}");
    assert!(
        split_plans > 0,
        "no Bi-Partition plan split a layer: the file field is untested"
    );
    assert_eq!(
        bipartition_kinds.len(),
        2,
        "Bi-Partition returned only {bipartition_kinds:?}: the choice of plan is untested"
    );
}

/// A plan file written before plans carried one placement value (the committed form:
/// `stages`, and `bipartition` for Bi-Partition's workers) still loads, into the same
/// placement, and is written back in the same form.
#[test]
fn plan_files_keep_their_written_form() {
    let inst = instances().remove(0);
    let platform = Platform::new(2, 1e9, 1e10);
    let workers = vec![
        BiStage {
            processor: 0,
            forward: (1, 2),
            backward: (1, 1),
        },
        BiStage {
            processor: 1,
            forward: (3, 4),
            backward: (2, 4),
        },
    ];
    let stages = serde_json::json!([
        {"first": 1, "last": 2, "processor": 0},
        {"first": 3, "last": 4, "processor": 1}
    ]);
    let base = serde_json::json!({
        "instance": inst,
        "platform": platform,
        "algorithm": "hand",
        "planned_period": null,
        "stages": stages,
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.json");
    // An allocation.
    std::fs::write(&path, base.to_string()).unwrap();
    let plan = Plan::load(&path).unwrap();
    assert_eq!(
        plan.placement,
        Placement::Stages(Allocation::from_starts(&[0, 2], 4).unwrap())
    );
    let written = serde_json::to_value(&plan).unwrap();
    assert_eq!(written["stages"], stages);
    assert!(written.get("bipartition").is_none());
    // Bi-Partition's workers: `stages` holds their forward ranges.
    let mut bi = base.clone();
    bi["bipartition"] = serde_json::to_value(&workers).unwrap();
    std::fs::write(&path, bi.to_string()).unwrap();
    let plan = Plan::load(&path).unwrap();
    assert_eq!(plan.placement, Placement::BiPartition(workers.clone()));
    let written = serde_json::to_value(&plan).unwrap();
    assert_eq!(written["stages"], stages);
    assert_eq!(
        written["bipartition"],
        serde_json::to_value(&workers).unwrap()
    );
    // A malformed worker list is named.
    bi["bipartition"][1]["backward"] = serde_json::json!([3, 4]);
    std::fs::write(&path, bi.to_string()).unwrap();
    let e = Plan::load(&path).unwrap_err();
    assert_eq!(e.field, "bipartition", "{e}");
}

/// A small example: stashes 100, 100, 100, layers 2 and 3 share 50, two workers with
/// layers 1 and 2..3. A stage of an allocation keeps 150 for layers 2..3; so must the
/// Bi-Partition worker with the same ranges.
#[test]
fn bipartition_charges_a_stages_stash_like_the_judge() {
    let inst = chain(
        &[1.0, 1.0, 1.0],
        &[10.0, 10.0, 10.0],
        &[10.0, 10.0, 10.0],
        &[100.0, 100.0, 100.0],
        &[0.0, 50.0, 0.0],
    );
    let platform = Platform::new(2, 1e6, 1e6);
    let allocation = Allocation::from_starts(&[0, 1], 3).unwrap();
    let workers = [
        BiStage {
            processor: 0,
            forward: (1, 1),
            backward: (1, 1),
        },
        BiStage {
            processor: 1,
            forward: (2, 3),
            backward: (2, 3),
        },
    ];
    let pattern = one_f_one_b_star::schedule(&inst, &platform, &allocation, None)
        .unwrap()
        .pattern;
    let reference = judge(&inst, &platform, &allocation, &pattern);
    assert!(reference.valid);
    // 3 W (60) + the input buffer 2 a(1) (20) + one live batch of 150.
    assert!(
        close(reference.peak_memory[1], 230.0),
        "{:?}",
        reference.peak_memory
    );
    let g = batch_graph(&inst, &platform, &workers).unwrap();
    let bi = judge_graph(&g, platform.memory, &pattern);
    assert!(bi.valid, "{:?}", bi.violations);
    assert_eq!(bi.peak_memory, reference.peak_memory);
}

/// `contiguous-opt`'s bound holds for every contiguous plan, full duplex included: the
/// scheduling MILP on each contiguous partition never beats it.
#[test]
fn the_contiguous_bound_holds_with_and_without_full_duplex() {
    for inst in instances() {
        let l = inst.len();
        for p in [2, 3] {
            for full_duplex in [false, true] {
                let platform = Platform {
                    processors: p,
                    memory: 1e9,
                    bandwidth: 1e10,
                    full_duplex,
                };
                let problem = Problem {
                    instance: &inst,
                    platform: &platform,
                };
                let opt =
                    algorithm::planner("contiguous-opt", &options("contiguous-opt", l, p)).unwrap();
                let (_, copt) = algorithm::run(opt.as_ref(), &problem).unwrap();
                assert_eq!(copt.status, Status::Valid, "{:?}", copt.messages);
                let bound = copt.lower_bound.unwrap();
                // Every contiguous partition into at most p stages.
                for mask in 0u32..(1 << (l - 1)) {
                    let mut starts = vec![0];
                    starts.extend((1..l).filter(|c| mask & (1 << (c - 1)) != 0));
                    if starts.len() > p {
                        continue;
                    }
                    let o = serde_json::json!({"partition": starts.clone(), "time_limit": 20.0});
                    let m = algorithm::planner("milp-schedule", &o).unwrap();
                    let (_, r) = algorithm::run(m.as_ref(), &problem).unwrap();
                    let Some(t) = r.period else { continue };
                    assert!(
                        bound <= t * (1.0 + 1e-9),
                        "{} P={p} fd={full_duplex}: contiguous-opt's bound {bound} above the \
                         valid contiguous plan {starts:?} at {t}",
                        inst.name
                    );
                }
            }
        }
    }
    // The case the rule is for (ResNet-50 measured on an H100, 8 processors, 16 GiB,
    // 12 GB/s, full duplex): the scheduling MILP's pattern of a contiguous partition
    // overlaps the cuts' two directions and beats the best 1F1B* plan.
    let inst = Instance::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/instances/resnet50-1000-b8-h100.json"
    )))
    .unwrap();
    let platform = Platform {
        processors: 8,
        memory: 16.0 * 1073741824.0,
        bandwidth: 12e9,
        full_duplex: true,
    };
    let problem = Problem {
        instance: &inst,
        platform: &platform,
    };
    let opt = algorithm::planner("contiguous-opt", &serde_json::Value::Null).unwrap();
    let (_, copt) = algorithm::run(opt.as_ref(), &problem).unwrap();
    let o = serde_json::json!({"partition": vec![0, 1, 2, 3, 4, 5, 8, 12], "time_limit": 60.0});
    let m = algorithm::planner("milp-schedule", &o).unwrap();
    let (_, r) = algorithm::run(m.as_ref(), &problem).unwrap();
    let t = r.period.unwrap();
    assert!(t < copt.period.unwrap(), "{t} vs {:?}", copt.period);
    assert!(
        copt.lower_bound.unwrap() <= t,
        "{:?} > {t}",
        copt.lower_bound
    );
}

#[test]
fn an_invalid_pattern_has_no_negative_peak() {
    let inst = instances().remove(1);
    let platform = Platform::new(3, 1e9, 1e10);
    let allocation = Allocation::from_starts(&[0, 2, 4], inst.len()).unwrap();
    let mut pattern = one_f_one_b_star::schedule(&inst, &platform, &allocation, None)
        .unwrap()
        .pattern;
    // Swap the shifts of each stage's F and B (a mutant the judge must reject).
    for s in 0..3 {
        let fi = pattern
            .ops
            .iter()
            .position(|o| o.kind == OpKind::F && o.stage == s)
            .unwrap();
        let bi = pattern
            .ops
            .iter()
            .position(|o| o.kind == OpKind::B && o.stage == s)
            .unwrap();
        let (hf, hb) = (pattern.ops[fi].shift, pattern.ops[bi].shift);
        pattern.ops[fi].shift = hb + 2;
        pattern.ops[bi].shift = hf;
        let j = judge(&inst, &platform, &allocation, &pattern);
        assert!(!j.valid);
        // Items held count zero or more batches: a peak is never below the weights and
        // buffers.
        let fixed = pipeopt::judge::static_memory(&inst, &platform, &allocation);
        for (p, (&m, &f)) in j.peak_memory.iter().zip(&fixed).enumerate() {
            assert!(
                m >= f && m >= 0.0,
                "processor {p}: peak {m} below its static {f}"
            );
        }
    }
}
