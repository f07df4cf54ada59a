//! No panic on arbitrary bytes: the instance and plan JSON readers (and the judge on any plan
//! that loads), PipeDream's graph.txt reader, the sweep TOML parser, the ONNX reader, the
//! device TOML reader, and, through the binary, `pipeopt sync`'s flags and `pipeopt
//! validate`'s plan files get random bytes and random mutations of valid files. Bad input
//! must be an error (exit status 2 from the binary; `validate` says 1 for a plan it
//! rejects), never a panic. The valid files mutated are the seeds of tests/fuzz-corpus/
//! (one folder per reader). Bounded in time: a few hundred cases per library reader, a few
//! dozen per command, seconds to a minute in all.

use pipeopt::model::{Instance, Plan};
use pipeopt::sweep::config::Experiment;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

const CASES: u32 = 192;

/// Cases for the readers reached through the binary (a process each).
const PROCESS_CASES: u32 = 24;

/// A seed of tests/fuzz-corpus/.
fn corpus(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fuzz-corpus/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn corpus_text(path: &str) -> String {
    String::from_utf8(corpus(path)).unwrap()
}

/// Edits of bytes (not text): [`mutate`] on a binary file.
fn mutate_bytes(bytes: &[u8], edits: &[(usize, usize, Vec<u8>)]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for (at, len, with) in edits {
        if b.is_empty() {
            b.extend_from_slice(with);
            continue;
        }
        let at = at % b.len();
        let end = (at + len % 16).min(b.len());
        b.splice(at..end, with.iter().copied());
    }
    b
}

fn read_onnx(bytes: &[u8]) {
    let read = pipeopt::nets::onnx::ReadOptions::default();
    let _ = pipeopt::nets::onnx::network_from_onnx(bytes, "fuzz", &read);
    let accept = pipeopt::nets::onnx::ReadOptions {
        accept_fused: true,
        ..read
    };
    let _ = pipeopt::nets::onnx::network_from_onnx(bytes, "fuzz", &accept);
}

fn parse_device(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = pipeopt::nets::DeviceModel::parse(&text, "fuzz.toml");
}

/// Runs the binary; a panic, a crash or a status other than those `allowed` fails.
fn no_panic(args: &[&std::ffi::OsStr], allowed: &[i32]) -> Result<(), TestCaseError> {
    let o = crate::support::pipeopt()
        .timeout(std::time::Duration::from_secs(120))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    prop_assert!(!err.contains("panicked"), "{args:?}: {err}");
    prop_assert!(
        o.status.code().is_some_and(|c| allowed.contains(&c)),
        "{args:?}: {:?} {err}",
        o.status
    );
    Ok(())
}

/// Flag values that reach the checks' edges.
fn flag_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-1",
            "1",
            "3",
            "1e308",
            "1e-320",
            "NaN",
            "inf",
            "",
            "18446744073709551616",
            "100000",
            "0,0",
            "5,3",
            "1,2,3,4,5,6,7,8,9",
            "-0",
            "0.5",
            "1e9s",
            "12GB/s",
            "0GiB",
            "zzz",
            "optimal",
            "gems",
            "chimera",
            "1f1b-as",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,8}",
    ]
}

