#!/usr/bin/env python3
"""The stash of each imported layer against what autograd saves in the same module.

    python3 experiments/onnx_zoo.py --out /tmp/zoo --stages export,import   # the files and instances
python3 experiments/onnx_stash_layers.py --out /tmp/zoo --results results/onnx-stash-layers.md

Reads the block-level instances `experiments/onnx_zoo.py` imported (`OUT/MODEL-b8-block.json`)
and runs each model once more on the CPU in training mode, at two small batches, under
`torch.autograd.graph.saved_tensors_hooks` with forward hooks on every module: each storage
autograd saves is credited, the first time it is saved, to the innermost module running
then. An imported layer's name is its nodes' common ONNX scope, whose last component is a
torch module path (`layer1.layer1.0` is `layer1.0`; a layer of one node, `/bn1/BatchNorm...`,
is its module `bn1`); each imported layer goes to the deepest such module, and each saved
storage to the deepest compared module running when it is saved (or, outside all of them,
the one entered last: a module shared across the network, such as ResNet's ReLU). Per
module: the imported layers' stash, each layer less what it shares with the one before
(`stash - stash_overlap` of the previous layer: what it adds along the chain), against
autograd's bytes extrapolated to batch 8 along the line through the two batches.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_zoo as zoo  # noqa: E402

BATCH = zoo.BATCH


def module_of(layer_name, modules):
    """The torch module path of an op-level layer (its ONNX node's scope, module doc)."""
    node = layer_name[layer_name.find("/"):].split(": ")[0] if "/" in layer_name else ""
    path = ""
    for comp in [c for c in node.split("/") if c][:-1]:
        full = comp if comp.startswith(path + ".") or not path else f"{path}.{comp}"
        if full not in modules:
            break
        path = full
    return path


def unit(path):
    """The unit a module path is compared in: down to its first component with a digit
    (`layer1`, `h.0`, `Mixed_7c`, `inception3b`), and the index after it if there is one
    (`layer1.0`, `features.3.0`); a path without digits, its first component. A tensor read
    by several branches of a unit is saved first by one branch in torch's order and kept
    first by another in the chain's: units are whole blocks, not branches."""
    parts = path.split(".") if path else []
    for i, p in enumerate(parts):
        if any(c.isdigit() for c in p):
            end = i + 2 if i + 1 < len(parts) and parts[i + 1].isdigit() else i + 1
            return ".".join(parts[:end])
    return ".".join(parts[:1])


def compare(name, out, batches):
    inst = json.load(open(os.path.join(out, f"{name}-b8-op.json")))
    torch.manual_seed(0)
    model, x, _ = zoo.build(name)
    model.train()
    modules = {n for n, _ in model.named_modules()}
    layers = inst["layers"]
    # What each op-level layer adds along the chain: its stash less what it shares with the
    # layer before, and less each tensor it shares with an earlier layer further back
    # (`stash_shared`, counted at its first layer).
    marginal = []
    for i, l in enumerate(layers):
        default = layers[i - 1]["out"] if i > 0 else inst["input"]
        prev_overlap = layers[i - 1].get("stash_overlap", 0.0) if i > 0 else 0.0
        marginal.append(l.get("stash", default) - prev_overlap)
    for shared in inst.get("stash_shared", []):
        marginal[shared["last"] - 1] -= shared["bytes"]
    imported = {}
    for l, m in zip(layers, marginal):
        u = unit(module_of(l["name"], modules))
        imported[u] = imported.get(u, 0.0) + m
    measured = {}
    for b in batches:
        xb = x.repeat(b, *([1] * (x.dim() - 1)))
        xb.requires_grad_(xb.is_floating_point())
        got = {}
        for path, n in zoo.saved_by_module(model, xb).items():
            got[unit(path)] = got.get(unit(path), 0) + n
        measured[b] = got
    rows = []
    for m in list(imported) + [m for m in measured[batches[0]] if m not in imported]:
        if len(batches) >= 2:
            b1, b2 = batches[0], batches[1]
            v1, v2 = measured[b1].get(m, 0), measured[b2].get(m, 0)
            at = v1 + (v2 - v1) / (b2 - b1) * (BATCH - b1)
        else:
            at = measured[batches[0]].get(m, 0) * BATCH / batches[0]
        rows.append(dict(module=m or "(model)", imported=imported.get(m, 0.0), autograd=at))
    return rows


def summary(name, rows):
    """A model's line: units compared, within 1%, the furthest unit of 1 MiB or more, and the
    largest gap between the two running sums in chain order (a tensor credited to the
    module before or after its own, at a module boundary, moves one unit's figure but not
    the running sums), as a share of the total."""
    within = [r for r in rows if abs(r["imported"] - r["autograd"]) <= 0.01 * r["autograd"]]
    big = [r for r in rows if max(r["imported"], r["autograd"]) >= 2**20]
    worst = max(big, key=lambda r: abs((r["imported"] + 1) / (r["autograd"] + 1) - 1), default=None)
    w = "-" if worst is None else (
        f"`{worst['module']}`: {worst['imported'] / 2**20:,.1f} / {worst['autograd'] / 2**20:,.1f}")
    ci = ca = gap = 0.0
    for r in rows:
        ci, ca = ci + r["imported"], ca + r["autograd"]
        gap = max(gap, abs(ci - ca))
    total_i, total_a = ci, ca
    return (f"| {zoo.NAMES.get(name, name)} | {len(rows)} | {len(within)} | {w} | "
            f"{100 * gap / max(total_a, 1):.1f}% | {total_i / max(total_a, 1):.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=zoo.MODELS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--results")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--table-only", action="store_true",
                    help="write --results from OUT/MODEL-stash-layers.json without running")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    models = [m for m in a.models if os.path.exists(os.path.join(a.out, f"{m}-b8-op.json"))]
    if a.table_only:
        models = [m for m in models if os.path.exists(os.path.join(a.out, f"{m}-stash-layers.json"))]
    elif len(models) > 1:
        # One process per model: the large ones need up to 10 GB, which one process running
        # them all does not give back in between.
        for m in models:
            subprocess.run([sys.executable, __file__, "--out", a.out, "--threads", str(a.threads), m],
                           check=True)
    else:
        for m in models:
            batches = [2, 4] if m in zoo.VISION else [1] if m in ("gpt2-medium", "llama-32") else [1, 2]
            rows = compare(m, a.out, batches)
            json.dump(rows, open(os.path.join(a.out, f"{m}-stash-layers.json"), "w"), indent=1)
            print(summary(m, rows), flush=True)
    if a.results:
        lines = [summary(m, json.load(open(os.path.join(a.out, f"{m}-stash-layers.json"))))
                 for m in models]
        with open(a.results, "w") as f:
            f.write(HEAD)
            f.write("| network | units | within 1% | furthest unit (imported / autograd, MiB) | "
                    "largest gap of the running sums | total ratio |\n|---|---|---|---|---|---|\n")
            f.write("\n".join(lines) + "\n")
            f.write(NOTES)


