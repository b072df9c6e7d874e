#!/usr/bin/env bash
# bf16 against fp32 on the CPU. First the dry-run plans (no compute, seconds): `vdnn plan` peaks in fp32 and bf16
# for VGG-16 at batch 256, 224x224 (in-core, and auto at a 12 GiB budget) and ResNet-50 at batch 128, and the
# largest VGG-16 batch auto fits in 12 GiB in each precision. Then training speed: ResNet-18 and VGG-16 at 3x64x64,
# the same steps, batch and threads for every side: vdnn fp32, vdnn bf16 (--precision bf16) and PyTorch's CPU
# autocast bf16 (torch.autocast("cpu", dtype=torch.bfloat16), bench/cfg_torch.py on the same model files). The
# sides alternate, REPEATS rounds, so all meet the same load from other processes; a side's figure is its best
# run (other load only ever slows a run down). Both libraries wait passively at OpenMP barriers (see
# cpu-vs-pytorch.sh for why). The last lines are `bf16_vs_pytorch_bf16: X` and `bf16_vs_fp32: X`: geometric means
# over the nets of vdnn bf16's images/s over PyTorch autocast's and over vdnn fp32's. Before them, the same for
# gpt-mini (plans too: gpt-mini and gpt2-small), whose bf16 ops run on any CPU (docs/precision.md): a line
# `gpt_mini_bf16_vs_fp32: X`; its PyTorch twin is bench/seq_torch.py.
# Env: VDNN (binary, default build/vdnn), THREADS (default: all cores), STEPS (default 10), BATCH (default 32),
# REPEATS (default 2), PY (default /usr/bin/python3: Debian's python3-torch), SKIP_PLANS=1, SKIP_SPEED=1,
# SKIP_SEQ=1 (no gpt-mini run), SKIP_CNN=1 (no CNN run: on a CPU without AVX-512 BF16 they are refused).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/vs-pytorch.sh
STEPS=${STEPS:-10}
BATCH=${BATCH:-32}
REPEATS=${REPEATS:-2}
PY=${PY:-/usr/bin/python3}
vs_setup precision

vs_host
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# The plan's peak device bytes for these flags, or "-" if it does not fit.
peak() {
  local out
  out=$("$VDNN" plan "$@" --json --device cpu 2>/dev/null) || true
  "$PY" -c 'import json,sys
try:
    d = json.loads(sys.argv[1])
    print(d["peak_device_bytes"] if d["feasible"] else "-")
except Exception:
    print("-")' "$out"
}

# The largest batch whose auto plan fits 12 GiB: doubling from 64, then bisecting to a multiple of 8.
largest() {
  local prec=$1 good=0 bad="" b=64 mid
  while [ "$b" -le 8192 ]; do
    if [ "$(peak vgg16 --input 3x224x224 --batch "$b" --policy auto --budget 12GiB --precision "$prec")" != "-" ]; then
      good=$b; b=$((b * 2))
    else
      bad=$b; break
    fi
  done
  while [ -n "$bad" ] && [ $((bad - good)) -gt 8 ]; do
    mid=$(((good + bad) / 2 / 8 * 8))
    [ "$mid" -le "$good" ] && mid=$((good + 8))
    [ "$mid" -ge "$bad" ] && break
    if [ "$(peak vgg16 --input 3x224x224 --batch "$mid" --policy auto --budget 12GiB --precision "$prec")" != "-" ]
    then
      good=$mid
    else
      bad=$mid
    fi
  done
  echo "$good"
}

# auto's smallest budget for these flags (at a budget below it the plan reports what it needs), or "-".
least() {
  local out
  out=$("$VDNN" plan "$@" --policy auto --budget 1 --json --device cpu 2>/dev/null) || true
  "$PY" -c 'import json,sys
try:
    print(json.loads(sys.argv[1])["min_budget_bytes"])
except Exception:
    print("-")' "$out"
}

# Each line of stdin, "LABEL FLAGS...", measured by the function $1 in fp32 and bf16, and their ratio.
compare() {
  local label args f h r
  while read -r label args; do
    # shellcheck disable=SC2086
    f=$("$1" $args --precision fp32)
    # shellcheck disable=SC2086
    h=$("$1" $args --precision bf16)
    r=$("$PY" -c "import sys; f, h = sys.argv[1:]; print('-' if '-' in (f, h) else f'{int(h)/int(f):.3f}')" "$f" "$h")
    printf '%-34s %16s %16s %8s\n' "$label" "$f" "$h" "$r"
  done
}

if [ "${SKIP_PLANS:-0}" != 1 ]; then
  echo "plans (vdnn plan, dry run; peak device bytes; generic cost estimate):"
  printf '%-34s %16s %16s %8s\n' case fp32 bf16 bf16/fp32
  compare peak <<'CASES'
vgg16-b256-224-none vgg16 --input 3x224x224 --batch 256
vgg16-b256-224-auto@12GiB vgg16 --input 3x224x224 --batch 256 --policy auto --budget 12GiB
resnet50-b128-224-none resnet50 --input 3x224x224 --batch 128
gpt-mini-b64-t64-none gpt-mini --batch 64
gpt2-small-b8-t1024-adamw-none gpt2-small --seq-len 1024 --batch 8 --optimizer adamw
CASES
  compare least <<'CASES'
gpt-mini-b64-t64-auto-least gpt-mini --batch 64
gpt2-small-b8-t1024-adamw-auto-least gpt2-small --seq-len 1024 --batch 8 --optimizer adamw
CASES
  [ "${SKIP_CNN:-0}" = 1 ] || echo "largest VGG-16 224x224 batch auto fits in 12 GiB: fp32 $(largest fp32), bf16 $(largest bf16)"
