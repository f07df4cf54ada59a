//! Every example command of the documentation runs as written: the `sh` blocks of
//! README.md, docs/*.md, results/README.md and instances/README.md, and the command lines of
//! `pipeopt --help` and of every subcommand's `--help`, in order, each in a sandbox laid out
//! like the repository (`instances/` and `experiments/` as they are, a copy of `results/`,
//! `../shared` beside it), with `pipeopt` and `./pipeopt.sh` the binary under test and `/tmp/`
//! a folder of the sandbox.
//!
//! Conventions the documents follow, which the test applies:
//! - `pipeopt SUB ... --flag value` repeats the arguments of the last full `pipeopt SUB`
//!   command above it, each flag given again replacing its earlier value.
//! - A command still running after [`cap`] seconds (default 5; `PIPEOPT_EXAMPLE_SECONDS`
//!   sets it; the grids run for minutes) is stopped and counted as started: it read its
//!   arguments and inputs without failing. Every other command must exit 0.
//! - The libtorch commands (`cargo run --features torch -- profile|execute ...`) run as
//!   `pipeopt profile|execute ...`: without the feature they must fail only for the missing
//!   libtorch, after their arguments were read.
//! - cargo's own commands (`cargo bench`, `./test.sh`, a bench binary) are not run here:
//!   `cargo test --all-targets` builds every bench, and CI runs `./test.sh`.

use crate::support::exe;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One example: where it is written and the command line, continuation lines joined and
/// the trailing comment removed.
#[derive(Debug, Clone)]
struct Example {
    at: String,
    command: String,
}

/// The `sh` blocks of a Markdown file: one example per command line.
fn markdown_examples(path: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut in_sh = None;
    let mut pending: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            in_sh = match in_sh {
                None => Some(matches!(fence.trim(), "sh" | "bash" | "console")),
                Some(_) => None,
            };
            continue;
        }
        if in_sh != Some(true) {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        push_line(&mut out, &mut pending, &at, line);
    }
    out
}

/// Adds a line of a shell block: a comment or blank line is skipped, a line ending in `\`
/// waits for the next one.
fn push_line(out: &mut Vec<Example>, pending: &mut Option<String>, at: &str, line: &str) {
    let code = strip_comment(line);
    let code = code.trim();
    if code.is_empty() && pending.is_none() {
        return;
    }
    let (continues, code) = match code.strip_suffix('\\') {
        Some(c) => (true, c.trim()),
        None => (false, code),
    };
    let joined = match pending.take() {
        Some(head) => format!("{head} {code}"),
        None => code.to_string(),
    };
    if continues {
        *pending = Some(joined);
    } else {
        out.push(Example {
            at: at.to_string(),
            command: joined,
        });
    }
}

/// The line without its comment (a `#` after a blank, outside single quotes).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '#' if !quoted && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// The help of `pipeopt ARGS --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(exe())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "pipeopt {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help lists under "Commands:" (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("Options"))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The command lines (`pipeopt ...` indented) of the help of `pipeopt`, and of every
/// subcommand's, recursively.
fn help_examples(args: &mut Vec<String>, out: &mut Vec<Example>) {
    let text = help(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let at = format!("pipeopt {} --help", args.join(" "));
    let mut pending = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if pending.is_some() || (line.starts_with(' ') && trimmed.starts_with("pipeopt ")) {
            push_line(out, &mut pending, &at, line);
        }
    }
    for sub in subcommands(&text) {
        args.push(sub);
        help_examples(args, out);
        args.pop();
    }
}

