//! `pipeopt sync`: synchronous and bidirectional pipeline schedules, simulated by
//! `pipeopt::schedule::sync::sim` (docs/model.md section 7); MixPipe's search (`--search`),
//! BaPipe's exploration (`--explore`), MixPipe's hybrid (`--hybrid`) and the exact schedule
//! MILP (`--schedule optimal`). Costs at other micro-batch sizes come from
//! `schedule::sync::costs` (eq. (3) of Zhang et al., DAC 2023).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use pipeopt::model::Instance;
use pipeopt::partition::bapipe::balanced_partition;
use pipeopt::partition::bapipe_intra::intra_layer_partition;
use pipeopt::schedule::sync::bapipe::{explore, micro_batch_counts, Accelerator};
use pipeopt::schedule::sync::costs::{interpolated, micro_batch_size};
use pipeopt::schedule::sync::hybrid::{HybridInput, HybridRow};
use pipeopt::schedule::sync::mixpipe::{search, BatchPoint, SearchInput};
use pipeopt::schedule::sync::sim::{simulate, SimReport, StageCosts};
use pipeopt::schedule::sync::{ScheduleKind, ScheduleName};
use pipeopt::units::{parse_positive_bandwidth, parse_positive_bytes, ShowBytes, ShowSeconds};
use pipeopt::InputError;
use serde_json::json;

