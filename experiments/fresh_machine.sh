#!/usr/bin/env bash
# The README's two commands as a new user runs them: a clone of this repository in an empty
# folder, an empty cargo registry (CARGO_HOME of its own; the Rust toolchain is the
# machine's), then `./pipeopt.sh sweep experiments/quick.toml` and `./test.sh`, each timed,
# with the release binary's size and target/'s after both. Run it on an otherwise idle
# machine; apt packages already installed are not removed (the set-up step then finds them).
#
#   bash experiments/fresh_machine.sh /tmp/fresh          # both commands
#   PIPEOPT_SKIP_TORCH=1 bash experiments/fresh_machine.sh /tmp/fresh
#   FRESH_ONLY=main bash experiments/fresh_machine.sh /tmp/fresh   # the main job only
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: fresh_machine.sh DIR (emptied first)}
rm -rf "$dir"
mkdir -p "$dir"
git clone -q "$repo" "$dir/main"
# ../shared beside the clone, as CI has it.
if [ -e "$repo/../shared" ]; then ln -s "$(cd "$repo/../shared" && pwd)" "$dir/shared"; fi
export CARGO_HOME="$dir/cargo-home"
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export PATH="$HOME/.cargo/bin:$PATH"
cd "$dir/main"
echo "fresh clone at $(git rev-parse --short HEAD), CARGO_HOME=$CARGO_HOME" >&2
t0=$SECONDS
./pipeopt.sh sweep experiments/quick.toml >"$dir/main-job.log" 2>&1
main=$((SECONDS - t0))
echo "main job (./pipeopt.sh sweep experiments/quick.toml): ${main} s" >&2
echo "release binary: $(du -m target/release/pipeopt | cut -f1) MB" >&2
if [ "${FRESH_ONLY:-}" != main ]; then
  t0=$SECONDS
  ./test.sh >"$dir/test.log" 2>&1
  tests=$((SECONDS - t0))
  echo "tests (./test.sh): ${tests} s" >&2
  grep -A40 '^== times' "$dir/test.log" >&2 || true
fi
echo "target/: $(du -sm target | cut -f1) MB" >&2
