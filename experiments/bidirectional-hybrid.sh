#!/usr/bin/env bash
# MixPipe's W x D hybrid (Zhang et al., DAC 2023, eq. (6)) on 32 GPUs in four servers of
# eight, as the paper's cluster: every approach's best D (W = 32 / D), micro-batch size and
# recomputation under 32 GiB, with the gradient all-reduce at NVLink speed inside a server
# and over 25 Gb/s Ethernet across servers. Writes
# results/bidirectional/hybrid-<model>-<approach>.json.
#   experiments/bidirectional-hybrid.sh [path/to/pipeopt]   (default ./pipeopt.sh)
set -euo pipefail
bin=${1:-./pipeopt.sh}
out=results/bidirectional
mkdir -p "$out"
for spec in bert48:512 gpt24:256; do
    model=${spec%%:*}
    mini=${spec##*:}
    for approach in gpipe dapple gems chimera mixpipe; do
        "$bin" sync --instance "instances/$model-b8.json" --hybrid --gpus 32 --stages 16 \
            --mini-batch "$mini" --memory 32GiB --allreduce-bandwidth 150GB/s \
            --server-gpus 8 --inter-server-bandwidth 3.125GB/s \
            --micro-batch-sizes 1,2,4,8,16 --schedule "$approach" --json \
            > "$out/hybrid-$model-$approach.json.tmp"
        mv "$out/hybrid-$model-$approach.json.tmp" "$out/hybrid-$model-$approach.json"
        echo "$model $approach done" >&2
    done
done
