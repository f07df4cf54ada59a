//! Every number a user gives has a range, checked where it is read: zero bandwidths that
//! would never finish a transfer, sizes that would drive an allocation past memory, counts
//! of zero, unknown names; each refused with exit status 2 and a message naming the flag,
//! or the file and the field, before anything runs. Also: the exit status of `validate` is
//! its verdict whatever becomes of stdout, help that cannot be written is a failure, and
//! the examples of `pipeopt --help` run as written.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn pipeopt() -> Command {
    let mut c = crate::support::pipeopt();
    // A hang is a failure of its own, not a test that never ends.
    c.timeout(Duration::from_secs(120));
    c
}

use crate::support::exe;
#[cfg(unix)]
use crate::support::run_with_closed_stdout;

fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

fn toy() -> String {
    format!("{}/instances/toy-chain.json", root())
}

fn bert() -> String {
    format!("{}/instances/bert48-b8.json", root())
}

/// Runs `args`, expects exit status 2 and every word of `words` in the message.
#[track_caller]
fn refused(args: &[&str], words: &[&str]) {
    let o = pipeopt().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
    }
}

/// A valid plan of the toy chain on 2 processors, written to `dir/plan.json`.
fn toy_plan(dir: &Path) -> PathBuf {
    let path = dir.join("plan.json");
    pipeopt()
        .args(["plan", "--instance", &toy(), "-p", "2", "-m", "8GiB"])
        .args([
            "-b",
            "12GB/s",
            "-a",
            "1f1b*",
            "--partition",
            "0,12",
            "--out",
        ])
        .arg(&path)
        .assert()
        .success();
    path
}

/// The plan at `from` with `edit` applied to its JSON, written to `dir/name`.
fn edited(from: &Path, dir: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path
}

