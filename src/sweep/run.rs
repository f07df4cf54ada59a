//! Running an experiment: the grid as jobs, run in parallel worker processes, each result
//! appended to a journal as it finishes, then written as Parquet and CSV tables.
//!
//! Crash safety: the journal (`<output>/<name>/journal[-shard-i-of-n].jsonl`) gets one JSON
//! line per finished job, flushed and synced before the next. Running the sweep again reads
//! the journal, drops a torn last line, keeps the last record of each job key, and runs the
//! jobs that have no record or whose record is an error (a crash, a job timeout), so a sweep
//! killed at any moment and run again loses and duplicates nothing. The tables are
//! rewritten from the journal (atomically) at the end of every run.
//!
//! Concurrency: a runner holds an exclusive lock (`flock`) on its journal from reading it
//! to writing the tables; a second runner on the same output (two users, two Slurm array
//! tasks with the same shard) waits for it, then finds the jobs done.
//!
//! Isolation: by default every job runs in a child process (`pipeopt sweep-job`), so a
//! solver that crashes or hangs costs one row (status "error", with the reason), not the
//! sweep; HiGHS 1.15 is not safe with concurrent solves in one process (SOLVERS.md). On
//! Linux the children get SIGKILL when their runner dies (`PR_SET_PDEATHSIG`), so a killed
//! sweep leaves no job running beyond its `job_timeout`.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

use crate::algorithm::{self, Problem};
use crate::error::InputError;
use crate::model::{Instance, Platform, Status};
use crate::sweep::config::{AlgorithmSpec, Experiment};
use crate::sweep::row::Row;

/// One job of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub key: String,
    pub instance_path: PathBuf,
    pub processors: usize,
    pub memory: f64,
    pub bandwidth: f64,
    pub algorithm: AlgorithmSpec,
    pub repetition: usize,
}

