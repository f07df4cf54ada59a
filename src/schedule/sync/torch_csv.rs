//! Schedules in the format of PyTorch's pipeline runtime (`torch.distributed.pipelining`,
//! `_PipelineScheduleRuntime._load_csv` and `_dump_csv`): a CSV file with one row per rank,
//! each cell one action written `{stage}{type}{micro-batch}`: `0F3` is stage 0's forward
//! of micro-batch 3, `2B0` stage 2's full backward of micro-batch 0, `1I2` and `1W2` the
//! two parts of stage 1's split backward of micro-batch 2 (input and weight gradients).
//!
//! - **compute only**: the forwards and backwards, the format PyTorch lowers itself;
//! - **with communication**: what PyTorch's runtime itself builds from a compute-only file
//!   (`_prepare_schedule_with_comms`), action for action: each send after the computation
//!   that produces it on the sender's row (`0SEND_F3`, `1SEND_B0`), each receive on the
//!   receiver's row (`1RECV_F3`, `0RECV_B0`), placed as its lowering places them
//!   (`_add_send_recv`: ranks visited in turn, each taking its next action once the receive
//!   it needs is in its row, a receive written into the receiver's row when the sender
//!   computes), and its markers `UNSHARD`, `REDUCE_GRAD` (after the stage's last backward:
//!   where the runtime scales the gradients by the micro-batch count) and `RESHARD`.
//!
//! PyTorch runs one copy of each stage: stage `s` on rank `s` in most schedules pipeopt
//! draws, on rank `s mod P` in the interleaved ones (written compute-only: PyTorch's lowering
//! of several stages per rank also places its prefetching markers, which pipeopt does not
//! reproduce); bidirectional schedules (Chimera, GEMS, MixPipe), whose two pipelines each
//! hold a copy of every stage, have no such file. Reading keeps the computations (the simulator
//! derives the transfers from the dependencies), skips the actions PyTorch's lowering adds
//! for sharded stages and data-parallel gradients (`UNSHARD`, `RESHARD`, `REDUCE_GRAD`:
//! the model keeps weights resident and the pipeline's iteration ends before any
//! all-reduce), and refuses what the model has no rule for: stages on ranks other than their
//! own index (virtual stages).

use super::{Instr, Pass, Pipeline, Schedule};

/// Which actions a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TorchFormat {
    ComputeOnly,
    WithCommunication,
}

impl TorchFormat {
    pub const NAMES: [&'static str; 2] = ["compute-only", "compute-comms"];

    /// `compute-only` or `compute-comms` (PyTorch's names).
    pub fn parse(text: &str) -> Option<TorchFormat> {
        match text {
            "compute-only" | "compute_only" => Some(TorchFormat::ComputeOnly),
            "compute-comms" | "compute_comms" => Some(TorchFormat::WithCommunication),
            _ => None,
        }
    }
}

/// The action types of PyTorch's format that pipeopt writes or reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Forward,
    Backward,
    BackwardInput,
    BackwardWeight,
    SendForward,
    ReceiveForward,
    SendBackward,
    ReceiveBackward,
    /// PyTorch's markers around a stage's work and after its last backward (for sharded
    /// stages and the scaling of the gradients over the micro-batches).
    Unshard,
    ReduceGradients,
    Reshard,
}

impl Kind {
    fn code(self) -> &'static str {
        match self {
            Kind::Forward => "F",
            Kind::Backward => "B",
            Kind::BackwardInput => "I",
            Kind::BackwardWeight => "W",
            Kind::SendForward => "SEND_F",
            Kind::ReceiveForward => "RECV_F",
            Kind::SendBackward => "SEND_B",
            Kind::ReceiveBackward => "RECV_B",
            Kind::Unshard => "UNSHARD",
            Kind::ReduceGradients => "REDUCE_GRAD",
            Kind::Reshard => "RESHARD",
        }
    }
}

/// One action: a stage, a type, a micro-batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Action {
    stage: usize,
    kind: Kind,
    /// None for the markers.
    micro_batch: Option<usize>,
}

impl std::fmt::Display for Action {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "{}{}", self.stage, self.kind.code())?;
        match self.micro_batch {
            Some(mb) => write!(out, "{mb}"),
            None => Ok(()),
        }
    }
}

