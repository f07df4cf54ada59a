//! The libtorch executor on the CPU (feature `torch`): 1F1B* plans for a small network on
//! 2, 3 and 4 processors under several memory limits; gradients equal the sequential run's,
//! measured live stashes and memory peaks equal the judge's, broken schedules are caught.

use super::plan_file;
use crate::exec::{
    execute, instance_for, mlp, mlp_batches, replayed_period, ExecError, ExecOptions, Fault,
    Network,
};
use crate::judge::judge;
use crate::model::{Allocation, BatchGraph, Instance, Plan, Platform};
use crate::schedule::one_f_one_b_star::{min_period_fitting, predicted_memory};
use tch::Device;

const LAYERS: usize = 8;
const WIDTH: i64 = 24;
const ROWS: i64 = 8;

fn network() -> (Network, Instance) {
    let net = mlp(LAYERS, WIDTH, 3);
    let sample = mlp_batches(1, ROWS, WIDTH, 0, Device::Cpu).remove(0).input;
    let instance = instance_for(&net, &sample, 1e-6);
    (net, instance)
}

fn starts(p: usize) -> Vec<usize> {
    (0..p).map(|i| i * LAYERS / p).collect()
}

/// 1F1B* plans at the smallest period that fits: memory without limit, then limits that cap
/// every stage's group at 2 and at 1 (distinct plans only).
fn plans(instance: &Instance, p: usize) -> Vec<(Plan, Vec<usize>)> {
    let alloc = Allocation::from_starts(&starts(p), instance.len()).unwrap();
    // Bandwidth such that a transfer takes about a tenth of a layer's forward pass.
    let bw = instance.a(1) / (0.1 * instance.layer(1).fwd);
    let loose = Platform::new(p, 1e15, bw);
    let free = min_period_fitting(instance, &loose, &alloc).unwrap();
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for cap in [usize::MAX, 2, 1] {
        let groups: Vec<usize> = free.stage_groups.iter().map(|&g| g.min(cap)).collect();
        let need = predicted_memory(instance, &loose, &alloc, &groups);
        let m = need.iter().copied().fold(0.0, f64::max) * (1.0 + 1e-9);
        let platform = Platform::new(p, m, bw);
        let r = min_period_fitting(instance, &platform, &alloc).unwrap();
        if seen.contains(&r.stage_groups) {
            continue;
        }
        seen.push(r.stage_groups.clone());
        let plan = plan_file(instance, platform, &alloc, r.pattern, "1f1b*");
        out.push((plan, r.stage_groups));
    }
    out
}

fn options(batches: usize) -> ExecOptions {
    ExecOptions {
        batches,
        ..Default::default()
    }
}

#[test]
fn one_f_one_b_star_plans_match_the_model_and_the_sequential_gradients() {
    let (net, instance) = network();
    let batches = 14;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let mut some_group_above_one = false;
    let mut plans_run = 0;
    for p in [2, 3, 4] {
        let ps = plans(&instance, p);
        assert!(
            ps.len() >= 2,
            "P = {p}: the memory limits should give distinct plans"
        );
        for (plan, groups) in ps {
            plans_run += 1;
            some_group_above_one |= groups.iter().any(|&g| g > 1);
            let j = judge(
                &plan.instance,
                &plan.platform,
                plan.allocation().unwrap(),
                plan.pattern.as_ref().unwrap(),
            );
            assert!(j.valid, "{:?}", j.violations);
            let r = execute(&plan, &net, &data, &options(batches)).unwrap();
            let g = r.gradients.as_ref().unwrap();
            assert!(
                g.passed,
                "P = {p}, groups {groups:?}: gradient error {} (loss {}) at {:?}",
                g.max_relative_error, g.max_loss_relative_error, g.worst
            );
            assert!(r.losses.iter().all(|l| l.is_finite()));
            eprintln!(
                "P = {p} groups {groups:?}: T = {:.3e}, replayed (measured) {:.3e}, gradient error {:.2e}",
                r.predicted_period, r.replayed_period, g.max_relative_error
            );
            // The report is the CLI's JSON output: it serializes and reads back.
            let json = serde_json::to_string(&r).unwrap();
            let back: crate::exec::ExecReport = serde_json::from_str(&json).unwrap();
            assert_eq!(back.losses.len(), r.losses.len());
            for (a, b) in back.losses.iter().zip(&r.losses) {
                assert!((a - b).abs() <= 1e-12 * b.abs());
            }
            for m in &r.processors {
                // One stage per processor: its live batches peak at its 1F1B* group.
                let (&s, &live) = m.max_live.iter().next().unwrap();
                assert_eq!(live, groups[s], "P = {p}, stage {s}");
                // Exact sizes: the measured peak is the judge's.
                let rel = (m.measured_peak - j.peak_memory[m.processor]).abs()
                    / j.peak_memory[m.processor];
                assert!(
                    rel < 1e-9,
                    "P = {p}, processor {}: measured {} predicted {}",
                    m.processor,
                    m.measured_peak,
                    j.peak_memory[m.processor]
                );
                assert_eq!(m.predicted_peak, j.peak_memory[m.processor]);
            }
            // Replayed with the model's own durations, the pattern needs at most its period.
            assert!(r.replayed_period_model <= r.predicted_period * (1.0 + 1e-6));
            assert!(r.replayed_period.is_finite() && r.replayed_period > 0.0);
            assert!(r.ops.iter().all(|o| o.samples == batches));
        }
    }
    assert!(
        some_group_above_one,
        "no plan kept more than one batch live"
    );
    assert!(plans_run >= 6);
}

