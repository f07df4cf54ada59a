//! pipeopt's benchmarks, in one binary: HiGHS and polars are linked once, not once per
//! benchmark. Each benchmark is a module of its own, its targets and how to read it in its
//! documentation.
//!
//! - `cargo bench --bench benches -- NAME [ARGS]` runs the bench program `NAME` (one of
//!   [`PROGRAMS`]: each prints its own table, one line per case), with its own arguments
//!   (`-- sync_milp --quick`).
//! - `cargo bench --bench benches` runs the criterion measurements ([`CRITERION`]), and
//!   `cargo bench --bench benches -- FILTER` those whose name contains `FILTER` (criterion's
//!   own filter; each module's measurements are named after it: `-- madpipe`).
//! - `cargo test --all-targets` runs the binary without `--bench`: every program's smoke run
//!   (its smallest case) and every criterion measurement once.

mod support;

mod best_scaling;
mod bipartition;
mod foundation;
mod ilp_scaling;
mod import;
mod infinite_period;
mod madpipe;
mod milp;
mod onnx_import;
mod op_bound;
mod op_levels;
mod pipedream;
mod sweep;
mod sync_milp;
mod sync_milp_split;
mod time_limits;

use criterion::Criterion;

/// The bench programs, by the name that selects them.
const PROGRAMS: &[(&str, fn())] = &[
    ("best_scaling", best_scaling::main),
    ("ilp_scaling", ilp_scaling::main),
    ("infinite_period", infinite_period::main),
    ("onnx_import", onnx_import::main),
    ("op_bound", op_bound::main),
    ("op_levels", op_levels::main),
    ("sweep", sweep::main),
    ("sync_milp", sync_milp::main),
    ("sync_milp_split", sync_milp_split::main),
    ("time_limits", time_limits::main),
];

/// The criterion measurements; each module names its measurements after itself.
type Measurements = fn(&mut Criterion);
const CRITERION: &[Measurements] = &[
    bipartition::bench,
    foundation::bench,
    import::bench,
    madpipe::bench,
    milp::bench,
    pipedream::bench,
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let measuring = args.iter().any(|a| a == "--bench");
    let named = args.iter().find(|a| !a.starts_with('-'));
    let program = named.and_then(|name| PROGRAMS.iter().find(|(n, _)| n == name));
    match program {
        Some((_, run)) => run(),
        None if measuring => {
            if named.is_none() {
                let names: Vec<&str> = PROGRAMS.iter().map(|(n, _)| *n).collect();
                eprintln!("bench programs (run one by name): {}", names.join(", "));
            }
            run_criterion();
        }
        None => {
            for (name, run) in PROGRAMS {
                eprintln!("== {name} (smoke run)");
                run();
            }
            run_criterion();
        }
    }
}

/// Every criterion measurement, configured (and filtered) from the command line.
fn run_criterion() {
    let mut criterion = Criterion::default().configure_from_args();
    for bench in CRITERION {
        bench(&mut criterion);
    }
    criterion.final_summary();
}
