#!/usr/bin/env bash
# Runs pipeopt's libtorch parts on a GPU machine that has PyTorch 2.11 but no Rust toolchain
# (the `device` tool of this project): a binary built here with the torch feature travels as
# .gpu/pipeopt.xz, and this script unpacks it, points it at the machine's own libtorch, and
# runs one part. Build and pack it first (on the build machine):
#   source .ci/setup-torch.sh && PIPEOPT_LINK_CUDA=1 cargo build --release --features torch
#   mkdir -p .gpu && strip -o .gpu/pipeopt target/release/pipeopt && xz -T2 -6 -f .gpu/pipeopt
# Parts (first argument):
#   profile        the five networks at image 1000, batch 8, fp32 -> $OUT/profiles/
#   profile-op     the four networks of the memory grid at op level (every op timed,
#                  BACK_TO_BACK calls per repetition, default 4) -> $OUT/profiles-op/
#   smoke          a small profile (does the binary find CUDA?)
#   execute-smoke  one PipeDream plan of the measured ResNet-50 run by the executor
#   plans          plans of every algorithm for the measured ResNet-50 (P = 4, two memories)
#   execute DIR    every plan DIR/*.plan.json with --network resnet50 --image 1000 --batch 8
#                  -> $OUT/execute/<plan>.json (the executor's report)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu}
BIN=.gpu/pipeopt
if [ ! -x "$BIN" ] || [ .gpu/pipeopt.xz -nt "$BIN" ]; then
  python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.gpu/pipeopt.xz'), open('$BIN', 'wb'))"
  chmod +x "$BIN"
fi
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB:${LD_LIBRARY_PATH:-}"
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
# The files' device tag: the GPU's model (h100, h200, a100...), or TAG=... to choose it.
TAG=${TAG:-$(echo "$NAME" | grep -oiE '[abhlv][0-9]{2,3}s?' | head -n1 | tr 'A-Z' 'a-z' || true)}
TAG=${TAG:-gpu}
echo "device: $NAME (files tagged -$TAG); torch: $(python3 -c 'import torch; print(torch.__version__)')" >&2

part=${1:-profile}
case "$part" in
  smoke)
    mkdir -p "$OUT/smoke"
    "$BIN" profile --model resnet50 --image 224 --batch 8 --device cuda --device-name "$NAME" \
      --warmup 2 --reps 5 --out "$OUT/smoke/resnet50-224-b8.json"
    ;;
  profile)
    mkdir -p "$OUT/profiles"
    for m in ${MODELS:-resnet50 resnet101 inception_v3 densenet121 vgg16}; do
      echo "== $m" >&2
      "$BIN" profile --model "$m" --image 1000 --batch 8 --device cuda --device-name "$NAME" \
        --warmup "${WARMUP:-3}" --reps "${REPS:-10}" \
        --out "$OUT/profiles/$m-1000-b8-$TAG.json" \
        --report "$OUT/profiles/$m-1000-b8-$TAG.report.json" | tee "$OUT/profiles/$m.txt"
    done
    ;;
  profile-op)
    mkdir -p "$OUT/profiles-op"
    for m in ${MODELS:-resnet50 resnet101 inception_v3 densenet121}; do
      echo "== $m (op level)" >&2
      "$BIN" profile --model "$m" --image 1000 --batch 8 --granularity op --device cuda \
        --device-name "$NAME" --warmup "${WARMUP:-3}" --reps "${REPS:-10}" \
        --back-to-back "${BACK_TO_BACK:-4}" \
        --out "$OUT/profiles-op/$m-1000-b8-op-$TAG.json" \
        --report "$OUT/profiles-op/$m-1000-b8-op-$TAG.report.json" \
        > "$OUT/profiles-op/$m-op.txt"
      tail -n 1 "$OUT/profiles-op/$m-op.txt" >&2
    done
    ;;
  execute-smoke)
    # One PipeDream plan for the measured ResNet-50 (P = 4, 24 GiB), a few periods.
    mkdir -p "$OUT/smoke"
    "$BIN" plan --instance "$OUT/profiles/resnet50-1000-b8-$TAG.json" --processors 4 \
      --memory 24GiB --bandwidth 12GB/s --algorithm pipedream --out "$OUT/smoke/plan.json" \
      > "$OUT/smoke/plan.txt"
    "$BIN" execute "$OUT/smoke/plan.json" --network resnet50 --image 1000 --batch 8 \
      --device cuda --periods 8 --json > "$OUT/smoke/execute.json"
    ;;
  plans)
    # Plans of every algorithm that yields a pattern for the measured ResNet-50, P = 4,
    # 12 GB/s, at two memory limits; the MILPs with a time limit, all in parallel.
    inst="$OUT/profiles/resnet50-1000-b8-$TAG.json"
    mkdir -p "$OUT/plans"
    for m in ${MEMORIES:-16GiB 10GiB}; do
      for a in ${ALGORITHMS:-pipedream madpipe contiguous-opt ilp}; do
        extra=()
        case "$a" in
          pipedream) ;;
          ilp) extra=(--coarsen "${COARSEN:-8}" --time-limit "${TIME_LIMIT:-60s}") ;;
          *) extra=(--time-limit "${TIME_LIMIT:-60s}") ;;
        esac
        "$BIN" plan --instance "$inst" --processors 4 --memory "$m" --bandwidth 12GB/s \
          --algorithm "$a" "${extra[@]}" --out "$OUT/plans/$a-$m.plan.json" --json \
          > "$OUT/plans/$a-$m.report.json" &
      done
    done
    wait
    ;;
  execute)
    dir=${2:?execute needs the directory of plans}
    mkdir -p "$OUT/execute"
    for plan in "$dir"/*.plan.json; do
      name=$(basename "$plan" .plan.json)
      echo "== $name" >&2
      "$BIN" execute "$plan" --network resnet50 --image 1000 --batch 8 --device cuda \
        --periods "${PERIODS:-30}" --json > "$OUT/execute/$name.json" \
        || echo "$name: exit $?" >&2
    done
    ;;
  *)
    echo "unknown part $part (profile, profile-op, smoke, execute-smoke, plans, execute DIR)" >&2
    exit 2
    ;;
esac
