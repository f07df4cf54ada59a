#!/usr/bin/env python3
"""How far from optimal: the certification tables of results/README.md from a sweep's CSV.

    python3 experiments/gap_table.py results/memory.csv

A case (instance, P, M, beta) is *closed* when it is proven that no plan fits
(`case_infeasible`) or when its best judged plan is within 5% of the global lower bound.
"""
import csv
import statistics
import sys
from collections import defaultdict

GIB = 2**30


def main(path):
    rows = list(csv.DictReader(open(path)))
    cases = defaultdict(list)
    for r in rows:
        cases[(r["instance"], r["processors"], r["memory"], r["bandwidth"])].append(r)

    def num(x):
        return float(x) if x not in ("", None) else None

    by_mem = defaultdict(lambda: dict(n=0, plan=0, infeasible=0, open_no_plan=0, gaps=[], within=0))
    for (inst, p, m, b), rs in cases.items():
        s = by_mem[float(m) / GIB]
        s["n"] += 1
        infeasible = any(r["case_infeasible"] == "true" for r in rs)
        bound = max((num(r["global_lower_bound"]) or 0.0) for r in rs)
        periods = [num(r["period"]) for r in rs if r["status"] in ("valid", "timeout") and num(r["period"])]
        if infeasible:
            s["infeasible"] += 1
            continue
        if not periods:
            s["open_no_plan"] += 1
            continue
        s["plan"] += 1
        if bound > 0:
            gap = min(periods) / bound - 1
            s["gaps"].append(gap)
            s["within"] += gap <= 0.05
    print("| M (GiB) | cases | proven infeasible | with a plan | no plan, no proof | median gap of the best plan | within 5% | closed |")
    print("|---|---|---|---|---|---|---|---|")
    tot = dict(n=0, closed=0, gaps=[])
    for m in sorted(by_mem):
        s = by_mem[m]
        closed = s["infeasible"] + s["within"]
        tot["n"] += s["n"]
        tot["closed"] += closed
        tot["gaps"] += s["gaps"]
        med = f"{100 * statistics.median(s['gaps']):.1f}%" if s["gaps"] else "-"
        print(f"| {m:g} | {s['n']} | {s['infeasible']} | {s['plan']} | {s['open_no_plan']} | {med} | {s['within']} | {closed} |")
    med = f"{100 * statistics.median(tot['gaps']):.1f}%" if tot["gaps"] else "-"
    optimal = sum(g <= 0.001 for g in tot["gaps"])
    print(f"\nclosed: {tot['closed']} of {tot['n']} ({100 * tot['closed'] / tot['n']:.0f}%); median gap of the best plan over cases with a plan: {med}; proven optimal (gap at most 0.1%): {optimal}")

    print("\n| algorithm | plans | median gap | 90th percentile | within 5% | best of its case |")
    print("|---|---|---|---|---|---|")
    algs = sorted({r["algorithm"] for r in rows})
    for a in algs:
        gaps, within, best = [], 0, 0
        for rs in cases.values():
            mine = [r for r in rs if r["algorithm"] == a and num(r["gap"]) is not None]
            if not mine:
                continue
            g = num(mine[0]["gap"])
            gaps.append(g)
            within += g <= 0.05
            allg = [num(r["gap"]) for r in rs if num(r["gap"]) is not None]
            best += g <= min(allg) + 1e-9
        if gaps:
            gaps.sort()
            p90 = gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))]
            print(f"| {a} | {len(gaps)} | {100 * statistics.median(gaps):.1f}% | {100 * p90:.1f}% | {within} | {best} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/memory.csv")