/// Words of a command line, split at blanks outside single quotes (quotes kept).
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in command.chars() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c.is_whitespace() && !quoted {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// `pipeopt SUB ... rest` with the arguments of the last full `pipeopt SUB` command,
/// every flag of `rest` replacing the same flag there (with its values); an error where no
/// full command is above it.
fn expand(examples: Vec<Example>) -> Vec<Result<Example, String>> {
    let mut full: Vec<Vec<String>> = Vec::new();
    let mut out = Vec::new();
    for mut e in examples {
        let w = words(&e.command);
        match w.iter().position(|x| x == "...") {
            None => full.push(w),
            Some(dots) => {
                let head = &w[..dots];
                let Some(base) = full
                    .iter()
                    .rev()
                    .find(|f| f.len() > dots && f[..dots] == *head)
                else {
                    out.push(Err(format!(
                        "{}: no full command above `{}`",
                        e.at, e.command
                    )));
                    continue;
                };
                let rest = &w[dots + 1..];
                let given: Vec<&String> = rest.iter().filter(|x| x.starts_with("--")).collect();
                let mut kept: Vec<String> = head.to_vec();
                let mut skipping = false;
                for x in &base[dots..] {
                    if x.starts_with("--") {
                        skipping = given.contains(&x);
                    }
                    if !skipping {
                        kept.push(x.clone());
                    }
                }
                kept.extend(rest.iter().cloned());
                e.command = kept.join(" ");
            }
        }
        out.push(Ok(e));
    }
    out
}

/// The longest an example runs before it is stopped and counted as started.
fn cap() -> Duration {
    let s = std::env::var("PIPEOPT_EXAMPLE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(5.0);
    Duration::from_secs_f64(s)
}

/// A sandbox laid out like the repository: `repo/` with `instances/`, `experiments/`, a copy
/// of `results/`, `pipeopt.sh` and `tmp/`; `shared` beside it; `bin/pipeopt` the binary.
fn sandbox() -> (tempfile::TempDir, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("tmp")).unwrap();
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    let link = |from: &Path, to: &Path| std::os::unix::fs::symlink(from, to).unwrap();
    link(&root.join("instances"), &repo.join("instances"));
    link(&root.join("experiments"), &repo.join("experiments"));
    link(&root.join("../shared"), &dir.path().join("shared"));
    link(&exe(), &dir.path().join("bin/pipeopt"));
    let status = Command::new("cp")
        .arg("-r")
        .arg(root.join("results"))
        .arg(repo.join("results"))
        .status()
        .unwrap();
    assert!(status.success());
    let script = repo.join("pipeopt.sh");
    std::fs::write(&script, "#!/bin/sh\nexec pipeopt \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let onnx = onnx_rs::encode(&crate::onnx_import::small_model());
    std::fs::write(repo.join("mynet.onnx"), onnx).unwrap();
    (dir, repo)
}

/// How an example ended.
enum Ended {
    Exited(std::process::ExitStatus, String),
    Stopped,
}

/// Runs `command` with `sh` in `repo`, `pipeopt` first on the `PATH`, `/tmp/` the
/// sandbox's; stops it (and whatever it started) at `cap`.
fn run(repo: &Path, command: &str, cap: Duration) -> Ended {
    use std::os::unix::process::CommandExt;
    let tmp = repo.join("tmp");
    let command = command.replace("/tmp/", &format!("{}/", tmp.display()));
    let path = format!(
        "{}:{}",
        repo.parent().unwrap().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let err_path = tmp.join(".stderr");
    let err = std::fs::File::create(&err_path).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .current_dir(repo)
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::from(err))
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Ended::Exited(status, std::fs::read_to_string(&err_path).unwrap());
        }
        if started.elapsed() > cap {
            // SAFETY: kills the process group the child leads (its own, from process_group(0)).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            child.wait().unwrap();
            return Ended::Stopped;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the test does with a command: run it, run it as `pipeopt` (the libtorch ones), or
/// leave it to cargo.
fn prepared(command: &str) -> Option<String> {
    let torch = "cargo run --release --features torch -- ";
    if let Some(rest) = command.strip_prefix(torch) {
        return Some(format!("pipeopt {rest}"));
    }
    if command.starts_with("cargo ")
        || command.starts_with("./test.sh")
        || command.starts_with("target/")
        || command.contains("=") && command.contains("target/")
    {
        return None;
    }
    Some(command.to_string())
}

/// Every example of one source, in order; the failures, described.
fn check(
    examples: Vec<Example>,
    repo: &Path,
    cap: Duration,
    tally: &mut [usize; 3],
) -> Vec<String> {
    let mut failures = Vec::new();
    for e in expand(examples) {
        let e = match e {
            Ok(e) => e,
            Err(message) => {
                failures.push(message);
                continue;
            }
        };
        let Some(command) = prepared(&e.command) else {
            tally[2] += 1;
            continue;
        };
        let torch = e.command.contains("--features torch");
        match run(repo, &command, cap) {
            Ended::Stopped => tally[1] += 1,
            Ended::Exited(s, _) if s.success() && !torch => tally[0] += 1,
            Ended::Exited(_, err) if torch && err.contains("built without libtorch") => {
                tally[0] += 1
            }
            Ended::Exited(s, err) => failures.push(format!(
                "{}: `{}` ({s}):\n{}",
                e.at,
                e.command,
                err.lines().take(6).collect::<Vec<_>>().join("\n")
            )),
        }
    }
    failures
}

#[test]
fn every_example_of_the_help_and_the_documents_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (_dir, repo) = sandbox();
    let cap = cap();
    let mut sources: Vec<Vec<Example>> = Vec::new();
    let mut from_help = Vec::new();
    help_examples(&mut Vec::new(), &mut from_help);
    assert!(
        from_help.len() >= 4,
        "the typical session of pipeopt --help has gone: {from_help:?}"
    );
    sources.push(from_help);
    let mut docs: Vec<PathBuf> = vec![root.join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs.push(root.join("results/README.md"));
    docs.push(root.join("instances/README.md"));
    for d in &docs {
        sources.push(markdown_examples(d));
    }
    let mut tally = [0; 3];
    let mut failures = Vec::new();
    for examples in sources {
        failures.extend(check(examples, &repo, cap, &mut tally));
    }
    eprintln!(
        "examples: {} ran to the end, {} stopped after {:?}, {} left to cargo",
        tally[0], tally[1], cap, tally[2]
    );
    assert!(tally[0] >= 30, "too few examples found and run: {tally:?}");
    assert!(
        failures.is_empty(),
        "{} examples fail as written:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_examples_are_read_as_a_shell_reads_them() {
    let mut out = Vec::new();
    let mut pending = None;
    for line in [
        "pipeopt plan --instance a.json \\",
        "    --algorithm '1f1b*' --json   # a comment",
        "# a comment line",
        "pipeopt plan ... --algorithm madpipe --out /tmp/p.json",
    ] {
        push_line(&mut out, &mut pending, "here", line);
    }
    let out: Vec<Example> = expand(out).into_iter().map(Result::unwrap).collect();
    assert_eq!(
        out[0].command,
        "pipeopt plan --instance a.json --algorithm '1f1b*' --json"
    );
    assert_eq!(
        out[1].command,
        "pipeopt plan --instance a.json --json --algorithm madpipe --out /tmp/p.json"
    );
    assert_eq!(strip_comment("a '#b' # c"), "a '#b' ");
}
