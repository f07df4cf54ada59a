#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints and every test, and
# the time each step took.
# Usage: ./test.sh            (what CI runs)
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

# The suite's own time: every step's, and the tests each test step ran, printed at the end
# (also when a step fails).
started=$SECONDS
times=()
report_times() {
  echo "== times (and tests passed)" >&2
  for t in "${times[@]}"; do echo "$t" >&2; done
  echo "$(printf '%6d' $((SECONDS - started))) s  total" >&2
}
trap report_times EXIT
step() { # step LABEL COMMAND...: runs one step and records its time
  local label=$1 t0=$SECONDS
  shift
  echo "== $label" >&2
  "$@"
  times+=("$(printf '%6d' $((SECONDS - t0))) s  $label")
}
tested() { # tested LABEL COMMAND...: a test step, with the count of tests it passed
  local label=$1 t0=$SECONDS log
  shift
  log=$(mktemp)
  echo "== $label" >&2
  "$@" 2>&1 | tee "$log"
  local passed
  passed=$(grep -o '[0-9]* passed' "$log" | awk '{s += $1} END {print s + 0}')
  rm -f "$log"
  times+=("$(printf '%6d' $((SECONDS - t0))) s  $label: $passed tests passed")
}

# The one ignored test that needs python3 with torch rather than time (every exported
# schedule run by PyTorch's pipeline runtime, experiments/torch_pipelining.py).
PYTORCH_RUNTIME_TEST=sync_cli::pytorchs_runtime_runs_every_exported_schedule

step "set-up (system packages, toolchain)" source .ci/setup.sh
step "cargo fmt --check" cargo fmt --all -- --check
# Everything below builds the `release` profile, the one `./pipeopt.sh` builds: HiGHS and
# polars are compiled once on a fresh machine (cargo keeps each profile's artifacts apart),
# and the slow tier runs optimised code. Clippy shares the release build scripts.
step "cargo clippy --release --all-targets -- -D warnings" cargo clippy --release --all-targets --quiet -- -D warnings
tested "cargo test --release" cargo test --release --all-targets --quiet
# The slow tier: the tests marked #[ignore = "slow tier ..."] (the general MILP at tight
# memory and on longer chains, the global bound on more chains, the allocation bound on a
# second chain), run once here.
# PyTorch's own pipeline runtime (python3 with torch) is the torch tier's, below.
tested "cargo test --release, slow tier (--ignored)" cargo test --release --tests --quiet -- --ignored \
  --skip "$PYTORCH_RUNTIME_TEST"
# The libtorch networks, profiler and executor (feature torch): built, linted and tested on
# the CPU with small inputs. Set PIPEOPT_SKIP_TORCH=1 to skip it (e.g. offline machines without the wheel).
# torch-sys's C++ wrapper (two files against libtorch's headers, about 45 s each at -O3) is
# compiled without optimisation here: these tests check results, not speed, on the CPU.
# The GPU build (`cargo build --release --features torch`) keeps -O3: the wrapper is on the
# path of every libtorch call the profiler times.
if [ "${PIPEOPT_SKIP_TORCH:-0}" != 1 ]; then
  torch=(--release --features torch --config 'profile.release.package.torch-sys.opt-level=0')
  step "feature torch: setup" source .ci/setup-torch.sh
  # The libtorch tests are the library's own (exec::): an integration test would make cargo
  # link a second, libtorch-enabled `pipeopt` binary that no test runs.
  step "feature torch: clippy" cargo clippy "${torch[@]}" --lib --bins --tests --quiet -- -D warnings
  tested "feature torch: executor, profiler and libtorch ops (CPU)" cargo test "${torch[@]}" --lib --quiet exec::
  # The wheel above is unpacked for libtorch only. PyTorch's runtime needs a python3 that
  # imports torch (pip install torch==2.11.0 with its CUDA libraries: about 4.6 GB, 2 minutes
  # here, so not installed by this script); PIPEOPT_PYTHON names one other than python3.
  export PIPEOPT_PYTHON=${PIPEOPT_PYTHON:-python3}
  if "$PIPEOPT_PYTHON" -c 'import torch' 2>/dev/null; then
    tested "feature torch: PyTorch's pipeline runtime ($PIPEOPT_PYTHON)" \
      cargo test --release --test main --quiet -- --ignored --exact "$PYTORCH_RUNTIME_TEST"
  else
    echo "== skipped: $PYTORCH_RUNTIME_TEST ($PIPEOPT_PYTHON cannot import torch)" >&2
    times+=("     0 s  skipped: PyTorch's pipeline runtime ($PIPEOPT_PYTHON cannot import torch)")
  fi
fi
