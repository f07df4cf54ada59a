//! `pipeopt sync` and `pipeopt sync-sweep` end to end: JSON that parses, files written, and
//! bad input refused with a message naming the option or the file, never a panic.

use crate::support::pipeopt;
use std::path::{Path, PathBuf};

/// A chain of 8 equal layers (backward = 2 x forward) in a temporary directory.
fn chain(dir: &Path) -> PathBuf {
    let layers: Vec<serde_json::Value> = (0..8)
        .map(|i| {
            serde_json::json!({"name": format!("l{i}"), "fwd": 0.01, "bwd": 0.02,
                               "weights": 1e8, "out": 1e6, "stash": 1e9})
        })
        .collect();
    let inst = serde_json::json!({"name": "eight", "input": 1e6, "layers": layers,
                                  "meta": {"source": "test", "batch": 4}});
    let path = dir.join("eight.json");
    std::fs::write(&path, serde_json::to_string_pretty(&inst).unwrap()).unwrap();
    path
}

fn sync(instance: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["sync", "--instance", instance.to_str().unwrap()];
    args.extend_from_slice(extra);
    pipeopt().args(&args).output().unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit status 2 (bad input), the message names `what`, and nothing panicked.
/// Writes an experiment file (`head`, then one weak-scaling case of a uniform chain) in
/// `dir`, runs `sync-sweep --json` on it into `dir/out`, and returns the file, the output
/// folder and the JSON summary.
fn sweep_in(dir: &Path, head: &str) -> (PathBuf, PathBuf, serde_json::Value) {
    let inst = chain(dir);
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "{head}[[case]]\ninstance = {:?}\nstudy = \"weak\"\nstages = [2, 4]\nsamples_per_stage = 2\n",
            inst.to_str().unwrap()
        ),
    )
    .unwrap();
    let out_dir = dir.join("out");
    let v = sync_sweep(&exp, &out_dir, &[]);
    (exp, out_dir, v)
}