/// The jobs of an experiment, in a stable order, with keys that identify them across runs.
pub fn jobs(exp: &Experiment) -> Result<Vec<Job>, InputError> {
    let mut out = Vec::with_capacity(exp.len());
    for path in &exp.instances {
        let instance = Instance::load(path)?;
        let hash = instance.content_hash();
        for &p in &exp.processors {
            for &m in &exp.memory {
                for &b in &exp.bandwidth {
                    for a in &exp.algorithms {
                        for r in 0..exp.repetitions {
                            let id = serde_json::json!([hash, p, m, b, a, r]);
                            use sha2::Digest;
                            let key: String = sha2::Sha256::digest(id.to_string().as_bytes())
                                .iter()
                                .take(12)
                                .map(|x| format!("{x:02x}"))
                                .collect();
                            out.push(Job {
                                key,
                                instance_path: path.clone(),
                                processors: p,
                                memory: m,
                                bandwidth: b,
                                algorithm: a.clone(),
                                repetition: r,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Context every row carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    pub experiment: String,
    pub config_hash: String,
    pub git_revision: String,
}

/// A row with the job's coordinates and status "error", before anything ran.
pub fn skeleton(job: &Job, ctx: &RunContext) -> Row {
    Row {
        key: job.key.clone(),
        experiment: ctx.experiment.clone(),
        config_hash: ctx.config_hash.clone(),
        git_revision: ctx.git_revision.clone(),
        instance: String::new(),
        instance_path: job.instance_path.display().to_string(),
        instance_hash: String::new(),
        processors: job.processors,
        memory: job.memory,
        bandwidth: job.bandwidth,
        algorithm: job.algorithm.label().to_string(),
        algorithm_name: job.algorithm.name.clone(),
        repetition: job.repetition,
        status: "error".into(),
        period: None,
        planned_period: None,
        lower_bound: None,
        speedup: None,
        sequential: 0.0,
        peak_memory: vec![],
        peak_memory_max: None,
        stages: 0,
        placement: None,
        solve_seconds: None,
        wall_seconds: 0.0,
        solver_status: None,
        solver_gap: None,
        nodes: None,
        global_lower_bound: None,
        gap: None,
        case_infeasible: false,
        message: String::new(),
    }
}

/// Runs one job in this process and returns its row. Never panics on bad input: errors
/// become rows with status "error".
pub fn run_job(job: &Job, ctx: &RunContext) -> Row {
    let started = Instant::now();
    let mut row = skeleton(job, ctx);
    let result = (|| -> Result<(), InputError> {
        let instance = Instance::load(&job.instance_path)?;
        row.instance = instance.name.clone();
        row.instance_hash = instance.content_hash();
        row.sequential = instance.sums().u(1, instance.len());
        let platform = Platform::new(job.processors, job.memory, job.bandwidth);
        let planner = algorithm::planner(&job.algorithm.name, &job.algorithm.options)?;
        let (_, report) = algorithm::run(
            planner.as_ref(),
            &Problem {
                instance: &instance,
                platform: &platform,
            },
        )?;
        row.status = serde_json::to_value(report.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        row.period = report.period;
        row.planned_period = report.planned_period;
        row.lower_bound = report.lower_bound;
        row.speedup = report.period.map(|t| row.sequential / t);
        row.peak_memory_max = report.peak_memory.iter().cloned().reduce(f64::max);
        row.peak_memory = report.peak_memory;
        row.stages = report.stages.len();
        row.placement = report.placement.map(|k| k.name().to_string());
        row.solve_seconds = report.solve_seconds;
        if let Some(solver) = &report.solver {
            row.solver_status = Some(solver.status.clone());
            row.solver_gap = solver.gap;
            row.nodes = solver.nodes.map(|n| n as f64);
        }
        row.global_lower_bound = report.global_lower_bound;
        row.case_infeasible = report.case_infeasible;
        row.gap = report.gap;
        row.message = report.messages.join("; ");
        if report.status == Status::Error && row.message.is_empty() {
            row.message = "the algorithm failed".into();
        }
        Ok(())
    })();
    if let Err(e) = result {
        row.status = "error".into();
        row.message = e.to_string();
    }
    row.wall_seconds = started.elapsed().as_secs_f64();
    row
}

/// How jobs are isolated from each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// Every job in a child process (`pipeopt sweep-job`): a crash or hang costs one row.
    Process,
    /// Every job on a thread of this process: faster to start, no protection from crashes.
    Thread,
}

/// A part of the grid: shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or("a shard is written i/n, e.g. 3/16")?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| format!("{i:?} is not a shard number"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("{n:?} is not a shard count"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("shard {index}/{count}: need 1 <= i <= n"));
        }
        Ok(Shard { index, count })
    }
}

/// Where a sweep (or one shard of it) keeps its journal and tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Paths {
    pub journal: PathBuf,
    pub parquet: PathBuf,
    pub csv: PathBuf,
}

impl Paths {
    pub fn new(exp: &Experiment, shard: Option<Shard>) -> Paths {
        let dir = exp.output.join(&exp.name);
        match shard {
            None => Paths {
                journal: dir.join("journal.jsonl"),
                parquet: exp.output.join(format!("{}.parquet", exp.name)),
                csv: exp.output.join(format!("{}.csv", exp.name)),
            },
            Some(s) => {
                let stem = format!("shard-{}-of-{}", s.index, s.count);
                Paths {
                    journal: dir.join(format!("journal-{stem}.jsonl")),
                    parquet: dir.join(format!("{stem}.parquet")),
                    csv: dir.join(format!("{stem}.csv")),
                }
            }
        }
    }
}

/// Reads a journal, truncating a torn last line (a run killed mid-write), and keeps the
/// last record of each job key (in the position of its first), so a journal that holds a
/// job twice (a retried error, or two runners on one output before locking) gives one row
/// per job.
pub fn read_journal(path: &Path) -> Result<Vec<Row>, InputError> {
    let rows = read_journal_lines(path)?;
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Row> = Vec::with_capacity(rows.len());
    for r in rows {
        match at.get(&r.key) {
            Some(&i) => out[i] = r,
            None => {
                at.insert(r.key.clone(), out.len());
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Every complete line of a journal, in order, truncating a torn last line.
pub fn read_journal_lines(path: &Path) -> Result<Vec<Row>, InputError> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(InputError::file(path, e)),
    };
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| InputError::file(path, e))?;
    let mut rows = Vec::new();
    let mut good_len = 0usize;
    let mut offset = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        offset += line.len();
        if !line.ends_with('\n') {
            break; // torn: the writer was killed mid-line
        }
        match serde_json::from_str(line.trim_end()).and_then(Row::from_json) {
            Ok(r) => {
                rows.push(r);
                good_len = offset;
            }
            Err(e) if offset == text.len() => {
                eprintln!(
                    "warning: {}: dropping a damaged last line {}: {e}",
                    path.display(),
                    n + 1
                );
                break;
            }
            Err(e) => {
                return Err(InputError::new(
                    path.display().to_string(),
                    format!("line {}", n + 1),
                    e.to_string(),
                ));
            }
        }
    }
    if good_len < text.len() {
        file.set_len(good_len as u64)
            .map_err(|e| InputError::file(path, e))?;
    }
    Ok(rows)
}

/// Appends rows to a journal, one line each, synced to disk before returning. The file is
/// locked exclusively (`flock`, on Unix) while the `Journal` lives.
pub struct Journal {
    file: std::fs::File,
}

impl Journal {
    /// Opens (creating) a journal and takes its lock, waiting (with a word on stderr) while
    /// another runner holds it.
    pub fn open(path: &Path) -> Result<Journal, crate::Error> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(|e| crate::Error::io(dir, e))?;
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| crate::Error::io(path, e))?;
        lock_exclusive(&file, path)?;
        Ok(Journal { file })
    }

    pub fn append(&mut self, row: &Row) -> std::io::Result<()> {
        let mut line = serde_json::to_string(row).expect("a row always serializes");
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()
    }
}

/// Takes an exclusive `flock` on `file`, waiting for another holder.
#[cfg(unix)]
fn lock_exclusive(file: &std::fs::File, path: &Path) -> Result<(), crate::Error> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor this function borrows; no memory is involved.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
        return Err(crate::Error::io(
            path,
            format!("cannot lock the journal: {e}"),
        ));
    }
    eprintln!(
        "{}: another sweep is running on this output; waiting for it to finish",
        path.display()
    );
    loop {
        // SAFETY: as above.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(crate::Error::io(
                path,
                format!("cannot lock the journal: {e}"),
            ));
        }
    }
}

