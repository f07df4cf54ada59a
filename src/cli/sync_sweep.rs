//! `pipeopt sync-sweep`: a grid of synchronous schedules (see `pipeopt::sweep::sync`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::units::ShowBytes;
use serde_json::Map;

use super::sweep::{print_files, print_summary};
use super::{table, yes_no};

#[derive(Debug, Args)]
pub struct SyncSweepArgs {
    /// The experiment file (see experiments/bidirectional.toml).
    experiment: PathBuf,
    /// Where to write the journal, tables and figures (default: the experiment's folder,
    /// `<output>/<name>/`, `output` being `results` unless the file says otherwise).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Parallel jobs, one configuration each (default: the experiment's `workers`, 0 = one
    /// per core).
    #[arg(long, short = 'j')]
    workers: Option<usize>,
    /// Run only shard i of n (1-based, e.g. 3/16) of the configurations, into its own
    /// journal in the output folder, with its identity (shard-i-of-n.json); a run without
    /// --shard then takes in every shard's journal (refusing shards of another experiment
    /// file, a shard twice or a missing one) and writes the tables and figures.
    #[arg(long)]
    shard: Option<pipeopt::sweep::engine::Shard>,
    /// How jobs are isolated: each configuration in a child process by default (its optimum
    /// MILPs are HiGHS solves, not safe to run concurrently in one process).
    #[arg(long, value_parser = super::isolation_parser(), default_value = "process")]
    isolation: pipeopt::sweep::engine::Isolation,
    /// Print one JSON object (the summary both sweeps print, runs, optimum solves, the best
    /// table).
    #[arg(long)]
    json: bool,
}

pub fn run(args: SyncSweepArgs) -> anyhow::Result<ExitCode> {
    use pipeopt::sweep::engine::SweepOptions;
    use pipeopt::sweep::sync::{run as run_grid, SyncExperiment};
    let exp = SyncExperiment::load(&args.experiment)?;
    let out = args.out.clone().unwrap_or_else(|| exp.header.dir());
    let mut outcome = run_grid(
        &exp,
        &out,
        &SweepOptions {
            shard: args.shard,
            isolation: args.isolation,
            workers: args.workers,
            progress: !args.json,
            executable: None,
        },
    )?;
    let noun = "configurations";
    if args.shard.is_some() {
        print_summary(&outcome, "sync-sweep", noun, args.json, Map::new())?;
        if !args.json {
            println!(
                "{} runs into {}; a run without --shard takes the shards in and writes the tables",
                outcome.details.runs,
                outcome.journal.display()
            );
        }
        return Ok(exit_status(&outcome.error_messages));
    }
    let figures = pipeopt::sweep::sync_figures::write_figures(
        &exp,
        &outcome.details.rows,
        &outcome.details.best,
        &outcome.details.optimum,
        &out,
    )?;
    outcome.files.extend(figures);
    let best_path = out.join("best.json");
    let best: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&best_path).map_err(|e| pipeopt::Error::io(&best_path, e))?,
    )?;
    if args.json {
        let extra = Map::from_iter([("best".to_string(), best)]);
        print_summary(&outcome, "sync-sweep", noun, true, extra)?;
    } else {
        print_summary(&outcome, "sync-sweep", noun, false, Map::new())?;
        let d = &outcome.details;
        println!(
            "{} runs; {} shapes refused by their schedule",
            d.runs, d.skipped_shapes
        );
        if exp.optimum.is_some() {
            println!(
                "optimum: {} configurations x placements solved, {} proven optimal (the others \
                 give their bound; optimum.csv)",
                d.optimum_solves, d.optimum_proven
            );
        }
        let lines = best.as_array().into_iter().flatten().map(|r| {
            let f = |k: &str| r.get(k).cloned().unwrap_or(serde_json::Value::Null);
            let num = |k: &str| f(k).as_f64();
            vec![
                f("instance").as_str().unwrap_or("").to_string(),
                f("study").as_str().unwrap_or("").to_string(),
                f("stages").to_string(),
                f("samples").to_string(),
                ShowBytes(num("memory_budget").unwrap_or(0.0)).to_string(),
                f("approach").as_str().unwrap_or("").to_string(),
                f("schedule")
                    .as_str()
                    .unwrap_or("(nothing fits)")
                    .to_string(),
                num("micro_batch_size")
                    .map(|x| x.to_string())
                    .unwrap_or_default(),
                num("micro_batches")
                    .map(|x| x.to_string())
                    .unwrap_or_default(),
                yes_no(f("recompute").as_bool()).to_string(),
                num("samples_per_second_per_gpu")
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_default(),
                num("mixpipe_speedup")
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_default(),
            ]
        });
        let header = [
            "instance",
            "study",
            "D",
            "S",
            "budget",
            "approach",
            "best schedule",
            "B",
            "N",
            "rc",
            "samples/s/GPU",
            "MixPipe x",
        ];
        println!("{}", table(&header, &[2, 3, 4, 7, 8, 10, 11], lines));
        print_files(&outcome.files);
    }
    Ok(exit_status(&outcome.error_messages))
}

/// A configuration that failed (its rows are missing from the tables) is a failure of the
/// run: each is named on stderr, whatever the output format, and the run exits 1; the next
/// run retries them.
fn exit_status(errors: &[String]) -> ExitCode {
    for e in errors {
        eprintln!("error (runs again on the next run): {e}");
    }
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
