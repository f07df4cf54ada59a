//! Reliability, driven through the binary as a user (or a hostile tester) would: two sweeps
//! on one output, killed runners, errors retried, settings checked when the file loads, no
//! panic on absurd numbers or a closed stdout, one document per JSON file, one exit-code
//! rule, and the small promises of the command line.

use crate::support::pipeopt;
use pipeopt::model::Status;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

use crate::support::exe;
#[cfg(unix)]
use crate::support::run_with_closed_stdout;

fn toy() -> String {
    format!("{}/instances/toy-chain.json", env!("CARGO_MANIFEST_DIR"))
}

/// A sweep file over the toy chain: 2 x 2 x 2 x 2 = 16 jobs of `algorithm`.
fn sweep_file(dir: &Path, name: &str, extra: &str, algorithm: &str) -> PathBuf {
    let text = format!(
        r#"
name = "{name}"
instances = ["{toy}"]
processors = [2, 3]
memory = ["1GiB", "8GiB"]
bandwidth = ["12GB/s", "24GB/s"]
output = "{out}"
workers = 2
{extra}
{algorithm}
"#,
        toy = toy(),
        out = dir.join("results").display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const TWO_1F1B: &str = r#"
[[algorithm]]
name = "1f1b*"
label = "even"
options = { partition = [0, 12] }
[[algorithm]]
name = "1f1b*"
label = "uneven"
options = { partition = [0, 8] }
"#;

fn summary(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn journal_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[test]
fn two_sweeps_started_at_once_on_one_output_run_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = sweep_file(dir.path(), "twice", "", TWO_1F1B);
    let start = || {
        std::process::Command::new(exe())
            .args(["sweep", file.to_str().unwrap(), "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success());
    let (sa, sb) = (summary(&a), summary(&b));
    // Between them the two runners ran the grid once.
    assert_eq!(
        sa["ran"].as_u64().unwrap() + sb["ran"].as_u64().unwrap(),
        16
    );
    let journal = PathBuf::from(sa["journal"].as_str().unwrap());
    assert_eq!(journal_lines(&journal), 16, "the journal holds a job twice");
    let rows =
        pipeopt::sweep::table::read_rows(Path::new(sa["parquet"].as_str().unwrap())).unwrap();
    assert_eq!(rows.len(), 16);
    let keys: std::collections::HashSet<_> = rows.iter().map(|r| &r.key).collect();
    assert_eq!(keys.len(), 16);
    // `table` counts every run once.
    let out = pipeopt()
        .args(["table", sa["parquet"].as_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let t = summary(&out);
    let runs: u64 = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runs"].as_u64().unwrap())
        .sum();
    assert_eq!(runs, 16);
}

#[test]
fn a_journal_holding_a_job_twice_gives_one_row_the_last() {
    use pipeopt::sweep::config::Experiment;
    use pipeopt::sweep::run::{self, read_journal, Journal};
    let dir = tempfile::tempdir().unwrap();
    let file = sweep_file(dir.path(), "dup", "", TWO_1F1B);
    let exp = Experiment::load(&file).unwrap();
    let jobs = run::jobs(&exp).unwrap();
    let journal = dir.path().join("j.jsonl");
    {
        let mut j = Journal::open(&journal).unwrap();
        let ctx = run::RunContext::default();
        let mut first = run::skeleton(&jobs[0], &ctx);
        first.message = "first".into();
        let other = run::skeleton(&jobs[1], &ctx);
        let mut last = first.clone();
        last.status = pipeopt::model::Status::Valid;
        last.message = "last".into();
        for r in [&first, &other, &last] {
            j.append(r).unwrap();
        }
    }
    let rows = read_journal(&journal).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].key, jobs[0].key);
    assert_eq!(rows[0].message, "last");
}

#[test]
fn absurd_durations_and_overflowing_sums_are_input_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let base = [
        "plan",
        "--instance",
        &toy(),
        "-p",
        "2",
        "-m",
        "8GiB",
        "-b",
        "12GB/s",
    ];
    pipeopt()
        .args(base)
        .args(["-a", "contiguous-opt", "--time-limit", "1e20s"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--time-limit")
                .and(predicate::str::contains("panicked").not()),
        );
    pipeopt()
        .args(base)
        .args(["-a", "1f1b*", "--partition", "0,12", "--out"])
        .arg(&plan)
        .assert()
        .success();
    pipeopt()
        .args(["schedule"])
        .arg(&plan)
        .args(["--time-limit", "1e20s", "--out"])
        .arg(dir.path().join("s.json"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("panicked").not());
    // In a sweep file: found when the file loads, before anything is written.
    for (extra, algorithm, field) in [
        ("job_timeout = \"1e20s\"", TWO_1F1B, "job_timeout"),
        (
            "",
            "[[algorithm]]\nname = \"contiguous-opt\"\noptions = { time_limit = \"1e20s\" }",
            "time_limit",
        ),
    ] {
        let file = sweep_file(dir.path(), "absurd", extra, algorithm);
        pipeopt().arg("sweep").arg(&file).assert().code(2).stderr(
            predicate::str::contains(field).and(predicate::str::contains("panicked").not()),
        );
        assert!(
            !dir.path().join("results").exists(),
            "{field}: files written"
        );
    }
    // Layer times of 1e308: their sums overflow.
    let mut inst: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(toy()).unwrap()).unwrap();
    for l in inst["layers"].as_array_mut().unwrap() {
        l["fwd"] = 1e308.into();
        l["bwd"] = 1e308.into();
    }
    let huge = dir.path().join("huge.json");
    std::fs::write(&huge, inst.to_string()).unwrap();
    pipeopt()
        .args(["plan", "--instance"])
        .arg(&huge)
        .args([
            "-p",
            "2",
            "-m",
            "8GiB",
            "-b",
            "12GB/s",
            "-a",
            "ilp",
            "--coarsen",
            "8",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("fwd").and(predicate::str::contains("overflow")));
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_quietly_and_a_full_one_is_an_error() {
    let args = [
        "plan",
        "--instance",
        &toy(),
        "-p",
        "2",
        "-m",
        "8GiB",
        "-b",
        "12GB/s",
        "-a",
        "1f1b*",
        "--partition",
        "0,12",
    ];
    let out = run_with_closed_stdout(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    if Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = std::process::Command::new(exe())
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // A failed write, not bad input.
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("stdout") && !err.contains("panicked"), "{err}");
    }
}

/// Pids of the children of `pid` (all its threads).
#[cfg(target_os = "linux")]
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// True while `pid` runs (exists and is not a zombie).
#[cfg(target_os = "linux")]
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
#[test]
fn killing_the_runner_kills_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    // Jobs that run until their 30 s limit: the general MILP without coarsening on a
    // 24-layer chain at 3 processors.
    let text = format!(
        r#"
name = "slow"
instances = ["{toy}"]
processors = [3]
memory = ["8GiB"]
bandwidth = ["12GB/s"]
output = "{out}"
workers = 2
[[algorithm]]
name = "ilp"
options = {{ time_limit = "30s" }}
[[algorithm]]
name = "ilp"
label = "ilp-monolithic"
options = {{ time_limit = "30s", ilp_search = "monolithic" }}
"#,
        toy = toy(),
        out = dir.path().join("results").display(),
    );
    let file = dir.path().join("slow.toml");
    std::fs::write(&file, text).unwrap();
    let mut runner = std::process::Command::new(exe())
        .args(["sweep", file.to_str().unwrap(), "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let mut jobs = Vec::new();
    while started.elapsed() < std::time::Duration::from_secs(20) {
        jobs = children(runner.id());
        if jobs.len() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!jobs.is_empty(), "the runner started no job");
    assert!(jobs.iter().all(|&p| running(p)));
    runner.kill().unwrap(); // SIGKILL
    runner.wait().unwrap();
    let killed = std::time::Instant::now();
    while jobs.iter().any(|&p| running(p)) && killed.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let alive: Vec<u32> = jobs.iter().copied().filter(|&p| running(p)).collect();
    for &p in &alive {
        // SAFETY: kill on a pid this test saw as its grandchild; cleanup only.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    assert!(alive.is_empty(), "jobs {alive:?} outlived their runner");
}

#[test]
fn error_rows_are_retried_on_resume_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    // A job timeout of 1 ms: (almost) every row is an error. A job that spawns, runs and
    // exits within it is a row like any other, so the counts are what each run reports.
    let file = sweep_file(dir.path(), "retry", "job_timeout = \"1ms\"", TWO_1F1B);
    let out = pipeopt()
        .arg("sweep")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = summary(&out);
    let errors = s["errors"].as_u64().unwrap();
    assert!(errors >= 8, "the 1-ms timeout should fail most jobs: {s}");
    // Counted again by a run that has nothing new to do.
    let again = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    // Every error, and only they, ran again (under the same timeout: most fail again).
    assert_eq!(again["ran"], errors, "{again}");
    assert_eq!(again["already_done"], 16 - errors, "{again}");
    let errors = again["errors"].as_u64().unwrap();
    assert!(errors >= 1, "{again}");
    // With a sane timeout the errors run again and are replaced.
    let file = sweep_file(dir.path(), "retry", "job_timeout = \"10min\"", TWO_1F1B);
    let fixed = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(fixed["ran"], errors, "{fixed}");
    assert_eq!(fixed["retried"], errors, "{fixed}");
    assert_eq!(fixed["errors"], 0, "{fixed}");
    let rows =
        pipeopt::sweep::table::read_rows(Path::new(fixed["parquet"].as_str().unwrap())).unwrap();
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|r| r.status != Status::Error), "{rows:?}");
}

#[test]
fn settings_wrong_for_every_job_are_found_when_the_file_loads() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("job_timeout = \"0s\"", TWO_1F1B.to_string(), "job_timeout"),
        (
            "",
            "[[algorithm]]\nname = \"contiguous-opt\"\noptions = { time_limit = \"0s\" }".into(),
            "algorithm[0].options.time_limit",
        ),
        ("", "[[algorithm]]\nname = \"1f1b*\"".into(), "partition"),
        (
            "",
            "[[algorithm]]\nname = \"1f1b*\"\noptions = { partition = [0, 99] }".into(),
            "algorithm[0].options.partition",
        ),
        (
            "",
            "[[algorithm]]\nname = \"1f1b*\"\noptions = { partition = [1, 5] }".into(),
            "algorithm[0].options.partition",
        ),
        (
            "",
            "[[algorithm]]\nname = \"1f1b*\"\noptions = { partition = [0, 2, 4, 6, 8] }".into(),
            "algorithm[0].options.partition",
        ),
    ];
    for (extra, algorithm, field) in cases {
        let file = sweep_file(dir.path(), "bad", extra, &algorithm);
        pipeopt()
            .arg("sweep")
            .arg(&file)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(field));
        assert!(
            !dir.path().join("results").exists(),
            "{field}: files written"
        );
    }
}

#[test]
fn text_after_a_json_document_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    pipeopt()
        .args([
            "plan",
            "--instance",
            &toy(),
            "-p",
            "2",
            "-m",
            "8GiB",
            "-b",
            "12GB/s",
        ])
        .args(["-a", "1f1b*", "--partition", "0,12", "--out"])
        .arg(&plan)
        .assert()
        .success();
    pipeopt().arg("validate").arg(&plan).assert().success();
    let text = std::fs::read_to_string(&plan).unwrap();
    let two = dir.path().join("two.json");
    std::fs::write(&two, format!("{text}\n{{\"instance\": ")).unwrap();
    pipeopt()
        .arg("validate")
        .arg(&two)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("two.json").and(predicate::str::contains("after")));
    let inst = dir.path().join("inst.json");
    std::fs::write(&inst, std::fs::read_to_string(toy()).unwrap() + "garbage").unwrap();
    pipeopt()
        .args(["plan", "--instance"])
        .arg(&inst)
        .args(["-p", "2", "-m", "8GiB", "-b", "12GB/s", "-a", "pipedream"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("inst.json"));
    // Trailing whitespace is fine.
    std::fs::write(&inst, std::fs::read_to_string(toy()).unwrap() + "\n\n  ").unwrap();
    pipeopt()
        .args(["plan", "--instance"])
        .arg(&inst)
        .args(["-p", "2", "-m", "8GiB", "-b", "12GB/s", "-a", "pipedream"])
        .assert()
        .success();
}

#[test]
fn a_resumed_table_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let file = sweep_file(dir.path(), "bytes", "", TWO_1F1B);
    let first = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let csv = PathBuf::from(first["csv"].as_str().unwrap());
    let parquet = PathBuf::from(first["parquet"].as_str().unwrap());
    let (csv1, rows1) = (
        std::fs::read(&csv).unwrap(),
        pipeopt::sweep::table::read_rows(&parquet).unwrap(),
    );
    // Nothing left to run: the tables are rewritten from the journal alone.
    let again = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(again["ran"], 0);
    assert_eq!(std::fs::read(&csv).unwrap(), csv1);
    assert_eq!(pipeopt::sweep::table::read_rows(&parquet).unwrap(), rows1);
}

