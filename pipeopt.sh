#!/usr/bin/env bash
# The main-job command: installs what is missing, builds pipeopt in release mode, and runs
# it with the arguments given, e.g.  ./pipeopt.sh plan --instance ... --json
set -euo pipefail
cd "$(dirname "$0")"
source .ci/setup.sh
cargo build --release --quiet --bin pipeopt
exec "${CARGO_TARGET_DIR:-target}/release/pipeopt" "$@"
