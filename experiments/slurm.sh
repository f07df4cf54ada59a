#!/usr/bin/env bash
# Spread an experiment over a Slurm job array: each task runs one shard, then one last job
# merges the shards. Usage (from the repository root, after `cargo build --release`):
#   sbatch --array=1-16 experiments/slurm.sh experiments/memory.toml
#   # when all tasks are done:
#   target/release/pipeopt merge results/memory/shard-*.parquet
#SBATCH --job-name=pipeopt-sweep
#SBATCH --cpus-per-task=4
#SBATCH --time=04:00:00
#SBATCH --output=results/slurm-%A_%a.log
set -euo pipefail
experiment="${1:?usage: sbatch --array=1-N experiments/slurm.sh EXPERIMENT.toml}"
n="${SLURM_ARRAY_TASK_COUNT:?run through sbatch --array}"
i="${SLURM_ARRAY_TASK_ID:?run through sbatch --array}"
# Array ids start at 1 in the usage above; shards are 1-based too.
exec target/release/pipeopt sweep "$experiment" --shard "$i/$n" --workers "${SLURM_CPUS_PER_TASK:-1}"