#[test]
fn journal_floats_round_trip_exactly() {
    use pipeopt::sweep::row::Row;
    use pipeopt::sweep::run::{read_journal, skeleton, Journal};
    let dir = tempfile::tempdir().unwrap();
    let file = sweep_file(dir.path(), "floats", "", TWO_1F1B);
    let exp = pipeopt::sweep::config::Experiment::load(&file).unwrap();
    let jobs = pipeopt::sweep::run::jobs(&exp).unwrap();
    // xorshift: deterministic doubles spread over many magnitudes.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
        mantissa * 10f64.powi((x % 40) as i32 - 20)
    };
    let path = dir.path().join("j.jsonl");
    let mut written: Vec<Row> = Vec::new();
    {
        let mut j = Journal::open(&path).unwrap();
        for (i, job) in jobs.iter().cycle().take(16).enumerate() {
            let mut r = skeleton(job, &Default::default());
            r.key = format!("k{i}");
            r.period = Some(next());
            r.lower_bound = Some(next());
            r.sequential = next();
            r.wall_seconds = next();
            r.peak_memory = (0..50).map(|_| next()).collect();
            j.append(&r).unwrap();
            written.push(r);
        }
    }
    let read = read_journal(&path).unwrap();
    for (a, b) in written.iter().zip(&read) {
        let bits = |r: &Row| {
            let mut v = vec![
                r.period.unwrap().to_bits(),
                r.lower_bound.unwrap().to_bits(),
                r.sequential.to_bits(),
                r.wall_seconds.to_bits(),
            ];
            v.extend(r.peak_memory.iter().map(|m| m.to_bits()));
            v
        };
        assert_eq!(
            bits(a),
            bits(b),
            "a float changed on its way through the journal"
        );
    }
}

