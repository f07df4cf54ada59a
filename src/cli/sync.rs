//! `pipeopt sync`: synchronous and bidirectional pipeline schedules (docs/model.md section
//! 7). The flags become a `pipeopt::algorithm::sync::SyncRequest` (a simulated schedule of
//! the registry, MixPipe's search `--search`, BaPipe's exploration `--explore`, MixPipe's
//! hybrid `--hybrid`, the exact schedule MILP `--schedule optimal`); the library resolves the
//! stages and runs it, and this file prints its report as one JSON object or as tables, and
//! writes the `--out` file. `--schedule`'s values and help come from the schedule registry.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;
use pipeopt::algorithm::sync::{
    self as request, ExploreReport, HybridReport, HybridRequest, OptimalFound, OptimalReport,
    OptimalRequest, SearchReport, SimSummary, SimulatedReport, SyncMode, SyncReport, SyncRequest,
};
use pipeopt::schedule::sync::hybrid::HybridRow;
use pipeopt::schedule::sync::torch_csv::{self, TorchFormat};
use pipeopt::schedule::sync::SCHEDULES;
use pipeopt::units::{parse_positive_bandwidth, parse_positive_bytes, ShowBytes, ShowSeconds};

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
    /// The schedule (its values below come from the registry), or optimal (the exact MILP
    /// over every operation order on --placement, under --memory and --max-live; N at most
    /// 256); with --hybrid, the approach.
    #[arg(long, default_value = "dapple", value_parser = schedule_parser())]
    schedule: String,
    /// --schedule optimal: one-direction, bidirectional (Chimera's and MixPipe's two
    /// pipelines), gems (bidirectional, one live micro-batch per worker), interleaved-2 or
    /// interleaved-4 (Megatron-LM's: stage s on worker s mod (D/v)), or v-shape (ZB-V's and
    /// DualPipeV's: stages s and D-1-s on one worker).
    #[arg(long)]
    placement: Option<String>,
    /// --schedule optimal: each backward as its input gradient then its weight gradient,
    /// ordered freely (the zero-bubble schedules' split; docs/model.md section 7).
    #[arg(long)]
    split_backward: bool,
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
    /// --hybrid: GPUs P of the cluster (P = W x D); --stages caps the stages the chain is
    /// cut into (D, or v D for a schedule with v stages per GPU such as interleaved-2).
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
    /// Write the streams as PyTorch's pipeline runtime loads them
    /// (`torch.distributed.pipelining`, `_PipelineScheduleRuntime._load_csv`): a CSV row per
    /// rank, actions such as 0F3 and 2B0 (one-direction schedules, optimal ones included;
    /// docs/model.md section 7)
    #[arg(long)]
    export_torch: Option<PathBuf>,
    /// --export-torch: compute-only (what PyTorch lowers itself) or compute-comms (with the
    /// sends and receives placed as PyTorch's lowering places them)
    #[arg(long, default_value = "compute-only", value_parser = clap::builder::PossibleValuesParser::new(TorchFormat::NAMES))]
    torch_format: String,
    /// Simulate the streams of a file in PyTorch's format (compute-only or compute-comms)
    /// on the stages instead of a registered schedule: its rows are the ranks (the stages,
    /// when --stages and --partition are left out), its micro-batches N
    #[arg(long)]
    import_torch: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// The most micro-batches per iteration (`--micro-batches`): the streams hold every
/// operation of every micro-batch.
const MAX_MICRO_BATCHES: usize = 100_000;

fn parse_micro_batches(text: &str) -> Result<usize, String> {
    super::parse_count(text, 1, MAX_MICRO_BATCHES)
}

