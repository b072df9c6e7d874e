#!/usr/bin/env bash
# The vdnn command line on ONNX models: `info`, `plan`, `simulate`, `profile`, `plot`, `train` and `eval` take an
# .onnx path as they take a .cfg, with the ONNX node names as layer names; `export` writes a checkpoint back into
# the ONNX file, and refuses a .cfg model, another model's checkpoint and an unwritable output, leaving no file;
# a model vdnn cannot map fails with the node, its op type and the reason.
# Usage: cli_onnx.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_onnx.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"
M=tests/data/onnx

# out_has NAME FILE TEXT...: passes if FILE holds every TEXT.
out_has() {
    local name=$1 file=$2
    shift 2
    for t in "$@"; do
        if ! grep -qF -- "$t" "$file"; then
            bad "$name: output lacks '$t': $(head -c 400 "$file")"
            return
        fi
    done
    ok
}

run "info on an ONNX model" 0 -- info "$M/tiny_cnn.onnx" --batch 4
out_has "info layers" "$TMP/out" "tiny_cnn at batch 4, input 3x16x16, 10 classes" "conv1_Conv" "block_Add" \
    "branch_b_AveragePool" "fc_Gemm" "loss"
run "info --json on an ONNX model" 0 -- info "$M/tiny_cnn.onnx" --json
out_has "info json" "$TMP/out" '"model": "tiny_cnn"' '"name": "bn1_BatchNormalization"'
run "plan on an ONNX model" 0 -- plan "$M/tiny_cnn.onnx" --batch 8 --policy all
run "train on an ONNX model" 0 -- train --model "$M/tiny_cnn.onnx" --data synthetic --steps 2 --batch 4 \
    --device cpu --no-eval
run "plan on an ONNX model, its layers" 0 -- plan "$M/tiny_cnn.onnx" --batch 8 --policy all
out_has "plan layer names" "$TMP/out" "block_conv1_Conv" "block_bn1_BatchNormalization+block_relu_Relu" \
    "branch_b_AveragePool"
run "simulate on an ONNX model" 0 -- simulate "$M/tiny_cnn.onnx" --batch 8 --policy all
out_has "simulate" "$TMP/out" "peak live memory"
run "profile on an ONNX model" 0 -- profile "$M/tiny_cnn.onnx" --batch 4 --iterations 1 --device cpu \
    --out "$TMP/prof.json"
out_has "profile layer names" "$TMP/prof.json" '"block_conv1_Conv"' '"fc_Gemm"'
run "simulate from its profile" 0 -- simulate "$M/tiny_cnn.onnx" --batch 4 --policy auto --budget 4MiB \
    --profile "$TMP/prof.json"
run "plot on an ONNX model" 0 -- plot "$M/tiny_cnn.onnx" --batch 4 --policies none,all,auto --out "$TMP/mem.svg" \
    --gantt "$TMP/gantt.svg" --trace "$TMP/trace.json"
out_has "plot" "$TMP/gantt.svg" "block_conv1_Conv"
out_has "trace" "$TMP/trace.json" "block_conv1_Conv"

# Train, evaluate and export: the exported file holds the checkpoint's parameters, imports again, and a
# checkpoint of the exported model is the same model (training on from it works).
run "train and save" 0 -- train --model "$M/tiny_cnn.onnx" --data synthetic --steps 2 --batch 4 --device cpu \
    --no-eval --save "$TMP/tiny.ckpt"
run "eval its checkpoint" 0 -- eval --model "$M/tiny_cnn.onnx" --data synthetic --resume "$TMP/tiny.ckpt" \
    --batch 4 --device cpu
out_has "eval" "$TMP/out" "test accuracy" "at step 2"
run "export" 0 -- export --resume "$TMP/tiny.ckpt" --model "$M/tiny_cnn.onnx" --out "$TMP/trained.onnx"
run "info on the exported model" 0 -- info "$TMP/trained.onnx" --batch 4
out_has "exported layers" "$TMP/out" "block_Add" "fc_Gemm"
run "eval the checkpoint on the exported model" 0 -- eval --model "$TMP/trained.onnx" --data synthetic \
    --resume "$TMP/tiny.ckpt" --batch 4 --device cpu
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
    if /usr/bin/python3 -c 'import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)' \
        "$TMP/trained.onnx" 2>"$TMP/err"; then ok; else bad "onnx.checker on the export: $(head -c 400 "$TMP/err")"; fi
fi
run "export of a .cfg model" 1 "not an ONNX model" -- export --resume "$TMP/tiny.ckpt" --model lenet \
    --out "$TMP/lenet.onnx"
run "another model's checkpoint" 1 "checkpoint has no 'stem_stem.0_Conv.weight'" -- export \
    --resume "$TMP/tiny.ckpt" --model "$M/tiny_se.onnx" --out "$TMP/se.onnx"
run "unwritable output" 1 "cannot write the exported model" -- export --resume "$TMP/tiny.ckpt" \
    --model "$M/tiny_cnn.onnx" --out "$TMP/trained.onnx/sub.onnx"
run "export without --out" 2 "--out" -- export --resume "$TMP/tiny.ckpt" --model "$M/tiny_cnn.onnx"
if ls "$TMP" | grep -q -e 'lenet.onnx' -e 'se.onnx' -e '\.tmp\.'; then bad "a failed export left $(ls "$TMP")"; else ok; fi

run "unsupported attribute" 1 "$M/bad_dilation.onnx" "node 'conv' (Conv)" "dilations [2, 2]" -- \
    info "$M/bad_dilation.onnx"
run "unsupported product" 1 "node 'product' (Mul)" "vdnn maps Mul only as" -- plan "$M/bad_mul_maps.onnx"
run "plan on an ONNX model with activations and SE" 0 -- plan "$M/tiny_se.onnx" --batch 4 --policy all
run "truncated file" 1 "$M/bad_truncated.onnx" "not a valid ONNX model" -- info "$M/bad_truncated.onnx"
run "no such ONNX file" 1 "nothere.onnx" "cannot open" -- info nothere.onnx

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
