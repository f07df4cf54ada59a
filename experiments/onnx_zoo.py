#!/usr/bin/env python3
"""A zoo of today's networks, exported to ONNX, imported by pipeopt and planned.

    pip install torch torchvision==0.26.0 onnx   # torchvision matching torch 2.11
    cargo build --profile fastrel --bin pipeopt
    python3 experiments/onnx_zoo.py --out /tmp/zoo --pipeopt target/fastrel/pipeopt [MODEL ...]

Per model (random weights, training mode), in stages that are each kept in OUT and not
redone (delete OUT/MODEL.* to redo one):
1. export: MODEL.onnx with the settings of experiments/onnx_transformers.py (TorchScript
   exporter `dynamo=False`, `training=TrainingMode.TRAINING`, `do_constant_folding=False`,
   opset 17, the batch axis dynamic), and MODEL.params (torch's parameter count);
2. import: `pipeopt import onnx MODEL.onnx --batch 8` at block and op granularity (the
   refusal message when refused), with its wall time;
3. plan: each imported instance with `--algorithm madpipe` and `--algorithm best
   --time-limit 30s` on 4 processors of 16GiB, links of 12GB/s (`--json`);
4. stash: one forward on the CPU at a small batch under
   `torch.autograd.graph.saved_tensors_hooks`, the bytes autograd saves (each storage once),
   scaled to batch 8, against the import's one-batch stash (`pipeopt`'s summary);
then writes results/onnx-zoo.md (--results) from OUT/MODEL.json. Files are 10-1,400 MB:
keep OUT outside the repository.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VISION = [
    "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121", "inception_v3",
    "googlenet", "vgg16", "squeezenet1_0", "mobilenet_v2", "mobilenet_v3_large",
    "efficientnet_b0", "regnet_y_400mf", "shufflenet_v2_x1_0", "convnext_tiny", "vit_b_16",
    "swin_t", "maxvit_t",
]
TRANSFORMERS = ["gpt2", "bert", "llama", "torch-encoder", "gpt2-medium", "llama-32"]
MODELS = VISION + TRANSFORMERS
BATCH = 8


def build(name):
    """The model, its example input (batch 1) and the input's name."""
    import onnx_transformers as tf

    if name in VISION:
        import torchvision

        if name in ("inception_v3", "googlenet"):
            m = getattr(torchvision.models, name)(weights=None, aux_logits=False, init_weights=False)
        else:
            m = torchvision.models.get_model(name, weights=None)
        image = 299 if name == "inception_v3" else 224
        return m, torch.randn(1, 3, image, image), "input"
    if name == "gpt2":
        return tf.GPT(), torch.randint(0, 50257, (1, 1024)), "input_ids"
    if name == "gpt2-medium":
        return tf.GPT(layers=24, d=1024, heads=16), torch.randint(0, 50257, (1, 1024)), "input_ids"
    if name == "llama":
        return tf.Llama(), torch.randint(0, 32000, (1, 1024)), "input_ids"
    if name == "llama-32":
        return tf.Llama(layers=32), torch.randint(0, 32000, (1, 1024)), "input_ids"
    if name == "bert":
        return nn.Sequential(*(tf.BertLayer() for _ in range(12))), torch.randn(1, 512, 768), "hidden"
    if name == "torch-encoder":
        layer = nn.TransformerEncoderLayer(768, 12, 3072, 0.1, batch_first=True)
        return nn.TransformerEncoder(layer, 12, enable_nested_tensor=False), torch.randn(1, 512, 768), "hidden"
    raise SystemExit(f"unknown model {name}; known: {', '.join(MODELS)}")


def export(name, out):
    path = os.path.join(out, f"{name}.onnx")
    if os.path.exists(path) and os.path.exists(path[:-5] + ".params"):
        return path
    import onnx_transformers as tf

    torch.manual_seed(0)
    model, x, iname = build(name)
    t0 = time.time()
    tf.export(model, x, path, iname)
    with open(path[:-5] + ".params", "w") as f:
        f.write(f"{sum(p.numel() for p in model.parameters())}\n")
    print(f"{name}: exported in {time.time() - t0:.0f} s, {os.path.getsize(path) / 1e6:.0f} MB", flush=True)
    return path