/// `sync-sweep EXP --out OUT --json EXTRA...`, which must succeed; its JSON summary.
fn sync_sweep(exp: &Path, out_dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "sync-sweep",
        exp.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = pipeopt().args(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn refused(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(what), "the message should name {what}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout on error");
}

/// A bandwidth so small that a transfer would outlast every duration pipeopt counts (here
/// subnormal: every transfer infinite) is refused naming `--bandwidth`, at once: it once
/// made the simulator's peak count loop forever on infinite instants.
#[test]
fn a_bandwidth_too_small_to_count_is_refused() {
    let toy = format!("{}/instances/toy-chain.json", env!("CARGO_MANIFEST_DIR"));
    for bandwidth in ["1e-310", "1e-300"] {
        let out = pipeopt()
            .args([
                "sync",
                "--instance",
                toy.as_str(),
                "--stages",
                "2",
                "--micro-batches",
                "4",
            ])
            .args(["--schedule", "gpipe", "--memory", "16GiB", "--json"])
            .args(["--bandwidth", bandwidth])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        refused(&out, "--bandwidth");
    }
}

/// Every name and alias of the schedule registry is a value of `--schedule` (names listed
/// in `sync --help`), runs as the schedule it names and prints one JSON object.
#[test]
fn json_output_parses_for_every_registered_name_and_alias() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let help = pipeopt().args(["sync", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    for s in pipeopt::schedule::sync::SCHEDULES {
        assert!(help.contains(s.name), "{} not in sync --help", s.name);
        for &schedule in std::iter::once(&s.name).chain(s.aliases) {
            let out = sync(
                &inst,
                &[
                    "--stages",
                    "4",
                    "--micro-batches",
                    "8",
                    "--schedule",
                    schedule,
                    "--json",
                ],
            );
            assert!(out.status.success(), "{schedule}: {}", stderr(&out));
            let text = String::from_utf8(out.stdout).unwrap();
            assert_eq!(text.trim().lines().count(), 1, "one JSON object: {text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["command"], "sync");
            assert_eq!(
                v["schedule"],
                s.default_kind(4).name().as_str(),
                "{schedule}"
            );
            assert_eq!(v["stages"], 4);
            assert_eq!(v["micro_batches"], 8);
            let bubble = v["bubble_ratio"].as_f64().unwrap();
            assert!((0.0..1.0).contains(&bubble), "{schedule}: {bubble}");
            assert!(v["makespan"].as_f64().unwrap() > 0.0);
            // One peak per worker: 4 stages on 4 / v workers.
            let workers = 4 / s.stages_per_worker;
            assert_eq!(v["peak_memory"].as_array().unwrap().len(), workers);
            // 8 micro-batches of 4 samples each per iteration.
            let sps = v["samples_per_second"].as_f64().unwrap();
            let expect = 32.0 / v["makespan"].as_f64().unwrap();
            assert!((sps - expect).abs() < 1e-9 * expect, "{schedule}");
        }
    }
}

#[test]
fn chimera_at_n_equals_d_has_its_exact_bubble_ratio() {
    // Equal stages, backward = 2 x forward: Chimera takes 5D - 4 forward times at N = D,
    // so the bubble ratio is 1 - 3D / (5D - 4) = 0.25 for D = 4.
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let out = sync(&inst, &["--stages", "4", "--schedule", "chimera", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!((v["bubble_ratio"].as_f64().unwrap() - 0.25).abs() < 1e-9);
}

#[test]
fn out_file_holds_streams_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let file = dir.path().join("sync.json");
    let out = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--schedule",
            "mixpipe",
            "--k",
            "2",
            "--gamma",
            "1",
            "--memory",
            "64GiB",
            "--out",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["streams"].as_array().unwrap().len(), 4);
    assert_eq!(v["report"]["fits"], true);
    assert_eq!(v["schedule"]["name"], "mixpipe");
    assert_eq!(v["schedule"]["k"], 2);
}

#[test]
fn unknown_schedule_is_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let out = sync(&inst, &["--stages", "4", "--schedule", "zigzag", "--json"]);
    refused(&out, "--schedule");
    assert!(stderr(&out).contains("zigzag"));
}

#[test]
fn odd_k_and_k_above_d_are_refused_naming_k() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    for k in ["3", "6", "0"] {
        let out = sync(
            &inst,
            &["--stages", "4", "--schedule", "mixpipe", "--k", k, "--json"],
        );
        refused(&out, "--k");
    }
    // With N > D, K may reach 2(D - 1) (K maximizing) but no further.
    let ok = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--micro-batches",
            "8",
            "--schedule",
            "mixpipe",
            "--k",
            "6",
            "--json",
        ],
    );
    assert!(ok.status.success(), "{}", stderr(&ok));
    let out = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--micro-batches",
            "8",
            "--schedule",
            "mixpipe",
            "--k",
            "8",
        ],
    );
    refused(&out, "--k");
}

#[test]
fn bad_shapes_are_refused_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    // Chimera needs an even D and N >= D.
    let out = sync(&inst, &["--stages", "3", "--schedule", "chimera"]);
    refused(&out, "--schedule");
    // More stages than layers.
    let out = sync(&inst, &["--stages", "9", "--schedule", "dapple"]);
    refused(&out, "--stages");
    // Neither --stages nor --partition.
    let out = sync(&inst, &["--schedule", "dapple"]);
    refused(&out, "--stages");
    // A partition that does not start at layer 0.
    let out = sync(&inst, &["--partition", "1,4", "--schedule", "dapple"]);
    refused(&out, "--partition");
    // --search without the device memory.
    let out = sync(&inst, &["--stages", "4", "--search"]);
    refused(&out, "--memory");
}

#[test]
fn missing_instance_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-instance.json");
    let out = sync(&missing, &["--stages", "4", "--json"]);
    refused(&out, "no-such-instance.json");
}