/// A synchronous experiment over the toy chain, with `line` added at the top level and
/// `case` in its case.
fn sync_file(dir: &Path, top: &str, case: &str) -> PathBuf {
    let text = format!(
        r#"
name = "s"
memory = ["32GiB"]
micro_batch_sizes = [1]
schedules = ["gpipe"]
{top}
[[case]]
instance = "{toy}"
study = "weak"
stages = [2]
{case}
"#,
        toy = toy(),
    );
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_zero_bandwidth_is_refused_not_simulated_forever() {
    for instance in [bert(), toy()] {
        for b in ["0", "0GB/s", "0bps"] {
            refused(
                &[
                    "sync",
                    "--instance",
                    &instance,
                    "--stages",
                    "8",
                    "--bandwidth",
                    b,
                ],
                &["--bandwidth", "positive"],
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("out");
    let file = sync_file(dir.path(), "bandwidth = \"0GB/s\"", "samples = [4]");
    refused(
        &[
            "sync-sweep",
            file.to_str().unwrap(),
            "--out",
            o.to_str().unwrap(),
        ],
        &["s.toml", "bandwidth", "positive"],
    );
}

#[test]
fn sizes_that_drive_an_allocation_are_checked_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    refused(
        &[
            "plan",
            "--instance",
            &toy(),
            "-p",
            "1000000000000",
            "-m",
            "8GiB",
            "-b",
            "1GB/s",
            "-a",
            "madpipe-dp",
        ],
        &["--processors", "1024"],
    );
    refused(
        &[
            "plan",
            "--instance",
            &toy(),
            "-p",
            "2000",
            "-m",
            "8GiB",
            "-b",
            "1GB/s",
            "-a",
            "madpipe-dp",
        ],
        &["--processors", "1024"],
    );
    let plan = toy_plan(d);
    let huge = edited(&plan, d, "huge.json", |v| {
        v["platform"]["processors"] = 1_000_000_000_000u64.into()
    });
    let h = huge.to_str().unwrap();
    let svg = d.join("x.svg");
    let s = svg.to_str().unwrap();
    refused(
        &["validate", h],
        &["huge.json", "platform.processors", "1024"],
    );
    let scheduled = d.join("s.json");
    let sc = scheduled.to_str().unwrap();
    refused(
        &["schedule", h, "--time-limit", "5s", "--out", sc],
        &["huge.json", "platform.processors"],
    );
    refused(
        &["gantt", h, "--out", s],
        &["huge.json", "platform.processors"],
    );
    let p = plan.to_str().unwrap();
    refused(
        &["gantt", p, "--out", s, "--periods", "100000000"],
        &["--periods", "1000"],
    );
    let tiny = edited(&plan, d, "tiny.json", |v| {
        v["pattern"]["period"] = 1e-300.into()
    });
    refused(
        &["gantt", tiny.to_str().unwrap(), "--out", s],
        &["tiny.json", "pattern.period"],
    );
    assert!(!svg.exists());
    // A sweep of ten billion repetitions: refused when the file loads.
    let file = d.join("r.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"r\"\ninstances = [\"{}\"]\nprocessors = [2]\nmemory = [\"8GiB\"]\n\
             bandwidth = [\"12GB/s\"]\nrepetitions = 10000000000\noutput = \"{}\"\n\
             [[algorithm]]\nname = \"1f1b*\"\noptions = {{ partition = [0, 12] }}\n",
            toy(),
            d.join("results").display()
        ),
    )
    .unwrap();
    refused(
        &["sweep", file.to_str().unwrap()],
        &["r.toml", "repetitions", "10000"],
    );
    assert!(!d.join("results").exists());
}

#[test]
fn nonsense_numbers_and_names_exit_2_naming_the_flag_or_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t = toy();
    refused(
        &[
            "partition",
            "pipedream",
            "-i",
            &t,
            "--processors",
            "2",
            "--bandwidth",
            "1GB/s",
            "--memory",
            "0",
        ],
        &["--memory", "positive"],
    );
    let sync = ["sync", "--instance", &t, "--stages", "4"];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        sync.iter().copied().chain(extra.iter().copied()).collect()
    };
    refused(&with(&["--memory", "0"]), &["--memory", "positive"]);
    refused(
        &[
            "sync",
            "--instance",
            &t,
            "--stages",
            "8",
            "--partition",
            "0,10",
        ],
        &["--partition", "--stages"],
    );
    refused(
        &with(&["--explore", "--mini-batch", "0"]),
        &["--mini-batch"],
    );
    refused(&with(&["--micro-batches", "0"]), &["--micro-batches"]);
    refused(
        &with(&[
            "--schedule",
            "optimal",
            "--placement",
            "one-direction",
            "--micro-batches",
            "2000",
            "--time-limit",
            "2s",
        ]),
        &["--micro-batches", "256"],
    );
    refused(
        &[
            "sync",
            "--instance",
            &t,
            "--hybrid",
            "--gpus",
            "4",
            "--mini-batch",
            "8",
            "--allreduce-bandwidth",
            "0",
        ],
        &["--allreduce-bandwidth", "positive"],
    );
    let o = d.join("out");
    let o = o.to_str().unwrap();
    for (top, case, words) in [
        (
            "memory = [\"0GiB\"]",
            "samples = [4]",
            &["memory[0]", "positive"][..],
        ),
        (
            "",
            "samples_per_stage = 0",
            &["case[0].samples_per_stage"][..],
        ),
        ("", "samples = [0]", &["case[0].samples[0]"][..]),
        (
            "[memory_figure]\nstages = 0\nmicro_batches = [2]",
            "samples = [4]",
            &["memory_figure.stages"][..],
        ),
    ] {
        // `memory` is given twice when the line replaces it: keep one.
        let file = sync_file(d, top, case);
        if top.starts_with("memory") {
            let text =
                std::fs::read_to_string(&file)
                    .unwrap()
                    .replacen("memory = [\"32GiB\"]\n", "", 1);
            std::fs::write(&file, text).unwrap();
        }
        let mut w = vec!["s.toml"];
        w.extend(words);
        refused(&["sync-sweep", file.to_str().unwrap(), "--out", o], &w);
    }
    let plan = toy_plan(d);
    let svg = d.join("x.svg");
    refused(
        &[
            "gantt",
            plan.to_str().unwrap(),
            "--out",
            svg.to_str().unwrap(),
            "--periods",
            "0",
        ],
        &["--periods"],
    );
    // A table to summarise: --ratio-to an algorithm it does not have, --by a column it
    // does not have.
    let table = small_table(d);
    let tb = table.to_str().unwrap();
    refused(
        &["table", tb, "--ratio-to", "magic"],
        &["--ratio-to", "magic", "even"],
    );
    refused(
        &[
            "figures",
            tb,
            "--ratio-to",
            "magic",
            "--out",
            d.join("f").to_str().unwrap(),
        ],
        &["--ratio-to", "magic", "even"],
    );
    let o = pipeopt()
        .args(["table", tb, "--by", "colour"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--by") && err.contains("colour") && err.contains("processors"),
        "{err}"
    );
    assert!(
        err.lines().count() <= 3,
        "a query plan, not a message: {err}"
    );
}

/// The table of a small sweep (labels `even`, `uneven`).
fn small_table(dir: &Path) -> PathBuf {
    let file = dir.join("t.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"t\"\ninstances = [\"{}\"]\nprocessors = [2]\nmemory = [\"8GiB\"]\n\
             bandwidth = [\"12GB/s\"]\noutput = \"{}\"\n\
             [[algorithm]]\nname = \"1f1b*\"\nlabel = \"even\"\noptions = {{ partition = [0, 12] }}\n\
             [[algorithm]]\nname = \"1f1b*\"\nlabel = \"uneven\"\noptions = {{ partition = [0, 8] }}\n",
            toy(),
            dir.join("results").display()
        ),
    )
    .unwrap();
    pipeopt()
        .args(["sweep", file.to_str().unwrap(), "--isolation", "thread"])
        .assert()
        .success();
    dir.join("results/t.parquet")
}