/// Why a schedule has no file, or a file no schedule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TorchCsvError {
    #[error("{0} is bidirectional: PyTorch's pipeline runtime runs one copy of each stage, on one rank, so a schedule whose two pipelines each hold every stage has no file in its format")]
    Bidirectional(String),
    #[error("row {row} (rank {row}), action {column} `{text}`: {reason}")]
    Action {
        row: usize,
        column: usize,
        text: String,
        reason: String,
    },
    #[error("{0} holds several stages per worker: its compute-only file is PyTorch's to lower (its runtime places the transfers and its UNSHARD/RESHARD prefetches itself); pipeopt writes the lowered form for one stage per rank only")]
    LoweringVirtualStages(String),
    #[error("the file has no action")]
    Empty,
}

/// The file of `schedule` (named `name` in errors) in `format`: one line per worker.
pub fn write(
    schedule: &Schedule,
    name: &str,
    format: TorchFormat,
) -> Result<String, TorchCsvError> {
    if schedule
        .iter()
        .flatten()
        .any(|i| i.pipeline() == Pipeline::Up)
    {
        return Err(TorchCsvError::Bidirectional(name.to_string()));
    }
    let one_stage_per_rank = schedule
        .iter()
        .enumerate()
        .all(|(rank, stream)| stream.iter().all(|i| i.stage() == rank));
    if format == TorchFormat::WithCommunication && !one_stage_per_rank {
        return Err(TorchCsvError::LoweringVirtualStages(name.to_string()));
    }
    let compute: Vec<Vec<Action>> = schedule
        .iter()
        .map(|stream| stream.iter().map(|&i| action_of(i)).collect())
        .collect();
    let rows = match format {
        TorchFormat::ComputeOnly => compute,
        TorchFormat::WithCommunication => {
            let marked: Vec<Vec<Action>> = compute
                .iter()
                .enumerate()
                .map(|(rank, row)| with_markers(rank, row))
                .collect();
            with_communication(&marked)
        }
    };
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().map(Action::to_string).collect();
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    Ok(text)
}

fn action_of(i: Instr) -> Action {
    Action {
        stage: i.stage(),
        kind: match i.pass() {
            Pass::Forward => Kind::Forward,
            Pass::Backward => Kind::Backward,
            Pass::BackwardInput => Kind::BackwardInput,
            Pass::BackwardWeight => Kind::BackwardWeight,
        },
        micro_batch: Some(i.micro_batch()),
    }
}

/// A rank's computations with PyTorch's markers, as its lowering adds them before placing
/// the transfers (`_add_unshard_reshard`, `_add_reduce_grad`; one stage per rank): `UNSHARD`
/// first, `REDUCE_GRAD` after the stage's last backward or weight gradient (where the
/// runtime scales the gradients by the micro-batch count), `RESHARD` last.
fn with_markers(rank: usize, row: &[Action]) -> Vec<Action> {
    let marker = |kind| Action {
        stage: rank,
        kind,
        micro_batch: None,
    };
    let last_backward = row
        .iter()
        .rposition(|a| matches!(a.kind, Kind::Backward | Kind::BackwardWeight));
    let mut out = vec![marker(Kind::Unshard)];
    for (i, &a) in row.iter().enumerate() {
        out.push(a);
        if Some(i) == last_backward {
            out.push(marker(Kind::ReduceGradients));
        }
    }
    out.push(marker(Kind::Reshard));
    out
}

/// PyTorch's lowering (`_add_send_recv`, stage `s` on rank `s`): the ranks are visited in
/// turn, each taking at most one action per round; a marker is always ready, and a
/// computation when the input it needs is there (a forward of
/// stage `s > 0` once `RECV_F` of it is in its row; a backward of stage `s < D - 1` once
/// `RECV_B` is); a computation whose output goes to another stage is followed by its send,
/// and the matching receive is appended to the receiver's row at that moment. Streams that
/// the simulator accepts never stall this loop (every dependency is met in some order); a
/// stalled one is returned as far as it got.
fn with_communication(compute: &[Vec<Action>]) -> Vec<Vec<Action>> {
    let d = compute.len();
    let mut rows: Vec<Vec<Action>> = vec![Vec::new(); d];
    let mut received: Vec<std::collections::HashSet<(Kind, usize)>> = vec![Default::default(); d];
    let mut next = vec![0; d];
    loop {
        let mut progress = false;
        for rank in 0..d {
            let Some(&a) = compute[rank].get(next[rank]) else {
                continue;
            };
            let needs = match a.kind {
                Kind::Forward if a.stage > 0 => Some(Kind::ReceiveForward),
                Kind::Backward | Kind::BackwardInput if a.stage + 1 < d => {
                    Some(Kind::ReceiveBackward)
                }
                _ => None,
            };
            let mb = a.micro_batch.unwrap_or(0);
            if needs.is_some_and(|k| !received[rank].contains(&(k, mb))) {
                continue;
            }
            rows[rank].push(a);
            let send = match a.kind {
                Kind::Forward if a.stage + 1 < d => {
                    Some((Kind::SendForward, Kind::ReceiveForward, a.stage + 1))
                }
                Kind::Backward | Kind::BackwardInput if a.stage > 0 => {
                    Some((Kind::SendBackward, Kind::ReceiveBackward, a.stage - 1))
                }
                _ => None,
            };
            if let Some((send, receive, to)) = send {
                rows[rank].push(Action { kind: send, ..a });
                rows[to].push(Action {
                    stage: to,
                    kind: receive,
                    micro_batch: a.micro_batch,
                });
                received[to].insert((receive, mb));
            }
            next[rank] += 1;
            progress = true;
        }
        if !progress {
            return rows;
        }
    }
}

