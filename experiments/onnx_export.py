#!/usr/bin/env python3
"""Exports torchvision networks (random weights) to ONNX for `pipeopt import onnx`.

    python3 experiments/onnx_export.py --out /tmp/onnx [--image 1000] [NET ...]

NET is among resnet50, resnet101, inception_v3, densenet121, vgg16 (default: those, the
networks built into pipeopt) or any other torchvision classification model
(resnext50_32x4d, googlenet, mobilenet_v2...). Beside each NET-IMAGE.onnx it writes
NET-IMAGE.params, torch's parameter count, which onnx_agreement.py compares with the
import's. The models
are exported in training mode (TrainingMode.TRAINING), so that Dropout stays in the graph
as in training (in eval mode the exporter removes it), with the TorchScript exporter
(dynamo=False), whose nodes are torchvision's modules in forward order: the default
exporter (dynamo=True) folds every batch norm into its convolution, even in training mode,
and pipeopt refuses such files (docs/onnx.md). Inception-v3 without
its auxiliary head (aux_logits=False), as pipeopt's built-in network. Files are large
(100-550 MB: the weights are in them); do not commit them.

Needs torch, torchvision and onnx (pip install torch torchvision onnx).
`experiments/onnx_agreement.sh` runs this script and compares the imports with
`pipeopt instance --model NET`.
"""
import argparse
import os
import sys

import torch
import torchvision

NETS = ["resnet50", "resnet101", "inception_v3", "densenet121", "vgg16"]


def build(name):
    if name in ("inception_v3", "googlenet"):
        return getattr(torchvision.models, name)(
            weights=None, aux_logits=False, init_weights=False
        )
    return torchvision.models.get_model(name, weights=None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nets", nargs="*", default=NETS)
    ap.add_argument("--out", required=True, help="directory for NET-IMAGE.onnx")
    ap.add_argument("--image", type=int, default=1000)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in args.nets:
        if name not in torchvision.models.list_models(module=torchvision.models):
            sys.exit(f"unknown network {name}; torchvision has "
                     f"{', '.join(torchvision.models.list_models(module=torchvision.models))}")
        model = build(name).train()
        x = torch.randn(1, 3, args.image, args.image)
        path = os.path.join(args.out, f"{name}-{args.image}.onnx")
        try:
            torch.onnx.export(
                model,
                (x,),
                path,
                dynamo=False,
                training=torch.onnx.TrainingMode.TRAINING,
                do_constant_folding=False,
                input_names=["input"],
                output_names=["output"],
                opset_version=17,
            )
        except Exception as e:  # e.g. VGG-16's adaptive pooling 31x31 -> 7x7 at 1000
            failed += 1
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"{name}: not exported: {first}", flush=True)
            continue
        with open(path[: -len(".onnx")] + ".params", "w") as f:
            f.write(f"{sum(p.numel() for p in model.parameters())}\n")
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