def run_import(name, path, out, pipeopt):
    """`pipeopt import onnx` at both granularities: summary, chain layers and wall time, or
    the refusal."""
    res = {}
    for gran in ["block", "op"]:
        inst = os.path.join(out, f"{name}-b{BATCH}-{gran}.json")
        cmd = [pipeopt, "import", "onnx", path, "--batch", str(BATCH), "--granularity", gran,
               "--json", "--out", inst]
        t0 = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        took = time.time() - t0
        if r.returncode != 0:
            res[gran] = {"error": r.stderr.strip(), "exit": r.returncode, "import_s": took}
            continue
        s = json.loads(r.stdout)
        res[gran] = {"instance": inst, "layers": s["layers"], "parameters": s["meta"]["parameters"],
                     "weights_bytes": s["weights_bytes"], "stash_bytes": s["stash_bytes"],
                     "sequential_seconds": s["sequential_seconds"], "import_s": took}
        print(f"{name} {gran}: {s['layers']} layers, {took:.1f} s", flush=True)
    return res


def run_plans(name, imp, pipeopt, best_limit):
    """madpipe and best on each imported instance: 4 processors of 16GiB, 12GB/s."""
    plans = {}
    for gran, r in imp.items():
        if "instance" not in r:
            continue
        for algo, extra in [("madpipe", ["--time-limit", "120s"]),
                            ("best", ["--time-limit", best_limit])]:
            cmd = [pipeopt, "plan", "-i", r["instance"], "-p", "4", "-m", "16GiB", "-b", "12GB/s",
                   "-a", algo, "--json"] + extra
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            took = time.time() - t0
            key = f"{algo}-{gran}"
            if p.returncode != 0 and not p.stdout.strip():
                plans[key] = {"error": p.stderr.strip()[-300:], "seconds": took}
                continue
            d = json.loads(p.stdout)
            plans[key] = {"status": d.get("status"), "period": d.get("period"),
                          "gap": d.get("gap"), "seconds": took,
                          "global_lower_bound": d.get("global_lower_bound")}
            print(f"{name} {key}: {plans[key]}", flush=True)
    return plans


def saved_by_module(model, x):
    """Bytes autograd saves (parameters and buffers left out), each storage the first time
    it is saved, by the innermost module running then ('' for the model's own ops)."""
    skip = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    stack, seen, by = [""], set(), {}
    handles = []

    def enter(name):
        def hook(module, args):
            stack.append(name)
        return hook

    def leave(module, args, output):
        stack.pop()

    for name, mod in model.named_modules():
        if name:
            handles.append(mod.register_forward_pre_hook(enter(name)))
            handles.append(mod.register_forward_hook(leave))

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in skip and ptr not in seen:
            seen.add(ptr)
            by[stack[-1]] = by.get(stack[-1], 0) + st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = model(x)
    del y
    for h in handles:
        h.remove()
    return by


def saved_bytes(model, x):
    """Bytes autograd saves for the backward of one forward of `model` on `x`: each saved
    tensor's storage counted once (views share it), parameters and buffers left out (they
    are weights, not stash)."""
    return sum(saved_by_module(model, x).values())


def run_stash(name, batches):
    """Autograd's saved bytes at the small batches `batches`, extrapolated to BATCH: a line
    through two batches (what does not grow with the batch, such as a causal mask, counted
    once), or scaled from one."""
    torch.manual_seed(0)
    model, x, _ = build(name)
    model.train()
    got = {}
    for b in batches:
        xb = x.repeat(b, *([1] * (x.dim() - 1)))
        xb.requires_grad_(xb.is_floating_point())
        got[b] = saved_bytes(model, xb)
    if len(batches) >= 2:
        b1, b2 = batches[0], batches[1]
        per = (got[b2] - got[b1]) / (b2 - b1)
        fixed = got[b1] - per * b1
        at = fixed + per * BATCH
    else:
        b1 = batches[0]
        at = got[b1] * BATCH / b1
    print(f"{name}: autograd saves {got} -> {at / 2**30:.3f} GiB at batch {BATCH}", flush=True)
    return {"measured": got, "batch8_bytes": at}