#[test]
fn infeasible_is_a_result_for_plan_and_schedule_and_leaves_no_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let args = |m: &str| {
        vec![
            "plan".to_string(),
            "--instance".into(),
            toy(),
            "-p".into(),
            "2".into(),
            "-m".into(),
            m.into(),
            "-b".into(),
            "12GB/s".into(),
            "-a".into(),
            "1f1b*".into(),
            "--partition".into(),
            "0,12".into(),
            "--out".into(),
            plan.display().to_string(),
        ]
    };
    pipeopt().args(args("8GiB")).assert().success();
    assert!(plan.exists());
    pipeopt()
        .args(args("10MiB"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Infeasible"));
    assert!(!plan.exists(), "an older plan passes for this run's");
    // schedule: the same rule. A plan whose platform lost most of its memory.
    pipeopt().args(args("8GiB")).assert().success();
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    p["platform"]["memory"] = 1e6.into();
    std::fs::write(&plan, p.to_string()).unwrap();
    let out = dir.path().join("scheduled.json");
    std::fs::write(&out, "old").unwrap();
    pipeopt()
        .arg("schedule")
        .arg(&plan)
        .args(["--time-limit", "20s", "--json", "--out"])
        .arg(&out)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("\"status\":\"infeasible\""));
    assert!(!out.exists());
}

