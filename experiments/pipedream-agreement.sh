#!/usr/bin/env bash
# Compare `pipeopt partition pipedream` with the original PipeDream optimizer
# (msr-fiddle/pipedream, optimizer/optimizer_graph_hierarchical.py) on the
# profiles in ../shared/pipedream-profiles, straight pipelines, 12 GB/s link.
#
# Usage: experiments/pipedream-agreement.sh <pipedream-checkout> <pipeopt-binary> [profiles-dir]
#   <pipedream-checkout>: an extracted msr-fiddle/pipedream tree (needs optimizer/ and graph/);
#   its Python needs the `graphviz` and `numpy` packages (imported, no rendering done).
# Prints two Markdown tables on stdout: (1) agreement, every profile x 2, 4, 8 machines;
# (2) speed on three configurations (straight on 8 machines, replicated on 16,
# hierarchical 4x4), side by side. Our wall time includes reading graph.txt. Downloads
# nothing. PARTS=agreement or PARTS=speed runs one of the two (default: both);
# SPEED_PROFILES names the profiles of the speed table; OURS=chain (see `ours`).
set -euo pipefail
PD=$(cd "$1" && pwd); BIN=$(realpath "$2")
PROFILES=$(realpath "${3:-$(dirname "$0")/../../shared/pipedream-profiles}")
BW=12000000000           # bytes/s, PipeDream's -b unit; ours: 12GB/s
TIMEOUT=${TIMEOUT:-600}  # seconds per PipeDream run
MEM_KB=${MEM_KB:-16777216}  # ulimit -v for PipeDream runs (16 GiB)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# theirs <profile> <args...>: sets T_OBJ (or a failure word) and T_WALL (seconds).
theirs() {
  local f=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  set +e
  T_OBJ=$(cd "$PD/optimizer" && ( ulimit -v "$MEM_KB"; timeout "$TIMEOUT" python3 optimizer_graph_hierarchical.py \
      -f "$f" "$@" 2>"$TMP/err" ) | sed -n 's/^Time per stage in pipeline: //p')
  rc=${PIPESTATUS[0]}
  set -e
  t1=$(date +%s.%N)
  T_WALL=$(echo "$t1 - $t0" | bc -l)
  if [ -z "$T_OBJ" ]; then
    if [ "$rc" = 124 ]; then T_OBJ="timeout"; elif grep -q MemoryError "$TMP/err"; then T_OBJ="out of memory"; else T_OBJ="failed (rc $rc)"; fi
  fi
}
# ours <profile> <args...>: sets O_OBJ, O_SOLVE (the program alone) and O_WALL (whole
# processes). OURS=graph (default): `partition pipedream --graph`, the program over the
# DAG's ideals (diagonal cuts included; the chain's prefixes past a few thousand ideals).
# OURS=chain: `import pipedream`, then `partition pipedream` on the chain.
ours() {
  local f=$1; shift
  local t0 t1 js
  t0=$(date +%s.%N)
  if [ "${OURS:-graph}" = chain ]; then
    "$BIN" import pipedream "$f" --out "$TMP/inst.json" >/dev/null
    js=$("$BIN" partition pipedream --instance "$TMP/inst.json" "$@" --json)
  else
    js=$("$BIN" partition pipedream --graph "$f" "$@" --json)
  fi
  t1=$(date +%s.%N)
  O_WALL=$(echo "$t1 - $t0" | bc -l)
  read -r O_OBJ O_SOLVE < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["objective"], d["solve_seconds"])' "$js")
}
row() { # name config
  read -r ratio speed < <(python3 -c '
import sys
t, o, tw, ow = sys.argv[1:]
try: r = "%.4f" % (float(o)/float(t))
except ValueError: r = "n/a"
print(r, "%.0fx" % (float(tw)/float(ow)))' "$T_OBJ" "$O_OBJ" "$T_WALL" "$O_WALL")
  local t=$T_OBJ
  case $t in [0-9]*) t=$(printf '%.6g' "$t");; esac
  printf '| %s | %s | %s | %.6g | %s | %.2f | %.2g | %.3f | %s |\n' "$1" "$2" "$t" "$O_OBJ" "$ratio" "$T_WALL" "$O_SOLVE" "$O_WALL" "$speed"
}
HEADER="| profile | machines | PipeDream (s) | pipeopt (s) | ours/theirs | PipeDream wall (s) | pipeopt DP (s) | pipeopt wall (s) | speed-up (wall) |
|---|---|---|---|---|---|---|---|---|"

PARTS=${PARTS:-agreement speed}
if [[ " $PARTS " == *" agreement "* ]]; then
echo "## Agreement: straight pipeline, 12 GB/s, activation compression 1"
echo
echo "$HEADER"
for f in "$PROFILES"/*.txt; do
  name=$(basename "$f" .txt)
  for n in 2 4 8; do
    theirs "$f" -n "$n" -b "$BW" --straight_pipeline --activation_compression_ratio 1
    ours "$f" --processors "$n" --bandwidth 12GB/s
    row "$name" "$n"
  done
done

fi

if [[ " $PARTS " == *" speed "* ]]; then
echo
echo "## Speed: straight, replicated, hierarchical 4x4"
echo
echo "$HEADER"
for name in ${SPEED_PROFILES:-resnet50 densenet121 inception_v3}; do
  f=$PROFILES/$name.txt
  theirs "$f" -n 8 -b "$BW" --straight_pipeline --activation_compression_ratio 1
  ours "$f" --processors 8 --bandwidth 12GB/s
  row "$name" "8 straight"
  theirs "$f" -n 16 -b "$BW"
  ours "$f" --processors 16 --bandwidth 12GB/s --replicate --activation-compression-ratio none
  row "$name" "16 replicated"
  theirs "$f" -n 4 4 -b 24000000000 3000000000
  ours "$f" --processors 4 4 --bandwidth 24GB/s 3GB/s --replicate --activation-compression-ratio none
  row "$name" "4x4 hierarchical (24, 3 GB/s)"
done
fi