def load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


INPUTS = {
    "inception_v3": "image 299", "gpt2": "1,024 tokens", "gpt2-medium": "1,024 tokens",
    "llama": "1,024 tokens", "llama-32": "1,024 tokens", "bert": "512 x 768",
    "torch-encoder": "512 x 768",
}
NAMES = {
    "gpt2": "GPT-2 small (head tied)", "gpt2-medium": "GPT-2 medium (24 x 1024, tied)",
    "bert": "BERT-base (12 layers)", "llama": "Llama-style (4 blocks, 512)",
    "llama-32": "Llama-style (32 blocks, 512)", "torch-encoder": "nn.TransformerEncoder (12 x 768)",
}
# Tied weights: GPT-2's head reads the token embedding again (docs/onnx.md).
TIED = {"gpt2": 50257 * 768, "gpt2-medium": 50257 * 1024}


def fmt_ms(p):
    if not p or p.get("period") is None:
        return (p or {}).get("status") or "-"
    return f"{p['period'] * 1e3:.2f}"


def write_results(out, path, pipeopt):
    """results/onnx-zoo.md from OUT/MODEL.json."""
    recs = [load(os.path.join(out, f"{m}.json"), None) for m in MODELS]
    recs = [r for r in recs if r]
    rows, refused = [], []
    for r in recs:
        m = r["model"]
        imp = r.get("import", {})
        b, o = imp.get("block", {}), imp.get("op", {})
        name = NAMES.get(m, m)
        if "error" in o or "error" in b or not o:
            err = (o or b).get("error", r.get("export_error", "not run"))
            refused.append((name, err.split(": ", 1)[-1] if err.startswith("error") else err))
            continue
        params = r["torch_params"]
        w = o["weights_bytes"]
        tied = TIED.get(m, 0)
        if w == 4 * params:
            wtxt = "= 4 x params"
        elif w == 4 * (params + tied):
            wtxt = f"4 x (params + {tied:,} tied)"
        else:
            wtxt = f"{w / 4 - params:+,.0f} params"
        pl = r.get("plans", {})
        best = [pl.get(f"best-{g}") or {} for g in ("block", "op")]
        gap = " / ".join(f"{x['gap'] * 100:.1f}%" if x.get("gap") is not None else "-" for x in best)
        ag = r.get("autograd", {})
        stash = o["stash_bytes"]
        if "batch8_bytes" in ag:
            atxt = f"{ag['batch8_bytes'] / 2**30:.3f}"
            ratio = f"{stash / ag['batch8_bytes']:.2f}"
        else:
            atxt, ratio = "-", "-"
        rows.append(
            f"| {name} | {INPUTS.get(m, 'image 224')} | {params:,} | {wtxt} | "
            f"{b['layers']} / {o['layers']} | {b['import_s']:.1f} / {o['import_s']:.1f} | "
            f"{fmt_ms(pl.get('madpipe-block'))} / {fmt_ms(pl.get('madpipe-op'))} | "
            f"{fmt_ms(best[0])} / {fmt_ms(best[1])} | {gap} | "
            f"{stash / 2**30:.3f} | {atxt} | {ratio} |"
        )
    with open(path, "w") as f:
        f.write(RESULTS_HEAD.format(n=len(rows), total=len(recs)))
        f.write("\n".join(rows) + "\n\n")
        if refused:
            f.write("Refused:\n\n")
            for name, err in refused:
                f.write(f"- **{name}**: `{err[:600]}`\n")
            f.write("\n")
        f.write(RESULTS_NOTES)
    print(f"{path}: {len(rows)} of {len(recs)} models imported")