/// The schedule a file holds (its computations; sends and receives are checked for their
/// form and left to the simulator, which derives them), with its D (rows) and N (the most
/// micro-batches any stage runs).
pub fn read(text: &str) -> Result<(Schedule, usize, usize), TorchCsvError> {
    let rows: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let d = rows.len();
    let mut schedule: Schedule = vec![Vec::new(); d];
    let mut n = 0;
    for (row, line) in rows.iter().enumerate() {
        for (column, cell) in line.split(',').enumerate() {
            let cell = cell.trim().trim_matches('"');
            if cell.is_empty() {
                continue; // PyTorch writes an idle step as an empty cell
            }
            let bad = |reason: &str| TorchCsvError::Action {
                row,
                column,
                text: cell.to_string(),
                reason: reason.to_string(),
            };
            let action = parse_action(cell).map_err(|r| bad(&r))?;
            let Some(action) = action else {
                continue;
            };
            if action.stage != row {
                return Err(bad(&format!(
                    "stage {} on rank {row}: pipeopt places stage s on rank s (one stage per rank; virtual stages are not modelled)",
                    action.stage
                )));
            }
            let mb = action.micro_batch.unwrap_or(0);
            n = n.max(mb + 1);
            let pass = match action.kind {
                Kind::Forward => Pass::Forward,
                Kind::BackwardInput => Pass::BackwardInput,
                Kind::BackwardWeight => Pass::BackwardWeight,
                _ => Pass::Backward,
            };
            schedule[row].push(Instr::new(pass, action.stage, mb, Pipeline::Down));
        }
    }
    if schedule.iter().all(Vec::is_empty) {
        return Err(TorchCsvError::Empty);
    }
    Ok((schedule, d, n))
}

/// One cell: `Some` computation, `None` for a send or receive, an error for anything else.
fn parse_action(cell: &str) -> Result<Option<Action>, String> {
    let digits = cell.chars().take_while(char::is_ascii_digit).count();
    let rest = &cell[digits..];
    let stage: usize = cell[..digits]
        .parse()
        .map_err(|_| "not an action: it starts with its stage's number".to_string())?;
    let code_len = rest.chars().take_while(|c| !c.is_ascii_digit()).count();
    let (code, mb) = rest.split_at(code_len);
    let micro_batch: Option<usize> = if mb.is_empty() {
        None
    } else {
        Some(
            mb.parse()
                .map_err(|_| format!("micro-batch {mb:?} is not a number"))?,
        )
    };
    let kind = match code {
        "F" => Kind::Forward,
        "B" => Kind::Backward,
        "SEND_F" | "RECV_F" | "SEND_B" | "RECV_B" => {
            return micro_batch
                .map(|_| None)
                .ok_or_else(|| "a transfer names its micro-batch".to_string());
        }
        "I" => Kind::BackwardInput,
        "W" => Kind::BackwardWeight,
        // PyTorch's markers (sharded stages, the gradients' reduction and scaling): no
        // computation of the pipeline; the model keeps weights resident.
        "UNSHARD" | "RESHARD" | "REDUCE_GRAD" => return Ok(None),
        other => {
            return Err(format!(
                "unknown action type {other:?} (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)"
            ))
        }
    };
    if micro_batch.is_none() {
        return Err("a computation names its micro-batch".to_string());
    }
    Ok(Some(Action {
        stage,
        kind,
        micro_batch,
    }))
}

#[cfg(test)]
#[path = "torch_csv_tests.rs"]
mod tests;