use super::{table, yes_no};

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The instance (one micro-batch's costs; its meta.batch, if any, is the micro-batch size).
    #[arg(long)]
    instance: PathBuf,
    /// Stages D, cut for balanced forward + backward time (exact min-max split).
    #[arg(long)]
    stages: Option<usize>,
    /// Stage starts instead of --stages: 0-based first layer of each stage, e.g. 0,12,24,36
    /// (with --stages too, one start per stage).
    #[arg(long, value_delimiter = ',')]
    partition: Option<Vec<usize>>,
    /// With --stages: BaPipe's intra-layer partition (Zhao et al., arXiv 2020, section
    /// 3.3.2) instead of whole layers: every stage gets exactly 1/D of the work, a layer
    /// too large for one stage (or a boundary layer) is split into slices of its output
    /// channels over consecutive stages, each slice reading the whole layer input (so a cut
    /// inside a layer moves more bytes; with --bandwidth, a cut whose transfer would exceed
    /// the stage time stays between layers). The report names the split layers
    /// (src/partition/bapipe_intra.rs).
    #[arg(long)]
    intra_layer: bool,
    /// Micro-batches N per iteration, 1 to 100000 (default D).
    #[arg(long, value_parser = parse_micro_batches)]
    micro_batches: Option<usize>,
    /// gpipe, dapple, gems, chimera, chimera-doubling (Chimera's forward doubling for N a
    /// multiple of D, N >= 2D: basic units of 2D micro-batches, forwards run in pairs),
    /// mixpipe, mixpipe-kmax, 1f1b-sno, 1f1b-so, 1f1b-as, fbp-as, bapipe (with --explore),
    /// or optimal (the exact MILP over every operation order
    /// on --placement, under --memory and --max-live; N at most 256).
    #[arg(long, default_value = "dapple")]
    schedule: String,
    /// --schedule optimal: one-direction, bidirectional (Chimera's and MixPipe's two
    /// pipelines) or gems (bidirectional, one live micro-batch per worker).
    #[arg(long)]
    placement: Option<String>,
    /// --schedule optimal: most live micro-batches per worker, one number for all or one per
    /// worker (e.g. 4,3,2,1: DAPPLE's D - s).
    #[arg(long, value_delimiter = ',')]
    max_live: Option<Vec<usize>>,
    /// --schedule optimal: the solver's time limit, e.g. 60s (the best streams and the proven
    /// bound are reported when it is reached).
    #[arg(long, value_parser = pipeopt::units::parse_seconds)]
    time_limit: Option<f64>,
    /// --schedule optimal: auto (time-indexed when durations lie on a common grid and the
    /// model is small, disjunctive otherwise), disjunctive or time-indexed.
    #[arg(long, default_value = "auto")]
    formulation: String,
    /// --schedule optimal: HiGHS threads.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// MixPipe's K (even; default D).
    #[arg(long)]
    k: Option<usize>,
    /// MixPipe's Gamma (default 0).
    #[arg(long, default_value_t = 0)]
    gamma: usize,
    /// Link bandwidth for activation transfers, e.g. 12GB/s (positive; default: transfers
    /// are free).
    #[arg(long, value_parser = parse_positive_bandwidth)]
    bandwidth: Option<f64>,
    /// Device memory, e.g. 32GiB (positive): reported as fits or not; the budget of
    /// --search and --explore.
    #[arg(long, value_parser = parse_positive_bytes)]
    memory: Option<f64>,
    /// MixPipe: search K, Gamma and the micro-batch size (Zhang et al., DAC 2023, eq.
    /// (1)-(5)).
    #[arg(long)]
    search: bool,
    /// More profiles of the same network at other micro-batch sizes (meta.batch), for
    /// --search and --explore's t_stage(B) and M_a(B).
    #[arg(long)]
    profile: Vec<PathBuf>,
    /// BaPipe: choose the schedule and the micro-batch count (Zhao et al., arXiv 2020,
    /// section 3.2).
    #[arg(long)]
    explore: bool,
    /// --explore: gpu (1F1B-SNO/SO) or fpga (1F1B-AS/FBP-AS).
    #[arg(long, default_value = "gpu")]
    accelerator: String,
    /// --explore: samples per mini-batch, at least D (default N x the instance's
    /// micro-batch size); --hybrid: the mini-batch B^, at least 1.
    #[arg(long)]
    mini_batch: Option<usize>,
    /// MixPipe's hybrid (eq. (6)): split --gpus into W pipelines of D stages for the
    /// mini-batch --mini-batch, best D by simulation plus a ring all-reduce (--schedule
    /// names the approach: mixpipe searches K, Gamma and K maximizing).
    #[arg(long)]
    hybrid: bool,
    /// --hybrid: GPUs P of the cluster (P = W x D); --stages caps D.
    #[arg(long)]
    gpus: Option<usize>,
    /// --hybrid: bandwidth of the gradient all-reduce, e.g. 150GB/s (MixPipe places every
    /// copy of a stage in one server: the intra-server link; positive).
    #[arg(long, value_parser = parse_positive_bandwidth)]
    allreduce_bandwidth: Option<f64>,
    /// --hybrid: GPUs per server (default: every GPU in one server).
    #[arg(long)]
    server_gpus: Option<usize>,
    /// --hybrid: bandwidth between servers, e.g. 10GB/s (needed when a stage's copies
    /// span servers; positive).
    #[arg(long, value_parser = parse_positive_bandwidth)]
    inter_server_bandwidth: Option<f64>,
    /// --hybrid: micro-batch sizes to try.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    micro_batch_sizes: Vec<usize>,
    /// Write the streams and the report here (JSON).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn bad(flag: &str, reason: impl Into<String>) -> anyhow::Error {
    InputError::new(flag, "", reason).into()
}

/// The most micro-batches per iteration (`--micro-batches`): the streams hold every
/// operation of every micro-batch.
const MAX_MICRO_BATCHES: usize = 100_000;

fn parse_micro_batches(text: &str) -> Result<usize, String> {
    super::parse_count(text, 1, MAX_MICRO_BATCHES)
}

/// The flags' ranges and agreements that do not need the instance.
fn check_flags(args: &SyncArgs) -> anyhow::Result<()> {
    if let (Some(p), Some(d)) = (&args.partition, args.stages) {
        if p.len() != d && !args.hybrid {
            return Err(bad(
                "--partition",
                format!(
                    "gives {} stage starts but --stages is {d}; give one start per stage \
                     (or only one of the two flags)",
                    p.len()
                ),
            ));
        }
    }
    if args.mini_batch == Some(0) {
        return Err(bad("--mini-batch", "must be at least 1 sample"));
    }
    Ok(())
}