RESULTS_HEAD = """# A zoo of today's networks, imported from ONNX and planned

`experiments/onnx_zoo.py` exports each network with random weights in training mode
(PyTorch 2.11, torchvision 0.26; TorchScript exporter `dynamo=False`,
`training=TrainingMode.TRAINING`, `do_constant_folding=False`, opset 17, batch axis
dynamic), imports it with `pipeopt import onnx FILE --batch 8` at block and op granularity
(`h100` device model, float32), and plans each instance on 4 processors of 16 GiB with
links of 12 GB/s with `--algorithm madpipe` and `--algorithm best --time-limit 30s`:

```sh
pip install torch torchvision==0.26.0 onnx
cargo build --profile fastrel --bin pipeopt
python3 experiments/onnx_zoo.py --out /tmp/zoo --pipeopt target/fastrel/pipeopt --results results/onnx-zoo.md
```

{n} of {total} networks import. Columns: torch's parameter count; the import's weights
against 4 bytes per parameter; chain layers at block / op granularity; import wall time in
seconds (fastrel build, block / op, on a 2-core machine shared with other builds);
periods in ms (block / op) of madpipe and best, best's gap to its global lower bound; the
one-batch stash of the op-level instance (U(1,L)'s memory rule: overlaps and shared
stashes counted once) against what autograd saves for one forward on the CPU (bytes of
every saved tensor's storage, each storage once, parameters and buffers left out), both
for a batch of 8 in GiB, and their ratio.

| network | input | torch parameters | weights | layers | import (s) | madpipe (ms) | best (ms) | best's gap | stash (GiB) | autograd (GiB) | stash / autograd |
|---|---|---|---|---|---|---|---|---|---|---|---|
"""