HEAD = """# Stash per layer against autograd

`experiments/onnx_stash_layers.py` compares the stash of the op-level instances of
results/onnx-zoo.md (batch 8), unit by unit, with what autograd saves in the same torch
modules on the CPU (at two small batches, extrapolated to 8): each op's layer goes to the
module of its ONNX node's scope, each storage autograd saves to the module running when it
is first saved (module doc of the script). Columns: units compared, those within 1%, the
furthest of those of 1 MiB or more, the largest difference between the two running sums in
chain order as a share of the total, and the totals' ratio (results/onnx-zoo.md's).

```sh
python3 experiments/onnx_zoo.py --out /tmp/zoo --stages export,import   # the files and instances
python3 experiments/onnx_stash_layers.py --out /tmp/zoo --results results/onnx-stash-layers.md
```

"""

NOTES = """
Units: each model's blocks (a residual block, an Inception module, a transformer block, a
stage of DenseNet or RegNet) and the modules outside them. The stashes agree where the
exported ops are the ops autograd runs, and differ for four reasons, each measured:

- **A tensor at a module boundary** is counted by pipeopt in the layer that keeps it first
  along the chain and by autograd in the module whose op saves it: ResNet's in-place ReLU
  after `bn1` writes into the batch norm's output (24.5 MiB in `bn1` here, in `relu`
  there), a pooled map is kept by the classifier's first op (VGG, SqueezeNet, MobileNetV3),
  ShuffleNet's channel split is saved by the block after it. One unit's figure moves, not
  the running sums: within 3.7% of the total for the CNNs of ratio 1.00, whose totals agree.
- **ReLU6 not in place** (MobileNetV2, 0.69): torchvision builds `ReLU6()` without
  `inplace`, and `hardtanh`'s backward reads its input, so autograd keeps the batch norm's
  output and the ReLU6's; ONNX does not say whether an op ran in place, and pipeopt costs
  `Clip` from 0 as an in-place ReLU.
- **Fused kernels written out** (EfficientNet-B0, ConvNeXt-T, ViT-B/16, Swin-T,
  MaxViT-T, the Llama-style decoders: 1.3-1.9 in every block): the exporter writes SiLU as
  `x * sigmoid(x)` (two tensors kept where torch's `silu` keeps one), GELU at opset 17 as
  its `erf` formula (three where `gelu` keeps one), `scaled_dot_product_attention` as
  scores, softmax and product (the `h x S x S` probabilities kept); pipeopt plans the ops
  in the file.
- **The CPU's dropout masks** (GPT-2, `nn.TransformerEncoder`: 0.74-0.92): on the CPU
  `dropout` keeps its mask as 4-byte floats, where the GPU's fused kernel keeps bytes, as
  pipeopt counts (VGG's classifier: 0.03 MiB here, 0.13 there, 4 times); and
  `nn.MultiheadAttention` keeps its packed q/k/v projection whole, where the importer copies
  q, k and v apart. BERT's blocks agree within 1.2%.
"""

if __name__ == "__main__":
    main()
