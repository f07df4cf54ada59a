//! The command line end to end: plan, validate, gantt, and the errors bad input gets.

use crate::support::pipeopt;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

/// A small chain written to a temporary directory.
fn toy_instance(dir: &Path) -> PathBuf {
    let layers: Vec<serde_json::Value> = (0..12)
        .map(|i| {
            let f = 0.002 + 0.001 * (i % 5) as f64;
            serde_json::json!({"name": format!("l{i}"), "fwd": f, "bwd": 2.0 * f,
                               "weights": 1e7 * (1 + i % 3) as f64, "out": 4e7 / (1 + i / 4) as f64})
        })
        .collect();
    let inst = serde_json::json!({"name": "toy", "input": 5e7, "layers": layers, "meta": {"source": "test"}});
    let path = dir.join("toy.json");
    std::fs::write(&path, serde_json::to_string_pretty(&inst).unwrap()).unwrap();
    path
}

fn plan_args(instance: &Path, out: &Path) -> Vec<String> {
    plan_args_with(instance, out, &["1f1b*", "--partition", "0,4,8"])
}

/// `plan` on 3 processors of 2 GiB at 12 GB/s with `algorithm` (its name, then its flags).
fn plan_args_with(instance: &Path, out: &Path, algorithm: &[&str]) -> Vec<String> {
    let platform = [
        "--processors",
        "3",
        "--memory",
        "2GiB",
        "--bandwidth",
        "12GB/s",
    ];
    ["plan", "--instance", instance.to_str().unwrap()]
        .into_iter()
        .chain(platform)
        .chain(["--algorithm"])
        .chain(algorithm.iter().copied())
        .chain(["--out", out.to_str().unwrap(), "--json"])
        .map(str::to_string)
        .collect()
}

#[test]
fn plan_validate_gantt_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    let out = pipeopt().args(plan_args(&inst, &plan)).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("exactly one JSON object");
    assert_eq!(report["status"], "valid");
    assert_eq!(report["peak_memory"].as_array().unwrap().len(), 3);
    let period = report["period"].as_f64().unwrap();

    let out = pipeopt()
        .args(["validate", plan.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["period"].as_f64().unwrap(), period);
    assert_eq!(v["peak_memory"], report["peak_memory"]);

    let svg = dir.path().join("plan.svg");
    pipeopt()
        .args([
            "gantt",
            plan.to_str().unwrap(),
            "--out",
            svg.to_str().unwrap(),
        ])
        .assert()
        .success();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg") && text.contains("processor 2") && text.contains("link 0-1"));
}

#[test]
fn an_invalid_plan_exits_1_and_names_the_operations() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    pipeopt().args(plan_args(&inst, &plan)).assert().success();
    // Start B of the last stage together with its F: the F -> B dependency breaks.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let ops = p["pattern"]["ops"].as_array_mut().unwrap();
    let f = ops
        .iter()
        .find(|o| o["kind"] == "F" && o["stage"] == 2)
        .unwrap()
        .clone();
    let b = ops
        .iter_mut()
        .find(|o| o["kind"] == "B" && o["stage"] == 2)
        .unwrap();
    b["start"] = f["start"].clone();
    b["shift"] = f["shift"].clone();
    std::fs::write(&plan, serde_json::to_string(&p).unwrap()).unwrap();
    pipeopt()
        .args(["validate", plan.to_str().unwrap()])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("F2 -> B2").and(predicate::str::contains("batch 0")));
    let out = pipeopt()
        .args(["validate", plan.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert!(!v["violations"].as_array().unwrap().is_empty());
}

/// Bad input: a message naming the file and the field, exit 2, no panic, nothing written.
#[test]
fn bad_instances_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(toy_instance(dir.path())).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "empty"),
        ("truncated", good[..good.len() / 2].to_string(), "EOF"),
        (
            "negative",
            good.replacen("\"fwd\": 0.002", "\"fwd\": -0.002", 1),
            "layers[0].fwd",
        ),
        (
            "nan",
            good.replacen("\"fwd\": 0.002", "\"fwd\": NaN", 1),
            "layers[0].fwd",
        ),
        (
            "string",
            good.replacen("\"fwd\": 0.002", "\"fwd\": \"fast\"", 1),
            "layers[0].fwd",
        ),
        (
            "nolayers",
            r#"{"name": "x", "input": 1, "layers": []}"#.to_string(),
            "layers",
        ),
        (
            "missing",
            r#"{"name": "x", "layers": []}"#.to_string(),
            "input",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, text).unwrap();
        let out_plan = dir.path().join(format!("{name}-plan.json"));
        pipeopt()
            .args(plan_args(&path, &out_plan))
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(path.to_str().unwrap())
                    .and(predicate::str::contains(needle)),
            );
        assert!(
            !out_plan.exists(),
            "{name}: a plan was written for bad input"
        );
    }
}

