#!/usr/bin/env bash
# `vdnn project` (tables, JSON, the winner line, bad flags), `vdnn train --micro-batches` errors and, when
# vdnn-mpi was built and mpirun is installed, the vdnn-mpi command line: layouts and micro-batches that do
# not divide, placements that cut a residual, and a hybrid run's checkpoint read back by `vdnn eval`.
# Usage: cli_dist.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_dist.sh PATH/TO/vdnn}
MPI=$(dirname "$VDNN")/vdnn-mpi
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

# expect NAME EXIT NEEDLE -- COMMAND...: the exit code, and NEEDLE in stdout or stderr.
expect() {
    local name=$1 want=$2 needle=$3
    shift 4
    timeout 120 "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        bad "$name: exit $got, want $want: $(head -c 400 "$TMP/err")"
    elif ! grep -qF -- "$needle" "$TMP/out" "$TMP/err"; then
        bad "$name: no '$needle' in: $(head -c 400 "$TMP/out") $(head -c 400 "$TMP/err")"
    else
        ok
    fi
}

printf '# global batch, epochs\n64 10\n256 10\n512 40\n' >"$TMP/steep.txt"
printf '64 10\n65536 10\n' >"$TMP/flat.txt"
EST=(--estimate-flops 1e12 --estimate-bw 1e11)

expect project-table 0 "devices: best" -- "$VDNN" project resnet18 --input 3x32x32 --classes 10 --batch 32 \
    --devices 4,16 --epochs-table "$TMP/flat.txt" "${EST[@]}"
grep -q "^16 *dp 16x1" "$TMP/out" && grep -q "^16 *hybrid 8x2" "$TMP/out" && ok || bad "project-table: rows missing"
# Epochs that jump past a global batch of 256: at 16 devices (512 in data parallelism) a hybrid wins.
expect project-steep 0 "16 devices: best hybrid" -- "$VDNN" project resnet18 --input 3x32x32 --classes 10 \
    --batch 32 --devices 16 --epochs-table "$TMP/steep.txt" "${EST[@]}" --micro-batches 8
grep -q "faster than data parallelism alone" "$TMP/out" && ok || bad "project-steep: no speed-up line"
expect project-json 0 '"speedup_over_dp"' -- "$VDNN" project resnet18 --input 3x32x32 --classes 10 --batch 32 \
    --devices 8 --stages 1,2,4 --epochs-table "$TMP/steep.txt" "${EST[@]}" --json
python3 -c "import json,sys; d=json.load(open('$TMP/out')); r=d['results'][0]; assert [l['stages'] for l in r['layouts']]==[1,2,4]; assert r['layouts'][0]['global_batch']==256" \
    && ok || bad "project-json: not the expected JSON: $(head -c 300 "$TMP/out")"
# A measured profile: taken at the per-worker batch, checked against the model.
if "$VDNN" profile lenet --batch 16 --iterations 2 --out "$TMP/lenet.json" --device cpu >/dev/null 2>&1; then
    expect project-profile 0 "profile $TMP/lenet.json" -- "$VDNN" project lenet --batch 16 --devices 2,4 \
        --epochs-table "$TMP/flat.txt" --profile "$TMP/lenet.json"
    expect project-profile-batch 1 "batch" -- "$VDNN" project lenet --batch 32 --devices 2 \
        --epochs-table "$TMP/flat.txt" --profile "$TMP/lenet.json"
else
    bad "vdnn profile lenet failed"
fi
expect project-no-devices 2 "--devices and --epochs-table are required" -- "$VDNN" project lenet \
    --epochs-table "$TMP/flat.txt"
expect project-bad-table 1 "steep.bad:2: batch 32 does not increase" -- bash -c \
    "printf '64 10\n32 5\n' >'$TMP/steep.bad' && '$VDNN' project lenet --devices 2 --epochs-table '$TMP/steep.bad'"
expect project-bad-bw 2 "--allreduce-bandwidth: invalid value 'fast'" -- "$VDNN" project lenet --devices 2 \
    --epochs-table "$TMP/flat.txt" --allreduce-bandwidth fast
expect project-stages 2 "no layout" -- "$VDNN" project lenet --devices 6 --stages 4 --epochs-table "$TMP/flat.txt"
# Micro-batches on one device: the batch must split; a trace is one whole iteration.
ONE=(--data synthetic --input 1x28x28 --classes 10 --threads 1 --device cpu --log-every 1000)
expect micro-flag 2 "--micro-batches: invalid value '0'" -- "$VDNN" train --model lenet "${ONE[@]}" --micro-batches 0
expect micro-split 2 "a batch of 8 images does not split into 3 micro-batches" -- "$VDNN" train --model lenet \
    "${ONE[@]}" --batch 8 --steps 1 --micro-batches 3
expect micro-trace 2 "does not take --micro-batches" -- "$VDNN" train --model lenet "${ONE[@]}" --batch 8 --steps 1 \
    --micro-batches 2 --trace "$TMP/t.json"
