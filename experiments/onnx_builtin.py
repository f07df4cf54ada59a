#!/usr/bin/env python3
"""The built-in transformers (`bert48`, `gpt24`) against the same shapes exported from
PyTorch and imported by `pipeopt import onnx`, layer by layer.

    pip install torch onnx
    cargo build --profile fastrel --bin pipeopt
    python3 experiments/onnx_builtin.py --out /tmp/builtin --pipeopt target/fastrel/pipeopt \\
        --results results/onnx-builtin.md

Each built-in network is written here in PyTorch as src/nets/transformer.rs describes it
(two of its blocks, its widths, sequence, vocabulary, embeddings and head; random weights,
training mode), exported at opset 20 (so that GELU is one `Gelu` node, as the built-in's
fused GELU), imported with `--batch 8 --granularity block`, and compared with
`pipeopt instance --model NET --batch 8`: its embedding layer, its first two blocks and its
head against the imported layers of the same modules (a block is cut by the importer at its
residual stream: attention and MLP summed here). Weights, stash and the forward and backward
times of the `h100` device model.
"""
import argparse
import json
import os
import subprocess

import torch
import torch.nn as nn

BATCH = 8


class Attention(nn.Module):
    """q, k, v projections, scores, scale, optional causal mask, softmax, dropout, the
    weighted sum, the output projection: the built-in's `attn.*` ops."""

    def __init__(self, d, heads, seq, causal, p=0.1):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)
        self.heads, self.causal = heads, causal
        self.drop = nn.Dropout(p)
        if causal:
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        n, s, d = x.shape
        h = self.heads

        def split(t):
            return t.view(n, s, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / (d // h) ** 0.5
        if self.causal:
            scores = scores.masked_fill(self.mask[:, :, :s, :s] == 0, float("-inf"))
        p = self.drop(scores.softmax(-1))
        return self.out((p @ v).transpose(1, 2).reshape(n, s, d))


class Block(nn.Module):
    def __init__(self, d, heads, ffn, seq, pre_ln, causal, p=0.1):
        super().__init__()
        self.pre_ln = pre_ln
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, seq, causal, p)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.gelu = nn.GELU()
        self.drop1, self.drop2 = nn.Dropout(p), nn.Dropout(p)

    def forward(self, x):
        if self.pre_ln:
            r = x + self.drop1(self.attn(self.ln1(x)))
            return r + self.drop2(self.fc2(self.gelu(self.fc1(self.ln2(r)))))
        r = self.ln1(x + self.drop1(self.attn(x)))
        return self.ln2(r + self.drop2(self.fc2(self.gelu(self.fc1(r)))))


class Net(nn.Module):
    """The built-in network's embedding, `layers` blocks and head."""

    def __init__(self, layers, d, heads, ffn, seq, vocab, pre_ln, causal, p=0.1):
        super().__init__()
        self.pre_ln = pre_ln
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        if not pre_ln:
            self.token_type = nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(Block(d, heads, ffn, seq, pre_ln, causal, p) for _ in range(layers))
        if pre_ln:
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
        else:
            self.dense, self.gelu, self.ln_t = nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d)
            self.decoder = nn.Linear(d, vocab)

    def forward(self, ids):
        s = ids.size(1)
        x = self.tok(ids) + self.pos(torch.arange(s, device=ids.device))
        if not self.pre_ln:
            x = self.ln(x + self.token_type(torch.zeros(s, dtype=torch.long, device=ids.device)))
        x = self.drop(x)
        for b in self.h:
            x = b(x)
        if self.pre_ln:
            return self.lm_head(self.ln_f(x))
        return self.decoder(self.ln_t(self.gelu(self.dense(x))))


# The built-in networks' sizes (src/nets/transformer.rs).
NETS = {
    "gpt24": dict(d=2048, heads=16, ffn=8192, seq=1024, vocab=50257, pre_ln=True, causal=True),
    "bert48": dict(d=1024, heads=16, ffn=4096, seq=512, vocab=30522, pre_ln=False, causal=False),
}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {r.stderr}")
    return r


def module(layers, prefix):
    """The imported layers of module `prefix` (`h.0`: the block's attention and MLP)."""
    return [l for l in layers if l["name"] == prefix or l["name"].startswith(prefix + ".")]


