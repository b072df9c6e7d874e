#!/usr/bin/env bash
# Trains the same networks (LeNet-style on Fashion-MNIST shapes, ResNet-18 at 3x64x64) for the same
# steps, batch and thread count with vdnn and with PyTorch on the CPU, and prints images/s of both.
# Each side runs REPEATS times, the two alternating so both meet the same load from other
# processes; a side's figure is its best run (other load only ever slows a run down).
# Both sides wait passively at OpenMP barriers unless OMP_WAIT_POLICY says otherwise: with
# libgomp's default spinning, load from other processes on a small shared machine slowed either
# side 5-10x at random, which drowned the difference being measured.
# The last line is `ratio: X`, the geometric mean of vdnn's images/s over PyTorch's.
# Env: VDNN (binary, default build/vdnn), THREADS (default: all cores), STEPS (default 30),
# REPEATS (default 3), OMP_WAIT_POLICY (default passive), PY (default: the first python3 with torch).
# The measuring and the summary are bench/lib/vs-pytorch.sh's, shared with sequence-vs-pytorch.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/vs-pytorch.sh
STEPS=${STEPS:-30}
REPEATS=${REPEATS:-3}
vs_setup cpu-vs-pytorch

vs_header "threads: $THREADS  steps: $STEPS (after 3 warm-up steps on the PyTorch side; vdnn counts every step)"
printf '%-10s %-10s %6s %14s %14s %8s\n' net input batch vdnn_img/s torch_img/s ratio
run_vdnn() {
  "$VDNN" train --model "$net" --data synthetic --input "$input" --classes "$classes" --batch "$batch" \
    --steps "$STEPS" --threads "$THREADS" --lr 0.01 --lr-schedule constant --json --device cpu 2>/dev/null |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])'
}
run_torch() {
  OMP_NUM_THREADS=$THREADS "$PY" bench/cfg_torch.py "models/$net.cfg" --input "$input" --classes "$classes" \
    --batch "$batch" --steps "$STEPS" --threads "$THREADS" |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])'
}
while read -r net input classes batch; do
  vs_case '%-10s %-10s %6s %14.1f %14.1f %8s\n' '%.1f' img/s "$net" "$input" "$batch"
done <<'CASES'
lenet 1x28x28 10 64
resnet18 3x64x64 10 32
CASES
vs_runs
vs_ratio