#[test]
fn sync_sweep_writes_tables_and_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (exp, out_dir, v) = sweep_in(
        dir.path(),
        "name = \"t\"\nmemory = [\"8GiB\"]\nmicro_batch_sizes = [1, 2]\n\
             schedules = [\"gpipe\", \"dapple\", \"gems\", \"chimera\", \"mixpipe\"]\n\
             workers = 1\n[memory_figure]\nstages = 4\nmicro_batches = [4]\n",
    );
    assert!(v["runs"].as_u64().unwrap() > 10);
    for f in [
        "runs.csv",
        "runs.json",
        "best.csv",
        "best.json",
        "bubble-ratio.svg",
        "bubble-ratio.png",
        "memory.svg",
        "throughput-weak.svg",
    ] {
        assert!(out_dir.join(f).exists(), "{f} missing");
    }
    // MixPipe's space contains Chimera (K = D, Gamma = 0), so its best is never slower
    // (Chimera's forward doubling for N > D is not in that space).
    for r in v["best"].as_array().unwrap() {
        if r["approach"] == "chimera" && r["schedule"] == "chimera" {
            if let Some(x) = r["mixpipe_speedup"].as_f64() {
                assert!(x >= 1.0 - 1e-12, "{r}");
            }
        }
    }
    // A bad experiment file names its field.
    let text = std::fs::read_to_string(&exp).unwrap();
    std::fs::write(&exp, text.replace("\"8GiB\"", "\"lots\"")).unwrap();
    let out = pipeopt()
        .args(["sync-sweep", exp.to_str().unwrap()])
        .output()
        .unwrap();
    refused(&out, "memory");
}

/// The synchronous grid runs on the sweep engine: one job per configuration, a journal,
/// Parquet beside CSV and JSON; a second run finds every configuration done and writes the
/// same tables; a lost record runs again, alone.
#[test]
fn sync_sweep_resumes_from_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let head = "name = \"t\"\nmemory = [\"8GiB\"]\nmicro_batch_sizes = [1, 2]\n\
                schedules = [\"gpipe\", \"mixpipe\"]\nworkers = 2\n";
    let (exp, out_dir, first) = sweep_in(dir.path(), head);
    let configurations = first["jobs"].as_u64().unwrap();
    assert!(configurations >= 4, "{first}");
    assert_eq!(first["ran"], configurations);
    for f in ["runs.parquet", "best.parquet", "journal.jsonl"] {
        assert!(out_dir.join(f).exists(), "{f} missing");
    }
    let runs = std::fs::read(out_dir.join("runs.csv")).unwrap();
    let journal = out_dir.join("journal.jsonl");
    let lines = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(lines.lines().count() as u64, configurations);
    let again = |dir: &Path| sync_sweep(&exp, dir, &[]);
    let second = again(&out_dir);
    assert_eq!(second["ran"], 0);
    assert_eq!(second["already_done"], configurations);
    assert_eq!(std::fs::read(out_dir.join("runs.csv")).unwrap(), runs);
    // Drop the first record and cut the last line in half (a run killed mid-write).
    let mut kept: Vec<&str> = lines.lines().skip(1).collect();
    let last = kept.pop().unwrap();
    let torn = format!("{}\n{}", kept.join("\n"), &last[..last.len() / 2]);
    std::fs::write(&journal, torn).unwrap();
    let third = again(&out_dir);
    assert_eq!(third["ran"], 2, "{third}");
    assert_eq!(std::fs::read(out_dir.join("runs.csv")).unwrap(), runs);
    // In two shards, then the run without a shard: it runs nothing, same tables.
    let sharded = dir.path().join("sharded");
    for shard in ["1/2", "2/2"] {
        let v = sync_sweep(&exp, &sharded, &["--shard", shard]);
        assert!(v["ran"].as_u64().unwrap() >= 1, "{v}");
        assert!(
            !sharded.join("runs.csv").exists(),
            "a shard writes no table"
        );
    }
    let whole = again(&sharded);
    assert_eq!(whole["ran"], 0, "{whole}");
    assert_eq!(std::fs::read(sharded.join("runs.csv")).unwrap(), runs);
    // In threads instead of child processes: the same tables.
    let threads = dir.path().join("threads");
    sync_sweep(&exp, &threads, &["--isolation", "thread"]);
    assert_eq!(std::fs::read(threads.join("runs.csv")).unwrap(), runs);
}