/// The parser of `--schedule`: the registry's names, aliases and help, then `optimal` and
/// `bapipe` (`--explore`'s choice among BaPipe's schedules).
fn schedule_parser() -> PossibleValuesParser {
    let registered = SCHEDULES.iter().map(|s| {
        let also = match s.aliases {
            [] => String::new(),
            aliases => format!("; also {}", aliases.join(", ")),
        };
        PossibleValue::new(s.name)
            .aliases(s.aliases.iter().copied())
            .help(format!("{} ({}{also})", s.help, s.paper))
    });
    PossibleValuesParser::new(registered.chain([
        PossibleValue::new("optimal").help(
            "the exact MILP over every operation order on --placement (under --memory and \
             --max-live)",
        ),
        PossibleValue::new("bapipe").help("with --explore: BaPipe's choice of its schedules"),
    ]))
}

impl SyncArgs {
    /// The library's request: the mode from the flags (`--hybrid`, `--explore`,
    /// `--search`, `--schedule optimal`, else a simulation).
    fn request(&self) -> SyncRequest {
        let mode = if self.hybrid {
            SyncMode::Hybrid(HybridRequest {
                gpus: self.gpus,
                allreduce_bandwidth: self.allreduce_bandwidth,
                server_gpus: self.server_gpus,
                inter_server_bandwidth: self.inter_server_bandwidth,
                micro_batch_sizes: self.micro_batch_sizes.clone(),
            })
        } else if self.explore {
            SyncMode::Explore {
                accelerator: self.accelerator.clone(),
            }
        } else if self.search {
            SyncMode::Search
        } else if self.schedule == "optimal" {
            SyncMode::Optimal(OptimalRequest {
                placement: self.placement.clone(),
                split_backward: self.split_backward,
                max_live: self.max_live.clone(),
                time_limit: self.time_limit,
                formulation: self.formulation.clone(),
                threads: self.threads,
            })
        } else {
            SyncMode::Simulate
        };
        SyncRequest {
            instance: self.instance.clone(),
            stages: self.stages,
            partition: self.partition.clone(),
            intra_layer: self.intra_layer,
            micro_batches: self.micro_batches,
            schedule: self.schedule.clone(),
            k: self.k,
            gamma: self.gamma,
            bandwidth: self.bandwidth,
            memory: self.memory,
            profiles: self.profile.clone(),
            mini_batch: self.mini_batch,
            import_torch: self.import_torch.clone(),
            mode,
        }
    }
}

/// The hybrid search's bar on stderr (it can take minutes: every D, micro-batch size and
/// schedule simulated), one step per (D, micro-batch size) pair; made when the search
/// starts, so that no other mode draws one.
#[derive(Default)]
struct Bar(std::sync::OnceLock<indicatif::ProgressBar>);

impl request::Progress for Bar {
    fn start(&self, steps: u64) {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(steps),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{wide_bar}] {pos}/{len} (D, micro-batch) pairs, ETA {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        let _ = self.0.set(bar);
    }
    fn step(&self) {
        if let Some(bar) = self.0.get() {
            bar.inc(1);
        }
    }
    fn finish(&self) {
        if let Some(bar) = self.0.get() {
            bar.finish_and_clear();
        }
    }
}

