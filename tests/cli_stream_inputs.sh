#!/usr/bin/env bash
# --stream-inputs on the command line: checkpoints byte for byte those of in-core training under several
# policies with poisoned memory, the measured peak the planned one and below in-core, the plan's table and
# JSON, the note where nothing streams, and the refusals.
# Usage: cli_stream_inputs.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_stream_inputs.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

# Lean algorithms in every run: the ones a streamed layer runs, so the bits can be the same.
TRAIN=(train --model vgg16 --data synthetic --input 3x32x32 --classes 10 --batch 4 --device cpu --seed 3 --steps 2
    --conv-algo lean --json)

run "train vgg16 none" 0 -- "${TRAIN[@]}" --policy none --save "$TMP/ref.bin"
cp "$TMP/out" "$TMP/ref.json"
for pol in none all pooch; do
    run "train vgg16 $pol --stream-inputs" 0 -- "${TRAIN[@]}" --policy "$pol" --stream-inputs --poison \
        --save "$TMP/$pol.bin"
    cp "$TMP/out" "$TMP/$pol.json"
    same "vgg16 $pol --stream-inputs checkpoint" "$TMP/ref.bin" "$TMP/$pol.bin"
    for k in final_loss test_loss test_accuracy; do
        if [ "$(json_get "$TMP/$pol.json" $k)" != "$(json_get "$TMP/ref.json" $k)" ]; then
            bad "$pol --stream-inputs: $k $(json_get "$TMP/$pol.json" $k), in-core $(json_get "$TMP/ref.json" $k)"
        else ok; fi
    done
    if [ "$(json_get "$TMP/$pol.json" peak_device_bytes)" != "$(json_get "$TMP/$pol.json" planned_peak_device_bytes)" ]; then
        bad "$pol --stream-inputs: measured peak $(json_get "$TMP/$pol.json" peak_device_bytes) != planned $(json_get "$TMP/$pol.json" planned_peak_device_bytes)"
    else ok; fi
    # VGG-16 has nine convolutions whose input has their output's shape.
    if [ "$(json_get "$TMP/$pol.json" streamed_layers)" != 9 ]; then
        bad "$pol --stream-inputs: $(json_get "$TMP/$pol.json" streamed_layers) streamed layers, want 9"
    else ok; fi
done
if [ "$(json_get "$TMP/none.json" peak_device_bytes)" -lt "$(json_get "$TMP/ref.json" peak_device_bytes)" ]; then ok
else bad "none --stream-inputs peak $(json_get "$TMP/none.json" peak_device_bytes) not below in-core $(json_get "$TMP/ref.json" peak_device_bytes)"; fi
if [ "$(json_get "$TMP/ref.json" streamed_layers)" = 0 ]; then ok; else bad "in-core run reports streamed layers"; fi

# ---- the plan: what train measures, streamed inputs in the host pool and in the bytes moved ----
PLAN=(plan vgg16 --input 3x32x32 --batch 4 --classes 10 --conv-algo lean)
run "plan none" 0 -- "${PLAN[@]}" --policy none --json
cp "$TMP/out" "$TMP/plan.ref.json"
run "plan none --stream-inputs" 0 -- "${PLAN[@]}" --policy none --stream-inputs --json
cp "$TMP/out" "$TMP/plan.json"
python3 - "$TMP/plan.ref.json" "$TMP/plan.json" "$TMP/none.json" <<'EOF' || bad "plan JSON with --stream-inputs"
import json, sys
ref, st, trained = (json.load(open(p)) for p in sys.argv[1:4])
assert st["streamed_layers"] == 9 and ref["streamed_layers"] == 0
streamed = [t for t in st["tensors"] if t["class"] == "stream"]
assert len(streamed) == 9, len(streamed)
assert all(t["name"].endswith(".input.streamed") for t in streamed)
assert st["host_bytes"] >= sum(t["bytes"] for t in streamed) > 0 and ref["host_bytes"] == 0
assert st["bytes_moved"] >= 2 * sum(t["bytes"] for t in streamed)
assert st["peak_device_bytes"] == trained["peak_device_bytes"], (st["peak_device_bytes"], trained["peak_device_bytes"])
EOF
[ $? = 0 ] && ok
run "plan table" 0 -- "${PLAN[@]}" --policy all --stream-inputs
if grep -q "conv1_2.input.streamed .* stream " "$TMP/out" && grep -q "convolution inputs streamed" "$TMP/out"; then ok
else bad "table lacks the streamed rows or the header's mention"; fi
need=$(json_get "$TMP/plan.json" peak_device_bytes)
run "plan below the need" 3 "needs at least" -- "${PLAN[@]}" --policy none --stream-inputs --budget $((need - 1))

# ---- simulate and plot take it ----
run "simulate" 0 -- simulate vgg16 --input 3x32x32 --batch 4 --classes 10 --policy all --stream-inputs
run "plot" 0 -- plot vgg16 --input 3x32x32 --batch 4 --classes 10 --policies none,all --stream-inputs --out "$TMP/p.svg"

# ---- where nothing can stream, the user is told ----
run "nothing streams" 0 "no layer streams its input" -- plan lenet --input 1x28x28 --batch 4 --classes 10 --stream-inputs

# ---- refusals ----
run "micro-batches" 1 "--stream-inputs" "micro-batches" -- train --model lenet --data synthetic --input 1x28x28 \
    --classes 10 --batch 4 --device cpu --steps 1 --stream-inputs --micro-batches 2
run "profile" 2 "--stream-inputs" -- profile lenet --input 1x28x28 --batch 4 --classes 10 --out "$TMP/p.json" \
    --stream-inputs
run "policy um" 1 "--stream-inputs" "policy um" -- plan lenet --input 1x28x28 --batch 4 --classes 10 --policy um \
    --stream-inputs
if [ -e "$TMP/p.json" ]; then bad "a refused profile left a file"; else ok; fi

echo "cli_stream_inputs: $passed passed, $failed failed"
[ "$failed" = 0 ]