/// The synchronous sweep's shards follow the one shard policy (`sweep::shard`): each shard
/// records its identity beside its journal, and the run without `--shard` takes them in
/// only if they are every shard of this very file, once each: a shard of another version of
/// the file, a missing one or one given twice is refused (exit 2) naming the file at fault.
#[test]
fn sync_shards_of_another_file_or_missing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let head = "name = \"t\"\nmemory = [\"8GiB\"]\nmicro_batch_sizes = [1, 2]\n\
                schedules = [\"gpipe\"]\nworkers = 1\n";
    let inst = chain(dir.path());
    let exp = dir.path().join("exp.toml");
    let text = format!(
        "{head}[[case]]\ninstance = {:?}\nstudy = \"weak\"\nstages = [2, 4]\nsamples_per_stage = 2\n",
        inst.to_str().unwrap()
    );
    std::fs::write(&exp, &text).unwrap();
    let out = dir.path().join("out");
    let thread = ["--isolation", "thread"];
    let shard = |i: &str| {
        let v = sync_sweep(&exp, &out, &["--shard", i, "--isolation", "thread"]);
        assert_eq!(v["shard"], i, "{v}");
        v
    };
    shard("1/2");
    let identity: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("shard-1-of-2.json")).unwrap()).unwrap();
    assert_eq!(identity["experiment"], "t");
    assert_eq!(
        (identity["shard"].as_u64(), identity["shards"].as_u64()),
        (Some(1), Some(2))
    );
    let whole = |extra: &[&str]| {
        let mut args = vec![
            "sync-sweep",
            exp.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        pipeopt().args(&args).output().unwrap()
    };
    // Shard 2 never ran.
    refused(&whole(&thread), "missing 1 of 2 shards");
    refused(&whole(&thread), "shard-2-of-2");
    // Shard 2 ran on another version of the file (a comment changes its hash).
    std::fs::write(&exp, format!("# edited\n{text}")).unwrap();
    shard("2/2");
    std::fs::write(&exp, &text).unwrap();
    let err = whole(&thread);
    refused(&err, "journal-shard-2-of-2.jsonl");
    refused(&err, "configuration hash");
    assert!(!out.join("runs.csv").exists(), "nothing written");
    // Shard 2 again on this file: taken in, nothing left to run.
    shard("2/2");
    let v = sync_sweep(&exp, &out, &thread);
    assert_eq!(v["ran"], 0, "{v}");
    assert_eq!(v["jobs"], v["already_done"], "{v}");
    // A shard's identity copied over another's: shard 1 given twice.
    std::fs::copy(out.join("shard-1-of-2.json"), out.join("shard-2-of-2.json")).unwrap();
    refused(&whole(&thread), "each shard once");
}

