//! The engine every sweep runs on, whatever its jobs: a list of jobs run in parallel worker
//! processes (or threads), each result appended to a journal as it finishes, the journal
//! read back to resume. What a job is and what it records is a [`JobKind`]: the periodic
//! planners' grid (`sweep::run`) and the synchronous schedules' (`sweep::sync`) are two.
//!
//! Crash safety: the journal gets one JSON line per finished job, flushed and synced before
//! the next. Running the sweep again reads the journal, drops a torn last line, keeps the
//! last record of each job key, and runs the jobs that have no record or whose record is an
//! error (a crash, a job timeout), so a sweep killed at any moment and run again loses and
//! duplicates nothing. The caller rewrites its tables from the records (atomically) while
//! it still holds the journal's lock.
//!
//! Concurrency: a runner holds an exclusive lock (`flock`) on its journal from reading it
//! to writing the tables; a second runner on the same output (two users, two Slurm array
//! tasks with the same shard) waits for it, then finds the jobs done.
//!
//! Isolation: by default every job runs in a child process (`pipeopt sweep-job`, told the
//! kind by [`JobKind::TAG`]), so a solver that crashes or hangs costs one record (an error,
//! with the reason), not the sweep; HiGHS 1.15 is not safe with concurrent solves in one
//! process. On Linux the children get SIGKILL when their runner dies (`PR_SET_PDEATHSIG`),
//! so a killed sweep leaves no job running beyond its job timeout.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

use crate::error::InputError;

/// A kind of job: what one is, how it runs, what it records in the journal.
pub trait JobKind {
    /// Self-contained (a child process gets it as JSON and needs nothing else).
    type Job: Serialize + DeserializeOwned + Clone + Send + Sync;
    type Record: Serialize + Send;
    /// Names the kind in `pipeopt sweep-job`'s input.
    const TAG: &'static str;
    /// Identifies a job across runs (the journal's key).
    fn job_key(job: &Self::Job) -> &str;
    fn record_key(record: &Self::Record) -> &str;
    /// A record to run again on the next run (a crash, a timeout).
    fn is_error(record: &Self::Record) -> bool;
    /// A record from its JSON (a journal line, a child's output).
    fn read_record(value: serde_json::Value) -> Result<Self::Record, serde_json::Error>;
    /// Runs the job in this process. Never panics on bad input: errors become records.
    fn run(job: &Self::Job, ctx: &RunContext) -> Self::Record;
    /// The record of a job that did not finish (crash, timeout, panic).
    fn failed(job: &Self::Job, ctx: &RunContext, message: String, wall: f64) -> Self::Record;
    fn set_wall(record: &mut Self::Record, wall: f64);
    /// A few words on a finished record for the progress bar.
    fn describe(record: &Self::Record) -> String;
    /// What went wrong, for an error record (one line, naming the job).
    fn error_message(record: &Self::Record) -> Option<String>;
}

/// The context of a run, given to every job (the periodic rows carry it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    pub experiment: String,
    pub config_hash: String,
    pub git_revision: String,
}

/// How jobs are isolated from each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl Shard {
    /// This shard's part of a list of jobs: jobs `i-1, i-1+n, ...`.
    pub fn of<T>(self, all: Vec<T>) -> Vec<T> {
        all.into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, j)| j)
            .collect()
    }
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

