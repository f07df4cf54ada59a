//! ARCHITECTURE.md's invariants that a look at the sources can check: which modules know
//! HiGHS, polars, plotters and libtorch; that the planner interface is a leaf and only the
//! registry knows the planners; where `anyhow` is used; that no modules depend on each
//! other in a cycle.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, with its path relative to the repository.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, text)
        })
        .collect()
}

/// The files whose code (comments left out) mentions `needle`.
fn users(needle: &str) -> Vec<String> {
    sources()
        .into_iter()
        .filter(|(_, text)| {
            text.lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .any(|l| l.contains(needle))
        })
        .map(|(path, _)| path)
        .collect()
}

fn all_under(files: &[String], allowed: &[&str]) -> bool {
    files
        .iter()
        .all(|f| allowed.iter().any(|a| f == a || f.starts_with(a)))
}

#[test]
fn only_their_modules_know_the_heavy_crates() {
    let highs = users("highs::");
    assert!(all_under(&highs, &["src/milp/solver.rs"]), "{highs:?}");
    let polars = users("polars::");
    assert!(all_under(&polars, &["src/sweep/"]), "{polars:?}");
    let plotters = users("plotters::");
    assert!(
        all_under(
            &plotters,
            &[
                "src/plot/",
                "src/sweep/figures.rs",
                "src/sweep/sync_figures.rs"
            ]
        ),
        "{plotters:?}"
    );
    let tch = users("tch::");
    assert!(all_under(&tch, &["src/exec/"]), "{tch:?}");
    let argmin = users("argmin::");
    assert!(
        all_under(
            &argmin,
            &["src/nets/fit.rs", "src/milp/global_bound/anneal.rs"]
        ),
        "{argmin:?}"
    );
    let onnx = users("onnx_rs::");
    assert!(all_under(&onnx, &["src/nets/onnx.rs"]), "{onnx:?}");
}

#[test]
fn the_planner_interface_is_a_leaf_and_only_the_registry_knows_the_planners() {
    let api = sources()
        .into_iter()
        .find(|(p, _)| p == "src/planner.rs")
        .unwrap()
        .1;
    for line in api.lines().filter(|l| l.starts_with("use ")) {
        assert!(
            line.starts_with("use crate::model") || line.starts_with("use crate::units"),
            "planner.rs imports {line}"
        );
    }
    // Nothing below the registry (the planners, the model, the judge, the sweep) builds
    // planners by name or reads the registry's types.
    let registry = users("algorithm::registry");
    let by_name = users("Algorithm::");
    for f in registry.iter().chain(&by_name) {
        assert!(
            f.starts_with("src/algorithm/")
                || f.starts_with("src/cli/")
                || f == "src/main.rs"
                || f.starts_with("src/sweep/"),
            "{f} uses the registry"
        );
    }
}

#[test]
fn anyhow_stays_in_the_binary() {
    let anyhow = users("anyhow");
    assert!(
        all_under(&anyhow, &["src/main.rs", "src/cli/"]),
        "{anyhow:?}"
    );
}

/// The module a `::`-path names: its longest prefix that is a module of the crate.
fn module_of(path: &[&str], modules: &std::collections::BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|k| path[..k].join("::"))
        .find(|m| modules.contains(m))
}

/// Identifiers after `prefix` joined by `::` (`crate::sweep::row::Row` -> sweep, row, Row).
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut parts = Vec::new();
        let mut tail = rest;
        loop {
            let n = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            if n == 0 {
                break;
            }
            parts.push(&tail[..n]);
            match tail[n..].strip_prefix("::") {
                Some(t) => tail = t,
                None => break,
            }
        }
        out.push(parts);
    }
    out
}

/// No cycle between the files of the crate: each file's module (its path, `mod.rs` standing
/// for its directory) depends on the modules its code (tests and comments left out) names
/// through `crate::` or `super::`, never on its own ancestors; those dependencies form no
/// cycle, so every layer of ARCHITECTURE.md's code map only looks down.
#[test]
fn modules_depend_on_each_other_without_cycles() {
    use std::collections::{BTreeMap, BTreeSet};
    let files = sources();
    let module_name = |path: &str| -> String {
        let rel = path.trim_start_matches("src/").trim_end_matches(".rs");
        let mut parts: Vec<&str> = rel.split('/').collect();
        if matches!(parts.last(), Some(&"mod") | Some(&"lib") | Some(&"main")) {
            parts.pop();
        }
        parts.join("::")
    };
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_name(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &files {
        let me = module_name(path);
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let parent: Vec<&str> = me.split("::").filter(|s| !s.is_empty()).collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        let mut named: Vec<Vec<&str>> = paths_after(&code, "crate::");
        for p in paths_after(&code, "super::") {
            named.push(parent.iter().copied().chain(p).collect());
        }
        let deps = graph.entry(me.clone()).or_default();
        for p in named {
            if let Some(m) = module_of(&p, &modules) {
                let ancestor = me == m || me.starts_with(&format!("{m}::")) || m.is_empty();
                if !ancestor {
                    deps.insert(m);
                }
            }
        }
    }
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| s == m).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if let Some(cycle) = visit(m, &graph, &mut state, &mut Vec::new()) {
            panic!("modules in a cycle: {}", cycle.join(" -> "));
        }
    }
    // The check sees dependencies at all: the sweep's runner uses its rows.
    assert!(
        graph["sweep::run"].contains("sweep::row"),
        "{:?}",
        graph["sweep::run"]
    );
}