/// An analytic instance whose rebuild at its own batch does not give its layers back (edited
/// by hand) fails its configurations: the message names the file and says why, the exit
/// status is 1, nothing panics.
#[test]
fn a_configuration_that_fails_is_reported_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inst: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("instances/gpt24-b8.json")).unwrap(),
    )
    .unwrap();
    let fwd = inst["layers"][0]["fwd"].as_f64().unwrap();
    inst["layers"][0]["fwd"] = serde_json::json!(fwd * 2.0);
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, serde_json::to_string(&inst).unwrap()).unwrap();
    let exp = dir.path().join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"t\"\nmemory = [\"80GiB\"]\nmicro_batch_sizes = [4]\n\
             schedules = [\"gpipe\"]\n[[case]]\ninstance = {:?}\nstudy = \"weak\"\n\
             stages = [2]\nsamples_per_stage = 4\n",
            edited.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = pipeopt()
        .args([
            "sync-sweep",
            exp.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("edited.json") && err.contains("differs"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn gantt_draws_a_sync_file() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let file = dir.path().join("sync.json");
    let out = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--schedule",
            "chimera",
            "--out",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = dir.path().join("timeline.svg");
    let out = pipeopt()
        .args([
            "gantt",
            file.to_str().unwrap(),
            "--out",
            svg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("worker 3"), "one row per worker");
    assert!(
        text.contains("F0d") && text.contains("B2u"),
        "labelled boxes"
    );
    let png = dir.path().join("timeline.png");
    let out = pipeopt()
        .args([
            "gantt",
            file.to_str().unwrap(),
            "--out",
            png.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    // A sync file with a broken timeline names the field.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["timeline"]["makespan"] = serde_json::json!("soon");
    std::fs::write(&file, v.to_string()).unwrap();
    let out = pipeopt()
        .args([
            "gantt",
            file.to_str().unwrap(),
            "--out",
            svg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    refused(&out, "timeline.makespan");
}

#[test]
fn hybrid_picks_a_depth_and_names_missing_options() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let args = [
        "--hybrid",
        "--gpus",
        "4",
        "--mini-batch",
        "16",
        "--memory",
        "64GiB",
        "--allreduce-bandwidth",
        "100GB/s",
        "--micro-batch-sizes",
        "1,2,4",
        "--schedule",
        "mixpipe",
        "--json",
    ];
    let out = sync(&inst, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "hybrid");
    let depths: Vec<u64> = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stages"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, vec![1, 2, 4]);
    let best = &v["best"];
    let t = best["samples_per_second"].as_f64().unwrap();
    let expect = 16.0
        / (best["iteration_seconds"].as_f64().unwrap()
            + best["allreduce_seconds"].as_f64().unwrap());
    assert!((t - expect).abs() < 1e-9 * expect, "eq. (6)");
    let out = sync(&inst, &["--hybrid", "--mini-batch", "16"]);
    refused(&out, "--gpus");
    let out = sync(
        &inst,
        &[
            "--hybrid",
            "--gpus",
            "4",
            "--mini-batch",
            "16",
            "--allreduce-bandwidth",
            "100GB/s",
            "--server-gpus",
            "2",
        ],
    );
    refused(&out, "--inter-server-bandwidth");
}

#[test]
fn optimal_schedule_reports_bound_and_streams_and_draws() {
    // D = 4, N = 4 on Chimera's placement: the MILP's streams replay to its makespan, never
    // above Chimera's, with its proven bound; `--out` is a sync file `gantt` draws.
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let file = dir.path().join("optimal.json");
    let out = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--schedule",
            "optimal",
            "--placement",
            "bidirectional",
            "--time-limit",
            "60s",
            "--out",
            file.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schedule"], "optimal");
    assert_eq!(v["solver"]["status"], "optimal");
    let makespan = v["makespan"].as_f64().unwrap();
    let bound = v["solver"]["lower_bound"].as_f64().unwrap();
    assert!((makespan - bound).abs() <= 1e-6 * makespan);
    assert_eq!(v["streams"].as_array().unwrap().len(), 4);
    let chimera = sync(&inst, &["--stages", "4", "--schedule", "chimera", "--json"]);
    let c: serde_json::Value = serde_json::from_slice(&chimera.stdout).unwrap();
    assert!(makespan <= c["makespan"].as_f64().unwrap() * (1.0 + 1e-9));
    let svg = dir.path().join("optimal.svg");
    let drawn = pipeopt()
        .args([
            "gantt",
            file.to_str().unwrap(),
            "--out",
            svg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(drawn.status.success(), "{}", stderr(&drawn));
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("optimal (bidirectional)"));
}

#[test]
fn optimal_schedule_refuses_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let base = ["--stages", "4", "--schedule", "optimal"];
    refused(&sync(&inst, &base), "--placement");
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        sync(&inst, &a)
    };
    refused(&with(&["--placement", "sideways"]), "--placement");
    refused(
        &with(&["--placement", "bidirectional", "--micro-batches", "5"]),
        "--micro-batches",
    );
    refused(
        &with(&["--placement", "one-direction", "--max-live", "2,2"]),
        "--max-live",
    );
}

/// `[optimum]`: each configuration solved once per placement; every run compared with the
/// optimum of its placement (never below it when proven); the figure with the optimum.
#[test]
fn sync_sweep_with_optimum_compares_every_run_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (exp, out_dir, v) = sweep_in(
        dir.path(),
        "name = \"t\"\nmemory = [\"8GiB\"]\nmicro_batch_sizes = [1, 2]\nrecompute = [false]\n\
             schedules = [\"gpipe\", \"dapple\", \"chimera\", \"mixpipe\"]\n\
             workers = 1\n[optimum]\ntime_limit = \"10s\"\nmax_micro_batches = 4\n",
    );
    // (D, N) = (2, 4), (2, 2), (4, 8: too many), (4, 4): two placements each, B fixed by N.
    assert_eq!(v["optimum_solves"], 6, "{v}");
    assert_eq!(v["optimum_proven"], 6, "{v}");
    for f in [
        "optimum.csv",
        "optimum.json",
        "bubble-ratio-optimum.svg",
        "bubble-ratio-optimum.png",
    ] {
        assert!(out_dir.join(f).exists(), "{f} missing");
    }
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("runs.json")).unwrap()).unwrap();
    let mut compared = 0;
    for r in runs.as_array().unwrap() {
        if r["micro_batches"].as_u64().unwrap() > 4 {
            assert!(r["ratio_to_optimum"].is_null(), "{r}");
            continue;
        }
        let ratio = r["ratio_to_optimum"].as_f64().unwrap();
        assert_eq!(r["optimum_status"], "optimal");
        assert!(ratio >= 1.0 - 1e-9, "{r}");
        let placement = if r["approach"] == "chimera" || r["approach"] == "mixpipe" {
            "bidirectional"
        } else {
            "one-direction"
        };
        assert_eq!(r["optimum_placement"], placement, "{r}");
        compared += 1;
    }
    assert!(compared > 4);
    // On equal stages (backward = 2 x forward) with one direction, the optimum is the
    // critical path (N + D - 1) x (F + B), which 1F1B reaches.
    let optimum: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("optimum.json")).unwrap()).unwrap();
    let one = optimum
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["placement"] == "one-direction" && o["stages"] == 4 && o["micro_batches"] == 4)
        .unwrap();
    let b = one["micro_batch_size"].as_f64().unwrap();
    let stage = 2.0 * (0.01 + 0.02) * b / 4.0;
    assert!(
        (one["optimum_seconds"].as_f64().unwrap() - 7.0 * stage).abs() < 1e-9,
        "{one}"
    );
    // A bad limit names its field.
    let text = std::fs::read_to_string(&exp).unwrap();
    std::fs::write(&exp, text.replace("\"10s\"", "\"-1s\"")).unwrap();
    let out = pipeopt()
        .args(["sync-sweep", exp.to_str().unwrap()])
        .output()
        .unwrap();
    refused(&out, "optimum.time_limit");
}