pub fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    if args.export_torch.is_some() && (args.hybrid || args.explore || args.search) {
        return Err(pipeopt::InputError::new(
            "--export-torch",
            "",
            "writes the streams of one schedule: not with --hybrid, --explore or --search",
        )
        .into());
    }
    let outcome = request::run(&args.request(), &Bar::default())?;
    if let (Some(path), Some(file)) = (&args.export_torch, &outcome.file) {
        let format = TorchFormat::parse(&args.torch_format).expect("clap checked the value");
        let name = match &outcome.report {
            SyncReport::Simulated(r) => r.schedule.clone(),
            _ => args.schedule.clone(),
        };
        let text = torch_csv::write(&file.streams, &name, format)
            .map_err(|e| pipeopt::InputError::new("--export-torch", "", e.to_string()))?;
        pipeopt::error::write_atomic(path, text.as_bytes())?;
    }
    if let (Some(out), Some(file)) = (&args.out, &outcome.file) {
        // Through a JSON value: its keys sorted, as the files have always been written.
        let text = serde_json::to_vec_pretty(&serde_json::to_value(file)?)?;
        pipeopt::error::write_atomic(out, &text)?;
    }
    if args.json {
        println!("{}", serde_json::to_value(&outcome.report)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &outcome.report {
        SyncReport::Simulated(r) => print_simulated(r),
        SyncReport::Explored(r) => print_explore(r),
        SyncReport::Searched(r) => print_search(r),
        SyncReport::Optimal(r) => print_optimal(r),
        SyncReport::Hybrid(r) => print_hybrid(r),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(name: &str, d: usize, n: usize, r: &SimSummary) {
    println!(
        "{name}: D = {d}, N = {n}, iteration {} , bubble ratio {:.4}",
        ShowSeconds(r.makespan),
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

fn print_fits(r: &SimSummary, memory: Option<f64>) {
    if let Some(m) = memory {
        let peak = r.peak_memory.iter().cloned().fold(0.0, f64::max);
        println!("fits in {}: {}", ShowBytes(m), peak <= m);
    }
}

fn print_simulated(r: &SimulatedReport) {
    if let Some(part) = &r.intra_layer {
        eprintln!(
            "intra-layer partition: {} layers split ({:?}), slowest stage {:.6} s \
             (whole layers: {:.6} s)",
            part.split_layers.len(),
            part.split_layers,
            part.bottleneck_seconds,
            part.inter_layer_bottleneck_seconds
        );
    }
    print_table(&r.schedule, r.stages, r.micro_batches, &r.simulated);
    print_fits(&r.simulated, r.memory_budget);
}

fn print_explore(r: &ExploreReport) {
    let e = &r.exploration;
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

fn print_search(r: &SearchReport) {
    let rows = r.candidates.iter().map(|c| {
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
    let best = &r.best;
    println!(
        "best K = {}, Gamma = {}, B = {}: eq. (1) {:.2} samples/s, simulated {:.2}",
        best.k, best.gamma, best.micro_batch, best.samples_per_second, r.samples_per_second
    );
    print_table(&r.schedule, r.stages, r.micro_batches, &r.simulated);
}

fn print_optimal(r: &OptimalReport) {
    let OptimalFound::Streams { simulated, .. } = &r.found else {
        println!(
            "optimal ({}): no order of the operations fits the memory budget (the sequential one, memory-minimal, does not)",
            r.placement
        );
        return;
    };
    let split = if r.split_backward {
        ", split backward"
    } else {
        ""
    };
    let label = format!("optimal ({}{split})", r.placement);
    print_table(&label, r.stages, r.micro_batches, simulated);
    let s = &r.solver;
    println!(
        "solver: {:?}, lower bound {}, gap {:.2}%, {} nodes, {} order binaries, started from {}",
        s.status,
        ShowSeconds(s.lower_bound),
        100.0 * s.gap.unwrap_or(f64::INFINITY),
        s.nodes,
        s.binaries,
        s.started_from.as_deref().unwrap_or("-")
    );
    print_fits(simulated, r.memory_budget);
}

/// The hybrid search's candidates as a table for people, and the best one.
fn print_hybrid(r: &HybridReport) {
    let lines = r.candidates.iter().map(hybrid_line);
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
    match &r.best {
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

fn hybrid_line(r: &HybridRow) -> Vec<String> {
    let opt = |x: Option<usize>| x.map(|x| x.to_string()).unwrap_or_default();
    let secs = |x: Option<f64>| x.map(|x| ShowSeconds(x).to_string()).unwrap_or_default();
    vec![
        r.stages.to_string(),
        r.replicas.to_string(),
        r.samples_per_pipeline.to_string(),
        r.schedule
            .as_deref()
            .unwrap_or("(nothing fits)")
            .to_string(),
        opt(r.micro_batch_size),
        opt(r.micro_batches),
        yes_no(r.recompute).to_string(),
        secs(r.iteration_seconds),
        secs(r.allreduce_seconds),
        r.samples_per_second
            .map(|x| format!("{x:.2}"))
            .unwrap_or_default(),
    ]
}
