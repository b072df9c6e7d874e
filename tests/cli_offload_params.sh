#!/usr/bin/env bash
# --offload-params on the command line: checkpoints byte for byte those of the parameters on the device (also
# across a resume), the measured peak the planned one, the plan's JSON and table, and the refusals.
# Usage: cli_offload_params.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_offload_params.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

TRAIN=(train --data synthetic --input 3x32x32 --classes 10 --batch 4 --device cpu --seed 3)

# ---- bit for bit, with poisoned memory, and the measured peak is the planned one ----
for pol in none all recompute; do
    run "train alexnet $pol" 0 -- "${TRAIN[@]}" --model alexnet --input 3x63x63 --steps 2 --policy "$pol" \
        --save "$TMP/$pol.bin" --json
    cp "$TMP/out" "$TMP/$pol.json"
    run "train alexnet $pol --offload-params" 0 -- "${TRAIN[@]}" --model alexnet --input 3x63x63 --steps 2 \
        --policy "$pol" --offload-params --poison --save "$TMP/$pol.home.bin" --json
    cp "$TMP/out" "$TMP/$pol.home.json"
    same "alexnet $pol checkpoint" "$TMP/$pol.bin" "$TMP/$pol.home.bin"
    # The evaluation after training reads the weights from their homes.
    for k in test_loss test_accuracy final_loss; do
        if [ "$(json_get "$TMP/$pol.json" $k)" != "$(json_get "$TMP/$pol.home.json" $k)" ]; then
            bad "alexnet $pol: $k $(json_get "$TMP/$pol.home.json" $k), $(json_get "$TMP/$pol.json" $k) without homes"
        else ok; fi
    done
    if [ "$(json_get "$TMP/$pol.home.json" offload_params)" != true ]; then bad "$pol: offload_params not reported"; else ok; fi
    if [ "$(json_get "$TMP/$pol.home.json" peak_device_bytes)" != "$(json_get "$TMP/$pol.home.json" planned_peak_device_bytes)" ]; then
        bad "$pol --offload-params: measured peak $(json_get "$TMP/$pol.home.json" peak_device_bytes) != planned $(json_get "$TMP/$pol.home.json" planned_peak_device_bytes)"
    else ok; fi
done
same "alexnet none vs all --offload-params" "$TMP/none.bin" "$TMP/all.home.bin"

# `vdnn plan` plans what `vdnn train` measures.
run "plan alexnet all --offload-params" 0 -- plan alexnet --input 3x63x63 --batch 4 --classes 10 --policy all \
    --offload-params --json
cp "$TMP/out" "$TMP/plan.json"
if [ "$(json_get "$TMP/plan.json" peak_device_bytes)" != "$(json_get "$TMP/all.home.json" peak_device_bytes)" ]; then
    bad "plan peak $(json_get "$TMP/plan.json" peak_device_bytes) != trained peak $(json_get "$TMP/all.home.json" peak_device_bytes)"
else ok; fi

# ---- clipped (--clip-grad-norm): the homed layers' updates wait for the norm, after backward; SGD and AdamW give the
# bytes of clipped training with the parameters on the device, and the measured peak is the planned one ----
for opt in sgd adamw; do
    run "lenet clipped $opt" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 2 --optimizer "$opt" \
        --clip-grad-norm 0.02 --save "$TMP/clip.$opt.bin"
    for pol in none all recompute; do
        run "lenet clipped $opt $pol --offload-params" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 2 \
            --optimizer "$opt" --clip-grad-norm 0.02 --policy "$pol" --offload-params --poison \
            --save "$TMP/clip.$opt.$pol.bin" --json
        same "lenet clipped $opt $pol with homes" "$TMP/clip.$opt.bin" "$TMP/clip.$opt.$pol.bin"
        if [ "$(json_get "$TMP/out" peak_device_bytes)" != "$(json_get "$TMP/out" planned_peak_device_bytes)" ]; then
            bad "clipped $opt $pol --offload-params: measured peak $(json_get "$TMP/out" peak_device_bytes) != planned $(json_get "$TMP/out" planned_peak_device_bytes)"
        else ok; fi
    done
done
run "lenet unclipped sgd" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 2 --save "$TMP/noclip.bin"
if cmp -s "$TMP/noclip.bin" "$TMP/clip.sgd.bin"; then bad "--clip-grad-norm 0.02 changed nothing"; else ok; fi
# A tied table (gpt-tiny-tied: the embedding is the output projection) stays on the device, its moments homed.
python3 -c 'import sys; sys.stdout.write("the quick brown fox jumps over the lazy dog. " * 40)' >"$TMP/text.txt"
TIED=(train --model tests/reference/gpt-tiny-tied.cfg --data "text:$TMP/text.txt" --batch 4 --steps 3 --threads 1
      --no-eval --device cpu --clip-grad-norm 0.5 --optimizer adamw --lr 0.003 --policy all --poison)