#[test]
fn small_promises_of_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    pipeopt()
        .args([
            "plan",
            "--instance",
            &toy(),
            "-p",
            "2",
            "-m",
            "8GiB",
            "-b",
            "12GB/s",
        ])
        .args(["-a", "1f1b*", "--partition", "0,12", "--out"])
        .arg(&plan)
        .assert()
        .success();
    // gantt: SVG or PNG by name, nothing else.
    let pdf = dir.path().join("g.pdf");
    pipeopt()
        .arg("gantt")
        .arg(&plan)
        .arg("--out")
        .arg(&pdf)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("svg"));
    assert!(!pdf.exists());
    let png = dir.path().join("g.png");
    pipeopt()
        .arg("gantt")
        .arg(&plan)
        .arg("--out")
        .arg(&png)
        .assert()
        .success();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    // --partition is for the algorithms that take one.
    pipeopt()
        .args([
            "plan",
            "--instance",
            &toy(),
            "-p",
            "2",
            "-m",
            "8GiB",
            "-b",
            "12GB/s",
        ])
        .args(["-a", "pipedream", "--partition", "0,12"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--partition"));
    // A memory of 16 bytes is a mistake more often than not.
    pipeopt()
        .args([
            "plan",
            "--instance",
            &toy(),
            "-p",
            "2",
            "-m",
            "16",
            "-b",
            "12GB/s",
        ])
        .args(["-a", "pipedream"])
        .assert()
        .success()
        .stderr(predicate::str::contains("warning").and(predicate::str::contains("GiB")));
    // partition pipedream --json: one object even without a partition.
    let out = pipeopt()
        .args(["partition", "pipedream", "-i", &toy(), "--processors", "2"])
        .args(["--bandwidth", "12GB/s", "--memory", "1MiB", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "infeasible");
    // MixPipe's Gamma stays in 0..=(D - K) / 2.
    pipeopt()
        .args([
            "sync",
            "--instance",
            &toy(),
            "--stages",
            "4",
            "--schedule",
            "mixpipe",
        ])
        .args(["--k", "2", "--gamma", "99"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Gamma"));
}

#[test]
fn merge_keeps_grid_order_needs_every_shard_and_writes_both_tables() {
    let dir = tempfile::tempdir().unwrap();
    let file = sweep_file(dir.path(), "m", "", TWO_1F1B);
    let whole = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let mut shards = Vec::new();
    for i in 1..=3 {
        let s = summary(
            &pipeopt()
                .arg("sweep")
                .arg(&file)
                .args(["--shard", &format!("{i}/3"), "--json"])
                .output()
                .unwrap(),
        );
        shards.push(s["parquet"].as_str().unwrap().to_string());
    }
    let out = dir.path().join("merged.csv");
    pipeopt()
        .arg("merge")
        .args([&shards[2], &shards[0], &shards[1]])
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    assert!(out.with_extension("parquet").exists());
    let keys = |p: &Path| -> Vec<String> {
        pipeopt::sweep::table::read_rows(p)
            .unwrap()
            .into_iter()
            .map(|r| r.key)
            .collect()
    };
    assert_eq!(
        keys(&out.with_extension("parquet")),
        keys(Path::new(whole["parquet"].as_str().unwrap()))
    );
    pipeopt()
        .arg("merge")
        .args([&shards[0], &shards[2]])
        .arg("-o")
        .arg(dir.path().join("partial.parquet"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("shard-2-of-3"));
}

/// `merge` reads which grid and shard a table is from the table itself: renamed shards
/// merge into the whole grid; a missing shard, a shard given twice, shards of another
/// experiment or of another version of the file, and a table that is no sweep's shard
/// (whatever its name) are refused with exit 2, naming the table.
#[test]
fn merge_knows_shards_by_their_contents_not_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shards_of = |file: &Path| -> Vec<PathBuf> {
        (1..=3)
            .map(|i| {
                let s = summary(
                    &pipeopt()
                        .arg("sweep")
                        .arg(file)
                        .args(["--shard", &format!("{i}/3"), "--json"])
                        .output()
                        .unwrap(),
                );
                PathBuf::from(s["parquet"].as_str().unwrap())
            })
            .collect()
    };
    let file = sweep_file(d, "m", "", TWO_1F1B);
    let whole = summary(
        &pipeopt()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let whole = PathBuf::from(whole["parquet"].as_str().unwrap());
    let shards = shards_of(&file);
    let keys = |p: &Path| -> Vec<String> {
        pipeopt::sweep::table::read_rows(p)
            .unwrap()
            .into_iter()
            .map(|r| r.key)
            .collect()
    };
    // Renamed, in any order: the whole grid, in grid order.
    let renamed = d.join("renamed");
    std::fs::create_dir(&renamed).unwrap();
    let parts: Vec<PathBuf> = ["partC", "partA", "partB"]
        .iter()
        .zip([&shards[2], &shards[0], &shards[1]])
        .map(|(name, s)| {
            let p = renamed.join(format!("{name}.parquet"));
            std::fs::copy(s, &p).unwrap();
            p
        })
        .collect();
    let out = d.join("merged.parquet");
    pipeopt()
        .arg("merge")
        .args(&parts)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    assert_eq!(keys(&out), keys(&whole));
    // The merged table is the whole grid (1 of 1): it merges alone into itself.
    pipeopt()
        .arg("merge")
        .arg(&out)
        .arg("-o")
        .arg(d.join("again.parquet"))
        .assert()
        .success();
    let refused = |tables: &[&Path], words: &[&str]| {
        let o = pipeopt()
            .arg("merge")
            .args(tables)
            .arg("-o")
            .arg(d.join("refused.parquet"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{tables:?}: {err}");
        for w in words {
            assert!(err.contains(w), "{w:?} not in {err}");
        }
        assert!(!d.join("refused.parquet").exists());
    };
    // Renamed with one missing; a shard twice.
    refused(&[&parts[1], &parts[2]], &["missing", "shard-3-of-3"]);
    refused(
        &[&parts[0], &parts[1], &parts[2], &shards[0]],
        &["shard-1-of-3", "once"],
    );
    // Another experiment's shard, another version of this one's file.
    let other = shards_of(&sweep_file(d, "n", "", TWO_1F1B));
    refused(
        &[&shards[0], &shards[1], &other[2]],
        &["experiment", "\"n\""],
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let changed = shards_of(&sweep_file(elsewhere.path(), "m", "", TWO_1F1B));
    refused(
        &[&shards[0], &shards[1], &changed[2]],
        &["configuration hash"],
    );
    // The whole table, and a table without an identity, named as the missing shard.
    let posing = d.join("shard-3-of-3.parquet");
    std::fs::copy(&whole, &posing).unwrap();
    refused(
        &[&shards[0], &shards[1], &posing],
        &["shard-3-of-3.parquet", "shard of 1"],
    );
    let rows = pipeopt::sweep::table::read_rows(&whole).unwrap();
    let mut files = pipeopt::sweep::table::TableFiles::in_dir(d, "shard-3-of-3");
    files.json = None;
    pipeopt::sweep::table::write_tables(&rows, &files).unwrap();
    refused(
        &[&shards[0], &shards[1], &posing],
        &["shard-3-of-3.parquet", "not a shard"],
    );
}
