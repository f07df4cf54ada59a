#!/usr/bin/env python3
"""Compares `pipeopt import onnx` with `pipeopt instance --model NET` on torchvision exports.

    python3 experiments/onnx_export.py --out /tmp/onnx --image 1000
    python3 experiments/onnx_agreement.py /tmp/onnx/*.onnx [--pipeopt target/release/pipeopt]

Each file is named NET-IMAGE.onnx (as onnx_export.py writes them). Per file, at op
granularity, batch 8, float32: the chain layers of both instances side by side, sizes
(weights, output, stash, stash overlap, shared stashes) compared to the byte and times
compared with a device model without its per-layer overhead (charged once per block, and an
imported network's blocks are its single-tensor cuts, not torchvision's modules); then
with the h100 model as is, the whole network's weights, one-batch stash and U(1,L), and the
same at block granularity. Prints a Markdown table; exits 1 if a size or a time differs
on a network whose chains have the same length (the same DAG, op for op), or if the whole
network's weights differ.

Files of networks pipeopt does not build in (any other torchvision model) go to a second
table: the import's parameter count against torch's (NET-IMAGE.params, written by
onnx_export.py), its chain and its one-batch stash, or the import's error.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


# The image networks of `pipeopt instance --model`.
BUILT_IN = ["resnet50", "resnet101", "inception_v3", "densenet121", "vgg16"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def load(path):
    with open(path) as f:
        return json.load(f)


def totals(inst):
    """Weights, one-batch stash of the whole chain (U(1,L)'s memory rule: overlaps and
    shared stashes counted once) and U(1,L), as pipeopt's summary reports them."""
    s = inst["summary"]
    return (s["weights_bytes"], s["stash_bytes"], s["sequential_seconds"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--pipeopt", default="target/release/pipeopt")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="onnx-agreement-")
    with open("devices/h100.toml") as f:
        toml = re.sub(r"(?m)^per_layer = .*$", "per_layer = 0.0", f.read())
    toml = toml.replace('name = "h100"', 'name = "h100-no-per-layer"')
    flat = os.path.join(tmp, "h100-no-per-layer.toml")
    with open(flat, "w") as f:
        f.write(toml)
    print("| network | image | chain layers (ours / ONNX) | layers with a size differing | "
          "max time difference (no per-layer) | weights | one-batch stash | "
          "U(1,L) ONNX / ours, without per-layer overhead | U(1,L) ONNX / ours (h100) | blocks (ours / ONNX) | block level: weights, stash |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    others = []
    for path in args.files:
        m = re.match(r"(.+)-(\d+)\.onnx$", os.path.basename(path))
        if not m:
            sys.exit(f"{path}: expected NET-IMAGE.onnx")
        net, image = m.group(1), m.group(2)
        if net not in BUILT_IN:
            others.append((path, net, image))
            continue
        out = {}
        for dev, tag in [(flat, "flat"), ("h100", "h100")]:
            for gran in ["op", "block"]:
                a = os.path.join(tmp, f"{net}-{image}-{tag}-{gran}-ours.json")
                b = os.path.join(tmp, f"{net}-{image}-{tag}-{gran}-onnx.json")
                sa = json.loads(run([args.pipeopt, "instance", "--model", net, "--image", image,
                                     "--batch", "8", "--granularity", gran, "--device-model",
                                     dev, "--out", a, "--json"]))
                sb = json.loads(run([args.pipeopt, "import", "onnx", path, "--batch", "8",
                                     "--granularity", gran, "--device-model", dev, "--out", b,
                                     "--json"]))
                ia, ib = load(a), load(b)
                ia["summary"], ib["summary"] = sa, sb
                out[(tag, gran)] = (ia, ib)
        ours, theirs = out[("flat", "op")]
        differing, dt = 0, 0.0
        for x, y in zip(ours["layers"], theirs["layers"]):
            if any(x.get(k) != y.get(k) for k in ("weights", "out", "stash", "stash_overlap")):
                differing += 1
            for k in ("fwd", "bwd"):
                dt = max(dt, abs(x[k] - y[k]) / max(x[k], 1e-12))
        same_dag = len(ours["layers"]) == len(theirs["layers"])
        if ours.get("stash_shared") != theirs.get("stash_shared") or ours["input"] != theirs["input"]:
            differing += 1
        ow, os_, _ = totals(ours)
        tw, ts, _ = totals(theirs)
        bad += int(ow != tw) + int(same_dag and dt > 1e-12)
        o_h, t_h = out[("h100", "op")]
        u_ratio = totals(t_h)[2] / totals(o_h)[2]
        u_flat = totals(theirs)[2] / totals(ours)[2]
        ob, tb = out[("h100", "block")]
        bw = "equal" if totals(ob)[0] == totals(tb)[0] else f"{totals(tb)[0]:.0f} vs {totals(ob)[0]:.0f}"
        bs = "equal" if totals(ob)[1] == totals(tb)[1] else f"{totals(tb)[1]:.0f} vs {totals(ob)[1]:.0f}"
        if same_dag:
            bad += differing
            per_layer, times = str(differing), f"{dt:.1e}"
        else:  # the exporter wrote another graph: layer i of one is not layer i of the other
            per_layer, times = "other DAG", "other DAG"
        print(f"| {net} | {image} | {len(ours['layers'])} / {len(theirs['layers'])} | {per_layer} | "
              f"{times} | {'equal' if ow == tw else f'{tw:.0f} vs {ow:.0f}'} | "
              f"{'equal' if os_ == ts else f'{ts:.0f} vs {os_:.0f}'} | {u_flat:.4f} | {u_ratio:.3f} | "
              f"{ob['meta'].get('blocks', len(ob['layers']))} / {tb['meta'].get('blocks')} | {bw}, {bs} |")
    if others:
        print()
        print("| network (not built in) | image | torch parameters | imported parameters | "
              "chain layers | blocks | one-batch stash (MiB) |")
        print("|---|---|---|---|---|---|---|")
    for path, net, image in others:
        with open(path[: -len(".onnx")] + ".params") as f:
            torch_params = int(f.read())
        out = os.path.join(tmp, f"{net}-{image}-other.json")
        r = subprocess.run([args.pipeopt, "import", "onnx", path, "--batch", "8", "--out", out,
                            "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            why = r.stderr.strip().split(": ", 2)[-1].split(" (supported")[0]
            print(f"| {net} | {image} | {torch_params} | refused: {why} | | | |")
            continue
        s = json.loads(r.stdout)
        ours = s["meta"]["parameters"]
        bad += int(ours != torch_params)
        print(f"| {net} | {image} | {torch_params} | {ours} | {s['layers']} | "
              f"{s['meta']['blocks']} | {s['stash_bytes'] / 2**20:.1f} |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
