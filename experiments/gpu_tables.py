#!/usr/bin/env python3
"""Markdown tables from the GPU runs of experiments/gpu.sh (no third-party modules).

    python3 experiments/gpu_tables.py profiles   # results/profiles/*.report.json
    python3 experiments/gpu_tables.py profiles-op  # results/profiles/*-op-h100.report.json
    python3 experiments/gpu_tables.py execute    # results/execute/*.json

Prints the tables that results/profiles.md and results/execute.md quote.
"""
import glob
import json
import math
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NETS = ["resnet50", "resnet101", "inception_v3", "densenet121", "vgg16"]


def ms(s):
    return f"{s * 1e3:.2f}"


def profiles():
    print("| network | layers | sum of layer fwd (ms) | whole fwd (ms) | ratio | sum of fwd+bwd (ms) | training step (ms) | ratio | stash: layers equal to analytic | overlaps equal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for m in NETS:
        r = json.load(open(os.path.join(ROOT, f"results/profiles/{m}-1000-b8-h100.report.json")))
        n = len(r["layers"])
        a = json.load(open(os.path.join(ROOT, f"instances/{m}-1000-b8.json")))["layers"]
        st = sum(1 for l, x in zip(r["layers"], a) if l["stash_measured"] == x["stash"])
        ov = sum(1 for l, x in zip(r["layers"], a)
                 if (l["overlap_measured"] or 0.0) == x.get("stash_overlap", 0.0))
        print(f"| {m} | {n} | {ms(r['sum_fwd'])} | {ms(r['whole_forward'])} | {r['forward_ratio']:.3f} "
              f"| {ms(r['sum_fwd_bwd'])} | {ms(r['whole_step'])} | {r['step_ratio']:.3f} | {st}/{n} | {ov}/{n} |")
        rows.append(r)
    print()
    print("Analytic (instances/NET-1000-b8.json, `--device-model h100`) over measured, per layer and in total:")
    print()
    print("| network | fwd min | fwd max | bwd min | bwd max | U(1,L) analytic / measured | analytic U(1,L) with the datasheet roofline (`h100-peak`) / measured |")
    print("|---|---|---|---|---|---|---|")
    peak = {}
    for m in NETS:
        p = os.path.join(ROOT, f"results/profiles/{m}-1000-b8-h100-peak.json")
        if os.path.exists(p):
            d = json.load(open(p))
            peak[m] = sum(l["fwd"] + l["bwd"] for l in d["layers"])
    for m, r in zip(NETS, rows):
        a = json.load(open(os.path.join(ROOT, f"instances/{m}-1000-b8.json")))["layers"]
        f = [x["fwd"] / l["fwd"] for l, x in zip(r["layers"], a)]
        b = [x["bwd"] / l["bwd"] for l, x in zip(r["layers"], a)]
        um = r["sum_fwd_bwd"]
        ua = sum(x["fwd"] + x["bwd"] for x in a)
        pk = f"{peak[m] / um:.2f}" if m in peak else "-"
        print(f"| {m} | {min(f):.2f} | {max(f):.2f} | {min(b):.2f} | {max(b):.2f} | {ua / um:.2f} | {pk} |")


def profiles_op():
    print("| network | timed ops | chain layers | sum of op fwd (ms) | whole fwd (ms) | ratio | sum of fwd+bwd (ms) | training step (ms) | ratio | block-level U(1,L) (ms) | op-level / block-level U(1,L) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for m in NETS[:4]:
        path = os.path.join(ROOT, f"results/profiles/{m}-1000-b8-op-h100.report.json")
        if not os.path.exists(path):
            continue
        r = json.load(open(path))
        inst = json.load(open(os.path.join(ROOT, f"instances/{m}-1000-b8-op-h100.json")))
        block = json.load(open(os.path.join(ROOT, f"instances/{m}-1000-b8-h100.json")))
        ub = sum(l["fwd"] + l["bwd"] for l in block["layers"])
        print(f"| {m} | {len(r['layers'])} | {len(inst['layers'])} | {ms(r['sum_fwd'])} | {ms(r['whole_forward'])} "
              f"| {r['forward_ratio']:.3f} | {ms(r['sum_fwd_bwd'])} | {ms(r['whole_step'])} | {r['step_ratio']:.3f} "
              f"| {ms(ub)} | {r['sum_fwd_bwd'] / ub:.3f} |")
        rows.append((m, r))
    print()
    print("Analytic op times (`--device-model h100`, the roofline plus the block's per-layer share) over measured, per op (fwd+bwd):")
    print()
    print("| network | min | geometric mean | max | ops outside 0.5-2x | total analytic / measured |")
    print("|---|---|---|---|---|---|")
    for m, r in rows:
        ratios = [(l["analytic_fwd"] + l["analytic_bwd"]) / (l["fwd"] + l["bwd"]) for l in r["layers"]]
        out = sum(1 for x in ratios if x < 0.5 or x > 2)
        lo, geo, hi = r["analytic_time_ratio"]
        print(f"| {m} | {lo:.2f} | {geo:.2f} | {hi:.2f} | {out}/{len(ratios)} | {r['analytic_total_ratio']:.2f} |")


def execute():
    print("| plan (algorithm, M) | stages | predicted period (ms) | replayed (ms) | replayed / predicted | worst processor peak, measured / predicted | largest peak (GB) | gradients: max relative error | device peak (GB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob(os.path.join(ROOT, "results/execute/*.json"))):
        r = json.load(open(f))
        name = os.path.basename(f)[:-5]
        procs = [p for p in r["processors"] if p["predicted_peak"] > 0]
        worst = max(procs, key=lambda p: abs(p["measured_peak"] / p["predicted_peak"] - 1))
        dev = worst["measured_peak"] / worst["predicted_peak"]
        big = max(p["predicted_peak"] for p in procs) / 1e9
        g = r["gradients"]
        print(f"| {name} | {len(r['stash_per_batch'])} | {ms(r['predicted_period'])} | {ms(r['replayed_period'])} "
              f"| {r['replayed_period'] / r['predicted_period']:.4f} | {dev:.5f} | {big:.2f} "
              f"| {g['max_relative_error']:.1e} ({'passed' if g['passed'] else 'FAILED'}) | {r['device_peak'] / 1e9:.1f} |")


if __name__ == "__main__":
    {"profiles": profiles, "profiles-op": profiles_op, "execute": execute}[sys.argv[1] if len(sys.argv) > 1 else "profiles"]()
