#!/usr/bin/env bash
# `vdnn plan` and `vdnn train` make the same plan for the same request (both make one library call): for every
# zoo net at a small size, under every policy that trains on the CPU, the JSON `vdnn plan --json` prints is the
# JSON of the plan `vdnn train` trains with (--plan-json), byte for byte. The profile-guided policies plan under
# a budget halfway between the smallest one known and their in-core peak, where they have to choose (or, where the
# planner finds nothing there, three quarters of the way, else the peak).
# Policy um needs CUDA to train, so only its plan is made. VDNN_TEST_QUICK=1 (the sanitizer build) takes three nets.
# Usage: cli_plan_same.sh PATH/TO/vdnn   (run from the repository root; CTest does both)
set -uo pipefail

VDNN=${1:?usage: cli_plan_same.sh PATH/TO/vdnn}
# shellcheck source=lib_cli.sh
source "$(dirname "$0")/lib_cli.sh"

# model input batch
nets=("lenet 1x28x28 4" "alexnet 3x63x63 2" "overfeat 3x71x71 2" "googlenet 3x32x32 2" "vgg16 3x32x32 2"
      "vgg19 3x32x32 2" "resnet18 3x32x32 2" "resnet50 3x32x32 2" "resnet101 3x32x32 2" "resnet152 3x32x32 2")
if [ "${VDNN_TEST_QUICK:-0}" != 0 ]; then nets=("lenet 1x28x28 4" "googlenet 3x32x32 2" "resnet18 3x32x32 2"); fi
policies=(none all conv recompute dyn pooch auto)

for n in "${nets[@]}"; do
    read -r model input batch <<<"$n"
    common=(--input "$input" --classes 10 --batch "$batch" --device cpu --threads 1)
    for p in "${policies[@]}"; do
        budget=()
        case $p in
        recompute | dyn | pooch | auto)
            if ! "$VDNN" plan "$model" "${common[@]}" --policy "$p" --json >"$TMP/free.json" 2>"$TMP/err"; then
                bad "$model/$p: plan without a budget: $(head -c 300 "$TMP/err")"
                continue
            fi
            least=$(json_get "$TMP/free.json" min_budget_bytes)
            peak=$(json_get "$TMP/free.json" peak_device_bytes)
            for b in $(((least + peak) / 2)) $(((least + 3 * peak) / 4)) "$peak"; do
                budget=(--budget "$b")
                "$VDNN" plan "$model" "${common[@]}" --policy "$p" "${budget[@]}" --json >/dev/null 2>&1
                [ $? = 3 ] || break
            done
            ;;
        esac
        if ! "$VDNN" plan "$model" "${common[@]}" --policy "$p" "${budget[@]}" --json >"$TMP/plan.json" 2>"$TMP/err"; then
            bad "$model/$p: plan: $(head -c 300 "$TMP/err")"
            continue
        fi
        if ! "$VDNN" train --model "$model" --data synthetic "${common[@]}" --policy "$p" "${budget[@]}" --steps 1 \
                --no-eval --log-every 1000 --plan-json "$TMP/train.json" >/dev/null 2>"$TMP/err"; then
            bad "$model/$p: train: $(head -c 300 "$TMP/err")"
            continue
        fi
        same "$model/$p: the plan printed and the plan trained" "$TMP/plan.json" "$TMP/train.json"
    done
    # um plans anywhere; training it needs CUDA, which says so.
    if "$VDNN" plan "$model" "${common[@]}" --policy um --json >"$TMP/um.json" 2>/dev/null &&
        [ "$(json_get "$TMP/um.json" policy)" = um ]; then ok; else bad "$model/um: no plan"; fi
done

# The branchy net of issue 13 at the request that used to differ (dense concat joins, a residual block over a
# dropout branch, a grouped convolution, LRN, padded average pooling, two pooled heads concatenated).
# The budget an eighth of the way from auto's least to in-core's peak (26,000,000 bytes on an AMD EPYC; both move
# with the CPU's op info), where auto has to move maps.
branchy=(--input 3x40x36 --batch 16 --device cpu --conv-algo default)
"$VDNN" plan tests/data/branchy.cfg "${branchy[@]}" --json >"$TMP/core.json" 2>/dev/null
"$VDNN" plan tests/data/branchy.cfg "${branchy[@]}" --policy auto --json >"$TMP/free.json" 2>/dev/null
core=$(json_get "$TMP/core.json" peak_device_bytes)
least=$(json_get "$TMP/free.json" min_budget_bytes)
branchy+=(--policy auto --budget "$((least + (core - least) / 8))")
"$VDNN" plan tests/data/branchy.cfg "${branchy[@]}" --json >"$TMP/plan.json" 2>"$TMP/err" || bad "branchy: plan: $(cat "$TMP/err")"
if "$VDNN" train --model tests/data/branchy.cfg --data synthetic "${branchy[@]}" --steps 1 --no-eval --json \
        --plan-json "$TMP/train.json" >"$TMP/run.json" 2>"$TMP/err"; then
    same "branchy: the plan printed and the plan trained" "$TMP/plan.json" "$TMP/train.json"
    planned=$(json_get "$TMP/plan.json" peak_device_bytes)
    measured=$(json_get "$TMP/run.json" peak_device_bytes)
    if [ "$planned" = "$measured" ]; then ok; else bad "branchy: planned peak $planned, measured $measured"; fi
else
    bad "branchy: train: $(cat "$TMP/err")"
fi

echo "cli_plan_same: $passed passed, $failed failed"
[ "$failed" = 0 ]