def compare(name, out, pipeopt):
    cfg = NETS[name]
    torch.manual_seed(0)
    model = Net(2, **cfg).train()
    path = os.path.join(out, f"{name}-2.onnx")
    if not os.path.exists(path):
        ids = torch.randint(0, cfg["vocab"], (1, cfg["seq"]))
        torch.onnx.export(model, (ids,), path, dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=20, input_names=["input_ids"], output_names=["y"],
                          dynamic_axes={"input_ids": {0: "batch"}, "y": {0: "batch"}})
    imported = os.path.join(out, f"{name}-2-block.json")
    run([pipeopt, "import", "onnx", path, "--batch", str(BATCH), "--granularity", "block",
         "--out", imported])
    builtin = os.path.join(out, f"{name}-builtin.json")
    run([pipeopt, "instance", "--model", name, "--batch", str(BATCH), "--out", builtin])
    imp = json.load(open(imported))["layers"]
    bi = {l["name"]: l for l in json.load(open(builtin))["layers"]}
    names = [l["name"] for l in imp]
    # Imported layers by module: the embedding is everything before the first block, the
    # head everything after the last.
    first = next(i for i, n in enumerate(names) if n.startswith("h.0"))
    last = max(i for i, n in enumerate(names) if n.startswith("h.1"))
    groups = [("embedding", imp[:first]), ("layer0", module(imp, "h.0")),
              ("layer1", module(imp, "h.1")), ("head", imp[last + 1:])]
    rows = []
    for builtin_name, sel in groups:
        b = bi[builtin_name]
        s = {k: sum(l.get(k, 0.0) for l in sel) for k in ("weights", "stash", "fwd", "bwd")}
        rows.append(dict(net=name, layer=builtin_name, imported=[l["name"] for l in sel],
                         builtin={k: b.get(k, 0.0) for k in s}, onnx=s))
    return rows


def write(rows, path):
    def mib(x):
        return f"{x / 2**20:,.2f}"

    def ms(x):
        return f"{x * 1e3:.3f}"

    lines = ["| network | built-in layer | imported layers | weights (MiB) | stash (MiB) | fwd (ms) | bwd (ms) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        b, o = r["builtin"], r["onnx"]
        cell = lambda k, f: f"{f(b[k])} / {f(o[k])}" + ("" if abs(b[k] - o[k]) <= 1e-9 * max(b[k], 1) else " *")
        lines.append(f"| {r['net']} | {r['layer']} | {', '.join(r['imported'])} | {cell('weights', mib)} | "
                     f"{cell('stash', mib)} | {cell('fwd', ms)} | {cell('bwd', ms)} |")
    table = "\n".join(lines) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(HEAD + table + NOTES)
    print(table)


HEAD = """# The built-in transformers against their ONNX exports

`experiments/onnx_builtin.py` writes `bert48` and `gpt24` (src/nets/transformer.rs) in
PyTorch with two of their blocks, exports them for training at opset 20, imports them at
block granularity (batch 8, `h100` device model) and compares each layer of
`pipeopt instance --model NET --batch 8` with the imported layers of the same module
(each cell: built-in / imported; `*` where they differ):

```sh
python3 experiments/onnx_builtin.py --out /tmp/builtin --pipeopt target/fastrel/pipeopt --results results/onnx-builtin.md
```

"""

NOTES = """
- **Weights are equal to the byte** in every layer of both networks: the same parameters
  (GPT's untied head, BERT's token-type table of 2 rows, its MLM transform and decoder).
- **Stashes are equal to the byte** but in `gpt24`'s blocks, where the import keeps 1 MiB
  more per block (0.05%): the causal mask, which the export computes as a comparison of a
  buffer (`mask == 0`, 1024 x 1024 booleans, once for the batch) and `masked_fill` keeps
  for its backward, where the built-in's fused attention applies causality inside its
  kernel and keeps no mask.
- **Times differ where the ops differ.** The built-in blocks cost attention as one fused op
  (its products at the matrix rate, its softmax and dropout one pass each); the export writes
  it out (scores product, scale, mask, softmax, dropout, weighted sum, the heads' transpose
  and contiguous copy), each op a pass over memory on the device model's roofline: the
  imported blocks are 12-13% longer forward and 12-16% longer backward. The heads agree to
  within 0.2% forward and 1.5% backward, `gpt24`'s embedding exactly, `bert48`'s within
  8% forward and 19% backward (its token-type and position adds and its layer norm are
  separate ops in the file, each a pass over the `512 x 1024` activations).
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pipeopt", default="target/fastrel/pipeopt")
    ap.add_argument("--results")
    ap.add_argument("nets", nargs="*", default=list(NETS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = [r for n in a.nets for r in compare(n, a.out, a.pipeopt)]
    json.dump(rows, open(os.path.join(a.out, "rows.json"), "w"), indent=1)
    write(rows, a.results)


if __name__ == "__main__":
    main()
