#!/usr/bin/env python3
"""Block level against op level: the side-by-side table of results/README.md ("memory-op").

    python3 experiments/levels_table.py results/memory.csv results/memory-op.csv

Each CSV is one grid's table (`pipeopt sweep` writes it beside the Parquet file). A case is
(instance, processors, memory, bandwidth); an algorithm "solves" a case when its row has a
period (status valid, or timeout with a judged plan). Ratios are geometric means over the
cases both algorithms solve.
"""
import csv
import math
import sys
from collections import defaultdict

GIB = 2**30


def load(path):
    cases = defaultdict(dict)
    for r in csv.DictReader(open(path)):
        key = (r["instance"], int(r["processors"]), float(r["memory"]), float(r["bandwidth"]))
        cases[key][r["algorithm"]] = r
    return cases


def period(row):
    if row is None or row["status"] not in ("valid", "timeout") or not row["period"]:
        return None
    return float(row["period"])


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def stats(cases):
    out = {}
    pairs = [(period(a.get("pipedream")), period(a.get("madpipe")), k[2]) for k, a in cases.items()]
    both = [(p, m, mem) for p, m, mem in pairs if p and m]
    out["pd_mp"] = f"{geo([p / m for p, m, _ in both]):.2f} ({len(both)} cases)"
    low = [p / m for p, m, mem in both if mem < 10 * GIB]
    high = [p / m for p, m, mem in both if mem >= 12 * GIB]
    out["pd_mp_split"] = f"{geo(low):.2f} / {geo(high):.2f}"
    out["pd_over_1.2"] = str(sum(1 for p, m, _ in both if p > 1.2 * m))
    ratios = []
    for a in cases.values():
        r = a.get("madpipe")
        if period(r) and r["planned_period"]:
            ratios.append(float(r["period"]) / float(r["planned_period"]))
    out["mp_validated"] = f"{sum(ratios) / len(ratios):.2f} (up to {max(ratios):.1f})" if ratios else "-"
    fits = []
    for gib in (3, 4):
        sel = [a for k, a in cases.items() if k[2] == gib * GIB]
        fits.append(sum(1 for a in sel if any(period(r) for r in a.values())))
    out["fit_3_4"] = f"{fits[0]} / {fits[1]}"
    solved = [sum(1 for a in cases.values() if period(a.get(alg)))
              for alg in ("pipedream", "madpipe", "contiguous-opt", "madpipe-g")]
    out["solved"] = ", ".join(map(str, solved))
    per_m = defaultdict(list)
    for k, a in cases.items():
        m, c = period(a.get("madpipe")), period(a.get("contiguous-opt"))
        if m and c:
            per_m[k[2]].append(m / c)
    g = [geo(v) for _, v in sorted(per_m.items())]
    out["mp_copt"] = f"{min(g):.2f}-{max(g):.2f}" if g else "-"
    closed = 0
    for a in cases.values():
        b = a.get("best")
        if b is None:
            continue
        if b["case_infeasible"] == "true" or (b["gap"] and float(b["gap"]) <= 0.05):
            closed += 1
    out["closed"] = str(closed)
    return out


ROWS = [
    ("pd_mp", "PipeDream / MadPipe, geometric mean over cases both solve"),
    ("pd_mp_split", "... below 10 GiB / at 12-16 GiB"),
    ("pd_over_1.2", "cases where PipeDream is more than 1.2x MadPipe"),
    ("mp_validated", "MadPipe's validated / planned period, mean"),
    ("fit_3_4", "cases with any plan at 3 GiB / 4 GiB (of 56)"),
    ("solved", "cases solved: PipeDream, MadPipe, contiguous optimum, madpipe-g"),
    ("mp_copt", "MadPipe / contiguous optimum, geometric mean per M (range over 3 to 16 GiB)"),
    ("closed", "cases closed by `best` (proven infeasible or within 5% of the global bound)"),
]

block, op = stats(load(sys.argv[1])), stats(load(sys.argv[2]))
print("| | block level | op level |")
print("|---|---|---|")
for key, label in ROWS:
    print(f"| {label} | {block[key]} | {op[key]} |")
