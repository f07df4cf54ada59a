//! ARCHITECTURE.md's invariants that a look at the sources can check: which modules know
//! HiGHS, polars, plotters and libtorch; that the algorithm API is a leaf and only the
//! registry knows the planners; where `anyhow` is used.

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
    assert!(all_under(&argmin, &["src/nets/fit.rs"]), "{argmin:?}");
    let onnx = users("onnx_rs::");
    assert!(all_under(&onnx, &["src/nets/onnx.rs"]), "{onnx:?}");
}

#[test]
fn the_algorithm_api_is_a_leaf_and_only_the_registry_knows_the_planners() {
    let api = sources()
        .into_iter()
        .find(|(p, _)| p == "src/algorithm/api.rs")
        .unwrap()
        .1;
    for line in api.lines().filter(|l| l.starts_with("use ")) {
        assert!(
            line.starts_with("use crate::model") || line.starts_with("use crate::units"),
            "api.rs imports {line}"
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