fn report_json(r: &SimReport, memory: Option<f64>) -> serde_json::Value {
    json!({
        "makespan": r.makespan_seconds,
        "bubble_ratio": r.bubble_ratio,
        "peak_memory": r.memory.iter().map(|m| m.peak_bytes).collect::<Vec<_>>(),
        "memory": r.memory,
        "fits": memory.map(|m| r.peak_bytes() <= m),
    })
}

fn print_table(name: &str, d: usize, n: usize, r: &SimReport) {
    println!(
        "{name}: D = {d}, N = {n}, iteration {} , bubble ratio {:.4}",
        ShowSeconds(r.makespan_seconds),
        r.bubble_ratio
    );
    let rows = r.memory.iter().enumerate().map(|(w, m)| {
        vec![
            w.to_string(),
            m.replicas.to_string(),
            m.peak_live.to_string(),
            ShowBytes(m.weight_bytes).to_string(),
            ShowBytes(m.buffer_bytes).to_string(),
            ShowBytes(m.activation_peak_bytes).to_string(),
            ShowBytes(m.peak_bytes).to_string(),
        ]
    });
    let header = [
        "worker",
        "replicas",
        "live",
        "weights",
        "buffers",
        "activations",
        "peak",
    ];
    println!("{}", table(&header, &[0, 1, 2, 3, 4, 5, 6], rows));
}