run "tied clipped" 0 -- "${TIED[@]}" --save "$TMP/tied.bin"
run "tied clipped --offload-params" 0 -- "${TIED[@]}" --offload-params --save "$TMP/tied.home.bin" --json
same "tied clipped with homes" "$TMP/tied.bin" "$TMP/tied.home.bin"
if [ "$(json_get "$TMP/out" peak_device_bytes)" != "$(json_get "$TMP/out" planned_peak_device_bytes)" ]; then
    bad "tied clipped --offload-params: measured peak != planned"
else ok; fi

# ---- resume: two steps and a resumed third, with homes and without, give the same bytes ----
run "lenet 2 steps" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 2 --policy none --save "$TMP/l2.bin"
run "lenet resumed" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 3 --policy none --resume "$TMP/l2.bin" \
    --save "$TMP/l3.bin"
run "lenet 2 steps homed" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 2 --policy all --offload-params \
    --save "$TMP/l2h.bin"
same "lenet 2 steps with homes" "$TMP/l2.bin" "$TMP/l2h.bin"
run "lenet resumed homed" 0 -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 3 --policy all --offload-params \
    --poison --resume "$TMP/l2h.bin" --save "$TMP/l3h.bin"
same "lenet resumed with homes" "$TMP/l3.bin" "$TMP/l3h.bin"
run "eval of the homed checkpoint" 0 -- eval --model lenet --data synthetic --input 1x28x28 --classes 10 --batch 4 \
    --device cpu --resume "$TMP/l3h.bin" --json
cp "$TMP/out" "$TMP/eval.h.json"
run "eval of the device checkpoint" 0 -- eval --model lenet --data synthetic --input 1x28x28 --classes 10 --batch 4 \
    --device cpu --resume "$TMP/l3.bin" --json
if [ "$(json_get "$TMP/out" test_loss)" != "$(json_get "$TMP/eval.h.json" test_loss)" ]; then bad "eval differs"; else ok; fi

# ---- the plan: parameters listed as offloaded, counted in host_bytes and bytes_moved ----
run "plan vgg16 none" 0 -- plan vgg16 --input 3x32x32 --batch 2 --classes 10 --policy none --json
cp "$TMP/out" "$TMP/dev.json"
run "plan vgg16 none --offload-params" 0 -- plan vgg16 --input 3x32x32 --batch 2 --classes 10 --policy none \
    --offload-params --json
python3 - "$TMP/dev.json" "$TMP/out" <<'EOF' || bad "plan JSON with --offload-params"
import json, sys
dev, home = (json.load(open(p)) for p in sys.argv[1:3])
assert home["offload_params"] is True and dev["offload_params"] is False
off = [t for t in home["tensors"] if t["class"] == "offloaded"]
kinds = {t["kind"] for t in off}
assert kinds == {"weight", "bias", "wmom", "bmom"}, kinds
assert home["home_bytes"] >= sum(t["bytes"] for t in off) > 0
assert home["host_bytes"] >= home["home_bytes"]
assert home["bytes_moved"] >= 2 * sum(t["bytes"] for t in off)
assert home["persistent_bytes"] < dev["persistent_bytes"] - home["home_bytes"] // 2
assert home["peak_device_bytes"] < dev["peak_device_bytes"]
assert home["min_budget_bytes"] == home["peak_device_bytes"]
EOF
[ $? = 0 ] && ok
run "plan table" 0 -- plan vgg16 --input 3x32x32 --batch 2 --classes 10 --policy all --offload-params
if grep -q "fc6.weight .*offloaded" "$TMP/out" && grep -q "parameters' homes" "$TMP/out"; then ok; else bad "table lacks offloaded rows"; fi

# ---- a too small budget is refused before training, naming one that works ----
need=$(json_get "$TMP/plan.json" peak_device_bytes)
run "plan below the need" 3 "needs at least" -- plan alexnet --input 3x63x63 --batch 4 --classes 10 --policy all \
    --offload-params --budget $((need - 1))
run "train below the need" 1 "smallest budget that works" "--offload-params" -- "${TRAIN[@]}" --model alexnet \
    --input 3x63x63 --steps 1 --policy all --offload-params --budget $((need - 1))

# ---- simulate and plot take it ----
run "simulate" 0 -- simulate alexnet --input 3x63x63 --batch 4 --classes 10 --policy all --offload-params
run "plot" 0 -- plot alexnet --input 3x63x63 --batch 4 --classes 10 --policies none,all --offload-params --out "$TMP/p.svg"

# ---- refusals ----
run "micro-batches" 1 "--offload-params" "--micro-batches" -- "${TRAIN[@]}" --model lenet --input 1x28x28 --steps 1 \
    --offload-params --micro-batches 2
run "profile" 2 "--offload-params" -- profile lenet --input 1x28x28 --batch 4 --classes 10 --out "$TMP/p.json" \
    --offload-params
run "policy um" 1 "--offload-params" -- plan lenet --input 1x28x28 --batch 4 --classes 10 --policy um --offload-params

echo "cli_offload_params: $passed passed, $failed failed"
[ "$failed" = 0 ]
