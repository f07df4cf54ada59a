#!/usr/bin/env python3
"""Exports transformers (random weights) to ONNX for `pipeopt import onnx`, and imports them.

    python3 experiments/onnx_transformers.py --out /tmp/onnx-tf [--pipeopt target/release/pipeopt]

Models, each written as MODEL.onnx beside MODEL.params (torch's parameter count):
- gpt2: GPT-2 small written as nanoGPT writes it (12 pre-LN blocks, width 768, 12 heads,
  vocabulary 50257, 1024 positions, sequence 1024, fused q/k/v projection split three
  ways, causal mask `masked_fill` from a `tril` buffer, GELU, dropout 0.1, the head tied
  to the token embedding);
- gpt2-untied: the same with an untied head (torch's count then equals the import's);
- bert: 12 BERT layers as Hugging Face writes them (separate q, k, v projections, post-LN,
  GELU) on a sequence of vectors [batch, 512, 768];
- llama: a Llama-style decoder (4 blocks, width 512, 8 heads, SwiGLU 1376, vocabulary
  32000, sequence 1024): RMSNorm, rotary embeddings computed from the positions,
  `scaled_dot_product_attention(is_causal=True)`, no biases, no dropout;
- torch-encoder: torch.nn.TransformerEncoder (12 post-LN layers, width 768, 12 heads,
  batch first) on the same input: nn.MultiheadAttention moves the batch axis (sequence
  first, the batch merged with the heads), which pipeopt refuses, and the row says so.
Each is exported in training mode with the TorchScript exporter (dynamo=False,
do_constant_folding=False, opset 17: LayerNormalization; GELU as Erf), the batch axis
dynamic. Then `pipeopt import onnx FILE --batch 8` at both granularities: layers, weights
against 4 x torch's count, import wall time. Files are 500 MB: do not commit them.

Needs torch and onnx (pip install torch onnx).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads, n_pos, p):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.heads = heads
        self.attn_dropout = nn.Dropout(p)
        self.resid_dropout = nn.Dropout(p)
        self.register_buffer(
            "bias", torch.tril(torch.ones(n_pos, n_pos)).view(1, 1, n_pos, n_pos)
        )

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, d, heads, n_pos, p):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, n_pos, p)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(
            nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class BertLayer(nn.Module):
    """A BERT layer as Hugging Face writes it: q, k, v projections, post-LN, GELU."""

    def __init__(self, d=768, heads=12, ff=3072, p=0.1):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.heads = heads
        self.attn_dropout = nn.Dropout(p)
        self.dense = nn.Linear(d, d)
        self.drop1 = nn.Dropout(p)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d), nn.Dropout(p))
        self.ln2 = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x):
        b, t, c = x.size()
        split = lambda y: y.view(b, t, self.heads, c // self.heads).permute(0, 2, 1, 3)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads)
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).permute(0, 2, 1, 3).contiguous().view(b, t, c)
        x = self.ln1(x + self.drop1(self.dense(y)))
        return self.ln2(x + self.ff(x))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaBlock(nn.Module):
    """A Llama block as Hugging Face writes it: RMSNorm, rotary embeddings computed from
    the positions, causal scaled dot-product attention, SwiGLU; no biases, no dropout."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.input_layernorm = RMSNorm(d)
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d)
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)
        dh = d // heads
        self.register_buffer(
            "inv_freq", 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh)), persistent=False
        )

    def forward(self, x):
        b, t, c = x.size()
        h = self.input_layernorm(x)
        split = lambda y: y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = split(self.q_proj(h)), split(self.k_proj(h)), split(self.v_proj(h))
        pos = torch.arange(t, device=x.device).float()
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, layers=4, d=512, heads=8, ff=1376, vocab=32000):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads, ff) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


class GPT(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=50257, n_pos=1024, p=0.1, tied=True):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(n_pos, d)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(Block(d, heads, n_pos, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        t = ids.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=ids.device)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def export(model, x, path, name):
    torch.onnx.export(
        model.train(),
        (x,),
        path,
        dynamo=False,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        opset_version=17,
        input_names=[name],
        output_names=["y"],
        dynamic_axes={name: {0: "batch"}, "y": {0: "batch"}},
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--pipeopt", default="target/release/pipeopt")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument(
        "models",
        nargs="*",
        default=["gpt2", "gpt2-untied", "bert", "llama", "torch-encoder"],
    )
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    rows = []
    for m in a.models:
        if m.startswith("gpt2"):
            model = GPT(tied=(m == "gpt2"))
            x, name = torch.randint(0, 50257, (1, a.seq)), "input_ids"
        elif m == "llama":
            model = Llama()
            x, name = torch.randint(0, 32000, (1, a.seq)), "input_ids"
        elif m == "bert":
            model = nn.Sequential(*(BertLayer() for _ in range(12)))
            x, name = torch.randn(1, 512, 768), "hidden"
        else:
            layer = nn.TransformerEncoderLayer(768, 12, 3072, 0.1, batch_first=True)
            model = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            x, name = torch.randn(1, 512, 768), "hidden"
        params = sum(p.numel() for p in model.parameters())
        path = os.path.join(a.out, f"{m}.onnx")
        t0 = time.time()
        export(model, x, path, name)
        exported = time.time() - t0
        with open(os.path.join(a.out, f"{m}.params"), "w") as f:
            f.write(f"{params}\n")
        for gran in ["block", "op"]:
            cmd = [a.pipeopt, "import", "onnx", path, "--batch", "8",
                   "--granularity", gran, "--json",
                   "--out", os.path.join(a.out, f"{m}-b8-{gran}.json")]
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            took = time.time() - t0
            if r.returncode != 0:
                rows.append({"model": m, "granularity": gran, "error": r.stderr.strip()})
                print(f"{m} {gran}: exit {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
                continue
            rep = json.loads(r.stdout)
            inst = json.load(open(os.path.join(a.out, f"{m}-b8-{gran}.json")))
            rows.append({
                "model": m, "granularity": gran, "layers": len(inst["layers"]),
                "torch_params": params, "imported_params": rep["meta"]["parameters"],
                "weights_bytes": rep["weights_bytes"], "import_s": round(took, 2),
                "export_s": round(exported, 1),
                "stash_bytes": sum(l.get("stash") or 0 for l in inst["layers"]),
                "onnx_mb": round(os.path.getsize(path) / 1e6, 1),
            })
            print(json.dumps(rows[-1]))
    json.dump(rows, open(os.path.join(a.out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