pub fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    check_flags(&args)?;
    let instance = Instance::load(&args.instance)?;
    if args.hybrid {
        if args.intra_layer {
            return Err(bad("--intra-layer", "is not available with --hybrid"));
        }
        return run_hybrid(&args, &instance);
    }
    let (instance, intra) = if args.intra_layer {
        if args.partition.is_some() || !args.profile.is_empty() {
            return Err(bad(
                "--intra-layer",
                "computes its own partition: give --stages, not --partition or --profile",
            ));
        }
        let d = match args.stages {
            Some(d) if d >= 1 => d,
            _ => return Err(bad("--intra-layer", "needs --stages D (at least 1)")),
        };
        let part = intra_layer_partition(
            &instance,
            &vec![1.0; d],
            args.bandwidth.unwrap_or(f64::INFINITY),
        )
        .map_err(|e| bad("--intra-layer", e.to_string()))?;
        if !args.json {
            eprintln!(
                "intra-layer partition: {} layers split ({:?}), slowest stage {:.6} s \
                 (whole layers: {:.6} s)",
                part.split_layers.len(),
                part.split_layers,
                part.bottleneck_seconds,
                part.inter_layer_bottleneck_seconds
            );
        }
        (part.instance.clone(), Some(part))
    } else {
        (instance, None)
    };
    let starts = match (&args.partition, args.stages) {
        _ if intra.is_some() => intra.as_ref().map(|p| p.starts.clone()).unwrap_or_default(),
        (Some(p), _) => p.clone(),
        (None, Some(d)) if d >= 1 && d <= instance.len() => {
            balanced_partition(&instance, d).map_err(|e| bad("--stages", e.to_string()))?
        }
        (None, Some(d)) => {
            return Err(bad(
                "--stages",
                format!("must be between 1 and L = {} (got {d})", instance.len()),
            ))
        }
        (None, None) => return Err(bad("--stages", "give --stages or --partition")),
    };
    let bandwidth = args.bandwidth.unwrap_or(f64::INFINITY);
    let costs = StageCosts::from_instance(&instance, &starts, bandwidth)
        .map_err(|e| bad("--partition", e.to_string()))?;
    let d = costs.stages();
    let n = args.micro_batches.unwrap_or(d);
    let base_batch = micro_batch_size(&instance);
    let mut points = vec![(base_batch, costs.clone())];
    for path in &args.profile {
        let other = Instance::load(path)?;
        if other.len() != instance.len() {
            return Err(bad(
                "--profile",
                format!(
                    "{} has {} layers, not {}",
                    path.display(),
                    other.len(),
                    instance.len()
                ),
            ));
        }
        let c = StageCosts::from_instance(&other, &starts, bandwidth)
            .map_err(|e| bad("--profile", e.to_string()))?;
        points.push((micro_batch_size(&other), c));
    }

    if args.explore {
        return run_explore(&args, &instance, &starts, &points, n, base_batch);
    }
    if args.search {
        return run_search(&args, &instance, &starts, &points, &costs);
    }

    if args.schedule == "optimal" {
        return run_optimal(&args, &instance, &starts, &costs, n, base_batch);
    }
    let kind = ScheduleName::parse(&args.schedule)?.kind(d, n, args.k, args.gamma)?;
    let schedule = kind
        .generate_for(d, n, &costs)
        .map_err(|e| bad("--schedule", e.to_string()))?;
    let r = simulate(&schedule, &costs, kind.execution())?;
    let samples = n as f64 * base_batch;
    if let Some(out) = &args.out {
        let text = serde_json::to_vec_pretty(&json!({
            "instance": instance.name, "schedule": kind, "stages": d, "micro_batches": n,
            "partition": starts, "costs": costs, "streams": schedule,
            "report": report_json(&r, args.memory), "timeline": r.timeline,
        }))?;
        pipeopt::error::write_atomic(out, &text)?;
    }
    if args.json {
        let mut v = report_json(&r, args.memory);
        let extra = json!({"command": "sync", "instance": instance.name,
            "schedule": kind.name(), "stages": d, "micro_batches": n, "partition": starts,
            "samples_per_second": samples / r.makespan_seconds, "intra_layer": intra});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        println!("{v}");
    } else {
        print_table(&kind.name(), d, n, &r);
        if let Some(m) = args.memory {
            println!("fits in {}: {}", ShowBytes(m), r.peak_bytes() <= m);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Stage costs at the micro-batch sizes profiled: (micro-batch size, costs).
type Points = [(f64, StageCosts)];

/// `sync --explore`: BaPipe's schedule and micro-batch count (`bapipe::explore`).
fn run_explore(
    args: &SyncArgs,
    instance: &Instance,
    starts: &[usize],
    points: &Points,
    n: usize,
    base_batch: f64,
) -> anyhow::Result<ExitCode> {
    let d = starts.len();
    let accelerator = match args.accelerator.as_str() {
        "gpu" => Accelerator::Gpu,
        "fpga" => Accelerator::Fpga,
        other => return Err(bad("--accelerator", format!("gpu or fpga, not {other:?}"))),
    };
    let memory = args.memory.unwrap_or(f64::INFINITY);
    let mini = args
        .mini_batch
        .unwrap_or((n as f64 * base_batch).round() as usize);
    if args.mini_batch.is_some() && mini < d {
        return Err(bad(
            "--mini-batch",
            format!("{mini} samples cannot make the D = {d} micro-batches of the smallest count"),
        ));
    }
    let counts = micro_batch_counts(d, mini);
    let costs_at = |size: f64| interpolated(points, size);
    let e = explore(accelerator, mini, &counts, &costs_at, memory)?;
    if args.json {
        println!(
            "{}",
            json!({"command": "sync", "mode": "explore", "instance": instance.name,
                   "stages": d, "partition": starts, "mini_batch": mini,
                   "accelerator": accelerator, "exploration": e})
        );
    } else {
        let rows = e.rows.iter().map(|r| {
            vec![
                r.schedule.to_string(),
                r.micro_batches.to_string(),
                ShowSeconds(r.makespan_seconds).to_string(),
                format!("{:.2}", r.samples_per_second),
                format!("{:.4}", r.bubble_ratio),
                ShowBytes(r.peak_bytes).to_string(),
                r.fits.to_string(),
            ]
        });
        let header = [
            "schedule",
            "M",
            "iteration",
            "samples/s",
            "bubble",
            "peak",
            "fits",
        ];
        println!("{}", table(&header, &[1, 2, 3, 4, 5], rows));
        match &e.best {
            Some(b) => println!("best: {} with M = {}", b.schedule, b.micro_batches),
            None => println!("best: nothing fits"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `sync --search`: MixPipe's K, Gamma and micro-batch size (`mixpipe::search`).
fn run_search(
    args: &SyncArgs,
    instance: &Instance,
    starts: &[usize],
    points: &Points,
    costs: &StageCosts,
) -> anyhow::Result<ExitCode> {
    let d = starts.len();
    let memory = args
        .memory
        .ok_or_else(|| bad("--memory", "--search needs the device memory"))?;
    let max = |v: &Vec<f64>| v.iter().cloned().fold(0.0, f64::max);
    let profile: Vec<BatchPoint> = points
        .iter()
        .map(|(b, c)| BatchPoint {
            batch: *b,
            stage_seconds: (0..d)
                .map(|s| c.forward_seconds[s] + c.backward_seconds[s])
                .fold(0.0, f64::max),
            activation_bytes: max(&c.stash_bytes),
        })
        .collect();
    let input = SearchInput {
        stages: d,
        profile,
        replica_bytes: 2.0 * max(&costs.weight_bytes),
        memory_budget_bytes: memory,
    };
    let candidates = search(&input)?;
    let best = candidates
        .iter()
        .find(|c| c.micro_batch >= 1)
        .copied()
        .ok_or_else(|| bad("--memory", "no K and Gamma fit one sample in this memory"))?;
    let kind = ScheduleKind::Mixpipe {
        k: best.k,
        gamma: best.gamma,
    };
    let at = interpolated(points, best.micro_batch as f64);
    let schedule = kind.generate(d, d)?;
    let r = simulate(&schedule, &at, kind.execution())?;
    let simulated_throughput = (best.micro_batch * d) as f64 / r.makespan_seconds;
    if args.json {
        println!(
            "{}",
            json!({"command": "sync", "mode": "search", "instance": instance.name,
                   "stages": d, "micro_batches": d, "partition": starts,
                   "best": best, "planned_samples_per_second": best.samples_per_second,
                   "samples_per_second": simulated_throughput,
                   "simulated": report_json(&r, Some(memory)),
                   "candidates": candidates})
        );
    } else {
        let rows = candidates.iter().map(|c| {
            vec![
                c.k.to_string(),
                c.gamma.to_string(),
                c.micro_batch.to_string(),
                format!("{:.3}", c.bubbles),
                ShowSeconds(c.stage_seconds).to_string(),
                format!("{:.2}", c.samples_per_second),
            ]
        });
        let header = [
            "K",
            "Gamma",
            "B",
            "N_bubbles",
            "t_stage",
            "samples/s (eq. 1)",
        ];
        println!("{}", table(&header, &[0, 1, 2, 3, 4, 5], rows));
        println!(
            "best K = {}, Gamma = {}, B = {}: eq. (1) {:.2} samples/s, simulated {:.2}",
            best.k, best.gamma, best.micro_batch, best.samples_per_second, simulated_throughput
        );
        print_table(&kind.name(), d, d, &r);
    }
    Ok(ExitCode::SUCCESS)
}

/// `sync --schedule optimal`: the exact MILP (`pipeopt::milp::sync_schedule`), started from
/// the known schedules of the placement.
fn run_optimal(
    args: &SyncArgs,
    instance: &Instance,
    starts: &[usize],
    costs: &StageCosts,
    n: usize,
    base_batch: f64,
) -> anyhow::Result<ExitCode> {
    use pipeopt::milp::sync_schedule::{optimal_schedule, Formulation, Placement, SyncProblem};
    let d = costs.stages();
    let placement = match args.placement.as_deref() {
        None => {
            return Err(bad(
                "--placement",
                "--schedule optimal needs --placement one-direction, bidirectional or gems",
            ))
        }
        Some(p) => Placement::parse(p).ok_or_else(|| {
            bad(
                "--placement",
                format!("one-direction, bidirectional or gems, not {p:?}"),
            )
        })?,
    };
    if n > pipeopt::milp::sync_schedule::MAX_MICRO_BATCHES {
        return Err(bad(
            "--micro-batches",
            format!(
                "--schedule optimal takes at most {} micro-batches (its model grows as N^2 D), got {n}",
                pipeopt::milp::sync_schedule::MAX_MICRO_BATCHES
            ),
        ));
    }
    if placement != Placement::OneDirection && n % 2 != 0 {
        return Err(bad(
            "--micro-batches",
            format!(
                "the {} placement needs an even N (half per pipeline), got {n}",
                placement.name()
            ),
        ));
    }
    let live_cap = match &args.max_live {
        None => None,
        Some(v) if v.contains(&0) => return Err(bad("--max-live", "every cap must be at least 1")),
        Some(v) if v.len() == 1 => Some(vec![v[0]; d]),
        Some(v) if v.len() == d => Some(v.clone()),
        Some(v) => {
            return Err(bad(
                "--max-live",
                format!("one number, or one per worker ({d}), not {}", v.len()),
            ))
        }
    };
    if let Some(t) = args.time_limit {
        if !(t > 0.0 && t.is_finite()) {
            return Err(bad("--time-limit", format!("must be positive, got {t}")));
        }
    }
    let formulation = Formulation::parse(&args.formulation).ok_or_else(|| {
        bad(
            "--formulation",
            format!(
                "auto, disjunctive or time-indexed, not {:?}",
                args.formulation
            ),
        )
    })?;
    let threads = std::num::NonZeroU32::new(args.threads)
        .ok_or_else(|| bad("--threads", "must be at least 1"))?;
    let options = pipeopt::milp::MilpOptions {
        time_limit: args.time_limit.map(std::time::Duration::from_secs_f64),
        threads,
        ..Default::default()
    };
    // The known schedules of the placement: the MILP starts from the best that fits.
    let proposals = placement.known_schedules(d, n);
    let problem = SyncProblem {
        costs,
        placement,
        micro_batches: n,
        memory: args.memory,
        live_cap,
        formulation,
    };
    let o = optimal_schedule(&problem, &proposals, &options)?;
    let solver = json!({"status": o.status, "lower_bound": o.lower_bound,
        "gap": o.gap.is_finite().then_some(o.gap), "nodes": o.nodes, "binaries": o.binaries,
        "started_from": o.start, "formulation": o.formulation, "seconds": o.seconds});
    let label = json!({"name": "optimal", "placement": placement.name()});
    let (Some(schedule), Some(r)) = (&o.schedule, &o.report) else {
        if args.json {
            println!(
                "{}",
                json!({"command": "sync", "instance": instance.name, "schedule": "optimal",
                       "placement": placement.name(), "stages": d, "micro_batches": n,
                       "partition": starts, "status": "infeasible", "makespan": null,
                       "solver": solver})
            );
        } else {
            println!(
                "optimal ({}): no order of the operations fits the memory budget (the sequential one, memory-minimal, does not)",
                placement.name()
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(out) = &args.out {
        let text = serde_json::to_vec_pretty(&json!({
            "instance": instance.name, "schedule": label, "stages": d, "micro_batches": n,
            "partition": starts, "costs": costs, "streams": schedule,
            "report": report_json(r, args.memory), "timeline": r.timeline, "solver": solver,
        }))?;
        pipeopt::error::write_atomic(out, &text)?;
    }
    if args.json {
        let mut v = report_json(r, args.memory);
        let extra = json!({"command": "sync", "instance": instance.name,
            "schedule": "optimal", "placement": placement.name(), "stages": d,
            "micro_batches": n, "partition": starts, "status": o.status,
            "samples_per_second": n as f64 * base_batch / r.makespan_seconds,
            "solver": solver, "streams": schedule});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        println!("{v}");
    } else {
        print_table(&format!("optimal ({})", placement.name()), d, n, r);
        println!(
            "solver: {:?}, lower bound {}, gap {:.2}%, {} nodes, {} order binaries, started from {}",
            o.status,
            ShowSeconds(o.lower_bound),
            100.0 * o.gap,
            o.nodes,
            o.binaries,
            o.start.as_deref().unwrap_or("-")
        );
        if let Some(m) = args.memory {
            println!("fits in {}: {}", ShowBytes(m), r.peak_bytes() <= m);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `sync --hybrid`: MixPipe's W x D choice (eq. (6)), see `schedule::sync::hybrid`.
fn run_hybrid(args: &SyncArgs, instance: &Instance) -> anyhow::Result<ExitCode> {
    use pipeopt::schedule::sync::hybrid::{search as hybrid_search, stage_costs_at};
    use pipeopt::sweep::sync::analytic_rebuild;
    let input = hybrid_input(args, instance)?;
    let bandwidth = args.bandwidth.unwrap_or(f64::INFINITY);
    // Costs at micro-batch size b: the network rebuilt at b when the instance is an
    // analytic pipeopt one, else scaled linearly per sample (eq. (3)).
    let mut at_b: std::collections::HashMap<usize, Instance> = Default::default();
    for &b in &args.micro_batch_sizes {
        if let Some(i) = analytic_rebuild(instance, &args.instance, b)? {
            at_b.insert(b, i);
        }
    }
    let bar = hybrid_progress(&input);
    let costs_at = |d: usize, b: usize| {
        bar.inc(1);
        let starts = balanced_partition(instance, d).ok()?;
        stage_costs_at(instance, at_b.get(&b), &starts, b, bandwidth)
    };
    let rows = hybrid_search(&input, &costs_at)?;
    bar.finish_and_clear();
    let best = rows
        .iter()
        .filter(|r| r.samples_per_second.is_some())
        .max_by(|a, b| {
            a.samples_per_second
                .unwrap_or(0.0)
                .total_cmp(&b.samples_per_second.unwrap_or(0.0))
        })
        .cloned();
    if args.json {
        println!(
            "{}",
            json!({"command": "sync", "mode": "hybrid", "instance": instance.name,
                   "approach": args.schedule, "gpus": input.gpus, "mini_batch": input.mini_batch,
                   "costs_from": if at_b.is_empty() { "linear" } else { "analytic" },
                   "best": best, "candidates": rows})
        );
    } else {
        print_hybrid(&rows, best.as_ref());
    }
    Ok(ExitCode::SUCCESS)
}

/// The hybrid search's cluster and mini-batch from `sync --hybrid`'s flags, checked.
fn hybrid_input<'a>(args: &'a SyncArgs, instance: &Instance) -> anyhow::Result<HybridInput<'a>> {
    let gpus = args.gpus.filter(|&p| p >= 1).ok_or_else(|| {
        bad(
            "--gpus",
            "--hybrid needs the cluster's GPU count (at least 1)",
        )
    })?;
    let mini_batch = args
        .mini_batch
        .filter(|&m| m >= 1)
        .ok_or_else(|| bad("--mini-batch", "--hybrid needs the mini-batch B^ (samples)"))?;
    let allreduce = args.allreduce_bandwidth.ok_or_else(|| {
        bad(
            "--allreduce-bandwidth",
            "--hybrid needs the all-reduce bandwidth",
        )
    })?;
    if let Some(i) = args.micro_batch_sizes.iter().position(|&b| b == 0) {
        return Err(bad(
            "--micro-batch-sizes",
            format!("entry {i} is 0; sizes are at least 1"),
        ));
    }
    let Some(approach) = ScheduleName::approach(&args.schedule) else {
        return Err(bad(
            "--schedule",
            format!(
                "--hybrid takes gpipe, dapple, gems, chimera, mixpipe, 1f1b-sno or 1f1b-so, not {:?}",
                args.schedule
            ),
        ));
    };
    let server_gpus = args.server_gpus.unwrap_or(gpus);
    if server_gpus == 0 {
        return Err(bad("--server-gpus", "must be at least 1"));
    }
    let inter = match (args.inter_server_bandwidth, server_gpus < gpus) {
        (Some(b), _) => b,
        (None, false) => allreduce,
        (None, true) => {
            return Err(bad(
                "--inter-server-bandwidth",
                format!("{gpus} GPUs in servers of {server_gpus}: give the link between servers"),
            ))
        }
    };
    Ok(HybridInput {
        gpus,
        mini_batch,
        micro_batch_sizes: &args.micro_batch_sizes,
        memory_budget_bytes: args.memory.unwrap_or(f64::INFINITY),
        allreduce_bytes_per_second: allreduce,
        server_gpus,
        inter_server_bytes_per_second: inter,
        approach,
        max_stages: args.stages.unwrap_or(usize::MAX).min(instance.len()),
    })
}

/// A bar on stderr for the hybrid search, which can take minutes (every D, micro-batch
/// size and schedule simulated): one step per (D, micro-batch size) pair.
fn hybrid_progress(input: &HybridInput) -> indicatif::ProgressBar {
    let (gpus, mini_batch) = (input.gpus, input.mini_batch);
    let pairs = (1..=gpus.min(input.max_stages))
        .filter(|d| gpus % d == 0 && mini_batch % (gpus / d) == 0)
        .map(|d| {
            let s = mini_batch / (gpus / d);
            input
                .micro_batch_sizes
                .iter()
                .filter(|&&b| b > 0 && s % b == 0)
                .count() as u64
        })
        .sum::<u64>();
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(pairs),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} (D, micro-batch) pairs, ETA {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar
}

/// The hybrid search's candidates as a table for people, and the best one.
fn print_hybrid(rows: &[HybridRow], best: Option<&HybridRow>) {
    let lines = rows.iter().map(|r| {
        vec![
            r.stages.to_string(),
            r.replicas.to_string(),
            r.samples_per_pipeline.to_string(),
            r.schedule
                .as_deref()
                .unwrap_or("(nothing fits)")
                .to_string(),
            r.micro_batch_size
                .map(|x| x.to_string())
                .unwrap_or_default(),
            r.micro_batches.map(|x| x.to_string()).unwrap_or_default(),
            yes_no(r.recompute).to_string(),
            r.iteration_seconds
                .map(|x| ShowSeconds(x).to_string())
                .unwrap_or_default(),
            r.allreduce_seconds
                .map(|x| ShowSeconds(x).to_string())
                .unwrap_or_default(),
            r.samples_per_second
                .map(|x| format!("{x:.2}"))
                .unwrap_or_default(),
        ]
    });
    let header = [
        "D",
        "W",
        "S",
        "best schedule",
        "B",
        "N",
        "rc",
        "iteration",
        "all-reduce",
        "samples/s",
    ];
    println!("{}", table(&header, &[0, 1, 2, 4, 5, 7, 8, 9], lines));
    match best {
        Some(b) => println!(
            "best: D = {}, W = {}, {} (eq. (6): {:.2} samples/s)",
            b.stages,
            b.replicas,
            b.schedule.as_deref().unwrap_or(""),
            b.samples_per_second.unwrap_or(0.0)
        ),
        None => println!("best: nothing fits"),
    }
}
