#!/usr/bin/env python3
"""pipeopt's schedules run by PyTorch's own pipeline runtime (torch.distributed.pipelining).

    python3 experiments/torch_pipelining.py [--pipeopt target/debug/pipeopt] [--out results/torch-pipelining.md]

For every schedule of `pipeopt sync --schedule` (and the schedule-optimum MILP's on the
one-direction placement), at D = 4 stages and N = 8 micro-batches:

1. `pipeopt sync ... --export-torch F.csv` (compute only) and `--torch-format compute-comms`;
2. PyTorch's own checks on the compute-only file: `_validate_schedule` (every stage's F and B, or I and W,
   of every micro-batch, once, stage s on one rank), its lowering `_add_send_recv`, which
   must give exactly pipeopt's compute-comms file, and `_simulate_comms_compute`, which must
   run it to the end (no send without its receive, no deadlock); PyTorch's lowering is what
   its runtime does with a compute-only file (`_prepare_schedule_with_comms`: its markers
   UNSHARD, REDUCE_GRAD, RESHARD, then `_add_send_recv`);
3. the file run by `_PipelineScheduleRuntime` (`_load_csv`, both formats) on the CPU across
   D processes (gloo) on a small transformer (D encoder layers, width 32, float64, dropout
   0): it must complete, each rank must compute in the file's order (recorded by wrapping
   the stage's forward_one_chunk / backward_one_chunk / backward_weight_one_chunk: split
   backwards run as I then W), and the gradients must equal those
   of single-process training on the same N micro-batches to 1e-9 (relative).

Bidirectional schedules (Chimera, GEMS, MixPipe) have no file: PyTorch runs one copy of each
stage. Interleaved schedules hold several stages per rank (stage s on rank s mod ranks), ZB-V
and DualPipeV two in a V (stages r and D - 1 - r on rank r): their compute-only file is
validated and lowered by PyTorch itself and run with every rank holding the stages its row
computes; where all D stages would sit on one rank (v = D), they run with 2D stages on two
ranks (PyTorch's runtime does not send from a rank to itself). Writes a Markdown table. Needs torch 2.11 (pip install torch); no GPU.
"""
import argparse
import csv
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

D, N, WIDTH, SEQ, MB = 4, 8, 32, 6, 2
INSTANCE = "instances/bert48-b8.json"


def block(i):
    torch.manual_seed(100 + i)
    return nn.TransformerEncoderLayer(
        WIDTH, 4, dim_feedforward=64, dropout=0.0, batch_first=True, dtype=torch.float64
    )


def data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(N * MB, SEQ, WIDTH, dtype=torch.float64, generator=g)
    y = torch.randn(N * MB, SEQ, WIDTH, dtype=torch.float64, generator=g)
    return x, y


def loss_fn(out, target):
    return nn.functional.mse_loss(out, target)


def reference_grads(d):
    """Single-process training of `d` blocks: the mean over micro-batches of each one's loss
    (what the runtime's scale_grads=True computes), gradients by parameter name per stage."""
    blocks = [block(i) for i in range(d)]
    model = nn.Sequential(*blocks)
    x, y = data()
    total = sum(loss_fn(model(xm), ym) for xm, ym in zip(x.chunk(N), y.chunk(N))) / N
    total.backward()
    return [{n: p.grad.clone() for n, p in b.named_parameters()} for b in blocks]


def recorded(stage, index, order):
    """The stage with its computations recorded in `order` as the file writes them."""
    fwd, bwd = stage.forward_one_chunk, stage.backward_one_chunk
    weight = stage.backward_weight_one_chunk

    def forward_one_chunk(chunk, *a, **k):
        order.append(f"{index}F{chunk}")
        return fwd(chunk, *a, **k)

    def backward_one_chunk(chunk, *a, **k):
        # The runtime runs an input gradient (I) as a backward without the weights'.
        order.append(f"{index}{'B' if k.get('full_backward', True) else 'I'}{chunk}")
        return bwd(chunk, *a, **k)

    def backward_weight_one_chunk(chunk, *a, **k):
        order.append(f"{index}W{chunk}")
        return weight(chunk, *a, **k)

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
    stage.backward_weight_one_chunk = backward_weight_one_chunk
    return stage