#[test]
fn negative_values_reach_the_flags_own_check() {
    let t = toy();
    let plan = |p: &'static str, m: &'static str| -> Vec<String> {
        [
            "plan",
            "--instance",
            &t,
            "-p",
            p,
            "-m",
            m,
            "-b",
            "1GB/s",
            "-a",
            "madpipe-dp",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    for (args, words) in [
        (plan("2", "-1GiB"), &["--memory", "-1GiB", "negative"][..]),
        (plan("-1", "8GiB"), &["--processors", "-1"][..]),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, words);
    }
    let mut args = plan("2", "8GiB");
    args[10] = "madpipe".into();
    args.extend(["--time-limit".to_string(), "-1s".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, &["--time-limit", "-1s", "negative"]);
}

#[test]
fn messages_name_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A device model whose rate is positive but absurd: the device file and its key.
    let h100 = std::fs::read_to_string(format!("{}/devices/h100.toml", root())).unwrap();
    let mut lines: Vec<String> = h100.lines().map(str::to_string).collect();
    let at = lines.iter().position(|l| l.starts_with("conv =")).unwrap();
    lines[at] = "conv = 1e-300".into();
    let device = d.join("slow.toml");
    std::fs::write(&device, lines.join("\n")).unwrap();
    let out = d.join("i.json");
    refused(
        &[
            "instance",
            "--model",
            "vgg16",
            "--batch",
            "8",
            "--times",
            "analytic",
            "--device-model",
            device.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &["slow.toml", "conv", "1e3"],
    );
    assert!(!out.exists());
    // A truncated instance: where it ends, not a field `?`.
    let text = std::fs::read_to_string(toy()).unwrap();
    let cut = d.join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let o = pipeopt()
        .args(["validate", cut.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cut.json") && err.contains("line"), "{err}");
    assert!(!err.contains('?'), "{err}");
    let o = pipeopt()
        .args(["sync", "--instance", cut.to_str().unwrap(), "--stages", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut short") && !err.contains('?'), "{err}");
    // A bad instance in a sweep: the experiment file and its field, then the instance.
    let bad = d.join("bad.json");
    std::fs::write(&bad, text.replacen("\"fwd\":", "\"fwd\": -1, \"x\":", 1)).unwrap();
    let file = d.join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"e\"\ninstances = [\"{}\"]\nprocessors = [2]\nmemory = [\"8GiB\"]\n\
             bandwidth = [\"12GB/s\"]\noutput = \"{}\"\n[[algorithm]]\nname = \"madpipe-dp\"\n",
            bad.display(),
            d.join("results").display()
        ),
    )
    .unwrap();
    refused(
        &["sweep", file.to_str().unwrap()],
        &["e.toml", "instances[0]", "bad.json"],
    );
    let file = sync_file(d, "", "samples = [4]");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&toy(), bad.to_str().unwrap());
    std::fs::write(&file, text).unwrap();
    refused(
        &[
            "sync-sweep",
            file.to_str().unwrap(),
            "--out",
            d.join("o").to_str().unwrap(),
        ],
        &["s.toml", "case[0].instance", "bad.json"],
    );
}

#[cfg(unix)]
#[test]
fn the_verdict_survives_a_closed_stdout_and_help_needs_a_writable_one() {
    let dir = tempfile::tempdir().unwrap();
    let plan = toy_plan(dir.path());
    let invalid = edited(&plan, dir.path(), "invalid.json", |v| {
        v["platform"]["memory"] = 1.0.into()
    });
    for json in [false, true] {
        let mut args = vec!["validate", invalid.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = run_with_closed_stdout(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let out = run_with_closed_stdout(&["validate", plan.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0));
    }
    if Path::new("/dev/full").exists() {
        for args in [&["--help"][..], &["plan", "--help"][..], &["--version"][..]] {
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
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains("stdout"), "{err}");
        }
    }
    // A closed pipe still ends help quietly.
    let out = run_with_closed_stdout(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
}

/// Every command's help, for the checks below.
fn helps() -> Vec<(String, String)> {
    let top = pipeopt().arg("--help").output().unwrap();
    let top = String::from_utf8_lossy(&top.stdout).to_string();
    let mut out = vec![("pipeopt".to_string(), top.clone())];
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() > 10, "{commands:?}");
    for c in commands {
        let mut args = vec![c.clone()];
        if c == "import" || c == "partition" {
            args.push(if c == "import" { "onnx" } else { "pipedream" }.into());
        }
        args.push("--help".into());
        let o = pipeopt().args(&args).output().unwrap();
        assert!(o.status.success(), "{args:?}");
        out.push((
            args.join(" "),
            String::from_utf8_lossy(&o.stdout).to_string(),
        ));
    }
    out
}

#[test]
fn help_texts_have_no_unresolved_doc_links() {
    for (command, text) in helps() {
        assert!(
            !text.contains("[`") && !text.contains("`]"),
            "{command} --help prints a doc link: {text}"
        );
    }
}

/// The "typical session" of `pipeopt --help`, run as written (in a directory beside the
/// repository's `../shared`, as the paths it names are relative to the repository).
#[test]
fn the_typical_session_of_the_help_runs_as_written() {
    let shared = Path::new(root()).join("../shared/pipedream-profiles/resnet50.txt");
    if !shared.exists() {
        eprintln!("skipped: {} is absent", shared.display());
        return;
    }
    let top = pipeopt().arg("--help").output().unwrap();
    let top = String::from_utf8_lossy(&top.stdout).to_string();
    let session: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.contains("typical session"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(session.len() >= 4, "{top}");
    let script = session.join("\n");
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::symlink(
        Path::new(root()).join("../shared").canonicalize().unwrap(),
        dir.path().join("shared"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        exe().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = std::process::Command::new("bash")
        .args(["-e", "-c", &script])
        .current_dir(&work)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}\nstdout {}\nstderr {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(work.join("plan.json").exists() && work.join("plan.svg").exists());
}
