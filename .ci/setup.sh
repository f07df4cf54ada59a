#!/usr/bin/env bash
# Installs what a fresh machine lacks to build pipeopt, then returns. Idempotent and quiet
# when everything is there. Needs: cargo (Rust toolchain); for the HiGHS solver (built from
# source by highs-sys): cmake, a C++ compiler, and clang/libclang-dev for bindgen.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v clang >/dev/null 2>&1 || need+=(clang)
if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 && ! ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 \
   && ! ls /usr/lib/aarch64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi
# Fonts for the PNG figures (SVG needs none); without any, PNGs would have no text.
if ! ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 \
   && ! fc-list 2>/dev/null | grep -q .; then
  need+=(fonts-dejavu-core)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: no Rust toolchain (cargo) found; install one with rustup (https://rustup.rs)" >&2
    exit 1
  fi
fi