def without_self_pairs(stage):
    """The stage's start-up exchange with its neighbours, without those on its own rank: a V
    puts its two middle stages on one rank, whose outputs the runtime passes locally
    (`_add_send_recv` places no transfer between them), but the start-up still pairs them
    through the process group, which gloo cannot do with itself."""
    ops = stage._get_init_p2p_neighbors_ops

    def own_rank_dropped():
        return [op for op in ops() if op.group_peer != stage.group_rank]

    stage._get_init_p2p_neighbors_ops = own_rank_dropped
    return stage


def rank_main(rank, path, fmt, port, outdir, placement, d):
    """One rank: the stages its row of the file names (`placement[rank]`)."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=len(placement))
    try:
        held = placement[rank]
        modules = {s: block(s) for s in held}
        order = []
        stages = [
            without_self_pairs(recorded(PipelineStage(modules[s], s, d, torch.device("cpu")), s, order))
            for s in held
        ]
        schedule = S._PipelineScheduleRuntime(stages, n_microbatches=N, loss_fn=loss_fn)
        schedule._load_csv(path, format=fmt)
        x, y = data()
        first, last = 0 in held, d - 1 in held
        if first and last:
            schedule.step(x, target=y, losses=[])
        elif first:
            schedule.step(x)
        elif last:
            schedule.step(target=y, losses=[])
        else:
            schedule.step()
        grads = {s: {n: p.grad.clone() for n, p in modules[s].named_parameters()} for s in held}
        torch.save({"order": order, "grads": grads}, os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_runtime(path, fmt, compute_rows, reference, d):
    ranks = len(compute_rows)
    # Each rank holds the stages its row computes (s mod ranks when interleaved, a V's r and
    # d - 1 - r for ZB-V and DualPipeV).
    placement = [sorted({S._Action.from_str(a).stage_index for a in row}) for row in compute_rows]
    with tempfile.TemporaryDirectory() as outdir:
        mp.spawn(rank_main, args=(path, fmt, free_port(), outdir, placement, d), nprocs=ranks, join=True)
        worst = 0.0
        for rank in range(ranks):
            got = torch.load(os.path.join(outdir, f"rank{rank}.pt"))
            if got["order"] != compute_rows[rank]:
                return f"rank {rank} computed {got['order']}, the file says {compute_rows[rank]}", None
            for stage, grads in got["grads"].items():
                for name, g in grads.items():
                    ref = reference[stage][name]
                    worst = max(worst, ((g - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item())
        return None, worst


def actions(path):
    with open(path, newline="") as f:
        return {r: [S._Action.from_str(a) for a in row if a] for r, row in enumerate(csv.reader(f))}


def rows_of(path):
    with open(path, newline="") as f:
        return [[a for a in row if a] for row in csv.reader(f)]


def check_lowering(compute_path, comms_path):
    """PyTorch's own validation and lowering of the compute-only file against ours."""
    compute = actions(compute_path)
    S._validate_schedule(compute, D, D, N)
    # What _PipelineScheduleRuntime._prepare_schedule_with_comms does with a compute-only file.
    marked = {r: S._add_reduce_grad(S._add_unshard_reshard(list(a)), N) for r, a in compute.items()}
    lowered = S._add_send_recv(marked, lambda s: s, D)
    ours = actions(comms_path)
    same = all([str(a) for a in lowered[r]] == [str(a) for a in ours[r]] for r in range(D))
    markers = (S.UNSHARD, S.RESHARD, S.REDUCE_GRAD)  # which its simulator does not know
    S._simulate_comms_compute(
        {r: [a for a in row if a.computation_type not in markers] for r, row in ours.items()},
        lambda s: s,
        D,
    )
    return same