expect micro-train 0 "(4 micro-batches of 2)" -- "$VDNN" train --model lenet "${ONE[@]}" --batch 8 --steps 2 \
    --micro-batches 4 --no-eval

if [ -x "$MPI" ] && command -v mpirun >/dev/null; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    # Under ASan: Open MPI's unloaded plugins leave leaks LeakSanitizer cannot attribute.
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
    COMMON=(--data synthetic --input 3x16x16 --classes 10 --threads 1 --device cpu --log-every 1000)
    expect mpi-help 0 "--micro-batches M" -- "${MPIRUN[@]}" -np 1 "$MPI" train --help
    expect mpi-stages 2 "the 2 ranks (mpirun -np) must be a multiple of the stage count" -- \
        "${MPIRUN[@]}" -np 2 "$MPI" train --model lenet "${COMMON[@]}" --batch 8 --steps 1 --stages 3
    expect mpi-batch 2 "--batch 10 is not a multiple of the 4 data-parallel groups" -- \
        "${MPIRUN[@]}" -np 4 "$MPI" train --model lenet "${COMMON[@]}" --batch 10 --steps 1
    expect mpi-flag 2 "--stages: invalid value 'two'" -- "${MPIRUN[@]}" -np 1 "$MPI" train --stages two
    expect mpi-micro 2 "--micro-batches 3: each data-parallel group's 8 images" -- "${MPIRUN[@]}" -np 2 "$MPI" train \
        --model lenet "${COMMON[@]}" --input 1x28x28 --batch 8 --steps 1 --stages 2 --micro-batches 3
    # Parameters homed in host memory are updated in their backward step: not with gradients summed across ranks.
    expect mpi-offload 1 "--offload-params is not supported with more than one rank" -- "${MPIRUN[@]}" -np 2 "$MPI" \
        train --model lenet "${COMMON[@]}" --input 1x28x28 --batch 8 --steps 1 --offload-params
    # stage=1 inside a residual block: refused, naming the layer that reads across.
    sed 's/^\[layer1.0.conv2\]$/[layer1.0.conv2]\nstage=1/' models/resnet18.cfg >"$TMP/cut.cfg"
    expect mpi-bad-cut 2 "reads 'maxpool'" -- "${MPIRUN[@]}" -np 2 "$MPI" train --model "$TMP/cut.cfg" \
        --data synthetic --input 3x32x32 --classes 10 --threads 1 --device cpu --batch 4 --steps 1 --stages 2
    # 2 groups x 2 stages: one checkpoint of the whole model, which one device evaluates.
    expect mpi-hybrid 0 "test accuracy" -- "${MPIRUN[@]}" -np 4 "$MPI" train --model lenet "${COMMON[@]}" \
        --input 1x28x28 --batch 8 --steps 3 --stages 2 --save "$TMP/h.ckpt"
    grep -q "2 data-parallel groups x 2 stages" "$TMP/out" && ok || bad "mpi-hybrid: no layout line"
    expect eval-hybrid 0 "checkpoint $TMP/h.ckpt at step 3" -- "$VDNN" eval --model lenet --data synthetic \
        --input 1x28x28 --classes 10 --batch 8 --device cpu --resume "$TMP/h.ckpt"
    # A tied sequence model: data parallelism at the model's context (no --seq-len), clipped; a pipeline that splits
    # the tied table (test_dist_seq compares the bits) and reports the validation loss per token.
    python3 -c 'import sys; sys.stdout.write("the quick brown fox jumps over the lazy dog. " * 40)' >"$TMP/text.txt"
    TIED=tests/reference/gpt-tiny-tied.cfg
    expect mpi-tied 0 "final loss" -- "${MPIRUN[@]}" -np 2 "$MPI" train --model "$TIED" --data "text:$TMP/text.txt" \
        --batch 4 --steps 2 --threads 1 --no-eval --clip-grad-norm 1 --optimizer adamw --lr 0.001
    grep -q "1x6x1" "$TMP/out" && ok || bad "mpi-tied: not at the model's context of 6"
    expect mpi-tied-stages 0 "nats/token" -- "${MPIRUN[@]}" -np 2 "$MPI" train \
        --model "$TIED" --data "text:$TMP/text.txt" --batch 4 --steps 1 --threads 1 --stages 2
    # Clipped across 2 stages: the norm is summed over the stages (test_dist_equal compares the bits).
    expect mpi-clip-stages 0 "final loss" -- "${MPIRUN[@]}" -np 2 "$MPI" train --model lenet "${COMMON[@]}" \
        --input 1x28x28 --batch 8 --steps 2 --stages 2 --clip-grad-norm 0.05 --no-eval
else
    echo "cli_dist: vdnn-mpi or mpirun missing: skipping the MPI command-line checks"
fi

echo "cli_dist: $passed passed, $failed failed"
[ "$failed" = 0 ]
