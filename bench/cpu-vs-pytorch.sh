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
# REPEATS (default 3), OMP_WAIT_POLICY (default passive).
set -euo pipefail
cd "$(dirname "$0")/.."
VDNN=${VDNN:-build/vdnn}
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-30}
REPEATS=${REPEATS:-3}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$VDNN" ] || { echo "cpu-vs-pytorch: $VDNN not built (run make)" >&2; exit 1; }
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import torch" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "cpu-vs-pytorch: no python3 with torch (apt-get install python3-torch)" >&2; exit 1; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "threads: $THREADS  steps: $STEPS (after 3 warm-up steps on the PyTorch side; vdnn counts every step)"
echo "runs: best of $REPEATS per side, alternating; OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-10s %6s %14s %14s %8s\n' net input batch vdnn_img/s torch_img/s ratio
logsum=0
n=0
runs=()
while read -r net input classes batch; do
  vs=() ts=()
  for ((i = 0; i < REPEATS; i++)); do
    vs+=("$("$VDNN" train --model "$net" --data synthetic --input "$input" --classes "$classes" --batch "$batch" \
          --steps "$STEPS" --threads "$THREADS" --lr 0.01 --lr-schedule constant --json --device cpu 2>/dev/null |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])')")
    ts+=("$(OMP_NUM_THREADS=$THREADS "$PY" bench/cfg_torch.py "models/$net.cfg" --input "$input" --classes "$classes" \
          --batch "$batch" --steps "$STEPS" --threads "$THREADS" |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])')")
  done
  v=$("$PY" -c "print(max([${vs[*]/%/,}]))")
  t=$("$PY" -c "print(max([${ts[*]/%/,}]))")
  r=$("$PY" -c "print(f'{$v/$t:.3f}')")
  printf '%-10s %-10s %6s %14.1f %14.1f %8s\n' "$net" "$input" "$batch" "$v" "$t" "$r"
  runs+=("$net runs (img/s): vdnn $(printf '%.1f ' "${vs[@]}")| torch $(printf '%.1f ' "${ts[@]}")")
  logsum=$("$PY" -c "import math; print($logsum + math.log($r))")
  n=$((n + 1))
done <<'CASES'
lenet 1x28x28 10 64
resnet18 3x64x64 10 32
CASES
printf '%s\n' "${runs[@]}"
"$PY" -c "import math; print(f'ratio: {math.exp($logsum / $n):.3f}')"