fn toy_text() -> String {
    std::fs::read_to_string(format!(
        "{}/instances/toy-chain.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A valid plan file's text (a 1F1B* plan of the toy chain).
fn plan_text() -> String {
    use pipeopt::algorithm::{planner, run, Problem};
    let inst: Instance = serde_json::from_str(&toy_text()).unwrap();
    let platform = pipeopt::model::Platform::new(3, 8.0 * 1073741824.0, 12e9);
    let options = serde_json::json!({"partition": vec![0, 8, 16]});
    let p = planner("1f1b*", &options).unwrap();
    let (plan, _) = run(
        p.as_ref(),
        &Problem {
            instance: &inst,
            platform: &platform,
        },
    )
    .unwrap();
    serde_json::to_string_pretty(&plan.unwrap()).unwrap()
}

const GRAPH: &str = "node1 -- Input -- forward_compute_time=1.000, backward_compute_time=0.000, activation_size=8.0, parameter_size=0.000\n\
node2 -- Linear(a -- b) -- forward_compute_time=2.000, backward_compute_time=3.000, activation_size=4.0, parameter_size=16.000\n\
node3 -- ReLU -- forward_compute_time=0.500, backward_compute_time=0.700, activation_size=[4.0; 2.0], parameter_size=0.000\n\
node4 -- Add -- forward_compute_time=0.100, backward_compute_time=0.100, activation_size=4.0, parameter_size=0.000\n\
\tnode1 -- node2\n\tnode2 -- node3\n\tnode2 -- node4\n\tnode3 -- node4\n";

fn sweep_text() -> String {
    format!(
        r#"name = "fuzz"
instances = ["{}/instances/toy-chain.json"]
processors = [2, 4]
memory = ["3GiB", "16GiB"]
bandwidth = ["12GB/s"]
job_timeout = "10min"
[[algorithm]]
name = "1f1b*"
options = {{ partition = [0, 12], period = "200ms" }}
[[algorithm]]
name = "madpipe"
options = {{ time_limit = "60s", madpipe = {{ }} }}
"#,
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Edits of a valid text: each replaces a byte range with random bytes, or duplicates or
/// deletes one, so most cases get past the first byte and into fields and numbers.
fn mutate(text: &str, edits: &[(usize, usize, Vec<u8>)]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for (at, len, with) in edits {
        if b.is_empty() {
            b.extend_from_slice(with);
            continue;
        }
        let at = at % b.len();
        let end = (at + len % 16).min(b.len());
        b.splice(at..end, with.iter().copied());
    }
    b
}

fn edits() -> impl Strategy<Value = Vec<(usize, usize, Vec<u8>)>> {
    prop::collection::vec(
        (
            any::<usize>(),
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..6),
                // Tokens that reach deeper: numbers at the edges, JSON and TOML syntax.
                prop::sample::select(vec![
                    b"1e308".to_vec(),
                    b"-1".to_vec(),
                    b"NaN".to_vec(),
                    b"0".to_vec(),
                    b"1e-320".to_vec(),
                    b"null".to_vec(),
                    b"[]".to_vec(),
                    b"{}".to_vec(),
                    b"\"".to_vec(),
                    b"18446744073709551616".to_vec(),
                    b"\"1e20s\"".to_vec(),
                    b"\tnode9 -- node1\n".to_vec(),
                ]),
            ],
        ),
        1..4,
    )
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn load_plan(dir: &Path, bytes: &[u8]) {
    if let Ok(plan) = Plan::load(&write(dir, "plan.json", bytes)) {
        // A plan that loads is judged without panicking, valid or not.
        let _ = pipeopt::judge::judge_plan(&plan);
    }
}

fn load_instance(dir: &Path, bytes: &[u8]) {
    if let Ok(inst) = Instance::load(&write(dir, "instance.json", bytes)) {
        let _ = inst.sums();
    }
}

fn import(dir: &Path, bytes: &[u8]) {
    let _ = pipeopt::io::pipedream::import_pipedream(&write(dir, "graph.txt", bytes), None);
}

fn parse_sweep(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = Experiment::parse(&text, Path::new("fuzz.toml"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().unwrap();
        load_instance(dir.path(), &bytes);
        load_plan(dir.path(), &bytes);
        import(dir.path(), &bytes);
        parse_sweep(&bytes);
    }

    #[test]
    fn mutated_instances(e in edits()) {
        let dir = tempfile::tempdir().unwrap();
        load_instance(dir.path(), &mutate(&toy_text(), &e));
    }

    #[test]
    fn mutated_plans(e in edits()) {
        let dir = tempfile::tempdir().unwrap();
        static PLAN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        load_plan(dir.path(), &mutate(PLAN.get_or_init(plan_text), &e));
    }

    #[test]
    fn mutated_graphs(e in edits()) {
        let dir = tempfile::tempdir().unwrap();
        import(dir.path(), &mutate(GRAPH, &e));
    }

    #[test]
    fn mutated_sweeps(e in edits()) {
        parse_sweep(&mutate(&sweep_text(), &e));
        parse_sweep(&mutate(&corpus_text("experiment/fuzz.toml"), &e));
    }

    #[test]
    fn arbitrary_onnx_and_device_files(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        read_onnx(&bytes);
        parse_device(&bytes);
    }

    #[test]
    fn mutated_onnx_models(e in edits()) {
        read_onnx(&mutate_bytes(&corpus("onnx/small.onnx"), &e));
    }

    #[test]
    fn mutated_device_files(e in edits()) {
        parse_device(&mutate(&corpus_text("device/v100.toml"), &e));
        parse_device(&mutate(&corpus_text("device/h100.toml"), &e));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: PROCESS_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    /// `pipeopt sync` with one or two flag values of a seed line replaced: exit 0 or 2.
    #[test]
    fn mutated_sync_flags(
        line in 0usize..5,
        at in prop::collection::vec(any::<usize>(), 1..3),
        values in prop::collection::vec(flag_value(), 2),
    ) {
        let toy = format!("{}/instances/toy-chain.json", env!("CARGO_MANIFEST_DIR"));
        // The seed lines but the exact MILP's (its values drive a solver's run time).
        let lines: Vec<String> = corpus_text("sync/args.txt")
            .lines()
            .filter(|l| !l.contains("optimal"))
            .map(str::to_string)
            .collect();
        let mut words: Vec<String> =
            lines[line % lines.len()].split_whitespace().map(str::to_string).collect();
        // Replace values (words after a flag), never the flags themselves.
        let slots: Vec<usize> =
            (1..words.len()).filter(|&i| !words[i].starts_with("--")).collect();
        for (k, a) in at.iter().enumerate() {
            if !slots.is_empty() {
                words[slots[a % slots.len()]] = values[k].clone();
            }
        }
        let mut args: Vec<std::ffi::OsString> = vec!["sync".into(), "--instance".into(), toy.into()];
        args.extend(words.into_iter().map(Into::into));
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        no_panic(&args, &[0, 2])?;
    }

    /// `pipeopt validate` on mutated plan files: exit 0 (valid), 1 (rejected) or 2 (not a
    /// plan), never a panic.
    #[test]
    fn mutated_plan_files_through_validate(e in edits(), which in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let seed = if which { "plan/toy-1f1b.json" } else { "plan/toy-bipartition.json" };
        let file = write(dir.path(), "plan.json", &mutate(&corpus_text(seed), &e));
        no_panic(&["validate".as_ref(), file.as_os_str()], &[0, 1, 2])?;
    }
}
