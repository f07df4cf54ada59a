#!/usr/bin/env python3
"""How far each algorithm is from the optimum, per granularity: the certified table of
results/README.md ("MadPipe's 20%, certified").

    python3 experiments/optimality_table.py results/memory.csv results/memory-op.csv

For each CSV (a sweep of the memory grid: block level, then op level) and each algorithm,
on the cases where that algorithm has a judged plan (status `valid` or `timeout`) and the
case has a global lower bound:
- period / bound: the bound holds for every plan of the case, so this is an upper limit on
  how far the plan is from the optimum;
- period / best: the best judged plan of the case, any algorithm; a lower limit on the
  same distance (the optimum is at most the best plan).
The optimum lies in [bound, best], so each algorithm's distance lies between the two.
First, per M, each algorithm's period against MadPipe's (what `pipeopt table --by memory
--ratio-to madpipe` prints from the Parquet file). A second table restricts every algorithm to the cases where PipeDream, MadPipe and the
contiguous optimum all have a plan, so that their distributions compare case for case.
"""
import csv
import statistics
import sys
from collections import defaultdict

ALGORITHMS = ["pipedream", "madpipe", "madpipe-g", "contiguous-opt", "ilp", "best"]
COMMON = ["pipedream", "madpipe", "contiguous-opt"]


def num(x):
    return float(x) if x not in ("", None) else None


def load(path):
    """{case: {algorithm: period}}, {case: bound}, {case: best period}."""
    cases = defaultdict(list)
    for r in csv.DictReader(open(path)):
        cases[(r["instance"], r["processors"], r["memory"], r["bandwidth"])].append(r)
    periods, bounds, best = {}, {}, {}
    for case, rs in cases.items():
        if any(r["case_infeasible"] == "true" for r in rs):
            continue
        bound = max((num(r["global_lower_bound"]) or 0.0) for r in rs)
        mine = {
            r["algorithm"]: num(r["period"])
            for r in rs
            if r["status"] in ("valid", "timeout") and num(r["period"])
        }
        if not mine or bound <= 0:
            continue
        periods[case], bounds[case], best[case] = mine, bound, min(mine.values())
    return periods, bounds, best


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summary(xs):
    return (
        f"{statistics.median(xs):.2f} | {quantile(xs, 0.25):.2f}-{quantile(xs, 0.75):.2f} | "
        f"{quantile(xs, 0.9):.2f} | {max(xs):.2f}"
    )


def table(levels, restrict):
    print("| level | algorithm | cases | period / bound: median | quartiles | 90th pct | max "
          "| period / best: median | quartiles | 90th pct | max | within 5% of best | more than 1.2x best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for level, (periods, bounds, best) in levels:
        for a in ALGORITHMS:
            cs = [c for c in periods if a in periods[c] and (not restrict or all(x in periods[c] for x in COMMON))]
            if not cs:
                continue
            over_bound = [periods[c][a] / bounds[c] for c in cs]
            over_best = [periods[c][a] / best[c] for c in cs]
            within = sum(x <= 1.05 for x in over_best)
            far = sum(x > 1.2 for x in over_best)
            print(f"| {level} | {a} | {len(cs)} | {summary(over_bound)} | {summary(over_best)} | {within} | {far} |")


def ratio_to_madpipe(path):
    """Geometric mean of period / MadPipe's period per M, over the cases both solve, and
    how many cases (of 56 per M) each algorithm solves: `pipeopt table --by memory
    --ratio-to madpipe`, from the CSV."""
    cases = defaultdict(dict)
    for r in csv.DictReader(open(path)):
        if r["status"] in ("valid", "timeout") and num(r["period"]):
            cases[(r["instance"], r["processors"], r["memory"], r["bandwidth"])][r["algorithm"]] = float(r["period"])
    algs = ["pipedream", "contiguous-opt", "madpipe-g", "ilp", "best"]
    solved = ["pipedream", "madpipe", "contiguous-opt", "madpipe-g", "ilp", "best"]
    print(f"| M (GiB) | {' | '.join(algs)} | solved: {' / '.join(solved)} |")
    print("|---|" + "---|" * (len(algs) + 1))
    for m in sorted({k[2] for k in cases}, key=float):
        row = []
        for a in algs:
            xs = [v[a] / v["madpipe"] for k, v in cases.items() if k[2] == m and a in v and "madpipe" in v]
            row.append(f"{statistics.geometric_mean(xs):.2f}" if xs else "-")
        n = [str(sum(1 for k, v in cases.items() if k[2] == m and a in v)) for a in solved]
        print(f"| {float(m) / 2**30:g} | {' | '.join(row)} | {' / '.join(n)} |")


def main(paths):
    names = ["block", "op"] if len(paths) == 2 else [p for p in paths]
    levels = [(n, load(p)) for n, p in zip(names, paths)]
    for n, p in zip(names, paths):
        print(f"{n} level, period / MadPipe's period (geometric mean over the cases both solve):\n")
        ratio_to_madpipe(p)
        print()
    print("Each algorithm on the cases where it has a plan and the case a bound:\n")
    table(levels, restrict=False)
    print(f"\nOn the cases where {', '.join(COMMON)} all have a plan:\n")
    table(levels, restrict=True)
    for level, (periods, bounds, best) in levels:
        both = [c for c in periods if "pipedream" in periods[c] and "madpipe" in periods[c]]
        r = [periods[c]["pipedream"] / periods[c]["madpipe"] for c in both]
        gm = statistics.geometric_mean(r)
        print(f"\n{level}: PipeDream / MadPipe over {len(both)} cases with both plans (and a bound): "
              f"geometric mean {gm:.2f}, median {statistics.median(r):.2f}, "
              f"MadPipe at least 1.2x faster in {sum(x >= 1.2 for x in r)}, "
              f"PipeDream at least 1.2x faster in {sum(x <= 1 / 1.2 for x in r)}")
    if len(paths) == 2:
        block_against_op(*paths)


def block_against_op(block_path, op_path):
    """The op-level `best` row of each case against the block-level one (same network, P, M,
    beta): plans where both have one, bounds where neither case is infeasible."""
    def best_rows(path):
        return {
            (r["instance"].split("-")[0], r["processors"], r["memory"], r["bandwidth"]): r
            for r in csv.DictReader(open(path))
            if r["algorithm"] == "best"
        }

    b, o = best_rows(block_path), best_rows(op_path)
    ok = ("valid", "timeout")
    plans = [
        float(o[k]["period"]) / float(b[k]["period"])
        for k in b
        if k in o and b[k]["status"] in ok and o[k]["status"] in ok and b[k]["period"] and o[k]["period"]
    ]
    bounds = [
        float(o[k]["global_lower_bound"]) / float(b[k]["global_lower_bound"])
        for k in b
        if k in o and b[k]["global_lower_bound"] and o[k]["global_lower_bound"]
        and "true" not in (b[k]["case_infeasible"], o[k]["case_infeasible"])
    ]
    print(f"\nop-level best plan / block-level best plan over {len(plans)} cases: median "
          f"{statistics.median(plans):.2f}, longer by more than 5% in {sum(x > 1.05 for x in plans)} "
          f"(at most {max(plans):.2f}x), shorter by more than 0.1% in {sum(x < 0.999 for x in plans)}")
    print(f"op-level global bound / block-level one over {len(bounds)} cases: median "
          f"{statistics.median(bounds):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["results/memory.csv", "results/memory-op.csv"])