fi

[ "${SKIP_SPEED:-0}" = 1 ] && exit 0
if [ "${SKIP_SEQ:-0}" != 1 ]; then
  # gpt-mini on the default text (the fortunes), the whole context of 64 tokens, AdamW; tokens/s over the median
  # step (vdnn: its first step excluded; PyTorch: after 3 warm-up steps).
  echo "gpt-mini speed: threads $THREADS, batch $BATCH x 64 tokens, $STEPS steps, AdamW; best of $REPEATS, alternating"
  seq_vdnn() {
    "$VDNN" train --model gpt-mini --batch "$BATCH" --steps "$STEPS" --threads "$THREADS" --optimizer adamw \
      --lr 0.001 --lr-schedule constant --json --device cpu --no-eval --precision "$1" 2>/dev/null |
      "$PY" -c "import json,sys; print($BATCH * 64 / json.load(sys.stdin)['step_seconds'])"
  }
  seq_torch() {
    OMP_NUM_THREADS=$THREADS "$PY" bench/seq_torch.py models/gpt-mini.cfg --seq-len 64 --batch "$BATCH" \
      --steps "$STEPS" --threads "$THREADS" --optimizer adamw "$@" |
      "$PY" -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_sec"])'
  }
  fs=() hs=() ts=() t32=()
  for ((i = 0; i < REPEATS; i++)); do
    fs+=("$(seq_vdnn fp32)")
    hs+=("$(seq_vdnn bf16)")
    ts+=("$(seq_torch --autocast bf16)")
    t32+=("$(seq_torch)")
  done
  printf '%-10s %12s %12s %16s %16s\n' net fp32_tok/s bf16_tok/s torch_bf16_tok/s torch_fp32_tok/s
  printf '%-10s %12.0f %12.0f %16.0f %16.0f\n' gpt-mini "$(vs_best "${fs[@]}")" "$(vs_best "${hs[@]}")" \
    "$(vs_best "${ts[@]}")" "$(vs_best "${t32[@]}")"
  echo "gpt-mini runs (tok/s): vdnn fp32 $(printf '%.0f ' "${fs[@]}")| vdnn bf16 $(printf '%.0f ' "${hs[@]}")|\
 torch bf16 $(printf '%.0f ' "${ts[@]}")| torch fp32 $(printf '%.0f ' "${t32[@]}")"
  "$PY" -c "print(f'gpt_mini_bf16_vs_fp32: {$(vs_best "${hs[@]}") / $(vs_best "${fs[@]}"):.3f}')"
  "$PY" -c "print(f'gpt_mini_bf16_vs_pytorch_bf16: {$(vs_best "${hs[@]}") / $(vs_best "${ts[@]}"):.3f}')"
fi
[ "${SKIP_CNN:-0}" = 1 ] && exit 0
echo "speed: threads $THREADS, batch $BATCH, $STEPS steps (PyTorch after 3 warm-up steps; vdnn counts every step)"
echo "runs: best of $REPEATS per side, alternating; OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
printf '%-10s %-9s %12s %12s %14s %10s %10s\n' net input fp32_img/s bf16_img/s torch_bf16_img/s vs_fp32 vs_torch
sum_fp32=0 sum_torch=0 n=0
runs=()
vdnn_run() {
  "$VDNN" train --model "$1" --data synthetic --input 3x64x64 --classes 10 --batch "$BATCH" --steps "$STEPS" \
    --threads "$THREADS" --lr 0.01 --lr-schedule constant --json --device cpu --no-eval --precision "$2" 2>/dev/null |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])'
}
for net in resnet18 vgg16; do
  fs=() hs=() ts=()
  for ((i = 0; i < REPEATS; i++)); do
    fs+=("$(vdnn_run "$net" fp32)")
    hs+=("$(vdnn_run "$net" bf16)")
    ts+=("$(OMP_NUM_THREADS=$THREADS "$PY" bench/cfg_torch.py "models/$net.cfg" --input 3x64x64 --classes 10 \
          --batch "$BATCH" --steps "$STEPS" --threads "$THREADS" --autocast bf16 |
        "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_sec"])')")
  done
  f=$(vs_best "${fs[@]}")
  h=$(vs_best "${hs[@]}")
  t=$(vs_best "${ts[@]}")
  rf=$("$PY" -c "print(f'{$h/$f:.3f}')")
  rt=$("$PY" -c "print(f'{$h/$t:.3f}')")
  printf '%-10s %-9s %12.1f %12.1f %14.1f %10s %10s\n' "$net" 3x64x64 "$f" "$h" "$t" "$rf" "$rt"
  runs+=("$net runs (img/s): vdnn fp32 $(printf '%.1f ' "${fs[@]}")| vdnn bf16 $(printf '%.1f ' "${hs[@]}")|\
 torch bf16 $(printf '%.1f ' "${ts[@]}")")
  sum_fp32=$("$PY" -c "import math; print($sum_fp32 + math.log($rf))")
  sum_torch=$("$PY" -c "import math; print($sum_torch + math.log($rt))")
  n=$((n + 1))
done
printf '%s\n' "${runs[@]}"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" -c "import math; print(f'bf16_vs_pytorch_bf16: {math.exp($sum_torch / $n):.3f}')"
"$PY" -c "import math; print(f'bf16_vs_fp32: {math.exp($sum_fp32 / $n):.3f}')"
