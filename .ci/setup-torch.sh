#!/usr/bin/env bash
# Puts libtorch (PyTorch 2.11, CPU+CUDA build from PyPI) in .libtorch/ at the repository root
# and exports LIBTORCH for the `torch` cargo feature (tch 0.24 / torch-sys). Idempotent: does
# nothing when .libtorch/lib/libtorch.so is already there. Meant to be sourced:
#   source .ci/setup-torch.sh      # then: cargo test --features torch --lib exec::
# Environment:
#   TORCH_WHEEL=/path/to/torch-2.11.0-*.whl   use this wheel instead of downloading it
#   PIPEOPT_LINK_CUDA=1   (set by GPU builds, not here) link libtorch_cuda into the binary so
#                         `--device cuda` works; CPU builds leave it unset and need no nvidia libs.
_pipeopt_torch_setup() {
  local root dest ver whl tmp
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  dest="$root/.libtorch"
  ver="2.11.0"
  if [ ! -f "$dest/lib/libtorch.so" ]; then
    whl="${TORCH_WHEEL:-}"
    if [ -z "$whl" ]; then
      mkdir -p "$root/.whl"
      whl="$(ls "$root"/.whl/torch-$ver-*.whl 2>/dev/null | head -n1 || true)"
      if [ -z "$whl" ]; then
        echo "setup-torch: downloading torch==$ver wheel (~530 MB)" >&2
        python3 -m pip download "torch==$ver" --no-deps --python-version 3.11 \
          --only-binary=:all: --platform manylinux_2_28_x86_64 -d "$root/.whl" >&2 || return 1
        whl="$(ls "$root"/.whl/torch-$ver-*.whl | head -n1)"
      fi
    fi
    echo "setup-torch: unpacking torch/lib and torch/include from $whl" >&2
    tmp="$(mktemp -d "$root/.libtorch.tmp.XXXXXX")"
    python3 - "$whl" "$tmp" <<'PY' || { rm -rf "$tmp"; return 1; }
import sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith(("torch/lib/", "torch/include/"))]
    z.extractall(out, names)
PY
    rm -rf "$dest"
    mv "$tmp/torch" "$dest"
    rm -rf "$tmp"
  fi
  # libtorch_cpu.so of the PyPI (CUDA 13) wheel needs libcudart.so.13 and libcupti.so.13 even
  # on the CPU (they load without a GPU). torch 2.11 pins them through cuda-toolkit==13.0.2:
  # nvidia-cuda-runtime 13.0.96 and nvidia-cuda-cupti 13.0.85 (PyPI, ~13 MB together).
  if [ ! -f "$dest/lib/libcudart.so.13" ] || [ ! -f "$dest/lib/libcupti.so.13" ]; then
    mkdir -p "$root/.whl"
    if ! ls "$root"/.whl/nvidia_cuda_runtime-13.0.96-*.whl "$root"/.whl/nvidia_cuda_cupti-13.0.85-*.whl >/dev/null 2>&1; then
      echo "setup-torch: downloading nvidia-cuda-runtime and nvidia-cuda-cupti (~13 MB)" >&2
      python3 -m pip download "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-cupti==13.0.85" --no-deps \
        --python-version 3.11 --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$root/.whl" >&2 || return 1
    fi
    python3 - "$dest/lib" "$root"/.whl/nvidia_cuda_runtime-13.0.96-*.whl "$root"/.whl/nvidia_cuda_cupti-13.0.85-*.whl <<'PY' || return 1
import os, sys, zipfile
out = sys.argv[1]
for whl in sys.argv[2:]:
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            base = os.path.basename(n)
            if base in ("libcudart.so.13", "libcupti.so.13"):
                with z.open(n) as src, open(os.path.join(out, base), "wb") as dst:
                    dst.write(src.read())
PY
  fi
  export LIBTORCH="$dest"
  # torch-sys checks the libtorch version against the one tch was written for; 2.11 is it
  # for tch 0.24, so no LIBTORCH_BYPASS_VERSION_CHECK is needed.
  echo "LIBTORCH=$LIBTORCH"
}
_pipeopt_torch_setup