#[test]
fn intra_layer_partition_balances_stages_and_reports_the_split() {
    let dir = tempfile::tempdir().unwrap();
    // Three layers, the middle one 10 times heavier: whole layers cannot balance 4 stages.
    let layers: Vec<serde_json::Value> = [1.0, 10.0, 1.0]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            serde_json::json!({"name": format!("l{i}"), "fwd": 0.01 * w, "bwd": 0.02 * w,
                               "weights": 1e8, "out": 1e6})
        })
        .collect();
    let inst = dir.path().join("three.json");
    std::fs::write(
        &inst,
        serde_json::json!({"name": "three", "input": 1e6, "layers": layers}).to_string(),
    )
    .unwrap();
    let out = sync(
        &inst,
        &[
            "--stages",
            "4",
            "--intra-layer",
            "--schedule",
            "dapple",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["intra_layer"]["split_layers"], serde_json::json!([2]));
    let stages: Vec<f64> = v["intra_layer"]["stage_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(stages.len(), 4);
    for s in &stages {
        assert!((s - 0.09).abs() < 1e-12, "{stages:?}");
    }
    refused(&sync(&inst, &["--intra-layer"]), "--intra-layer");
    refused(
        &sync(&inst, &["--intra-layer", "--partition", "0,1"]),
        "--intra-layer",
    );
}

/// Every file `sync --out` writes (each schedule, the exact optimum, the intra-layer
/// partition) passes `validate`: its streams replayed on its own costs give the iteration
/// time and peaks it reports. A file whose report was edited is invalid (exit 1), and a
/// file whose costs are not numbers is bad input (exit 2).
#[test]
fn every_sync_out_file_passes_validate() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let validate = |file: &Path| {
        pipeopt()
            .arg("validate")
            .arg(file)
            .arg("--json")
            .output()
            .unwrap()
    };
    let mut runs: Vec<(String, Vec<&str>)> = pipeopt::schedule::sync::SCHEDULES
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                vec![
                    "--stages",
                    "4",
                    "--micro-batches",
                    "8",
                    "--schedule",
                    s.name,
                ],
            )
        })
        .collect();
    runs.push((
        "optimal".into(),
        vec![
            "--stages",
            "2",
            "--micro-batches",
            "2",
            "--schedule",
            "optimal",
            "--placement",
            "bidirectional",
            "--time-limit",
            "10s",
        ],
    ));
    runs.push(("intra".into(), vec!["--stages", "3", "--intra-layer"]));
    for (name, mut args) in runs {
        let file = dir.path().join(format!("{name}.json"));
        args.extend(["--bandwidth", "1GB/s", "--out", file.to_str().unwrap()]);
        let out = sync(&inst, &args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let v = validate(&file);
        let text = String::from_utf8_lossy(&v.stdout).to_string();
        assert_eq!(v.status.code(), Some(0), "{name}: {text} {}", stderr(&v));
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["valid"], true, "{name}: {j}");
    }
    let file = dir.path().join("gpipe.json");
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    j["report"]["makespan"] = 1e-3.into();
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, j.to_string()).unwrap();
    assert_eq!(validate(&edited).status.code(), Some(1));
    j["costs"]["forward_seconds"][0] = (-1.0).into();
    std::fs::write(&edited, j.to_string()).unwrap();
    let v = validate(&edited);
    assert_eq!(v.status.code(), Some(2));
    assert!(
        stderr(&v).contains("costs.forward_seconds[0]"),
        "{}",
        stderr(&v)
    );
}