RESULTS_NOTES = """- **Imports**: every network of the list, every torchvision family and every transformer.
  Swin-T pads each map to a multiple of its window (`Pad`, by nothing at 224), builds its
  shifted-window mask by index assignment (`ScatterND` on constants, evaluated at import),
  runs attention with the batch merged with its windows (`[N * 64, 49, C]`) and merges
  patches by strided slices; MaxViT-T writes its attention as `Einsum` on 5-d tensors
  (`B G H I D, B G H J D -> B G H I J`), a batched matrix product.
- **Weights** equal 4 bytes per torch parameter for every imported network but the two
  GPT-2s, whose head is tied to the token embedding: pipeopt counts the table again for
  the head (`50,257 x d` parameters), as a pipeline stage holding the head holds its own
  copy. ConvNeXt's layer scale (`[C, 1, 1]` on a `[C, H, W]` map), ViT's class token and
  position tensor, and Swin's and MaxViT's relative position bias tables (`(2w - 1)^2 x
  heads`, gathered into a bias at every pair of a window's positions) count as parameters.
- **Stash against autograd**: equal to within 1% for the ResNets, DenseNet, Inception,
  GoogLeNet, VGG, SqueezeNet, MobileNetV3, RegNet, ShuffleNet and BERT, where the exported
  ops are the ops autograd runs. The others differ for known reasons. MobileNetV2 (0.69):
  torchvision's `Conv2dNormActivation` builds `ReLU6()` not in place, and `hardtanh`'s
  backward reads its input, so autograd keeps the batch norm's output and the ReLU6's;
  ONNX does not say whether an op ran in place, and pipeopt costs `Clip` from 0 as an
  in-place ReLU (its output only; `ReLU`'s backward reads its output, so ReLU networks
  agree either way). EfficientNet-B0 (1.28), ConvNeXt-T, ViT-B/16, Swin-T, MaxViT-T and
  the Llama-style decoders (1.5-1.9): the exporter writes fused kernels out as their math, and pipeopt
  plans the ops in the file: SiLU as `x * sigmoid(x)` keeps two tensors where torch's
  `silu` keeps its input; GELU at opset 17 as `x * 0.5 * (1 + erf(x / sqrt 2))` keeps
  three where `gelu` keeps one; `scaled_dot_product_attention` (Llama) is written as
  scores, softmax and product, keeping the `h x S x S` probabilities, where the fused
  kernel keeps its output and a log-sum-exp per row. GPT-2 (0.91-0.92) and
  `nn.TransformerEncoder` (0.74): on the CPU, `dropout` keeps its mask as floats (4 bytes
  per element; the GPU's fused kernel keeps bytes, as pipeopt counts), which outweighs the
  GELU written out; `nn.MultiheadAttention` also keeps its packed q/k/v projection whole
  through `v`, where the importer copies q, k and v apart (the reshape of a slice to heads
  is not a view). The measurement is the CPU's: on the GPU, dropout masks are a quarter as
  large and attention may use fused kernels.
- **Plans**: at op granularity madpipe and best agree on the CNNs, ViT, Swin and MaxViT to within 1%,
  best's gap to the global bound 0.1-0.7%; at block granularity the blocks are coarser (a
  DenseNet block is a dense block), madpipe is 50% above best on Wide ResNet-50, and
  best's gap reaches 8% (GoogLeNet, Inception-v3).
  The transformers at sequence 1024 are memory-bound on 16 GiB: GPT-2 small's best is 28%
  below madpipe's at block granularity with a 16% gap; GPT-2 medium (45 GiB of stash for
  one batch) has no madpipe plan at block granularity and best's 30 s end with a 49% gap;
  best's op-level runs on the 533- and 1,385-layer chains stop at 30 s without a plan.
- **Import times** (fastrel build; the column above is one run each, the file read after
  the script's other files, so often from the disk rather than the page cache): under 1 s for every CNN but VGG-16's 553 MB file, 2 s
  for GPT-2 small. The file is read through a memory map, its weights as dims only, and its
  SHA-256 is computed beside the import. `cargo bench --profile fastrel --bench
  benches -- onnx_import` imports the two largest five times each at both granularities: GPT-2
  medium (1.5 GB) median 1.9-2.0 s, slowest 3.0 s (target 5 s); the 32-block Llama
  (537 MB) median 2.2-2.4 s, slowest 3.0 s (target 10 s); read from the disk first, GPT-2
  medium takes 4-5 s (the table's column). Reading the file into memory
  first, as before the memory map, took 2.9-3.3 s on a quiet machine (1.2-1.7 s of it
  system time) and up to 8 s on a loaded one.

How the autograd column is measured: each network runs one forward in training mode on
the CPU under `torch.autograd.graph.saved_tensors_hooks`, at batches 2 and 4 for the
images, 1 and 2 for GPT-2 small, BERT, the 4-block Llama and `nn.TransformerEncoder`, and
batch 1 alone for GPT-2 medium and the 32-block Llama (the CPU's memory is shared), then
extrapolated to batch 8 along the line through the two batches (what does not grow with
the batch, such as a causal mask, counted once) or scaled by 8 from one.

"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", default=MODELS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pipeopt", default="target/fastrel/pipeopt")
    ap.add_argument("--stages", default="export,import,plan,stash",
                    help="comma-separated stages to run (each redone: import, plan, stash)")
    ap.add_argument("--best-limit", default="30s")
    ap.add_argument("--threads", type=int, default=1, help="torch's CPU threads (stash stage)")
    ap.add_argument("--results", help="write the Markdown table here (results/onnx-zoo.md)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    stages = set(a.stages.split(","))
    os.makedirs(a.out, exist_ok=True)
    for m in a.models:
        rec_path = os.path.join(a.out, f"{m}.json")
        rec = load(rec_path, {"model": m})
        path = os.path.join(a.out, f"{m}.onnx")
        if "export" in stages:
            try:
                export(m, a.out)
            except Exception as e:
                rec["export_error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
                print(f"{m}: not exported: {rec['export_error']}", flush=True)
        if os.path.exists(path):
            rec["torch_params"] = int(open(path[:-5] + ".params").read())
            rec["onnx_mb"] = os.path.getsize(path) / 1e6
            if "import" in stages:
                rec["import"] = run_import(m, path, a.out, a.pipeopt)
            if "plan" in stages:
                rec["plans"] = run_plans(m, rec.get("import", {}), a.pipeopt, a.best_limit)
        if "stash" in stages:
            # Two batches where memory allows (a line through them: what does not grow with
            # the batch counted once); batch norms need two samples or more.
            batches = [2, 4] if m in VISION else [1] if m in ("gpt2-medium", "llama-32") else [1, 2]
            try:
                rec["autograd"] = run_stash(m, batches)
            except Exception as e:
                rec["autograd"] = {"error": str(e).splitlines()[0]}
        with open(rec_path, "w") as f:
            json.dump(rec, f, indent=1)
    if a.results:
        write_results(a.out, a.results, a.pipeopt)


if __name__ == "__main__":
    main()
