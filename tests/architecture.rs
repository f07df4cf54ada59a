//! ARCHITECTURE.md's invariants that a look at the sources can check: the layers (no
//! module imports one of a layer listed above its own, read from ARCHITECTURE.md's list),
//! no cycle inside a layer, which modules know HiGHS, polars, plotters, libtorch and clap;
//! that the planner interface is a leaf and only the registry knows the planners; where
//! `anyhow` is used.

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
    // The importer and its submodules (`onnx_seq.rs`, `onnx_fold.rs`, `onnx_eval.rs`).
    assert!(
        all_under(&onnx, &["src/nets/onnx.rs", "src/nets/onnx_"]),
        "{onnx:?}"
    );
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
fn anyhow_stays_in_the_binary_and_clap_in_its_commands() {
    let anyhow = users("anyhow");
    assert!(
        all_under(&anyhow, &["src/main.rs", "src/cli/"]),
        "{anyhow:?}"
    );
    let clap = users("clap::");
    assert!(all_under(&clap, &["src/cli/"]), "{clap:?}");
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

/// A file's module: its path, `mod.rs` standing for its directory (`src/cli/sync.rs` is
/// `cli::sync`, `src/lib.rs` and `src/main.rs` the root, "").
fn module_name(path: &str) -> String {
    let rel = path.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<&str> = rel.split('/').collect();
    if matches!(parts.last(), Some(&"mod") | Some(&"lib") | Some(&"main")) {
        parts.pop();
    }
    parts.join("::")
}

/// Each file of the crate with the modules its code (tests and comments left out) names
/// through `crate::` or `super::`, its own ancestors left out.
fn dependencies() -> Vec<(String, std::collections::BTreeSet<String>)> {
    use std::collections::BTreeSet;
    let files = sources();
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_name(p)).collect();
    files
        .iter()
        .map(|(path, text)| {
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
            let deps = named
                .into_iter()
                .filter_map(|p| module_of(&p, &modules))
                .filter(|m| !(me == *m || me.starts_with(&format!("{m}::")) || m.is_empty()))
                .collect();
            (path.clone(), deps)
        })
        .collect()
}

