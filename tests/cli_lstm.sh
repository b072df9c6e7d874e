#!/usr/bin/env bash
# LSTM language models on the command line (docs/sequence.md, "LSTM"): `vdnn info lstm-lm` (its chunk nodes and
# parameter count), `vdnn plan biglstm` under auto, a short lstm-lm training run on text whose measured peak is the
# planned one under none, all and auto (at 20 MiB of its 24 MiB), and with AdamW and the parameters homed (the shared
# parameters' update steps; byte for byte in-core's checkpoint), `vdnn sample` from it (the prompt, 20 more bytes and
# a newline), and --seq-len cutting the chunks for other lengths.
# Usage: cli_lstm.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_lstm.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

if "$VDNN" info lstm-lm >"$TMP/info" 2>"$TMP/err" && grep -q "^lstm2.t3 .* lstm " "$TMP/info" &&
    grep -q "^lstm1.t0 .* lstm .* 395264 " "$TMP/info" && grep -q "^lstm1.t1 .* lstm .* 0 " "$TMP/info" &&
    ! grep -q "^lstm1.params" "$TMP/info" && grep -q "parameters            1020160" "$TMP/info"; then ok
else bad "info lstm-lm: $(head -c 300 "$TMP/err")"; fi

if "$VDNN" plan biglstm --batch 4 --device cpu --policy auto --budget 1600MiB --json >"$TMP/big.json" 2>"$TMP/err" &&
    [ "$(json_get "$TMP/big.json" feasible)" = true ]; then ok; else bad "plan biglstm: $(head -c 300 "$TMP/err")"; fi

python3 -c 'import sys; sys.stdout.write("the cell state of a chunk is swapped or recomputed. " * 120)' >"$TMP/text.txt"
common=(--model lstm-lm --batch 4 --device cpu --threads 1 --log-every 1000)
for p in none all auto; do
    budget=()
    [ "$p" = auto ] && budget=(--budget 20MiB)
    "$VDNN" plan lstm-lm --batch 4 --device cpu --policy "$p" "${budget[@]}" --json >"$TMP/plan.json" 2>"$TMP/err" ||
        bad "plan lstm-lm/$p: $(cat "$TMP/err")"
    if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --steps 2 --no-eval --policy "$p" "${budget[@]}" \
            --poison --json >"$TMP/run.json" 2>"$TMP/err"; then
        planned=$(json_get "$TMP/plan.json" peak_device_bytes)
        measured=$(json_get "$TMP/run.json" peak_device_bytes)
        if [ "$planned" = "$measured" ]; then ok; else bad "lstm-lm/$p: planned peak $planned, measured $measured"; fi
    else
        bad "train lstm-lm/$p: $(head -c 300 "$TMP/err")"
    fi
done

# AdamW with the parameters homed: each layer's shared parameters updated in a step of its own after backward (`update
# lstmN.t0` in the plan), the measured peak the planned one, the checkpoint byte for byte the in-core run's.
adam=(--data "text:$TMP/text.txt" --steps 2 --no-eval --optimizer adamw --lr 0.003)
homed=(lstm-lm --batch 4 --device cpu --optimizer adamw --offload-params)
if "$VDNN" plan "${homed[@]}" >"$TMP/plan.txt" 2>"$TMP/err" && grep -q "update lstm1.t0" "$TMP/plan.txt" &&
    grep -q "update lstm2.t0" "$TMP/plan.txt" && "$VDNN" plan "${homed[@]}" --json >"$TMP/plan.json" 2>"$TMP/err" &&
    "$VDNN" train "${common[@]}" "${adam[@]}" --save "$TMP/core.ckpt" >/dev/null 2>"$TMP/err" &&
    "$VDNN" train "${common[@]}" "${adam[@]}" --offload-params --poison --save "$TMP/home.ckpt" --json \
        >"$TMP/run.json" 2>"$TMP/err" &&
    [ "$(json_get "$TMP/plan.json" peak_device_bytes)" = "$(json_get "$TMP/run.json" peak_device_bytes)" ] &&
    cmp -s "$TMP/core.ckpt" "$TMP/home.ckpt"; then ok
else bad "lstm-lm AdamW --offload-params: $(head -c 300 "$TMP/err")"; fi

if "$VDNN" train "${common[@]}" --data "text:$TMP/text.txt" --steps 3 --optimizer adamw --lr 0.003 \
        --save "$TMP/lstm.ckpt" >"$TMP/out" 2>"$TMP/err" &&
    grep -q "validation loss: [0-9.]* nats/token, [0-9.]* bits/token" "$TMP/out"; then ok
else bad "train lstm-lm on text: $(head -c 400 "$TMP/err") $(tail -2 "$TMP/out")"; fi
smp=(sample --resume "$TMP/lstm.ckpt" --model lstm-lm --device cpu --threads 1)
if "$VDNN" "${smp[@]}" --prompt "the cell" --tokens 20 >"$TMP/s" 2>"$TMP/err" &&
    [ "$(head -c 8 "$TMP/s")" = "the cell" ] && [ "$(wc -c <"$TMP/s")" = 29 ]; then ok
else bad "sample lstm-lm: $(head -c 300 "$TMP/err") [$(cat "$TMP/s")]"; fi

# --seq-len cuts the chunks again for that length (chunk=32 steps each): 64 steps in 2 chunks, the same parameters;
# 200 steps in 7 (the last 8 steps), where auto at 16 MiB (in-core 25.9 MiB) plans the peak it measures and trains
# like in-core bit for bit, under --poison.
if "$VDNN" info lstm-lm --seq-len 64 >"$TMP/info" 2>"$TMP/err" && grep -q "^lstm2.t1 .* lstm " "$TMP/info" &&
    ! grep -q "^lstm2.t2 " "$TMP/info" && grep -q "parameters            1020160" "$TMP/info"; then ok
else bad "info lstm-lm --seq-len 64: $(head -c 300 "$TMP/err")"; fi
long=(--data "text:$TMP/text.txt" --seq-len 200 --steps 2 --no-eval)
if "$VDNN" plan lstm-lm --batch 4 --device cpu --seq-len 200 --policy auto --budget 16MiB --json >"$TMP/plan.json" 2>"$TMP/err" &&
    "$VDNN" train "${common[@]}" "${long[@]}" --save "$TMP/l200.ckpt" >/dev/null 2>>"$TMP/err" &&
    "$VDNN" train "${common[@]}" "${long[@]}" --policy auto --budget 16MiB --poison --save "$TMP/l200a.ckpt" --json \
        >"$TMP/run.json" 2>>"$TMP/err" &&
    [ "$(json_get "$TMP/plan.json" peak_device_bytes)" = "$(json_get "$TMP/run.json" peak_device_bytes)" ] &&
    cmp -s "$TMP/l200.ckpt" "$TMP/l200a.ckpt"; then ok
else bad "lstm-lm --seq-len 200 under auto at 16 MiB: $(head -c 300 "$TMP/err")"; fi
run "a checkpoint at another length" 1 "does not match model 'lstm-lm' at this input size" -- \
    eval --resume "$TMP/l200.ckpt" --model lstm-lm --data "text:$TMP/text.txt" --seq-len 64 --device cpu

echo "cli_lstm: $passed passed, $failed failed"
[ "$failed" = 0 ]