fn a_plan_with_groups(p: usize) -> Plan {
    let (_, instance) = network();
    let (plan, groups) = plans(&instance, p).remove(0);
    assert!(groups[0] > 1);
    plan
}

#[test]
fn backward_with_the_wrong_weight_version_is_caught() {
    let (net, _) = network();
    let plan = a_plan_with_groups(3);
    let batches = 14;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let good = execute(&plan, &net, &data, &options(batches)).unwrap();
    assert!(good.gradients.unwrap().passed);
    let mut o = options(batches);
    o.fault = Some(Fault::NewestVersionInBackward { stage: 0 });
    let bad = execute(&plan, &net, &data, &o).unwrap();
    let g = bad.gradients.unwrap();
    eprintln!("wrong version: gradient error {:.2e}", g.max_relative_error);
    assert!(!g.passed, "error {}", g.max_relative_error);
    // The wrong version only changes the first stage's weight gradients.
    assert!(g.worst.unwrap().1 <= plan.placement.stages()[0].last);
}

#[test]
fn a_swapped_batch_is_caught() {
    let (net, _) = network();
    let plan = a_plan_with_groups(2);
    let batches = 6;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let mut o = options(batches);
    o.fault = Some(Fault::WrongBatchInput);
    let g = execute(&plan, &net, &data, &o).unwrap().gradients.unwrap();
    assert!(!g.passed);
    assert!(g.max_loss_relative_error > 1e-3);
}

#[test]
fn a_pattern_that_breaks_a_dependency_is_refused() {
    let (net, _) = network();
    let mut plan = a_plan_with_groups(2);
    let batches = 6;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    // F of stage 1 one period earlier: before its input arrives.
    let pat = plan.pattern.as_mut().unwrap();
    let f1 = pat
        .ops
        .iter_mut()
        .find(|o| o.kind == crate::model::OpKind::F && o.stage == 1)
        .unwrap();
    f1.shift -= 1;
    match execute(&plan, &net, &data, &options(batches)) {
        Err(ExecError::Schedule(m)) => assert!(m.contains("F1"), "{m}"),
        other => panic!(
            "expected a schedule error, got {:?}",
            other.map(|r| r.replayed_period)
        ),
    }
}

#[test]
fn a_window_too_small_for_the_pattern_is_refused() {
    let (net, instance) = network();
    // The loosest 4-processor plan: stage 0 keeps more than two batches live, so with
    // windows of one batch its F of batch b+1 needs W_{b+1} before batch b-1 is done.
    let (plan, groups) = plans(&instance, 4).remove(0);
    assert!(groups[0] > 2, "{groups:?}");
    let batches = 10;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let mut o = options(batches);
    o.window = Some(1);
    assert!(matches!(
        execute(&plan, &net, &data, &o),
        Err(ExecError::Versions(_))
    ));
}

#[test]
fn replayed_period_scales_with_durations_and_is_at_least_the_busiest_resource() {
    let (_, instance) = network();
    let (plan, _) = plans(&instance, 3).remove(0);
    let graph = BatchGraph::new(&plan.instance, &plan.platform, plan.allocation().unwrap());
    let pattern = plan.pattern.as_ref().unwrap();
    let d: Vec<f64> = graph.ops.iter().map(|o| o.duration).collect();
    let t1 = replayed_period(&graph, pattern, &d).unwrap();
    assert!(t1 <= pattern.period * (1.0 + 1e-6));
    let d2: Vec<f64> = d.iter().map(|x| 2.0 * x).collect();
    let t2 = replayed_period(&graph, pattern, &d2).unwrap();
    assert!((t2 - 2.0 * t1).abs() <= 1e-6 * t2);
    // Slow down one operation of processor 0: the period grows at least to its busy time.
    let mut d3 = d.clone();
    let i = graph.ops.iter().position(|o| o.id.stage == 0).unwrap();
    d3[i] += 10.0 * pattern.period;
    let busy: f64 = graph
        .ops
        .iter()
        .zip(&d3)
        .filter(|(o, _)| o.resource == graph.ops[i].resource)
        .map(|(_, x)| x)
        .sum();
    let t3 = replayed_period(&graph, pattern, &d3).unwrap();
    assert!(t3 >= busy * (1.0 - 1e-9), "{t3} < {busy}");
}