/// ARCHITECTURE.md's layers, top first: each numbered item of its "Layers" section, as the
/// `src/` files and folders its first line names in backquotes.
fn layers() -> Vec<Vec<String>> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("ARCHITECTURE.md has a Layers section");
    section
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<usize>().is_ok())
        })
        .map(|l| {
            l.split('`')
                .skip(1)
                .step_by(2)
                .filter(|t| t.starts_with("src/"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The index in `layers` (top first) of the layer holding `path`, a file under `src/`.
fn layer_of(path: &str, layers: &[Vec<String>]) -> Option<usize> {
    layers.iter().position(|layer| {
        layer
            .iter()
            .any(|p| path == p || (p.ends_with('/') && path.starts_with(p.as_str())))
    })
}

/// Every file sits in one of ARCHITECTURE.md's layers and imports only modules of its own
/// layer or of layers listed below it. The library's root (`src/lib.rs`), which declares
/// every module, is in none.
#[test]
fn modules_import_only_their_layer_and_the_layers_below() {
    let layers = layers();
    assert!(layers.len() >= 10, "{layers:?}");
    let files: Vec<String> = sources().into_iter().map(|(p, _)| p).collect();
    // A module's layer is its file's (a directory's `mod.rs` for a directory).
    let file_of = |module: &str| -> Option<&String> {
        files
            .iter()
            .find(|f| module_name(f) == module && f.as_str() != "src/lib.rs")
    };
    let mut wrong = Vec::new();
    for (path, deps) in dependencies() {
        if path == "src/lib.rs" {
            continue;
        }
        let Some(mine) = layer_of(&path, &layers) else {
            wrong.push(format!("{path} is in no layer of ARCHITECTURE.md"));
            continue;
        };
        for dep in deps {
            let theirs = file_of(&dep).and_then(|f| layer_of(f, &layers));
            if theirs.is_none_or(|t| t < mine) {
                wrong.push(format!(
                    "{path} (layer {}) imports {dep} (layer {})",
                    mine + 1,
                    theirs.map_or("none".to_string(), |t| (t + 1).to_string())
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The check sees imports: the sweep's runner imports the registry, a layer below.
    let run = &dependencies()
        .into_iter()
        .find(|(p, _)| p == "src/sweep/run.rs")
        .unwrap()
        .1;
    assert!(run.contains("algorithm"), "{run:?}");
}

/// No cycle between the modules of the crate (inside a layer, where the layer check
/// allows imports both ways).
#[test]
fn modules_depend_on_each_other_without_cycles() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, deps) in dependencies() {
        graph.entry(module_name(&path)).or_default().extend(deps);
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

/// `cargo tree --locked ARGS` on this package, offline first (CI's registry is warm); on
/// a fresh machine, whose registry holds only the crates a build compiled, it must fetch
/// the index entries of the others.
fn cargo_tree(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tree_of = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.args(["tree", "--locked"]);
        if offline {
            cmd.arg("--offline");
        }
        cmd.args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo tree runs")
    };
    let offline = tree_of(true);
    let out = if offline.status.success() {
        offline
    } else {
        tree_of(false)
    };
    assert!(
        out.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An offline optimizer builds no network client, TLS stack or object store: polars'
/// readers come from polars-io without its cloud features (Cargo.toml). tokio stays: polars'
/// core depends on it unconditionally, without any network feature used here.
#[test]
fn the_build_has_no_network_stack() {
    let tree = cargo_tree(&[
        "--all-features",
        "--edges",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    let forbidden = [
        "reqwest",
        "hyper",
        "rustls",
        "ring",
        "object_store",
        "h2",
        "native-tls",
    ];
    let found: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| forbidden.contains(name))
        .collect();
    assert!(found.is_empty(), "network crates in the build: {found:?}");
}

/// The sweep's summaries use polars' eager frames: its lazy engine (a query planner and
/// about thirty crates) stays out of the build (docs/build.md).
#[test]
fn the_build_has_no_query_engine() {
    let tree = cargo_tree(&["--edges", "normal", "--prefix", "none", "--format", "{p}"]);
    let found: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| ["polars-lazy", "polars-plan", "polars-expr"].contains(name))
        .collect();
    assert!(
        found.is_empty(),
        "polars' lazy engine in the build: {found:?}"
    );
}

/// The packages of `cargo tree --prefix depth --format '{p} [{f}]' ARGS` (target
/// dependencies only), each with its features and the packages it depends on.
fn features_and_edges(
    args: &[&str],
) -> std::collections::BTreeMap<String, (String, std::collections::BTreeSet<String>)> {
    let mut all = vec!["--prefix", "depth", "--format", "{p} [{f}]"];
    all.extend_from_slice(args);
    let tree = cargo_tree(&all);
    let mut packages = std::collections::BTreeMap::new();
    // The package at each depth of the line being read, for its parent.
    let mut path: Vec<String> = Vec::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let depth_end = line.find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
        let Ok(depth) = line[..depth_end].parse::<usize>() else {
            continue;
        };
        let rest = &line[depth_end..];
        let (Some(open), Some(close)) = (rest.find(" ["), rest.rfind(']')) else {
            continue;
        };
        // `name vX.Y.Z`, without a path or `(*)`.
        let name: String = rest[..open].split(" (").next().unwrap().trim().to_string();
        let features = rest[open + 2..close].to_string();
        path.truncate(depth);
        if let Some(parent) = path.last() {
            let entry: &mut (String, std::collections::BTreeSet<String>) = packages
                .get_mut(parent)
                .expect("a parent is listed before its children");
            entry.1.insert(name.clone());
        }
        packages
            .entry(name.clone())
            .or_insert_with(|| (features, std::collections::BTreeSet::new()));
        path.push(name);
    }
    packages
}

/// A package compiled with other features is compiled again, and so is every package above
/// it: without the feature pins of Cargo.toml, the tests' dev-dependencies made `cargo test`
/// build polars and pipeopt a second time after `./pipeopt.sh` built them (minutes on two
/// cores, hundreds of MB in `target/`). Every package of the release binary has the same
/// features in the tests' build, and every package polars builds on has them in the libtorch
/// tier's (`tch` and its dependencies), which rebuilds only pipeopt.
#[test]
fn the_tests_and_the_libtorch_tier_reuse_the_release_builds_polars() {
    let release = features_and_edges(&["--edges", "normal"]);
    let tests = features_and_edges(&["--edges", "normal,dev"]);
    let torch = features_and_edges(&["--edges", "normal", "--features", "torch"]);
    let differing = |other: &std::collections::BTreeMap<_, (String, _)>,
                     names: &mut dyn Iterator<Item = &String>| {
        names
            .filter_map(|name| {
                let mine = &release[name].0;
                let theirs = &other.get(name)?.0;
                (mine != theirs).then(|| format!("{name}: [{mine}] against [{theirs}]"))
            })
            .collect::<Vec<_>>()
    };
    let for_tests = differing(&tests, &mut release.keys());
    assert!(
        for_tests.is_empty(),
        "features that the tests' build adds (pin them in Cargo.toml): {for_tests:?}"
    );
    // polars and every package it builds on, in the release build.
    let mut polars: std::collections::BTreeSet<String> = release
        .keys()
        .filter(|name| name.starts_with("polars "))
        .cloned()
        .collect();
    assert!(!polars.is_empty(), "polars is in the release build");
    let mut frontier: Vec<String> = polars.iter().cloned().collect();
    while let Some(name) = frontier.pop() {
        for dependency in &release[&name].1 {
            if polars.insert(dependency.clone()) {
                frontier.push(dependency.clone());
            }
        }
    }
    let for_torch = differing(&torch, &mut polars.iter());
    assert!(
        for_torch.is_empty(),
        "features that the libtorch tier adds under polars (pin them in Cargo.toml): {for_torch:?}"
    );
}

/// HiGHS is compiled as a unity build (`.cargo/config.toml` names the CMake file that asks
/// for it; docs/build.md): its build directory, in this test binary's own target profile,
/// was configured with that file and holds CMake's unity sources.
#[test]
fn highs_is_compiled_as_a_unity_build() {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<binary>
    let profile_dir = exe.ancestors().nth(2).expect("target/<profile>");
    let builds: Vec<PathBuf> = std::fs::read_dir(profile_dir.join("build"))
        .expect("target/<profile>/build")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("highs-sys-") && p.join("out/build/CMakeCache.txt").exists()
        })
        .collect();
    assert!(!builds.is_empty(), "no HiGHS build under {profile_dir:?}");
    let toolchain = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cargo/highs-unity-build.cmake");
    for build in builds {
        let cache = std::fs::read_to_string(build.join("out/build/CMakeCache.txt")).unwrap();
        assert!(
            cache.contains(&format!(
                "CMAKE_TOOLCHAIN_FILE:FILEPATH={}",
                toolchain.display()
            )),
            "{build:?} was configured without {toolchain:?} (built before .cargo/config.toml \
             named it, or by cargo run outside the repository? `cargo clean -p highs-sys` \
             in this profile rebuilds it)"
        );
        let highs_objects = build.join("out/build/highs/CMakeFiles/highs.dir");
        let unity = std::fs::read_dir(highs_objects.join("Unity"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert!(unity > 0, "no unity sources under {highs_objects:?}");
    }
}

/// chrono-tz, which polars compiles, holds UTC only (Cargo.toml's `chrono-tz` entry and
/// `.cargo/config.toml`'s filter; docs/build.md): the whole IANA database added 38 MB to
/// `target/` for datetime columns that pipeopt's tables do not have.
#[test]
fn the_time_zone_database_holds_only_utc() {
    assert!("UTC".parse::<chrono_tz::Tz>().is_ok());
    assert!(
        "Europe/Paris".parse::<chrono_tz::Tz>().is_err(),
        "chrono-tz was compiled with every time zone (built by cargo outside the repository, \
         where .cargo/config.toml's CHRONO_TZ_TIMEZONE_FILTER is not read?)"
    );
}