#[cfg(not(unix))]
fn lock_exclusive(_file: &std::fs::File, _path: &Path) -> Result<(), crate::Error> {
    Ok(())
}

/// Options of one `pipeopt sweep` run.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    pub shard: Option<Shard>,
    pub isolation: Isolation,
    /// Parallel jobs (overrides the experiment's `workers`); 0 = one per core.
    pub workers: Option<usize>,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// The executable to run jobs with in process isolation (default: this one).
    pub executable: Option<PathBuf>,
}

/// What a sweep did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepSummary {
    pub experiment: String,
    pub jobs: usize,
    pub already_done: usize,
    pub ran: usize,
    /// Jobs that had an error row and ran again (included in `ran`).
    pub retried: usize,
    /// Rows with status "error" in the table written (this run's and earlier ones').
    pub errors: usize,
    pub journal: PathBuf,
    pub parquet: PathBuf,
    pub csv: PathBuf,
    pub seconds: f64,
}

/// The git revision of the working directory, or "unknown".
pub fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Runs (the rest of) an experiment and writes its tables.
pub fn sweep(exp: &Experiment, opts: &SweepOptions) -> Result<SweepSummary, crate::Error> {
    let started = Instant::now();
    let paths = Paths::new(exp, opts.shard);
    let mut all = jobs(exp)?;
    if let Some(s) = opts.shard {
        all = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % s.count == s.index - 1)
            .map(|(_, j)| j)
            .collect();
    }
    // The lock first: the journal read below must be the one this runner appends to.
    let mut journal = Journal::open(&paths.journal)?;
    let mut rows = read_journal(&paths.journal)?;
    let keys: HashSet<String> = all.iter().map(|j| j.key.clone()).collect();
    rows.retain(|r| keys.contains(&r.key));
    // Errors (crashes, job timeouts, a bad option since fixed) run again; their new row
    // replaces the old one (the journal's last record of a key wins).
    let retried = rows.iter().filter(|r| r.status == "error").count();
    rows.retain(|r| r.status != "error");
    let done: HashSet<String> = rows.iter().map(|r| r.key.clone()).collect();
    let todo: Vec<Job> = all
        .iter()
        .filter(|j| !done.contains(&j.key))
        .cloned()
        .collect();
    let ctx = RunContext {
        experiment: exp.name.clone(),
        config_hash: exp.config_hash.clone(),
        git_revision: git_revision(),
    };
    let workers = match opts.workers.unwrap_or(exp.workers) {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n,
    };
    let bar = progress_bar(todo.len() as u64, opts.progress);
    bar.set_message(format!("{} ({} already done)", exp.name, done.len()));
    let queue = Arc::new(Mutex::new(
        todo.clone()
            .into_iter()
            .collect::<std::collections::VecDeque<Job>>(),
    ));
    let (tx, rx) = mpsc::channel::<Row>();
    let timeout = Duration::try_from_secs_f64(exp.job_timeout).unwrap_or(Duration::MAX);
    let exe = match &opts.executable {
        Some(e) => e.clone(),
        None => {
            std::env::current_exe().map_err(|e| crate::Error::internal(format!("pipeopt: {e}")))?
        }
    };
    std::thread::scope(|scope| -> Result<(), crate::Error> {
        for _ in 0..workers.min(todo.len().max(1)) {
            let queue = Arc::clone(&queue);
            let tx = tx.clone();
            let ctx = ctx.clone();
            let exe = exe.clone();
            let isolation = opts.isolation;
            scope.spawn(move || loop {
                let job = match queue.lock().map(|mut q| q.pop_front()) {
                    Ok(Some(j)) => j,
                    _ => break,
                };
                let row = match isolation {
                    Isolation::Thread => std::panic::catch_unwind(|| run_job(&job, &ctx))
                        .unwrap_or_else(|_| failed_row(&job, &ctx, "the job panicked".into(), 0.0)),
                    Isolation::Process => run_job_in_child(&exe, &job, &ctx, timeout),
                };
                if tx.send(row).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for row in rx {
            journal
                .append(&row)
                .map_err(|e| crate::Error::io(&paths.journal, e))?;
            bar.set_message(format!(
                "{} {} P={} {}",
                row.algorithm, row.instance, row.processors, row.status
            ));
            rows.push(row);
            bar.inc(1);
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    // Rows in grid order, whatever order they finished in.
    let order: HashMap<&str, usize> = all
        .iter()
        .enumerate()
        .map(|(i, j)| (j.key.as_str(), i))
        .collect();
    rows.sort_by_key(|r| order.get(r.key.as_str()).copied().unwrap_or(usize::MAX));
    crate::sweep::table::write_tables(&rows, &paths.parquet, &paths.csv)?;
    drop(journal); // the lock, once the tables are written
    Ok(SweepSummary {
        experiment: exp.name.clone(),
        jobs: all.len(),
        already_done: done.len(),
        ran: todo.len(),
        retried,
        errors: rows.iter().filter(|r| r.status == "error").count(),
        journal: paths.journal,
        parquet: paths.parquet,
        csv: paths.csv,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn progress_bar(len: u64, visible: bool) -> indicatif::ProgressBar {
    if !visible {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} ETA {eta} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar
}

/// The row of a job that did not finish (crash, timeout, panic).
fn failed_row(job: &Job, ctx: &RunContext, message: String, wall: f64) -> Row {
    let mut row = skeleton(job, ctx);
    if let Ok(i) = Instance::load(&job.instance_path) {
        row.instance = i.name.clone();
        row.instance_hash = i.content_hash();
        row.sequential = i.sums().u(1, i.len());
    }
    row.message = message;
    row.wall_seconds = wall;
    row
}

/// Runs one job in a child process with a wall-clock limit.
fn run_job_in_child(exe: &Path, job: &Job, ctx: &RunContext, timeout: Duration) -> Row {
    let started = Instant::now();
    let input = serde_json::to_string(&serde_json::json!({"job": job, "context": ctx}))
        .expect("serializes");
    let mut command = std::process::Command::new(exe);
    command
        .arg("sweep-job")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    die_with_parent(&mut command);
    let child = command.spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return failed_row(
                job,
                ctx,
                format!("could not start {}: {e}", exe.display()),
                0.0,
            )
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    // Read the pipes on their own threads so a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in std::io::BufReader::new(&mut stderr)
            .lines()
            .map_while(Result::ok)
        {
            lines.push(l);
            if lines.len() > 20 {
                lines.remove(0);
            }
        }
        lines.join("\n")
    });
    let status = match child.wait_timeout(timeout.saturating_sub(started.elapsed())) {
        Ok(Some(s)) => Some(s),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
        Err(_) => None,
    };
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let wall = started.elapsed().as_secs_f64();
    match status {
        None => failed_row(
            job,
            ctx,
            format!(
                "killed after the job timeout of {:.0} s",
                timeout.as_secs_f64()
            ),
            wall,
        ),
        Some(s) => match serde_json::from_str::<Row>(out.trim()) {
            Ok(mut row) => {
                row.wall_seconds = wall;
                row
            }
            Err(_) => {
                let why = match s.code() {
                    Some(c) => format!("the job process exited with status {c}"),
                    None => "the job process was killed by a signal (crash)".to_string(),
                };
                // A panic's last line is the backtrace hint: keep its message instead.
                let lines: Vec<&str> = err.lines().collect();
                let tail = match lines.iter().rposition(|l| l.contains("panicked at")) {
                    Some(i) => lines[i..lines.len().min(i + 2)].join(" "),
                    None => lines.last().copied().unwrap_or("").to_string(),
                };
                failed_row(job, ctx, format!("{why}: {tail}"), wall)
            }
        },
    }
}

/// Makes the child get SIGKILL when the thread that spawns it (a worker of the runner, alive
/// until its child is reaped) dies, so killing a runner kills its jobs (Linux).
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (prctl, getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The runner died between fork and prctl: nobody will read our row.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut std::process::Command) {}

/// The body of `pipeopt sweep-job`: a job and its context as JSON on stdin, the row as JSON
/// on stdout.
pub fn sweep_job_main() -> Result<(), InputError> {
    #[derive(Deserialize)]
    struct Input {
        job: Job,
        context: RunContext,
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| InputError::new("stdin", "", e.to_string()))?;
    let input: Input =
        serde_json::from_str(&text).map_err(|e| InputError::new("stdin", "", e.to_string()))?;
    let row = run_job(&input.job, &input.context);
    println!(
        "{}",
        serde_json::to_string(&row).expect("a row always serializes")
    );
    Ok(())
}