#[test]
fn any_window_at_least_the_default_gives_the_sequential_gradients() {
    let (net, instance) = network();
    let (plan, _) = plans(&instance, 3).remove(0);
    let batches = 13;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let m0 = crate::exec::default_window(plan.pattern.as_ref().unwrap());
    let mut finals = Vec::new();
    for m in [m0, m0 + 1, 2 * m0 + 1] {
        let mut o = options(batches);
        o.window = Some(m);
        let r = execute(&plan, &net, &data, &o).unwrap();
        assert_eq!(r.window, m);
        assert!(r.gradients.unwrap().passed, "window {m}");
        finals.push(r.losses);
    }
    // The window changes which versions batches use, hence the later losses.
    assert_ne!(finals[0], finals[2]);
}

/// One batch at a time: every operation of the batch graph back to back in dependency order
/// (valid for any allocation, including several stages on one processor).
fn sequential_pattern(graph: &BatchGraph) -> crate::model::Pattern {
    let n = graph.ops.len();
    let mut order = Vec::new();
    let mut done = vec![false; n];
    while order.len() < n {
        for i in 0..n {
            if !done[i] && graph.deps.iter().all(|&(u, v)| v != i || done[u]) {
                done[i] = true;
                order.push(i);
            }
        }
    }
    let mut t = 0.0;
    let mut ops = Vec::new();
    for i in order {
        ops.push(crate::model::PatternOp {
            kind: graph.ops[i].id.kind,
            stage: graph.ops[i].id.stage,
            start: t,
            shift: 0,
        });
        t += graph.ops[i].duration;
    }
    crate::model::Pattern { period: t, ops }
}

#[test]
fn non_contiguous_allocations_run_and_match() {
    let (net, instance) = network();
    let batches = 5;
    let data = mlp_batches(batches, ROWS, WIDTH, 100, Device::Cpu);
    let bw = instance.a(1) / (0.1 * instance.layer(1).fwd);
    // Stages on processors 0,1,0,1 (transfers everywhere) and 0,0,1 (no transfer after 0).
    for procs in [vec![0, 1, 0, 1], vec![0, 0, 1]] {
        let mut alloc = Allocation::from_starts(&starts(procs.len()), LAYERS).unwrap();
        for (s, &p) in alloc.stages.iter_mut().zip(&procs) {
            s.processor = p;
        }
        let platform = Platform::new(2, 1e15, bw);
        let graph = BatchGraph::new(&instance, &platform, &alloc);
        let pattern = sequential_pattern(&graph);
        let plan = plan_file(&instance, platform.clone(), &alloc, pattern, "sequential");
        let j = judge(&instance, &platform, &alloc, plan.pattern.as_ref().unwrap());
        assert!(j.valid, "{:?}", j.violations);
        let r = execute(&plan, &net, &data, &options(batches)).unwrap();
        assert!(r.gradients.unwrap().passed, "{procs:?}");
        assert_eq!(r.window, 1);
        for m in &r.processors {
            assert!(m.max_live.values().all(|&l| l == 1));
            let rel =
                (m.measured_peak - j.peak_memory[m.processor]).abs() / j.peak_memory[m.processor];
            assert!(rel < 1e-9, "{procs:?} processor {}", m.processor);
        }
    }
}

#[test]
fn the_cli_entry_point_runs_a_plan_for_the_builtin_network() {
    use crate::exec::{builtin_instance, execute_builtin, NetworkSpec};
    let instance = builtin_instance("mlp").unwrap();
    let (plan, _) = plans(&instance, 2).remove(0);
    let r = execute_builtin(&plan, &NetworkSpec::mlp(), Device::Cpu, 6).unwrap();
    assert!(r.gradients.unwrap().passed);
    assert_eq!(r.batches, 6);
    // A plan made for another network, an unknown network, no batch: errors, no panic.
    let (_, other) = network();
    let (wrong, _) = plans(&other, 2).remove(0);
    assert!(matches!(
        execute_builtin(&wrong, &NetworkSpec::mlp(), Device::Cpu, 6),
        Err(ExecError::Network(_))
    ));
    assert!(matches!(
        execute_builtin(
            &plan,
            &NetworkSpec {
                name: "resnet9000".into(),
                ..NetworkSpec::mlp()
            },
            Device::Cpu,
            6
        ),
        Err(ExecError::Network(_))
    ));
    assert!(execute_builtin(&plan, &NetworkSpec::mlp(), Device::Cpu, 0).is_err());
    assert!(crate::exec::parse_device("cuda:1").is_ok());
    assert!(crate::exec::parse_device("tpu").is_err());
}
