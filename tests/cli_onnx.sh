#!/usr/bin/env bash
# The vdnn command line on ONNX models: `info`, `plan` and `train` take an .onnx path as they take a .cfg, and a
# model vdnn cannot map fails with the node, its op type and the reason.
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
run "unsupported attribute" 1 "$M/bad_dilation.onnx" "node 'conv' (Conv)" "dilations [2, 2]" -- \
    info "$M/bad_dilation.onnx"
run "unsupported product" 1 "node 'product' (Mul)" "vdnn maps Mul only as" -- plan "$M/bad_mul_maps.onnx"
run "plan on an ONNX model with activations and SE" 0 -- plan "$M/tiny_se.onnx" --batch 4 --policy all
run "truncated file" 1 "$M/bad_truncated.onnx" "not a valid ONNX model" -- info "$M/bad_truncated.onnx"
run "no such ONNX file" 1 "nothere.onnx" "cannot open" -- info nothere.onnx

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
