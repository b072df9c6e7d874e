#!/usr/bin/env bash
# Images/s of ResNet-18 at a small input (3x32x32, synthetic data) trained on the CPU by 1, 2 and 4 MPI
# ranks with data parallelism, by 2 groups x 2 stages (hybrid), and by a pipeline of 2 stages without and
# with 4 GPipe micro-batches (plus one rank summing 4 micro-batches, what micro-batching alone costs), all at
# the same global batch on the same cores: ranks x threads = cores (4 ranks run one thread each,
# oversubscribed when cores < 4). The pipelines run twice: split by vdnn-mpi's FLOP estimate, and
# (`-bal`) balanced by a per-layer profile this script takes first (`vdnn profile`, one thread per rank).
# A run's figure is global batch / median step time (the first step excluded); each layout runs
# REPEATS times, the layouts alternating so they meet the same load from other processes, and keeps
# its best run (other load only ever slows a run down).
# The last lines are `efficiency_2: X`: images/s of 2 data-parallel ranks x cores/2 threads over 1 rank x
# cores threads, i.e. the share of one process's throughput on these cores that data parallelism keeps,
# and `pipeline_m4_over_m1: X`: the 2-stage pipeline with 4 micro-batches over the same without.
# OpenMP threads wait passively (OMP_WAIT_POLICY=passive unless set): when other processes share the
# cores, spinning threads of the multi-threaded 1-rank run wait on descheduled ones and its throughput
# collapses (10x measured here), which would flatter the ranks.
# Env: BUILD (default build), BATCH (global, default 128), STEPS (default 12), REPEATS (default 3),
# CORES (default nproc), OMP_WAIT_POLICY, ONLY (layout names to run, e.g. "pipe-2 pipe-2-m4"; default all).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BATCH=${BATCH:-128}
STEPS=${STEPS:-12}
REPEATS=${REPEATS:-3}
CORES=${CORES:-$(nproc)}
MPI=$BUILD/vdnn-mpi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$MPI" ] || { echo "scaling: $MPI not built (needs MPI: apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "scaling: mpirun not found" >&2; exit 1; }
MPIRUN=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

HALF=$(( CORES / 2 > 0 ? CORES / 2 : 1 ))
QUARTER=$(( CORES / 4 > 0 ? CORES / 4 : 1 ))
# name ranks stages threads micro-batches balance-by-profile
ALL_LAYOUTS=(
  "1-rank 1 1 $CORES 1 0"
  "1-rank-m4 1 1 $CORES 4 0"
  "dp-2 2 1 $HALF 1 0"
  "dp-4 4 1 $QUARTER 1 0"
  "hybrid-2x2 4 2 $QUARTER 1 0"
  "pipe-2 2 2 $HALF 1 0"
  "pipe-2-m4 2 2 $HALF 4 0"
  "pipe-2-bal 2 2 $HALF 1 1"
  "pipe-2-bal-m4 2 2 $HALF 4 1"
)
LAYOUTS=()
for l in "${ALL_LAYOUTS[@]}"; do
  read -r name _ <<<"$l"
  if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]]; then LAYOUTS+=("$l"); fi
done

ERR=$(mktemp)
PROFILE=$(mktemp --suffix=.json)
trap 'rm -f "$ERR" "$PROFILE"' EXIT
for l in "${LAYOUTS[@]}"; do
  read -r _ _ _ _ _ bal <<<"$l"
  if [ "$bal" = 1 ] && [ ! -s "$PROFILE" ]; then
    # The whole model at one group's batch, as vdnn-mpi --profile takes it.
    "$BUILD/vdnn" profile resnet18 --input 3x32x32 --classes 10 --batch "$BATCH" --threads "$HALF" --device cpu \
      --out "$PROFILE" >/dev/null 2>"$ERR" || { echo "scaling: vdnn profile failed:" >&2; cat "$ERR" >&2; exit 1; }
  fi
done
run() { # ranks stages threads micro-batches balance -> images/s
  local out bal=()
  if [ "$5" = 1 ]; then bal=(--balance --profile "$PROFILE"); fi
  if ! out=$("${MPIRUN[@]}" -np "$1" "$MPI" train --model resnet18 --data synthetic --input 3x32x32 --classes 10 \
    --batch "$BATCH" --steps "$STEPS" --threads "$3" --stages "$2" --micro-batches "$4" "${bal[@]}" --device cpu \
    --lr 0.01 --lr-schedule constant --no-eval --log-every 100000 --json 2>"$ERR"); then
    echo "scaling: mpirun -np $1 (stages $2, threads $3, micro-batches $4, balance $5) failed:" >&2
    cat "$ERR" >&2
    exit 1
  fi
  # images/s, then the step and the time the gradient sums took from it (ms): hooks during backward, wait before
  # the update; then the stage split
  python3 -c "import json,sys; d=json.load(sys.stdin); print(f'{d[\"batch\"] / d[\"step_seconds\"]:.2f} {d[\"step_seconds\"]*1e3:.0f} {d[\"gradient_hook_seconds\"]*1e3:.0f} {d[\"gradient_wait_seconds\"]*1e3:.0f} {d[\"split\"] or \"-\"}')" <<<"$out"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "resnet18 3x32x32, 10 classes, global batch $BATCH, $STEPS steps; best of $REPEATS, layouts alternating"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)  OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
declare -A best runs detail
for ((i = 0; i < REPEATS; i++)); do
  for l in "${LAYOUTS[@]}"; do
    read -r name ranks stages threads micro bal <<<"$l"
    read -r v step hook wait split <<<"$(run "$ranks" "$stages" "$threads" "$micro" "$bal")"
    runs[$name]="${runs[$name]:-}$v "
    if [ -z "${best[$name]:-}" ] || python3 -c "import sys; sys.exit(0 if $v > ${best[$name]} else 1)"; then
      best[$name]=$v
      detail[$name]="step ${step} ms, gradient sums ${hook} ms in backward's hooks + ${wait} ms before the update"
      if [ "$stages" -gt 1 ]; then detail[$name]="step ${step} ms, stages $split"; fi
    fi
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
ratio() { # a b -> a / b, or - when either layout did not run
  if [ -n "${best[$1]:-}" ] && [ -n "${best[$2]:-}" ]; then python3 -c "print(f'{${best[$1]} / ${best[$2]}:.3f}')"; else echo -; fi
}
printf '%-14s %6s %7s %8s %6s %12s %10s   %s\n' layout ranks stages threads micro images/s vs_1-rank "runs (images/s)"
for l in "${LAYOUTS[@]}"; do
  read -r name ranks stages threads micro _ <<<"$l"
  printf '%-14s %6s %7s %8s %6s %12s %10s   %s\n' "$name" "$ranks" "$stages" "$threads" "$micro" "${best[$name]}" \
    "$(ratio "$name" 1-rank)" "${runs[$name]}"
done
for l in "${LAYOUTS[@]}"; do
  read -r name ranks _ <<<"$l"
  if [ "$ranks" -gt 1 ]; then echo "$name best run: ${detail[$name]}"; fi
done
echo "efficiency_2: $(ratio dp-2 1-rank)"
echo "pipeline_m4_over_m1: $(ratio pipe-2-m4 pipe-2)  balanced by profile: $(ratio pipe-2-bal-m4 pipe-2-bal)"
