#!/usr/bin/env bash
# Trains the same sequence models (gpt-mini, lstm-lm) with vdnn and with their PyTorch twin (bench/seq_torch.py,
# built from the same model file) for the same batch, sequence length, threads and optimizer (AdamW) on the CPU,
# and prints tokens/s of both: batch x sequence length over the median step time (vdnn: its first step excluded;
# PyTorch: after 3 warm-up steps). Each side runs REPEATS times, alternating, and keeps its best run (load from
# other processes only ever slows a run down). The last line is `ratio: X`, the geometric mean of vdnn's tokens/s
# over PyTorch's. Env: VDNN (binary), THREADS (default: all cores), STEPS (default 20), REPEATS (default 3),
# CASES ("model:seq_len:batch ..."), OMP_WAIT_POLICY (default passive).
set -euo pipefail
cd "$(dirname "$0")/.."
VDNN=${VDNN:-build/vdnn}
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-20}
REPEATS=${REPEATS:-3}
CASES=${CASES:-"gpt-mini:64:32 lstm-lm:128:32"}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$VDNN" ] || { echo "sequence-vs-pytorch: $VDNN not built (run make)" >&2; exit 1; }
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import torch" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "sequence-vs-pytorch: no python3 with torch (apt-get install python3-torch)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any English text of a few hundred KB serves: only the step time is measured.
cat /usr/share/common-licenses/* > "$tmp/text.txt"

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "threads: $THREADS  steps: $STEPS  optimizer: adamw  (tokens/s = batch x seq_len / median step)"
echo "runs: best of $REPEATS per side, alternating; OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %7s %6s %14s %14s %8s\n' model seq_len batch vdnn_tok/s torch_tok/s ratio
logsum=0
n=0
runs=()
for spec in $CASES; do
  IFS=: read -r model seq batch <<<"$spec"
  vs=() ts=()
  for ((i = 0; i < REPEATS; i++)); do
    vs+=("$("$VDNN" train --model "$model" --data "text:$tmp/text.txt" --seq-len "$seq" --batch "$batch" \
          --steps "$STEPS" --threads "$THREADS" --optimizer adamw --lr 0.001 --lr-schedule constant --no-eval --json \
          --device cpu 2>/dev/null | "$PY" -c "import json,sys; print($batch * $seq / json.load(sys.stdin)['step_seconds'])")")
    ts+=("$(OMP_NUM_THREADS=$THREADS "$PY" bench/seq_torch.py "models/$model.cfg" --seq-len "$seq" --batch "$batch" \
          --steps "$STEPS" --threads "$THREADS" --optimizer adamw |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_sec"])')")
  done
  v=$("$PY" -c "print(max([${vs[*]/%/,}]))")
  t=$("$PY" -c "print(max([${ts[*]/%/,}]))")
  r=$("$PY" -c "print(f'{$v/$t:.3f}')")
  printf '%-10s %7s %6s %14.0f %14.0f %8s\n' "$model" "$seq" "$batch" "$v" "$t" "$r"
  runs+=("$model runs (tok/s): vdnn $(printf '%.0f ' "${vs[@]}")| torch $(printf '%.0f ' "${ts[@]}")")
  logsum=$("$PY" -c "import math; print($logsum + math.log($r))")
  n=$((n + 1))
done
printf '%s\n' "${runs[@]}"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" -c "import math; print(f'ratio: {math.exp($logsum / $n):.3f}')"