#[test]
fn bad_flags_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    let mut args = plan_args(&inst, &plan);
    let m = args.iter().position(|a| a == "2GiB").unwrap();
    args[m] = "2Gib".into();
    pipeopt()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown unit"));
    let mut args = plan_args(&inst, &plan);
    let p = args.iter().position(|a| a == "0,4,8").unwrap();
    args[p] = "0,8,4".into();
    pipeopt()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--partition"));
    let mut args = plan_args(&inst, &plan);
    let a = args.iter().position(|a| a == "1f1b*").unwrap();
    args[a] = "magic".into();
    pipeopt()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "invalid value 'magic' for '--algorithm",
        ));
}

/// `plan --help` names, for each option flag, exactly the algorithms that read it; a flag
/// given to another algorithm is refused with those names.
#[test]
fn option_flags_name_the_algorithms_that_read_them() {
    use pipeopt::algorithm::{registry::flag, Algorithm};
    let help = pipeopt().args(["plan", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let mut keys: Vec<&str> = Algorithm::ALL
        .iter()
        .flat_map(|a| (a.descriptor().options)().iter().copied())
        .filter(|k| *k != "madpipe") // experiment files only
        .collect();
    keys.sort();
    keys.dedup();
    assert!(keys.len() >= 7, "{keys:?}");
    for key in keys {
        let f = flag(key);
        let start = help
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{f} ")) || l.trim() == f)
            .unwrap_or_else(|| panic!("{f} not in plan --help"));
        let paragraph: String = help
            .lines()
            .skip(start + 1)
            .take_while(|l| !l.trim_start().starts_with('-'))
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let named: std::collections::BTreeSet<&str> = paragraph
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '*' || c == '-'))
            .filter_map(|w| Algorithm::parse(w).ok().map(|a| a.name()))
            .collect();
        let readers: std::collections::BTreeSet<&str> = Algorithm::ALL
            .iter()
            .filter(|a| a.reads(key))
            .map(|a| a.name())
            .collect();
        // An option every algorithm reads (`--time-limit`) says so instead of naming them.
        if readers.len() == Algorithm::ALL.len() {
            assert!(paragraph.contains("every algorithm"), "{f}: {paragraph}");
            continue;
        }
        assert_eq!(named, readers, "{f}: {paragraph}");
        let other = Algorithm::ALL.iter().find(|a| !a.reads(key)).unwrap();
        let e = other.configure(serde_json::json!({ key: 1 })).unwrap_err();
        for r in &readers {
            assert!(e.reason.contains(r), "{f}: {e}");
        }
    }
}

#[test]
fn impossible_memory_is_infeasible_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    let mut args = plan_args(&inst, &plan);
    let m = args.iter().position(|a| a == "2GiB").unwrap();
    args[m] = "1MiB".into();
    let out = pipeopt().args(&args).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "infeasible");
    assert!(v["period"].is_null());
    assert!(!plan.exists());
}