/// Reads a journal, truncating a torn last line (a run killed mid-write), and keeps the
/// last record of each job key (in the position of its first), so a journal that holds a
/// job twice (a retried error, or two runners on one output before locking) gives one row
/// per job.
pub fn read_journal<K: JobKind>(path: &Path) -> Result<Vec<K::Record>, InputError> {
    let records = read_journal_lines::<K>(path)?;
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<K::Record> = Vec::with_capacity(records.len());
    for r in records {
        match at.get(K::record_key(&r)) {
            Some(&i) => out[i] = r,
            None => {
                at.insert(K::record_key(&r).to_string(), out.len());
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Every complete line of a journal, in order, truncating a torn last line.
pub fn read_journal_lines<K: JobKind>(path: &Path) -> Result<Vec<K::Record>, InputError> {
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
        match serde_json::from_str(line.trim_end()).and_then(K::read_record) {
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

/// Appends records to a journal, one line each, synced to disk before returning. The file is
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

    pub fn append<R: Serialize>(&mut self, record: &R) -> std::io::Result<()> {
        let mut line = serde_json::to_string(record).expect("a record always serializes");
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

/// What the command line asks of one sweep run, whatever its kind.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Run only this shard of the jobs.
    pub shard: Option<Shard>,
    pub isolation: Isolation,
    /// Parallel jobs (overrides the experiment's `workers`); 0 = one per core.
    pub workers: Option<usize>,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// The executable to run jobs with in process isolation (default: this one).
    pub executable: Option<PathBuf>,
}

impl SweepOptions {
    /// The engine's options for an experiment whose file asks for `workers` (0: one per
    /// core) and whose jobs may run `job_timeout` each.
    pub fn engine(&self, workers: usize, job_timeout: Duration, label: &str) -> EngineOptions {
        let workers = match self.workers.unwrap_or(workers) {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        EngineOptions {
            isolation: self.isolation,
            workers,
            job_timeout,
            progress: self.progress,
            executable: self.executable.clone(),
            label: label.to_string(),
        }
    }
}

/// A job key: the first 12 bytes, in hex, of the SHA-256 of what identifies the job (its
/// inputs' contents and settings), so that a key names the same work across runs.
pub fn key_of(identity: &serde_json::Value) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(identity.to_string().as_bytes())
        .iter()
        .take(12)
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// How one run of the engine goes.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub isolation: Isolation,
    /// Parallel jobs (at least 1).
    pub workers: usize,
    /// Wall-clock limit of a job in a child process.
    pub job_timeout: Duration,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// The executable to run jobs with in process isolation (default: this one).
    pub executable: Option<PathBuf>,
    /// The progress bar's label.
    pub label: String,
}

/// What one run of a sweep did, whatever its kind: the part both kinds share, and `X`, the
/// kind's own (the periodic tables' paths; the synchronous runs, optima and the rows its
/// figures are drawn from). As JSON, one object: the kind's fields beside the common ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepSummary<X> {
    pub experiment: String,
    /// The shard run, `i/n`; none: the whole grid.
    pub shard: Option<String>,
    /// Jobs of this run (of its shard): periodic jobs, or synchronous configurations.
    pub jobs: usize,
    /// Jobs the journal held already.
    pub already_done: usize,
    /// Jobs run now.
    pub ran: usize,
    /// Jobs that had an error record and ran again (included in `ran`).
    pub retried: usize,
    /// Jobs whose record is an error (they run again on the next run).
    pub errors: usize,
    /// What went wrong with each of them.
    pub error_messages: Vec<String>,
    pub wall_seconds: f64,
    pub journal: PathBuf,
    /// Every file this run wrote (tables, figures; a shard's identity), journal aside.
    pub files: Vec<PathBuf>,
    #[serde(flatten)]
    pub details: X,
}

impl<X> SweepSummary<X> {
    /// The summary of `done`, the run of `jobs` jobs (of `shard`) of `experiment`, started
    /// at `started`, into `journal`.
    #[allow(clippy::too_many_arguments)]
    pub fn new<K: JobKind>(
        experiment: &str,
        shard: Option<Shard>,
        jobs: usize,
        done: &Executed<K::Record>,
        journal: PathBuf,
        files: Vec<PathBuf>,
        details: X,
        started: Instant,
    ) -> SweepSummary<X> {
        let error_messages: Vec<String> =
            done.records.iter().filter_map(K::error_message).collect();
        SweepSummary {
            experiment: experiment.to_string(),
            shard: shard.map(|s| format!("{}/{}", s.index, s.count)),
            jobs,
            already_done: done.already_done,
            ran: done.ran,
            retried: done.retried,
            errors: error_messages.len(),
            error_messages,
            wall_seconds: started.elapsed().as_secs_f64(),
            journal,
            files,
            details,
        }
    }
}

/// What the engine did: every record of the jobs given, in their order, and the journal,
/// still locked (drop it once the tables are written).
pub struct Executed<R> {
    pub records: Vec<R>,
    pub already_done: usize,
    pub ran: usize,
    /// Jobs that had an error record and ran again (included in `ran`).
    pub retried: usize,
    pub journal: Journal,
}

/// Runs the jobs that the journal at `journal_path` does not hold yet (or holds as errors),
/// appending each record as it finishes.
pub fn execute<K: JobKind>(
    all: &[K::Job],
    journal_path: &Path,
    ctx: &RunContext,
    opts: &EngineOptions,
) -> Result<Executed<K::Record>, crate::Error>
where
    K::Record: 'static,
{
    // The lock first: the journal read below must be the one this runner appends to.
    let mut journal = Journal::open(journal_path)?;
    let mut records = read_journal::<K>(journal_path)?;
    let keys: HashSet<&str> = all.iter().map(K::job_key).collect();
    records.retain(|r| keys.contains(K::record_key(r)));
    // Errors (crashes, job timeouts, a bad option since fixed) run again; their new record
    // replaces the old one (the journal's last record of a key wins).
    let retried = records.iter().filter(|r| K::is_error(r)).count();
    records.retain(|r| !K::is_error(r));
    let done: HashSet<String> = records
        .iter()
        .map(|r| K::record_key(r).to_string())
        .collect();
    let todo: Vec<K::Job> = all
        .iter()
        .filter(|j| !done.contains(K::job_key(j)))
        .cloned()
        .collect();
    let bar = progress_bar(todo.len() as u64, opts.progress);
    bar.set_message(format!("{} ({} already done)", opts.label, done.len()));
    let queue = Arc::new(Mutex::new(
        todo.iter()
            .cloned()
            .collect::<std::collections::VecDeque<K::Job>>(),
    ));
    let (tx, rx) = mpsc::channel::<K::Record>();
    let exe = match &opts.executable {
        Some(e) => e.clone(),
        None => {
            std::env::current_exe().map_err(|e| crate::Error::internal(format!("pipeopt: {e}")))?
        }
    };
    std::thread::scope(|scope| -> Result<(), crate::Error> {
        for _ in 0..opts.workers.max(1).min(todo.len().max(1)) {
            let queue = Arc::clone(&queue);
            let tx = tx.clone();
            let exe = exe.clone();
            let isolation = opts.isolation;
            let timeout = opts.job_timeout;
            scope.spawn(move || loop {
                let job = match queue.lock().map(|mut q| q.pop_front()) {
                    Ok(Some(j)) => j,
                    _ => break,
                };
                let record = match isolation {
                    Isolation::Thread => {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| K::run(&job, ctx)))
                            .unwrap_or_else(|_| {
                                K::failed(&job, ctx, "the job panicked".into(), 0.0)
                            })
                    }
                    Isolation::Process => run_in_child::<K>(&exe, &job, ctx, timeout),
                };
                if tx.send(record).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for record in rx {
            journal
                .append(&record)
                .map_err(|e| crate::Error::io(journal_path, e))?;
            bar.set_message(K::describe(&record));
            records.push(record);
            bar.inc(1);
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    // Records in the jobs' order, whatever order they finished in.
    let order: HashMap<&str, usize> = all
        .iter()
        .enumerate()
        .map(|(i, j)| (K::job_key(j), i))
        .collect();
    records.sort_by_key(|r| order.get(K::record_key(r)).copied().unwrap_or(usize::MAX));
    Ok(Executed {
        records,
        already_done: done.len(),
        ran: todo.len(),
        retried,
        journal,
    })
}

/// The body of `pipeopt sweep-job` for a kind: the job and its context (`{"kind", "job",
/// "context"}`, already read) in, the record as one JSON line on stdout.
pub fn child_main<K: JobKind>(input: serde_json::Value) -> Result<(), InputError> {
    #[derive(Deserialize)]
    struct Input<J> {
        job: J,
        context: RunContext,
    }
    let input: Input<K::Job> =
        serde_json::from_value(input).map_err(|e| InputError::new("stdin", "", e.to_string()))?;
    let record = K::run(&input.job, &input.context);
    println!(
        "{}",
        serde_json::to_string(&record).expect("a record always serializes")
    );
    Ok(())
}

/// `pipeopt sweep-job`'s input: which kind (`periodic` when the input names none, as
/// before there were two) and the whole JSON document.
pub fn read_child_input() -> Result<(String, serde_json::Value), InputError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| InputError::new("stdin", "", e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| InputError::new("stdin", "", e.to_string()))?;
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("periodic")
        .to_string();
    Ok((kind, value))
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

/// Runs one job in a child process with a wall-clock limit.
fn run_in_child<K: JobKind>(
    exe: &Path,
    job: &K::Job,
    ctx: &RunContext,
    timeout: Duration,
) -> K::Record {
    let started = Instant::now();
    let input =
        serde_json::to_string(&serde_json::json!({"kind": K::TAG, "job": job, "context": ctx}))
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
            return K::failed(
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
        None => K::failed(
            job,
            ctx,
            format!(
                "killed after the job timeout of {:.0} s",
                timeout.as_secs_f64()
            ),
            wall,
        ),
        Some(s) => match serde_json::from_str(out.trim()).and_then(K::read_record) {
            Ok(mut record) => {
                K::set_wall(&mut record, wall);
                record
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
                K::failed(job, ctx, format!("{why}: {tail}"), wall)
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