/// The keys of `sync --json` in each mode, as users and scripts read them: the typed report
/// keeps every one (a key added here is a new field, a key gone is a break).
#[test]
fn sync_json_keys_stay_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let inst = chain(dir.path());
    let keys = |extra: &[&str]| -> Vec<String> {
        let out = sync(&inst, extra);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let simulated = [
        "bubble_ratio",
        "command",
        "fits",
        "instance",
        "intra_layer",
        "makespan",
        "memory",
        "micro_batches",
        "partition",
        "peak_memory",
        "samples_per_second",
        "schedule",
        "stages",
    ];
    assert_eq!(keys(&["--stages", "4", "--json"]), simulated);
    assert_eq!(
        keys(&["--stages", "4", "--explore", "--json"]),
        [
            "accelerator",
            "command",
            "exploration",
            "instance",
            "mini_batch",
            "mode",
            "partition",
            "stages"
        ]
    );
    assert_eq!(
        keys(&["--stages", "4", "--search", "--memory", "80GiB", "--json"]),
        [
            "best",
            "candidates",
            "command",
            "instance",
            "micro_batches",
            "mode",
            "partition",
            "planned_samples_per_second",
            "samples_per_second",
            "simulated",
            "stages"
        ]
    );
    let optimal = [
        "--stages",
        "2",
        "--micro-batches",
        "2",
        "--schedule",
        "optimal",
        "--placement",
        "one-direction",
        "--json",
    ];
    let mut want: Vec<&str> = simulated
        .iter()
        .copied()
        .filter(|k| *k != "intra_layer")
        .chain(["placement", "solver", "split_backward", "status", "streams"])
        .collect();
    want.sort();
    assert_eq!(keys(&optimal), want);
    // No order fits: the status says so, the makespan is null, no streams.
    let mut infeasible = optimal.to_vec();
    infeasible.extend(["--memory", "1KB"]);
    assert_eq!(
        keys(&infeasible),
        [
            "command",
            "instance",
            "makespan",
            "micro_batches",
            "partition",
            "placement",
            "schedule",
            "solver",
            "split_backward",
            "stages",
            "status"
        ]
    );
    assert_eq!(
        keys(&[
            "--hybrid",
            "--gpus",
            "4",
            "--mini-batch",
            "16",
            "--allreduce-bandwidth",
            "100GB/s",
            "--json"
        ]),
        [
            "approach",
            "best",
            "candidates",
            "command",
            "costs_from",
            "gpus",
            "instance",
            "mini_batch",
            "mode"
        ]
    );
}

