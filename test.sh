#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints and every test.
# Usage: ./test.sh            (what CI runs)
set -euo pipefail
cd "$(dirname "$0")"
source .ci/setup.sh
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings" >&2
cargo clippy --all-targets --quiet -- -D warnings
echo "== cargo test" >&2
cargo test --all-targets --quiet
# The libtorch networks, profiler and executor (feature torch): built, linted and tested on
# the CPU with small inputs. Set PIPEOPT_SKIP_TORCH=1 to skip it (e.g. offline machines without the wheel).
if [ "${PIPEOPT_SKIP_TORCH:-0}" != 1 ]; then
  echo "== feature torch: setup, clippy, executor tests (CPU)" >&2
  source .ci/setup-torch.sh
  cargo clippy --features torch --lib --bins --test exec --test profile --quiet -- -D warnings
  cargo test --features torch --test exec --test profile --quiet
fi