#[test]
fn a_plan_with_bad_stages_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    pipeopt().args(plan_args(&inst, &plan)).assert().success();
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    p["stages"][1]["last"] = serde_json::json!(99);
    std::fs::write(&plan, serde_json::to_string(&p).unwrap()).unwrap();
    pipeopt()
        .args(["validate", plan.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("stages[1].last"));
    // Editing the embedded instance breaks its hash.
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    p["stages"][1]["last"] = serde_json::json!(8);
    p["instance"]["layers"][0]["fwd"] = serde_json::json!(1.0);
    std::fs::write(&plan, serde_json::to_string(&p).unwrap()).unwrap();
    pipeopt()
        .args(["validate", plan.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("instance_hash"));
}

#[test]
fn instance_command_regenerates_the_committed_instance() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r50.json");
    pipeopt()
        .args([
            "instance", "--model", "resnet50", "--image", "1000", "--batch", "8",
        ])
        .args([
            "--times",
            "analytic",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"parameters\":25557032"));
    let made: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("instances/resnet50-1000-b8.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(made["layers"], committed["layers"]);
    assert_eq!(made["input"], committed["input"]);
}

#[test]
fn instance_command_rejects_unknown_models_and_zero_batches() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    pipeopt()
        .args(["instance", "--model", "resnet49", "--batch", "8"])
        .args(["--out", out.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--model"));
    pipeopt()
        .args(["instance", "--model", "resnet50", "--batch", "0"])
        .args(["--out", out.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--batch"));
    assert!(!out.exists(), "nothing written on bad input");
}

/// Device models are data: a model file given by path times the network as the same model
/// built in does (its copy in `devices/`), a changed rate changes the times, and a bad
/// file is refused naming the file and the key, with nothing written.
#[test]
fn instance_reads_a_device_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let make = |device: &str, out: &Path| {
        pipeopt()
            .args([
                "instance", "--model", "resnet50", "--image", "224", "--batch", "8",
            ])
            .args(["--device-model", device, "--out", out.to_str().unwrap()])
            .assert()
    };
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (by_name, by_path) = (dir.path().join("a.json"), dir.path().join("b.json"));
    make("a100", &by_name).success();
    make(root.join("devices/a100.toml").to_str().unwrap(), &by_path).success();
    assert_eq!(read(&by_name), read(&by_path));
    // Twice the memory bandwidth: every layer's forward is faster.
    let text = std::fs::read_to_string(root.join("devices/a100.toml")).unwrap();
    let fast = dir.path().join("fast.toml");
    std::fs::write(
        &fast,
        text.replace("mem_bw = 2.039e12", "mem_bw = 4.078e12"),
    )
    .unwrap();
    let faster = dir.path().join("c.json");
    make(fast.to_str().unwrap(), &faster).success();
    let fwd = |v: &serde_json::Value| -> Vec<f64> {
        v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["fwd"].as_f64().unwrap())
            .collect()
    };
    assert!(fwd(&read(&faster))
        .iter()
        .zip(fwd(&read(&by_name)))
        .all(|(a, b)| *a < b));
    // A negative rate: exit 2, the file and the key named, nothing written.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, text.replacen("matmul = 19.5e12", "matmul = -3.0", 1)).unwrap();
    let out = dir.path().join("d.json");
    make(bad.to_str().unwrap(), &out)
        .code(2)
        .stderr(predicate::str::contains("bad.toml").and(predicate::str::contains("fwd.matmul")));
    assert!(!out.exists(), "nothing written on bad input");
    make("tpu", &out)
        .code(2)
        .stderr(predicate::str::contains("--device-model"));
}

#[test]
fn schedule_finds_a_pattern_at_least_as_good_as_one_f_one_b_star() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    let out = pipeopt().args(plan_args(&inst, &plan)).assert().success();
    let first: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let scheduled = dir.path().join("scheduled.json");
    let out = pipeopt()
        .args(["schedule", plan.to_str().unwrap(), "--time-limit", "60s"])
        .args(["--out", scheduled.to_str().unwrap(), "--json"])
        .assert()
        .success();
    let second: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(second["status"], "valid", "{second}");
    assert!(second["algorithm"].as_str().unwrap().ends_with("+milp"));
    // 1F1B* is memory-optimal on a contiguous allocation (Proposition 1): the MILP may only
    // match it, within its period precision.
    let (t1, t2) = (
        first["period"].as_f64().unwrap(),
        second["period"].as_f64().unwrap(),
    );
    assert!(
        t2 <= t1 * (1.0 + 2e-4) && t2 >= t1 * (1.0 - 2e-4),
        "{t1} vs {t2}"
    );
    assert!(second["solver"]["status"].is_string());
    pipeopt()
        .args(["validate", scheduled.to_str().unwrap()])
        .assert()
        .success();
}

#[test]
fn partition_pipedream_reports_its_objective_and_rejects_mismatched_levels() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let out = pipeopt()
        .args([
            "partition",
            "pipedream",
            "--instance",
            inst.to_str().unwrap(),
        ])
        .args(["--processors", "2", "2", "--bandwidth", "24GB/s", "3GB/s"])
        .args(["--replicate", "--json"])
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let objective = j["objective"].as_f64().unwrap();
    assert!(objective > 0.0);
    let replicas: u64 = j["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["replicas"].as_u64().unwrap())
        .sum();
    assert!(replicas <= 4);
    pipeopt()
        .args([
            "partition",
            "pipedream",
            "--instance",
            inst.to_str().unwrap(),
        ])
        .args(["--processors", "2", "2", "--bandwidth", "24GB/s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--bandwidth"));
}

#[test]
fn partition_pipedream_on_a_profile_sees_diagonal_cuts_and_writes_its_chain() {
    // resnet50 replicated on 16: its best cuts pass through residual blocks, which the
    // imported chain does not hold (PipeDream's own optimizer prints 0.0282756 s).
    let dir = tempfile::tempdir().unwrap();
    let profile = pipeopt::io::pipedream::shared_profile("resnet50");
    let chain = dir.path().join("chain.json");
    let args = [
        "--processors",
        "16",
        "--bandwidth",
        "12GB/s",
        "--replicate",
        "--activation-compression-ratio",
        "none",
        "--json",
    ];
    let out = pipeopt()
        .args([
            "partition",
            "pipedream",
            "--graph",
            profile.to_str().unwrap(),
        ])
        .args(["--out-instance", chain.to_str().unwrap()])
        .args(args)
        .assert()
        .success();
    let j: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(j["cuts"]["kind"], "ideals", "{j}");
    let on_graph = j["objective"].as_f64().unwrap();
    assert!((on_graph / 0.0282756 - 1.0).abs() < 5e-6, "{on_graph}");
    // The written chain holds those cuts: the program on it finds the same objective,
    // and its stages are the ones printed.
    let again = pipeopt()
        .args([
            "partition",
            "pipedream",
            "--instance",
            chain.to_str().unwrap(),
        ])
        .args(args)
        .assert()
        .success();
    let k: serde_json::Value = serde_json::from_slice(&again.get_output().stdout).unwrap();
    assert_eq!(k["objective"], j["objective"]);
    assert_eq!(k["stages"], j["stages"]);
    // The imported chain alone is above it.
    let imported = dir.path().join("imported.json");
    pipeopt()
        .args(["import", "pipedream", profile.to_str().unwrap()])
        .args(["--out", imported.to_str().unwrap()])
        .assert()
        .success();
    let on_chain = pipeopt()
        .args([
            "partition",
            "pipedream",
            "--instance",
            imported.to_str().unwrap(),
        ])
        .args(args)
        .assert()
        .success();
    let c: serde_json::Value = serde_json::from_slice(&on_chain.get_output().stdout).unwrap();
    assert!(c["objective"].as_f64().unwrap() > on_graph * 1.004, "{c}");
    // One input, not both; --out-instance only with --graph.
    pipeopt()
        .args([
            "partition",
            "pipedream",
            "--graph",
            profile.to_str().unwrap(),
        ])
        .args(["--instance", imported.to_str().unwrap()])
        .args(args)
        .assert()
        .code(2);
    pipeopt()
        .args([
            "partition",
            "pipedream",
            "--instance",
            imported.to_str().unwrap(),
        ])
        .args(["--out-instance", chain.to_str().unwrap()])
        .args(args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--graph"));
}

#[test]
fn coarsen_is_refused_until_an_algorithm_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    pipeopt()
        .args(plan_args(&inst, &plan))
        .args(["--coarsen", "8"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--coarsen"));
    assert!(!plan.exists());
}

/// The exit codes README promises: 2 for bad input, 1 for a failure (here a plan that
/// cannot be written), 0 when the command did its work.
#[test]
fn exit_codes_follow_the_readme() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    // A valid run: 0.
    pipeopt().args(plan_args(&inst, &plan)).assert().code(0);
    // A malformed instance file: 2, naming the file.
    let malformed = dir.path().join("malformed.json");
    std::fs::write(&malformed, "{\"name\": \"x\", \"input\": 1, \"layers\": [").unwrap();
    pipeopt()
        .args(plan_args(&malformed, &plan))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("malformed.json"));
    // A plan that cannot be written (its directory would be inside a file): a failed write,
    // not bad input: 1, naming the path.
    let blocked = dir.path().join("plan.json").join("plan.json");
    pipeopt()
        .args(plan_args(&inst, &blocked))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("plan.json"));
}

/// `best`'s gap tolerance is a finite relative gap of 0 or more: anything else is refused
/// as bad input (exit 2, the flag named) with nothing written.
#[test]
fn a_gap_tolerance_that_is_not_a_gap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inst = toy_instance(dir.path());
    let plan = dir.path().join("plan.json");
    let best = |tolerance: &str| {
        let tolerance = format!("--gap-tolerance={tolerance}");
        let mut cmd = pipeopt();
        cmd.args(plan_args_with(
            &inst,
            &plan,
            &["best", "--time-limit", "5s", &tolerance],
        ));
        cmd
    };
    for bad in ["nan", "inf", "-0.05", "5%"] {
        best(bad)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--gap-tolerance"));
        assert!(!plan.exists(), "{bad}");
    }
    best("0.05").assert().code(0);
    assert!(plan.exists());
}
