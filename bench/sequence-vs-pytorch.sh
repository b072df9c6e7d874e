#!/usr/bin/env bash
# Trains the same sequence models (gpt-mini, lstm-lm) with vdnn and with their PyTorch twin (bench/seq_torch.py,
# built from the same model file) for the same batch, sequence length, threads and optimizer (AdamW) on the CPU,
# and prints tokens/s of both: batch x sequence length over the median step time (vdnn: its first step excluded;
# PyTorch: after 3 warm-up steps). Each side runs REPEATS times, alternating, and keeps its best run (load from
# other processes only ever slows a run down). The last line is `ratio: X`, the geometric mean of vdnn's tokens/s
# over PyTorch's. Env: VDNN (binary), THREADS (default: all cores), STEPS (default 20), REPEATS (default 3),
# CASES ("model:seq_len:batch ..."), OMP_WAIT_POLICY (default passive), PY (default: the first python3 with torch),
# DEVICE (cpu, the default, or cuda: both sides on the GPU, PyTorch's steps synchronized, TF32 on for matrix
# products on both sides as vdnn's default), PRECISION (fp32, the default; bf16: vdnn --precision bf16 against
# PyTorch's torch.autocast(bfloat16); fp16, CUDA only: against autocast(float16) with a GradScaler).
# The measuring and the summary are bench/lib/vs-pytorch.sh's, shared with cpu-vs-pytorch.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/vs-pytorch.sh
STEPS=${STEPS:-20}
DEVICE=${DEVICE:-cpu}
PRECISION=${PRECISION:-fp32}
case "$DEVICE:$PRECISION" in
  cpu:fp32 | cpu:bf16 | cuda:fp32 | cuda:bf16 | cuda:fp16) ;;
  *) echo "sequence-vs-pytorch: DEVICE=$DEVICE PRECISION=$PRECISION: expected DEVICE cpu|cuda, PRECISION fp32|bf16 (fp16 on cuda)" >&2; exit 2 ;;
esac
AUTOCAST=()
[ "$PRECISION" = fp32 ] || AUTOCAST=(--autocast "$PRECISION")
REPEATS=${REPEATS:-3}
CASES=${CASES:-"gpt-mini:64:32 lstm-lm:128:32"}
vs_setup sequence-vs-pytorch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any English text of a few hundred KB serves: only the step time is measured.
cat /usr/share/common-licenses/* > "$tmp/text.txt"

vs_header "device: $DEVICE  precision: $PRECISION  threads: $THREADS  steps: $STEPS  optimizer: adamw  (tokens/s = batch x seq_len / median step)"
printf '%-10s %7s %6s %14s %14s %8s\n' model seq_len batch vdnn_tok/s torch_tok/s ratio
run_vdnn() {
  "$VDNN" train --model "$model" --data "text:$tmp/text.txt" --seq-len "$seq" --batch "$batch" \
    --steps "$STEPS" --threads "$THREADS" --optimizer adamw --lr 0.001 --lr-schedule constant --no-eval --json \
    --device "$DEVICE" --precision "$PRECISION" 2>/dev/null | "$PY" -c "import json,sys; print($batch * $seq / json.load(sys.stdin)['step_seconds'])"
}
run_torch() {
  OMP_NUM_THREADS=$THREADS "$PY" bench/seq_torch.py "models/$model.cfg" --seq-len "$seq" --batch "$batch" \
    --steps "$STEPS" --threads "$THREADS" --optimizer adamw --device "$DEVICE" "${AUTOCAST[@]}" |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_sec"])'
}
for spec in $CASES; do
  IFS=: read -r model seq batch <<<"$spec"
  vs_case '%-10s %7s %6s %14.0f %14.0f %8s\n' '%.0f' tok/s "$model" "$seq" "$batch"
done
vs_runs
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
vs_ratio