def schedules(pipeopt):
    help_text = subprocess.run([pipeopt, "sync", "--help"], capture_output=True, text=True).stdout
    start = help_text.index("Possible values:", help_text.index("--schedule <SCHEDULE>"))
    names = []
    for line in help_text[start:].splitlines()[1:]:
        line = line.strip()
        value = re.match(r"- ([a-z0-9][a-z0-9-]*):", line)
        if value:
            names.append(value.group(1))
        elif line.startswith("--"):
            break
    return [n for n in names if n != "optimal"] + ["optimal"]


def export(pipeopt, name, path, fmt, d=D):
    args = [pipeopt, "sync", "--instance", INSTANCE, "--stages", str(d), "--micro-batches", str(N),
            "--schedule", name, "--export-torch", path, "--torch-format", fmt, "--json"]
    if name == "optimal":
        args += ["--placement", "one-direction", "--time-limit", "30s"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return r.stderr.strip().splitlines()[-1], None
    return None, json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeopt", default="target/debug/pipeopt")
    ap.add_argument("--out", default="results/torch-pipelining.md")
    args = ap.parse_args()
    references = {}
    lines = [
        "| schedule | export | PyTorch's validation and lowering | runtime, compute-only | runtime, compute-comms | worst gradient error (relative) |",
        "|---|---|---|---|---|---|",
    ]
    passed = tried = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in schedules(args.pipeopt):
            compute_path = os.path.join(tmp, f"{name}.csv")
            comms_path = os.path.join(tmp, f"{name}-comms.csv")
            err, _ = export(args.pipeopt, name, compute_path, "compute-only")
            if err:
                reason = "bidirectional (two copies of every stage)" if "bidirectional" in err else err
                lines.append(f"| {name} | refused: {reason.replace('|', '/')} | | | | |")
                continue
            tried += 1
            compute_rows, d = rows_of(compute_path), D
            if len(compute_rows) == 1:
                # Every stage on one rank (interleaved with v = D): twice the stages, two ranks
                # (PyTorch's runtime does not send from a rank to itself).
                d = 2 * D
                export(args.pipeopt, name, compute_path, "compute-only", d)
                compute_rows = rows_of(compute_path)
            ranks = len(compute_rows)
            reference = references.setdefault(d, reference_grads(d))
            runs = [(compute_path, "compute_only")]
            if ranks == D:
                export(args.pipeopt, name, comms_path, "compute-comms")
                same = check_lowering(compute_path, comms_path)
                lowering = "valid; lowering identical" if same else "valid; lowering DIFFERS"
                runs.append((comms_path, "compute_comms"))
            else:
                # Several stages per rank: PyTorch lowers the compute-only file itself.
                S._validate_schedule(actions(compute_path), ranks, d, N)
                same, lowering = True, "valid; lowered by PyTorch"
            cells, worst_all = [], 0.0
            for path, fmt in runs:
                problem, worst = run_runtime(path, fmt, compute_rows, reference, d)
                cells.append(problem or "ran, same order")
                worst_all = max(worst_all, worst or 0.0)
            ok = same and all(c == "ran, same order" for c in cells) and worst_all <= 1e-9
            passed += ok
            cells += ["(compute-only only)"] * (2 - len(cells))
            lines.append(f"| {name} | {d} stages on {ranks} ranks x {len(compute_rows[0])} computations | {lowering} | {cells[0]} | {cells[1]} | {worst_all:.1e} |")
    summary = f"{passed} of {tried} exported schedules pass every check (D = {D}, N = {N}, torch {torch.__version__})."
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    print(text)
    if args.out != "-":
        with open(args.out) as f:
            head = f.read().split("<!-- table -->")[0]
        with open(args.out, "w") as f:
            f.write(head + "<!-- table -->\n\n" + text)
    sys.exit(0 if passed == tried and tried > 0 else 1)


if __name__ == "__main__":
    main()