/// `--export-torch` writes PyTorch's pipeline-runtime CSV and `--import-torch` simulates it
/// back to the same iteration time, split backwards included; a bidirectional schedule and
/// a file with several stages on one rank are refused with exit 2, and no file is left.
#[test]
fn schedules_go_out_and_come_back_in_pytorchs_format() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("dapple.csv");
    let run = |extra: &[&str]| {
        let mut args = vec!["sync", "--instance", "instances/bert48-b8.json", "--json"];
        args.extend_from_slice(extra);
        pipeopt().args(&args).output().unwrap()
    };
    let csv_arg = csv.to_str().unwrap();
    let out = run(&[
        "--stages",
        "4",
        "--micro-batches",
        "8",
        "--schedule",
        "dapple",
        "--export-torch",
        csv_arg,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 4);
    assert!(text.starts_with("0F0,0F1,0F2,0F3,0B0,"), "{text}");
    let out = run(&["--import-torch", csv_arg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let imported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(imported["makespan"], exported["makespan"]);
    assert_eq!(imported["micro_batches"], 8);

    let refused = dir.path().join("chimera.csv");
    let out = run(&[
        "--stages",
        "4",
        "--schedule",
        "chimera",
        "--export-torch",
        refused.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bidirectional"));
    assert!(!refused.exists());
    // A split backward goes out as PyTorch's I and W and comes back the same.
    let split = dir.path().join("zb.csv");
    let out = run(&[
        "--stages",
        "4",
        "--schedule",
        "zb-h1",
        "--export-torch",
        split.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(&split).unwrap();
    assert!(text.starts_with("0F0,0F1,0F2,0F3,0I0,0W0,"), "{text}");
    let out = run(&["--import-torch", split.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let imported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(imported["makespan"], exported["makespan"]);
    // Several stages on one rank (virtual stages) have no rule yet.
    let virtual_stages = dir.path().join("virtual.csv");
    std::fs::write(&virtual_stages, "0F0,1F0,1B0,0B0\n").unwrap();
    let out = run(&["--import-torch", virtual_stages.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stage 1 on rank 0"));
}

/// Every exported schedule run by PyTorch's own pipeline runtime on the CPU (4 processes,
/// gloo): PyTorch's validation and lowering, the order each rank computes, gradients equal
/// to single-process training (experiments/torch_pipelining.py).
#[test]
#[ignore = "needs python3 with torch 2.11 (pip install torch; PIPEOPT_PYTHON names another interpreter); about 4 minutes"]
fn pytorchs_runtime_runs_every_exported_schedule() {
    let python = std::env::var("PIPEOPT_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(python)
        .args(["experiments/torch_pipelining.py", "--out", "-", "--pipeopt"])
        .arg(crate::support::exe())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
